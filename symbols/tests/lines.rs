//! DWARF source lines (`jtrace_symbols::lines`) on real binaries compiled
//! here from tests/data/napper.c with `cc -g -O2`: the line and inline
//! chain of a return address, the same from a separate debug file found by
//! `.gnu_debuglink` or by build id, from compressed sections; and no line
//! from a binary without DWARF, from a debug file that does not match, or
//! from a binary whose build id is not the recorded one. Expected lines
//! come from the source's marker comments.

use jtrace_symbols::elf::{build_id, lookup_functions, Sym};
use jtrace_symbols::lines::{build_id_path, Binary, DebugLines, LineFrame};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = include_str!("data/napper.c");

/// The line of `marker` in the source (1-based).
fn line_of(marker: &str) -> u32 {
    let tag = format!("/* @{marker} */");
    SRC.lines()
        .position(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no marker {marker}")) as u32
        + 1
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-lines-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) {
    let st = cmd.status().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(st.success(), "{cmd:?} failed");
}

/// Compiles the program with `flags` into `dir/name`.
fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("napper.c");
    std::fs::write(&src, SRC).unwrap();
    let bin = dir.join(name);
    run(Command::new("cc")
        .args(flags)
        .args(["-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src));
    bin
}

fn load(bin: &Path, roots: &[PathBuf]) -> anyhow::Result<Option<DebugLines>> {
    let file = File::open(bin).unwrap();
    let id = build_id(bin).ok().flatten().unwrap_or_default();
    DebugLines::load(
        &Binary {
            file: &file,
            path: bin,
            recorded: bin,
            build_id: &id,
        },
        roots,
        &|p| File::open(p),
        &Default::default(),
    )
}

/// The file offset of the return address of `nap_outer`'s call (the first
/// call in it): the frame a stack walk gives for it.
fn return_address_in_nap_outer(bin: &Path) -> u64 {
    let [Sym::Function(start)] = lookup_functions(bin, &["nap_outer"]).unwrap()[..] else {
        panic!("no nap_outer in {}", bin.display());
    };
    let code = std::fs::read(bin).unwrap();
    // x86-64 `call rel32` (e8) is 5 bytes: the return address follows it.
    let at = code[start as usize..start as usize + 64]
        .iter()
        .position(|&b| b == 0xe8)
        .expect("a call in nap_outer");
    start + at as u64 + 5
}

/// (function, base name:line) of each frame.
fn chain(frames: &[LineFrame]) -> Vec<(String, String)> {
    frames
        .iter()
        .map(|f| {
            (
                f.function.clone().unwrap_or_default(),
                f.line.as_ref().map(|l| l.short()).unwrap_or_default(),
            )
        })
        .collect()
}

fn expected() -> Vec<(String, String)> {
    vec![
        ("nap_inlined".into(), format!("napper.c:{}", line_of("inlined-call"))),
        ("nap_outer".into(), format!("napper.c:{}", line_of("inline-site"))),
    ]
}

#[test]
fn a_return_address_has_its_line_and_inlined_function() {
    let dir = tempdir("own");
    let bin = compile(&dir, "napper", &["-g", "-O2"]);
    let lines = load(&bin, &[]).unwrap().expect("DWARF in the binary");
    assert_eq!(lines.source, bin);
    let ra = return_address_in_nap_outer(&bin);
    assert_eq!(chain(&lines.frames_at_offset(ra, true)), expected());
    // The full path is the one compiled.
    let f = lines.frames_at_offset(ra, true);
    assert_eq!(f[0].line.as_ref().unwrap().file, dir.join("napper.c").to_str().unwrap());
    // An offset outside every loadable segment has none.
    assert!(lines.frames_at_offset(u64::MAX / 2, true).is_empty());
}

#[test]
fn compressed_sections_give_the_same_lines() {
    let dir = tempdir("gz");
    let bin = compile(&dir, "napper", &["-g", "-O2", "-gz"]);
    let out = Command::new("readelf").arg("-S").arg("-W").arg(&bin).output().unwrap();
    let sections = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        sections.lines().any(|l| l.contains(".debug_info") && l.contains(" C ")),
        "-gz gave no compressed .debug_info:\n{sections}"
    );
    let lines = load(&bin, &[]).unwrap().expect("DWARF in the binary");
    assert_eq!(
        chain(&lines.frames_at_offset(return_address_in_nap_outer(&bin), true)),
        expected()
    );
}

#[test]
fn a_debug_file_is_found_by_debuglink_and_by_build_id() {
    let dir = tempdir("split");
    let full = compile(&dir, "napper.full", &["-g", "-O2"]);
    let debug = dir.join("napper.debug");
    run(Command::new("objcopy").arg("--only-keep-debug").arg(&full).arg(&debug));
    // Stripped of DWARF, linked to its debug file next to it.
    let linked = dir.join("napper");
    run(Command::new("objcopy")
        .arg("--strip-debug")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&full)
        .arg(&linked));
    let ra = return_address_in_nap_outer(&linked);
    let lines = load(&linked, &[]).unwrap().expect("the linked debug file");
    assert_eq!(lines.source, debug);
    assert_eq!(chain(&lines.frames_at_offset(ra, true)), expected());

    // A debug file changed after linking (its CRC differs): not used.
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.push(0);
    std::fs::write(&debug, &bytes).unwrap();
    assert!(load(&linked, &[]).unwrap().is_none());

    // Without a link: found by build id under a debug root.
    let bare = dir.join("napper.bare");
    run(Command::new("objcopy").arg("--strip-debug").arg(&full).arg(&bare));
    let root = dir.join("debugroot");
    let id = build_id(&bare).unwrap().expect("cc writes a build id");
    let by_id = build_id_path(&root, &id).unwrap();
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    run(Command::new("objcopy").arg("--only-keep-debug").arg(&full).arg(&by_id));
    assert!(load(&bare, &[]).unwrap().is_none(), "no root given: no lines");
    let lines = load(&bare, std::slice::from_ref(&root)).unwrap().expect("by build id");
    assert_eq!(lines.source, by_id);
    assert_eq!(chain(&lines.frames_at_offset(ra, true)), expected());
}

#[test]
fn no_dwarf_or_another_build_id_gives_no_lines() {
    let dir = tempdir("none");
    let plain = compile(&dir, "napper", &["-O2"]);
    assert!(load(&plain, &[]).unwrap().is_none(), "no -g: no lines");
    let full = compile(&dir, "napper.g", &["-g", "-O2"]);
    let stripped = dir.join("napper.stripped");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&full));
    assert!(load(&stripped, &[]).unwrap().is_none(), "stripped: no lines");

    // The trace recorded another build id (the binary was rebuilt since).
    let file = File::open(&full).unwrap();
    let err = DebugLines::load(
        &Binary {
            file: &file,
            path: &full,
            recorded: &full,
            build_id: &[1, 2, 3, 4],
        },
        &[],
        &|p| File::open(p),
        &Default::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("build id"), "{err}");

    // Not an ELF file: an error, not a panic.
    let junk = dir.join("junk");
    std::fs::write(&junk, b"not an elf").unwrap();
    assert!(load(&junk, &[]).is_err());
}

/// A binary another user owns is read into memory, not mapped: its owner
/// shortening it while root reads its lines changes nothing (a mapping of
/// it would kill the reader with SIGBUS at the next lookup).
#[test]
fn a_users_binary_shortened_while_read_does_not_kill_the_reader() {
    let dir = tempdir("shortened");
    let bin = compile(&dir, "napper", &["-g", "-O2"]);
    let ra = return_address_in_nap_outer(&bin);
    std::os::unix::fs::chown(&bin, Some(65534), Some(65534)).unwrap();
    let lines = load(&bin, &[]).unwrap().expect("DWARF in the binary");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&bin)
        .unwrap()
        .set_len(0)
        .unwrap();
    assert_eq!(chain(&lines.frames_at_offset(ra, true)), expected());
}

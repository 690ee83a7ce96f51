//! Source lines of native frames, end to end: a C
//! program (symbols/tests/data/napper.c) compiled `-g -O2` runs under
//! `jtrace run` and blocks in nanosleep below a function inlined into
//! another. Read after it exited, `--lines` gives its own frames their
//! file:line (from the source's marker comments) and the inlined function
//! a frame of its own, in the collapsed export, `jtrace text`, the report
//! (`frame_lines`), the pprof export and the timeline's tooltips; the
//! default outputs do not change. A binary without DWARF, or another
//! binary at the recorded path (another build id), gives no line, and
//! `jtrace info --lines` says which.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = include_str!("../symbols/tests/data/napper.c");

/// `napper.c:N` of the line holding `marker`.
fn at(marker: &str) -> String {
    let tag = format!("/* @{marker} */");
    let n = SRC
        .lines()
        .position(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no marker {marker}"))
        + 1;
    format!("napper.c:{n}")
}

fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("napper.c");
    std::fs::write(&src, SRC).unwrap();
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args(flags)
        .args(["-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    bin
}

/// `jtrace <args>`'s standard output.
fn jtrace_out(args: &[&str], trace: &Path) -> String {
    String::from_utf8(jtrace_stdout(args, trace)).unwrap()
}

/// The (function, base name:line) pairs of a pprof export's lines whose
/// line is known (timeline/tests/python/pprof_check.py decodes it).
fn pprof_lines(trace: &Path, args: &[&str]) -> Vec<(String, String)> {
    let file = trace.with_extension(format!("{}.pb.gz", args.len()));
    let mut all = vec!["export", "--format", "pprof", "-o", file.to_str().unwrap()];
    all.extend_from_slice(args);
    jtrace_out(&all, trace);
    let out = python_script("timeline/tests/python/pprof_check.py", &[file.as_os_str()]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v["source_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let file = l[1].as_str().unwrap();
            let base = file.rsplit('/').next().unwrap();
            (l[0].as_str().unwrap().to_string(), format!("{base}:{}", l[2]))
        })
        .collect()
}

/// Nanoseconds of the collapsed lines whose stack contains `part`.
fn ns_under(collapsed: &str, part: &str) -> u64 {
    collapsed
        .lines()
        .filter(|l| l.contains(part))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

#[test]
fn blocked_stacks_show_the_programs_source_lines() {
    let dir = tempdir("lines");
    let bin = compile(&dir, "napper", &["-g", "-O2"]);
    let trace = dir.join("t");
    let o = jtrace_run(&trace, &[], &[bin.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Root to leaf, each native frame of the program with its line, the
    // inlined function a frame of its own between its caller and libc.
    let chain = format!(
        "main ({});nap_caller ({});nap_outer ({});nap_inlined ({});",
        at("caller-call"),
        at("outer-call"),
        at("inline-site"),
        at("inlined-call")
    );
    let collapsed = jtrace_out(&["export", "--format", "collapsed", "--lines"], &trace);
    let ns = ns_under(&collapsed, &chain);
    // Ten naps of 20 ms.
    assert!(ns >= 150_000_000, "{ns} ns under {chain}:\n{collapsed}");
    assert!(
        collapsed.lines().any(|l| l.starts_with("sleep;") && l.contains(&chain)),
        "{collapsed}"
    );

    // By default: frame names only, no inlined frames (names are identities).
    let plain = jtrace_out(&["export", "--format", "collapsed"], &trace);
    assert!(ns_under(&plain, "main;nap_caller;nap_outer;") >= 150_000_000, "{plain}");
    assert!(!plain.contains("napper.c") && !plain.contains("nap_inlined"), "{plain}");

    // pprof: a native frame's function has its source file, its line the
    // line; the inlined function a location of its own. None by default.
    let lines = pprof_lines(&trace, &["--lines"]);
    for (function, marker) in [
        ("main", "caller-call"),
        ("nap_caller", "outer-call"),
        ("nap_outer", "inline-site"),
        ("nap_inlined", "inlined-call"),
    ] {
        let want = (function.to_string(), at(marker));
        assert!(lines.contains(&want), "no {want:?} in the profile: {lines:?}");
    }
    assert_eq!(pprof_lines(&trace, &[]), vec![]);

    // The text trace: the block's innermost frames.
    let text = jtrace_out(&["text", "--lines", "--stack-depth", "8"], &trace);
    let frames = format!(
        "nap_inlined ({}) < nap_outer ({}) < nap_caller ({})",
        at("inlined-call"),
        at("inline-site"),
        at("outer-call")
    );
    assert!(text.contains(&frames), "no `{frames}` in:\n{text}");
    let text = jtrace_out(&["text", "--stack-depth", "8"], &trace);
    assert!(
        text.contains("nap_outer < nap_caller < main") && !text.contains("napper.c"),
        "{text}"
    );

    // The timeline's stack tooltips (one frame a line, in the page's JSON).
    let page = dir.join("t.html");
    jtrace_out(&["timeline", "--lines", "-o", page.to_str().unwrap()], &trace);
    let html = std::fs::read_to_string(&page).unwrap();
    let tip = format!(
        "nap_inlined ({})\\nnap_outer ({})",
        at("inlined-call"),
        at("inline-site")
    );
    assert!(html.contains(&tip), "no {tip} in the timeline page");

    // report --json --lines: the top stacks' frames with their lines
    // (`frame_lines`, one per frame); without it, no such field.
    let report: serde_json::Value =
        serde_json::from_str(&jtrace_out(&["report", "--json", "--lines"], &trace)).unwrap();
    let stacks = report["stacks"]["by_cause"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["stacks"].as_array().unwrap().iter());
    let lines_of = |st: &serde_json::Value| -> Vec<(String, String)> {
        let frames = st["frames"].as_array().unwrap();
        let lines = st["frame_lines"].as_array().expect("frame_lines with --lines");
        assert_eq!(frames.len(), lines.len());
        frames
            .iter()
            .zip(lines)
            .filter(|(_, l)| !l.is_null())
            .map(|(f, l)| {
                let file = l["file"].as_str().unwrap();
                let base = file.rsplit('/').next().unwrap();
                (f.as_str().unwrap().to_string(), format!("{base}:{}", l["line"]))
            })
            .collect()
    };
    let want = vec![
        ("nap_inlined".to_string(), at("inlined-call")),
        ("nap_outer".to_string(), at("inline-site")),
        ("nap_caller".to_string(), at("outer-call")),
        ("main".to_string(), at("caller-call")),
    ];
    assert!(
        stacks
            .clone()
            .any(|st| lines_of(st).windows(4).any(|w| w == want.as_slice())),
        "no stack with {want:?} in {}",
        report["stacks"]
    );
    let plain = jtrace_out(&["report", "--json"], &trace);
    assert!(!plain.contains("frame_lines") && !plain.contains("nap_inlined"));

    // info --lines: the program's binary has lines.
    let info = jtrace_out(&["info", "--lines"], &trace);
    assert!(info.contains("native frames without a line"), "{info}");
    assert!(!info.contains(&format!("{}: no source lines", bin.display())), "{info}");

    // Symbols but no DWARF (strip --strip-debug keeps the build id and
    // .symtab): frames named, no line, counted.
    let full = dir.join("napper.full");
    std::fs::rename(&bin, &full).unwrap();
    let st = Command::new("strip")
        .args(["--strip-debug", "-o"])
        .arg(&bin)
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success());
    let collapsed = jtrace_out(&["export", "--format", "collapsed", "--lines"], &trace);
    assert!(
        ns_under(&collapsed, "main;nap_caller;nap_outer;") >= 150_000_000,
        "{collapsed}"
    );
    assert!(
        !collapsed.contains("napper.c") && !collapsed.contains("nap_inlined"),
        "{collapsed}"
    );
    let info = jtrace_out(&["info", "--lines"], &trace);
    assert!(
        info.contains(&format!("{}: no source lines: no DWARF", bin.display())),
        "{info}"
    );
    let count = info
        .lines()
        .find(|l| l.contains("binaries without source lines"))
        .unwrap_or_else(|| panic!("no line counts in info:\n{info}"));
    assert!(!count.contains(" 0 binaries without"), "{count}");

    // Another build of the program at its path (another build id): no
    // symbol and no line from it.
    std::fs::remove_file(&bin).unwrap();
    compile(&dir, "napper", &["-g", "-O1", "-DREBUILT"]);
    let collapsed = jtrace_out(&["export", "--format", "collapsed", "--lines"], &trace);
    assert!(
        !collapsed.contains("napper.c") && !collapsed.contains("nap_outer"),
        "{collapsed}"
    );
    assert!(collapsed.contains("[napper+0x"), "{collapsed}");
    let info = jtrace_out(&["info", "--lines"], &trace);
    assert!(
        info.contains(&format!("{}: not found with the recorded build id", bin.display())),
        "{info}"
    );
}

/// Root reading a user's trace with `--lines` (docs/ARCHITECTURE.md
/// invariant 6; the other attacks are in tests/security.rs): the user's
/// binary names its debug file by `.gnu_debuglink`, and the user plants a
/// link there to a root-only debug file (the real one: its CRC matches).
/// Debug files are opened with the user's rights, so no line comes from
/// it; the same file readable by the user gives lines. When root owns the
/// trace, root reads with its own rights, but does not follow the user's
/// link: a root-only debug file gives lines only where root put it.
#[test]
fn debug_files_a_users_trace_names_are_read_with_that_users_rights() {
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = test_user_ids();
    let base = tempdir("lines-sec");
    let dir_of = |p: PathBuf, uid: u32, gid: u32| {
        std::fs::create_dir_all(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        p
    };
    let home = dir_of(base.join("home"), uid, gid);
    let rootdir = dir_of(base.join("rootdir"), 0, 0);
    let full = compile(&base, "napper.full", &["-g", "-O2"]);
    let secret = rootdir.join("napper.debug");
    let run = |cmd: &mut Command| assert!(cmd.status().unwrap().success(), "{cmd:?}");
    run(Command::new("objcopy").arg("--only-keep-debug").arg(&full).arg(&secret));
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let bin = home.join("napper");
    run(Command::new("objcopy")
        .arg("--strip-debug")
        .arg(format!("--add-gnu-debuglink={}", secret.display()))
        .arg(&full)
        .arg(&bin));
    std::os::unix::fs::chown(&bin, Some(uid), Some(gid)).unwrap();
    let trace = home.join("t");
    let o = Command::new(jtrace())
        .args(["run", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()])
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let collapsed = || jtrace_out(&["export", "--format", "collapsed", "--lines"], &trace);
    let site = format!("nap_outer ({})", at("inline-site"));

    // The attack: the debug link leads to the root-only debug file.
    let planted = home.join("napper.debug");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let c = collapsed();
    assert!(
        c.contains("nap_outer") && !c.contains("napper.c"),
        "root read a root-only debug file:\n{c}"
    );
    let info = jtrace_out(&["info", "--lines"], &trace);
    assert!(info.contains(&format!("{}: no source lines", bin.display())), "{info}");

    // Control: the same debug file, the user's to read.
    std::fs::remove_file(&planted).unwrap();
    std::fs::copy(&secret, &planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(uid), Some(gid)).unwrap();
    assert!(collapsed().contains(&site), "{}", collapsed());

    // A trace root owns is read with root's rights, but a link the user
    // put is not followed: the root-only debug file is read only when
    // root put it there.
    std::fs::remove_file(&planted).unwrap();
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    std::os::unix::fs::chown(&trace, Some(0), Some(0)).unwrap();
    let c = collapsed();
    assert!(
        c.contains("nap_outer") && !c.contains("napper.c"),
        "root followed the user's link:\n{c}"
    );
    std::fs::remove_file(&planted).unwrap();
    std::fs::copy(&secret, &planted).unwrap();
    assert!(collapsed().contains(&site), "{}", collapsed());
    let _ = std::fs::remove_dir_all(&base);
}

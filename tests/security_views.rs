//! The binaries a trace names, which root reads for the views that name
//! stack frames (docs/SECURITY.md, "Binaries a trace names"). A trace
//! belongs to the traced user, who can write any path into its MAPPING
//! records; each attack here is such a forged trace (written with the
//! real encoder, as the user would), read by the real jtrace as root
//! invoked through sudo by the unprivileged account `jtrace-test`
//! (scripts/test-user.sh), and by root itself: nothing of a file the user
//! may not read reaches the output, which reads as for a missing file,
//! and no file is read whole, waited on, or read past its bounds.
//! `JTRACE_BIN=/path/to/jtrace` plays them against another build (one
//! without these defences fails them).

mod common;

use common::hostile::*;
use common::*;
use jtrace_format::{self as fmt, Payload};
use jtrace_symbols::elf::{lookup_functions, Sym};
use jtrace_testkit::TraceBuilder;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The secret program: its function and source file names are what must
/// not reach a user who may not read its binary.
const SECRET_C: &str = "__attribute__((noinline)) int jtrace_secret_spin(int n)\n{\n\tvolatile int x = 0;\n\n\tfor (int i = 0; i < n; i++)\n\t\tx += i;\n\treturn x;\n}\n\nint main(void)\n{\n\treturn jtrace_secret_spin(10) & 1;\n}\n";

/// What would give the secret away: its function's and its source's names.
const SECRET: &str = "jtrace_secret";

/// The forged process and thread.
const TID: u32 = 4242;

/// Where the forged mapping starts.
const BASE: u64 = 0x40_0000;

/// The views that name frames, with source lines.
const VIEWS: [&[&str]; 4] = [
    &["report", "--lines"],
    &["text", "--lines", "--all"],
    &["export", "--format", "collapsed", "--lines"],
    &["info", "--lines"],
];

/// The peak resident memory jtrace may reach on these traces (its own is
/// ≈ 30 MiB here): far below a whole read of the gigabytes named.
const RSS_LIMIT_KIB: u64 = 200 << 10;

/// The secret program compiled with DWARF into `dir/app`, and the file
/// offset of its function.
fn secret_binary(dir: &Path) -> (PathBuf, u64) {
    let src = dir.join("jtrace_secret_source.c");
    std::fs::write(&src, SECRET_C).unwrap();
    let bin = dir.join("app");
    let st = Command::new("cc")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed");
    std::fs::remove_file(&src).unwrap();
    let [Sym::Function(off)] = lookup_functions(&bin, &["jtrace_secret_spin"]).unwrap()[..] else {
        panic!("no jtrace_secret_spin in {}", bin.display());
    };
    (bin, off)
}

/// A trace in `dir` of one thread of a process that maps `binary` (no
/// build id recorded: any file there is taken), sampled and blocked in
/// the function at file offset `off` of it; `owner` gets it as jtrace
/// hands a trace over (0700, 0600).
fn forged_trace(dir: &Path, binary: &Path, off: u64, owner: (u32, u32)) {
    let mut b = TraceBuilder::default();
    b.cpu_sample_hz = 99;
    b.native_thread(jtrace_testkit::PID, TID, 1_000, "app");
    let mapping = fmt::Mapping {
        tgid: jtrace_testkit::PID,
        start: BASE,
        end: BASE + (1 << 20),
        offset: 0,
        build_id: Vec::new(),
        path: s(binary).into(),
    };
    b.k(0, 1_000, Payload::Mapping(mapping));
    let stack = fmt::Stack {
        id: 1,
        tgid: jtrace_testkit::PID,
        flags: fmt::STACK_USER,
        frames: vec![fmt::StackFrame {
            pc: BASE + off + 4,
            method: 0,
        }],
    };
    b.k(0, 1_000, Payload::Stack(stack));
    let sample = fmt::CpuSample {
        tgid: jtrace_testkit::PID,
        cpu: 0,
        kstack: 0,
        ustack: 1,
    };
    for i in 0..10 {
        b.k(TID, 2_000 + i * 1_000_000, Payload::CpuSample(sample));
    }
    let out = fmt::SwitchOut {
        tgid: jtrace_testkit::PID,
        prev_state: 1,
        cpu: 0,
        next_tid: 0,
    };
    let stacks = fmt::SwitchStacks { kstack: 0, ustack: 1 };
    b.k(TID, 20_000_000, Payload::SwitchOutStacks(out, stacks));
    b.switch_in(TID, 40_000_000, 0);
    b.write(dir, 0, 50_000_000);
    hand_over(dir, owner);
}

/// Gives the trace `dir` to `owner`, as jtrace does at its end.
fn hand_over(dir: &Path, (uid, gid): (u32, u32)) {
    for p in std::iter::once(dir.to_path_buf()).chain(std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path())) {
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        let mode = if p == dir { 0o700 } else { 0o600 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// The jtrace under test: this build's, or `JTRACE_BIN`'s.
fn jtrace_bin() -> PathBuf {
    std::env::var_os("JTRACE_BIN").map_or_else(jtrace, PathBuf::from)
}

/// `jtrace <args> TRACE`, as root invoked through sudo by `u` (None: by
/// root itself).
fn view_by(u: Option<&TestUser>, args: &[&str], trace: &Path) -> Output {
    let mut cmd = Command::new(jtrace_bin());
    cmd.args(args).arg(trace).env_remove("SUDO_UID").env_remove("SUDO_GID");
    if let Some(u) = u {
        cmd.env("SUDO_UID", u.uid.to_string())
            .env("SUDO_GID", u.gid.to_string());
    }
    let o = cmd.output().expect("run jtrace");
    eprintln!(
        "--- jtrace {args:?} {}\n{}",
        trace.display(),
        String::from_utf8_lossy(&o.stdout)
    );
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Each view of `trace` as `u` reads it: its standard output and error,
/// the trace's and the binary's paths written as TRACE and BINARY.
fn views(u: Option<&TestUser>, trace: &Path, binary: &Path) -> Vec<String> {
    VIEWS
        .iter()
        .map(|args| {
            let o = view_by(u, args, trace);
            assert!(o.status.success(), "jtrace {args:?} failed");
            let text = format!(
                "{}\n--- stderr\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.replace(s(trace), "TRACE").replace(s(binary), "BINARY")
        })
        .collect()
}

/// A trace naming a root-only (0600) ELF file, a link the user put to it,
/// and a missing file: the views `jtrace-test` gets through sudo, and
/// those root reads directly, say nothing of the secret binary, and read
/// the same for all three to the byte. A copy the user may read is named
/// (so the views would show a leak). In a trace of root's own, a link at
/// a binary's path is not followed (root used to follow it, and name the
/// frames from the secret binary's symbols and DWARF), and the user
/// reading it through sudo gets nothing of the secret binary either
/// (root used to read it with its own rights).
#[test]
fn a_trace_naming_a_file_the_user_may_not_read_reads_as_one_naming_no_file() {
    let u = test_user();
    let base = tempdir("sec-views-secret");
    let build = dir_of(base.join("build"), 0, 0, 0o700);
    let (bin, off) = secret_binary(&build);
    // Paths of one length: each trace differs only in its path's name.
    let sealed = dir_of(base.join("sealed"), 0, 0, 0o755).join("app");
    std::fs::copy(&bin, &sealed).unwrap();
    std::fs::set_permissions(&sealed, std::fs::Permissions::from_mode(0o600)).unwrap();
    let opened = dir_of(base.join("opened"), 0, 0, 0o755).join("app");
    std::fs::copy(&bin, &opened).unwrap();
    std::fs::set_permissions(&opened, std::fs::Permissions::from_mode(0o644)).unwrap();
    let absent = dir_of(base.join("absent"), 0, 0, 0o755).join("app");
    let linked = dir_of(base.join("linked"), u.uid, u.gid, 0o755).join("app");
    std::os::unix::fs::symlink(&sealed, &linked).unwrap();
    std::os::unix::fs::lchown(&linked, Some(u.uid), Some(u.gid)).unwrap();
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let user = (u.uid, u.gid);
    let trace = |name: &str, binary: &Path, owner| {
        let t = home.join(format!("t-{name}"));
        forged_trace(&t, binary, off, owner);
        t
    };

    // The control: a binary the user may read is named, lines and all.
    let named = views(Some(u), &trace("opened", &opened, user), &opened);
    // `info` names no frame, only what could not be named.
    for out in &named[..VIEWS.len() - 1] {
        assert!(out.contains(SECRET), "a readable binary was not named:\n{out}");
    }
    let named = named.join("\n");
    assert!(named.contains("jtrace_secret_spin") && named.contains("jtrace_secret_source.c:"));

    for (by, who) in [(Some(u), "sudo"), (None, "root")] {
        let missing = views(by, &trace("absent", &absent, user), &absent);
        for (name, binary) in [("sealed", &sealed), ("linked", &linked)] {
            let got = views(by, &trace(name, binary, user), binary);
            for out in &got {
                assert!(
                    !out.contains(SECRET),
                    "{name}, by {who}: the secret binary was read:\n{out}"
                );
            }
            assert_eq!(got, missing, "{name}, by {who}: reads differently from a missing file");
        }
    }
    // Root's own trace (root recorded a user's process): root reads with
    // its own rights, but does not follow a link the user put at a path;
    // the user, through sudo, reads with theirs.
    let root = (0, 0);
    let missing = views(None, &trace("absent", &absent, root), &absent);
    let got = views(None, &trace("linked", &linked, root), &linked);
    assert!(got.iter().all(|o| !o.contains(SECRET)), "{got:?}");
    assert_eq!(got, missing, "root followed a link");
    let missing = views(Some(u), &trace("absent", &absent, root), &absent);
    let got = views(Some(u), &trace("sealed", &sealed, root), &sealed);
    assert!(got.iter().all(|o| !o.contains(SECRET)), "{got:?}");
    assert_eq!(got, missing, "root's trace read through sudo");
    let _ = std::fs::remove_dir_all(&base);
}

/// `jtrace <args> TRACE` as root invoked through sudo by `u`, under GNU
/// time, killed past `limit`: its output, peak resident set in KiB and
/// time taken; None if it was killed.
fn measured_view(u: &TestUser, args: &[&str], trace: &Path, limit: Duration) -> Option<(Output, u64, Duration)> {
    let report = tempdir("sec-views-rss").join("time");
    let start = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(jtrace_bin())
        .args(args)
        .arg(trace)
        .env("SUDO_UID", u.uid.to_string())
        .env("SUDO_GID", u.gid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("run /usr/bin/time (Debian package `time`)");
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            // jtrace too, which holds the pipes.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait_with_output();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = start.elapsed();
    let o = child.wait_with_output().unwrap();
    eprintln!(
        "--- jtrace {args:?} ({took:?}) stdout\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&o.stderr));
    let kib = std::fs::read_to_string(&report)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .expect("GNU time's report");
    Some((o, kib, took))
}

/// Sets the size its section headers give the section `name` of the ELF64
/// file at `path`.
fn set_section_size(path: &Path, name: &str, size: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut h = [0u8; 64];
    f.read_exact_at(&mut h, 0).unwrap();
    let shoff = u64::from_le_bytes(h[0x28..0x30].try_into().unwrap());
    let shentsize = u64::from(u16::from_le_bytes([h[0x3a], h[0x3b]]));
    let shnum = u64::from(u16::from_le_bytes([h[0x3c], h[0x3d]]));
    let shstrndx = u64::from(u16::from_le_bytes([h[0x3e], h[0x3f]]));
    let header = |i: u64| {
        let mut sh = [0u8; 64];
        f.read_exact_at(&mut sh, shoff + i * shentsize).unwrap();
        sh
    };
    let strtab = header(shstrndx);
    let names_at = u64::from_le_bytes(strtab[0x18..0x20].try_into().unwrap());
    for i in 0..shnum {
        let sh = header(i);
        let mut n = vec![0u8; name.len() + 1];
        let at = names_at + u64::from(u32::from_le_bytes(sh[0..4].try_into().unwrap()));
        f.read_exact_at(&mut n, at).unwrap();
        if n[..name.len()] == *name.as_bytes() && n[name.len()] == 0 {
            f.write_all_at(&size.to_le_bytes(), shoff + i * shentsize + 0x20)
                .unwrap();
            return;
        }
    }
    panic!("{}: no {name}", path.display());
}

/// The user's own binary named by the trace, made what jtrace must not
/// read whole, nor wait on: a sparse file of 1 TB (root used to allocate
/// a terabyte for it, and abort), a FIFO (root used to wait for a writer
/// forever), the real binary grown to 3 GiB (root used to read the 3 GiB
/// into memory), and that binary with a `.debug_info` that claims 2 GiB.
/// Each view ends within seconds in bounded memory; the first two are
/// refused with a message that says why, the third is named, lines and
/// all, from bounded reads, and the fourth has its symbols but no lines,
/// past the DWARF jtrace reads for a view.
#[test]
fn a_huge_or_special_binary_is_refused_in_bounded_memory_and_time() {
    let u = test_user();
    let base = tempdir("sec-views-huge");
    let build = dir_of(base.join("build"), 0, 0, 0o700);
    let (bin, off) = secret_binary(&build);
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    type Make<'a> = Box<dyn Fn(&Path) + 'a>;
    let grow = |p: &Path| {
        std::fs::copy(&bin, p).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
    };
    let cases: [(&str, Make, &str); 4] = [
        (
            "sparse",
            Box::new(|p: &Path| std::fs::File::create(p).unwrap().set_len(1 << 40).unwrap()),
            "BINARY: not read: BINARY: 1099511627776 bytes, more than the 4 GiB jtrace reads an ELF file of",
        ),
        (
            "fifo",
            Box::new(|p: &Path| assert!(Command::new("mkfifo").arg(p).status().unwrap().success())),
            "BINARY: not read: BINARY: not a regular file",
        ),
        ("grown", Box::new(grow), "jtrace_secret_source.c:"),
        (
            "dwarf",
            Box::new(|p: &Path| {
                grow(p);
                set_section_size(p, ".debug_info", 2 << 30);
            }),
            "BINARY: no source lines: DWARF not read: BINARY: .debug_info: 2147483648 bytes, more than the",
        ),
    ];
    for (name, make, expected) in cases {
        let dir = dir_of(home.join(name), u.uid, u.gid, 0o755);
        let binary = dir.join("app");
        make(&binary);
        std::os::unix::fs::lchown(&binary, Some(u.uid), Some(u.gid)).unwrap();
        let trace = home.join(format!("t-{name}"));
        forged_trace(&trace, &binary, off, (u.uid, u.gid));
        let mut said = String::new();
        for args in VIEWS {
            let (o, kib, took) = measured_view(u, args, &trace, Duration::from_secs(60))
                .unwrap_or_else(|| panic!("{name}: jtrace {args:?} hung"));
            assert!(o.status.success(), "{name}: jtrace {args:?} failed");
            assert!(kib < RSS_LIMIT_KIB, "{name}: jtrace {args:?} peaked at {kib} KiB");
            assert!(took < Duration::from_secs(20), "{name}: jtrace {args:?} took {took:?}");
            eprintln!("{name}: jtrace {args:?}: {kib} KiB, {took:?}");
            said.push_str(&String::from_utf8_lossy(&o.stdout).replace(s(&binary), "BINARY"));
        }
        assert!(said.contains(expected), "{name}: {expected:?} not said:\n{said}");
        if name == "dwarf" {
            assert!(said.contains("jtrace_secret_spin"), "{name}: symbols lost:\n{said}");
            assert!(!said.contains("jtrace_secret_source.c:"), "{name}: {said}");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

//! The trace is the invoking user's while root records it, and stays so
//! if jtrace is killed (docs/SECURITY.md). Each test runs jtrace for real,
//! as root "through sudo" by the unprivileged account `jtrace-test`, with a
//! real JVM, and has that account read the trace as it would: `jtrace
//! info`, `jtrace report` and `jtrace dump` run as that account, without
//! sudo. On `attach`, the JVM's user gets only what it reads.

mod common;

use common::hostile::*;
use common::*;
use jtrace_merge::Trace;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `jtrace <args>` as the plain user `u` (no sudo, no root), in `cwd`.
fn jtrace_plain(u: &TestUser, cwd: &Path, args: &[&str]) -> Output {
    ensure_agent();
    let o = Command::new(jtrace())
        .args(args)
        .current_dir(cwd)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .uid(u.uid)
        .gid(u.gid)
        .output()
        .expect("run jtrace as the test user");
    eprintln!(
        "--- jtrace {args:?} as uid {}, stdout\n{}",
        u.uid,
        String::from_utf8_lossy(&o.stdout)
    );
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Starts `sudo jtrace run <args> -- java … RingWork MILLIS 2` as `u`, in
/// `cwd`; returns it with its stdout after the JVM's "pid N" line, and N.
fn start_run(
    u: &TestUser,
    cwd: &Path,
    args: &[&str],
    millis: u32,
) -> (Child, BufReader<std::process::ChildStdout>, u32) {
    ensure_agent();
    let classes = classes();
    let mut child = Command::new(jtrace())
        .arg("run")
        .args(args)
        .args(["--methods", "RingWork.*", "--"])
        .arg(java(JDK17))
        .args(["-cp", s(&classes), "RingWork", &millis.to_string(), "2"])
        .current_dir(cwd)
        .env("SUDO_UID", u.uid.to_string())
        .env("SUDO_GID", u.gid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start jtrace run");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid = line.strip_prefix("pid ").map(|p| p.trim().parse().unwrap());
    (child, out, pid.unwrap_or_else(|| panic!("no pid line: {line:?}")))
}

/// Every entry of `dir` and the directory itself: owned by `uid`/`gid`,
/// files regular with mode 0600, the directory 0700. Returns the names.
fn all_owned_by(dir: &Path, uid: u32, gid: u32) -> Vec<String> {
    let md = std::fs::symlink_metadata(dir).unwrap();
    assert_eq!(
        (md.uid(), md.gid(), md.mode() & 0o7777),
        (uid, gid, 0o700),
        "{}",
        dir.display()
    );
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        // A ring's oldest chunk may go meanwhile.
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        let name = e.file_name().into_string().unwrap();
        assert!(md.is_file(), "{name} is not a regular file");
        assert_eq!(
            (md.uid(), md.gid(), md.mode() & 0o7777),
            (uid, gid, 0o600),
            "{name} is not uid {uid}'s alone (uid, gid, mode)"
        );
        names.push(name);
    }
    names.sort();
    names
}

/// What a trace directory may hold: jtrace's files and streams, nothing
/// left over of jtrace's own work (the room kept for the metadata, a
/// temporary file).
fn only_trace_files(names: &[String]) {
    for n in names {
        let known = ["meta.json", "agent.conf", ".jtrace-lock"].contains(&n.as_str())
            || jtrace_format::parse_stream_file(n).is_some();
        assert!(known, "{n} in the trace directory: {names:?}");
    }
}

/// A ring recording (`--max-size`) run through sudo: while it records,
/// its user reads it without sudo (`jtrace info`) and snapshots it both
/// without sudo and through sudo (`jtrace dump`, which used to fail:
/// meta.json was root's, and a plain user's dump tried to set its
/// groups). Every file in the directory is the user's (0600) all along.
/// The snapshots read; the recording ends whole and leaves nothing else.
#[test]
fn the_user_reads_and_dumps_a_ring_recording_while_root_records_it() {
    let u = test_user();
    let base = tempdir("handover-ring");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let args = ["--complete", "--max-size", "32M", "-o", s(&out)];
    let (child, rest, _pid) = start_run(u, &home, &args, 5000);
    // Chunks begun and deleted meanwhile (RingWork.tiny's calls fill them).
    std::thread::sleep(Duration::from_millis(2500));
    all_owned_by(&out, u.uid, u.gid);
    let info = jtrace_plain(u, &home, &["info", s(&out)]);
    assert!(info.status.success(), "the user cannot read the recording trace");
    assert!(String::from_utf8_lossy(&info.stdout).contains("RingWork"));
    let plain = home.join("plain.jtrace");
    let d = jtrace_plain(u, &home, &["dump", s(&out), "-o", s(&plain)]);
    assert!(d.status.success(), "`jtrace dump` without sudo failed");
    let sudo = home.join("sudo.jtrace");
    let d = jtrace_as(u.uid, u.gid, &["dump", s(&out), "-o", s(&sudo)]);
    assert!(d.status.success(), "`sudo jtrace dump` failed");
    let o = child.wait_with_output().unwrap();
    let done: Vec<String> = rest.lines().map(|l| l.unwrap()).collect();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && done.iter().any(|l| l == "done"), "{err}");
    assert!(!err.contains("as it is"), "{err}");
    for snap in [&plain, &sudo] {
        all_owned_by(snap, u.uid, u.gid);
        let t = Trace::open(snap).unwrap();
        assert!(!t.meta.complete && t.meta.snapshot_ns.is_some());
        assert!(t.kernel_records > 0 && !invocations(&t).is_empty());
        let r = jtrace_plain(u, &home, &["report", s(snap)]);
        assert!(r.status.success());
    }
    only_trace_files(&all_owned_by(&out, u.uid, u.gid));
    let t = Trace::open(&out).unwrap();
    assert!(t.meta.complete && t.meta.max_size == Some(32 << 20));
    let _ = std::fs::remove_dir_all(&base);
}

/// `jtrace run` (through sudo) killed with SIGKILL mid-recording: what it
/// wrote is the user's (meta.json was root's from the pid's rewrite on,
/// so the user could read neither the recording trace nor what was left),
/// nothing of its own work is left (the room it kept for the metadata
/// was a `.jtrace-room` file), the user reads the trace as cut off, and a
/// later run into the same directory records as usual.
#[test]
fn a_killed_run_leaves_its_user_a_readable_trace() {
    let u = test_user();
    let base = tempdir("handover-killed");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let (mut child, rest, pid) = start_run(u, &home, &["-o", s(&out)], 6000);
    std::thread::sleep(Duration::from_millis(1500));
    let info = jtrace_plain(u, &home, &["info", s(&out)]);
    assert!(info.status.success(), "the user cannot read the recording trace");
    all_owned_by(&out, u.uid, u.gid);
    child.kill().unwrap();
    child.wait().unwrap();
    // The JVM (the user's) runs on to its end: its stream is finished.
    let done: Vec<String> = rest.lines().map(|l| l.unwrap()).collect();
    assert!(done.iter().any(|l| l == "done"), "{done:?}");
    let names = all_owned_by(&out, u.uid, u.gid);
    only_trace_files(&names);
    assert!(names.contains(&format!("jvm-{pid}.bin")), "{names:?}");
    let info = jtrace_plain(u, &home, &["info", s(&out)]);
    assert!(info.status.success(), "the user cannot read the trace jtrace left");
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains("complete   NO") && text.contains(&format!("pid        {pid}")),
        "{text}"
    );
    let r = jtrace_plain(u, &home, &["report", s(&out)]);
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stdout).contains("RingWork.outer"));
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", "true"]);
    assert!(o.status.success(), "a later run into the directory failed");
    let t = Trace::open(&out).unwrap();
    assert!(t.meta.complete && t.meta.command == ["true"]);
    only_trace_files(&all_owned_by(&out, u.uid, u.gid));
    let _ = std::fs::remove_dir_all(&base);
}

/// Root itself attaches to a JVM of `jtrace-test`: the trace directory is
/// lent to the JVM's user, who gets the configuration the agent reads and
/// writes its own stream, but never reads root's kernel stream or
/// metadata (they used to be handed to the JVM's user as the recording
/// began, then taken back at its end). The trace ends whole and root's.
#[test]
fn a_root_attach_hands_the_jvms_user_only_what_it_reads() {
    let u = test_user();
    let base = tempdir("handover-attach");
    let cwd = dir_of(base.join("cwd"), u.uid, u.gid, 0o755);
    let (mut jvm, _stdout) = start_jvm_as(u, &cwd, &cwd.join("times.txt"));
    let pid = jvm.id();
    let out = base.join("root").join("a.jtrace");
    let attach = Command::new(jtrace())
        .args(["attach", &pid.to_string(), "--duration", "4s"])
        .args(["--methods", "AttachTarget.work", "-o", s(&out)])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stream = out.join(format!("jvm-{pid}.bin"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stream.exists() {
        assert!(Instant::now() < deadline, "the agent never wrote its stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    let owner = |name: &str| std::fs::symlink_metadata(out.join(name)).unwrap().uid();
    assert_eq!(owner("agent.conf"), u.uid);
    assert_eq!(owner(""), u.uid, "the directory is lent to the JVM's user");
    for name in ["meta.json", "kernel.bin"] {
        assert_eq!(owner(name), 0, "{name} was handed to the JVM's user");
        let cat = Command::new("cat")
            .arg(out.join(name))
            .uid(u.uid)
            .gid(u.gid)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(!cat.status.success(), "the JVM's user read {name}");
    }
    let o = attach.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("--- jtrace attach stderr\n{err}");
    drop(jvm.stdin.take());
    let _ = jvm.wait();
    assert!(o.status.success(), "{err}");
    only_trace_files(&all_owned_by(&out, 0, 0));
    let t = Trace::open(&out).unwrap();
    assert!(t.meta.complete && !invocations(&t).is_empty());
    let _ = std::fs::remove_dir_all(&base);
}

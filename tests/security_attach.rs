//! Attacks on `jtrace attach`, `record -p` and the final hand-over, as a
//! hostile local user tries them (docs/ARCHITECTURE.md invariant 6). Each runs for real, as root,
//! with the unprivileged account `jtrace-test` as the attacker, and checks
//! that what the attack aimed at is exactly as before.

mod common;

use common::hostile::*;
use common::*;
use jtrace_merge::Trace;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `jtrace <args>` as root itself (no SUDO_UID: the invoker is root).
fn jtrace_root(args: &[&str]) -> std::process::Output {
    ensure_agent();
    let o = Command::new(jtrace())
        .args(args)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .output()
        .expect("run jtrace");
    eprintln!("--- jtrace {args:?} stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Root attaches to a root JVM with `-o` in a directory the attacker owns.
/// Once jtrace has made the trace directory, the attacker renames it and
/// puts a link in its place, to a directory of theirs holding a
/// configuration and, at the stream's name, a link to a root-only file.
/// The agent (root, in the JVM) used to follow both links and write its
/// stream over that file. Now it refuses the swapped directory: the file
/// is as it was, jtrace says the agent did not start, and no session is
/// left on in the JVM (a later attach records as usual).
#[test]
fn a_trace_directory_swapped_for_a_link_is_not_written_through() {
    let u = test_user();
    let base = tempdir("sec-swap");
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    let victim = root_file(&secret, "victim", "root's precious file\n");
    let before = state(&secret);
    let attacker = dir_of(base.join("attacker"), u.uid, u.gid, 0o755);
    let cwd = dir_of(base.join("cwd"), 0, 0, 0o755);
    let (mut child, _stdout) = start_jvm_of(0, 0, &cwd, &cwd.join("times.txt"));
    let pid = child.id();
    let out = attacker.join("a.jtrace");
    let evil = attacker.join("evil");
    let swap = format!(
        "set -e; mkdir {evil}; printf 'output {out}\\ninclude_method AttachTarget.work\\n' > {evil}/agent.conf; \
         ln -s {victim} {evil}/jvm-{pid}.bin; \
         t=0; until [ -e {out} ]; do sleep 0.002; t=$((t+1)); [ $t -lt 15000 ] || exit 3; done; \
         mv {out} {attacker}/moved; ln -s {evil} {out}",
        evil = s(&evil),
        out = s(&out),
        victim = s(&victim),
        attacker = s(&attacker),
    );
    let mut swapper = Command::new("sh")
        .args(["-c", &swap])
        .uid(u.uid)
        .gid(u.gid)
        .spawn()
        .unwrap();
    let o = jtrace_root(&[
        "attach",
        &pid.to_string(),
        "--duration",
        "2s",
        "--methods",
        "AttachTarget.work",
        "-o",
        s(&out),
    ]);
    assert!(swapper.wait().unwrap().success(), "the swap did not happen");
    assert_eq!(state(&secret), before, "root's file was written through the link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's precious file\n");
    assert!(!o.status.success(), "attach into a swapped directory succeeded");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the agent did not start"), "{err}");

    // No session stayed on in the JVM: a fresh attach records as usual.
    let out2 = cwd.join("b.jtrace");
    let o = jtrace_root(&[
        "attach",
        &pid.to_string(),
        "--duration",
        "1s",
        "--methods",
        "AttachTarget.work",
        "-o",
        s(&out2),
    ]);
    drop(child.stdin.take());
    let _ = child.wait();
    assert!(o.status.success(), "a session was left on in the JVM");
    assert!(Trace::open(&out2).unwrap().meta.complete);
    let _ = std::fs::remove_dir_all(&base);
}

/// An ordinary user (through sudo) may not trace another user's process:
/// `attach` to root's JVM and to another user's, `attach --stop` and
/// `record -p` of root's process are refused before anything is recorded,
/// with a message saying what to do; no trace directory is left. Tracing
/// one's own JVM still works (tests/security.rs, attach_follows_no_planted_link).
#[test]
fn other_users_processes_are_refused() {
    let u = test_user();
    let base = tempdir("sec-foreign");
    let cwd = dir_of(base.join("cwd"), 0, 0, 0o755);
    let (root_jvm, _o1) = start_jvm_of(0, 0, &cwd, &cwd.join("t1.txt"));
    let nobody_cwd = dir_of(base.join("nobody"), 65534, 65534, 0o755);
    let (nobody_jvm, _o2) = start_jvm_of(65534, 65534, &nobody_cwd, &nobody_cwd.join("t2.txt"));
    let mut root_sleep = Command::new("sleep").arg("30").spawn().unwrap();
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o755);
    let out = home.join("t.jtrace");
    let tries: Vec<Vec<String>> = vec![
        vec![
            "attach".into(),
            root_jvm.id().to_string(),
            "--duration".into(),
            "1s".into(),
        ],
        vec![
            "attach".into(),
            nobody_jvm.id().to_string(),
            "--duration".into(),
            "1s".into(),
        ],
        vec!["attach".into(), root_jvm.id().to_string(), "--stop".into()],
        vec![
            "record".into(),
            "-p".into(),
            root_sleep.id().to_string(),
            "--duration".into(),
            "1s".into(),
        ],
    ];
    for t in &tries {
        let mut args: Vec<&str> = t.iter().map(String::as_str).collect();
        if t[1] != "--stop" && !t.iter().any(|a| a == "--stop") {
            args.extend(["-o", s(&out)]);
        }
        let o = jtrace_as(u.uid, u.gid, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{t:?} was not refused: {err}");
        assert!(
            err.contains(&format!("uid {} may not trace process", u.uid)) && err.contains("sudo env -u SUDO_UID"),
            "{t:?}: {err}"
        );
        assert!(!out.exists(), "{t:?} left a trace directory");
    }
    let _ = root_sleep.kill();
    let _ = root_sleep.wait();
    for mut c in [root_jvm, nobody_jvm] {
        drop(c.stdin.take());
        let status = c.wait().unwrap();
        assert_eq!(status.code(), Some(7), "a JVM was disturbed");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// The traced command moves a root-only file, and another user's, into its
/// trace directory: the final hand-over used to give both to the user. Now
/// only what jtrace and the traced command's user made is handed over; the
/// foreign files stay their owners', unreadable to the user, with a warning.
#[test]
fn files_the_command_moves_in_are_not_handed_over() {
    let u = test_user();
    let base = tempdir("sec-handover");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o755);
    // Files others own, in a directory the user may rename them out of.
    let root_secret = root_file(&home, "root-secret", "root only\n");
    let other_secret = home.join("other-secret");
    std::fs::write(&other_secret, "nobody's\n").unwrap();
    std::os::unix::fs::chown(&other_secret, Some(65534), Some(65534)).unwrap();
    let out = home.join("t.jtrace");
    let steal = format!(
        "mv {} {o}/stolen-root && mv {} {o}/stolen-other && echo mine > {o}/own",
        s(&root_secret),
        s(&other_secret),
        o = s(&out)
    );
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", "sh", "-c", &steal]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let owner_mode = |name: &str| {
        let md = std::fs::symlink_metadata(out.join(name)).unwrap();
        (md.uid(), md.mode() & 0o777)
    };
    assert_eq!(owner_mode("stolen-root"), (0, 0o600), "root's file was handed over");
    assert_eq!(
        owner_mode("stolen-other").0,
        65534,
        "another user's file was handed over"
    );
    assert!(
        err.contains("stolen-root as it is") && err.contains("belongs to uid 0"),
        "{err}"
    );
    assert!(err.contains("stolen-other as it is"), "{err}");
    // What jtrace and the user made is the user's.
    for name in ["meta.json", "kernel.bin", "agent.conf", "own"] {
        assert_eq!(owner_mode(name), (u.uid, 0o600), "{name}");
    }
    assert!(Trace::open(&out).unwrap().meta.complete);
    let _ = std::fs::remove_dir_all(&base);
}

/// A JVM that exits while `jtrace attach` records (here: before its
/// parent reaps it, so it lingers as a zombie) ends a complete trace, with
/// exit code 0: its agent wrote the stream's end at VM death, and nothing
/// is asked of the dead JVM.
#[test]
fn a_jvm_that_exits_during_attach_leaves_a_complete_trace() {
    let base = tempdir("attach-exit");
    let (mut child, mut stdout) = start_jvm_of(0, 0, &base, &base.join("times.txt"));
    let pid = child.id();
    let out = base.join("a.jtrace");
    ensure_agent();
    let mut j = Command::new(jtrace())
        .args([
            "attach",
            &pid.to_string(),
            "--duration",
            "60s",
            "--methods",
            "AttachTarget.work",
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = j.stderr.take().unwrap();
    let mut log = Vec::new();
    let t0 = Instant::now();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&log).contains("recording") {
        assert!(
            err.read(&mut byte).unwrap() == 1 && t0.elapsed() < Duration::from_secs(60),
            "attach did not start: {}",
            String::from_utf8_lossy(&log)
        );
        log.push(byte[0]);
    }
    std::thread::sleep(Duration::from_millis(500));
    // The JVM ends (its stdin closed) and is not reaped until jtrace is done.
    drop(child.stdin.take());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = j.wait().unwrap();
    err.read_to_end(&mut log).unwrap();
    let log = String::from_utf8_lossy(&log);
    eprintln!("--- jtrace attach stderr\n{log}");
    assert_eq!(child.wait().unwrap().code(), Some(7));
    assert!(status.success(), "attach to a JVM that exited failed: {log}");
    assert!(log.contains("process exited"), "{log}");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete, "the trace is marked incomplete");
    assert!(!log.contains("WARNING"), "{log}");
    let _ = std::fs::remove_dir_all(&base);
}

/// Another user (here uid 65534) listens at the attach socket's name of a
/// JVM of the test account before its attach listener runs, to receive
/// what jtrace sends (the agent's path and options) and answer as the JVM
/// would. jtrace checks the socket as the JDK's client does (a socket
/// owned by the JVM's user, writable by no one else) and refuses it before
/// connecting; a link planted there is refused the same way.
#[test]
fn an_attach_socket_planted_by_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let u = test_user();
    let base = tempdir("sec-socket");
    let cwd = dir_of(base.join("cwd"), u.uid, u.gid, 0o755);
    let (child, _stdout) = start_jvm_as(u, &cwd, &cwd.join("times.txt"));
    let pid = child.id();
    let sock = std::path::PathBuf::from(format!("/tmp/.java_pid{pid}"));
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::os::unix::fs::chown(&sock, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let out = cwd.join("a.jtrace");
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["attach", &pid.to_string(), "--duration", "1s", "-o", s(&out)],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("belongs to uid 65534") && err.contains("refusing it"),
        "{err}"
    );
    assert!(listener.accept().is_err(), "jtrace connected to the planted socket");
    drop(listener);
    std::fs::remove_file(&sock).unwrap();
    // A link to a socket of the JVM's user is no better.
    let real = cwd.join("real.sock");
    let _l2 = std::os::unix::net::UnixListener::bind(&real).unwrap();
    std::os::unix::fs::chown(&real, Some(u.uid), Some(u.gid)).unwrap();
    std::os::unix::fs::symlink(&real, &sock).unwrap();
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["attach", &pid.to_string(), "--duration", "1s", "-o", s(&out)],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is not a socket"), "{err}");
    std::fs::remove_file(&sock).unwrap();
    // Control: with the name free, the attach works.
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["attach", &pid.to_string(), "--duration", "1s", "-o", s(&out)],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut child = child;
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(7));
    let _ = std::fs::remove_dir_all(&base);
}

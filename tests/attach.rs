//! End-to-end tests of `jtrace attach`: real JVMs (17 and 25) started
//! without any agent, attached to three times while they run, then left to
//! finish. They need root, as CI has.

mod common;

use common::*;
use jtrace_merge::{Cause, OffCpuInterval, ThreadInfo, Trace, Visitor};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every off-CPU interval: (tid, start, its split by cause).
#[derive(Default)]
struct Blocks(Vec<(u32, u64, jtrace_merge::OffCpu)>);

impl Visitor for Blocks {
    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, iv: &OffCpuInterval) {
        self.0.push((t.tid, iv.start, iv.split.off));
    }
}

/// Starts AttachTarget as uid 65534 (the user the tests attach as,
/// through sudo: an ordinary user may trace only their own processes) and
/// waits for its "ready" line; returns the child (stdout still piped,
/// after that line; closing its stdin ends it) and the file of its call
/// times.
fn start_target(jdk: &str, dir: &Path) -> (Child, BufReader<std::process::ChildStdout>, PathBuf) {
    // Before any attach, including those a test spawns itself: a JVM keeps
    // the first agent library it loaded for every later attach.
    ensure_agent();
    let times = dir.join("times.txt");
    let mut child = Command::new(java(jdk))
        .arg("-cp")
        .arg(classes())
        .arg("AttachTarget")
        .arg(&times)
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n", "{jdk}: AttachTarget did not start");
    (child, out, times)
}

fn attach(pid: u32, out: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    ensure_agent();
    let o = Command::new(jtrace())
        .arg("attach")
        .arg(pid.to_string())
        .arg("-o")
        .arg(out)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run jtrace attach");
    eprintln!("--- jtrace attach stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// What AttachTarget prints at the end after `calls` calls.
/// Ends the target (closes its stdin), then checks it finished as if
/// nothing had happened: the summary of the calls it made and exit code 7.
/// Returns the calls' times and what it wrote on stderr.
fn finish_target(
    jdk: &str,
    mut child: Child,
    mut stdout: BufReader<std::process::ChildStdout>,
    times_file: &Path,
) -> (Vec<u64>, String) {
    drop(child.stdin.take());
    let st = child.wait().unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let times: Vec<u64> = std::fs::read_to_string(times_file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(rest, expected_summary(times.len()), "{jdk}: output changed");
    assert_eq!(st.code(), Some(7), "{jdk}: exit code changed");
    (times, stderr)
}

fn expected_summary(calls: usize) -> String {
    let thrown = calls / 50;
    let sum: u64 = (0..calls as u64).filter(|i| i % 50 != 49).sum();
    format!("calls {calls} thrown {thrown} sum {sum}\n")
}

/// Checks one session's trace: complete, nothing lost, exact accounting,
/// the worker named, its kernel switches there, and its AttachTarget.work
/// invocations exactly the calls the program made inside the traced window
/// (by its own clock readings), exceptional exits included. Returns how
/// many calls were traced.
fn check_session(jdk: &str, dir: &Path, times: &[u64]) -> usize {
    let trace = Trace::open(dir).unwrap_or_else(|e| panic!("{jdk}: cannot open {}: {e:#}", dir.display()));
    assert!(trace.meta.complete, "{jdk}: trace not complete");
    assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "{jdk}: events lost");
    assert!(
        trace.losses.truncated.is_empty(),
        "{jdk}: {} problems, first: {:?}",
        trace.losses.truncated.len(),
        trace.losses.truncated.first()
    );
    // No agent message: park and sleep are recorded on attach too.
    assert!(
        trace.losses.agent_errors.is_empty(),
        "{jdk}: agent errors {:?}",
        trace.losses.agent_errors
    );
    assert_exact(&trace);

    let worker = trace
        .threads
        .values()
        .find(|t| t.java_name.as_deref() == Some("attach-worker"))
        .unwrap_or_else(|| panic!("{jdk}: the worker thread is not named in the trace"));
    // Threads that existed before the attach and record nothing themselves
    // are named too (from the thread list at attach), the main thread included.
    for name in ["Reference Handler", "main"] {
        assert!(
            trace.threads.values().any(|t| t.java_name.as_deref() == Some(name)),
            "{jdk}: existing thread {name:?} is not named"
        );
    }
    // Names alike in their first 15 bytes (all the kernel keeps) are told
    // apart: each on its own tid, whose kernel name is the cut one.
    let mut idle: Vec<u32> = Vec::new();
    for k in 1..=3 {
        let name = format!("attach-idle-thread-{k}");
        let t = trace
            .threads
            .values()
            .find(|t| t.java_name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{jdk}: {name} is not named"));
        assert_eq!(
            t.comm, "attach-idle-thr",
            "{jdk}: {name} on tid {} of another thread",
            t.tid
        );
        idle.push(t.tid);
    }
    idle.sort();
    idle.dedup();
    assert_eq!(idle.len(), 3, "{jdk}: idle threads share tids");
    // The views read it like a `run` trace.
    let txt = text(dir);
    assert!(
        txt.contains("attach-worker") && txt.contains("AttachTarget.work"),
        "{jdk}: text trace"
    );
    let html = dir.with_extension("html");
    let st = Command::new(jtrace())
        .arg("timeline")
        .arg(dir)
        .arg("-o")
        .arg(&html)
        .status()
        .unwrap();
    assert!(st.success() && html.is_file(), "{jdk}: jtrace timeline failed");
    let report = jtrace_merge::build_report(&trace, &Default::default());
    let wt = report.threads.iter().find(|t| t.tid == worker.tid).unwrap();
    // It sleeps 1 ms per call: hundreds of voluntary switches per second.
    assert!(
        wt.voluntary_switches > 300,
        "{jdk}: worker has {} voluntary switches",
        wt.voluntary_switches
    );

    let mut invs: Vec<_> = invocations(&trace)
        .into_iter()
        .filter(|(t, inv)| t.tid == worker.tid && trace.methods[inv.method as usize].qualified() == "AttachTarget.work")
        .map(|(_, inv)| inv)
        .collect();
    invs.sort_by_key(|i| i.entry);
    assert!(
        invs.len() > 300,
        "{jdk}: only {} calls traced in the window",
        invs.len()
    );
    // Call i was made after times[i]; its entry lies before times[i + 1].
    let first = times.partition_point(|&t| t <= invs[0].entry) - 1;
    for (k, inv) in invs.iter().enumerate() {
        let i = first + k;
        assert!(
            times[i] <= inv.entry && times.get(i + 1).is_none_or(|&next| inv.entry < next),
            "{jdk}: traced invocation {k} is not call {i}: a call inside the window was missed"
        );
        // Only the last call may be cut by the stop (no exit recorded).
        assert!(!inv.unfinished || k == invs.len() - 1, "{jdk}: call {i} has no exit");
        if !inv.unfinished {
            assert_eq!(inv.exception, i % 50 == 49, "{jdk}: call {i} exception flag");
        }
    }
    // Park and sleep natives are re-bound at attach: inside the agent's
    // session (the kernel recorder runs a little longer on both sides), the
    // worker's blocked time is Thread.sleep's and the parker's is park's.
    let (from, to) = (invs[0].entry, invs.last().unwrap().entry);
    let parker = trace
        .threads
        .values()
        .find(|t| t.java_name.as_deref() == Some("attach-parker"))
        .unwrap_or_else(|| panic!("{jdk}: the parker thread is not named"));
    let mut blocks = Blocks::default();
    jtrace_merge::analyze(&trace, &mut blocks);
    for (tid, cause) in [(worker.tid, Cause::Sleep), (parker.tid, Cause::Park)] {
        let mut off = jtrace_merge::OffCpu::default();
        for &(t, start, split) in &blocks.0 {
            if t == tid && (from..to).contains(&start) {
                for c in Cause::ALL {
                    off.add(c, split.get(c));
                }
            }
        }
        // Runnable time (the run queue, a CPU quota, the hypervisor) is no block.
        let blocked = off.total() - off.get(Cause::Runqueue) - off.get(Cause::Throttled) - off.get(Cause::Steal);
        assert!(
            blocked > 100_000_000 && off.get(cause) * 100 >= blocked * 85,
            "{jdk}: tid {tid}'s blocked time in the session is not mostly {cause:?}: {off:?}"
        );
    }
    // The directory and files belong to the invoking user, as with `run`.
    let md = std::fs::metadata(dir).unwrap();
    assert_eq!(
        (md.uid(), md.permissions().mode() & 0o777),
        (65534, 0o700),
        "{jdk}: trace dir owner/mode"
    );
    for e in std::fs::read_dir(dir).unwrap() {
        let md = e.unwrap().metadata().unwrap();
        assert_eq!(
            (md.uid(), md.permissions().mode() & 0o777),
            (65534, 0o600),
            "{jdk}: trace file owner/mode"
        );
    }
    invs.len()
}

/// The program runs untouched by three attaches: two tracing AttachTarget.work
/// (each exact against the program's own record of its calls), then one
/// tracing no method and stopped by SIGTERM, which must see no method event at
/// all (the probes of the earlier sessions are gone). The program's output
/// and exit code are those of an untraced run.
#[test]
fn attach_traces_a_running_jvm_and_leaves_it_as_before() {
    for jdk in JDKS {
        let dir = tempdir("attach");
        let (mut child, mut stdout, times_file) = start_target(jdk, &dir);
        let pid = child.id();
        let sudo = [("SUDO_UID", "65534"), ("SUDO_GID", "65534")];
        let mut traced = Vec::new();
        for n in 1..=2 {
            let out = dir.join(format!("s{n}.jtrace"));
            let o = attach(
                pid,
                &out,
                &["--duration", "1s", "--methods", "AttachTarget.work"],
                &sudo,
            );
            if !o.status.success() {
                let _ = child.kill();
                let _ = child.wait();
                let mut rest = String::new();
                let _ = stdout.read_to_string(&mut rest);
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("{jdk}: attach {n} failed; the JVM's stdout:\n{rest}\nits stderr:\n{err}");
            }
            traced.push(out);
        }
        // Third session: no method selected, stopped by SIGTERM.
        let out3 = dir.join("s3.jtrace");
        let mut j = Command::new(jtrace())
            .arg("attach")
            .arg(pid.to_string())
            .arg("-o")
            .arg(&out3)
            .envs(sudo)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(j.stderr.take().unwrap());
        let mut log = String::new();
        let t0 = Instant::now();
        while !log.contains("recording") {
            let mut l = String::new();
            if err.read_line(&mut l).unwrap() == 0 || t0.elapsed() > Duration::from_secs(30) {
                panic!("{jdk}: third attach did not start: {log}");
            }
            log.push_str(&l);
        }
        std::thread::sleep(Duration::from_millis(800));
        unsafe { libc::kill(j.id() as i32, libc::SIGTERM) };
        let st = j.wait().unwrap();
        err.read_to_string(&mut log).unwrap();
        eprintln!("--- third attach\n{log}");
        assert!(st.success(), "{jdk}: attach stopped by SIGTERM failed: {log}");

        // The program finishes as if nothing had happened.
        let (times, stderr) = finish_target(jdk, child, stdout, &times_file);
        // Nothing from jtrace on the program's stderr; JDK 21+ prints its own
        // warning about a dynamically loaded agent.
        for l in stderr.lines() {
            assert!(l.starts_with("WARNING: "), "{jdk}: unexpected stderr line {l:?}");
        }

        for out in &traced {
            let n = check_session(jdk, out, &times);
            eprintln!("{jdk}: {} traced {n} calls", out.display());
        }
        let t3 = Trace::open(&out3).unwrap();
        assert!(t3.meta.complete, "{jdk}: third trace not complete");
        assert!(
            t3.losses.truncated.is_empty(),
            "{jdk}: {} problems after the probes were removed, first: {:?}",
            t3.losses.truncated.len(),
            t3.losses.truncated.first()
        );
        let n3 = invocations(&t3).len();
        assert_eq!(n3, 0, "{jdk}: {n3} method invocations after the probes were removed");
        assert!(
            t3.threads
                .values()
                .any(|t| t.java_name.as_deref() == Some("attach-worker")),
            "{jdk}: worker not named in the third session"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A dead pid, a process that is not a JVM, and a JVM that refuses attach:
/// each fails at once with a clear message and a non-zero exit, leaving no
/// trace directory behind; the JVM that refused runs on undisturbed.
#[test]
fn attach_refuses_what_it_cannot_attach_to() {
    let dir = tempdir("attach-refused");
    // A pid that just exited (reaped).
    let mut t = Command::new("true").spawn().unwrap();
    let dead = t.id();
    t.wait().unwrap();
    let out = dir.join("dead.jtrace");
    let o = attach(dead, &out, &["--duration", "1s"], &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("no process with pid {dead}")),
        "dead pid message"
    );
    assert!(!out.exists());

    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let out = dir.join("sleep.jtrace");
    let o = attach(sleeper.id(), &out, &["--duration", "1s"], &[]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a HotSpot JVM"),
        "non-JVM message"
    );
    assert!(!out.exists());

    for jdk in JDKS {
        let mut child = Command::new(java(jdk))
            .args(["-XX:+DisableAttachMechanism", "-cp"])
            .arg(classes())
            .arg("AttachTarget")
            .arg(dir.join("times.txt"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let out = dir.join("disabled.jtrace");
        let t0 = Instant::now();
        let o = attach(child.id(), &out, &["--duration", "1s"], &[]);
        assert!(!o.status.success());
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{jdk}: refusal took {:?}",
            t0.elapsed()
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("DisableAttachMechanism"),
            "{jdk}: disabled-attach message"
        );
        assert!(!out.exists());
        // Let it make some calls, then end it.
        std::thread::sleep(Duration::from_millis(300));
        // No thread dump (SIGQUIT was not sent) and the normal end.
        let (_, stderr) = finish_target(jdk, child, stdout, &dir.join("times.txt"));
        assert!(stderr.is_empty(), "{jdk}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `jtrace attach` killed with SIGKILL leaves its session running in the
/// JVM: a new attach is refused with a hint, `jtrace attach PID --stop` ends
/// the orphan (a second --stop finds nothing to stop), and a new session
/// then traces exactly as usual.
#[test]
fn a_killed_attach_is_recovered_with_stop() {
    for jdk in JDKS {
        let dir = tempdir("attach-orphan");
        let (child, stdout, times_file) = start_target(jdk, &dir);
        let pid = child.id();
        let mut orphan = Command::new(jtrace())
            .arg("attach")
            .arg(pid.to_string())
            .arg("-o")
            .arg(dir.join("orphan.jtrace"))
            .args(["--methods", "AttachTarget.work"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(orphan.stderr.take().unwrap());
        let mut log = String::new();
        while !log.contains("recording") {
            let mut l = String::new();
            assert!(
                err.read_line(&mut l).unwrap() > 0,
                "{jdk}: first attach did not start: {log}"
            );
            log.push_str(&l);
        }
        orphan.kill().unwrap();
        orphan.wait().unwrap();

        let o = attach(pid, &dir.join("refused.jtrace"), &["--duration", "1s"], &[]);
        assert!(!o.status.success(), "{jdk}: attached over an orphaned session");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--stop"),
            "{jdk}: no hint to --stop"
        );
        assert!(!dir.join("refused.jtrace").exists());
        let stop = |what: &str| {
            let o = Command::new(jtrace())
                .args(["attach", &pid.to_string(), "--stop"])
                .output()
                .unwrap();
            let msg = String::from_utf8_lossy(&o.stderr).into_owned();
            eprintln!("--- {what}: {msg}");
            (o.status.success(), msg)
        };
        let (ok, msg) = stop("stop");
        assert!(ok, "{jdk}: --stop failed: {msg}");
        let (ok, msg) = stop("second stop");
        assert!(
            !ok && msg.contains("no jtrace attach session"),
            "{jdk}: second --stop: {msg}"
        );

        let out = dir.join("after.jtrace");
        let sudo = [("SUDO_UID", "65534"), ("SUDO_GID", "65534")];
        let o = attach(
            pid,
            &out,
            &["--duration", "1s", "--methods", "AttachTarget.work"],
            &sudo,
        );
        assert!(o.status.success(), "{jdk}: attach after --stop failed");

        let (times, _) = finish_target(jdk, child, stdout, &times_file);
        check_session(jdk, &out, &times);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A socket file left at the JVM's attach path by an earlier process of
/// another user with the same pid (nobody listens on it) is replaced: the
/// attach works, and the JVM prints no thread dump.
#[test]
fn a_stale_attach_socket_is_replaced() {
    for jdk in JDKS {
        let dir = tempdir("attach-stale");
        let (child, stdout, times_file) = start_target(jdk, &dir);
        let pid = child.id();
        let sock = PathBuf::from(format!("/tmp/.java_pid{pid}"));
        // Left by a dead process of another user (root here) with the same
        // pid: nothing listens on it, so it is cleared. (One something
        // listens on is refused: tests/security_attach.rs.)
        drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind a stale socket"));
        assert!(sock.exists());
        let out = dir.join("s.jtrace");
        let sudo = [("SUDO_UID", "65534"), ("SUDO_GID", "65534")];
        let o = attach(
            pid,
            &out,
            &["--duration", "1s", "--methods", "AttachTarget.work"],
            &sudo,
        );
        assert!(o.status.success(), "{jdk}: attach over a stale socket failed");
        let (times, _) = finish_target(jdk, child, stdout, &times_file);
        check_session(jdk, &out, &times);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Adaptive demotion across attach sessions: AttachHot's `tiny` (hot,
/// short, never blocking) is demoted in the first session, and the second
/// session traces it again from its first call until it demotes it anew.
/// The marks the JIT folds into compiled code are cleared between the
/// sessions only because the first session's end retransformed the class
/// back (docs/OVERHEAD.md): a mark left set would leave the second session
/// without a single call of `tiny`.
#[test]
fn a_method_demoted_in_one_session_is_traced_again_in_the_next() {
    for jdk in JDKS {
        ensure_agent();
        let dir = tempdir("attach_demote");
        let mut child = Command::new(java(jdk))
            .arg("-cp")
            .arg(classes())
            .arg("AttachHot")
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start java");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "{jdk}: AttachHot did not start");
        let sudo = [("SUDO_UID", "65534"), ("SUDO_GID", "65534")];
        for n in 1..=2 {
            let out = dir.join(format!("d{n}.jtrace"));
            let o = attach(
                child.id(),
                &out,
                &["--duration", "2s", "--methods", "AttachHot.tiny"],
                &sudo,
            );
            if !o.status.success() {
                let _ = child.kill();
                panic!("{jdk}: attach {n} failed");
            }
            let trace = Trace::open(&out).unwrap();
            assert!(trace.meta.complete, "{jdk}: session {n} not complete");
            assert_exact(&trace);
            let r = jtrace_merge::build_report(&trace, &Default::default());
            let d = r
                .demoted
                .iter()
                .find(|d| d.name == "tiny")
                .unwrap_or_else(|| panic!("{jdk}: session {n} did not demote tiny: {:?}", r.demoted));
            eprintln!(
                "{jdk}: session {n}: tiny demoted after {} recorded calls",
                d.calls_recorded
            );
            // Recorded from its first calls of the session on, until the
            // agent had seen the calls a demotion needs.
            assert!(
                d.calls_recorded >= 1_000,
                "{jdk}: session {n} recorded {} calls of tiny",
                d.calls_recorded
            );
        }
        drop(child.stdin.take());
        let st = child.wait().unwrap();
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        assert!(st.success(), "{jdk}: AttachHot exit {st:?}");
        assert!(
            rest.starts_with("calls ") && rest.trim_end().ends_with("true"),
            "{jdk}: {rest}"
        );
    }
}

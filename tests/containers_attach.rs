//! `jtrace attach` into JVMs in real containers (podman, rootful and
//! rootless): the agent placed in the container's /tmp for the session,
//! its stream brought into the trace, nothing of jtrace's left in the
//! container afterwards (src/container.rs), and every injected delay in
//! its cause on every JDK.

mod common;

use common::containers::{attach_as, Container, Podman};
use common::hostile::s;
use common::*;
use jtrace_merge::{Cause, Trace};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const DELAY_MS: u64 = 100;

/// GroundTruthLoop on `jdk` in a new container of `podman` (`opts`
/// before the image), up and serving.
fn start_loop<'a>(podman: &'a Podman, jdk: &str, opts: &[&str]) -> Container<'a> {
    let java = java(jdk);
    let delay = DELAY_MS.to_string();
    let c = podman.run(
        opts,
        &[
            java.to_str().unwrap(),
            "-cp",
            "/classes",
            "GroundTruthLoop",
            &delay,
            "300",
        ],
    );
    c.wait_for("ready");
    c
}

/// The session directories of jtrace in the container's /tmp.
fn jtrace_dirs(c: &Container) -> Vec<String> {
    c.ls("/tmp").into_iter().filter(|n| n.starts_with(".jtrace-")).collect()
}

/// Checks a trace of GroundTruthLoop: complete, nothing lost, exact; the
/// whole calls of the sleep, the contended monitor and the socket wait
/// have ≥ 85 % of their injected delays in their cause, each call most of
/// its delay and little CPU (on a loaded machine a thread that HotSpot's
/// timed re-checks wake inside a monitor's delay may wait there for a CPU:
/// that time is rightly runqueue); the calls' thread is known by its host
/// tid with the namespace's beside it; no thread is unmatched. Returns how
/// many calls were checked.
fn check_ground_truth(what: &str, out: &Path) -> usize {
    let trace = Trace::open(out).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert!(trace.meta.complete, "{what}: incomplete");
    assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "{what}: events lost");
    assert_exact(&trace);
    let calls = invocations(&trace);
    let mut checked = 0;
    for (name, cause) in [
        ("sleepFor", Cause::Sleep),
        ("enterMonitor", Cause::Monitor),
        ("readLateReply", Cause::Socket),
    ] {
        let whole: Vec<_> = calls
            .iter()
            .filter(|(_, i)| {
                let m = &trace.methods[i.method as usize];
                m.class == "GroundTruth" && m.name == name && !i.unfinished
            })
            .collect();
        assert!(!whole.is_empty(), "{what}: no whole call of {name}");
        let in_cause: u64 = whole.iter().map(|(_, i)| i.breakdown.off.get(cause)).sum();
        assert!(
            in_cause * 100 >= whole.len() as u64 * DELAY_MS * MS * 85,
            "{what} {name}: {} has {in_cause} ns of {} calls' {DELAY_MS} ms delays",
            cause.name(),
            whole.len()
        );
        // One line per cause (a failing CI run shows only the start and
        // the end of the output: the panic's message must not drown).
        eprintln!(
            "{what} {name}: {} calls, {:.1} ms of {} in all",
            whole.len(),
            in_cause as f64 / 1e6,
            cause.name()
        );
        for (th, inv) in whole {
            let b = inv.breakdown;
            assert!(
                b.off.get(cause) * 2 >= DELAY_MS * MS,
                "{what} {name}: {} is {} ns of a {DELAY_MS} ms delay ({b:?})",
                cause.name(),
                b.off.get(cause)
            );
            assert!(b.cpu < DELAY_MS * MS / 2, "{what} {name}: the wait is CPU ({b:?})");
            let ns_tid = th.ns_tid.expect("the JVM's thread has a namespace tid");
            assert_ne!(ns_tid, th.tid, "{what}: the host tid is not the namespace's");
            checked += 1;
        }
    }
    assert!(
        trace.threads.values().all(|t| !t.unmatched),
        "{what}: unmatched threads"
    );
    checked
}

/// The report names the JVM's container (its cgroup is podman's), in the
/// process list, on each of its threads, and in the text.
fn check_container_identity(what: &str, out: &Path, pid: u32, id: &str) {
    assert_eq!(id.len(), 64, "{what}: podman's id {id:?}");
    let json: serde_json::Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], out)).unwrap();
    let process = (json["processes"].as_array().unwrap().iter())
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("{what}: no process {pid} in {}", json["processes"]));
    assert_eq!(process["container_id"], id, "{what}: {process}");
    assert_eq!(process["runtime"], "podman", "{what}: {process}");
    let threads: Vec<&serde_json::Value> = (json["threads"].as_array().unwrap().iter())
        .filter(|t| t["pid"] == pid)
        .collect();
    assert!(!threads.is_empty(), "{what}: no thread of {pid}");
    for t in threads {
        assert_eq!(t["container_id"], id, "{what}: thread {}", t["name"]);
    }
    let text = String::from_utf8(jtrace_stdout(&["report"], out)).unwrap();
    // Read as one text: the report wraps its lines at 120 columns.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!("(podman container {})", &id[..12])),
        "{what}: {}",
        text.lines().take(8).collect::<Vec<_>>().join("\n")
    );
}

/// Rootful containers (the JVM is root there, and on the host), every
/// JDK: a first attach places the agent in the container, a second one
/// loads the same agent by its name again (its file long removed); both
/// traces meet the ground truth, and the container's /tmp holds nothing of
/// jtrace's after either.
#[test]
fn attach_into_a_container_meets_the_ground_truth() {
    let podman = Podman::rootful();
    for jdk in JDKS {
        let c = start_loop(podman, jdk, &[]);
        for session in ["first", "again"] {
            let what = format!("{} {session}", jdk_name(jdk));
            let out = tempdir("ctr-gt").join("t.jtrace");
            let o = attach_as(
                None,
                c.pid,
                &[
                    "--duration",
                    "3s",
                    "--methods",
                    "GroundTruth.*",
                    "--complete",
                    "-o",
                    s(&out),
                ],
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{what}: {err}");
            assert!(err.contains("(in a container)"), "{what}: {err}");
            assert!(!err.contains("WARNING"), "{what}: {err}");
            let n = check_ground_truth(&what, &out);
            assert!(n >= 3, "{what}: {n} calls");
            check_container_identity(&what, &out, c.pid, &c.id());
            assert_eq!(jtrace_dirs(&c), Vec::<String>::new(), "{what}: left in the container");
        }
    }
}

/// A rootless container of the test account (its uid 1000 is host uid
/// 100999), attached to by that account through sudo (the kernel lets the
/// owner of a user namespace trace in it): the JVM's host ids are what
/// jtrace acts as in the container, the trace is the account's, and the
/// ground truth holds. Another user may not trace it.
#[test]
fn rootless_containers_are_traced_by_their_owner() {
    let u = hostile::test_user();
    let podman = Podman::rootless();
    for jdk in [JDK17, JDK25] {
        let c = start_loop(podman, jdk, &["--user", "1000:1000"]);
        let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid)).unwrap();
        assert!(
            status.lines().any(|l| l.starts_with("Uid:") && l.contains("100999")),
            "the JVM's host uid: {status}"
        );
        let base = hostile::dir_of(tempdir("ctr-rootless").join("home"), u.uid, u.gid, 0o755);
        let out = base.join("t.jtrace");
        let what = format!("{} rootless", jdk_name(jdk));
        let o = attach_as(
            Some((u.uid, u.gid)),
            c.pid,
            &[
                "--duration",
                "3s",
                "--methods",
                "GroundTruth.*",
                "--complete",
                "-o",
                s(&out),
            ],
        );
        assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
        check_ground_truth(&what, &out);
        for e in std::fs::read_dir(&out).unwrap() {
            use std::os::unix::fs::MetadataExt;
            let md = e.unwrap().metadata().unwrap();
            assert_eq!(
                (md.uid(), md.mode() & 0o777),
                (u.uid, 0o600),
                "{what}: trace file owner"
            );
        }
        assert_eq!(jtrace_dirs(&c), Vec::<String>::new(), "{what}: left in the container");
        // Someone else (uid 65534) may not.
        let other = tempdir("ctr-other").join("t.jtrace");
        let o = attach_as(Some((65534, 65534)), c.pid, &["--duration", "1s", "-o", s(&other)]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("may not trace process"));
        assert!(!other.exists());
    }
}

/// A `jtrace attach` killed while it records leaves its session running
/// in the JVM and its directory in the container: `jtrace attach PID
/// --stop` ends the session and removes the directory; a new attach then
/// records as usual. A ring recording into a container is refused before
/// anything is placed there.
#[test]
fn a_killed_attach_is_cleaned_up_by_stop() {
    let podman = Podman::rootful();
    let c = start_loop(podman, JDK17, &[]);
    let base = tempdir("ctr-killed");
    let o = attach_as(
        None,
        c.pid,
        &["--duration", "5s", "--max-size", "100M", "-o", s(&base.join("ring"))],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("ring recording") && err.contains("container"), "{err}");
    assert!(!base.join("ring").exists());
    assert_eq!(jtrace_dirs(&c), Vec::<String>::new());

    ensure_agent();
    let mut j = Command::new(jtrace())
        .args([
            "attach",
            &c.pid.to_string(),
            "--duration",
            "60s",
            "--methods",
            "GroundTruth.*",
            "-o",
        ])
        .arg(base.join("killed"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = j.stderr.take().unwrap();
    let (mut log, mut byte, t0) = (Vec::new(), [0u8; 1], Instant::now());
    while !String::from_utf8_lossy(&log).contains("recording") {
        assert!(
            err.read(&mut byte).unwrap() == 1 && t0.elapsed() < Duration::from_secs(60),
            "attach did not start: {}",
            String::from_utf8_lossy(&log)
        );
        log.push(byte[0]);
    }
    j.kill().unwrap();
    j.wait().unwrap();
    assert_eq!(jtrace_dirs(&c).len(), 1, "the killed session's directory");
    let o = attach_as(None, c.pid, &["--stop"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("stopped the jtrace session"), "{err}");
    assert_eq!(jtrace_dirs(&c), Vec::<String>::new(), "--stop left the directory");
    let out = base.join("after");
    let o = attach_as(
        None,
        c.pid,
        &[
            "--duration",
            "3s",
            "--methods",
            "GroundTruth.*",
            "--complete",
            "-o",
            s(&out),
        ],
    );
    assert!(o.status.success());
    check_ground_truth("after --stop", &out);
}

/// A JVM that ends while jtrace records, its container removed with it
/// (`podman run --rm`): its agent wrote the stream's end at VM death, and
/// jtrace, which has held the stream open since the agent made it, copies
/// it all the same. The trace is complete and says the process exited.
#[test]
fn a_jvm_that_ends_with_its_container_leaves_a_complete_trace() {
    let podman = Podman::rootful();
    let java = java(JDK17);
    let delay = DELAY_MS.to_string();
    let c = podman.run(
        &[],
        &[
            java.to_str().unwrap(),
            "-cp",
            "/classes",
            "GroundTruthLoop",
            &delay,
            "8",
        ],
    );
    c.wait_for("ready");
    let out = tempdir("ctr-exit").join("t.jtrace");
    let o = attach_as(
        None,
        c.pid,
        &[
            "--duration",
            "60s",
            "--methods",
            "GroundTruth.*",
            "--complete",
            "-o",
            s(&out),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("process exited"), "{err}");
    assert!(!err.contains("WARNING"), "{err}");
    check_ground_truth("exited", &out);
}

//! `jtrace record --cgroup`: every process of a real cgroup subtree (v2
//! where the host's root cgroup offers the cpu controller, else v1's cpu
//! hierarchy), with what they fork, and those moved into it while
//! recording from the move on; nothing outside it.

mod common;

use common::cgroup::{forking_loop, lines_until, mono_ns, start_jtrace, Subtree};
use common::*;
use jtrace_merge::Trace;
use std::process::Command;

/// Two processes of a subtree (one in a child cgroup) are recorded with
/// the processes they fork; a process outside it, and what it forks, is
/// not.
#[test]
fn every_process_of_the_subtree_and_nothing_else() {
    let mut sub = Subtree::new("members");
    let top = sub.spawn("", &forking_loop("/bin/true"));
    let inner = sub.spawn("inner", &forking_loop("/bin/true"));
    let mut outsider = Command::new("sh")
        .args(["-c", &forking_loop("cat /dev/null")])
        .spawn()
        .unwrap();
    let out = tempdir("rec-cgroup").join("t.jtrace");
    let o = Command::new(jtrace())
        .args(["record", "--cgroup", &sub.path(), "--duration", "1s", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let _ = outsider.kill();
    let _ = outsider.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(" processes of cgroup {} for 1s", sub.path())),
        "{err}"
    );
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert_eq!(trace.meta.command, ["--cgroup".to_string(), sub.path()]);
    let tgids: std::collections::BTreeSet<u32> = trace.threads.values().map(|t| t.tgid).collect();
    assert!(tgids.contains(&top) && tgids.contains(&inner), "{tgids:?}");
    assert!(!tgids.contains(&outsider.id()), "the outsider was recorded");
    let comms: std::collections::BTreeSet<&str> = trace.threads.values().map(|t| t.comm.as_str()).collect();
    assert!(comms.contains("true"), "their children were not followed: {comms:?}");
    assert!(
        !comms.contains("cat"),
        "the outsider's children were recorded: {comms:?}"
    );
    // Both processes are in the report's processes, each in its cgroup.
    let json: serde_json::Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], &out)).unwrap();
    let cgroup_of = |pid: u32| -> String {
        (json["processes"].as_array().unwrap().iter())
            .find(|p| p["pid"] == pid)
            .map(|p| p["cgroup"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(cgroup_of(top), sub.path());
    assert_eq!(cgroup_of(inner), format!("{}/inner", sub.path()));
    std::fs::remove_dir_all(out.parent().unwrap()).ok();
}

/// A cgroup that does not exist, a path that climbs out, an empty cgroup:
/// each a clear error, no trace written.
#[test]
fn bad_cgroups_are_clear_errors() {
    let sub = Subtree::new("empty");
    for (path, says) in [
        ("/jtrace-no-such-cgroup", "no cgroup /jtrace-no-such-cgroup in the"),
        ("/../etc", "give its path from the hierarchy's root"),
        ("etc", "give its path from the hierarchy's root"),
        (sub.path().as_str(), "no process in cgroup"),
    ] {
        let out = tempdir("rec-cgroup-bad").join("t.jtrace");
        let o = Command::new(jtrace())
            .args(["record", "--cgroup", path, "--duration", "1s", "-o"])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{path}: {err}");
        assert!(err.contains(says), "{path}: {err}");
        assert!(!out.exists(), "{path}: a trace was written");
    }
    // --pid and --cgroup together: one or the other.
    let o = Command::new(jtrace())
        .args(["record", "--pid", "1", "--cgroup", "/", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// The earliest event of process `pid`'s threads in `trace`, if it has any.
fn first_event(trace: &Trace, pid: u32) -> Option<u64> {
    (trace.threads.values())
        .filter(|t| t.tgid == pid)
        .filter_map(|t| Some(trace.events.get(&t.tid)?.first()?.ts))
        .min()
}

/// A process moved into the subtree (its child cgroup) 300 ms into the
/// recording: recorded from the move on, with what it forks from then
/// on; nothing of it before (it forked `cat` every 20 ms outside the
/// subtree meanwhile). `env` chooses how joins are seen; `within`: how
/// soon after the move its first event must come.
fn moved_in(name: &str, env: &[(&str, &str)], says: &str, within: u64) {
    let mut sub = Subtree::new(name);
    sub.spawn("", &forking_loop("/bin/true"));
    let mut mover = Command::new("sh")
        .args(["-c", &forking_loop("cat /dev/null")])
        .spawn()
        .unwrap();
    let out = tempdir("rec-cgroup-join").join("t.jtrace");
    let path = sub.path();
    let (mut child, rx) = start_jtrace(
        &[
            "record",
            "--cgroup",
            &path,
            "--duration",
            "2s",
            "-o",
            out.to_str().unwrap(),
        ],
        env,
    );
    // The kernel side records once this is said.
    let mut err = lines_until(&rx, "processes that enter the cgroup are recorded");
    assert!(err.last().unwrap().contains(says), "{err:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = sub.adopt("inner", mover.id());
    let after = mono_ns();
    let st = child.wait().unwrap();
    err.extend(rx.iter());
    let _ = mover.kill();
    let _ = mover.wait();
    assert!(st.success(), "{err:#?}");
    let joined = format!("process {} (sh) entered the cgroup; recorded from ", mover.id());
    assert!(err.iter().any(|l| l.contains(&joined)), "{err:#?}");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    let first = first_event(&trace, mover.id()).expect("the process moved in was not recorded");
    assert!(
        first >= before,
        "recorded {} ms before it was moved in",
        (before - first) / 1_000_000
    );
    eprintln!(
        "figure: first event of the process moved in {:.1} ms after the move began",
        (first - before) as f64 / 1e6
    );
    assert!(
        first <= after + within,
        "its first event came {} ms after the move",
        (first - after) / 1_000_000
    );
    // What it forked after the move is recorded; nothing from before.
    let cats: Vec<u64> = (trace.threads.values())
        .filter(|t| t.comm == "cat")
        .map(|t| t.first_ts)
        .collect();
    assert!(!cats.is_empty(), "its children after the move were not followed");
    assert!(
        cats.iter().all(|&t| t >= before),
        "a child forked before the move was recorded"
    );
    // Its cgroup is in the trace as for a process there from the start.
    let json = report_json(&out);
    let cgroup = (json["processes"].as_array().unwrap().iter())
        .find(|p| p["pid"] == mover.id())
        .map(|p| p["cgroup"].as_str().unwrap().to_string());
    assert_eq!(cgroup, Some(format!("{path}/inner")));
}

/// On the tracepoint: from the very move (its first event within 200 ms:
/// it wakes every 20 ms).
#[test]
fn a_process_moved_in_is_recorded_from_the_move_on() {
    moved_in("join", &[], "from the instant each enters", 200_000_000);
}

/// Without the tracepoint (as on a kernel that lacks it): a read of the
/// subtree every 250 ms finds it, within a second.
#[test]
fn without_the_tracepoint_a_rescan_finds_it() {
    moved_in(
        "rescan",
        &[("JTRACE_CGROUP_RESCAN", "1")],
        "every 250 ms",
        1_000_000_000,
    );
}

/// Invoked through sudo by an unprivileged account: a joiner of that
/// account is recorded from the move on (its credentials are the
/// account's), one of root's is not (the kernel does not let the account
/// trace it), and says so.
#[test]
fn a_joiner_the_invoking_user_may_not_trace_is_not_recorded() {
    use std::os::unix::process::CommandExt;
    let u = hostile::test_user();
    let sub = Subtree::new("rights");
    let as_user = |script: &str| {
        Command::new("sh")
            .args(["-c", script])
            .uid(u.uid)
            .gid(u.gid)
            .spawn()
            .unwrap()
    };
    let mut member = as_user(&forking_loop("/bin/true"));
    sub.adopt("", member.id());
    let mut theirs = as_user(&forking_loop("cat /dev/null"));
    let mut roots = Command::new("sh")
        .args(["-c", &forking_loop("/bin/echo >/dev/null")])
        .spawn()
        .unwrap();
    let out = tempdir("rec-cgroup-rights").join("t.jtrace");
    let (mut child, rx) = start_jtrace(
        &[
            "record",
            "--cgroup",
            &sub.path(),
            "--duration",
            "2s",
            "-o",
            out.to_str().unwrap(),
        ],
        &[("SUDO_UID", &u.uid.to_string()), ("SUDO_GID", &u.gid.to_string())],
    );
    let mut err = lines_until(&rx, "processes that enter the cgroup are recorded");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = sub.adopt("inner", theirs.id());
    sub.adopt("inner", roots.id());
    let st = child.wait().unwrap();
    err.extend(rx.iter());
    for c in [&mut member, &mut theirs, &mut roots] {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(st.success(), "{err:#?}");
    let theirs_joined = format!("process {} (sh) entered the cgroup; recorded from then on", theirs.id());
    assert!(err.iter().any(|l| l.contains(&theirs_joined)), "{err:#?}");
    let refused = format!(
        "process {} (sh) entered the cgroup and is NOT recorded: uid {}",
        roots.id(),
        u.uid
    );
    assert!(err.iter().any(|l| l.contains(&refused)), "{err:#?}");
    let trace = Trace::open(&out).unwrap();
    assert!(first_event(&trace, theirs.id()).is_some_and(|t| t >= before));
    assert_eq!(first_event(&trace, roots.id()), None, "root's process was recorded");
    assert!(
        !trace.threads.values().any(|t| t.comm == "echo"),
        "root's children were recorded"
    );
}

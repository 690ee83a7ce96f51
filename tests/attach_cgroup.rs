//! `jtrace attach --cgroup`: every JVM of a real cgroup subtree attached,
//! all recorded on the kernel side into one trace, a JVM that enters the
//! cgroup or starts in it while recording attached too, one that cannot
//! be attached named in the trace without losing the others, and nothing
//! of a process outside the cgroup. The JVMs run AttachTarget as uid
//! 65534, the invoking user (SUDO_UID) of these tests.

mod common;

use common::cgroup::{forking_loop, lines_until, mono_ns, start_jtrace, Subtree};
use common::*;
use jtrace_merge::Trace;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

const SUDO: [(&str, &str); 2] = [("SUDO_UID", "65534"), ("SUDO_GID", "65534")];

/// An AttachTarget (`java_args` before the class), or `sh -c script` that
/// runs one, as uid 65534; with its stdout and the file of its call times.
struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
    times: PathBuf,
}

impl Target {
    /// Started, not waited for ([`Target::wait_ready`]).
    fn java(dir: &Path, name: &str, java_args: &[&str]) -> Target {
        let times = dir.join(format!("{name}.times"));
        let mut cmd = Command::new(java(JDK17));
        cmd.args(java_args)
            .arg("-cp")
            .arg(classes())
            .arg("AttachTarget")
            .arg(&times);
        Target::spawn(cmd, times)
    }

    /// [`Target::java`]s started together, each ready.
    fn javas(dir: &Path, which: &[(&str, &[&str])]) -> Vec<Target> {
        let mut all: Vec<Target> = which.iter().map(|(name, args)| Target::java(dir, name, args)).collect();
        all.iter_mut().for_each(Target::wait_ready);
        all
    }

    /// `sh -c '<script> java … AttachTarget <times>'`: the JVM starts
    /// when the script has run (not waited for).
    fn later(dir: &Path, name: &str, script: &str) -> Target {
        let times = dir.join(format!("{name}.times"));
        // Not the script's last command: a shell would exec it, not fork it.
        let java = format!(
            "{script} {} -cp {} AttachTarget {}; exit $?",
            java(JDK17).display(),
            classes().display(),
            times.display()
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &java]);
        Target::spawn(cmd, times)
    }

    fn spawn(mut cmd: Command, times: PathBuf) -> Target {
        // Before any attach: a JVM keeps the first agent library it loaded.
        ensure_agent();
        let mut child = cmd
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Target { child, out, times }
    }

    fn wait_ready(&mut self) {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "AttachTarget did not start");
    }

    /// The JVM's pid: the child's, or (started by a script) the script's child's.
    fn jvm_pid(&self) -> u32 {
        let me = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")).unwrap_or_default();
        children.split_whitespace().next().map_or(me, |c| c.parse().unwrap())
    }

    /// Ends it (closes its stdin): it must finish as if nothing happened
    /// (its summary, exit code 7). Returns the times of its calls.
    fn finish(mut self) -> Vec<u64> {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let times: Vec<u64> = std::fs::read_to_string(&self.times)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let calls = times.len();
        let sum: u64 = (0..calls as u64).filter(|i| i % 50 != 49).sum();
        let summary = format!("calls {calls} thrown {} sum {sum}\n", calls / 50);
        assert!(rest.ends_with(&summary), "output changed: {rest:?}");
        assert_eq!(st.code(), Some(7), "exit code changed");
        times
    }
}

/// `jtrace attach --cgroup <path> <args>` as uid 65534 through sudo, its
/// stderr read line by line.
fn start_attach(path: &str, out: &Path, args: &[&str]) -> (Child, Receiver<String>) {
    let out = out.to_str().unwrap();
    let mut argv = vec!["attach", "--cgroup", path, "--methods", "AttachTarget.*", "-o", out];
    argv.extend_from_slice(args);
    start_jtrace(&argv, &SUDO)
}

/// Waits for jtrace to end; it must succeed. All it said.
fn finish_attach(mut child: Child, rx: Receiver<String>, mut err: Vec<String>) -> Vec<String> {
    let st = child.wait().unwrap();
    err.extend(rx.iter());
    assert!(st.success(), "jtrace attach --cgroup failed: {err:#?}");
    err
}

fn said(err: &[String], what: &str) -> bool {
    err.iter().any(|l| l.contains(what))
}

/// JVM `pid`'s traced AttachTarget.work calls, each the program's own
/// call made then (`times`): consecutive, none missed inside the window,
/// only the last one cut by the stop. Returns how many.
fn check_calls(trace: &Trace, pid: u32, times: &[u64]) -> usize {
    let mut entries: Vec<(u64, bool)> = invocations(trace)
        .into_iter()
        .filter(|(t, inv)| t.tgid == pid && trace.methods[inv.method as usize].qualified() == "AttachTarget.work")
        .map(|(_, inv)| (inv.entry, inv.unfinished))
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "JVM {pid}: no call traced");
    let first = times.partition_point(|&t| t <= entries[0].0) - 1;
    for (k, &(entry, unfinished)) in entries.iter().enumerate() {
        let i = first + k;
        assert!(
            times[i] <= entry && times.get(i + 1).is_none_or(|&next| entry < next),
            "JVM {pid}: traced call {k} is not call {i}: a call inside the window was missed"
        );
        assert!(!unfinished || k == entries.len() - 1, "JVM {pid}: call {i} has no exit");
    }
    entries.len()
}

/// Two JVMs of a cgroup (one in a child cgroup) and a third moved into it
/// a moment into the recording: all three attached, their calls exact,
/// the third recorded from its move on; a process outside is not
/// recorded at all.
#[test]
fn every_jvm_of_the_cgroup_and_one_that_enters_it() {
    let dir = tempdir("attach-cgroup");
    let sub = Subtree::new("jvms");
    let mut t = Target::javas(&dir, &[("a", &[]), ("b", &[]), ("c", &[])]).into_iter();
    let (a, b, c) = (t.next().unwrap(), t.next().unwrap(), t.next().unwrap());
    let (pa, pb, pc) = (a.child.id(), b.child.id(), c.child.id());
    sub.adopt("", pa);
    sub.adopt("inner", pb);
    let mut outsider = Command::new("sh")
        .args(["-c", &forking_loop("cat /dev/null")])
        .spawn()
        .unwrap();
    let out = dir.join("t.jtrace");
    let (child, rx) = start_attach(&sub.path(), &out, &["--duration", "2s"]);
    let err = lines_until(&rx, "JVM(s) of the cgroup in");
    let line = err.last().unwrap();
    assert!(line.contains("attached to 2 JVM(s)"), "{err:#?}");
    eprintln!("figure: {line}");
    std::thread::sleep(Duration::from_millis(500));
    let before = sub.adopt("", pc);
    let after = mono_ns();
    let err = finish_attach(child, rx, err);
    let (ta, tb, tc) = (a.finish(), b.finish(), c.finish());
    let _ = outsider.kill();
    let _ = outsider.wait();
    for p in [pa, pb, pc] {
        assert!(said(&err, &format!("attached to JVM {p} (java)")), "{err:#?}");
    }
    let joined = format!("process {pc} (java) entered the cgroup; recorded from then on");
    assert!(said(&err, &joined), "{err:#?}");

    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert!(trace.meta.jvms_not_attached.is_empty());
    assert_eq!(trace.losses.jvm, 0);
    assert!(trace.losses.agent_errors.is_empty(), "{:?}", trace.losses.agent_errors);
    assert!(trace.losses.truncated.is_empty(), "{:?}", trace.losses.truncated);
    let mut jvms = trace.jvm_pids.clone();
    jvms.sort();
    assert_eq!(jvms, [pa, pb, pc]);
    for p in [pa, pb, pc] {
        assert!(out.join(format!("jvm-{p}.bin")).is_file());
    }
    assert_exact(&trace);
    // Each JVM's calls while attached, exactly; the first two over most of
    // the recording (a call a millisecond or so).
    let calls = [
        check_calls(&trace, pa, &ta),
        check_calls(&trace, pb, &tb),
        check_calls(&trace, pc, &tc),
    ];
    assert!(calls[0] > 500 && calls[1] > 500, "calls traced: {calls:?}");
    // The third from its move on, and not before: its worker wakes every
    // millisecond, so its first event comes right after the move.
    let first_c = (trace.threads.values())
        .filter(|t| t.tgid == pc)
        .filter_map(|t| Some(trace.events.get(&t.tid)?.first()?.ts))
        .min()
        .unwrap();
    assert!(first_c >= before, "JVM {pc} recorded before it entered the cgroup");
    assert!(
        first_c <= after + 200_000_000,
        "JVM {pc}'s first event came {} ms after its move",
        (first_c - after) / 1_000_000
    );
    // Nothing of the outsider or its children.
    assert!(!trace
        .threads
        .values()
        .any(|t| t.tgid == outsider.id() || t.comm == "cat"));
    // The trace is the invoking user's (no JVM's user ever owned it).
    let md = std::fs::metadata(&out).unwrap();
    assert_eq!(md.uid(), 65534);
    // The JVMs' /tmp keeps nothing of their sessions (other tests' may
    // be there: theirs hold other streams).
    let ours = [pa, pb, pc].map(|p| format!("jvm-{p}.bin"));
    let left: Vec<PathBuf> = (std::fs::read_dir("/tmp").unwrap().filter_map(|e| e.ok()))
        .filter(|e| e.file_name().to_string_lossy().starts_with(".jtrace-"))
        .map(|e| e.path())
        .filter(|d| ours.iter().any(|s| d.join(s).exists()))
        .collect();
    assert!(left.is_empty(), "session directories left: {left:?}");
}

/// A JVM that refuses attach (-XX:+DisableAttachMechanism) is named in
/// the trace with why, and the others are traced all the same, among them
/// one that a process of the cgroup starts while recording (attached once
/// it has finished starting).
#[test]
fn a_jvm_that_cannot_be_attached_is_named_and_the_others_traced() {
    let dir = tempdir("attach-cgroup-refused");
    let sub = Subtree::new("refused");
    let mut t = Target::javas(&dir, &[("a", &[]), ("d", &["-XX:+DisableAttachMechanism"])]).into_iter();
    let (a, d) = (t.next().unwrap(), t.next().unwrap());
    // A shell of the cgroup that starts a JVM once told to, while jtrace
    // records.
    let go = dir.join("go");
    let wait = format!("while [ ! -e {} ]; do sleep 0.02; done;", go.display());
    let mut e = Target::later(&dir, "e", &wait);
    let (pa, pd) = (a.child.id(), d.child.id());
    sub.adopt("", pa);
    sub.adopt("", pd);
    sub.adopt("inner", e.child.id());
    let out = dir.join("t.jtrace");
    let (child, rx) = start_attach(&sub.path(), &out, &["--duration", "3s"]);
    let err = lines_until(&rx, "JVM(s) of the cgroup in");
    std::fs::write(&go, "").unwrap();
    let err = finish_attach(child, rx, err);
    e.wait_ready();
    let pe = e.jvm_pid();
    assert_ne!(pe, e.child.id());
    let (ta, te) = (a.finish(), e.finish());
    let mut d = d.child;
    drop(d.stdin.take());
    let _ = d.wait();
    assert!(said(&err, &format!("attached to JVM {pa} (java)")), "{err:#?}");
    assert!(said(&err, &format!("attached to JVM {pe} (java)")), "{err:#?}");
    let refused = format!("JVM {pd} (java) is NOT attached: the JVM {pd} was started with -XX:+DisableAttachMechanism");
    assert!(said(&err, &refused), "{err:#?}");

    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert_eq!(trace.meta.jvms_not_attached.len(), 1);
    assert_eq!(trace.meta.jvms_not_attached[0].pid, pd);
    assert!(trace.meta.jvms_not_attached[0].why.contains("DisableAttachMechanism"));
    let mut jvms = trace.jvm_pids.clone();
    jvms.sort();
    assert_eq!(jvms, [pa, pe]);
    assert!(check_calls(&trace, pa, &ta) > 500);
    assert!(check_calls(&trace, pe, &te) > 0);
    // The JVM not attached: its kernel side only.
    assert!(trace.threads.values().any(|t| t.tgid == pd));
    assert!(!trace.threads.values().any(|t| t.tgid == pd && t.java_name.is_some()));
    // The report says so before its figures.
    let report = report_text(&out);
    assert!(report.contains(&format!("JVM {pd} was not attached")), "{report}");
}

/// The cgroup a test's containers are put under (`podman run
/// --cgroup-parent`), as Kubernetes puts a pod's: removed, with what
/// podman left in it (its `conmon` cgroup), from every hierarchy podman
/// made it in when dropped (after the containers).
struct CgroupParent(String);

impl Drop for CgroupParent {
    fn drop(&mut self) {
        fn remove(dir: &Path) {
            for e in std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok()) {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&e.path());
                }
            }
            for _ in 0..40 {
                if !dir.exists() || std::fs::remove_dir(dir).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().filter_map(|e| e.ok()) {
            remove(&h.path().join(self.0.trim_start_matches('/')));
        }
    }
}

/// A pod: two containers (rootful podman) under one cgroup, as a
/// Kubernetes pod's containers are, each JVM pid 1 in its own pid
/// namespace. `attach --cgroup` run as root on the node (the pod recipe
/// of docs/CONTAINERS.md) attaches both, keeps their streams apart
/// (`jvm-<host pid>.bin`), gives each call to its own process, and leaves
/// nothing in the containers.
#[test]
fn a_pod_of_two_containers() {
    use common::containers::{Container, Podman};
    let parent = CgroupParent(format!("/jtrace-test-{}-pod", std::process::id()));
    let podman = Podman::rootful();
    let java = java(JDK17);
    let cmd = [java.to_str().unwrap(), "-cp", "/classes", "AttachTarget", "/tmp/times"];
    // -i: AttachTarget runs until its stdin closes.
    let opts = ["-i", "--cgroup-parent", &parent.0];
    let pod: Vec<Container> = (0..2).map(|_| podman.run(&opts, &cmd)).collect();
    for c in &pod {
        c.wait_for("ready");
        let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid)).unwrap();
        assert!(status.contains("NSpid:\t") && status.lines().any(|l| l.starts_with("NSpid:") && l.ends_with("\t1")));
    }
    ensure_agent();
    let out = tempdir("attach-pod").join("t.jtrace");
    let o = Command::new(jtrace())
        .args([
            "attach",
            "--cgroup",
            &parent.0,
            "--duration",
            "2s",
            "--methods",
            "AttachTarget.*",
            "-o",
        ])
        .arg(&out)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("--- jtrace attach --cgroup\n{err}");
    assert!(o.status.success(), "{err}");
    for c in &pod {
        assert!(
            err.contains(&format!("attached to JVM {} (java) (in a container)", c.pid)),
            "{err}"
        );
    }
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    let mut pids: Vec<u32> = pod.iter().map(|c| c.pid).collect();
    pids.sort();
    let mut jvms = trace.jvm_pids.clone();
    jvms.sort();
    assert_eq!(jvms, pids);
    assert!(trace.threads.values().all(|t| !t.unmatched), "unmatched threads");
    let invs = invocations(&trace);
    for c in &pod {
        assert!(out.join(format!("jvm-{}.bin", c.pid)).is_file());
        let calls = (invs.iter())
            .filter(|(t, inv)| t.tgid == c.pid && trace.methods[inv.method as usize].qualified() == "AttachTarget.work")
            .count();
        assert!(calls > 300, "JVM {}: {calls} calls traced", c.pid);
        // Its Java threads are its own: named in its namespace's numbers.
        let worker = (trace.threads.values())
            .find(|t| t.tgid == c.pid && t.java_name.as_deref() == Some("attach-worker"))
            .unwrap_or_else(|| panic!("JVM {}: no worker", c.pid));
        assert!(worker.ns_tid.is_some_and(|n| n != worker.tid));
        let left: Vec<String> = c.ls("/tmp").into_iter().filter(|n| n.starts_with(".jtrace-")).collect();
        assert!(left.is_empty(), "left in the container: {left:?}");
    }
}

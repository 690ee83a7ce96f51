//! `jtrace record --cgroup`: every process of a real cgroup subtree (v2
//! where the host's root cgroup offers the cpu controller, else v1's cpu
//! hierarchy), with what they fork; nothing outside it.

mod common;

use common::*;
use jtrace_merge::Trace;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A cgroup `jtrace-test-<pid>-<name>` with a child `inner`, removed (with
/// its processes killed) when dropped.
struct Subtree {
    dir: PathBuf,
    children: Vec<Child>,
}

impl Subtree {
    fn new(name: &str) -> Subtree {
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"));
        let root = if v2 { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/cpu" };
        let dir = Path::new(root).join(format!("jtrace-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        Subtree { dir, children: vec![] }
    }

    /// Its path as /proc/PID/cgroup names it.
    fn path(&self) -> String {
        format!("/{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    /// Starts `sh -c script` in `sub` (relative to the subtree, "" itself).
    fn spawn(&mut self, sub: &str, script: &str) -> u32 {
        let child = Command::new("sh").args(["-c", script]).spawn().unwrap();
        let pid = child.id();
        std::fs::write(self.dir.join(sub).join("cgroup.procs"), pid.to_string()).unwrap();
        self.children.push(child);
        pid
    }
}

impl Drop for Subtree {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for _ in 0..100 {
            let _ = std::fs::remove_dir(self.dir.join("inner"));
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// A loop that forks `cmd` every 20 ms.
fn forking_loop(cmd: &str) -> String {
    format!("while :; do {cmd}; sleep 0.02; done")
}

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

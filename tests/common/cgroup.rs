//! Real cgroups for the tests of `--cgroup` (tests/record_cgroup.rs,
//! tests/attach_cgroup.rs): a subtree made by the test (v2 where the
//! host's root cgroup offers the cpu controller, else v1's cpu hierarchy),
//! with processes moved into it, and the clock they are timed on.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A cgroup `jtrace-test-<pid>-<name>` with a child `inner`, removed (with
/// its processes killed) when dropped.
pub struct Subtree {
    pub dir: PathBuf,
    children: Vec<Child>,
}

impl Subtree {
    pub fn new(name: &str) -> Subtree {
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"));
        let root = if v2 { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/cpu" };
        let dir = Path::new(root).join(format!("jtrace-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        Subtree { dir, children: vec![] }
    }

    /// Its path as /proc/PID/cgroup names it.
    pub fn path(&self) -> String {
        format!("/{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    /// Moves process `pid` into `sub` (relative to the subtree, "" itself);
    /// returns the CLOCK_MONOTONIC time just before the move.
    pub fn adopt(&self, sub: &str, pid: u32) -> u64 {
        let before = mono_ns();
        std::fs::write(self.dir.join(sub).join("cgroup.procs"), pid.to_string()).unwrap();
        before
    }

    /// Starts `sh -c script` in `sub` (relative to the subtree, "" itself).
    pub fn spawn(&mut self, sub: &str, script: &str) -> u32 {
        let child = Command::new("sh").args(["-c", script]).spawn().unwrap();
        let pid = child.id();
        self.adopt(sub, pid);
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
pub fn forking_loop(cmd: &str) -> String {
    format!("while :; do {cmd}; sleep 0.02; done")
}

/// CLOCK_MONOTONIC now (the trace's clock), ns.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

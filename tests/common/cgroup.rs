//! Real cgroups for the tests of `--cgroup` (tests/record_cgroup.rs,
//! tests/attach_cgroup.rs): a subtree made by the test (v2 where the
//! host's root cgroup offers the cpu controller, else v1's cpu hierarchy),
//! with processes moved into it, the clock they are timed on, and jtrace
//! run in the background with its messages read as they come.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

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

/// `jtrace <args>` started with `env`, its stderr read line by line
/// (passed on to the test's, and sent to the receiver).
pub fn start_jtrace(args: &[&str], env: &[(&str, &str)]) -> (Child, Receiver<String>) {
    let mut child = Command::new(super::jtrace())
        .args(args)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            eprintln!("jtrace: | {line}");
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Lines from `rx` until one contains `what` (within 60 s), all of them.
pub fn lines_until(rx: &Receiver<String>, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let line = (rx.recv_timeout(Duration::from_secs(60)))
            .unwrap_or_else(|_| panic!("no line with {what:?} from jtrace; got {seen:#?}"));
        let found = line.contains(what);
        seen.push(line);
        if found {
            return seen;
        }
    }
}

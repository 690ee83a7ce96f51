//! The HotSpot dynamic attach protocol (what `jcmd` and the Attach API
//! speak), used to load the jtrace agent into a running JVM.
//!
//! 1. If the JVM's attach listener is not running, create the trigger file
//!    `.attach_pid<ns-pid>` in its working directory (or its /tmp) and send
//!    SIGQUIT; the JVM then opens the Unix socket `/tmp/.java_pid<ns-pid>`.
//! 2. Connect to that socket (through /proc/<pid>/root, so containers work)
//!    and send `1\0load\0<agent path>\0true\0<options>\0`.
//! 3. Read the reply: `0\n` when the command ran, then the agent's return
//!    code from Agent_OnAttach.

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The pid of `pid` inside its own pid namespace (HotSpot names its files with it).
fn ns_pid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(pid)
}

fn socket_path(pid: u32, nspid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root/tmp/.java_pid{nspid}"))
}

/// True if `pid` looks like a HotSpot JVM (it maps libjvm.so).
pub fn is_hotspot(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("/libjvm.so"))
}

fn start_listener(pid: u32, nspid: u32, sock: &Path) -> anyhow::Result<()> {
    if sock.exists() {
        return Ok(());
    }
    let candidates = [
        PathBuf::from(format!("/proc/{pid}/cwd/.attach_pid{nspid}")),
        PathBuf::from(format!("/proc/{pid}/root/tmp/.attach_pid{nspid}")),
    ];
    let trigger = candidates
        .iter()
        .find(|p| std::fs::write(p, b"").is_ok())
        .with_context(|| format!("cannot create the attach trigger file for pid {pid}"))?;
    // HotSpot only believes a trigger file owned by its own user.
    if let Ok(md) = std::fs::metadata(format!("/proc/{pid}")) {
        use std::os::unix::fs::MetadataExt;
        let _ = std::os::unix::fs::chown(trigger, Some(md.uid()), Some(md.gid()));
    }
    if unsafe { libc::kill(pid as i32, libc::SIGQUIT) } != 0 {
        let _ = std::fs::remove_file(trigger);
        bail!("cannot signal pid {pid}: {}", std::io::Error::last_os_error());
    }
    let t0 = Instant::now();
    while !sock.exists() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = std::fs::remove_file(trigger);
            bail!("pid {pid} did not start its attach listener within 10 s (is it a HotSpot JVM started with attach enabled?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(trigger);
    Ok(())
}

/// Loads the agent at `agent` (an absolute path) into JVM `pid` with
/// `options`; returns the agent's Agent_OnAttach result (0 = success).
pub fn load_agent(pid: u32, agent: &Path, options: &str) -> anyhow::Result<i32> {
    if !is_hotspot(pid) {
        bail!("pid {pid} is not a running HotSpot JVM (no libjvm.so mapped)");
    }
    let nspid = ns_pid(pid);
    let sock = socket_path(pid, nspid);
    start_listener(pid, nspid, &sock)?;
    let mut s = UnixStream::connect(&sock).with_context(|| format!("cannot connect to {}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut msg = Vec::new();
    for part in ["1", "load", &agent.to_string_lossy(), "true", options] {
        msg.extend_from_slice(part.as_bytes());
        msg.push(0);
    }
    s.write_all(&msg)?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    let mut lines = reply.lines();
    let status: i32 = lines.next().unwrap_or("").trim().parse().unwrap_or(-1);
    if status != 0 {
        bail!("the JVM refused to load the agent: {}", reply.trim());
    }
    // JDK 17 answers "0\n<rc>"; newer JDKs may add a message line.
    let rc = lines.find_map(|l| l.trim().parse::<i32>().ok()).unwrap_or(0);
    Ok(rc)
}

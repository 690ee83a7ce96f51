//! The HotSpot dynamic attach protocol (what `jcmd` and the Attach API
//! speak; jattach's `jattach_hotspot.c` is the reference for the details):
//!
//! 1. If the JVM's attach listener is not running, create the trigger file
//!    `.attach_pid<nspid>` in its working directory (or its /tmp) as the
//!    JVM's user, without following a link there, and send SIGQUIT; the JVM
//!    then opens the Unix socket `/tmp/.java_pid<nspid>`. SIGQUIT is only
//!    sent to a process that catches it (a JVM started with -Xrs would dump
//!    core) and whose hsperfdata does not say attach is disabled (it would
//!    print a thread dump instead).
//! 2. Connect to the socket (as the JVM's user, since HotSpot checks the
//!    peer's credentials) and send `1\0load\0<agent>\0true\0<options>\0`.
//! 3. Read the reply: `0` when the command ran, then the return code of
//!    Agent_OnAttach (`return code: N` from JDK 9 on, an error text on JDK 21+).
//!
//! The JVM's /tmp and working directory are its own (a container's, maybe):
//! they are opened from its root and its cwd link (src/proc_root.rs), and
//! every file there is reached relative to those descriptors, without
//! following a link. The socket is checked on a descriptor of its own and
//! connected through that descriptor (`/proc/self/fd/N`: the very inode
//! checked), and the listener must be the JVM itself (SO_PEERCRED).

use crate::proc_root::{fd_path, open_in, ProcRoot};
use crate::user::User;
use anyhow::{bail, Context};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the JVM may take to open its attach socket after SIGQUIT.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the agent may take to start or stop (retransforming classes).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// What we need to know about the target process.
#[derive(Debug, Clone)]
pub(crate) struct Jvm {
    /// Host pid.
    pub(crate) pid: u32,
    /// Pid inside its own pid namespace (HotSpot names its files with it).
    pub(crate) nspid: u32,
    /// Effective user, group and groups of the JVM (host ids).
    pub(crate) user: User,
    /// Whether it sees another file system than jtrace (another mount
    /// namespace or root: a container): then the agent and its trace
    /// directory must be placed inside it (src/container.rs).
    pub(crate) in_container: bool,
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim)
}

/// Whether the process catches SIGQUIT (HotSpot does unless -Xrs).
fn catches_sigquit(status: &str) -> bool {
    status_field(status, "SigCgt:")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGQUIT - 1)) != 0)
}

/// Checks that `pid` is a live HotSpot JVM this machine can attach to.
pub(crate) fn inspect(pid: u32) -> anyhow::Result<Jvm> {
    let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("no process with pid {pid}"),
        Err(e) => return Err(e).with_context(|| format!("cannot read /proc/{pid}/status")),
    };
    let name = status_field(&status, "Name:").unwrap_or("?").to_string();
    if status_field(&status, "State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
        bail!("process {pid} ({name}) has exited");
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if !maps.lines().any(|l| l.ends_with("/libjvm.so")) {
        if maps.is_empty() {
            bail!("process {pid} ({name}) is not a JVM (it maps no libjvm.so; a kernel thread or an exiting process)");
        }
        bail!("process {pid} ({name}) is not a HotSpot JVM (it does not map libjvm.so)");
    }
    let mnt = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    let in_container = mnt("self") != mnt(&pid.to_string()) || !ProcRoot::open(pid)?.is_ours();
    let nspid = status_field(&status, "NSpid:")
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(pid);
    let Some(user) = User::from_proc_status(&status) else {
        bail!("cannot read the user of process {pid}");
    };
    let jvm = Jvm {
        pid,
        nspid,
        user,
        in_container,
    };
    if attach_disabled(&jvm) {
        bail!(
            "the JVM {pid} was started with -XX:+DisableAttachMechanism: it refuses dynamic attach; \
             trace it from its start with `jtrace run` instead"
        );
    }
    Ok(jvm)
}
/// Whether the JVM says attach is disabled: the first flag of
/// `sun.rt.jvmCapabilities` in its hsperfdata (how the Attach API decides
/// "attachable"), else -XX:+DisableAttachMechanism on its command line or in
/// the environment variables the launcher reads.
fn attach_disabled(jvm: &Jvm) -> bool {
    if let Some(caps) = hsperfdata(jvm).and_then(|data| perf_capabilities(&data)) {
        return caps.first() == Some(&b'0');
    }
    let flag = "-XX:+DisableAttachMechanism";
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", jvm.pid)).unwrap_or_default();
    if cmdline.split(|&c| c == 0).any(|a| a == flag.as_bytes()) {
        return true;
    }
    let environ = std::fs::read(format!("/proc/{}/environ", jvm.pid)).unwrap_or_default();
    environ.split(|&c| c == 0).any(|v| {
        let v = String::from_utf8_lossy(v);
        ["JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS=", "_JAVA_OPTIONS="]
            .iter()
            .any(|k| {
                v.strip_prefix(k)
                    .is_some_and(|o| o.split_whitespace().any(|w| w == flag))
            })
    })
}

/// The JVM's hsperfdata file (its performance counters, in its /tmp), if
/// it has one (-XX:-UsePerfData turns it off): read as the JVM's user,
/// whose directory it is in.
pub(crate) fn hsperfdata(jvm: &Jvm) -> Option<Vec<u8>> {
    let tmp = ProcRoot::open(jvm.pid).and_then(|r| r.tmp()).ok()?;
    jvm.user.run_as(|| Ok(perf_file(jvm, &tmp))).ok().flatten()
}

/// The JVM's hsperfdata file from its /tmp (`tmp`), if it has one.
fn perf_file(jvm: &Jvm, tmp: &OwnedFd) -> Option<Vec<u8>> {
    for e in rustix::fs::Dir::read_from(tmp).ok()? {
        let Ok(e) = e else { continue };
        let Ok(name) = e.file_name().to_str() else { continue };
        if !name.starts_with("hsperfdata_") {
            continue;
        }
        // The JVM's own directory (a stale file of another user's old
        // process with the same pid must not decide).
        let Ok(dir) = open_in(tmp, name, OFlags::RDONLY | OFlags::DIRECTORY, 0) else {
            continue;
        };
        if !rustix::fs::fstat(&dir).is_ok_and(|st| st.st_uid == jvm.user.uid.as_raw()) {
            continue;
        }
        if let Ok(data) = read_regular(&dir, &jvm.nspid.to_string()) {
            return Some(data);
        }
    }
    None
}

/// The value of `sun.rt.jvmCapabilities` (64 `0`/`1` flags) in an
/// hsperfdata file.
fn perf_capabilities(data: &[u8]) -> Option<Vec<u8>> {
    let key = b"sun.rt.jvmCapabilities\0";
    let at = data.windows(key.len()).position(|w| w == key)? + key.len();
    // The value follows the name after alignment padding.
    let rest = &data[at..];
    let start = rest.iter().position(|&b| b == b'0' || b == b'1')?;
    let val: Vec<u8> = rest[start..]
        .iter()
        .take_while(|&&b| b == b'0' || b == b'1')
        .copied()
        .collect();
    (val.len() >= 8).then_some(val)
}

/// Reads `name` in `dir` if it is a regular file (at most 1 MiB; an
/// hsperfdata file is 32 KiB): a link there is not followed, a FIFO not
/// waited on.
fn read_regular(dir: &OwnedFd, name: &str) -> std::io::Result<Vec<u8>> {
    let fd = open_in(dir, name, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, 0)?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut data = Vec::new();
    std::fs::File::from(fd).take(1 << 20).read_to_end(&mut data)?;
    Ok(data)
}

/// Whether process `pid` still runs: it exists and has not exited (a
/// zombie, which `kill(pid, 0)` still finds, has).
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) S …`: the state follows the last `)` (comm may hold one).
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// The JVM's directories its attach files are in, held open: its /tmp and
/// its working directory (as jtrace, before acting as the JVM's user).
struct JvmDirs {
    tmp: OwnedFd,
    cwd: Option<OwnedFd>,
    /// `.java_pid<nspid>`, in `tmp`.
    socket: String,
}

impl JvmDirs {
    fn open(jvm: &Jvm) -> anyhow::Result<JvmDirs> {
        let tmp = ProcRoot::open(jvm.pid)?.tmp()?;
        let cwd = rustix::fs::openat(
            rustix::fs::CWD,
            format!("/proc/{}/cwd", jvm.pid),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        Ok(JvmDirs {
            tmp,
            cwd,
            socket: format!(".java_pid{}", jvm.nspid),
        })
    }

    /// The socket's path as the JVM sees it, for messages.
    fn shown(&self) -> String {
        format!("/tmp/{}", self.socket)
    }

    /// A socket at the attach socket's name that is not the JVM's user's
    /// and that nothing listens on (left by a dead process of another user
    /// with the same pid): removed, as root, by name relative to the
    /// JVM's /tmp (nothing followed), so that this JVM can make its own.
    /// One something listens on stays, and is refused ([`attach_socket`]).
    fn clear_dead_socket(&self, jvm: &Jvm) {
        let name = self.socket.as_str();
        let Ok(st) = rustix::fs::statat(&self.tmp, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Socket || st.st_uid == jvm.user.uid.as_raw() {
            return;
        }
        if !listened_on(jvm.pid, &self.shown()) {
            let _ = rustix::fs::unlinkat(&self.tmp, name, AtFlags::empty());
        }
    }

    fn has_socket(&self) -> bool {
        rustix::fs::statat(&self.tmp, self.socket.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Socket)
    }
}

/// The JVM's attach socket, if it is there and may be trusted, opened
/// (O_PATH) without following a link: as the JDK's own client checks, it
/// must be a socket owned by the JVM's user, which no one else may write.
/// Anything else at its name was put there by someone else, and is refused.
fn attach_socket(jvm: &Jvm, dirs: &JvmDirs) -> anyhow::Result<Option<OwnedFd>> {
    let shown = dirs.shown();
    let fd = match open_in(&dirs.tmp, &dirs.socket, OFlags::PATH, 0) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => bail!("{shown} is not a socket (a link planted there?); refusing to use it"),
        Err(e) => return Err(e).with_context(|| format!("cannot look at {shown}")),
    };
    // Checked on the descriptor: what is connected below is this inode.
    let st = rustix::fs::fstat(&fd).with_context(|| format!("cannot look at {shown}"))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Socket {
        bail!("{shown} is not a socket (a link or a file planted there?); refusing to use it");
    }
    if st.st_uid != jvm.user.uid.as_raw() || st.st_mode & 0o022 != 0 {
        bail!(
            "the attach socket {shown} belongs to uid {} (mode {:o}), not to the JVM's user (uid {}) alone; \
             refusing it (another user may have planted it)",
            st.st_uid,
            st.st_mode & 0o777,
            jvm.user.uid.as_raw()
        );
    }
    Ok(Some(fd))
}

/// Connects to the socket open as `sock` (through its descriptor), and
/// checks that the JVM itself listens on it.
fn connect(jvm: &Jvm, dirs: &JvmDirs, sock: &OwnedFd) -> std::io::Result<UnixStream> {
    let s = UnixStream::connect(fd_path(sock))?;
    match peer_pid(&s) {
        Some(p) if p == jvm.pid => Ok(s),
        p => Err(std::io::Error::other(format!(
            "{} is not the JVM's: {} listens on it; refusing it",
            dirs.shown(),
            p.map_or_else(|| "an unknown process".to_string(), |p| format!("process {p}"))
        ))),
    }
}

/// The (host) pid of the process that listens on the other end of `s`.
fn peer_pid(s: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid out-pointers of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// Makes the JVM start its attach listener (trigger file + SIGQUIT); runs
/// as the JVM's user.
fn start_listener(jvm: &Jvm, dirs: &JvmDirs) -> anyhow::Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", jvm.pid)).unwrap_or_default();
    if !catches_sigquit(&status) {
        bail!(
            "the JVM {} does not handle SIGQUIT (started with -Xrs?) and has no attach listener running; \
             it cannot be attached to",
            jvm.pid
        );
    }
    let name = format!(".attach_pid{}", jvm.nspid);
    let mut trigger = None;
    for dir in [dirs.cwd.as_ref(), Some(&dirs.tmp)].into_iter().flatten() {
        match create_trigger(dir, &name) {
            Ok(true) => {
                trigger = Some(dir);
                break;
            }
            // Ours, but some file systems change the owner and HotSpot
            // would not trust it.
            Ok(false) => {
                let _ = rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty());
            }
            Err(_) => {}
        }
    }
    let Some(trigger) = trigger else {
        bail!("cannot create the attach trigger file {name} in the JVM's working directory or /tmp");
    };
    let remove_trigger = || {
        let _ = rustix::fs::unlinkat(trigger, name.as_str(), AtFlags::empty());
    };
    // SAFETY: sending a signal the target is known to catch.
    if unsafe { libc::kill(jvm.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
        let e = std::io::Error::last_os_error();
        remove_trigger();
        bail!("cannot signal the JVM {}: {e}", jvm.pid);
    }
    let t0 = Instant::now();
    let result = loop {
        if dirs.has_socket() {
            break Ok(());
        }
        if !alive(jvm.pid) {
            break Err(anyhow::anyhow!(
                "the JVM {} exited while starting its attach listener",
                jvm.pid
            ));
        }
        if t0.elapsed() > LISTENER_TIMEOUT {
            break Err(anyhow::anyhow!(
                "the JVM {} did not open its attach socket within {} s (attach disabled, or the JVM is hung)",
                jvm.pid,
                LISTENER_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    remove_trigger();
    result
}

/// Creates the attach trigger file `name` in `dir` (or opens the one
/// there), never following a link planted there and never truncating
/// anything; whether the file is a regular one owned by us, the JVM's user
/// (checked on the descriptor, not by name).
fn create_trigger(dir: &OwnedFd, name: &str) -> std::io::Result<bool> {
    let fd = open_in(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::NONBLOCK | OFlags::NOCTTY,
        0o600,
    )?;
    let st = rustix::fs::fstat(&fd)?;
    Ok(
        FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_uid == rustix::process::geteuid().as_raw(),
    )
}

/// The JVM's attach socket, its listener started if need be, connected.
/// Runs as the JVM's user.
fn open_session(jvm: &Jvm, dirs: &JvmDirs) -> anyhow::Result<UnixStream> {
    let sock = match attach_socket(jvm, dirs)? {
        Some(fd) => fd,
        None => {
            start_listener(jvm, dirs)?;
            attach_socket(jvm, dirs)?.with_context(|| format!("{} vanished", dirs.shown()))?
        }
    };
    match connect(jvm, dirs, &sock) {
        // A socket file left by an earlier process with the same pid
        // (killed before it could remove it): nobody listens on it.
        // Remove it and have this JVM start its listener.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            rustix::fs::unlinkat(&dirs.tmp, dirs.socket.as_str(), AtFlags::empty())
                .with_context(|| format!("cannot remove the stale attach socket {}", dirs.shown()))?;
            start_listener(jvm, dirs)?;
            let sock = attach_socket(jvm, dirs)?.with_context(|| format!("{} vanished", dirs.shown()))?;
            connect(jvm, dirs, &sock)
        }
        r => r,
    }
    .with_context(|| format!("cannot connect to the JVM's attach socket {}", dirs.shown()))
}

/// Whether a Unix socket bound at `path` (as processes in `pid`'s network
/// namespace name it) is listening: `/proc/PID/net/unix` lists it with
/// __SO_ACCEPTCON among its flags.
fn listened_on(pid: u32, path: &str) -> bool {
    const ACCEPTCON: u32 = 0x10000;
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).unwrap_or_default();
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 8 && f[7] == path && u32::from_str_radix(f[3], 16).is_ok_and(|flags| flags & ACCEPTCON != 0)
    })
}

/// Sends one attach command and returns the JVM's whole reply.
fn command(jvm: &Jvm, args: [&str; 4], timeout: Duration) -> anyhow::Result<String> {
    let dirs = JvmDirs::open(jvm)?;
    dirs.clear_dead_socket(jvm);
    jvm.user.run_as(|| {
        let mut s = open_session(jvm, &dirs)?;
        let deadline = Instant::now() + timeout;
        s.set_write_timeout(Some(timeout))?;
        let mut msg = b"1\0".to_vec();
        for a in &args {
            if a.len() > 1024 {
                bail!(
                    "attach argument too long ({} bytes; HotSpot takes at most 1024)",
                    a.len()
                );
            }
            msg.extend_from_slice(a.as_bytes());
            msg.push(0);
        }
        s.write_all(&msg).context("sending the attach command")?;
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "the JVM {} did not answer the attach command within {} s",
                    jvm.pid,
                    timeout.as_secs()
                );
            }
            s.set_read_timeout(Some(left))?;
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
                Err(e) => return Err(e).context("reading the JVM's reply"),
            }
        }
        Ok(String::from_utf8_lossy(&reply).into_owned())
    })
}

/// Interprets the reply to `load`: Ok(return code of Agent_OnAttach), or
/// the JVM's error.
fn parse_load_reply(reply: &str) -> anyhow::Result<i32> {
    let (first, rest) = reply.split_once('\n').unwrap_or((reply, ""));
    let rest = rest.trim();
    match first.trim().parse::<i32>() {
        Ok(0) => {}
        Ok(code) => bail!(
            "the JVM refused to load the agent (attach error {code}){}",
            if rest.is_empty() {
                String::new()
            } else {
                format!(": {rest}")
            }
        ),
        Err(_) => bail!("unexpected reply from the JVM's attach listener: {:?}", reply.trim()),
    }
    let first_rest = rest.lines().next().unwrap_or("").trim();
    if let Some(n) = first_rest.strip_prefix("return code:") {
        return n.trim().parse().with_context(|| format!("unexpected reply {reply:?}"));
    }
    if let Ok(n) = first_rest.parse::<i32>() {
        return Ok(n);
    }
    if rest.is_empty() {
        return Ok(0);
    }
    // JDK 21+: the command succeeded but loading failed; the rest says why.
    bail!("the JVM could not load the agent: {rest}")
}

/// Loads the agent library into the JVM with `options`; returns the
/// Agent_OnAttach result (0 = success).
pub(crate) fn load_agent(jvm: &Jvm, agent: &Path, options: &str) -> anyhow::Result<i32> {
    let agent = agent.to_string_lossy();
    let reply = command(jvm, ["load", &agent, "true", options], REPLY_TIMEOUT)?;
    parse_load_reply(&reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_replies() {
        assert_eq!(parse_load_reply("0\nreturn code: 0\n").unwrap(), 0);
        assert_eq!(parse_load_reply("0\nreturn code: -1\n").unwrap(), -1);
        assert_eq!(parse_load_reply("0\n3\n").unwrap(), 3);
        assert_eq!(parse_load_reply("0\n").unwrap(), 0);
        let e = parse_load_reply("0\nAgent_OnAttach failed\n").unwrap_err();
        assert!(format!("{e}").contains("Agent_OnAttach failed"));
        let e = parse_load_reply("101\nno such command\n").unwrap_err();
        assert!(format!("{e}").contains("101"));
        assert!(parse_load_reply("").is_err());
    }

    #[test]
    fn status_parsing() {
        let s = "Name:\tjava\nUid:\t1000\t1001\t1000\t1001\nGid:\t50\t51\t50\t51\nSigCgt:\t0000000000000004\n";
        assert!(catches_sigquit(s));
        assert!(!catches_sigquit("SigCgt:\t0000000000000002\n"));
    }

    #[test]
    fn dead_and_foreign_pids_are_refused() {
        // pid_max is at most 2^22: this pid cannot exist.
        let e = inspect(4_999_999).unwrap_err();
        assert_eq!(format!("{e}"), "no process with pid 4999999");
        let e = inspect(std::process::id()).unwrap_err();
        assert!(format!("{e}").contains("is not a HotSpot JVM"), "{e}");
    }
}

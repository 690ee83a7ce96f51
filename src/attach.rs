//! `jtrace attach PID`: trace a HotSpot JVM that is already running.
//!
//! The agent is loaded through the HotSpot dynamic attach protocol (what
//! `jcmd` and the Attach API speak; jattach's `jattach_hotspot.c` is the
//! reference for the details):
//!
//! 1. If the JVM's attach listener is not running, create the trigger file
//!    `.attach_pid<nspid>` in its working directory (or its /tmp) as the
//!    JVM's user and send SIGQUIT; the JVM then opens the Unix socket
//!    `/tmp/.java_pid<nspid>`. SIGQUIT is only sent to a process that
//!    catches it (a JVM started with -Xrs would dump core) and whose
//!    hsperfdata does not say attach is disabled (it would print a thread
//!    dump instead).
//! 2. Connect to the socket (as the JVM's user, since HotSpot checks the
//!    peer's credentials) and send `1\0load\0<agent>\0true\0<options>\0`.
//! 3. Read the reply: `0` when the command ran, then the return code of
//!    Agent_OnAttach (`return code: N` from JDK 9 on, an error text on JDK 21+).
//!
//! The kernel recorder starts first, then the agent is loaded with
//! `config=<file>`; after the duration (or Ctrl-C/SIGTERM) the same library
//! is loaded again with `stop`, which makes the agent remove its probes and
//! finish its stream, so the JVM runs on as before.

use anyhow::{bail, Context};
use jtrace_bpf::KernelRecorder;
use jtrace_merge::Meta;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::run::{self, kernel_events, KernelArgs};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;

/// Arguments of `jtrace attach`.
#[derive(clap::Args)]
pub struct AttachArgs {
    /// Process id of the running HotSpot JVM.
    pid: u32,
    /// Stop after this long (`10s`, `500ms`, `2m`; a bare number is
    /// seconds); default: until Ctrl-C or until the JVM exits.
    #[arg(long, value_parser = run::parse_duration)]
    duration: Option<Duration>,
    /// Methods to trace, comma-separated globs over `class.method`
    /// (`com.acme.*`, `Demo.*`, `*.run`); default: none.
    #[arg(long, value_delimiter = ',')]
    methods: Vec<String>,
    /// JPMT-style configuration file (as for `jtrace run`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Also sample object allocations (as for `jtrace run`).
    #[arg(long)]
    alloc_samples: bool,
    /// Trace directory to write (default: the config's `output`, else
    /// trace.jtrace); the JVM's user must be able to write it meanwhile.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Only end a recording session left running in the JVM by a `jtrace
    /// attach` that was killed (its trace stays incomplete).
    #[arg(long, conflicts_with_all = ["duration", "methods", "config", "output", "alloc_samples"])]
    stop: bool,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
}

/// How long the JVM may take to open its attach socket after SIGQUIT.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the agent may take to start or stop (retransforming classes).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// What we need to know about the target process.
#[derive(Debug, Clone)]
pub struct Jvm {
    /// Host pid.
    pub pid: u32,
    /// Pid inside its own pid namespace (HotSpot names its files with it).
    pub nspid: u32,
    /// Effective user, group and groups of the JVM.
    pub(crate) user: User,
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
pub fn inspect(pid: u32) -> anyhow::Result<Jvm> {
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
    if mnt("self") != mnt(&pid.to_string()) {
        bail!(
            "process {pid} runs in another mount namespace (a container); jtrace attach needs the JVM to see \
             the agent and the trace directory at the same paths as jtrace"
        );
    }
    let nspid = status_field(&status, "NSpid:")
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(pid);
    let Some(user) = User::from_proc_status(&status) else {
        bail!("cannot read the user of process {pid}");
    };
    let jvm = Jvm { pid, nspid, user };
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
    // The hsperfdata directory is the JVM user's: read it as them.
    if let Some(caps) = jvm.user.run_as(|| Ok(perf_capabilities(jvm))).ok().flatten() {
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

/// The value of `sun.rt.jvmCapabilities` (64 `0`/`1` flags) from the JVM's
/// hsperfdata file, if it has one (-XX:-UsePerfData turns it off).
fn perf_capabilities(jvm: &Jvm) -> Option<Vec<u8>> {
    let tmp = PathBuf::from(format!("/proc/{}/root/tmp", jvm.pid));
    let dir = std::fs::read_dir(&tmp).ok()?;
    for d in dir.flatten() {
        // The JVM's own directory (a stale file of another user's old
        // process with the same pid must not decide).
        use std::os::unix::fs::MetadataExt;
        if !d.file_name().to_string_lossy().starts_with("hsperfdata_")
            || !d.metadata().is_ok_and(|m| m.uid() == jvm.user.uid.as_raw())
        {
            continue;
        }
        let Ok(data) = read_regular(&d.path().join(jvm.nspid.to_string())) else {
            continue;
        };
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
        return (val.len() >= 8).then_some(val);
    }
    None
}

/// Reads `path` if it is a regular file: a link there is not followed, a
/// FIFO not waited on.
fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut data = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut data)?;
    Ok(data)
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// Makes the JVM start its attach listener (trigger file + SIGQUIT); runs
/// as the JVM's user.
fn start_listener(jvm: &Jvm, sock: &Path) -> anyhow::Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", jvm.pid)).unwrap_or_default();
    if !catches_sigquit(&status) {
        bail!(
            "the JVM {} does not handle SIGQUIT (started with -Xrs?) and has no attach listener running; \
             it cannot be attached to",
            jvm.pid
        );
    }
    let candidates = [
        PathBuf::from(format!("/proc/{}/cwd/.attach_pid{}", jvm.pid, jvm.nspid)),
        PathBuf::from(format!("/proc/{}/root/tmp/.attach_pid{}", jvm.pid, jvm.nspid)),
    ];
    let mut trigger = None;
    for c in &candidates {
        match create_trigger(c) {
            Ok(true) => {
                trigger = Some(c.clone());
                break;
            }
            // Ours, but some file systems change the owner and HotSpot
            // would not trust it.
            Ok(false) => {
                let _ = std::fs::remove_file(c);
            }
            Err(_) => {}
        }
    }
    let Some(trigger) = trigger else {
        bail!(
            "cannot create the attach trigger file .attach_pid{} in the JVM's working directory or /tmp",
            jvm.nspid
        );
    };
    // SAFETY: sending a signal the target is known to catch.
    if unsafe { libc::kill(jvm.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_file(&trigger);
        bail!("cannot signal the JVM {}: {e}", jvm.pid);
    }
    let t0 = Instant::now();
    let result = loop {
        if is_socket(sock) {
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
    let _ = std::fs::remove_file(&trigger);
    result
}

/// Creates the attach trigger file at `path` (or opens the one there),
/// never following a link planted in the JVM's working directory and never
/// truncating anything; whether the file is a regular one owned by us, the
/// JVM's user (checked on the descriptor, not by name).
fn create_trigger(path: &Path) -> std::io::Result<bool> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    Ok(
        FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_uid == rustix::process::geteuid().as_raw(),
    )
}

/// Sends one attach command and returns the JVM's whole reply.
fn command(jvm: &Jvm, args: [&str; 4], timeout: Duration) -> anyhow::Result<String> {
    let jvm = jvm.clone();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    jvm.user.clone().run_as(move || {
        let sock = PathBuf::from(format!("/proc/{}/root/tmp/.java_pid{}", jvm.pid, jvm.nspid));
        if !is_socket(&sock) {
            start_listener(&jvm, &sock)?;
        }
        let mut s = match UnixStream::connect(&sock) {
            // A socket file left by an earlier process with the same pid
            // (killed before it could remove it): nobody listens on it.
            // Remove it and have this JVM start its listener.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(&sock)
                    .with_context(|| format!("cannot remove the stale attach socket {}", sock.display()))?;
                start_listener(&jvm, &sock)?;
                UnixStream::connect(&sock)
            }
            r => r,
        }
        .with_context(|| format!("cannot connect to the JVM's attach socket {}", sock.display()))?;
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
pub fn load_agent(jvm: &Jvm, agent: &Path, options: &str) -> anyhow::Result<i32> {
    let agent = agent.to_string_lossy();
    let reply = command(jvm, ["load", &agent, "true", options], REPLY_TIMEOUT)?;
    parse_load_reply(&reply)
}

/// Checks, as the JVM's user, that it can write the trace directory.
fn check_writable_by_jvm(jvm: &Jvm, dir: &Path) -> anyhow::Result<()> {
    use rustix::fs::{Access, AtFlags};
    jvm.user.run_as(|| {
        rustix::fs::accessat(
            rustix::fs::CWD,
            dir,
            Access::WRITE_OK | Access::EXEC_OK,
            AtFlags::EACCESS,
        )
        .with_context(|| {
            format!(
                "the JVM runs as uid {} and cannot write the trace directory {}; choose one it can reach with -o",
                jvm.user.uid.as_raw(),
                dir.display()
            )
        })
    })
}

/// What the agent has written so far: whether JVM_START and JVM_END are
/// there, and its AGENT_ERROR messages.
struct StreamState {
    started: bool,
    ended: bool,
    errors: Vec<String>,
}

/// Reads the agent's stream file `name`, written by the JVM's user into
/// the trace directory (so opened without following links).
fn read_stream(dir: &TraceDir, name: &str) -> StreamState {
    let mut st = StreamState {
        started: false,
        ended: false,
        errors: Vec::new(),
    };
    let Ok(data) = dir.read_file(name) else { return st };
    let h = jtrace_format::FILE_HEADER_LEN;
    if data.len() < h {
        return st;
    }
    // A record being written may be cut at the end: stop at the first error.
    for r in jtrace_format::Decoder::new(&data[h..], h) {
        let Ok(r) = r else { break };
        match r.payload {
            jtrace_format::Payload::JvmStart(_) => st.started = true,
            jtrace_format::Payload::JvmEnd(_) => st.ended = true,
            jtrace_format::Payload::AgentError(m) => st.errors.push(m),
            _ => {}
        }
    }
    st
}

/// Runs `jtrace attach`.
pub fn attach(args: AttachArgs) -> ExitCode {
    let lib_calls = match run::prepare(&args.kernel, "attach") {
        Ok(l) => l,
        Err(code) => return code,
    };
    match attach_inner(args, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jtrace: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// `jtrace attach PID --stop`: ends an orphaned session.
fn stop_orphan(pid: u32) -> anyhow::Result<()> {
    let jvm = inspect(pid)?;
    let agent = run::agent_path()?;
    match load_agent(&jvm, &agent, "stop")? {
        0 => {
            eprintln!("jtrace: stopped the jtrace session in JVM {pid}; it runs on untraced");
            Ok(())
        }
        3 => bail!("no jtrace attach session is recording in JVM {pid}"),
        rc => bail!("the agent in JVM {pid} did not stop (code {rc})"),
    }
}

fn attach_inner(args: AttachArgs, lib_calls: Vec<jtrace_bpf::LibCallSpec>) -> anyhow::Result<()> {
    if args.stop {
        return stop_orphan(args.pid);
    }
    let jvm = inspect(args.pid)?;
    let owner = User::invoking()?;
    let agent = run::agent_path()?;
    run::check_readable_by(&agent, &jvm.user)?;
    jtrace_bpf::required_kernel_features()?;
    let config = args
        .config
        .as_deref()
        .map(|p| run::UserConfig::read(p, &owner))
        .transpose()?;
    let out = args
        .output
        .clone()
        .or_else(|| config.as_ref().and_then(run::UserConfig::output))
        .unwrap_or_else(|| PathBuf::from("trace.jtrace"));
    let out = std::path::absolute(&out)?;
    // Build the agent's configuration before touching the disk.
    let conf = run::agent_config(config.as_ref(), &args.methods, args.alloc_samples, &out)?;
    // While recording, the directory belongs to the JVM's user (the agent
    // writes its stream there); it is handed to the invoking user at the end.
    let dir = TraceDir::prepare(&out, &owner)?;
    if let Err(e) = dir.lend_to(&jvm.user).and_then(|()| check_writable_by_jvm(&jvm, &out)) {
        dir.discard();
        return Err(e);
    }
    let conf_path = out.join(jtrace_format::AGENT_CONFIG_FILE);
    dir.write_file(jtrace_format::AGENT_CONFIG_FILE, conf.as_bytes())?;
    let command: Vec<String> = std::fs::read(format!("/proc/{}/cmdline", jvm.pid))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut meta = Meta {
        format: "jtrace".into(),
        version: jtrace_format::FORMAT_VERSION,
        complete: false,
        jtrace_version: env!("CARGO_PKG_VERSION").into(),
        start_realtime_ns: run::clock_ns(libc::CLOCK_REALTIME),
        start_monotonic_ns: run::clock_ns(libc::CLOCK_MONOTONIC),
        command,
        kernel: run::kernel_release(),
        pid: jvm.pid,
        methods: args.methods.clone(),
        ..Default::default()
    };
    dir.store_meta(&meta)?;
    // JVMTI reports no safepoints: probe the JVM's libjvm.so for them, as
    // `run` and `record` do.
    let lib_calls = run::with_safepoints(lib_calls, jtrace_bpf::safepoints::libjvm_of_pid(jvm.pid));
    let recorder = args.kernel.config(&dir, lib_calls).and_then(|mut kcfg| {
        kcfg.pids = vec![jvm.pid];
        KernelRecorder::start(kcfg)
    });
    let recorder = match recorder {
        Ok(r) => r,
        Err(e) => {
            dir.discard();
            return Err(e.context("cannot start kernel tracing"));
        }
    };
    dir.hand_over(&jvm.user)?;
    signals::stop_on_signals()?;

    let stream = format!("{}{}.bin", jtrace_format::JVM_FILE_PREFIX, jvm.nspid);
    let started = load_agent(&jvm, &agent, &format!("config={}", conf_path.display()));
    let state = read_stream(&dir, &stream);
    let no_answer = started.is_err();
    let failure = match started {
        Err(e) => Some(e.context(format!("cannot load the agent into the JVM {}", jvm.pid))),
        Ok(0) if state.started => None,
        Ok(rc) => {
            // The agent's return codes (agent/src/lib.rs, mod rc).
            let why = match rc {
                1 => "it could not use its configuration",
                2 => {
                    "the JVM is traced by jtrace already (started under `jtrace run`, or another `jtrace attach` \
                     is recording; if that one was killed, end its session with `jtrace attach PID --stop`)"
                }
                4 => "the JVM refused what the agent needs",
                0 => "it wrote no JVM_START",
                _ => "it failed",
            };
            Some(anyhow::anyhow!(
                "the agent did not start in the JVM {}: {why} (code {rc}){}",
                jvm.pid,
                if state.errors.is_empty() {
                    String::new()
                } else {
                    format!(": {}", state.errors.join("; "))
                }
            ))
        }
    };
    if let Some(e) = failure {
        if no_answer && alive(jvm.pid) {
            // No answer (timeout, broken connection): the agent may be
            // starting all the same; make sure it does not stay on.
            let _ = load_agent(&jvm, &agent, "stop");
        }
        let _ = recorder.stop();
        dir.discard();
        return Err(e);
    }
    for m in &state.errors {
        eprintln!("jtrace: note from the agent: {m}");
    }
    eprintln!(
        "jtrace: attached to JVM {}; recording{}",
        jvm.pid,
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until Ctrl-C or until it exits".into(),
        }
    );
    let why = signals::wait_for_stop(jvm.pid, args.duration);
    let mut problem = None;
    if alive(jvm.pid) {
        match load_agent(&jvm, &agent, "stop") {
            Ok(0) => {}
            Ok(rc) => problem = Some(format!("the agent did not stop cleanly (code {rc})")),
            Err(e) => problem = Some(format!("cannot stop the agent: {e:#}")),
        }
    }
    let stats = run::stop_kernel(recorder, &mut meta)?;
    let state = read_stream(&dir, &stream);
    if problem.is_none() && !state.ended {
        problem = Some("the agent's stream has no end record".into());
    }
    meta.complete = problem.is_none();
    dir.store_meta(&meta)?;
    dir.hand_over(&owner)?;
    if let Some(p) = &problem {
        eprintln!("jtrace: {p}; the JVM side of the trace is a readable prefix");
    }
    eprintln!(
        "jtrace: {why}; detached; trace written to {} ({}); read it with `jtrace report {}`",
        out.display(),
        kernel_events(&stats),
        out.display()
    );
    if problem.is_some() {
        bail!("the trace is incomplete");
    }
    Ok(())
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

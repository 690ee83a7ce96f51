//! `jtrace run`: record the kernel and the JVM while a command runs.
//!
//! Order matters: the BPF programs are loaded and told to follow every process
//! forked by jtrace before the command is started, so its first instruction
//! is already traced; the command runs as the user who invoked sudo; the
//! trace's metadata is written first as incomplete and rewritten as complete
//! only when everything is flushed.

use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{bail, Context};
use jtrace_bpf::{KernelRecorder, KernelStats, LibCallSpec, RecorderConfig, SyscallMode};
use jtrace_merge::Meta;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Exit code for usage and permission errors.
pub(crate) const EXIT_USAGE: u8 = 2;

/// Arguments of `jtrace run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Methods to trace, comma-separated globs over `class.method`
    /// (`com.acme.*`, `Demo.*`, `*.run`); default: none.
    #[arg(long, value_delimiter = ',')]
    methods: Vec<String>,
    /// JPMT-style configuration file (output, include_method, exclude_method,
    /// include_thread, exclude_thread, method_invocation, ...).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Also sample object allocations (class, size, allocating method and
    /// line; about one per 512 KiB allocated): `object_allocation on`.
    #[arg(long)]
    alloc_samples: bool,
    /// Trace directory to write.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
    /// The command to run, after `--`.
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

/// What the kernel side records; shared by `jtrace run` and `jtrace record`.
#[derive(clap::Args)]
pub struct KernelArgs {
    /// Kernel ring buffer size in MiB (a power of two).
    #[arg(long, default_value_t = 16)]
    ringbuf_mb: usize,
    /// Kernel ring buffer size in bytes (a power of two, at least one page),
    /// instead of --ringbuf-mb: a tiny buffer shows the loss accounting.
    #[arg(long, value_name = "N", conflicts_with = "ringbuf_mb")]
    ringbuf_bytes: Option<usize>,
    /// Which syscalls to record: `blocked` (the syscall of every block, read
    /// at the switch-out; no syscall hook, near-zero cost), `io` (also full
    /// records with results of every socket/file I/O syscall; ~0.5 µs per
    /// syscall), `all` (also futex, sleeps, pipes, ... that did not block)
    /// or `none`.
    #[arg(long, default_value = "blocked", value_parser = ["none", "blocked", "io", "all"])]
    syscalls: String,
    /// Library functions to interpose, comma-separated LIBRARY:SYMBOL
    /// (`libz.so.1:inflate,libc.so.6:getaddrinfo`; a library path works too).
    #[arg(long, value_name = "SPEC")]
    lib_calls: Option<String>,
    /// Do not record the page faults threads block on.
    #[arg(long)]
    no_page_faults: bool,
    /// Do not record block I/O requests.
    #[arg(long)]
    no_block_io: bool,
}

impl KernelArgs {
    /// Checks the options (library calls resolved, so that a typo fails
    /// before anything runs) and returns the library calls to trace.
    pub(crate) fn validate(&self) -> anyhow::Result<Vec<LibCallSpec>> {
        if !self.ringbuf_mb.is_power_of_two() {
            bail!("--ringbuf-mb must be a power of two, not {}", self.ringbuf_mb);
        }
        if let Some(n) = self.ringbuf_bytes.filter(|n| !n.is_power_of_two() || *n < 4096) {
            bail!("--ringbuf-bytes must be a power of two of at least 4096, not {n}");
        }
        let specs = match &self.lib_calls {
            Some(s) => jtrace_bpf::parse_lib_calls(s)?,
            None => Vec::new(),
        };
        jtrace_bpf::resolve_lib_calls(&specs)?;
        Ok(specs)
    }

    /// The recorder's configuration, writing a new kernel.bin in `dir`.
    pub(crate) fn config(&self, dir: &TraceDir, lib_calls: Vec<LibCallSpec>) -> anyhow::Result<RecorderConfig> {
        let name = jtrace_format::KERNEL_FILE;
        let mut cfg = RecorderConfig::new(dir.create_file(name)?, dir.path().join(name));
        cfg.ringbuf_bytes = self.ringbuf_bytes.unwrap_or(self.ringbuf_mb << 20);
        cfg.syscalls = self.syscalls.parse().unwrap_or(SyscallMode::Blocked);
        cfg.page_faults = !self.no_page_faults;
        cfg.block_io = !self.no_block_io;
        cfg.lib_calls = lib_calls;
        Ok(cfg)
    }
}

/// The requested library calls plus the probes that record the safepoints
/// of the traced JVM (`libjvm`; if not known, of the JDKs in the system's
/// JVM directory): JVMTI does not report safepoints.
pub(crate) fn with_safepoints(mut lib_calls: Vec<LibCallSpec>, libjvm: Option<PathBuf>) -> Vec<LibCallSpec> {
    let (calls, stripped) = jtrace_bpf::safepoints::safepoint_calls(libjvm);
    for lib in stripped {
        eprintln!(
            "jtrace: {} has no SafepointSynchronize symbols (stripped?): its safepoints will not be recorded",
            lib.display()
        );
    }
    lib_calls.extend(calls);
    lib_calls
}

/// Stops the kernel recorder and stores its counters in the metadata.
pub(crate) fn stop_kernel(recorder: KernelRecorder, meta: &mut Meta) -> anyhow::Result<KernelStats> {
    // Let in-flight kernel events of the last exits reach the ring buffer.
    std::thread::sleep(std::time::Duration::from_millis(20));
    meta.end_monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
    let stats = recorder.stop().context("stopping kernel tracing")?;
    meta.kernel_records = stats.records;
    meta.kernel_lost = stats.lost.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    meta.kernel_inferred_switch_ins = stats.inferred_switch_ins;
    Ok(stats)
}

pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Finds libjtrace_agent.so: $JTRACE_AGENT, else next to the jtrace binary.
pub(crate) fn agent_path() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("JTRACE_AGENT") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("JTRACE_AGENT={} is not a file", p.display());
        }
        return Ok(p.canonicalize()?);
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("jtrace binary has no directory")?;
    for cand in [dir.join("libjtrace_agent.so"), dir.join("../libjtrace_agent.so")] {
        if cand.is_file() {
            return Ok(cand.canonicalize()?);
        }
    }
    bail!(
        "cannot find the JVM agent libjtrace_agent.so next to {} (build it with `cargo build --workspace`, or set JTRACE_AGENT)",
        exe.display()
    )
}

/// The JVM runs as `user` and must be able to read the agent (checked
/// with that user's credentials, so groups and ACLs count).
pub(crate) fn check_readable_by(path: &Path, user: &User) -> anyhow::Result<()> {
    user.run_as(|| {
        rustix::fs::accessat(
            rustix::fs::CWD,
            path,
            rustix::fs::Access::READ_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .with_context(|| {
            format!(
                "the traced command runs as uid {} and cannot read the agent {}; \
                     install jtrace where other users can read it, or set JTRACE_AGENT",
                user.uid.as_raw(),
                path.display()
            )
        })
    })
}

/// A JPMT configuration file given with `--config`.
pub(crate) struct UserConfig {
    path: PathBuf,
    text: String,
}

impl UserConfig {
    /// Reads `path` with `user`'s rights: root does not open a file the
    /// user names (its lines end up in the user's agent.conf and in the
    /// agent's messages), so a file that user cannot read is an error.
    pub(crate) fn read(path: &Path, user: &User) -> anyhow::Result<UserConfig> {
        let text = user.run_as(|| {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config {} as uid {}", path.display(), user.uid.as_raw()))
        })?;
        Ok(UserConfig {
            path: path.to_path_buf(),
            text,
        })
    }

    /// Its `output` directive, if any (used when -o is absent).
    pub(crate) fn output(&self) -> Option<PathBuf> {
        self.text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("output"))
                .then(|| w.next().map(PathBuf::from))
                .flatten()
        })
    }
}

/// The agent's configuration: the user's JPMT file (minus `output`), then
/// `--methods` rules and `--alloc-samples`, then the output directory. The
/// user's lines keep their numbers, so that the agent's error messages point
/// at the right line.
pub(crate) fn agent_config(
    config: Option<&UserConfig>,
    methods: &[String],
    alloc_samples: bool,
    out: &Path,
) -> anyhow::Result<String> {
    let mut conf = String::new();
    if let Some(UserConfig { path, text }) = config {
        for line in text.lines() {
            if line.split_whitespace().next() == Some("output") {
                conf.push_str("# (output set by jtrace) ");
            }
            conf.push_str(line);
            conf.push('\n');
        }
        conf.push_str(&format!("# the lines above are {}\n", path.display()));
    }
    conf.push_str("# written by jtrace\n");
    for m in methods {
        let m = m.trim();
        if m.is_empty() || m.chars().any(char::is_whitespace) {
            bail!("--methods pattern {m:?} is empty or contains white space");
        }
        conf.push_str(&format!("include_method {m}\n"));
    }
    if alloc_samples {
        conf.push_str("object_allocation on\n");
    }
    conf.push_str(&format!("output {}\n", out.display()));
    Ok(conf)
}

/// Runs `jtrace run`; returns the command's exit status as ours.
pub fn run(args: RunArgs) -> ExitCode {
    let lib_calls = match prepare(&args.kernel, "run") {
        Ok(l) => l,
        Err(code) => return code,
    };
    match run_inner(args, lib_calls) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jtrace: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_inner(args: RunArgs, lib_calls: Vec<LibCallSpec>) -> anyhow::Result<ExitCode> {
    let owner = User::invoking()?;
    let agent = agent_path()?;
    if agent.to_string_lossy().chars().any(char::is_whitespace) {
        bail!(
            "agent path {} contains white space, which JAVA_TOOL_OPTIONS cannot carry",
            agent.display()
        );
    }
    check_readable_by(&agent, &owner)?;
    jtrace_bpf::required_kernel_features()?;
    let config = args
        .config
        .as_deref()
        .map(|p| UserConfig::read(p, &owner))
        .transpose()?;
    let out = args
        .output
        .clone()
        .or_else(|| config.as_ref().and_then(UserConfig::output))
        .unwrap_or_else(|| PathBuf::from("trace.jtrace"));
    if out.to_string_lossy().chars().any(char::is_whitespace) {
        bail!(
            "output path {:?} contains white space, which JAVA_TOOL_OPTIONS cannot carry",
            out
        );
    }
    let out = std::path::absolute(&out)?;
    // Build the agent's configuration before touching the disk, so bad
    // input leaves nothing behind.
    let conf = agent_config(config.as_ref(), &args.methods, args.alloc_samples, &out)?;
    let dir = TraceDir::prepare(&out, &owner)?;
    let conf_path = out.join(jtrace_format::AGENT_CONFIG_FILE);
    dir.write_file(jtrace_format::AGENT_CONFIG_FILE, conf.as_bytes())?;

    let mut meta = Meta {
        format: "jtrace".into(),
        version: jtrace_format::FORMAT_VERSION,
        complete: false,
        jtrace_version: env!("CARGO_PKG_VERSION").into(),
        start_realtime_ns: clock_ns(libc::CLOCK_REALTIME),
        start_monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
        command: args.command.clone(),
        kernel: kernel_release(),
        methods: args.methods.clone(),
        ..Default::default()
    };
    dir.store_meta(&meta)?;

    let libjvm = jtrace_bpf::safepoints::libjvm_of_launcher(&args.command[0]);
    let recorder = args
        .kernel
        .config(&dir, with_safepoints(lib_calls, libjvm))
        .and_then(|mut kcfg| {
            kcfg.launcher_tgid = Some(std::process::id());
            KernelRecorder::start(kcfg)
        });
    let recorder = match recorder {
        Ok(r) => r,
        Err(e) => {
            dir.discard();
            return Err(e.context("cannot start kernel tracing"));
        }
    };
    dir.hand_over(&owner)?;

    let mut tool_opts = std::env::var("JAVA_TOOL_OPTIONS").unwrap_or_default();
    if !tool_opts.is_empty() {
        tool_opts.push(' ');
    }
    tool_opts.push_str(&format!("-agentpath:{}={}", agent.display(), conf_path.display()));

    signals::forward_to_child()?;
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]).env("JAVA_TOOL_OPTIONS", &tool_opts);
    let change_identity = !owner.is_current();
    if change_identity {
        // Groups, group and user in that order, each checked; a failure is
        // the spawn's error and the command does not run. (std's own uid()
        // would drop the supplementary groups.)
        let user = owner.clone();
        // SAFETY: become_for_exec makes raw syscalls only and allocates
        // nothing, as the forked child of a threaded process must.
        unsafe { cmd.pre_exec(move || user.become_for_exec()) };
    }
    let status = match cmd.spawn() {
        Ok(mut child) => {
            signals::set_child(Some(child.id()));
            meta.pid = child.id();
            let s = child.wait();
            signals::set_child(None);
            s
        }
        Err(e) => {
            let _ = recorder.stop();
            dir.discard();
            let as_whom = if change_identity {
                format!(" as {}", owner.describe())
            } else {
                String::new()
            };
            eprintln!("jtrace: cannot run {}{as_whom}: {e}", args.command[0]);
            return Ok(ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }));
        }
    };
    let stats = stop_kernel(recorder, &mut meta)?;
    let code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    };
    meta.exit_code = Some(code);
    meta.complete = true;
    dir.store_meta(&meta)?;
    dir.hand_over(&owner)?;
    eprintln!(
        "jtrace: trace written to {} ({}); read it with `jtrace text {}` or `jtrace report {}`",
        out.display(),
        kernel_events(&stats),
        out.display(),
        out.display()
    );
    status.context("waiting for the command")?;
    Ok(ExitCode::from((code & 0xff) as u8))
}

/// Arguments of `jtrace record`.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// Process to record (with the processes it forks from now on).
    #[arg(short, long)]
    pid: u32,
    /// Stop after this long (`10s`, `500ms`, `2m`; a bare number is
    /// seconds); default: until Ctrl-C or until the process exits.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// Trace directory to write.
    #[arg(short, long, default_value = "trace.jtrace")]
    output: PathBuf,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
}

/// `10s`, `500ms`, `2m`, `1.5s`, `3` (seconds).
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms or 2m"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?}: the duration must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// What every recording command checks first: root (to load eBPF), then
/// the kernel options; the library calls to trace, or the exit code.
pub(crate) fn prepare(kernel: &KernelArgs, command: &str) -> Result<Vec<LibCallSpec>, ExitCode> {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "jtrace: `jtrace {command}` needs root to load eBPF programs (CAP_BPF and CAP_PERFMON); run it with sudo"
        );
        return Err(ExitCode::from(EXIT_USAGE));
    }
    kernel.validate().map_err(|e| {
        eprintln!("jtrace: {e:#}");
        ExitCode::from(EXIT_USAGE)
    })
}

/// "N kernel events", and how many were lost if any: for closing messages.
pub(crate) fn kernel_events(stats: &KernelStats) -> String {
    match stats.lost_total {
        0 => format!("{} kernel events", stats.records),
        lost => format!("{} kernel events, {lost} LOST", stats.records),
    }
}

/// Runs `jtrace record`: the kernel side only, on an already running process.
pub fn record(args: RecordArgs) -> ExitCode {
    let lib_calls = match prepare(&args.kernel, "record") {
        Ok(l) => l,
        Err(code) => return code,
    };
    if unsafe { libc::kill(args.pid as libc::pid_t, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    {
        eprintln!("jtrace: no process with pid {}", args.pid);
        return ExitCode::from(EXIT_USAGE);
    }
    match record_inner(args, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jtrace: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn record_inner(args: RecordArgs, lib_calls: Vec<LibCallSpec>) -> anyhow::Result<()> {
    let owner = User::invoking()?;
    jtrace_bpf::required_kernel_features()?;
    let out = std::path::absolute(&args.output)?;
    let command: Vec<String> = std::fs::read(format!("/proc/{}/cmdline", args.pid))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let dir = TraceDir::prepare(&out, &owner)?;
    let mut meta = Meta {
        format: "jtrace".into(),
        version: jtrace_format::FORMAT_VERSION,
        complete: false,
        jtrace_version: env!("CARGO_PKG_VERSION").into(),
        start_realtime_ns: clock_ns(libc::CLOCK_REALTIME),
        start_monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
        command,
        kernel: kernel_release(),
        pid: args.pid,
        ..Default::default()
    };
    dir.store_meta(&meta)?;
    let libjvm = jtrace_bpf::safepoints::libjvm_of_pid(args.pid);
    let recorder = args
        .kernel
        .config(&dir, with_safepoints(lib_calls, libjvm))
        .and_then(|mut kcfg| {
            kcfg.pids = vec![args.pid];
            KernelRecorder::start(kcfg)
        });
    let recorder = match recorder {
        Ok(r) => r,
        Err(e) => {
            dir.discard();
            return Err(e.context("cannot start kernel tracing"));
        }
    };
    dir.hand_over(&owner)?;
    signals::stop_on_signals()?;
    eprintln!(
        "jtrace: recording pid {}{}",
        args.pid,
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until it exits or Ctrl-C".into(),
        }
    );
    let why = signals::wait_for_stop(args.pid, args.duration);
    let stats = stop_kernel(recorder, &mut meta)?;
    meta.complete = true;
    dir.store_meta(&meta)?;
    dir.hand_over(&owner)?;
    eprintln!(
        "jtrace: {why}; trace written to {} ({}); read it with `jtrace text {}`",
        out.display(),
        kernel_events(&stats),
        out.display()
    );
    Ok(())
}

//! The options of the recording commands, written once: what the agent
//! records and where the trace goes ([`TraceArgs`], for `run` and
//! `attach`), and what the kernel side records ([`KernelArgs`], for `run`,
//! `record` and `attach`).

use crate::user::User;
use anyhow::bail;
use jtrace_bpf::{ResolvedLibCall, SyscallMode};
use std::path::PathBuf;
use std::time::Duration;

/// What the agent records and where the trace goes; shared by `jtrace run`
/// and `jtrace attach`.
#[derive(clap::Args)]
pub(crate) struct TraceArgs {
    /// Methods to trace, comma-separated globs over `class.method`
    /// (`com.acme.*`, `Demo.*`, `*.run`); default: none.
    #[arg(long, value_delimiter = ',')]
    pub(crate) methods: Vec<String>,
    /// JPMT-style configuration file (output, include_method, exclude_method,
    /// include_thread, exclude_thread, method_invocation, ...), read with
    /// the invoking user's rights.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Also sample object allocations (class, size, allocating method and
    /// line; about one per 512 KiB allocated): `object_allocation on`.
    #[arg(long)]
    pub(crate) alloc_samples: bool,
    /// Trace directory to write (default: the config's `output`, else
    /// trace.jtrace), created by the invoking user; on attach, the JVM's
    /// user must be able to reach it.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Share of each thread's time its method probes may cost (percent):
    /// past it, the agent removes the probes of methods that are hot, short
    /// and never blocked inside (adaptive demotion; the report lists them
    /// with their calls).
    #[arg(long, value_name = "PERCENT", default_value = "2%", value_parser = parse_percent)]
    pub(crate) overhead_budget: f64,
    /// Keep every probe, whatever it costs: no adaptive demotion, and
    /// trivial methods (getters, setters: no call, loop, allocation or
    /// lock in at most 64 bytes of bytecode), which are otherwise not
    /// instrumented, are instrumented too.
    #[arg(long)]
    pub(crate) complete: bool,
    /// Leave without probes the forwarders a wildcard selected (short
    /// methods, at most 35 bytes of bytecode, HotSpot's MaxInlineSize,
    /// whose calls all go to traced methods or to java.base methods that
    /// never block) even with --no-stacks. By default they get none
    /// whenever stacks are recorded: probes would cost them the JIT's
    /// inlining, and the report takes their blocking time from the stacks
    /// that hold them (docs/OVERHEAD.md).
    #[arg(long, conflicts_with_all = ["complete", "keep_forwarders"])]
    pub(crate) skip_forwarders: bool,
    /// Give the forwarders a wildcard selected their probes: their calls,
    /// wall and CPU time are recorded (and cost the JIT's inlining).
    #[arg(long)]
    pub(crate) keep_forwarders: bool,
    /// Leave out calls shorter than this (`5us`, `1ms`) that have no traced
    /// child, no exception and did not block; counted per method in the
    /// report. Default: every call is written.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) min_duration: Option<Duration>,
    /// Do not start the JVM with -XX:+PreserveFramePointer (`run` only).
    /// Saves its cost on CPU-bound code (BENCHMARKS.md), but JIT-compiled
    /// Java frames then keep no frame pointer: a stack walk stops at the
    /// first compiled frame, so stacks lose their callers above it.
    #[arg(long)]
    pub(crate) no_frame_pointer: bool,
}

/// `2%`, `0.5`: a percentage in (0, 100].
pub(crate) fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(format!("{s:?} is not a percentage in (0, 100] like 2% or 0.5")),
    }
}

/// Which syscalls the kernel side records (`--syscalls`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyscallsArg {
    None,
    Blocked,
    Io,
    All,
}

impl From<SyscallsArg> for SyscallMode {
    fn from(a: SyscallsArg) -> SyscallMode {
        match a {
            SyscallsArg::None => SyscallMode::None,
            SyscallsArg::Blocked => SyscallMode::Blocked,
            SyscallsArg::Io => SyscallMode::Io,
            SyscallsArg::All => SyscallMode::All,
        }
    }
}

/// What the kernel side records; shared by `jtrace run`, `jtrace record`
/// and `jtrace attach`.
#[derive(clap::Args)]
pub(crate) struct KernelArgs {
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
    #[arg(long, value_enum, default_value_t = SyscallsArg::Blocked)]
    syscalls: SyscallsArg,
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
    /// Do not record stacks (the kernel and user stack of every switch-out
    /// of a traced thread, and CPU samples).
    #[arg(long)]
    no_stacks: bool,
    /// Blocks at least this long get their stacks (`300us`, `2ms`), taken
    /// as the thread resumes; shorter ones are sampled
    /// (--short-block-stacks). `0`: the stacks of every switch-out, taken
    /// there (≈ 4–6 µs a switch: a switch-heavy program pays for each).
    #[arg(long, value_name = "DURATION", default_value = "500us", value_parser = parse_duration_or_zero)]
    stack_min_block: Duration,
    /// Blocks shorter than --stack-min-block whose stacks are taken, at
    /// most, per CPU and second (0: none). The report says which share of
    /// the off-CPU time has a stack.
    #[arg(long, value_name = "PER_SECOND", default_value_t = jtrace_bpf::DEFAULT_SHORT_BLOCK_STACKS_HZ)]
    short_block_stacks: u32,
    /// CPU samples of traced threads per second (a perf clock on each CPU),
    /// each with its stacks; 0 for none. 99 by default: off the 100 Hz of
    /// periodic kernel work, well under 1 % of a CPU, and enough to locate
    /// CPU time over a run of seconds (CPU time itself is exact, from the
    /// scheduler: samples only say where it went).
    #[arg(long, value_name = "HZ", default_value_t = jtrace_bpf::DEFAULT_CPU_SAMPLE_HZ)]
    cpu_samples: u32,
}

impl KernelArgs {
    /// Checks the options (library calls resolved, so that a typo fails
    /// before anything runs) and returns the library calls to trace, their
    /// files opened with `user`'s rights ([`User::open_file`]).
    pub(crate) fn validate(&self, user: &User) -> anyhow::Result<Vec<ResolvedLibCall>> {
        if !self.ringbuf_mb.is_power_of_two() {
            bail!("--ringbuf-mb must be a power of two, not {}", self.ringbuf_mb);
        }
        if self.cpu_samples > 10_000 {
            bail!("--cpu-samples {} is more than 10000 per second", self.cpu_samples);
        }
        if let Some(n) = self.ringbuf_bytes.filter(|n| !n.is_power_of_two() || *n < 4096) {
            bail!("--ringbuf-bytes must be a power of two of at least 4096, not {n}");
        }
        let specs = match &self.lib_calls {
            Some(s) => jtrace_bpf::parse_lib_calls(s)?,
            None => Vec::new(),
        };
        jtrace_bpf::resolve_lib_calls(&specs, &|path| user.open_file(path))
    }

    /// The recorder's settings, on `cfg` (which names the stream file).
    pub(crate) fn apply(&self, cfg: &mut jtrace_bpf::RecorderConfig, lib_calls: Vec<ResolvedLibCall>) {
        cfg.ringbuf_bytes = self.ringbuf_bytes.unwrap_or(self.ringbuf_mb << 20);
        cfg.syscalls = self.syscalls.into();
        cfg.page_faults = !self.no_page_faults;
        cfg.block_io = !self.no_block_io;
        cfg.lib_calls = lib_calls;
        cfg.stacks = !self.no_stacks;
        cfg.cpu_sample_hz = if self.no_stacks { 0 } else { self.cpu_samples };
        cfg.stack_min_block_ns = self.stack_min_block_ns();
        cfg.short_block_stacks_hz = self.short_block_stacks;
        // The traced JVMs' agent announces what the Java part of a stack needs.
        cfg.agent_library = crate::agent_lib::agent_path().ok();
    }

    /// Whether stacks are recorded (the kernel and user stack of every
    /// switch-out).
    pub(crate) fn stacks(&self) -> bool {
        !self.no_stacks
    }

    /// Deferred stacks' least block (ns); `None`: stacks at every
    /// switch-out, or none.
    pub(crate) fn stack_min_block_ns(&self) -> Option<u64> {
        let ns = self.stack_min_block.as_nanos() as u64;
        (!self.no_stacks && ns > 0).then_some(ns)
    }

    /// Deferred stacks: short blocks' stacks per CPU per second.
    pub(crate) fn short_block_stacks_hz(&self) -> u32 {
        if self.stack_min_block_ns().is_some() {
            self.short_block_stacks
        } else {
            0
        }
    }

    /// CPU samples per second the recording takes (0: none).
    pub(crate) fn cpu_sample_hz(&self) -> u32 {
        if self.no_stacks {
            0
        } else {
            self.cpu_samples
        }
    }
}

/// A duration ([`parse_duration`]) or `0`.
pub(crate) fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s)
}

/// `10s`, `500ms`, `2m`, `1.5s`, `3` (seconds).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
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
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use us, ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?}: the duration must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn syscall_names_are_the_recorders() {
        for v in SyscallsArg::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name.parse::<SyscallMode>().unwrap(), SyscallMode::from(*v), "{name}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_duration("5us"), Ok(Duration::from_micros(5)));
        assert_eq!(parse_percent("2%"), Ok(2.0));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert!(parse_percent("0").is_err() && parse_percent("150%").is_err() && parse_percent("x").is_err());
    }
}

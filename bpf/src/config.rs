//! What the recorder records and where: [`RecorderConfig`] and its
//! [`SyscallMode`].

use std::fs::File;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::jtrace_h;
use crate::ResolvedLibCall;

/// Default size of the BPF ring buffer: 16 MiB.
pub const DEFAULT_RINGBUF_BYTES: usize = 16 << 20;

/// Which syscalls become SYSCALL records. In every mode but
/// [`SyscallMode::None`], each voluntary switch-out inside a syscall writes
/// a `SYSCALL_AT_SWITCH` record just before the SWITCH_OUT, read from the
/// registers the task saved at syscall entry: the off-CPU attribution is
/// the same in all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyscallMode {
    /// No SYSCALL records and no syscall program (a thread blocking inside a
    /// syscall is still not blamed on a page fault).
    None,
    /// Only the at-switch records: what the off-CPU attribution needs, with
    /// no syscall entry/exit hook, so syscalls that do not block cost
    /// nothing (default).
    #[default]
    Blocked,
    /// [`SyscallMode::Blocked`] plus, from sys_enter/sys_exit programs, a
    /// full record (entry, exit, result) of every syscall that blocked and
    /// of every I/O syscall (read/write family, send/recv, accept/connect,
    /// poll, epoll_wait, fsync, open/close) on a socket, regular file, block
    /// device or directory, blocked or not. Costs about 0.5 µs per syscall
    /// of every task of the system (raw syscall tracepoints).
    Io,
    /// [`SyscallMode::Io`] plus those syscalls and futex, nanosleep and
    /// select on any kind of fd, blocked or not.
    All,
}

impl SyscallMode {
    /// `syscall_mode` of bpf/c/syscall_ctx.bpf.h (`SCM_*` of bpf/c/jtrace.h).
    pub(crate) fn bpf_value(self) -> u32 {
        match self {
            SyscallMode::None => jtrace_h::SCM_NONE,
            SyscallMode::Blocked => jtrace_h::SCM_BLOCKED,
            SyscallMode::Io => jtrace_h::SCM_IO,
            SyscallMode::All => jtrace_h::SCM_ALL,
        }
    }

    /// The names accepted by [`str::parse`].
    pub const NAMES: [&'static str; 4] = ["none", "blocked", "io", "all"];
}

impl std::str::FromStr for SyscallMode {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "none" => SyscallMode::None,
            "blocked" => SyscallMode::Blocked,
            "io" => SyscallMode::Io,
            "all" => SyscallMode::All,
            _ => bail!("unknown syscall mode {s:?}: expected one of none, blocked, io, all"),
        })
    }
}

impl std::fmt::Display for SyscallMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Self::NAMES[*self as usize])
    }
}

/// What to record and where.
#[derive(Debug)]
pub struct RecorderConfig {
    /// The kernel stream file (`kernel.bin`), empty and open for writing.
    /// Its opener decides how it is created: jtrace runs as root and opens
    /// it relative to the trace directory without following links.
    pub out: File,
    /// The stream file's name, for messages.
    pub out_name: PathBuf,
    /// Process id of the launcher: new processes it forks (not its own new
    /// threads) are traced, with their descendants. `None` for attach mode.
    pub launcher_tgid: Option<u32>,
    /// Already-running processes to trace, with processes they fork later.
    pub pids: Vec<u32>,
    /// A cgroup subtree whose joiners are traced too: a process that
    /// enters it while recording is traced from then on, with those it
    /// forks, if [`RecorderConfig::viewer`] may trace it
    /// ([`crate::FollowCgroup`]; [`crate::KernelRecorder::take_joined`]
    /// tells which joined). `pids` are usually its processes at the start.
    pub cgroup: Option<crate::FollowCgroup>,
    /// Size of the BPF ring buffer in bytes: a power of two and a multiple
    /// of the page size. [`DEFAULT_RINGBUF_BYTES`] is a good default.
    pub ringbuf_bytes: usize,
    /// Which syscalls are recorded; default [`SyscallMode::Blocked`].
    pub syscalls: SyscallMode,
    /// Record user page faults after which the thread blocked (default on).
    pub page_faults: bool,
    /// Record block I/O requests issued by traced threads (default on).
    pub block_io: bool,
    /// Library functions to interpose (uprobe + uretprobe): LIB_CALL spans,
    /// named by PROBE_DEF records with probe ids 0, 1, … in this order.
    /// Resolved by the caller ([`crate::resolve_lib_calls`]), their files
    /// opened with the rights of the user who named them; the uprobes
    /// attach to those open files.
    pub lib_calls: Vec<ResolvedLibCall>,
    /// Called, from the recorder's thread, with a message when the stream
    /// file cannot be written (disk full) — when it happens; the recording
    /// goes on and counts what it could not write ([`crate::KernelStats::unwritten`]).
    pub on_write_error: Option<fn(&str)>,
    /// Capture the kernel and user stacks of traced threads' blocks
    /// (STACK records; which blocks: [`RecorderConfig::stack_min_block_ns`]),
    /// with the mappings and kernel symbols that name them (MAPPING, KSYM).
    /// Default on.
    pub stacks: bool,
    /// Deferred stacks: a block gets its stacks when it turns out at least
    /// this long (taken as the thread resumes: BLOCK_STACK records), and
    /// shorter ones are sampled ([`RecorderConfig::short_block_stacks_hz`]).
    /// `None`: the stacks of every switch-out, taken there (ids in the
    /// SWITCH_OUT). Default [`DEFAULT_STACK_MIN_BLOCK_NS`].
    pub stack_min_block_ns: Option<u64>,
    /// Deferred stacks: on each CPU, at most this many short blocks per
    /// second get their stacks (0: none). Default
    /// [`DEFAULT_SHORT_BLOCK_STACKS_HZ`].
    pub short_block_stacks_hz: u32,
    /// CPU samples of traced threads per second (a perf clock per CPU), each
    /// with its stacks (CPU_SAMPLE); 0: none. Default
    /// [`DEFAULT_CPU_SAMPLE_HZ`]; needs `stacks`.
    pub cpu_sample_hz: u32,
    /// The jtrace agent library the traced JVMs load: its two announcement
    /// functions are probed, so that user stacks of Java threads reach
    /// their Java frames (through HotSpot's frame anchor) and name
    /// interpreted frames. `None`: no JVM help (native frames only).
    pub agent_library: Option<PathBuf>,
    /// The free-space floor: a write that would leave the stream's file
    /// system fewer free bytes (for unprivileged users) is not made, and
    /// the records from then on are counted as not written, as on a full
    /// disk (0: write until the disk is full).
    pub min_free: u64,
    /// A ring recording: the stream is written as chunk files, `out` being
    /// chunk 0 (`kernel.000000.bin`), each beginning with a CHUNK record
    /// and restating what its records refer to (docs/FORMAT.md). `None`: one file.
    pub chunks: Option<crate::KernelChunks>,
    /// Who the trace is for, if not root: nothing is recorded that this
    /// user could not learn themselves ([`Viewer`]). `None`: root, who
    /// may see everything.
    pub viewer: Option<Viewer>,
}

/// The ordinary user a trace is recorded for (docs/SECURITY.md, "What a
/// trace reveals"). A process they could not ptrace is left out from the
/// exec that made it so; the processes' memory maps are read with their
/// rights; and unless [`Viewer::kernel_addresses`], kernel stacks are
/// stored as symbol names and offsets into them, named as root at record
/// time, without one kernel address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewer {
    /// Their user id (not 0).
    pub uid: u32,
    /// Their group id.
    pub gid: u32,
    /// Whether the kernel shows them its addresses
    /// (`jtrace_symbols::kallsyms::shown_to_unprivileged`).
    pub kernel_addresses: bool,
}

/// Default CPU sampling rate: 99 Hz, as perf and async-profiler users
/// commonly choose — off the 100 Hz of periodic kernel work (no lockstep
/// with timers), ≈1 % of a CPU at most, and enough to locate where CPU time
/// goes over seconds of run. CPU time itself is exact from the scheduler,
/// not sampled: samples only say where in the code it was spent.
pub const DEFAULT_CPU_SAMPLE_HZ: u32 = 99;

/// Default [`RecorderConfig::stack_min_block_ns`]: 500 µs. A block's
/// stacks cost ≈ 1.4–4 µs of CPU on the hosts measured (BENCHMARKS.md,
/// "Deferred stacks"), so a thread that blocks for this long and runs for
/// a moment pays at most ≈ 1 % for its stacks, while every block of 1 ms
/// and more keeps its stack.
pub const DEFAULT_STACK_MIN_BLOCK_NS: u64 = 500_000;

/// Default [`RecorderConfig::short_block_stacks_hz`]: 100 per CPU per
/// second, a few hundred µs of CPU a second at most.
pub const DEFAULT_SHORT_BLOCK_STACKS_HZ: u32 = 100;

impl RecorderConfig {
    /// A configuration writing to the open file `out` (named `out_name` in
    /// messages), tracing nothing yet, with the default ring buffer size.
    pub fn new(out: File, out_name: impl Into<PathBuf>) -> Self {
        RecorderConfig {
            out,
            out_name: out_name.into(),
            launcher_tgid: None,
            pids: Vec::new(),
            cgroup: None,
            ringbuf_bytes: DEFAULT_RINGBUF_BYTES,
            syscalls: SyscallMode::default(),
            page_faults: true,
            block_io: true,
            lib_calls: Vec::new(),
            on_write_error: None,
            stacks: true,
            stack_min_block_ns: Some(DEFAULT_STACK_MIN_BLOCK_NS),
            short_block_stacks_hz: DEFAULT_SHORT_BLOCK_STACKS_HZ,
            cpu_sample_hz: DEFAULT_CPU_SAMPLE_HZ,
            agent_library: None,
            min_free: 0,
            chunks: None,
            viewer: None,
        }
    }

    /// [`RecorderConfig::new`] on a file created (or truncated) at `path`,
    /// for callers whose path no other user controls.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        let out = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(RecorderConfig::new(out, path))
    }
}

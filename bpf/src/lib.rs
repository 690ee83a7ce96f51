//! The kernel side of jtrace: eBPF programs on the scheduler, syscall,
//! page-fault and block tracepoints and on uprobes, and the user-space
//! recorder that writes their events to `kernel.bin`.
//!
//! The BPF programs (`bpf/c/*.bpf.c`) filter by process: only threads of
//! *traced* processes produce records. A process is traced when it is listed
//! in [`RecorderConfig::pids`], when it is a new process forked by the
//! launcher ([`RecorderConfig::launcher_tgid`], i.e. jtrace itself), or when
//! it is forked by a traced process. Records go through one BPF ring buffer
//! and are appended verbatim to the stream file by a consumer thread; their
//! layout is the one of the `jtrace-format` crate.
//!
//! Every program is a BTF-enabled tracepoint (tp_btf) or a uprobe (one
//! uprobe.multi link per library on 6.6+, else one attached through the
//! uprobe PMU per function): nothing needs tracefs or kprobes. The kernel must
//! publish its BTF ([`required_kernel_features`]) and be 6.2 or later (the
//! `bpf_rdonly_cast` kfunc, used to read the file behind an fd).
//!
//! What is recorded besides the scheduler (see [`RecorderConfig`]):
//! syscalls ([`SyscallMode`]: by default the syscall of every voluntary
//! switch-out, read at the switch from the task's saved registers, with no
//! syscall hook), user page faults that blocked, block I/O requests issued
//! by traced threads, and interposed library calls
//! ([`RecorderConfig::lib_calls`]).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use jtrace_bpf::{KernelRecorder, RecorderConfig};
//! let mut cfg = RecorderConfig::create("trace/kernel.bin")?;
//! cfg.launcher_tgid = Some(std::process::id());
//! let rec = KernelRecorder::start(cfg)?;
//! // ... spawn and wait for the traced command ...
//! let stats = rec.stop()?;
//! eprintln!("{} records, {} lost", stats.records, stats.lost_total);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod libcalls;
pub mod safepoints;

pub use libcalls::{parse_lib_calls, resolve_lib_calls, LibCallSpec, ResolvedLibCall};

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use jtrace_format::{
    fd_kind, kind, Decoder, Encoder, FileHeader, FilePath, Payload, ProbeDef, Record, KERNEL_MAGIC, RECORD_HEADER_LEN,
};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBufferBuilder, UprobeMultiOpts, UprobeOpts};

#[allow(clippy::all, dead_code, unused_imports, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/jtrace.skel.rs"));
}

/// Where the kernel publishes its BTF; the CO-RE programs need it.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Default size of the BPF ring buffer: 16 MiB.
pub const DEFAULT_RINGBUF_BYTES: usize = 16 << 20;

/// How long one ring buffer poll may wait. The BPF side only wakes the
/// consumer when the buffer is a quarter full, so this is also the normal
/// latency from event to file.
const POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// The file is flushed at least this often so that a killed jtrace still
/// leaves a readable prefix.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Size of the per-kind counter arrays in the BPF programs (`N_KINDS`).
const N_KINDS: u32 = 32;

/// `prev_tid` of a SWITCH_IN that the BPF side inferred (see
/// [`KernelStats::inferred_switch_ins`]): the task that left the CPU is not
/// known. Its timestamp is derived from the thread's CPU time since the
/// scheduler picked it (exact to the nanosecond for normal tasks unless
/// interrupt time was accounted separately), and is never earlier than the
/// last switch recorded on that CPU.
pub const PREV_TID_UNKNOWN: u32 = u32::MAX;

/// Counter slot of the BPF `emitted` array counting inferred switch-ins
/// (`K_INFERRED_SWITCH_IN` in jtrace.h).
const INFERRED_SWITCH_IN_SLOT: u32 = 31;

/// Counter slot 0 of the BPF drop counters: a process could not be added to
/// the filter (its tgid is beyond the bitmap: impossible while
/// [`check_pid_max`] holds, counted anyway). Not a record kind.
const FILTER_FULL_SLOT: u32 = 0;

/// Counter slot of the BPF drop counters: a library call nested deeper than
/// the per-thread stack of libcalls.bpf.c (`K_LIB_TOO_DEEP`).
const LIB_TOO_DEEP_SLOT: u32 = 29;

/// Counter slot of the BPF drop counters: a block request could not be
/// remembered until its completion (`K_BLOCK_MAP_FULL`).
const BLOCK_MAP_FULL_SLOT: u32 = 30;

/// The kernel record kinds the BPF programs emit, with the names used in
/// [`KernelStats`].
const KINDS: [(u16, &str); 11] = [
    (kind::SWITCH_OUT, "switch_out"),
    (kind::SWITCH_IN, "switch_in"),
    (kind::WAKEUP, "wakeup"),
    (kind::FORK, "fork"),
    (kind::EXIT, "exit"),
    (kind::COMM, "comm"),
    (kind::EXEC, "exec"),
    (kind::SYSCALL, "syscall"),
    (kind::PAGE_FAULT, "page_fault"),
    (kind::BLOCK_IO, "block_io"),
    (kind::LIB_CALL, "lib_call"),
];

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
    /// `syscall_mode` of syscall_ctx.h (`SCM_*`).
    fn bpf_value(self) -> u32 {
        match self {
            SyscallMode::None => 0,
            SyscallMode::Blocked => 1,
            SyscallMode::Io => 2,
            SyscallMode::All => 3,
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
        f.write_str(Self::NAMES[self.bpf_value() as usize])
    }
}

/// Checks that this kernel can run the recorder at all: it must publish its
/// BTF (CONFIG_DEBUG_INFO_BTF=y), which the BTF-enabled tracepoints and the
/// CO-RE relocations need.
pub fn required_kernel_features() -> Result<()> {
    if !Path::new(VMLINUX_BTF).exists() {
        bail!(
            "kernel has no BTF at {VMLINUX_BTF}: jtrace needs a kernel built with \
             CONFIG_DEBUG_INFO_BTF=y (Linux 5.5 or later; most distribution kernels have it)"
        );
    }
    Ok(())
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
    pub lib_calls: Vec<LibCallSpec>,
}

impl RecorderConfig {
    /// A configuration writing to the open file `out` (named `out_name` in
    /// messages), tracing nothing yet, with the default ring buffer size.
    pub fn new(out: File, out_name: impl Into<PathBuf>) -> Self {
        RecorderConfig {
            out,
            out_name: out_name.into(),
            launcher_tgid: None,
            pids: Vec::new(),
            ringbuf_bytes: DEFAULT_RINGBUF_BYTES,
            syscalls: SyscallMode::default(),
            page_faults: true,
            block_io: true,
            lib_calls: Vec::new(),
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

/// Counters of one recording session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Records written to the stream file (PROBE_DEF records included).
    pub records: u64,
    /// Records the BPF programs submitted, by kind name (`"switch_out"`,
    /// `"switch_in"`, `"wakeup"`, `"fork"`, `"exit"`, `"comm"`, `"exec"`,
    /// `"syscall"`, `"page_fault"`, `"block_io"`, `"lib_call"`). Every kind
    /// is present, zero or not.
    pub emitted: BTreeMap<&'static str, u64>,
    /// PROBE_DEF records written by the recorder (one per library call probe).
    pub probe_defs: u64,
    /// FILE_PATH records written by the recorder (one per file or directory
    /// some SYSCALL record named and whose path could be resolved).
    pub file_paths: u64,
    /// Records lost, by kind name: every kernel kind (ring buffer full), plus,
    /// when non-zero, `"filter_full"` (a process could not be added to the
    /// filter because its pid is beyond the filter's capacity, so its events
    /// are missing; jtrace refuses to start when `kernel.pid_max` allows
    /// such pids), `"lib_too_deep"` (library calls
    /// nested deeper than 16 per thread), `"block_map_full"` (a block request
    /// could not be followed to its completion), `"missed_runs"` (runs of a
    /// program the kernel skipped) and `"malformed"` (a record whose size
    /// disagreed with its header).
    pub lost: BTreeMap<&'static str, u64>,
    /// Sum of [`KernelStats::lost`].
    pub lost_total: u64,
    /// SWITCH_IN records (included in `emitted["switch_in"]`) that the BPF
    /// side inferred because a thread was switched out without its switch-in
    /// having been reported; they carry `prev_tid` [`PREV_TID_UNKNOWN`].
    /// Non-zero on kernels or sandboxes that run no tracepoint programs while
    /// some (hidden) task is current.
    pub inferred_switch_ins: u64,
}

/// A running recording session: BPF programs attached and a consumer thread
/// writing the stream file. Dropping it without [`KernelRecorder::stop`]
/// also stops it, discarding the statistics.
pub struct KernelRecorder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<KernelStats>>>,
}

impl std::fmt::Debug for KernelRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelRecorder")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl KernelRecorder {
    /// Loads and attaches the BPF programs, creates the stream file with its
    /// header and starts the consumer thread. Returns once events are being
    /// recorded, or with the reason they cannot be.
    pub fn start(cfg: RecorderConfig) -> Result<KernelRecorder> {
        required_kernel_features()?;
        check_pid_max()?;
        let probes = resolve_lib_calls(&cfg.lib_calls)?;
        let rb = cfg.ringbuf_bytes;
        if !rb.is_power_of_two() || rb < page_size() || rb > u32::MAX as usize {
            bail!(
                "ring buffer size {rb} must be a power of two, at least one page ({} bytes) \
                 and below 4 GiB",
                page_size()
            );
        }
        let mut file = cfg
            .out
            .try_clone()
            .with_context(|| format!("using {}", cfg.out_name.display()))?;
        file.write_all(&FileHeader::new(KERNEL_MAGIC).to_bytes())
            .with_context(|| format!("writing {}", cfg.out_name.display()))?;
        // The names of the library-call probe ids, before any LIB_CALL.
        let mut enc = Encoder::new();
        for (i, p) in probes.iter().enumerate() {
            enc.record(&Record {
                tid: 0,
                ts: 0,
                payload: Payload::ProbeDef(ProbeDef {
                    probe: i as u32,
                    library: p.spec.library.clone(),
                    symbol: p.spec.symbol.clone(),
                }),
            });
        }
        file.write_all(&enc.buf)
            .with_context(|| format!("writing {}", cfg.out_name.display()))?;

        // The skeleton borrows its object and the ring buffer borrows the
        // skeleton, so all of them live on the consumer thread's stack; the
        // thread reports set-up success or failure through this channel.
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jtrace-kernel".into())
            .spawn(move || record(cfg, probes, file, &stop2, ready_tx))
            .context("spawning the kernel consumer thread")?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(KernelRecorder {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(anyhow!("the kernel consumer thread died while starting")),
            },
        }
    }

    /// Detaches the programs, writes what is left in the ring buffer, flushes
    /// and fsyncs the stream file, and returns the counters.
    pub fn stop(mut self) -> Result<KernelStats> {
        self.finish().expect("thread present until stop or drop")
    }

    fn finish(&mut self) -> Option<Result<KernelStats>> {
        let thread = self.thread.take()?;
        self.stop.store(true, Ordering::Release);
        Some(match thread.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow!("the kernel consumer thread panicked")),
        })
    }
}

impl Drop for KernelRecorder {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// The consumer side of the ring buffer: appends samples to the file.
struct Sink {
    out: BufWriter<File>,
    records: u64,
    malformed: u64,
    /// WAKEUP records written by [`flush_pending_wakeups`]: not counted by
    /// the BPF side.
    flushed_wakeups: u64,
    error: Option<std::io::Error>,
    paths: PathResolver,
}

/// Offset of `fd_kind` in a SYSCALL payload (after `exit_ts` and `nr`;
/// `Syscall::from_bytes` in jtrace-format).
const SYSCALL_FD_KIND_OFFSET: usize = 12;

/// How many times the path of one inode is looked for before giving up
/// (the fd may be closed, or the thread gone, by the time its record is read).
const PATH_ATTEMPTS: u8 = 3;

/// Names the files SYSCALL records refer to by (dev, ino): once per inode,
/// from `/proc/<tid>/fd/<fd>` while the fd is (usually) still open, checked
/// with stat against the record's dev and ino so that a reused fd or a
/// renamed file never gets a wrong name.
#[derive(Default)]
struct PathResolver {
    /// Per inode: the attempts left, `None` when resolved or given up.
    seen: std::collections::HashMap<(u64, u64), Option<u8>>,
    written: u64,
}

impl PathResolver {
    /// The FILE_PATH record for the file of this SYSCALL sample, if it is
    /// the first time its inode is seen and its path can be confirmed.
    fn file_path(&mut self, sample: &[u8]) -> Option<Record> {
        // Most SYSCALL records name no file: look at their fd_kind before
        // decoding the whole record (the decode was ≈12 % of the consumer).
        let at = RECORD_HEADER_LEN + SYSCALL_FD_KIND_OFFSET;
        let kind = u32::from_le_bytes(sample.get(at..at + 4)?.try_into().ok()?);
        if kind != fd_kind::FILE && kind != fd_kind::DIR {
            return None;
        }
        let rec = Decoder::new(sample, 0).next()?.ok()?;
        let Payload::Syscall(sc) = rec.payload else {
            return None;
        };
        if !(sc.fd_kind == fd_kind::FILE || sc.fd_kind == fd_kind::DIR) || sc.fd < 0 || sc.ino == 0 {
            return None;
        }
        let key = (sc.dev, sc.ino);
        let left = self.seen.entry(key).or_insert(Some(PATH_ATTEMPTS));
        let n = (*left)?;
        let path = resolve_path(rec.tid, sc.fd, sc.dev, sc.ino);
        // None once resolved, or out of attempts: never looked for again.
        *left = if path.is_some() {
            None
        } else {
            Some(n - 1).filter(|&n| n > 0)
        };
        let path = path?;
        self.written += 1;
        Some(Record {
            tid: 0,
            ts: rec.ts,
            payload: Payload::FilePath(FilePath {
                dev: sc.dev,
                ino: sc.ino,
                path,
            }),
        })
    }
}

/// The path of `fd` of thread `tid` if it is still the file (dev, ino) the
/// kernel reported (dev in the kernel's `major << 20 | minor` encoding).
fn resolve_path(tid: u32, fd: i32, dev: u64, ino: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).ok()?;
    let path = link.to_str()?;
    // "/x (deleted)", "pipe:[…]", "anon_inode:…" are not paths to show.
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let md = std::fs::metadata(path).ok()?;
    let kdev = u64::from(libc::major(md.dev())) << 20 | u64::from(libc::minor(md.dev()));
    (kdev == dev && md.ino() == ino).then(|| path.to_string())
}

impl Sink {
    /// One ring-buffer sample: one record, or several written together (a
    /// switch with its SYSCALL / PAGE_FAULT, SWITCH_OUT and SWITCH_IN).
    fn sample(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // The BPF side writes each record's length into its header; a
            // length that disagrees with the sample would desynchronise every
            // reader after it, so the rest of the sample is dropped.
            let len = match data.get(2..4) {
                Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize,
                None => 0,
            };
            if len < RECORD_HEADER_LEN || len > data.len() || len & 7 != 0 {
                self.malformed += 1;
                return;
            }
            let (rec, rest) = data.split_at(len);
            self.record(rec);
            data = rest;
        }
    }

    fn record(&mut self, data: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.out.write_all(data) {
            Ok(()) => self.records += 1,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        }
        if u16::from_le_bytes([data[0], data[1]]) == kind::SYSCALL {
            if let Some(rec) = self.paths.file_path(data) {
                let mut enc = Encoder::new();
                enc.record(&rec);
                match self.out.write_all(&enc.buf) {
                    Ok(()) => self.records += 1,
                    Err(e) => self.error = Some(e),
                }
            }
        }
    }

    fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }
}

fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let perm = matches!(e.kind(), libbpf_rs::ErrorKind::PermissionDenied);
    let hint = if !root || perm {
        " (are you root / CAP_BPF+CAP_PERFMON?)"
    } else {
        " (the libbpf messages above say why)"
    };
    anyhow!("{what} failed: {e}{hint}")
}

/// Sends a set-up error to `start()` and keeps its text for the thread result.
fn report_failure(ready: &mpsc::SyncSender<Result<()>>, e: anyhow::Error) -> anyhow::Error {
    let msg = format!("{e:#}");
    let _ = ready.send(Err(e));
    anyhow!(msg)
}

/// Body of the consumer thread: set-up, then the poll loop, then the drain.
fn record(
    cfg: RecorderConfig,
    probes: Vec<ResolvedLibCall>,
    file: File,
    stop: &AtomicBool,
    ready: mpsc::SyncSender<Result<()>>,
) -> Result<KernelStats> {
    let mut object = MaybeUninit::uninit();
    let (mut sk, mut uprobes) = setup(&cfg, &probes, &mut object).map_err(|e| report_failure(&ready, e))?;
    let sink = RefCell::new(Sink {
        out: BufWriter::with_capacity(1 << 20, file),
        records: 0,
        malformed: 0,
        flushed_wakeups: 0,
        error: None,
        paths: PathResolver::default(),
    });
    pump(&mut sk, &mut uprobes, &sink, stop, &ready)?;

    let mut stats = read_stats(&sk, &sink.borrow())?;
    stats.probe_defs = probes.len() as u64;
    stats.file_paths = sink.borrow().paths.written;
    stats.records += stats.probe_defs;
    let Sink { out, error, .. } = sink.into_inner();
    if let Some(e) = error {
        return Err(e).with_context(|| format!("writing {}", cfg.out_name.display()));
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
        .with_context(|| format!("fsync {}", cfg.out_name.display()))?;
    Ok(stats)
}

/// Tracepoints (BTF names `btf_trace_<name>`) of the scheduler programs,
/// always needed; the others depend on the configuration.
const SCHED_TRACEPOINTS: [&str; 7] = [
    "sched_switch",
    "sched_waking",
    "sched_wakeup_new",
    "sched_process_fork",
    "sched_process_exit",
    "sched_process_exec",
    "task_rename",
];

/// The running kernel's release if it is older than `major.minor`.
fn kernel_older_than(major: u32, minor: u32) -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim().to_string();
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let (ma, mi) = (it.next()??, it.next()??);
    ((ma, mi) < (major, minor)).then_some(release)
}

/// The tracepoints among `wanted` that this kernel's BTF does not know.
fn missing_tracepoints(wanted: &[&str]) -> Vec<String> {
    let Ok(btf) = std::fs::read(VMLINUX_BTF) else {
        return Vec::new();
    };
    let has = |name: &str| {
        let needle = format!("\0btf_trace_{name}\0");
        btf.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    wanted.iter().filter(|n| !has(n)).map(|n| n.to_string()).collect()
}

/// Capacity of the BPF filter bitmap (`TRACED_TGID_LIMIT` in jtrace.h):
/// PID_MAX_LIMIT of a 64-bit kernel, the largest `kernel.pid_max` allowed.
const FILTER_TGID_LIMIT: u32 = 4 << 20;

/// Checks that every pid this kernel can hand out fits in the filter, so
/// that no process of the traced tree can be missed for want of room.
fn check_pid_max() -> Result<()> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
    let pid_max: u64 = text
        .trim()
        .parse()
        .with_context(|| format!("{PATH} holds {:?}, not a number", text.trim()))?;
    if pid_max > u64::from(FILTER_TGID_LIMIT) {
        bail!(
            "kernel.pid_max is {pid_max}, above the {FILTER_TGID_LIMIT} process ids jtrace's \
             filter holds; lower it (sysctl kernel.pid_max={FILTER_TGID_LIMIT})"
        );
    }
    Ok(())
}

/// Sets the filter bit of `tgid` (before the programs are attached: no
/// BPF program writes the bitmap yet).
fn filter_add(bits: &mut [u64], tgid: u32) -> Result<()> {
    let word = bits
        .get_mut((tgid / 64) as usize)
        .filter(|_| tgid < FILTER_TGID_LIMIT)
        .with_context(|| {
            format!("cannot trace pid {tgid}: above the {FILTER_TGID_LIMIT} process ids jtrace's filter holds")
        })?;
    *word |= 1 << (tgid % 64);
    Ok(())
}

/// Opens the BPF object with the configuration applied (programs of the
/// features not wanted are not even loaded), loads it, fills the filter
/// with the given pids, attaches the tracepoint programs and one uprobe /
/// uretprobe pair per library call.
fn setup<'o>(
    cfg: &RecorderConfig,
    probes: &[ResolvedLibCall],
    object: &'o mut MaybeUninit<OpenObject>,
) -> Result<(skel::JtraceSkel<'o>, Vec<Link>)> {
    let mut open = skel::JtraceSkelBuilder::default()
        .open(object)
        .map_err(|e| load_error("opening the BPF object", e))?;
    open.maps
        .events
        .set_max_entries(cfg.ringbuf_bytes as u32)
        .map_err(|e| anyhow!("setting the ring buffer size to {}: {e}", cfg.ringbuf_bytes))?;
    let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped");
    rodata.launcher_tgid = cfg.launcher_tgid.unwrap_or(0);
    rodata.syscall_mode = cfg.syscalls.bpf_value();
    rodata.wake_bytes = cfg.ringbuf_bytes as u64 / 4;
    rodata.query_every = query_every(cfg.ringbuf_bytes, libbpf_rs::num_possible_cpus().unwrap_or(1024));
    // Full syscall records only: the at-switch ones need no program of their own.
    let syscalls = matches!(cfg.syscalls, SyscallMode::Io | SyscallMode::All);
    let p = &mut open.progs;
    p.sys_enter.set_autoload(syscalls);
    p.sys_exit.set_autoload(syscalls);
    p.page_fault_user.set_autoload(cfg.page_faults);
    p.block_rq_insert.set_autoload(cfg.block_io);
    p.block_rq_issue.set_autoload(cfg.block_io);
    p.block_rq_complete.set_autoload(cfg.block_io);
    // Multi links detach in one RCU grace period per link instead of one
    // per uprobe (≈0.1 s each here); they need Linux 6.6. The environment
    // variable lets the tests run the older path on a new kernel.
    let multi = kernel_older_than(6, 6).is_none() && std::env::var_os("JTRACE_NO_UPROBE_MULTI").is_none();
    p.lib_enter.set_autoload(!probes.is_empty() && !multi);
    p.lib_exit.set_autoload(!probes.is_empty() && !multi);
    p.lib_enter_multi.set_autoload(!probes.is_empty() && multi);
    p.lib_exit_multi.set_autoload(!probes.is_empty() && multi);
    let mut wanted: Vec<&str> = SCHED_TRACEPOINTS.to_vec();
    if syscalls {
        wanted.extend(["sys_enter", "sys_exit"]);
    }
    if cfg.page_faults {
        wanted.push("page_fault_user");
    }
    if cfg.block_io {
        wanted.extend(["block_rq_insert", "block_rq_issue", "block_rq_complete"]);
    }
    // libbpf raises RLIMIT_MEMLOCK itself on kernels that still charge BPF
    // memory to it (< 5.11); newer ones do not need it.
    let mut sk = match open.load() {
        Ok(sk) => sk,
        Err(e) => {
            let missing = missing_tracepoints(&wanted);
            if !missing.is_empty() {
                bail!(
                    "this kernel lacks the tracepoint(s) {} (no btf_trace_<name> in {VMLINUX_BTF}); \
                     jtrace needs them{}",
                    missing.join(", "),
                    if missing
                        .iter()
                        .any(|m| m.starts_with("block_") || m.starts_with("page_"))
                    {
                        " (or turn the feature off)"
                    } else {
                        ""
                    }
                );
            }
            if let Some(release) = kernel_older_than(6, 2) {
                bail!(
                    "this kernel ({release}) is older than 6.2: jtrace needs the BPF helper \
                     bpf_task_pt_regs in tracing programs (5.15) to tell which syscall a thread \
                     blocks in, and the kfunc bpf_rdonly_cast (6.2) to read the file behind its \
                     fd ({e})"
                );
            }
            return Err(load_error("loading BPF programs", e));
        }
    };
    let filter = &mut sk
        .maps
        .bss_data
        .as_deref_mut()
        .context("the BPF filter (.bss) is not memory-mapped")?
        .traced_bits;
    for &pid in &cfg.pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("cannot trace pid {pid}: no such process");
        }
        filter_add(filter, pid)?;
    }
    sk.attach().map_err(|e| load_error("attaching BPF programs", e))?;
    let links = if multi {
        attach_lib_calls_multi(&sk, probes)?
    } else {
        attach_lib_calls(&sk, probes)?
    };
    Ok((sk, links))
}

/// One uprobe.multi and one uretprobe.multi link per library, for all of
/// its functions; the probe id (index in `probes`) is each one's cookie.
fn attach_lib_calls_multi(sk: &skel::JtraceSkel<'_>, probes: &[ResolvedLibCall]) -> Result<Vec<Link>> {
    let mut by_library: BTreeMap<&Path, Vec<usize>> = BTreeMap::new();
    for (id, p) in probes.iter().enumerate() {
        by_library.entry(&p.path).or_default().push(id);
    }
    let mut links = Vec::new();
    for (path, ids) in by_library {
        for (prog, retprobe) in [(&sk.progs.lib_enter_multi, false), (&sk.progs.lib_exit_multi, true)] {
            let opts = UprobeMultiOpts {
                offsets: ids.iter().map(|&id| probes[id].offset as usize).collect(),
                cookies: ids.iter().map(|&id| id as u64).collect(),
                retprobe,
                ..Default::default()
            };
            // pid -1: every process; the BPF side keeps traced ones only.
            let link = prog.attach_uprobe_multi_with_opts(-1, path, "", opts).map_err(|e| {
                let calls: Vec<String> = ids.iter().map(|&id| probes[id].spec.to_string()).collect();
                load_error(
                    &format!(
                        "attaching {} to {} ({})",
                        if retprobe { "uretprobes" } else { "uprobes" },
                        calls.join(", "),
                        path.display()
                    ),
                    e,
                )
            })?;
            links.push(link);
        }
    }
    Ok(links)
}

/// One uprobe / uretprobe pair per library call (kernels before 6.6).
fn attach_lib_calls(sk: &skel::JtraceSkel<'_>, probes: &[ResolvedLibCall]) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for (id, p) in probes.iter().enumerate() {
        for (prog, retprobe) in [(&sk.progs.lib_enter, false), (&sk.progs.lib_exit, true)] {
            let opts = UprobeOpts {
                cookie: id as u64,
                retprobe,
                ..Default::default()
            };
            // pid -1: every process; the BPF side keeps traced ones only.
            let link = prog
                .attach_uprobe_with_opts(-1, &p.path, p.offset as usize, opts)
                .map_err(|e| {
                    load_error(
                        &format!(
                            "attaching a {} to {} ({})",
                            if retprobe { "uretprobe" } else { "uprobe" },
                            p.spec,
                            p.path.display()
                        ),
                        e,
                    )
                })?;
            links.push(link);
        }
    }
    Ok(links)
}

/// Moves samples from the ring buffer to the sink until `stop`, then
/// detaches the programs and drains what is left.
fn pump(
    sk: &mut skel::JtraceSkel<'_>,
    uprobes: &mut Vec<Link>,
    sink: &RefCell<Sink>,
    stop: &AtomicBool,
    ready: &mpsc::SyncSender<Result<()>>,
) -> Result<()> {
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&sk.maps.events, |data: &[u8]| {
            sink.borrow_mut().sample(data);
            0
        })
        .map_err(|e| report_failure(ready, anyhow!("setting up the ring buffer consumer: {e}")))?;
    let rb = builder
        .build()
        .map_err(|e| report_failure(ready, anyhow!("setting up the ring buffer consumer: {e}")))?;
    let _ = ready.send(Ok(()));

    let mut last_flush = Instant::now();
    while !stop.load(Ordering::Acquire) {
        // The BPF side usually submits without a wakeup, so a poll that
        // times out has not consumed anything: consume explicitly.
        if let Err(e) = rb.poll(POLL_TIMEOUT).and_then(|()| rb.consume()) {
            // EINTR from a signal (Ctrl-C) is not a reason to stop recording.
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                return Err(anyhow!("polling the BPF ring buffer: {e}"));
            }
        }
        if last_flush.elapsed() >= FLUSH_EVERY {
            sink.borrow_mut().flush();
            last_flush = Instant::now();
        }
    }
    // Detach first so that nothing arrives after the final drain. Each
    // uprobe link's release waits for an RCU grace period (≈0.1 s here):
    // released together, the waits overlap.
    std::thread::scope(|s| {
        for link in uprobes.drain(..) {
            s.spawn(move || drop(link));
        }
    });
    sk.links = Default::default();
    rb.consume().map_err(|e| anyhow!("draining the BPF ring buffer: {e}"))?;
    flush_pending_wakeups(sk, &mut sink.borrow_mut())
}

/// Most bytes one sched_switch batch writes (`BATCH_BYTES` plus a WAKEUP,
/// sched.bpf.c).
const BATCH_MAX_BYTES: usize = 256 + 40;

/// One switch batch in how many asks the ring buffer how full it is (to
/// wake the consumer early, see `batch_wake_flags` in sched.bpf.c): as
/// rarely as 1 in 64, but so that what all CPUs may write between two
/// queries stays within a quarter of the buffer, the slack between the
/// wake-up threshold (a quarter full) and the middle.
fn query_every(ringbuf_bytes: usize, cpus: usize) -> u32 {
    (ringbuf_bytes / 4 / (BATCH_MAX_BYTES * cpus.max(1))).clamp(1, 64) as u32
}

/// Offset of the WAKEUP record in a `struct switch_batch` value
/// (sched.bpf.c), after the `wake_pending` flag and its padding.
const BATCH_WAKE_OFFSET: usize = 8;

/// Writes the WAKEUP records still waiting in the per-CPU switch batches
/// (sched.bpf.c defers a wakeup to the next switch of its CPU): once the
/// programs are detached, nothing else will write them.
fn flush_pending_wakeups(sk: &skel::JtraceSkel<'_>, sink: &mut Sink) -> Result<()> {
    let per_cpu = sk
        .maps
        .switch_batches
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .context("reading the BPF switch batches")?
        .unwrap_or_default();
    for v in per_cpu {
        let pending = v.get(..4).is_some_and(|b| b != [0; 4]);
        let len = v
            .get(BATCH_WAKE_OFFSET + 2..BATCH_WAKE_OFFSET + 4)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
        if let (true, Some(rec)) = (pending, v.get(BATCH_WAKE_OFFSET..BATCH_WAKE_OFFSET + len)) {
            let before = sink.records;
            sink.sample(rec);
            sink.flushed_wakeups += sink.records - before;
        }
    }
    Ok(())
}

/// Sums a per-CPU u64 counter array of the BPF programs.
fn percpu_sum(map: &dyn MapCore, slot: u32) -> Result<u64> {
    let vals = map
        .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading BPF map {:?}", map.name()))?
        .unwrap_or_default();
    Ok(vals
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .sum())
}

/// Runs of a program the kernel skipped because the same program was already
/// running on that CPU (its recursion guard); each may be lost records.
fn recursion_misses(fd: BorrowedFd<'_>) -> u64 {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` and `len` are valid for writes and `len` is the size of
    // `info`; the kernel writes at most `len` bytes.
    let ret = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if ret == 0 {
        info.recursion_misses
    } else {
        0
    }
}

fn read_stats(sk: &skel::JtraceSkel<'_>, sink: &Sink) -> Result<KernelStats> {
    let mut st = KernelStats {
        records: sink.records,
        ..Default::default()
    };
    debug_assert!(KINDS.iter().all(|&(k, _)| u32::from(k) < N_KINDS));
    for (k, name) in KINDS {
        st.emitted.insert(name, percpu_sum(&sk.maps.emitted, k.into())?);
        st.lost.insert(name, percpu_sum(&sk.maps.dropped, k.into())?);
    }
    *st.emitted.entry("wakeup").or_default() += sink.flushed_wakeups;
    st.inferred_switch_ins = percpu_sum(&sk.maps.emitted, INFERRED_SWITCH_IN_SLOT)?;
    let p = &sk.progs;
    let missed: u64 = [
        &p.sched_switch,
        &p.sched_waking,
        &p.sched_wakeup_new,
        &p.sched_process_fork,
        &p.sched_process_exit,
        &p.sched_process_exec,
        &p.task_rename,
        &p.sys_enter,
        &p.sys_exit,
        &p.page_fault_user,
        &p.block_rq_insert,
        &p.block_rq_issue,
        &p.block_rq_complete,
        &p.lib_enter,
        &p.lib_exit,
        &p.lib_enter_multi,
        &p.lib_exit_multi,
    ]
    .into_iter()
    .filter(|prog| prog.autoload())
    .map(|prog| recursion_misses(prog.as_fd()))
    .sum();
    if missed > 0 {
        st.lost.insert("missed_runs", missed);
    }
    let filter_full = percpu_sum(&sk.maps.dropped, FILTER_FULL_SLOT)?;
    if filter_full > 0 {
        st.lost.insert("filter_full", filter_full);
    }
    for (slot, name) in [
        (LIB_TOO_DEEP_SLOT, "lib_too_deep"),
        (BLOCK_MAP_FULL_SLOT, "block_map_full"),
    ] {
        let n = percpu_sum(&sk.maps.dropped, slot)?;
        if n > 0 {
            st.lost.insert(name, n);
        }
    }
    if sink.malformed > 0 {
        st.lost.insert("malformed", sink.malformed);
    }
    st.lost_total = st.lost.values().sum();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_bits_are_set_per_tgid_and_out_of_range_refused() {
        let mut bits = vec![0u64; (FILTER_TGID_LIMIT / 64) as usize];
        filter_add(&mut bits, 1).unwrap();
        filter_add(&mut bits, 64 + 3).unwrap();
        filter_add(&mut bits, FILTER_TGID_LIMIT - 1).unwrap();
        assert_eq!(bits[0], 0b10);
        assert_eq!(bits[1], 1 << 3);
        assert_eq!(*bits.last().unwrap(), 1 << 63);
        assert_eq!(bits.iter().map(|w| w.count_ones()).sum::<u32>(), 3);
        let e = filter_add(&mut bits, FILTER_TGID_LIMIT).unwrap_err().to_string();
        assert!(e.contains("cannot trace pid 4194304"), "{e}");
        // This kernel's pid_max fits (Linux caps it at the filter's capacity).
        check_pid_max().unwrap();
    }

    #[test]
    fn syscall_fd_kind_offset_matches_the_format() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: Payload::Syscall(jtrace_format::Syscall {
                exit_ts: 3,
                nr: 4,
                fd_kind: fd_kind::DIR,
                ..Default::default()
            }),
        });
        let at = RECORD_HEADER_LEN + SYSCALL_FD_KIND_OFFSET;
        assert_eq!(
            u32::from_le_bytes(enc.buf[at..at + 4].try_into().unwrap()),
            fd_kind::DIR
        );
    }

    #[test]
    fn ring_buffer_is_queried_often_enough_for_every_size() {
        assert_eq!(query_every(DEFAULT_RINGBUF_BYTES, 2), 64);
        assert_eq!(query_every(4096, 2), 1);
        assert_eq!(query_every(64 << 10, 2), 27);
        for shift in 12..=30 {
            for cpus in [1, 2, 64, 4096] {
                let rb = 1usize << shift;
                let q = query_every(rb, cpus) as usize;
                assert!((1..=64).contains(&q));
                // What all CPUs write unqueried fits in the slack (rb / 4),
                // unless a query on every batch is already the most we can do.
                assert!(q == 1 || q * BATCH_MAX_BYTES * cpus <= rb / 4, "{rb} {cpus}: {q}");
            }
        }
    }

    #[test]
    fn samples_are_split_into_records_and_bad_lengths_counted() {
        let path = std::env::temp_dir().join(format!("jtrace-bpf-sink-{}", std::process::id()));
        let mut sink = Sink {
            out: BufWriter::new(File::create(&path).unwrap()),
            records: 0,
            malformed: 0,
            flushed_wakeups: 0,
            error: None,
            paths: PathResolver::default(),
        };
        let rec = |kind: u16, len: u16| {
            let mut r = vec![0u8; len as usize];
            r[..2].copy_from_slice(&kind.to_le_bytes());
            r[2..4].copy_from_slice(&len.to_le_bytes());
            r
        };
        // A batch of three records, then a lone one.
        let batch = [
            rec(kind::WAKEUP, 40),
            rec(kind::SWITCH_OUT, 32),
            rec(kind::SWITCH_IN, 32),
        ]
        .concat();
        sink.sample(&batch);
        sink.sample(&rec(kind::SWITCH_IN, 32));
        assert_eq!((sink.records, sink.malformed), (4, 0));
        // A length past the sample's end: the rest of the sample is dropped.
        let mut bad = [rec(kind::SWITCH_OUT, 32), rec(kind::SWITCH_IN, 32)].concat();
        bad[34] = 64;
        sink.sample(&bad);
        // Not a multiple of 8, and shorter than a header.
        sink.sample(&rec(kind::SWITCH_IN, 20));
        sink.sample(&[0u8; 3]);
        assert_eq!((sink.records, sink.malformed), (5, 3));
        sink.flush();
        drop(sink);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 40 + 32 + 32 + 32 + 32);
        std::fs::remove_file(&path).unwrap();
    }
}

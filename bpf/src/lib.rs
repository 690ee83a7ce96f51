//! The kernel side of jtrace: eBPF programs on the scheduler tracepoints and
//! the user-space recorder that writes their events to `kernel.bin`.
//!
//! The BPF programs (`bpf/c/*.bpf.c`) filter by process: only threads of
//! *traced* processes produce records. A process is traced when it is listed
//! in [`RecorderConfig::pids`], when it is a new process forked by the
//! launcher ([`RecorderConfig::launcher_tgid`], i.e. jtrace itself), or when
//! it is forked by a traced process. Records go through one BPF ring buffer
//! and are appended verbatim to the stream file by a consumer thread; their
//! layout is the one of the `jtrace-format` crate.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use jtrace_bpf::{KernelRecorder, RecorderConfig};
//! let mut cfg = RecorderConfig::new("trace/kernel.bin");
//! cfg.launcher_tgid = Some(std::process::id());
//! let rec = KernelRecorder::start(cfg)?;
//! // ... spawn and wait for the traced command ...
//! let stats = rec.stop()?;
//! eprintln!("{} records, {} lost", stats.records, stats.lost_total);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

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
use jtrace_format::{kind, FileHeader, KERNEL_MAGIC, RECORD_HEADER_LEN};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, RingBufferBuilder};

#[allow(clippy::all, dead_code, unused_imports, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/sched.skel.rs"));
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
/// known. Its timestamp is derived from the thread's CPU time, exact to the
/// nanosecond unless interrupt time was accounted separately.
pub const PREV_TID_UNKNOWN: u32 = u32::MAX;

/// Counter slot of the BPF `emitted` array counting inferred switch-ins
/// (`K_INFERRED_SWITCH_IN` in jtrace.h).
const INFERRED_SWITCH_IN_SLOT: u32 = 31;

/// Counter slot 0 of the BPF drop counters: a process could not be added to
/// the filter map (it was full). Not a record kind.
const FILTER_FULL_SLOT: u32 = 0;

/// The kernel record kinds, with the names used in [`KernelStats`].
const KINDS: [(u16, &str); 7] = [
    (kind::SWITCH_OUT, "switch_out"),
    (kind::SWITCH_IN, "switch_in"),
    (kind::WAKEUP, "wakeup"),
    (kind::FORK, "fork"),
    (kind::EXIT, "exit"),
    (kind::COMM, "comm"),
    (kind::EXEC, "exec"),
];

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecorderConfig {
    /// Path of the kernel stream file (`kernel.bin`); created or truncated.
    pub out: PathBuf,
    /// Process id of the launcher: new processes it forks (not its own new
    /// threads) are traced, with their descendants. `None` for attach mode.
    pub launcher_tgid: Option<u32>,
    /// Already-running processes to trace, with processes they fork later.
    pub pids: Vec<u32>,
    /// Size of the BPF ring buffer in bytes: a power of two and a multiple
    /// of the page size. [`DEFAULT_RINGBUF_BYTES`] is a good default.
    pub ringbuf_bytes: usize,
}

impl RecorderConfig {
    /// A configuration writing to `out`, tracing nothing yet, with the
    /// default ring buffer size.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        RecorderConfig {
            out: out.into(),
            launcher_tgid: None,
            pids: Vec::new(),
            ringbuf_bytes: DEFAULT_RINGBUF_BYTES,
        }
    }
}

/// Counters of one recording session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Records written to the stream file.
    pub records: u64,
    /// Records the BPF programs submitted, by kind name (`"switch_out"`,
    /// `"switch_in"`, `"wakeup"`, `"fork"`, `"exit"`, `"comm"`, `"exec"`).
    /// Every kernel kind is present, zero or not.
    pub emitted: BTreeMap<&'static str, u64>,
    /// Records lost, by kind name: every kernel kind (ring buffer full), plus
    /// `"filter_full"` (a process could not be added to the filter, so its
    /// events are missing) and `"malformed"` (a sample whose size disagreed
    /// with its header) when non-zero.
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
        let rb = cfg.ringbuf_bytes;
        if !rb.is_power_of_two() || rb < page_size() || rb > u32::MAX as usize {
            bail!(
                "ring buffer size {rb} must be a power of two, at least one page ({} bytes) \
                 and below 4 GiB",
                page_size()
            );
        }
        let mut file = File::create(&cfg.out).with_context(|| format!("creating {}", cfg.out.display()))?;
        file.write_all(&FileHeader::new(KERNEL_MAGIC).to_bytes())
            .with_context(|| format!("writing {}", cfg.out.display()))?;

        // The skeleton borrows its object and the ring buffer borrows the
        // skeleton, so all of them live on the consumer thread's stack; the
        // thread reports set-up success or failure through this channel.
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jtrace-kernel".into())
            .spawn(move || record(cfg, file, &stop2, ready_tx))
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
    error: Option<std::io::Error>,
}

impl Sink {
    fn sample(&mut self, data: &[u8]) {
        // The BPF side writes the total length into the header; a sample of
        // another size would desynchronise every reader after it.
        let ok = data.len() >= RECORD_HEADER_LEN
            && u16::from_le_bytes([data[2], data[3]]) as usize == data.len()
            && data.len() & 7 == 0;
        if !ok {
            self.malformed += 1;
            return;
        }
        if self.error.is_some() {
            return;
        }
        match self.out.write_all(data) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
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
    file: File,
    stop: &AtomicBool,
    ready: mpsc::SyncSender<Result<()>>,
) -> Result<KernelStats> {
    let mut object = MaybeUninit::uninit();
    let mut sk = setup(&cfg, &mut object).map_err(|e| report_failure(&ready, e))?;
    let sink = RefCell::new(Sink {
        out: BufWriter::with_capacity(1 << 20, file),
        records: 0,
        malformed: 0,
        error: None,
    });
    pump(&mut sk, &sink, stop, &ready)?;

    let stats = read_stats(&sk, &sink.borrow())?;
    let Sink { out, error, .. } = sink.into_inner();
    if let Some(e) = error {
        return Err(e).with_context(|| format!("writing {}", cfg.out.display()));
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
        .with_context(|| format!("fsync {}", cfg.out.display()))?;
    Ok(stats)
}

/// Opens the BPF object with the configuration applied, loads it, fills the
/// filter with the given pids and attaches the programs.
fn setup<'o>(cfg: &RecorderConfig, object: &'o mut MaybeUninit<OpenObject>) -> Result<skel::SchedSkel<'o>> {
    let mut open = skel::SchedSkelBuilder::default()
        .open(object)
        .map_err(|e| load_error("opening the BPF object", e))?;
    open.maps
        .events
        .set_max_entries(cfg.ringbuf_bytes as u32)
        .map_err(|e| anyhow!("setting the ring buffer size to {}: {e}", cfg.ringbuf_bytes))?;
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata is mmapped")
        .launcher_tgid = cfg.launcher_tgid.unwrap_or(0);
    // libbpf raises RLIMIT_MEMLOCK itself on kernels that still charge BPF
    // memory to it (< 5.11); newer ones do not need it.
    let mut sk = open.load().map_err(|e| load_error("loading BPF programs", e))?;
    for &pid in &cfg.pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("cannot trace pid {pid}: no such process");
        }
        sk.maps
            .traced_tgids
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .with_context(|| format!("adding pid {pid} to the filter"))?;
    }
    sk.attach().map_err(|e| load_error("attaching BPF programs", e))?;
    Ok(sk)
}

/// Moves samples from the ring buffer to the sink until `stop`, then
/// detaches the programs and drains what is left.
fn pump(
    sk: &mut skel::SchedSkel<'_>,
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
    // Detach first so that nothing arrives after the final drain.
    sk.links = Default::default();
    rb.consume().map_err(|e| anyhow!("draining the BPF ring buffer: {e}"))
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

fn read_stats(sk: &skel::SchedSkel<'_>, sink: &Sink) -> Result<KernelStats> {
    let mut st = KernelStats {
        records: sink.records,
        ..Default::default()
    };
    debug_assert!(KINDS.iter().all(|&(k, _)| u32::from(k) < N_KINDS));
    for (k, name) in KINDS {
        st.emitted.insert(name, percpu_sum(&sk.maps.emitted, k.into())?);
        st.lost.insert(name, percpu_sum(&sk.maps.dropped, k.into())?);
    }
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
    ]
    .into_iter()
    .map(|prog| recursion_misses(prog.as_fd()))
    .sum();
    if missed > 0 {
        st.lost.insert("missed_runs", missed);
    }
    let filter_full = percpu_sum(&sk.maps.dropped, FILTER_FULL_SLOT)?;
    if filter_full > 0 {
        st.lost.insert("filter_full", filter_full);
    }
    if sink.malformed > 0 {
        st.lost.insert("malformed", sink.malformed);
    }
    st.lost_total = st.lost.values().sum();
    Ok(st)
}

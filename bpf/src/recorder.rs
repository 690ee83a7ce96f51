//! The recording session: [`KernelRecorder`] starts the consumer thread,
//! which sets the BPF programs up and pumps their records into the stream
//! file until it is stopped.

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use jtrace_format::{Encoder, FileHeader, Payload, ProbeDef, Record, KERNEL_MAGIC};

use crate::features::{check_pid_max, required_kernel_features};
use crate::joins::{Joined, Joins, Shared};
use crate::pump::{pump, ring_buffer, StopSignal};
use crate::setup::setup;
use crate::sink::Sink;
use crate::stats::{read_stats, KernelStats};
use crate::{RecorderConfig, ResolvedLibCall};

/// A running recording session: BPF programs attached and a consumer thread
/// writing the stream file. Dropping it without [`KernelRecorder::stop`]
/// also stops it, discarding the statistics.
pub struct KernelRecorder {
    stop: Arc<StopSignal>,
    thread: Option<JoinHandle<Result<KernelStats>>>,
    /// Processes to add, and those that joined ([`crate::joins`]).
    joins: Arc<Mutex<Shared>>,
    /// How a followed cgroup's joiners are seen, if one is followed.
    cgroup_how: Option<String>,
    /// Agent libraries to probe ([`crate::late_agents`]).
    agents: crate::late_agents::Requests,
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
        let mut cfg = cfg;
        let probes = std::mem::take(&mut cfg.lib_calls);
        let rb = cfg.ringbuf_bytes;
        if !rb.is_power_of_two() || rb < page_size() || rb > u32::MAX as usize {
            bail!(
                "ring buffer size {rb} must be a power of two, at least one page ({} bytes) \
                 and below 4 GiB",
                page_size()
            );
        }
        let (file, probe_defs) = start_stream(&cfg, &probes)?;
        let joins_seen = cfg.cgroup.is_some() && crate::joins::kernel_sees_joins();
        let cgroup_how = cfg.cgroup.as_ref().map(|_| crate::joins::how(joins_seen));
        let joins = Arc::new(Mutex::new(Shared::default()));
        let shared = (joins_seen, joins.clone());
        let agents = crate::late_agents::Requests::default();
        let agents2 = agents.clone();

        // The skeleton borrows its object and the ring buffer borrows the
        // skeleton, so all of them live on the consumer thread's stack; the
        // thread reports set-up success or failure through this channel.
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stop = Arc::new(StopSignal::new()?);
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jtrace-kernel".into())
            .spawn(move || record(cfg, probes, (file, probe_defs), (shared, agents2), &stop2, ready_tx))
            .context("spawning the kernel consumer thread")?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(KernelRecorder {
                stop,
                thread: Some(thread),
                joins,
                cgroup_how,
                agents,
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

    /// Traces processes `pids` from now on (within a poll of the ring
    /// buffer, ≈ 50 ms), with those they fork, as if they had joined the
    /// followed cgroup: the caller has checked that they may be. Those
    /// traced already are left as they are.
    pub fn follow(&self, pids: &[u32]) {
        self.shared().requests.extend_from_slice(pids);
    }

    /// The processes that joined the traced set since the last call: those
    /// that entered the followed cgroup ([`crate::RecorderConfig::cgroup`])
    /// and those given to [`KernelRecorder::follow`], each with when it is
    /// recorded from (or why it is not).
    pub fn take_joined(&self) -> Vec<Joined> {
        std::mem::take(&mut self.shared().joined)
    }

    /// How the followed cgroup's joiners are seen (for messages), if a
    /// cgroup is followed: from the instant each enters (the tracepoint),
    /// or from a periodic read of the subtree (kernels without it).
    pub fn cgroup_joins_seen(&self) -> Option<&str> {
        self.cgroup_how.as_deref()
    }

    /// Probes the agent's announcement functions in `library` too (a copy
    /// of the agent that a JVM in a container is about to load: its stacks'
    /// Java frames are named then), within a poll of the ring buffer
    /// (≈ 50 ms); a file probed already, or a recording without stacks,
    /// needs nothing.
    pub fn probe_agent(&self, library: &Path) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        (self.agents.lock().unwrap_or_else(|e| e.into_inner())).push((library.to_path_buf(), tx));
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("the kernel recorder did not probe {} in time", library.display()))?
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.joins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Detaches the programs, writes what is left in the ring buffer, flushes
    /// and fsyncs the stream file, and returns the counters.
    pub fn stop(self) -> Result<KernelStats> {
        self.stop_after(Duration::ZERO)
    }

    /// As [`KernelRecorder::stop`], but the tracepoints keep recording for
    /// `settle` (the uprobes detach meanwhile): events of the moment of the
    /// stop, such as the final switch of a thread whose process was just
    /// reaped, may still be on their way to the ring buffer. Every kind of
    /// event is recorded up to the call; a few after it may be too.
    pub fn stop_after(mut self, settle: Duration) -> Result<KernelStats> {
        self.finish(settle).expect("thread present until stop or drop")
    }

    fn finish(&mut self, settle: Duration) -> Option<Result<KernelStats>> {
        let thread = self.thread.take()?;
        self.stop.request(settle);
        Some(match thread.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow!("the kernel consumer thread panicked")),
        })
    }
}

impl Drop for KernelRecorder {
    fn drop(&mut self) {
        let _ = self.finish(Duration::ZERO);
    }
}

/// Writes the stream's header to the configuration's open file (in a ring
/// recording, then the CHUNK record of chunk 0), and the names of the
/// library-call probe ids, before any LIB_CALL; returns the file for the
/// consumer, and those names' records (what later chunks restate).
fn start_stream(cfg: &RecorderConfig, probes: &[ResolvedLibCall]) -> Result<(File, Vec<u8>)> {
    let out = &cfg.out_name;
    let mut file = cfg
        .out
        .try_clone()
        .with_context(|| format!("using {}", out.display()))?;
    file.write_all(&FileHeader::new(KERNEL_MAGIC).to_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
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
    if cfg.chunks.is_some() {
        let chunk = jtrace_format::Chunk {
            seq: 0,
            prologue: probes.len() as u32,
        };
        file.write_all(&chunk.record(jtrace_format::kind::CHUNK, crate::stack_names::now_ns()))
            .with_context(|| format!("writing {}", out.display()))?;
    }
    file.write_all(&enc.buf)
        .with_context(|| format!("writing {}", out.display()))?;
    Ok((file, enc.buf))
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
    (file, probe_defs): (File, Vec<u8>),
    ((joins_seen, joins), agents): ((bool, Arc<Mutex<Shared>>), crate::late_agents::Requests),
    stop: &StopSignal,
    ready: mpsc::SyncSender<Result<()>>,
) -> Result<KernelStats> {
    let mut cfg = cfg;
    let chunks = cfg.chunks.take();
    let written = file.metadata().map_or(0, |m| m.len());
    let name = cfg.out_name.display().to_string();
    // Before the programs load: the sink starts reading the kernel's
    // symbols meanwhile (StackNames::preload).
    let sink = RefCell::new(Sink::with_floor(
        file,
        name,
        written,
        cfg.on_write_error,
        cfg.stacks,
        cfg.min_free,
    ));
    if let Some(v) = &cfg.viewer {
        sink.borrow_mut().set_viewer(v);
    }
    let mut object = MaybeUninit::uninit();
    let (mut sk, mut uprobes, _clocks) =
        setup(&cfg, &probes, joins_seen, &mut object).map_err(|e| report_failure(&ready, e))?;
    // Attached processes: their cgroups now (others' at their exec).
    for &pid in &cfg.pids {
        sink.borrow_mut().cgroups.note(pid);
    }
    if let Some(plan) = chunks {
        let started = crate::stack_names::now_ns();
        sink.borrow_mut()
            .set_rotation(crate::chunks::Rotation::new(plan, started, probe_defs));
    }
    let rb = ring_buffer(&sk, &sink).map_err(|e| report_failure(&ready, e))?;
    // The programs see the tasks forked from now on; those that exist
    // already in a pid namespace are named here.
    let now = crate::stack_names::now_ns();
    for &pid in &cfg.pids {
        let recs = crate::pid_ns::existing_tasks(pid, now);
        sink.borrow_mut().sample(&recs);
    }
    let _ = ready.send(Ok(()));
    let mut late = crate::late_safepoints::LateSafepoints::new(&probes);
    let mut joins = Joins::new(cfg.cgroup.take(), joins_seen, joins);
    let hooks = cfg.stacks && cfg.agent_library.is_some();
    let mut agents = crate::late_agents::LateAgents::new(agents, hooks, cfg.agent_library.as_deref());
    let polled = (&mut late, &mut joins, &mut agents);
    pump(&rb, &mut sk, &mut uprobes, &sink, stop, polled)?;
    drop(rb);

    sink.borrow_mut().flush();
    let mut stats = read_stats(&sk, &sink.borrow().counts())?;
    (stats.process_cgroups, stats.cpu_limits) = std::mem::take(&mut sink.borrow_mut().cgroups).finish();
    stats.probe_defs = probes.len() as u64;
    stats.records += stats.probe_defs;
    let (_file, failure) = sink.into_inner().finish();
    if let Some(f) = failure {
        stats.unwritten = f.unwritten;
        stats.unwritten_since = (f.since != u64::MAX).then_some(f.since);
        stats.write_error = Some(f.error);
    }
    Ok(stats)
}

//! The ring-buffer consumer: samples handed to the stream file's writer
//! ([`Sink`]) until the recorder stops; then the programs are detached and
//! what is left drained.

use std::cell::RefCell;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, RingBuffer, RingBufferBuilder};

use crate::joins::Joins;
use crate::late_agents::LateAgents;
use crate::late_safepoints::LateSafepoints;
use crate::sink::Sink;
use crate::skel;

/// How long one ring buffer poll may wait. The BPF side only wakes the
/// consumer when the buffer is a quarter full, so this is also the normal
/// latency from event to file.
const POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// The file is flushed at least this often so that a killed jtrace still
/// leaves a readable prefix.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// How the pump is told to stop: a flag, and an eventfd that ends its wait
/// at once (a ring buffer poll would otherwise run out its timeout).
pub(crate) struct StopSignal {
    requested: AtomicBool,
    /// How long the tracepoints keep recording after the stop (ns).
    settle_ns: AtomicU64,
    wake: OwnedFd,
}

impl StopSignal {
    pub(crate) fn new() -> Result<StopSignal> {
        // SAFETY: eventfd takes no pointer; a non-negative result is a new
        // descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(anyhow!("creating an eventfd: {}", std::io::Error::last_os_error()));
        }
        Ok(StopSignal {
            requested: AtomicBool::new(false),
            settle_ns: AtomicU64::new(0),
            // SAFETY: see above.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Asks the pump to stop: the uprobes detach at once, the tracepoints
    /// after `settle`, time for events already under way to be submitted.
    pub(crate) fn request(&self, settle: Duration) {
        self.settle_ns.store(settle.as_nanos() as u64, Ordering::Relaxed);
        self.requested.store(true, Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our own eventfd. A
        // failure (the counter full) still leaves it readable: ignored.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    fn settle(&self) -> Duration {
        Duration::from_nanos(self.settle_ns.load(Ordering::Relaxed))
    }

    /// Reads the wake-up, so that [`StopSignal::wait`] waits for the ring
    /// buffer alone again (during the settle).
    fn clear_wake(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer from our own
        // non-blocking eventfd; nothing to read is not an error here.
        unsafe { libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }

    /// Waits until the ring buffer's consumer should be woken or a stop is
    /// requested, at most `timeout`.
    fn wait(&self, rb: &RingBuffer<'_>, timeout: Duration) -> Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: rb.epoll_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // Whole milliseconds, rounded up: a wait shorter than one is no spin.
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: two initialised pollfds, the count says two.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            // EINTR from a signal (Ctrl-C) is not a reason to stop recording.
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(anyhow!("waiting for the BPF ring buffer: {e}"));
            }
        }
        Ok(())
    }
}

/// The consumer of the skeleton's ring buffer, feeding `sink`.
pub(crate) fn ring_buffer<'a>(sk: &skel::JtraceSkel<'_>, sink: &'a RefCell<Sink>) -> Result<RingBuffer<'a>> {
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&sk.maps.events, |data: &[u8]| {
            sink.borrow_mut().sample(data);
            0
        })
        .map_err(|e| anyhow!("setting up the ring buffer consumer: {e}"))?;
    builder
        .build()
        .map_err(|e| anyhow!("setting up the ring buffer consumer: {e}"))
}

/// Moves samples from the ring buffer to the sink until `stop`, then
/// detaches the programs and drains what is left. Every source is complete
/// up to the stop's request (the uprobes detach only after it, and the
/// settle catches the tracepoints' events still on their way); some events
/// after it may be in the stream too.
pub(crate) fn pump(
    rb: &RingBuffer<'_>,
    sk: &mut skel::JtraceSkel<'_>,
    uprobes: &mut Vec<Link>,
    sink: &RefCell<Sink>,
    stop: &StopSignal,
    (late, joins, agents): (&mut LateSafepoints, &mut Joins, &mut LateAgents),
) -> Result<()> {
    let mut last_flush = Instant::now();
    while !stop.requested() {
        stop.wait(rb, POLL_TIMEOUT)?;
        // The BPF side usually submits without a wakeup: consume whatever
        // the wait ended for.
        consume(rb)?;
        if last_flush.elapsed() >= FLUSH_EVERY {
            sink.borrow_mut().flush();
            last_flush = Instant::now();
        }
        let mut s = sink.borrow_mut();
        s.maybe_rotate(crate::stack_names::now_ns());
        if s.take_stack_floor() {
            forget_stacks(sk);
        }
        late.poll(sk, uprobes, &mut s);
        joins.poll(sk, &mut s);
        agents.poll(sk, uprobes);
    }
    // Each uprobe link's release waits for an RCU grace period (≈ 30–70 ms
    // here): released together, the waits overlap, and they overlap the
    // settle, while the tracepoints still record the switches of threads
    // that had just exited.
    let settle_until = Instant::now() + stop.settle();
    stop.clear_wake();
    std::thread::scope(|s| -> Result<()> {
        for link in uprobes.drain(..) {
            s.spawn(move || drop(link));
        }
        loop {
            let left = settle_until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // While the uprobes' grace periods run out: what is written
                // goes to disk now, leaving the final sync only the tail.
                sink.borrow_mut().sync_written();
                return Ok(());
            }
            stop.wait(rb, left)?;
            consume(rb)?;
        }
    })?;
    // Detach the rest so that nothing arrives after the final drain.
    sk.links = Default::default();
    consume(rb).map_err(|e| e.context("draining the BPF ring buffer"))?;
    flush_pending_wakeups(sk, &mut sink.borrow_mut())
}

fn consume(rb: &RingBuffer<'_>) -> Result<()> {
    rb.consume().map_err(|e| anyhow!("consuming the BPF ring buffer: {e}"))
}

/// Makes the BPF side write every stack again on its next use, under a
/// new id (a new chunk of a ring recording must define the stacks it uses).
fn forget_stacks(sk: &mut skel::JtraceSkel<'_>) {
    if let Some(d) = sk.maps.data_data.as_deref_mut() {
        // SAFETY: a plain u32 of the mapped .data section; the BPF side
        // reads it with a volatile load, a torn read is impossible.
        let next = unsafe { std::ptr::read_volatile(&d.next_stack_id) };
        unsafe { std::ptr::write_volatile(&mut d.stack_id_floor, next) };
        // The kernel stacks the kernel deduplicates (ids of its stack map)
        // go by an epoch: only this thread writes it.
        let epoch = unsafe { std::ptr::read_volatile(&d.kstack_epoch) };
        unsafe { std::ptr::write_volatile(&mut d.kstack_epoch, epoch.wrapping_add(1)) };
    }
}

/// Offset of the WAKEUP record in a `struct switch_batch` value
/// (bpf/c/sched.bpf.c).
const BATCH_WAKE_OFFSET: usize = offset_of!(skel::types::switch_batch, wake);

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
            sink.flushed_wakeups += sink.sample(rec);
        }
    }
    Ok(())
}

//! The ring-buffer consumer: samples handed to the stream file's writer
//! ([`Sink`]) until the recorder stops; then the programs are detached and
//! what is left drained.

use std::cell::RefCell;
use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, RingBuffer, RingBufferBuilder};

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
/// detaches the programs and drains what is left.
pub(crate) fn pump(
    rb: &RingBuffer<'_>,
    sk: &mut skel::JtraceSkel<'_>,
    uprobes: &mut Vec<Link>,
    sink: &RefCell<Sink>,
    stop: &AtomicBool,
    late: &mut LateSafepoints,
) -> Result<()> {
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
        let mut s = sink.borrow_mut();
        s.maybe_rotate(crate::stack_names::now_ns());
        if s.take_stack_floor() {
            forget_stacks(sk);
        }
        late.poll(sk, uprobes, &mut s);
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

//! Streaming analysis: the per-thread merge of a trace of any length in
//! memory bounded by a budget, not by the number of events.
//!
//! One pass reads the streams record by record (mapped and released behind
//! the reader when finished, else in chunks; never a whole file in memory)
//! and turns them into compact per-thread events; a syscall entry's
//! record is kept with its thread's events. Events are buffered per thread,
//! the few that arrive late (records written at a call's return carry its
//! entry time) aside from the in-order ones, so that sorting a buffer meets
//! a few long sorted runs. When the buffers reach the memory
//! budget, each thread's events are sorted by time and written as one
//! segment of a *run* file in a temporary directory (tids ascending; each
//! event delta-encoded in a few bytes); the buffers are reused by the next
//! run. The analysis then walks the threads
//! in tid order and merges each thread's segments of all runs (plus the
//! buffer still in memory, plus the JVM-wide windows) by time, with ties in
//! stream order, which is exactly the order [`Trace::open`] gives: the walk
//! sees the same events in the same order, so every figure is identical.
//! The merge hands the walk slices: the leading source's events up to the
//! next source's head. A trace that fits the budget is never written out.
//!
//! Memory: the budget, plus per thread its stack, plus the tables bounded by
//! the number of distinct threads, methods and strings, plus the GC /
//! safepoint windows (a few per second of recording), plus the runs' read
//! buffers or mapped windows (an eighth of the budget together) and one
//! decoded block of 1024 events per run while a thread is walked.
//!
//! Where the parts live (in `merge/src/`): `read/` reads the streams,
//! `spill.rs` buffers the events and writes the runs in `run.rs`'s
//! encoding, `kway.rs` merges each thread's runs, and each thread is walked
//! by the same [`ThreadWalk`] as in the whole-trace
//! [`crate::analyze()`]. [`analyze_with_wakers`] (`wakers.rs`) adds the
//! waker's method of every wakeup; [`analyze_answering_wakers`] gives them
//! after its one walk.
//!
//! ```no_run
//! use jtrace_merge::{stream, Invocation, ThreadInfo, Visitor};
//! struct Slowest(u64);
//! impl Visitor for Slowest {
//!     fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
//!         self.0 = self.0.max(inv.breakdown.wall);
//!     }
//! }
//! let (trace, events) = stream::open("big.jtrace".as_ref(), &stream::StreamOptions::default()).unwrap();
//! let mut v = Slowest(0);
//! stream::analyze(&trace, events, &mut v).unwrap();
//! println!("slowest invocation: {} ns", v.0);
//! ```

use crate::model::trace::Trace;
use crate::read::cut::CallCut;
use crate::read::{streams, TraceReader};
use crate::sort::spill::Sorter;
use crate::visitor::Visitor;
use crate::walk::ThreadWalk;
use std::path::Path;

pub use crate::file_io::unlinked_temp_file;
pub use crate::options::{parse_size, StreamOptions, DEFAULT_BUDGET};
pub use crate::sort::kway::SortedEvents;
pub use crate::wakers::{analyze_answering_wakers, analyze_with_wakers, ThreadAnswers, WakerAnswers};

/// Reads a trace directory for a streaming analysis: the returned [`Trace`]
/// has every table (threads with their first/last times, methods, details,
/// losses, metadata) but no events and no syscall table; the events are in
/// [`SortedEvents`], to be walked once with [`analyze`].
pub fn open(dir: &Path, opts: &StreamOptions) -> anyhow::Result<(Trace, SortedEvents)> {
    let mut r = TraceReader::begin(dir)?;
    r.sorter = Some(Box::new(Sorter::new(opts)));
    // Library calls held for the cut: 16 bytes each, a quarter of the
    // budget, at least 16 MiB.
    let lib_cap = (opts.memory_budget / 64).max(1 << 20);
    r.cut = opts
        .calls_within
        .map(|(from, to)| Box::new(CallCut::new(from, to, lib_cap)));
    let (kernel, jvms) = streams::list(dir)?;
    r.ns = crate::read::pid_ns::PidNamespaces::read(&kernel, &jvms);
    r.add_virtual_threads(&jvms)?;
    r.read_streams(&kernel, &jvms, |r| r.sorter.as_mut().expect("set above").begin_stream())?;
    if let Some(cut) = r.cut.take() {
        // A ring recording's window changes how the walk starts each
        // thread (kernel events before it are ignored): not cut (yet).
        let ring = r.window_from().is_some() && cut.left_out > 0;
        if ring || !cut.sound(r.trace.threads.values()) {
            // Rare (see read/cut.rs): read it all.
            drop(r);
            return open(
                dir,
                &StreamOptions {
                    calls_within: None,
                    ..opts.clone()
                },
            );
        }
        r.trace.calls_left_out = cut.left_out;
    }
    let kernel_until = r.kernel_coverage(&kernel.path);
    r.trace.stacks.finish();
    let sorter = r.sorter.take().expect("set above");
    let (mut events, span) = SortedEvents::new(sorter.finish()?);
    for (pid, mut wins) in std::mem::take(&mut r.windows) {
        crate::model::windows::gc_safepoints(&mut wins);
        r.trace.jvm_stops.insert(pid, wins.clone());
        let threads = r
            .trace
            .threads
            .values()
            .filter(|th| th.java_name.is_some() && th.tgid == pid);
        events.add_windows(pid, wins, threads, &span);
    }
    for (tid, (first, last)) in span {
        let th = r.thread(tid);
        th.first_ts = first;
        th.last_ts = last;
    }
    r.trace.set_kernel_coverage(kernel_until);
    let window_from = r.window_from();
    r.trace.set_window(window_from);
    Ok((r.trace, events))
}

/// Walks every thread of a streamed trace, in tid order, and drives `v`
/// exactly as [`crate::analyze()`] does on the same trace opened whole.
pub fn analyze(trace: &Trace, mut events: SortedEvents, v: &mut dyn Visitor) -> anyhow::Result<()> {
    events.rewind()?;
    for info in trace.threads.values() {
        let mut evs = events.thread(info)?;
        let mut walk = ThreadWalk::new(info, v);
        evs.for_each(|e, sc| walk.event(e, sc, v))?;
        walk.finish(v);
    }
    Ok(())
}

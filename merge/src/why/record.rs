//! The first pass of `jtrace why`: one walk of every thread that records
//! its off-CPU intervals and contended monitor enters in the [`Index`] and
//! offers the invocations asked about to the [`Selector`].
//!
//! It sees each raw event before the walk does (for what the walk does not
//! report: monitor enters begin and end, who took or left the CPU) and the
//! walk's callbacks (each interval's split by cause and its wakeup).

use super::index::{Causes, Index, OffRec, Region, CARRIER, MONITOR, MULTI, OPEN, PREEMPTED, WOKEN};
use super::select::{Candidate, Selector};
use crate::cause::{Cause, OffCpu};
use crate::model::event::{Event, ThreadInfo, Timed};
use crate::visitor::{Evidence, Invocation, OffCpuInterval, ThreadTotals, Visitor};
use std::collections::BTreeMap;

/// Records one thread at a time (see the module doc).
pub(crate) struct Recorder<'a> {
    pub(crate) index: &'a mut Index,
    pub(crate) selector: &'a mut Selector,
    /// The trace's threads: which can own a Java monitor.
    threads: &'a BTreeMap<u32, ThreadInfo>,
    /// By method index: asked about.
    pub(crate) wanted: &'a [bool],
    /// The current thread's invocations are candidates.
    pub(crate) thread_wanted: bool,
    /// Switch-out not yet ended by a switch-in: (time, preempted, next tid),
    /// and its first wakeup (time, waker).
    pending: Option<(u64, bool, u32)>,
    pending_wake: Option<(u64, u32)>,
    /// `prev_tid` of the switch-in being walked.
    prev_tid: u32,
    /// Σ of the reported intervals' off-CPU splits (the tail is the rest).
    off_sum: OffCpu,
    /// Open contended monitor enters, and the intervals inside them.
    monitor_depth: u32,
    group: Vec<(OffRec, Option<Causes>)>,
    /// The first error writing the index.
    pub(crate) error: Option<anyhow::Error>,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(
        index: &'a mut Index,
        selector: &'a mut Selector,
        threads: &'a BTreeMap<u32, ThreadInfo>,
        wanted: &'a [bool],
    ) -> Self {
        Recorder {
            index,
            selector,
            threads,
            wanted,
            thread_wanted: false,
            pending: None,
            pending_wake: None,
            prev_tid: u32::MAX,
            off_sum: OffCpu::default(),
            monitor_depth: 0,
            group: Vec::new(),
            error: None,
        }
    }

    /// Sees event `e` before the walk does.
    #[inline]
    pub(crate) fn raw(&mut self, e: &Timed) {
        match e.event {
            Event::SwitchOut {
                preempted, next_tid, ..
            } => {
                self.pending = Some((e.ts, preempted, next_tid));
                self.pending_wake = None;
            }
            Event::Wakeup { waker_tid, .. } if self.pending.is_some() && self.pending_wake.is_none() => {
                self.pending_wake = Some((e.ts, waker_tid));
            }
            Event::SwitchIn { prev_tid, .. } => self.prev_tid = prev_tid,
            Event::Block {
                cause: Cause::Monitor,
                begin,
                ..
            } => {
                if begin {
                    self.monitor_depth += 1;
                } else if self.monitor_depth > 0 {
                    self.monitor_depth -= 1;
                    if self.monitor_depth == 0 {
                        self.close_group();
                    }
                }
            }
            _ => {}
        }
    }

    /// Records an interval: straight into the index, or with the open
    /// monitor enter's.
    fn push(&mut self, rec: OffRec, causes: Option<Causes>) {
        if self.monitor_depth > 0 {
            let mut rec = rec;
            rec.flags |= MONITOR;
            self.group.push((rec, causes));
        } else if let Err(e) = self.index.push_off(rec, causes) {
            self.error.get_or_insert(e);
        }
    }

    /// Whether thread `tid` can own a Java monitor: a Java thread (platform
    /// or virtual). The VM thread, GC and compiler threads cannot; their
    /// wakeups inside an enter end something else (a safepoint the
    /// entering thread was stopped by), not the owner's release.
    fn can_own_monitors(&self, tid: u32) -> bool {
        self.threads
            .get(&tid)
            .is_some_and(|t| t.java_name.is_some() || t.virtual_id.is_some())
    }

    /// A monitor enter ended: its regions, then its intervals. The waiter
    /// may block in turn behind several owners (each release lets another
    /// thread take the monitor first): every wakeup by a Java thread (a
    /// release) closes a region from the first switch-out after the
    /// previous one, owned by that releaser. Wakeups by timers (HotSpot's
    /// back-off) inside a region are not releases.
    fn close_group(&mut self) {
        let mut from: Option<u64> = None;
        let mut regions = Vec::new();
        for (r, _) in &self.group {
            // Steal inside the enter is the thread's own time, not a block.
            if is_steal(r) {
                continue;
            }
            from.get_or_insert(r.start);
            let release = r.flags & WOKEN != 0 && r.flags & PREEMPTED == 0 && self.can_own_monitors(r.waker);
            if let (true, Some(start)) = (release, from) {
                regions.push(Region {
                    start,
                    wake: r.wake,
                    owner: r.waker,
                });
                from = None;
            }
        }
        for region in regions {
            if let Err(e) = self.index.push_region(region) {
                self.error.get_or_insert(e);
            }
        }
        for (rec, causes) in std::mem::take(&mut self.group) {
            if let Err(e) = self.index.push_off(rec, causes) {
                self.error.get_or_insert(e);
            }
        }
    }
}

/// Whether a record is a steal interval (not a switch: time the
/// hypervisor took while the thread was on CPU).
fn is_steal(r: &OffRec) -> bool {
    r.cause == Cause::Steal && r.flags & (PREEMPTED | WOKEN) == 0
}

/// The record of an interval from `start` to `end` split as `split`, woken
/// at `wake` by `waker` unless preempted. A preemption by CPU-quota
/// throttling is blocked on the thread's own cgroup until its unthrottle
/// (`throttled`, never followed), then on the run queue like any other.
fn off_rec(
    start: u64,
    end: u64,
    preempted: bool,
    wake: Option<(u64, u32)>,
    split: &OffCpu,
    holder: u32,
) -> (OffRec, Option<Causes>) {
    // After the wakeup the thread waits: for a CPU, or (a virtual thread)
    // for a carrier.
    let waiting = |c: Cause| matches!(c, Cause::Runqueue | Cause::Carrier);
    let blocked: Vec<(Cause, u64)> = split.nonzero().filter(|(c, _)| !waiting(*c)).collect();
    let carrier = split.get(Cause::Carrier);
    let rq = split.get(Cause::Runqueue) + carrier;
    let mut flags = if carrier > 0 { CARRIER } else { 0 };
    let throttled = split.get(Cause::Throttled);
    let (wake_ts, waker) = match wake {
        _ if preempted => {
            flags |= PREEMPTED;
            (start + throttled, 0)
        }
        // A virtual thread that blocked on nothing (it yielded) waited for
        // a carrier from its unmount: a wakeup meanwhile (an unpark of a
        // thread not parked) ended no block and is not followed.
        Some(_) if blocked.is_empty() && carrier > 0 => (end - rq, 0),
        Some((ts, w)) => {
            flags |= WOKEN;
            (ts, w)
        }
        None => (end - rq, 0),
    };
    let cause = match blocked.first() {
        _ if preempted && throttled > 0 => Cause::Throttled,
        _ if preempted => Cause::Runqueue,
        Some(&(c, _)) => c,
        None => Cause::Unknown,
    };
    let causes = (blocked.len() > 1).then(|| {
        flags |= MULTI;
        blocked
    });
    let rec = OffRec {
        start,
        end,
        wake: wake_ts,
        waker,
        holder,
        cause,
        flags,
    };
    (rec, causes)
}

impl Visitor for Recorder<'_> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.index.begin_thread(t.tid);
        self.pending = None;
        self.pending_wake = None;
        self.prev_tid = u32::MAX;
        self.off_sum = OffCpu::default();
        self.monitor_depth = 0;
        self.group.clear();
    }

    fn exit(&mut self, t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        if self.thread_wanted
            && inv.outermost
            && !inv.unfinished
            && self.wanted.get(inv.method as usize).copied().unwrap_or(false)
        {
            self.selector
                .add(Candidate::new(t.tid, inv.entry, inv.breakdown.wall, inv.method));
        }
    }

    fn off_cpu(&mut self, _t: &ThreadInfo, _depth: usize, iv: &OffCpuInterval) {
        self.off_sum += iv.split.off;
        if iv.evidence == Evidence::Steal {
            // Not a switch: what the switches pending say stays as it is.
            let (rec, causes) = off_rec(iv.start, iv.end, false, None, &iv.split.off, u32::MAX);
            self.push(rec, causes);
            return;
        }
        // The preemptor, or whoever ran on the CPU before it came back.
        let holder = match self.pending {
            Some((_, true, next)) if iv.preempted => next,
            _ => self.prev_tid,
        };
        let wake = iv.wake.map(|w| (w.ts, w.waker_tid));
        let (rec, causes) = off_rec(iv.start, iv.end, iv.preempted, wake, &iv.split.off, holder);
        self.pending = None;
        self.pending_wake = None;
        self.push(rec, causes);
    }

    fn thread_end(&mut self, _t: &ThreadInfo, totals: &ThreadTotals) {
        // Off CPU after the last switch-out: no switch-in reported it; its
        // split is what the totals hold beyond the reported intervals.
        let off = totals.breakdown.off;
        let tail = off.total().saturating_sub(self.off_sum.total());
        let consistent = off.0.iter().zip(self.off_sum.0.iter()).all(|(a, b)| a >= b);
        if let (Some((start, preempted, next)), true, true) = (self.pending, tail > 0, consistent) {
            let split = off - self.off_sum;
            // The tail ends at the thread's last event, `tail` ns after.
            let end = start + tail;
            let (mut rec, causes) = off_rec(start, end, preempted, self.pending_wake, &split, next);
            rec.flags |= OPEN;
            self.push(rec, causes);
        }
        if !self.group.is_empty() {
            self.close_group();
        }
        self.index.end_thread();
    }
}

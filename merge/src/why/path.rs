//! The critical path of one invocation: a walk back from its exit over the
//! `Index`. On the invocation's thread, time on CPU and on the run queue
//! is on the path as it is; a blocked stretch is replaced by what its
//! *blocker* did meanwhile, walked the same way on the blocker's thread,
//! recursively, until CPU time, a timer (sleep, a monitor back-off), or a
//! block nothing traced ended (an interrupt, the idle task, a thread
//! outside the trace) is reached.
//!
//! The blocker of an interval is its waker, except inside a contended
//! monitor enter: HotSpot's back-off wakes the thread by a timer (after 1,
//! 8, 64 ms…), so the whole enter, from its first switch-out to its last
//! wakeup by a Java thread, is blocked on that thread (the monitor's owner,
//! whose release woke it), and its timed wakeups are not followed. Only a
//! Java thread owns a Java monitor: a later wakeup by the VM thread (the end
//! of a safepoint that stopped the enter, as on JDK 11) is not a release.
//!
//! The segments tile [entry, exit] exactly: every step covers the time
//! from the current point back to the previous boundary of the thread it
//! is on, a recursion covers exactly the blocked stretch it replaces, and
//! a recursion is entered only for a non-empty stretch. The walk always
//! moves back in time, so it cannot loop; it is bounded by
//! [`Limits::max_depth`] hops and [`Limits::max_segments`] segments per
//! invocation, after which each level's remaining time is summed per state
//! instead of walked (the invocation says it was truncated).

use super::index::{Index, OffRec, CARRIER, MONITOR, MULTI, PREEMPTED, WOKEN};
use crate::cause::Cause;
use crate::model::event::ThreadInfo;
use std::collections::BTreeMap;

/// What a thread was doing in a segment: on CPU, or off CPU for a cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// On CPU.
    Cpu,
    /// Off CPU for this cause.
    Off(Cause),
    /// No stream covers the thread then (before its first event, after its
    /// last, past the kernel stream's coverage, or a thread not traced):
    /// never given a cause (docs/ARCHITECTURE.md invariant 4).
    NotCovered,
}

impl State {
    /// `cpu` or the cause's name (docs/REPORT.md).
    pub fn name(self) -> &'static str {
        match self {
            State::Cpu => "cpu",
            State::Off(c) => c.name(),
            State::NotCovered => "not_covered",
        }
    }
}

/// No hop: a segment of the invocation's own thread.
pub const NO_HOP: u32 = u32::MAX;

/// Time per method (None: no traced method), in the order they first ran.
pub(crate) type MethodTimes = Vec<(Option<u32>, u64)>;

/// One piece of a critical path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The thread.
    pub tid: u32,
    /// Start (CLOCK_MONOTONIC ns).
    pub start: u64,
    /// Length.
    pub ns: u64,
    /// What the thread was doing.
    pub state: State,
    /// Hops from the invocation's thread (0 = that thread).
    pub depth: u16,
    /// The hop (index in [`Path::hops`]) this segment explains, or [`NO_HOP`].
    pub hop: u32,
    /// Run queue: the thread that held the CPU (0 idle; None unknown).
    pub holder: Option<u32>,
    /// The innermost traced method of the thread then (filled by the
    /// labelling pass).
    pub method: Option<u32>,
    /// What the thread was blocked in (index in [`super::Why::strings`],
    /// 0 = nothing said), for off-CPU segments.
    pub evidence: u32,
}

/// A blocked stretch of `waiter` replaced by what `blocker` did meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The enclosing hop, or [`NO_HOP`].
    pub parent: u32,
    /// Depth of the blocker's segments (1 = blocking the invocation's thread).
    pub depth: u16,
    /// The blocked thread.
    pub waiter: u32,
    /// The thread it waited for.
    pub blocker: u32,
    /// The waiter's cause.
    pub cause: Cause,
    /// The stretch.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The waiter's method and evidence then; the blocker's method at `end`
    /// (filled by the labelling pass).
    pub waiter_method: Option<u32>,
    /// See `waiter_method` (index in [`super::Why::strings`]).
    pub evidence: u32,
    /// See `waiter_method`.
    pub blocker_method: Option<u32>,
}

/// The critical path of one invocation.
#[derive(Debug, Clone, Default)]
pub struct Path {
    /// Segments in time order; their `ns` sum to the wall time.
    pub segments: Vec<Segment>,
    /// Hops in the order their stretches begin.
    pub hops: Vec<Hop>,
    /// A limit cut the walk short: some time is summed per state, not walked.
    pub truncated: bool,
    /// CPU segments the labelling found several methods in: (segment,
    /// time per method), split by [`super::label::apply_splits`].
    pub(crate) pending_splits: Vec<(u32, MethodTimes)>,
}

/// Bounds of one walk.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Hops followed from the invocation's thread.
    pub max_depth: u16,
    /// Segments per invocation before the walk stops following hops and
    /// sums the rest.
    pub max_segments: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 32,
            max_segments: 100_000,
        }
    }
}

/// The walk of one invocation (segments built backwards, reversed at the end).
struct Walk<'a> {
    index: &'a Index,
    threads: &'a BTreeMap<u32, ThreadInfo>,
    limits: Limits,
    segs: Vec<Segment>,
    hops: Vec<Hop>,
    truncated: bool,
}

/// The critical path of the invocation of thread `tid` from `entry` to `exit`.
pub(crate) fn critical_path(
    index: &Index,
    threads: &BTreeMap<u32, ThreadInfo>,
    limits: Limits,
    tid: u32,
    entry: u64,
    exit: u64,
) -> Path {
    let mut w = Walk {
        index,
        threads,
        limits,
        segs: Vec::new(),
        hops: Vec::new(),
        truncated: false,
    };
    w.walk(tid, entry, exit, 0, NO_HOP);
    // Built backwards: reverse the segments; hops in the order their
    // stretches begin (the enclosing one first), renumbered.
    w.segs.reverse();
    let mut order: Vec<u32> = (0..w.hops.len() as u32).collect();
    order.sort_by_key(|&h| (w.hops[h as usize].start, w.hops[h as usize].depth));
    let mut new_of = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new as u32;
    }
    let renumber = |h: u32| if h == NO_HOP { NO_HOP } else { new_of[h as usize] };
    for s in &mut w.segs {
        s.hop = renumber(s.hop);
    }
    let mut hops: Vec<Hop> = order.iter().map(|&h| w.hops[h as usize].clone()).collect();
    for h in &mut hops {
        h.parent = renumber(h.parent);
    }
    w.hops = hops;
    Path {
        segments: w.segs,
        hops: w.hops,
        truncated: w.truncated,
        pending_splits: Vec::new(),
    }
}

impl Walk<'_> {
    /// Prepends a segment, merged with the one after it when it continues it.
    #[allow(clippy::too_many_arguments)]
    fn emit(&mut self, tid: u32, start: u64, end: u64, state: State, depth: u16, hop: u32, holder: Option<u32>) {
        if end <= start {
            return;
        }
        if let Some(last) = self.segs.last_mut() {
            if last.tid == tid
                && last.state == state
                && last.hop == hop
                && last.holder == holder
                && last.start == end
                && state != State::Cpu
            {
                last.start = start;
                last.ns += end - start;
                return;
            }
        }
        self.segs.push(Segment {
            tid,
            start,
            ns: end - start,
            state,
            depth,
            hop,
            holder,
            method: None,
            evidence: 0,
        });
    }

    /// Whether thread `w` can explain a block of `tid`: a traced thread
    /// other than itself and the idle task.
    fn explains(&self, tid: u32, w: u32) -> bool {
        w != 0 && w != tid && self.threads.contains_key(&w)
    }

    fn full(&self) -> bool {
        self.segs.len() >= self.limits.max_segments
    }

    /// Covers [lo, hi] of thread `tid`, from `hi` back.
    fn walk(&mut self, tid: u32, lo: u64, hi: u64, depth: u16, hop: u32) {
        let Some(info) = self.threads.get(&tid) else {
            self.emit(tid, lo, hi, State::NotCovered, depth, hop, None);
            return;
        };
        let first = info.first_ts;
        // After the thread's last event, or past the kernel stream's
        // coverage of it, nothing says what it did.
        let last = info.kernel_until.map_or(info.last_ts, |k| k.min(info.last_ts));
        let mut t = hi;
        if t > last {
            let a = last.max(lo);
            self.emit(tid, a, t, State::NotCovered, depth, hop, None);
            t = a;
        }
        while t > lo {
            if self.full() {
                self.truncated = true;
                self.sum_rest(tid, lo, t, depth, hop);
                return;
            }
            let can_follow = depth < self.limits.max_depth;
            // A contended monitor enter a release ended: blocked on the owner.
            if let Some(r) = self
                .index
                .region_at(tid, t)
                .filter(|r| can_follow && self.explains(tid, r.owner))
            {
                let a = r.start.max(lo);
                self.follow(tid, r.owner, Cause::Monitor, a, t, depth, hop);
                t = a;
                continue;
            }
            match self.index.off_before(tid, t) {
                Some((i, iv)) if t <= iv.end => {
                    if t > iv.wake {
                        // Woken (or preempted), waiting for a CPU, or for
                        // a carrier (a virtual thread).
                        let a = iv.wake.max(lo).max(iv.start);
                        let holder = (iv.holder != u32::MAX).then_some(iv.holder);
                        let waited = if iv.flags & CARRIER != 0 {
                            Cause::Carrier
                        } else {
                            Cause::Runqueue
                        };
                        self.emit(tid, a, t, State::Off(waited), depth, hop, holder);
                        t = a;
                        continue;
                    }
                    let a = iv.start.max(lo);
                    if can_follow && self.follows(tid, &iv) {
                        self.follow(tid, iv.waker, iv.cause, a, t, depth, hop);
                    } else {
                        self.blocked(tid, i, &iv, a, t, depth, hop);
                    }
                    t = a;
                }
                prev => {
                    // On CPU since the previous switch-in (or the thread's first event).
                    let since = prev.map_or(first, |(_, iv)| iv.end);
                    if t <= first && prev.is_none() {
                        // Before the thread's first event: not covered.
                        self.emit(tid, lo, t, State::NotCovered, depth, hop, None);
                        return;
                    }
                    let a = since.max(lo);
                    self.emit(tid, a, t, State::Cpu, depth, hop, None);
                    t = a;
                }
            }
        }
    }

    /// Whether a blocked interval is replaced by its waker's doing.
    fn follows(&self, tid: u32, iv: &OffRec) -> bool {
        iv.flags & WOKEN != 0
            && iv.flags & (PREEMPTED | MONITOR) == 0
            && iv.cause != Cause::Sleep
            && self.explains(tid, iv.waker)
    }

    /// The blocked part [a, t] of interval `i`, not followed: its causes
    /// as the views lay them out (in column order from the switch-out).
    #[allow(clippy::too_many_arguments)]
    fn blocked(&mut self, tid: u32, i: u64, iv: &OffRec, a: u64, t: u64, depth: u16, hop: u32) {
        match (iv.flags & MULTI != 0).then(|| self.index.causes(i)).flatten() {
            Some(causes) => {
                // Pieces from the switch-out; emit those overlapping [a, t], last first.
                let mut pieces = Vec::with_capacity(causes.len());
                let mut s = iv.start;
                for &(c, ns) in causes {
                    pieces.push((s, s + ns, c));
                    s += ns;
                }
                for &(s, e, c) in pieces.iter().rev() {
                    let (s, e) = (s.max(a), e.min(t));
                    self.emit(tid, s, e, State::Off(c), depth, hop, None);
                }
            }
            None => self.emit(tid, a, t, State::Off(iv.cause), depth, hop, None),
        }
    }

    /// Replaces [a, t] of `waiter` (blocked for `cause`) by `blocker`'s doing.
    #[allow(clippy::too_many_arguments)]
    fn follow(&mut self, waiter: u32, blocker: u32, cause: Cause, a: u64, t: u64, depth: u16, hop: u32) {
        let h = self.hops.len() as u32;
        self.hops.push(Hop {
            parent: hop,
            depth: depth + 1,
            waiter,
            blocker,
            cause,
            start: a,
            end: t,
            waiter_method: None,
            evidence: 0,
            blocker_method: None,
        });
        self.walk(blocker, a, t, depth + 1, h);
    }

    /// [lo, t] of `tid` summed per state (the walk is over its limit).
    fn sum_rest(&mut self, tid: u32, lo: u64, t: u64, depth: u16, hop: u32) {
        let mut sums: BTreeMap<(State, Option<u32>), u64> = BTreeMap::new();
        let (first_i, end_i) = self.index.off_bounds(tid);
        let info = self.threads.get(&tid);
        let first = info.map_or(t, |i| i.first_ts);
        let last = info.map_or(lo, |i| i.kernel_until.map_or(i.last_ts, |k| k.min(i.last_ts)));
        let mut covered = 0;
        let start_i = match self.index.off_before(tid, lo + 1) {
            Some((i, _)) => i,
            None => first_i,
        };
        let mut i = start_i;
        while i < end_i {
            let iv = self.index.off(i);
            if iv.start >= t {
                break;
            }
            let clip = |s: u64, e: u64| e.min(t).saturating_sub(s.max(lo));
            let rq = clip(iv.wake.max(iv.start), iv.end);
            let blocked = clip(iv.start, iv.wake.min(iv.end));
            let waited = if iv.flags & CARRIER != 0 {
                Cause::Carrier
            } else {
                Cause::Runqueue
            };
            *sums.entry((State::Off(waited), None)).or_default() += rq;
            *sums.entry((State::Off(iv.cause), None)).or_default() += blocked;
            covered += rq + blocked;
            i += 1;
        }
        // Before the first event and after the last (or the kernel's
        // coverage): not covered; the rest of the range: CPU.
        let uncovered = (first.clamp(lo, t) - lo) + (t - last.clamp(lo, t).max(first.clamp(lo, t)));
        *sums.entry((State::NotCovered, None)).or_default() += uncovered;
        let cpu = (t - lo).saturating_sub(covered + uncovered);
        *sums.entry((State::Cpu, None)).or_default() += cpu;
        // One segment per state, laid end to end from lo (out of time order).
        let mut s = t;
        for (&(state, holder), &ns) in sums.iter().rev() {
            if ns > 0 {
                self.segs.push(Segment {
                    tid,
                    start: s - ns,
                    ns,
                    state,
                    depth,
                    hop,
                    holder,
                    method: None,
                    evidence: 0,
                });
                s -= ns;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::why::index::{OffRec, WOKEN};

    /// A blocker whose kernel coverage ends during the stretch: what it did
    /// after is not covered, and the path still sums to the wall.
    #[test]
    fn past_the_kernel_coverage_is_not_covered() {
        let mut ix = Index::new(usize::MAX, None);
        ix.begin_thread(1);
        ix.push_off(
            OffRec {
                start: 100,
                end: 900,
                wake: 850,
                waker: 2,
                holder: u32::MAX,
                cause: Cause::LockNative,
                flags: WOKEN,
            },
            None,
        )
        .unwrap();
        ix.begin_thread(2);
        ix.finish().unwrap();
        let mut threads = BTreeMap::new();
        for (tid, until) in [(1, None), (2, Some(600))] {
            threads.insert(
                tid,
                ThreadInfo {
                    tid,
                    first_ts: 0,
                    last_ts: 1000,
                    kernel_until: until,
                    ..Default::default()
                },
            );
        }
        let p = critical_path(&ix, &threads, Limits::default(), 1, 50, 1000);
        let got: Vec<(u32, State, u64)> = p.segments.iter().map(|s| (s.tid, s.state, s.ns)).collect();
        assert_eq!(
            got,
            vec![
                (1, State::Cpu, 50),
                (2, State::Cpu, 500),
                (2, State::NotCovered, 250),
                (1, State::Off(Cause::Runqueue), 50),
                (1, State::Cpu, 100),
            ]
        );
        assert_eq!(p.hops.len(), 1);
    }
}

//! The per-thread merge: one pass over a thread's time-ordered events that
//! keeps the thread's CPU state and method stack, and reports invocations and
//! off-CPU intervals to a [`Visitor`].
//!
//! Accounting is exact by construction: every nanosecond between two
//! consecutive events of a thread is added to exactly one bucket (CPU or one
//! cause) of the thread's running totals, and an invocation's figures are the
//! difference of those totals between its exit and its entry.

use crate::cause::{Breakdown, Cause};
use crate::read::{Event, MethodIdx, ThreadInfo, Timed, Trace};
use std::collections::HashMap;

/// Who woke a thread, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Time of the wakeup (sched_waking).
    pub ts: u64,
    /// The waking thread.
    pub waker_tid: u32,
    /// Its process.
    pub waker_tgid: u32,
}

/// One off-CPU interval: switch-out to switch-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffCpuInterval {
    /// Switch-out time.
    pub start: u64,
    /// Switch-in time.
    pub end: u64,
    /// Involuntary (preempted while runnable).
    pub preempted: bool,
    /// Raw kernel prev_state at switch-out.
    pub prev_state: u32,
    /// The wakeup that ended the block, if any.
    pub wake: Option<Wake>,
    /// The interval split by cause (sums to `end - start`).
    pub split: Breakdown,
}

/// A finished method invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invocation {
    /// The method.
    pub method: MethodIdx,
    /// Entry time.
    pub entry: u64,
    /// Exit time.
    pub exit: u64,
    /// Exact wall/CPU/off-CPU split, inclusive of callees.
    pub breakdown: Breakdown,
    /// Exited by an exception.
    pub exception: bool,
    /// No exit was recorded: closed at the thread's last event.
    pub unfinished: bool,
    /// No other invocation of the same method is open below it on the stack
    /// (aggregates count only these, so recursion is not summed twice).
    pub outermost: bool,
}

/// Totals of a thread over its whole traced life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTotals {
    /// From the thread's first to its last event.
    pub breakdown: Breakdown,
    /// Events that contradicted the thread's state (e.g. a switch-in while on
    /// CPU, an exit with no matching entry): a sign of lost events.
    pub anomalies: u64,
}

/// Receives the merged stream of one thread. Every method has a default that
/// does nothing, so an analysis implements only what it needs.
pub trait Visitor {
    /// A thread's events begin.
    fn thread_begin(&mut self, _thread: &ThreadInfo) {}
    /// A method was entered; `depth` is the number of frames below it.
    fn enter(&mut self, _thread: &ThreadInfo, _ts: u64, _depth: usize, _method: MethodIdx) {}
    /// A method returned.
    fn exit(&mut self, _thread: &ThreadInfo, _depth: usize, _inv: &Invocation) {}
    /// The thread came back on CPU after `iv`; `depth` frames are open.
    fn off_cpu(&mut self, _thread: &ThreadInfo, _depth: usize, _iv: &OffCpuInterval) {}
    /// The thread was woken (reported when it happens, before the switch-in).
    fn wakeup(&mut self, _thread: &ThreadInfo, _depth: usize, _wake: &Wake) {}
    /// A thread's events end.
    fn thread_end(&mut self, _thread: &ThreadInfo, _totals: &ThreadTotals) {}
}

#[derive(Debug, Clone, Copy)]
enum CpuState {
    On,
    Off { since: u64, preempted: bool, prev_state: u32, wake: Option<Wake>, at_out: Breakdown },
}

struct Frame {
    method: MethodIdx,
    entry: u64,
    at_entry: Breakdown,
    outermost: bool,
}

/// Walks one thread's events (already sorted by time) and drives `v`.
pub fn analyze_thread(thread: &ThreadInfo, events: &[Timed], v: &mut dyn Visitor) -> ThreadTotals {
    let mut totals = ThreadTotals::default();
    let Some(first) = events.first() else {
        v.thread_begin(thread);
        v.thread_end(thread, &totals);
        return totals;
    };
    v.thread_begin(thread);
    let mut acc = Breakdown::default();
    let mut last = first.ts;
    let mut state = CpuState::On;
    let mut seen_switch = false;
    let mut stack: Vec<Frame> = Vec::new();
    let mut open_count: HashMap<MethodIdx, u32> = HashMap::new();

    for e in events {
        // Attribute [last, e.ts) to the state the thread was in.
        let d = e.ts - last;
        acc.wall += d;
        match state {
            CpuState::On => acc.cpu += d,
            CpuState::Off { preempted: true, .. } => acc.off.add(Cause::Runqueue, d),
            CpuState::Off { wake: Some(_), .. } => acc.off.add(Cause::Runqueue, d),
            CpuState::Off { .. } => acc.off.add(Cause::Unknown, d),
        }
        last = e.ts;

        match e.event {
            Event::SwitchOut { preempted, prev_state, .. } => {
                if matches!(state, CpuState::Off { .. }) {
                    totals.anomalies += 1;
                }
                seen_switch = true;
                if preempted {
                    acc.involuntary += 1;
                } else {
                    acc.voluntary += 1;
                }
                state = CpuState::Off { since: e.ts, preempted, prev_state, wake: None, at_out: acc };
            }
            Event::Wakeup { waker_tid, waker_tgid, .. } => {
                let w = Wake { ts: e.ts, waker_tid, waker_tgid };
                if let CpuState::Off { wake: wake @ None, .. } = &mut state {
                    *wake = Some(w);
                }
                v.wakeup(thread, stack.len(), &w);
            }
            Event::SwitchIn { .. } => match state {
                CpuState::Off { since, preempted, prev_state, wake, at_out } => {
                    let split = acc - at_out;
                    let iv = OffCpuInterval { start: since, end: e.ts, preempted, prev_state, wake, split };
                    v.off_cpu(thread, stack.len(), &iv);
                    state = CpuState::On;
                }
                CpuState::On => {
                    // The first switch-in of a thread seen mid-life is normal;
                    // a later one means a switch-out was lost.
                    if seen_switch {
                        totals.anomalies += 1;
                    }
                    seen_switch = true;
                }
            },
            Event::ThreadStart => {
                // A new thread is not running until its first switch-in.
                if !seen_switch && stack.is_empty() {
                    state = CpuState::Off { since: e.ts, preempted: false, prev_state: 0, wake: None, at_out: acc };
                }
            }
            Event::Enter(m) => {
                let n = open_count.entry(m).or_insert(0);
                let outermost = *n == 0;
                *n += 1;
                v.enter(thread, e.ts, stack.len(), m);
                stack.push(Frame { method: m, entry: e.ts, at_entry: acc, outermost });
            }
            Event::Exit { method, exception } => {
                let Some(pos) = stack.iter().rposition(|f| f.method == method) else {
                    totals.anomalies += 1;
                    continue;
                };
                // Frames above the matching one lost their exits.
                while stack.len() > pos + 1 {
                    totals.anomalies += 1;
                    let f = stack.pop().unwrap();
                    close(thread, f, e.ts, acc, false, true, &mut open_count, stack.len(), v);
                }
                let f = stack.pop().unwrap();
                close(thread, f, e.ts, acc, exception, false, &mut open_count, stack.len(), v);
            }
            Event::ThreadEnd => {}
        }
    }
    while let Some(f) = stack.pop() {
        close(thread, f, last, acc, false, true, &mut open_count, stack.len(), v);
    }
    totals.breakdown = acc;
    v.thread_end(thread, &totals);
    totals
}

#[allow(clippy::too_many_arguments)]
fn close(
    thread: &ThreadInfo,
    f: Frame,
    ts: u64,
    acc: Breakdown,
    exception: bool,
    unfinished: bool,
    open_count: &mut HashMap<MethodIdx, u32>,
    depth: usize,
    v: &mut dyn Visitor,
) {
    if let Some(n) = open_count.get_mut(&f.method) {
        *n -= 1;
    }
    let inv = Invocation {
        method: f.method,
        entry: f.entry,
        exit: ts,
        breakdown: acc - f.at_entry,
        exception,
        unfinished,
        outermost: f.outermost,
    };
    debug_assert_eq!(inv.breakdown.wall, ts - f.entry);
    v.exit(thread, depth, &inv);
}

/// Runs `v` over every thread of the trace, in tid order.
pub fn analyze(trace: &Trace, v: &mut dyn Visitor) {
    let empty = Vec::new();
    for (tid, info) in &trace.threads {
        let evs = trace.events.get(tid).unwrap_or(&empty);
        analyze_thread(info, evs, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        invs: Vec<Invocation>,
        ivs: Vec<OffCpuInterval>,
        totals: Option<ThreadTotals>,
    }
    impl Visitor for Collect {
        fn exit(&mut self, _: &ThreadInfo, _: usize, inv: &Invocation) {
            self.invs.push(*inv);
        }
        fn off_cpu(&mut self, _: &ThreadInfo, _: usize, iv: &OffCpuInterval) {
            self.ivs.push(*iv);
        }
        fn thread_end(&mut self, _: &ThreadInfo, t: &ThreadTotals) {
            self.totals = Some(*t);
        }
    }

    fn ev(ts: u64, event: Event) -> Timed {
        Timed { ts, event }
    }
    fn out(preempted: bool) -> Event {
        Event::SwitchOut { preempted, prev_state: if preempted { 0 } else { 1 }, cpu: 0, next_tid: 0 }
    }
    const IN: Event = Event::SwitchIn { cpu: 0, prev_tid: 0 };
    fn wake() -> Event {
        Event::Wakeup { waker_tid: 7, waker_tgid: 7, new_task: false }
    }

    #[test]
    fn blocked_then_runqueue_then_preempted() {
        let th = ThreadInfo { tid: 1, ..Default::default() };
        let evs = vec![
            ev(100, Event::Enter(0)),
            ev(150, out(false)), // blocks
            ev(400, wake()),     // woken after 250 ns blocked
            ev(420, IN),         // 20 ns on the run queue
            ev(500, Event::Enter(1)),
            ev(510, out(true)), // preempted
            ev(530, IN),
            ev(600, Event::Exit { method: 1, exception: true }),
            ev(700, Event::Exit { method: 0, exception: false }),
        ];
        let mut c = Collect::default();
        analyze_thread(&th, &evs, &mut c);
        assert_eq!(c.invs.len(), 2);
        let inner = c.invs[0];
        assert_eq!(inner.breakdown.wall, 100);
        assert_eq!(inner.breakdown.cpu, 80);
        assert_eq!(inner.breakdown.off.get(Cause::Runqueue), 20);
        assert_eq!(inner.breakdown.involuntary, 1);
        assert!(inner.exception);
        let outer = c.invs[1];
        assert_eq!(outer.breakdown.wall, 600);
        assert_eq!(outer.breakdown.off.get(Cause::Unknown), 250);
        assert_eq!(outer.breakdown.off.get(Cause::Runqueue), 40);
        assert_eq!(outer.breakdown.cpu, 310);
        assert_eq!((outer.breakdown.voluntary, outer.breakdown.involuntary), (1, 1));
        for i in &c.invs {
            assert!(i.breakdown.is_exact());
        }
        assert_eq!(c.ivs.len(), 2);
        assert_eq!(c.ivs[0].wake.unwrap().waker_tid, 7);
        assert_eq!(c.ivs[0].split.off.get(Cause::Unknown), 250);
        let t = c.totals.unwrap();
        assert_eq!(t.breakdown.wall, 600);
        assert!(t.breakdown.is_exact());
        assert_eq!(t.anomalies, 0);
    }

    #[test]
    fn recursion_marks_inner_not_outermost_and_missing_exits_close() {
        let th = ThreadInfo { tid: 1, ..Default::default() };
        let evs = vec![
            ev(0, Event::Enter(0)),
            ev(10, Event::Enter(0)),
            ev(20, Event::Enter(1)),
            // exit of the inner 0 with 1's exit lost
            ev(30, Event::Exit { method: 0, exception: false }),
            ev(40, Event::Exit { method: 0, exception: false }),
            ev(50, Event::Enter(2)),
        ];
        let mut c = Collect::default();
        analyze_thread(&th, &evs, &mut c);
        let outer: Vec<bool> = c.invs.iter().map(|i| i.outermost).collect();
        // order of exits: 1 (closed), inner 0, outer 0, 2 (unfinished)
        assert_eq!(outer, vec![true, false, true, true]);
        assert!(c.invs[0].unfinished && c.invs[3].unfinished);
        assert_eq!(c.totals.unwrap().anomalies, 1);
    }
}

//! The per-thread walk, where the merge happens: one pass over a thread's
//! time-ordered events (both streams' together) that keeps the thread's CPU
//! state and method stack, and reports invocations and off-CPU intervals,
//! each gap attributed to a cause, to a [`Visitor`].
//!
//! Accounting is exact by construction: every nanosecond between two
//! consecutive events of a thread is added to exactly one bucket (CPU or one
//! cause) of the thread's running totals, and an invocation's figures are the
//! difference of those totals between its exit and its entry.

mod frames;

use crate::cause::{Breakdown, Cause};
use crate::model::event::{Event, MethodIdx, SyscallInfo, ThreadInfo, Timed, UNMOUNTED_STATE};
use crate::model::syscall::syscall_cause;
use crate::model::trace::Trace;
use crate::visitor::{Evidence, OffCpuInterval, ThreadTotals, Visitor, Wake};
use frames::{End, Frames};

/// What the thread was inside of, besides methods: the evidence for a block.
#[derive(Default)]
struct Context {
    /// JVM-level blocking states, innermost last: (cause, detail).
    jvm: Vec<(Cause, u32)>,
    /// Open GC / safepoint windows.
    gc: u32,
    safepoint: u32,
    /// The syscall in flight and the cause it stands for (computed when it
    /// is entered, so the record itself need not be kept).
    syscall: Option<(u32, Cause)>,
    /// A page fault happened since the thread last entered a syscall or
    /// came back on CPU.
    fault: bool,
}

impl Context {
    /// The most specific explanation of a block now: JVM-level states first,
    /// then a non-futex syscall (threads in native code keep waiting on their
    /// socket or file whatever the JVM does), then a JVM-wide stop, then a
    /// futex, then a page fault.
    fn evidence(&self) -> (Cause, Evidence) {
        if let Some(&(cause, detail)) = self.jvm.last() {
            return (cause, Evidence::Jvm { cause, detail });
        }
        if let Some((i, c)) = self.syscall {
            if c != Cause::LockNative {
                return (c, Evidence::Syscall(i));
            }
        }
        if self.gc > 0 {
            return (Cause::Gc, Evidence::Window(Cause::Gc));
        }
        if self.safepoint > 0 {
            return (Cause::Safepoint, Evidence::Window(Cause::Safepoint));
        }
        if let Some((i, c)) = self.syscall {
            return (c, Evidence::Syscall(i));
        }
        if self.fault {
            return (Cause::PageFault, Evidence::PageFault);
        }
        (Cause::Unknown, Evidence::None)
    }

    /// A JVM-level blocking state begins or ends; an end closes the
    /// innermost state of its cause and any opened inside it.
    fn block(&mut self, cause: Cause, begin: bool, detail: u32) {
        if begin {
            self.jvm.push((cause, detail));
        } else if let Some(p) = self.jvm.iter().rposition(|&(c, _)| c == cause) {
            self.jvm.truncate(p);
        }
    }

    /// A GC or safepoint window begins or ends.
    fn window(&mut self, cause: Cause, begin: bool) {
        let n = if cause == Cause::Gc {
            &mut self.gc
        } else {
            &mut self.safepoint
        };
        *n = if begin { *n + 1 } else { n.saturating_sub(1) };
    }

    /// Forgets what the kernel said (the syscall in flight, a fault): it
    /// explains nothing after a gap in the kernel's coverage.
    fn forget_kernel(&mut self) {
        self.syscall = None;
        self.fault = false;
    }
}

// One per walked thread, replaced at every switch: boxing `Off` would
// allocate per switch to save bytes nobody holds many of.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
enum CpuState {
    On,
    Off {
        since: u64,
        preempted: bool,
        prev_state: u32,
        wake: Option<Wake>,
        at_out: Breakdown,
        evidence: Evidence,
        stack: Option<u32>,
    },
}

impl CpuState {
    /// Off CPU from `since`, not woken yet, no stack yet.
    #[inline]
    fn off(since: u64, preempted: bool, prev_state: u32, at_out: Breakdown, evidence: Evidence) -> Self {
        CpuState::Off {
            since,
            preempted,
            prev_state,
            wake: None,
            at_out,
            evidence,
            stack: None,
        }
    }

    /// The off-CPU interval of this state ending at `end`, the thread's
    /// totals being `acc`; `None` on CPU.
    #[inline]
    fn interval(&self, end: u64, acc: &Breakdown) -> Option<OffCpuInterval> {
        match *self {
            CpuState::On => None,
            CpuState::Off {
                since,
                preempted,
                prev_state,
                wake,
                at_out,
                evidence,
                stack,
            } => Some(OffCpuInterval {
                start: since,
                end,
                preempted,
                prev_state,
                wake,
                split: *acc - at_out,
                evidence,
                stack,
            }),
        }
    }
}

/// The merge of one thread, fed one event at a time in time order: the
/// state machine behind [`analyze_thread`], usable on a stream that never
/// holds the thread's events in memory (see [`crate::stream`]). Memory is
/// bounded by the thread's stack depth.
pub struct ThreadWalk<'a> {
    thread: &'a ThreadInfo,
    totals: ThreadTotals,
    acc: Breakdown,
    /// Time of the previous event; `None` before the first.
    last: Option<u64>,
    state: CpuState,
    seen_switch: bool,
    frames: Frames,
    ctx: Context,
    /// Where the kernel or the JVM stream stops covering the thread, not
    /// yet passed: see [`ThreadWalk::cross_coverage_ends`].
    kernel_until: Option<u64>,
    jvm_until: Option<u64>,
    /// The earlier of the two (u64::MAX when none): one compare per event.
    next_end: u64,
    /// Past the kernel stream's coverage: time is not covered, kernel
    /// events (a few written after the first one lost) are ignored.
    uncovered: bool,
    /// Before the coverage of a ring recording's window begins (see
    /// [`ThreadInfo::covered_from`]): time is not covered and kernel
    /// events are ignored until the thread's first switch record from the
    /// window's start on, which says whether it is on CPU.
    before_window: Option<u64>,
    /// Inside a throttle window ([`Event::Held`]): while runnable off CPU,
    /// the thread waits for its cgroup's quota, not for a CPU.
    throttled: bool,
    /// Inside a steal window while on CPU: since when, and the totals then.
    steal: Option<(u64, Breakdown)>,
}

impl<'a> ThreadWalk<'a> {
    /// Starts a thread (reports [`Visitor::thread_begin`]).
    pub fn new(thread: &'a ThreadInfo, v: &mut dyn Visitor) -> Self {
        v.thread_begin(thread);
        ThreadWalk {
            thread,
            totals: ThreadTotals::default(),
            acc: Breakdown::default(),
            last: None,
            state: CpuState::On,
            seen_switch: false,
            frames: Frames::default(),
            ctx: Context::default(),
            kernel_until: thread.kernel_until,
            jvm_until: thread.jvm_until,
            next_end: earliest(thread.kernel_until, thread.jvm_until),
            uncovered: false,
            before_window: thread.covered_from,
            throttled: false,
            steal: None,
        }
    }

    /// Number of open frames.
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// The next event of the thread (not earlier than the previous one).
    /// `syscall` is the record of an [`Event::Syscall`] entry (it names the
    /// cause of blocks inside it); it is ignored for other events.
    pub fn event(&mut self, e: &Timed, syscall: Option<&SyscallInfo>, v: &mut dyn Visitor) {
        if e.ts > self.next_end {
            self.cross_coverage_ends(e.ts, v);
        }
        self.attribute(e.ts);
        if !self.covered(e) {
            return;
        }
        // A stretch's steal is over before its switch-out is seen.
        if self.steal.is_some() && matches!(e.event, Event::SwitchOut { .. } | Event::SwitchIn { .. }) {
            self.end_steal(e.ts, v);
        }
        v.event(self.thread, e);
        // `self.acc` is read where needed, not copied per event (a
        // Breakdown is ~150 bytes; most events do not need it).
        match e.event {
            Event::SwitchOut {
                preempted, prev_state, ..
            } => self.switch_out(e.ts, preempted, prev_state),
            Event::Stack(idx) => {
                // A switch-out's stacks follow it at the same time.
                if let CpuState::Off { since, stack, .. } = &mut self.state {
                    if *since == e.ts {
                        *stack = Some(idx);
                    }
                }
            }
            Event::Wakeup {
                waker_tid, waker_tgid, ..
            } => self.wakeup(
                Wake {
                    ts: e.ts,
                    waker_tid,
                    waker_tgid,
                },
                v,
            ),
            Event::SwitchIn { .. } => self.switch_in(e.ts, v),
            Event::ThreadStart => self.thread_start(e.ts),
            Event::Syscall { idx, enter } => self.syscall(idx, enter, syscall, v),
            Event::PageFault { .. } => self.ctx.fault = true,
            Event::Block { cause, begin, detail } => self.ctx.block(cause, begin, detail),
            Event::Window { cause, begin } => self.ctx.window(cause, begin),
            Event::Held { cause, begin } => self.held(cause, begin, e.ts, v),
            Event::Enter(m) => {
                v.enter(self.thread, e.ts, self.frames.len(), m);
                self.frames.push(m, e.ts, &self.acc);
            }
            Event::Exit { method, exception } => self.exit(method, exception, e.ts, v),
            Event::ThreadEnd => {}
        }
    }

    /// Whether the walk takes `e`: kernel events are ignored where the
    /// kernel stream does not cover the thread. A ring window's coverage
    /// begins at the thread's first switch record from the window's start on.
    #[inline]
    fn covered(&mut self, e: &Timed) -> bool {
        if let Some(from) = self.before_window {
            let switch = matches!(e.event, Event::SwitchIn { .. } | Event::SwitchOut { .. });
            if e.ts >= from && switch {
                // Covered from here: nothing known from before explains later time.
                self.before_window = None;
                self.state = CpuState::On;
                self.ctx.forget_kernel();
                self.throttled = false;
                self.steal = None;
            } else if e.event.from_kernel() {
                return false;
            }
        }
        !(self.uncovered && e.event.from_kernel())
    }

    #[inline]
    fn switch_out(&mut self, ts: u64, preempted: bool, prev_state: u32) {
        if matches!(self.state, CpuState::Off { .. }) {
            self.totals.anomalies += 1;
        }
        self.seen_switch = true;
        let evidence = if preempted {
            self.acc.involuntary += 1;
            Evidence::Preempted
        } else {
            self.acc.voluntary += 1;
            self.ctx.evidence().1
        };
        self.state = CpuState::off(ts, preempted, prev_state, self.acc, evidence);
    }

    #[inline]
    fn switch_in(&mut self, ts: u64, v: &mut dyn Visitor) {
        self.throttled = false;
        if let Some(iv) = self.state.interval(ts, &self.acc) {
            v.off_cpu(self.thread, self.frames.len(), &iv);
            self.state = CpuState::On;
            self.ctx.fault = false;
        } else {
            // The first switch-in of a thread seen mid-life is normal; a
            // later one means a switch-out was lost.
            if self.seen_switch {
                self.totals.anomalies += 1;
            }
            self.seen_switch = true;
        }
    }

    /// The first wakeup of an off-CPU stretch ends its block (the rest is
    /// `runqueue`); every wakeup is reported.
    #[inline]
    fn wakeup(&mut self, w: Wake, v: &mut dyn Visitor) {
        if let CpuState::Off { wake: wake @ None, .. } = &mut self.state {
            *wake = Some(w);
        }
        v.wakeup(self.thread, self.frames.len(), &w);
    }

    /// A throttle or steal window begins or ends. A throttle window holds
    /// only while the thread is off CPU and runnable (it begins at a
    /// switch-out that left it runnable): its switch-out's evidence becomes
    /// [`Evidence::Throttled`]. A steal window holds only on CPU, and is
    /// reported as an interval of its own when it ends.
    fn held(&mut self, cause: Cause, begin: bool, ts: u64, v: &mut dyn Visitor) {
        match (cause, begin) {
            (Cause::Throttled, true) => {
                if let CpuState::Off {
                    since,
                    preempted,
                    wake,
                    evidence,
                    ..
                } = &mut self.state
                {
                    if *preempted || wake.is_some() {
                        self.throttled = true;
                        if *since == ts {
                            *evidence = Evidence::Throttled;
                        }
                    }
                }
            }
            (Cause::Throttled, false) => self.throttled = false,
            (Cause::Steal, true) if matches!(self.state, CpuState::On) && self.steal.is_none() => {
                self.steal = Some((ts, self.acc));
            }
            (Cause::Steal, false) => self.end_steal(ts, v),
            _ => {}
        }
    }

    /// Reports the steal window open since `start` as an interval ending
    /// at `ts`, all of its time `steal`.
    fn end_steal(&mut self, ts: u64, v: &mut dyn Visitor) {
        let Some((start, at)) = self.steal.take() else {
            return;
        };
        if ts > start {
            let iv = OffCpuInterval {
                start,
                end: ts,
                preempted: false,
                prev_state: 0,
                wake: None,
                split: self.acc - at,
                evidence: Evidence::Steal,
                stack: None,
            };
            v.off_cpu(self.thread, self.frames.len(), &iv);
        }
    }

    fn thread_start(&mut self, ts: u64) {
        // A new thread is not running until its first switch-in.
        if !self.seen_switch && self.frames.is_empty() {
            self.state = CpuState::off(ts, false, 0, self.acc, Evidence::None);
        }
    }

    /// A syscall entry names the cause of blocks until its exit.
    #[inline]
    fn syscall(&mut self, idx: u32, enter: bool, rec: Option<&SyscallInfo>, v: &mut dyn Visitor) {
        if enter {
            self.ctx.syscall = Some((idx, rec.map_or(Cause::SyscallOther, syscall_cause)));
            self.ctx.fault = false;
            if let Some(sc) = rec {
                v.syscall(self.thread, idx, sc);
            }
        } else if self.ctx.syscall.is_some_and(|(i, _)| i == idx) {
            self.ctx.syscall = None;
        }
    }

    /// Closes the innermost open frame of `method`; a frame opened inside
    /// it lost its exit (an anomaly) and ends unfinished.
    #[inline]
    fn exit(&mut self, method: MethodIdx, exception: bool, ts: u64, v: &mut dyn Visitor) {
        let Some(pos) = self.frames.find(method) else {
            self.totals.anomalies += 1;
            return;
        };
        while self.frames.len() > pos + 1 {
            self.totals.anomalies += 1;
            self.close(ts, End::Unfinished, v);
        }
        self.close(ts, End::Exit { exception }, v);
    }

    /// Closes the innermost frame at `ts` and reports its invocation;
    /// false when no frame was open.
    fn close(&mut self, ts: u64, end: End, v: &mut dyn Visitor) -> bool {
        let Some(inv) = self.frames.close(ts, &self.acc, end) else {
            return false;
        };
        v.exit(self.thread, self.frames.len(), &inv);
        true
    }

    /// Attributes `[last event, to)` to the state the thread was in. The
    /// context only changes at events, so one cause covers the whole segment.
    #[inline]
    fn attribute(&mut self, to: u64) {
        let last = self.last.unwrap_or(to);
        let d = to - last;
        let acc = &mut self.acc;
        acc.wall += d;
        if self.uncovered || self.before_window.is_some() {
            acc.not_covered += d;
        } else {
            // Runnable off CPU: waiting for a CPU, or for the cgroup's quota.
            let runnable = if self.throttled {
                Cause::Throttled
            } else {
                Cause::Runqueue
            };
            match self.state {
                CpuState::On if self.steal.is_some() => acc.off.add(Cause::Steal, d),
                CpuState::On => acc.cpu += d,
                CpuState::Off { preempted: true, .. } => acc.off.add(runnable, d),
                // A virtual thread woken while unmounted waits for a carrier.
                CpuState::Off {
                    wake: Some(_),
                    prev_state,
                    ..
                } if prev_state & UNMOUNTED_STATE != 0 => acc.off.add(Cause::Carrier, d),
                CpuState::Off { wake: Some(_), .. } => acc.off.add(runnable, d),
                CpuState::Off { .. } => acc.off.add(self.ctx.evidence().0, d),
            }
            if !matches!(self.state, CpuState::On) || self.steal.is_some() {
                self.frames.off_changed();
            }
        }
        self.last = Some(to);
    }

    /// Passes the coverage ends before `ts`, in time order (docs/REPORT.md,
    /// "Coverage"). At the kernel's: an off-CPU interval in progress is
    /// reported as ending there, and from there on time is not covered. At
    /// the JVM's: the open invocations are closed there as unfinished (their
    /// exits were not recorded), and the JVM-level states and windows that
    /// were open explain nothing later.
    fn cross_coverage_ends(&mut self, ts: u64, v: &mut dyn Visitor) {
        while self.next_end < ts {
            let at = self.next_end.max(self.last.unwrap_or(self.next_end));
            self.attribute(at);
            if self.kernel_until == Some(self.next_end) {
                self.kernel_until = None;
                self.end_kernel_coverage(at, v);
            } else {
                self.jvm_until = None;
                self.end_jvm_coverage(at, v);
            }
            self.next_end = earliest(self.kernel_until, self.jvm_until);
        }
    }

    fn end_kernel_coverage(&mut self, at: u64, v: &mut dyn Visitor) {
        self.end_steal(at, v);
        self.throttled = false;
        if let Some(iv) = self.state.interval(at, &self.acc) {
            if iv.start < at {
                v.off_cpu(self.thread, self.frames.len(), &iv);
            }
        }
        self.state = CpuState::On;
        self.ctx.forget_kernel();
        self.uncovered = true;
    }

    fn end_jvm_coverage(&mut self, at: u64, v: &mut dyn Visitor) {
        while self.close(at, End::Unfinished, v) {}
        self.ctx.jvm.clear();
        self.ctx.gc = 0;
    }

    /// Closes the frames still open at the thread's last event (as
    /// unfinished) and reports [`Visitor::thread_end`].
    pub fn finish(mut self, v: &mut dyn Visitor) -> ThreadTotals {
        // The thread's first lost event (or the stream's end) is later than
        // its last recorded one: its open invocations were still running
        // there, so they end there, as they do when a later event exists.
        if let (Some(end), Some(_), false) = (self.jvm_until, self.last, self.frames.is_empty()) {
            self.cross_coverage_ends(end.saturating_add(1), v);
        }
        if let Some(last) = self.last {
            self.end_steal(last, v);
            while self.close(last, End::Unfinished, v) {}
            self.totals.breakdown = self.acc;
        }
        v.thread_end(self.thread, &self.totals);
        self.totals
    }
}

/// The earlier of two coverage ends, u64::MAX for none.
fn earliest(a: Option<u64>, b: Option<u64>) -> u64 {
    a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX))
}

/// Walks one thread's events (already sorted by time) and drives `v`.
/// `trace` supplies the side tables (syscalls) the events refer to.
pub fn analyze_thread(trace: &Trace, thread: &ThreadInfo, events: &[Timed], v: &mut dyn Visitor) -> ThreadTotals {
    let mut w = ThreadWalk::new(thread, v);
    for e in events {
        let sc = match e.event {
            Event::Syscall { idx, enter: true } => trace.syscalls.get(idx as usize),
            _ => None,
        };
        w.event(e, sc, v);
    }
    w.finish(v)
}

/// Runs `v` over every thread of the trace, in tid order.
pub fn analyze(trace: &Trace, v: &mut dyn Visitor) {
    let empty = Vec::new();
    for (tid, info) in &trace.threads {
        let evs = trace.events.get(tid).unwrap_or(&empty);
        analyze_thread(trace, info, evs, v);
    }
}

#[cfg(test)]
mod tests;

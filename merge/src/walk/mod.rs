//! The per-thread walk, where the merge happens: one pass over a thread's
//! time-ordered events (both streams' together) that keeps the thread's CPU
//! state and method stack, and reports invocations and off-CPU intervals,
//! each gap attributed to a cause, to a [`Visitor`].
//!
//! Accounting is exact by construction: every nanosecond between two
//! consecutive events of a thread is added to exactly one bucket (CPU or one
//! cause) of the thread's running totals, and an invocation's figures are the
//! difference of those totals between its exit and its entry.

use crate::cause::{Breakdown, Cause, OffCpu};
use crate::event::{Event, MethodIdx, SyscallInfo, ThreadInfo, Timed};
use crate::syscall::syscall_cause;
use crate::tid_map::TidMap;
use crate::trace::Trace;
use crate::visitor::{Evidence, Invocation, OffCpuInterval, ThreadTotals, Visitor, Wake};

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

struct Frame {
    method: MethodIdx,
    entry: u64,
    /// The thread's totals at entry, but for `off`: see [`OffSnapshots`].
    at_entry: Breakdown0,
    /// Index in [`OffSnapshots`] of the off-CPU totals at entry.
    off: u32,
    outermost: bool,
}

/// A [`Breakdown`] without its off-CPU part.
#[derive(Clone, Copy)]
struct Breakdown0 {
    wall: u64,
    cpu: u64,
    not_covered: u64,
    voluntary: u64,
    involuntary: u64,
}

/// The off-CPU totals (104 bytes) as frames entered them: they change only
/// while the thread is off CPU, so the frames entered between two off-CPU
/// stretches share one snapshot instead of each copying it. Frames refer to
/// snapshots in stack order, so the snapshots form a stack too.
#[derive(Default)]
struct OffSnapshots {
    /// (version of the off-CPU totals, the totals).
    snaps: Vec<(u64, OffCpu)>,
    /// Bumped whenever the running off-CPU totals change.
    version: u64,
}

impl OffSnapshots {
    /// The index of a snapshot of `off` (the running totals) as they are now.
    #[inline]
    fn take(&mut self, off: &OffCpu) -> u32 {
        match self.snaps.last() {
            Some(&(v, _)) if v == self.version => {}
            _ => self.snaps.push((self.version, *off)),
        }
        (self.snaps.len() - 1) as u32
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
    stack: Vec<Frame>,
    open_count: TidMap<u32>,
    ctx: Context,
    offs: OffSnapshots,
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
            stack: Vec::new(),
            open_count: Default::default(),
            ctx: Context::default(),
            offs: OffSnapshots::default(),
            kernel_until: thread.kernel_until,
            jvm_until: thread.jvm_until,
            next_end: earliest(thread.kernel_until, thread.jvm_until),
            uncovered: false,
            before_window: thread.covered_from,
        }
    }

    /// Number of open frames.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The next event of the thread (not earlier than the previous one).
    /// `syscall` is the record of an [`Event::Syscall`] entry (it names the
    /// cause of blocks inside it); it is ignored for other events.
    pub fn event(&mut self, e: &Timed, syscall: Option<&SyscallInfo>, v: &mut dyn Visitor) {
        let thread = self.thread;
        if e.ts > self.next_end {
            self.cross_coverage_ends(e.ts, v);
        }
        self.attribute(e.ts);
        if let Some(from) = self.before_window {
            let switch = matches!(e.event, Event::SwitchIn { .. } | Event::SwitchOut { .. });
            if e.ts >= from && switch {
                // Covered from here: nothing known from before explains later time.
                self.before_window = None;
                self.state = CpuState::On;
                self.ctx.syscall = None;
                self.ctx.fault = false;
            } else if e.event.from_kernel() {
                return;
            }
        }
        if self.uncovered && e.event.from_kernel() {
            return;
        }
        v.event(thread, e);
        // `self.acc` is read where needed, not copied per event (a
        // Breakdown is ~150 bytes; most events do not need it).
        let (stack, totals, ctx) = (&mut self.stack, &mut self.totals, &mut self.ctx);

        match e.event {
            Event::SwitchOut {
                preempted, prev_state, ..
            } => {
                if matches!(self.state, CpuState::Off { .. }) {
                    totals.anomalies += 1;
                }
                self.seen_switch = true;
                if preempted {
                    self.acc.involuntary += 1;
                } else {
                    self.acc.voluntary += 1;
                }
                let evidence = if preempted {
                    Evidence::Preempted
                } else {
                    ctx.evidence().1
                };
                self.state = CpuState::Off {
                    since: e.ts,
                    preempted,
                    prev_state,
                    wake: None,
                    at_out: self.acc,
                    evidence,
                    stack: None,
                };
            }
            Event::Stack(idx) => {
                if let CpuState::Off { since, stack, .. } = &mut self.state {
                    if *since == e.ts {
                        *stack = Some(idx);
                    }
                }
            }
            Event::Wakeup {
                waker_tid, waker_tgid, ..
            } => {
                let w = Wake {
                    ts: e.ts,
                    waker_tid,
                    waker_tgid,
                };
                if let CpuState::Off { wake: wake @ None, .. } = &mut self.state {
                    *wake = Some(w);
                }
                v.wakeup(thread, stack.len(), &w);
            }
            Event::SwitchIn { .. } => match self.state {
                CpuState::Off {
                    since,
                    preempted,
                    prev_state,
                    wake,
                    at_out,
                    evidence,
                    stack: stacks,
                } => {
                    let split = self.acc - at_out;
                    let iv = OffCpuInterval {
                        start: since,
                        end: e.ts,
                        preempted,
                        prev_state,
                        wake,
                        split,
                        evidence,
                        stack: stacks,
                    };
                    v.off_cpu(thread, stack.len(), &iv);
                    self.state = CpuState::On;
                    ctx.fault = false;
                }
                CpuState::On => {
                    // The first switch-in of a thread seen mid-life is normal;
                    // a later one means a switch-out was lost.
                    if self.seen_switch {
                        totals.anomalies += 1;
                    }
                    self.seen_switch = true;
                }
            },
            Event::ThreadStart => {
                // A new thread is not running until its first switch-in.
                if !self.seen_switch && stack.is_empty() {
                    self.state = CpuState::Off {
                        since: e.ts,
                        preempted: false,
                        prev_state: 0,
                        wake: None,
                        at_out: self.acc,
                        evidence: Evidence::None,
                        stack: None,
                    };
                }
            }
            Event::Syscall { idx, enter } => {
                if enter {
                    ctx.syscall = Some((idx, syscall.map_or(Cause::SyscallOther, syscall_cause)));
                    ctx.fault = false;
                    if let Some(sc) = syscall {
                        v.syscall(thread, idx, sc);
                    }
                } else if ctx.syscall.is_some_and(|(i, _)| i == idx) {
                    ctx.syscall = None;
                }
            }
            Event::PageFault { .. } => ctx.fault = true,
            Event::Block { cause, begin, detail } => {
                if begin {
                    ctx.jvm.push((cause, detail));
                } else if let Some(p) = ctx.jvm.iter().rposition(|&(c, _)| c == cause) {
                    ctx.jvm.truncate(p);
                }
            }
            Event::Window { cause, begin } => {
                let n = if cause == Cause::Gc {
                    &mut ctx.gc
                } else {
                    &mut ctx.safepoint
                };
                *n = if begin { *n + 1 } else { n.saturating_sub(1) };
            }
            Event::Enter(m) => {
                let n = self.open_count.entry(m).or_insert(0);
                let outermost = *n == 0;
                *n += 1;
                v.enter(thread, e.ts, stack.len(), m);
                let acc = &self.acc;
                stack.push(Frame {
                    method: m,
                    entry: e.ts,
                    at_entry: Breakdown0 {
                        wall: acc.wall,
                        cpu: acc.cpu,
                        not_covered: acc.not_covered,
                        voluntary: acc.voluntary,
                        involuntary: acc.involuntary,
                    },
                    off: self.offs.take(&acc.off),
                    outermost,
                });
            }
            Event::Exit { method, exception } => {
                let Some(pos) = stack.iter().rposition(|f| f.method == method) else {
                    totals.anomalies += 1;
                    return;
                };
                // Frames above the matching one lost their exits.
                while stack.len() > pos + 1 {
                    totals.anomalies += 1;
                    let f = stack.pop().unwrap();
                    close(
                        thread,
                        f,
                        e.ts,
                        &self.acc,
                        false,
                        true,
                        &mut self.open_count,
                        stack,
                        &mut self.offs,
                        v,
                    );
                }
                let f = stack.pop().unwrap();
                close(
                    thread,
                    f,
                    e.ts,
                    &self.acc,
                    exception,
                    false,
                    &mut self.open_count,
                    stack,
                    &mut self.offs,
                    v,
                );
            }
            Event::ThreadEnd => {}
        }
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
            match self.state {
                CpuState::On => acc.cpu += d,
                CpuState::Off { preempted: true, .. } => acc.off.add(Cause::Runqueue, d),
                CpuState::Off { wake: Some(_), .. } => acc.off.add(Cause::Runqueue, d),
                CpuState::Off { .. } => acc.off.add(self.ctx.evidence().0, d),
            }
            if !matches!(self.state, CpuState::On) {
                self.offs.version += 1;
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
        if let CpuState::Off {
            since,
            preempted,
            prev_state,
            wake,
            at_out,
            evidence,
            stack,
        } = self.state
        {
            if since < at {
                let iv = OffCpuInterval {
                    start: since,
                    end: at,
                    preempted,
                    prev_state,
                    wake,
                    split: self.acc - at_out,
                    evidence,
                    stack,
                };
                v.off_cpu(self.thread, self.stack.len(), &iv);
            }
        }
        self.state = CpuState::On;
        self.ctx.syscall = None;
        self.ctx.fault = false;
        self.uncovered = true;
    }

    fn end_jvm_coverage(&mut self, at: u64, v: &mut dyn Visitor) {
        while let Some(f) = self.stack.pop() {
            close(
                self.thread,
                f,
                at,
                &self.acc,
                false,
                true,
                &mut self.open_count,
                &self.stack,
                &mut self.offs,
                v,
            );
        }
        self.ctx.jvm.clear();
        self.ctx.gc = 0;
    }

    /// Closes the frames still open at the thread's last event (as
    /// unfinished) and reports [`Visitor::thread_end`].
    pub fn finish(mut self, v: &mut dyn Visitor) -> ThreadTotals {
        // The thread's first lost event (or the stream's end) is later than
        // its last recorded one: its open invocations were still running
        // there, so they end there, as they do when a later event exists.
        if let (Some(end), Some(_), false) = (self.jvm_until, self.last, self.stack.is_empty()) {
            self.cross_coverage_ends(end.saturating_add(1), v);
        }
        if let Some(last) = self.last {
            while let Some(f) = self.stack.pop() {
                close(
                    self.thread,
                    f,
                    last,
                    &self.acc,
                    false,
                    true,
                    &mut self.open_count,
                    &self.stack,
                    &mut self.offs,
                    v,
                );
            }
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

/// Reports the invocation of frame `f`, just popped off `stack`.
#[allow(clippy::too_many_arguments)]
fn close(
    thread: &ThreadInfo,
    f: Frame,
    ts: u64,
    acc: &Breakdown,
    exception: bool,
    unfinished: bool,
    open_count: &mut TidMap<u32>,
    stack: &[Frame],
    offs: &mut OffSnapshots,
    v: &mut dyn Visitor,
) {
    if let Some(n) = open_count.get_mut(&f.method) {
        *n -= 1;
    }
    let (at, off) = (f.at_entry, offs.snaps[f.off as usize].1);
    // Snapshots no open frame refers to any more go.
    offs.snaps.truncate(stack.last().map_or(0, |g| g.off as usize + 1));
    let depth = stack.len();
    let inv = Invocation {
        method: f.method,
        entry: f.entry,
        exit: ts,
        breakdown: Breakdown {
            wall: acc.wall - at.wall,
            cpu: acc.cpu - at.cpu,
            off: acc.off - off,
            not_covered: acc.not_covered - at.not_covered,
            voluntary: acc.voluntary - at.voluntary,
            involuntary: acc.involuntary - at.involuntary,
        },
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
        analyze_thread(trace, info, evs, v);
    }
}

#[cfg(test)]
mod tests;

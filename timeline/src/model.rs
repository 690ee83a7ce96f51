//! The model the in-memory views share (the HTML timeline and the Chrome
//! export): every thread's invocations and off-CPU intervals, in memory, in
//! the order the views list threads — of the whole trace, or of the part a
//! [`Scope`] selects (see `scope.rs`).

use crate::windows::{jvm_windows, JvmWindow};
use jtrace_merge::{
    analyze, glob_match, Breakdown, Evidence, Invocation, OffCpuInterval, ThreadInfo, ThreadTotals, Trace, Visitor,
    Wake,
};

/// One method invocation of a thread, with its depth on the stack.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The invocation, as the merge reported it.
    pub inv: Invocation,
    /// Frames below it (0 = outermost traced frame).
    pub depth: usize,
}

/// One off-CPU interval of a thread (switch-out to switch-in), with the
/// traced depth at the time.
#[derive(Debug, Clone, Copy)]
pub struct OffSpan {
    /// Switch-out time.
    pub start: u64,
    /// Switch-in time.
    pub end: u64,
    /// Involuntary (preempted while runnable).
    pub preempted: bool,
    /// The wakeup that ended the block, if any.
    pub wake: Option<Wake>,
    /// The interval split by cause (sums to `end - start`).
    pub split: Breakdown,
    /// What explained the blocked part, as it stood at switch-out (see
    /// [`jtrace_merge::describe_evidence`]); [`Evidence::None`] for the
    /// reconstructed tail.
    pub evidence: Evidence,
    /// Traced frames open during the interval (0 = outside any traced method).
    pub depth: usize,
    /// No switch-in ended it: the thread was still off CPU at its last event.
    /// Reconstructed from the thread totals so views add up to them exactly.
    pub open: bool,
    /// Its stacks at the switch-out, if recorded
    /// ([`jtrace_merge::Symbolizer::frames`] names them).
    pub stack: Option<u32>,
}

/// Everything the views need about one thread.
#[derive(Debug, Clone)]
pub struct ThreadData {
    /// Who the thread is.
    pub info: ThreadInfo,
    /// Its invocations, sorted by entry time (parents before children).
    pub spans: Vec<Span>,
    /// Its off-CPU intervals, sorted by start.
    pub offs: Vec<OffSpan>,
    /// Its totals over its traced life.
    pub totals: ThreadTotals,
}

impl ThreadData {
    /// A virtual thread (JDK 21 and later).
    pub fn is_virtual(&self) -> bool {
        self.info.virtual_id.is_some()
    }

    /// 0 = application Java thread, 1 = JVM-internal Java thread (groups
    /// "system" and "InnocuousThreadGroup"), 2 = native thread: the order in
    /// which views list threads.
    pub fn category(&self) -> u8 {
        match &self.info.java_name {
            Some(_) if !matches!(self.info.group.as_str(), "system" | "InnocuousThreadGroup") => 0,
            Some(_) => 1,
            None => 2,
        }
    }
}

/// The part of a trace a view draws: a time window and/or the threads
/// whose name (glob) or tid matches.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// From and to, CLOCK_MONOTONIC ns (`None`: the whole trace).
    pub window: Option<(u64, u64)>,
    /// Thread name glob or tid (`None`: every thread).
    pub thread: Option<String>,
}

impl Scope {
    /// Whether the scope keeps thread `t`.
    pub fn keeps_thread(&self, t: &ThreadInfo) -> bool {
        (self.thread.as_deref()).is_none_or(|p| glob_match(p, t.display_name()) || p == t.tid.to_string())
    }

    /// Whether the scope keeps something that lasted from `start` to `end`.
    pub fn keeps(&self, start: u64, end: u64) -> bool {
        self.window.is_none_or(|(from, to)| end >= from && start <= to)
    }

    /// Whether it selects anything less than the whole trace.
    pub fn is_whole(&self) -> bool {
        self.window.is_none() && self.thread.is_none()
    }
}

/// What an in-memory view draws: the trace's tables, its threads with
/// their invocations and off-CPU intervals, and the JVM-wide stops — of
/// the whole trace or of a [`Scope`].
#[derive(Debug)]
pub struct View<'a> {
    /// The trace (its tables; its events may not be in memory).
    pub trace: &'a Trace,
    /// The threads drawn, in tid order.
    pub threads: Vec<ThreadData>,
    /// The JVM-wide stops drawn, by start.
    pub windows: Vec<JvmWindow>,
    /// What part of the trace this is (whole: the default).
    pub scope: Scope,
}

impl<'a> View<'a> {
    /// The whole trace, read into memory ([`Trace::open`]).
    pub fn whole(trace: &'a Trace) -> View<'a> {
        View {
            trace,
            threads: collect(trace),
            windows: jvm_windows(trace),
            scope: Scope::default(),
        }
    }
}

#[derive(Default)]
pub(crate) struct Collector {
    pub(crate) threads: Vec<ThreadData>,
    cur: Option<ThreadData>,
    off_sum: Breakdown,
    /// Only this part of the trace is kept (a scoped view).
    pub(crate) scope: Scope,
    /// Items (invocations and intervals) kept, and how many may be: past
    /// the limit the rest is dropped and `overflow` set.
    pub(crate) items: usize,
    pub(crate) max_items: usize,
    pub(crate) overflow: bool,
}

impl Collector {
    /// A collector of the part `scope` selects, keeping at most `max_items`
    /// invocations and intervals (0: no limit).
    pub(crate) fn scoped(scope: Scope, max_items: usize) -> Collector {
        Collector {
            scope,
            max_items,
            ..Default::default()
        }
    }

    /// Counts one more item kept; false (and `overflow`) past the limit.
    fn room(&mut self) -> bool {
        if self.max_items > 0 && self.items >= self.max_items {
            self.overflow = true;
            return false;
        }
        self.items += 1;
        true
    }
}

impl Visitor for Collector {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.off_sum = Breakdown::default();
        if !self.scope.keeps_thread(t) {
            self.cur = None;
            return;
        }
        self.cur = Some(ThreadData {
            info: t.clone(),
            spans: Vec::new(),
            offs: Vec::new(),
            totals: Default::default(),
        });
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, inv: &Invocation) {
        if self.cur.is_none() || !self.scope.keeps(inv.entry, inv.exit) || !self.room() {
            return;
        }
        if let Some(c) = &mut self.cur {
            c.spans.push(Span { inv: *inv, depth });
        }
    }
    fn off_cpu(&mut self, _t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.off_sum += iv.split;
        if self.cur.is_none() || !self.scope.keeps(iv.start, iv.end) || !self.room() {
            return;
        }
        if let Some(c) = &mut self.cur {
            c.offs.push(OffSpan {
                start: iv.start,
                end: iv.end,
                preempted: iv.preempted,
                wake: iv.wake,
                split: iv.split,
                evidence: iv.evidence,
                depth,
                open: false,
                stack: iv.stack,
            });
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        let Some(mut c) = self.cur.take() else { return };
        c.totals = *totals;
        // Off-CPU time after the last switch-out has no switch-in to report
        // it; it is the tail of the thread's life, so rebuild it there.
        let tail = totals.breakdown.off.total().saturating_sub(self.off_sum.off.total());
        let consistent = (totals.breakdown.off.0.iter())
            .zip(self.off_sum.off.0.iter())
            .all(|(a, b)| a >= b);
        if tail > 0 && consistent && self.scope.keeps(t.last_ts - tail, t.last_ts) && self.room() {
            let mut split = Breakdown {
                wall: tail,
                ..Default::default()
            };
            split.off = totals.breakdown.off - self.off_sum.off;
            let depth = c
                .spans
                .iter()
                .filter(|s| s.inv.unfinished && s.inv.exit == t.last_ts)
                .count();
            c.offs.push(OffSpan {
                start: t.last_ts - tail,
                end: t.last_ts,
                preempted: false,
                wake: None,
                split,
                evidence: Evidence::None,
                depth,
                open: true,
                stack: None,
            });
        }
        // A scoped view lists the threads alive in its window.
        if !self.scope.keeps(t.first_ts, t.last_ts) {
            return;
        }
        c.spans.sort_by_key(|s| (s.inv.entry, s.depth));
        c.offs.sort_by_key(|o| o.start);
        self.threads.push(c);
    }
}

/// Collects every thread of `trace` (in tid order) with its invocations and
/// off-CPU intervals.
pub fn collect(trace: &Trace) -> Vec<ThreadData> {
    let mut c = Collector::default();
    analyze(trace, &mut c);
    c.threads
}

/// Order in which views list threads: application threads, then JVM threads,
/// then native threads; by tid within each group; each virtual thread right
/// after the carrier it ran on most (in its carrier's group).
pub fn thread_order(threads: &[ThreadData]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..threads.len()).filter(|&i| !threads[i].is_virtual()).collect();
    idx.sort_by_key(|&i| (threads[i].category(), threads[i].info.tid));
    let mut virtual_threads: Vec<usize> = (0..threads.len()).filter(|&i| threads[i].is_virtual()).collect();
    if virtual_threads.is_empty() {
        return idx;
    }
    virtual_threads.sort_by_key(|&i| threads[i].info.tid);
    let mut by_carrier: std::collections::HashMap<u32, Vec<usize>> = std::collections::HashMap::new();
    let listed: std::collections::HashSet<u32> = idx.iter().map(|&i| threads[i].info.tid).collect();
    let mut orphans = Vec::new();
    for i in virtual_threads {
        match threads[i].info.carrier.filter(|c| listed.contains(c)) {
            Some(c) => by_carrier.entry(c).or_default().push(i),
            None => orphans.push(i),
        }
    }
    let mut out = Vec::with_capacity(threads.len());
    for i in idx {
        out.push(i);
        out.extend(by_carrier.remove(&threads[i].info.tid).unwrap_or_default());
    }
    out.extend(orphans);
    out
}

/// The earliest timestamp of a trace: views show times relative to it.
pub fn time_origin(trace: &Trace) -> u64 {
    let first = trace
        .threads
        .values()
        .filter(|t| t.first_ts > 0)
        .map(|t| t.first_ts)
        .min();
    match (trace.meta.start_monotonic_ns, first) {
        (0, Some(f)) => f,
        (s, Some(f)) => s.min(f),
        (s, None) => s,
    }
}

//! What the report adds up while the trace is walked: per-method wall
//! statistics per thread and overall, thread totals, and off-CPU time by
//! stack ([`Aggregate`], the report's [`Visitor`]).

use crate::cause::Breakdown;
use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::jit::JitHistory;
use crate::report::percentile::WallDist;
use crate::visitor::{Invocation, ThreadTotals, Visitor};
use std::collections::BTreeMap;

/// Per-method statistics (JaViz-style: count, min, max, mean, stddev of wall).
#[derive(Debug, Clone, Default)]
pub struct MethodStats {
    /// Invocations counted (outermost ones only, see [`Invocation::outermost`]).
    pub calls: u64,
    /// Summed breakdown.
    pub total: Breakdown,
    /// Shortest wall.
    pub wall_min: u64,
    /// Longest wall.
    pub wall_max: u64,
    /// Σ wall², for the standard deviation.
    wall_sq: f64,
    /// Every wall, for the percentiles (exact up to 256 calls, then within 0.8 %).
    pub walls: WallDist,
    /// Calls whose JVM recorded JIT events (so whether the method had
    /// compiled code at entry is known), those that had, and their Σ wall.
    pub jit_known: u64,
    /// See `jit_known`.
    pub compiled: u64,
    /// See `jit_known`.
    pub wall_compiled: u64,
}

impl MethodStats {
    pub(crate) fn add(&mut self, inv: &Invocation, compiled: Option<bool>) {
        let w = inv.breakdown.wall;
        if let Some(c) = compiled {
            self.jit_known += 1;
            if c {
                self.compiled += 1;
                self.wall_compiled += w;
            }
        }
        if self.calls == 0 || w < self.wall_min {
            self.wall_min = w;
        }
        self.wall_max = self.wall_max.max(w);
        self.calls += 1;
        self.total += inv.breakdown;
        self.wall_sq += (w as f64) * (w as f64);
        self.walls.add(w);
    }

    /// Mean wall ns.
    pub fn wall_mean(&self) -> u64 {
        self.total.wall.checked_div(self.calls).unwrap_or(0)
    }

    /// Population standard deviation of wall ns.
    pub fn wall_stddev(&self) -> u64 {
        if self.calls == 0 {
            return 0;
        }
        let n = self.calls as f64;
        let mean = self.total.wall as f64 / n;
        (self.wall_sq / n - mean * mean).max(0.0).sqrt().round() as u64
    }

    /// Adds the calls of `s` (another thread's stats of the same method).
    pub(crate) fn merge(&mut self, s: &MethodStats) {
        if s.calls == 0 {
            return;
        }
        if self.calls == 0 || s.wall_min < self.wall_min {
            self.wall_min = s.wall_min;
        }
        self.wall_max = self.wall_max.max(s.wall_max);
        self.calls += s.calls;
        self.total += s.total;
        self.wall_sq += s.wall_sq;
        self.walls.merge(&s.walls);
        self.jit_known += s.jit_known;
        self.compiled += s.compiled;
        self.wall_compiled += s.wall_compiled;
    }
}

/// The report's visitor: per-thread and overall method statistics, and
/// the off-CPU time under each stack.
#[derive(Default)]
pub(crate) struct Aggregate {
    /// Whether a method had compiled code at a time.
    jit: JitHistory,
    pub(crate) per_thread: BTreeMap<u32, (ThreadTotals, BTreeMap<MethodIdx, MethodStats>)>,
    /// Over all threads, by method index (`calls == 0`: not called).
    pub(crate) all: Vec<MethodStats>,
    /// The thread being walked, by method index, and the methods it called
    /// (threads are walked one at a time: no map lookup per invocation).
    current: Vec<MethodStats>,
    called: Vec<MethodIdx>,
    /// Off-CPU time under each recorded stack, per thread.
    pub(crate) stacks: crate::report::stack_time::StackTime,
    /// The walked thread's time after its last switch-out, which goes
    /// under that switch-out's stacks as in the collapsed and pprof exports.
    tail: crate::stacks::tail::Tail,
    /// The walked thread's short blocks without stacks, scaled up from its
    /// sampled ones.
    short: crate::stacks::scale::ShortBlocks<()>,
    /// What the estimate of demoted methods' later calls needs.
    pub(crate) after_demotion: crate::report::demoted_estimate::AfterDemotion,
}

impl Aggregate {
    /// An empty aggregate for the walk of `trace`.
    pub(crate) fn new(trace: &crate::model::trace::Trace) -> Aggregate {
        Aggregate {
            jit: trace.jit.clone(),
            after_demotion: crate::report::demoted_estimate::AfterDemotion::new(trace),
            short: crate::stacks::scale::ShortBlocks::new(trace),
            ..Aggregate::default()
        }
    }
}

/// The stats of method `m` in a table by method index (grown as needed).
#[inline]
fn stats_of(table: &mut Vec<MethodStats>, m: MethodIdx) -> &mut MethodStats {
    let i = m as usize;
    if i >= table.len() {
        table.resize(i + 1, MethodStats::default());
    }
    &mut table[i]
}

impl Visitor for Aggregate {
    fn thread_begin(&mut self, thread: &ThreadInfo) {
        self.tail.begin();
        self.after_demotion.thread_begin(thread);
    }
    fn enter(&mut self, thread: &ThreadInfo, ts: u64, depth: usize, method: MethodIdx) {
        self.after_demotion.enter(thread, ts, depth, method);
    }
    fn event(&mut self, _thread: &ThreadInfo, e: &crate::Timed) {
        self.tail.event(e);
    }
    fn exit(&mut self, thread: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.after_demotion.exit(thread, depth, inv);
        if !inv.outermost {
            return;
        }
        let compiled = self.jit.compiled_at(thread.tgid, inv.method, inv.entry);
        let s = stats_of(&mut self.current, inv.method);
        if s.calls == 0 {
            self.called.push(inv.method);
        }
        s.add(inv, compiled);
        stats_of(&mut self.all, inv.method).add(inv, compiled);
    }
    fn off_cpu(&mut self, thread: &ThreadInfo, _depth: usize, iv: &crate::visitor::OffCpuInterval) {
        self.tail.off_cpu(&iv.split.off);
        self.stacks.add(thread.tid, iv);
        self.short.off_cpu(iv, || ());
        if let (Some(pair), Some(epoch)) = (iv.stack, self.after_demotion.epoch(iv.start)) {
            let open: Vec<MethodIdx> = self.after_demotion.open_demoted().collect();
            self.stacks.add_demoted(thread.tid, pair, epoch, &open, &iv.split.off);
        }
    }
    fn thread_end(&mut self, thread: &ThreadInfo, totals: &ThreadTotals) {
        for (pair, off) in self.short.end().scaled {
            self.stacks.add_scaled(thread.tid, pair, &off);
        }
        if let Some((off, crate::stacks::tail::TailStack::Recorded(pair))) = self.tail.end(totals) {
            self.stacks.add_time(thread.tid, pair, &off);
            // After the thread's last switch-out: after every demotion so far.
            if let Some(epoch) = self.after_demotion.epoch(u64::MAX) {
                let open: Vec<MethodIdx> = self.after_demotion.open_demoted().collect();
                self.stacks.add_demoted(thread.tid, pair, epoch, &open, &off);
            }
        }
        let t = self.per_thread.entry(thread.tid).or_default();
        t.0 = *totals;
        for m in self.called.drain(..) {
            t.1.insert(m, std::mem::take(&mut self.current[m as usize]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MethodStats;
    use crate::cause::Breakdown;
    use crate::visitor::Invocation;

    /// Percentiles by nearest rank, also over the merge of per-thread stats.
    #[test]
    fn percentiles_per_thread_and_merged() {
        let inv = |wall: u64| Invocation {
            method: 0,
            entry: 0,
            exit: wall,
            breakdown: Breakdown {
                wall,
                cpu: wall,
                ..Default::default()
            },
            exception: false,
            unfinished: false,
            outermost: true,
        };
        let (mut a, mut b) = (MethodStats::default(), MethodStats::default());
        for w in 1..=90 {
            a.add(&inv(w * 10), None);
        }
        for w in 91..=100 {
            b.add(&inv(w * 10), None);
        }
        assert_eq!(a.walls.percentile(50.0), 450);
        let mut all = MethodStats::default();
        all.merge(&a);
        all.merge(&b);
        let p = |q| all.walls.percentile(q);
        assert_eq!((p(50.0), p(90.0), p(99.0), p(100.0)), (500, 900, 990, 1000));
    }
}

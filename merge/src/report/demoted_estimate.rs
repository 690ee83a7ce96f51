//! How many calls a demoted method made after its demotion (they are not
//! recorded), estimated from the callers that kept their probes: while it
//! was traced, each call of a demoted method `m` is counted under its
//! nearest caller that was never demoted (`a`); after the demotion `m` is
//! taken to keep the same number of calls per call of `a`, whose calls are
//! all recorded. A request-driven program calls its helpers a steady number
//! of times per request, while its rate of calls per second grows severalfold
//! once the JIT has compiled it (the agent's rate is that of the warm-up, when
//! the decision is made). The calls of `m` with no such caller are
//! extrapolated from the agent's rate, as before.

use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::visitor::{Invocation, Visitor};
use std::collections::BTreeMap;

/// Counts, during the walk, what [`AfterDemotion::estimate`] needs.
#[derive(Default)]
pub(crate) struct AfterDemotion {
    /// By method index: the index of its demotion time in `times`, or
    /// `None` for a method never demoted.
    demotion: Vec<Option<usize>>,
    /// The distinct demotion times, ascending.
    times: Vec<u64>,
    /// By method index, for methods never demoted that were called: calls
    /// per interval between demotion times (`times.len() + 1` intervals).
    calls_by_interval: Vec<Vec<u32>>,
    /// (demoted method, nearest caller never demoted) → the demoted
    /// method's calls under it before its demotion.
    under: BTreeMap<(MethodIdx, MethodIdx), u64>,
    /// By demoted method: its calls before its demotion, all of them and
    /// those with no caller that was never demoted.
    before: BTreeMap<MethodIdx, (u64, u64)>,
    /// The walked thread's open methods.
    stack: Vec<MethodIdx>,
}

impl AfterDemotion {
    /// Ready for the walk of `trace`.
    pub(crate) fn new(trace: &Trace) -> AfterDemotion {
        let mut times: Vec<u64> = trace.demoted.iter().map(|d| d.ts).collect();
        times.sort_unstable();
        times.dedup();
        let mut demotion = vec![None; trace.methods.len()];
        for d in &trace.demoted {
            if let Some(slot) = demotion.get_mut(d.method as usize) {
                *slot = times.binary_search(&d.ts).ok();
            }
        }
        AfterDemotion {
            demotion,
            times,
            ..AfterDemotion::default()
        }
    }

    fn demoted(&self, m: MethodIdx) -> Option<usize> {
        self.demotion.get(m as usize).copied().flatten()
    }

    /// How many of the trace's distinct demotion times are at or before
    /// `ts` (`None` if nothing was demoted): what began at `ts` came after
    /// the demotion of each method whose [`Self::demotion_index`] is lower.
    pub(crate) fn epoch(&self, ts: u64) -> Option<u32> {
        (!self.times.is_empty()).then(|| self.times.partition_point(|&t| t <= ts) as u32)
    }

    /// The place of `m`'s demotion time among the trace's distinct
    /// demotion times; `None` if it was never demoted.
    pub(crate) fn demotion_index(&self, m: MethodIdx) -> Option<u32> {
        self.demoted(m).map(|j| j as u32)
    }

    /// The demoted methods among the walked thread's open (recorded) calls.
    pub(crate) fn open_demoted(&self) -> impl Iterator<Item = MethodIdx> + '_ {
        self.stack.iter().copied().filter(|&m| self.demoted(m).is_some())
    }

    /// `m`'s calls after its demotion: from its callers' calls, and for its
    /// calls with no traced caller never demoted, `by_rate` (the agent's
    /// rate times the time left) in proportion.
    pub(crate) fn estimate(&self, m: MethodIdx, by_rate: u64) -> u64 {
        let Some(j) = self.demoted(m) else { return by_rate };
        let Some(&(all, alone)) = self.before.get(&m) else {
            return by_rate;
        };
        let mut est = 0.0;
        let mut unexplained = alone;
        for (&(_, a), &n) in self.under.range((m, 0)..=(m, MethodIdx::MAX)) {
            let counts = &self.calls_by_interval[a as usize];
            let before: u64 = counts[..=j].iter().map(|&c| u64::from(c)).sum();
            let after: u64 = counts[j + 1..].iter().map(|&c| u64::from(c)).sum();
            if before == 0 {
                unexplained += n;
            } else {
                est += n as f64 * after as f64 / before as f64;
            }
        }
        est += by_rate as f64 * unexplained as f64 / all.max(1) as f64;
        est.round() as u64
    }
}

impl Visitor for AfterDemotion {
    fn thread_begin(&mut self, _thread: &ThreadInfo) {
        self.stack.clear();
    }
    fn enter(&mut self, _thread: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        match self.demoted(m) {
            None => {
                let i = m as usize;
                if i >= self.calls_by_interval.len() {
                    self.calls_by_interval.resize(i + 1, Vec::new());
                }
                let counts = &mut self.calls_by_interval[i];
                if counts.is_empty() {
                    counts.resize(self.times.len() + 1, 0);
                }
                let k = self.times.partition_point(|&t| t <= ts);
                counts[k] = counts[k].saturating_add(1);
            }
            Some(j) if ts < self.times[j] => {
                let caller = self.stack.iter().rev().copied().find(|&a| self.demoted(a).is_none());
                let b = self.before.entry(m).or_default();
                b.0 += 1;
                match caller {
                    Some(a) => *self.under.entry((m, a)).or_default() += 1,
                    None => b.1 += 1,
                }
            }
            Some(_) => {}
        }
        self.stack.push(m);
    }
    fn exit(&mut self, _thread: &ThreadInfo, depth: usize, _inv: &Invocation) {
        self.stack.truncate(depth);
    }
}

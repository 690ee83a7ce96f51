//! Short blocks' stacks are samples: with deferred stacks, a block shorter
//! than the trace's `stack_min_block_ns` gets its stacks only at a bounded
//! rate. The views that fold off-CPU time by stack (the report's top
//! stacks, the collapsed and pprof exports) scale them up per thread: the
//! time of a thread's short blocks without stacks goes, per cause, to the
//! stacks its sampled short blocks of that cause had, in proportion to
//! those blocks' time, and is marked as scaled. A cause with no sampled
//! stack on the thread keeps its time where unstacked time goes.
//!
//! Sums are kept exactly: per thread and cause, the scaled parts add up to
//! the time they stand for.

use crate::cause::{Cause, OffCpu};
use crate::model::trace::Trace;
use crate::visitor::OffCpuInterval;
use std::collections::{BTreeMap, HashMap};

/// One thread's short blocks, followed through a walk; `K` is where a
/// view puts an interval without stacks (its traced methods, say).
#[derive(Debug)]
pub struct ShortBlocks<K> {
    /// Blocks shorter than this (ns) are samples; `None`: every
    /// switch-out got its stacks (or none did), nothing is scaled.
    min_block_ns: Option<u64>,
    /// The thread's sampled short blocks' time, by stack pair.
    sampled: HashMap<u32, OffCpu>,
    /// Its short blocks without stacks, by where the view would put them
    /// (ordered: the views' output does not depend on a hash order).
    held: BTreeMap<K, OffCpu>,
}

impl<K> Default for ShortBlocks<K> {
    fn default() -> Self {
        ShortBlocks {
            min_block_ns: None,
            sampled: HashMap::new(),
            held: BTreeMap::new(),
        }
    }
}

/// A thread's short blocks without stacks, at its end.
#[derive(Debug)]
pub struct Scaled<K> {
    /// Time scaled up from the sampled stacks, by stack pair (in order).
    pub scaled: Vec<(u32, OffCpu)>,
    /// Time of causes no sampled stack stands for, where the view would
    /// have put it (in order).
    pub unscaled: Vec<(K, OffCpu)>,
}

impl<K: Ord + Clone> ShortBlocks<K> {
    /// For the walk of `trace`.
    pub fn new(trace: &Trace) -> ShortBlocks<K> {
        ShortBlocks {
            min_block_ns: trace.meta.stack_min_block_ns,
            sampled: HashMap::new(),
            held: BTreeMap::new(),
        }
    }

    /// An off-CPU interval. True: a short block without stacks, held until
    /// the thread's end (the view does not fold it now); `key` says where
    /// the view would put it.
    pub fn off_cpu(&mut self, iv: &OffCpuInterval, key: impl FnOnce() -> K) -> bool {
        let Some(min) = self.min_block_ns else {
            return false;
        };
        if iv.end.saturating_sub(iv.start) >= min {
            return false;
        }
        match iv.stack {
            Some(pair) => {
                *self.sampled.entry(pair).or_default() += iv.split.off;
                false
            }
            None => {
                *self.held.entry(key()).or_default() += iv.split.off;
                true
            }
        }
    }

    /// The thread ends: its held time, scaled where a sample stands for
    /// it. Ready for the next thread.
    pub fn end(&mut self) -> Scaled<K> {
        let sampled = std::mem::take(&mut self.sampled);
        let held = std::mem::take(&mut self.held);
        let mut scaled: BTreeMap<u32, OffCpu> = BTreeMap::new();
        let mut unscaled: BTreeMap<K, OffCpu> = BTreeMap::new();
        let mut pairs: Vec<(&u32, &OffCpu)> = sampled.iter().collect();
        pairs.sort_by_key(|(p, _)| **p);
        for c in Cause::ALL {
            let left: u64 = held.values().map(|o| o.get(c)).sum();
            let base: u64 = pairs.iter().map(|(_, o)| o.get(c)).sum();
            if left == 0 {
                continue;
            }
            if base == 0 {
                for (k, o) in held.iter().filter(|(_, o)| o.get(c) > 0) {
                    unscaled.entry(k.clone()).or_default().add(c, o.get(c));
                }
                continue;
            }
            // Proportional shares; the rounding remainder to the largest.
            let mut given = 0;
            for (&pair, o) in &pairs {
                let share = (u128::from(left) * u128::from(o.get(c)) / u128::from(base)) as u64;
                if share > 0 {
                    scaled.entry(pair).or_default().add(c, share);
                    given += share;
                }
            }
            let largest = pairs
                .iter()
                .max_by_key(|(p, o)| (o.get(c), std::cmp::Reverse(**p)))
                .unwrap();
            scaled.entry(*largest.0).or_default().add(c, left - given);
        }
        Scaled {
            scaled: scaled.into_iter().collect(),
            unscaled: unscaled.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Breakdown;
    use crate::visitor::Evidence;

    fn iv(start: u64, end: u64, cause: Cause, stack: Option<u32>) -> OffCpuInterval {
        let mut split = Breakdown::default();
        split.off.add(cause, end - start);
        OffCpuInterval {
            start,
            end,
            preempted: false,
            prev_state: 1,
            wake: None,
            split,
            evidence: Evidence::None,
            stack,
        }
    }

    fn blocks() -> ShortBlocks<u8> {
        ShortBlocks {
            min_block_ns: Some(500),
            sampled: HashMap::new(),
            held: BTreeMap::new(),
        }
    }

    #[test]
    fn held_time_is_shared_by_the_sampled_stacks_of_its_cause_exactly() {
        let mut s = blocks();
        // Samples: pair 1 has 100 ns of file, pair 2 has 200.
        assert!(!s.off_cpu(&iv(0, 100, Cause::File, Some(1)), || 0));
        assert!(!s.off_cpu(&iv(0, 200, Cause::File, Some(2)), || 0));
        // Long blocks are no samples, whatever their stack.
        assert!(!s.off_cpu(&iv(0, 900, Cause::File, Some(3)), || 0));
        assert!(!s.off_cpu(&iv(0, 900, Cause::File, None), || 0));
        // 1000 ns of file without stacks (under two keys), 50 of sleep.
        assert!(s.off_cpu(&iv(0, 400, Cause::File, None), || 7));
        assert!(s.off_cpu(&iv(0, 499, Cause::File, None), || 8));
        assert!(s.off_cpu(&iv(0, 101, Cause::File, None), || 8));
        assert!(s.off_cpu(&iv(0, 50, Cause::Sleep, None), || 9));
        let out = s.end();
        let file: Vec<(u32, u64)> = out.scaled.iter().map(|(p, o)| (*p, o.get(Cause::File))).collect();
        assert_eq!(file, [(1, 333), (2, 667)]);
        // No sample of sleep: its time stays where the view puts it.
        assert_eq!(out.unscaled.len(), 1);
        assert_eq!((out.unscaled[0].0, out.unscaled[0].1.get(Cause::Sleep)), (9, 50));
        assert_eq!(out.unscaled[0].1.total(), 50);
        // The next thread starts empty.
        let next = s.end();
        assert!(next.scaled.is_empty() && next.unscaled.is_empty());
    }

    #[test]
    fn without_a_threshold_nothing_is_held() {
        let mut s = blocks();
        s.min_block_ns = None;
        assert!(!s.off_cpu(&iv(0, 10, Cause::File, None), || 0));
        assert!(s.end().scaled.is_empty());
    }
}

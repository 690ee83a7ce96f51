//! Which invocations `jtrace why` explains: of the method (glob) and
//! threads asked for, the N slowest, those at or above a percentile, or all
//! of a thread's; and, for `--compare`, a sample near the median. Chosen in
//! one pass in bounded memory: a heap of the slowest, the distribution of
//! every wall ([`WallDist`]) and a fixed-size uniform sample.

use crate::report::percentile::WallDist;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How invocations are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Selection {
    /// The N slowest.
    Slowest(usize),
    /// Those whose wall is at or above the P-th percentile (0 < P ≤ 100).
    Percentile(f64),
    /// Every one (with a thread filter: that thread's).
    All,
}

/// One invocation as selection knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    /// Wall ns (first: the heap orders by it).
    pub wall: u64,
    /// Ties: the lower tid, then the earlier entry, count as slower.
    tie: Reverse<(u32, u64)>,
    /// Its method.
    pub method: u32,
}

impl Candidate {
    /// An invocation of `method` on `tid` from `entry`, `wall` ns long.
    pub fn new(tid: u32, entry: u64, wall: u64, method: u32) -> Candidate {
        Candidate {
            wall,
            tie: Reverse((tid, entry)),
            method,
        }
    }
    /// Its thread.
    pub fn tid(&self) -> u32 {
        self.tie.0 .0
    }
    /// Its entry time.
    pub fn entry(&self) -> u64 {
        self.tie.0 .1
    }
}

/// Size of the sample the median group of `--compare` is drawn from.
const SAMPLE: usize = 4096;

/// Collects the candidates of one pass.
pub(crate) struct Selector {
    mode: Selection,
    /// At most this many invocations are explained.
    cap: usize,
    /// The slowest so far (a min-heap of at most `cap`).
    slowest: BinaryHeap<Reverse<Candidate>>,
    dist: WallDist,
    /// A uniform sample of every candidate (Algorithm R).
    sample: Vec<Candidate>,
    rng: u64,
}

/// What the selection chose.
#[derive(Debug, Clone, Default)]
pub struct Chosen {
    /// The invocations to explain, slowest first.
    pub slow: Vec<Candidate>,
    /// For `--compare`: invocations nearest the median wall, not in `slow`.
    pub median: Vec<Candidate>,
    /// Invocations that matched.
    pub matched: u64,
    /// Matched invocations at or above the threshold (may exceed `slow.len()`
    /// when capped).
    pub eligible: u64,
    /// The percentile threshold, for [`Selection::Percentile`].
    pub threshold: Option<u64>,
    /// Median wall of all matched.
    pub median_wall: u64,
}

impl Selector {
    /// A selection by `mode`, explaining at most `cap` invocations.
    pub(crate) fn new(mode: Selection, cap: usize) -> Selector {
        let cap = match mode {
            Selection::Slowest(n) => n.min(cap),
            _ => cap,
        };
        Selector {
            mode,
            cap,
            slowest: BinaryHeap::new(),
            dist: WallDist::default(),
            sample: Vec::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// A matching invocation.
    pub(crate) fn add(&mut self, c: Candidate) {
        self.dist.add(c.wall);
        let n = self.dist.count();
        if self.sample.len() < SAMPLE {
            self.sample.push(c);
        } else {
            // xorshift64: deterministic, so a trace gives the same answer.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let j = self.rng % n;
            if (j as usize) < SAMPLE {
                self.sample[j as usize] = c;
            }
        }
        if self.cap == 0 {
            return;
        }
        if self.slowest.len() < self.cap {
            self.slowest.push(Reverse(c));
        } else if let Some(mut top) = self.slowest.peek_mut() {
            if c > top.0 {
                *top = Reverse(c);
            }
        }
    }

    /// The choice; `median_count` invocations near the median are added
    /// (for `--compare`).
    pub(crate) fn finish(self, median_count: usize) -> Chosen {
        let mut slow: Vec<Candidate> = self.slowest.into_iter().map(|r| r.0).collect();
        slow.sort_by(|a, b| b.cmp(a));
        let matched = self.dist.count();
        let (threshold, eligible) = match self.mode {
            Selection::Percentile(p) => {
                let t = self.dist.percentile(p);
                slow.retain(|c| c.wall >= t);
                let above = if self.dist.is_exact() {
                    // Exact: count from the sample, which then holds all.
                    self.sample.iter().filter(|c| c.wall >= t).count() as u64
                } else {
                    // The histogram says at least this many are at or above.
                    matched - (p / 100.0 * matched as f64).ceil() as u64 + 1
                };
                (Some(t), above.max(slow.len() as u64))
            }
            Selection::Slowest(n) => (None, matched.min(n as u64)),
            Selection::All => (None, matched),
        };
        let median_wall = self.dist.percentile(50.0);
        let mut median: Vec<Candidate> = self.sample.into_iter().filter(|c| !slow.contains(c)).collect();
        median.sort_by_key(|c| (c.wall.abs_diff(median_wall), Reverse(*c)));
        median.truncate(median_count);
        Chosen {
            slow,
            median,
            matched,
            eligible,
            threshold,
            median_wall,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowest_percentile_and_median() {
        let walls = [5u64, 100, 7, 9, 6, 8, 100, 4];
        let pick = |mode, cap, med| {
            let mut s = Selector::new(mode, cap);
            for (i, &w) in walls.iter().enumerate() {
                s.add(Candidate::new(10 + i as u32, 1000 * i as u64, w, 0));
            }
            s.finish(med)
        };
        let c = pick(Selection::Slowest(3), 1000, 0);
        let got: Vec<(u64, u32)> = c.slow.iter().map(|c| (c.wall, c.tid())).collect();
        // Ties: the lower tid first.
        assert_eq!(got, vec![(100, 11), (100, 16), (9, 13)]);
        assert_eq!(c.matched, 8);
        let c = pick(Selection::Percentile(75.0), 1000, 2);
        // Nearest rank: the 6th of 8 sorted (4 5 6 7 8 9 100 100) is 9.
        assert_eq!(c.threshold, Some(9));
        assert_eq!(c.slow.len(), 3);
        assert_eq!(c.eligible, 3);
        // Median 7: the nearest are 7, then 6 and 8 (ties: the slower first).
        assert_eq!(c.median_wall, 7);
        let med: Vec<u64> = c.median.iter().map(|c| c.wall).collect();
        assert_eq!(med, vec![7, 8]);
        let c = pick(Selection::Percentile(75.0), 2, 0);
        assert_eq!((c.slow.len(), c.eligible), (2, 3));
    }
}

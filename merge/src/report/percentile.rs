//! Percentiles of wall times in bounded memory ([`WallDist`]): exact for
//! up to [`EXACT`] values, then a log-linear histogram whose buckets are at
//! most 1/64 of their value wide (a percentile is within 0.8 % of the true
//! one). The report's p50/p90/p99 and `jtrace why`'s selection use it.

/// Values kept exactly before the histogram takes over.
pub const EXACT: usize = 256;

/// Sub-buckets per power of two (values from 128 on).
const SUB: u32 = 64;

/// A distribution of nanosecond values: exact while small, then bucketed.
#[derive(Debug, Clone, Default)]
pub struct WallDist {
    /// The values while there are at most [`EXACT`].
    exact: Vec<u64>,
    /// Counts by bucket from bucket `lo` on, once past [`EXACT`] values.
    hist: Option<Hist>,
    n: u64,
    min: u64,
    max: u64,
}

#[derive(Debug, Clone)]
struct Hist {
    lo: u32,
    counts: Vec<u64>,
}

/// The bucket of `v`: the value itself below 128, then 64 per power of two.
fn bucket(v: u64) -> u32 {
    if v < 128 {
        return v as u32;
    }
    let e = 63 - v.leading_zeros(); // ≥ 7
    let m = ((v >> (e - 6)) & (SUB as u64 - 1)) as u32;
    128 + (e - 7) * SUB + m
}

/// The smallest and largest value of bucket `b`.
fn bucket_range(b: u32) -> (u64, u64) {
    if b < 128 {
        return (b as u64, b as u64);
    }
    let (e, m) = ((b - 128) / SUB + 7, (b - 128) % SUB);
    let width = 1u64 << (e - 6);
    let lo = (1u64 << e) + m as u64 * width;
    (lo, lo + (width - 1))
}

impl Hist {
    fn add(&mut self, b: u32, count: u64) {
        if self.counts.is_empty() {
            self.lo = b;
        }
        if b < self.lo {
            let grow = (self.lo - b) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.lo = b;
        }
        let i = (b - self.lo) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += count;
    }
}

impl WallDist {
    /// Adds one value.
    #[inline]
    pub fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        match &mut self.hist {
            Some(h) => h.add(bucket(v), 1),
            None => {
                self.exact.push(v);
                if self.exact.len() > EXACT {
                    self.make_hist();
                }
            }
        }
    }

    fn make_hist(&mut self) {
        let mut h = Hist {
            lo: 0,
            counts: Vec::new(),
        };
        for v in self.exact.drain(..) {
            h.add(bucket(v), 1);
        }
        self.exact = Vec::new();
        self.hist = Some(h);
    }

    /// Adds every value of `o`.
    pub fn merge(&mut self, o: &WallDist) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
        if self.hist.is_none() && o.hist.is_none() && self.exact.len() + o.exact.len() <= EXACT {
            self.exact.extend_from_slice(&o.exact);
            return;
        }
        if self.hist.is_none() {
            self.make_hist();
        }
        let h = self.hist.as_mut().expect("made above");
        match &o.hist {
            Some(oh) => {
                for (i, &c) in oh.counts.iter().enumerate() {
                    if c > 0 {
                        h.add(oh.lo + i as u32, c);
                    }
                }
            }
            None => {
                for &v in &o.exact {
                    h.add(bucket(v), 1);
                }
            }
        }
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// True while every value is kept (percentiles are exact).
    pub fn is_exact(&self) -> bool {
        self.hist.is_none()
    }

    /// The `p`-th percentile (0 < p ≤ 100) by nearest rank: the smallest
    /// value with at least p % of the values at or below it. Exact while
    /// [`WallDist::is_exact`], else the middle of its bucket (within 0.8 %),
    /// kept within the smallest and largest value. 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((p / 100.0 * self.n as f64).ceil() as u64).clamp(1, self.n);
        match &self.hist {
            None => {
                let mut v = self.exact.clone();
                let (_, x, _) = v.select_nth_unstable((rank - 1) as usize);
                *x
            }
            Some(h) => {
                let mut seen = 0;
                for (i, &c) in h.counts.iter().enumerate() {
                    seen += c;
                    if seen >= rank {
                        let (lo, hi) = bucket_range(h.lo + i as u32);
                        return (lo + (hi - lo) / 2).clamp(self.min, self.max);
                    }
                }
                self.max
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values() {
        let mut prev_hi = None;
        for b in 0..2000u32 {
            let (lo, hi) = bucket_range(b);
            assert_eq!(bucket(lo), b);
            assert_eq!(bucket(hi), b);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {b}");
            }
            prev_hi = Some(hi);
            assert!(hi - lo <= lo / 64, "bucket {b} too wide");
        }
        let top = bucket(u64::MAX);
        assert_eq!(bucket_range(top).1, u64::MAX);
    }

    #[test]
    fn exact_while_small_by_nearest_rank() {
        let mut d = WallDist::default();
        for v in [50u64, 10, 40, 20, 30] {
            d.add(v);
        }
        assert!(d.is_exact());
        assert_eq!(d.percentile(50.0), 30);
        assert_eq!(d.percentile(90.0), 50);
        assert_eq!(d.percentile(20.0), 10);
        assert_eq!(d.percentile(100.0), 50);
        assert_eq!(WallDist::default().percentile(50.0), 0);
    }

    #[test]
    fn histogram_within_one_percent_and_merges() {
        let mut a = WallDist::default();
        let mut b = WallDist::default();
        let mut all = Vec::new();
        for i in 0..10_000u64 {
            let v = 1_000 + i * i * 37 % 9_000_000;
            all.push(v);
            if i % 3 == 0 {
                a.add(v)
            } else {
                b.add(v)
            }
        }
        a.merge(&b);
        assert!(!a.is_exact());
        assert_eq!(a.count(), 10_000);
        all.sort();
        for p in [50.0, 90.0, 99.0, 100.0] {
            let want = all[((p / 100.0 * all.len() as f64).ceil() as usize).max(1) - 1];
            let got = a.percentile(p);
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err <= 0.008, "p{p}: {got} vs {want}");
        }
        // Small exact distributions merge exactly.
        let mut c = WallDist::default();
        c.add(5);
        let mut d = WallDist::default();
        d.add(7);
        d.add(1);
        c.merge(&d);
        assert!(c.is_exact());
        assert_eq!(c.percentile(50.0), 5);
    }
}

//! [`CodeMap`]: code ranges that come and go over time (JIT-compiled
//! methods, generated stubs), looked up by address at a time.

/// One range and when it was live.
#[derive(Debug, Clone)]
struct Range<T> {
    start: u64,
    end: u64,
    loaded: u64,
    unloaded: u64,
    value: T,
}

/// What a [`CodeMap`] knows of an address at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeAt<'a, T> {
    /// Live code.
    Live(&'a T),
    /// Only code that was unloaded before that time, or loaded after it:
    /// the address is in the map's area but nothing known was there.
    Stale,
    /// No range ever held the address.
    None,
}

/// Code ranges with load and unload times. Build with [`CodeMap::load`] /
/// [`CodeMap::unload`] in time order, then [`CodeMap::finish`].
#[derive(Debug, Clone)]
pub struct CodeMap<T> {
    ranges: Vec<Range<T>>,
    longest: u64,
    sorted: bool,
}

impl<T> Default for CodeMap<T> {
    fn default() -> Self {
        CodeMap {
            ranges: Vec::new(),
            longest: 0,
            sorted: true,
        }
    }
}

impl<T> CodeMap<T> {
    /// Code of `size` bytes at `start`, live from `ts`.
    pub fn load(&mut self, start: u64, size: u64, ts: u64, value: T) {
        self.longest = self.longest.max(size);
        self.sorted = false;
        self.ranges.push(Range {
            start,
            end: start.saturating_add(size),
            loaded: ts,
            unloaded: u64::MAX,
            value,
        });
    }

    /// The code at `start` that is live is gone from `ts` (the last one
    /// loaded before: code loaded at `start` since took freed addresses).
    pub fn unload(&mut self, start: u64, ts: u64) {
        if let Some(r) = self
            .ranges
            .iter_mut()
            .rev()
            .find(|r| r.start == start && r.unloaded == u64::MAX && r.loaded <= ts)
        {
            r.unloaded = ts;
        }
    }

    /// Sorts for lookups (call after the last load).
    pub fn finish(&mut self) {
        self.ranges.sort_by_key(|r| r.start);
        self.sorted = true;
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Every range: (start, end, loaded, unloaded or `u64::MAX`, value).
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, u64, u64, &T)> {
        self.ranges
            .iter()
            .map(|r| (r.start, r.end, r.loaded, r.unloaded, &r.value))
    }

    /// Whether no range was loaded.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The code at `pc` at time `ts`. A range is live from its load to its
    /// unload; of two live ranges at one address (an unload record may come
    /// after the load of the code that took the freed addresses), the one
    /// loaded last is there. A pc seen where no range was live, before a
    /// range's load record (the record of code compiled just before is
    /// written a little after), is in the first range loaded after.
    pub fn lookup(&self, pc: u64, ts: u64) -> CodeAt<'_, T> {
        match self.find(pc, ts) {
            Found::Live(i) => CodeAt::Live(&self.ranges[i].value),
            Found::Stale => CodeAt::Stale,
            Found::None => CodeAt::None,
        }
    }

    /// Whether [`CodeMap::lookup`] gives the same live code for `pc` at
    /// every time from `t0` to `t1`: a stack seen over that span names
    /// that pc the same at each of its uses.
    pub fn stable(&self, pc: u64, t0: u64, t1: u64) -> bool {
        let Found::Live(first) = self.find(pc, t0) else {
            return false;
        };
        // The answer changes only where a range at pc loads or unloads.
        self.covering(pc)
            .flat_map(|i| [self.ranges[i].loaded, self.ranges[i].unloaded])
            .filter(|&t| t > t0 && t <= t1)
            .all(|t| self.find(pc, t) == Found::Live(first))
    }

    /// Indexes of the ranges that hold `pc`.
    fn covering(&self, pc: u64) -> impl Iterator<Item = usize> + '_ {
        debug_assert!(self.sorted, "CodeMap::finish not called");
        let hi = self.ranges.partition_point(|r| r.start <= pc);
        (0..hi)
            .rev()
            .take_while(move |&i| pc - self.ranges[i].start < self.longest)
            .filter(move |&i| pc < self.ranges[i].end)
    }

    fn find(&self, pc: u64, ts: u64) -> Found {
        let mut stale = false;
        let mut live: Option<usize> = None;
        let mut later: Option<usize> = None;
        for i in self.covering(pc) {
            let r = &self.ranges[i];
            if r.loaded <= ts && ts < r.unloaded {
                if live.is_none_or(|l| r.loaded > self.ranges[l].loaded) {
                    live = Some(i);
                }
            } else if r.loaded > ts {
                // Its load record came after `ts` (HotSpot may post it late,
                // from its service thread), whether or not it was unloaded
                // since: no known code was live there at `ts`, and the first
                // code loaded after is the only one that can have been.
                if later.is_none_or(|l| r.loaded < self.ranges[l].loaded) {
                    later = Some(i);
                }
                stale = true;
            } else {
                stale = true;
            }
        }
        match (live, later) {
            (Some(i), _) | (None, Some(i)) => Found::Live(i),
            (None, None) if stale => Found::Stale,
            (None, None) => Found::None,
        }
    }
}

/// What [`CodeMap::find`] found: a range by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Live(usize),
    Stale,
    None,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_found_at_their_times() {
        let mut m = CodeMap::default();
        m.load(0x1000, 0x100, 10, "a");
        m.load(0x2000, 0x10, 10, "b");
        m.unload(0x1000, 50);
        m.load(0x1000, 0x80, 60, "c");
        m.finish();
        assert_eq!(m.lookup(0x1010, 20), CodeAt::Live(&"a"));
        assert_eq!(m.lookup(0x1010, 70), CodeAt::Live(&"c"));
        // Between a's unload and c's load: c came later (its record may lag).
        assert_eq!(m.lookup(0x1010, 55), CodeAt::Live(&"c"));
        // Only a ever covered 0x10f0, and it was gone.
        assert_eq!(m.lookup(0x10f0, 70), CodeAt::Stale);
        assert_eq!(m.lookup(0x2010, 20), CodeAt::None);
        assert_eq!(m.lookup(0x500, 20), CodeAt::None);
    }

    #[test]
    fn the_code_loaded_last_at_an_address_is_there() {
        let mut m = CodeMap::default();
        // a's unload record comes after b took its addresses.
        m.load(0x1000, 0x100, 10, "a");
        m.load(0x1000, 0x100, 40, "b");
        m.unload(0x1000, 30);
        m.finish();
        assert_eq!(m.lookup(0x1010, 20), CodeAt::Live(&"a"));
        assert_eq!(m.lookup(0x1010, 50), CodeAt::Live(&"b"));
        let mut m = CodeMap::default();
        m.load(0x1000, 0x100, 10, "a");
        m.load(0x1000, 0x100, 40, "b");
        m.finish();
        assert_eq!(m.lookup(0x1010, 50), CodeAt::Live(&"b"));
    }

    #[test]
    fn code_whose_load_record_lags_names_its_pcs_though_it_was_unloaded_since() {
        let mut m = CodeMap::default();
        m.load(0x1000, 0x100, 10, "a");
        m.unload(0x1000, 30);
        // b ran from before 40 (its record lagged), and was unloaded at 60.
        m.load(0x1000, 0x100, 40, "b");
        m.unload(0x1000, 60);
        m.load(0x1000, 0x100, 70, "c");
        m.finish();
        assert_eq!(m.lookup(0x1010, 35), CodeAt::Live(&"b"));
        assert_eq!(m.lookup(0x1010, 65), CodeAt::Live(&"c"));
        assert_eq!(m.lookup(0x1010, 20), CodeAt::Live(&"a"));
        // Past every range's unload, nothing can be named.
        let mut m = CodeMap::default();
        m.load(0x1000, 0x100, 10, "a");
        m.unload(0x1000, 30);
        m.finish();
        assert_eq!(m.lookup(0x1010, 35), CodeAt::Stale);
    }

    #[test]
    fn a_pc_is_stable_while_the_same_code_is_there() {
        let mut m = CodeMap::default();
        m.load(0x1000, 0x100, 10, "a");
        m.unload(0x1000, 30);
        m.load(0x1000, 0x100, 40, "b");
        m.load(0x3000, 0x100, 100, "c");
        m.finish();
        assert!(m.stable(0x1010, 12, 25));
        assert!(!m.stable(0x1010, 12, 45), "a, then b");
        assert!(m.stable(0x1010, 41, 1000));
        // Seen just before c's load record, and after it: c throughout.
        assert!(m.stable(0x3010, 90, 200));
        assert!(!m.stable(0x5000, 0, 10));
    }
}

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

    /// The code at `start` that is live is gone from `ts`.
    pub fn unload(&mut self, start: u64, ts: u64) {
        if let Some(r) = self
            .ranges
            .iter_mut()
            .rev()
            .find(|r| r.start == start && r.unloaded == u64::MAX)
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

    /// Whether no range was loaded.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The code at `pc` at time `ts`. A range is live from its load to its
    /// unload; a pc seen before its code's load record (the record of code
    /// compiled just before is written a little after) counts if no other
    /// range held it.
    pub fn lookup(&self, pc: u64, ts: u64) -> CodeAt<'_, T> {
        debug_assert!(self.sorted, "CodeMap::finish not called");
        let hi = self.ranges.partition_point(|r| r.start <= pc);
        let mut stale = false;
        let mut later: Option<&Range<T>> = None;
        for r in self.ranges[..hi].iter().rev() {
            if pc - r.start >= self.longest {
                break;
            }
            if pc >= r.end {
                continue;
            }
            if r.loaded <= ts && ts < r.unloaded {
                return CodeAt::Live(&r.value);
            }
            if r.loaded > ts && r.unloaded == u64::MAX {
                later = Some(later.map_or(r, |l| if r.loaded < l.loaded { r } else { l }));
            }
            stale = true;
        }
        match later {
            Some(r) => CodeAt::Live(&r.value),
            None if stale => CodeAt::Stale,
            None => CodeAt::None,
        }
    }
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
}

//! Critical-path time aggregated by (thread, method, state): over the
//! explained invocations, per invocation (its root cause), and slow
//! against median (`--compare`).

use super::path::{Path, State};
use super::Explained;
use std::collections::HashMap;

/// Critical-path time of one (thread, method, state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The thread.
    pub tid: u32,
    /// Its innermost traced method then.
    pub method: Option<u32>,
    /// What it did.
    pub state: State,
    /// Nanoseconds on the paths.
    pub ns: u64,
}

/// The rows of some paths, largest first (ties: by tid, method, state).
pub fn summarize<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<Row> {
    let mut sums: HashMap<(u32, Option<u32>, State), u64> = HashMap::new();
    for p in paths {
        for s in &p.segments {
            *sums.entry((s.tid, s.method, s.state)).or_default() += s.ns;
        }
    }
    let mut rows: Vec<Row> = sums
        .into_iter()
        .map(|((tid, method, state), ns)| Row { tid, method, state, ns })
        .collect();
    rows.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then(a.tid.cmp(&b.tid))
            .then(a.method.cmp(&b.method))
            .then(a.state.cmp(&b.state))
    });
    rows
}

/// The root cause of one invocation: the (thread, method, state) with the
/// most time on its path.
pub fn root_cause(p: &Path) -> Option<Row> {
    summarize([p]).into_iter().next()
}

/// One row of the slow-against-median comparison: mean critical-path ns
/// per invocation in each group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareRow {
    /// The (thread, method, state).
    pub key: Row,
    /// Mean ns per slow invocation.
    pub slow: f64,
    /// Mean ns per median invocation.
    pub median: f64,
}

impl CompareRow {
    /// What this row adds to a slow invocation over a median one.
    pub fn difference(&self) -> f64 {
        self.slow - self.median
    }
}

/// Rows of both groups by mean ns per invocation, the largest difference
/// first. Threads differ between invocations (a pool serves each request
/// on another thread), so rows are keyed by thread *name*, method and state:
/// `key.tid` is that of the first thread of the name met.
pub fn compare(slow: &[Explained], median: &[Explained], name: &dyn Fn(u32) -> String) -> Vec<CompareRow> {
    // (thread name, method, state) → (first tid, slow ns, median ns).
    type Sums = HashMap<(String, Option<u32>, State), (u32, u64, u64)>;
    let mut sums = Sums::new();
    for (group, set) in [(0, slow), (1, median)] {
        for e in set {
            for s in &e.path.segments {
                let v = sums.entry((name(s.tid), s.method, s.state)).or_insert((s.tid, 0, 0));
                if group == 0 {
                    v.1 += s.ns;
                } else {
                    v.2 += s.ns;
                }
            }
        }
    }
    let mean = |ns: u64, n: usize| if n == 0 { 0.0 } else { ns as f64 / n as f64 };
    let mut rows: Vec<(String, CompareRow)> = sums
        .into_iter()
        .map(|((thread, method, state), (tid, s, m))| {
            let key = Row {
                tid,
                method,
                state,
                ns: s,
            };
            (
                thread,
                CompareRow {
                    key,
                    slow: mean(s, slow.len()),
                    median: mean(m, median.len()),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.1.difference()
            .total_cmp(&a.1.difference())
            .then(a.0.cmp(&b.0))
            .then(a.1.key.method.cmp(&b.1.key.method))
            .then(a.1.key.state.cmp(&b.1.key.state))
    });
    rows.into_iter().map(|r| r.1).collect()
}

//! The rows of the text report's threads table: the tracer's own threads
//! left out (unless asked for), and threads named alike (`pool-1-thread-1`
//! … `-8`, `GC Thread#0` … `#3`) summed into one row (unless one row per
//! thread is asked for). The JSON report stays per thread.

use jtrace_merge::report::ThreadJson;
use jtrace_merge::OffCpu;
use std::collections::HashMap;

/// One row of the threads table: one thread, or the threads of a group.
pub(crate) struct ThreadRow<'a> {
    /// Its threads, in the report's order (one, unless a group).
    pub members: Vec<&'a ThreadJson>,
    /// Σ wall.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
    /// Σ off-CPU by cause.
    pub off_cpu_ns: OffCpu,
    /// Σ time not covered.
    pub not_covered_ns: u64,
    /// Σ voluntary switches.
    pub voluntary_switches: u64,
    /// Σ involuntary switches.
    pub involuntary_switches: u64,
}

impl<'a> ThreadRow<'a> {
    fn new(first: &'a ThreadJson) -> ThreadRow<'a> {
        let mut row = ThreadRow {
            members: Vec::new(),
            wall_ns: 0,
            cpu_ns: 0,
            off_cpu_ns: OffCpu::default(),
            not_covered_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
        };
        row.add(first);
        row
    }

    fn add(&mut self, t: &'a ThreadJson) {
        self.members.push(t);
        self.wall_ns += t.wall_ns;
        self.cpu_ns += t.cpu_ns;
        self.off_cpu_ns += t.off_cpu_ns;
        self.not_covered_ns += t.not_covered_ns;
        self.voluntary_switches += t.voluntary_switches;
        self.involuntary_switches += t.involuntary_switches;
    }

    /// The name cell: the thread's name (`[comm]` when the JVM agent did not
    /// know it), or a group's, `pool-1-thread-{1..8} ×8` (`*` for numbers
    /// that are not a run of consecutive ones); ` (tracer)` for the tracer's.
    pub fn name(&self) -> String {
        let first = self.members[0];
        let name = if self.members.len() == 1 {
            first.name.clone()
        } else {
            group_name(&self.members)
        };
        let name = if first.java { name } else { format!("[{name}]") };
        let name = if self.members.len() == 1 {
            name
        } else {
            format!("{name} ×{}", self.members.len())
        };
        if first.tracer {
            format!("{name} (tracer)")
        } else {
            name
        }
    }

    /// The tid cell of a group: its tids as a range when consecutive
    /// (`2172-2174`), else the first and `…`. None for a single thread.
    pub fn group_tids(&self) -> Option<String> {
        if self.members.len() == 1 {
            return None;
        }
        let mut tids: Vec<u32> = self.members.iter().map(|t| t.tid).collect();
        tids.sort_unstable();
        let (lo, hi) = (tids[0], tids[tids.len() - 1]);
        Some(if consecutive(&tids) {
            format!("{lo}-{hi}")
        } else {
            format!("{lo},…")
        })
    }
}

/// What the default table leaves out of the tracer's own threads.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TracerLeftOut {
    /// Their tids.
    pub tids: Vec<u32>,
    /// Their names, each once.
    pub names: Vec<String>,
    /// Σ wall.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
}

/// The table's rows: the tracer's threads left out unless `all`, threads
/// named alike grouped unless `per_thread`, each row where its first
/// thread is in the report.
pub(crate) fn thread_rows(threads: &[ThreadJson], all: bool, per_thread: bool) -> (Vec<ThreadRow<'_>>, TracerLeftOut) {
    let mut left_out = TracerLeftOut::default();
    let mut rows: Vec<ThreadRow> = Vec::new();
    let mut group_row: HashMap<GroupKey, usize> = HashMap::new();
    for t in threads {
        if t.tracer && !all {
            left_out.tids.push(t.tid);
            if !left_out.names.contains(&t.name) {
                left_out.names.push(t.name.clone());
            }
            left_out.wall_ns += t.wall_ns;
            left_out.cpu_ns += t.cpu_ns;
            continue;
        }
        let key = if per_thread { None } else { group_key(t) };
        match key {
            Some(k) => match group_row.get(&k) {
                Some(&i) => rows[i].add(t),
                None => {
                    group_row.insert(k, rows.len());
                    rows.push(ThreadRow::new(t));
                }
            },
            None => rows.push(ThreadRow::new(t)),
        }
    }
    (rows, left_out)
}

/// Threads of one group: same process, both known to the JVM agent or
/// neither, both the tracer's or neither, same name once its number is
/// removed.
type GroupKey = (u32, bool, bool, String);

/// `t`'s group, or None for a thread never grouped: a virtual thread
/// (listed under its carrier) or one not paired with a kernel thread.
fn group_key(t: &ThreadJson) -> Option<GroupKey> {
    if t.is_virtual || t.unmatched {
        return None;
    }
    Some((t.pid, t.java, t.tracer, split_number(&t.name).1.to_string()))
}

/// `name` as (its part before a trailing number, separator kept; the same
/// without a `#` or `-` before the number: the group's stem; the number).
/// A name that is only a number, or has none, is its own stem.
fn split_number(name: &str) -> (&str, &str, Option<u64>) {
    let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let stem = prefix.strip_suffix(['#', '-']).unwrap_or(prefix);
    match name[prefix.len()..].parse::<u64>() {
        Ok(n) if !stem.is_empty() => (prefix, stem, Some(n)),
        _ => (name, name, None),
    }
}

/// A group's name: `prefix{a..b}` for consecutive numbers, `prefix*` for
/// others, the name itself when no member has a number (all alike).
fn group_name(members: &[&ThreadJson]) -> String {
    let parts: Vec<(&str, &str, Option<u64>)> = members.iter().map(|t| split_number(&t.name)).collect();
    let (prefix, stem, _) = parts[0];
    if parts.iter().all(|p| p.2.is_none()) {
        return stem.to_string();
    }
    let mut numbers: Vec<u64> = parts.iter().filter_map(|p| p.2).collect();
    numbers.sort_unstable();
    if numbers.len() == parts.len() && consecutive(&numbers) {
        format!("{prefix}{{{}..{}}}", numbers[0], numbers[numbers.len() - 1])
    } else if numbers.len() == parts.len() {
        format!("{prefix}*")
    } else {
        format!("{stem}*")
    }
}

/// Whether sorted `v` is a run of consecutive numbers, each once.
fn consecutive<T: Copy + Into<u64>>(v: &[T]) -> bool {
    v.windows(2).all(|w| w[1].into() == w[0].into() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_number() {
        assert_eq!(
            split_number("pool-1-thread-12"),
            ("pool-1-thread-", "pool-1-thread", Some(12))
        );
        assert_eq!(split_number("GC Thread#0"), ("GC Thread#", "GC Thread", Some(0)));
        assert_eq!(
            split_number("C2 CompilerThread3"),
            ("C2 CompilerThread", "C2 CompilerThread", Some(3))
        );
        assert_eq!(split_number("main"), ("main", "main", None));
        assert_eq!(split_number("42"), ("42", "42", None));
        assert_eq!(split_number("-7"), ("-7", "-7", None));
        assert!(consecutive(&[3u32, 4, 5]));
        assert!(!consecutive(&[0u32, 2]));
        assert!(!consecutive(&[1u32, 1]));
    }
}

//! The second pass of `jtrace why`: one walk of each thread the critical
//! paths cross, which names, for every segment, the innermost traced
//! method of its thread then, and for every off-CPU segment and hop what
//! the thread was blocked in (the evidence the views show).
//!
//! A CPU segment in which the thread ran several traced methods is split
//! by method: one segment per method with its time there, in the order the
//! methods first ran (so a segment stays one line however many short
//! calls it holds). Every other segment keeps its one method.

use super::path::{MethodTimes, Path, Segment, State};
use crate::cause::Cause;
use crate::describe::{describe_evidence, describe_syscall};
use crate::model::event::{MethodIdx, SyscallInfo, ThreadInfo};
use crate::model::trace::Trace;
use crate::visitor::{Evidence, Invocation, OffCpuInterval, Visitor};
use std::collections::{HashMap, VecDeque};

/// What a query is about.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Segment `seg` of path `path`.
    Segment { path: u32, seg: u32 },
    /// The waiter's side of hop `hop` of path `path` (method and evidence
    /// at its start).
    Waiter { path: u32, hop: u32 },
    /// The blocker's method at the end of hop `hop`.
    Blocker { path: u32, hop: u32 },
}

/// A time range of one thread to label.
#[derive(Debug, Clone, Copy)]
struct Query {
    start: u64,
    end: u64,
    target: Target,
    /// Wants the evidence of the interval holding `start`.
    off: bool,
}

/// Per thread, its queries sorted by start.
pub(crate) struct Queries {
    by_thread: HashMap<u32, Vec<Query>>,
}

impl Queries {
    /// The queries of every path's segments and hops.
    pub(crate) fn of(paths: &[Path]) -> Queries {
        let mut by_thread: HashMap<u32, Vec<Query>> = HashMap::new();
        for (p, path) in paths.iter().enumerate() {
            let p = p as u32;
            for (i, s) in path.segments.iter().enumerate() {
                by_thread.entry(s.tid).or_default().push(Query {
                    start: s.start,
                    end: s.start + s.ns,
                    target: Target::Segment { path: p, seg: i as u32 },
                    off: !matches!(s.state, State::Cpu | State::Off(Cause::Runqueue | Cause::Carrier)),
                });
            }
            for (h, hop) in path.hops.iter().enumerate() {
                let hop_i = h as u32;
                by_thread.entry(hop.waiter).or_default().push(Query {
                    start: hop.start,
                    end: hop.start,
                    target: Target::Waiter { path: p, hop: hop_i },
                    off: true,
                });
                // Just before the wakeup: the blocker's method as it woke the waiter.
                let at = hop.end.saturating_sub(1).max(hop.start);
                by_thread.entry(hop.blocker).or_default().push(Query {
                    start: at,
                    end: at,
                    target: Target::Blocker { path: p, hop: hop_i },
                    off: false,
                });
            }
        }
        for v in by_thread.values_mut() {
            v.sort_by_key(|q| (q.start, q.end));
        }
        Queries { by_thread }
    }

    /// Whether thread `tid` has anything to label.
    pub(crate) fn wants(&self, tid: u32) -> bool {
        self.by_thread.contains_key(&tid)
    }
}

/// The answers of one thread's queries.
#[derive(Debug, Default)]
struct Answer {
    /// Time per method, in the order they first ran (None: no traced method).
    methods: MethodTimes,
    evidence: Option<String>,
}

/// Labels one thread: a [`Visitor`] of its walk, told each event's time
/// first ([`Labeller::advance`]).
pub(crate) struct Labeller<'a> {
    trace: &'a Trace,
    queries: &'a [Query],
    answers: Vec<Answer>,
    /// Queries that began before the current time, not yet ended.
    active: Vec<usize>,
    next: usize,
    /// Time up to which the active queries are labelled.
    cursor: u64,
    stack: Vec<MethodIdx>,
    /// The last syscalls entered (the evidence of a block names one).
    syscalls: VecDeque<(u32, SyscallInfo)>,
}

impl<'a> Labeller<'a> {
    /// A labeller of thread `tid`'s queries.
    pub(crate) fn new(trace: &'a Trace, queries: &'a Queries, tid: u32) -> Labeller<'a> {
        let queries = queries.by_thread.get(&tid).map_or(&[][..], |v| v.as_slice());
        Labeller {
            trace,
            queries,
            answers: queries.iter().map(|_| Answer::default()).collect(),
            active: Vec::new(),
            next: 0,
            cursor: 0,
            stack: Vec::new(),
            syscalls: VecDeque::new(),
        }
    }

    /// Labels the active queries up to `x` with the current method: call
    /// before the walk takes an event at `x`.
    #[inline]
    pub(crate) fn advance(&mut self, x: u64) {
        if self.active.is_empty() && self.queries.get(self.next).is_none_or(|q| q.start > x) {
            self.cursor = x;
            return;
        }
        while let Some(q) = self.queries.get(self.next).filter(|q| q.start <= x) {
            let _ = q;
            self.active.push(self.next);
            self.next += 1;
        }
        let top = self.stack.last().copied();
        let cursor = self.cursor;
        let (queries, answers) = (self.queries, &mut self.answers);
        self.active.retain(|&i| {
            let q = &queries[i];
            let (s, e) = (q.start.max(cursor), q.end.min(x));
            let a = &mut answers[i];
            if q.start == q.end {
                // A point: the method once every event before it was taken.
                if a.methods.is_empty() {
                    a.methods.push((top, 0));
                }
                return false;
            }
            if e > s {
                match a.methods.iter_mut().find(|m| m.0 == top) {
                    Some(m) => m.1 += e - s,
                    None => a.methods.push((top, e - s)),
                }
            }
            q.end > x
        });
        self.cursor = x;
    }

    /// Writes the answers into the paths.
    pub(crate) fn finish(mut self, paths: &mut [Path], strings: &mut Strings) {
        self.advance(u64::MAX);
        let answers = std::mem::take(&mut self.answers);
        for (q, a) in self.queries.iter().zip(answers) {
            let ev = a.evidence.map_or(0, |e| strings.get(e));
            match q.target {
                Target::Segment { path, seg } => {
                    let s = &mut paths[path as usize].segments[seg as usize];
                    s.evidence = ev;
                    s.method = a.methods.first().and_then(|m| m.0);
                    if a.methods.len() > 1 {
                        // Split later: indices must not move while answering.
                        paths[path as usize].pending_splits.push((seg, a.methods));
                    }
                }
                Target::Waiter { path, hop } => {
                    let h = &mut paths[path as usize].hops[hop as usize];
                    h.waiter_method = a.methods.first().and_then(|m| m.0);
                    h.evidence = ev;
                }
                Target::Blocker { path, hop } => {
                    paths[path as usize].hops[hop as usize].blocker_method = a.methods.first().and_then(|m| m.0);
                }
            }
        }
    }
}

/// Splits the CPU segments that ran several methods (see the module doc).
pub(crate) fn apply_splits(path: &mut Path) {
    if path.pending_splits.is_empty() {
        return;
    }
    let mut splits = std::mem::take(&mut path.pending_splits);
    splits.sort_by_key(|s| s.0);
    let old = std::mem::take(&mut path.segments);
    let mut out = Vec::with_capacity(old.len() + splits.len());
    let mut k = 0;
    for (i, s) in old.into_iter().enumerate() {
        if k < splits.len() && splits[k].0 as usize == i {
            let mut start = s.start;
            for &(m, ns) in &splits[k].1 {
                out.push(Segment {
                    start,
                    ns,
                    method: m,
                    evidence: 0,
                    ..s.clone()
                });
                start += ns;
            }
            k += 1;
        } else {
            out.push(s);
        }
    }
    path.segments = out;
}

impl Visitor for Labeller<'_> {
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, _depth: usize, m: MethodIdx) {
        self.stack.push(m);
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, _inv: &Invocation) {
        self.stack.truncate(depth);
    }
    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if self.syscalls.len() == 16 {
            self.syscalls.pop_front();
        }
        self.syscalls.push_back((idx, *sc));
    }
    fn off_cpu(&mut self, _t: &ThreadInfo, _depth: usize, iv: &OffCpuInterval) {
        // The off-CPU queries that begin inside this interval.
        let lo = self.queries.partition_point(|q| q.start < iv.start);
        let hi = self.queries.partition_point(|q| q.start < iv.end.max(iv.start + 1));
        if (lo..hi).all(|i| !self.queries[i].off) {
            return;
        }
        let text = match iv.evidence {
            Evidence::None | Evidence::Preempted => return,
            Evidence::Syscall(i) => match self.syscalls.iter().rev().find(|s| s.0 == i) {
                Some((_, sc)) => format!("in {}", describe_syscall(self.trace, sc)),
                None => "in a syscall".into(),
            },
            e => describe_evidence(self.trace, &e),
        };
        for i in lo..hi {
            if self.queries[i].off {
                self.answers[i].evidence = Some(text.clone());
            }
        }
    }
}

/// Strings shared by many segments (evidence texts), stored once.
#[derive(Debug)]
pub struct Strings {
    /// The strings; index 0 is "" (nothing said).
    pub list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            list: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    /// The index of `s`.
    pub fn get(&mut self, s: String) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.clone());
        self.index.insert(s, i);
        i
    }
}

//! `jtrace why`: the critical path of slow invocations, across threads and
//! processes, with JVM meaning (docs/WHY.md).
//!
//! [`explain`] reads a trace directory streamed, in memory bounded by the
//! budget, in two walks:
//!
//! 1. `record`: every thread's off-CPU intervals and contended monitor
//!    enters go into an `index` (spilled to a temporary file past a quarter
//!    of the budget), and the invocations asked about go to the `select`ion
//!    (the N slowest, those above a percentile, a sample near the median).
//! 2. `path` walks each chosen invocation back from its exit over the
//!    index (no events needed); `label` then walks only the threads the
//!    paths cross, to name each segment's method and evidence.
//!
//! `summary` aggregates the paths (by thread, method and state; slow
//! against median), `json` is the `jtrace.why.v1` document.

mod index;
pub mod json;
mod label;
pub mod path;
mod record;
pub mod select;
pub mod summary;

use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::options::StreamOptions;
use crate::report::glob_match;
use crate::stream;
use crate::walk::ThreadWalk;
pub use label::Strings;
pub use path::{Hop, Limits, Path, Segment, State, NO_HOP};
pub use select::{Candidate, Chosen, Selection};

/// What `jtrace why` is asked.
#[derive(Debug, Clone)]
pub struct WhyOptions {
    /// Methods (`Class.name` glob) whose invocations are explained.
    pub method: String,
    /// Only invocations on threads whose name (glob) or tid matches.
    pub thread: Option<String>,
    /// Which invocations.
    pub selection: Selection,
    /// At most this many invocations are explained (the slowest).
    pub max_invocations: usize,
    /// Also explain invocations near the median, as many as the slow ones
    /// (at most 100), for the slow-against-median comparison.
    pub compare: bool,
    /// Bounds of each walk.
    pub limits: Limits,
    /// Memory and temporary files.
    pub stream: StreamOptions,
}

impl Default for WhyOptions {
    fn default() -> Self {
        WhyOptions {
            method: "*".into(),
            thread: None,
            selection: Selection::Slowest(1),
            max_invocations: 1000,
            compare: false,
            limits: Limits::default(),
            stream: StreamOptions::default(),
        }
    }
}

/// One explained invocation.
#[derive(Debug, Clone)]
pub struct Explained {
    /// Its thread.
    pub tid: u32,
    /// Its method.
    pub method: MethodIdx,
    /// Entry (CLOCK_MONOTONIC ns).
    pub entry: u64,
    /// Wall ns.
    pub wall: u64,
    /// Its critical path.
    pub path: Path,
}

/// The answer of [`explain`].
#[derive(Debug)]
pub struct Why {
    /// The trace's tables (threads, methods, metadata; no events).
    pub trace: Trace,
    /// What was asked.
    pub options: WhyOptions,
    /// The chosen invocations, slowest first.
    pub invocations: Vec<Explained>,
    /// With `compare`: invocations near the median wall.
    pub median: Vec<Explained>,
    /// How many matched, the threshold, the median.
    pub chosen: Chosen,
    /// Evidence texts the segments and hops refer to.
    pub strings: Strings,
    /// Off-CPU intervals in the index, and whether it went to disk.
    pub intervals: u64,
    /// See `intervals`.
    pub index_spilled: bool,
}

impl Why {
    /// A thread's name to show (its Java name, else its comm, else its
    /// tid; `idle` for tid 0, the idle task).
    pub fn thread_name(&self, tid: u32) -> String {
        match self.trace.threads.get(&tid) {
            _ if tid == 0 => "idle".into(),
            Some(t) if !t.display_name().is_empty() => t.display_name().to_string(),
            _ => format!("tid {tid}"),
        }
    }

    /// A thread's process id (0 if unknown).
    pub fn pid_of(&self, tid: u32) -> u32 {
        match self.trace.threads.get(&tid) {
            Some(t) if t.tgid != 0 => t.tgid,
            Some(_) => self.trace.meta.pid,
            None => 0,
        }
    }

    /// `Class.name` of a method.
    pub fn method_name(&self, m: Option<MethodIdx>) -> Option<String> {
        m.and_then(|m| self.trace.methods.get(m as usize))
            .map(|m| m.qualified())
    }

    /// The time views count from: the trace's start, or its first event
    /// if earlier.
    pub fn origin(&self) -> u64 {
        let first = self
            .trace
            .threads
            .values()
            .filter(|t| t.first_ts > 0)
            .map(|t| t.first_ts)
            .min();
        match (self.trace.meta.start_monotonic_ns, first) {
            (0, Some(f)) => f,
            (s, Some(f)) => s.min(f),
            (s, None) => s,
        }
    }
}

fn thread_matches(pat: Option<&str>, t: &ThreadInfo) -> bool {
    pat.is_none_or(|p| glob_match(p, t.display_name()) || p == t.tid.to_string())
}

/// Explains the invocations of a trace directory `opts` asks about (see the
/// module doc). Fails if no traced method matches.
pub fn explain(dir: &std::path::Path, opts: &WhyOptions) -> anyhow::Result<Why> {
    let (trace, mut events) = stream::open(dir, &opts.stream)?;
    let wanted: Vec<bool> = trace
        .methods
        .iter()
        .map(|m| glob_match(&opts.method, &m.qualified()))
        .collect();
    if !wanted.contains(&true) {
        anyhow::bail!(
            "no traced method matches {:?} (the trace has {} traced methods; `jtrace report` lists them)",
            opts.method,
            trace.methods.len()
        );
    }
    let mut index = index::Index::new(opts.stream.memory_budget / 4, opts.stream.temp_dir.clone());
    let mut selector = select::Selector::new(opts.selection, opts.max_invocations);
    events.rewind()?;
    {
        let mut rec = record::Recorder::new(&mut index, &mut selector, &trace.threads, &wanted);
        for info in trace.threads.values() {
            rec.thread_wanted = thread_matches(opts.thread.as_deref(), info);
            let mut evs = events.thread(info)?;
            let mut walk = ThreadWalk::new(info, &mut rec);
            evs.for_each(|e, sc| {
                rec.raw(e);
                walk.event(e, sc, &mut rec);
            })?;
            walk.finish(&mut rec);
        }
        if let Some(e) = rec.error.take() {
            return Err(e);
        }
    }
    index.finish()?;
    let n_median = if opts.compare { 100 } else { 0 };
    let mut chosen = selector.finish(n_median);
    if opts.compare {
        chosen.median.truncate(chosen.slow.len().clamp(1, 100));
    }
    let explain_all = |cs: &[Candidate]| -> Vec<Explained> {
        cs.iter()
            .map(|c| Explained {
                tid: c.tid(),
                method: c.method,
                entry: c.entry(),
                wall: c.wall,
                path: path::critical_path(
                    &index,
                    &trace.threads,
                    opts.limits,
                    c.tid(),
                    c.entry(),
                    c.entry() + c.wall,
                ),
            })
            .collect()
    };
    let mut invocations = explain_all(&chosen.slow);
    let mut median = explain_all(&chosen.median);
    // Second walk: the methods and evidence of the threads the paths cross.
    let mut strings = Strings::default();
    let n_slow = invocations.len();
    let mut paths: Vec<Path> = invocations
        .iter_mut()
        .chain(median.iter_mut())
        .map(|e| std::mem::take(&mut e.path))
        .collect();
    let queries = label::Queries::of(&paths);
    events.rewind()?;
    for info in trace.threads.values().filter(|t| queries.wants(t.tid)) {
        let mut lab = label::Labeller::new(&trace, &queries, info.tid);
        let mut evs = events.thread(info)?;
        let mut walk = ThreadWalk::new(info, &mut lab);
        evs.for_each(|e, sc| {
            lab.advance(e.ts);
            walk.event(e, sc, &mut lab);
        })?;
        walk.finish(&mut lab);
        lab.finish(&mut paths, &mut strings);
    }
    for (e, mut p) in invocations.iter_mut().chain(median.iter_mut()).zip(paths) {
        label::apply_splits(&mut p);
        e.path = p;
    }
    debug_assert_eq!(invocations.len(), n_slow);
    Ok(Why {
        intervals: index.intervals(),
        index_spilled: index.spilled(),
        trace,
        options: opts.clone(),
        invocations,
        median,
        chosen,
        strings,
    })
}

//! The `jtrace.why.v1` document of `jtrace why --json` (docs/WHY.md):
//! field names are stable; fields may be added, never renamed.

use super::path::{Hop, Segment, State, NO_HOP};
use super::summary::{self, Row};
use super::{Explained, Selection, Why};
use crate::cause::Cause;
use serde::Serialize;

/// Schema name of the document.
pub const SCHEMA: &str = "jtrace.why.v1";

/// The whole document.
#[derive(Debug, Clone, Serialize)]
pub struct WhyJson {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The trace directory.
    pub trace: String,
    /// What was chosen and how.
    pub selection: SelectionJson,
    /// The explained invocations, slowest first.
    pub invocations: Vec<InvocationJson>,
    /// Critical-path time over all of them by (thread, method, state), largest first.
    pub summary: Vec<SummaryJson>,
    /// With `--compare`: slow against median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<CompareJson>,
}

/// How the invocations were chosen.
#[derive(Debug, Clone, Serialize)]
pub struct SelectionJson {
    /// The method glob.
    pub method: String,
    /// The thread filter, if any.
    pub thread: Option<String>,
    /// `slowest`, `percentile` or `all`.
    pub mode: &'static str,
    /// N of `--slowest`, P of `--percentile`.
    pub value: Option<f64>,
    /// Invocations that matched.
    pub matched: u64,
    /// Of those, at or above the threshold.
    pub eligible: u64,
    /// The percentile's wall threshold.
    pub threshold_ns: Option<u64>,
    /// Median wall of all matched.
    pub median_wall_ns: u64,
    /// Invocations explained (at most `--max-invocations`).
    pub explained: usize,
}

/// One explained invocation.
#[derive(Debug, Clone, Serialize)]
pub struct InvocationJson {
    /// Process of its thread.
    pub pid: u32,
    /// Its thread.
    pub tid: u32,
    /// Thread name.
    pub thread: String,
    /// `Class.name`.
    pub method: Option<String>,
    /// Entry, ns since the trace start.
    pub start_ns: u64,
    /// Wall ns; the path's `ns` sum to it.
    pub wall_ns: u64,
    /// A walk limit cut the path short: some of it is summed per state.
    pub truncated: bool,
    /// The (thread, method, state) with the most time on the path.
    pub root_cause: Option<SummaryJson>,
    /// The critical path in time order.
    pub path: Vec<SegmentJson>,
    /// The blocked stretches replaced by their blockers' doing.
    pub hops: Vec<HopJson>,
}

/// A thread on a path.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadRef {
    /// Its process.
    pub pid: u32,
    /// Its tid.
    pub tid: u32,
    /// Its name (`tid N` if the trace does not name it).
    pub thread: String,
}

/// One segment of a path.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentJson {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Thread name.
    pub thread: String,
    /// Innermost traced method of the thread then, `Class.name`.
    pub method: Option<String>,
    /// `cpu` or a cause.
    pub state: &'static str,
    /// Length.
    pub ns: u64,
    /// Start, ns since the trace start.
    pub start_ns: u64,
    /// Hops from the invocation's thread.
    pub depth: u16,
    /// Index in `hops` of the hop it explains (null: the invocation's own thread).
    pub hop: Option<u32>,
    /// What the thread was blocked in.
    pub evidence: Option<String>,
    /// Run queue: the thread that held the CPU.
    pub cpu_holder: Option<ThreadRef>,
}

/// A blocked stretch and the thread that explains it.
#[derive(Debug, Clone, Serialize)]
pub struct HopJson {
    /// The edge: `held_by` (monitor), `notified_by` (wait), `unparked_by`
    /// (park), `answered_by` (socket), `written_by` (pipe), `woken_by`.
    pub via: &'static str,
    /// The waiting thread's cause.
    pub cause: &'static str,
    /// The waiting thread.
    pub waiter: ThreadRef,
    /// Its method then.
    pub waiter_method: Option<String>,
    /// What it was blocked in.
    pub evidence: Option<String>,
    /// The thread it waited for.
    pub blocker: ThreadRef,
    /// That thread's method as it woke the waiter.
    pub blocker_method: Option<String>,
    /// Start, ns since the trace start.
    pub start_ns: u64,
    /// Length.
    pub ns: u64,
    /// Depth of the blocker's segments.
    pub depth: u16,
    /// The enclosing hop, if any.
    pub parent: Option<u32>,
}

/// Critical-path time of one (thread, method, state).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryJson {
    /// Thread name.
    pub thread: String,
    /// `Class.name`.
    pub method: Option<String>,
    /// `cpu` or a cause.
    pub state: &'static str,
    /// Nanoseconds.
    pub ns: u64,
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Share of the explained invocations' wall (0–1).
    pub share: f64,
}

/// Slow against median.
#[derive(Debug, Clone, Serialize)]
pub struct CompareJson {
    /// Slow invocations compared.
    pub slow_count: usize,
    /// Their mean wall.
    pub slow_wall_mean_ns: f64,
    /// Invocations near the median compared.
    pub median_count: usize,
    /// Their mean wall.
    pub median_wall_mean_ns: f64,
    /// By (thread name, method, state): mean ns per invocation in each
    /// group, the largest difference first.
    pub rows: Vec<CompareRowJson>,
}

/// One row of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRowJson {
    /// Thread name.
    pub thread: String,
    /// `Class.name`.
    pub method: Option<String>,
    /// `cpu` or a cause.
    pub state: &'static str,
    /// Mean ns per slow invocation.
    pub slow_ns: f64,
    /// Mean ns per median invocation.
    pub median_ns: f64,
    /// `slow_ns - median_ns`.
    pub difference_ns: f64,
}

/// The edge name of a hop from a waiter blocked for `cause`.
pub fn via(cause: Cause, evidence: &str) -> &'static str {
    match cause {
        Cause::Monitor => "held_by",
        Cause::Wait => "notified_by",
        Cause::Park => "unparked_by",
        Cause::Socket => "answered_by",
        _ if evidence.contains(": pipe") => "written_by",
        _ => "woken_by",
    }
}

impl Why {
    fn thread_ref(&self, tid: u32) -> ThreadRef {
        ThreadRef {
            pid: self.pid_of(tid),
            tid,
            thread: self.thread_name(tid),
        }
    }

    fn string(&self, i: u32) -> Option<String> {
        (i != 0).then(|| self.strings.list[i as usize].clone())
    }

    fn row_json(&self, r: &Row, total: u64) -> SummaryJson {
        SummaryJson {
            thread: self.thread_name(r.tid),
            method: self.method_name(r.method),
            state: r.state.name(),
            ns: r.ns,
            pid: self.pid_of(r.tid),
            tid: r.tid,
            share: if total == 0 { 0.0 } else { r.ns as f64 / total as f64 },
        }
    }

    fn segment_json(&self, s: &Segment, t0: u64) -> SegmentJson {
        SegmentJson {
            pid: self.pid_of(s.tid),
            tid: s.tid,
            thread: self.thread_name(s.tid),
            method: self.method_name(s.method),
            state: s.state.name(),
            ns: s.ns,
            start_ns: s.start.saturating_sub(t0),
            depth: s.depth,
            hop: (s.hop != NO_HOP).then_some(s.hop),
            evidence: self.string(s.evidence),
            cpu_holder: match (s.state, s.holder) {
                (State::Off(Cause::Runqueue | Cause::Carrier), Some(h)) => Some(self.thread_ref(h)),
                _ => None,
            },
        }
    }

    fn hop_json(&self, h: &Hop, t0: u64) -> HopJson {
        let evidence = self.string(h.evidence);
        HopJson {
            via: via(h.cause, evidence.as_deref().unwrap_or("")),
            cause: h.cause.name(),
            waiter: self.thread_ref(h.waiter),
            waiter_method: self.method_name(h.waiter_method),
            evidence,
            blocker: self.thread_ref(h.blocker),
            blocker_method: self.method_name(h.blocker_method),
            start_ns: h.start.saturating_sub(t0),
            ns: h.end - h.start,
            depth: h.depth,
            parent: (h.parent != NO_HOP).then_some(h.parent),
        }
    }

    fn invocation_json(&self, e: &Explained, t0: u64) -> InvocationJson {
        InvocationJson {
            pid: self.pid_of(e.tid),
            tid: e.tid,
            thread: self.thread_name(e.tid),
            method: self.method_name(Some(e.method)),
            start_ns: e.entry.saturating_sub(t0),
            wall_ns: e.wall,
            truncated: e.path.truncated,
            root_cause: summary::root_cause(&e.path).map(|r| self.row_json(&r, e.wall)),
            path: e.path.segments.iter().map(|s| self.segment_json(s, t0)).collect(),
            hops: e.path.hops.iter().map(|h| self.hop_json(h, t0)).collect(),
        }
    }

    /// The `jtrace.why.v1` document.
    pub fn to_json(&self) -> WhyJson {
        let t0 = self.origin();
        let total: u64 = self.invocations.iter().map(|e| e.wall).sum();
        let (mode, value) = match self.options.selection {
            Selection::Slowest(n) => ("slowest", Some(n as f64)),
            Selection::Percentile(p) => ("percentile", Some(p)),
            Selection::All => ("all", None),
        };
        let compare = self.options.compare.then(|| {
            let mean = |v: &[Explained]| {
                if v.is_empty() {
                    0.0
                } else {
                    v.iter().map(|e| e.wall as f64).sum::<f64>() / v.len() as f64
                }
            };
            let name = |tid| self.thread_name(tid);
            CompareJson {
                slow_count: self.invocations.len(),
                slow_wall_mean_ns: mean(&self.invocations),
                median_count: self.median.len(),
                median_wall_mean_ns: mean(&self.median),
                rows: summary::compare(&self.invocations, &self.median, &name)
                    .into_iter()
                    .map(|r| CompareRowJson {
                        thread: self.thread_name(r.key.tid),
                        method: self.method_name(r.key.method),
                        state: r.key.state.name(),
                        slow_ns: r.slow,
                        median_ns: r.median,
                        difference_ns: r.difference(),
                    })
                    .collect(),
            }
        });
        WhyJson {
            schema: SCHEMA,
            trace: self.trace.dir.display().to_string(),
            selection: SelectionJson {
                method: self.options.method.clone(),
                thread: self.options.thread.clone(),
                mode,
                value,
                matched: self.chosen.matched,
                eligible: self.chosen.eligible,
                threshold_ns: self.chosen.threshold,
                median_wall_ns: self.chosen.median_wall,
                explained: self.invocations.len(),
            },
            invocations: self.invocations.iter().map(|e| self.invocation_json(e, t0)).collect(),
            summary: summary::summarize(self.invocations.iter().map(|e| &e.path))
                .iter()
                .map(|r| self.row_json(r, total))
                .collect(),
            compare,
        }
    }
}

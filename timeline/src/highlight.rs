//! Critical paths the HTML timeline highlights across lanes (`jtrace
//! timeline --why METHOD`): each explained invocation's segments and hops,
//! as the page embeds them.

use jtrace_merge::why::{State, Why};
use serde::Serialize;

/// One critical path, times absolute (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone)]
pub struct HighlightPath {
    /// `WhyChain.a on chain-a [tid 12]: 103.4 ms`.
    pub label: String,
    /// The invocation's thread.
    pub tid: u32,
    /// Its entry.
    pub entry: u64,
    /// Its wall ns.
    pub wall: u64,
    /// Segments: (tid, start, ns, cause index, -1 CPU or -2 not covered, depth).
    pub segments: Vec<(u32, u64, u64, i32, u16)>,
    /// Hops: (waiter, blocker, start, end).
    pub hops: Vec<(u32, u32, u64, u64)>,
}

/// The paths of a `jtrace why` answer, slowest first.
pub fn highlight_paths(why: &Why) -> Vec<HighlightPath> {
    why.invocations
        .iter()
        .map(|e| HighlightPath {
            label: format!(
                "{} on {} [tid {}]: {}",
                why.method_name(Some(e.method)).unwrap_or_default(),
                why.thread_name(e.tid),
                e.tid,
                crate::why::dur(e.wall)
            ),
            tid: e.tid,
            entry: e.entry,
            wall: e.wall,
            segments: e
                .path
                .segments
                .iter()
                .map(|s| {
                    let state = match s.state {
                        State::Cpu => -1,
                        State::NotCovered => -2,
                        State::Off(c) => c as i32,
                    };
                    (s.tid, s.start, s.ns, state, s.depth)
                })
                .collect(),
            hops: e
                .path
                .hops
                .iter()
                .map(|h| (h.waiter, h.blocker, h.start, h.end))
                .collect(),
        })
        .collect()
}

/// A path as the page embeds it: times relative to the page's origin,
/// segments and hops column by column.
#[derive(Serialize)]
pub(crate) struct PathJson {
    label: String,
    tid: u32,
    s: u64,
    d: u64,
    /// Segments: tid, start, end, state (cause index, -1 CPU, -2 not covered), depth.
    seg: [Vec<i64>; 5],
    /// Hops: waiter, blocker, start, end.
    hop: [Vec<i64>; 4],
}

/// [`HighlightPath`]s for the page, relative to `t0`.
pub(crate) fn paths_json(paths: &[HighlightPath], t0: u64) -> Vec<PathJson> {
    let rel = |t: u64| t.saturating_sub(t0) as i64;
    paths
        .iter()
        .map(|p| {
            let mut seg: [Vec<i64>; 5] = Default::default();
            for &(tid, s, ns, state, depth) in &p.segments {
                seg[0].push(tid as i64);
                seg[1].push(rel(s));
                seg[2].push(rel(s + ns));
                seg[3].push(state as i64);
                seg[4].push(depth as i64);
            }
            let mut hop: [Vec<i64>; 4] = Default::default();
            for &(w, b, s, e) in &p.hops {
                hop[0].push(w as i64);
                hop[1].push(b as i64);
                hop[2].push(rel(s));
                hop[3].push(rel(e));
            }
            PathJson {
                label: p.label.clone(),
                tid: p.tid,
                s: rel(p.entry) as u64,
                d: p.wall,
                seg,
                hop,
            }
        })
        .collect()
}

//! `jtrace flame`: one self-contained HTML page (no network) with a flame
//! graph of a trace's off-CPU time by cause and its CPU samples, or the
//! difference of two traces.
//!
//! The page is built from exactly what the collapsed export writes
//! ([`fold_streaming`]): the folded stacks become one tree of frames, sent
//! in preorder as columns (parent, name, and each node's own time by cause,
//! with who ended the waits under it), so its totals per cause are the
//! collapsed export's to the nanosecond. The viewer (`assets/flame/*.js`)
//! sums the tree, draws it on a canvas and offers search, zoom, the
//! inverted (callers) view and one graph per cause.

use crate::collapsed::{fold_streaming, CollapsedOptions, Folded, NO_METHOD_FRAME, SCALED_FRAME};
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{Cause, Trace, N_CAUSES};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

const TEMPLATE: &str = include_str!("assets/flame.html");
const CSS: &str = include_str!("assets/flame.css");
/// The viewer's parts, in the order they run (one function scope).
const VIEWER: [&str; 5] = [
    include_str!("assets/flame/tree.js"),
    include_str!("assets/flame/draw.js"),
    include_str!("assets/flame/report.js"),
    include_str!("assets/flame/input.js"),
    include_str!("assets/flame/api.js"),
];

/// Index of CPU samples among the page's causes (after [`Cause::ALL`]).
const CPU: usize = N_CAUSES;

/// What the page shows besides the graph.
#[derive(Debug, Clone, Default)]
pub struct FlameOptions {
    /// Page title (default: the traced command).
    pub title: Option<String>,
    /// What was selected (`--thread`, `--window`, …), said on the page.
    pub selection: Vec<String>,
    /// Only stacks with a frame whose `Class.method` (or native name)
    /// matches this glob; the whole stacks are kept.
    pub method: Option<String>,
    /// Only this cause (a [`Cause`] name, or `cpu`).
    pub cause: Option<String>,
    /// `jtrace report --html`: the report (jtrace.report.v1) whose tables
    /// the page shows above the graph.
    pub report: Option<serde_json::Value>,
    /// Rows of the report's tables.
    pub report_top: usize,
}

/// A frame's name without async-profiler's kind suffix or a source line.
fn bare_frame(f: &str) -> &str {
    let f = f.rsplit_once(" (").map_or(f, |(name, _)| name);
    match f.len().checked_sub(4) {
        Some(at) if f.is_char_boundary(at) && f[at..].starts_with("_[") && f.ends_with(']') => &f[..at],
        _ => f,
    }
}

/// Keeps the folded stacks `opts` selects (`method`, `cause`).
fn select(folded: &mut Folded, opts: &FlameOptions) {
    let keep = |key: &str| {
        let mut parts = key.split(';');
        let cause = parts.next().unwrap_or_default();
        opts.cause.as_deref().is_none_or(|c| c == cause)
            && (opts.method.as_deref()).is_none_or(|m| parts.any(|f| jtrace_merge::glob_match(m, bare_frame(f))))
    };
    folded.stacks.retain(|k, _| keep(k));
    folded.wakers.retain(|k, _| keep(k));
}

/// The frames of one or two folded profiles as a tree, in preorder.
#[derive(Default)]
struct Tree {
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    /// Per node: parent (`u32::MAX` for the root) and name.
    parent: Vec<u32>,
    name: Vec<u32>,
    children: HashMap<(u32, u32), u32>,
    /// Own time per node: (page cause index, ns), of each profile.
    own: [Vec<Vec<(u8, u64)>>; 2],
    /// Who ended the waits under each node (its own time's).
    wakers: HashMap<u32, BTreeMap<u32, u64>>,
}

impl Tree {
    fn new() -> Tree {
        let mut t = Tree::default();
        t.node(u32::MAX, "all");
        t
    }

    fn node(&mut self, parent: u32, name: &str) -> u32 {
        let id = match self.name_ids.get(name) {
            Some(&id) => id,
            None => {
                self.names.push(name.to_string());
                self.name_ids.insert(name.to_string(), self.names.len() as u32 - 1);
                self.names.len() as u32 - 1
            }
        };
        if let Some(&n) = self.children.get(&(parent, id)) {
            return n;
        }
        let n = self.parent.len() as u32;
        self.parent.push(parent);
        self.name.push(id);
        self.own[0].push(Vec::new());
        self.own[1].push(Vec::new());
        if parent != u32::MAX {
            self.children.insert((parent, id), n);
        }
        n
    }

    /// Adds the folded stacks of profile `which` (0 or 1); returns each
    /// folded stack's leaf node.
    fn add(&mut self, which: usize, folded: &BTreeMap<String, u64>) -> HashMap<String, u32> {
        let mut leaves = HashMap::new();
        for (key, &ns) in folded {
            let mut parts = key.split(';');
            let Some(cause) = parts.next().and_then(page_cause) else {
                continue;
            };
            let mut n = 0;
            for f in parts {
                n = self.node(n, f);
            }
            let own = &mut self.own[which][n as usize];
            match own.iter_mut().find(|(c, _)| *c == cause) {
                Some((_, v)) => *v += ns,
                None => own.push((cause, ns)),
            }
            leaves.insert(key.clone(), n);
        }
        leaves
    }

    /// The nodes in preorder, children by name: the old index of each.
    fn preorder(&self) -> Vec<u32> {
        let mut kids: Vec<Vec<u32>> = vec![Vec::new(); self.parent.len()];
        for (n, &p) in self.parent.iter().enumerate().skip(1) {
            kids[p as usize].push(n as u32);
        }
        for k in &mut kids {
            k.sort_by(|a, b| {
                self.names[self.name[*a as usize] as usize].cmp(&self.names[self.name[*b as usize] as usize])
            });
        }
        let mut order = Vec::with_capacity(self.parent.len());
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            order.push(n);
            stack.extend(kids[n as usize].iter().rev());
        }
        order
    }
}

/// The page cause index of a folded stack's first frame.
fn page_cause(name: &str) -> Option<u8> {
    if name == "cpu" {
        return Some(CPU as u8);
    }
    Cause::from_name(name).map(|c| c as u8)
}

/// The page's data.
#[derive(Serialize)]
struct Page {
    title: String,
    /// Cause names by page index ([`Cause::ALL`], then `cpu`).
    causes: Vec<&'static str>,
    /// The CPU sampling period, ns (0: no samples).
    period_ns: u64,
    /// Two profiles: before (`u`) and after (`v`).
    diff: bool,
    /// Names of the profiles (the traces' commands), one or two.
    profiles: Vec<String>,
    selection: Vec<String>,
    notes: Vec<String>,
    names: Vec<String>,
    /// Preorder: parent of each node (-1 for the root).
    p: Vec<i64>,
    /// Name index of each node.
    n: Vec<u32>,
    /// Own time of each node: `[cause, ns, …]` or 0 (the after profile
    /// when `diff`).
    v: Vec<serde_json::Value>,
    /// The before profile's own time (only when `diff`).
    u: Vec<serde_json::Value>,
    /// Wakers: `[node, [waker, ns, …]]` for the nodes that have any.
    w: Vec<(u32, Vec<u64>)>,
    /// Waker names.
    wn: Vec<String>,
    /// Frames that stand for time, not code.
    scaled_frame: &'static str,
    no_method_frame: &'static str,
    /// The report whose tables head the page (`report --html`).
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<serde_json::Value>,
    report_top: usize,
    /// The report's `--cause`, its methods sorted by it.
    report_cause: Option<String>,
}

fn sparse(own: &[(u8, u64)]) -> serde_json::Value {
    if own.is_empty() {
        return serde_json::Value::from(0);
    }
    let mut o = own.to_vec();
    o.sort();
    serde_json::Value::from(o.iter().flat_map(|&(c, ns)| [u64::from(c), ns]).collect::<Vec<_>>())
}

/// Folding options for the flame graph: off-CPU time everywhere (traced
/// methods or not) and the CPU samples, with `base`'s selection.
pub fn flame_fold_options(base: &CollapsedOptions) -> CollapsedOptions {
    CollapsedOptions {
        all: true,
        cpu: true,
        ..base.clone()
    }
}

/// What the page says about a trace beside its graph.
fn notes(trace: &Trace, folded: &Folded) -> Vec<String> {
    let mut notes = Vec::new();
    let hz = trace.meta.cpu_sample_hz;
    if hz == 0 {
        notes
            .push("no CPU samples were recorded (--no-stacks or --cpu-samples 0): CPU time is not in the graph".into());
    }
    if folded.stacks.keys().any(|k| k.ends_with(SCALED_FRAME)) {
        notes.push(format!(
            "{SCALED_FRAME}: short blocks without a stack of their own, spread over the stacks their thread's \
             sampled short blocks had (--stack-min-block)"
        ));
    }
    if trace.stacks.pairs.is_empty() {
        notes.push("no stacks were recorded: off-CPU time is under the traced methods only".into());
    }
    if folded.idle_ns > 0 || folded.tracer_ns > 0 {
        notes.push(format!(
            "working time only: {:.1} ms of threads waiting for work (the idle rules of docs/REPORT.md) and \
             {:.1} ms of jtrace's own threads are left out (--all shows them)",
            folded.idle_ns as f64 / 1e6,
            folded.tracer_ns as f64 / 1e6
        ));
    }
    notes
}

fn period(trace: &Trace) -> u64 {
    match trace.meta.cpu_sample_hz {
        0 => 0,
        hz => 1_000_000_000 / u64::from(hz),
    }
}

fn command(trace: &Trace) -> String {
    trace.meta.command.join(" ")
}

/// Writes the flame graph page of the trace directory `dir`, folded with
/// `fold` (see [`flame_fold_options`]) and streamed within `stream`.
pub fn write_flame(
    dir: &Path,
    fold: &CollapsedOptions,
    stream: &StreamOptions,
    opts: &FlameOptions,
    out: impl Write,
) -> anyhow::Result<()> {
    let (trace, mut folded) = fold_streaming(dir, fold, true, stream)?;
    select(&mut folded, opts);
    let opts = FlameOptions {
        title: Some((opts.title.clone()).unwrap_or_else(|| format!("jtrace flame: {}", command(&trace)))),
        ..opts.clone()
    };
    let notes = notes(&trace, &folded);
    write_flame_folded(folded, period(&trace), &command(&trace), notes, &opts, out)?;
    Ok(())
}

/// Writes the flame graph page of folded stacks (what [`fold_streaming`]
/// returns), CPU samples `period_ns` apart, of the command `command`,
/// with `notes` said on the page.
pub fn write_flame_folded(
    folded: Folded,
    period_ns: u64,
    command: &str,
    notes: Vec<String>,
    opts: &FlameOptions,
    out: impl Write,
) -> io::Result<()> {
    let mut tree = Tree::new();
    let leaves = tree.add(1, &folded.stacks);
    for (key, wakers) in &folded.wakers {
        if let Some(&leaf) = leaves.get(key) {
            let m = tree.wakers.entry(leaf).or_default();
            for (&w, &ns) in wakers {
                *m.entry(w).or_default() += ns;
            }
        }
    }
    let title = (opts.title.clone()).unwrap_or_else(|| format!("jtrace flame: {command}"));
    let page = page(
        &tree,
        title,
        period_ns,
        false,
        vec![command.to_string()],
        opts,
        notes,
        folded.waker_names,
    );
    write_page(&page, out)
}

/// Writes the differential flame graph page of two trace directories:
/// widths are the after trace's time, colours the change from before.
pub fn write_flame_diff(
    before: &Path,
    after: &Path,
    fold: &CollapsedOptions,
    stream: &StreamOptions,
    opts: &FlameOptions,
    out: impl Write,
) -> anyhow::Result<()> {
    let (tb, mut fb) = fold_streaming(before, fold, false, stream)?;
    let (ta, mut fa) = fold_streaming(after, fold, true, stream)?;
    select(&mut fb, opts);
    select(&mut fa, opts);
    let mut tree = Tree::new();
    tree.add(0, &fb.stacks);
    let leaves = tree.add(1, &fa.stacks);
    for (key, wakers) in &fa.wakers {
        if let Some(&leaf) = leaves.get(key) {
            tree.wakers.insert(leaf, wakers.clone());
        }
    }
    let mut notes: Vec<String> = notes(&ta, &fa).into_iter().map(|n| format!("after: {n}")).collect();
    notes.extend(self::notes(&tb, &fb).into_iter().map(|n| format!("before: {n}")));
    if period(&tb) != period(&ta) {
        notes.push(format!(
            "the traces sampled CPU at different rates ({} and {} Hz): CPU time is compared as samples × period",
            tb.meta.cpu_sample_hz, ta.meta.cpu_sample_hz
        ));
    }
    let title = (opts.title.clone()).unwrap_or_else(|| format!("jtrace flame diff: {}", command(&ta)));
    let page = page(
        &tree,
        title,
        period(&ta),
        true,
        vec![command(&tb), command(&ta)],
        opts,
        notes,
        fa.waker_names,
    );
    write_page(&page, out)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn page(
    tree: &Tree,
    title: String,
    period_ns: u64,
    diff: bool,
    profiles: Vec<String>,
    opts: &FlameOptions,
    notes: Vec<String>,
    waker_names: Vec<String>,
) -> Page {
    let order = tree.preorder();
    let mut new_of = vec![0u32; order.len()];
    for (i, &old) in order.iter().enumerate() {
        new_of[old as usize] = i as u32;
    }
    let parent = |old: u32| match tree.parent[old as usize] {
        u32::MAX => -1,
        p => i64::from(new_of[p as usize]),
    };
    let mut w: Vec<(u32, Vec<u64>)> = (tree.wakers.iter())
        .map(|(&n, m)| {
            (
                new_of[n as usize],
                m.iter().flat_map(|(&k, &ns)| [u64::from(k), ns]).collect(),
            )
        })
        .collect();
    w.sort();
    let mut causes: Vec<&'static str> = Cause::ALL.iter().map(|c| c.name()).collect();
    causes.push("cpu");
    Page {
        title,
        causes,
        period_ns,
        diff,
        profiles,
        selection: opts.selection.clone(),
        notes,
        names: tree.names.clone(),
        p: order.iter().map(|&o| parent(o)).collect(),
        n: order.iter().map(|&o| tree.name[o as usize]).collect(),
        v: order.iter().map(|&o| sparse(&tree.own[1][o as usize])).collect(),
        u: if diff {
            order.iter().map(|&o| sparse(&tree.own[0][o as usize])).collect()
        } else {
            Vec::new()
        },
        w,
        wn: waker_names,
        scaled_frame: SCALED_FRAME,
        no_method_frame: NO_METHOD_FRAME,
        report: opts.report.clone(),
        report_top: opts.report_top,
        report_cause: opts.cause.clone(),
    }
}

fn write_page(page: &Page, out: impl Write) -> io::Result<()> {
    let page_template = crate::page::PageTemplate {
        template: TEMPLATE,
        css: CSS,
        viewer: &VIEWER,
    };
    page_template.write(&page.title, &serde_json::to_string(page)?, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_stacks_become_one_tree_in_preorder_with_their_causes() {
        let mut folded = BTreeMap::new();
        folded.insert("sleep;A.main;B.run".to_string(), 30);
        folded.insert("cpu;A.main;B.run".to_string(), 20);
        folded.insert("sleep;A.main".to_string(), 5);
        folded.insert("monitor;A.main;C.lock".to_string(), 7);
        folded.insert("nonsense;X".to_string(), 1);
        let mut tree = Tree::new();
        tree.add(1, &folded);
        let page = page(
            &tree,
            "t".into(),
            0,
            false,
            vec![],
            &FlameOptions::default(),
            vec![],
            vec![],
        );
        let names: Vec<&str> = page.n.iter().map(|&i| page.names[i as usize].as_str()).collect();
        // Root, then A.main, its children by name.
        assert_eq!(names, ["all", "A.main", "B.run", "C.lock"]);
        assert_eq!(page.p, [-1, 0, 1, 1]);
        let sleep = Cause::Sleep as u64;
        assert_eq!(page.v[1], serde_json::json!([sleep, 5]));
        assert_eq!(page.v[2], serde_json::json!([sleep, 30, CPU as u64, 20]));
        assert_eq!(page.v[3], serde_json::json!([Cause::Monitor as u64, 7]));
        assert_eq!(page.v[0], serde_json::json!(0));
    }

    #[test]
    fn frames_are_matched_without_their_kind_or_line() {
        assert_eq!(bare_frame("A.run_[j]"), "A.run");
        assert_eq!(bare_frame("read_[k]"), "read");
        assert_eq!(
            bare_frame("Java_sun_nio_ch_Net_poll (net.c:12)"),
            "Java_sun_nio_ch_Net_poll"
        );
        assert_eq!(bare_frame("A.run"), "A.run");
        let mut f = Folded::default();
        f.stacks.insert("sleep;A.main_[j];B.nap_[j];sleep_[k]".into(), 5);
        f.stacks.insert("cpu;A.main_[j];C.spin_[j]".into(), 7);
        let opts = FlameOptions {
            method: Some("B.*".into()),
            ..Default::default()
        };
        select(&mut f, &opts);
        assert_eq!(
            f.stacks.keys().collect::<Vec<_>>(),
            ["sleep;A.main_[j];B.nap_[j];sleep_[k]"]
        );
    }
}

//! `jtrace timeline`: one self-contained HTML file (no network) with a
//! per-thread timeline: thread state coloured by off-CPU cause, the method
//! spans under it flame-chart style, zoom/pan, details, search and filter.
//!
//! The page embeds the trace as JSON (columnar arrays per thread, times in ns
//! relative to the trace start, each off-CPU interval's causes already laid
//! out in time by `segments.rs`) and draws it on a canvas with
//! level-of-detail merging, so it stays interactive with millions of events.
//! The viewer is `assets/viewer/*.js`, inlined in order into one script.
//!
//! Headless Chromium (PNG shots of a page) is `chromium.rs`; its items are
//! re-exported here, where the CLI has always found them.

use crate::highlight::{paths_json, HighlightPath, PathJson};
use crate::model::{thread_order, time_origin, ThreadData, View};
use crate::page::PageTemplate;
use crate::process::pid_of;
use crate::segments::{layout_order, window_segments};
use crate::windows::{window_name, WindowIndex};
use jtrace_merge::{describe_evidence, Cause, Evidence, Frame, FrameKind, OffCpu, Symbolizer, Trace};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Write};

pub use crate::chromium::{chromium_flags, find_chromium, parse_window, screenshot, screenshot_window};

const TEMPLATE: &str = include_str!("assets/timeline.html");
const CSS: &str = include_str!("assets/timeline.css");
/// The viewer's parts, by job, in the order they run (they share one
/// function scope: the template wraps them in one function).
const VIEWER: [&str; 6] = [
    include_str!("assets/viewer/data.js"),
    include_str!("assets/viewer/draw.js"),
    include_str!("assets/viewer/details.js"),
    include_str!("assets/viewer/input.js"),
    include_str!("assets/viewer/flame.js"),
    include_str!("assets/viewer/api.js"),
];

/// Options of the HTML timeline.
#[derive(Debug, Clone, Default)]
pub struct HtmlOptions {
    /// Page title; defaults to the traced command.
    pub title: Option<String>,
    /// Critical paths to highlight across lanes (`--why`), slowest first.
    pub paths: Vec<HighlightPath>,
    /// Stack tooltips: native frames with their source line (DWARF), the
    /// functions inlined there as frames of their own.
    pub lines: bool,
}

/// Sparse off-CPU split: `[cause index, ns, cause index, ns, …]`, or `0` when
/// nothing was off CPU (most spans), to keep the page small.
fn sparse(o: &OffCpu) -> serde_json::Value {
    if o.total() == 0 {
        return serde_json::Value::from(0);
    }
    let mut v = Vec::new();
    for (c, ns) in o.nonzero() {
        v.push(c as u64);
        v.push(ns);
    }
    serde_json::Value::from(v)
}

/// Segments `(start, end, cause)` that tile an interval from its start
/// (as `segments.rs` lays them out), as `[cause index, ns, …]`.
fn pieces(segs: &[(u64, u64, Cause)]) -> Vec<u64> {
    let mut v = Vec::with_capacity(2 * segs.len());
    for (i, &(s, e, c)) in segs.iter().enumerate() {
        debug_assert!(i == 0 || segs[i - 1].1 == s, "segments leave a gap: {segs:?}");
        v.push(c as u64);
        v.push(e - s);
    }
    v
}

/// Method spans of one thread, column by column (same index = same span).
#[derive(Serialize, Default)]
struct Spans {
    /// Entry, ns since the trace start.
    s: Vec<u64>,
    /// Wall ns.
    d: Vec<u64>,
    /// Depth.
    z: Vec<u32>,
    /// Method index.
    m: Vec<u32>,
    /// CPU ns.
    c: Vec<u64>,
    /// Voluntary switches.
    v: Vec<u64>,
    /// Involuntary switches.
    i: Vec<u64>,
    /// Flags: 1 exception, 2 unfinished, 4 recursive (not outermost).
    f: Vec<u8>,
    /// Off-CPU split (see [`sparse`]).
    o: Vec<serde_json::Value>,
}

/// Off-CPU intervals of one thread, column by column.
#[derive(Serialize, Default)]
struct Offs {
    /// Switch-out, ns since the trace start.
    s: Vec<u64>,
    /// Switch-in.
    e: Vec<u64>,
    /// 1 preempted (involuntary), 0 blocked, 2 never switched back in,
    /// 3 steal (no switch: its vCPU ran another guest).
    p: Vec<u8>,
    /// Waker tid, or -1.
    w: Vec<i64>,
    /// Wakeup time, ns since the trace start (0 if none).
    wt: Vec<u64>,
    /// Split by cause, as pieces laid out in time from the switch-out (see
    /// [`pieces`]): one per cause, the blocked causes first, `runqueue`
    /// last ([`layout_order`]); `0` when nothing was off CPU.
    k: Vec<serde_json::Value>,
    /// The intervals with a GC/safepoint part placed at its JVM's windows
    /// ([`window_segments`]), few: `(index, pieces)`, the pieces in time
    /// order (a cause can come back after a window cut it).
    g: Vec<(u32, Vec<u64>)>,
    /// Evidence text, as an index into [`PageJson::strings`] (0 = none).
    x: Vec<u32>,
    /// The stack at the switch-out ([`stack_text`]), as an index into
    /// [`PageJson::strings`] (0 = none recorded).
    t: Vec<u32>,
    /// The same stack whole, as an index into [`PageJson::stacks`] (-1 =
    /// none recorded): the view's flame graph folds it.
    q: Vec<i32>,
}

/// Frames of a stack shown in a tooltip, innermost first.
const TIP_FRAMES: usize = 12;

/// A stack as the tooltip shows it, one frame a line: its user frames
/// (native and Java, innermost first, at most [`TIP_FRAMES`]), then how
/// many kernel frames it has (`export --format collapsed` has them all).
fn stack_text(frames: &[Frame]) -> String {
    let kernel = frames.iter().filter(|f| f.kind == FrameKind::Kernel).count();
    let user: Vec<&Frame> = frames.iter().filter(|f| f.kind != FrameKind::Kernel).collect();
    let mut lines: Vec<String> = user.iter().take(TIP_FRAMES).map(|f| f.name_with_line()).collect();
    if user.len() > TIP_FRAMES {
        lines.push(format!("… {} more", user.len() - TIP_FRAMES));
    }
    if kernel > 0 {
        lines.push(format!("+ {kernel} kernel frames"));
    }
    lines.join("\n")
}

/// The page's stack texts, named once per stack, and the stacks whole
/// (frames root first, as the collapsed export names them).
struct StackTexts<'t> {
    symbols: Option<Symbolizer<'t>>,
    by_pair: HashMap<u32, u32>,
    whole: HashMap<u32, i32>,
    stacks: Vec<Vec<u32>>,
    frames: Interner,
}

impl<'t> StackTexts<'t> {
    fn new(trace: &'t Trace, lines: bool) -> Self {
        let symbols = |trace| {
            let s = Symbolizer::new(trace);
            if lines {
                s.with_lines()
            } else {
                s
            }
        };
        StackTexts {
            symbols: (!trace.stacks.is_empty()).then(|| symbols(trace)),
            by_pair: HashMap::new(),
            whole: HashMap::new(),
            stacks: Vec::new(),
            frames: Interner::new(),
        }
    }

    /// The index in the page's stacks of stack pair `pair` (-1: none).
    fn whole(&mut self, pair: Option<u32>) -> i32 {
        let (Some(pair), Some(symbols)) = (pair, &self.symbols) else {
            return -1;
        };
        if let Some(&i) = self.whole.get(&pair) {
            return i;
        }
        let frames = symbols
            .frames(pair)
            .iter()
            .rev()
            .map(|f| self.frames.get(f.name_with_line()))
            .collect();
        self.stacks.push(frames);
        let i = self.stacks.len() as i32 - 1;
        self.whole.insert(pair, i);
        i
    }

    /// The index in `strings` of the text of stack pair `pair` (0: none).
    fn get(&mut self, pair: Option<u32>, strings: &mut Interner) -> u32 {
        let (Some(pair), Some(symbols)) = (pair, &self.symbols) else {
            return 0;
        };
        *self
            .by_pair
            .entry(pair)
            .or_insert_with(|| strings.get(stack_text(&symbols.frames(pair))))
    }
}

/// Strings shared by many items (evidence texts), stored once in the page.
struct Interner {
    strings: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    fn new() -> Interner {
        Interner {
            strings: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
    fn get(&mut self, s: String) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.clone());
        self.index.insert(s, i);
        i
    }
}

/// A GC or safepoint window, drawn across every lane.
#[derive(Serialize)]
struct WindowJson {
    /// Cause index (into [`PageJson::causes`]).
    c: usize,
    /// "GC" or "safepoint".
    kind: &'static str,
    /// Number among the JVM's windows of that kind.
    n: u32,
    pid: u32,
    /// Begin and end, ns since the trace start.
    s: u64,
    e: u64,
    /// No end was recorded: the window runs to the JVM's last event.
    open: bool,
}

#[derive(Serialize)]
struct ThreadJson {
    tid: u32,
    pid: u32,
    name: String,
    comm: String,
    /// 0 application, 1 JVM (Java, group system), 2 native.
    kind: u8,
    group: String,
    daemon: bool,
    first: u64,
    last: u64,
    /// From here to `last`, no kernel data covers the thread (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    ucov: Option<u64>,
    wall: u64,
    cpu: u64,
    off: Vec<u64>,
    vol: u64,
    invol: u64,
    anomalies: u64,
    /// A virtual thread's Java id (absent for kernel threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    vid: Option<u64>,
    /// The carrier a virtual thread ran on most (absent for kernel threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    carrier: Option<u32>,
    /// Its tid in its JVM's pid namespace (absent in the initial one).
    #[serde(skip_serializing_if = "Option::is_none")]
    nstid: Option<u32>,
    /// Not paired with a kernel thread (absent: paired).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unmatched: bool,
    spans: Spans,
    offs: Offs,
}

#[derive(Serialize)]
struct PageJson {
    title: String,
    command: String,
    pid: u32,
    /// CLOCK_MONOTONIC of time 0, as a string (it may exceed 2^53).
    t0: String,
    /// CLOCK_REALTIME at the trace start, as a string.
    realtime: String,
    start_date: String,
    duration: u64,
    complete: bool,
    causes: Vec<&'static str>,
    /// `[class, name, signature]` by method index.
    methods: Vec<[String; 3]>,
    lost_kernel: u64,
    lost_jvm: u64,
    problems: Vec<String>,
    events: u64,
    /// Interned strings (evidence texts), referenced by index.
    strings: Vec<String>,
    /// Recorded stacks whole: frame indices into `frames`, root first.
    stacks: Vec<Vec<u32>>,
    /// Frame names of `stacks` (index 0 unused).
    frames: Vec<String>,
    /// JVM-wide stops, by start.
    windows: Vec<WindowJson>,
    /// The processes of the threads, in lane order (lanes are grouped by
    /// process when there are several).
    processes: Vec<ProcessJson>,
    threads: Vec<ThreadJson>,
    /// Critical paths to highlight (`jtrace timeline --why`).
    paths: Vec<PathJson>,
    /// A scoped page: the time window drawn (ns since the trace start),
    /// where the viewer opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<[u64; 2]>,
}

/// A process of the trace, as the lanes' group headers name it.
#[derive(Serialize)]
struct ProcessJson {
    pid: u32,
    /// Its main thread's comm (the traced command's for the root process).
    command: String,
    /// An agent recorded it.
    jvm: bool,
    /// The container its cgroup names (`podman container d90a9823fe01`),
    /// absent if none: lanes are grouped by container, then process.
    #[serde(skip_serializing_if = "String::is_empty")]
    container: String,
}

/// The processes of `threads` (root process first, then by pid) and the
/// lane order: by process, then [`thread_order`] within each.
fn process_order(trace: &Trace, threads: &[ThreadData]) -> (Vec<ProcessJson>, Vec<usize>) {
    let root = trace.meta.pid;
    let mut order = thread_order(threads);
    let pid = |i: usize| pid_of(trace, &threads[i].info);
    let containers: std::collections::HashMap<u32, String> = (trace.meta.process_cgroups.iter())
        .map(|p| {
            let c = jtrace_merge::report::container_id::describe(&p.cgroup);
            (p.pid, c.trim_start_matches(" (").trim_end_matches(')').to_string())
        })
        .collect();
    let container = |p: u32| containers.get(&p).cloned().unwrap_or_default();
    // Stable: thread_order's order within a process. Containers first, each
    // together; the root process first among the rest.
    order.sort_by_key(|&i| (container(pid(i)).is_empty(), container(pid(i)), pid(i) != root, pid(i)));
    let mut processes: Vec<ProcessJson> = Vec::new();
    for &i in &order {
        let p = pid(i);
        if processes.last().is_some_and(|q| q.pid == p) {
            continue;
        }
        let main = trace.threads.get(&p).map(|t| t.comm.clone()).filter(|c| !c.is_empty());
        let command = match main {
            _ if p == root && !trace.meta.command.is_empty() => trace.meta.command.join(" "),
            Some(c) => c,
            None => threads[i].info.comm.clone(),
        };
        processes.push(ProcessJson {
            pid: p,
            command,
            jvm: trace.jvm_pids.contains(&p),
            container: container(p),
        });
    }
    (processes, order)
}

/// The page's record of one thread, times relative to `t0`; `windows` are
/// the trace's JVM windows (indexed), where the GC/safepoint parts of its
/// intervals go.
#[allow(clippy::too_many_arguments)]
fn thread_json(
    trace: &Trace,
    strings: &mut Interner,
    stacks: &mut StackTexts,
    t: &ThreadData,
    windows: &WindowIndex,
    pid: u32,
    t0: u64,
    (from, to): (u64, u64),
) -> ThreadJson {
    let rel = |ts: u64| ts.saturating_sub(t0);
    let mut spans = Spans::default();
    for s in &t.spans {
        let b = &s.inv.breakdown;
        spans.s.push(rel(s.inv.entry));
        spans.d.push(b.wall);
        spans.z.push(s.depth as u32);
        spans.m.push(s.inv.method);
        spans.c.push(b.cpu);
        spans.v.push(b.voluntary);
        spans.i.push(b.involuntary);
        spans
            .f
            .push(s.inv.exception as u8 | (s.inv.unfinished as u8) << 1 | (!s.inv.outermost as u8) << 2);
        spans.o.push(sparse(&b.off));
    }
    let mut offs = Offs::default();
    for (j, o) in t.offs.iter().enumerate() {
        offs.s.push(rel(o.start));
        offs.e.push(rel(o.end));
        offs.p.push(if o.open {
            2
        } else if o.evidence == Evidence::Steal {
            3
        } else {
            o.preempted as u8
        });
        offs.w.push(o.wake.map_or(-1, |w| w.waker_tid as i64));
        offs.wt.push(o.wake.map_or(0, |w| rel(w.ts)));
        offs.k.push(if o.split.off.total() == 0 {
            serde_json::Value::from(0)
        } else {
            layout_order(&o.split.off).flat_map(|(c, ns)| [c as u64, ns]).collect()
        });
        if let Some(placed) = window_segments(o, windows.ending_after(o.start), pid) {
            offs.g.push((j as u32, pieces(&placed)));
        }
        offs.x.push(match o.evidence {
            // The page says "preempted" from `p` already.
            Evidence::None | Evidence::Preempted => 0,
            e => strings.get(describe_evidence(trace, &e)),
        });
        offs.t.push(stacks.get(o.stack, strings));
        offs.q.push(stacks.whole(o.stack));
    }
    let b = &t.totals.breakdown;
    // A scoped page draws the thread's state within its window only.
    let (first, last) = (t.info.first_ts.max(from), t.info.last_ts.min(to));
    ThreadJson {
        tid: t.info.tid,
        pid,
        name: t.info.display_name().to_string(),
        comm: t.info.comm.clone(),
        kind: t.category(),
        group: t.info.group.clone(),
        daemon: t.info.daemon,
        first: rel(first),
        last: rel(last),
        ucov: (t.info.kernel_until).filter(|&k| k < last).map(|k| rel(k.max(first))),
        wall: b.wall,
        cpu: b.cpu,
        off: b.off.0.to_vec(),
        vol: b.voluntary,
        invol: b.involuntary,
        anomalies: t.totals.anomalies,
        vid: t.info.virtual_id,
        carrier: t.info.carrier,
        nstid: t.info.ns_tid,
        unmatched: t.info.unmatched,
        spans,
        offs,
    }
}

/// The page's data as JSON, safe to put inside a `<script>` element.
fn page_json(view: &View, opts: &HtmlOptions) -> serde_json::Result<String> {
    let (trace, threads) = (view.trace, &view.threads);
    let t0 = time_origin(trace);
    let windows = view.windows.clone();
    let m = &trace.meta;
    let last = threads
        .iter()
        .map(|t| t.info.last_ts)
        .max()
        .unwrap_or(t0)
        .max(m.end_monotonic_ns);
    let mut problems = jtrace_merge::trace_problems(trace);
    let scope = view.scope.window.unwrap_or((0, u64::MAX));
    if let Some((from, to)) = view.scope.window {
        problems.push(format!(
            "this page shows part of the trace: +{}..+{} ms (--window)",
            crate::text::ms(from.saturating_sub(t0)),
            crate::text::ms(to.saturating_sub(t0))
        ));
    }
    if let Some(t) = &view.scope.thread {
        problems.push(format!("this page shows the threads matching {t:?} only (--thread)"));
    }
    let command = m.command.join(" ");
    let mut strings = Interner::new();
    let mut stacks = StackTexts::new(trace, opts.lines);
    let index = WindowIndex::new(&windows);
    let kind_of: std::collections::HashMap<u32, u8> = threads.iter().map(|t| (t.info.tid, t.category())).collect();
    let (processes, order) = process_order(trace, threads);
    let threads: Vec<ThreadJson> = order
        .into_iter()
        .map(|i| {
            let t = &threads[i];
            let mut j = thread_json(
                trace,
                &mut strings,
                &mut stacks,
                t,
                &index,
                pid_of(trace, &t.info),
                t0,
                scope,
            );
            // A virtual thread is listed under its carrier, in its group.
            if let Some(&k) = t.info.carrier.and_then(|c| kind_of.get(&c)) {
                j.kind = k;
            }
            j
        })
        .collect();
    let windows = windows
        .into_iter()
        .map(|w| WindowJson {
            c: w.cause as usize,
            kind: window_name(w.cause),
            n: w.seq,
            pid: w.pid,
            s: w.start.saturating_sub(t0),
            e: w.end.saturating_sub(t0),
            open: w.open,
        })
        .collect();
    let page = PageJson {
        title: opts.title.clone().unwrap_or_else(|| {
            if command.is_empty() {
                trace.dir.display().to_string()
            } else {
                command.clone()
            }
        }),
        command,
        pid: m.pid,
        t0: t0.to_string(),
        realtime: m.start_realtime_ns.to_string(),
        start_date: crate::fmt_realtime(m.start_realtime_ns),
        duration: last.saturating_sub(t0),
        complete: m.complete,
        causes: Cause::ALL.iter().map(|c| c.name()).collect(),
        methods: trace
            .methods
            .iter()
            .map(|mi| [mi.class.clone(), mi.name.clone(), mi.signature.clone()])
            .collect(),
        lost_kernel: trace.losses.kernel,
        lost_jvm: trace.losses.jvm,
        problems,
        events: trace.kernel_records + trace.jvm_records,
        strings: strings.strings,
        stacks: stacks.stacks,
        frames: stacks.frames.strings,
        windows,
        processes,
        threads,
        paths: paths_json(&opts.paths, t0),
        window: (view.scope.window).map(|(from, to)| [from.saturating_sub(t0), to.saturating_sub(t0)]),
    };
    serde_json::to_string(&page)
}

/// Writes the timeline of `trace` as one self-contained HTML page.
pub fn write_html(trace: &Trace, opts: &HtmlOptions, out: impl Write) -> io::Result<()> {
    write_html_view(&View::whole(trace), opts, out)
}

/// [`write_html`] of a [`View`]: the whole trace, or the part a scope
/// selects (the page opens on its window and says what it shows).
pub fn write_html_view(view: &View, opts: &HtmlOptions, out: impl Write) -> io::Result<()> {
    let trace = view.trace;
    let data = page_json(view, opts)?;
    let title = (opts.title.clone()).unwrap_or_else(|| format!("jtrace timeline: {}", trace.meta.command.join(" ")));
    let page = PageTemplate {
        template: TEMPLATE,
        css: CSS,
        viewer: &VIEWER,
    };
    page.write(&title, &data, out)
}

//! The collapsed (folded-stack) export of off-CPU time by cause
//! (`jtrace export --format collapsed`), for flame graphs and speedscope.
//! It streams: a trace of any length folds in memory bounded by the
//! streaming budget plus the distinct stacks.

use crate::export::Exporter;
use crate::segments::layout_order;
use jtrace_merge::idle::{blocked_part, idle_rule};
use jtrace_merge::scale::ShortBlocks;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::tail::{Tail, TailStack};
use jtrace_merge::{
    analyze, Invocation, MethodIdx, OffCpu, OffCpuInterval, Symbolizer, ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use jtrace_merge::{glob_match, Cause, Wake};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

/// What [`write_collapsed`] writes.
#[derive(Debug, Clone, Default)]
pub struct CollapsedOptions {
    /// Put the thread (`name [tid]`) between the cause and the frames.
    pub thread: bool,
    /// Also count off-CPU time outside traced methods, under the frame
    /// `[no traced method]` (then the totals per cause are the threads' totals).
    pub all: bool,
    /// Also write the CPU samples, under the root `cpu`
    /// (`cpu;root;…;leaf ns`, ns = samples × the sampling period).
    pub cpu: bool,
    /// Native frames with their source line (` (file.c:123)`, from DWARF)
    /// and the functions inlined there as frames of their own.
    pub lines: bool,
    /// Only this time window, `(from, to)` in ns since the trace start:
    /// off-CPU time clipped to it (its causes laid out in time as the
    /// timeline lays them), CPU samples taken in it.
    pub window: Option<(u64, u64)>,
    /// Only the threads whose name matches this glob, or this tid.
    pub threads: Option<String>,
    /// Only working time, as the report's default: blocked time under a
    /// stack that the idle rules (docs/REPORT.md, "Working and idle
    /// time") call waiting for work, and jtrace's own threads, are left
    /// out and counted in [`Folded::idle_ns`] and [`Folded::tracer_ns`].
    pub working: bool,
}

/// What [`fold_streaming`] folds: the folded stacks, and who ended the
/// waits under each.
#[derive(Debug, Default)]
pub struct Folded {
    /// `cause;frame;…;frame` (outermost first) → ns, as the collapsed
    /// format writes them.
    pub stacks: BTreeMap<String, u64>,
    /// Per folded stack, the blocked (not `runqueue`) ns each waker ended,
    /// by index into [`Folded::waker_names`].
    pub wakers: HashMap<String, BTreeMap<u32, u64>>,
    /// `thread [tid]` or `thread [tid] in Class.method`: the waker and
    /// the traced method it was in when it woke the thread.
    pub waker_names: Vec<String>,
    /// With [`CollapsedOptions::working`]: the idle time left out, ns.
    pub idle_ns: u64,
    /// With [`CollapsedOptions::working`]: jtrace's own threads' off-CPU
    /// time left out, ns.
    pub tracer_ns: u64,
}

/// Frame standing for "no traced method open" in the collapsed output.
pub const NO_METHOD_FRAME: &str = "[no traced method]";

/// Innermost frame of off-CPU time scaled up from sampled short blocks'
/// stacks (the thread's short blocks without a stack of their own).
pub const SCALED_FRAME: &str = "[scaled from sampled blocks]";

/// Folds a walk's off-CPU intervals into stacks: a [`Visitor`] that keeps
/// the open frames of the current thread and sums each interval's causes
/// under them.
struct Folder<'a> {
    trace: &'a Trace,
    symbols: Symbolizer<'a>,
    opts: &'a CollapsedOptions,
    stack: Vec<MethodIdx>,
    /// The time after the thread's last switch-out.
    tail: Tail,
    /// The thread's short blocks without stacks (by the traced methods
    /// open then), scaled at its end.
    short: ShortBlocks<Vec<MethodIdx>>,
    /// The window, in trace time.
    window: Option<(u64, u64)>,
    /// The current thread is left out (`threads`).
    skip: bool,
    /// Who ended the waits, when asked for (the flame graph).
    wakers: Option<WakerFold>,
    folded: BTreeMap<String, u64>,
    /// With `working`: whether each (tid, pair) is idle, decided once.
    idle: HashMap<(u32, u32), bool>,
    /// The current thread is jtrace's own, left out (`working`).
    tracer: bool,
    idle_ns: u64,
    tracer_ns: u64,
}

/// The wakers of the waits, folded as the stacks are.
#[derive(Debug, Default)]
struct WakerFold {
    /// The thread's last wakeup: its time and waker id.
    last: Option<(u64, u32)>,
    /// The waker of the interval being added.
    current: Option<u32>,
    ids: HashMap<String, u32>,
    folded: Folded,
}

impl WakerFold {
    fn id(&mut self, name: String) -> u32 {
        let names = &mut self.folded.waker_names;
        *self.ids.entry(name).or_insert_with_key(|n| {
            names.push(n.clone());
            names.len() as u32 - 1
        })
    }

    /// The current waker's part of `off` under the folded stack `key`.
    fn add(&mut self, key: &str, c: Cause, ns: u64) {
        if let (Some(w), true) = (self.current, c != Cause::Runqueue) {
            *self
                .folded
                .wakers
                .entry(key.to_string())
                .or_default()
                .entry(w)
                .or_default() += ns;
        }
    }
}

/// `off` clipped to `[from, to)`, its causes laid out in time from `start`.
fn clip(start: u64, off: &OffCpu, (from, to): (u64, u64)) -> OffCpu {
    let mut out = OffCpu::default();
    let mut t = start;
    for (c, ns) in layout_order(off) {
        let (lo, hi) = (t.max(from), (t + ns).min(to));
        if hi > lo {
            out.add(c, hi - lo);
        }
        t += ns;
    }
    out
}

impl Folder<'_> {
    /// An interval with recorded stacks: its causes under its full stack,
    /// whatever the traced methods (traced methods are in the stack).
    /// Scaled time (`scaled`) gets the innermost frame [`SCALED_FRAME`].
    fn add_stack(&mut self, t: &ThreadInfo, pair: u32, off: &OffCpu, scaled: bool) {
        let off = self.working_part(t, pair, off);
        if off.is_empty() {
            return;
        }
        let mut frames = self.stack_frames(t, pair);
        if scaled {
            frames.push(';');
            frames.push_str(SCALED_FRAME);
        }
        self.add_folded(&frames, &off);
    }

    /// `off`, thread `t`'s time under stack `pair`, less its idle part
    /// when only working time is wanted (counted in `idle_ns`).
    fn working_part(&mut self, t: &ThreadInfo, pair: u32, off: &OffCpu) -> OffCpu {
        if !self.opts.working {
            return *off;
        }
        let symbols = &self.symbols;
        let idle = *(self.idle.entry((t.tid, pair))).or_insert_with(|| idle_rule(t, &symbols.frames(pair)).is_some());
        if !idle {
            return *off;
        }
        let blocked = blocked_part(off);
        self.idle_ns += blocked.total();
        let mut working = OffCpu::default();
        for (c, ns) in off.nonzero() {
            working.add(c, ns - blocked.get(c));
        }
        working
    }

    /// `off` under `frames`, each cause its own folded stack.
    fn add_folded(&mut self, frames: &str, off: &OffCpu) {
        for (c, ns) in off.nonzero() {
            let key = format!("{}{frames}", c.name());
            if let Some(w) = &mut self.wakers {
                w.add(&key, c, ns);
            }
            *self.folded.entry(key).or_default() += ns;
        }
    }

    /// `;thread;root;…;leaf` of stack pair `pair`.
    fn stack_frames(&self, t: &ThreadInfo, pair: u32) -> String {
        let mut frames = String::new();
        if self.opts.thread {
            frames.push(';');
            frames.push_str(&frame(&format!("{} [{}]", t.display_name(), t.tid)));
        }
        for f in self.symbols.frames(pair).iter().rev() {
            frames.push(';');
            frames.push_str(&frame(&f.name_with_line()));
        }
        frames
    }

    /// The CPU samples (of the window), under `cpu`.
    fn add_cpu_samples(&mut self) {
        let hz = u64::from(self.trace.meta.cpu_sample_hz);
        if hz == 0 {
            return;
        }
        let period = 1_000_000_000 / hz;
        let stacks = &self.trace.stacks;
        let counts: BTreeMap<(u32, u32), u64> = match self.window {
            None => stacks.cpu_samples.clone(),
            Some((from, to)) => {
                let mut m = BTreeMap::new();
                for &(_, tid, pair) in stacks.cpu_sample_times.iter().filter(|s| s.0 >= from && s.0 < to) {
                    *m.entry((tid, pair)).or_default() += 1;
                }
                m
            }
        };
        for ((tid, pair), n) in counts {
            let t = self.trace.threads.get(&tid).cloned().unwrap_or(ThreadInfo {
                tid,
                ..Default::default()
            });
            if !self.wanted(&t) {
                continue;
            }
            let frames = self.stack_frames(&t, pair);
            *self.folded.entry(format!("cpu{frames}")).or_default() += n * period;
        }
    }

    /// Whether thread `t` is in the view (`threads`).
    fn wanted(&self, t: &ThreadInfo) -> bool {
        (self.opts.threads.as_deref()).is_none_or(|p| glob_match(p, t.display_name()) || p == t.tid.to_string())
    }

    fn add(&mut self, t: &ThreadInfo, depth: usize, off: &OffCpu) {
        if depth == 0 && !self.opts.all {
            return;
        }
        let mut frames = String::new();
        if self.opts.thread {
            frames.push(';');
            frames.push_str(&frame(&format!("{} [{}]", t.display_name(), t.tid)));
        }
        if depth == 0 {
            frames.push(';');
            frames.push_str(NO_METHOD_FRAME);
        }
        for m in &self.stack[..depth.min(self.stack.len())] {
            frames.push(';');
            frames.push_str(&frame(&self.trace.methods[*m as usize].qualified()));
        }
        self.add_folded(&frames, off);
    }
}

/// Folded-stack frames cannot contain `;` (separator) or newlines, and the
/// count is after the last space; Java names have none of these, but be safe.
fn frame(s: &str) -> String {
    s.replace([';', '\n', '\r'], "_")
}

impl Visitor for Folder<'_> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.stack.clear();
        self.tail.begin();
        self.tracer = self.opts.working && t.is_tracer();
        self.skip = !self.wanted(t) || self.tracer;
        if let Some(w) = &mut self.wakers {
            w.last = None;
        }
    }
    fn event(&mut self, _t: &ThreadInfo, e: &Timed) {
        if !self.skip {
            self.tail.event(e);
        }
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.tail.exit(t, inv, &self.stack);
        self.stack.truncate(depth);
    }
    fn waker_method(&mut self, _t: &ThreadInfo, _depth: usize, wake: &Wake, method: Option<MethodIdx>) {
        let Some(w) = &mut self.wakers else { return };
        let waker = self.trace.threads.get(&wake.waker_tid);
        let mut name = match waker {
            _ if wake.waker_tid == 0 => "the kernel: an interrupt or timer on an idle CPU [0]".to_string(),
            Some(t) => format!("{} [{}]", t.display_name(), wake.waker_tid),
            None => format!("[{}]", wake.waker_tid),
        };
        if let Some(m) = method {
            name.push_str(" in ");
            name.push_str(&self.trace.methods[m as usize].qualified());
        }
        let id = w.id(name);
        w.last = Some((wake.ts, id));
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        if self.skip {
            // Without a window a left-out tracer thread's time is taken
            // whole at its end.
            if let (true, Some(w)) = (self.tracer, self.window) {
                self.tracer_ns += clip(iv.start, &iv.split.off, w).total();
            }
            return;
        }
        self.tail.off_cpu(&iv.split.off);
        let mut iv = *iv;
        if let Some(window) = self.window {
            iv.split.off = clip(iv.start, &iv.split.off, window);
            if iv.split.off.total() == 0 {
                return;
            }
        }
        let open = &self.stack[..depth.min(self.stack.len())];
        if self.short.off_cpu(&iv, || open.to_vec()) {
            return;
        }
        if let Some(w) = &mut self.wakers {
            w.current = (w.last.zip(iv.wake))
                .filter(|(l, wake)| l.0 == wake.ts)
                .map(|(l, _)| l.1);
        }
        match iv.stack {
            Some(pair) => self.add_stack(t, pair, &iv.split.off, false),
            None => self.add(t, depth, &iv.split.off),
        }
        if let Some(w) = &mut self.wakers {
            w.current = None;
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        if self.skip {
            self.short.end();
            if self.tracer && self.window.is_none() {
                self.tracer_ns += totals.breakdown.off.total();
            }
            return;
        }
        let short = self.short.end();
        for (pair, off) in short.scaled {
            self.add_stack(t, pair, &off, true);
        }
        for (methods, off) in short.unscaled {
            self.stack = methods;
            self.add(t, self.stack.len(), &off);
        }
        // The time after the last switch-out: under its recorded stacks,
        // as the pprof export puts it, else the traced methods open at the
        // thread's last event.
        let tail_start = self.tail.switch_out_ts();
        let tail = self
            .tail
            .end(totals)
            .and_then(|(off, stack)| match (self.window, tail_start) {
                (None, _) => Some((off, stack)),
                (Some(w), Some(start)) => Some((clip(start, &off, w), stack)).filter(|(o, _)| o.total() > 0),
                // With a window, time whose start is unknown is left out.
                (Some(_), None) => None,
            });
        match tail {
            Some((tail, TailStack::Recorded(pair))) => self.add_stack(t, pair, &tail, false),
            Some((tail, TailStack::Traced(methods))) => {
                self.stack = methods;
                self.add(t, self.stack.len(), &tail);
            }
            None => {}
        }
    }
}

/// Writes off-CPU time as folded stacks (Brendan Gregg's collapsed format,
/// read by flamegraph.pl, inferno and speedscope): one line per distinct
/// stack, `cause;Outer.method;...;Inner.method N`, where N is **nanoseconds**
/// off CPU with that cause at that stack, frames outermost first. An
/// interval whose stacks were recorded is written under its full stack
/// (`cause;root;…;leaf`, Java, native and kernel frames named as
/// async-profiler names them), traced methods or not; others under their
/// traced methods. With [`CollapsedOptions::thread`] the thread is the
/// second frame; with [`CollapsedOptions::cpu`] CPU samples follow under `cpu`.
pub fn write_collapsed(trace: &Trace, opts: &CollapsedOptions, out: impl Write) -> io::Result<()> {
    let mut f = Folder::new(trace, opts);
    analyze(trace, &mut f);
    if opts.cpu {
        f.add_cpu_samples();
    }
    f.write(out)
}

/// [`write_collapsed`] of the trace directory `dir`, streaming: the same
/// bytes, in memory bounded by `stream`'s budget plus the distinct stacks
/// (the output itself), not by the trace's length.
pub fn write_collapsed_streaming(
    dir: &Path,
    opts: &CollapsedOptions,
    out: impl Write,
    stream: &StreamOptions,
) -> anyhow::Result<()> {
    let (trace, events) = crate::open_streamed(dir, stream)?;
    let mut f = Folder::new(&trace, opts);
    stream::analyze(&trace, events, &mut f)?;
    if opts.cpu {
        f.add_cpu_samples();
    }
    f.write(out)?;
    Ok(())
}

/// The folded stacks of the trace directory `dir` (what
/// [`write_collapsed_streaming`] writes) and, with `wakers`, who ended the
/// waits under each; streamed within `stream`'s budget. Also returns the
/// trace.
pub fn fold_streaming(
    dir: &Path,
    opts: &CollapsedOptions,
    wakers: bool,
    stream: &StreamOptions,
) -> anyhow::Result<(Trace, Folded)> {
    let stream = StreamOptions {
        waker_methods: wakers,
        ..stream.clone()
    };
    let (trace, events) = crate::open_streamed(dir, &stream)?;
    let mut f = Folder::new(&trace, opts);
    if wakers {
        f.wakers = Some(WakerFold::default());
        jtrace_merge::stream::analyze_with_wakers(&trace, events, &mut f)?;
    } else {
        stream::analyze(&trace, events, &mut f)?;
    }
    if opts.cpu {
        f.add_cpu_samples();
    }
    let mut folded = f.wakers.take().map(|w| w.folded).unwrap_or_default();
    folded.stacks = std::mem::take(&mut f.folded);
    (folded.idle_ns, folded.tracer_ns) = (f.idle_ns, f.tracer_ns);
    drop(f);
    Ok((trace, folded))
}

impl<'a> Folder<'a> {
    fn new(trace: &'a Trace, opts: &'a CollapsedOptions) -> Self {
        let origin = crate::model::time_origin(trace);
        Folder {
            trace,
            symbols: if opts.lines {
                Symbolizer::new(trace).with_lines()
            } else {
                Symbolizer::new(trace)
            },
            opts,
            stack: Vec::new(),
            tail: Tail::default(),
            short: ShortBlocks::new(trace),
            window: opts.window.map(|(from, to)| (origin + from, origin + to)),
            skip: false,
            wakers: None,
            folded: BTreeMap::new(),
            idle: HashMap::new(),
            tracer: false,
            idle_ns: 0,
            tracer_ns: 0,
        }
    }

    fn write(&self, mut out: impl Write) -> io::Result<()> {
        for (k, v) in &self.folded {
            writeln!(out, "{k} {v}")?;
        }
        out.flush()
    }
}

/// The collapsed format as an [`Exporter`]: [`write_collapsed`], streamed by
/// [`write_collapsed_streaming`].
#[derive(Debug, Clone, Default)]
pub struct Collapsed(pub CollapsedOptions);

impl Exporter for Collapsed {
    fn name(&self) -> &'static str {
        "collapsed"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        Ok(write_collapsed(trace, &self.0, out)?)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, stream: &StreamOptions) -> anyhow::Result<()> {
        write_collapsed_streaming(dir, &self.0, out, stream)
    }
}

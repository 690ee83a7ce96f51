//! The collapsed (folded-stack) export of off-CPU time by cause
//! (`jtrace export --format collapsed`), for flame graphs and speedscope.
//! It streams: a trace of any length folds in memory bounded by the
//! streaming budget plus the distinct stacks.

use crate::export::Exporter;
use jtrace_merge::scale::ShortBlocks;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::tail::{Tail, TailStack};
use jtrace_merge::{
    analyze, Invocation, MethodIdx, OffCpu, OffCpuInterval, Symbolizer, ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use std::collections::BTreeMap;
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
    folded: BTreeMap<String, u64>,
}

impl Folder<'_> {
    /// An interval with recorded stacks: its causes under its full stack,
    /// whatever the traced methods (traced methods are in the stack).
    /// Scaled time (`scaled`) gets the innermost frame [`SCALED_FRAME`].
    fn add_stack(&mut self, t: &ThreadInfo, pair: u32, off: &OffCpu, scaled: bool) {
        let mut frames = self.stack_frames(t, pair);
        if scaled {
            frames.push(';');
            frames.push_str(SCALED_FRAME);
        }
        for (c, ns) in off.nonzero() {
            *self.folded.entry(format!("{}{frames}", c.name())).or_default() += ns;
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

    /// The CPU samples, under `cpu`.
    fn add_cpu_samples(&mut self) {
        let hz = u64::from(self.trace.meta.cpu_sample_hz);
        if hz == 0 {
            return;
        }
        let period = 1_000_000_000 / hz;
        for (&(tid, pair), &n) in &self.trace.stacks.cpu_samples {
            let t = self.trace.threads.get(&tid).cloned().unwrap_or(ThreadInfo {
                tid,
                ..Default::default()
            });
            let frames = self.stack_frames(&t, pair);
            *self.folded.entry(format!("cpu{frames}")).or_default() += n * period;
        }
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
        for (c, ns) in off.nonzero() {
            *self.folded.entry(format!("{}{frames}", c.name())).or_default() += ns;
        }
    }
}

/// Folded-stack frames cannot contain `;` (separator) or newlines, and the
/// count is after the last space; Java names have none of these, but be safe.
fn frame(s: &str) -> String {
    s.replace([';', '\n', '\r'], "_")
}

impl Visitor for Folder<'_> {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.stack.clear();
        self.tail.begin();
    }
    fn event(&mut self, _t: &ThreadInfo, e: &Timed) {
        self.tail.event(e);
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.tail.exit(t, inv, &self.stack);
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.tail.off_cpu(&iv.split.off);
        let open = &self.stack[..depth.min(self.stack.len())];
        if self.short.off_cpu(iv, || open.to_vec()) {
            return;
        }
        match iv.stack {
            Some(pair) => self.add_stack(t, pair, &iv.split.off, false),
            None => self.add(t, depth, &iv.split.off),
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
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
        match self.tail.end(totals) {
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

impl<'a> Folder<'a> {
    fn new(trace: &'a Trace, opts: &'a CollapsedOptions) -> Self {
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
            folded: BTreeMap::new(),
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

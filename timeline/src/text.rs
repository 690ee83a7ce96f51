//! The merged text trace (`jtrace text`), in the spirit of JPMT's: a system
//! header, then per thread its header, the indented call tree with wall and
//! CPU per invocation, and the off-CPU intervals nested where they occurred.

use crate::export::Exporter;
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    analyze, describe_evidence, describe_syscall, Breakdown, CallIndex, Evidence, FrameKind, Invocation, MethodIdx,
    OffCpuInterval, Symbolizer, SyscallInfo, ThreadInfo, ThreadTotals, Trace, Visitor, Wake,
};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

/// What to include in the text trace.
#[derive(Debug, Clone, Default)]
pub struct TextOptions {
    /// Also list off-CPU intervals outside traced invocations, and threads
    /// without any traced invocation.
    pub all_events: bool,
    /// Frames of each off-CPU interval's recorded stack to show, innermost
    /// first (0: none). Intervals with a stack outside traced methods (a
    /// voluntary block of at least [`STACK_BLOCK_MIN_NS`]) are listed too,
    /// so that a trace without `--methods` says where its threads blocked.
    pub stack_depth: usize,
    /// Native frames with their source line (` (file.c:123)`, from DWARF)
    /// and the functions inlined there as frames of their own.
    pub lines: bool,
}

/// Shortest voluntary block listed for its stack alone (outside traced methods).
pub const STACK_BLOCK_MIN_NS: u64 = 1_000_000;

/// Formats nanoseconds as microseconds with one decimal.
pub fn us(ns: u64) -> String {
    format!("{}.{}", ns / 1000, (ns % 1000) / 100)
}

/// Formats nanoseconds as milliseconds with three decimals.
pub fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, (ns % 1_000_000) / 1000)
}

/// `runqueue 4.012 ms, unknown 1.000 ms` (largest first).
pub fn causes(b: &Breakdown) -> String {
    let mut v: Vec<_> = b.off.nonzero().collect();
    v.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    v.iter()
        .map(|(c, n)| format!("{} {} ms", c.name(), ms(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `, not covered N ms` when part of `b` had no kernel data, else "".
fn not_covered(b: &Breakdown) -> String {
    if b.not_covered == 0 {
        String::new()
    } else {
        format!(", not covered {} ms (no kernel data)", ms(b.not_covered))
    }
}

/// Kernel task state letter of a prev_state value, as `ps` shows it.
fn state_letter(prev_state: u32) -> &'static str {
    match prev_state & 0xff {
        0 => "R",
        0x01 => "S",
        0x02 => "D",
        0x04 => "T",
        0x08 => "t",
        0x10 => "X",
        0x20 => "Z",
        0x40 => "P",
        0x80 => "I",
        _ => "?",
    }
}

/// What the text trace needs beyond one thread's walk: the waker's method
/// and the syscall a block was in.
enum Lookup {
    /// The whole trace is in memory: its call index and syscall table.
    Whole(CallIndex),
    /// A streamed walk: the waker methods the walk reported since the
    /// thread's last off-CPU interval, and the syscalls the thread entered
    /// last. A block is in the one entered last before its switch-out, but
    /// a syscall record can carry an entry time inside the block (it is
    /// walked before the switch-in that ends the block), so a few are kept.
    Streamed {
        wakes: VecDeque<(Wake, Option<MethodIdx>)>,
        syscalls: VecDeque<(u32, SyscallInfo)>,
    },
}

/// Syscalls kept for describing the next off-CPU interval.
const MAX_RECENT_SYSCALLS: usize = 8;

/// Wakeups kept for the next off-CPU interval (one wakes it; the others were
/// wakeups of the running thread, which the kernel reports only seldom).
const MAX_PENDING_WAKES: usize = 64;

/// Bytes of a thread's text held before they are written.
const FLUSH_AT: usize = 64 << 10;

struct TextWriter<'a, W: Write> {
    trace: &'a Trace,
    symbols: Symbolizer<'a>,
    lookup: Lookup,
    labels: MethodLabels,
    out: W,
    opts: TextOptions,
    t0: u64,
    thread_buf: String,
    thread_has_calls: bool,
    err: Option<io::Error>,
}

impl<'a, W: Write> TextWriter<'a, W> {
    fn rel(&self, ts: u64) -> String {
        if ts >= self.t0 {
            format!("+{}", ms(ts - self.t0))
        } else {
            format!("-{}", ms(self.t0 - ts))
        }
    }

    fn name(&self, m: MethodIdx) -> String {
        let m = &self.trace.methods[m as usize];
        self.labels.label(&m.class, &m.name, &m.signature)
    }

    /// "tid 12 \"pool-1\" in Cache.refresh", as [`CallIndex::describe_waker`]
    /// says it, with the method named as everywhere in the text.
    fn waker(&mut self, w: &Wake, start: u64) -> String {
        let m = match &mut self.lookup {
            Lookup::Whole(index) => index.method_at(w.waker_tid, w.ts),
            // The interval's wake is the first wakeup after its switch-out.
            Lookup::Streamed { wakes, .. } => (wakes.iter())
                .find(|(x, _)| x.ts >= start && x == w)
                .and_then(|&(_, m)| m),
        };
        // The name part, from an index that knows no method.
        let mut s = CallIndex::default().describe_waker(self.trace, w);
        if let Some(m) = m {
            s.push_str(" in ");
            s.push_str(&self.name(m));
        }
        s
    }

    /// "entering contended monitor of X", "in read(fd 5: …)", as
    /// [`describe_evidence`] says it on the whole trace.
    fn evidence(&mut self, e: &Evidence) -> String {
        match (&mut self.lookup, e) {
            (Lookup::Streamed { syscalls, .. }, Evidence::Syscall(i)) => {
                match syscalls.iter().rev().find(|(idx, _)| idx == i) {
                    Some((_, sc)) => format!("in {}", describe_syscall(self.trace, sc)),
                    None => "in a syscall".into(),
                }
            }
            _ => describe_evidence(self.trace, e),
        }
    }

    fn line(&mut self, ts: u64, depth: usize, text: &str) {
        let rel = self.rel(ts);
        let _ = writeln!(self.thread_buf, "{rel:>14} {:indent$}{text}", "", indent = depth * 2);
        // Once the thread is sure to be printed in full, its text goes out
        // as it comes: a thread's text grows with the trace's length.
        if self.thread_buf.len() >= FLUSH_AT && (self.thread_has_calls || self.opts.all_events) {
            self.write_buf();
        }
    }

    /// Writes out the thread's text so far.
    fn write_buf(&mut self) {
        if self.err.is_none() {
            if let Err(e) = self.out.write_all(self.thread_buf.as_bytes()) {
                self.err = Some(e);
            }
        }
        self.thread_buf.clear();
    }
}

impl<'a, W: Write> Visitor for TextWriter<'a, W> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        if let Lookup::Streamed { wakes, syscalls } = &mut self.lookup {
            wakes.clear();
            syscalls.clear();
        }
        self.thread_buf.clear();
        self.thread_has_calls = false;
        let mut kind = Vec::new();
        if let Some(id) = t.virtual_id {
            kind.push(format!("virtual #{id}"));
            if let Some(c) = t.carrier {
                kind.push(format!("carrier tid {c}"));
            }
        }
        if t.java_name.is_some() {
            kind.push("java".to_string());
            if !t.group.is_empty() {
                kind.push(format!("group {}", t.group));
            }
            if !t.parent.is_empty() {
                kind.push(format!("parent {}", t.parent));
            }
            if t.daemon {
                kind.push("daemon".into());
            }
            if !t.comm.is_empty() && Some(&t.comm) != t.java_name.as_ref() {
                kind.push(format!("comm {}", t.comm));
            }
        } else {
            kind.push("native".into());
        }
        match (t.unmatched, t.ns_tid) {
            (true, Some(ns)) => kind.push(format!(
                "tid {ns} in its pid namespace, NOT PAIRED with a kernel thread: its time is not covered"
            )),
            (false, Some(ns)) => kind.push(format!("tid {ns} in its pid namespace")),
            _ => {}
        }
        let start = t
            .started_ts
            .map(|s| format!("start {} ms", self.rel(s)))
            .unwrap_or_else(|| format!("first event {} ms", self.rel(t.first_ts)));
        let end = t
            .exited_ts
            .map(|s| format!("exit {} ms", self.rel(s)))
            .unwrap_or_else(|| format!("last event {} ms", self.rel(t.last_ts)));
        // A virtual thread's tid is the merge's key: it is named by its Java id.
        let id = match t.virtual_id {
            Some(v) => format!("vthread #{v}"),
            None => format!("tid {}", t.tid),
        };
        let head = format!(
            "== Thread \"{}\" {id} pid {} [{}]  {start}, {end}",
            t.display_name(),
            t.tgid,
            kind.join(", ")
        );
        self.thread_buf.push('\n');
        self.thread_buf
            .push_str(&crate::text_fit::wrap(&head, crate::text_fit::WIDTH, 3));
    }

    fn enter(&mut self, _t: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.thread_has_calls = true;
        let text = format!("→ {}", self.name(m));
        self.line(ts, depth, &text);
    }

    fn exit(&mut self, _t: &ThreadInfo, depth: usize, inv: &Invocation) {
        let b = &inv.breakdown;
        let mut text = format!(
            "← {}  wall {} µs  CPU {} µs",
            self.name(inv.method),
            us(b.wall),
            us(b.cpu)
        );
        if b.off.total() > 0 {
            let _ = write!(text, "  off {} µs ({})", us(b.off.total()), causes(b));
        }
        if b.not_covered > 0 {
            let _ = write!(text, "  not covered {} µs (no kernel data)", us(b.not_covered));
        }
        if b.voluntary + b.involuntary > 0 {
            let _ = write!(text, "  switches {} vol / {} invol", b.voluntary, b.involuntary);
        }
        if inv.exception {
            text.push_str("  [threw]");
        }
        if inv.unfinished {
            text.push_str("  [no exit recorded]");
        }
        self.line(inv.exit, depth, &text);
    }

    fn off_cpu(&mut self, _t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        let by_stack =
            self.opts.stack_depth > 0 && iv.stack.is_some() && !iv.preempted && iv.end - iv.start >= STACK_BLOCK_MIN_NS;
        if depth == 0 && !self.opts.all_events && !by_stack {
            return;
        }
        if by_stack {
            self.thread_has_calls = true;
        }
        if iv.evidence == Evidence::Steal {
            // Not a switch: the guest kernel had the thread running.
            let text = format!(
                "⇣ steal, off CPU {} ms: its vCPU ran another guest (the hypervisor took it)",
                ms(iv.end - iv.start)
            );
            self.line(iv.start, depth, &text);
            return;
        }
        let how = if iv.evidence == Evidence::Throttled {
            "preempted (involuntary), throttled: its cgroup used up its CPU quota".to_string()
        } else if iv.preempted {
            "preempted (involuntary)".to_string()
        } else if iv.prev_state & jtrace_merge::UNMOUNTED_STATE != 0 {
            format!("unmounted (virtual thread) {}", self.evidence(&iv.evidence))
        } else {
            format!(
                "blocked (voluntary, state {}) {}",
                state_letter(iv.prev_state),
                self.evidence(&iv.evidence)
            )
        };
        let mut text = format!(
            "⇣ switch-out {how}, off CPU {} ms: {}",
            ms(iv.end - iv.start),
            causes(&iv.split)
        );
        if let Some(w) = iv.wake {
            let _ = write!(text, "; woken by {} at {} ms", self.waker(&w, iv.start), self.rel(w.ts));
        }
        if let Lookup::Streamed { wakes, .. } = &mut self.lookup {
            wakes.clear();
        }
        self.line(iv.start, depth, &text);
        if let (Some(pair), n @ 1..) = (iv.stack, self.opts.stack_depth) {
            let frames = self.symbols.frames(pair);
            let user = frames.iter().filter(|f| f.kind != FrameKind::Kernel);
            let mut at: Vec<String> = user.clone().take(n).map(|f| f.name_with_line()).collect();
            if user.count() > at.len() {
                at.push("…".into());
            }
            // `<`, not an arrow: `←` marks a method's exit in this view.
            self.line(iv.start, depth, &format!("  at {}", at.join(" < ")));
        }
        self.line(iv.end, depth, "⇡ switch-in");
    }

    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if let Lookup::Streamed { syscalls, .. } = &mut self.lookup {
            if syscalls.len() == MAX_RECENT_SYSCALLS {
                syscalls.pop_front();
            }
            syscalls.push_back((idx, *sc));
        }
    }

    fn waker_method(&mut self, _t: &ThreadInfo, _depth: usize, w: &Wake, m: Option<MethodIdx>) {
        if let Lookup::Streamed { wakes, .. } = &mut self.lookup {
            if wakes.len() == MAX_PENDING_WAKES {
                wakes.pop_front();
            }
            wakes.push_back((*w, m));
        }
    }

    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        if !self.thread_has_calls && !self.opts.all_events {
            // Keep threads without traced methods to one line.
            let b = &totals.breakdown;
            let r = writeln!(
                self.out,
                "-- thread \"{}\" tid {}: wall {} ms, CPU {} ms, off {} ms{}, switches {} vol / {} invol",
                t.display_name(),
                t.tid,
                ms(b.wall),
                ms(b.cpu),
                ms(b.off.total()),
                not_covered(b),
                b.voluntary,
                b.involuntary
            );
            if let Err(e) = r {
                self.err.get_or_insert(e);
            }
            return;
        }
        let b = &totals.breakdown;
        let total = format!(
            "   thread total: wall {} ms, CPU {} ms, off {} ms ({}){}, switches {} vol / {} invol{}",
            ms(b.wall),
            ms(b.cpu),
            ms(b.off.total()),
            causes(b),
            not_covered(b),
            b.voluntary,
            b.involuntary,
            if totals.anomalies > 0 {
                format!(", {} anomalies (lost events?)", totals.anomalies)
            } else {
                String::new()
            }
        );
        self.thread_buf
            .push_str(&crate::text_fit::wrap(&total, crate::text_fit::WIDTH, 6));
        self.write_buf();
    }
}

/// The system header of a text trace.
pub fn header(trace: &Trace) -> String {
    let m = &trace.meta;
    let mut s = String::new();
    let _ = writeln!(s, "# jtrace merged trace (format v{})", m.version);
    let _ = writeln!(s, "# trace     : {}", trace.dir.display());
    let _ = writeln!(s, "# command   : {}", m.command.join(" "));
    let _ = writeln!(
        s,
        "# pid       : {}   kernel {}   jtrace {}",
        m.pid, m.kernel, m.jtrace_version
    );
    let _ = writeln!(
        s,
        "# started   : {} (realtime ns {}), CLOCK_MONOTONIC {} ns",
        crate::fmt_realtime(m.start_realtime_ns),
        m.start_realtime_ns,
        m.start_monotonic_ns
    );
    let _ = writeln!(
        s,
        "# duration  : {} ms{}",
        ms(m.end_monotonic_ns.saturating_sub(m.start_monotonic_ns)),
        m.exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "# events    : kernel {} (lost {}), jvm {} (lost {}), JVMs {:?}",
        trace.kernel_records, trace.losses.kernel, trace.jvm_records, trace.losses.jvm, trace.jvm_pids
    );
    if !m.methods.is_empty() {
        let _ = writeln!(s, "# methods   : {}", m.methods.join(" "));
    }
    if !m.complete {
        let _ = writeln!(
            s,
            "# WARNING   : recording did not finish cleanly; this is a readable prefix"
        );
    }
    for p in &trace.losses.truncated {
        let _ = writeln!(s, "# WARNING   : {p}");
    }
    for p in &trace.losses.agent_errors {
        let _ = writeln!(s, "# AGENT     : {p}");
    }
    let _ = writeln!(
        s,
        "# columns   : ms since start; → entry, ← exit with wall/CPU µs; ⇣ off-CPU interval"
    );
    // Lines past 120 columns go on under their key, each a comment still.
    s.lines()
        .map(|l| crate::text_fit::wrap(l, crate::text_fit::WIDTH, 14).replace("\n              ", "\n#             "))
        .collect()
}

/// Writes the merged text trace of `trace` (opened whole) to `out`.
pub fn write_text(trace: &Trace, out: impl Write, opts: &TextOptions) -> io::Result<()> {
    let lookup = Lookup::Whole(CallIndex::build(trace));
    run(trace, lookup, out, opts, |w| {
        analyze(trace, w);
        Ok(())
    })
    .map_err(|e| match e.downcast::<io::Error>() {
        Ok(io) => io,
        Err(e) => io::Error::other(e),
    })
}

/// Writes the merged text trace of the trace directory `dir` to `out`,
/// streaming: the same bytes as [`write_text`], in memory bounded by
/// `stream`'s budget (plus threads × stack depth), not by the trace's length.
/// Beyond the budget, sorted runs go to temporary files.
pub fn write_text_streaming(
    dir: &Path,
    out: impl Write,
    opts: &TextOptions,
    stream: &StreamOptions,
) -> anyhow::Result<()> {
    let so = StreamOptions {
        waker_methods: true,
        ..stream.clone()
    };
    let (trace, events) = crate::open_streamed(dir, &so)?;
    let lookup = Lookup::Streamed {
        wakes: VecDeque::new(),
        syscalls: VecDeque::new(),
    };
    run(&trace, lookup, out, opts, |w| {
        stream::analyze_with_wakers(&trace, events, w)
    })
}

/// The text trace as an [`Exporter`]: [`write_text`], streamed by
/// [`write_text_streaming`].
#[derive(Debug, Clone, Default)]
pub struct Text(pub TextOptions);

impl Exporter for Text {
    fn name(&self) -> &'static str {
        "text"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        Ok(write_text(trace, out, &self.0)?)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, stream: &StreamOptions) -> anyhow::Result<()> {
        write_text_streaming(dir, out, &self.0, stream)
    }
}

/// Writes the header, then walks the threads with `walk`.
fn run<W: Write>(
    trace: &Trace,
    lookup: Lookup,
    out: W,
    opts: &TextOptions,
    walk: impl FnOnce(&mut TextWriter<'_, W>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut w = TextWriter {
        trace,
        symbols: if opts.lines {
            Symbolizer::new(trace).with_lines()
        } else {
            Symbolizer::new(trace)
        },
        lookup,
        labels: MethodLabels::new(
            (trace.methods.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str())),
        ),
        out,
        opts: opts.clone(),
        t0: trace.meta.start_monotonic_ns,
        thread_buf: String::new(),
        thread_has_calls: false,
        err: None,
    };
    w.out.write_all(header(trace).as_bytes())?;
    walk(&mut w)?;
    if let Some(e) = w.err {
        return Err(e.into());
    }
    w.out.flush()?;
    Ok(())
}

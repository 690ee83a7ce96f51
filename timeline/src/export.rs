//! Exports of a merged trace into formats other tools read:
//!
//! * [`write_chrome`]: Chrome trace-event JSON, for Perfetto UI and chrome://tracing;
//! * [`write_collapsed`]: folded stacks of off-CPU time by cause (flame graphs, speedscope);
//! * [`write_csv`]: one row per method invocation with the report's columns.
//!
//! [`collect`] is the shared model underneath (also used by the HTML timeline):
//! every thread's invocations and off-CPU intervals, in memory.
//!
//! The collapsed and CSV exports also stream ([`write_collapsed_streaming`],
//! [`write_csv_streaming`]): the same bytes from a trace of any length, in
//! memory bounded by a budget. The Chrome export embeds every invocation and
//! interval of the trace in one JSON document by nature, so it reads the
//! whole trace into memory (as the HTML timeline does).

use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    analyze, describe_evidence, Breakdown, Cause, Event, Evidence, Invocation, MethodIdx, OffCpuInterval, ThreadInfo,
    ThreadTotals, Trace, Visitor, Wake,
};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

/// One method invocation of a thread, with its depth on the stack.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The invocation, as the merge reported it.
    pub inv: Invocation,
    /// Frames below it (0 = outermost traced frame).
    pub depth: usize,
}

/// One off-CPU interval of a thread (switch-out to switch-in), with the
/// traced depth at the time.
#[derive(Debug, Clone, Copy)]
pub struct OffSpan {
    /// Switch-out time.
    pub start: u64,
    /// Switch-in time.
    pub end: u64,
    /// Involuntary (preempted while runnable).
    pub preempted: bool,
    /// The wakeup that ended the block, if any.
    pub wake: Option<Wake>,
    /// The interval split by cause (sums to `end - start`).
    pub split: Breakdown,
    /// What explained the blocked part, as it stood at switch-out (see
    /// [`describe_evidence`]); [`Evidence::None`] for the reconstructed tail.
    pub evidence: Evidence,
    /// Traced frames open during the interval (0 = outside any traced method).
    pub depth: usize,
    /// No switch-in ended it: the thread was still off CPU at its last event.
    /// Reconstructed from the thread totals so views add up to them exactly.
    pub open: bool,
}

/// Everything the views need about one thread.
#[derive(Debug, Clone)]
pub struct ThreadData {
    /// Who the thread is.
    pub info: ThreadInfo,
    /// Its invocations, sorted by entry time (parents before children).
    pub spans: Vec<Span>,
    /// Its off-CPU intervals, sorted by start.
    pub offs: Vec<OffSpan>,
    /// Its totals over its traced life.
    pub totals: ThreadTotals,
}

impl ThreadData {
    /// 0 = application Java thread, 1 = JVM-internal Java thread (groups
    /// "system" and "InnocuousThreadGroup"), 2 = native thread: the order in
    /// which views list threads.
    pub fn category(&self) -> u8 {
        match &self.info.java_name {
            Some(_) if !matches!(self.info.group.as_str(), "system" | "InnocuousThreadGroup") => 0,
            Some(_) => 1,
            None => 2,
        }
    }
}

#[derive(Default)]
struct Collector {
    threads: Vec<ThreadData>,
    cur: Option<ThreadData>,
    off_sum: Breakdown,
}

impl Visitor for Collector {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.cur = Some(ThreadData {
            info: t.clone(),
            spans: Vec::new(),
            offs: Vec::new(),
            totals: Default::default(),
        });
        self.off_sum = Breakdown::default();
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, inv: &Invocation) {
        if let Some(c) = &mut self.cur {
            c.spans.push(Span { inv: *inv, depth });
        }
    }
    fn off_cpu(&mut self, _t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.off_sum += iv.split;
        if let Some(c) = &mut self.cur {
            c.offs.push(OffSpan {
                start: iv.start,
                end: iv.end,
                preempted: iv.preempted,
                wake: iv.wake,
                split: iv.split,
                evidence: iv.evidence,
                depth,
                open: false,
            });
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        let Some(mut c) = self.cur.take() else { return };
        c.totals = *totals;
        // Off-CPU time after the last switch-out has no switch-in to report
        // it; it is the tail of the thread's life, so rebuild it there.
        let tail = totals.breakdown.off.total().saturating_sub(self.off_sum.off.total());
        if tail > 0
            && totals
                .breakdown
                .off
                .0
                .iter()
                .zip(self.off_sum.off.0.iter())
                .all(|(a, b)| a >= b)
        {
            let mut split = Breakdown {
                wall: tail,
                ..Default::default()
            };
            split.off = totals.breakdown.off - self.off_sum.off;
            let depth = c
                .spans
                .iter()
                .filter(|s| s.inv.unfinished && s.inv.exit == t.last_ts)
                .count();
            c.offs.push(OffSpan {
                start: t.last_ts - tail,
                end: t.last_ts,
                preempted: false,
                wake: None,
                split,
                evidence: Evidence::None,
                depth,
                open: true,
            });
        }
        c.spans.sort_by_key(|s| (s.inv.entry, s.depth));
        c.offs.sort_by_key(|o| o.start);
        self.threads.push(c);
    }
}

/// Collects every thread of `trace` (in tid order) with its invocations and
/// off-CPU intervals.
pub fn collect(trace: &Trace) -> Vec<ThreadData> {
    let mut c = Collector::default();
    analyze(trace, &mut c);
    c.threads
}

/// A JVM-wide stop: a garbage collection or another safepoint, during which
/// every Java thread of that JVM is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmWindow {
    /// The JVM's process id.
    pub pid: u32,
    /// [`Cause::Gc`] or [`Cause::Safepoint`] (any cause the trace's
    /// [`Event::Window`] events carry).
    pub cause: Cause,
    /// 1-based number of this window among the JVM's windows of the same cause.
    pub seq: u32,
    /// Begin, CLOCK_MONOTONIC ns.
    pub start: u64,
    /// End; the JVM's last event if the window never ended (`open`).
    pub end: u64,
    /// No end was recorded.
    pub open: bool,
}

/// The GC and safepoint windows of every JVM of `trace`, by start time.
///
/// The merge copies each JVM-wide window into the event list of every Java
/// thread of that JVM ([`Event::Window`]); this takes their union per JVM
/// (so a window is found whichever threads received it) and pairs begins with
/// ends per cause. A nested begin is part of the open window; an end without
/// a begin is ignored.
pub fn jvm_windows(trace: &Trace) -> Vec<JvmWindow> {
    use std::collections::BTreeSet;
    // pid -> (ts, end-before-begin, cause, begin)
    let mut marks: BTreeMap<u32, BTreeSet<(u64, bool, usize, bool)>> = BTreeMap::new();
    let mut last_ts: HashMap<u32, u64> = HashMap::new();
    for (tid, evs) in &trace.events {
        let Some(info) = trace.threads.get(tid) else { continue };
        let pid = pid_of(trace, info);
        let mut any = false;
        for e in evs {
            if let Event::Window { cause, begin } = e.event {
                marks
                    .entry(pid)
                    .or_default()
                    .insert((e.ts, begin, cause as usize, begin));
                any = true;
            }
        }
        if any {
            let l = last_ts.entry(pid).or_default();
            *l = (*l).max(info.last_ts);
        }
    }
    let mut out = Vec::new();
    for (pid, ms) in marks {
        let mut open: HashMap<usize, u64> = HashMap::new();
        let mut seq: HashMap<usize, u32> = HashMap::new();
        let mut push = |c: usize, start: u64, end: u64, is_open: bool, out: &mut Vec<JvmWindow>| {
            let n = seq.entry(c).or_default();
            *n += 1;
            out.push(JvmWindow {
                pid,
                cause: Cause::ALL[c],
                seq: *n,
                start,
                end: end.max(start),
                open: is_open,
            });
        };
        for (ts, _, c, begin) in ms {
            if begin {
                open.entry(c).or_insert(ts);
            } else if let Some(s) = open.remove(&c) {
                push(c, s, ts, false, &mut out);
            }
        }
        let mut rest: Vec<(usize, u64)> = open.into_iter().collect();
        rest.sort_by_key(|&(_, s)| s);
        for (c, s) in rest {
            push(c, s, last_ts.get(&pid).copied().unwrap_or(s), true, &mut out);
        }
    }
    out.sort_by_key(|w| (w.start, w.pid, w.cause as usize));
    out
}

/// The causes of an interval laid out in time, as `(start, end, cause)`.
///
/// The merge gives only the per-cause split of an interval. Its rule
/// (DESIGN.md) is that the blocked part comes first and the `runqueue` part
/// (wakeup to switch-in) last, so the non-runqueue causes are laid out from
/// the start in column order, and `runqueue` at the end. Durations are exact.
/// See [`cause_segments_in`] to place GC/safepoint parts at their windows.
pub fn cause_segments(o: &OffSpan) -> Vec<(u64, u64, Cause)> {
    let mut v = Vec::new();
    let mut t = o.start;
    for (c, ns) in o.split.off.nonzero().filter(|(c, _)| *c != Cause::Runqueue) {
        v.push((t, t + ns, c));
        t += ns;
    }
    let rq = o.split.off.get(Cause::Runqueue);
    if rq > 0 {
        v.push((t, t + rq, Cause::Runqueue));
    }
    v
}

/// [`cause_segments`], with the parts of window causes (GC, safepoint) put
/// where the windows of the thread's JVM (`pid`) overlap the blocked part:
/// the merge counts exactly those overlaps as the window's cause (the first
/// cause in column order wins where windows nest, as gc inside a
/// safepoint), so the slices line up with the windows. The other blocked
/// causes fill the rest of the blocked part around them in column order
/// (cut where a window interrupts them); `runqueue` stays last. Durations
/// are exact; segments are in time order. A cause whose windows cannot hold
/// its part is laid out like the others.
pub fn cause_segments_in(o: &OffSpan, windows: &[JvmWindow], pid: u32) -> Vec<(u64, u64, Cause)> {
    let blocked: Vec<(Cause, u64)> = o.split.off.nonzero().filter(|(c, _)| *c != Cause::Runqueue).collect();
    let b_end = o.start + blocked.iter().map(|(_, ns)| ns).sum::<u64>();
    // Disjoint, sorted by start.
    let mut reserved: Vec<(u64, u64, Cause)> = Vec::new();
    for &(wc, v) in &blocked {
        let mut slots = Vec::new();
        let mut left = v;
        for w in windows
            .iter()
            .take_while(|w| w.start < b_end)
            .filter(|w| w.cause == wc && w.pid == pid && w.end > o.start)
        {
            for (a, b) in free_parts(w.start.max(o.start), w.end.min(b_end), &reserved) {
                if left == 0 {
                    break;
                }
                let n = (b - a).min(left);
                slots.push((a, a + n, wc));
                left -= n;
            }
        }
        if !slots.is_empty() && left == 0 {
            reserved.extend(slots);
            reserved.sort_by_key(|r| r.0);
        }
    }
    if reserved.is_empty() {
        return cause_segments(o);
    }
    let mut out = reserved.clone();
    let (mut t, mut si) = (o.start, 0);
    for &(c, ns) in blocked.iter().filter(|(c, _)| !reserved.iter().any(|r| r.2 == *c)) {
        let mut n = ns;
        while n > 0 {
            while si < reserved.len() && t >= reserved[si].0 {
                t = t.max(reserved[si].1);
                si += 1;
            }
            let lim = reserved.get(si).map_or(b_end, |r| r.0);
            let p = n.min(lim.saturating_sub(t));
            if p == 0 {
                break;
            }
            out.push((t, t + p, c));
            t += p;
            n -= p;
        }
    }
    let rq = o.split.off.get(Cause::Runqueue);
    if rq > 0 {
        out.push((b_end, b_end + rq, Cause::Runqueue));
    }
    out.sort_by_key(|s| s.0);
    out
}

/// The parts of `[a, b)` not covered by `reserved` (disjoint, sorted).
fn free_parts(a: u64, b: u64, reserved: &[(u64, u64, Cause)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = a;
    for &(ra, rb, _) in reserved {
        if rb <= t {
            continue;
        }
        if ra >= b {
            break;
        }
        if ra > t {
            out.push((t, ra));
        }
        t = t.max(rb);
    }
    if t < b {
        out.push((t, b));
    }
    out
}

/// Order in which views list threads: application threads, then JVM threads,
/// then native threads; by tid within each group.
pub fn thread_order(threads: &[ThreadData]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..threads.len()).collect();
    idx.sort_by_key(|&i| (threads[i].category(), threads[i].info.tid));
    idx
}

/// The earliest timestamp of a trace: views show times relative to it.
pub fn time_origin(trace: &Trace) -> u64 {
    let first = trace
        .threads
        .values()
        .filter(|t| t.first_ts > 0)
        .map(|t| t.first_ts)
        .min();
    match (trace.meta.start_monotonic_ns, first) {
        (0, Some(f)) => f,
        (s, Some(f)) => s.min(f),
        (s, None) => s,
    }
}

/// Formats nanoseconds as microseconds with exact fractional digits, as a
/// JSON number (Chrome trace timestamps are µs).
fn us_num(ns: u64) -> String {
    let (us, frac) = (ns / 1000, ns % 1000);
    if frac == 0 {
        format!("{us}")
    } else {
        format!("{us}.{frac:03}")
    }
}

/// Thread ids of the per-thread "state" tracks in the Chrome export: Linux
/// tids stay below 2^22, so this never collides with a real tid.
pub const STATE_TID_OFFSET: u32 = 1 << 30;

/// Thread id of the per-process "JVM stops" track (GC and safepoint
/// windows) in the Chrome export: above any Linux tid, below the state tracks.
pub const STOPS_TID: u32 = STATE_TID_OFFSET - 1;

fn off_args(o: &jtrace_merge::OffCpu) -> serde_json::Map<String, serde_json::Value> {
    o.nonzero().map(|(c, ns)| (c.name().to_string(), json!(ns))).collect()
}

/// Writes `trace` as Chrome trace-event JSON (`{"traceEvents": [...]}`).
///
/// Per thread: a track with the method invocations as complete (`X`)
/// events, which nest, and a track "state" (tid + [`STATE_TID_OFFSET`]) with
/// `running` and off-CPU slices named by cause (category `sched`, with the
/// evidence text in `args.evidence`). Each wakeup by a traced thread is a
/// flow arrow (`s` → `f`, bound to the enclosing slices) from the waker's
/// state track to the wakee's. Per JVM, a track "JVM stops" ([`STOPS_TID`])
/// has the GC and safepoint windows ([`jvm_windows`], category `jvm`).
/// Timestamps are µs since the trace's start ([`time_origin`]).
pub fn write_chrome(trace: &Trace, mut out: impl Write) -> io::Result<()> {
    let threads = collect(trace);
    let t0 = time_origin(trace);
    let rel = |ts: u64| us_num(ts.saturating_sub(t0));
    let known: HashMap<u32, (u32, String)> = threads
        .iter()
        .map(|t| (t.info.tid, (pid_of(trace, &t.info), t.info.display_name().to_string())))
        .collect();
    let mut first = true;
    let mut emit = |out: &mut dyn Write, v: String| -> io::Result<()> {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        first = false;
        out.write_all(v.as_bytes())
    };
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(
        &mut out,
        &json!({
            "tool": "jtrace",
            "command": trace.meta.command.join(" "),
            "start_realtime_ns": trace.meta.start_realtime_ns,
            "start_monotonic_ns": t0,
            "lost_events_kernel": trace.losses.kernel,
            "lost_events_jvm": trace.losses.jvm,
            "complete": trace.meta.complete,
        }),
    )?;
    out.write_all(b",\"traceEvents\":[")?;

    let mut pids: BTreeMap<u32, ()> = BTreeMap::new();
    for t in &threads {
        pids.insert(pid_of(trace, &t.info), ());
    }
    for pid in pids.keys() {
        let name = if *pid == trace.meta.pid && !trace.meta.command.is_empty() {
            trace.meta.command.join(" ")
        } else {
            format!("process {pid}")
        };
        let v = json!({"ph":"M","name":"process_name","pid":pid,"tid":0,"args":{"name":name}});
        emit(&mut out, v.to_string())?;
    }
    // JVM-wide stops first, on a track of their own above the threads.
    let windows = jvm_windows(trace);
    let mut named: BTreeMap<u32, ()> = BTreeMap::new();
    for w in &windows {
        if named.insert(w.pid, ()).is_none() {
            for (name, args) in [
                ("thread_name", json!({"name": "JVM stops (GC, safepoints)"})),
                ("thread_sort_index", json!({"sort_index": -1})),
            ] {
                emit(
                    &mut out,
                    json!({"ph":"M","name":name,"pid":w.pid,"tid":STOPS_TID,"args":args}).to_string(),
                )?;
            }
        }
        let args = json!({"cause": w.cause.name(), "seq": w.seq, "duration_ns": w.end - w.start, "open": w.open});
        emit(
            &mut out,
            format!(
                "{{\"ph\":\"X\",\"cat\":\"jvm\",\"name\":\"{} #{}\",\"pid\":{},\"tid\":{STOPS_TID},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                window_name(w.cause),
                w.seq,
                w.pid,
                rel(w.start),
                us_num(w.end - w.start)
            ),
        )?;
    }
    let mut flow_id = 0u64;
    for (rank, &i) in thread_order(&threads).iter().enumerate() {
        let t = &threads[i];
        let (pid, tid) = (pid_of(trace, &t.info), t.info.tid);
        let stid = tid + STATE_TID_OFFSET;
        let name = format!("{} [{}]", t.info.display_name(), tid);
        for (track, tname, sort) in [
            (stid, format!("{name} state"), 2 * rank),
            (tid, name.clone(), 2 * rank + 1),
        ] {
            emit(
                &mut out,
                json!({"ph":"M","name":"thread_name","pid":pid,"tid":track,"args":{"name":tname}}).to_string(),
            )?;
            emit(
                &mut out,
                json!({"ph":"M","name":"thread_sort_index","pid":pid,"tid":track,"args":{"sort_index":sort}})
                    .to_string(),
            )?;
        }
        for s in &t.spans {
            let m = &trace.methods[s.inv.method as usize];
            let b = &s.inv.breakdown;
            let args = json!({
                "signature": m.signature, "wall_ns": b.wall, "cpu_ns": b.cpu, "off_cpu_ns": off_args(&b.off),
                "voluntary_switches": b.voluntary, "involuntary_switches": b.involuntary,
                "exception": s.inv.exception, "unfinished": s.inv.unfinished, "outermost": s.inv.outermost,
                "depth": s.depth,
            });
            emit(
                &mut out,
                format!(
                    "{{\"ph\":\"X\",\"cat\":\"method\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                    serde_json::to_string(&m.qualified())?,
                    rel(s.inv.entry),
                    us_num(b.wall),
                ),
            )?;
        }
        // The state track: running between off-CPU intervals, then each
        // interval's causes in time order.
        let mut run_from = t.info.first_ts;
        for o in &t.offs {
            if o.start > run_from {
                emit(
                    &mut out,
                    format!(
                        "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"running\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{}}}",
                        rel(run_from),
                        us_num(o.start - run_from)
                    ),
                )?;
            }
            run_from = run_from.max(o.end);
            let mut args = json!({
                "interval_ns": o.end - o.start,
                "split_ns": off_args(&o.split.off),
                "switch": if o.open { "none (still off CPU at end)" } else if o.preempted { "involuntary" } else { "voluntary" },
            });
            if !matches!(o.evidence, Evidence::None | Evidence::Preempted) {
                args["evidence"] = json!(describe_evidence(trace, &o.evidence));
            }
            if let Some(w) = o.wake {
                args["waker_tid"] = json!(w.waker_tid);
                args["waker_pid"] = json!(w.waker_tgid);
                if let Some((_, n)) = known.get(&w.waker_tid) {
                    args["waker"] = json!(n);
                }
                args["wake_ts_us"] = json!(rel(w.ts).parse::<f64>().unwrap_or(0.0));
            }
            for (s, e, c) in cause_segments_in(o, &windows, pid) {
                emit(
                    &mut out,
                    format!(
                        "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"{}\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                        c.name(),
                        rel(s),
                        us_num(e - s)
                    ),
                )?;
            }
            if let Some(w) = o.wake {
                if let Some((wpid, _)) = known
                    .get(&w.waker_tid)
                    .filter(|_| w.waker_tid != 0 && w.waker_tid != tid)
                {
                    flow_id += 1;
                    emit(
                        &mut out,
                        flow(flow_id, "s", *wpid, w.waker_tid + STATE_TID_OFFSET, &rel(w.ts)),
                    )?;
                    emit(&mut out, flow(flow_id, "f", pid, stid, &rel(w.ts)))?;
                }
            }
        }
        if t.info.last_ts > run_from {
            emit(
                &mut out,
                format!(
                    "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"running\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{}}}",
                    rel(run_from),
                    us_num(t.info.last_ts - run_from)
                ),
            )?;
        }
    }
    out.write_all(b"\n]}\n")?;
    out.flush()
}

/// "GC" or "safepoint": how views name a JVM-wide stop of `cause`.
pub fn window_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Gc => "GC",
        Cause::Safepoint => "safepoint",
        c => c.name(),
    }
}

fn flow(id: u64, ph: &str, pid: u32, tid: u32, ts: &str) -> String {
    format!(
        "{{\"ph\":\"{ph}\",\"cat\":\"wakeup\",\"name\":\"wakeup\",\"id\":{id},\"bp\":\"e\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts}}}"
    )
}

fn pid_of(trace: &Trace, t: &ThreadInfo) -> u32 {
    if t.tgid != 0 {
        t.tgid
    } else {
        trace.meta.pid
    }
}

/// What [`write_collapsed`] writes.
#[derive(Debug, Clone, Default)]
pub struct CollapsedOptions {
    /// Put the thread (`name [tid]`) between the cause and the frames.
    pub thread: bool,
    /// Also count off-CPU time outside traced methods, under the frame
    /// `[no traced method]` (then the totals per cause are the threads' totals).
    pub all: bool,
}

/// Frame standing for "no traced method open" in the collapsed output.
pub const NO_METHOD_FRAME: &str = "[no traced method]";

struct Folder<'a> {
    trace: &'a Trace,
    opts: &'a CollapsedOptions,
    stack: Vec<MethodIdx>,
    /// The stack as it was when the thread's last event closed it.
    tail_stack: Option<Vec<MethodIdx>>,
    off_sum: jtrace_merge::OffCpu,
    folded: BTreeMap<String, u64>,
}

impl Folder<'_> {
    fn add(&mut self, t: &ThreadInfo, depth: usize, off: &jtrace_merge::OffCpu) {
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
        self.tail_stack = None;
        self.off_sum = Default::default();
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        if inv.unfinished && inv.exit == t.last_ts && self.tail_stack.is_none() {
            self.tail_stack = Some(self.stack.clone());
        }
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.off_sum += iv.split.off;
        self.add(t, depth, &iv.split.off);
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        // The tail after the last switch-out (see `collect`), at the stack
        // that was open at the thread's last event.
        let all = totals.breakdown.off;
        if all.0.iter().zip(self.off_sum.0.iter()).all(|(a, b)| a >= b) {
            let tail = all - self.off_sum;
            if tail.total() > 0 {
                self.stack = self.tail_stack.take().unwrap_or_default();
                self.add(t, self.stack.len(), &tail);
            }
        }
    }
}

/// Writes off-CPU time as folded stacks (Brendan Gregg's collapsed format,
/// read by flamegraph.pl, inferno and speedscope): one line per distinct
/// stack, `cause;Outer.method;...;Inner.method N`, where N is **nanoseconds**
/// off CPU with that cause at that stack, frames outermost first. With
/// [`CollapsedOptions::thread`] the thread is the second frame.
pub fn write_collapsed(trace: &Trace, opts: &CollapsedOptions, out: impl Write) -> io::Result<()> {
    let mut f = Folder::new(trace, opts);
    analyze(trace, &mut f);
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
    f.write(out)?;
    Ok(())
}

impl<'a> Folder<'a> {
    fn new(trace: &'a Trace, opts: &'a CollapsedOptions) -> Self {
        Folder {
            trace,
            opts,
            stack: Vec::new(),
            tail_stack: None,
            off_sum: Default::default(),
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

/// Column names of [`write_csv`], in order.
pub fn csv_header() -> Vec<String> {
    let mut h: Vec<String> = [
        "tid",
        "pid",
        "thread",
        "class",
        "method",
        "signature",
        "entry_ns",
        "exit_ns",
        "wall_ns",
        "cpu_ns",
        "off_cpu_ns",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    h.extend(Cause::ALL.iter().map(|c| format!("{}_ns", c.name())));
    h.extend(
        [
            "voluntary",
            "involuntary",
            "exception",
            "depth",
            "outermost",
            "unfinished",
            "native",
            "compiled",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    h
}

/// Writes one CSV row per method invocation (threads in tid order,
/// invocations by entry time): the report's columns, `off_cpu_ns` (their
/// sum) and one `<cause>_ns` column per cause in DESIGN.md order, times in
/// CLOCK_MONOTONIC ns, booleans as `true`/`false`. `outermost` is false for
/// a recursive invocation nested in another of the same method; the report
/// sums only outermost rows. `native` marks a library call (uprobe span).
/// `compiled`: the method had compiled code of its own when the call began
/// (the report's JIT state); empty when the JVM recorded no JIT events or
/// for a library call.
pub fn write_csv(trace: &Trace, out: impl Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(csv_header())?;
    for t in collect(trace) {
        let name = t.info.display_name().to_string();
        for s in &t.spans {
            w.write_record(csv_row(trace, &t.info, &name, s))?;
        }
    }
    w.flush()?;
    Ok(())
}

/// One row of [`write_csv`].
fn csv_row(trace: &Trace, t: &ThreadInfo, name: &str, s: &Span) -> Vec<String> {
    let m = &trace.methods[s.inv.method as usize];
    let b = &s.inv.breakdown;
    let mut row: Vec<String> = vec![
        t.tid.to_string(),
        pid_of(trace, t).to_string(),
        name.to_string(),
        m.class.clone(),
        m.name.clone(),
        m.signature.clone(),
        s.inv.entry.to_string(),
        s.inv.exit.to_string(),
        b.wall.to_string(),
        b.cpu.to_string(),
        b.off.total().to_string(),
    ];
    row.extend(Cause::ALL.iter().map(|c| b.off.get(*c).to_string()));
    row.extend([
        b.voluntary.to_string(),
        b.involuntary.to_string(),
        s.inv.exception.to_string(),
        s.depth.to_string(),
        s.inv.outermost.to_string(),
        s.inv.unfinished.to_string(),
        m.native.to_string(),
        (!m.native)
            .then(|| trace.jit.compiled_at(pid_of(trace, t), s.inv.method, s.inv.entry))
            .flatten()
            .map_or(String::new(), |c| c.to_string()),
    ]);
    row
}

/// A formatted CSV row waiting for its turn: sorted by (entry, depth), ties
/// in exit order (`seq`), as [`write_csv`] sorts a thread's spans.
struct Row {
    key: (u64, u64, u64),
    bytes: Vec<u8>,
}

/// Bytes a waiting row costs besides its text.
const ROW_OVERHEAD: usize = std::mem::size_of::<Row>() + 16;

/// Writes CSV rows as a walk finishes invocations, in [`write_csv`]'s order
/// (per thread by entry time, then depth; ties in exit order).
///
/// A row is final at its exit, but rows go out by entry: an invocation's
/// row precedes its callees'. So the rows of an outermost invocation wait
/// until it returns; then those that entered before that moment are sorted
/// and written (any later row enters later), the others wait for the next.
/// Rows waiting beyond `cap` bytes (a long outermost invocation such as a
/// traced `main`) are written, sorted, to a temporary file and merged back at
/// the flush, so memory stays bounded whatever the trace's length.
struct CsvRows<'a, W: Write> {
    trace: &'a Trace,
    out: W,
    /// Formats one record exactly as a csv::Writer on `out` would, into `buf`.
    fmt: csv::Writer<Shared>,
    buf: Shared,
    name: String,
    rows: Vec<Row>,
    /// Bytes held by `rows`.
    bytes: usize,
    seq: u64,
    /// Sorted runs of waiting rows on disk.
    runs: Vec<File>,
    cap: usize,
    temp_dir: PathBuf,
    err: Option<anyhow::Error>,
}

impl<W: Write> CsvRows<'_, W> {
    /// The bytes of one record.
    fn format(&mut self, row: &[String]) -> anyhow::Result<Vec<u8>> {
        self.fmt.write_record(row)?;
        self.fmt.flush()?;
        Ok(std::mem::take(&mut *self.buf.0.borrow_mut()))
    }

    fn push(&mut self, t: &ThreadInfo, s: &Span) -> anyhow::Result<()> {
        let bytes = self.format(&csv_row(self.trace, t, &self.name, s))?;
        self.bytes += bytes.len() + ROW_OVERHEAD;
        self.rows.push(Row {
            key: (s.inv.entry, s.depth as u64, self.seq),
            bytes,
        });
        self.seq += 1;
        if self.bytes > self.cap {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the waiting rows, sorted, as a run on disk.
    fn spill(&mut self) -> anyhow::Result<()> {
        let file = stream::unlinked_temp_file(&self.temp_dir, "csv").map_err(|e| {
            anyhow::anyhow!(
                "cannot create a sorted run of CSV rows in {}: {e} (set TMPDIR or --temp-dir)",
                self.temp_dir.display()
            )
        })?;
        let werr = |e: io::Error| anyhow::anyhow!("cannot write a sorted run of CSV rows: {e}");
        let mut w = io::BufWriter::with_capacity(1 << 20, &file);
        self.rows.sort_unstable_by_key(|r| r.key);
        for r in self.rows.drain(..) {
            let (e, d, q) = r.key;
            for v in [e, d, q, r.bytes.len() as u64] {
                w.write_all(&v.to_le_bytes()).map_err(werr)?;
            }
            w.write_all(&r.bytes).map_err(werr)?;
        }
        w.flush().map_err(werr)?;
        drop(w);
        self.bytes = 0;
        self.runs.push(file);
        Ok(())
    }

    /// Writes, in order, the waiting rows that entered before `before`; the
    /// others (entered at `before` exactly) keep waiting.
    fn flush(&mut self, before: u64) -> anyhow::Result<()> {
        self.rows.sort_unstable_by_key(|r| r.key);
        if self.runs.is_empty() {
            let n = self.rows.partition_point(|r| r.key.0 < before);
            for r in self.rows.drain(..n) {
                self.out.write_all(&r.bytes)?;
                self.bytes -= r.bytes.len() + ROW_OVERHEAD;
            }
            return Ok(());
        }
        // Merge the runs and the rows in memory by key.
        let rerr = |e: io::Error| anyhow::anyhow!("cannot read back a sorted run of CSV rows: {e}");
        let mut readers = Vec::new();
        for f in std::mem::take(&mut self.runs) {
            let mut f = f;
            f.seek(io::SeekFrom::Start(0)).map_err(rerr)?;
            readers.push(io::BufReader::with_capacity(64 << 10, f));
        }
        let mut heads: Vec<Option<Row>> = Vec::new();
        for r in &mut readers {
            heads.push(read_row(r).map_err(rerr)?);
        }
        let mem = std::mem::take(&mut self.rows);
        self.bytes = 0;
        let mut mem = mem.into_iter().peekable();
        loop {
            // The smallest head among the runs and the memory.
            let mut best: Option<(usize, (u64, u64, u64))> = None;
            for (i, h) in heads.iter().enumerate() {
                if let Some(h) = h {
                    if best.is_none_or(|b| h.key < b.1) {
                        best = Some((i, h.key));
                    }
                }
            }
            let row = match (best, mem.peek()) {
                (Some((_, k)), Some(m)) if m.key < k => mem.next().expect("peeked"),
                (Some((i, _)), _) => {
                    let next = read_row(&mut readers[i]).map_err(rerr)?;
                    std::mem::replace(&mut heads[i], next).expect("a head")
                }
                (None, Some(_)) => mem.next().expect("peeked"),
                (None, None) => break,
            };
            if row.key.0 < before {
                self.out.write_all(&row.bytes)?;
            } else {
                self.bytes += row.bytes.len() + ROW_OVERHEAD;
                self.rows.push(row);
            }
        }
        Ok(())
    }
}

/// A byte buffer the CSV formatter writes into and its owner takes from.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The next row of a run, `None` at its end.
fn read_row(r: &mut impl io::Read) -> io::Result<Option<Row>> {
    let mut h = [0u8; 32];
    match r.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let w = |i: usize| u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let mut bytes = vec![0u8; w(3) as usize];
    r.read_exact(&mut bytes)?;
    Ok(Some(Row {
        key: (w(0), w(1), w(2)),
        bytes,
    }))
}

impl<W: Write> Visitor for CsvRows<'_, W> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.name = t.display_name().to_string();
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        if self.err.is_some() {
            return;
        }
        let mut r = self.push(t, &Span { inv: *inv, depth });
        if r.is_ok() && depth == 0 {
            r = self.flush(inv.exit);
        }
        if let Err(e) = r {
            self.err = Some(e);
        }
    }
    fn thread_end(&mut self, _t: &ThreadInfo, _totals: &ThreadTotals) {
        if self.err.is_none() {
            if let Err(e) = self.flush(u64::MAX) {
                self.err = Some(e);
            }
        }
    }
}

/// [`write_csv`] of the trace directory `dir`, streaming: the same bytes, in
/// memory bounded by `stream`'s budget, not by the trace's length (rows
/// waiting for their turn beyond a quarter of the budget go to sorted runs
/// in the temporary directory, see [`CsvRows`]).
pub fn write_csv_streaming(dir: &Path, out: impl Write, stream: &StreamOptions) -> anyhow::Result<()> {
    let (trace, events) = crate::open_streamed(dir, stream)?;
    let buf = Shared::default();
    let mut w = CsvRows {
        trace: &trace,
        out,
        fmt: csv::Writer::from_writer(buf.clone()),
        buf,
        name: String::new(),
        rows: Vec::new(),
        bytes: 0,
        seq: 0,
        runs: Vec::new(),
        cap: (stream.memory_budget / 4).max(64 << 10),
        temp_dir: stream.temp_dir.clone().unwrap_or_else(std::env::temp_dir),
        err: None,
    };
    let header = w.format(&csv_header())?;
    w.out.write_all(&header)?;
    stream::analyze(&trace, events, &mut w)?;
    if let Some(e) = w.err {
        return Err(e);
    }
    w.out.flush()?;
    Ok(())
}

/// Name of a waker for display: `name [tid]`, or `tid N` if not traced.
pub fn waker_name(trace: &Trace, w: &Wake) -> String {
    match trace.threads.get(&w.waker_tid) {
        Some(t) if !t.display_name().is_empty() => format!("{} [{}]", t.display_name(), w.waker_tid),
        _ => format!("tid {}", w.waker_tid),
    }
}

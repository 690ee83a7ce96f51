//! The Chrome trace-event JSON export (`jtrace export --format chrome`), for
//! Perfetto UI and chrome://tracing. It embeds every invocation and interval
//! of the trace in one JSON document by nature, so it reads the whole trace
//! into memory (as the HTML timeline does).

use crate::export::Exporter;
use crate::model::{thread_order, time_origin, OffSpan, ThreadData, View};
use crate::process::pid_of;
use crate::segments::cause_segments_in;
use crate::windows::{window_name, JvmWindow, WindowIndex};
use jtrace_merge::{describe_evidence, Evidence, Trace};
use serde_json::json;
use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};

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

/// An off-CPU split as JSON args: `{cause: ns}` for the causes it has.
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
/// has the GC and safepoint windows ([`jvm_windows`](crate::jvm_windows), category `jvm`).
/// Timestamps are µs since the trace's start ([`time_origin`]).
pub fn write_chrome(trace: &Trace, out: impl Write) -> io::Result<()> {
    write_chrome_view(&View::whole(trace), out)
}

/// [`write_chrome`] of a [`View`]: the whole trace, or the part a scope
/// selects (`otherData.window_ns` and `threads` then say which).
pub fn write_chrome_view(view: &View, out: impl Write) -> io::Result<()> {
    let (trace, threads) = (view.trace, &view.threads);
    let mut doc = Doc {
        out,
        first: true,
        trace,
        t0: time_origin(trace),
        known: threads
            .iter()
            .map(|t| (t.info.tid, (pid_of(trace, &t.info), t.info.display_name().to_string())))
            .collect(),
        index: WindowIndex::new(&view.windows),
        // A scoped view's state tracks run within its window.
        window: view.scope.window.unwrap_or((0, u64::MAX)),
        flow_id: 0,
    };
    doc.header(view)?;
    doc.processes(threads)?;
    // JVM-wide stops first, on a track of their own above the threads.
    doc.stops(&view.windows)?;
    for (rank, &i) in thread_order(threads).iter().enumerate() {
        doc.thread(rank, &threads[i])?;
    }
    doc.out.write_all(b"\n]}\n")?;
    doc.out.flush()
}

/// The Chrome document being written, and what its parts share.
struct Doc<'a, W: Write> {
    out: W,
    /// No event written yet (events are comma-separated).
    first: bool,
    trace: &'a Trace,
    /// The time origin ([`time_origin`]).
    t0: u64,
    /// The threads drawn, by tid: their process and name.
    known: HashMap<u32, (u32, String)>,
    index: WindowIndex<'a>,
    /// The view's window (FROM, TO), absolute; the whole trace if unscoped.
    window: (u64, u64),
    /// The last wakeup arrow's id.
    flow_id: u64,
}

impl<W: Write> Doc<'_, W> {
    /// Appends one event to `traceEvents`.
    fn emit(&mut self, v: String) -> io::Result<()> {
        self.out.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        self.out.write_all(v.as_bytes())
    }

    /// `ts` as µs since the origin.
    fn rel(&self, ts: u64) -> String {
        us_num(ts.saturating_sub(self.t0))
    }

    /// The document up to `traceEvents`: what the trace is (`otherData`).
    fn header(&mut self, view: &View) -> io::Result<()> {
        let (trace, t0) = (self.trace, self.t0);
        self.out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        let mut other = json!({
            "tool": "jtrace",
            "command": trace.meta.command.join(" "),
            "start_realtime_ns": trace.meta.start_realtime_ns,
            "start_monotonic_ns": t0,
            "lost_events_kernel": trace.losses.kernel,
            "lost_events_jvm": trace.losses.jvm,
            "complete": trace.meta.complete,
        });
        if let Some((from, to)) = view.scope.window {
            other["window_ns"] = json!([from.saturating_sub(t0), to.saturating_sub(t0)]);
        }
        if let Some(t) = &view.scope.thread {
            other["threads"] = json!(t);
        }
        serde_json::to_writer(&mut self.out, &other)?;
        self.out.write_all(b",\"traceEvents\":[")
    }

    /// The name of each process the threads belong to.
    fn processes(&mut self, threads: &[ThreadData]) -> io::Result<()> {
        let trace = self.trace;
        let pids: BTreeSet<u32> = threads.iter().map(|t| pid_of(trace, &t.info)).collect();
        for pid in pids {
            let name = if pid == trace.meta.pid && !trace.meta.command.is_empty() {
                trace.meta.command.join(" ")
            } else {
                format!("process {pid}")
            };
            let v = json!({"ph":"M","name":"process_name","pid":pid,"tid":0,"args":{"name":name}});
            self.emit(v.to_string())?;
        }
        Ok(())
    }

    /// The GC and safepoint windows, on each JVM's "JVM stops" track.
    fn stops(&mut self, windows: &[JvmWindow]) -> io::Result<()> {
        let mut named = BTreeSet::new();
        for w in windows {
            if named.insert(w.pid) {
                for (name, args) in [
                    ("thread_name", json!({"name": "JVM stops (GC, safepoints)"})),
                    ("thread_sort_index", json!({"sort_index": -1})),
                ] {
                    self.emit(json!({"ph":"M","name":name,"pid":w.pid,"tid":STOPS_TID,"args":args}).to_string())?;
                }
            }
            let args = json!({"cause": w.cause.name(), "seq": w.seq, "duration_ns": w.end - w.start, "open": w.open});
            let v = format!(
                "{{\"ph\":\"X\",\"cat\":\"jvm\",\"name\":\"{} #{}\",\"pid\":{},\"tid\":{STOPS_TID},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                window_name(w.cause),
                w.seq,
                w.pid,
                self.rel(w.start),
                us_num(w.end - w.start)
            );
            self.emit(v)?;
        }
        Ok(())
    }

    /// A thread's two tracks (listed at `rank`): its invocations, and its
    /// state track.
    fn thread(&mut self, rank: usize, t: &ThreadData) -> io::Result<()> {
        let (pid, tid) = (pid_of(self.trace, &t.info), t.info.tid);
        let name = format!("{} [{}]", t.info.display_name(), tid);
        for (track, tname, sort) in [
            (tid + STATE_TID_OFFSET, format!("{name} state"), 2 * rank),
            (tid, name.clone(), 2 * rank + 1),
        ] {
            self.emit(json!({"ph":"M","name":"thread_name","pid":pid,"tid":track,"args":{"name":tname}}).to_string())?;
            self.emit(
                json!({"ph":"M","name":"thread_sort_index","pid":pid,"tid":track,"args":{"sort_index":sort}})
                    .to_string(),
            )?;
        }
        self.spans(t, pid)?;
        self.state_track(t, pid)
    }

    /// The thread's invocations, as complete events that nest.
    fn spans(&mut self, t: &ThreadData, pid: u32) -> io::Result<()> {
        let tid = t.info.tid;
        for s in &t.spans {
            let m = &self.trace.methods[s.inv.method as usize];
            let b = &s.inv.breakdown;
            let mut args = json!({
                "signature": m.signature, "wall_ns": b.wall, "cpu_ns": b.cpu, "off_cpu_ns": off_args(&b.off),
                "voluntary_switches": b.voluntary, "involuntary_switches": b.involuntary,
                "exception": s.inv.exception, "unfinished": s.inv.unfinished, "outermost": s.inv.outermost,
                "depth": s.depth,
            });
            if b.not_covered > 0 {
                args["not_covered_ns"] = json!(b.not_covered);
            }
            let v = format!(
                "{{\"ph\":\"X\",\"cat\":\"method\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                serde_json::to_string(&m.qualified())?,
                self.rel(s.inv.entry),
                us_num(b.wall),
            );
            self.emit(v)?;
        }
        Ok(())
    }

    /// The state track: running between off-CPU intervals, each interval's
    /// causes in time order, and where kernel data ends, not covered.
    fn state_track(&mut self, t: &ThreadData, pid: u32) -> io::Result<()> {
        let stid = t.info.tid + STATE_TID_OFFSET;
        let (from, to) = self.window;
        let mut run_from = t.info.first_ts.max(from);
        let last_ts = t.info.last_ts.min(to);
        for o in &t.offs {
            if o.start > run_from {
                self.running(pid, stid, run_from, o.start)?;
            }
            run_from = run_from.max(o.end);
            self.off_cpu(o, pid, t.info.tid)?;
        }
        // Running up to the thread's last event, or up to where kernel data
        // ends: from there on it is not known whether the thread ran.
        let covered = t.info.kernel_until.map_or(last_ts, |k| k.min(last_ts));
        if covered > run_from {
            self.running(pid, stid, run_from, covered)?;
        }
        let uncovered_from = covered.max(t.info.first_ts).max(from);
        if last_ts > uncovered_from {
            let v = format!(
                "{{\"ph\":\"X\",\"cat\":\"coverage\",\"name\":\"not covered\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{},\"args\":{{\"why\":\"no kernel data: the kernel stream ended early\"}}}}",
                self.rel(uncovered_from),
                us_num(last_ts - uncovered_from)
            );
            self.emit(v)?;
        }
        Ok(())
    }

    /// A `running` slice of state track `stid` from `start` to `end`.
    fn running(&mut self, pid: u32, stid: u32, start: u64, end: u64) -> io::Result<()> {
        let v = format!(
            "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"running\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{}}}",
            self.rel(start),
            us_num(end - start)
        );
        self.emit(v)
    }

    /// An off-CPU interval of thread `tid`: a slice per cause, and the
    /// arrow from its waker when the waker is another thread drawn.
    fn off_cpu(&mut self, o: &OffSpan, pid: u32, tid: u32) -> io::Result<()> {
        let stid = tid + STATE_TID_OFFSET;
        let mut args = json!({
            "interval_ns": o.end - o.start,
            "split_ns": off_args(&o.split.off),
            "switch": if o.open {
                "none (still off CPU at end)"
            } else if o.evidence == Evidence::Steal {
                "none (steal: its vCPU ran another guest)"
            } else if o.preempted {
                "involuntary"
            } else {
                "voluntary"
            },
        });
        if !matches!(o.evidence, Evidence::None | Evidence::Preempted) {
            args["evidence"] = json!(describe_evidence(self.trace, &o.evidence));
        }
        if let Some(w) = o.wake {
            args["waker_tid"] = json!(w.waker_tid);
            args["waker_pid"] = json!(w.waker_tgid);
            if let Some((_, n)) = self.known.get(&w.waker_tid) {
                args["waker"] = json!(n);
            }
            args["wake_ts_us"] = json!(self.rel(w.ts).parse::<f64>().unwrap_or(0.0));
        }
        for (s, e, c) in cause_segments_in(o, self.index.ending_after(o.start), pid) {
            let v = format!(
                "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"{}\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                c.name(),
                self.rel(s),
                us_num(e - s)
            );
            self.emit(v)?;
        }
        let Some(w) = o.wake else { return Ok(()) };
        let waker = self
            .known
            .get(&w.waker_tid)
            .filter(|_| w.waker_tid != 0 && w.waker_tid != tid);
        if let Some(&(wpid, _)) = waker {
            self.flow_id += 1;
            let ts = self.rel(w.ts);
            self.emit(flow(self.flow_id, "s", wpid, w.waker_tid + STATE_TID_OFFSET, &ts))?;
            self.emit(flow(self.flow_id, "f", pid, stid, &ts))?;
        }
        Ok(())
    }
}

/// One end (`ph` "s" at the waker, "f" at the wakee) of wakeup arrow `id`.
fn flow(id: u64, ph: &str, pid: u32, tid: u32, ts: &str) -> String {
    format!(
        "{{\"ph\":\"{ph}\",\"cat\":\"wakeup\",\"name\":\"wakeup\",\"id\":{id},\"bp\":\"e\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts}}}"
    )
}

/// The Chrome format as an [`Exporter`]: [`write_chrome`], which needs the
/// whole trace in memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Chrome;

impl Exporter for Chrome {
    fn name(&self) -> &'static str {
        "chrome"
    }
    fn streams(&self) -> bool {
        false
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        Ok(write_chrome(trace, out)?)
    }
}

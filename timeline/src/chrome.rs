//! The Chrome trace-event JSON export (`jtrace export --format chrome`), for
//! Perfetto UI and chrome://tracing. It embeds every invocation and interval
//! of the trace in one JSON document by nature, so it reads the whole trace
//! into memory (as the HTML timeline does).

use crate::export::Exporter;
use crate::model::{pid_of, thread_order, time_origin, View};
use crate::segments::cause_segments_in;
use crate::windows::{window_name, WindowIndex};
use jtrace_merge::{describe_evidence, Evidence, Trace};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
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
/// has the GC and safepoint windows ([`jvm_windows`], category `jvm`).
/// Timestamps are µs since the trace's start ([`time_origin`]).
pub fn write_chrome(trace: &Trace, out: impl Write) -> io::Result<()> {
    write_chrome_view(&View::whole(trace), out)
}

/// [`write_chrome`] of a [`View`]: the whole trace, or the part a scope
/// selects (`otherData.window_ns` and `threads` then say which).
pub fn write_chrome_view(view: &View, mut out: impl Write) -> io::Result<()> {
    let (trace, threads) = (view.trace, &view.threads);
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
    serde_json::to_writer(&mut out, &other)?;
    out.write_all(b",\"traceEvents\":[")?;

    let mut pids: BTreeMap<u32, ()> = BTreeMap::new();
    for t in threads {
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
    let windows = &view.windows;
    let index = WindowIndex::new(windows);
    let mut named: BTreeMap<u32, ()> = BTreeMap::new();
    for w in windows {
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
    // A scoped view's state tracks run within its window.
    let (from, to) = view.scope.window.unwrap_or((0, u64::MAX));
    for (rank, &i) in thread_order(threads).iter().enumerate() {
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
            let mut args = json!({
                "signature": m.signature, "wall_ns": b.wall, "cpu_ns": b.cpu, "off_cpu_ns": off_args(&b.off),
                "voluntary_switches": b.voluntary, "involuntary_switches": b.involuntary,
                "exception": s.inv.exception, "unfinished": s.inv.unfinished, "outermost": s.inv.outermost,
                "depth": s.depth,
            });
            if b.not_covered > 0 {
                args["not_covered_ns"] = json!(b.not_covered);
            }
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
        let mut run_from = t.info.first_ts.max(from);
        let last_ts = t.info.last_ts.min(to);
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
            for (s, e, c) in cause_segments_in(o, index.ending_after(o.start), pid) {
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
        // Running up to the thread's last event, or up to where kernel data
        // ends: from there on it is not known whether the thread ran.
        let covered = t.info.kernel_until.map_or(last_ts, |k| k.min(last_ts));
        if covered > run_from {
            emit(
                &mut out,
                format!(
                    "{{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"running\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{}}}",
                    rel(run_from),
                    us_num(covered - run_from)
                ),
            )?;
        }
        let uncovered_from = covered.max(t.info.first_ts).max(from);
        if last_ts > uncovered_from {
            emit(
                &mut out,
                format!(
                    "{{\"ph\":\"X\",\"cat\":\"coverage\",\"name\":\"not covered\",\"pid\":{pid},\"tid\":{stid},\"ts\":{},\"dur\":{},\"args\":{{\"why\":\"no kernel data: the kernel stream ended early\"}}}}",
                    rel(uncovered_from),
                    us_num(last_ts - uncovered_from)
                ),
            )?;
        }
    }
    out.write_all(b"\n]}\n")?;
    out.flush()
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

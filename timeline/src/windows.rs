//! JVM-wide stops (GC and safepoint windows) of a trace, as the views draw
//! them: one interval per window, paired from the begin/end events the merge
//! copies to every Java thread of the JVM.

use crate::process::pid_of;
use jtrace_merge::{Cause, Event, Trace};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    // pid -> (ts, end-before-begin, cause, begin)
    let mut marks = WindowMarks::new();
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
    pair_windows(marks, &last_ts)
}

/// [`jvm_windows`] of a trace read without its events (streamed): from the
/// JVMs' stop marks ([`Trace::jvm_stops`]); a window never ended runs to
/// the JVM's last Java thread event.
pub fn jvm_windows_of_stops(trace: &Trace) -> Vec<JvmWindow> {
    let mut marks: WindowMarks = BTreeMap::new();
    let mut last_ts: HashMap<u32, u64> = HashMap::new();
    for (&pid, stops) in &trace.jvm_stops {
        let m = marks.entry(pid).or_default();
        for &(ts, cause, begin) in stops {
            m.insert((ts, begin, cause as usize, begin));
        }
        let last = (trace.threads.values())
            .filter(|t| t.java_name.is_some() && pid_of(trace, t) == pid)
            .map(|t| t.last_ts)
            .max();
        last_ts.insert(pid, last.unwrap_or(0));
    }
    pair_windows(marks, &last_ts)
}

/// Begin/end marks of JVM-wide windows, per JVM: (ts, begin, cause index,
/// begin), so that at one time an end sorts before a begin.
pub(crate) type WindowMarks = BTreeMap<u32, BTreeSet<(u64, bool, usize, bool)>>;

/// Pairs each JVM's window marks into windows ([`jvm_windows`]'s rule); a
/// window still open ends at the JVM's last event (`last_ts`).
pub(crate) fn pair_windows(marks: WindowMarks, last_ts: &HashMap<u32, u64>) -> Vec<JvmWindow> {
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

/// "GC" or "safepoint": how views name a JVM-wide stop of `cause`.
pub fn window_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Gc => "GC",
        Cause::Safepoint => "safepoint",
        c => c.name(),
    }
}

/// Windows sorted by start, with the running maximum of their ends: finds
/// the windows that may overlap a time without scanning from the first
/// (ends are not sorted when windows overlap; their running maximum is).
pub(crate) struct WindowIndex<'a> {
    windows: &'a [JvmWindow],
    end_max: Vec<u64>,
}

impl<'a> WindowIndex<'a> {
    /// Indexes `windows`, sorted by start as [`jvm_windows`] returns them.
    pub(crate) fn new(windows: &'a [JvmWindow]) -> Self {
        let end_max = windows
            .iter()
            .scan(0, |m, w| {
                *m = w.end.max(*m);
                Some(*m)
            })
            .collect();
        WindowIndex { windows, end_max }
    }

    /// The windows from the first that may end after `t`: every window
    /// before it ended by `t`, so none of those overlaps anything after `t`.
    pub(crate) fn ending_after(&self, t: u64) -> &'a [JvmWindow] {
        &self.windows[self.end_max.partition_point(|&e| e <= t)..]
    }
}

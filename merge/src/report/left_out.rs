//! What the agent left out of a trace on purpose, as the report shows it:
//! the methods it demoted past the overhead budget (their later calls are
//! not recorded: their time is their callers' own), the calls it did not
//! write as shorter than `--min-duration`, and the selected methods it did
//! not instrument as trivial.

use crate::cause::OffCpu;
use crate::model::event::MethodIdx;
use crate::model::trace::Trace;
use serde::Serialize;

/// A demoted method in the report.
#[derive(Debug, Clone, Serialize)]
pub struct DemotedJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// When its probes were removed, ns after the trace started.
    pub demoted_at_ns: u64,
    /// Its calls in the trace (outermost ones, as `methods[].calls`).
    pub calls_recorded: u64,
    /// Calls the agent had seen when it decided (all threads).
    pub calls_seen: u64,
    /// Their mean rate, calls per second.
    pub rate_per_s: u64,
    /// Their mean wall, ns.
    pub mean_wall_ns: u64,
    /// Estimate of its calls after the demotion (not recorded): per call
    /// of its nearest traced caller never demoted, as many as before it
    /// (`demoted_estimate.rs`); for calls with no such caller, the
    /// rate times the time left in the trace.
    pub est_calls_after: u64,
    /// The off-CPU time of its calls after the demotion (not recorded),
    /// by cause, from the stacks that hold it: intervals that began after
    /// the demotion with it on the stack, outside its calls begun before.
    /// Empty without stacks.
    pub off_cpu_after_ns: OffCpu,
}

/// Calls of one method not written as shorter than `--min-duration`.
#[derive(Debug, Clone, Serialize)]
pub struct ShortDroppedJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// Calls left out.
    pub calls: u64,
    /// Their mean wall, ns.
    pub mean_wall_ns: u64,
}

/// The demoted methods (earliest first) that `keep` keeps, with their
/// recorded calls from `calls`, their calls after the demotion from
/// `after` (given the estimate by the agent's rate) and those calls'
/// off-CPU time from `off_after`.
pub(crate) fn demoted(
    trace: &Trace,
    calls: &dyn Fn(MethodIdx) -> u64,
    keep: &dyn Fn(MethodIdx) -> bool,
    after: &dyn Fn(MethodIdx, u64) -> u64,
    off_after: &dyn Fn(MethodIdx) -> OffCpu,
) -> Vec<DemotedJson> {
    let start = trace.meta.start_monotonic_ns;
    let end = start + trace.duration_ns();
    let mut out: Vec<(u64, DemotedJson)> = trace
        .demoted
        .iter()
        .filter(|d| keep(d.method))
        .map(|d| {
            let info = &trace.methods[d.method as usize];
            let by_rate = end.saturating_sub(d.ts) as u128 * d.rate_per_s as u128 / 1_000_000_000;
            let row = DemotedJson {
                class: info.class.clone(),
                name: info.name.clone(),
                signature: info.signature.clone(),
                demoted_at_ns: d.ts.saturating_sub(start),
                calls_recorded: calls(d.method),
                calls_seen: d.calls,
                rate_per_s: d.rate_per_s,
                mean_wall_ns: d.mean_ns,
                est_calls_after: after(d.method, by_rate as u64),
                off_cpu_after_ns: off_after(d.method),
            };
            (d.ts, row)
        })
        .collect();
    out.sort_by_key(|(ts, _)| *ts);
    out.into_iter().map(|(_, d)| d).collect()
}

/// The methods with calls left out by `--min-duration` that `keep` keeps,
/// most first.
pub(crate) fn short_dropped(trace: &Trace, keep: &dyn Fn(MethodIdx) -> bool) -> Vec<ShortDroppedJson> {
    let mut out: Vec<ShortDroppedJson> = trace
        .short_dropped
        .iter()
        .filter(|(m, _)| keep(**m))
        .map(|(m, &(calls, mean))| {
            let info = &trace.methods[*m as usize];
            ShortDroppedJson {
                class: info.class.clone(),
                name: info.name.clone(),
                signature: info.signature.clone(),
                calls,
                mean_wall_ns: mean,
            }
        })
        .collect();
    out.sort_by_key(|d| std::cmp::Reverse(d.calls));
    out
}

/// A selected method left uninstrumented as trivial.
#[derive(Debug, Clone, Serialize)]
pub struct MethodNameJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
}

/// The selected methods the agent did not instrument as trivial
/// (`--complete` instruments them): their calls are not recorded and
/// their time is their callers' own.
#[derive(Debug, Clone, Serialize)]
pub struct TrivialJson {
    /// The rule that skipped them ([`jtrace_format::TRIVIAL_RULE`]).
    pub rule: &'static str,
    /// How many.
    pub count: u64,
    /// Which, by class then name.
    pub methods: Vec<MethodNameJson>,
}

/// The trivial methods that `keep` keeps; `None` when there are none.
pub(crate) fn trivial(trace: &Trace, keep: &dyn Fn(MethodIdx) -> bool) -> Option<TrivialJson> {
    let mut methods: Vec<MethodNameJson> = (trace.trivial.iter())
        .filter(|&&m| keep(m))
        .map(|&m| {
            let info = &trace.methods[m as usize];
            MethodNameJson {
                class: info.class.clone(),
                name: info.name.clone(),
                signature: info.signature.clone(),
            }
        })
        .collect();
    if methods.is_empty() {
        return None;
    }
    methods.sort_by(|a, b| (&a.class, &a.name, &a.signature).cmp(&(&b.class, &b.name, &b.signature)));
    Some(TrivialJson {
        rule: jtrace_format::TRIVIAL_RULE,
        count: methods.len() as u64,
        methods,
    })
}

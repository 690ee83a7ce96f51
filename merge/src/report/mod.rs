//! Aggregation into the `jtrace.report.v1` report (docs/REPORT.md): the
//! per-method and per-thread sums (`aggregate`), wall-time percentiles
//! (`percentile`), what the agent left out (`left_out`, with
//! `demoted_estimate`), the top stacks with the stack-only methods
//! (`stacks`, from what `stack_time` sums), working and idle time and
//! the wakers (`working`), every method on the stacks (`stack_methods`),
//! the `summary`, the trace's `problems`, its `processes` and their
//! containers (`container_id`), `allocations`, and the `filter`s.
//! `compare` sets two reports side by side (`jtrace report --compare`,
//! `jtrace.compare.v1`).

pub(crate) mod aggregate;
pub(crate) mod allocations;
pub mod compare;
pub mod container_id;
pub(crate) mod demoted_estimate;
pub mod filter;
pub mod left_out;
pub(crate) mod percentile;
pub mod problems;
pub mod processes;
pub mod stack_methods;
pub(crate) mod stack_time;
pub mod stacks;
pub mod summary;
pub mod working;

use crate::cause::OffCpu;
use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::options::StreamOptions;
use crate::stream;
use crate::walk::analyze;
use left_out::{DemotedJson, ShortDroppedJson, TrivialJson};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Schema name of the JSON report.
pub const SCHEMA: &str = "jtrace.report.v1";

use crate::report::aggregate::Aggregate;
pub use crate::report::aggregate::MethodStats;
pub use allocations::AllocJson;
pub use filter::{glob_match, ReportFilter};
pub use problems::{left_out_problems, missing_jvm_problem, trace_problems, unmatched_problems};
pub use processes::{describe_cgroups, processes, ProcessJson};

/// A method entry of the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct MethodJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// Calls.
    pub calls: u64,
    /// Σ wall.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
    /// Σ off-CPU by cause (non-zero only).
    pub off_cpu_ns: OffCpu,
    /// Σ time after the kernel stream's coverage ended: neither CPU nor
    /// off-CPU (`wall_ns == cpu_ns + Σ off_cpu_ns + not_covered_ns`);
    /// absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_covered_ns: u64,
    /// Voluntary switches inside.
    pub voluntary_switches: u64,
    /// Involuntary switches inside.
    pub involuntary_switches: u64,
    /// Min wall.
    pub wall_min_ns: u64,
    /// Max wall.
    pub wall_max_ns: u64,
    /// Mean wall.
    pub wall_mean_ns: u64,
    /// Stddev of wall.
    pub wall_stddev_ns: u64,
    /// Median wall (nearest rank; exact up to 256 calls, then within 0.8 %).
    pub wall_p50_ns: u64,
    /// 90th percentile of wall (likewise).
    pub wall_p90_ns: u64,
    /// 99th percentile of wall (likewise).
    pub wall_p99_ns: u64,
    /// Calls that began while the method had compiled code of its own
    /// (JIT); null when no JVM of these calls recorded JIT events.
    pub calls_compiled: Option<u64>,
    /// Σ wall of those calls (null likewise).
    pub wall_compiled_ns: Option<u64>,
    /// When the method first had compiled code, ns after the trace started
    /// (null if never, as far as the JIT events say).
    pub first_compiled_ns: Option<u64>,
}

/// A thread entry of the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadJson {
    /// Kernel thread id.
    pub tid: u32,
    /// Java name, or the kernel's.
    pub name: String,
    /// Known to the JVM agent.
    pub java: bool,
    /// Process id.
    pub pid: u32,
    /// Wall over the thread's traced life.
    pub wall_ns: u64,
    /// CPU.
    pub cpu_ns: u64,
    /// Off-CPU by cause.
    pub off_cpu_ns: OffCpu,
    /// Time after the kernel stream's coverage ended (see
    /// [`MethodJson::not_covered_ns`]); absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_covered_ns: u64,
    /// Voluntary switches.
    pub voluntary_switches: u64,
    /// Involuntary switches.
    pub involuntary_switches: u64,
    /// Events inconsistent with the thread's state (lost events).
    pub anomalies: u64,
    /// A virtual thread (JDK 21 and later); absent for a kernel thread.
    /// Its `tid` is the merge's key for it, not a kernel tid.
    #[serde(rename = "virtual", skip_serializing_if = "std::ops::Not::not")]
    pub is_virtual: bool,
    /// A virtual thread's Java thread id; absent for a kernel thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub java_id: Option<u64>,
    /// The carrier a virtual thread spent the most time mounted on;
    /// absent for a kernel thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carrier: Option<u32>,
    /// The thread's tid in its JVM's pid namespace (a container), which
    /// the JVM itself sees; absent where it is `tid` (the initial namespace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_tid: Option<u32>,
    /// A thread of a JVM in a pid namespace that could not be paired with
    /// a kernel thread: `tid` is the merge's key, and none of its time is
    /// covered (docs/REPORT.md, "Containers"); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unmatched: bool,
    /// Its process's cgroup in the CPU controller's hierarchy, as in
    /// `processes` (absent in traces recorded before it existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The container that cgroup names (64 hex digits), if any
    /// ([`container_id::container_of`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// One of the threads jtrace's agent runs in the traced JVM (named as
    /// [`jtrace_format::agent_threads`] says): the tracer's time, not the
    /// program's; absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tracer: bool,
    /// The part of `off_cpu_ns` that is idle, waiting for work (stack
    /// rules: docs/REPORT.md, "Working and idle time"); absent when none.
    #[serde(skip_serializing_if = "OffCpu::is_empty")]
    pub idle_off_cpu_ns: OffCpu,
    /// The idle rule that holds most of that time (`pool`, `jvm`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_rule: Option<&'static str>,
    /// Idle for at least 90 % of its wall ([`working::IDLE_THREAD_SHARE`]):
    /// a thread waiting for work, which the text report folds into one
    /// line per group; absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_work: bool,
    /// This thread's methods.
    pub methods: Vec<MethodJson>,
}

/// Losses as the report shows them.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LostJson {
    /// Kernel records lost.
    pub kernel: u64,
    /// JVM events lost.
    pub jvm: u64,
}

/// A traced JVM of the report's `trace.jvms`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct JvmJson {
    /// Its process id.
    pub pid: u32,
    /// Its `java.vm.version` (`17.0.15+6-Debian-1deb12u1`); "" if its
    /// stream lost the JVM_START record that says it.
    pub vm_version: String,
}

/// The `trace` object of the report.
#[derive(Debug, Clone, Serialize)]
pub struct TraceJson {
    /// Trace directory.
    pub path: String,
    /// CLOCK_REALTIME at start.
    pub start_realtime_ns: u64,
    /// Recording duration.
    pub duration_ns: u64,
    /// Traced process.
    pub pid: u32,
    /// Command line.
    pub command: String,
    /// The traced JVMs (those that wrote an agent stream) and their
    /// versions, by pid, in pid order; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jvms: Vec<JvmJson>,
    /// Losses.
    pub lost_events: LostJson,
    /// Recording finished cleanly.
    pub complete: bool,
    /// When the kernel stream ended before the recording did: where its
    /// coverage ends, in ns after the start (later time is `not_covered_ns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_covered_ns: Option<u64>,
    /// A ring recording (`--max-size`, `--max-age`), or a trace whose
    /// oldest part is gone: the window of time it covers and what fell out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowJson>,
    /// Streams cut off inside a record, agent errors.
    pub problems: Vec<String>,
}

/// The `trace.window` object of the report: what a ring recording covers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WindowJson {
    /// Where the covered window begins, in ns after the recording's start
    /// (0: it covers the recording from its start). Earlier time is not
    /// covered: no CPU time or cause is given for it.
    pub from_ns: u64,
    /// Where it ends, in ns after the start (the recording's duration).
    pub to_ns: u64,
    /// Chunk files deleted because they fell out of the ring.
    pub dropped_chunks: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// `--max-size`, if the ring was bounded by size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size_bytes: Option<u64>,
    /// `--max-age`, if the ring was bounded by age.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_ns: Option<u64>,
}

/// The window a trace covers, if it is a ring recording or lost its start.
pub fn window(trace: &Trace) -> Option<WindowJson> {
    let m = &trace.meta;
    let ring = m.max_size.is_some() || m.max_age_ns.is_some();
    if !ring && trace.losses.window_from.is_none() {
        return None;
    }
    Some(WindowJson {
        from_ns: trace
            .losses
            .window_from
            .map_or(0, |w| w.saturating_sub(m.start_monotonic_ns)),
        to_ns: trace.duration_ns(),
        dropped_chunks: m.ring_dropped_chunks,
        dropped_bytes: m.ring_dropped_bytes,
        max_size_bytes: m.max_size,
        max_age_ns: m.max_age_ns,
    })
}

/// The whole `jtrace.report.v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// About the trace.
    pub trace: TraceJson,
    /// The traced processes' cgroups and CPU quotas; absent in traces
    /// that did not record them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessJson>,
    /// Threads, by tid.
    pub threads: Vec<ThreadJson>,
    /// Methods over all threads.
    pub methods: Vec<MethodJson>,
    /// Sampled allocations by class and site over the (selected) threads,
    /// most samples first; empty unless the agent sampled allocations.
    pub allocations: Vec<AllocJson>,
    /// Methods whose probes the agent removed past the overhead budget
    /// (adaptive demotion), earliest first; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub demoted: Vec<DemotedJson>,
    /// Calls not written as shorter than `--min-duration`, by method;
    /// absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub short_calls_dropped: Vec<ShortDroppedJson>,
    /// Selected methods not instrumented as trivial (the rule, how many,
    /// which); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial_skipped: Option<TrivialJson>,
    /// Off-CPU time under each recorded stack, ranked per cause, thread and
    /// method; absent when the trace recorded no stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<crate::report::stacks::StacksJson>,
    /// The methods of `trivial_skipped` with the off-CPU time of the
    /// intervals whose stacks hold them, most first; absent when none (or
    /// no stacks were recorded).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack_only_methods: Vec<crate::report::stacks::StackMethodJson>,
    /// Every Java method on the recorded stacks with the off-CPU time of
    /// the intervals whose stacks hold it, working and idle, and its
    /// sampled CPU, most working time first; absent when no stacks were
    /// recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack_methods: Vec<stack_methods::StackMethodsJson>,
    /// Who woke the working threads' blocks, most blocked time first;
    /// absent when no stacks were recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wakers: Vec<working::WakerJson>,
    /// The application's threads' time, working and idle (the tracer's
    /// threads apart).
    pub summary: summary::SummaryJson,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn method_json(trace: &Trace, m: MethodIdx, s: &MethodStats) -> MethodJson {
    let info = &trace.methods[m as usize];
    MethodJson {
        class: info.class.clone(),
        name: info.name.clone(),
        signature: info.signature.clone(),
        calls: s.calls,
        wall_ns: s.total.wall,
        cpu_ns: s.total.cpu,
        off_cpu_ns: s.total.off,
        not_covered_ns: s.total.not_covered,
        voluntary_switches: s.total.voluntary,
        involuntary_switches: s.total.involuntary,
        wall_min_ns: s.wall_min,
        wall_max_ns: s.wall_max,
        wall_mean_ns: s.wall_mean(),
        wall_stddev_ns: s.wall_stddev(),
        wall_p50_ns: s.walls.percentile(50.0),
        wall_p90_ns: s.walls.percentile(90.0),
        wall_p99_ns: s.walls.percentile(99.0),
        calls_compiled: (s.jit_known > 0).then_some(s.compiled),
        wall_compiled_ns: (s.jit_known > 0).then_some(s.wall_compiled),
        first_compiled_ns: trace
            .jit
            .first_compiled(m)
            .map(|t| t.saturating_sub(trace.meta.start_monotonic_ns)),
    }
}

fn sorted_methods(trace: &Trace, map: &BTreeMap<MethodIdx, MethodStats>, filter: &ReportFilter) -> Vec<MethodJson> {
    let mut v: Vec<MethodJson> = map
        .iter()
        .filter(|(m, _)| {
            filter
                .method
                .as_deref()
                .is_none_or(|p| glob_match(p, &trace.methods[**m as usize].qualified()))
        })
        .filter(|(_, s)| filter.cause.is_none_or(|c| s.total.off.get(c) > 0))
        .map(|(m, s)| method_json(trace, *m, s))
        .collect();
    let key = |m: &MethodJson| filter.cause.map_or(m.wall_ns, |c| m.off_cpu_ns.get(c));
    v.sort_by(|a, b| {
        key(b)
            .cmp(&key(a))
            .then_with(|| a.class.cmp(&b.class))
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Builds the report of a trace held in memory.
pub fn build_report(trace: &Trace, filter: &ReportFilter) -> Report {
    let mut agg = Aggregate::new(trace);
    analyze(trace, &mut agg);
    finish_report(trace, agg, filter)
}

/// Builds the report of a trace directory with the streaming analysis
/// ([`crate::stream`]): the same report as [`build_report`] on
/// [`Trace::open`], in memory bounded by `opts`, whatever the trace length.
pub fn build_report_streaming(
    dir: &std::path::Path,
    filter: &ReportFilter,
    opts: &StreamOptions,
) -> anyhow::Result<Report> {
    let (trace, events) = stream::open(dir, opts)?;
    let mut agg = Aggregate::new(&trace);
    stream::analyze(&trace, events, &mut agg)?;
    Ok(finish_report(&trace, agg, filter))
}

fn finish_report(trace: &Trace, agg: Aggregate, filter: &ReportFilter) -> Report {
    let keep_thread = |t: &ThreadInfo| {
        filter
            .thread
            .as_deref()
            .is_none_or(|p| glob_match(p, t.display_name()) || p == t.tid.to_string())
    };
    let mut all = BTreeMap::new();
    let mut threads = Vec::new();
    let cgroups: BTreeMap<u32, &str> = (trace.meta.process_cgroups.iter())
        .map(|p| (p.pid, p.cgroup.as_str()))
        .collect();
    for (tid, (totals, methods)) in &agg.per_thread {
        let info = &trace.threads[tid];
        if !keep_thread(info) {
            continue;
        }
        for (m, s) in methods {
            let e: &mut MethodStats = all.entry(*m).or_default();
            e.merge(s);
        }
        let b = totals.breakdown;
        threads.push(ThreadJson {
            tid: *tid,
            name: info.display_name().to_string(),
            java: info.java_name.is_some(),
            pid: info.tgid,
            wall_ns: b.wall,
            cpu_ns: b.cpu,
            off_cpu_ns: b.off,
            not_covered_ns: b.not_covered,
            voluntary_switches: b.voluntary,
            involuntary_switches: b.involuntary,
            anomalies: totals.anomalies,
            is_virtual: info.virtual_id.is_some(),
            java_id: info.virtual_id,
            carrier: info.carrier,
            ns_tid: info.ns_tid,
            unmatched: info.unmatched,
            cgroup: cgroups.get(&info.tgid).map(|c| c.to_string()),
            container_id: (cgroups.get(&info.tgid)).and_then(|c| container_id::container_of(c).container_id),
            tracer: info.is_tracer(),
            idle_off_cpu_ns: OffCpu::default(),
            idle_rule: None,
            waiting_for_work: false,
            methods: sorted_methods(trace, methods, filter),
        });
    }
    group_under_carriers(&mut threads);
    if filter.thread.is_none() {
        all = (agg.all.into_iter().enumerate())
            .filter(|(_, s)| s.calls > 0)
            .map(|(m, s)| (m as MethodIdx, s))
            .collect();
    }
    let keep_method = |m: MethodIdx| {
        let info = &trace.methods[m as usize];
        (filter.method.as_deref()).is_none_or(|p| glob_match(p, &format!("{}.{}", info.class, info.name)))
    };
    let kept_off = (agg.per_thread.iter())
        .filter(|(tid, _)| trace.threads.get(tid).is_some_and(&keep_thread))
        .fold(OffCpu::default(), |mut a, (_, (totals, _))| {
            a += totals.breakdown.off;
            a
        });
    let tracer = |tid: u32| trace.threads.get(&tid).is_some_and(ThreadInfo::is_tracer);
    let thread_off = |tid: u32| {
        agg.per_thread
            .get(&tid)
            .map_or(OffCpu::default(), |t| t.0.breakdown.off)
    };
    let demotion = |m| agg.after_demotion.demotion_index(m);
    let scope = crate::report::stacks::StackScope {
        keep: &keep_thread,
        keep_method: &keep_method,
        demotion: &demotion,
        thread_off: &thread_off,
        tracer: &tracer,
    };
    let (stacks, stack_only) = crate::report::stacks::stacks_json(trace, &agg.stacks, &scope, &kept_off, filter.lines);
    for t in &mut threads {
        if let Some(idle) = stack_only.idle.get(&t.tid) {
            t.idle_off_cpu_ns = idle.off;
            t.idle_rule = idle.rule;
            t.waiting_for_work = idle.off.total() as f64 >= working::IDLE_THREAD_SHARE * t.wall_ns as f64;
        }
    }
    let meta = &trace.meta;
    let problems = trace_problems(trace);
    let jvm_pids: std::collections::BTreeSet<u32> = trace.jvm_pids.iter().copied().collect();
    Report {
        schema: SCHEMA,
        trace: TraceJson {
            path: trace.dir.display().to_string(),
            start_realtime_ns: meta.start_realtime_ns,
            duration_ns: trace.duration_ns(),
            pid: trace.pid(),
            command: meta.command.join(" "),
            jvms: (jvm_pids.into_iter())
                .map(|pid| JvmJson {
                    pid,
                    vm_version: trace.jvm_versions.get(&pid).cloned().unwrap_or_default(),
                })
                .collect(),
            lost_events: LostJson {
                kernel: trace.losses.kernel,
                jvm: trace.losses.jvm,
            },
            complete: meta.complete,
            kernel_covered_ns: trace
                .losses
                .kernel_covered_until
                .map(|t| t.saturating_sub(meta.start_monotonic_ns)),
            window: window(trace),
            problems,
        },
        processes: processes(trace),
        methods: sorted_methods(trace, &all, filter),
        allocations: allocations::allocations(trace, filter, &keep_thread),
        demoted: left_out::demoted(
            trace,
            &|m| all.get(&m).map_or(0, |s| s.calls),
            &keep_method,
            &|m, by_rate| agg.after_demotion.estimate(m, by_rate),
            &|m| stack_only.after_demotion.get(&m).copied().unwrap_or_default(),
        ),
        short_calls_dropped: left_out::short_dropped(trace, &keep_method),
        trivial_skipped: left_out::trivial(trace, &keep_method),
        stacks,
        stack_only_methods: stack_only.methods,
        stack_methods: stack_only.stack_methods,
        wakers: stack_only.wakers,
        summary: summary::summary(&threads),
        threads,
    }
}

/// Puts each virtual thread right after its carrier (the threads are in tid
/// order, where the virtual threads' keys come last); a virtual thread
/// whose carrier is not listed stays at the end.
fn group_under_carriers(threads: &mut Vec<ThreadJson>) {
    if !threads.iter().any(|t| t.is_virtual) {
        return;
    }
    let (virtual_threads, platform): (Vec<ThreadJson>, Vec<ThreadJson>) =
        std::mem::take(threads).into_iter().partition(|t| t.is_virtual);
    let listed: std::collections::HashSet<u32> = platform.iter().map(|t| t.tid).collect();
    let mut by_carrier: HashMap<u32, Vec<ThreadJson>> = HashMap::new();
    let mut orphans = Vec::new();
    for v in virtual_threads {
        match v.carrier.filter(|c| listed.contains(c)) {
            Some(c) => by_carrier.entry(c).or_default().push(v),
            None => orphans.push(v),
        }
    }
    for p in platform {
        let mine = by_carrier.remove(&p.tid).unwrap_or_default();
        threads.push(p);
        threads.extend(mine);
    }
    threads.extend(orphans);
}

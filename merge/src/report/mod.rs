//! Aggregation into the `jtrace.report.v1` report (docs/REPORT.md): the
//! per-method and per-thread sums (`aggregate`), wall-time percentiles
//! (`percentile`), what the agent left out (`left_out`, with
//! `demoted_estimate`), and the top stacks with the stack-only methods
//! (`stacks`). `compare` sets two reports side by side
//! (`jtrace report --compare`, `jtrace.compare.v1`).

pub(crate) mod aggregate;
pub mod compare;
pub mod container_id;
pub(crate) mod demoted_estimate;
pub mod left_out;
pub(crate) mod percentile;
pub mod stack_methods;
pub(crate) mod stack_time;
pub mod stacks;
pub mod summary;
pub mod working;

use crate::cause::{Cause, OffCpu};
use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::options::StreamOptions;
use crate::stream;
use crate::walk::analyze;
use jtrace_format::agent_threads::is_agent_thread;
use left_out::{DemotedJson, ShortDroppedJson, TrivialJson};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Schema name of the JSON report.
pub const SCHEMA: &str = "jtrace.report.v1";

use crate::report::aggregate::Aggregate;
pub use crate::report::aggregate::MethodStats;

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

/// Everything a view must say about the trace before its figures: streams
/// cut short, the agent's errors, an unfinished recording, threads that
/// could not be paired, a JVM that never loaded the agent.
pub fn trace_problems(trace: &Trace) -> Vec<String> {
    let mut problems = trace.losses.truncated.clone();
    problems.extend(trace.losses.agent_errors.iter().map(|e| format!("agent: {e}")));
    if !trace.meta.complete {
        problems.push("recording did not finish cleanly: this is a readable prefix".into());
    }
    problems.extend(unmatched_problems(trace));
    problems.extend(left_out_problems(trace));
    problems.extend(missing_jvm_problem(trace));
    problems.extend(trace.meta.jvms_not_attached.iter().map(|j| {
        format!(
            "JVM {} was not attached (no methods, monitors or JVM threads; kernel side only): {}",
            j.pid, j.why
        )
    }));
    problems
}

/// What the report says of each thread of a JVM in a pid namespace that
/// could not be paired with a kernel thread (never shown as CPU).
pub fn unmatched_problems(trace: &Trace) -> Vec<String> {
    (trace.threads.values())
        .filter(|t| t.unmatched)
        .map(|t| {
            format!(
                "thread {:?} of JVM pid {} (tid {} in its pid namespace) could not be paired with a kernel \
                 thread: none of its time is covered (no TASK_NS record names it; docs/REPORT.md, \"Containers\")",
                t.display_name(),
                t.tgid,
                t.ns_tid.unwrap_or(0)
            )
        })
        .collect()
}

/// What the report says of each process left out at an exec: it became
/// one the invoking user may not trace (docs/SECURITY.md).
pub fn left_out_problems(trace: &Trace) -> Vec<String> {
    let start = trace.meta.start_monotonic_ns;
    (trace.losses.left_out.iter())
        .map(|l| {
            format!(
                "process {} was left out from its exec of {:?} at +{:.3} ms on: the invoking user may not trace it \
                 (setuid, setgid, file capabilities or not dumpable), so nothing of it is recorded from there",
                l.pid,
                l.comm,
                l.ts.saturating_sub(start) as f64 / 1e6
            )
        })
        .collect()
}

/// What the report says when no JVM wrote a stream though one was expected
/// (`--methods` asked for methods, or a traced process runs `java`): the
/// agent was not loaded, so every figure is the kernel's alone.
pub fn missing_jvm_problem(trace: &Trace) -> Option<String> {
    if !trace.jvm_pids.is_empty() {
        return None;
    }
    let java = trace.threads.values().find(|t| t.comm == "java");
    let why = match (trace.meta.methods.is_empty(), java) {
        (false, _) => format!("methods were asked for ({})", trace.meta.methods.join(", ")),
        (true, Some(t)) => format!("process {} runs java", t.tgid),
        (true, None) => return None,
    };
    Some(format!(
        "no JVM wrote a stream though {why}: jtrace's agent was not loaded (did the command drop \
         JAVA_TOOL_OPTIONS, or run a JVM that ignores it?); there are no methods, monitors or JVM threads, \
         only the kernel's view"
    ))
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

/// A traced process's cgroup and the CPU quotas over it, as the recorder
/// read them (meta.json).
#[derive(Debug, Clone, Serialize)]
pub struct ProcessJson {
    /// The process.
    pub pid: u32,
    /// Its cgroup in the CPU controller's hierarchy (`/`: the root).
    pub cgroup: String,
    /// The quotas of it and its ancestors, innermost first (empty: none),
    /// with the periods they throttled during the trace.
    pub cpu_limits: Vec<crate::meta::CpuLimit>,
    /// The container (and Kubernetes pod) `cgroup` names, if any.
    #[serde(flatten)]
    pub container: container_id::ContainerId,
}

/// The report's `processes`: each traced process with its cgroup's quotas.
pub fn processes(trace: &Trace) -> Vec<ProcessJson> {
    let m = &trace.meta;
    m.process_cgroups
        .iter()
        .map(|p| ProcessJson {
            pid: p.pid,
            cgroup: p.cgroup.clone(),
            container: container_id::container_of(&p.cgroup),
            cpu_limits: p
                .cpu_limited_by
                .iter()
                .filter_map(|c| {
                    m.cpu_limits
                        .iter()
                        .find(|l| &l.cgroup == c && l.cgroup_v2 == p.cgroup_v2)
                        .cloned()
                })
                .collect(),
        })
        .collect()
}

/// One line per cgroup of the traced processes: its CPU quotas and how
/// often they throttled it during the trace (`report` and `info` print them).
pub fn describe_cgroups(processes: &[ProcessJson]) -> Vec<String> {
    let ms = |ns: u64| format!("{}.{:03}", ns / 1_000_000, ns / 1000 % 1000);
    let mut by_cgroup: Vec<(&str, Vec<u32>, &[crate::meta::CpuLimit])> = Vec::new();
    for p in processes {
        match by_cgroup.iter_mut().find(|(c, _, _)| *c == p.cgroup) {
            Some((_, pids, _)) => pids.push(p.pid),
            None => by_cgroup.push((&p.cgroup, vec![p.pid], &p.cpu_limits)),
        }
    }
    by_cgroup
        .into_iter()
        .map(|(cgroup, pids, limits)| {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            let who = format!("pid {} in {cgroup}{}", pids.join(", "), container_id::describe(cgroup));
            if limits.is_empty() {
                return format!("{who}: no CPU quota");
            }
            let quotas: Vec<String> = limits
                .iter()
                .map(|l| {
                    let of = if l.cgroup == cgroup {
                        String::new()
                    } else {
                        format!(" (of {})", l.cgroup)
                    };
                    format!(
                        "CPU quota {} ms per {} ms{of}, throttled in {} of {} periods ({} ms) during the trace",
                        ms(l.quota_us * 1000),
                        ms(l.period_us * 1000),
                        l.throttled_periods,
                        l.periods,
                        ms(l.throttled_ns)
                    )
                })
                .collect();
            format!("{who}: {}", quotas.join("; "))
        })
        .collect()
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

/// Sampled allocations of one class at one site.
#[derive(Debug, Clone, Serialize)]
pub struct AllocJson {
    /// Allocated class (`java.lang.String`, `[B`).
    pub class: String,
    /// Allocating method as `class.method` (the innermost frame outside the
    /// JDK's own packages, else the innermost), "" if unknown.
    pub site: String,
    /// Source line in it, -1 if unknown.
    pub line: i32,
    /// Samples (the JVM takes one per ~512 KiB allocated, on average).
    pub samples: u64,
    /// Σ size of the sampled objects.
    pub sampled_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Filters applied while building a report (JPMT's offline filtering).
#[derive(Debug, Clone, Default)]
pub struct ReportFilter {
    /// Keep threads whose tid or name matches (glob).
    pub thread: Option<String>,
    /// Keep methods whose `class.name` matches (glob).
    pub method: Option<String>,
    /// Keep methods with time off CPU for this cause, sorted by it.
    pub cause: Option<Cause>,
    /// Give the top stacks' native frames their source lines (DWARF:
    /// `frame_lines`), with the functions inlined there as frames.
    pub lines: bool,
}

/// Glob match: `*` any run, `?` one character.
pub fn glob_match(pat: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pat.chars().collect(), s.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
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
            tracer: is_tracer(info),
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
    let tracer = |tid: u32| trace.threads.get(&tid).is_some_and(is_tracer);
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
        allocations: allocations(trace, filter, &keep_thread),
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

/// One of the threads jtrace's agent runs in the traced JVM.
fn is_tracer(t: &ThreadInfo) -> bool {
    is_agent_thread(t.display_name()) || is_agent_thread(&t.comm)
}

/// The report's allocation table: per (class, site) over the threads kept.
fn allocations(trace: &Trace, filter: &ReportFilter, keep_thread: &dyn Fn(&ThreadInfo) -> bool) -> Vec<AllocJson> {
    let mut by_site: BTreeMap<(&str, String, i32), (u64, u64)> = BTreeMap::new();
    for ((tid, class, method, line), c) in &trace.allocations {
        if trace.threads.get(tid).is_some_and(|t| !keep_thread(t)) {
            continue;
        }
        let site = method.map_or(String::new(), |m| trace.methods[m as usize].qualified());
        if filter.method.as_deref().is_some_and(|p| !glob_match(p, &site)) {
            continue;
        }
        let e = by_site.entry((class.as_str(), site, *line)).or_default();
        e.0 += c.samples;
        e.1 += c.bytes;
    }
    let mut v: Vec<AllocJson> = by_site
        .into_iter()
        .map(|((class, site, line), (samples, sampled_bytes))| AllocJson {
            class: class.to_string(),
            site,
            line,
            samples,
            sampled_bytes,
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(b.sampled_bytes.cmp(&a.sampled_bytes)));
    v
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

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("Demo.*", "Demo.spin"));
        assert!(!glob_match("Demo.*", "Demo$Inner.run"));
        assert!(glob_match("com.acme.*", "com.acme.sub.Foo.bar"));
        assert!(glob_match("*.run", "Demo$Worker.run"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*", ""));
    }
}

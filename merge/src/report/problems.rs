//! What the report (and every view) says about a trace before its
//! figures: `trace.problems`.

use crate::model::trace::Trace;

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

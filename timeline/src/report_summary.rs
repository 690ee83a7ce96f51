//! The text report's first screen: where the application threads' time
//! went (CPU, working off-CPU time by cause, idle time), the methods the
//! working threads blocked in most, and who woke them.

use crate::text::ms;
use crate::text_fit::{fold_causes, share, wrap, WIDTH};
use crate::text_table::truncate;
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::summary::ThreadSetJson;
use jtrace_merge::report::Report;
use std::fmt::Write as _;

/// Methods and wakers the summary names.
const TOP_METHODS: usize = 5;
const TOP_WAKERS: usize = 3;

/// `wall = CPU + working off CPU + idle (+ not covered)` of a thread set,
/// and its working off-CPU time by cause.
fn thread_set(s: &mut String, what: &str, t: &ThreadSetJson, stacks: bool) {
    let off = t.off_cpu_ns.total();
    let idle = t.idle_off_cpu_ns.total();
    let nc = match t.not_covered_ns {
        0 => String::new(),
        n => format!(" + not covered {} ms ({})", ms(n), share(n, t.wall_ns)),
    };
    let head = if stacks {
        format!(
            "{what}: {} working, {} waiting for work; Σ wall {} ms = cpu {} ms ({}) + off CPU working {} ms ({}) + \
             idle {} ms ({}){nc}",
            t.working_threads,
            t.waiting_threads,
            ms(t.wall_ns),
            ms(t.cpu_ns),
            share(t.cpu_ns, t.wall_ns),
            ms(off),
            share(off, t.wall_ns),
            ms(idle),
            share(idle, t.wall_ns),
        )
    } else {
        format!(
            "{what}: {}; Σ wall {} ms = cpu {} ms ({}) + off CPU {} ms ({}){nc} (no stacks recorded: idle time not \
             told from working time)",
            t.working_threads + t.waiting_threads,
            ms(t.wall_ns),
            ms(t.cpu_ns),
            share(t.cpu_ns, t.wall_ns),
            ms(off),
            share(off, t.wall_ns),
        )
    };
    s.push_str(&wrap(&format!("   {head}"), WIDTH, 6));
    if off > 0 {
        let what = if stacks { "working off CPU" } else { "off CPU" };
        let line = format!("      {what} by cause: {}", fold_causes(&t.off_cpu_ns, 5));
        s.push_str(&wrap(&line, WIDTH, 8));
    }
}

/// The summary section.
pub(crate) fn summary(s: &mut String, r: &Report, labels: &MethodLabels) {
    let sum = &r.summary;
    let _ = writeln!(s, "\n== Summary: where the threads' time went");
    let stacks = r.stacks.is_some();
    thread_set(s, "threads", &sum.threads, stacks);
    if let Some(v) = &sum.virtual_threads {
        thread_set(
            s,
            "virtual threads (their time on a carrier is also the carrier's)",
            v,
            stacks,
        );
    }
    if sum.tracer_threads > 0 {
        let _ = writeln!(
            s,
            "   the tracer's own threads apart: {}, {} ms cpu",
            sum.tracer_threads,
            ms(sum.tracer_cpu_ns)
        );
    }
    top_methods(s, r, labels);
    top_wakers(s, r);
}

/// The methods the working threads blocked in most (from the stacks),
/// else the probed methods with the most off-CPU time.
fn top_methods(s: &mut String, r: &Report, labels: &MethodLabels) {
    let mut rows: Vec<(u64, String, String)> = if r.stack_methods.is_empty() {
        (r.methods.iter())
            .map(|m| {
                let off = m.off_cpu_ns.total();
                (
                    off,
                    labels.label(&m.class, &m.name, &m.signature),
                    fold_causes(&m.off_cpu_ns, 2),
                )
            })
            .collect()
    } else {
        (r.stack_methods.iter())
            .filter(|m| m.blocked_here_ns > 0)
            .map(|m| {
                let causes = fold_causes(&m.working_off_cpu(), 2);
                (m.blocked_here_ns, labels.label(&m.class, &m.name, &m.signature), causes)
            })
            .collect()
    };
    rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    rows.retain(|r| r.0 > 0);
    if rows.is_empty() {
        return;
    }
    let what = if r.stack_methods.is_empty() {
        "the probed methods with the most time off CPU"
    } else {
        "where the working threads blocked: the innermost method outside the JDK on the stack"
    };
    let _ = writeln!(s, "   top methods off CPU ({what}):");
    for (ns, name, causes) in rows.into_iter().take(TOP_METHODS) {
        let _ = writeln!(s, "{:>14} ms  {:<50} {}", ms(ns), truncate(&name, 50), causes);
    }
}

/// The threads that woke the working threads' blocks.
fn top_wakers(s: &mut String, r: &Report) {
    if r.wakers.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "   top wakers (blocked time of the working threads' blocks they ended):"
    );
    for w in r.wakers.iter().take(TOP_WAKERS) {
        let who = match w.tid {
            0 => w.name.clone(),
            tid => format!("{} (tid {tid}, pid {})", w.name, w.pid),
        };
        let _ = writeln!(
            s,
            "{:>14} ms  {:<36} {:>7} wakes  {}",
            ms(w.blocked_ns),
            truncate(&who, 36),
            w.wakes,
            fold_causes(&w.off_cpu_ns, 2)
        );
    }
}

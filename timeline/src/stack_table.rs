//! The report's top stacks as text (`jtrace report`): per cause,
//! per thread and per method, each stack shortened to its user frames.

use crate::report_options::{line, ReportTextOptions};
use crate::text::ms;
use crate::text_fit::{cut, fit_frames, WIDTH};
use jtrace_merge::report::Report;
use jtrace_merge::report_stacks::{CoverageJson, CoverageOfJson, StackGroupJson, StackJson};
use std::fmt::Write as _;

/// User frames shown per stack (innermost first; kernel frames are in the JSON).
const FRAMES_SHOWN: usize = 6;

/// A stack's innermost user frames (innermost first), with their source
/// lines when the report has them (`report --lines`); its first frame if
/// it has no user frame.
fn user_frames(st: &StackJson) -> Vec<String> {
    let line = |i: usize| {
        let l = st.frame_lines.as_ref()?.get(i)?.as_ref()?;
        let base = l.file.rsplit('/').next().unwrap_or(&l.file);
        Some(format!(" ({base}:{})", l.line))
    };
    let user: Vec<String> = (st.frames.iter().enumerate())
        .filter(|(_, f)| !f.ends_with("_[k]"))
        .take(FRAMES_SHOWN)
        .map(|(i, f)| format!("{f}{}", line(i).unwrap_or_default()))
        .collect();
    if user.is_empty() {
        st.frames.first().cloned().into_iter().collect()
    } else {
        user
    }
}

/// The stack's lines: `inner < outer` on one line with `--wide`, else
/// folded into at most three lines that fit 120 columns.
fn stack_lines(st: &StackJson, opts: &ReportTextOptions) -> Vec<String> {
    let frames = user_frames(st);
    if opts.wide {
        vec![frames.join(" < ")]
    } else {
        fit_frames(&frames, WIDTH - STACK_INDENT, 3)
    }
}

/// Columns before a stack's frames: the figure, its mark, three spaces.
const STACK_INDENT: usize = 15;

/// What a group or stack shows: all its time with `--all`, else the
/// working part.
fn shown(ns: u64, idle_ns: u64, opts: &ReportTextOptions) -> u64 {
    if opts.all {
        ns
    } else {
        ns - idle_ns
    }
}

fn groups<'a>(
    s: &mut String,
    title: &str,
    groups: impl IntoIterator<Item = &'a StackGroupJson>,
    stacks_each: usize,
    opts: &ReportTextOptions,
) {
    let mut groups: Vec<&StackGroupJson> = (groups.into_iter())
        .filter(|g| shown(g.ns, g.idle_ns, opts) > 0)
        .collect();
    if groups.is_empty() {
        return;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(shown(g.ns, g.idle_ns, opts)));
    let what = if opts.all {
        "off-CPU ms"
    } else {
        "working off-CPU ms, idle left out"
    };
    s.push('\n');
    line(
        s,
        &format!("== Top stacks by {title} ({what}; user frames, innermost first)"),
        3,
        opts,
    );
    for g in groups.into_iter().take(opts.top) {
        let key = if opts.wide {
            g.key.clone()
        } else {
            cut(&g.key, WIDTH - 13)
        };
        let _ = writeln!(
            s,
            "{:>11}{} {key}",
            ms(shown(g.ns, g.idle_ns, opts)),
            scaled_mark(g.scaled_ns)
        );
        let stacks = (g.stacks.iter()).filter(|st| shown(st.ns, st.idle_ns, opts) > 0);
        for st in stacks.take(stacks_each) {
            let idle = match st.idle {
                Some(rule) if opts.all && st.idle_ns > 0 => format!(" [idle: {rule}]"),
                _ => String::new(),
            };
            let mut lines = stack_lines(st, opts).into_iter();
            let first = lines.next().unwrap_or_default();
            let mark = scaled_mark(st.scaled_ns);
            let _ = writeln!(s, "{:>11}{mark}   {first}{idle}", ms(shown(st.ns, st.idle_ns, opts)));
            for l in lines {
                let _ = writeln!(s, "{:STACK_INDENT$}{l}", "");
            }
        }
    }
}

/// `~` after a figure that holds time scaled up from sampled stacks.
fn scaled_mark(scaled_ns: u64) -> char {
    if scaled_ns > 0 {
        '~'
    } else {
        ' '
    }
}

/// `97.1%` (of `of`), or `97.1% + 2.0% scaled`.
fn share(c: &CoverageOfJson) -> String {
    let pct = |n: u64| 100.0 * n as f64 / c.off_cpu_ns.max(1) as f64;
    match c.scaled_ns {
        0 => format!("{:.1}%", pct(c.recorded_ns)),
        n => format!("{:.1}% + {:.1}% scaled", pct(c.recorded_ns), pct(n)),
    }
}

/// Which share of the off-CPU time has a stack, overall and per cause.
fn coverage(s: &mut String, c: &CoverageJson, opts: &ReportTextOptions) {
    let how = match c.stack_min_block_ns {
        Some(min) => format!(
            "blocks ≥ {} µs all, shorter ones sampled ≤ {}/s per CPU; ~ = scaled up from those samples",
            min / 1000,
            c.short_block_stacks_hz
        ),
        None => "every switch-out".to_string(),
    };
    s.push('\n');
    line(
        s,
        &format!("== Stack coverage: off-CPU time under a stack ({how})"),
        3,
        opts,
    );
    let _ = writeln!(s, "{:>11}  {:<14} {}", ms(c.all.off_cpu_ns), "all", share(&c.all));
    for k in &c.by_cause {
        let _ = writeln!(s, "{:>11}  {:<14} {}", ms(k.of.off_cpu_ns), k.cause, share(&k.of));
    }
}

/// The three tables, if the trace recorded stacks; the per-thread one
/// without the threads `left_out` (the tracer's, as the threads table)
/// and, unless `--all`, without the threads waiting for work.
pub(crate) fn stacks_tables(s: &mut String, r: &Report, opts: &ReportTextOptions, left_out: &[u32]) {
    let Some(st) = r.stacks.as_ref() else { return };
    coverage(s, &st.coverage, opts);
    groups(s, "cause", &st.by_cause, 3, opts);
    let waiting: Vec<u32> = (r.threads.iter())
        .filter(|t| t.waiting_for_work && !opts.all)
        .map(|t| t.tid)
        .collect();
    // A thread's key is "tid name".
    let shown = |tid: &str| !left_out.iter().chain(&waiting).any(|t| t.to_string() == tid);
    let kept = (st.by_thread.iter()).filter(|g| g.key.split(' ').next().is_some_and(shown));
    groups(s, "thread", kept, 1, opts);
    groups(
        s,
        "method (innermost Java frame outside the JDK)",
        &st.by_method,
        1,
        opts,
    );
}

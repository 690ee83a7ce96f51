//! The report's top stacks as text (`jtrace report`): per cause,
//! per thread and per method, each stack shortened to its user frames.

use crate::text::ms;
use jtrace_merge::report_stacks::{CoverageJson, CoverageOfJson, StackGroupJson, StackJson, StacksJson};
use std::fmt::Write as _;

/// User frames shown per stack (innermost first; kernel frames are in the JSON).
const FRAMES_SHOWN: usize = 6;

/// A stack's innermost user frames, `inner < outer`, with their source
/// lines when the report has them (`report --lines`).
fn short(st: &StackJson) -> String {
    let frames = &st.frames;
    let line = |i: usize| {
        let l = st.frame_lines.as_ref()?.get(i)?.as_ref()?;
        let base = l.file.rsplit('/').next().unwrap_or(&l.file);
        Some(format!(" ({base}:{})", l.line))
    };
    let user: Vec<String> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.ends_with("_[k]"))
        .take(FRAMES_SHOWN)
        .map(|(i, f)| format!("{f}{}", line(i).unwrap_or_default()))
        .collect();
    if user.is_empty() {
        frames.first().cloned().unwrap_or_default()
    } else {
        user.join(" < ")
    }
}

fn groups<'a>(
    s: &mut String,
    title: &str,
    groups: impl IntoIterator<Item = &'a StackGroupJson>,
    top: usize,
    stacks_each: usize,
) {
    let mut groups = groups.into_iter().peekable();
    if groups.peek().is_none() {
        return;
    }
    let _ = writeln!(
        s,
        "\n== Top stacks by {title} (off-CPU ms; user frames, innermost first)"
    );
    for g in groups.take(top) {
        let _ = writeln!(s, "{:>11}{} {}", ms(g.ns), scaled_mark(g.scaled_ns), g.key);
        for st in g.stacks.iter().take(stacks_each) {
            let _ = writeln!(s, "{:>11}{}   {}", ms(st.ns), scaled_mark(st.scaled_ns), short(st));
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
fn coverage(s: &mut String, c: &CoverageJson) {
    let how = match c.stack_min_block_ns {
        Some(min) => format!(
            "blocks ≥ {} µs all, shorter ones sampled ≤ {}/s per CPU; ~ = scaled up from those samples",
            min / 1000,
            c.short_block_stacks_hz
        ),
        None => "every switch-out".to_string(),
    };
    let _ = writeln!(s, "\n== Stack coverage: off-CPU time under a stack ({how})");
    let _ = writeln!(s, "{:>11}  {:<14} {}", ms(c.all.off_cpu_ns), "all", share(&c.all));
    for k in &c.by_cause {
        let _ = writeln!(s, "{:>11}  {:<14} {}", ms(k.of.off_cpu_ns), k.cause, share(&k.of));
    }
}

/// The three tables, if the trace recorded stacks; the per-thread one
/// without the threads `left_out` (the tracer's, as the threads table).
pub(crate) fn stacks_tables(s: &mut String, stacks: Option<&StacksJson>, top: usize, left_out: &[u32]) {
    let Some(st) = stacks else { return };
    coverage(s, &st.coverage);
    groups(s, "cause", &st.by_cause, top, 3);
    // A thread's key is "tid name".
    let kept = (st.by_thread.iter())
        .filter(|g| !(g.key.split(' ').next()).is_some_and(|tid| left_out.iter().any(|t| t.to_string() == tid)));
    groups(s, "thread", kept, top, 1);
    groups(
        s,
        "method (innermost Java frame outside the JDK)",
        &st.by_method,
        top,
        1,
    );
}

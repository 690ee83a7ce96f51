//! The report as text (`jtrace report` without `--json`): the trace and
//! its problems, then the sections of `report_summary`, `method_table`,
//! `thread_table` and `stack_table`, allocations and what the agent left
//! out.

use crate::report_options::{line, ReportTextOptions};
use crate::text::ms;
use crate::text_table::{by_cause, truncate, Table};
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::{AllocJson, Report};
use std::fmt::Write as _;

/// Renders the report: the trace and its problems, the summary, the
/// methods, the threads, allocations, the top stacks and what the agent
/// left out.
pub fn render_report(r: &Report, opts: &ReportTextOptions) -> String {
    let top = opts.top;
    let mut s = String::new();
    let labels = report_labels(r);
    let t = &r.trace;
    line(&mut s, &format!("jtrace report: {}", t.path), 4, opts);
    line(&mut s, &format!("command: {}", t.command), 9, opts);
    let _ = writeln!(
        s,
        "pid {}   started {}   duration {} ms",
        t.pid,
        crate::fmt_realtime(t.start_realtime_ns),
        ms(t.duration_ns)
    );
    let _ = writeln!(
        s,
        "lost events: kernel {}, jvm {}",
        t.lost_events.kernel, t.lost_events.jvm
    );
    for c in jtrace_merge::report::describe_cgroups(&r.processes) {
        line(&mut s, &format!("cgroup: {c}"), 8, opts);
    }
    for p in &t.problems {
        line(&mut s, &format!("WARNING: {p}"), 9, opts);
    }
    if let Some(w) = &t.window {
        line(&mut s, &jtrace_merge::describe_window(w), 4, opts);
    }
    if let Some(k) = t.kernel_covered_ns {
        let note = format!(
            "NOTE: kernel data ends at +{} ms: later time is in the `not covered` column, neither CPU nor a cause \
             (wall = cpu + off + not covered)",
            ms(k)
        );
        line(&mut s, &note, 6, opts);
    }
    crate::report_summary::summary(&mut s, r, &labels);
    crate::method_table::method_table(&mut s, r, &labels, opts);
    crate::method_table::wall_tables(&mut s, r, &labels, opts);
    let left_out = crate::thread_table::thread_table(&mut s, r, opts);
    alloc_table(&mut s, &r.allocations, top);
    crate::stack_table::stacks_tables(&mut s, r, opts, &left_out.tids);
    left_out_tables(&mut s, r, &labels, opts);
    s
}

/// The overloads among every method the report names.
fn report_labels(r: &Report) -> MethodLabels {
    let methods = (r.methods.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let demoted = (r.demoted.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let short = (r.short_calls_dropped.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let trivial = (r.trivial_skipped.iter().flat_map(|t| &t.methods))
        .map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let stacks = (r.stack_methods.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    MethodLabels::new(methods.chain(demoted).chain(short).chain(trivial).chain(stacks))
}

/// Sampled allocations by class and site, when the agent sampled them.
fn alloc_table(s: &mut String, allocs: &[AllocJson], top: usize) {
    if allocs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n== Allocation samples (about one per 512 KiB allocated; site: innermost frame outside the JDK)"
    );
    let _ = writeln!(s, "{:>8} {:>12}  {:<36} site", "samples", "sampled KiB", "class");
    for a in allocs.iter().take(top) {
        let site = match (a.site.as_str(), a.line) {
            ("", _) => "?".to_string(),
            (m, -1) => m.to_string(),
            (m, l) => format!("{m}:{l}"),
        };
        let _ = writeln!(
            s,
            "{:>8} {:>12.1}  {:<36} {}",
            a.samples,
            a.sampled_bytes as f64 / 1024.0,
            truncate(&a.class, 36),
            crate::text_fit::cut(&site, crate::text_fit::WIDTH - 61)
        );
    }
}

/// Appends the demoted methods and the short calls dropped, if any (every
/// one of them: nothing is left out silently), and how many methods were
/// not instrumented as trivial (the JSON report lists them).
fn left_out_tables(s: &mut String, r: &Report, labels: &MethodLabels, opts: &ReportTextOptions) {
    if let Some(t) = &r.trivial_skipped {
        s.push('\n');
        let head = format!(
            "== Trivial methods not instrumented: {} (their calls are not recorded, their time is the caller's \
             own; listed by `report --json`, trivial_skipped; --complete instruments them)",
            t.count
        );
        line(s, &head, 3, opts);
        line(s, &format!("   rule: {}", t.rule), 9, opts);
        let some: Vec<String> = t
            .methods
            .iter()
            .take(8)
            .map(|m| labels.label(&m.class, &m.name, &m.signature))
            .collect();
        let more = if t.methods.len() > some.len() { ", …" } else { "" };
        line(s, &format!("   e.g. {}{more}", some.join(", ")), 8, opts);
    }
    if !r.demoted.is_empty() {
        s.push('\n');
        let head = "== Demoted methods (probes turned off past the overhead budget: later calls are not recorded, \
                    their time is the caller's own; --complete keeps every probe)";
        line(s, head, 3, opts);
        let (name, number) = if opts.wide { (44, 11) } else { (36, 9) };
        let mut t = Table::new(vec![
            (name, true),
            (number, false),
            (number, false),
            (number, false),
            (number, false),
            (10, false),
            (14, true),
        ]);
        t.row(
            [
                "method",
                "at ms",
                "recorded",
                "calls/s",
                "mean µs",
                "est. after",
                "off CPU after (ms, from stacks)",
            ]
            .map(String::from)
            .into(),
        );
        for d in &r.demoted {
            let after = if opts.wide {
                by_cause(&d.off_cpu_after_ns)
            } else {
                match d.off_cpu_after_ns.total() {
                    0 => "-".to_string(),
                    n => format!("{} {}", ms(n), crate::text_fit::fold_causes(&d.off_cpu_after_ns, 1)),
                }
            };
            t.row(vec![
                truncate(&labels.label(&d.class, &d.name, &d.signature), name),
                ms(d.demoted_at_ns),
                d.calls_recorded.to_string(),
                d.rate_per_s.to_string(),
                format!("{:.2}", d.mean_wall_ns as f64 / 1e3),
                format!("≈{}", d.est_calls_after),
                after,
            ]);
        }
        t.write(s);
        let _ = writeln!(
            s,
            "   To give them no probes from the start of the next run: `jtrace report <trace> --exclude-demoted > keep.conf`,\n   \
             then `jtrace run --config keep.conf ...`"
        );
    }
    if !r.short_calls_dropped.is_empty() {
        s.push('\n');
        let head = "== Short calls not written (--min-duration: no traced child, no exception, no block seen; their \
                    time is the caller's own)";
        line(s, head, 3, opts);
        let mut t = Table::new(vec![(44, true), (11, false), (11, false)]);
        t.row(["method", "calls", "mean µs"].map(String::from).into());
        for d in &r.short_calls_dropped {
            t.row(vec![
                truncate(&labels.label(&d.class, &d.name, &d.signature), 44),
                d.calls.to_string(),
                format!("{:.2}", d.mean_wall_ns as f64 / 1e3),
            ]);
        }
        t.write(s);
    }
}

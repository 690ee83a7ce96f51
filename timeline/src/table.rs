//! The report as a readable table (`jtrace report` without `--json`).

use crate::text::ms;
use crate::thread_rows::{thread_rows, TracerLeftOut};
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::{AllocJson, MethodJson, Report};
use jtrace_merge::report_stacks::StackMethodJson;
use jtrace_merge::{Cause, OffCpu};
use std::fmt::Write as _;

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Causes that are non-zero anywhere in `rows`, in column order.
fn used_causes<'a>(rows: impl Iterator<Item = &'a OffCpu>) -> Vec<Cause> {
    let mut any = [false; jtrace_merge::N_CAUSES];
    for r in rows {
        for (c, _) in r.nonzero() {
            any[c as usize] = true;
        }
    }
    Cause::ALL.into_iter().filter(|c| any[*c as usize]).collect()
}

/// Interpreted vs compiled calls per method, when the JVMs recorded JIT
/// events, for the methods where it tells something: compiled at some point,
/// or called often (a hot method never compiled, e.g. one too big to be).
fn jit_table(s: &mut String, methods: &[MethodJson], labels: &MethodLabels, top: usize) {
    let rows: Vec<&MethodJson> = methods
        .iter()
        .filter(|m| m.calls_compiled.is_some() && (m.first_compiled_ns.is_some() || m.calls >= 1000))
        .take(top)
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n== JIT state at entry (compiled: the method had compiled code of its own when the call began)"
    );
    let _ = writeln!(
        s,
        "{:<44} {:>7} {:>11} {:>11} {:>14} {:>12} {:>16}",
        "method", "calls", "interpreted", "compiled", "mean interp µs", "mean jit µs", "first compiled"
    );
    for m in rows {
        let (Some(compiled), Some(wall_compiled)) = (m.calls_compiled, m.wall_compiled_ns) else {
            continue;
        };
        let interpreted = m.calls - compiled;
        let mean = |wall: u64, n: u64| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.3}", wall as f64 / n as f64 / 1e3)
            }
        };
        let name = labels.label(&m.class, &m.name, &m.signature);
        let _ = writeln!(
            s,
            "{:<44} {:>7} {:>11} {:>11} {:>14} {:>12} {:>16}",
            truncate(&name, 44),
            m.calls,
            interpreted,
            compiled,
            mean(m.wall_ns - wall_compiled, interpreted),
            mean(wall_compiled, compiled),
            m.first_compiled_ns
                .map_or("never".to_string(), |t| format!("{} ms", ms(t)))
        );
    }
}

/// A text table: columns at least as wide as asked, wider where a cell
/// needs it (a number never loses digits), separated by one space.
pub(crate) struct Table {
    /// Per column: minimum width, left-aligned.
    cols: Vec<(usize, bool)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(cols: Vec<(usize, bool)>) -> Table {
        Table { cols, rows: Vec::new() }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.cols.len());
        self.rows.push(cells);
    }

    pub(crate) fn write(&self, s: &mut String) {
        let widths: Vec<usize> = (self.cols.iter().enumerate())
            .map(|(i, &(min, _))| (self.rows.iter()).map(|r| r[i].chars().count()).fold(min, usize::max))
            .collect();
        for r in &self.rows {
            let line: Vec<String> = (r.iter().zip(&self.cols).zip(&widths))
                .map(|((cell, &(_, left)), &w)| {
                    if left {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(s, "{}", line.join(" ").trim_end());
        }
    }
}

/// `12.345 (sleep 10.002, runqueue 2.343)`: the total and its causes, or `-`.
fn by_cause(off: &OffCpu) -> String {
    if off.total() == 0 {
        return "-".into();
    }
    let causes: Vec<String> = off
        .nonzero()
        .map(|(c, ns)| format!("{} {}", c.name(), ms(ns)))
        .collect();
    format!("{} ({})", ms(off.total()), causes.join(", "))
}

/// The `not covered` column's cell: ms, or `-`.
fn not_covered_cell(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        ms(ns)
    }
}

/// A row of the methods table: a traced method, or a selected method left
/// without probes whose off-CPU time comes from the stacks that hold it.
enum MethodRow<'a> {
    Traced(&'a MethodJson),
    FromStacks(&'a StackMethodJson),
}

impl MethodRow<'_> {
    fn off(&self) -> &OffCpu {
        match self {
            MethodRow::Traced(m) => &m.off_cpu_ns,
            MethodRow::FromStacks(m) => &m.off_cpu_ns,
        }
    }
}

/// The methods by off-CPU time, the traced ones and those left without
/// probes (their calls, wall and CPU are `-`: not recorded).
fn method_table(s: &mut String, r: &Report, labels: &MethodLabels, top: usize) {
    let mut rows: Vec<MethodRow> = (r.methods.iter().map(MethodRow::Traced))
        .chain(r.stack_only_methods.iter().map(MethodRow::FromStacks))
        .collect();
    rows.sort_by_key(|m| std::cmp::Reverse(m.off().total()));
    rows.truncate(top);
    let cols = used_causes(rows.iter().map(|m| m.off()));
    let uncovered = rows
        .iter()
        .any(|m| matches!(m, MethodRow::Traced(m) if m.not_covered_ns > 0));
    let mut widths = vec![(44, true), (7, false), (11, false), (11, false), (11, false)];
    widths.extend(cols.iter().map(|_| (15, false)));
    widths.extend(uncovered.then_some((11, false)));
    widths.extend([(9, false), (9, false)]);
    let mut t = Table::new(widths);
    let mut head: Vec<String> = ["method", "calls", "wall ms", "cpu ms", "off ms"]
        .map(String::from)
        .into();
    head.extend(cols.iter().map(|c| c.name().to_string()));
    head.extend(uncovered.then(|| "not covered".to_string()));
    head.extend(["vol sw".to_string(), "invol sw".to_string()]);
    t.row(head);
    let mut from_stacks = false;
    for row in rows {
        let off = row.off().total();
        let mut r = match row {
            MethodRow::Traced(m) => vec![
                truncate(&labels.label(&m.class, &m.name, &m.signature), 44),
                m.calls.to_string(),
                ms(m.wall_ns),
                ms(m.cpu_ns),
                ms(off),
            ],
            MethodRow::FromStacks(m) => {
                from_stacks = true;
                let name = truncate(&labels.label(&m.class, &m.name, &m.signature), 44);
                vec![name, "-".into(), "-".into(), "-".into(), ms(off)]
            }
        };
        for c in &cols {
            let v = row.off().get(*c);
            r.push(if v == 0 {
                "-".to_string()
            } else {
                format!("{} {}", ms(v), pct(v, off))
            });
        }
        match row {
            MethodRow::Traced(m) => {
                r.extend(uncovered.then(|| not_covered_cell(m.not_covered_ns)));
                r.extend([m.voluntary_switches.to_string(), m.involuntary_switches.to_string()]);
            }
            MethodRow::FromStacks(_) => {
                r.extend(uncovered.then(|| "-".to_string()));
                r.extend(["-".to_string(), "-".to_string()]);
            }
        }
        t.row(r);
    }
    t.write(s);
    if from_stacks {
        let _ = writeln!(
            s,
            "(calls -: a selected method left without probes (trivial or forwarder): its off-CPU time is that of \
             the intervals whose stacks hold it)"
        );
    }
}

/// `s` cut to `n` characters, keeping its end (`…` for the rest).
pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(n - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// What the text report shows (`jtrace report`'s options).
#[derive(Debug, Clone, Copy)]
pub struct ReportTextOptions {
    /// Rows in the method and stack tables.
    pub top: usize,
    /// Show jtrace's own threads too (`--all`).
    pub all_threads: bool,
    /// One row per thread, threads named alike not summed (`--per-thread`).
    pub per_thread: bool,
}

impl Default for ReportTextOptions {
    fn default() -> Self {
        ReportTextOptions {
            top: 25,
            all_threads: false,
            per_thread: false,
        }
    }
}

/// Renders the report: method table, per-method wall statistics, threads, losses.
pub fn render_report(r: &Report, opts: &ReportTextOptions) -> String {
    let top = opts.top;
    let mut s = String::new();
    let labels = report_labels(r);
    let t = &r.trace;
    let _ = writeln!(s, "jtrace report: {}", t.path);
    let _ = writeln!(
        s,
        "command: {}   pid {}   started {}   duration {} ms",
        t.command,
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
        let _ = writeln!(s, "cgroup: {c}");
    }
    for p in &t.problems {
        let _ = writeln!(s, "WARNING: {p}");
    }
    if let Some(w) = &t.window {
        let _ = writeln!(s, "{}", jtrace_merge::describe_window(w));
    }
    if let Some(k) = t.kernel_covered_ns {
        let _ = writeln!(
            s,
            "NOTE: kernel data ends at +{} ms: later time is in the `not covered` column, neither CPU nor a cause \
             (wall = cpu + off + not covered)",
            ms(k)
        );
    }

    let _ = writeln!(
        s,
        "\n== Methods by time off CPU (inclusive of callees; off-CPU by cause with % of off-CPU)"
    );
    if r.methods.is_empty() {
        let _ = writeln!(s, "(no traced method invocations; select methods with --methods)");
    } else {
        method_table(&mut s, r, &labels, top);
        let _ = writeln!(s, "\n== Wall time statistics per method (ms)");
        let mut t = Table::new(vec![
            (44, true),
            (7, false),
            (11, false),
            (11, false),
            (11, false),
            (11, false),
            (11, false),
            (11, false),
            (11, false),
        ]);
        t.row(
            ["method", "calls", "min", "p50", "p90", "p99", "max", "mean", "stddev"]
                .map(String::from)
                .into(),
        );
        for m in r.methods.iter().take(top) {
            let name = labels.label(&m.class, &m.name, &m.signature);
            t.row(vec![
                truncate(&name, 44),
                m.calls.to_string(),
                ms(m.wall_min_ns),
                ms(m.wall_p50_ns),
                ms(m.wall_p90_ns),
                ms(m.wall_p99_ns),
                ms(m.wall_max_ns),
                ms(m.wall_mean_ns),
                ms(m.wall_stddev_ns),
            ]);
        }
        t.write(&mut s);
        jit_table(&mut s, &r.methods, &labels, top);
    }

    let left_out = thread_table(&mut s, r, opts);
    alloc_table(&mut s, &r.allocations, top);
    crate::stack_table::stacks_tables(&mut s, r.stacks.as_ref(), top, &left_out.tids);
    left_out_tables(&mut s, r, &labels);
    s
}

/// The threads table (see [`thread_rows`]) and what it left out of the
/// tracer's threads, which the other per-thread tables leave out too.
fn thread_table(s: &mut String, r: &Report, opts: &ReportTextOptions) -> TracerLeftOut {
    let (rows, left_out) = thread_rows(&r.threads, opts.all_threads, opts.per_thread);
    let _ = writeln!(s, "\n== Threads (wall over the traced life of each thread)");
    let cols = used_causes(rows.iter().map(|t| &t.off_cpu_ns));
    let uncovered = rows.iter().any(|t| t.not_covered_ns > 0);
    let tid_width = if rows.iter().any(|t| t.members[0].java_id.is_some()) {
        15
    } else {
        8
    };
    let mut widths = vec![(tid_width, false), (28, true), (11, false), (11, false), (11, false)];
    widths.extend(cols.iter().map(|_| (15, false)));
    widths.extend(uncovered.then_some((11, false)));
    widths.extend([(9, false), (9, false)]);
    let mut table = Table::new(widths);
    let mut head: Vec<String> = ["tid", "name", "wall ms", "cpu ms", "off ms"].map(String::from).into();
    head.extend(cols.iter().map(|c| c.name().to_string()));
    head.extend(uncovered.then(|| "not covered".to_string()));
    head.extend(["vol sw".to_string(), "invol sw".to_string()]);
    table.row(head);
    for row in &rows {
        let th = row.members[0];
        // A virtual thread by its Java id (its tid is the merge's key); a
        // container's thread by the tid its JVM sees, after the host's.
        let tid = match (row.group_tids(), th.java_id, th.unmatched, th.ns_tid) {
            (Some(tids), ..) => tids,
            (None, Some(id), _, _) => format!("vthread #{id}"),
            (None, None, true, Some(ns)) => format!("?/{ns}"),
            (None, None, false, Some(ns)) => format!("{}/{ns}", th.tid),
            _ => th.tid.to_string(),
        };
        let mut cells = vec![
            tid,
            truncate(&row.name(), 28),
            ms(row.wall_ns),
            ms(row.cpu_ns),
            ms(row.off_cpu_ns.total()),
        ];
        for c in &cols {
            let v = row.off_cpu_ns.get(*c);
            cells.push(if v == 0 { "-".to_string() } else { ms(v) });
        }
        cells.extend(uncovered.then(|| not_covered_cell(row.not_covered_ns)));
        cells.extend([row.voluntary_switches.to_string(), row.involuntary_switches.to_string()]);
        table.row(cells);
    }
    table.write(s);
    let _ = writeln!(
        s,
        "([name] = thread not known to the JVM agent: native or outside the JVM)"
    );
    if rows.iter().any(|t| t.members.len() > 1) {
        let _ = writeln!(
            s,
            "(name ×N = N threads named alike but for their number, summed; --per-thread lists each)"
        );
    }
    if r.threads.iter().any(|t| t.ns_tid.is_some()) {
        let _ = writeln!(
            s,
            "(tid H/N = host tid H, tid N in its JVM's pid namespace; ?/N = NOT PAIRED with a kernel thread: \
             its time is not covered, see the problems above)"
        );
    }
    if !left_out.tids.is_empty() {
        let _ = writeln!(
            s,
            "({} tracer thread{} left out of the thread tables ({}): {} ms wall, {} ms cpu, jtrace's own; \
             --all shows them)",
            left_out.tids.len(),
            if left_out.tids.len() == 1 { "" } else { "s" },
            left_out.names.join(", "),
            ms(left_out.wall_ns),
            ms(left_out.cpu_ns)
        );
    }
    left_out
}

/// The overloads among every method the report names.
fn report_labels(r: &Report) -> MethodLabels {
    let methods = (r.methods.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let demoted = (r.demoted.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let short = (r.short_calls_dropped.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    let trivial = (r.trivial_skipped.iter().flat_map(|t| &t.methods))
        .map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str()));
    MethodLabels::new(methods.chain(demoted).chain(short).chain(trivial))
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
            site
        );
    }
}

/// Appends the demoted methods and the short calls dropped, if any (every
/// one of them: nothing is left out silently), and how many methods were
/// not instrumented as trivial (the JSON report lists them).
fn left_out_tables(s: &mut String, r: &Report, labels: &MethodLabels) {
    if let Some(t) = &r.trivial_skipped {
        let _ = writeln!(
            s,
            "\n== Trivial methods not instrumented: {} (their calls are not recorded, their time is the \
             caller's own; listed by `report --json`, trivial_skipped; --complete instruments them)\n   rule: {}",
            t.count, t.rule
        );
        let some: Vec<String> = t
            .methods
            .iter()
            .take(8)
            .map(|m| labels.label(&m.class, &m.name, &m.signature))
            .collect();
        let more = if t.methods.len() > some.len() { ", …" } else { "" };
        let _ = writeln!(s, "   e.g. {}{more}", some.join(", "));
    }
    if !r.demoted.is_empty() {
        let _ = writeln!(
            s,
            "\n== Demoted methods (probes turned off past the overhead budget: later calls are not recorded, \
             their time is the caller's own; --complete keeps every probe)"
        );
        let mut t = Table::new(vec![
            (44, true),
            (11, false),
            (11, false),
            (11, false),
            (11, false),
            (13, false),
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
            t.row(vec![
                truncate(&labels.label(&d.class, &d.name, &d.signature), 44),
                ms(d.demoted_at_ns),
                d.calls_recorded.to_string(),
                d.rate_per_s.to_string(),
                format!("{:.2}", d.mean_wall_ns as f64 / 1e3),
                format!("≈{}", d.est_calls_after),
                by_cause(&d.off_cpu_after_ns),
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
        let _ = writeln!(
            s,
            "\n== Short calls not written (--min-duration: no traced child, no exception, no block seen; \
             their time is the caller's own)"
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A number wider than its column (1104506.691 ms in an
    /// 11-wide column) widens the column instead of losing digits.
    #[test]
    fn a_wide_number_keeps_its_digits() {
        let mut t = Table::new(vec![(8, true), (11, false), (11, false)]);
        t.row(vec!["method".into(), "wall".into(), "cpu".into()]);
        t.row(vec!["a".into(), ms(1_104_506_691_000), ms(1_000_000)]);
        let mut s = String::new();
        t.write(&mut s);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[1].contains(" 1104506.691 "), "{s}");
        // The column stays aligned: both rows end at the same place.
        assert_eq!(lines[0].len(), lines[1].len(), "{s}");
    }
}

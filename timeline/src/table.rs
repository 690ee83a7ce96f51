//! The report as a readable table (`jtrace report` without `--json`).

use crate::text::ms;
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::{AllocJson, Report};
use jtrace_merge::{Cause, OffCpu};
use std::fmt::Write as _;

pub(crate) fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Causes that are non-zero anywhere in `rows`, in column order.
pub(crate) fn used_causes<'a>(rows: impl Iterator<Item = &'a OffCpu>) -> Vec<Cause> {
    let mut any = [false; jtrace_merge::N_CAUSES];
    for r in rows {
        for (c, _) in r.nonzero() {
            any[c as usize] = true;
        }
    }
    Cause::ALL.into_iter().filter(|c| any[*c as usize]).collect()
}

/// A text table: columns at least as wide as asked, wider where a cell
/// needs it (a number never loses digits), separated by one space.
pub(crate) struct Table {
    /// Per column: minimum width, left-aligned.
    cols: Vec<(usize, bool)>,
    rows: Vec<Vec<String>>,
    /// Lines written as they are before the row of their index (a group's
    /// heading).
    headings: Vec<(usize, String)>,
    /// A column that gives up width (its cells cut, keeping their end)
    /// when the lines would pass 120 columns, down to a least width.
    flex: Option<(usize, usize)>,
}

impl Table {
    pub(crate) fn new(cols: Vec<(usize, bool)>) -> Table {
        Table {
            cols,
            rows: Vec::new(),
            headings: Vec::new(),
            flex: None,
        }
    }

    /// A line written whole before the next row.
    pub(crate) fn heading(&mut self, line: String) {
        self.headings.push((self.rows.len(), line));
    }

    /// Lets column `col` shrink down to `least` so that lines fit 120
    /// columns.
    pub(crate) fn fit(mut self, col: usize, least: usize) -> Table {
        self.flex = Some((col, least));
        self
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.cols.len());
        self.rows.push(cells);
    }

    pub(crate) fn write(&self, s: &mut String) {
        let mut widths: Vec<usize> = (self.cols.iter().enumerate())
            .map(|(i, &(min, _))| (self.rows.iter()).map(|r| r[i].chars().count()).fold(min, usize::max))
            .collect();
        let line_width = widths.iter().sum::<usize>() + widths.len() - 1;
        let flex = self.flex.filter(|_| line_width > crate::text_fit::WIDTH);
        if let Some((col, least)) = flex {
            let over = line_width - crate::text_fit::WIDTH;
            widths[col] = widths[col].saturating_sub(over).max(least);
        }
        for (n, r) in self.rows.iter().enumerate() {
            for (_, h) in self.headings.iter().filter(|(at, _)| *at == n) {
                let _ = writeln!(s, "{h}");
            }
            let line: Vec<String> = (r.iter().enumerate().zip(&self.cols).zip(&widths))
                .map(|(((i, cell), &(_, left)), &w)| {
                    let cut;
                    let cell = match flex {
                        Some((col, _)) if col == i => {
                            cut = truncate(cell, w);
                            &cut
                        }
                        _ => cell,
                    };
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

/// One cell per cause of `cols`: `cell` of its time, `-` for none.
pub(crate) fn by_cause_columns(off: &OffCpu, cols: &[Cause], cell: impl Fn(u64) -> String) -> Vec<String> {
    (cols.iter())
        .map(|c| match off.get(*c) {
            0 => "-".to_string(),
            v => cell(v),
        })
        .collect()
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
pub(crate) fn not_covered_cell(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        ms(ns)
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
    /// Show everything (`--all`): jtrace's own threads, the threads
    /// waiting for work in the threads table, idle time in the methods and
    /// stacks; by default the tables rank working time.
    pub all: bool,
    /// One row per thread, threads named alike not summed (`--per-thread`).
    pub per_thread: bool,
    /// Today's full tables (`--wide`): one column per cause and the
    /// switches, stacks unfolded; by default every line fits 120 columns.
    pub wide: bool,
}

impl Default for ReportTextOptions {
    fn default() -> Self {
        ReportTextOptions {
            top: 25,
            all: false,
            per_thread: false,
            wide: false,
        }
    }
}

/// `text` as one line, or wrapped to 120 columns unless `--wide`.
pub(crate) fn line(s: &mut String, text: &str, indent: usize, opts: &ReportTextOptions) {
    if opts.wide {
        let _ = writeln!(s, "{text}");
    } else {
        s.push_str(&crate::text_fit::wrap(text, crate::text_fit::WIDTH, indent));
    }
}

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

//! `jtrace report --compare BEFORE AFTER` as text: the two traces, what
//! their metadata differ in, the methods that changed most (totals, then
//! per call) and the threads' off-CPU time per cause, in the report's
//! tables and its rounding (milliseconds with three decimals).

use crate::text::ms;
use crate::text_table::{truncate, Table};
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::compare::{Change, Comparison, Difference, MeanChange, MethodChange, SideJson, Status};
use jtrace_merge::Cause;
use std::fmt::Write as _;

/// What the text comparison shows (`jtrace report --compare`'s options).
#[derive(Debug, Clone, Copy)]
pub struct CompareTextOptions {
    /// Rows in the method tables.
    pub top: usize,
}

impl Default for CompareTextOptions {
    fn default() -> Self {
        CompareTextOptions { top: 25 }
    }
}

/// A change in ms, signed (`+200.113`, `-3.000`; `0.000`: none).
fn delta_ms(d: i64) -> String {
    match d {
        0 => "0.000".to_string(),
        d if d > 0 => format!("+{}", ms(d.unsigned_abs())),
        d => format!("-{}", ms(d.unsigned_abs())),
    }
}

/// The change as a share of BEFORE (`+100.0%`), `new` if BEFORE is 0.
fn delta_pct(c: &Change) -> String {
    match (c.before, c.delta) {
        (_, 0) => "0.0%".to_string(),
        (0, _) => "new".to_string(),
        (b, d) => format!("{:+.1}%", d as f64 * 100.0 / b as f64),
    }
}

/// A per-call mean, `-` on a side without calls.
fn mean_ms(m: Option<u64>) -> String {
    m.map_or("-".to_string(), ms)
}

/// `10→12`, with `-` for a side the method is not in.
fn calls(m: &MethodChange) -> String {
    let side = |present: bool, n: u64| if present { n.to_string() } else { "-".to_string() };
    format!(
        "{}→{}",
        side(m.status != Status::Added, m.calls.before),
        side(m.status != Status::Removed, m.calls.after)
    )
}

/// Causes with time in any of `rows`, in column order.
fn used_causes(rows: &[&MethodChange]) -> Vec<Cause> {
    Cause::ALL
        .into_iter()
        .filter(|&c| rows.iter().any(|m| m.off_cpu_ns.get(c).is_some()))
        .collect()
}

/// `JDK 17.0.15+6`, or what is known of the JVMs.
fn jdks(side: &SideJson) -> String {
    let v: Vec<&str> = side.jdks().into_iter().collect();
    match (v.is_empty(), side.jvms.is_empty()) {
        (false, _) => format!("JDK {}", v.join(", ")),
        (true, true) => "no JVM stream".to_string(),
        (true, false) => "JDK unknown".to_string(),
    }
}

fn side_header(s: &mut String, label: &str, side: &SideJson) {
    let _ = writeln!(s, "{label} {}", side.path);
    let _ = writeln!(
        s,
        "        command: {}   pid {}   started {}   duration {} ms   {}",
        side.command,
        side.pid,
        crate::fmt_realtime(side.start_realtime_ns),
        ms(side.duration_ns),
        jdks(side)
    );
    let _ = writeln!(
        s,
        "        lost events: kernel {}, jvm {}",
        side.lost_events.kernel, side.lost_events.jvm
    );
}

/// The header: each trace, what their metadata differ in, their problems.
fn header(s: &mut String, c: &Comparison) {
    let _ = writeln!(s, "jtrace report --compare");
    side_header(s, "before:", &c.before);
    side_header(s, "after: ", &c.after);
    for d in &c.differences {
        let _ = match d {
            Difference::Command => writeln!(s, "NOTE: the traces record different commands (above)"),
            Difference::Jdk => writeln!(
                s,
                "NOTE: the traces record different JDKs: {} before, {} after",
                jdks(&c.before),
                jdks(&c.after)
            ),
        };
    }
    for (label, side) in [("before", &c.before), ("after", &c.after)] {
        for p in &side.problems {
            let _ = writeln!(s, "WARNING ({label}): {p}");
        }
    }
}

/// The methods by the change of their totals: calls, wall before and
/// after, the change of wall, CPU and each cause.
fn totals_table(s: &mut String, rows: &[&MethodChange], labels: &MethodLabels) {
    let causes = used_causes(rows);
    let uncovered = rows.iter().any(|m| !m.not_covered_ns.is_zero());
    let mut cols = vec![
        (44, true),
        (9, false),
        (11, false),
        (11, false),
        (11, false),
        (8, false),
        (11, false),
    ];
    cols.extend(causes.iter().map(|_| (11, false)));
    cols.extend(uncovered.then_some((11, false)));
    let mut t = Table::new(cols);
    let mut head: Vec<String> = ["method", "calls", "wall before", "wall after", "Δ wall", "Δ %", "Δ cpu"]
        .map(String::from)
        .into();
    head.extend(causes.iter().map(|c| format!("Δ {}", c.name())));
    head.extend(uncovered.then(|| "Δ not covered".to_string()));
    t.row(head);
    for m in rows {
        let mut r = vec![
            truncate(&labels.label(&m.class, &m.name, &m.signature), 44),
            calls(m),
            ms(m.wall_ns.before),
            ms(m.wall_ns.after),
            delta_ms(m.wall_ns.delta),
            delta_pct(&m.wall_ns),
            delta_ms(m.cpu_ns.delta),
        ];
        for c in &causes {
            r.push(m.off_cpu_ns.get(*c).map_or("-".to_string(), |ch| delta_ms(ch.delta)));
        }
        r.extend(uncovered.then(|| delta_ms(m.not_covered_ns.delta)));
        t.row(r);
    }
    t.write(s);
}

/// The same methods per call: mean wall before and after, the change of
/// the means of wall, CPU and each cause.
fn means_table(s: &mut String, rows: &[&MethodChange], labels: &MethodLabels) {
    let causes = used_causes(rows);
    let mut cols = vec![
        (44, true),
        (9, false),
        (11, false),
        (11, false),
        (11, false),
        (11, false),
    ];
    cols.extend(causes.iter().map(|_| (11, false)));
    let mut t = Table::new(cols);
    let mut head: Vec<String> = ["method", "calls", "wall before", "wall after", "Δ wall", "Δ cpu"]
        .map(String::from)
        .into();
    head.extend(causes.iter().map(|c| format!("Δ {}", c.name())));
    t.row(head);
    let delta = |m: &MeanChange| m.delta.map_or("-".to_string(), delta_ms);
    for m in rows {
        let mut r = vec![
            truncate(&labels.label(&m.class, &m.name, &m.signature), 44),
            calls(m),
            mean_ms(m.mean_wall_ns.before),
            mean_ms(m.mean_wall_ns.after),
            delta(&m.mean_wall_ns),
            delta(&m.mean_cpu_ns),
        ];
        for c in &causes {
            r.push(m.mean_off_cpu_ns.get(*c).map_or("-".to_string(), delta));
        }
        t.row(r);
    }
    t.write(s);
}

/// The threads' wall, CPU and off-CPU time per cause, before and after.
fn threads_table(s: &mut String, c: &Comparison) {
    let mut t = Table::new(vec![(14, true), (11, false), (11, false), (11, false), (8, false)]);
    t.row(["", "before", "after", "Δ", "Δ %"].map(String::from).into());
    let mut row = |name: &str, ch: &Change| {
        t.row(vec![
            name.to_string(),
            ms(ch.before),
            ms(ch.after),
            delta_ms(ch.delta),
            delta_pct(ch),
        ])
    };
    row("wall", &c.threads.wall_ns);
    row("cpu", &c.threads.cpu_ns);
    row("off cpu", &c.threads.off_cpu_ns);
    for cause in &c.causes {
        row(&format!("  {}", cause.cause.name()), &cause.off_cpu_ns);
    }
    if !c.threads.not_covered_ns.is_zero() {
        row("not covered", &c.threads.not_covered_ns);
    }
    t.write(s);
}

/// Renders a comparison: the header, the methods that changed most (at
/// most `top`), in total and per call, and the threads' time per cause.
pub fn render_compare(c: &Comparison, opts: &CompareTextOptions) -> String {
    let mut s = String::new();
    header(&mut s, c);
    let what = match c.sorted_by {
        "wall" => "wall time".to_string(),
        cause => format!("{cause} time (only methods with some on either side)"),
    };
    let rows: Vec<&MethodChange> = c.methods.iter().take(opts.top).collect();
    let labels =
        MethodLabels::new((c.methods.iter()).map(|m| (m.class.as_str(), m.name.as_str(), m.signature.as_str())));
    let _ = writeln!(
        s,
        "\n== Methods by change of {what}, largest first (after − before; inclusive of callees; ms)"
    );
    if rows.is_empty() {
        let _ = writeln!(
            s,
            "(no traced method invocations in either trace; select methods with --methods)"
        );
    } else {
        totals_table(&mut s, &rows, &labels);
        if rows.iter().any(|m| m.status != Status::Both) {
            let _ = writeln!(
                s,
                "(calls -→N: the method is only in AFTER (added); N→-: only in BEFORE (removed))"
            );
        }
        if c.methods.len() > rows.len() {
            let _ = writeln!(
                s,
                "({} more method(s), none with a larger change; --top shows more, --json lists all)",
                c.methods.len() - rows.len()
            );
        }
        let _ = writeln!(s, "\n== Per call (mean ms, after − before)");
        means_table(&mut s, &rows, &labels);
    }
    let _ = writeln!(
        s,
        "\n== Threads' time (Σ over the threads' traced lives; off CPU by cause, largest change first; ms)"
    );
    threads_table(&mut s, c);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_signed_and_rounded_like_the_report() {
        assert_eq!(delta_ms(200_113_999), "+200.113");
        assert_eq!(delta_ms(-3_000_000), "-3.000");
        assert_eq!(delta_ms(0), "0.000");
        assert_eq!(delta_pct(&Change::new(100, 200)), "+100.0%");
        assert_eq!(delta_pct(&Change::new(0, 5)), "new");
        assert_eq!(delta_pct(&Change::new(7, 7)), "0.0%");
    }
}

//! The text report's first table, the methods by time off CPU: every Java
//! method on the recorded stacks (working time of the blocks whose stack
//! holds it, sampled CPU) with the methods traced by probes keeping their
//! exact calls, wall and CPU; then the probed methods' wall statistics and
//! JIT state.

use crate::report_options::ReportTextOptions;
use crate::text::ms;
use crate::text_fit::fold_causes;
use crate::text_table::{by_cause_columns, not_covered_cell, pct, truncate, used_causes, Table};
use jtrace_merge::method_label::MethodLabels;
use jtrace_merge::report::{MethodJson, Report};
use jtrace_merge::OffCpu;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Width of the method column.
const METHOD: usize = 40;

/// How a row knows its CPU time.
enum Cpu {
    /// From the probes: exact.
    Exact(u64),
    /// From CPU samples (samples × period).
    Sampled(u64),
    /// Not known (a method left without probes and no samples taken).
    Unknown,
}

/// A row: a probed method (its exact figures), or one known from stacks.
struct Row<'a> {
    class: &'a str,
    name: &'a str,
    signature: &'a str,
    /// Probed: its calls, wall, switches and time not covered.
    probed: Option<&'a MethodJson>,
    cpu: Cpu,
    /// Off-CPU time shown (a probed method's exact time; else the working
    /// time of the blocks whose stacks hold it, or all with `--all`).
    off: OffCpu,
    /// What it is ranked by: `off` less its idle time from the stacks.
    rank: u64,
}

/// The rows: probed methods and the methods of the stacks, one per
/// (class, name, signature), most off-CPU time first.
fn rows<'a>(r: &'a Report, opts: &ReportTextOptions) -> Vec<Row<'a>> {
    let key = |c: &'a str, n: &'a str, s: &'a str| (c, n, s);
    let mut rows: Vec<Row> = Vec::new();
    let mut at: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for m in &r.methods {
        at.insert(key(&m.class, &m.name, &m.signature), rows.len());
        rows.push(Row {
            class: &m.class,
            name: &m.name,
            signature: &m.signature,
            probed: Some(m),
            cpu: Cpu::Exact(m.cpu_ns),
            off: m.off_cpu_ns,
            rank: m.off_cpu_ns.total(),
        });
    }
    let sampled = |ns: u64, samples: u64| if samples > 0 { Cpu::Sampled(ns) } else { Cpu::Unknown };
    for m in &r.stack_methods {
        let shown = if opts.all { m.off_cpu_ns } else { m.working_off_cpu() };
        match at.get(&key(&m.class, &m.name, &m.signature)) {
            Some(&i) => {
                let idle = if opts.all { 0 } else { m.idle_off_cpu_ns.total() };
                rows[i].rank = rows[i].rank.saturating_sub(idle);
            }
            None => {
                at.insert(key(&m.class, &m.name, &m.signature), rows.len());
                rows.push(Row {
                    class: &m.class,
                    name: &m.name,
                    signature: &m.signature,
                    probed: None,
                    cpu: sampled(m.cpu_sampled_ns, m.cpu_samples),
                    off: shown,
                    rank: shown.total(),
                });
            }
        }
    }
    // Selected methods left without probes, if no stack named them above.
    for m in &r.stack_only_methods {
        if !at.contains_key(&key(&m.class, &m.name, &m.signature)) {
            rows.push(Row {
                class: &m.class,
                name: &m.name,
                signature: &m.signature,
                probed: None,
                cpu: Cpu::Unknown,
                off: m.off_cpu_ns,
                rank: m.off_cpu_ns.total(),
            });
        }
    }
    rows.retain(|r| r.rank > 0 || r.probed.is_some() || matches!(r.cpu, Cpu::Sampled(n) if n > 0));
    let cpu_of = |r: &Row| match r.cpu {
        Cpu::Exact(n) | Cpu::Sampled(n) => n,
        Cpu::Unknown => 0,
    };
    rows.sort_by(|a, b| {
        (b.rank.cmp(&a.rank))
            .then(cpu_of(b).cmp(&cpu_of(a)))
            .then_with(|| (a.class, a.name).cmp(&(b.class, b.name)))
    });
    rows
}

/// The methods table (`opts.wide`: one column per cause, and the
/// switches; else the largest causes folded into one column).
pub(crate) fn method_table(s: &mut String, r: &Report, labels: &MethodLabels, opts: &ReportTextOptions) {
    let from_stacks = !r.stack_methods.is_empty();
    let what = match (from_stacks, opts.all) {
        (true, false) => "working time of the blocks whose stack holds the method, inclusive of callees",
        (true, true) => "time of the blocks whose stack holds the method, idle included, inclusive of callees",
        (false, _) => "inclusive of callees",
    };
    let _ = writeln!(s, "\n== Methods by time off CPU ({what})");
    let mut rows = rows(r, opts);
    if rows.is_empty() {
        let _ = writeln!(
            s,
            "(no traced method invocations and no stacks: select methods with --methods, or record stacks)"
        );
        return;
    }
    rows.truncate(opts.top);
    let cols = used_causes(rows.iter().map(|m| &m.off));
    let uncovered = rows.iter().any(|m| m.probed.is_some_and(|p| p.not_covered_ns > 0));
    let mut t = if opts.wide {
        let mut widths = vec![(44, true), (7, false), (11, false), (11, false), (11, false)];
        widths.extend(cols.iter().map(|_| (15, false)));
        widths.extend(uncovered.then_some((11, false)));
        widths.extend([(9, false), (9, false)]);
        Table::new(widths)
    } else {
        Table::new(vec![
            (METHOD, true),
            (6, false),
            (10, false),
            (10, false),
            (10, false),
            (30, true),
        ])
        .fit(0, 24)
    };
    let mut head: Vec<String> = ["method", "calls", "wall ms", "cpu ms", "off ms"]
        .map(String::from)
        .into();
    if opts.wide {
        head.extend(cols.iter().map(|c| c.name().to_string()));
        head.extend(uncovered.then(|| "not covered".to_string()));
        head.extend(["vol sw".to_string(), "invol sw".to_string()]);
    } else {
        head.push("off CPU by cause".into());
    }
    t.row(head);
    let (mut sampled, mut unprobed) = (false, false);
    for row in &rows {
        let off = row.off.total();
        let label = labels.label(row.class, row.name, row.signature);
        let name = if opts.wide { truncate(&label, 44) } else { label };
        let cpu = match row.cpu {
            Cpu::Exact(n) => ms(n),
            Cpu::Sampled(n) => {
                sampled = true;
                format!("~{}", ms(n))
            }
            Cpu::Unknown => "-".into(),
        };
        let mut cells = match row.probed {
            Some(m) => vec![name, m.calls.to_string(), ms(m.wall_ns), cpu, ms(off)],
            None => {
                unprobed = true;
                vec![name, "-".into(), "-".into(), cpu, ms(off)]
            }
        };
        if opts.wide {
            cells.extend(by_cause_columns(&row.off, &cols, |v| {
                format!("{} {}", ms(v), pct(v, off))
            }));
            let switches = row
                .probed
                .map(|m| (m.not_covered_ns, m.voluntary_switches, m.involuntary_switches));
            match switches {
                Some((nc, vol, invol)) => {
                    cells.extend(uncovered.then(|| not_covered_cell(nc)));
                    cells.extend([vol.to_string(), invol.to_string()]);
                }
                None => {
                    cells.extend(uncovered.then(|| "-".to_string()));
                    cells.extend(["-".to_string(), "-".to_string()]);
                }
            }
        } else {
            cells.push(fold_causes(&row.off, 2));
        }
        t.row(cells);
    }
    t.write(s);
    if unprobed {
        let _ = writeln!(
            s,
            "(calls -: a method without probes, its time from the stacks: each block once per method on its stack)"
        );
    }
    if sampled {
        let _ = writeln!(
            s,
            "(cpu ~: sampled, CPU samples whose stack holds the method × the sampling period)"
        );
    }
}

/// The probed methods' wall statistics and JIT state at entry.
pub(crate) fn wall_tables(s: &mut String, r: &Report, labels: &MethodLabels, opts: &ReportTextOptions) {
    if r.methods.is_empty() {
        return;
    }
    let name_width = if opts.wide { 44 } else { METHOD };
    let number = if opts.wide { 11 } else { 9 };
    let _ = writeln!(s, "\n== Wall time statistics per method (ms)");
    let mut widths = vec![(name_width, true), (7, false)];
    widths.extend([(number, false); 7]);
    let mut t = Table::new(widths);
    t.row(
        ["method", "calls", "min", "p50", "p90", "p99", "max", "mean", "stddev"]
            .map(String::from)
            .into(),
    );
    for m in r.methods.iter().take(opts.top) {
        let name = labels.label(&m.class, &m.name, &m.signature);
        t.row(vec![
            truncate(&name, name_width),
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
    t.write(s);
    jit_table(s, &r.methods, labels, opts.top, name_width);
}

/// Interpreted vs compiled calls per method, when the JVMs recorded JIT
/// events, for the methods where it tells something: compiled at some point,
/// or called often (a hot method never compiled, e.g. one too big to be).
fn jit_table(s: &mut String, methods: &[MethodJson], labels: &MethodLabels, top: usize, name_width: usize) {
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
    let mut t = Table::new(vec![
        (name_width, true),
        (7, false),
        (11, false),
        (11, false),
        (14, false),
        (12, false),
        (14, false),
    ]);
    t.row(
        [
            "method",
            "calls",
            "interpreted",
            "compiled",
            "mean interp µs",
            "mean jit µs",
            "first compiled",
        ]
        .map(String::from)
        .into(),
    );
    let mean = |wall: u64, n: u64| {
        if n == 0 {
            "-".to_string()
        } else {
            format!("{:.3}", wall as f64 / n as f64 / 1e3)
        }
    };
    for m in rows {
        let (Some(compiled), Some(wall_compiled)) = (m.calls_compiled, m.wall_compiled_ns) else {
            continue;
        };
        let interpreted = m.calls - compiled;
        t.row(vec![
            truncate(&labels.label(&m.class, &m.name, &m.signature), name_width),
            m.calls.to_string(),
            interpreted.to_string(),
            compiled.to_string(),
            mean(m.wall_ns - wall_compiled, interpreted),
            mean(wall_compiled, compiled),
            m.first_compiled_ns
                .map_or("never".to_string(), |t| format!("{} ms", ms(t))),
        ]);
    }
    t.write(s);
}

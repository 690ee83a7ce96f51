//! The text report's threads: a table of the working threads (threads
//! named alike as one row), then one line per kind of thread waiting for
//! work, and what was left out of the tracer's.

use crate::report_options::{line, ReportTextOptions};
use crate::text::ms;
use crate::text_fit::{fold_causes, wrap, WIDTH};
use crate::text_table::{by_cause_columns, not_covered_cell, truncate, used_causes, Table};
use crate::thread_rows::{thread_rows, ThreadRow, TracerLeftOut};
use jtrace_merge::idle::RULES;
use jtrace_merge::report::{Report, ThreadJson};
use jtrace_merge::OffCpu;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Width of the name column (`--wide`: 28).
const NAME: usize = 24;

/// The container of the row's process as the text views name it
/// (` (podman container d90a9823fe01)`), "" if none.
fn container(row: &ThreadRow) -> String {
    (row.members[0].cgroup.as_deref()).map_or(String::new(), jtrace_merge::report::container_id::describe)
}

/// Whether every thread of the row waits for work.
fn waiting(row: &ThreadRow) -> bool {
    row.members.iter().all(|t| t.waiting_for_work)
}

/// The row's idle time.
fn idle(row: &ThreadRow) -> OffCpu {
    let mut idle = OffCpu::default();
    for t in &row.members {
        idle += t.idle_off_cpu_ns;
    }
    idle
}

/// The tid cell: a group's tids, a virtual thread by its Java id (its tid
/// is the merge's key), a container's thread by the tid its JVM sees after
/// the host's.
fn tid_cell(row: &ThreadRow) -> String {
    let th = row.members[0];
    match (row.group_tids(), th.java_id, th.unmatched, th.ns_tid) {
        (Some(tids), ..) => tids,
        (None, Some(id), _, _) => format!("vthread #{id}"),
        (None, None, true, Some(ns)) => format!("?/{ns}"),
        (None, None, false, Some(ns)) => format!("{}/{ns}", th.tid),
        _ => th.tid.to_string(),
    }
}

/// The threads table, the waiting threads' lines, and what was left out of
/// the tracer's threads (which the other per-thread tables leave out too).
pub(crate) fn thread_table(s: &mut String, r: &Report, opts: &ReportTextOptions) -> TracerLeftOut {
    let (all_rows, left_out) = thread_rows(&r.threads, opts.all, opts.per_thread);
    let (mut rows, waiting_rows): (Vec<ThreadRow>, Vec<ThreadRow>) =
        all_rows.into_iter().partition(|row| opts.all || !waiting(row));
    // Processes in containers: grouped by container (stable: the report's
    // order within one), the host's last.
    let containers = rows.iter().any(|row| !container(row).is_empty());
    if containers {
        rows.sort_by_key(|row| (container(row).is_empty(), container(row)));
    }
    // Idle time apart, unless everything is shown.
    let any_idle = !opts.all && rows.iter().any(|row| idle(row).total() > 0);
    let title = if !any_idle {
        "wall over the traced life of each thread"
    } else {
        "wall over the traced life of each thread; off ms: working time, idle apart"
    };
    let _ = writeln!(s, "\n== Threads ({title})");
    // Working off-CPU time, unless everything is shown.
    let off = |row: &ThreadRow| {
        if opts.all {
            row.off_cpu_ns
        } else {
            row.off_cpu_ns - idle(row)
        }
    };
    let offs: Vec<OffCpu> = rows.iter().map(off).collect();
    let uncovered = rows.iter().any(|t| t.not_covered_ns > 0);
    let tid_width = if rows.iter().any(|t| t.members[0].java_id.is_some()) {
        15
    } else {
        8
    };
    let cols = used_causes(offs.iter());
    let mut head: Vec<String> = ["tid", "name", "wall ms", "cpu ms", "off ms"].map(String::from).into();
    let mut table = if opts.wide {
        let mut widths = vec![(tid_width, false), (28, true), (11, false), (11, false), (11, false)];
        widths.extend(cols.iter().map(|_| (15, false)));
        widths.extend(uncovered.then_some((11, false)));
        widths.extend([(9, false), (9, false)]);
        head.extend(cols.iter().map(|c| c.name().to_string()));
        head.extend(uncovered.then(|| "not covered".to_string()));
        head.extend(["vol sw".to_string(), "invol sw".to_string()]);
        Table::new(widths)
    } else {
        head.push("off CPU by cause".to_string());
        head.extend(any_idle.then(|| "idle ms".to_string()));
        let mut widths = vec![
            (tid_width, false),
            (NAME, true),
            (10, false),
            (10, false),
            (10, false),
            (30, true),
        ];
        widths.extend(any_idle.then_some((9, false)));
        Table::new(widths).fit(1, 12)
    };
    table.row(head);
    let mut group: Option<String> = None;
    for (row, off) in rows.iter().zip(&offs) {
        if containers && group.as_deref() != Some(container(row).as_str()) {
            let c = container(row);
            table.heading(match c.as_str() {
                "" => "-- not in a container".to_string(),
                _ => format!("-- {}", c.trim_start_matches(" (").trim_end_matches(')')),
            });
            group = Some(c);
        }
        let mut cells = vec![
            tid_cell(row),
            if opts.wide {
                truncate(&row.name(), 28)
            } else {
                row.name()
            },
            ms(row.wall_ns),
            ms(row.cpu_ns),
            ms(off.total()),
        ];
        if opts.wide {
            cells.extend(by_cause_columns(off, &cols, ms));
            cells.extend(uncovered.then(|| not_covered_cell(row.not_covered_ns)));
            cells.extend([row.voluntary_switches.to_string(), row.involuntary_switches.to_string()]);
        } else {
            cells.push(fold_causes(off, 2));
            let idle = idle(row).total();
            cells.extend(any_idle.then(|| if idle == 0 { "-".into() } else { ms(idle) }));
        }
        table.row(cells);
    }
    table.write(s);
    let mut notes = vec!["[name] = thread not known to the JVM agent: native or outside the JVM".to_string()];
    if rows.iter().any(|t| t.members.len() > 1) {
        notes.push("name ×N = N threads named alike but for their number, summed; --per-thread lists each".into());
    }
    if r.threads.iter().any(|t| t.ns_tid.is_some()) {
        notes.push(
            "tid H/N = host tid H, tid N in its JVM's pid namespace; ?/N = NOT PAIRED with a kernel thread: its \
             time is not covered, see the problems above"
                .into(),
        );
    }
    for n in notes {
        line(s, &format!("({n})"), 1, opts);
    }
    waiting_lines(s, &waiting_rows);
    if !left_out.tids.is_empty() {
        let n = left_out.tids.len();
        line(
            s,
            &format!(
                "({n} tracer thread{} left out of the thread tables ({}): {} ms wall, {} ms cpu, jtrace's own; --all \
                 shows them)",
                if n == 1 { "" } else { "s" },
                left_out.names.join(", "),
                ms(left_out.wall_ns),
                ms(left_out.cpu_ns)
            ),
            1,
            opts,
        );
    }
    left_out
}

/// One line per process and idle rule for the threads waiting for work.
fn waiting_lines(s: &mut String, rows: &[ThreadRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n== Threads waiting for work (idle ≥ 90% of their wall: docs/REPORT.md; --all lists them above)"
    );
    let mut kinds: BTreeMap<(u32, &str), Vec<&ThreadRow>> = BTreeMap::new();
    for row in rows {
        let rule = row.members[0].idle_rule.unwrap_or("");
        kinds.entry((row.members[0].pid, rule)).or_default().push(row);
    }
    let mut kinds: Vec<((u32, &str), Vec<&ThreadRow>)> = kinds.into_iter().collect();
    kinds.sort_by_key(|(_, rows)| std::cmp::Reverse(rows.iter().map(|r| idle(r).total()).sum::<u64>()));
    for ((pid, rule), rows) in kinds {
        let members: Vec<&ThreadJson> = rows.iter().flat_map(|r| r.members.iter().copied()).collect();
        let idle_ns: u64 = rows.iter().map(|r| idle(r).total()).sum();
        let cpu: u64 = members.iter().map(|t| t.cpu_ns).sum();
        let what = RULES.iter().find(|r| r.id == rule).map_or("", |r| r.what);
        let names: Vec<String> = rows.iter().map(|r| r.name()).collect();
        let line = format!(
            "{:>11} ms idle, {} ms cpu: {} thread{} of pid {pid}, {what} ({rule}): {}",
            ms(idle_ns),
            ms(cpu),
            members.len(),
            if members.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
        s.push_str(&wrap(&line, WIDTH, 14));
    }
}

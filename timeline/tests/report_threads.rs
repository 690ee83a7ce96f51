//! The text report's threads table on a hand-made trace: threads named
//! alike are one row whose figures are their sums, jtrace's own threads are
//! left out unless `--all` (said in one line), and the JSON report keeps
//! every thread, the tracer's marked.

mod fixture;

use fixture::{tempdir, Builder, PID};
use jtrace_merge::report::{Report, ThreadJson};
use jtrace_merge::{build_report, ReportFilter, Trace};
use jtrace_timeline::text::ms;
use jtrace_timeline::{render_report, ReportTextOptions};

const MS: u64 = 1_000_000;
const MAIN: u32 = 200;
const POOL: [u32; 4] = [201, 202, 203, 204];
const GC: [u32; 2] = [211, 212];
const GROW: u32 = 301;
const DEMOTER: u32 = 302;

/// main; `pool-1-thread-1` … `-4` and `GC Thread#0`, `#1` (native), each
/// preempted and blocked for times of their own; the agent's grower
/// (native, by its comm) and demoter (a Java thread).
fn trace() -> Report {
    let dir = tempdir("report-threads");
    let mut b = Builder::default();
    b.jvm_start(PID, MS);
    b.java_thread(PID, MAIN, MS, "main");
    b.switch_out(MAIN, 90 * MS, false, 0);
    let busy = |b: &mut Builder, tid: u32, i: u64| {
        // Preempted, then blocked until main wakes it: odd lengths, so
        // that sums are not round.
        let t = 2 * MS + i * 1_234_567;
        b.switch_out(tid, t, true, 0);
        b.switch_in(tid, t + 345_678 * (i + 1), 0);
        let out = t + 5 * MS + i * 777_777;
        b.block(tid, out, out + 3 * MS + i * 111_111, MAIN, out + 3 * MS + i * 222_223);
        b.switch_out(tid, 60 * MS + i * 3_333_333, false, 0);
    };
    for (i, &tid) in POOL.iter().enumerate() {
        b.java_thread(PID, tid, MS + i as u64 * 10_001, &format!("pool-1-thread-{}", i + 1));
        busy(&mut b, tid, i as u64);
    }
    for (i, &tid) in GC.iter().enumerate() {
        b.native_thread(PID, tid, MS, &format!("GC Thread#{i}"));
        busy(&mut b, tid, 7 + i as u64);
    }
    b.native_thread(PID, GROW, 3 * MS, "jtrace-grow");
    b.switch_out(GROW, 9 * MS + 123_457, false, 0);
    b.java_thread(PID, DEMOTER, 4 * MS, "jtrace demoter");
    b.switch_out(DEMOTER, 5 * MS + 1, false, 0);
    b.write(&dir, 0, 100 * MS);
    let t = Trace::open(&dir).unwrap();
    build_report(&t, &ReportFilter::default())
}

fn text(r: &Report, all: bool, per_thread: bool) -> String {
    // The full table (one column per cause), which the rows are read from.
    let opts = ReportTextOptions {
        all,
        per_thread,
        wide: true,
        ..Default::default()
    };
    render_report(r, &opts)
}

/// The threads table's lines: header first.
fn thread_lines(text: &str) -> Vec<&str> {
    let from = text.lines().position(|l| l.starts_with("== Threads")).unwrap() + 1;
    text.lines().skip(from).take_while(|l| !l.starts_with('(')).collect()
}

/// The figures of the row named `name`, by column: `wall`, `cpu`, `off`,
/// each cause's name, `vol`, `invol` (`-` read as 0).
fn row(text: &str, name: &str) -> Vec<(String, f64)> {
    let lines = thread_lines(text);
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    // "tid name wall ms cpu ms off ms <causes…> vol sw invol sw"
    let mut cols = vec!["wall".to_string(), "cpu".into(), "off".into()];
    cols.extend(head[8..head.len() - 4].iter().map(|c| c.to_string()));
    cols.extend(["vol".to_string(), "invol".into()]);
    let line = (lines.iter())
        .find(|l| l.contains(&format!(" {name} ")))
        .unwrap_or_else(|| panic!("no row {name:?} in\n{text}"));
    let (_, figures) = line.split_once(&format!(" {name} ")).unwrap();
    let cells: Vec<f64> = (figures.split_whitespace())
        .map(|c| if c == "-" { 0.0 } else { c.parse().unwrap() })
        .collect();
    assert_eq!(cells.len(), cols.len(), "{line}");
    cols.into_iter().zip(cells).collect()
}

fn members<'a>(r: &'a Report, tids: &[u32]) -> Vec<&'a ThreadJson> {
    tids.iter()
        .map(|tid| r.threads.iter().find(|t| t.tid == *tid).unwrap())
        .collect()
}

/// What the group row must read: each column's sum over the members, as
/// the table prints it.
fn summed(r: &Report, tids: &[u32], col: &str) -> String {
    let ts = members(r, tids);
    let ns: u64 = match col {
        "wall" => ts.iter().map(|t| t.wall_ns).sum(),
        "cpu" => ts.iter().map(|t| t.cpu_ns).sum(),
        "off" => ts.iter().map(|t| t.off_cpu_ns.total()).sum(),
        "vol" => return ts.iter().map(|t| t.voluntary_switches).sum::<u64>().to_string(),
        "invol" => return ts.iter().map(|t| t.involuntary_switches).sum::<u64>().to_string(),
        cause => {
            let c = jtrace_merge::Cause::from_name(cause).unwrap();
            ts.iter().map(|t| t.off_cpu_ns.get(c)).sum()
        }
    };
    ms(ns)
}

#[test]
fn threads_named_alike_are_one_row_of_their_sums() {
    let r = trace();
    let grouped = text(&r, false, false);
    let per_thread = text(&r, false, true);
    for (name, tids) in [
        ("pool-1-thread-{1..4} ×4", &POOL[..]),
        ("[GC Thread#{0..1}] ×2", &GC[..]),
    ] {
        let group = row(&grouped, name);
        assert!(group.iter().any(|(c, _)| c == "runqueue"), "{grouped}");
        for (col, v) in &group {
            // The row's figure is the members' sum, to the printed precision.
            let want: f64 = summed(&r, tids, col).parse().unwrap();
            assert_eq!(*v, want, "{name} {col}\n{grouped}");
            // And the per-thread rows add up to it, within their rounding.
            let names: Vec<String> = (members(&r, tids).iter())
                .map(|t| {
                    if t.java {
                        t.name.clone()
                    } else {
                        format!("[{}]", t.name)
                    }
                })
                .collect();
            let sum: f64 = (names.iter())
                .map(|n| row(&per_thread, n).into_iter().find(|(c, _)| c == col).unwrap().1)
                .sum();
            assert!(
                (sum - v).abs() <= 0.0005 * tids.len() as f64 + 1e-9,
                "{name} {col}: {sum} vs {v}"
            );
        }
    }
    // The group's tids; each member's own row only with --per-thread.
    let table = thread_lines(&grouped).join("\n");
    assert!(table.contains("201-204 pool-1-thread-{1..4} ×4"), "{table}");
    assert!(!table.contains("pool-1-thread-1 "), "{table}");
    assert!(grouped.contains("--per-thread lists each"), "{grouped}");
    assert!(!per_thread.contains("×"), "{per_thread}");
    // A thread alone stays as it is.
    assert!(table.contains("200 main "), "{table}");
}

#[test]
fn the_tracers_threads_are_left_out_unless_all() {
    let r = trace();
    let tracer = members(&r, &[GROW, DEMOTER]);
    let default = text(&r, false, false);
    let table = thread_lines(&default).join("\n");
    assert!(!table.contains("jtrace"), "{table}");
    let wall = ms(tracer.iter().map(|t| t.wall_ns).sum());
    let cpu = ms(tracer.iter().map(|t| t.cpu_ns).sum());
    let line = (default.lines())
        .find(|l| l.contains("tracer threads left out"))
        .unwrap_or_else(|| panic!("{default}"));
    assert_eq!(
        line,
        format!(
            "(2 tracer threads left out of the thread tables (jtrace-grow, jtrace demoter): {wall} ms wall, \
             {cpu} ms cpu, jtrace's own; --all shows them)"
        )
    );

    let all = text(&r, true, false);
    let table = thread_lines(&all).join("\n");
    for (name, t) in [
        ("[jtrace-grow] (tracer)", tracer[0]),
        ("jtrace demoter (tracer)", tracer[1]),
    ] {
        let figures = row(&all, name);
        assert_eq!(
            figures[0],
            ("wall".to_string(), ms(t.wall_ns).parse().unwrap()),
            "{table}"
        );
    }
    assert!(!all.contains("tracer threads left out"), "{all}");
    // The other rows do not change.
    for l in thread_lines(&default) {
        assert!(table.contains(l), "{l}\n{table}");
    }
}

#[test]
fn json_keeps_the_tracers_threads_marked() {
    let r = trace();
    assert_eq!(r.threads.len(), 9);
    let json = serde_json::to_value(&r).unwrap();
    for t in json["threads"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        if name.starts_with("jtrace") {
            assert_eq!(t["tracer"], serde_json::Value::Bool(true), "{t}");
        } else {
            assert!(t.get("tracer").is_none(), "{t}");
        }
    }
}

/// A podman container's cgroup (libpod, systemd driver).
const POD_CGROUP: &str = "/machine.slice/libpod-d90a9823fe01c0ffee0123456789abcdef0123456789abcdef0123456789abcd.scope";

#[test]
fn threads_of_a_container_are_grouped_under_it() {
    let mut r = trace();
    // The pool's process is in a container, main's on the host (as if
    // two processes: only the cgroups matter to the table's groups).
    for t in &mut r.threads {
        let pooled = POOL.contains(&t.tid);
        t.cgroup = Some(if pooled {
            POD_CGROUP.to_string()
        } else {
            "/".to_string()
        });
        if pooled {
            t.pid = PID + 1;
        }
    }
    let text = render_report(&r, &ReportTextOptions::default());
    let lines = thread_lines(&text);
    let heading = |h: &str| {
        lines
            .iter()
            .position(|l| *l == h)
            .unwrap_or_else(|| panic!("no {h:?} in\n{text}"))
    };
    let pod = heading("-- podman container d90a9823fe01");
    let host = heading("-- not in a container");
    let pool = lines.iter().position(|l| l.contains("pool-1-thread-")).unwrap();
    let main = lines.iter().position(|l| l.contains(" main ")).unwrap();
    // The container's threads under its heading, the host's after.
    assert!(pod < pool && pool < host && host < main, "{text}");
    // Without containers, no headings.
    let plain = render_report(&trace(), &ReportTextOptions::default());
    assert!(!plain.contains("-- not in a container"), "{plain}");
}

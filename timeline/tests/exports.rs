//! The exports and the HTML page of a hand-made trace, checked against the
//! merge's own report: what a viewer shows must add up to `jtrace report`.

mod fixture;

use fixture::*;
use jtrace_merge::{analyze, build_report, Cause, Invocation, ThreadInfo, Trace, Visitor};
use jtrace_timeline::{
    write_chrome, write_collapsed, write_csv, CollapsedOptions, CsvColumn, CSV_COLUMNS, NO_METHOD_FRAME,
    STATE_TID_OFFSET,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

fn trace() -> Trace {
    let dir = tempdir("fixture").join("t.jtrace");
    fixture(&dir);
    Trace::open(&dir).unwrap()
}

/// µs with three decimals (as written) back to integer ns.
fn ns(v: &Value) -> u64 {
    let f = v.as_f64().expect("number");
    assert!(f >= 0.0, "negative time {f}");
    (f * 1000.0).round() as u64
}

fn chrome(t: &Trace) -> Value {
    let mut buf = Vec::new();
    write_chrome(t, &mut buf).unwrap();
    serde_json::from_slice(&buf).expect("chrome export is valid JSON")
}

#[test]
fn chrome_export_is_trace_event_json() {
    let t = trace();
    let doc = chrome(&t);
    assert_eq!(doc["displayTimeUnit"], "ns");
    let evs = doc["traceEvents"].as_array().expect("traceEvents array");
    assert!(!evs.is_empty());
    for e in evs {
        let ph = e["ph"].as_str().expect("ph");
        assert!(["M", "X", "s", "f"].contains(&ph), "unexpected phase {ph}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string(), "{e}");
        if ph != "M" {
            ns(&e["ts"]);
        }
        if ph == "X" {
            ns(&e["dur"]);
            assert!(e["cat"] == "method" || e["cat"] == "sched" || e["cat"] == "jvm", "{e}");
        }
    }
    // Names of every thread and of the process.
    let names: HashMap<u64, &str> = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
        .collect();
    for tid in [MAIN, WORKER, GC] {
        assert!(names.contains_key(&(tid as u64)), "no thread_name for {tid}");
        assert!(
            names.contains_key(&((tid + STATE_TID_OFFSET) as u64)),
            "no state track name for {tid}"
        );
    }
    assert_eq!(names[&(MAIN as u64)], "main [101]");
    assert!(names[&(WORKER as u64)].starts_with(WORKER_NAME));
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == PID));
    // Fractional µs: B.work on main starts 2 µs after the trace start (1000 ns).
    let bwork = evs.iter().find(|e| e["name"] == "B.work" && e["tid"] == MAIN).unwrap();
    assert_eq!(ns(&bwork["ts"]), 2000);
    assert_eq!(ns(&bwork["dur"]), 10000);
    assert_eq!(bwork["args"]["involuntary_switches"], 1);
    assert_eq!(bwork["args"]["voluntary_switches"], 1);
}

#[test]
fn chrome_method_slices_nest_per_thread() {
    let t = trace();
    let doc = chrome(&t);
    type Slices = Vec<(u64, u64, String)>;
    let mut by_thread: BTreeMap<(u64, u64), Slices> = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        if e["ph"] == "X" {
            let (s, d) = (ns(&e["ts"]), ns(&e["dur"]));
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            by_thread
                .entry(key)
                .or_default()
                .push((s, s + d, e["name"].as_str().unwrap().to_string()));
        }
    }
    let mut nested = 0;
    for (key, mut v) in by_thread {
        // Parents first: by start, then longest first.
        v.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        let mut stack: Vec<(u64, u64, String)> = Vec::new();
        for sl in v {
            while stack.last().is_some_and(|top| top.1 <= sl.0) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(sl.1 <= top.1, "{key:?}: {:?} overlaps {:?} without nesting", sl, top);
                nested += 1;
            }
            stack.push(sl);
        }
    }
    assert!(
        nested >= 3,
        "the fixture has nested calls (B.work, C.<init> in A.run, inner C.<init>)"
    );
}

#[test]
fn chrome_totals_equal_the_report() {
    let t = trace();
    let report = build_report(&t, &Default::default());
    let doc = chrome(&t);
    let evs = doc["traceEvents"].as_array().unwrap();
    // Per method: the outermost slices sum to the report's wall, CPU and off-CPU.
    let mut wall: HashMap<String, u64> = HashMap::new();
    let mut cpu: HashMap<String, u64> = HashMap::new();
    for e in evs.iter().filter(|e| e["ph"] == "X" && e["cat"] == "method") {
        assert_eq!(ns(&e["dur"]), e["args"]["wall_ns"].as_u64().unwrap());
        if e["args"]["outermost"] == true {
            *wall.entry(e["name"].as_str().unwrap().to_string()).or_default() += ns(&e["dur"]);
            *cpu.entry(e["name"].as_str().unwrap().to_string()).or_default() += e["args"]["cpu_ns"].as_u64().unwrap();
        }
    }
    assert_eq!(wall.len(), report.methods.len());
    for m in &report.methods {
        let name = format!("{}.{}", m.class, m.name);
        assert_eq!(wall[&name], m.wall_ns, "wall of {name}");
        assert_eq!(cpu[&name], m.cpu_ns, "cpu of {name}");
    }
    // Per thread and cause: the state slices sum to the report's off-CPU,
    // and the running slices to its CPU.
    for th in &report.threads {
        let stid = (th.tid + STATE_TID_OFFSET) as u64;
        let mut per: HashMap<&str, u64> = HashMap::new();
        for e in evs.iter().filter(|e| e["ph"] == "X" && e["tid"] == stid) {
            assert_eq!(e["cat"], "sched");
            *per.entry(e["name"].as_str().unwrap()).or_default() += ns(&e["dur"]);
        }
        for c in Cause::ALL {
            assert_eq!(
                per.get(c.name()).copied().unwrap_or(0),
                th.off_cpu_ns.get(c),
                "tid {} {}",
                th.tid,
                c.name()
            );
        }
        assert_eq!(
            per.get("running").copied().unwrap_or(0),
            th.cpu_ns,
            "tid {} running",
            th.tid
        );
    }
    // Exactly the two wakeups of main by the worker are flow arrows, from
    // the worker's state track to main's, with matching ids.
    let flows: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f").collect();
    let starts: Vec<&&Value> = flows.iter().filter(|e| e["ph"] == "s").collect();
    assert!(!starts.is_empty());
    for s in &starts {
        let f = flows
            .iter()
            .find(|f| f["ph"] == "f" && f["id"] == s["id"])
            .expect("flow end");
        assert_eq!(s["tid"], (WORKER + STATE_TID_OFFSET) as u64);
        assert_eq!(f["tid"], (MAIN + STATE_TID_OFFSET) as u64);
        assert_eq!(f["bp"], "e");
        assert_eq!(s["ts"], f["ts"]);
    }
    assert_eq!(flows.len(), 2 * starts.len());
    assert!(
        starts.iter().any(|s| ns(&s["ts"]) == 8000),
        "wakeup at 9000 = 8 µs after start"
    );
}

fn collapsed(t: &Trace, opts: &CollapsedOptions) -> Vec<(String, u64)> {
    let mut buf = Vec::new();
    write_collapsed(t, opts, &mut buf).unwrap();
    String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("`stack N`");
            (stack.to_string(), n.parse::<u64>().expect("integer count"))
        })
        .collect()
}

fn per_cause(lines: &[(String, u64)]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (s, n) in lines {
        let cause = s.split(';').next().unwrap();
        assert!(Cause::from_name(cause).is_some(), "first frame {cause} is not a cause");
        *m.entry(cause.to_string()).or_default() += n;
    }
    m
}

/// Off-CPU per cause inside traced methods, by an independent visitor.
#[derive(Default)]
struct InMethods(BTreeMap<String, u64>);
impl Visitor for InMethods {
    fn off_cpu(&mut self, _t: &ThreadInfo, depth: usize, iv: &jtrace_merge::OffCpuInterval) {
        if depth > 0 {
            for (c, n) in iv.split.off.nonzero() {
                *self.0.entry(c.name().to_string()).or_default() += n;
            }
        }
    }
}

#[test]
fn collapsed_totals_equal_the_report() {
    let t = trace();
    let report = build_report(&t, &Default::default());
    let mut want_all: BTreeMap<String, u64> = BTreeMap::new();
    for th in &report.threads {
        for (c, n) in th.off_cpu_ns.nonzero() {
            *want_all.entry(c.name().to_string()).or_default() += n;
        }
    }
    let all = collapsed(
        &t,
        &CollapsedOptions {
            thread: false,
            all: true,
            ..Default::default()
        },
    );
    assert_eq!(per_cause(&all), want_all, "--all: every off-CPU ns of every thread");

    let lines = collapsed(&t, &CollapsedOptions::default());
    assert!(lines.iter().all(|(s, _)| !s.contains(NO_METHOD_FRAME)));
    let mut v = InMethods::default();
    analyze(&t, &mut v);
    // The tail of main (off CPU in X.tail at the end) has no switch-in, so a
    // visitor does not see it; the export counts it (2000 ns).
    let mut got = per_cause(&lines);
    let tail: u64 = lines
        .iter()
        .filter(|(s, _)| s.ends_with(";X.tail"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(tail, 2000);
    for (c, n) in lines
        .iter()
        .filter(|(s, _)| s.ends_with(";X.tail"))
        .map(|(s, n)| (s.split(';').next().unwrap(), n))
    {
        *got.get_mut(c).unwrap() -= n;
        if got[c] == 0 {
            got.remove(c);
        }
    }
    assert_eq!(got, v.0);

    // Stacks: outermost frame first, all causes of B.work's two intervals
    // (5000 blocked + 500 runqueue, 2000 preempted).
    let bwork: u64 = lines
        .iter()
        .filter(|(s, _)| s.ends_with(";A.run;B.work"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(bwork, 7500);
    let in_run: u64 = lines
        .iter()
        .filter(|(s, _)| s.ends_with(";A.run"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(in_run, 2000);
    assert!(
        lines.iter().any(|(s, n)| s == "runqueue;A.run;B.work" && *n == 2500),
        "{lines:?}"
    );

    let threaded = collapsed(
        &t,
        &CollapsedOptions {
            thread: true,
            all: false,
            ..Default::default()
        },
    );
    assert!(
        threaded
            .iter()
            .any(|(s, _)| s.starts_with("runqueue;main [101];A.run;B.work")),
        "{threaded:?}"
    );
    assert_eq!(per_cause(&threaded), per_cause(&lines));
}

#[derive(Default)]
struct Count(Vec<(u32, Invocation)>);
impl Visitor for Count {
    fn exit(&mut self, t: &ThreadInfo, _d: usize, inv: &Invocation) {
        self.0.push((t.tid, *inv));
    }
}

#[test]
fn csv_parses_back_with_every_invocation() {
    let t = trace();
    let mut buf = Vec::new();
    write_csv(&t, &mut buf).unwrap();
    let mut r = csv::Reader::from_reader(buf.as_slice());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    // The header is the exporter's column list, spelled out…
    let want: Vec<String> = CSV_COLUMNS
        .iter()
        .flat_map(|c| match c {
            CsvColumn::Named(n) => vec![n.to_string()],
            CsvColumn::PerCause => Cause::ALL.iter().map(|c| format!("{}_ns", c.name())).collect(),
        })
        .collect();
    assert_eq!(header, want);
    // …and it holds what the format promises: names unique, the cause
    // columns right after their sum in the report's order, and every column
    // read (and checked) below.
    let mut unique = header.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), header.len(), "{header:?}");
    let sum_at = header.iter().position(|h| h == "off_cpu_ns").unwrap();
    for (i, c) in Cause::ALL.iter().enumerate() {
        assert_eq!(header[sum_at + 1 + i], format!("{}_ns", c.name()));
    }
    let read = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
    let mut c = Count::default();
    analyze(&t, &mut c);
    assert_eq!(rows.len(), c.0.len());
    assert_eq!(rows.len(), 6);
    let col = |name: &str| {
        read.borrow_mut().insert(name.to_string());
        header.iter().position(|h| h == name).unwrap()
    };
    let num = |row: &csv::StringRecord, name: &str| row[col(name)].parse::<u64>().unwrap();
    for row in &rows {
        assert_eq!(row.len(), header.len());
        let off: u64 = Cause::ALL.iter().map(|c| num(row, &format!("{}_ns", c.name()))).sum();
        // The fixture's kernel stream covers the recording: nothing is
        // `not_covered_ns` (which the sum includes).
        assert_eq!(num(row, "not_covered_ns"), 0);
        assert_eq!(
            num(row, "wall_ns"),
            num(row, "cpu_ns") + off + num(row, "not_covered_ns")
        );
        assert_eq!(num(row, "off_cpu_ns"), off);
        assert_eq!(num(row, "pid"), PID as u64);
        assert_eq!(&row[col("native")], "false");
        // The fixture's JVM recorded no JIT events: unknown, not "false".
        assert_eq!(&row[col("compiled")], "");
        assert_eq!(num(row, "wall_ns"), num(row, "exit_ns") - num(row, "entry_ns"));
    }
    // The flags are the merge's.
    for (name, flag) in [
        ("exception", (|i: &Invocation| i.exception) as fn(&Invocation) -> bool),
        ("unfinished", |i: &Invocation| i.unfinished),
    ] {
        let rows_set = rows.iter().filter(|r| &r[col(name)] == "true").count();
        assert_eq!(rows_set, c.0.iter().filter(|(_, i)| flag(i)).count(), "{name}");
        assert!(
            rows.iter().all(|r| ["true", "false"].contains(&&r[col(name)])),
            "{name}"
        );
    }
    // The worker's name has a comma and quotes: it survives the round trip.
    let w = rows.iter().find(|r| r[col("tid")] == *"102").unwrap();
    assert_eq!(&w[col("thread")], WORKER_NAME);
    assert_eq!(&w[col("signature")], "(I)J");
    // The recursive inner C.<init> is at depth 2 and not outermost.
    let inner: Vec<_> = rows.iter().filter(|r| &r[col("method")] == "<init>").collect();
    assert_eq!(inner.len(), 2);
    assert!(inner
        .iter()
        .any(|r| &r[col("depth")] == "2" && &r[col("outermost")] == "false"));
    let b = rows
        .iter()
        .find(|r| &r[col("method")] == "work" && &r[col("tid")] == "101")
        .unwrap();
    assert_eq!(
        (num(b, "voluntary"), num(b, "involuntary"), num(b, "wall_ns")),
        (1, 1, 10000)
    );
    // The report's method walls are the sums of the outermost rows.
    let report = build_report(&t, &Default::default());
    for m in &report.methods {
        let sum: u64 = rows
            .iter()
            .filter(|r| r[col("class")] == m.class && r[col("method")] == m.name && &r[col("outermost")] == "true")
            .map(|r| num(r, "wall_ns"))
            .sum();
        assert_eq!(sum, m.wall_ns, "{}.{}", m.class, m.name);
    }
    let unread: Vec<&String> = header.iter().filter(|h| !read.borrow().contains(*h)).collect();
    assert!(unread.is_empty(), "columns no check reads: {unread:?}");
}

fn page_data(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"data\">";
    let start = html.find(open).expect("data element") + open.len();
    let len = html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..start + len]).expect("embedded JSON")
}

#[test]
fn html_is_self_contained_and_carries_the_trace() {
    let t = trace();
    let mut buf = Vec::new();
    jtrace_timeline::write_html(&t, &Default::default(), &mut buf).unwrap();
    let html = String::from_utf8(buf).unwrap();
    // Nothing loaded from anywhere: no src/href attributes, no URLs, and a
    // CSP that forbids any fetch.
    for bad in ["src=", "href=", "http://", "https://", "@import", "url("] {
        assert!(!html.contains(bad), "page references {bad}");
    }
    assert!(html.contains("default-src 'none'"));
    let d = page_data(&html);
    // `<init>` is in the data, escaped so it cannot end the script early.
    assert!(d["methods"].as_array().unwrap().iter().any(|m| m[1] == "<init>"));
    let threads = d["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3);
    // Application threads first, native last.
    let kinds: Vec<u64> = threads.iter().map(|t| t["kind"].as_u64().unwrap()).collect();
    assert_eq!(kinds, vec![0, 0, 2]);
    assert_eq!(threads[2]["name"], "GC Thread#0");
    let main = &threads[0];
    assert_eq!(main["tid"], MAIN);
    assert_eq!(main["spans"]["s"].as_array().unwrap().len(), 5);
    // Off-CPU intervals and their splits add up to the thread's off-CPU.
    let off: u64 = main["offs"]["k"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k.as_array())
        .flat_map(|k| k.chunks(2).map(|p| p[1].as_u64().unwrap()))
        .sum();
    let report = build_report(&t, &Default::default());
    let rm = report.threads.iter().find(|t| t.tid == MAIN).unwrap();
    assert_eq!(off, rm.off_cpu_ns.total());
    // The wakeup at 9000 names the worker.
    assert!(main["offs"]["w"].as_array().unwrap().contains(&Value::from(WORKER)));
}

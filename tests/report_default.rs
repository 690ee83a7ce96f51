//! The default run's report, with nothing selected (no `--methods`): its
//! first table names each ground-truth scenario's method with its delay in
//! its cause (from the stacks), a pool's wait for tasks is idle while its
//! lock time is working (in the flame graph's fold too), every line fits
//! 120 columns, and `stack_methods` agrees with the collapsed stacks.

mod common;

use common::*;
use jtrace_merge::idle::can_be_idle;
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::Cause;
use jtrace_timeline::{fold_streaming, CollapsedOptions, Folded};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

const MS: u64 = 1_000_000;

/// Records `class args…` on `jdk` with jtrace's defaults (stacks, no
/// methods).
fn record_default(jdk: &str, name: &str, class: &str, args: &[&str]) -> PathBuf {
    let classes = classes();
    let out = tempdir(name).join("t.jtrace");
    let java = java(jdk);
    let mut cmd = vec![java.to_str().unwrap(), "-cp", classes.to_str().unwrap(), class];
    cmd.extend_from_slice(args);
    let o = jtrace_run(&out, &[], &cmd);
    assert!(o.status.success(), "{jdk} {class}: jtrace run failed");
    out
}

/// `"class.name"` of a `stack_methods` entry.
fn qualified(m: &Value) -> String {
    format!("{}.{}", m["class"].as_str().unwrap(), m["name"].as_str().unwrap())
}

/// A cause's ns in an `OffCpu` object (absent: 0).
fn ns(off: &Value, cause: &str) -> u64 {
    off.get(cause).and_then(Value::as_u64).unwrap_or(0)
}

/// The `stack_methods` entry of `method` (`class.name`; its only overload).
fn stack_method<'a>(r: &'a Value, method: &str) -> &'a Value {
    let all: Vec<&Value> = (r["stack_methods"].as_array().unwrap().iter())
        .filter(|m| qualified(m) == method)
        .collect();
    assert_eq!(all.len(), 1, "{method} in stack_methods: {all:?}");
    all[0]
}

/// The method column of the text report's first table.
fn first_table_methods(text: &str) -> Vec<String> {
    let from = (text.lines().position(|l| l.starts_with("== Methods by time off CPU")))
        .unwrap_or_else(|| panic!("no methods table in\n{text}"));
    (text.lines().skip(from + 2))
        .take_while(|l| !l.is_empty() && !l.starts_with('('))
        .map(|l| l.split("  ").next().unwrap().trim().to_string())
        .collect()
}

/// Every line of the default report fits 120 columns (characters, not
/// bytes: `…`, `≥` and `·` are one column each).
fn assert_fits(what: &str, text: &str) {
    for l in text.lines() {
        assert!(
            l.chars().count() <= 120,
            "{what}: a line of {} columns:\n{l}",
            l.chars().count()
        );
    }
}

#[test]
fn each_scenario_method_leads_with_its_cause_without_methods() {
    let scenarios = [
        ("sleep", "GroundTruth.sleepFor", "sleep"),
        ("monitor", "GroundTruth.enterMonitor", "monitor"),
        ("wait", "GroundTruth.waitForNotify", "wait"),
        ("park", "GroundTruth.lockReentrant", "park"),
        ("socket", "GroundTruth.readLateReply", "socket"),
    ];
    const DELAY_MS: u64 = 100;
    for jdk in JDKS {
        for (scenario, method, cause) in scenarios {
            let what = format!("{} {scenario}", jdk_name(jdk));
            let dir = record_default(jdk, &format!("default-{scenario}"), "GroundTruth", &[scenario, "100"]);
            let r = report_json(&dir);
            let m = stack_method(&r, method);
            // Working time: the scenario's wait is the program's own.
            let working = ns(&m["off_cpu_ns"], cause) - ns(&m["idle_off_cpu_ns"], cause);
            eprintln!("{what}: {method} {:.1} ms {cause}", working as f64 / 1e6);
            assert!(
                working * 100 >= DELAY_MS * MS * 85,
                "{what}: {method} holds {:.1} ms of the {DELAY_MS} ms delay as {cause}: {m}",
                working as f64 / 1e6
            );
            let text = report_text(&dir);
            let first = first_table_methods(&text);
            assert!(
                first.iter().any(|n| n == method),
                "{what}: {method} not in the first table:\n{text}"
            );
            assert_fits(&what, &text);
        }
    }
}

/// The threads of `r` named `pool-1-thread-N`.
fn pool_threads(r: &Value) -> Vec<&Value> {
    let v: Vec<&Value> = (r["threads"].as_array().unwrap().iter())
        .filter(|t| t["name"].as_str().unwrap().starts_with("pool-1-thread-"))
        .collect();
    assert_eq!(v.len(), 4, "{r}");
    v
}

/// Σ of an `OffCpu` object.
fn total(off: &Value) -> u64 {
    off.as_object()
        .map_or(0, |o| o.values().map(|v| v.as_u64().unwrap()).sum())
}

#[test]
fn a_pool_waiting_for_tasks_is_idle_and_its_lock_time_working() {
    const IDLE_MS: u64 = 400;
    const LOCK_MS: u64 = 400;
    for jdk in JDKS {
        let what = jdk_name(jdk);
        let dir = record_default(jdk, "pool-idle-lock", "PoolIdleLock", &["400", "400"]);
        let r = report_json(&dir);
        for t in pool_threads(&r) {
            let name = t["name"].as_str().unwrap();
            let (off, idle) = (&t["off_cpu_ns"], &t["idle_off_cpu_ns"]);
            eprintln!("{what} {name}: off {off}, idle {idle}, rule {}", t["idle_rule"]);
            assert_eq!(t["idle_rule"], "pool", "{what} {name}: {t}");
            assert!(
                total(idle) * 100 >= IDLE_MS * MS * 85,
                "{what} {name}: idle {:.1} ms of the pool's {IDLE_MS} ms without tasks",
                total(idle) as f64 / 1e6
            );
            let working_monitor = ns(off, "monitor") - ns(idle, "monitor");
            assert!(
                working_monitor * 100 >= LOCK_MS * MS * 85,
                "{what} {name}: {:.1} ms of the {LOCK_MS} ms lock wait is working monitor time",
                working_monitor as f64 / 1e6
            );
            // Idle is part of the thread's off-CPU time, cause by cause.
            for (cause, v) in idle.as_object().unwrap() {
                assert!(
                    v.as_u64().unwrap() <= ns(off, cause),
                    "{what} {name}: idle {cause} > off"
                );
            }
            assert_ne!(t["waiting_for_work"], true, "{what} {name}: half its time it worked");
        }
        // The totals add up: wall = cpu + working off + idle + not covered.
        let s = &r["summary"]["threads"];
        let wall = s["wall_ns"].as_u64().unwrap();
        let parts = s["cpu_ns"].as_u64().unwrap()
            + total(&s["off_cpu_ns"])
            + total(&s["idle_off_cpu_ns"])
            + s["not_covered_ns"].as_u64().unwrap();
        assert_eq!(wall, parts, "{what}: summary {s}");
        // And they are the threads' own sums (the tracer's apart).
        let app = (r["threads"].as_array().unwrap().iter()).filter(|t| t["tracer"] != true && t["virtual"] != true);
        let (mut off, mut idle) = (BTreeMap::<String, u64>::new(), BTreeMap::<String, u64>::new());
        for t in app {
            for (c, v) in t["off_cpu_ns"].as_object().unwrap() {
                *off.entry(c.clone()).or_default() += v.as_u64().unwrap();
            }
            for (c, v) in t["idle_off_cpu_ns"].as_object().into_iter().flatten() {
                *idle.entry(c.clone()).or_default() += v.as_u64().unwrap();
            }
        }
        for (c, v) in &off {
            let i = idle.get(c).copied().unwrap_or(0);
            assert_eq!(ns(&s["idle_off_cpu_ns"], c), i, "{what}: idle {c}");
            assert_eq!(ns(&s["off_cpu_ns"], c), v - i, "{what}: working {c}");
        }
        // The stacks say the same by method: the lock is working time, the
        // wait for tasks idle.
        let contend = stack_method(&r, "PoolIdleLock.contend");
        let working = ns(&contend["off_cpu_ns"], "monitor") - ns(&contend["idle_off_cpu_ns"], "monitor");
        assert!(working * 100 >= 4 * LOCK_MS * MS * 85, "{what}: contend {contend}");
        let get_task = stack_method(&r, "java.util.concurrent.ThreadPoolExecutor.getTask");
        assert!(
            total(&get_task["idle_off_cpu_ns"]) * 100 >= 4 * IDLE_MS * MS * 85,
            "{what}: getTask {get_task}"
        );
        // The text ranks working time: the pool's row shows the lock, its
        // idle time apart, and the summary names `contend` first.
        let text = report_text(&dir);
        let row = (text.lines())
            .find(|l| l.contains("pool-1-thread-{1..4} ×4"))
            .unwrap_or_else(|| panic!("{what}: no pool row in\n{text}"));
        // Its largest cause first, with its share.
        let share = (row.split_once(" monitor "))
            .and_then(|(_, rest)| rest.split('%').next())
            .and_then(|p| p.parse::<u32>().ok());
        assert!(share.is_some_and(|p| p >= 85), "{what}: {row}");
        let summary: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("== Summary"))
            .take(14)
            .collect();
        let first_method = (summary.iter())
            .skip_while(|l| !l.contains("top methods off CPU"))
            .nth(1)
            .unwrap_or_else(|| panic!("{what}: {summary:?}"));
        assert!(first_method.contains("PoolIdleLock.contend"), "{what}: {first_method}");
        assert_fits(&what, &text);
        assert_flame_is_working_time(&what, &dir, 4 * IDLE_MS * MS);
    }
}

/// The flame graph's fold leaves the idle time out by default, and only
/// that: every cause's time is the whole fold's less what it says it left
/// out; the pool's wait for tasks (`idle`, ns at least) is gone from the
/// blocked causes, the lock stays.
fn assert_flame_is_working_time(what: &str, dir: &Path, idle: u64) {
    let fold = |working| {
        let opts = CollapsedOptions {
            all: true,
            cpu: true,
            working,
            ..Default::default()
        };
        fold_streaming(dir, &opts, true, &StreamOptions::default()).unwrap().1
    };
    let (all, working) = (fold(false), fold(true));
    assert_eq!((all.idle_ns, all.tracer_ns), (0, 0), "{what}");
    assert!(
        working.idle_ns * 100 >= idle * 85,
        "{what}: {} ns idle left out",
        working.idle_ns
    );
    let sum = |f: &Folded| f.stacks.values().sum::<u64>();
    assert_eq!(sum(&all), sum(&working) + working.idle_ns + working.tracer_ns, "{what}");
    let blocked_in = |f: &Folded, method: &str| -> u64 {
        (f.stacks.iter())
            .filter(|(k, _)| k.contains(method))
            .filter(|(k, _)| Cause::from_name(k.split(';').next().unwrap()).is_some_and(can_be_idle))
            .map(|(_, v)| v)
            .sum()
    };
    let get_task = "java.util.concurrent.ThreadPoolExecutor.getTask";
    assert!(blocked_in(&all, get_task) * 100 >= idle * 85, "{what}: all");
    assert_eq!(blocked_in(&working, get_task), 0, "{what}: working");
    let contend = "PoolIdleLock.contend";
    assert_eq!(
        blocked_in(&working, contend),
        blocked_in(&all, contend),
        "{what}: the lock"
    );
}

#[test]
fn the_default_report_of_200_threads_fits_120_columns() {
    let dir = record_default(JDK17, "many-threads", "ManyThreads", &["150", "50"]);
    let text = report_text(&dir);
    assert_fits("200 threads", &text);
    // Threads named alike are one row; those with names of their own are
    // listed each (cut to their column).
    assert!(text.contains("worker-{0..149} ×150"), "{text}");
    let r = report_json(&dir);
    assert!(r["threads"].as_array().unwrap().len() >= 200);
    // `jtrace text`'s headers too: its `#` lines, thread headers and totals.
    let t = text_of(&dir);
    let headers =
        (t.lines()).filter(|l| l.starts_with('#') || l.starts_with("== Thread") || l.contains("thread total"));
    for l in headers {
        assert!(
            l.chars().count() <= 120,
            "text header of {} columns:\n{l}",
            l.chars().count()
        );
    }
}

/// `jtrace text` of `dir`.
fn text_of(dir: &Path) -> String {
    String::from_utf8(jtrace_stdout(&["text"], dir)).unwrap()
}

#[test]
fn stack_methods_agree_with_the_collapsed_stacks() {
    let dir = record_default(JDK17, "stack-methods", "PoolIdleLock", &["200", "200"]);
    let r = report_json(&dir);
    let collapsed = String::from_utf8(jtrace_stdout(&["export", "--format", "collapsed", "--all"], &dir)).unwrap();
    // By method name, by cause: the time of the folded stacks holding it
    // (each stack once, however often it holds the method).
    let mut by_method: HashMap<String, BTreeMap<String, u64>> = HashMap::new();
    for line in collapsed.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let mut frames = stack.split(';');
        let cause = frames.next().unwrap().to_string();
        let mut java: Vec<&str> = (frames)
            .filter_map(|f| ["_[j]", "_[i]", "_[0]", "_[1]"].iter().find_map(|s| f.strip_suffix(s)))
            .collect();
        java.sort_unstable();
        java.dedup();
        for m in java {
            *by_method
                .entry(m.to_string())
                .or_default()
                .entry(cause.clone())
                .or_default() += n.parse::<u64>().unwrap();
        }
    }
    let methods = r["stack_methods"].as_array().unwrap();
    let mut overloads: HashMap<String, usize> = HashMap::new();
    for m in methods {
        *overloads.entry(qualified(m)).or_default() += 1;
    }
    let mut compared = 0;
    for m in methods.iter().filter(|m| overloads[&qualified(m)] == 1) {
        let name = qualified(m);
        let want: BTreeMap<String, u64> = (m["off_cpu_ns"].as_object().unwrap().iter())
            .map(|(c, v)| (c.clone(), v.as_u64().unwrap()))
            .collect();
        assert_eq!(by_method.get(&name).cloned().unwrap_or_default(), want, "{name}");
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} methods compared");
    // The application's own methods are among them.
    assert!(by_method.contains_key("PoolIdleLock.contend"));
}

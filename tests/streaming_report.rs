//! The streaming report (`jtrace report`, sorted runs on disk) equals the
//! in-memory analysis on real recorded traces: real JVMs under the real
//! kernel recorder, with full syscall records (written at exit, out of
//! stream order), library-call spans, GC windows and many method events.
//! Needs root, as CI has.

mod common;

use callback_log::Log;
use jtrace_testkit::callback_log;

use common::*;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{analyze, build_report, CallIndex, MethodIdx, ReportFilter, ThreadInfo, Trace, Visitor, Wake};
use std::path::Path;
use std::process::Command;

/// Every wakeup with its waker's method (from the index when given).
struct Wakes<'a>(Option<&'a CallIndex>, Vec<(u32, u64, Option<MethodIdx>)>);

impl Visitor for Wakes<'_> {
    fn wakeup(&mut self, t: &ThreadInfo, _: usize, w: &Wake) {
        if let Some(index) = self.0 {
            self.1.push((t.tid, w.ts, index.method_at(w.waker_tid, w.ts)));
        }
    }
    fn waker_method(&mut self, t: &ThreadInfo, _: usize, w: &Wake, m: Option<MethodIdx>) {
        self.1.push((t.tid, w.ts, m));
    }
}

fn check(dir: &Path) {
    let trace = Trace::open(dir).unwrap();
    let events: usize = trace.events.values().map(Vec::len).sum();
    assert!(events > 5_000, "a trace big enough to spill: {events} events");
    let mut log = Log::default();
    analyze(&trace, &mut log);

    // Budget of ~1/8 of the events: several runs, each thread split across them.
    let budget = events * 3;
    let (st, sorted) = stream::open(
        dir,
        &StreamOptions {
            memory_budget: budget,
            ..Default::default()
        },
    )
    .unwrap();
    let runs = sorted.spilled_runs();
    assert!(runs >= 4, "{runs} runs");
    let mut slog = Log::default();
    stream::analyze(&st, sorted, &mut slog).unwrap();
    assert_eq!(log.0.len(), slog.0.len());
    for (i, (a, b)) in log.0.iter().zip(&slog.0).enumerate() {
        assert_eq!(a, b, "callback {i}");
    }
    // The waker's method, answered from the waker's own stream.
    let index = CallIndex::build(&trace);
    let mut expected = Wakes(Some(&index), Vec::new());
    analyze(&trace, &mut expected);
    let (st, sorted) = stream::open(
        dir,
        &StreamOptions {
            memory_budget: budget,
            waker_methods: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut got = Wakes(None, Vec::new());
    stream::analyze_with_wakers(&st, sorted, &mut got).unwrap();
    assert_eq!(expected.1, got.1);
    assert!(got.1.iter().any(|a| a.2.is_some()), "some waker was in a traced method");

    // The CLI entry point, with runs on disk, prints the in-memory report.
    let mem = serde_json::to_value(build_report(&trace, &ReportFilter::default())).unwrap();
    let o = Command::new(jtrace())
        .args(["report", "--json", "--memory-budget"])
        .arg(budget.to_string())
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let streamed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(mem, streamed);
}

#[test]
fn streaming_report_equals_in_memory_on_recorded_traces() {
    for jdk in JDKS {
        let lib = inflate_spec(jdk);
        for (scenario, extra) in [
            ("zlib", vec!["--lib-calls", lib.as_str()]),
            ("monitor", vec![]),
            ("gc", vec![]),
        ] {
            eprintln!("== {jdk} {scenario}");
            let dir = record_ground_truth(jdk, scenario, &extra);
            check(&dir);
            std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
        }
    }
}

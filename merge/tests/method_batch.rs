//! METHOD_BATCH records mean exactly the METHOD_ENTRY/METHOD_EXIT records of
//! their events: the same synthetic trace written both ways gives the same
//! callbacks and the same report, in memory and streamed with spilled runs.

use jtrace_testkit::synth;

use callback_log::Log;
use jtrace_testkit::callback_log;

use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{analyze, build_report, build_report_streaming, ReportFilter, Trace};
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-batch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn jvm_stream_len(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("jvm-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Callbacks, report JSON and event counts of the in-memory analysis, and
/// the same of the streaming one at a budget small enough to spill.
fn both_ways(dir: &Path) -> [(Vec<String>, String, u64); 2] {
    let t = Trace::open(dir).unwrap();
    let mut log = Log::default();
    analyze(&t, &mut log);
    let whole = (
        log.0,
        serde_json::to_string_pretty(&build_report(&t, &ReportFilter::default())).unwrap(),
        t.jvm_records,
    );
    let opts = StreamOptions {
        memory_budget: 1 << 20,
        ..Default::default()
    };
    let (t, events) = stream::open(dir, &opts).unwrap();
    assert!(events.spilled_runs() > 0, "the small budget should spill");
    let mut log = Log::default();
    stream::analyze(&t, events, &mut log).unwrap();
    let r = build_report_streaming(dir, &ReportFilter::default(), &opts).unwrap();
    [whole, (log.0, serde_json::to_string_pretty(&r).unwrap(), t.jvm_records)]
}

#[test]
fn batched_and_per_event_method_records_read_the_same() {
    let root = tempdir("same");
    let (plain, batched) = (root.join("plain"), root.join("batched"));
    let shape = |method_batches| synth::Shape {
        simple: false,
        method_batches,
    };
    let n = synth::generate_shaped(&plain, 200_000, 6, shape(false)).unwrap();
    assert_eq!(synth::generate_shaped(&batched, 200_000, 6, shape(true)).unwrap(), n);
    // Batches are cut short by this trace's frequent other JVM records
    // (park, monitor …), and still make the JVM stream much smaller.
    let (a, b) = (jvm_stream_len(&plain), jvm_stream_len(&batched));
    assert!(b * 4 < a * 3, "batched JVM stream {b} bytes, per-event {a}");

    let want = both_ways(&plain);
    let got = both_ways(&batched);
    std::fs::remove_dir_all(&root).unwrap();
    for (w, g) in want.iter().zip(&got) {
        assert!(w.2 > 50_000, "{} JVM events", w.2);
        assert_eq!(w.2, g.2, "JVM event counts differ");
        assert_eq!(w.0.len(), g.0.len(), "callback counts differ");
        for (i, (x, y)) in w.0.iter().zip(&g.0).enumerate() {
            assert_eq!(x, y, "callback {i} differs");
        }
        // The reports differ only in the trace's path.
        assert!(w.1 == g.1.replace("/batched", "/plain"), "reports differ");
    }
    assert_eq!(want[0].0, want[1].0, "in-memory and streamed callbacks differ");
}

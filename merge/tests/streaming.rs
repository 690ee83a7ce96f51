//! The streaming analysis gives exactly what the in-memory one gives: every
//! visitor callback and the whole JSON report, with and without spilled runs.

use jtrace_testkit::synth;

use callback_log::Log;
use jtrace_testkit::callback_log;

use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    analyze, build_report, build_report_streaming, CallIndex, Cause, MethodIdx, ReportFilter, ThreadInfo, Trace,
    Visitor, Wake,
};
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-streaming-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn in_memory(dir: &Path) -> (Vec<String>, String) {
    let t = Trace::open(dir).unwrap();
    let mut log = Log::default();
    analyze(&t, &mut log);
    let r = serde_json::to_string_pretty(&build_report(&t, &ReportFilter::default())).unwrap();
    (log.0, r)
}

fn streamed(dir: &Path, budget: usize) -> (Vec<String>, String, usize) {
    let opts = StreamOptions {
        memory_budget: budget,
        ..Default::default()
    };
    let (t, events) = stream::open(dir, &opts).unwrap();
    let runs = events.spilled_runs();
    let mut log = Log::default();
    stream::analyze(&t, events, &mut log).unwrap();
    let r = build_report_streaming(dir, &ReportFilter::default(), &opts).unwrap();
    (log.0, serde_json::to_string_pretty(&r).unwrap(), runs)
}

fn assert_same(a: &[String], b: &[String]) {
    assert_eq!(a.len(), b.len(), "callback counts differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x, y, "callback {i} differs");
    }
}

#[test]
fn synthetic_trace_same_callbacks_and_report_at_every_budget() {
    let dir = tempdir("synth").join("t.jtrace");
    let n = synth::generate(&dir, 300_000, 12).unwrap();
    assert!(n >= 300_000);
    let (log, report) = in_memory(&dir);
    // The trace exercises what the streaming path must carry: causes from
    // syscalls, JVM states, windows, faults; wakers; recursion.
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let off = &r["methods"][0]["off_cpu_ns"];
    for c in [
        "monitor",
        "park",
        "sleep",
        "socket",
        "lock_native",
        "page_fault",
        "runqueue",
        "gc",
    ] {
        assert!(
            r["methods"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["off_cpu_ns"][c].as_u64().unwrap_or(0) > 0),
            "no method has {c} time: {off}"
        );
    }
    assert!(r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "VM Thread"));
    // One run in memory; a few runs; many small runs.
    for (budget, min_runs, max_runs) in [(256 << 20, 0, 0), (2 << 20, 3, 40), (64 << 10, 100, usize::MAX)] {
        let (slog, sreport, runs) = streamed(&dir, budget);
        assert!(
            (min_runs..=max_runs).contains(&runs),
            "budget {budget}: {runs} runs, expected {min_runs}..={max_runs}"
        );
        assert_same(&log, &slog);
        assert_eq!(report, sreport, "budget {budget}: reports differ");
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// With few runs (each gets a 1 MiB share of the budget's read eighth) the
/// runs are read back through a mapping and the input streams are mapped
/// too (finished); the callbacks and the report are still those of the
/// in-memory path, for method events one record each and batched.
#[test]
fn mapped_runs_and_streams_give_the_same_analysis() {
    for batched in [false, true] {
        let dir = tempdir(if batched { "mapped-batched" } else { "mapped" }).join("t.jtrace");
        let shape = synth::Shape {
            method_batches: batched,
            ..Default::default()
        };
        synth::generate_shaped(&dir, 1_200_000, 8, shape).unwrap();
        let (log, report) = in_memory(&dir);
        let (slog, sreport, runs) = streamed(&dir, 24 << 20);
        assert!(
            (1..=3).contains(&runs),
            "{runs} runs: the test needs 1 to 3 to map them"
        );
        assert_same(&log, &slog);
        assert_eq!(report, sreport, "batched {batched}: reports differ");
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}

/// Every wakeup with its waker's method, as the whole-trace index says.
struct Wakers<'a>(Option<&'a CallIndex>, Vec<String>);

impl Visitor for Wakers<'_> {
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        if let Some(index) = self.0 {
            let m = index.method_at(w.waker_tid, w.ts);
            self.1.push(format!("{} {depth} {w:?} {m:?}", t.tid));
        }
    }
    fn waker_method(&mut self, t: &ThreadInfo, depth: usize, w: &Wake, m: Option<MethodIdx>) {
        self.1.push(format!("{} {depth} {w:?} {m:?}", t.tid));
    }
}

/// Every wakeup in walk order: (wakee, depth, wakeup).
#[derive(Default)]
struct WakeList(Vec<(u32, usize, Wake)>);

impl Visitor for WakeList {
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        self.0.push((t.tid, depth, *w));
    }
}

/// The waker's method of every wakeup, answered from the waker's own
/// stream in bounded memory, equals the whole-trace index's answer.
#[test]
fn waker_methods_equal_the_call_index() {
    let dir = tempdir("wakers").join("t.jtrace");
    synth::generate(&dir, 200_000, 8).unwrap();
    let t = Trace::open(&dir).unwrap();
    let index = CallIndex::build(&t);
    let mut expected = Wakers(Some(&index), Vec::new());
    analyze(&t, &mut expected);
    assert!(expected.1.len() > 10_000);
    assert!(expected.1.iter().any(|s| !s.ends_with("None")));
    for budget in [256 << 20, 64 << 10] {
        let opts = StreamOptions {
            memory_budget: budget,
            waker_methods: true,
            ..Default::default()
        };
        let (st, events) = stream::open(&dir, &opts).unwrap();
        let mut got = Wakers(None, Vec::new());
        stream::analyze_with_wakers(&st, events, &mut got).unwrap();
        assert_same(&expected.1, &got.1);
        // The rest of the walk is unchanged by the extra pass.
        let (st, events) = stream::open(&dir, &opts).unwrap();
        let mut log = Log::default();
        stream::analyze_with_wakers(&st, events, &mut log).unwrap();
        assert_same(&in_memory(&dir).0, &log.0);
        // In one walk that answers as it goes: the same answers after it,
        // asked thread by thread in walk order, and the same walk.
        let (st, events) = stream::open(&dir, &opts).unwrap();
        let mut wakes = WakeList::default();
        let mut answers = stream::analyze_answering_wakers(&st, events, &mut wakes).unwrap();
        let mut got = Vec::new();
        let mut left = wakes.0.iter().peekable();
        for info in st.threads.values() {
            let mut a = answers.thread(info).unwrap();
            while let Some((tid, depth, w)) = left.next_if(|x| x.0 == info.tid) {
                let m = a.method(w.ts, w.waker_tid).unwrap();
                got.push(format!("{tid} {depth} {w:?} {m:?}"));
            }
        }
        assert!(left.next().is_none(), "wakeups in walk order");
        assert_same(&expected.1, &got);
        let (st, events) = stream::open(&dir, &opts).unwrap();
        let mut log = Log::default();
        stream::analyze_answering_wakers(&st, events, &mut log).unwrap();
        assert_same(&in_memory(&dir).0, &log.0);
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn filters_apply_the_same() {
    let dir = tempdir("filters").join("t.jtrace");
    synth::generate(&dir, 50_000, 4).unwrap();
    let t = Trace::open(&dir).unwrap();
    let opts = StreamOptions {
        memory_budget: 32 << 10,
        ..Default::default()
    };
    for filter in [
        ReportFilter {
            thread: Some("worker-[12]".into()),
            ..Default::default()
        },
        ReportFilter {
            thread: Some("worker-1".into()),
            method: Some("com.example.C3.*".into()),
            cause: Some(Cause::Monitor),
            ..Default::default()
        },
    ] {
        let a = serde_json::to_string(&build_report(&t, &filter)).unwrap();
        let b = serde_json::to_string(&build_report_streaming(&dir, &filter, &opts).unwrap()).unwrap();
        assert_eq!(a, b);
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A stream cut off inside a record still reports, with the truncation in
/// the problems, identically on both paths.
#[test]
fn truncated_streams_still_report() {
    // Small streams are read in chunks; the larger kernel stream (over one
    // read, 4 MiB) is mapped.
    for events in [60_000, 400_000] {
        let dir = tempdir(&format!("trunc-{events}")).join("t.jtrace");
        synth::generate(&dir, events, 4).unwrap();
        for f in [jtrace_format::KERNEL_FILE.to_string(), "jvm-4242.bin".to_string()] {
            let p = dir.join(&f);
            let len = std::fs::metadata(&p).unwrap().len();
            let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            // Cut inside a record: records are multiples of 8 bytes long.
            file.set_len(len * 2 / 3 / 8 * 8 + 5).unwrap();
        }
        if events > 100_000 {
            let k = std::fs::metadata(dir.join(jtrace_format::KERNEL_FILE)).unwrap().len();
            assert!(k > 4 << 20, "kernel stream of {k} bytes: too short to be mapped");
        }
        let (log, report) = in_memory(&dir);
        let (slog, sreport, runs) = streamed(&dir, 16 << 10);
        assert!(runs > 1);
        assert_same(&log, &slog);
        assert_eq!(report, sreport);
        let r: serde_json::Value = serde_json::from_str(&sreport).unwrap();
        let problems = r["trace"]["problems"].as_array().unwrap();
        assert!(
            problems.iter().any(|p| p.as_str().unwrap().contains("kernel.bin")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.as_str().unwrap().contains("jvm-4242.bin")),
            "{problems:?}"
        );
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}

/// No place for the sorted runs: a clear error, not a panic and not a
/// silently partial report.
#[test]
fn missing_temp_dir_is_a_clear_error() {
    let dir = tempdir("notemp").join("t.jtrace");
    synth::generate(&dir, 20_000, 4).unwrap();
    let opts = StreamOptions {
        memory_budget: 8 << 10,
        temp_dir: Some(dir.join("no/such/dir")),
        ..Default::default()
    };
    let e = build_report_streaming(&dir, &ReportFilter::default(), &opts).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("temporary directory") && msg.contains("no/such/dir"),
        "{msg}"
    );
    // It fits a larger budget: no temporary space needed at all.
    let opts = StreamOptions {
        memory_budget: 64 << 20,
        ..opts
    };
    build_report_streaming(&dir, &ReportFilter::default(), &opts).unwrap();
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn sizes_parse() {
    assert_eq!(stream::parse_size("64M"), Ok(64 << 20));
    assert_eq!(stream::parse_size("512k"), Ok(512 << 10));
    assert_eq!(stream::parse_size("1000"), Ok(1000));
    assert!(stream::parse_size("12X").is_err());
    assert!(stream::parse_size("").is_err());
}

/// Method events with an undefined id are counted in one problem line per
/// stream (not one line per event: the report stays small on a bad stream).
#[test]
fn undefined_method_ids_are_one_problem() {
    use jtrace_format::*;
    let dir = tempdir("undef").join("t.jtrace");
    std::fs::create_dir_all(&dir).unwrap();
    let mut j = Encoder::new();
    j.record(&Record {
        tid: 9,
        ts: 0,
        payload: Payload::JvmStart(JvmStart {
            pid: 9,
            vm_version: "x".into(),
        }),
    });
    for (i, m) in [7u64, 8, 7].into_iter().enumerate() {
        j.record(&Record {
            tid: 10,
            ts: 10 + i as u64,
            payload: Payload::MethodEntry(MethodEvent {
                method: m,
                flags: 0,
                reserved: 0,
            }),
        });
    }
    j.record(&Record {
        tid: 9,
        ts: 20,
        payload: Payload::JvmEnd(JvmEnd { lost_events: 0 }),
    });
    let mut bytes = FileHeader::new(JVM_MAGIC).to_bytes().to_vec();
    bytes.extend_from_slice(&j.buf);
    std::fs::write(dir.join("jvm-9.bin"), bytes).unwrap();
    jtrace_merge::Meta {
        format: "jtrace".into(),
        version: FORMAT_VERSION,
        complete: true,
        ..Default::default()
    }
    .store(&dir)
    .unwrap();
    let (_, report) = in_memory(&dir);
    let (_, sreport, _) = streamed(&dir, 1 << 20);
    assert_eq!(report, sreport);
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let problems: Vec<&str> = r["trace"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .filter(|p| p.contains("before its definition"))
        .collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("3 method event(s)") && problems[0].contains("0x7"),
        "{problems:?}"
    );
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// JVM-wide stop windows reach a Java thread only within its own life: a GC
/// before a thread started or after it ended does not stretch the thread's
/// traced life (it used to, as `unknown` off-CPU time), and a GC already
/// running when the thread's life begins still explains a block inside it.
/// Both readers agree.
#[test]
fn stop_windows_stay_within_each_threads_life() {
    use jtrace_format::*;
    let dir = tempdir("windows").join("t.jtrace");
    std::fs::create_dir_all(&dir).unwrap();
    let (pid, tid) = (100u32, 101u32);
    let header = |magic| {
        let mut h = FileHeader::new(magic);
        h.flags = STREAM_COMPLETE;
        h.to_bytes().to_vec()
    };
    // Kernel: the thread blocks from 1100 to 1200 (no syscall on record),
    // inside a GC that began at 900, before the thread's first event.
    let mut k = Encoder::new();
    let sw_out = |ts| Record {
        tid,
        ts,
        payload: Payload::SwitchOut(SwitchOut {
            tgid: pid,
            prev_state: 1,
            cpu: 0,
            next_tid: 0,
        }),
    };
    let sw_in = |ts| Record {
        tid,
        ts,
        payload: Payload::SwitchIn(SwitchIn {
            tgid: pid,
            cpu: 0,
            prev_tid: 0,
            reserved: 0,
        }),
    };
    for r in [sw_in(1000), sw_out(1100), sw_in(1200), sw_out(2000)] {
        k.record(&r);
    }
    let mut kernel = header(KERNEL_MAGIC);
    kernel.extend_from_slice(&k.buf);
    std::fs::write(dir.join(KERNEL_FILE), kernel).unwrap();
    // JVM: the thread lives from 1000 to 2000; GCs at 900-1300 and 3000-3500
    // (recorded on another thread, as the JVM does).
    let mut j = Encoder::new();
    let gc = |ts, start: bool| Record {
        tid: pid,
        ts,
        payload: Payload::Jvm(
            if start { kind::GC_START } else { kind::GC_END },
            JvmBlock {
                arg: 0,
                class: String::new(),
            },
        ),
    };
    let recs = [
        Record {
            tid: pid,
            ts: 10,
            payload: Payload::JvmStart(JvmStart {
                pid,
                vm_version: "test".into(),
            }),
        },
        gc(900, true),
        Record {
            tid,
            ts: 1000,
            payload: Payload::ThreadStart(ThreadStart {
                daemon: 0,
                name: "worker".into(),
                group: "main".into(),
                parent: "main".into(),
            }),
        },
        gc(1300, false),
        Record {
            tid,
            ts: 2000,
            payload: Payload::ThreadEnd,
        },
        gc(3000, true),
        gc(3500, false),
        Record {
            tid: pid,
            ts: 4000,
            payload: Payload::JvmEnd(JvmEnd { lost_events: 0 }),
        },
    ];
    for r in &recs {
        j.record(r);
    }
    let mut jvm = header(JVM_MAGIC);
    jvm.extend_from_slice(&j.buf);
    std::fs::write(dir.join(format!("{JVM_FILE_PREFIX}{pid}.bin")), jvm).unwrap();
    jtrace_merge::Meta {
        format: "jtrace".into(),
        version: FORMAT_VERSION,
        complete: true,
        pid,
        start_monotonic_ns: 0,
        end_monotonic_ns: 4000,
        ..Default::default()
    }
    .store(&dir)
    .unwrap();

    let (log, report) = in_memory(&dir);
    let (slog, sreport, _) = streamed(&dir, 64 << 20);
    assert_same(&log, &slog);
    assert_eq!(report, sreport);
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let worker = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == tid)
        .expect("the worker in the report")
        .clone();
    assert_eq!(worker["wall_ns"], 1000, "{worker}");
    assert_eq!(worker["off_cpu_ns"]["gc"], 100, "{worker}");
    assert!(worker["off_cpu_ns"].get("unknown").is_none(), "{worker}");
}

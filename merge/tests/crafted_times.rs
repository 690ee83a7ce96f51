//! A JVM stream is the traced program's writing: a time in it that lies
//! outside the recording (2^64 − 1, before the start, a batch whose deltas
//! run past the end) is never given time. The same trace written honestly
//! and with such records reads the same where they agree; the forged one's
//! figures stay within the recording, and its problems say what was left
//! out. Both readers (whole and streamed) agree.

use jtrace_format::{self as fmt, kind, BatchedKind, Encoder, Payload, Record};
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{build_report, build_report_streaming, Cause, Report, ReportFilter, Trace};
use jtrace_testkit::builder::TraceBuilder;
use std::io::Write;
use std::path::{Path, PathBuf};

const PID: u32 = 100;
const TID: u32 = 10;
const START: u64 = 1_000;
const END: u64 = 21_000;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-crafted-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A METHOD_BATCH of `TID` at `ts` with `events` (delta, method, kind),
/// as raw bytes (the deltas as given: no writer's check).
fn raw_batch(ts: u64, events: &[(u32, u32, BatchedKind)]) -> Vec<u8> {
    let mut b = fmt::batch_header(TID, ts, events.len()).to_vec();
    for &(delta, method, k) in events {
        b.extend_from_slice(&fmt::batch_event(delta, method, k).to_le_bytes());
    }
    b
}

fn record(tid: u32, ts: u64, payload: Payload) -> Vec<u8> {
    let mut e = Encoder::new();
    e.record(&Record { tid, ts, payload });
    e.buf
}

/// One Java thread in one JVM, recorded from `START` to `END`: `outer`
/// (2 000 – 19 000) calls `inner` (3 000 – 12 000, parked 7 900 – 9 400
/// inside), then, in one batch, `c` and `d`. `forged` replaces some of
/// the JVM's times with impossible ones and adds impossible records.
fn write_trace(dir: &Path, forged: bool) {
    use BatchedKind::{Entry, Exit};
    let mut b = TraceBuilder::default();
    b.jvm(
        PID,
        &[
            (1, "App.outer"),
            (2, "App.inner"),
            (3, "App.c"),
            (4, "App.d"),
            (5, "App.early"),
        ],
    );
    b.java_thread(PID, TID, START, "main");
    b.block(TID, 8_000, 9_000, 0, 9_500);
    b.switch_out(TID, 20_000, false, 0);
    b.enter(TID, 2_000, 1);
    b.enter(TID, 3_000, 2);
    b.jvm_event(TID, 7_900, kind::PARK_BEGIN, "");
    b.jvm_event(TID, if forged { u64::MAX } else { 9_400 }, kind::PARK_END, "");
    b.exit(TID, if forged { u64::MAX } else { 12_000 }, 2);
    b.write_unended(dir, START, END);
    let jvm = dir.join(format!("{}{PID}.bin", fmt::JVM_FILE_PREFIX));
    let mut tail = Vec::new();
    // `d` ends 1 000 ns after it began, or, forged, 2^32 − 1 ns: far
    // past the recording's end, from a batch that began inside it.
    let d_len = if forged { u32::MAX } else { 1_000 };
    tail.extend(raw_batch(
        13_000,
        &[(0, 3, Entry), (500, 3, Exit), (100, 4, Entry), (d_len, 4, Exit)],
    ));
    if forged {
        // A batch at the clock's end whose delta would wrap to time 4.
        tail.extend(raw_batch(u64::MAX - 5, &[(0, 3, Entry), (10, 3, Exit)]));
        // Before the recording began.
        tail.extend(record(TID, 0, method_event(true, 5)));
        tail.extend(jvm_block(500, kind::SAFEPOINT_BEGIN));
        tail.extend(jvm_block(600, kind::SAFEPOINT_END));
        // A GC that never ends inside the recording.
        tail.extend(jvm_block(15_000, kind::GC_START));
        tail.extend(jvm_block(u64::MAX, kind::GC_END));
        // Lost events dated after the end: counted, dated at the end.
        let lost = fmt::JvmLost {
            events: 7,
            reason: fmt::LOST_STREAM_FULL,
            reserved: 0,
        };
        tail.extend(record(TID, u64::MAX, Payload::JvmLost(lost)));
    }
    tail.extend(record(TID, 19_000, method_event(false, 1)));
    tail.extend(record(0, END, Payload::JvmEnd(fmt::JvmEnd { lost_events: 0 })));
    let mut f = std::fs::OpenOptions::new().append(true).open(jvm).unwrap();
    f.write_all(&tail).unwrap();
}

fn method_event(entry: bool, method: u64) -> Payload {
    let e = fmt::MethodEvent {
        method,
        flags: 0,
        reserved: 0,
    };
    if entry {
        Payload::MethodEntry(e)
    } else {
        Payload::MethodExit(e)
    }
}

fn jvm_block(ts: u64, k: u16) -> Vec<u8> {
    let b = fmt::JvmBlock {
        arg: 0,
        class: String::new(),
    };
    record(TID, ts, Payload::Jvm(k, b))
}

/// The trace and its report, from both readers (checked equal).
fn read(dir: &Path) -> (Trace, Report) {
    let whole = Trace::open(dir).unwrap();
    let r = build_report(&whole, &ReportFilter::default());
    let opts = StreamOptions {
        memory_budget: 64 << 10,
        ..Default::default()
    };
    let (streamed, _) = jtrace_merge::stream::open(dir, &opts).unwrap();
    let s = build_report_streaming(dir, &ReportFilter::default(), &opts).unwrap();
    assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&s).unwrap());
    let scanned = Trace::scan(dir).unwrap();
    for t in [&streamed, &scanned] {
        assert_eq!(t.losses.outside_recording, whole.losses.outside_recording);
        assert_eq!(t.losses.truncated, whole.losses.truncated);
        assert_eq!(t.losses.jvm_lost_threads, whole.losses.jvm_lost_threads);
    }
    (whole, r)
}

/// No method, invocation or thread gets more time than the recording
/// lasted, and every figure still adds up exactly.
fn assert_within_recording(r: &Report) {
    let length = END - START;
    assert_eq!(r.trace.duration_ns, length);
    for m in r.methods.iter().chain(r.threads.iter().flat_map(|t| t.methods.iter())) {
        assert!(
            m.wall_ns <= length && m.wall_max_ns <= length,
            "{}.{}: {} ns in a recording of {length} ns",
            m.class,
            m.name,
            m.wall_ns
        );
        assert_eq!(
            m.wall_ns,
            m.cpu_ns + m.off_cpu_ns.total() + m.not_covered_ns,
            "{}",
            m.name
        );
        assert!(m.off_cpu_ns.total() <= length, "{}: {:?}", m.name, m.off_cpu_ns);
    }
    for t in &r.threads {
        assert!(t.wall_ns <= length, "tid {}: {} ns", t.tid, t.wall_ns);
        assert_eq!(t.wall_ns, t.cpu_ns + t.off_cpu_ns.total() + t.not_covered_ns);
    }
}

#[test]
fn jvm_records_outside_the_recording_are_never_given_time() {
    let root = tempdir("outside");
    let (honest, forged) = (root.join("honest.jtrace"), root.join("forged.jtrace"));
    write_trace(&honest, false);
    write_trace(&forged, true);
    let (ht, hr) = read(&honest);
    let (ft, fr) = read(&forged);
    std::fs::remove_dir_all(&root).unwrap();

    // The honest trace: nothing outside, nothing said.
    assert_eq!(ht.losses.outside_recording, 0);
    assert!(ht.losses.truncated.is_empty(), "{:?}", ht.losses.truncated);
    assert_within_recording(&hr);
    let method = |r: &Report, name: &str| r.methods.iter().find(|m| m.name == name).cloned();
    let d = method(&hr, "d").unwrap();
    assert_eq!((d.calls, d.wall_ns), (1, 1_000));
    let inner = method(&hr, "inner").unwrap();
    assert_eq!(inner.off_cpu_ns.get(Cause::Park), 1_000);

    // The forged one: every impossible time counted, once per stream.
    assert_within_recording(&fr);
    assert_eq!(ft.losses.outside_recording, 10, "{:?}", ft.losses.truncated);
    let p = fr.trace.problems.join("\n");
    let outside: Vec<_> = fr
        .trace
        .problems
        .iter()
        .filter(|p| p.contains("outside the recording"))
        .collect();
    assert_eq!(outside.len(), 1, "{p}");
    for said in [
        "jvm-100.bin: 10 record(s) carry a time outside the recording (+0.000 ms to +0.020 ms)",
        "3 before its start (from -0.001 ms)",
        "7 after its end (up to +18446744073709.550 ms)",
        "1 of them method events that a batch's time deltas carried past the end",
        "9 event(s) among them are left out",
        "1 (lost events, demotions) are dated at the recording's nearest edge",
        "damaged or forged",
    ] {
        assert!(p.contains(said), "{said:?} not in {p}");
    }
    // The lost events are kept, dated at the end.
    assert_eq!(ft.losses.jvm_lost_threads, vec![(TID, END, 7)]);
    // Where honest and forged agree, so do the figures: `outer` and `c`.
    for name in ["outer", "c"] {
        let (h, f) = (method(&hr, name).unwrap(), method(&fr, name).unwrap());
        assert_eq!((h.calls, h.wall_ns, h.cpu_ns), (f.calls, f.wall_ns, f.cpu_ns), "{name}");
    }
    // `early` entered before the start: left out, never a call.
    assert!(method(&fr, "early").is_none());
    // `inner` and `d` lost their exits: they end with their caller, unfinished.
    assert_eq!(method(&fr, "inner").unwrap().wall_ns, 19_000 - 3_000);
    assert_eq!(method(&fr, "d").unwrap().wall_ns, 19_000 - 13_600);
    // A block or window whose end was left out closes where it began: its
    // cause is given to nothing after it (the block at 8 000 – 9 000 has
    // no evidence left, the GC none at all).
    let inner = method(&fr, "inner").unwrap();
    assert_eq!(inner.off_cpu_ns.get(Cause::Park), 0);
    assert_eq!(inner.off_cpu_ns.get(Cause::Unknown), 1_000);
    for t in &fr.threads {
        assert_eq!(t.off_cpu_ns.get(Cause::Gc) + t.off_cpu_ns.get(Cause::Safepoint), 0);
    }
    let stops = &ft.jvm_stops[&PID];
    assert_eq!(stops, &vec![(15_000, Cause::Gc, true), (15_000, Cause::Gc, false)]);
    // No time of the thread is outside the recording.
    for th in ft.threads.values() {
        assert!(th.first_ts >= START && th.last_ts <= END, "{th:?}");
    }
}

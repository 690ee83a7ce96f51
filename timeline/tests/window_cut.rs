//! A view of a time window (`jtrace timeline --window`, `export --format
//! chrome --window`) leaves the calls wholly outside the window out of the
//! sort and the walk (merge/src/read/cut.rs), and draws exactly what the
//! walk of every event draws: the HTML page and the Chrome JSON are byte
//! for byte the same, for windows at the start, in the middle, at the end,
//! of zero width and past the end, in memory and spilled to sorted runs,
//! with method events one record each (JVMTI) and in METHOD_BATCH records
//! (the bytecode agent). Synthetic traces with every kind of evidence,
//! recursion, threads forked and ended, GC windows, records out of stream
//! order.

use jtrace_testkit::synth;

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{Meta, Trace};
use jtrace_timeline::scope::{collect_scoped, collect_scoped_full, ScopedModel};
use jtrace_timeline::{time_origin, write_html_view, HtmlOptions, View};
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-window-cut-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The HTML page and the Chrome JSON of a scoped model.
fn drawn(model: ScopedModel) -> (Vec<u8>, Vec<u8>) {
    let (trace, threads, windows, scope) = model;
    let view = View::scoped(&trace, threads, windows, scope);
    let mut html = Vec::new();
    write_html_view(&view, &HtmlOptions::default(), &mut html).unwrap();
    let mut chrome = Vec::new();
    jtrace_timeline::write_chrome_view(&view, &mut chrome).unwrap();
    (html, chrome)
}

/// A synthetic trace whose recording starts at its first event (as a
/// recorded one does: the windows are relative to that start).
fn trace(name: &str, events: u64, batched: bool) -> (PathBuf, u64) {
    let dir = tempdir(name).join("t.jtrace");
    let shape = synth::Shape {
        simple: false,
        method_batches: batched,
    };
    synth::generate_shaped(&dir, events, 6, shape).unwrap();
    let t0 = time_origin(&Trace::scan(&dir).unwrap());
    let mut meta = Meta::load(&dir).unwrap();
    meta.start_monotonic_ns = t0;
    let length = meta.end_monotonic_ns - t0;
    meta.store(&dir).unwrap();
    (dir, length)
}

/// The windows tried on a trace `length` ns long.
fn windows(length: u64) -> Vec<(u64, u64)> {
    let l = length;
    vec![
        (0, l / 10),
        (l / 3, l / 3 + l / 20),
        (l / 2, l / 2),
        (l - l / 10, l),
        (l + 1000, l + 2000),
    ]
}

fn same_as_full_scan(dir: &Path, length: u64, budget: usize) -> u64 {
    let opts = StreamOptions {
        memory_budget: budget,
        ..Default::default()
    };
    let mut left_out = 0;
    for w in windows(length) {
        let cut = collect_scoped(dir, Some(w), None, &opts, usize::MAX).unwrap();
        left_out += cut.0.calls_left_out;
        let full = collect_scoped_full(dir, Some(w), None, &opts, usize::MAX).unwrap();
        assert_eq!(full.0.calls_left_out, 0);
        let (cut_html, cut_chrome) = drawn(cut);
        let (full_html, full_chrome) = drawn(full);
        assert!(cut_html == full_html, "window {w:?}, budget {budget}: the HTML differs");
        assert!(
            cut_chrome == full_chrome,
            "window {w:?}, budget {budget}: the Chrome JSON differs"
        );
    }
    left_out
}

#[test]
fn a_window_draws_what_the_full_walk_draws() {
    for batched in [false, true] {
        let (dir, length) = trace(&format!("b{batched}"), 300_000, batched);
        for budget in [256 << 20, 256 << 10] {
            let left_out = same_as_full_scan(&dir, length, budget);
            let jvm = Trace::scan(&dir).unwrap().jvm_records;
            eprintln!(
                "batched {batched}, budget {budget}: {left_out} method events left out of {jvm} over the windows"
            );
            assert!(left_out > jvm, "the windows left out too little: {left_out} of {jvm}");
        }
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}

/// An event earlier than the recording's start moves the origin the
/// windows are measured from: the cut, made from the start, is not used,
/// the trace is read in full, and the view is the same.
#[test]
fn an_origin_before_the_start_reads_the_trace_in_full() {
    let (dir, length) = trace("origin", 100_000, true);
    let mut meta = Meta::load(&dir).unwrap();
    meta.start_monotonic_ns += 1000;
    meta.store(&dir).unwrap();
    let w = (length / 3, length / 2);
    let cut = collect_scoped(&dir, Some(w), None, &Default::default(), usize::MAX).unwrap();
    assert_eq!(cut.0.calls_left_out, 0);
    let full = collect_scoped_full(&dir, Some(w), None, &Default::default(), usize::MAX).unwrap();
    assert!(drawn(cut) == drawn(full));
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

mod fixture;

/// A small deterministic generator (the same traces every run).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Hand-made traces that break every rule the cut relies on, at random
/// places: calls before a thread's first switch and after its last kernel
/// event, exits that match no frame, exits that close frames above their
/// own (lost exits), calls never ended, several events at one time,
/// library calls (kernel LIB_CALL spans) nested in Java calls, around
/// them and across their ends, blocks, and threads that switch rarely.
/// Every window of every trace draws what the full walk draws.
#[test]
fn anomalies_library_calls_and_equal_times_draw_the_same() {
    use fixture::PID;
    use jtrace_format::{self as fmt, Payload};
    let mut left_out = 0;
    for seed in 0..12u64 {
        let mut r = Rng(seed * 7919 + 1);
        let mut b = fixture::Builder::default();
        b.jvm_start(PID, 1000);
        for m in 1..=6 {
            b.method(PID, m, "C", &format!("m{m}"), "()V");
        }
        b.k(
            0,
            0,
            Payload::ProbeDef(fmt::ProbeDef {
                probe: 1,
                library: "libz.so.1".into(),
                symbol: "inflate".into(),
            }),
        );
        let end = 2_000_000;
        for tid in [101u32, 102, 103] {
            b.thread_start(PID, tid, 1000, &format!("t{tid}"), "main");
            // The kernel side: switches every so often (rarely on 103).
            let mut ts = 1000 + r.below(20_000);
            let mut on = false;
            while ts < end - 20_000 {
                if on {
                    b.switch_out(tid, ts, r.below(2) == 0, 0);
                } else {
                    b.switch_in(tid, ts, 0);
                }
                on = !on;
                ts += if tid == 103 { 200_000 } else { 1 + r.below(30_000) };
                if r.below(8) == 0 {
                    let at = ts - r.below(ts - 1000).min(5000);
                    let exit_ts = at + r.below(40_000);
                    b.k(
                        tid,
                        at,
                        Payload::LibCall(fmt::LibCall {
                            exit_ts,
                            probe: 1,
                            reserved: 0,
                            ret: 0,
                        }),
                    );
                }
            }
            // The Java side: calls nested at random, with anomalies.
            let mut ts = 500 + r.below(3000);
            let mut stack: Vec<u64> = Vec::new();
            while ts < end + 10_000 {
                match r.below(20) {
                    0 => b.exit(tid, ts, 1 + r.below(6)),
                    1 if stack.len() > 1 => {
                        // The exit of a frame below the top.
                        let i = r.below(stack.len() as u64) as usize;
                        b.exit(tid, ts, stack[i]);
                        stack.truncate(i);
                    }
                    2..=10 if stack.len() < 12 => {
                        let m = 1 + r.below(6);
                        b.enter(tid, ts, m);
                        stack.push(m);
                    }
                    _ => {
                        if let Some(m) = stack.pop() {
                            b.exit(tid, ts, m);
                        }
                    }
                }
                if r.below(30) == 0 {
                    b.jvm_event(tid, ts, fmt::kind::PARK_BEGIN, "");
                    b.jvm_event(tid, ts + 10, fmt::kind::PARK_END, "");
                }
                // Several events at one time now and then.
                ts += if r.below(6) == 0 { 0 } else { 1 + r.below(3000) };
            }
        }
        let dir = fixture::tempdir(&format!("cut-anomalies-{seed}")).join("t.jtrace");
        b.write(&dir, 500, end + 20_000);
        for _ in 0..6 {
            let from = r.below(end);
            let w = (from, from + r.below(end / 4));
            let cut = collect_scoped(&dir, Some(w), None, &Default::default(), usize::MAX).unwrap();
            left_out += cut.0.calls_left_out;
            let full = collect_scoped_full(&dir, Some(w), None, &Default::default(), usize::MAX).unwrap();
            let anomalies: u64 = full.1.iter().map(|t| t.totals.anomalies).sum();
            assert!(anomalies > 0, "seed {seed}: no anomalies");
            assert!(drawn(cut) == drawn(full), "seed {seed}, window {w:?}: the views differ");
        }
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
    eprintln!("{left_out} method events left out");
    assert!(left_out > 10_000, "{left_out}");
}

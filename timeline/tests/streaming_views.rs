//! The streamed text trace and collapsed/CSV exports are byte for byte the
//! in-memory ones, with the trace in memory and with it split into many
//! sorted runs on disk, on a synthetic trace that has every kind of evidence
//! the text names (syscalls written at a switch and at their exit, JVM
//! states, GC windows, page faults, wakers inside traced methods).

use jtrace_testkit::synth;

mod fixture;

use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::Trace;
use jtrace_timeline::{
    write_csv, write_csv_streaming, write_text_streaming, Collapsed, CollapsedOptions, Csv, Exporter, Perfetto, Text,
    TextOptions,
};
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-streaming-views-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opts(budget: usize) -> StreamOptions {
    StreamOptions {
        memory_budget: budget,
        ..Default::default()
    }
}

/// The views that stream, as [`Exporter`]s: (name, exporter). A new
/// streaming format joins this list.
fn streaming_exporters() -> Vec<(String, Box<dyn Exporter>)> {
    let mut v: Vec<(String, Box<dyn Exporter>)> = Vec::new();
    for all in [false, true] {
        v.push((
            format!("text all={all}"),
            Box::new(Text(TextOptions {
                all_events: all,
                ..Default::default()
            })),
        ));
    }
    for (thread, all) in [(false, false), (true, true)] {
        v.push((
            format!("collapsed thread={thread} all={all}"),
            Box::new(Collapsed(CollapsedOptions {
                thread,
                all,
                ..Default::default()
            })),
        ));
    }
    v.push(("csv".into(), Box::new(Csv)));
    v.push(("perfetto".into(), Box::new(Perfetto)));
    for (name, e) in &v {
        assert!(e.streams(), "{name}");
        assert!(name.starts_with(e.name()), "{name} is {}", e.name());
    }
    v
}

/// Every view of `dir`, in memory: (name, bytes).
fn whole(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let t = Trace::open(dir).unwrap();
    let mut v = Vec::new();
    for (name, e) in streaming_exporters() {
        let mut b = Vec::new();
        e.write_trace(&t, &mut b).unwrap();
        v.push((name, b));
    }
    v
}

/// The same views, streamed at `budget`.
fn streamed(dir: &Path, budget: usize) -> Vec<(String, Vec<u8>)> {
    let o = opts(budget);
    let mut v = Vec::new();
    for (name, e) in streaming_exporters() {
        let mut b = Vec::new();
        e.write_dir(dir, &mut b, &o).unwrap();
        v.push((name, b));
    }
    v
}

fn assert_same(budget: usize, a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)]) {
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(b) {
        if x != y {
            let (xs, ys) = (String::from_utf8_lossy(x), String::from_utf8_lossy(y));
            let line = xs.lines().zip(ys.lines()).position(|(p, q)| p != q);
            let show = |s: &str| line.and_then(|l| s.lines().nth(l)).unwrap_or("").to_string();
            panic!(
                "budget {budget}, {name}: streamed output differs ({} vs {} bytes), first at line {line:?}:\n  \
                 whole:    {}\n  streamed: {}",
                x.len(),
                y.len(),
                show(&xs),
                show(&ys)
            );
        }
    }
}

fn text_of(views: &[(String, Vec<u8>)]) -> String {
    String::from_utf8(views[0].1.clone()).unwrap()
}

#[test]
fn streamed_views_equal_in_memory_at_every_budget() {
    let dir = tempdir("synth").join("t.jtrace");
    synth::generate(&dir, 300_000, 12).unwrap();
    let expected = whole(&dir);
    // What the text must carry from outside the walk: the syscall a block
    // was in (at-switch futex records, socket reads written at their exit)
    // and the waker's method.
    let text = text_of(&expected);
    for needle in [
        "in futex(fd",
        "in read(fd 7: socket tcp",
        "; woken by tid",
        "entering contended monitor of",
    ] {
        assert!(text.contains(needle), "the text trace has no {needle:?}");
    }
    assert!(
        text.lines()
            .any(|l| l.contains("; woken by tid") && l.contains("\" in ")),
        "no waker inside a traced method"
    );
    let csv = String::from_utf8(expected[4].1.clone()).unwrap();
    assert!(csv.lines().count() > 10_000, "{} csv rows", csv.lines().count());
    // One run in memory; a few runs; many small runs.
    for (budget, min_runs) in [(256 << 20, 0), (2 << 20, 3), (64 << 10, 100)] {
        let (_, events) = stream::open(&dir, &opts(budget)).unwrap();
        let runs = events.spilled_runs();
        assert!(runs >= min_runs, "budget {budget}: {runs} runs");
        assert!(budget < 256 << 20 || runs == 0);
        assert_same(budget, &expected, &streamed(&dir, budget));
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A kernel stream cut off inside a record (a recorder killed mid-write):
/// both paths stop at the same record and number the syscalls before it the
/// same way, so the text still names them.
#[test]
fn cut_off_kernel_stream_streams_the_same_text() {
    let dir = tempdir("cut").join("t.jtrace");
    synth::generate(&dir, 100_000, 6).unwrap();
    let k = dir.join(jtrace_format::KERNEL_FILE);
    let len = std::fs::metadata(&k).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&k).unwrap();
    // Not a multiple of 8: inside a record.
    f.set_len(len * 2 / 3 / 8 * 8 + 5).unwrap();
    drop(f);
    let expected = whole(&dir);
    let text = text_of(&expected);
    assert!(text.contains("# WARNING   : "), "the cut is reported");
    assert!(text.contains("in futex(fd"));
    assert_same(64 << 10, &expected, &streamed(&dir, 64 << 10));
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// Over budget with nowhere to put the runs: a clear error, no panic.
#[test]
fn missing_temp_dir_is_a_clear_error() {
    let dir = tempdir("notmp").join("t.jtrace");
    synth::generate(&dir, 50_000, 4).unwrap();
    let o = StreamOptions {
        memory_budget: 64 << 10,
        temp_dir: Some(dir.join("no-such-dir")),
        ..Default::default()
    };
    let mut b = Vec::new();
    let e = write_text_streaming(&dir, &mut b, &TextOptions::default(), &o).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("no-such-dir") && msg.contains("--temp-dir"), "{msg}");
    let e = write_csv_streaming(&dir, &mut Vec::new(), &o).unwrap_err();
    assert!(format!("{e:#}").contains("--memory-budget"), "{e:#}");
    // A trace that fits the budget needs no temporary directory at all.
    let fits = StreamOptions {
        memory_budget: 256 << 20,
        ..o
    };
    let mut b = Vec::new();
    write_text_streaming(&dir, &mut b, &TextOptions::default(), &fits).unwrap();
    assert_eq!(b, whole(&dir)[0].1);
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A traced `main` that wraps everything (as `--methods 'com.acme.*'` gives):
/// its callees' rows wait for it, beyond the budget, so they go to sorted runs
/// on disk and are merged back in order: invocations entered at the same
/// instant (ties by depth, then exit order), zero-length calls, a call
/// entered at the very instant the outer one returns.
#[test]
fn csv_rows_of_a_long_outermost_invocation_spill_and_merge_in_order() {
    use fixture::{Builder, MAIN, PID, WORKER};
    let dir = fixture::tempdir("csv-spill").join("t.jtrace");
    let mut b = Builder::default();
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "Main", "main", "([Ljava/lang/String;)V");
    b.method(PID, 2, "A", "step", "()V");
    b.method(PID, 3, "B", "inner", "(I)J");
    b.thread_start(PID, MAIN, 1000, "main", "main");
    b.thread_start(PID, WORKER, 1000, "worker", "main");
    b.switch_in(MAIN, 1000, 0);
    b.switch_in(WORKER, 1000, 0);
    let mut ts = 2000;
    b.enter(MAIN, ts, 1);
    for i in 0..20_000u64 {
        // A.step and B.inner entered at the same instant; every 7th B.inner
        // has zero length; every 5th step is followed by a second one that
        // starts when the first returns.
        b.enter(MAIN, ts, 2);
        b.enter(MAIN, ts, 3);
        let d = if i % 7 == 0 { 0 } else { 10 };
        b.exit(MAIN, ts + d, 3);
        b.exit(MAIN, ts + 20, 2);
        if i % 5 == 0 {
            b.enter(MAIN, ts + 20, 2);
            b.exit(MAIN, ts + 20, 2);
        }
        ts += 30;
        b.enter(WORKER, ts, 2);
        b.exit(WORKER, ts + 5, 2);
    }
    b.exit(MAIN, ts, 1);
    // Called at the instant main returned, and again with nothing around it.
    b.enter(MAIN, ts, 3);
    b.exit(MAIN, ts, 3);
    b.enter(MAIN, ts + 10, 1);
    b.exit(MAIN, ts + 20, 1);
    b.write(&dir, 1000, ts + 100);
    let t = Trace::open(&dir).unwrap();
    let mut expected = Vec::new();
    write_csv(&t, &mut expected).unwrap();
    assert!(expected.iter().filter(|&&c| c == b'\n').count() > 60_000);
    for budget in [64 << 10, 1 << 20, 256 << 20] {
        let mut got = Vec::new();
        write_csv_streaming(&dir, &mut got, &opts(budget)).unwrap();
        assert_same(budget, &[("csv".into(), expected.clone())], &[("csv".into(), got)]);
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

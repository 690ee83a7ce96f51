//! Damaged and cut-off traces: what is there is
//! read, what is missing is said, and time no stream covers is given no
//! cause. Both readers (whole and streamed) agree on every case.

use jtrace_testkit::synth;

use jtrace_format::{Decoder, FileHeader, FILE_HEADER_LEN, STREAM_COMPLETE};
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{build_report, build_report_streaming, Meta, Report, ReportFilter, Trace};
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-damaged-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A synthetic trace (kernel and JVM streams, methods, blocks) in `name`.
fn synthetic(name: &str) -> PathBuf {
    let dir = tempdir(name).join("t.jtrace");
    synth::generate(&dir, 60_000, 4).unwrap();
    dir
}

const JVM: &str = "jvm-4242.bin";

/// The report of `dir` from both readers, checked equal and exact.
fn reports(dir: &Path) -> (Trace, Report) {
    let whole = Trace::open(dir).unwrap();
    let r = build_report(&whole, &ReportFilter::default());
    let opts = StreamOptions {
        memory_budget: 64 << 10,
        ..Default::default()
    };
    let s = build_report_streaming(dir, &ReportFilter::default(), &opts).unwrap();
    assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&s).unwrap());
    for m in r.methods.iter().chain(r.threads.iter().flat_map(|t| t.methods.iter())) {
        assert_eq!(
            m.wall_ns,
            m.cpu_ns + m.off_cpu_ns.total() + m.not_covered_ns,
            "{}",
            m.name
        );
    }
    for t in &r.threads {
        assert_eq!(
            t.wall_ns,
            t.cpu_ns + t.off_cpu_ns.total() + t.not_covered_ns,
            "tid {}",
            t.tid
        );
    }
    (whole, r)
}

fn problems(r: &Report) -> String {
    r.trace.problems.join("\n")
}

/// Offsets of the records of a stream file, in order.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut d = Decoder::new(&bytes[FILE_HEADER_LEN..], FILE_HEADER_LEN);
    let mut v = Vec::new();
    while let Some(Ok(r)) = d.next_raw() {
        v.push(r.offset);
    }
    v
}

#[test]
fn a_missing_trace_is_said_not_to_exist() {
    let dir = tempdir("missing").join("nothing-here.jtrace");
    let e = Trace::open(&dir).unwrap_err().to_string();
    assert!(e.ends_with("does not exist"), "{e}");
    let e = stream::open(&dir, &StreamOptions::default()).unwrap_err().to_string();
    assert!(e.ends_with("does not exist"), "{e}");
    // A file is not a trace directory.
    let f = dir.with_file_name("file");
    std::fs::write(&f, b"x").unwrap();
    let e = Trace::open(&f).unwrap_err().to_string();
    assert!(e.contains("not a jtrace trace directory"), "{e}");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A JVM stream shorter than its header is reported; the kernel stream is
/// still read in full.
#[test]
fn a_jvm_stream_shorter_than_its_header_is_reported_and_the_rest_read() {
    let dir = synthetic("short-jvm");
    let (before, _) = reports(&dir);
    std::fs::write(dir.join(JVM), b"JTRACEJ\0\x01").unwrap();
    let (t, r) = reports(&dir);
    assert_eq!(t.jvm_records, 0);
    assert_eq!(t.kernel_records, before.kernel_records);
    assert!(
        problems(&r).contains("jvm-4242.bin: it is too short to be a jtrace stream (9 bytes"),
        "{}",
        problems(&r)
    );
    // Only the kernel's library-call spans are left.
    assert!(r.methods.iter().all(|m| m.signature.is_empty()), "{:?}", r.methods);
    // Nothing says the kernel coverage ended.
    assert_eq!(r.trace.kernel_covered_ns, None);
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A kernel stream shorter than its header (or missing) is reported and
/// covers nothing: the JVM's invocations are read, all of their time not
/// covered, none of it CPU or a cause.
#[test]
fn a_kernel_stream_shorter_than_its_header_covers_nothing() {
    let dir = synthetic("short-kernel");
    for damage in ["short", "missing"] {
        let k = dir.join(jtrace_format::KERNEL_FILE);
        if damage == "short" {
            std::fs::write(&k, b"").unwrap();
        } else {
            let _ = std::fs::remove_file(&k);
        }
        let (t, r) = reports(&dir);
        assert_eq!(t.kernel_records, 0);
        assert!(t.jvm_records > 0);
        let p = problems(&r);
        assert!(
            p.contains(if damage == "short" {
                "kernel.bin: it is too short to be a jtrace stream (0 bytes"
            } else {
                "kernel.bin: it is missing"
            }),
            "{p}"
        );
        assert!(p.contains("later time is not covered"), "{p}");
        assert!(!r.methods.is_empty());
        for m in &r.methods {
            assert_eq!(
                (m.cpu_ns, m.off_cpu_ns.total(), m.not_covered_ns),
                (0, 0, m.wall_ns),
                "{}",
                m.name
            );
        }
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A JVM stream flagged complete but cut at a record boundary before its
/// JVM_END has lost its tail: it is reported as cut short, and the
/// invocations open at its last record end there, unfinished, instead of
/// stretching to the threads' last kernel events.
#[test]
fn a_complete_flagged_jvm_stream_without_its_end_record_is_incomplete() {
    let dir = synthetic("no-end");
    let path = dir.join(JVM);
    let mut bytes = std::fs::read(&path).unwrap();
    let offsets = record_offsets(&bytes);
    bytes.truncate(offsets[offsets.len() / 2]);
    let mut h = FileHeader::parse(&bytes).unwrap();
    h.flags |= STREAM_COMPLETE;
    bytes[..FILE_HEADER_LEN].copy_from_slice(&h.to_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (t, r) = reports(&dir);
    let p = problems(&r);
    assert!(p.contains("marked complete but has no end record"), "{p}");
    // The stream's last record bounds the Java threads' JVM coverage.
    let java: Vec<_> = t.threads.values().filter(|th| th.java_name.is_some()).collect();
    assert!(!java.is_empty());
    let ends: Vec<u64> = java.iter().map(|th| th.jvm_until.expect("JVM coverage ends")).collect();
    assert!(ends.iter().all(|&e| e == ends[0]));
    let mut inv = Vec::new();
    struct Unfinished<'a>(&'a Trace, &'a mut Vec<(u64, bool)>);
    impl jtrace_merge::Visitor for Unfinished<'_> {
        fn exit(&mut self, _: &jtrace_merge::ThreadInfo, _: usize, i: &jtrace_merge::Invocation) {
            // Java methods: the kernel's library-call spans go on.
            if !self.0.methods[i.method as usize].native {
                self.1.push((i.exit, i.unfinished));
            }
        }
    }
    jtrace_merge::analyze(&t, &mut Unfinished(&t, &mut inv));
    assert!(!inv.is_empty());
    assert!(inv.iter().all(|&(exit, _)| exit <= ends[0]));
    assert!(inv.iter().any(|&(exit, unfinished)| unfinished && exit == ends[0]));
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A kernel stream that stops covering the recording early (the recorder
/// could not write it to the end, jtrace was killed) leaves the later time
/// not covered: the invocations keep their wall, exactly split into what
/// the kernel saw and `not_covered_ns`, and the report says where and why.
#[test]
fn time_after_the_kernel_stream_ended_has_no_cause() {
    let dir = synthetic("kernel-cut");
    let (full, before) = reports(&dir);
    assert_eq!(before.trace.kernel_covered_ns, None);
    assert!(before.methods.iter().all(|m| m.not_covered_ns == 0));
    let mut meta = Meta::load(&dir).unwrap();
    let half = meta.end_monotonic_ns / 2;
    // As `jtrace run` leaves it when kernel.bin hit a full disk.
    meta.kernel_complete = Some(false);
    meta.kernel_covered_until_ns = Some(half);
    meta.kernel_write_error = Some("No space left on device (os error 28)".into());
    meta.store(&dir).unwrap();
    let (t, r) = reports(&dir);
    assert_eq!(t.losses.kernel_covered_until, Some(half));
    assert_eq!(r.trace.kernel_covered_ns, Some(half));
    let p = problems(&r);
    assert!(
        p.contains("kernel data covers the recording only up to") && p.contains("No space left"),
        "{p}"
    );
    let total = |r: &Report, f: fn(&jtrace_merge::report::ThreadJson) -> u64| r.threads.iter().map(f).sum::<u64>();
    // The same walls; part of them, about half, no longer CPU or a cause.
    assert_eq!(total(&r, |t| t.wall_ns), total(&before, |t| t.wall_ns));
    let uncovered = total(&r, |t| t.not_covered_ns);
    assert!(uncovered > total(&r, |t| t.wall_ns) / 4, "{uncovered}");
    assert!(total(&r, |t| t.cpu_ns) < total(&before, |t| t.cpu_ns));
    assert_eq!(r.methods.len(), before.methods.len());
    for (a, b) in r.methods.iter().zip(&before.methods) {
        assert_eq!(
            (a.name.as_str(), a.calls, a.wall_ns),
            (b.name.as_str(), b.calls, b.wall_ns)
        );
    }
    assert_eq!(full.threads.len(), t.threads.len());
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// A recording cut off (meta.json never finished) ends the kernel coverage
/// at the kernel stream's last record, and the report's duration and pid
/// come from what was read.
#[test]
fn an_unfinished_recording_ends_its_kernel_coverage_at_the_last_record() {
    let dir = synthetic("cut-off");
    let mut meta = Meta::load(&dir).unwrap();
    meta.complete = false;
    meta.end_monotonic_ns = 0;
    meta.pid = 0;
    meta.store(&dir).unwrap();
    let (t, r) = reports(&dir);
    let last_kernel = t.threads.values().map(|th| th.last_ts).max().unwrap();
    assert!(r.trace.kernel_covered_ns.is_some_and(|k| k > 0 && k <= last_kernel));
    assert!(r.trace.duration_ns > 0);
    assert_eq!(r.trace.pid, 4242);
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

//! Bounded disk: a ring recording (`--max-size`) over many chunk
//! lifetimes reads as a valid trace of its last window, and a snapshot
//! taken while it runs (`jtrace dump`) is readable. Real JVMs, real eBPF.

mod common;

use common::*;
use jtrace_merge::{build_report, Cause, Trace};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Bytes of the files in a directory.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// Checks a trace of RingWork that covers only its last window: the
/// window is said, every invocation and thread is exact, time before the
/// window is never CPU or a cause, the frames open across chunks pair with
/// their exits (restated by the chunks' prologues), and the sleeps inside
/// the window have their cause. Returns the window's start.
fn check_window(t: &Trace, hot_threads: usize) -> u64 {
    let start = t.meta.start_monotonic_ns;
    let from = t.losses.window_from.expect("the window is said");
    assert!(from > start, "{from} {start}");
    assert_exact(t);
    let invs = invocations(t);
    let name = |i: &jtrace_merge::Invocation| t.methods[i.method as usize].name.clone();
    for (th, i) in &invs {
        if i.entry < from {
            let before = i.exit.min(from) - i.entry;
            assert!(
                i.breakdown.not_covered >= before,
                "{} on {}: {} ns before the window, only {} not covered: {:?}",
                name(i),
                th.display_name(),
                before,
                i.breakdown.not_covered,
                i.breakdown
            );
        }
    }
    // Each hot thread's hot() spans the whole run: entered long before the
    // window, its entry restated by every chunk's prologue, its exit in the
    // last chunk.
    let hot: Vec<_> = invs.iter().filter(|(_, i)| name(i) == "hot").collect();
    assert_eq!(hot.len(), hot_threads, "{hot:?}");
    for (th, i) in &hot {
        assert!(!i.unfinished && i.entry < from, "{}: {i:?}", th.display_name());
        assert!(i.breakdown.cpu > 0 && i.breakdown.not_covered >= from - i.entry);
    }
    // Every chunk defines the stacks it uses (user stacks, and kernel
    // stacks the kernel deduplicates, which are written again per chunk).
    let symbols = jtrace_merge::Symbolizer::new(t);
    symbols.name_all();
    assert_eq!(
        symbols.problems().missing_stacks,
        0,
        "stacks used but not defined in the window"
    );
    assert!(!t.stacks.kernel.is_empty() && !t.stacks.user.is_empty());
    let outer: Vec<_> = invs.iter().filter(|(_, i)| name(i) == "outer").collect();
    assert_eq!(outer.len(), 1);
    assert!(!outer[0].1.unfinished && outer[0].1.entry < from);
    // Steps well inside the window: covered, and their 20 ms sleeps are sleep.
    let inside: Vec<_> = invs
        .iter()
        .filter(|(_, i)| name(i) == "step" && i.entry > from + 100_000_000)
        .collect();
    assert!(inside.len() >= 5, "{} steps inside the window", inside.len());
    for (_, i) in &inside {
        let b = i.breakdown;
        assert_eq!(b.not_covered, 0, "{i:?}");
        assert!(b.off.get(Cause::Sleep) >= 15_000_000, "{b:?}");
    }
    from
}

/// A ring recording over many chunk lifetimes: 48 MiB kept of a run that
/// writes several times that. What is left fits the bound, and reads as a
/// valid trace of its last window (check_window); the report (text, JSON)
/// and `info` say the window and what fell out.
#[test]
fn a_ring_recording_reads_as_a_valid_trace_of_its_last_window() {
    for jdk in [JDK17, JDK21] {
        let out = tempdir(&format!("ring-{}", jdk_name(jdk))).join("t.jtrace");
        let classes = classes();
        let o = jtrace_run(
            &out,
            &["--complete", "--methods", "RingWork.*", "--max-size", "48M"],
            &[s(&java(jdk)), "-cp", s(&classes), "RingWork", "6000", "2"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("done"));
        let size = dir_bytes(&out);
        assert!(size <= 48 << 20, "{size} bytes kept");
        let t = Trace::open(&out).unwrap();
        let m = &t.meta;
        assert!(m.complete && m.max_size == Some(48 << 20));
        assert!(m.ring_dropped_chunks >= 3, "{} chunks dropped", m.ring_dropped_chunks);
        let from = check_window(&t, 2);
        let r = build_report(&t, &Default::default());
        let w = r.trace.window.as_ref().expect("report.trace.window");
        assert_eq!(w.from_ns, from - m.start_monotonic_ns);
        assert_eq!(
            (w.dropped_chunks, w.dropped_bytes),
            (m.ring_dropped_chunks, m.ring_dropped_bytes)
        );
        assert_eq!(w.max_size_bytes, Some(48 << 20));
        let v = report_json(&out);
        assert_eq!(v["trace"]["window"]["from_ns"].as_u64(), Some(w.from_ns));
        let text = report_text(&out);
        assert!(
            text.contains("NOTE: ring recording (--max-size 48 MiB): covers +"),
            "{text}"
        );
        let info = Command::new(jtrace()).arg("info").arg(&out).output().unwrap();
        let info = String::from_utf8_lossy(&info.stdout);
        assert!(
            info.contains("window     +") && info.contains("fell out of the ring"),
            "{info}"
        );
        std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
    }
}

/// `jtrace dump` while a ring recording runs: the snapshot is a readable
/// trace of the window then (its newest chunks cut off there, said), and
/// the recording goes on and finishes whole.
#[test]
fn a_snapshot_taken_mid_run_is_readable() {
    let out = tempdir("ring-dump").join("t.jtrace");
    let snap = out.parent().unwrap().join("snap.jtrace");
    let classes = classes();
    ensure_agent();
    let mut child = Command::new(jtrace())
        .args([
            "run",
            "--complete",
            "--methods",
            "RingWork.*",
            "--max-size",
            "48M",
            "-o",
            s(&out),
            "--",
        ])
        .args([s(&java(JDK17)), "-cp", s(&classes), "RingWork", "7000", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let l = lines.next().expect("the JVM's pid").unwrap();
    assert!(l.starts_with("pid "), "{l}");
    // Several chunks in: the ring has dropped some.
    std::thread::sleep(std::time::Duration::from_millis(4000));
    let d = Command::new(jtrace())
        .arg("dump")
        .arg(&out)
        .arg("-o")
        .arg(&snap)
        .output()
        .unwrap();
    let derr = String::from_utf8_lossy(&d.stderr);
    assert!(d.status.success(), "{derr}");
    assert!(derr.contains("chunk(s) linked"), "{derr}");
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && rest.iter().any(|l| l == "done"), "{err}");
    assert!(!err.contains("as it is"), "{err}");
    let t = Trace::open(&snap).unwrap();
    assert!(!t.meta.complete);
    let at = t.meta.snapshot_ns.expect("the snapshot's time");
    assert!(at > t.meta.start_monotonic_ns + 3_000_000_000);
    assert!(
        t.losses
            .truncated
            .iter()
            .any(|p| p.contains("a snapshot taken while the JVM ran")),
        "{:?}",
        t.losses.truncated
    );
    assert_exact(&t);
    let from = t.losses.window_from.expect("a window");
    assert!(from < at);
    let invs = invocations(&t);
    // The hot threads' calls in the window (a thread's buffer reaches the
    // stream at 64 KiB: the sleeping thread's few events are not there yet).
    let tiny = invs
        .iter()
        .filter(|(_, i)| t.methods[i.method as usize].name == "tiny" && i.entry > from && !i.unfinished)
        .count();
    assert!(tiny > 1000, "{tiny} calls of tiny in the snapshot's window");
    let r = Command::new(jtrace()).arg("report").arg(&snap).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // The recording itself finished whole.
    let full = Trace::open(&out).unwrap();
    assert!(full.meta.complete);
    check_window(&full, 2);
    std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
}

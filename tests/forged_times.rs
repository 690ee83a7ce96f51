//! A JVM stream is written by the traced program (its agent runs in the
//! JVM, as the JVM's user): the attack of a JVM that forges times. The
//! stored demo trace (`tests/data/demo-no-stacks.tgz`, 0.5 s) has records
//! of its JVM stream rewritten to times outside the recording — 2^64 − 1,
//! before the start, a batch delta of 2^32 − 1 ns (4.3 s) — and every
//! reading command must flag it and give no method, thread or window more
//! time than the recording lasted. The honest trace's
//! figures are those of tests/golden_views.rs.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const JVM: &str = "jvm-2152.bin";

/// The demo trace, unpacked into a directory of its own.
fn demo() -> PathBuf {
    let work = tempdir("forged-times");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo-no-stacks.tgz");
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&data)
        .arg("-C")
        .arg(&work)
        .status()
        .unwrap();
    assert!(st.success(), "cannot unpack {}", data.display());
    work.join("demo.jtrace")
}

/// A record of a stream: its offset, kind, tid and time.
struct Rec {
    at: usize,
    kind: u16,
    tid: u32,
    ts: u64,
}

/// The records of a stream's bytes (header skipped, zero fill ends it).
fn records(b: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = jtrace_format::FILE_HEADER_LEN;
    while at + 16 <= b.len() {
        let kind = u16::from_le_bytes([b[at], b[at + 1]]);
        let len = u16::from_le_bytes([b[at + 2], b[at + 3]]) as usize;
        if kind == 0 && len == 0 {
            break;
        }
        let tid = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap());
        let ts = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
        out.push(Rec { at, kind, tid, ts });
        at += len;
    }
    out
}

/// The `n`th record of `kind` (of thread `tid`, if given).
fn nth(recs: &[Rec], kind: u16, tid: Option<u32>, n: usize) -> &Rec {
    recs.iter()
        .filter(|r| r.kind == kind && tid.is_none_or(|t| t == r.tid))
        .nth(n)
        .unwrap_or_else(|| panic!("no record {n} of kind {kind} (tid {tid:?})"))
}

fn set_ts(b: &mut [u8], r: &Rec, ts: u64) {
    b[r.at + 8..r.at + 16].copy_from_slice(&ts.to_le_bytes());
}

/// Rewrites the demo's JVM stream as a hostile JVM would: returns how many
/// of its records now lie outside the recording.
fn forge(dir: &Path) -> u64 {
    use jtrace_format::kind;
    let path = dir.join(JVM);
    let mut b = std::fs::read(&path).unwrap();
    let recs = records(&b);
    let start = recs.iter().map(|r| r.ts).filter(|&t| t > 0).min().unwrap();
    let mut outside = 0;
    // Thread 2179's batch: lambda$main$5 and fetch entered, fetch and
    // lambda$main$5 exited. The delta of fetch's exit becomes 2^32 − 1:
    // both exits land 4.3 s later, in a recording of 0.5 s.
    let fetch = nth(&recs, kind::METHOD_BATCH, Some(2179), 0);
    let count = u32::from_le_bytes(b[fetch.at + 16..fetch.at + 20].try_into().unwrap());
    assert_eq!(count, 4);
    let ev = fetch.at + jtrace_format::BATCH_HEADER_LEN + 2 * 8;
    b[ev..ev + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    outside += 2;
    // Thread 2177's second batch (nap and lambda$main$3 exit) at 2^64 − 1:
    // its second event's delta would wrap around to a time near 0.
    set_ts(&mut b, nth(&recs, kind::METHOD_BATCH, Some(2177), 1), u64::MAX);
    outside += 2;
    // Thread 2178's first batch (lambda$main$4 and serve entered) before
    // the recording began.
    set_ts(&mut b, nth(&recs, kind::METHOD_BATCH, Some(2178), 0), start / 2);
    outside += 2;
    // holdLock's sleep never ends; the first GC neither.
    set_ts(&mut b, nth(&recs, kind::SLEEP_END, Some(2175), 0), u64::MAX);
    set_ts(&mut b, nth(&recs, kind::GC_END, None, 0), u64::MAX);
    outside += 2;
    std::fs::write(&path, b).unwrap();
    outside
}

fn stdout(args: &[&str], trace: &Path) -> String {
    String::from_utf8(jtrace_stdout(args, trace)).unwrap()
}

/// Nothing in the report lasts longer than the recording: no call, no
/// thread, no method on one thread, no GC or safepoint time.
fn assert_within_recording(r: &Value) {
    let length = r["trace"]["duration_ns"].as_u64().unwrap();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    for m in r["methods"].as_array().unwrap() {
        assert!(n(m, "wall_max_ns") <= length, "a call of {m} in {length} ns");
    }
    for t in r["threads"].as_array().unwrap() {
        assert!(n(t, "wall_ns") <= length, "thread {t} in {length} ns");
        for cause in ["gc", "safepoint"] {
            assert!(n(&t["off_cpu_ns"], cause) <= length, "thread {t}: {cause}");
        }
        for m in t["methods"].as_array().unwrap() {
            assert!(n(m, "wall_ns") <= length, "{m} on thread {} in {length} ns", t["tid"]);
        }
    }
}

/// A method's figures on the report's top level.
fn method(r: &Value, name: &str) -> Option<(u64, u64, u64)> {
    let m = r["methods"].as_array().unwrap().iter().find(|m| m["name"] == name)?;
    let n = |k: &str| m[k].as_u64().unwrap();
    Some((n("calls"), n("wall_ns"), n("cpu_ns")))
}

#[test]
fn forged_jvm_times_are_flagged_and_given_no_time() {
    let honest = demo();
    let forged = demo();
    let outside = forge(&forged);

    let h = report_json(&honest);
    assert!(h["trace"]["problems"].as_array().unwrap().is_empty());
    assert_within_recording(&h);

    let f = report_json(&forged);
    assert_within_recording(&f);
    assert_eq!(f["trace"]["duration_ns"], h["trace"]["duration_ns"]);
    let problems: Vec<&str> = (f["trace"]["problems"].as_array().unwrap().iter())
        .filter_map(|p| p.as_str())
        .collect();
    let flagged: Vec<&&str> = problems
        .iter()
        .filter(|p| p.contains("outside the recording"))
        .collect();
    assert_eq!(flagged.len(), 1, "{problems:#?}");
    for said in [
        format!("{JVM}: {outside} record(s) carry a time outside the recording"),
        "2 before its start".into(),
        format!("{} after its end (up to +18446741644272", outside - 2),
        "2 of them method events that a batch's time deltas carried past the end".into(),
        format!("{outside} event(s) among them are left out"),
    ] {
        assert!(flagged[0].contains(&said), "{said:?} not in {}", flagged[0]);
    }
    assert!(!flagged[0].contains("nearest edge"), "{}", flagged[0]);
    // What the forged records did not touch reads as before.
    for name in ["main", "crunch", "churn", "holdLock", "enterLock"] {
        assert_eq!(method(&f, name), method(&h, name), "{name}");
    }
    // Calls whose entries were left out are no calls; those whose exits
    // were end unfinished, inside the recording.
    assert_eq!(method(&f, "serve"), None);
    let (calls, wall, _) = method(&f, "fetch").unwrap();
    assert!(calls == 1 && wall < 500_000_000, "fetch: {wall} ns");
    // The sleep and the GC whose ends were forged explain nothing.
    let sleep = |r: &Value| {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["off_cpu_ns"]["sleep"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert!(sleep(&f) < sleep(&h), "sleep {} ≥ {}", sleep(&f), sleep(&h));

    // `jtrace info` says it too; the text report and the other views read it.
    let info = stdout(&["info"], &forged);
    assert!(
        info.lines()
            .any(|l| l.starts_with("problem") && l.contains("outside the recording")),
        "{info}"
    );
    let text = report_text(&forged);
    // Read as one text: the report wraps its lines at 120 columns.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("outside the recording"), "{text}");
    for args in [
        &["text"][..],
        &["export", "--format", "chrome"],
        &["why", "--method", "Demo.*"],
    ] {
        stdout(args, &forged);
    }
}

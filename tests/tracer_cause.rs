//! The tracer's own waits: every time a thread writes its buffer of
//! records into the JVM stream, the agent notes the write's span
//! (TRACER_WAIT_BEGIN/END) in the thread's next buffer, so that time off
//! CPU inside it is cause `tracer`, not the program's `lock_native` or
//! `page_fault` (the walk's attribution is unit-tested in merge's walk.rs
//! on a hand-made thread; whether a real write blocks depends on the disk).

mod common;

use common::*;
use jtrace_format::{kind, Decoder, Payload, FILE_HEADER_LEN, JVM_FILE_PREFIX};
use jtrace_merge::{Cause, Trace};
use std::collections::HashMap;
use std::path::Path;

/// Every TRACER_WAIT record of the trace's JVM stream: (tid, ts, begin, bytes written).
fn tracer_waits(out: &Path) -> (Vec<(u32, u64, bool, u64)>, u64) {
    let stream = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(JVM_FILE_PREFIX))
        .expect("a JVM stream");
    let data = std::fs::read(&stream).unwrap();
    let mut waits = Vec::new();
    for r in Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN) {
        let r = r.unwrap_or_else(|e| panic!("{}: {e}", stream.display()));
        if let Payload::Jvm(k @ (kind::TRACER_WAIT_BEGIN | kind::TRACER_WAIT_END), b) = &r.payload {
            assert!(b.class.is_empty());
            waits.push((r.tid, r.ts, *k == kind::TRACER_WAIT_BEGIN, b.arg));
        }
    }
    (waits, data.len() as u64)
}

#[test]
fn every_write_of_a_threads_records_is_noted_and_its_blocks_are_the_tracers() {
    let cp = classes();
    for jdk in JDKS {
        let d = tempdir("tracer-cause");
        let out = d.join("t.jtrace");
        let java = java(jdk);
        let o = jtrace_run(
            &out,
            &["--methods", "Trivial$Work.*", "--complete"],
            &[java.to_str().unwrap(), "-cp", cp.to_str().unwrap(), "Trivial", "3000"],
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let (waits, stream_bytes) = tracer_waits(&out);

        // Begin and end alternate per thread, with the same byte count.
        let mut spans: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        let mut open: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut written = 0;
        for &(tid, ts, begin, bytes) in &waits {
            if begin {
                assert!(open.insert(tid, (ts, bytes)).is_none(), "{jdk}: tid {tid}: two begins");
            } else {
                let (b, n) = open
                    .remove(&tid)
                    .unwrap_or_else(|| panic!("{jdk}: tid {tid}: end without begin"));
                assert_eq!(n, bytes, "{jdk}: tid {tid}");
                assert!(ts >= b, "{jdk}: tid {tid}: ends before it begins");
                spans.entry(tid).or_default().push((b, ts));
                written += bytes;
            }
        }
        assert!(open.is_empty(), "{jdk}: unfinished: {open:?}");
        // The worker's writes are noted (not the last ones, at thread end
        // and VM death, nor another thread's writes of its buffer).
        let n: usize = spans.values().map(Vec::len).sum();
        eprintln!("{jdk}: {n} writes noted, {written} of {stream_bytes} stream bytes");
        assert!(n >= 10, "{jdk}: only {n} writes noted");
        assert!(
            written * 2 >= stream_bytes,
            "{jdk}: {written} of {stream_bytes} bytes noted"
        );

        // Accounting stays exact, and no thread has more tracer time than
        // its writes lasted.
        let trace = Trace::open(&out).unwrap();
        assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "{jdk}: events lost");
        assert_exact(&trace);
        let r = jtrace_merge::build_report(&trace, &Default::default());
        for t in &r.threads {
            let tracer = t.off_cpu_ns.get(Cause::Tracer);
            let noted: u64 = spans.get(&t.tid).map_or(0, |v| v.iter().map(|(b, e)| e - b).sum());
            assert!(
                tracer <= noted,
                "{jdk}: {} has {tracer} ns of tracer time in {noted} ns of writes",
                t.tid
            );
        }
    }
}

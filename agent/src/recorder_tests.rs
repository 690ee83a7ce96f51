//! Tests of [`crate::recorder`]: real stream files in a temporary directory.

use super::*;
use crate::stream::file::{CHUNK, INITIAL, RESERVE};
use jtrace_format::{kind, Decoder, FileHeader, MethodEvent, FILE_HEADER_LEN, STREAM_COMPLETE};

fn entry(tid: u32, ts: u64, method: u64) -> Record {
    Record {
        tid,
        ts,
        payload: Payload::MethodEntry(MethodEvent {
            method,
            flags: 0,
            reserved: 0,
        }),
    }
}

fn stream(tag: &str) -> (std::path::PathBuf, File) {
    stream_in(&std::env::temp_dir(), tag)
}

fn stream_in(dir: &std::path::Path, tag: &str) -> (std::path::PathBuf, File) {
    let path = dir.join(format!("jtrace-recorder-test-{}-{tag}.bin", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    (path, f)
}

/// The records of a stream file but the writes' own spans (TRACER_WAIT).
fn records(data: &[u8]) -> Vec<Record> {
    all_records(data)
        .into_iter()
        .filter(|r| tracer_wait(r).is_none())
        .collect()
}

fn all_records(data: &[u8]) -> Vec<Record> {
    Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .map(|r| r.unwrap())
        .collect()
}

/// (begin, bytes written) of a TRACER_WAIT record.
fn tracer_wait(r: &Record) -> Option<(bool, u64)> {
    match &r.payload {
        Payload::Jvm(k @ (kind::TRACER_WAIT_BEGIN | kind::TRACER_WAIT_END), b) => {
            Some((*k == kind::TRACER_WAIT_BEGIN, b.arg))
        }
        _ => None,
    }
}

/// A thread's full buffer, written by the thread itself, is followed in
/// its next buffer by the write's span (its bytes, begin and end, on the
/// thread's kernel tid); the final write at its end (`retire`), and a
/// write of its buffer by another thread, note nothing.
#[test]
fn a_threads_own_writes_are_noted_as_the_tracers() {
    let (path, f) = stream("tracer-wait");
    let rec = Arc::new(Recorder::new(f, |_| {}, 0).unwrap());
    let buf = rec.new_thread_buf();
    let me = crate::os::tid();
    let n = (FLUSH_AT / 32 * 3) as u64;
    for i in 0..n {
        rec.push(&buf, &entry(7, 1_000 + i, 1));
    }
    // Another thread fills the buffer past the mark and writes it.
    let (r2, b2) = (rec.clone(), buf.clone());
    std::thread::spawn(move || {
        for i in 0..(FLUSH_AT / 32) as u64 {
            r2.push(&b2, &entry(7, 1_000 + n + i, 1));
        }
    })
    .join()
    .unwrap();
    rec.retire(&buf);
    rec.finish(0, u64::MAX);
    let data = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let waits: Vec<(u32, u64, bool, u64)> = all_records(&data)
        .iter()
        .filter_map(|r| tracer_wait(r).map(|(begin, bytes)| (r.tid, r.ts, begin, bytes)))
        .collect();
    // Three writes by the thread itself: 3 spans.
    assert_eq!(waits.len(), 6, "{waits:?}");
    for w in waits.chunks(2) {
        let ((t0, b, begin, n0), (t1, e, end, n1)) = (w[0], w[1]);
        assert!(begin && !end && t0 == me && t1 == me && n0 == n1 && e >= b, "{w:?}");
        assert!(n0 >= FLUSH_AT as u64, "{w:?}");
    }
    // Every entry is there, in order.
    let entries: Vec<u64> = records(&data)
        .iter()
        .filter(|r| matches!(r.payload, Payload::MethodEntry(_)))
        .map(|r| r.ts)
        .collect();
    assert_eq!(entries.len() as u64, n + (FLUSH_AT / 32) as u64);
    assert!(entries.windows(2).all(|w| w[0] + 1 == w[1]));
}

#[test]
fn defs_precede_uses_and_losses_are_counted() {
    let (path, f) = stream("defs");
    let rec = Recorder::new(f, |_| {}, 0).unwrap();
    let (a, b) = (rec.new_thread_buf(), rec.new_thread_buf());
    let def = MethodDef {
        method: 42,
        class: "C".into(),
        name: "m".into(),
        signature: "()V".into(),
    };
    assert!(rec.define_method(1, 10, def.clone(), true));
    // A second definition of the same id keeps the first decision and no second record.
    assert!(rec.define_method(2, 11, MethodDef { method: 42, ..def }, false));
    assert_eq!(rec.known_method(42), Some(true));
    rec.push(&a, &entry(1, 12, 42));
    rec.push(&b, &entry(2, 13, 42));
    // Thread b flushes first; the definition must still come before its entry.
    rec.retire(&b);
    rec.finish(1, 20);
    rec.push(&a, &entry(1, 21, 42));
    let data = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let header = FileHeader::parse(&data).unwrap();
    assert_eq!(header.flags & STREAM_COMPLETE, STREAM_COMPLETE);
    let kinds: Vec<Payload> = records(&data).into_iter().map(|r| r.payload).collect();
    assert!(matches!(kinds[0], Payload::MethodDef(_)), "{kinds:?}");
    assert!(matches!(kinds[1], Payload::MethodEntry(_)));
    assert!(matches!(kinds[2], Payload::MethodEntry(_)));
    assert_eq!(kinds[3], Payload::JvmEnd(jtrace_format::JvmEnd { lost_events: 0 }));
    assert_eq!(kinds.len(), 4);
    // Truncated to exactly the records written (JVM_END, 24 bytes, is
    // written at the close, after them).
    assert_eq!(data.len() as u64, rec.used() + 24);
    assert!(rec.is_dead());
    assert_eq!(rec.lost.load(Ordering::SeqCst), 1);
}

/// Four threads append ~100 MB concurrently (several grow steps, the
/// background grower racing the appenders): every record arrives whole,
/// each thread's in order. In the temporary directory (a disk file
/// system here: zeros written ahead) and on tmpfs (fallocate only).
#[test]
fn concurrent_appends_across_grow_steps_keep_every_record() {
    concurrent_appends(&std::env::temp_dir());
}

#[test]
fn concurrent_appends_on_tmpfs_keep_every_record() {
    concurrent_appends(std::path::Path::new("/dev/shm"));
}

fn concurrent_appends(dir: &std::path::Path) {
    let (path, f) = stream_in(dir, "concurrent");
    let rec = Arc::new(Recorder::new(f, |_| {}, 0).unwrap());
    const PER_THREAD: u64 = 800_000;
    let handles: Vec<_> = (1..=4u32)
        .map(|t| {
            let rec = rec.clone();
            std::thread::spawn(move || {
                let buf = rec.new_thread_buf();
                for i in 0..PER_THREAD {
                    rec.push(&buf, &entry(t, i, u64::from(t)));
                }
                rec.retire(&buf);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    rec.finish(0, u64::MAX);
    let data = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(data.len() as u64 > 4 * PER_THREAD * 32);
    let mut next: HashMap<u32, u64> = HashMap::new();
    let mut ends = 0;
    for r in records(&data) {
        match r.payload {
            Payload::MethodEntry(e) => {
                assert_eq!(e.method, u64::from(r.tid));
                let n = next.entry(r.tid).or_default();
                assert_eq!(r.ts, *n, "tid {} out of order", r.tid);
                *n += 1;
            }
            Payload::JvmEnd(e) => {
                assert_eq!(e.lost_events, 0);
                ends += 1;
            }
            p => panic!("unexpected {p:?}"),
        }
    }
    assert_eq!(ends, 1);
    assert_eq!(next.len(), 4);
    assert!(next.values().all(|&n| n == PER_THREAD), "{next:?}");
}

/// A stream that cannot grow any more (here its mapping is 8 MiB; a
/// full disk is the same path, tested end to end in tests/loss.rs)
/// keeps every record written before the first that failed, whole and
/// in order, then says what was lost: an AGENT_ERROR, one JVM_LOST per
/// thread with the time of its first lost event and its count, and
/// JVM_END with the total, all in the room kept for them. The failure
/// is told once, when it happens.
///
/// Repeated: the threads race for the last room of the file, and an
/// append that lost that race once cut off others' records unsaid.
#[test]
fn a_full_stream_says_what_it_lost_per_thread() {
    for round in 0..20 {
        a_full_stream_round(round);
    }
}

fn a_full_stream_round(round: usize) {
    static TOLD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    TOLD.store(0, Ordering::SeqCst);
    let (path, f) = stream(&format!("full-{round}"));
    let out = StreamFile::create_mapped(f, &[8 << 20], 0).unwrap();
    let rec = Arc::new(
        Recorder::with_stream(out, |m| {
            assert!(m.contains("reached the size of its mapping"), "{m}");
            TOLD.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap(),
    );
    const PER_THREAD: u64 = 200_000;
    let handles: Vec<_> = (1..=3u32)
        .map(|t| {
            let rec = rec.clone();
            std::thread::spawn(move || {
                let buf = rec.new_thread_buf();
                for i in 0..PER_THREAD {
                    rec.push(&buf, &entry(t, 1000 + i, u64::from(t)));
                }
                rec.retire(&buf);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(TOLD.load(Ordering::SeqCst), 1);
    rec.finish(0, u64::MAX);
    let data = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(data.len() as u64 <= 8 << 20);
    assert_eq!(
        FileHeader::parse(&data).unwrap().flags & STREAM_COMPLETE,
        STREAM_COMPLETE
    );
    let mut written: HashMap<u32, u64> = HashMap::new();
    let mut lost: HashMap<u32, (u64, u64)> = HashMap::new();
    let (mut errors, mut end, mut error) = (0, None, String::new());
    for r in records(&data) {
        match r.payload {
            Payload::MethodEntry(_) => {
                assert!(lost.is_empty() && errors == 0, "an entry after the losses");
                let n = written.entry(r.tid).or_default();
                assert_eq!(r.ts, 1000 + *n, "tid {} out of order", r.tid);
                *n += 1;
            }
            Payload::AgentError(m) => {
                assert!(m.contains("could not grow"), "{m}");
                error = m;
                errors += 1;
            }
            Payload::JvmLost(l) => {
                assert_eq!(l.reason, LOST_STREAM_FULL);
                lost.insert(r.tid, (r.ts, l.events));
            }
            Payload::JvmEnd(e) => end = Some(e.lost_events),
            p => panic!("unexpected {p:?}"),
        }
    }
    assert_eq!(errors, 1);
    // A thread that finished before the stream filled (a loaded
    // machine may run them one after the other) lost nothing.
    assert!(!lost.is_empty(), "nothing lost");
    assert!(error.contains(&format!("of {} threads", lost.len())), "{error}");
    for t in 1..=3 {
        let w = written.get(&t).copied().unwrap_or(0);
        // Each thread's events are complete up to its first lost one.
        match lost.get(&t) {
            Some(&l) => assert_eq!(l, (1000 + w, PER_THREAD - w), "tid {t}"),
            None => assert_eq!(w, PER_THREAD, "tid {t}"),
        }
    }
    assert_eq!(end, Some(lost.values().map(|&(_, n)| n).sum::<u64>()));
}

/// A writer that dies without finishing (kill -9) leaves the records it
/// appended, then zero fill up to the allocated size, and no complete
/// flag: the decoder stops cleanly at the zeros.
#[test]
fn unfinished_stream_is_a_readable_prefix() {
    let (path, f) = stream("killed");
    let rec = Recorder::new(f, |_| {}, 0).unwrap();
    let buf = rec.new_thread_buf();
    for i in 0..5000 {
        rec.push(&buf, &entry(7, i, 1));
    }
    // Nothing runs at "death": forget the recorder without closing.
    std::mem::forget(rec);
    let data = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // Preallocated (by the creator, maybe more by the grower), not truncated.
    let len = data.len() as u64;
    assert!(
        len >= INITIAL + RESERVE && (len - RESERVE - INITIAL).is_multiple_of(CHUNK),
        "{len}"
    );
    assert_eq!(FileHeader::parse(&data).unwrap().flags & STREAM_COMPLETE, 0);
    let recs = records(&data);
    // Whole 64 KiB chunks reached the file; the last partial buffer did
    // not. The second began with the first write's span: 2 records of 32
    // bytes (header, u64, empty string, padding) in place of 2 entries.
    assert_eq!(all_records(&data).len() - recs.len(), 2);
    assert_eq!(recs.len(), FLUSH_AT / 32 * 2 - 2);
    assert!(recs.iter().enumerate().all(|(i, r)| r.ts == i as u64));
}

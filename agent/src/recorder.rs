//! The JVM event stream writer: per-thread buffers of encoded records, the
//! methods' definitions and the count of lost events, written into the
//! stream file ([`crate::stream_file`]).
//!
//! Each thread encodes into its own [`ThreadBuf`] (its mutex is only
//! contended at VM death), and appends it as one chunk once it holds
//! [`FLUSH_AT`] bytes, so records of different threads never interleave
//! inside a record. A METHOD_DEF is appended when the method is defined,
//! before any record that refers to it can be encoded, so it precedes every
//! use in the file. At VM death every buffer is written out, then JVM_END
//! with the loss count, and the file is closed complete.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jtrace_format::{Encoder, MethodDef, Payload, Record};

use crate::mutex::lock;
use crate::stream_file::StreamFile;

/// A thread buffer is appended to the file once it holds this many bytes.
pub const FLUSH_AT: usize = 64 * 1024;

/// Encoded records of one thread, not yet in the file.
#[derive(Debug, Default)]
pub struct ThreadBuf {
    enc: Encoder,
    records: u64,
}

/// Shared handle on a thread's buffer.
pub type SharedBuf = Arc<Mutex<ThreadBuf>>;

#[derive(Default)]
struct Methods {
    /// Filter decision per jmethodID, for every method seen by any thread.
    traced: HashMap<usize, bool>,
    /// Methods whose METHOD_DEF is written, traced or not.
    described: HashSet<usize>,
}

/// The writer of one `jvm-<pid>.bin` stream.
pub struct Recorder {
    out: Arc<StreamFile>,
    methods: Mutex<Methods>,
    buffers: Mutex<Vec<SharedBuf>>,
    lost: AtomicU64,
    dead: AtomicBool,
}

impl Recorder {
    /// Takes over `file` (created, opened read-write), maps it and writes
    /// the stream header.
    pub fn new(file: File) -> std::io::Result<Recorder> {
        Ok(Recorder {
            out: Arc::new(StreamFile::create(file)?),
            methods: Mutex::new(Methods::default()),
            buffers: Mutex::new(Vec::new()),
            lost: AtomicU64::new(0),
            dead: AtomicBool::new(false),
        })
    }

    /// Counts `n` events that could not be recorded.
    pub fn count_lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether VM death has been recorded (nothing may be recorded after it).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// A new buffer for the calling thread, registered for the final flush.
    pub fn new_thread_buf(&self) -> SharedBuf {
        let mut b = ThreadBuf::default();
        b.enc.buf.reserve(FLUSH_AT + 4096);
        let b = Arc::new(Mutex::new(b));
        lock(&self.buffers).push(b.clone());
        b
    }

    /// Appends one record to a thread's buffer, writing the buffer out when full.
    pub fn push(&self, buf: &SharedBuf, rec: &Record) {
        let mut b = lock(buf);
        // Checked under the buffer lock: VM death sets the flag before it
        // takes each buffer lock, so a record is either flushed or counted.
        if self.is_dead() {
            self.count_lost(1);
            return;
        }
        b.enc.record(rec);
        b.records += 1;
        if b.enc.buf.len() >= FLUSH_AT {
            self.flush_locked(&mut b);
        }
    }

    /// Lets `encode` append whole records to a thread's buffer (it returns
    /// how many). Never writes the buffer out, so it may run inside a JNI
    /// critical region; call [`Recorder::flush_if_full`] afterwards.
    pub fn encode_with(&self, buf: &SharedBuf, encode: impl FnOnce(&mut Vec<u8>) -> u64) {
        let mut b = lock(buf);
        if self.is_dead() {
            let n = encode(&mut Vec::new());
            self.count_lost(n);
            return;
        }
        let n = encode(&mut b.enc.buf);
        b.records += n;
    }

    /// Writes a thread's buffer out if it holds at least [`FLUSH_AT`] bytes.
    pub fn flush_if_full(&self, buf: &SharedBuf) {
        let mut b = lock(buf);
        if b.enc.buf.len() >= FLUSH_AT {
            self.flush_locked(&mut b);
        }
    }

    /// Writes out a thread's buffer and forgets it (at thread end).
    pub fn retire(&self, buf: &SharedBuf) {
        self.flush_locked(&mut lock(buf));
        lock(&self.buffers).retain(|b| !Arc::ptr_eq(b, buf));
    }

    fn flush_locked(&self, b: &mut ThreadBuf) {
        if b.enc.buf.is_empty() {
            return;
        }
        if !self.out.append(&b.enc.buf) {
            self.count_lost(b.records);
        }
        b.enc.buf.clear();
        b.records = 0;
    }

    /// Writes one record straight to the file (JVM_START, AGENT_ERROR, METHOD_DEF, JVM_END).
    pub fn write_direct(&self, rec: &Record) -> bool {
        let mut enc = Encoder::new();
        enc.record(rec);
        let ok = self.out.append(&enc.buf);
        if !ok {
            self.count_lost(1);
        }
        ok
    }

    /// The global filter decision for `method`, if some thread made it already.
    pub fn known_method(&self, method: usize) -> Option<bool> {
        lock(&self.methods).traced.get(&method).copied()
    }

    /// Stores the decision for a method; for a traced method seen for the
    /// first time, writes its METHOD_DEF (the "dumped" flag of JPMT is the
    /// presence in the map). Returns the decision in force, which is the
    /// earlier one if another thread won the race.
    pub fn define_method(&self, tid: u32, ts: u64, def: MethodDef, traced: bool) -> bool {
        let mut m = lock(&self.methods);
        if let Some(&t) = m.traced.get(&(def.method as usize)) {
            return t;
        }
        m.traced.insert(def.method as usize, traced);
        if traced && m.described.insert(def.method as usize) {
            self.write_def(tid, ts, def);
        }
        traced
    }

    /// Appends a METHOD_DEF; the caller holds the methods lock, so the
    /// definition is in the file before anyone can encode a use of it.
    fn write_def(&self, tid: u32, ts: u64, def: MethodDef) {
        if self.is_dead() {
            self.count_lost(1);
            return;
        }
        self.write_direct(&Record {
            tid,
            ts,
            payload: Payload::MethodDef(def),
        });
    }

    /// Writes a METHOD_DEF for a method that is referenced other than by a
    /// method event (JIT code ranges), whether traced or not; at most one per
    /// method id, shared with [`Recorder::define_method`].
    pub fn describe_method(&self, tid: u32, ts: u64, def: MethodDef) {
        let mut m = lock(&self.methods);
        if m.described.insert(def.method as usize) {
            self.write_def(tid, ts, def);
        }
    }

    /// Final flush at VM death: every thread buffer, then JVM_END with the
    /// loss count; the file is then truncated to its used size and marked
    /// complete. Later records are counted as lost and not written.
    pub fn finish(&self, tid: u32, ts: u64) {
        if self.dead.swap(true, Ordering::SeqCst) {
            return;
        }
        let bufs: Vec<SharedBuf> = lock(&self.buffers).clone();
        for b in &bufs {
            self.flush_locked(&mut lock(b));
        }
        let lost = self.lost.load(Ordering::SeqCst);
        let end = Record {
            tid,
            ts,
            payload: Payload::JvmEnd(jtrace_format::JvmEnd { lost_events: lost }),
        };
        let written = self.write_direct(&end);
        self.out.close(written);
    }

    /// Bytes reserved in the stream so far (header included).
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.out.used()
    }
}

impl Drop for Recorder {
    /// A recorder dropped without [`Recorder::finish`] (the agent gave up
    /// before tracing) still leaves a finished stream: JVM_END, truncated,
    /// complete (readers take a stream without JVM_END as cut short).
    fn drop(&mut self) {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid out-pointer; gettid has no preconditions.
        let tid = unsafe {
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
            libc::syscall(libc::SYS_gettid) as u32
        };
        self.finish(tid, ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream_file::{CHUNK, INITIAL};
    use jtrace_format::{Decoder, FileHeader, MethodEvent, FILE_HEADER_LEN, STREAM_COMPLETE};

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

    fn records(data: &[u8]) -> Vec<Record> {
        Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
            .map(|r| r.unwrap())
            .collect()
    }

    #[test]
    fn defs_precede_uses_and_losses_are_counted() {
        let (path, f) = stream("defs");
        let rec = Recorder::new(f).unwrap();
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
        // Truncated to exactly the records written.
        assert_eq!(data.len() as u64, rec.used());
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
        let rec = Arc::new(Recorder::new(f).unwrap());
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

    /// A writer that dies without finishing (kill -9) leaves the records it
    /// appended, then zero fill up to the allocated size, and no complete
    /// flag: the decoder stops cleanly at the zeros.
    #[test]
    fn unfinished_stream_is_a_readable_prefix() {
        let (path, f) = stream("killed");
        let rec = Recorder::new(f).unwrap();
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
        assert!(len >= INITIAL && len.is_multiple_of(CHUNK), "{len}");
        assert_eq!(FileHeader::parse(&data).unwrap().flags & STREAM_COMPLETE, 0);
        let recs = records(&data);
        // Whole 64 KiB chunks reached the file; the last partial buffer did not.
        assert_eq!(recs.len(), FLUSH_AT / 32 * 2);
        assert!(recs.iter().enumerate().all(|(i, r)| r.ts == i as u64));
    }
}

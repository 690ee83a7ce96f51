//! The JVM event stream writer.
//!
//! Each thread encodes into its own [`ThreadBuf`] (its mutex is only contended
//! at VM death), and appends a full buffer to the file with one write under
//! the file mutex, so records of different threads never interleave inside a
//! record. Method definitions go to one shared pending buffer that is always
//! written before any thread chunk, so a METHOD_DEF reaches the file before
//! every METHOD_ENTRY that refers to it, whichever thread flushes first.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use jtrace_format::{Encoder, FileHeader, MethodDef, Payload, Record, JVM_MAGIC};

/// A thread buffer is appended to the file once it holds this many bytes.
pub const FLUSH_AT: usize = 64 * 1024;

/// Locks `m`, ignoring poisoning: a panic elsewhere must not stop the
/// agent from finalising what it has (encoded records are always whole).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
    /// Methods whose METHOD_DEF is written (or pending), traced or not.
    described: HashSet<usize>,
    /// METHOD_DEF records not yet in the file.
    pending: Encoder,
    pending_records: u64,
}

/// The writer of one `jvm-<pid>.bin` stream.
pub struct Recorder {
    file: Mutex<File>,
    methods: Mutex<Methods>,
    buffers: Mutex<Vec<SharedBuf>>,
    lost: AtomicU64,
    dead: AtomicBool,
}

impl Recorder {
    /// Takes over `file` (already created) and writes the stream header.
    pub fn new(mut file: File) -> std::io::Result<Recorder> {
        file.write_all(&FileHeader::new(JVM_MAGIC).to_bytes())?;
        Ok(Recorder {
            file: Mutex::new(file),
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

    /// Appends `n` whole records, already encoded, to a thread's buffer
    /// (the bytecode probes' blocks of method events), writing it out when full.
    pub fn push_encoded(&self, buf: &SharedBuf, bytes: &[u8], n: u64) {
        let mut b = lock(buf);
        if self.is_dead() {
            self.count_lost(n);
            return;
        }
        b.enc.buf.extend_from_slice(bytes);
        b.records += n;
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
        let mut file = lock(&self.file);
        self.write_pending_defs(&mut file);
        if file.write_all(&b.enc.buf).is_err() {
            self.count_lost(b.records);
        }
        b.enc.buf.clear();
        b.records = 0;
    }

    /// Writes pending METHOD_DEFs; the caller holds the file lock.
    fn write_pending_defs(&self, file: &mut File) {
        let (bytes, n) = {
            let mut m = lock(&self.methods);
            if m.pending.buf.is_empty() {
                return;
            }
            let n = std::mem::take(&mut m.pending_records);
            (std::mem::take(&mut m.pending.buf), n)
        };
        if file.write_all(&bytes).is_err() {
            self.count_lost(n);
        }
    }

    /// Writes one record straight to the file (JVM_START, AGENT_ERROR, JVM_END).
    pub fn write_direct(&self, rec: &Record) {
        let mut enc = Encoder::new();
        enc.record(rec);
        let mut file = lock(&self.file);
        self.write_pending_defs(&mut file);
        if file.write_all(&enc.buf).is_err() {
            self.count_lost(1);
        }
    }

    /// The global filter decision for `method`, if some thread made it already.
    pub fn known_method(&self, method: usize) -> Option<bool> {
        lock(&self.methods).traced.get(&method).copied()
    }

    /// Stores the decision for a method; for a traced method seen for the
    /// first time, queues its METHOD_DEF (the "dumped" flag of JPMT is the
    /// presence in the map). Returns the decision in force, which is the
    /// earlier one if another thread won the race.
    pub fn define_method(&self, tid: u32, ts: u64, def: MethodDef, traced: bool) -> bool {
        let mut m = lock(&self.methods);
        if let Some(&t) = m.traced.get(&(def.method as usize)) {
            return t;
        }
        m.traced.insert(def.method as usize, traced);
        if traced && m.described.insert(def.method as usize) {
            if self.is_dead() {
                self.count_lost(1);
            } else {
                m.pending.record(&Record {
                    tid,
                    ts,
                    payload: Payload::MethodDef(def),
                });
                m.pending_records += 1;
            }
        }
        traced
    }

    /// Whether `method` already has its METHOD_DEF (written or pending).
    pub fn is_described(&self, method: usize) -> bool {
        lock(&self.methods).described.contains(&method)
    }

    /// Queues a METHOD_DEF for a method that is referenced other than by a
    /// method event (JIT code ranges), whether traced or not; at most one per
    /// method id, shared with [`Recorder::define_method`].
    pub fn describe_method(&self, tid: u32, ts: u64, def: MethodDef) {
        let mut m = lock(&self.methods);
        if !m.described.insert(def.method as usize) {
            return;
        }
        if self.is_dead() {
            self.count_lost(1);
            return;
        }
        m.pending.record(&Record {
            tid,
            ts,
            payload: Payload::MethodDef(def),
        });
        m.pending_records += 1;
    }

    /// Final flush at VM death: every thread buffer, then JVM_END with the
    /// loss count. Later records are counted as lost and not written.
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
        self.write_direct(&end);
        let _ = lock(&self.file).sync_data();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::{Decoder, MethodEvent, FILE_HEADER_LEN};

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

    #[test]
    fn defs_precede_uses_and_losses_are_counted() {
        let path = std::env::temp_dir().join(format!("jtrace-recorder-test-{}.bin", std::process::id()));
        let rec = Recorder::new(File::create(&path).unwrap()).unwrap();
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
        let kinds: Vec<Payload> = Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
            .map(|r| r.unwrap().payload)
            .collect();
        assert!(matches!(kinds[0], Payload::MethodDef(_)), "{kinds:?}");
        assert!(matches!(kinds[1], Payload::MethodEntry(_)));
        assert!(matches!(kinds[2], Payload::MethodEntry(_)));
        assert_eq!(kinds[3], Payload::JvmEnd(jtrace_format::JvmEnd { lost_events: 0 }));
        assert_eq!(kinds.len(), 4);
        assert!(rec.is_dead());
        assert_eq!(rec.lost.load(Ordering::SeqCst), 1);
    }
}

//! The JVM event stream writer: per-thread buffers of encoded records, the
//! methods' definitions and the count of lost events, written into the
//! stream file ([`crate::stream::file`]).
//!
//! Each thread encodes into its own [`ThreadBuf`] (its mutex is only
//! contended at VM death), and appends it as one chunk once it holds
//! [`FLUSH_AT`] bytes, so records of different threads never interleave
//! inside a record. A METHOD_DEF is appended when the method is defined,
//! before any record that refers to it can be encoded, so it precedes every
//! use in the file. At VM death every buffer is written out, then JVM_END
//! with the loss count, and the file is closed complete.
//!
//! In a ring recording ([`crate::stream::chunks`]) the stream is a run of chunk
//! files: every append notes what it wrote in the chunks' ledger, under
//! a shared lock that [`Recorder::rotate_if_due`] takes exclusively to
//! begin the next chunk with its prologue, so that a prologue restates
//! exactly what the chunks before it hold.
//!
//! When the stream file cannot grow (disk full), the recorder says so once,
//! when it happens, and keeps counting, per thread, the events it could not
//! write and the time of the first: at the end they become JVM_LOST records
//! and an AGENT_ERROR, written before JVM_END into the room the stream file
//! keeps for them.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use jtrace_format::{kind, Decoder, Encoder, JvmBlock, JvmLost, MethodDef, Payload, Record, LOST_STREAM_FULL};

use crate::mutex::lock;
use crate::stream::chunks::{ChunkPlan, Ledger};
use crate::stream::file::StreamFile;

/// A thread buffer is appended to the file once it holds this many bytes.
pub const FLUSH_AT: usize = 64 * 1024;

/// Encoded records of one thread, not yet in the file.
#[derive(Debug, Default)]
pub struct ThreadBuf {
    enc: Encoder,
    records: u64,
    /// Kernel tid of the thread the buffer is for.
    owner: u32,
}

impl ThreadBuf {
    /// Notes a write of the buffer, from `begin` to `end`, as
    /// TRACER_WAIT_BEGIN/END.
    fn note_wait(&mut self, begin: u64, end: u64, bytes: u64) {
        for (kind, ts) in [(kind::TRACER_WAIT_BEGIN, begin), (kind::TRACER_WAIT_END, end)] {
            self.enc.record(&Record {
                tid: self.owner,
                ts,
                payload: Payload::Jvm(
                    kind,
                    JvmBlock {
                        arg: bytes,
                        class: String::new(),
                    },
                ),
            });
        }
    }
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

/// A ring recording's chunks: the plan, the current chunk, the ledger.
struct Chunks {
    plan: ChunkPlan,
    min_free: u64,
    seq: AtomicU64,
    started: AtomicU64,
    ledger: Mutex<Ledger>,
    /// Told once that a new chunk could not be begun (the stream goes on in the current one).
    failed: AtomicBool,
}

/// The writer of one `jvm-<pid>.bin` stream.
pub struct Recorder {
    /// The current stream file (chunk); see the module documentation for the lock.
    out: RwLock<Arc<StreamFile>>,
    chunks: Option<Chunks>,
    methods: Mutex<Methods>,
    buffers: Mutex<Vec<SharedBuf>>,
    lost: AtomicU64,
    dead: AtomicBool,
    /// Per thread whose events the full stream file kept out: the time of
    /// the first and how many.
    lost_by_thread: Mutex<HashMap<u32, (u64, u64)>>,
    /// Told once, when the stream file first cannot grow.
    on_full: fn(&str),
}

impl Recorder {
    /// Takes over `file` (created, opened read-write), maps it and writes
    /// the stream header; `on_full` is told, once, when the file first
    /// cannot grow (the events from then on are counted, not written).
    /// `min_free`: the free-space floor of the stream's file system (0: none).
    pub fn new(file: File, on_full: fn(&str), min_free: u64) -> std::io::Result<Recorder> {
        Self::with_stream(StreamFile::create(file, min_free)?, on_full)
    }

    /// [`Recorder::new`] for a ring recording: `file` is chunk 0 of `plan`
    /// (begun at `now`), which starts with its JVM_CHUNK record.
    pub fn chunked(
        file: File,
        on_full: fn(&str),
        min_free: u64,
        plan: ChunkPlan,
        now: u64,
    ) -> std::io::Result<Recorder> {
        let step = plan.max_step();
        let mut r = Self::with_stream(StreamFile::create_stepped(file, min_free, step)?, on_full)?;
        r.chunks = Some(Chunks {
            plan,
            min_free,
            seq: AtomicU64::new(0),
            started: AtomicU64::new(now),
            ledger: Mutex::new(Ledger::default()),
            failed: AtomicBool::new(false),
        });
        let first = lock(&r.chunks.as_ref().expect("set").ledger).prologue(0, now);
        r.append(&first);
        Ok(r)
    }

    fn with_stream(out: StreamFile, on_full: fn(&str)) -> std::io::Result<Recorder> {
        Ok(Recorder {
            out: RwLock::new(Arc::new(out)),
            chunks: None,
            methods: Mutex::new(Methods::default()),
            buffers: Mutex::new(Vec::new()),
            lost: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            lost_by_thread: Mutex::new(HashMap::new()),
            on_full,
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
        self.new_thread_buf_of(crate::os::tid())
    }

    /// A new buffer for thread `owner` (kernel tid), registered for the
    /// final flush.
    pub fn new_thread_buf_of(&self, owner: u32) -> SharedBuf {
        let mut b = ThreadBuf {
            owner,
            ..ThreadBuf::default()
        };
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
            self.flush_noting_wait(&mut b);
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
            self.flush_noting_wait(&mut b);
        }
    }

    /// Writes out a thread's buffer and forgets it (at thread end).
    pub fn retire(&self, buf: &SharedBuf) {
        self.flush_locked(&mut lock(buf));
        lock(&self.buffers).retain(|b| !Arc::ptr_eq(b, buf));
    }

    /// [`Recorder::flush_locked`] by the buffer's own thread while it runs
    /// on, then the time the write took, as TRACER_WAIT_BEGIN/END at the
    /// start of the thread's next buffer: a write can block (the stream
    /// file grows behind the writers), and a block there is the tracer's,
    /// not the program's. Records of the thread from before the write may
    /// still follow (its probes' events not drained yet): readers sort by
    /// time. Another thread's write of the buffer (VM death, the end of an
    /// attach session) notes nothing: the wait is not the buffer's
    /// thread's.
    fn flush_noting_wait(&self, b: &mut ThreadBuf) {
        let mine = b.owner == crate::os::tid();
        let bytes = b.enc.buf.len() as u64;
        let begin = crate::os::now_ns();
        if self.flush_locked(b) && mine && !self.is_dead() {
            b.note_wait(begin, crate::os::now_ns(), bytes);
        }
    }

    /// Writes out a thread's buffer; false if it could not (its events
    /// are counted as lost). `records` counts the program's events, not
    /// the tracer's own TRACER_WAIT spans.
    fn flush_locked(&self, b: &mut ThreadBuf) -> bool {
        if b.enc.buf.is_empty() {
            return true;
        }
        let ok = self.append(&b.enc.buf);
        if !ok {
            self.count_lost(b.records);
            if self.current().is_full() {
                self.lost_by_thread_full(&b.enc.buf, b.records);
            }
        }
        b.enc.buf.clear();
        b.records = 0;
        ok
    }

    /// Notes a thread's buffer the full stream file could not take: its
    /// records are the thread's, in time order, so the first one's header
    /// gives the thread and the time its stream coverage ends.
    fn lost_by_thread_full(&self, buf: &[u8], records: u64) {
        // The first record of the program's (a TRACER_WAIT span of the
        // previous write may come first).
        let mut decoder = Decoder::new(buf, 0);
        let first = std::iter::from_fn(|| decoder.next_raw())
            .map_while(|r| r.ok())
            .find(|r| !matches!(r.kind, kind::TRACER_WAIT_BEGIN | kind::TRACER_WAIT_END));
        let Some((tid, ts)) = first.map(|r| (r.tid, r.ts)) else {
            return;
        };
        let mut m = lock(&self.lost_by_thread);
        if m.is_empty() {
            (self.on_full)(&format!(
                "cannot grow the trace's JVM stream ({}): from now on its events are counted as lost, not written",
                self.current().full_error().unwrap_or_default()
            ));
        }
        let e = m.entry(tid).or_insert((ts, 0));
        e.0 = e.0.min(ts);
        e.1 += records;
    }

    /// Writes one record straight to the file (JVM_START, AGENT_ERROR, METHOD_DEF, JVM_END).
    pub fn write_direct(&self, rec: &Record) -> bool {
        let mut enc = Encoder::new();
        enc.record(rec);
        let ok = self.append(&enc.buf);
        if !ok {
            self.count_lost(1);
        }
        ok
    }

    /// The current stream file.
    fn current(&self) -> Arc<StreamFile> {
        self.reading().clone()
    }

    fn reading(&self) -> RwLockReadGuard<'_, Arc<StreamFile>> {
        self.out.read().unwrap_or_else(|e| e.into_inner())
    }

    fn writing(&self) -> RwLockWriteGuard<'_, Arc<StreamFile>> {
        self.out.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends whole records to the current stream file, noting them in
    /// the chunks' ledger (under the shared lock: no new chunk begins in
    /// between).
    fn append(&self, bytes: &[u8]) -> bool {
        let out = self.reading();
        let ok = out.append(bytes);
        if let (true, Some(c)) = (ok, &self.chunks) {
            lock(&c.ledger).note(bytes);
        }
        ok
    }

    /// In a ring recording, begins the next chunk if the current one is
    /// big or old enough (the chunks' thread calls this). A chunk that
    /// cannot be begun (disk full, below the floor) is said once; the
    /// stream goes on in the current one.
    pub fn rotate_if_due(&self, now: u64) {
        let Some(c) = &self.chunks else { return };
        let cur = self.current();
        if self.is_dead() || cur.is_full() || !c.plan.due(cur.used(), c.started.load(Ordering::Relaxed), now) {
            return;
        }
        let seq = c.seq.load(Ordering::Relaxed) + 1;
        let name = c.plan.file(seq);
        let fail = |e: String| {
            c.plan.dir.remove(&name);
            if !c.failed.swap(true, Ordering::SeqCst) {
                (self.on_full)(&format!(
                    "cannot begin chunk {} of the trace's JVM stream ({e}): it goes on in {}",
                    c.plan.dir.shown(&name),
                    c.plan.dir.shown(&c.plan.file(seq - 1))
                ));
            }
        };
        let created = c
            .plan
            .dir
            .create_new(&name)
            .and_then(|f| StreamFile::create_stepped(f, c.min_free, c.plan.max_step()));
        let next = match created {
            Ok(n) => Arc::new(n),
            Err(e) => return fail(e.to_string()),
        };
        let old = {
            let mut out = self.writing();
            if self.is_dead() {
                drop(out);
                next.close(&[]);
                return fail("the JVM is ending".into());
            }
            let prologue = lock(&c.ledger).prologue(seq, now);
            if !next.append(&prologue) {
                drop(out);
                next.close(&[]);
                return fail(next.full_error().unwrap_or_else(|| "no room for its prologue".into()));
            }
            c.seq.store(seq, Ordering::Relaxed);
            c.started.store(now, Ordering::Relaxed);
            c.failed.store(false, Ordering::SeqCst);
            std::mem::replace(&mut *out, next)
        };
        // Finished: truncated and marked complete (no appender holds it).
        old.close(&[]);
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
        let mut last = Encoder::new();
        let by_thread = std::mem::take(&mut *lock(&self.lost_by_thread));
        if !by_thread.is_empty() {
            let events: u64 = by_thread.values().map(|&(_, n)| n).sum();
            last.record(&Record {
                tid,
                ts,
                payload: Payload::AgentError(format!(
                    "the JVM stream could not grow ({}): {events} events of {} threads were not written",
                    self.current().full_error().unwrap_or_default(),
                    by_thread.len()
                )),
            });
        }
        let mut by_thread: Vec<(u32, (u64, u64))> = by_thread.into_iter().collect();
        by_thread.sort_by_key(|&(t, (first, _))| (first, t));
        // JVM_END (24 bytes) always fits: JVM_LOST records that would not
        // are left out (the total in JVM_END still counts their events).
        let room = crate::stream::file::RESERVE as usize - 24;
        for (t, (first, events)) in by_thread {
            let at = last.buf.len();
            last.record(&Record {
                tid: t,
                ts: first,
                payload: Payload::JvmLost(JvmLost {
                    events,
                    reason: LOST_STREAM_FULL,
                    reserved: 0,
                }),
            });
            if last.buf.len() > room {
                last.buf.truncate(at);
                break;
            }
        }
        last.record(&Record {
            tid,
            ts,
            payload: Payload::JvmEnd(jtrace_format::JvmEnd { lost_events: lost }),
        });
        // Under the exclusive lock: no new chunk begins meanwhile.
        self.writing().close(&last.buf);
    }

    /// Bytes reserved in the stream so far (header included).
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.current().used()
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
#[path = "recorder_tests.rs"]
mod tests;

//! The JVM event stream writer: a memory-mapped file with an atomic position
//! counter (JPMT's design).
//!
//! The whole stream is one shared mapping of `jvm-<pid>.bin`, reserved once
//! with a large virtual length so it never moves. Appending a chunk takes
//! its space with one `fetch_add` on the position counter and copies the
//! bytes in: no lock, no syscall. The file itself is grown (fallocate, then
//! the new pages are faulted in with MADV_POPULATE_WRITE) in large steps,
//! ahead of the writers, by a background thread; a writer only grows it
//! itself, under the grow lock, when it catches up with the allocated end.
//! Because the data is in a shared file mapping it survives a crash or a
//! kill -9 of the JVM: the file then ends with zero bytes (reserved or
//! preallocated space never written), which readers take as the end of the
//! written data. At VM death the file is truncated to the used size and the
//! header is marked [`STREAM_COMPLETE`].
//!
//! Each thread encodes into its own [`ThreadBuf`] (its mutex is only
//! contended at VM death), and appends it as one chunk once it holds
//! [`FLUSH_AT`] bytes, so records of different threads never interleave
//! inside a record. A METHOD_DEF is appended when the method is defined,
//! before any record that refers to it can be encoded, so it precedes every
//! use in the file.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use jtrace_format::{Encoder, FileHeader, MethodDef, Payload, Record, FILE_HEADER_LEN, JVM_MAGIC, STREAM_COMPLETE};
use memmap2::{MmapOptions, MmapRaw};

/// A thread buffer is appended to the file once it holds this many bytes.
pub const FLUSH_AT: usize = 64 * 1024;

/// The file is grown in steps that double from [`INITIAL`] up to this size.
const GROW_STEP: u64 = 32 << 20;
/// Allocated at creation (a short run never waits for the grower).
const INITIAL: u64 = 4 << 20;
/// Growing allocates and faults in this much at a time and publishes it at
/// once, so an appender that has to wait for the grower waits for little.
const CHUNK: u64 = 2 << 20;
/// Virtual lengths tried for the mapping, largest first (only the pages
/// written cost memory; a smaller one is tried if the address space is limited).
const VIRTUAL_LENGTHS: [u64; 4] = [256 << 30, 16 << 30, 1 << 30, 64 << 20];

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
    /// Methods whose METHOD_DEF is written, traced or not.
    described: HashSet<usize>,
}

/// The mapped file and its counters.
struct Mapped {
    file: File,
    /// Unmapped by [`Mapped::close`] (once no appender can touch it), never by drop.
    map: ManuallyDrop<MmapRaw>,
    /// Virtual length of the mapping: the stream can never be longer.
    cap: u64,
    /// Next free byte: appenders reserve `[pos, pos + n)` with fetch_add.
    pos: AtomicU64,
    /// Bytes of the file allocated (and safe to write through the mapping).
    ready: AtomicU64,
    /// Appenders between their check of `closed` and the end of their copy.
    writers: AtomicUsize,
    /// No more appends (VM death, or the recorder is dropped).
    closed: AtomicBool,
    /// A grow failed (disk full, mapping exhausted): later appends are
    /// counted as lost, so the written data stays one contiguous prefix.
    full: AtomicBool,
    /// Serialises growing the file.
    grow: Mutex<()>,
    /// The background grower was asked to grow and has not done so yet.
    grow_wanted: AtomicBool,
    /// Appends that found the file not yet grown and waited for the grow lock.
    waits: AtomicU64,
    /// The background grower, once started.
    grower: Mutex<Option<std::thread::Thread>>,
    /// Grow by writing zeros before faulting the pages in (every file
    /// system but tmpfs; see [`Mapped::grow_locked`]).
    prefill: bool,
}

// SAFETY: the mapping is only written through disjoint ranges reserved with
// the atomic position counter (the header only by the creator and closer).
unsafe impl Sync for Mapped {}
unsafe impl Send for Mapped {}

impl Mapped {
    /// Maps `file` (opened read-write), allocates its first bytes and
    /// writes the stream header (not yet marked complete).
    fn create(file: File) -> std::io::Result<Mapped> {
        let mut err = None;
        let mut found = None;
        for len in VIRTUAL_LENGTHS {
            match MmapOptions::new().len(len as usize).map_raw(&file) {
                Ok(map) => {
                    found = Some((map, len));
                    break;
                }
                Err(e) => err = Some(e),
            }
        }
        let Some((map, cap)) = found else {
            return Err(err.unwrap_or_else(|| std::io::Error::other("cannot map the stream")));
        };
        file.set_len(0)?;
        let prefill = !is_tmpfs(&file);
        let m = Mapped {
            file,
            map: ManuallyDrop::new(map),
            cap,
            pos: AtomicU64::new(FILE_HEADER_LEN as u64),
            ready: AtomicU64::new(0),
            writers: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            full: AtomicBool::new(false),
            grow: Mutex::new(()),
            grow_wanted: AtomicBool::new(false),
            waits: AtomicU64::new(0),
            grower: Mutex::new(None),
            prefill,
        };
        if let Err(e) = m.grow_locked(INITIAL.min(cap)) {
            // SAFETY: our mapping, never used.
            unsafe { libc::munmap(m.map.as_mut_ptr().cast(), m.cap as usize) };
            return Err(e);
        }
        let header = FileHeader::new(JVM_MAGIC).to_bytes();
        // SAFETY: the first INITIAL bytes are allocated and nobody else writes yet.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), m.map.as_mut_ptr(), header.len()) };
        Ok(m)
    }

    /// Allocates the file up to at least `target` bytes (the caller holds
    /// the grow lock, or is the creator).
    fn grow_locked(&self, target: u64) -> std::io::Result<()> {
        let fd = self.file.as_raw_fd();
        let mut ready = self.ready.load(Ordering::Acquire);
        while ready < target {
            let step = CHUNK.min(self.cap - ready);
            if step == 0 {
                return Err(std::io::Error::other("the stream reached the size of its mapping"));
            }
            // Real blocks, so that a full disk is an error here and never
            // a SIGBUS in a thread writing through the mapping.
            // SAFETY: plain syscall on our own fd.
            if unsafe { libc::fallocate(fd, 0, ready as i64, step as i64) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                    return Err(e);
                }
                // No fallocate on this filesystem: a sparse extension.
                self.file.set_len(ready + step)?;
            }
            if self.prefill {
                // On a disk file system (ext4) fallocate only reserves
                // unwritten extents, and faulting them in then costs a read
                // fault plus a page_mkwrite (block and journal work) per 4 KiB
                // page: ≈ 3.8 µs a page here. Writing zeros first puts the
                // range in the page cache through the write path (large
                // folios, one block mapping per write), after which the
                // faults are cheap: ≈ 1-2 µs a page in all. tmpfs pages are
                // allocated by fallocate already: writing them would only
                // add a copy.
                self.write_zeros(ready, step)?;
            }
            // Fault the new pages in now, off the appenders' path; an error
            // (old kernel) only means they fault on first write instead.
            // SAFETY: the range is inside the mapping and the file.
            unsafe {
                libc::madvise(
                    self.map.as_mut_ptr().add(ready as usize).cast(),
                    step as usize,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            ready += step;
            self.ready.store(ready, Ordering::Release);
        }
        Ok(())
    }

    /// Writes zeros to `[at, at + len)` of the file with pwrite (the caller
    /// holds the grow lock; no appender writes there yet).
    fn write_zeros(&self, at: u64, len: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        static ZEROS: [u8; 256 << 10] = [0; 256 << 10];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len() as u64) as usize;
            self.file.write_all_at(&ZEROS[..n], at + done)?;
            done += n as u64;
        }
        Ok(())
    }

    /// Appends `bytes` (whole records) lock-free; false if they could not be
    /// written (the caller counts them as lost).
    fn append(self: &Arc<Self>, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return true;
        }
        // Registered before `closed` is checked: close() waits for us.
        self.writers.fetch_add(1, Ordering::SeqCst);
        let ok = self.append_open(bytes);
        self.writers.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    fn append_open(self: &Arc<Self>, bytes: &[u8]) -> bool {
        if self.closed.load(Ordering::SeqCst) || self.full.load(Ordering::Relaxed) {
            return false;
        }
        let n = bytes.len() as u64;
        let start = self.pos.fetch_add(n, Ordering::Relaxed);
        let end = start + n;
        if end > self.ready.load(Ordering::Acquire) {
            // The grower is behind: grow ourselves (the only blocking path).
            self.waits.fetch_add(1, Ordering::Relaxed);
            let _g = lock(&self.grow);
            if end > self.cap || self.grow_locked(end).is_err() {
                self.full.store(true, Ordering::SeqCst);
                return false;
            }
        }
        let ready = self.ready.load(Ordering::Relaxed);
        if end + step_at(ready) > ready {
            self.wake_grower();
        }
        // SAFETY: [start, end) is reserved for us alone and allocated.
        unsafe { copy_out(bytes, self.map.as_mut_ptr().add(start as usize)) };
        true
    }

    /// Asks the background thread to grow the file ahead of the appenders
    /// (started on first use; without it, appenders grow it themselves).
    fn wake_grower(self: &Arc<Self>) {
        if self.grow_wanted.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut g = lock(&self.grower);
        if g.is_none() {
            let weak = Arc::downgrade(self);
            *g = std::thread::Builder::new()
                .name("jtrace-grow".into())
                .spawn(move || grower(weak))
                .ok()
                .map(|h| h.thread().clone());
        }
        if let Some(t) = g.as_ref() {
            t.unpark();
        }
    }

    /// Stops appends, waits for those in flight, marks the header complete
    /// if asked, and truncates the file to the bytes used.
    fn close(&self, complete: bool) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        while self.writers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        let _g = lock(&self.grow);
        let used = self.pos.load(Ordering::SeqCst).min(self.ready.load(Ordering::SeqCst));
        if std::env::var_os("JTRACE_AGENT_DEBUG").is_some() {
            eprintln!(
                "jtrace agent (debug): stream {} bytes; {} appends waited for the file to grow",
                used,
                self.waits.load(Ordering::Relaxed)
            );
        }
        let _ = self.map.flush();
        let _ = self.file.set_len(used);
        // Complete only once the file has its final length: a reader may
        // map a complete stream (it never shrinks again).
        if complete {
            let mut h = FileHeader::new(JVM_MAGIC);
            h.flags |= STREAM_COMPLETE;
            let b = h.to_bytes();
            // SAFETY: no appender is left; the header is inside the file.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.map.as_mut_ptr(), b.len()) };
            let _ = self.map.flush_range(0, b.len());
        }
        let _ = self.file.sync_data();
        // Give the (large) virtual range back: appenders see `closed` and
        // never touch it again, and the grower checks it under the grow lock.
        // SAFETY: the range is our mapping and nothing uses it any more.
        unsafe { libc::munmap(self.map.as_mut_ptr().cast(), self.cap as usize) };
        if let Some(t) = lock(&self.grower).as_ref() {
            t.unpark();
        }
    }
}

/// Copies `src` to `dst` in the mapping. The trace is never read back by
/// this process, so on x86-64 whole 16-byte blocks use non-temporal stores:
/// no read of the destination lines and no eviction of the application's
/// cache lines.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes.
unsafe fn copy_out(src: &[u8], dst: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let head = dst.align_offset(16).min(src.len());
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        let blocks = (src.len() - head) / 16;
        for i in 0..blocks {
            let off = head + i * 16;
            // SAFETY (SSE2 is part of x86-64): dst + off is 16-byte aligned.
            let v = _mm_loadu_si128(src.as_ptr().add(off).cast::<__m128i>());
            _mm_stream_si128(dst.add(off).cast::<__m128i>(), v);
        }
        let done = head + blocks * 16;
        std::ptr::copy_nonoverlapping(src.as_ptr().add(done), dst.add(done), src.len() - done);
        // Order the streamed stores before anything written after this append.
        _mm_sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
}

/// Whether `file` is on tmpfs (or ramfs), whose fallocate allocates the
/// pages themselves.
fn is_tmpfs(file: &File) -> bool {
    // SAFETY: fstatfs on our own fd into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    const RAMFS_MAGIC: libc::__fsword_t = 0x8584_58f6;
    st.f_type == libc::TMPFS_MAGIC || st.f_type == RAMFS_MAGIC
}

/// The next grow step when `ready` bytes are allocated: doubling, so a
/// short run stays small, then [`GROW_STEP`].
fn step_at(ready: u64) -> u64 {
    ready.clamp(INITIAL, GROW_STEP)
}

/// The background grower: when woken, allocates the file three steps ahead of
/// the position; exits when the stream is closed.
fn grower(m: std::sync::Weak<Mapped>) {
    loop {
        std::thread::park();
        let Some(m) = m.upgrade() else { return };
        if m.closed.load(Ordering::SeqCst) {
            return;
        }
        if !m.grow_wanted.load(Ordering::Acquire) {
            continue;
        }
        let ready = m.ready.load(Ordering::Relaxed);
        let target = (m.pos.load(Ordering::Relaxed) + 3 * step_at(ready)).min(m.cap);
        loop {
            // One chunk per lock hold: an appender that caught up waits for
            // one chunk at most.
            let _g = lock(&m.grow);
            if m.closed.load(Ordering::SeqCst) {
                return;
            }
            let ready = m.ready.load(Ordering::Relaxed);
            // A failure is left to the appender that needs the space to report.
            if ready >= target || m.grow_locked((ready + CHUNK).min(target)).is_err() {
                break;
            }
        }
        m.grow_wanted.store(false, Ordering::Release);
    }
}

/// The writer of one `jvm-<pid>.bin` stream.
pub struct Recorder {
    out: Arc<Mapped>,
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
            out: Arc::new(Mapped::create(file)?),
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

    /// Whether `method` already has its METHOD_DEF.
    pub fn is_described(&self, method: usize) -> bool {
        lock(&self.methods).described.contains(&method)
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
        self.out.pos.load(Ordering::SeqCst)
    }
}

impl Drop for Recorder {
    /// A recorder dropped without [`Recorder::finish`] (the agent gave up
    /// before tracing) still leaves a closed, truncated stream.
    fn drop(&mut self) {
        self.out.close(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::{Decoder, MethodEvent};

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

    /// The grow path depends on the file system (zeros written first except
    /// on tmpfs): the detection agrees with stat(1) for the temporary
    /// directory and for /dev/shm (tmpfs on Linux).
    #[test]
    fn tmpfs_detection_matches_stat() {
        let shm = std::path::Path::new("/dev/shm");
        for dir in [std::env::temp_dir().as_path(), shm] {
            let (path, f) = stream_in(dir, "fstype");
            let out = std::process::Command::new("stat")
                .args(["-f", "-c", "%T"])
                .arg(&path)
                .output()
                .unwrap();
            let fs = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let tmpfs = is_tmpfs(&f);
            let _ = std::fs::remove_file(&path);
            assert!(out.status.success() && !fs.is_empty());
            assert_eq!(tmpfs, fs == "tmpfs" || fs == "ramfs", "{}: {fs}", dir.display());
            assert_eq!(Recorder::new(f).unwrap().out.prefill, !tmpfs);
            if dir == shm {
                assert!(tmpfs, "/dev/shm is {fs}");
            }
        }
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

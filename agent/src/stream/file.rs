//! The stream file: one shared, memory-mapped, append-only file with an
//! atomic position counter (JPMT's design), written by [`crate::recorder`].
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
//! written data. At the end the last records are written after the data,
//! the file is truncated to the used size and the header is marked
//! [`STREAM_COMPLETE`].
//!
//! A full disk is never silent: [`RESERVE`] bytes of the file stay
//! allocated beyond what appenders may use, so when the file cannot grow
//! any more, appends fail (the caller counts them) but the last records
//! (what was lost, and JVM_END) still fit after the data written. Nor is
//! the disk ever filled: with a free-space floor (`min_free_bytes`), a grow
//! that would leave the file system fewer free bytes fails the same way.
//!
//! Memory stays bounded: behind the appenders, the grower gives the pages
//! already written back to the kernel ([`KEEP_MAPPED`]) and starts their
//! writeback, so the JVM's resident set and dirty page cache do not grow
//! with the trace.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jtrace_format::{FileHeader, FILE_HEADER_LEN, JVM_MAGIC, STREAM_COMPLETE};
use memmap2::{MmapOptions, MmapRaw};

use crate::mutex::lock;
pub(crate) use crate::stream::limits::{CHUNK, INITIAL, RESERVE};
use crate::stream::limits::{GROW_STEP, KEEP_MAPPED, STEPS_AHEAD};

/// Virtual lengths tried for the mapping, largest first (only the pages
/// written cost memory; a smaller one is tried if the address space is limited).
const VIRTUAL_LENGTHS: [u64; 4] = [256 << 30, 16 << 30, 1 << 30, 64 << 20];

/// The mapped stream file and its counters.
pub(crate) struct StreamFile {
    file: File,
    /// Unmapped by [`StreamFile::close`] (once no appender can touch it), never by drop.
    map: ManuallyDrop<MmapRaw>,
    /// Virtual length of the mapping: the stream can never be longer.
    cap: u64,
    /// Next free byte: appenders reserve `[pos, pos + n)` with fetch_add.
    pos: AtomicU64,
    /// Bytes of the file appenders may use: allocated, safe to write
    /// through the mapping, and followed by [`RESERVE`] more allocated bytes.
    ready: AtomicU64,
    /// The start of the earliest append that failed (u64::MAX: none): the
    /// data written is whole up to here.
    first_failed: AtomicU64,
    /// Why the file could not grow, once it could not.
    full_error: Mutex<Option<String>>,
    /// Mapped bytes below this offset were unmapped (grower only).
    released: AtomicU64,
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
    /// system but tmpfs; see [`StreamFile::grow_locked`]).
    prefill: bool,
    /// The free-space floor: a grow that would leave the file system fewer
    /// free bytes (for unprivileged users) fails (0: none; not checked
    /// while the stream is created, so that it can say what it lost).
    min_free: u64,
    /// Checks [`StreamFile::min_free`] (set once created).
    floor_on: AtomicBool,
    /// The grower's largest step ([`GROW_STEP`], less for a ring
    /// recording's chunks, whose allocation ahead counts against the ring's size).
    max_step: u64,
}

// SAFETY: the mapping is only written through disjoint ranges reserved with
// the atomic position counter (the header only by the creator and closer).
unsafe impl Sync for StreamFile {}
// SAFETY: the mapping and the file it owns are not tied to the thread that
// created them.
unsafe impl Send for StreamFile {}

impl StreamFile {
    /// Maps `file` (opened read-write), allocates its first bytes and
    /// writes the stream header (not yet marked complete).
    /// `min_free`: the free-space floor of its file system (0: none).
    pub(crate) fn create(file: File, min_free: u64) -> std::io::Result<StreamFile> {
        Self::create_mapped(file, &VIRTUAL_LENGTHS, min_free)
    }

    /// [`StreamFile::create`] whose grower steps at most `max_step` bytes
    /// (at least [`CHUNK`]) ahead.
    pub(crate) fn create_stepped(file: File, min_free: u64, max_step: u64) -> std::io::Result<StreamFile> {
        let mut m = Self::create_mapped(file, &VIRTUAL_LENGTHS, min_free)?;
        m.max_step = max_step.clamp(CHUNK, GROW_STEP);
        Ok(m)
    }

    /// [`StreamFile::create`] with the first of `lengths` that can be mapped
    /// as the mapping's length (the stream's maximum size).
    pub(crate) fn create_mapped(file: File, lengths: &[u64], min_free: u64) -> std::io::Result<StreamFile> {
        let mut err = None;
        let mut found = None;
        for &len in lengths {
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
        let m = StreamFile {
            file,
            map: ManuallyDrop::new(map),
            cap,
            pos: AtomicU64::new(FILE_HEADER_LEN as u64),
            ready: AtomicU64::new(0),
            first_failed: AtomicU64::new(u64::MAX),
            full_error: Mutex::new(None),
            released: AtomicU64::new(0),
            writers: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            full: AtomicBool::new(false),
            grow: Mutex::new(()),
            grow_wanted: AtomicBool::new(false),
            waits: AtomicU64::new(0),
            grower: Mutex::new(None),
            prefill,
            min_free,
            floor_on: AtomicBool::new(false),
            max_step: GROW_STEP,
        };
        // The rest is allocated ahead by the grower, which the first
        // append wakes: each MiB prepared here is ≈ 3 ms on the JVM's
        // start-up path (zeros written, then faulted in).
        let initial = INITIAL.min(cap.saturating_sub(RESERVE));
        if let Err(e) = m
            .allocate(0, initial + RESERVE.min(cap))
            .map(|()| m.ready.store(initial, Ordering::Release))
        {
            // SAFETY: our mapping, never used.
            unsafe { libc::munmap(m.map.as_mut_ptr().cast(), m.cap as usize) };
            return Err(e);
        }
        let header = FileHeader::new(JVM_MAGIC).to_bytes();
        // SAFETY: the first `initial` bytes are allocated and nobody else writes yet.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), m.map.as_mut_ptr(), header.len()) };
        m.floor_on.store(min_free > 0, Ordering::Relaxed);
        Ok(m)
    }

    /// Makes appenders' room at least `target` bytes (the caller holds the
    /// grow lock, or is the creator), [`RESERVE`] more allocated beyond.
    fn grow_locked(&self, target: u64) -> std::io::Result<()> {
        let mut ready = self.ready.load(Ordering::Acquire);
        while ready < target {
            let step = CHUNK.min(self.cap - ready - RESERVE);
            if step == 0 {
                return Err(std::io::Error::other("the stream reached the size of its mapping"));
            }
            self.allocate(ready + RESERVE, step)?;
            ready += step;
            self.ready.store(ready, Ordering::Release);
        }
        Ok(())
    }

    /// Allocates `[at, at + step)` of the file and faults it into the
    /// mapping (the caller holds the grow lock, or is the creator).
    fn allocate(&self, at: u64, step: u64) -> std::io::Result<()> {
        let fd = self.file.as_raw_fd();
        if self.floor_on.load(Ordering::Relaxed) {
            jtrace_format::check_free_space(&self.file, step, self.min_free)?;
        }
        {
            let ready = at;
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

    /// Bytes reserved in the stream so far (header included).
    pub(crate) fn used(&self) -> u64 {
        self.pos.load(Ordering::SeqCst)
    }

    /// Appends `bytes` (whole records) lock-free; false if they could not be
    /// written (the caller counts them as lost).
    pub(crate) fn append(self: &Arc<Self>, bytes: &[u8]) -> bool {
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
        if self.closed.load(Ordering::SeqCst) || self.full.load(Ordering::SeqCst) {
            return false;
        }
        let n = bytes.len() as u64;
        let start = self.pos.fetch_add(n, Ordering::Relaxed);
        let end = start + n;
        if end > self.ready.load(Ordering::Acquire) {
            // The grower is behind: grow ourselves (the only blocking path).
            self.waits.fetch_add(1, Ordering::Relaxed);
            let _g = lock(&self.grow);
            // Once full, the file never grows again (`ready` is frozen: it
            // only grows under this lock, while not full), so every append
            // from the first that failed on fails too, and the data stays
            // whole up to it. An append whose room was allocated meanwhile
            // is written even when the file is full: it starts before the
            // first failed one, and failing it would cut off the appends
            // after it that did not wait here (their events lost unsaid).
            let grown = if end <= self.ready.load(Ordering::Acquire) {
                Ok(())
            } else if self.full.load(Ordering::SeqCst) {
                Err(std::io::Error::other("full"))
            } else if end + RESERVE > self.cap {
                Err(std::io::Error::other("the stream reached the size of its mapping"))
            } else {
                self.grow_locked(end)
            };
            if let Err(e) = grown {
                self.first_failed.fetch_min(start, Ordering::SeqCst);
                // The reason first, so that whoever sees `full` finds it.
                lock(&self.full_error).get_or_insert_with(|| e.to_string());
                self.full.store(true, Ordering::SeqCst);
                return false;
            }
        }
        let ready = self.ready.load(Ordering::Relaxed);
        if end + self.step_at(ready) > ready {
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
                .name(jtrace_format::agent_threads::GROW.into())
                .spawn(move || grower(weak))
                .ok()
                .map(|h| h.thread().clone());
        }
        if let Some(t) = g.as_ref() {
            t.unpark();
        }
    }

    /// Whether an append failed because the file could not grow.
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Why the file could not grow, once an append failed for it.
    pub(crate) fn full_error(&self) -> Option<String> {
        lock(&self.full_error).clone()
    }

    /// Stops appends, waits for those in flight, writes `last` (whole
    /// records, at most [`RESERVE`] bytes: what does not fit is left out)
    /// right after the data, truncates the file to the bytes used and marks
    /// its header complete.
    pub(crate) fn close(&self, last: &[u8]) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        while self.writers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        let _g = lock(&self.grow);
        let data = (self.pos.load(Ordering::SeqCst))
            .min(self.first_failed.load(Ordering::SeqCst))
            .min(self.ready.load(Ordering::SeqCst));
        let last = &last[..last.len().min(RESERVE as usize)];
        // SAFETY: no appender is left; [data, data + RESERVE) is allocated
        // (ready + RESERVE bytes are) and inside the mapping (pages the
        // grower released fault back in).
        unsafe { std::ptr::copy_nonoverlapping(last.as_ptr(), self.map.as_mut_ptr().add(data as usize), last.len()) };
        let used = data + last.len() as u64;
        if std::env::var_os("JTRACE_AGENT_DEBUG").is_some() {
            eprintln!(
                "jtrace agent (debug): stream {} bytes; {} appends waited for the file to grow",
                used,
                self.waits.load(Ordering::Relaxed)
            );
        }
        // Unmapped before the write-back: cleaning pages that are still
        // mapped write-protects each one with a TLB shoot-down to every CPU
        // the JVM runs on, and the truncation walks the whole range
        // (together ≈ 0.1 s on a 4 MB trace, more on larger ones:
        // BENCHMARKS.md, "Start-up and exit"). Appenders see
        // `closed` and never touch the range again, and the grower checks it
        // under the grow lock.
        // SAFETY: the range is our mapping and nothing uses it any more.
        unsafe { libc::munmap(self.map.as_mut_ptr().cast(), self.cap as usize) };
        let _ = self.file.set_len(used);
        // The data on disk before the header says complete (a machine that
        // crashes in between leaves a stream read as incomplete, not one
        // with a hole), and complete only once the file has its final
        // length: a reader may map a complete stream (it never shrinks again).
        let _ = self.file.sync_data();
        let mut h = FileHeader::new(JVM_MAGIC);
        h.flags |= STREAM_COMPLETE;
        let _ = std::os::unix::fs::FileExt::write_all_at(&self.file, &h.to_bytes(), 0);
        let _ = self.file.sync_data();
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
    // SAFETY: the caller guarantees `dst` is writable for `src.len()` bytes (# Safety).
    unsafe {
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
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
}

/// Whether `file` is on tmpfs (or ramfs), whose fallocate allocates the
/// pages themselves.
fn is_tmpfs(file: &File) -> bool {
    // SAFETY: fstatfs on our own fd into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `file`'s fd is open and `st` is a writable statfs.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    const RAMFS_MAGIC: libc::__fsword_t = 0x8584_58f6;
    st.f_type == libc::TMPFS_MAGIC || st.f_type == RAMFS_MAGIC
}

impl StreamFile {
    /// The next grow step when `ready` bytes are allocated: doubling, so a
    /// short run stays small, then [`StreamFile::max_step`].
    fn step_at(&self, ready: u64) -> u64 {
        ready.clamp(INITIAL.min(self.max_step), self.max_step)
    }
}

/// The background grower: when woken, allocates the file [`STEPS_AHEAD`] steps ahead of
/// the position; exits when the stream is closed.
fn grower(m: std::sync::Weak<StreamFile>) {
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
        let target = (m.pos.load(Ordering::Relaxed) + STEPS_AHEAD * m.step_at(ready)).min(m.cap - RESERVE);
        loop {
            // One chunk per lock hold: an appender that caught up waits for
            // one chunk at most.
            let _g = lock(&m.grow);
            if m.closed.load(Ordering::SeqCst) {
                return;
            }
            let ready = m.ready.load(Ordering::Relaxed);
            // A failure is left to the appender that needs the space to report.
            if ready >= target || m.full.load(Ordering::SeqCst) || m.grow_locked((ready + CHUNK).min(target)).is_err() {
                break;
            }
        }
        m.grow_wanted.store(false, Ordering::Release);
        let _g = lock(&m.grow);
        // Under the grow lock: close() unmaps the whole range under it.
        if !m.closed.load(Ordering::SeqCst) {
            m.release_behind();
        }
    }
}

impl StreamFile {
    /// Unmaps the pages written more than [`KEEP_MAPPED`] bytes behind the
    /// last append and starts their writeback (the grower, under the grow
    /// lock, while the stream is open): the JVM's
    /// resident set stays bounded, and the dirty pages can be written out
    /// and reclaimed, whatever the trace's size.
    fn release_behind(&self) {
        const PAGE: u64 = 4096;
        let upto = self.pos.load(Ordering::Relaxed).saturating_sub(KEEP_MAPPED) / PAGE * PAGE;
        let from = self.released.load(Ordering::Relaxed);
        if upto < from + GROW_STEP {
            return;
        }
        // SAFETY: a range of our own mapping; for a shared file mapping
        // MADV_DONTNEED only drops the page table entries (the data stays in
        // the page cache, and a late write faults the page back in).
        unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(from as usize).cast(),
                (upto - from) as usize,
                libc::MADV_DONTNEED,
            );
            libc::sync_file_range(
                self.file.as_raw_fd(),
                from as i64,
                (upto - from) as i64,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
        self.released.store(upto, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grow path depends on the file system (zeros written first except
    /// on tmpfs): the detection agrees with stat(1) for the temporary
    /// directory and for /dev/shm (tmpfs on Linux).
    #[test]
    fn tmpfs_detection_matches_stat() {
        let shm = std::path::Path::new("/dev/shm");
        for dir in [std::env::temp_dir().as_path(), shm] {
            let path = dir.join(format!("jtrace-stream-file-test-{}-fstype.bin", std::process::id()));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
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
            assert_eq!(StreamFile::create(f, 0).unwrap().prefill, !tmpfs);
            if dir == shm {
                assert!(tmpfs, "/dev/shm is {fs}");
            }
        }
    }
}

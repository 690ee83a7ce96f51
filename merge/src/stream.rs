//! Streaming analysis: the per-thread merge of a trace of any length in
//! memory bounded by a budget, not by the number of events.
//!
//! One pass reads the streams record by record (mapped and released behind
//! the reader when finished, else in chunks; never a whole file in memory)
//! and turns them into compact per-thread events; a syscall entry's
//! record is kept with its thread's events. Events are buffered per thread,
//! the few that arrive late (records written at a call's return carry its
//! entry time) aside from the in-order ones, so that sorting a buffer meets
//! a few long sorted runs. When the buffers reach the memory
//! budget, each thread's events are sorted by time and written as one
//! segment of a *run* file in a temporary directory (tids ascending; each
//! event delta-encoded in a few bytes); the buffers are reused by the next
//! run. The analysis then walks the threads
//! in tid order and merges each thread's segments of all runs (plus the
//! buffer still in memory, plus the JVM-wide windows) by time, with ties in
//! stream order, which is exactly the order [`Trace::open`] gives: the walk
//! sees the same events in the same order, so every figure is identical.
//! The merge hands the walk slices: the leading source's events up to the
//! next source's head. A trace that fits the budget is never written out.
//!
//! Memory: the budget, plus per thread its stack, plus the tables bounded by
//! the number of distinct threads, methods and strings, plus the GC /
//! safepoint windows (a few per second of recording), plus the runs' read
//! buffers or mapped windows (an eighth of the budget together) and one
//! decoded block of 1024 events per run while a thread is walked.
//!
//! ```no_run
//! use jtrace_merge::{stream, Invocation, ThreadInfo, Visitor};
//! struct Slowest(u64);
//! impl Visitor for Slowest {
//!     fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
//!         self.0 = self.0.max(inv.breakdown.wall);
//!     }
//! }
//! let (trace, events) = stream::open("big.jtrace".as_ref(), &stream::StreamOptions::default()).unwrap();
//! let mut v = Slowest(0);
//! stream::analyze(&trace, events, &mut v).unwrap();
//! println!("slowest invocation: {} ns", v.0);
//! ```

use crate::analyze::{Invocation, OffCpuInterval, ThreadTotals, ThreadWalk, Visitor, Wake};
use crate::cause::Cause;
use crate::read::{Event, MethodIdx, SyscallInfo, ThreadInfo, Timed, Trace};
use jtrace_format::{self as fmt, DecodeError, Decoder, FileHeader, RawRecord};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Default memory budget for buffered events: 256 MiB (about 10 M events).
pub const DEFAULT_BUDGET: usize = 256 << 20;

/// How a streaming analysis may use memory and disk.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Bytes of buffered events before a sorted run is written to disk.
    pub memory_budget: usize,
    /// Where runs go (default `$TMPDIR`, else /tmp). The files are unlinked
    /// as soon as they are created, so nothing is left behind.
    pub temp_dir: Option<PathBuf>,
    /// Also prepare [`analyze_with_wakers`] (the waker's method of every
    /// wakeup): each wakeup is sent to its waker's stream as a query.
    pub waker_methods: bool,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            memory_budget: DEFAULT_BUDGET,
            temp_dir: None,
            waker_methods: false,
        }
    }
}

/// `64 KiB`, `256 MiB`: a budget as messages show it.
fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Parses a size such as `64M`, `512K`, `2G` or a number of bytes.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: usize = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("{s}: unknown unit {c} (use K, M or G)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: usize = num.trim().parse().map_err(|e| format!("{s}: {e}"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s}: too large"))
}

/// A multiplicative hasher for tids (SipHash costs more than the rest of
/// buffering an event).
#[derive(Default, Clone, Copy)]
pub(crate) struct TidHasher(u64);

impl std::hash::Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A map keyed by tid (or another integer id).
pub(crate) type TidMap<V, K = u32> = HashMap<K, V, std::hash::BuildHasherDefault<TidHasher>>;

// ---------------------------------------------------------------- reading

/// A new file `jtrace-PREFIX-PID-N.tmp` in `dir`, unlinked at once: it
/// lives as long as it is open, and nothing is left behind whatever happens
/// to the process (sorted runs here; the views' spilled rows too).
pub fn unlinked_temp_file(dir: &Path, prefix: &str) -> std::io::Result<File> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("jtrace-{prefix}-{}-{serial}.tmp", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// Size of a read from a stream file.
const CHUNK: usize = 4 << 20;

/// Mapped input released to the kernel (MADV_DONTNEED) in steps of this
/// many bytes behind the reader: the page cache keeps the file, the
/// process's resident set stays bounded whatever the trace's size.
const RELEASE_STEP: usize = 4 << 20;

/// The records of a stream file: mapped when no writer can shrink it any
/// more, read in chunks otherwise.
///
/// Decoding straight from the page cache saves `read()`'s copy of every
/// byte (≈ 10 % of a streaming report's time, all of it memory traffic). A
/// mapping is safe only while the file does not shrink under it (a read
/// past the end of a truncated mapping is SIGBUS): the kernel stream is
/// only ever appended to, and the agent's JVM stream is truncated once, at
/// VM death, before it is marked [`fmt::STREAM_COMPLETE`]; an unfinished
/// JVM stream (a live JVM, a killed one) is read with `read()`.
pub(crate) struct RecordReader {
    path: PathBuf,
    file: File,
    /// The whole file, when mapped (`buf`, `pos` and `base` are then
    /// unused; `mapped_pos` is the file offset).
    map: Option<memmap2::Mmap>,
    mapped_pos: usize,
    /// Mapped bytes below this offset were released.
    released: usize,
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    base: usize,
    eof: bool,
    done: bool,
    /// An I/O error that ended the reading early.
    pub(crate) error: Option<std::io::Error>,
}

impl RecordReader {
    /// Opens a stream and checks its header; returns it with the header.
    pub(crate) fn open(path: &Path, magic: [u8; 8]) -> anyhow::Result<(FileHeader, RecordReader)> {
        let mut file = File::open(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut head = [0u8; fmt::FILE_HEADER_LEN];
        let n = read_full(&mut file, &mut head).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let header = crate::read::check_header(path, &head[..n], magic)?;
        let shrinks_no_more = magic == fmt::KERNEL_MAGIC || header.flags & fmt::STREAM_COMPLETE != 0;
        let map = if shrinks_no_more { map_file(&file, CHUNK) } else { None };
        let r = RecordReader {
            path: path.to_path_buf(),
            file,
            mapped_pos: fmt::FILE_HEADER_LEN,
            released: 0,
            map,
            buf: Vec::new(),
            pos: 0,
            base: fmt::FILE_HEADER_LEN,
            eof: false,
            done: false,
            error: None,
        };
        Ok((header, r))
    }

    /// Whether `buf[pos..]` starts with a whole record, or with something
    /// the decoder decides on by itself (zero fill, a bad length).
    #[inline]
    fn decidable(&self) -> bool {
        let rest = &self.buf[self.pos..];
        if rest.len() < fmt::RECORD_HEADER_LEN {
            return false;
        }
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        len < fmt::RECORD_HEADER_LEN || rest.len() >= len
    }

    fn fill(&mut self) {
        // Keep the unread tail, then read into the (already zeroed)
        // capacity behind it.
        let tail = self.buf.len() - self.pos;
        self.buf.copy_within(self.pos.., 0);
        self.base += self.pos;
        self.pos = 0;
        let want = tail + CHUNK;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let n = match read_full(&mut self.file, &mut self.buf[tail..want]) {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(e);
                0
            }
        };
        self.buf.truncate(tail + n);
        if n == 0 {
            self.eof = true;
        }
    }

    /// [`RawRecords::next_raw`](crate::read::RawRecords::next_raw) of a mapped stream.
    fn next_mapped(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        let map = self.map.as_ref()?;
        let at = self.mapped_pos;
        // The records before `at` were handed out by earlier calls, whose
        // borrows have ended (`&mut self`).
        release_behind(map, &mut self.released, at, RELEASE_STEP);
        let rest = &map[at..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let r = Decoder::new(rest, at).next_raw();
        match &r {
            Some(Ok(raw)) => self.mapped_pos += fmt::RECORD_HEADER_LEN + raw.payload.len(),
            _ => self.done = true,
        }
        r
    }
}

/// The file mapped read-only for one sequential pass, or None if it is
/// shorter than `min_len` (or empty) or the mapping fails: the caller reads
/// it instead. The caller guarantees the file does not shrink while mapped.
fn map_file(file: &File, min_len: usize) -> Option<memmap2::Mmap> {
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 || len < min_len {
        return None;
    }
    // SAFETY: read-only and private; the file does not shrink (see callers).
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.ok()?;
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

/// Gives the kernel back what a sequential reader of `map` at `pos` has
/// passed, except the last `keep` bytes, once there are `keep` more to give
/// (one call in `keep` bytes): the resident set stays bounded whatever the
/// file's size, and the page cache keeps the file.
fn release_behind(map: &memmap2::Mmap, released: &mut usize, pos: usize, keep: usize) {
    if pos >= *released + 2 * keep {
        let upto = pos - keep;
        // SAFETY: no slice of the mapping below `pos` is still borrowed by
        // the caller; read again, the bytes would be faulted back in from
        // the file.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, *released, upto - *released) };
        *released = upto;
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl crate::read::RawRecords for RecordReader {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        if self.done {
            return None;
        }
        if self.map.is_some() {
            return self.next_mapped();
        }
        while !self.eof && !self.decidable() {
            self.fill();
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let r = Decoder::new(rest, self.base + self.pos).next_raw();
        match &r {
            Some(Ok(raw)) => self.pos += fmt::RECORD_HEADER_LEN + raw.payload.len(),
            _ => self.done = true,
        }
        r
    }
}

impl std::fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordReader({})", self.path.display())
    }
}

// ---------------------------------------------------------------- sorting

/// Bytes one buffered event costs.
const ITEM: usize = std::mem::size_of::<Timed>();
/// Bytes one buffered syscall record costs.
const SC_ITEM: usize = std::mem::size_of::<(u32, SyscallInfo)>();

/// The record of syscall `idx` among a thread's records (ascending by
/// index), looked for at `*next` first, then close to it: a thread's syscall
/// entries come in index order but for records written after the fact,
/// which are a few places off.
#[inline]
fn record_of<'r>(scs: &'r [(u32, SyscallInfo)], next: &mut usize, idx: u32) -> Option<&'r SyscallInfo> {
    let n = *next;
    let k = match scs.get(n) {
        Some((i, _)) if *i == idx => n,
        Some((i, _)) if *i < idx => (n + 1..scs.len().min(n + 32))
            .find(|&k| scs[k].0 == idx)
            .or_else(|| scs.binary_search_by_key(&idx, |r| r.0).ok())?,
        _ => (n.saturating_sub(32)..n.min(scs.len()))
            .rev()
            .find(|&k| scs[k].0 == idx)
            .or_else(|| scs.binary_search_by_key(&idx, |r| r.0).ok())?,
    };
    *next = k + 1;
    Some(&scs[k].1)
}

/// One thread's segment of a run file.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Byte offset in the run file.
    offset: u64,
    /// Events in the segment.
    count: u64,
}

/// A sorted run on disk.
#[derive(Debug)]
struct Run {
    file: File,
    segments: BTreeMap<u32, Segment>,
}

/// Collects the events of the reading pass, spilling sorted runs to disk
/// when the budget is reached.
#[derive(Debug)]
pub(crate) struct Sorter {
    opts: StreamOptions,
    /// Bytes held by `buckets` (capacities).
    bytes: usize,
    /// Per thread, the event buffer of its bucket in the last run, emptied
    /// and cut to what that run used: the next run's bucket of the thread
    /// starts with it (memory already mapped: no page faults, no regrowth).
    pool: TidMap<Vec<Timed>>,
    /// Bytes held by `pool`; dropped when the pool and the buckets together
    /// would exceed the budget.
    pool_bytes: usize,
    /// Buffered events per thread, in first-seen order.
    buckets: Vec<Bucket>,
    /// Index in `buckets` of each thread's bucket.
    slot: TidMap<usize>,
    /// The last thread pushed and its bucket: consecutive records are
    /// mostly of one thread, so most pushes skip the lookup.
    last: Option<(u32, usize)>,
    /// Index the next syscall record gets (as in [`Trace::syscalls`]).
    pub(crate) next_syscall: u32,
    runs: Vec<Run>,
    temp: Option<PathBuf>,
    /// First and last event time per thread (of the runs written so far).
    pub(crate) span: TidMap<(u64, u64)>,
    /// The first error writing a run (the reading continues, then fails).
    pub(crate) error: Option<anyhow::Error>,
    /// Events buffered in total.
    pub(crate) events: u64,
    /// Wakeups as queries to their wakers ([`analyze_with_wakers`]).
    queries: Option<Box<Sorter>>,
}

impl Sorter {
    pub(crate) fn new(opts: &StreamOptions) -> Sorter {
        Sorter {
            opts: opts.clone(),
            bytes: 0,
            pool: TidMap::default(),
            pool_bytes: 0,
            buckets: Vec::new(),
            slot: TidMap::default(),
            last: None,
            next_syscall: 0,
            runs: Vec::new(),
            temp: None,
            span: TidMap::default(),
            error: None,
            events: 0,
            queries: opts.waker_methods.then(|| Box::new(Sorter::new(&small(opts)))),
        }
    }

    /// The next events come from another stream: they start new sorted
    /// segments (see [`Bucket`]).
    pub(crate) fn begin_stream(&mut self) {
        for b in &mut self.buckets {
            self.bytes += b.seal();
        }
        if let Some(q) = &mut self.queries {
            q.begin_stream();
        }
    }

    /// A syscall record; returns the index its events use.
    /// The record is kept with its thread's events (where the spill and
    /// the walk look for it, in order, instead of all over one table).
    pub(crate) fn add_syscall(&mut self, sc: SyscallInfo) -> u32 {
        let idx = self.next_syscall;
        self.next_syscall += 1;
        let i = self.bucket(sc.tid);
        let v = &mut self.buckets[i].scs;
        let cap = v.capacity();
        v.push((idx, sc));
        self.bytes += (v.capacity() - cap) * SC_ITEM;
        idx
    }

    /// The index of the bucket of `tid` (created if new).
    #[inline]
    fn bucket(&mut self, tid: u32) -> usize {
        match self.last {
            Some((t, i)) if t == tid => i,
            _ => {
                let n = self.buckets.len();
                let i = *self.slot.entry(tid).or_insert(n);
                if i == n {
                    let evs = match self.pool.remove(&tid) {
                        Some(v) => {
                            let b = v.capacity() * ITEM;
                            self.pool_bytes -= b;
                            self.bytes += b;
                            v
                        }
                        None => Vec::new(),
                    };
                    self.buckets.push(Bucket {
                        tid,
                        evs,
                        late: Vec::new(),
                        tail: 0,
                        scs: Vec::new(),
                    });
                }
                self.last = Some((tid, i));
                i
            }
        }
    }

    pub(crate) fn push(&mut self, tid: u32, ts: u64, event: Event) {
        self.events += 1;
        if let (Some(q), Event::Wakeup { waker_tid, .. }) = (&mut self.queries, event) {
            q.push(waker_tid, ts, cross(tid, None));
        }
        let i = self.bucket(tid);
        let b = &mut self.buckets[i];
        // In-order events (most) go to `evs`, late ones aside: see Bucket.
        let v = if ts >= b.tail {
            b.tail = ts;
            &mut b.evs
        } else {
            &mut b.late
        };
        let cap = v.capacity();
        v.push(Timed { ts, event });
        if v.capacity() != cap {
            self.bytes += (v.capacity() - cap) * ITEM;
            if self.bytes + self.pool_bytes > self.opts.memory_budget {
                // The reuse must not make the buffers exceed the budget.
                self.pool = TidMap::default();
                self.pool_bytes = 0;
            }
        }
        if self.bytes >= self.opts.memory_budget && self.error.is_none() {
            if let Err(e) = self.spill() {
                self.error = Some(e);
            }
        }
    }

    /// The temporary directory, checked once.
    fn temp_dir(&mut self) -> anyhow::Result<PathBuf> {
        if let Some(t) = &self.temp {
            return Ok(t.clone());
        }
        let dir = self.opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        if !dir.is_dir() {
            anyhow::bail!(
                "the trace does not fit the memory budget ({}) and the temporary directory {} for sorted runs \
                 does not exist (set TMPDIR or --temp-dir, or raise --memory-budget)",
                human(self.opts.memory_budget),
                dir.display()
            );
        }
        self.temp = Some(dir.clone());
        Ok(dir)
    }

    /// Sorts the buffer thread by thread and writes it as a run.
    fn spill(&mut self) -> anyhow::Result<()> {
        let dir = self.temp_dir()?;
        let mut file = unlinked_temp_file(&dir, "run").map_err(|e| {
            anyhow::anyhow!(
                "cannot create a sorted run in {} (the trace does not fit the memory budget of {}): {e} \
                 (set TMPDIR or --temp-dir, or raise --memory-budget)",
                dir.display(),
                human(self.opts.memory_budget)
            )
        })?;
        let mut buckets = std::mem::take(&mut self.buckets);
        // Buffers of the run before that no thread took up again go now.
        self.pool = TidMap::default();
        self.pool_bytes = 0;
        let (mut pool, mut pool_bytes) = (TidMap::default(), 0);
        buckets.sort_unstable_by_key(|b| b.tid);
        self.slot.clear();
        self.last = None;
        let mut segments = BTreeMap::new();
        let mut out = Vec::with_capacity(1 << 20);
        let mut written = 0u64;
        let werr = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot write a sorted run in {}: {e} (free space there, set TMPDIR or --temp-dir, \
                 or raise --memory-budget)",
                dir.display()
            )
        };
        for mut b in buckets {
            b.sort(&mut self.span);
            let (tid, evs, scs) = (b.tid, &b.evs, &b.scs);
            let offset = written + out.len() as u64;
            let mut next = 0;
            let mut prev = 0;
            for e in evs {
                let sc = match e.event {
                    Event::Syscall { idx, enter: true } => record_of(scs, &mut next, idx),
                    _ => None,
                };
                encode(&mut out, e, sc, &mut prev);
                if out.len() >= 1 << 20 {
                    file.write_all(&out).map_err(werr)?;
                    written += out.len() as u64;
                    out.clear();
                }
            }
            segments.insert(
                tid,
                Segment {
                    offset,
                    count: evs.len() as u64,
                },
            );
            let mut v = b.evs;
            let used = v.len();
            v.clear();
            v.shrink_to(used);
            pool_bytes += v.capacity() * ITEM;
            pool.insert(tid, v);
        }
        file.write_all(&out).map_err(werr)?;
        file.seek(SeekFrom::Start(0)).map_err(werr)?;
        self.bytes = 0;
        (self.pool, self.pool_bytes) = (pool, pool_bytes);
        self.runs.push(Run { file, segments });
        Ok(())
    }

    /// Ends the reading pass: what the analysis walks.
    /// Returns the events and each thread's first and last event time.
    pub(crate) fn finish(mut self) -> anyhow::Result<(SortedEvents, TidMap<(u64, u64)>)> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some(e) = self.queries.as_mut().and_then(|q| q.error.take()) {
            return Err(e);
        }
        let mut buckets: TidMap<MemEvents> = TidMap::default();
        for mut b in std::mem::take(&mut self.buckets) {
            b.sort(&mut self.span);
            buckets.insert(b.tid, (b.evs, b.scs));
        }
        let spilled_runs = self.runs.len();
        // The runs' read buffers share an eighth of the budget (at least
        // 64 KiB each), so many runs do not add up to more memory. Runs
        // are mapped only while each gets the most (few runs): many
        // mapped runs started at once fault in more than their share.
        let chunk = (self.opts.memory_budget / 8 / spilled_runs.max(1)).clamp(64 << 10, 1 << 20);
        let events = SortedEvents {
            readers: self
                .runs
                .into_iter()
                .map(|r| RunReader {
                    // The run is this process's own unlinked file, written completely.
                    map: if chunk >= 1 << 20 { map_file(&r.file, 1) } else { None },
                    released: 0,
                    file: r.file,
                    segments: r.segments,
                    buf: Vec::new(),
                    pos: 0,
                    offset: 0,
                    chunk,
                    prev_ts: 0,
                })
                .collect(),
            buckets,
            windows: HashMap::new(),
            thread_windows: TidMap::default(),
            spilled_runs,
            queries: self.queries,
            opts_small: small(&self.opts),
        };
        Ok((events, self.span))
    }
}

/// A thread's sorted events left in memory at the end of the reading, and
/// the records of its syscall entries (index, record) ascending by index.
type MemEvents = (Vec<Timed>, Vec<(u32, SyscallInfo)>);

/// One thread's buffered events, kept so that sorting them is cheap.
///
/// A thread's events arrive nearly in time order within a stream; the
/// exceptions are records written after the fact (a syscall or library call
/// written at its return carries its entry time). Events not earlier than
/// the last in-order one go to `evs`, the late ones to `late`. Where two
/// events have equal times, the one in `evs` was pushed first (every event
/// pushed into `evs` after a late one is later than it), so `evs` followed
/// by `late` is in push order wherever order matters, and a stable sort of
/// that concatenation is the stable sort of the events as pushed. The sort
/// then meets a few long sorted runs instead of a shuffle. A new stream
/// starts a new such segment ([`Sorter::begin_stream`]).
#[derive(Debug)]
struct Bucket {
    tid: u32,
    /// Sorted segments, one per stream, each followed by its late events.
    evs: Vec<Timed>,
    /// Late events of the current stream's segment.
    late: Vec<Timed>,
    /// Time of the last in-order event of the current segment.
    tail: u64,
    /// The records of the thread's syscall entries: (index, record),
    /// ascending by index.
    scs: Vec<(u32, SyscallInfo)>,
}

impl Bucket {
    /// Closes the current segment: its late events follow it.
    fn seal(&mut self) -> usize {
        let cap = self.evs.capacity() + self.late.capacity();
        self.evs.append(&mut self.late);
        self.late = Vec::new();
        self.tail = 0;
        (self.evs.capacity() + self.late.capacity()).saturating_sub(cap) * ITEM
    }

    /// Sorts the events by time (ties in push order) and extends the
    /// thread's span.
    fn sort(&mut self, span: &mut TidMap<(u64, u64)>) {
        self.seal();
        // Stable: events of equal time keep their stream order.
        self.evs.sort_by_key(|e| e.ts);
        if let (Some(first), Some(last)) = (self.evs.first(), self.evs.last()) {
            let s = span.entry(self.tid).or_insert((first.ts, last.ts));
            s.0 = s.0.min(first.ts);
            s.1 = s.1.max(last.ts);
        }
    }
}

/// Options for the query and answer sorts: a quarter of the budget each.
fn small(opts: &StreamOptions) -> StreamOptions {
    StreamOptions {
        memory_budget: (opts.memory_budget / 4).max(64 << 10),
        temp_dir: opts.temp_dir.clone(),
        waker_methods: false,
    }
}

fn cause_from(b: u8) -> Cause {
    Cause::ALL.get(b as usize).copied().unwrap_or(Cause::Unknown)
}

// A run is written once and read once, through the page cache: its size
// is what a spill costs (at 100 M events the copy into the page cache was
// a third of a report's time). An event is therefore a tag byte, the time
// as a LEB128 delta to the previous event of the thread's segment (a
// segment is sorted, so it is never negative; the first is relative to 0),
// the flag bytes only where they are non-zero, and the tag's fields as
// LEB128: 3–8 bytes for most events instead of a fixed 24.

/// Tag bits saying a flag byte follows.
const F1_FOLLOWS: u8 = 0x10;
const F2_FOLLOWS: u8 = 0x20;

/// Bytes of the syscall record following a tag-8 event: tid, entry time,
/// then the kernel record as the stream carries it ([`fmt::Syscall::to_bytes`]).
const SC_LEN: usize = 4 + 8 + fmt::Syscall::LEN;

/// Longest encoded event: tag, two flags, a 64-bit delta, a 64-bit field
/// (a fault address) or three 32-bit ones, and a syscall entry's record.
const MAX_ENCODED: usize = 3 + 10 + 15 + SC_LEN;

/// An event's bytes before its syscall record, written straight into the
/// run's buffer (built on the stack and copied, the byte stores and the
/// wide load of the copy stalled on store forwarding).
struct Packed<'a> {
    b: &'a mut [std::mem::MaybeUninit<u8>],
    n: usize,
}

impl Packed<'_> {
    #[inline(always)]
    fn byte(&mut self, v: u8) {
        self.b[self.n].write(v);
        self.n += 1;
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }
}

/// The LEB128 number at `b[*i..]`; None if it runs past the end or past
/// 64 bits.
#[inline(always)]
fn get_varint(b: &[u8], i: &mut usize) -> Option<u64> {
    // Most are one byte (deltas of a few µs are two or three).
    let first = *b.get(*i)?;
    if first < 0x80 {
        *i += 1;
        return Some(first as u64);
    }
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Appends one event (and the syscall record of an entry) to a run.
/// `prev`: the time of the segment's previous event (0 at its start).
#[inline]
fn encode(out: &mut Vec<u8>, e: &Timed, sc: Option<&SyscallInfo>, prev: &mut u64) {
    out.reserve(MAX_ENCODED);
    let len = out.len();
    let mut p = Packed {
        b: &mut out.spare_capacity_mut()[..MAX_ENCODED - SC_LEN],
        n: 0,
    };
    let mut head = |p: &mut Packed, tag: u8, f1: u8, f2: u8| {
        p.byte(tag | if f1 != 0 { F1_FOLLOWS } else { 0 } | if f2 != 0 { F2_FOLLOWS } else { 0 });
        if f1 != 0 {
            p.byte(f1);
        }
        if f2 != 0 {
            p.byte(f2);
        }
        debug_assert!(e.ts >= *prev, "a run segment is sorted");
        p.varint(e.ts - *prev);
        *prev = e.ts;
    };
    let mut record = None;
    match e.event {
        Event::SwitchOut {
            preempted,
            prev_state,
            cpu,
            next_tid,
        } => {
            head(&mut p, 0, preempted as u8, 0);
            p.varint(prev_state as u64);
            p.varint(cpu as u64);
            p.varint(next_tid as u64);
        }
        Event::SwitchIn { cpu, prev_tid } => {
            head(&mut p, 1, 0, 0);
            p.varint(cpu as u64);
            p.varint(prev_tid as u64);
        }
        Event::Wakeup {
            waker_tid,
            waker_tgid,
            new_task,
        } => {
            head(&mut p, 2, new_task as u8, 0);
            p.varint(waker_tid as u64);
            p.varint(waker_tgid as u64);
        }
        Event::Enter(m) => {
            head(&mut p, 3, 0, 0);
            p.varint(m as u64);
        }
        Event::Exit { method, exception } => {
            head(&mut p, 4, exception as u8, 0);
            p.varint(method as u64);
        }
        Event::ThreadStart => head(&mut p, 5, 0, 0),
        Event::ThreadEnd => head(&mut p, 6, 0, 0),
        Event::Syscall { idx, enter } => {
            record = sc.filter(|_| enter);
            head(
                &mut p,
                if record.is_some() {
                    8
                } else if enter {
                    9
                } else {
                    7
                },
                0,
                0,
            );
            p.varint(idx as u64);
        }
        Event::PageFault { address } => {
            head(&mut p, 10, 0, 0);
            p.varint(address);
        }
        Event::Block { cause, begin, detail } => {
            head(&mut p, 11, cause as u8, begin as u8);
            p.varint(detail as u64);
        }
        Event::Window { cause, begin } => head(&mut p, 12, cause as u8, begin as u8),
    }
    let n = p.n;
    // SAFETY: `Packed::byte` initialised the n bytes after `len`, within
    // the reserved capacity.
    unsafe { out.set_len(len + n) };
    if let Some(sc) = record {
        let start = out.len();
        out.extend_from_slice(&sc.tid.to_le_bytes());
        out.extend_from_slice(&sc.enter.to_le_bytes());
        out.extend_from_slice(&sc.rec.to_bytes());
        debug_assert_eq!(out.len() - start, SC_LEN);
    }
}

/// Decodes the event at the start of `b` (see [`encode`]): its time, the
/// event, its tag and its length (a syscall entry's record not included).
#[inline(always)]
fn decode(b: &[u8], prev_ts: u64) -> Option<(u64, Event, u8, usize)> {
    let head = *b.first()?;
    let tag = head & 0x0f;
    let mut i = 1;
    let mut f1 = 0;
    let mut f2 = 0;
    if head & F1_FOLLOWS != 0 {
        f1 = *b.get(i)?;
        i += 1;
    }
    if head & F2_FOLLOWS != 0 {
        f2 = *b.get(i)?;
        i += 1;
    }
    let ts = prev_ts.checked_add(get_varint(b, &mut i)?)?;
    #[inline(always)]
    fn field(b: &[u8], i: &mut usize) -> Option<u32> {
        u32::try_from(get_varint(b, i)?).ok()
    }
    let event = match tag {
        0 => Event::SwitchOut {
            preempted: f1 != 0,
            prev_state: field(b, &mut i)?,
            cpu: field(b, &mut i)?,
            next_tid: field(b, &mut i)?,
        },
        1 => Event::SwitchIn {
            cpu: field(b, &mut i)?,
            prev_tid: field(b, &mut i)?,
        },
        2 => Event::Wakeup {
            waker_tid: field(b, &mut i)?,
            waker_tgid: field(b, &mut i)?,
            new_task: f1 != 0,
        },
        3 => Event::Enter(field(b, &mut i)?),
        4 => Event::Exit {
            method: field(b, &mut i)?,
            exception: f1 != 0,
        },
        5 => Event::ThreadStart,
        6 => Event::ThreadEnd,
        7..=9 => Event::Syscall {
            idx: field(b, &mut i)?,
            enter: tag != 7,
        },
        10 => Event::PageFault {
            address: get_varint(b, &mut i)?,
        },
        11 => Event::Block {
            cause: cause_from(f1),
            begin: f2 != 0,
            detail: field(b, &mut i)?,
        },
        12 => Event::Window {
            cause: cause_from(f1),
            begin: f2 != 0,
        },
        _ => return None,
    };
    Some((ts, event, tag, i))
}

/// Sequential reader of one run file.
#[derive(Debug)]
struct RunReader {
    file: File,
    segments: BTreeMap<u32, Segment>,
    /// The run mapped (it is this process's own unlinked file: nothing
    /// else changes it); `buf` is then unused, `offset` 0 and `pos` the
    /// file offset. None: read in chunks into `buf`.
    map: Option<memmap2::Mmap>,
    /// Mapped bytes below this offset were released.
    released: usize,
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    offset: u64,
    /// Bytes per read; mapped, the bytes kept mapped behind the reader.
    chunk: usize,
    /// Time of the segment's last decoded event (see [`encode`]).
    prev_ts: u64,
}

impl RunReader {
    /// Positions the reader at a byte offset of the run (a no-op when
    /// segments are read in order, as walks do).
    fn seek(&mut self, to: u64) -> anyhow::Result<()> {
        if self.offset + self.pos as u64 == to {
            return Ok(());
        }
        if self.map.is_some() {
            self.pos = to as usize;
            self.released = self.released.min(self.pos);
            return Ok(());
        }
        self.file
            .seek(SeekFrom::Start(to))
            .map_err(|e| anyhow::anyhow!("cannot read back a sorted run: {e}"))?;
        self.buf.clear();
        self.pos = 0;
        self.offset = to;
        Ok(())
    }

    /// Positions the reader at the start of a thread's segment.
    fn start_segment(&mut self, offset: u64) -> anyhow::Result<()> {
        self.prev_ts = 0;
        self.seek(offset)
    }

    /// Makes `n` bytes available (fewer only at the end of the run).
    fn ensure(&mut self, n: usize) -> anyhow::Result<()> {
        if self.map.is_some() {
            return Ok(());
        }
        while self.buf.len() - self.pos < n {
            self.buf.drain(..self.pos);
            self.offset += self.pos as u64;
            self.pos = 0;
            let old = self.buf.len();
            self.buf.resize(old + self.chunk, 0);
            let got = read_full(&mut self.file, &mut self.buf[old..])
                .map_err(|e| anyhow::anyhow!("cannot read back a sorted run: {e}"))?;
            self.buf.truncate(old + got);
            if got == 0 {
                break;
            }
        }
        Ok(())
    }

    /// The bytes `pos` indexes.
    #[inline]
    fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => m,
            None => &self.buf,
        }
    }

    /// Gives the kernel back what a mapped run has passed (more than
    /// `chunk` behind the reader), so that a run costs about as much
    /// resident memory mapped as read.
    fn release_behind(&mut self) {
        // Nothing borrows the mapping between calls of `next`.
        if let Some(map) = &self.map {
            release_behind(map, &mut self.released, self.pos, self.chunk);
        }
    }

    /// Decodes the next event of the current segment; the record of a
    /// syscall entry goes to `sc_out` (then returns true).
    #[inline]
    fn next(&mut self, sc_out: &mut Option<SyscallInfo>) -> anyhow::Result<(Timed, bool)> {
        if self.bytes().len() - self.pos < MAX_ENCODED {
            self.ensure(MAX_ENCODED)?;
        }
        let bad = || anyhow::anyhow!("a sorted run is corrupt (was the temporary file changed?)");
        let (ts, event, tag, len) = decode(&self.bytes()[self.pos..], self.prev_ts).ok_or_else(bad)?;
        self.prev_ts = ts;
        self.pos += len;
        if tag != 8 {
            return Ok((Timed { ts, event }, false));
        }
        let b = &self.bytes()[self.pos..];
        let sc = match (b.first_chunk::<12>(), b.get(12..).and_then(fmt::Syscall::from_bytes)) {
            (Some(h), Some(rec)) => SyscallInfo {
                tid: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
                enter: u64::from_le_bytes([h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]]),
                rec,
            },
            _ => return Err(bad()),
        };
        self.pos += SC_LEN;
        *sc_out = Some(sc);
        Ok((Timed { ts, event }, true))
    }
}

/// The events of a streamed trace, sorted per thread, ready for one walk
/// ([`analyze`]).
#[derive(Debug)]
pub struct SortedEvents {
    readers: Vec<RunReader>,
    /// The last run, never written out: per thread its events and the
    /// records of its syscall entries.
    buckets: TidMap<MemEvents>,
    /// GC / safepoint windows (time-ordered) per Java thread's process.
    windows: HashMap<u32, Vec<Timed>>,
    /// Per Java thread: the windows open when its life began (they begin at
    /// its first event for it) and the part of its process's windows
    /// inside its life ([`crate::read::windows_within`]).
    thread_windows: TidMap<(Vec<Timed>, std::ops::Range<usize>)>,
    spilled_runs: usize,
    /// Wakeup queries by waker, not yet sorted.
    queries: Option<Box<Sorter>>,
    /// Options of the query and answer sorts.
    opts_small: StreamOptions,
}

impl SortedEvents {
    /// Sorted runs that were written to disk (0 when the trace fit the budget).
    pub fn spilled_runs(&self) -> usize {
        self.spilled_runs
    }
}

/// Reads a trace directory for a streaming analysis: the returned [`Trace`]
/// has every table (threads with their first/last times, methods, details,
/// losses, metadata) but no events and no syscall table; the events are in
/// [`SortedEvents`], to be walked once with [`analyze`].
pub fn open(dir: &Path, opts: &StreamOptions) -> anyhow::Result<(Trace, SortedEvents)> {
    let mut t = Trace::begin(dir)?;
    t.sorter = Some(Box::new(Sorter::new(opts)));
    let kpath = dir.join(fmt::KERNEL_FILE);
    if kpath.exists() {
        let (_, mut recs) = RecordReader::open(&kpath, fmt::KERNEL_MAGIC)?;
        t.sorter.as_mut().expect("set above").begin_stream();
        t.read_kernel(&kpath, &mut recs);
        if let Some(e) = recs.error {
            anyhow::bail!("cannot read {}: {e}", kpath.display());
        }
    }
    for p in Trace::jvm_files(dir)? {
        let (header, mut recs) = RecordReader::open(&p, fmt::JVM_MAGIC)?;
        t.sorter.as_mut().expect("set above").begin_stream();
        t.read_jvm(&p, &header, &mut recs);
        if let Some(e) = recs.error {
            anyhow::bail!("cannot read {}: {e}", p.display());
        }
    }
    let sorter = t.sorter.take().expect("set above");
    let (mut events, span) = sorter.finish()?;
    // JVM-wide windows: kept once per process, merged into each of its Java
    // threads during the walk, within the thread's own life (as Trace::open
    // copies them).
    for (pid, mut wins) in std::mem::take(&mut t.windows) {
        crate::read::gc_safepoints(&mut wins);
        for th in t.threads.values().filter(|th| th.java_name.is_some() && th.tgid == pid) {
            let Some(&(first, last)) = span.get(&th.tid) else {
                continue;
            };
            let (lead, range) = crate::read::windows_within(&wins, first, last);
            let starts = lead
                .iter()
                .flat_map(|&(cause, n)| std::iter::repeat_n(cause, n as usize))
                .map(|cause| Timed {
                    ts: first,
                    event: Event::Window { cause, begin: true },
                })
                .collect();
            events.thread_windows.insert(th.tid, (starts, range));
        }
        let wins = wins
            .into_iter()
            .map(|(ts, cause, begin)| Timed {
                ts,
                event: Event::Window { cause, begin },
            })
            .collect();
        events.windows.insert(pid, wins);
    }
    for (tid, (first, last)) in span {
        let th = t.thread(tid);
        th.first_ts = first;
        th.last_ts = last;
    }
    Ok((t, events))
}

/// Up to this many sources per thread, the merge scans its heads.
const LINEAR: usize = 8;

/// Events of a run decoded at a time.
const BLOCK: usize = 1024;

/// One source of a thread's merged events.
enum Source<'a> {
    /// Events in memory: the buffer's with the records of their syscall
    /// entries, or the JVM-wide windows (no records).
    Mem {
        evs: &'a [Timed],
        scs: &'a [(u32, SyscallInfo)],
        /// Where to look for the next record.
        sc_next: usize,
    },
    /// The thread's segment of a run.
    Run {
        reader: &'a mut RunReader,
        /// Events of the segment not decoded yet.
        left: u64,
        /// The decoded events.
        block: Vec<Timed>,
        /// The records of the block's syscall entries, by position.
        scs: Vec<(usize, SyscallInfo)>,
        /// The next of `scs` to hand out.
        sc_next: usize,
    },
}

impl Source<'_> {
    #[inline]
    fn events(&self) -> &[Timed] {
        match self {
            Source::Mem { evs, .. } => evs,
            Source::Run { block, .. } => block,
        }
    }

    /// Decodes the next block of a run once the current one is used up.
    fn refill(&mut self, pos: &mut usize) -> anyhow::Result<()> {
        if let Source::Run {
            reader,
            left,
            block,
            scs,
            sc_next,
        } = self
        {
            if *pos < block.len() || *left == 0 {
                return Ok(());
            }
            block.clear();
            scs.clear();
            *sc_next = 0;
            *pos = 0;
            reader.release_behind();
            let n = (*left).min(BLOCK as u64);
            let mut sc = None;
            for _ in 0..n {
                let (e, has) = reader.next(&mut sc)?;
                if let (true, Some(s)) = (has, sc.take()) {
                    scs.push((block.len(), s));
                }
                block.push(e);
            }
            *left -= n;
        }
        Ok(())
    }
}

/// One thread's events in time order: its segments of every run and of the
/// buffer merged by time (ties to the earlier run: stream order), with the
/// JVM-wide windows of its process merged in after the thread's own events
/// of the same time (where the stable sort of [`Trace::open`] puts them).
///
/// The merge hands out slices: the leading source's events up to the head
/// of the next one are taken in one go, with one comparison each.
struct ThreadEvents<'a> {
    /// The sources, in tie order: runs, the buffer, the windows.
    sources: Vec<Source<'a>>,
    /// Per source, its next event.
    pos: Vec<usize>,
    /// The heads of the sources other than `cur` by (time, source), when
    /// there are more than [`LINEAR`] (else the heads are scanned).
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The source being taken from, up to `end`; `None` before the first.
    cur: Option<usize>,
    end: usize,
}

impl<'a> ThreadEvents<'a> {
    fn new(
        tid: u32,
        readers: &'a mut [RunReader],
        buckets: &'a TidMap<MemEvents>,
        starts: &'a [Timed],
        windows: &'a [Timed],
    ) -> anyhow::Result<Self> {
        let mut sources = Vec::new();
        for r in readers.iter_mut() {
            if let Some(seg) = r.segments.get(&tid).copied() {
                r.start_segment(seg.offset)?;
                sources.push(Source::Run {
                    reader: r,
                    left: seg.count,
                    block: Vec::new(),
                    scs: Vec::new(),
                    sc_next: 0,
                });
            }
        }
        if let Some((evs, scs)) = buckets.get(&tid) {
            sources.push(Source::Mem { evs, scs, sc_next: 0 });
        }
        for evs in [starts, windows] {
            if !evs.is_empty() {
                sources.push(Source::Mem {
                    evs,
                    scs: &[],
                    sc_next: 0,
                });
            }
        }
        let mut pos = vec![0; sources.len()];
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            s.refill(&mut pos[i])?;
            if let (Some(e), true) = (s.events().first(), pos.len() > LINEAR) {
                heap.push(Reverse((e.ts, i)));
            }
        }
        Ok(ThreadEvents {
            sources,
            pos,
            heap,
            cur: None,
            end: 0,
        })
    }

    /// The head of source `i`: (time, source).
    #[inline]
    fn head(&self, i: usize) -> Option<(u64, usize)> {
        self.sources[i].events().get(self.pos[i]).map(|e| (e.ts, i))
    }

    /// Picks the next slice to hand out; false when every source is done.
    #[inline(never)]
    fn advance(&mut self) -> anyhow::Result<bool> {
        let linear = self.sources.len() <= LINEAR;
        let mut cur_head = None;
        if let Some(c) = self.cur {
            self.sources[c].refill(&mut self.pos[c])?;
            cur_head = self.head(c);
        }
        let (i, limit) = if linear {
            // The smallest and second smallest heads.
            let mut best: Option<(u64, usize)> = None;
            let mut second = None;
            for j in 0..self.sources.len() {
                if let Some(h) = self.head(j) {
                    if best.is_none_or(|b| h < b) {
                        second = best;
                        best = Some(h);
                    } else if second.is_none_or(|s| h < s) {
                        second = Some(h);
                    }
                }
            }
            match best {
                Some((_, i)) => (i, second),
                None => return Ok(false),
            }
        } else {
            // The heap holds the heads of the sources other than the
            // current one: the current one's new head replaces the top when
            // the top leads (one sift, not a push and a pop).
            let i = match cur_head {
                Some(h) => match self.heap.peek_mut() {
                    Some(mut top) if top.0 < h => {
                        let t = top.0 .1;
                        *top = Reverse(h);
                        t
                    }
                    _ => h.1,
                },
                None => match self.heap.pop() {
                    Some(Reverse((_, i))) => i,
                    None => return Ok(false),
                },
            };
            (i, self.heap.peek().map(|r| r.0))
        };
        // Take source i while it stays ahead of `limit`: ties go to the
        // lower source.
        let evs = self.sources[i].events();
        let mut end = self.pos[i] + 1;
        match limit {
            None => end = evs.len(),
            Some((lt, li)) if i < li => {
                while end < evs.len() && evs[end].ts <= lt {
                    end += 1;
                }
            }
            Some((lt, _)) => {
                while end < evs.len() && evs[end].ts < lt {
                    end += 1;
                }
            }
        }
        self.cur = Some(i);
        self.end = end;
        Ok(true)
    }

    /// Hands every remaining event of the thread, windows included, with
    /// the record of a syscall entry, to `f`: a slice at a time, nothing
    /// copied out (the walk's loop; [`ThreadEvents::next`] is the same one
    /// event at a time).
    #[inline]
    fn for_each(&mut self, mut f: impl FnMut(&Timed, Option<&SyscallInfo>)) -> anyhow::Result<()> {
        loop {
            if let Some(c) = self.cur {
                let (p, end) = (self.pos[c], self.end);
                match &mut self.sources[c] {
                    Source::Mem { evs, scs, sc_next } => {
                        for e in &evs[p..end] {
                            let sc = match e.event {
                                Event::Syscall { idx, enter: true } => record_of(scs, sc_next, idx),
                                _ => None,
                            };
                            f(e, sc);
                        }
                    }
                    Source::Run {
                        block, scs, sc_next, ..
                    } => {
                        for (q, e) in block[p..end].iter().enumerate() {
                            let sc = match scs.get(*sc_next) {
                                Some((at, s)) if *at == p + q => {
                                    *sc_next += 1;
                                    Some(s)
                                }
                                _ => None,
                            };
                            f(e, sc);
                        }
                    }
                }
                self.pos[c] = end;
            }
            if !self.advance()? {
                return Ok(());
            }
        }
    }

    /// The thread's next event, windows included, with the record of a
    /// syscall entry.
    #[inline]
    fn next(&mut self) -> anyhow::Result<Option<(Timed, Option<&SyscallInfo>)>> {
        loop {
            if let Some(c) = self.cur {
                let p = self.pos[c];
                if p < self.end {
                    self.pos[c] = p + 1;
                    return Ok(Some(match &mut self.sources[c] {
                        Source::Mem { evs, scs, sc_next } => {
                            let e = evs[p];
                            let sc = match e.event {
                                Event::Syscall { idx, enter: true } => record_of(scs, sc_next, idx),
                                _ => None,
                            };
                            (e, sc)
                        }
                        Source::Run {
                            block, scs, sc_next, ..
                        } => {
                            let e = block[p];
                            let sc = match scs.get(*sc_next) {
                                Some((at, s)) if *at == p => {
                                    *sc_next += 1;
                                    Some(s)
                                }
                                _ => None,
                            };
                            (e, sc)
                        }
                    }));
                }
            }
            if !self.advance()? {
                return Ok(None);
            }
        }
    }
}

impl SortedEvents {
    /// Rewinds for another walk.
    fn rewind(&mut self) -> anyhow::Result<()> {
        for r in &mut self.readers {
            r.seek(0)?;
        }
        Ok(())
    }

    /// One thread's events (threads must be taken in tid order for the runs
    /// to be read sequentially; any order works, only slower).
    fn thread(&mut self, info: &ThreadInfo) -> anyhow::Result<ThreadEvents<'_>> {
        let (starts, windows) = match (self.windows.get(&info.tgid), self.thread_windows.get(&info.tid)) {
            (Some(w), Some((starts, range))) if info.java_name.is_some() => (&starts[..], &w[range.clone()]),
            _ => (&[][..], &[][..]),
        };
        ThreadEvents::new(info.tid, &mut self.readers, &self.buckets, starts, windows)
    }
}

/// Walks every thread of a streamed trace, in tid order, and drives `v`
/// exactly as [`crate::analyze()`] does on the same trace opened whole.
pub fn analyze(trace: &Trace, mut events: SortedEvents, v: &mut dyn Visitor) -> anyhow::Result<()> {
    walk_all(trace, &mut events, v, None)
}

fn walk_all(
    trace: &Trace,
    events: &mut SortedEvents,
    v: &mut dyn Visitor,
    mut answers: Option<&mut SortedEvents>,
) -> anyhow::Result<()> {
    events.rewind()?;
    for info in trace.threads.values() {
        let mut evs = events.thread(info)?;
        match answers.as_deref_mut() {
            None => {
                let mut walk = ThreadWalk::new(info, v);
                evs.for_each(|e, sc| walk.event(e, sc, v))?;
                walk.finish(v);
            }
            Some(answers) => {
                let mut w = WithWakers {
                    inner: v,
                    answers: answers.thread(info)?,
                    group: Vec::new(),
                    group_ts: None,
                    held: None,
                    error: None,
                };
                let mut walk = ThreadWalk::new(info, &mut w);
                evs.for_each(|e, sc| walk.event(e, sc, &mut w))?;
                walk.finish(&mut w);
                if let Some(e) = w.error {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record is found wherever it is: at the cursor, a few places
    /// after or before it, far away; a missing one is None.
    #[test]
    fn record_lookup_around_the_cursor() {
        let scs: Vec<(u32, SyscallInfo)> = [1u32, 2, 5, 6, 9, 40, 41, 200]
            .iter()
            .map(|&i| {
                let rec = fmt::Syscall {
                    nr: i,
                    ..Default::default()
                };
                (i, SyscallInfo { tid: 1, enter: 0, rec })
            })
            .collect();
        let mut next = 0;
        for (idx, want_next) in [
            (1, 1),
            (5, 3),
            (2, 2),
            (6, 4),
            (200, 8),
            (9, 5),
            (41, 7),
            (40, 6),
            (6, 4),
        ] {
            assert_eq!(record_of(&scs, &mut next, idx).map(|s| s.rec.nr), Some(idx));
            assert_eq!(next, want_next, "after {idx}");
        }
        for missing in [0, 3, 100, 201] {
            assert!(record_of(&scs, &mut next, missing).is_none());
        }
        assert!(record_of(&[], &mut 0, 1).is_none());
    }

    /// A finished stream larger than a read is decoded from a mapping that
    /// releases what it has passed; an unfinished JVM stream (the agent may
    /// still truncate it) is read with read(). Both give every record, in
    /// order, with its file offset, and stop at the zero fill.
    #[test]
    fn mapped_and_read_streams_give_the_same_records() {
        use crate::read::RawRecords;
        let dir = std::env::temp_dir().join(format!("jtrace-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut enc = fmt::Encoder::new();
        // 32-byte records, past two release steps and several reads.
        let n = (3 * RELEASE_STEP + CHUNK) / 32 + 1000;
        for i in 0..n as u64 {
            enc.record(&fmt::Record {
                tid: 1 + (i % 3) as u32,
                ts: i,
                payload: fmt::Payload::MethodEntry(fmt::MethodEvent {
                    method: i,
                    flags: 0,
                    reserved: 0,
                }),
            });
        }
        let stream = |magic, flags| {
            let mut h = fmt::FileHeader::new(magic);
            h.flags = flags;
            let mut bytes = h.to_bytes().to_vec();
            bytes.extend_from_slice(&enc.buf);
            // What a grown-ahead JVM stream ends with.
            bytes.extend_from_slice(&[0; 4096]);
            bytes
        };
        let cases = [
            ("kernel.bin", fmt::KERNEL_MAGIC, 0, true),
            ("jvm-done.bin", fmt::JVM_MAGIC, fmt::STREAM_COMPLETE, true),
            ("jvm-live.bin", fmt::JVM_MAGIC, 0, false),
        ];
        for (name, magic, flags, mapped) in cases {
            let path = dir.join(name);
            std::fs::write(&path, stream(magic, flags)).unwrap();
            let (_, mut r) = RecordReader::open(&path, magic).unwrap();
            assert_eq!(r.map.is_some(), mapped, "{name}");
            let mut i = 0u64;
            while let Some(rec) = r.next_raw() {
                let rec = rec.unwrap();
                assert_eq!((rec.tid, rec.ts), (1 + (i % 3) as u32, i), "{name}");
                assert_eq!(rec.offset, fmt::FILE_HEADER_LEN + 32 * i as usize, "{name}");
                i += 1;
            }
            assert_eq!(i, n as u64, "{name}");
            assert!(r.error.is_none());
            if mapped {
                assert!(r.released >= RELEASE_STEP, "{name}: released {}", r.released);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every kind of event survives a run file, also where a record spans
    /// two reads of the run (the longest one, a syscall entry, included),
    /// read in chunks or mapped; the encoding is compact.
    #[test]
    fn events_round_trip_through_a_run_across_refills() {
        let rec = fmt::Syscall {
            exit_ts: 9,
            nr: 45,
            fd_kind: 1,
            ret: -11,
            fd: 7,
            flags: 3,
            arg: u64::MAX,
            family: 10,
            protocol: 6,
            sport: 1,
            dport: 65535,
            saddr: [1; 16],
            daddr: [2; 16],
            dev: 3,
            ino: u64::MAX - 1,
        };
        let sc = SyscallInfo { tid: 5, enter: 8, rec };
        let kinds = [
            Event::SwitchOut {
                preempted: true,
                prev_state: 1,
                cpu: 2,
                next_tid: 3,
            },
            Event::SwitchIn { cpu: 1, prev_tid: 9 },
            Event::Wakeup {
                waker_tid: 4,
                waker_tgid: u32::MAX,
                new_task: true,
            },
            Event::Enter(77),
            Event::Exit {
                method: 78,
                exception: true,
            },
            Event::ThreadStart,
            Event::ThreadEnd,
            Event::Syscall { idx: 12, enter: true },
            Event::Syscall { idx: 12, enter: false },
            Event::PageFault {
                address: 0x7fff_dead_beef,
            },
            Event::Block {
                cause: Cause::Park,
                begin: true,
                detail: 3,
            },
            Event::Window {
                cause: Cause::Safepoint,
                begin: false,
            },
        ];
        let mut out = Vec::new();
        let mut expect = Vec::new();
        let mut prev = 0;
        // Times from a large first one (its delta is to 0) by deltas of
        // 0 to about 2^34 ns (1 to 5 bytes).
        for i in 0..5_000u64 {
            let event = kinds[(i % kinds.len() as u64) as usize];
            let ts = 1 << 60 | (i / 3) * (i / 3) * 997;
            let e = Timed { ts, event };
            let s = matches!(event, Event::Syscall { enter: true, .. }).then_some(sc);
            encode(&mut out, &e, s.as_ref(), &mut prev);
            expect.push((e, s));
        }
        assert!(
            out.len() < 5_000 * 12 + 5_000 / kinds.len() * (SC_LEN + 1),
            "{} bytes",
            out.len()
        );
        let path = std::env::temp_dir().join(format!("jtrace-run-test-{}", std::process::id()));
        std::fs::write(&path, &out).unwrap();
        // Reads of every size around a record's: records span reads at
        // every offset; then the run mapped, released behind the reader
        // after every event (the most often it can be).
        for (chunk, mapped) in (1..=2 * MAX_ENCODED)
            .chain([4096, 1 << 20])
            .map(|c| (c, false))
            .chain([(1, true)])
        {
            let file = File::open(&path).unwrap();
            let mut r = RunReader {
                map: mapped.then(|| map_file(&file, 1).unwrap()),
                released: 0,
                file,
                segments: BTreeMap::new(),
                buf: Vec::new(),
                pos: 0,
                offset: 0,
                chunk,
                prev_ts: 0,
            };
            for (i, want) in expect.iter().enumerate() {
                let mut sc = None;
                let (e, has) = r.next(&mut sc).unwrap();
                assert_eq!(&(e, has.then_some(sc).flatten()), want, "chunk {chunk}, event {i}");
                r.release_behind();
            }
            assert_eq!(r.offset + r.pos as u64, out.len() as u64);
            // Read again from the start: released bytes come back.
            if mapped {
                assert!(r.released > 0);
                r.start_segment(0).unwrap();
                let mut sc = None;
                let (e, has) = r.next(&mut sc).unwrap();
                assert_eq!(&(e, has.then_some(sc).flatten()), &expect[0]);
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

// ---------------------------------------------------------------- wakers

/// A wakeup as its waker's stream carries it (a query: "which method was
/// I in at `ts`?") and as the answer travels back to the wakee: the same
/// event kind, with `waker_tid` naming the other thread.
fn cross(other: u32, method: Option<MethodIdx>) -> Event {
    Event::Wakeup {
        waker_tid: other,
        waker_tgid: method.unwrap_or(u32::MAX),
        new_task: false,
    }
}

/// Tracks a thread's stack from the walk's callbacks to answer "which traced
/// method was the thread in at `t`" exactly as [`crate::CallIndex::method_at`]
/// does: among the invocations containing `t` (entry ≤ t ≤ exit), the one
/// entered last, ties to the one that ended last.
#[derive(Default)]
struct StackAt {
    /// Open frames: (entry, method).
    stack: Vec<(u64, MethodIdx)>,
    /// Of the invocations that ended at the latest end time: that time, and
    /// the best (entry, method).
    closed: Option<(u64, u64, MethodIdx)>,
}

impl Visitor for StackAt {
    fn enter(&mut self, _: &ThreadInfo, ts: u64, _: usize, m: MethodIdx) {
        self.stack.push((ts, m));
    }
    fn exit(&mut self, _: &ThreadInfo, _: usize, inv: &Invocation) {
        self.stack.pop();
        match self.closed {
            Some((at, entry, _)) if at == inv.exit && inv.entry < entry => {}
            _ => self.closed = Some((inv.exit, inv.entry, inv.method)),
        }
    }
}

impl StackAt {
    /// The answer for `t`, once every event at or before `t` was walked and
    /// none after it.
    fn at(&self, t: u64) -> Option<MethodIdx> {
        let closed = self.closed.filter(|c| c.0 == t);
        // Open frames all contain t; the top one was entered last, and of
        // frames entered at that same time the lowest ends last.
        let open = self.stack.last().map(|&(top, _)| {
            let low = self.stack.iter().rev().take_while(|f| f.0 == top).last().unwrap();
            (low.0, low.1)
        });
        match (open, closed) {
            (Some((e, m)), Some((_, ce, cm))) => Some(if e >= ce { m } else { cm }),
            (Some((_, m)), None) => Some(m),
            (None, Some((_, _, cm))) => Some(cm),
            (None, None) => None,
        }
    }
}

/// Passes a walk on, adding each wakeup's waker method from the answers.
struct WithWakers<'a, 'b> {
    inner: &'b mut dyn Visitor,
    answers: ThreadEvents<'a>,
    /// Answers at `group_ts`: (waker, method).
    group: Vec<(u32, Option<MethodIdx>)>,
    group_ts: Option<u64>,
    held: Option<Timed>,
    error: Option<anyhow::Error>,
}

impl WithWakers<'_, '_> {
    fn lookup(&mut self, ts: u64, waker: u32) -> anyhow::Result<Option<MethodIdx>> {
        if self.group_ts != Some(ts) {
            self.group.clear();
            self.group_ts = Some(ts);
            loop {
                let e = match self.held.take() {
                    Some(e) => e,
                    None => match self.answers.next()? {
                        Some((e, _)) => e,
                        None => break,
                    },
                };
                if e.ts < ts {
                    continue;
                }
                if e.ts > ts {
                    self.held = Some(e);
                    break;
                }
                if let Event::Wakeup {
                    waker_tid, waker_tgid, ..
                } = e.event
                {
                    self.group
                        .push((waker_tid, (waker_tgid != u32::MAX).then_some(waker_tgid)));
                }
            }
        }
        Ok(self.group.iter().find(|a| a.0 == waker).and_then(|a| a.1))
    }
}

impl Visitor for WithWakers<'_, '_> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.inner.thread_begin(t)
    }
    fn enter(&mut self, t: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.inner.enter(t, ts, depth, m)
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.inner.exit(t, depth, inv)
    }
    fn syscall(&mut self, t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        self.inner.syscall(t, idx, sc);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.inner.off_cpu(t, depth, iv)
    }
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        self.inner.wakeup(t, depth, w);
        match self.lookup(w.ts, w.waker_tid) {
            Ok(m) => self.inner.waker_method(t, depth, w, m),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        self.inner.thread_end(t, totals)
    }
}

/// [`analyze`], plus [`Visitor::waker_method`] after every wakeup: the
/// traced method the waker was in at that moment (what [`crate::CallIndex`] says
/// on the whole trace), without holding other threads' stacks in memory.
///
/// How: the reading pass sent each wakeup, as a query, into a second sorted
/// stream keyed by the waker; a first walk over every thread answers its
/// queries from its own stack as it goes and sends the answers, keyed by the
/// wakee, into a third; the second walk hands them out. Memory stays bounded
/// by the budget; the price is a second walk.
pub fn analyze_with_wakers(trace: &Trace, mut events: SortedEvents, v: &mut dyn Visitor) -> anyhow::Result<()> {
    let Some(queries) = events.queries.take() else {
        anyhow::bail!("these events were read without waker queries");
    };
    let mut queries = queries.finish()?.0;
    let mut answers = Sorter::new(&events.opts_small);
    events.rewind()?;
    queries.rewind()?;
    for info in trace.threads.values() {
        let mut qs = queries.thread(info)?;
        let mut evs = events.thread(info)?;
        let mut st = StackAt::default();
        let mut walk = ThreadWalk::new(info, &mut st);
        // Queries carry no syscall record: keep just the event.
        let mut q = qs.next()?.map(|(qe, _)| qe);
        let mut error = None;
        evs.for_each(|e, sc| {
            while let Some(qe) = q.filter(|qe| qe.ts < e.ts && error.is_none()) {
                answer(&mut answers, &st, info.tid, &qe);
                match qs.next() {
                    Ok(n) => q = n.map(|(qe, _)| qe),
                    Err(err) => error = Some(err),
                }
            }
            walk.event(e, sc, &mut st);
        })?;
        if let Some(e) = error {
            return Err(e);
        }
        walk.finish(&mut st);
        while let Some(qe) = q {
            answer(&mut answers, &st, info.tid, &qe);
            q = qs.next()?.map(|(qe, _)| qe);
        }
    }
    let mut answers = answers.finish()?.0;
    answers.rewind()?;
    walk_all(trace, &mut events, v, Some(&mut answers))
}

fn answer(answers: &mut Sorter, st: &StackAt, waker: u32, q: &Timed) {
    if let Event::Wakeup { waker_tid: wakee, .. } = q.event {
        // Only known methods travel back; no answer means none.
        if let Some(m) = st.at(q.ts) {
            answers.push(wakee, q.ts, cross(waker, Some(m)));
        }
    }
}

//! Streaming analysis: the per-thread merge of a trace of any length in
//! memory bounded by a budget, not by the number of events.
//!
//! One pass reads the streams record by record (in chunks, never a whole
//! file) and turns them into compact per-thread events that carry what they
//! need inline (a syscall entry carries its record). Events are buffered per
//! thread; when the buffer reaches the memory budget, each thread's events
//! are sorted by time and written as one segment of a *run* file in a
//! temporary directory (tids ascending). The analysis then walks the threads
//! in tid order and merges each thread's segments of all runs (plus the
//! buffer still in memory) by time, with ties in stream order, which is
//! exactly the order [`Trace::open`] gives: the walk sees the same events in
//! the same order, so every figure is identical. A trace that fits the
//! budget is never written out.
//!
//! Memory: the budget, plus per thread its stack, plus the tables bounded by
//! the number of distinct threads, methods and strings, plus the GC /
//! safepoint windows (a few per second of recording), plus one read buffer
//! per run.
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

use crate::analyze::{ThreadWalk, Visitor};
use crate::cause::Cause;
use crate::read::{Event, SyscallInfo, Timed, Trace};
use jtrace_format::{self as fmt, DecodeError, Decoder, FileHeader, Record};
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
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            memory_budget: DEFAULT_BUDGET,
            temp_dir: None,
        }
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

/// Size of a read from a stream file.
const CHUNK: usize = 4 << 20;

/// The records of a stream file, read in chunks.
pub(crate) struct RecordReader {
    path: PathBuf,
    file: File,
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
        let header = FileHeader::parse(&head[..n])
            .ok_or_else(|| anyhow::anyhow!("{} is too short to be a jtrace stream", path.display()))?;
        if header.magic != magic {
            anyhow::bail!("{} is not a jtrace stream of the expected kind", path.display());
        }
        if header.version > fmt::FORMAT_VERSION {
            anyhow::bail!(
                "{} has format version {}, this jtrace reads up to {}",
                path.display(),
                header.version,
                fmt::FORMAT_VERSION
            );
        }
        let r = RecordReader {
            path: path.to_path_buf(),
            file,
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

impl Iterator for RecordReader {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        while !self.eof && !self.decidable() {
            self.fill();
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let len = if rest.len() >= 4 {
            u16::from_le_bytes([rest[2], rest[3]]) as usize
        } else {
            0
        };
        let r = Decoder::new(rest, self.base + self.pos).next();
        match &r {
            Some(Ok(_)) => self.pos += len,
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
const SC_ITEM: usize = std::mem::size_of::<SyscallInfo>();

/// One thread's segment of a run file.
#[derive(Debug, Clone, Copy)]
struct Segment {
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
    /// Bytes held by `buckets` and `syscalls` (capacities).
    bytes: usize,
    buckets: TidMap<Vec<Timed>>,
    /// Records of the syscall entries in the buffer; index = idx - `sc_base`.
    syscalls: Vec<SyscallInfo>,
    sc_base: u32,
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
}

impl Sorter {
    pub(crate) fn new(opts: &StreamOptions) -> Sorter {
        Sorter {
            opts: opts.clone(),
            bytes: 0,
            buckets: TidMap::default(),
            syscalls: Vec::new(),
            sc_base: 0,
            next_syscall: 0,
            runs: Vec::new(),
            temp: None,
            span: TidMap::default(),
            error: None,
            events: 0,
        }
    }

    /// A syscall record; returns the index its events use.
    pub(crate) fn add_syscall(&mut self, sc: SyscallInfo) -> u32 {
        let cap = self.syscalls.capacity();
        self.syscalls.push(sc);
        self.bytes += (self.syscalls.capacity() - cap) * SC_ITEM;
        self.next_syscall += 1;
        self.next_syscall - 1
    }

    pub(crate) fn push(&mut self, tid: u32, ts: u64, event: Event) {
        self.events += 1;
        let b = self.buckets.entry(tid).or_default();
        let cap = b.capacity();
        b.push(Timed { ts, event });
        self.bytes += (b.capacity() - cap) * ITEM;
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
                "the trace does not fit the memory budget ({} MiB) and the temporary directory {} for sorted runs \
                 does not exist (set TMPDIR or --temp-dir, or raise --memory-budget)",
                self.opts.memory_budget >> 20,
                dir.display()
            );
        }
        self.temp = Some(dir.clone());
        Ok(dir)
    }

    /// Sorts the buffer thread by thread and writes it as a run.
    fn spill(&mut self) -> anyhow::Result<()> {
        let dir = self.temp_dir()?;
        let path = dir.join(format!("jtrace-run-{}-{}.tmp", std::process::id(), self.runs.len()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot create a sorted run in {} (the trace does not fit the memory budget of {} MiB): {e} \
                     (set TMPDIR or --temp-dir, or raise --memory-budget)",
                    dir.display(),
                    self.opts.memory_budget >> 20
                )
            })?;
        // Unlinked at once: the run lives as long as the open file, and
        // nothing is left behind whatever happens to the process.
        let _ = std::fs::remove_file(&path);
        let mut tids: Vec<u32> = self.buckets.keys().copied().collect();
        tids.sort_unstable();
        let mut segments = BTreeMap::new();
        let mut out = Vec::with_capacity(1 << 20);
        let werr = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot write a sorted run in {}: {e} (free space there, set TMPDIR or --temp-dir, \
                 or raise --memory-budget)",
                dir.display()
            )
        };
        for tid in tids {
            let mut evs = self.buckets.remove(&tid).unwrap_or_default();
            sort_bucket(&mut self.span, tid, &mut evs);
            for e in &evs {
                let sc = match e.event {
                    Event::Syscall { idx, enter: true } => self.syscalls.get((idx - self.sc_base) as usize),
                    _ => None,
                };
                encode(&mut out, e, sc);
                if out.len() >= 1 << 20 {
                    file.write_all(&out).map_err(werr)?;
                    out.clear();
                }
            }
            segments.insert(
                tid,
                Segment {
                    count: evs.len() as u64,
                },
            );
        }
        file.write_all(&out).map_err(werr)?;
        file.seek(SeekFrom::Start(0)).map_err(werr)?;
        self.buckets = TidMap::default();
        self.syscalls = Vec::new();
        self.sc_base = self.next_syscall;
        self.bytes = 0;
        self.runs.push(Run { file, segments });
        Ok(())
    }

    /// Ends the reading pass: what the analysis walks.
    /// Returns the events and each thread's first and last event time.
    pub(crate) fn finish(mut self) -> anyhow::Result<(SortedEvents, TidMap<(u64, u64)>)> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for (tid, evs) in self.buckets.iter_mut() {
            sort_bucket(&mut self.span, *tid, evs);
        }
        let spilled_runs = self.runs.len();
        let events = SortedEvents {
            readers: self
                .runs
                .into_iter()
                .map(|r| RunReader {
                    file: r.file,
                    segments: r.segments,
                    buf: Vec::new(),
                    pos: 0,
                })
                .collect(),
            buckets: self.buckets,
            syscalls: self.syscalls,
            sc_base: self.sc_base,
            windows: HashMap::new(),
            spilled_runs,
        };
        Ok((events, self.span))
    }
}

/// Sorts one thread's buffered events by time and extends its span.
fn sort_bucket(span: &mut TidMap<(u64, u64)>, tid: u32, evs: &mut [Timed]) {
    // Stable: events of equal time keep their stream order.
    evs.sort_by_key(|e| e.ts);
    if let (Some(first), Some(last)) = (evs.first(), evs.last()) {
        let s = span.entry(tid).or_insert((first.ts, last.ts));
        s.0 = s.0.min(first.ts);
        s.1 = s.1.max(last.ts);
    }
}

fn cause_from(b: u8) -> Cause {
    Cause::ALL.get(b as usize).copied().unwrap_or(Cause::Unknown)
}

/// Appends one event (and the syscall record of an entry) to a run.
fn encode(out: &mut Vec<u8>, e: &Timed, sc: Option<&SyscallInfo>) {
    out.extend_from_slice(&e.ts.to_le_bytes());
    let u32s = |out: &mut Vec<u8>, v: &[u32]| {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    };
    match e.event {
        Event::SwitchOut {
            preempted,
            prev_state,
            cpu,
            next_tid,
        } => {
            out.extend_from_slice(&[0, preempted as u8]);
            u32s(out, &[prev_state, cpu, next_tid]);
        }
        Event::SwitchIn { cpu, prev_tid } => {
            out.push(1);
            u32s(out, &[cpu, prev_tid]);
        }
        Event::Wakeup {
            waker_tid,
            waker_tgid,
            new_task,
        } => {
            out.push(2);
            u32s(out, &[waker_tid, waker_tgid]);
            out.push(new_task as u8);
        }
        Event::Enter(m) => {
            out.push(3);
            u32s(out, &[m]);
        }
        Event::Exit { method, exception } => {
            out.push(4);
            u32s(out, &[method]);
            out.push(exception as u8);
        }
        Event::ThreadStart => out.push(5),
        Event::ThreadEnd => out.push(6),
        Event::Syscall { idx, enter } => match (enter, sc) {
            (true, Some(sc)) => {
                out.push(8);
                u32s(out, &[idx, sc.tid]);
                let r = &sc.rec;
                out.extend_from_slice(&sc.enter.to_le_bytes());
                out.extend_from_slice(&r.exit_ts.to_le_bytes());
                u32s(out, &[r.nr, r.fd_kind]);
                out.extend_from_slice(&r.ret.to_le_bytes());
                out.extend_from_slice(&r.fd.to_le_bytes());
                u32s(out, &[r.flags]);
                out.extend_from_slice(&r.arg.to_le_bytes());
                for v in [r.family, r.protocol, r.sport, r.dport] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&r.saddr);
                out.extend_from_slice(&r.daddr);
                out.extend_from_slice(&r.dev.to_le_bytes());
                out.extend_from_slice(&r.ino.to_le_bytes());
            }
            _ => {
                out.push(if enter { 9 } else { 7 });
                u32s(out, &[idx]);
            }
        },
        Event::PageFault { address } => {
            out.push(10);
            out.extend_from_slice(&address.to_le_bytes());
        }
        Event::Block { cause, begin, detail } => {
            out.extend_from_slice(&[11, cause as u8, begin as u8]);
            u32s(out, &[detail]);
        }
        Event::Window { cause, begin } => out.extend_from_slice(&[12, cause as u8, begin as u8]),
    }
}

/// Longest encoded event (a syscall entry with its record).
const MAX_ENCODED: usize = 8 + 1 + 8 + 16 + 8 + 4 + 4 + 8 + 8 + 32 + 16;

/// Sequential reader of one run file.
#[derive(Debug)]
struct RunReader {
    file: File,
    segments: BTreeMap<u32, Segment>,
    buf: Vec<u8>,
    pos: usize,
}

impl RunReader {
    fn ensure(&mut self, n: usize) -> anyhow::Result<()> {
        if self.buf.len() - self.pos >= n {
            return Ok(());
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let old = self.buf.len();
        self.buf.resize(old + (1 << 20), 0);
        let got = read_full(&mut self.file, &mut self.buf[old..])
            .map_err(|e| anyhow::anyhow!("cannot read back a sorted run: {e}"))?;
        self.buf.truncate(old + got);
        Ok(())
    }

    /// Decodes the next event of the current segment.
    fn next(&mut self) -> anyhow::Result<(Timed, Option<SyscallInfo>)> {
        self.ensure(MAX_ENCODED)?;
        let b = &self.buf[self.pos..];
        let bad = || anyhow::anyhow!("a sorted run is corrupt (was the temporary file changed?)");
        let mut c = Cur { b, at: 0 };
        let ts = c.u64().ok_or_else(bad)?;
        let tag = c.u8().ok_or_else(bad)?;
        let mut sc = None;
        let event = (|| {
            Some(match tag {
                0 => Event::SwitchOut {
                    preempted: c.u8()? != 0,
                    prev_state: c.u32()?,
                    cpu: c.u32()?,
                    next_tid: c.u32()?,
                },
                1 => Event::SwitchIn {
                    cpu: c.u32()?,
                    prev_tid: c.u32()?,
                },
                2 => Event::Wakeup {
                    waker_tid: c.u32()?,
                    waker_tgid: c.u32()?,
                    new_task: c.u8()? != 0,
                },
                3 => Event::Enter(c.u32()?),
                4 => Event::Exit {
                    method: c.u32()?,
                    exception: c.u8()? != 0,
                },
                5 => Event::ThreadStart,
                6 => Event::ThreadEnd,
                7 | 9 => Event::Syscall {
                    idx: c.u32()?,
                    enter: tag == 9,
                },
                8 => {
                    let idx = c.u32()?;
                    let tid = c.u32()?;
                    let enter = c.u64()?;
                    let rec = fmt::Syscall {
                        exit_ts: c.u64()?,
                        nr: c.u32()?,
                        fd_kind: c.u32()?,
                        ret: c.u64()? as i64,
                        fd: c.u32()? as i32,
                        flags: c.u32()?,
                        arg: c.u64()?,
                        family: c.u16()?,
                        protocol: c.u16()?,
                        sport: c.u16()?,
                        dport: c.u16()?,
                        saddr: c.arr()?,
                        daddr: c.arr()?,
                        dev: c.u64()?,
                        ino: c.u64()?,
                    };
                    sc = Some(SyscallInfo { tid, enter, rec });
                    Event::Syscall { idx, enter: true }
                }
                10 => Event::PageFault { address: c.u64()? },
                11 => Event::Block {
                    cause: cause_from(c.u8()?),
                    begin: c.u8()? != 0,
                    detail: c.u32()?,
                },
                12 => Event::Window {
                    cause: cause_from(c.u8()?),
                    begin: c.u8()? != 0,
                },
                _ => return None,
            })
        })()
        .ok_or_else(bad)?;
        self.pos += c.at;
        Ok((Timed { ts, event }, sc))
    }
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cur<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let v: [u8; N] = self.b.get(self.at..self.at + N)?.try_into().ok()?;
        self.at += N;
        Some(v)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|v| v[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn arr(&mut self) -> Option<[u8; 16]> {
        self.take()
    }
}

/// The events of a streamed trace, sorted per thread, ready for one walk
/// ([`analyze`]).
#[derive(Debug)]
pub struct SortedEvents {
    readers: Vec<RunReader>,
    /// The last run, never written out.
    buckets: TidMap<Vec<Timed>>,
    syscalls: Vec<SyscallInfo>,
    sc_base: u32,
    /// GC / safepoint windows (time-ordered) per Java thread's process.
    windows: HashMap<u32, Vec<(u64, Cause, bool)>>,
    spilled_runs: usize,
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
        t.read_kernel(&kpath, &mut recs);
        if let Some(e) = recs.error {
            anyhow::bail!("cannot read {}: {e}", kpath.display());
        }
    }
    for p in Trace::jvm_files(dir)? {
        let (header, mut recs) = RecordReader::open(&p, fmt::JVM_MAGIC)?;
        t.read_jvm(&p, &header, &mut recs);
        if let Some(e) = recs.error {
            anyhow::bail!("cannot read {}: {e}", p.display());
        }
    }
    let sorter = t.sorter.take().expect("set above");
    let (mut events, mut span) = sorter.finish()?;
    // JVM-wide windows: kept once per process, merged into each of its Java
    // threads during the walk (as Trace::open copies them).
    for (pid, mut wins) in std::mem::take(&mut t.windows) {
        wins.sort_by_key(|w| w.0);
        if let (Some(first), Some(last)) = (wins.first().map(|w| w.0), wins.last().map(|w| w.0)) {
            for th in t.threads.values().filter(|th| th.java_name.is_some() && th.tgid == pid) {
                let s = span.entry(th.tid).or_insert((first, last));
                s.0 = s.0.min(first);
                s.1 = s.1.max(last);
            }
        }
        events.windows.insert(pid, wins);
    }
    for (tid, (first, last)) in span {
        let th = t.thread(tid);
        th.first_ts = first;
        th.last_ts = last;
    }
    Ok((t, events))
}

/// One source of a thread's merged events.
enum Source<'a> {
    Run(&'a mut RunReader, u64),
    Mem(std::slice::Iter<'a, Timed>),
}

/// Walks every thread of a streamed trace, in tid order, and drives `v`
/// exactly as [`crate::analyze`] does on the same trace opened whole.
pub fn analyze(trace: &Trace, mut events: SortedEvents, v: &mut dyn Visitor) -> anyhow::Result<()> {
    let SortedEvents {
        readers,
        buckets,
        syscalls,
        sc_base,
        windows,
        ..
    } = &mut events;
    let no_windows = Vec::new();
    for (tid, info) in &trace.threads {
        let wins = windows
            .get(&info.tgid)
            .filter(|_| info.java_name.is_some())
            .unwrap_or(&no_windows);
        let mut sources: Vec<Source> = Vec::new();
        for r in readers.iter_mut() {
            if let Some(seg) = r.segments.get(tid).copied() {
                sources.push(Source::Run(r, seg.count));
            }
        }
        if let Some(b) = buckets.get(tid) {
            sources.push(Source::Mem(b.iter()));
        }
        let mem_sc = |e: &Timed| match e.event {
            Event::Syscall { idx, enter: true } => idx
                .checked_sub(*sc_base)
                .and_then(|i| syscalls.get(i as usize))
                .copied(),
            _ => None,
        };
        let next = |s: &mut Source| -> anyhow::Result<Option<(Timed, Option<SyscallInfo>)>> {
            match s {
                Source::Run(_, 0) => Ok(None),
                Source::Run(r, n) => {
                    *n -= 1;
                    r.next().map(Some)
                }
                Source::Mem(it) => Ok(it.next().map(|e| (*e, mem_sc(e)))),
            }
        };
        let mut walk = ThreadWalk::new(info, v);
        let mut wi = 0;
        // Windows go after the thread's own events of the same time (the
        // stable sort of Trace::open puts them after).
        let mut emit = |walk: &mut ThreadWalk, e: &Timed, sc: Option<&SyscallInfo>, v: &mut dyn Visitor| {
            while wi < wins.len() && wins[wi].0 < e.ts {
                let (ts, cause, begin) = wins[wi];
                walk.event(
                    &Timed {
                        ts,
                        event: Event::Window { cause, begin },
                    },
                    None,
                    v,
                );
                wi += 1;
            }
            walk.event(e, sc, v);
        };
        if let [Source::Mem(it)] = &mut sources[..] {
            // The trace fit the budget: a plain walk over the sorted buffer.
            for e in it {
                let sc = match e.event {
                    Event::Syscall { enter: true, .. } => mem_sc(e),
                    _ => None,
                };
                emit(&mut walk, e, sc.as_ref(), v);
            }
        } else if sources.len() == 1 {
            while let Some((e, sc)) = next(&mut sources[0])? {
                emit(&mut walk, &e, sc.as_ref(), v);
            }
        } else {
            let mut heads: Vec<Option<(Timed, Option<SyscallInfo>)>> = Vec::with_capacity(sources.len());
            let mut heap = BinaryHeap::new();
            for (i, s) in sources.iter_mut().enumerate() {
                let h = next(s)?;
                if let Some((e, _)) = &h {
                    heap.push(Reverse((e.ts, i)));
                }
                heads.push(h);
            }
            // Ties go to the earlier source: runs are in stream order.
            while let Some(Reverse((_, i))) = heap.pop() {
                let (e, sc) = heads[i].take().expect("head of a queued source");
                emit(&mut walk, &e, sc.as_ref(), v);
                // A thread's runs mostly cover disjoint times: keep taking
                // from this source while it stays ahead of every other one.
                let limit = heap.peek().map(|r| r.0);
                loop {
                    match next(&mut sources[i])? {
                        Some((e, sc)) if limit.is_none_or(|l| (e.ts, i) < l) => emit(&mut walk, &e, sc.as_ref(), v),
                        Some(h) => {
                            heap.push(Reverse((h.0.ts, i)));
                            heads[i] = Some(h);
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        drop(emit);
        for &(ts, cause, begin) in &wins[wi..] {
            walk.event(
                &Timed {
                    ts,
                    event: Event::Window { cause, begin },
                },
                None,
                v,
            );
        }
        walk.finish(v);
    }
    Ok(())
}

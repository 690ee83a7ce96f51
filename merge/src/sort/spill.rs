//! The external sort of a streamed read: [`Sorter`] buffers each thread's
//! events as the streams are read and, when the buffers reach the memory
//! budget, writes them sorted per thread as a run file ([`crate::sort::run`]).
//! What it leaves ([`Sorted`]) is merged per thread by [`crate::sort::kway`].

use crate::file_io::unlinked_temp_file;
use crate::model::event::{Event, MethodIdx, SyscallInfo, Timed};
use crate::model::tid_map::TidMap;
use crate::options::{human, StreamOptions};
use crate::sort::run::{encode, Run, RunReader, Segment};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

/// Bytes one buffered event costs.
const ITEM: usize = std::mem::size_of::<Timed>();
/// Bytes one buffered syscall record costs.
const SC_ITEM: usize = std::mem::size_of::<(u32, SyscallInfo)>();

/// The record of syscall `idx` among a thread's records (ascending by
/// index), looked for at `*next` first, then close to it: a thread's syscall
/// entries come in index order but for records written after the fact,
/// which are a few places off.
#[inline]
pub(crate) fn record_of<'r>(scs: &'r [(u32, SyscallInfo)], next: &mut usize, idx: u32) -> Option<&'r SyscallInfo> {
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
    /// Index the next syscall record gets (as in [`Trace::syscalls`](crate::Trace::syscalls)).
    next_syscall: u32,
    runs: Vec<Run>,
    temp: Option<PathBuf>,
    /// First and last event time per thread (of the runs written so far).
    span: TidMap<(u64, u64)>,
    /// The first error writing a run (the reading continues, then fails).
    error: Option<anyhow::Error>,
    /// Wakeups as queries to their wakers ([`analyze_with_wakers`](crate::stream::analyze_with_wakers)).
    queries: Option<Box<Sorter>>,
}

impl Sorter {
    /// An empty sort that spills within `opts`.
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

    /// Buffers an event of thread `tid`; writes a run when the buffers reach
    /// the budget.
    pub(crate) fn push(&mut self, tid: u32, ts: u64, event: Event) {
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

    /// Ends the reading pass: the runs and the last buffer, sorted per
    /// thread, for the walks to merge.
    pub(crate) fn finish(mut self) -> anyhow::Result<Sorted> {
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
        // The runs' read buffers share an eighth of the budget (at least
        // 64 KiB each), so many runs do not add up to more memory. Runs
        // are mapped only while each gets the most (few runs): many
        // mapped runs started at once fault in more than their share.
        let chunk = (self.opts.memory_budget / 8 / self.runs.len().max(1)).clamp(64 << 10, 1 << 20);
        Ok(Sorted {
            runs: self
                .runs
                .into_iter()
                .map(|r| RunReader::new(r, chunk, chunk >= 1 << 20))
                .collect(),
            buckets,
            span: self.span,
            queries: self.queries,
            opts_small: small(&self.opts),
        })
    }
}

/// What a reading pass leaves for the walks: the runs written to disk and
/// the last buffer, never written out.
#[derive(Debug)]
pub(crate) struct Sorted {
    /// The runs, in the order they were written (ties between runs go to
    /// the earlier one: stream order).
    pub(crate) runs: Vec<RunReader>,
    /// Per thread, its sorted events still in memory and the records of
    /// its syscall entries.
    pub(crate) buckets: TidMap<MemEvents>,
    /// First and last event time per thread.
    pub(crate) span: TidMap<(u64, u64)>,
    /// Wakeups as queries to their wakers, not yet sorted
    /// ([`StreamOptions::waker_methods`]).
    pub(crate) queries: Option<Box<Sorter>>,
    /// Options of the query and answer sorts.
    pub(crate) opts_small: StreamOptions,
}

/// A thread's sorted events left in memory at the end of the reading, and
/// the records of its syscall entries (index, record) ascending by index.
pub(crate) type MemEvents = (Vec<Timed>, Vec<(u32, SyscallInfo)>);

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
pub(crate) fn small(opts: &StreamOptions) -> StreamOptions {
    StreamOptions {
        memory_budget: (opts.memory_budget / 4).max(64 << 10),
        temp_dir: opts.temp_dir.clone(),
        waker_methods: false,
        calls_within: None,
    }
}

/// A wakeup as its waker's stream carries it (a query: "which method was
/// I in at `ts`?") and as the answer travels back to the wakee: the same
/// event kind, with `waker_tid` naming the other thread.
pub(crate) fn cross(other: u32, method: Option<MethodIdx>) -> Event {
    Event::Wakeup {
        waker_tid: other,
        waker_tgid: method.unwrap_or(u32::MAX),
        new_task: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format as fmt;

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
}

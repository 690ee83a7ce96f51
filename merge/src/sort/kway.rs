//! The k-way merge of a streamed trace: [`SortedEvents`] holds what the
//! external sort left (runs on disk, the last buffer in memory) and the
//! JVM-wide windows; [`ThreadEvents`] merges one thread's sources by time,
//! in the order [`Trace::open`](crate::Trace::open) gives, and hands the
//! walk slices of them.

use crate::cause::Cause;
use crate::model::event::{Event, SyscallInfo, ThreadInfo, Timed};
use crate::model::tid_map::TidMap;
use crate::model::windows::windows_within;
use crate::options::StreamOptions;
use crate::sort::run::RunReader;
use crate::sort::spill::{record_of, MemEvents, Sorted, Sorter};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The events of a streamed trace, sorted per thread, ready for one walk
/// ([`stream::analyze`](crate::stream::analyze)).
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
    /// inside its life ([`windows_within`]).
    thread_windows: TidMap<(Vec<Timed>, std::ops::Range<usize>)>,
    spilled_runs: usize,
    /// Wakeup queries by waker, not yet sorted.
    pub(crate) queries: Option<Box<Sorter>>,
    /// Options of the query and answer sorts.
    pub(crate) opts_small: StreamOptions,
}

impl SortedEvents {
    /// Sorted runs that were written to disk (0 when the trace fit the budget).
    pub fn spilled_runs(&self) -> usize {
        self.spilled_runs
    }

    /// The walkable events of a finished sort, and each thread's first and
    /// last event time.
    pub(crate) fn new(sorted: Sorted) -> (SortedEvents, TidMap<(u64, u64)>) {
        let events = SortedEvents {
            spilled_runs: sorted.runs.len(),
            readers: sorted.runs,
            buckets: sorted.buckets,
            windows: HashMap::new(),
            thread_windows: TidMap::default(),
            queries: sorted.queries,
            opts_small: sorted.opts_small,
        };
        (events, sorted.span)
    }

    /// A JVM's GC / safepoint windows (GC stops already told apart, time
    /// ordered): kept once per process, merged into each of its Java
    /// `threads` during the walk, within the thread's own life (its first
    /// and last event time in `span`), as [`Trace::open`](crate::Trace::open)
    /// copies them.
    pub(crate) fn add_windows<'t>(
        &mut self,
        pid: u32,
        wins: Vec<(u64, Cause, bool)>,
        threads: impl Iterator<Item = &'t ThreadInfo>,
        span: &TidMap<(u64, u64)>,
    ) {
        for th in threads {
            let Some(&(first, last)) = span.get(&th.tid) else {
                continue;
            };
            let (lead, range) = windows_within(&wins, first, last);
            let starts = lead
                .iter()
                .flat_map(|&(cause, n)| std::iter::repeat_n(cause, n as usize))
                .map(|cause| Timed {
                    ts: first,
                    event: Event::Window { cause, begin: true },
                })
                .collect();
            self.thread_windows.insert(th.tid, (starts, range));
        }
        let wins = wins
            .into_iter()
            .map(|(ts, cause, begin)| Timed {
                ts,
                event: Event::Window { cause, begin },
            })
            .collect();
        self.windows.insert(pid, wins);
    }
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
/// of the same time (where the stable sort of
/// [`Trace::open`](crate::Trace::open) puts them).
///
/// The merge hands out slices: the leading source's events up to the head
/// of the next one are taken in one go, with one comparison each.
pub(crate) struct ThreadEvents<'a> {
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
            if let Some(seg) = r.segment(tid) {
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
    pub(crate) fn for_each(&mut self, mut f: impl FnMut(&Timed, Option<&SyscallInfo>)) -> anyhow::Result<()> {
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
    pub(crate) fn next(&mut self) -> anyhow::Result<Option<(Timed, Option<&SyscallInfo>)>> {
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
    pub(crate) fn rewind(&mut self) -> anyhow::Result<()> {
        for r in &mut self.readers {
            r.seek(0)?;
        }
        Ok(())
    }

    /// One thread's events (threads must be taken in tid order for the runs
    /// to be read sequentially; any order works, only slower).
    pub(crate) fn thread(&mut self, info: &ThreadInfo) -> anyhow::Result<ThreadEvents<'_>> {
        let (starts, windows) = match (self.windows.get(&info.tgid), self.thread_windows.get(&info.tid)) {
            (Some(w), Some((starts, range))) if info.java_name.is_some() => (&starts[..], &w[range.clone()]),
            _ => (&[][..], &[][..]),
        };
        ThreadEvents::new(info.tid, &mut self.readers, &self.buckets, starts, windows)
    }
}

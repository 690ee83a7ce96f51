//! Watching one thread's probe events as they are drained: which calls it
//! made of each method, how long they took, whether they blocked, and the
//! `--min-duration` filter that leaves short leaf calls out of the stream.
//! The decisions across threads are [`crate::demotion`]'s.
//!
//! *Blocked inside* means one of two things seen while the call was open:
//! a JVM-level block began on the thread (contended monitor, wait, park,
//! sleep: [`ThreadWatch::block_begins`]; a class-loading wait does not
//! count, [`ThreadWatch::class_loading_begins`]), or the thread switched out
//! voluntarily in the kernel (socket, file, futex, page fault). The agent
//! learns the second from the thread's voluntary context-switch count
//! (getrusage(RUSAGE_THREAD), read at each drain, ≈ 0.3 µs): if it grew by
//! k more than the JVM-level blocks it had since the last drain, the k
//! longest gaps between the thread's events (at most [`MAX_MARKED_GAPS`];
//! the last drain's own time left out) are taken to hold the switches, and
//! every call open across one of them counts as switched. A preemption (an
//! involuntary switch) does not count, but may be mistaken for a voluntary
//! switch of the same window, so [`crate::demotion`] trusts these guesses
//! only in numbers.

use jtrace_format::{batch_event_method, BatchedKind, BATCH_DELTA_MASK, BATCH_ID_SHIFT, BATCH_KIND_SHIFT};

use crate::probe::batch::Block;
use crate::probe::layout::VTHREAD_KIND;
use crate::sys::jlong;

/// A call shorter than this (wall, ns) is short: see [`crate::demotion`].
pub(crate) const SHORT_NS: u64 = 20_000;

/// Kind (the bits from `BATCH_KIND_SHIFT`) of an entry event. An exit's is
/// [`EXIT`] or exit by exception; a virtual thread's mount, unmount or
/// unpark in a carrier's buffer ([`crate::vthreads::markers`]) is
/// [`VTHREAD_KIND`], not a method event.
const ENTRY: u64 = BatchedKind::Entry as u64;
/// Kind of a normal exit event.
const EXIT: u64 = BatchedKind::Exit as u64;
/// At most this many gaps of one drained block are marked as holding a
/// voluntary switch.
pub(crate) const MAX_MARKED_GAPS: usize = 4;

/// One open call of the thread.
struct Frame {
    id: u32,
    entry: u64,
    /// A JVM-level block began inside.
    jvm_block: bool,
    /// A voluntary switch is taken to have happened inside.
    switched: bool,
}

/// What one thread saw of one method since its last report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Calls that ended.
    pub calls: u64,
    /// Σ their wall, ns.
    pub ns: u64,
    /// Those shorter than [`SHORT_NS`].
    pub short: u64,
    /// Calls left out of the stream by `--min-duration`.
    pub dropped: u64,
    /// Σ their wall, ns.
    pub dropped_ns: u64,
    /// Some call of it had a JVM-level block inside.
    pub jvm_block: bool,
    /// Calls taken to have switched out voluntarily inside (a guess: see
    /// the module doc).
    pub switched: u64,
}

/// Leaf calls of one method in a row (each an entry and its exit next).
#[derive(Default)]
struct LeafRun {
    calls: u64,
    /// Σ their wall, ns.
    ns: u64,
    /// Those shorter than [`SHORT_NS`].
    short: u64,
    /// Σ the deltas of their events: the time from before the first
    /// entry to the last exit.
    span: u64,
}

/// The run of leaf calls that `events` begins with, of the method of its
/// first entry. The hot loop of a drain: a pair is two compares of the
/// events' high halves (kind and id).
fn leaf_run(events: &[jlong]) -> LeafRun {
    let Some(&first) = events.first() else {
        return LeafRun::default();
    };
    let entry = first as u64 >> BATCH_ID_SHIFT;
    let exit = entry | EXIT << (BATCH_KIND_SHIFT - BATCH_ID_SHIFT);
    // Plain locals, not the struct's fields: they stay in registers.
    let (mut calls, mut ns, mut short, mut deltas) = (0u64, 0u64, 0u64, 0u64);
    for pair in events.chunks_exact(2) {
        let (e, x) = (pair[0] as u64, pair[1] as u64);
        if e >> BATCH_ID_SHIFT != entry || x >> BATCH_ID_SHIFT != exit {
            break;
        }
        let wall = x & BATCH_DELTA_MASK;
        calls += 1;
        ns += wall;
        short += (wall < SHORT_NS) as u64;
        deltas += e & BATCH_DELTA_MASK;
    }
    LeafRun {
        calls,
        ns,
        short,
        span: deltas + ns,
    }
}

/// One thread's watch over its own probe events (kept in its
/// [`crate::state::ThreadState`]).
#[derive(Default)]
pub(crate) struct ThreadWatch {
    frames: Vec<Frame>,
    /// By method id; only the ids in `touched` are non-zero.
    tallies: Vec<Tally>,
    touched: Vec<u32>,
    /// Some touched tally has dropped or blocked calls ([`ThreadWatch::has_news`]).
    news: bool,
    /// Events and time span (first base, last event) since the last report.
    events: u64,
    since: u64,
    until: u64,
    /// The thread's CPU time at the last [`ThreadWatch::take`] (the budget
    /// is a share of its CPU time, not of the wall time its events span,
    /// which a loaded machine or blocks stretch).
    cpu_at_take: Option<u64>,
    /// Voluntary switches of the thread at the end of the last drain, and
    /// when that drain ended.
    nvcsw: Option<u64>,
    drained_at: u64,
    /// JVM-level blocks begun since the last drain that watched events:
    /// their voluntary switches are known, not to be guessed.
    jvm_blocks: u64,
    /// The current drain watched events.
    observed: bool,
    /// The filtered events of the last block, when some were left out.
    scratch: Vec<jlong>,
}

/// The calling thread's CPU time so far, ns.
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The calling thread's voluntary context switches so far.
pub(crate) fn voluntary_switches() -> Option<u64> {
    // SAFETY: getrusage fills the struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_THREAD, &mut ru) == 0).then_some(ru.ru_nvcsw as u64)
    }
}

impl ThreadWatch {
    /// A JVM-level block begins on the thread: every open call is blocked inside.
    pub(crate) fn block_begins(&mut self) {
        self.jvm_blocks += 1;
        for f in &mut self.frames {
            f.jvm_block = true;
        }
    }

    /// A JVM-level block that is class loading begins on the thread: its
    /// voluntary switches are known (not to be guessed at), but the open
    /// calls are not blocked inside for it (a call site loads a class in
    /// its first executions only).
    pub(crate) fn class_loading_begins(&mut self) {
        self.jvm_blocks += 1;
    }

    /// Whether the thread has a traced call open (as far as drained).
    pub(crate) fn in_call(&self) -> bool {
        !self.frames.is_empty()
    }

    /// A voluntary switch is taken to have happened here: every open call switched.
    fn switched(&mut self) {
        for f in &mut self.frames {
            f.switched = true;
        }
    }

    /// Marks the end of a drain at `now`: voluntary switches and time from
    /// here on belong to the thread's next events (not to the drain's own
    /// writing).
    pub(crate) fn drained(&mut self, now: u64) {
        let switches = voluntary_switches();
        if !std::mem::take(&mut self.observed) {
            // No events since the last drain: the switches of the JVM
            // blocks in between are accounted for here.
            let absorbed = match (self.nvcsw, switches) {
                (Some(before), Some(after)) => after.saturating_sub(before),
                _ => 0,
            };
            self.jvm_blocks = self.jvm_blocks.saturating_sub(absorbed);
        }
        self.nvcsw = switches;
        self.drained_at = now;
    }

    /// Events and time span watched since the last [`ThreadWatch::take`].
    pub(crate) fn window(&self) -> (u64, u64) {
        (self.events, self.until.saturating_sub(self.since))
    }

    /// The calling thread's CPU time since the last [`ThreadWatch::take`]
    /// (`None` before the first, or if the clock cannot be read).
    pub(crate) fn cpu_since_take(&self) -> Option<u64> {
        Some(thread_cpu_ns()?.saturating_sub(self.cpu_at_take?))
    }

    /// When the events since the last [`ThreadWatch::take`] began counting.
    pub(crate) fn since(&self) -> u64 {
        self.since
    }

    /// The tallies since the last call, by method id, and forgets them.
    pub(crate) fn take(&mut self) -> Vec<(u32, Tally)> {
        let out = self
            .touched
            .drain(..)
            .map(|id| (id, std::mem::take(&mut self.tallies[id as usize])))
            .collect();
        self.events = 0;
        self.news = false;
        self.cpu_at_take = thread_cpu_ns();
        out
    }

    /// Whether any method dropped or blocked calls since the last take
    /// (those must reach the shared table even without a decision).
    pub(crate) fn has_news(&self) -> bool {
        self.news
    }

    /// The events to write for the last [`ThreadWatch::observe`]d block when
    /// it returned true.
    pub(crate) fn filtered(&self) -> &[jlong] {
        &self.scratch
    }

    #[inline]
    fn tally(&mut self, id: u32) -> &mut Tally {
        let i = id as usize;
        if i >= self.tallies.len() {
            self.tallies.resize(i + 1, Tally::default());
        }
        // Every caller counts a call: a tally without one is untouched.
        if self.tallies[i].calls == 0 {
            self.touched.push(id);
        }
        &mut self.tallies[i]
    }

    fn close(&mut self, frame: Frame, ts: u64) {
        let t = self.tally(frame.id);
        let wall = ts.saturating_sub(frame.entry);
        t.calls += 1;
        t.ns += wall;
        t.short += (wall < SHORT_NS) as u64;
        t.jvm_block |= frame.jvm_block;
        t.switched += frame.switched as u64;
        self.news |= frame.jvm_block || frame.switched;
    }

    /// Watches a block of the thread's own probe events. With a
    /// `min_duration` (ns, 0: none), leaves out each call shorter than it
    /// that has no traced child (its entry and exit are adjacent), ended
    /// normally and did not block (no JVM block can fall between adjacent
    /// events: any JVM record drains the buffer first; no marked gap between
    /// them); then returns true and [`ThreadWatch::filtered`] holds the
    /// events to write.
    pub(crate) fn observe(&mut self, block: Block, min_duration: u64) -> bool {
        self.observed = true;
        let events = block.events;
        let marked = self.marked_gaps(events, self.drained_at.saturating_sub(block.base));
        if self.events == 0 {
            self.since = block.base;
        }
        self.events += events.len() as u64;
        if marked.is_empty() && min_duration == 0 {
            // The common block: nothing to filter, no switch to place.
            self.until = self.observe_plain(events, block.base);
            return false;
        }
        self.observe_marked(events, block.base, &marked, min_duration)
    }

    /// [`ThreadWatch::observe`] of a block with gaps marked as holding
    /// switches, or filtered by `min_duration`.
    fn observe_marked(&mut self, events: &[jlong], base: u64, marked: &[usize], min_duration: u64) -> bool {
        let mut ts = base;
        // Filtering: time of left-out events carried into the next kept one.
        let mut carry = 0u64;
        let mut filtering = false;
        let mut dropped: Vec<(u32, u64)> = Vec::new();
        let mut i = 0;
        while i < events.len() {
            let e = events[i] as u64;
            let delta = e & BATCH_DELTA_MASK;
            let id = batch_event_method(e) as u32;
            let kind = e >> BATCH_KIND_SHIFT;
            if marked.contains(&i) {
                self.switched();
            }
            if kind == ENTRY && min_duration > 0 {
                if let Some(&next) = events.get(i + 1) {
                    let next = next as u64;
                    let (nd, nid, nkind) = (
                        next & BATCH_DELTA_MASK,
                        batch_event_method(next) as u32,
                        next >> BATCH_KIND_SHIFT,
                    );
                    if nkind == EXIT
                        && nid == id
                        && nd < min_duration
                        && !marked.contains(&(i + 1))
                        && carry + delta + nd < 1 << 31
                    {
                        if !filtering {
                            filtering = true;
                            self.scratch.clear();
                            self.scratch.extend_from_slice(&events[..i]);
                        }
                        carry += delta + nd;
                        ts += delta + nd;
                        dropped.push((id, nd));
                        i += 2;
                        continue;
                    }
                }
            }
            ts += delta;
            if filtering {
                let d = delta + carry;
                if d > BATCH_DELTA_MASK {
                    // Cannot be written as one delta: write the block as it
                    // is (the calls left out so far count as written).
                    filtering = false;
                    for (id, nd) in dropped.drain(..) {
                        let t = self.tally(id);
                        t.calls += 1;
                        t.ns += nd;
                        t.short += (nd < SHORT_NS) as u64;
                    }
                    ts = self.replay_rest(events, i, ts);
                    break;
                }
                self.scratch.push(((e & !BATCH_DELTA_MASK) | d) as jlong);
                carry = 0;
            }
            if kind == ENTRY {
                // A leaf call (its exit next, no switch between), the common
                // case: tallied at once, as push, exit and close would.
                let next = events.get(i + 1).map(|&n| n as u64);
                if let Some(next) = next.filter(|&n| {
                    !filtering
                        && n >> BATCH_KIND_SHIFT == EXIT
                        && batch_event_method(n) as u32 == id
                        && !marked.contains(&(i + 1))
                }) {
                    let wall = next & BATCH_DELTA_MASK;
                    ts += wall;
                    let t = self.tally(id);
                    t.calls += 1;
                    t.ns += wall;
                    t.short += (wall < SHORT_NS) as u64;
                    i += 2;
                    continue;
                }
            }
            self.method_event(kind, id, ts);
            i += 1;
        }
        for (id, nd) in dropped.iter().copied() {
            let t = self.tally(id);
            t.calls += 1;
            t.ns += nd;
            t.short += (nd < SHORT_NS) as u64;
            t.dropped += 1;
            t.dropped_ns += nd;
        }
        self.news |= !dropped.is_empty();
        self.until = ts;
        filtering
    }

    /// [`ThreadWatch::observe`] of a block with no gap marked and no
    /// filter; returns the time of its last event. Leaf calls (an entry
    /// and its exit next), the bulk of a hot loop, are summed per run of
    /// one method (two compares a call) before they reach its tally: the
    /// drain counts in the probes' per-call cost (BENCHMARKS.md, "Per
    /// call").
    fn observe_plain(&mut self, events: &[jlong], base: u64) -> u64 {
        let mut ts = base;
        let mut i = 0;
        while i < events.len() {
            let e = events[i] as u64;
            let id = batch_event_method(e) as u32;
            let kind = e >> BATCH_KIND_SHIFT;
            if kind == ENTRY {
                let run = leaf_run(&events[i..]);
                if run.calls > 0 {
                    ts += run.span;
                    i += 2 * run.calls as usize;
                    let t = self.tally(id);
                    t.calls += run.calls;
                    t.ns += run.ns;
                    t.short += run.short;
                    continue;
                }
            }
            ts += e & BATCH_DELTA_MASK;
            self.method_event(kind, id, ts);
            i += 1;
        }
        ts
    }

    /// Watches events `from..` without filtering (after a filtering attempt
    /// had to be given up); returns the time of the last.
    fn replay_rest(&mut self, events: &[jlong], from: usize, mut ts: u64) -> u64 {
        for (k, &e) in events[from..].iter().enumerate() {
            let e = e as u64;
            if k > 0 {
                ts += e & BATCH_DELTA_MASK;
            }
            self.method_event(e >> BATCH_KIND_SHIFT, batch_event_method(e) as u32, ts);
        }
        ts
    }

    /// A method event not tallied as a leaf call: an entry opens a frame,
    /// an exit closes one; a virtual thread's mark is neither.
    fn method_event(&mut self, kind: u64, id: u32, ts: u64) {
        if kind == ENTRY {
            self.frames.push(Frame {
                id,
                entry: ts,
                jvm_block: false,
                switched: false,
            });
        } else if kind != VTHREAD_KIND {
            self.exit(id, ts);
        }
    }

    /// An exit of `id`: closes its frame, and the frames above it (exited
    /// by exception, as [`crate::probe::batch`] writes them); an exit of a call
    /// not open is ignored.
    fn exit(&mut self, id: u32, ts: u64) {
        if !self.frames.iter().any(|f| f.id == id) {
            return;
        }
        while let Some(f) = self.frames.pop() {
            let done = f.id == id;
            self.close(f, ts);
            if done {
                break;
            }
        }
    }

    /// Indices of the events whose gap to the previous one (the first's:
    /// to the block's base) most likely holds the thread's voluntary
    /// switches since the last drain: as many of the longest as there were
    /// switches, at most [`MAX_MARKED_GAPS`].
    /// The first gap's first `drain` ns were the last drain's own. The
    /// switches of the JVM-level blocks since then are not guessed at.
    fn marked_gaps(&mut self, events: &[jlong], drain: u64) -> Vec<usize> {
        let switches = match (self.nvcsw, voluntary_switches()) {
            (Some(before), Some(now)) => now.saturating_sub(before).saturating_sub(self.jvm_blocks) as usize,
            _ => 0,
        };
        self.jvm_blocks = 0;
        longest_gaps(events, switches.min(MAX_MARKED_GAPS), drain)
    }
}

/// Indices of the `k` events with the longest deltas, longest first (the
/// first event's delta less `skip`).
fn longest_gaps(events: &[jlong], k: usize, skip: u64) -> Vec<usize> {
    let mut top: Vec<(u64, usize)> = Vec::with_capacity(k + 1);
    if k == 0 {
        return Vec::new();
    }
    for (i, &e) in events.iter().enumerate() {
        let mut d = e as u64 & BATCH_DELTA_MASK;
        if i == 0 {
            d = d.saturating_sub(skip);
        }
        if top.len() < k || d > top[top.len() - 1].0 {
            let at = top.iter().position(|&(g, _)| d > g).unwrap_or(top.len());
            top.insert(at, (d, i));
            top.truncate(k);
        }
    }
    top.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;

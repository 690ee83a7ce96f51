//! The walk's method stack: the open frames, how many frames of each method
//! are open (an invocation entered with none open is outermost), and the
//! off-CPU totals the frames entered with.

use crate::cause::{Breakdown, OffCpu};
use crate::model::event::MethodIdx;
use crate::model::tid_map::TidMap;
use crate::visitor::Invocation;

struct Frame {
    method: MethodIdx,
    entry: u64,
    /// The thread's totals at entry, but for `off`: see [`OffSnapshots`].
    at_entry: Breakdown0,
    /// Index in [`OffSnapshots`] of the off-CPU totals at entry.
    off: u32,
    outermost: bool,
}

/// A [`Breakdown`] without its off-CPU part.
#[derive(Clone, Copy)]
struct Breakdown0 {
    wall: u64,
    cpu: u64,
    not_covered: u64,
    voluntary: u64,
    involuntary: u64,
}

impl Breakdown0 {
    /// `b` but its off-CPU totals, which frames share (see [`OffSnapshots`]).
    #[inline]
    fn of(b: &Breakdown) -> Self {
        Breakdown0 {
            wall: b.wall,
            cpu: b.cpu,
            not_covered: b.not_covered,
            voluntary: b.voluntary,
            involuntary: b.involuntary,
        }
    }

    /// The whole breakdown again, given its off-CPU totals.
    #[inline]
    fn with_off(self, off: OffCpu) -> Breakdown {
        Breakdown {
            wall: self.wall,
            cpu: self.cpu,
            off,
            not_covered: self.not_covered,
            voluntary: self.voluntary,
            involuntary: self.involuntary,
        }
    }
}

/// The off-CPU totals (104 bytes) as frames entered them: they change only
/// while the thread is off CPU, so the frames entered between two off-CPU
/// stretches share one snapshot instead of each copying it. Frames refer to
/// snapshots in stack order, so the snapshots form a stack too.
#[derive(Default)]
struct OffSnapshots {
    /// (version of the off-CPU totals, the totals).
    snaps: Vec<(u64, OffCpu)>,
    /// Bumped whenever the running off-CPU totals change.
    version: u64,
}

impl OffSnapshots {
    /// The index of a snapshot of `off` (the running totals) as they are now.
    #[inline]
    fn take(&mut self, off: &OffCpu) -> u32 {
        match self.snaps.last() {
            Some(&(v, _)) if v == self.version => {}
            _ => self.snaps.push((self.version, *off)),
        }
        (self.snaps.len() - 1) as u32
    }
}

/// How a frame ends.
#[derive(Clone, Copy)]
pub(super) enum End {
    /// At its recorded exit (by an exception or not).
    Exit { exception: bool },
    /// Its exit was not recorded (lost, or past the JVM stream's coverage).
    Unfinished,
}

/// The open frames of one thread, innermost last.
#[derive(Default)]
pub(super) struct Frames {
    stack: Vec<Frame>,
    /// Open frames per method.
    open_count: TidMap<u32>,
    offs: OffSnapshots,
}

impl Frames {
    /// Number of open frames.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.stack.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// The running off-CPU totals changed: a frame entered from now on
    /// needs a snapshot of its own.
    #[inline]
    pub(super) fn off_changed(&mut self) {
        self.offs.version += 1;
    }

    /// Opens a frame of `method` at `ts`, the thread's totals being `acc`.
    #[inline]
    pub(super) fn push(&mut self, method: MethodIdx, ts: u64, acc: &Breakdown) {
        let n = self.open_count.entry(method).or_insert(0);
        let outermost = *n == 0;
        *n += 1;
        self.stack.push(Frame {
            method,
            entry: ts,
            at_entry: Breakdown0::of(acc),
            off: self.offs.take(&acc.off),
            outermost,
        });
    }

    /// The position of the innermost open frame of `method`.
    #[inline]
    pub(super) fn find(&self, method: MethodIdx) -> Option<usize> {
        self.stack.iter().rposition(|f| f.method == method)
    }

    /// Closes the innermost frame at `ts`, the thread's totals being `acc`:
    /// its invocation, to report at depth [`Frames::len`] (as it is after).
    /// `None` when no frame is open.
    pub(super) fn close(&mut self, ts: u64, acc: &Breakdown, end: End) -> Option<Invocation> {
        let f = self.stack.pop()?;
        if let Some(n) = self.open_count.get_mut(&f.method) {
            *n -= 1;
        }
        let off = self.offs.snaps[f.off as usize].1;
        // Snapshots no open frame refers to any more go.
        let keep = self.stack.last().map_or(0, |g| g.off as usize + 1);
        self.offs.snaps.truncate(keep);
        let (exception, unfinished) = match end {
            End::Exit { exception } => (exception, false),
            End::Unfinished => (false, true),
        };
        let inv = Invocation {
            method: f.method,
            entry: f.entry,
            exit: ts,
            breakdown: *acc - f.at_entry.with_off(off),
            exception,
            unfinished,
            outermost: f.outermost,
        };
        debug_assert_eq!(inv.breakdown.wall, ts - f.entry);
        Some(inv)
    }
}

//! The time a JVM stream's records may carry: the recording's, from
//! meta.json. A JVM stream is the traced program's writing (its agent runs
//! in the JVM, as the JVM's user), so a time in it is a claim, and one
//! outside the recording cannot be true: a damaged or forged stream. Such a
//! record is never given time (docs/FORMAT.md, "Times outside the
//! recording"): an event is left out, the time of a loss or a demotion is
//! moved to the recording's edge, and every one is counted ([`Outside`]).
//! The end of a JVM-level block or a GC/safepoint window left out closes
//! it where it began ([`Open`]): left open, it would give its cause to
//! all the time after it.
//!
//! The bounds are jtrace's own: meta.json's start (CLOCK_MONOTONIC read
//! before the traced JVM runs or the agent is attached) and its end (read
//! when the recording stopped, after the agent finished or the command
//! ended), which jtrace writes as root through a new file renamed into
//! place. A recording cut off before it could write its end is bounded by
//! when it was snapshotted (`snapshot_ns`), else by the time it is read
//! (its start's realtime carried forward to now): a JVM outliving a
//! killed jtrace writes on, honestly, but never in the future.

use crate::cause::Cause;
use crate::meta::Meta;
use crate::model::tid_map::TidMap;
use jtrace_format::kind;

/// The recording's span, `from ..= to` (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// The recording's start.
    pub(crate) from: u64,
    /// Its end, or the latest time a record of it can have.
    pub(crate) to: u64,
}

impl Default for Span {
    /// Every time (no bounds known).
    fn default() -> Self {
        Span { from: 0, to: u64::MAX }
    }
}

impl Span {
    /// The span of the recording `meta` describes, read at realtime
    /// `now_realtime_ns` (see the module docs).
    pub(crate) fn of(meta: &Meta, now_realtime_ns: u64) -> Span {
        let from = meta.start_monotonic_ns;
        let to = if meta.end_monotonic_ns > 0 {
            meta.end_monotonic_ns
        } else if let Some(s) = meta.snapshot_ns {
            s
        } else {
            // CLOCK_MONOTONIC does not advance in a suspend, CLOCK_REALTIME
            // does: the realtime elapsed since the start bounds it.
            from.saturating_add(now_realtime_ns.saturating_sub(meta.start_realtime_ns))
        };
        Span { from, to: to.max(from) }
    }

    /// [`Span::of`] read now.
    pub(crate) fn now(meta: &Meta) -> Span {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Span::of(meta, now)
    }

    /// Whether `ts` lies in the recording.
    #[inline(always)]
    pub(crate) fn contains(self, ts: u64) -> bool {
        self.from <= ts && ts <= self.to
    }

    /// `ts` moved into the recording (its nearest edge).
    #[inline]
    pub(crate) fn clamp(self, ts: u64) -> u64 {
        ts.clamp(self.from, self.to)
    }
}

/// What a JVM record's time is to the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeUse {
    /// It places an event or a state in time (a method entry or exit, a
    /// block, a window, a thread's end, a mount, JIT code's life): outside
    /// the recording it is left out.
    Placed,
    /// It dates a count that must not be lost (JVM_LOST: where the thread's
    /// coverage ends; METHOD_DEMOTED: from when calls are not recorded):
    /// outside the recording its time is moved to the nearest edge.
    Clamped,
    /// Its time is not used (definitions, the stream's start and end, an
    /// error, a tally, a kind this reader does not know).
    Unused,
}

/// How the reader uses the time of a JVM record of kind `k` (a
/// METHOD_BATCH's events are each [`TimeUse::Placed`]).
pub(crate) fn time_use(k: u16) -> TimeUse {
    match k {
        kind::THREAD_END
        | kind::METHOD_ENTRY
        | kind::METHOD_EXIT
        | kind::METHOD_BATCH
        | kind::MONITOR_CONTENDED_ENTER..=kind::COMPILED_METHOD_UNLOAD
        | kind::TRACER_WAIT_BEGIN
        | kind::TRACER_WAIT_END
        | kind::COMPILED_INLINE
        | kind::METHOD_ADDRS
        | kind::VTHREAD_START..=kind::VTHREAD_UNPARK => TimeUse::Placed,
        kind::JVM_LOST | kind::METHOD_DEMOTED => TimeUse::Clamped,
        _ => TimeUse::Unused,
    }
}

/// The records of one JVM stream whose time lies outside the recording and
/// would be used ([`TimeUse::Placed`] or [`TimeUse::Clamped`]; a time
/// not used is not counted: nothing is made of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outside {
    /// Records (a batch's events each) before the recording's start.
    pub(crate) before: u64,
    /// Records after its end.
    pub(crate) after: u64,
    /// Of those after: method events of a batch that began inside the
    /// recording, carried past its end by the batch's time deltas.
    pub(crate) jumped: u64,
    /// Of all: events left out ([`TimeUse::Placed`]).
    pub(crate) left_out: u64,
    /// The earliest time before the start.
    pub(crate) earliest: Option<u64>,
    /// The latest time after the end.
    pub(crate) latest: Option<u64>,
}

impl Outside {
    /// Counts a record at `ts`, outside `span`, whose time is used as `use_`
    /// (placed or clamped).
    #[cold]
    pub(crate) fn note(&mut self, span: Span, ts: u64, use_: TimeUse) {
        if ts < span.from {
            self.before += 1;
            self.earliest = Some(self.earliest.map_or(ts, |e| e.min(ts)));
        } else {
            self.after += 1;
            self.latest = Some(self.latest.map_or(ts, |l| l.max(ts)));
        }
        if use_ == TimeUse::Placed {
            self.left_out += 1;
        }
    }

    /// Counts a batch's method event at `ts`, outside `span`, of a batch
    /// whose header time is `header`: left out, and, when the batch began
    /// inside, carried out by its deltas.
    #[cold]
    pub(crate) fn note_batched(&mut self, span: Span, header: u64, ts: u64) {
        self.note(span, ts, TimeUse::Placed);
        if ts > span.to && span.contains(header) {
            self.jumped += 1;
        }
    }

    /// The records counted.
    pub(crate) fn total(&self) -> u64 {
        self.before + self.after
    }
}

/// The JVM-level blocks (per thread) and the GC/safepoint windows one JVM
/// stream opened and has not closed yet, with when they began: where an
/// end left out closes its block or window (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Open {
    /// Per thread: (cause, begin time), innermost last.
    blocks: TidMap<Vec<(Cause, u64)>>,
    /// (cause, begin time), latest last.
    windows: Vec<(Cause, u64)>,
}

impl Open {
    /// A block of `cause` of thread `tid` begins (`begin`) or ends at `ts`:
    /// an end closes the innermost block of its cause and those opened
    /// inside it, as the walk does.
    #[inline]
    pub(crate) fn block(&mut self, tid: u32, cause: Cause, begin: bool, ts: u64) {
        if begin {
            self.blocks.entry(tid).or_default().push((cause, ts));
        } else {
            self.close_block(tid, cause);
        }
    }

    /// Closes thread `tid`'s innermost block of `cause` (and those inside
    /// it): when it began, if one was open.
    pub(crate) fn close_block(&mut self, tid: u32, cause: Cause) -> Option<u64> {
        let open = self.blocks.get_mut(&tid)?;
        let p = open.iter().rposition(|&(c, _)| c == cause)?;
        let began = open[p].1;
        open.truncate(p);
        Some(began)
    }

    /// A window of `cause` begins (`begin`) or ends at `ts`.
    pub(crate) fn window(&mut self, cause: Cause, begin: bool, ts: u64) {
        if begin {
            self.windows.push((cause, ts));
        } else {
            self.close_window(cause);
        }
    }

    /// Closes the latest window of `cause`: when it began, if one was open.
    pub(crate) fn close_window(&mut self, cause: Cause) -> Option<u64> {
        let p = self.windows.iter().rposition(|&(c, _)| c == cause)?;
        Some(self.windows.remove(p).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(start: u64, end: u64) -> Meta {
        Meta {
            start_realtime_ns: 1_000_000_000_000,
            start_monotonic_ns: start,
            end_monotonic_ns: end,
            ..Default::default()
        }
    }

    /// A finished recording: meta.json's start and end, both included.
    #[test]
    fn a_finished_recording_spans_its_start_to_its_end() {
        let s = Span::of(&meta(1_000, 5_000), u64::MAX);
        assert_eq!(s, Span { from: 1_000, to: 5_000 });
        assert!(s.contains(1_000) && s.contains(5_000));
        assert!(!s.contains(999) && !s.contains(5_001) && !s.contains(u64::MAX));
        assert_eq!((s.clamp(0), s.clamp(3_000), s.clamp(u64::MAX)), (1_000, 3_000, 5_000));
    }

    /// A recording cut off has no end: a snapshot's time bounds it, else
    /// the realtime elapsed from its start to now; never before its start.
    #[test]
    fn a_cut_off_recording_ends_at_its_snapshot_or_now() {
        let mut m = meta(1_000, 0);
        let now = m.start_realtime_ns + 7_000;
        assert_eq!(Span::of(&m, now), Span { from: 1_000, to: 8_000 });
        // A clock set back since: nothing after the start, nothing lost below it.
        assert_eq!(Span::of(&m, m.start_realtime_ns - 5), Span { from: 1_000, to: 1_000 });
        m.snapshot_ns = Some(4_000);
        assert_eq!(Span::of(&m, now), Span { from: 1_000, to: 4_000 });
        // No saturation problem at the clock's ends.
        let far = Meta {
            start_monotonic_ns: u64::MAX - 10,
            ..Default::default()
        };
        assert_eq!(Span::of(&far, u64::MAX).to, u64::MAX);
        // A reader built without metadata bounds nothing.
        assert!(Span::default().contains(0) && Span::default().contains(u64::MAX));
    }

    /// Events are left out, dated counts moved, the rest's time unused.
    #[test]
    fn each_jvm_kind_has_its_use_of_time() {
        for k in [
            kind::METHOD_ENTRY,
            kind::METHOD_EXIT,
            kind::METHOD_BATCH,
            kind::PARK_END,
            kind::GC_START,
            kind::SAFEPOINT_END,
            kind::TRACER_WAIT_END,
            kind::THREAD_END,
            kind::COMPILED_METHOD_UNLOAD,
            kind::VTHREAD_UNMOUNT,
            kind::METHOD_ADDRS,
        ] {
            assert_eq!(time_use(k), TimeUse::Placed, "kind {k}");
        }
        assert_eq!(time_use(kind::JVM_LOST), TimeUse::Clamped);
        assert_eq!(time_use(kind::METHOD_DEMOTED), TimeUse::Clamped);
        for k in [
            kind::JVM_START,
            kind::METHOD_DEF,
            kind::JVM_END,
            kind::AGENT_ERROR,
            kind::ALLOC_SAMPLE,
            kind::METHOD_TRIVIAL,
            kind::JVM_CHUNK,
            999,
        ] {
            assert_eq!(time_use(k), TimeUse::Unused, "kind {k}");
        }
    }

    /// Before and after counted apart, with the extremes; a batch's
    /// events carried past the end by its deltas counted as such.
    #[test]
    fn outside_counts_both_sides_and_jumps() {
        let span = Span { from: 100, to: 200 };
        let mut o = Outside::default();
        o.note(span, 50, TimeUse::Placed);
        o.note(span, 10, TimeUse::Clamped);
        o.note(span, u64::MAX, TimeUse::Clamped);
        o.note_batched(span, 150, 300);
        o.note_batched(span, 250, 400);
        o.note_batched(span, 20, 30);
        assert_eq!(
            o,
            Outside {
                before: 3,
                after: 3,
                jumped: 1,
                left_out: 4,
                earliest: Some(10),
                latest: Some(u64::MAX),
            }
        );
        assert_eq!(o.total(), 6);
    }

    /// An end closes the innermost block of its cause (those inside it
    /// too) and the latest window of its cause, and tells when it began.
    #[test]
    fn open_blocks_and_windows_close_where_they_began() {
        let mut o = Open::default();
        o.block(1, Cause::Monitor, true, 10);
        o.block(1, Cause::Wait, true, 20);
        o.block(1, Cause::Park, true, 30);
        o.block(2, Cause::Wait, true, 25);
        assert_eq!(o.close_block(1, Cause::Wait), Some(20));
        // The park inside the wait went with it.
        assert_eq!(o.close_block(1, Cause::Park), None);
        assert_eq!(o.close_block(1, Cause::Monitor), Some(10));
        assert_eq!(o.close_block(3, Cause::Wait), None);
        o.block(2, Cause::Wait, false, 40);
        assert_eq!(o.close_block(2, Cause::Wait), None);
        o.window(Cause::Gc, true, 100);
        o.window(Cause::Safepoint, true, 110);
        o.window(Cause::Gc, true, 120);
        o.window(Cause::Gc, false, 130);
        assert_eq!(o.close_window(Cause::Gc), Some(100));
        assert_eq!(o.close_window(Cause::Gc), None);
        assert_eq!(o.close_window(Cause::Safepoint), Some(110));
    }
}

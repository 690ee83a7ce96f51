//! METHOD_BATCH: a thread's method entries and exits packed 8 bytes each
//! (the bytecode-rewriting agent's records), read back as the
//! METHOD_ENTRY/METHOD_EXIT records they stand for.
//!
//! The layout of an event and of the record's header is defined here once:
//! the agent's probes store their events in it (agent/src/probe/layout.rs
//! gives these numbers to the probe class) and the agent copies them behind
//! [`batch_header`].

use crate::wire::{Cursor, Wire};
use crate::{kind, Encoder, MethodEvent, Payload, Record, EXIT_BY_EXCEPTION, RECORD_HEADER_LEN};

/// Bit of a batch event (its 8 bytes read as a little-endian u64) where the
/// method id starts; the bits below it are the time delta.
pub const BATCH_ID_SHIFT: u32 = 32;

/// Bit of a batch event where its [`BatchedKind`] starts (the top two bits).
pub const BATCH_KIND_SHIFT: u32 = 62;

/// The time delta of a batch event: the bits below [`BATCH_ID_SHIFT`].
pub const BATCH_DELTA_MASK: u64 = (1 << BATCH_ID_SHIFT) - 1;

/// Method ids in a [`MethodBatch`] are below this (30 bits); larger ids
/// need METHOD_ENTRY/METHOD_EXIT records.
pub const BATCH_METHOD_LIMIT: u64 = 1 << (BATCH_KIND_SHIFT - BATCH_ID_SHIFT);

/// Bytes of a METHOD_BATCH record before its events: the record header,
/// the u32 count and a reserved u32.
pub const BATCH_HEADER_LEN: usize = RECORD_HEADER_LEN + 8;

/// Most events one [`MethodBatch`] record holds (its length is a u16).
pub const BATCH_MAX_EVENTS: usize = (u16::MAX as usize - BATCH_HEADER_LEN) / 8;

/// What a [`BatchedMethodEvent`] is (the top two bits of its tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchedKind {
    /// The method was entered.
    Entry = 0,
    /// The method returned.
    Exit = 1,
    /// The method exited by an exception.
    ExitByException = 2,
}

impl BatchedKind {
    /// The kind of batch event `event` (its bits from [`BATCH_KIND_SHIFT`]).
    #[inline(always)]
    pub fn of_event(event: u64) -> BatchedKind {
        match event >> BATCH_KIND_SHIFT {
            0 => BatchedKind::Entry,
            1 => BatchedKind::Exit,
            // 3 is unassigned: read as an exceptional exit rather than lose
            // the frame's end.
            _ => BatchedKind::ExitByException,
        }
    }
}

/// A batch event: `delta` ns after the previous one, of method `method`
/// (below [`BATCH_METHOD_LIMIT`]).
#[inline(always)]
pub const fn batch_event(delta: u32, method: u32, kind: BatchedKind) -> u64 {
    delta as u64 | (method as u64) << BATCH_ID_SHIFT | (kind as u64) << BATCH_KIND_SHIFT
}

/// The method id of batch event `event`.
#[inline(always)]
pub const fn batch_event_method(event: u64) -> u64 {
    (event >> BATCH_ID_SHIFT) & (BATCH_METHOD_LIMIT - 1)
}

/// The header of a METHOD_BATCH record of thread `tid` holding `count`
/// events (at most [`BATCH_MAX_EVENTS`]), the first at `ts`; the events,
/// 8 bytes each, follow it.
pub fn batch_header(tid: u32, ts: u64, count: usize) -> [u8; BATCH_HEADER_LEN] {
    let mut h = [0u8; BATCH_HEADER_LEN];
    h[..2].copy_from_slice(&kind::METHOD_BATCH.to_le_bytes());
    h[4..8].copy_from_slice(&tid.to_le_bytes());
    h[8..16].copy_from_slice(&ts.to_le_bytes());
    set_batch_count(&mut h, count);
    h
}

/// Writes `count` and the length it makes into a batch's `header`.
fn set_batch_count(header: &mut [u8], count: usize) {
    debug_assert!(count <= BATCH_MAX_EVENTS);
    let len = (BATCH_HEADER_LEN + 8 * count) as u16;
    header[2..4].copy_from_slice(&len.to_le_bytes());
    header[RECORD_HEADER_LEN..RECORD_HEADER_LEN + 4].copy_from_slice(&(count as u32).to_le_bytes());
}

/// One event of a [`MethodBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchedMethodEvent {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// Method id (below [`BATCH_METHOD_LIMIT`]), defined by an earlier [`MethodDef`](crate::MethodDef).
    pub method: u32,
    /// Entry or exit.
    pub kind: BatchedKind,
}

impl BatchedMethodEvent {
    /// The same event as a METHOD_ENTRY/METHOD_EXIT payload.
    pub fn to_payload(self) -> Payload {
        method_payload(self.method as u64, self.kind)
    }
}

fn method_payload(method: u64, kind: BatchedKind) -> Payload {
    let ev = |flags| MethodEvent {
        method,
        flags,
        reserved: 0,
    };
    match kind {
        BatchedKind::Entry => Payload::MethodEntry(ev(0)),
        BatchedKind::Exit => Payload::MethodExit(ev(0)),
        BatchedKind::ExitByException => Payload::MethodExit(ev(EXIT_BY_EXCEPTION)),
    }
}

/// JVM payload of [`kind::METHOD_BATCH`](crate::kind::METHOD_BATCH): u32 count, u32 reserved, then
/// `count` events of a u32 time delta (ns since the previous event, the
/// first one's since the header ts) and a u32 tag (method id in bits 0–29,
/// [`BatchedKind`] in bits 30–31). A quarter of the bytes of one 32-byte
/// record per event, which is what a traced call costs in page supply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodBatch {
    /// The events, in time order (the first one's ts is the header ts).
    pub events: Vec<BatchedMethodEvent>,
}

impl Wire for MethodBatch {
    /// Never called: [`Encoder::record`] writes a batch with a
    /// [`BatchWriter`], which may need several records for it.
    fn put(&self, _: &mut Vec<u8>) {
        unreachable!("a METHOD_BATCH is written by BatchWriter");
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        Some(MethodBatch {
            events: batch_events(c.ts, c.rest())?.collect(),
        })
    }
}

/// Iterates over the events of a METHOD_BATCH payload; see [`batch_events`].
#[derive(Debug, Clone)]
pub struct BatchEvents<'a> {
    entries: std::slice::ChunksExact<'a, u8>,
    ts: u64,
}

impl Iterator for BatchEvents<'_> {
    type Item = BatchedMethodEvent;

    #[inline]
    fn next(&mut self) -> Option<BatchedMethodEvent> {
        let e = self.entries.next()?;
        let e = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        // A delta that would run past the clock's last nanosecond stops
        // there: wrapped around, it would put the event before the batch
        // began, among honest times (a damaged or forged stream).
        self.ts = self.ts.saturating_add(e & BATCH_DELTA_MASK);
        Some(BatchedMethodEvent {
            ts: self.ts,
            method: batch_event_method(e) as u32,
            kind: BatchedKind::of_event(e),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for BatchEvents<'_> {}

/// The events of a METHOD_BATCH record with header time `ts` and payload
/// `payload`; `None` when the payload is shorter than its count says. An
/// event's time is the header's plus the deltas up to it, saturating at
/// `u64::MAX` (never wrapping to an earlier time).
#[inline]
pub fn batch_events(ts: u64, payload: &[u8]) -> Option<BatchEvents<'_>> {
    let count = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let entries = payload.get(8..8 + count.checked_mul(8)?)?;
    Some(BatchEvents {
        entries: entries.chunks_exact(8),
        ts,
    })
}

/// Writes METHOD_BATCH records for one thread into a byte buffer: events
/// are appended to an open batch, which is closed (its length and count
/// written) when it is full, when the next event is more than u32::MAX ns
/// later or earlier than the last, or by [`BatchWriter::finish`]. An event
/// whose method id does not fit 30 bits gets a METHOD_ENTRY/METHOD_EXIT
/// record of its own. The agent's hot flush path; the bytes are what
/// [`Encoder::record`] writes for the same batches.
#[derive(Debug)]
pub struct BatchWriter {
    tid: u32,
    /// Offset of the open batch record in the buffer; usize::MAX if none.
    start: usize,
    /// Events in the open batch; [`BATCH_MAX_EVENTS`] when none is open,
    /// so that one test sends both "full" and "closed" to the slow path.
    count: usize,
    last_ts: u64,
}

impl BatchWriter {
    /// A writer of thread `tid`'s events.
    pub fn new(tid: u32) -> Self {
        BatchWriter {
            tid,
            start: usize::MAX,
            count: BATCH_MAX_EVENTS,
            last_ts: 0,
        }
    }

    /// Appends one event to `out` (which must be the same buffer until
    /// [`BatchWriter::finish`]).
    #[inline(always)]
    pub fn push(&mut self, out: &mut Vec<u8>, ts: u64, method: u64, kind: BatchedKind) {
        // An earlier ts wraps to a huge delta: one test covers "too far"
        // and "backwards".
        let delta = ts.wrapping_sub(self.last_ts);
        if delta > u32::MAX as u64 || method >= BATCH_METHOD_LIMIT || self.count >= BATCH_MAX_EVENTS {
            return self.push_slow(out, ts, method, kind);
        }
        out.extend_from_slice(&batch_event(delta as u32, method as u32, kind).to_le_bytes());
        self.last_ts = ts;
        self.count += 1;
    }

    #[cold]
    fn push_slow(&mut self, out: &mut Vec<u8>, ts: u64, method: u64, kind: BatchedKind) {
        self.finish(out);
        if method >= BATCH_METHOD_LIMIT {
            let mut enc = Encoder::new();
            enc.record(&Record {
                tid: self.tid,
                ts,
                payload: method_payload(method, kind),
            });
            out.extend_from_slice(&enc.buf);
            return;
        }
        self.start = out.len();
        self.count = 0;
        self.last_ts = ts;
        // Its count and length are written when it is closed.
        out.extend_from_slice(&batch_header(self.tid, ts, 0));
        self.push(out, ts, method, kind);
    }

    /// Closes the open batch, if any (writes its length and count).
    pub fn finish(&mut self, out: &mut [u8]) {
        if self.start == usize::MAX {
            return;
        }
        let s = self.start;
        set_batch_count(&mut out[s..s + BATCH_HEADER_LEN], self.count);
        self.start = usize::MAX;
        self.count = BATCH_MAX_EVENTS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DecodeError, Decoder};

    fn batched(ts: u64, method: u32, kind: BatchedKind) -> BatchedMethodEvent {
        BatchedMethodEvent { ts, method, kind }
    }

    /// Every METHOD_BATCH record of an encoded buffer, as (tid, ts, count).
    fn batch_headers(buf: &[u8]) -> Vec<(u32, u64, usize)> {
        let mut d = Decoder::new(buf, 0);
        let mut out = Vec::new();
        while let Some(r) = d.next_raw() {
            let r = r.unwrap();
            if r.kind == kind::METHOD_BATCH {
                out.push((r.tid, r.ts, batch_events(r.ts, r.payload).unwrap().len()));
            }
        }
        out
    }

    #[test]
    fn method_batch_round_trips_and_expands() {
        use BatchedKind::*;
        let events = vec![
            batched(1_000, 7, Entry),
            batched(1_000, 8, Entry),
            batched(1_250, 8, ExitByException),
            batched(4_000_001_250, 7, Exit),
        ];
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 42,
            ts: 1_000,
            payload: Payload::MethodBatch(MethodBatch { events: events.clone() }),
        });
        // 8 bytes per event after a 24-byte record head: a quarter of
        // METHOD_ENTRY/EXIT's 32 bytes per event.
        assert_eq!(enc.buf.len(), 24 + 4 * 8);
        let raw = Decoder::new(&enc.buf, 0).next_raw().unwrap().unwrap();
        assert_eq!(raw.kind, kind::METHOD_BATCH);
        assert_eq!(
            raw.decode().unwrap().payload,
            Payload::MethodBatch(MethodBatch { events: events.clone() })
        );
        // The iterator yields the records the batch stands for.
        let expanded: Vec<Record> = Decoder::new(&enc.buf, 0).map(|r| r.unwrap()).collect();
        let want: Vec<Record> = events
            .iter()
            .map(|e| Record {
                tid: 42,
                ts: e.ts,
                payload: e.to_payload(),
            })
            .collect();
        assert_eq!(expanded, want);
        assert_eq!(
            want[2].payload,
            Payload::MethodExit(MethodEvent {
                method: 8,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0
            })
        );
    }

    #[test]
    fn batch_writer_splits_where_a_delta_does_not_fit() {
        use BatchedKind::*;
        let mut out = Vec::new();
        let mut w = BatchWriter::new(9);
        let gap = u32::MAX as u64;
        // Exactly u32::MAX later fits; one more ns does not; earlier never does.
        for (ts, m) in [(10, 1), (10 + gap, 2), (11 + 2 * gap, 3), (5, 4), (6, 5)] {
            w.push(&mut out, ts, m, Entry);
        }
        w.finish(&mut out);
        assert_eq!(batch_headers(&out), vec![(9, 10, 2), (9, 11 + 2 * gap, 1), (9, 5, 2)]);
        let ts: Vec<u64> = Decoder::new(&out, 0).map(|r| r.unwrap().ts).collect();
        assert_eq!(ts, vec![10, 10 + gap, 11 + 2 * gap, 5, 6]);
    }

    #[test]
    fn batch_writer_splits_full_batches_and_writes_big_ids_alone() {
        let mut out = Vec::new();
        let mut w = BatchWriter::new(1);
        let n = BATCH_MAX_EVENTS + 3;
        for i in 0..n as u64 {
            w.push(&mut out, 100 + i, i % 5, BatchedKind::Entry);
        }
        w.push(
            &mut out,
            100 + n as u64,
            BATCH_METHOD_LIMIT + 5,
            BatchedKind::ExitByException,
        );
        w.push(&mut out, 101 + n as u64, 3, BatchedKind::Exit);
        w.finish(&mut out);
        assert_eq!(
            batch_headers(&out),
            vec![
                (1, 100, BATCH_MAX_EVENTS),
                (1, 100 + BATCH_MAX_EVENTS as u64, 3),
                (1, 101 + n as u64, 1)
            ]
        );
        let all: Vec<Record> = Decoder::new(&out, 0).map(|r| r.unwrap()).collect();
        assert_eq!(all.len(), n + 2);
        assert!(all.iter().enumerate().all(|(i, r)| r.ts == 100 + i as u64));
        assert_eq!(
            all[n].payload,
            Payload::MethodExit(MethodEvent {
                method: BATCH_METHOD_LIMIT + 5,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0
            })
        );
    }

    /// Deltas that run past the clock's end stop at `u64::MAX`: they never
    /// wrap around to times before the batch (and never overflow).
    #[test]
    fn batch_times_saturate_instead_of_wrapping() {
        let mut p = vec![0u8; 8];
        p[..4].copy_from_slice(&3u32.to_le_bytes());
        for delta in [0, u32::MAX, 7] {
            p.extend_from_slice(&batch_event(delta, 1, BatchedKind::Entry).to_le_bytes());
        }
        let ts: Vec<u64> = batch_events(u64::MAX - 10, &p).unwrap().map(|e| e.ts).collect();
        assert_eq!(ts, vec![u64::MAX - 10, u64::MAX, u64::MAX]);
        let ts: Vec<u64> = batch_events(100, &p).unwrap().map(|e| e.ts).collect();
        let far = 100 + u64::from(u32::MAX);
        assert_eq!(ts, vec![100, far, far + 7]);
    }

    #[test]
    fn batch_shorter_than_its_count_is_corrupt() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::MethodBatch(MethodBatch {
                events: vec![batched(1, 1, BatchedKind::Entry)],
            }),
        });
        // Claim two events in a record that holds one.
        enc.buf[16..20].copy_from_slice(&2u32.to_le_bytes());
        let out: Vec<_> = Decoder::new(&enc.buf, 0).collect();
        assert!(
            matches!(out[..], [Err(DecodeError::Corrupt { offset: 0, .. })]),
            "{out:?}"
        );
    }
}

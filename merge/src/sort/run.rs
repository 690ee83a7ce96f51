//! Sorted runs on disk: the compact encoding of a thread's events in a run
//! file ([`encode`], [`decode`]) and the sequential reader of a run
//! ([`RunReader`]). [`crate::sort::spill`] writes runs; [`crate::sort::kway`] reads them.

use crate::cause::Cause;
use crate::file_io::{map_file, read_full, release_behind};
use crate::model::event::{Event, SyscallInfo, Timed};
use jtrace_format as fmt;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};

/// One thread's segment of a run file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    /// Byte offset in the run file.
    pub(crate) offset: u64,
    /// Events in the segment.
    pub(crate) count: u64,
}

/// A sorted run on disk.
#[derive(Debug)]
pub(crate) struct Run {
    /// The run file (unlinked), positioned at its start.
    pub(crate) file: File,
    /// Each thread's segment, by tid.
    pub(crate) segments: BTreeMap<u32, Segment>,
}

/// The cause a flag byte of a run stands for (an unknown byte: [`Cause::Unknown`]).
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
pub(crate) fn encode(out: &mut Vec<u8>, e: &Timed, sc: Option<&SyscallInfo>, prev: &mut u64) {
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
        Event::Stack(idx) => {
            head(&mut p, 13, 0, 0);
            p.varint(idx as u64);
        }
        Event::Held { cause, begin } => head(&mut p, 14, cause as u8, begin as u8),
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
        13 => Event::Stack(field(b, &mut i)?),
        14 => Event::Held {
            cause: cause_from(f1),
            begin: f2 != 0,
        },
        _ => return None,
    };
    Some((ts, event, tag, i))
}

/// Sequential reader of one run file.
#[derive(Debug)]
pub(crate) struct RunReader {
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
    /// Reads back `run`, `chunk` bytes at a time, or `mapped` (the run is
    /// this process's own unlinked file, written completely: nothing
    /// shrinks it).
    pub(crate) fn new(run: Run, chunk: usize, mapped: bool) -> RunReader {
        RunReader {
            map: if mapped { map_file(&run.file, 1) } else { None },
            released: 0,
            file: run.file,
            segments: run.segments,
            buf: Vec::new(),
            pos: 0,
            offset: 0,
            chunk,
            prev_ts: 0,
        }
    }

    /// Thread `tid`'s segment of the run, if it has one.
    pub(crate) fn segment(&self, tid: u32) -> Option<Segment> {
        self.segments.get(&tid).copied()
    }

    /// Positions the reader at a byte offset of the run (a no-op when
    /// segments are read in order, as walks do).
    pub(crate) fn seek(&mut self, to: u64) -> anyhow::Result<()> {
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
    pub(crate) fn start_segment(&mut self, offset: u64) -> anyhow::Result<()> {
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
    pub(crate) fn release_behind(&mut self) {
        // Nothing borrows the mapping between calls of `next`.
        if let Some(map) = &self.map {
            release_behind(map, &mut self.released, self.pos, self.chunk);
        }
    }

    /// Decodes the next event of the current segment; the record of a
    /// syscall entry goes to `sc_out` (then returns true).
    #[inline]
    pub(crate) fn next(&mut self, sc_out: &mut Option<SyscallInfo>) -> anyhow::Result<(Timed, bool)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            Event::Held {
                cause: Cause::Steal,
                begin: true,
            },
            Event::Held {
                cause: Cause::Throttled,
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
            let ts = (1 << 60) | ((i / 3) * (i / 3) * 997);
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

//! Encoding a block of probe events as METHOD_BATCH records.
//!
//! The probes (agent/java/jtrace/Probe.java) store each event as one long,
//! already in METHOD_BATCH's event layout (`jtrace_format::batch_event`:
//! the ns since the thread's previous event, the method id, the
//! [`BatchedKind`]). So a block whose events nest properly is written out
//! nearly as it is, behind a [`batch_header`]; only what needs repair is
//! re-encoded.
//!
//! A carrier's buffer also holds virtual thread events
//! ([`crate::probe::layout::VTHREAD_KIND`]: mounts, unmounts, unparks, see
//! [`crate::vthreads::markers`]); they
//! are written as the VTHREAD_* records they stand for, the method events
//! around them as batches.

use jtrace_format::{
    batch_event_method, batch_header, BatchWriter, BatchedKind, Encoder, Record, BATCH_DELTA_MASK, BATCH_HEADER_LEN,
    BATCH_KIND_SHIFT, BATCH_MAX_EVENTS,
};

use crate::probe::layout::VTHREAD_KIND;
use crate::sys::jlong;

/// The events of one probe buffer: `events[0]`'s delta counts from `base`.
#[derive(Clone, Copy)]
pub(crate) struct Block<'a> {
    /// Time the first event's delta counts from.
    pub base: u64,
    /// The events, as the probes stored them.
    pub events: &'a [jlong],
}

/// Appends `block` to `out` as METHOD_BATCH records of thread `tid`;
/// returns the number of events written.
///
/// With the thread's stack of open methods (`stack`), exits are matched
/// against it: an exit whose method is open below the innermost one closes
/// the frames above it as exited by exception (a constructor whose
/// super()/this() call threw has no exit probe of its own), and an exit of a
/// method that is not open at all is dropped. So every thread's entries and
/// exits stay strictly nested. The events up to the first one that needs
/// such a repair (normally all of them) are copied as they are.
pub(crate) fn encode_events(out: &mut Vec<u8>, tid: u32, block: Block, mut stack: Option<&mut Vec<usize>>) -> u64 {
    let is_vthread_event = |e: jlong| (e as u64) >> BATCH_KIND_SHIFT == VTHREAD_KIND;
    // A fold per chunk, not `any`: the compiler vectorises a loop that
    // does not stop early.
    let has_vthread_events = (block.events.chunks(64)).any(|c| c.iter().fold(false, |a, &e| a | is_vthread_event(e)));
    if !has_vthread_events {
        return encode_method_events(out, tid, block, stack);
    }
    let (mut n, mut ts, mut from, mut from_ts) = (0, block.base, 0, block.base);
    let mut pending = crate::vthreads::markers::Pending::default();
    for (i, &e) in block.events.iter().enumerate() {
        ts += e as u64 & BATCH_DELTA_MASK;
        if !is_vthread_event(e) {
            continue;
        }
        let methods = Block {
            base: from_ts,
            events: &block.events[from..i],
        };
        n += encode_method_events(out, tid, methods, stack.as_deref_mut());
        if let Some(payload) = crate::vthreads::markers::probe_event(e as u64, &mut pending) {
            let mut enc = Encoder {
                buf: std::mem::take(out),
            };
            enc.record(&Record { tid, ts, payload });
            *out = enc.buf;
            n += 1;
        }
        (from, from_ts) = (i + 1, ts);
    }
    let methods = Block {
        base: from_ts,
        events: &block.events[from..],
    };
    n + encode_method_events(out, tid, methods, stack)
}

/// [`encode_events`] for a block of method events only.
fn encode_method_events(out: &mut Vec<u8>, tid: u32, block: Block, mut stack: Option<&mut Vec<usize>>) -> u64 {
    let events = block.events;
    let nested = match stack.as_deref_mut() {
        Some(s) => nested_prefix(s, events),
        None => events.len(),
    };
    let mut ts = block.base;
    let mut chunks = events[..nested].chunks(BATCH_MAX_EVENTS).peekable();
    while let Some(chunk) = chunks.next() {
        write_batch(out, tid, ts, chunk);
        if chunks.peek().is_some() || nested < events.len() {
            ts = end_time(ts, chunk);
        }
    }
    if nested == events.len() {
        return nested as u64;
    }
    let mut w = BatchWriter::new(tid);
    let mut n = nested as u64;
    for &e in &events[nested..] {
        let e = e as u64;
        ts += e & BATCH_DELTA_MASK;
        let id = batch_event_method(e);
        let kind = BatchedKind::of_event(e);
        if kind == BatchedKind::Entry {
            if let Some(s) = stack.as_deref_mut() {
                s.push(id as usize);
            }
            w.push(out, ts, id, BatchedKind::Entry);
            n += 1;
            continue;
        }
        if let Some(s) = stack.as_deref_mut() {
            if s.last() != Some(&(id as usize)) {
                if !s.contains(&(id as usize)) {
                    continue;
                }
                while let Some(&top) = s.last() {
                    if top == id as usize {
                        break;
                    }
                    s.pop();
                    w.push(out, ts, top as u64, BatchedKind::ExitByException);
                    n += 1;
                }
            }
            s.pop();
        }
        w.push(out, ts, id, kind);
        n += 1;
    }
    w.finish(out);
    n
}

/// How many leading `events` nest properly on top of `stack` (every exit
/// leaves the innermost open method); applies them to `stack`.
fn nested_prefix(stack: &mut Vec<usize>, events: &[jlong]) -> usize {
    let mut i = 0;
    while i < events.len() {
        let e = events[i] as u64;
        let id = batch_event_method(e) as usize;
        if BatchedKind::of_event(e) == BatchedKind::Entry {
            // A leaf call (its exit next) nests on any stack: not pushed.
            let leaf = events.get(i + 1).is_some_and(|&n| {
                let n = n as u64;
                n >> BATCH_KIND_SHIFT != 0 && batch_event_method(n) as usize == id
            });
            if leaf {
                i += 2;
                continue;
            }
            stack.push(id);
        } else if stack.last() == Some(&id) {
            stack.pop();
        } else {
            return i;
        }
        i += 1;
    }
    events.len()
}

/// Appends one METHOD_BATCH record holding `events` (at most
/// [`BATCH_MAX_EVENTS`], already in its event layout; the first one's delta
/// counts from `base`).
fn write_batch(out: &mut Vec<u8>, tid: u32, base: u64, events: &[jlong]) {
    let Some((&first, rest)) = events.split_first() else {
        return;
    };
    let first = first as u64;
    out.reserve(BATCH_HEADER_LEN + 8 * events.len());
    out.extend_from_slice(&batch_header(tid, base + (first & BATCH_DELTA_MASK), events.len()));
    // The header holds the first event's time: its own delta is 0.
    out.extend_from_slice(&(first & !BATCH_DELTA_MASK).to_le_bytes());
    out.extend_from_slice(as_le_bytes(rest));
}

/// The time of the last of `events`, the first one's delta counting from `base`.
fn end_time(base: u64, events: &[jlong]) -> u64 {
    base + events.iter().map(|&e| e as u64 & BATCH_DELTA_MASK).sum::<u64>()
}

/// The bytes of `events` in little-endian order: the slice itself (the
/// agent is built for little-endian machines only, see below).
fn as_le_bytes(events: &[jlong]) -> &[u8] {
    // SAFETY: any initialised memory is valid as bytes; the length covers
    // exactly the slice.
    unsafe { std::slice::from_raw_parts(events.as_ptr().cast::<u8>(), std::mem::size_of_val(events)) }
}

#[cfg(not(target_endian = "little"))]
compile_error!("the probe buffers are written out as little-endian bytes");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::layout::{VTHREAD, VTHREAD_WHAT_SHIFT, V_MOUNT, V_SLEEP};
    use jtrace_format::{kind, Payload, Record, BATCH_HEADER_LEN, BATCH_ID_SHIFT, EXIT_BY_EXCEPTION};

    fn decode(buf: &[u8]) -> Vec<Record> {
        jtrace_format::Decoder::new(buf, 0).map(|r| r.unwrap()).collect()
    }

    fn method(r: &Record) -> (bool, u64, u32) {
        match &r.payload {
            Payload::MethodEntry(e) => (true, e.method, e.flags),
            Payload::MethodExit(e) => (false, e.method, e.flags),
            p => panic!("not a method event: {p:?}"),
        }
    }

    /// A probe event as `Probe.java` stores it.
    fn ev(delta: u64, id: u64, kind: u64) -> jlong {
        (delta | id << BATCH_ID_SHIFT | kind << BATCH_KIND_SHIFT) as jlong
    }

    fn encode(base: u64, events: &[jlong], stack: Option<&mut Vec<usize>>) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let n = encode_events(&mut out, 77, Block { base, events }, stack);
        (out, n)
    }

    #[test]
    fn nested_events_are_copied_into_one_batch_as_they_are() {
        // enter 3, enter 4, exit 4, exitEx 3, counted from base 90.
        let data = [ev(10, 3, 0), ev(10, 4, 0), ev(10, 4, 1), ev(10, 3, 2)];
        let mut stack = Vec::new();
        let (out, n) = encode(90, &data, Some(&mut stack));
        assert_eq!(n, 4);
        assert!(stack.is_empty());
        assert_eq!(out.len(), BATCH_HEADER_LEN + 4 * 8);
        // After the first (whose time moved into the header), the events
        // are the probe's longs byte for byte.
        assert_eq!(&out[out.len() - 24..], as_le_bytes(&data[1..]));
        let recs = decode(&out);
        assert!(recs.iter().all(|r| r.tid == 77));
        assert_eq!(recs.iter().map(|r| r.ts).collect::<Vec<_>>(), vec![100, 110, 120, 130]);
        assert_eq!(
            recs.iter().map(method).collect::<Vec<_>>(),
            vec![(true, 3, 0), (true, 4, 0), (false, 4, 0), (false, 3, EXIT_BY_EXCEPTION)]
        );
    }

    #[test]
    fn an_exit_below_the_top_closes_the_frames_above_it() {
        // enter 1, enter 2 (a constructor whose super() threw: no exit of
        // its own), exit 1; then an exit of a method never entered, whose
        // time still counts for the next event; then enter 5.
        let data = [ev(10, 1, 0), ev(10, 2, 0), ev(10, 1, 1), ev(10, 9, 1), ev(10, 5, 0)];
        let mut stack = vec![8];
        let (out, n) = encode(0, &data, Some(&mut stack));
        assert_eq!(n, 5);
        assert_eq!(stack, vec![8, 5]);
        let recs = decode(&out);
        assert_eq!(
            recs.iter().map(method).collect::<Vec<_>>(),
            vec![
                (true, 1, 0),
                (true, 2, 0),
                (false, 2, EXIT_BY_EXCEPTION),
                (false, 1, 0),
                (true, 5, 0)
            ]
        );
        assert_eq!(recs.iter().map(|r| r.ts).collect::<Vec<_>>(), vec![10, 20, 30, 30, 50]);
    }

    #[test]
    fn virtual_thread_events_become_records_between_the_batches() {
        // enter 3, mount of virtual thread 42, exit 3, an unmount (sleep) of 42.
        let mount = (VTHREAD | V_MOUNT << VTHREAD_WHAT_SHIFT | 42 << BATCH_ID_SHIFT | 10) as jlong;
        let sleep = (VTHREAD | V_SLEEP << VTHREAD_WHAT_SHIFT | 42 << BATCH_ID_SHIFT | 10) as jlong;
        let data = [ev(10, 3, 0), mount, ev(10, 3, 1), sleep];
        let mut stack = Vec::new();
        let (out, n) = encode(100, &data, Some(&mut stack));
        assert_eq!(n, 4);
        assert!(stack.is_empty());
        let recs = decode(&out);
        assert_eq!(recs.iter().map(|r| r.ts).collect::<Vec<_>>(), vec![110, 120, 130, 140]);
        assert_eq!(method(&recs[0]), (true, 3, 0));
        assert_eq!(method(&recs[2]), (false, 3, 0));
        match (&recs[1].payload, &recs[3].payload) {
            (Payload::Jvm(k1, b1), Payload::Jvm(k2, b2)) => {
                assert_eq!((*k1, b1.arg, b1.class.as_str()), (kind::VTHREAD_MOUNT, 42, ""));
                assert_eq!((*k2, b2.arg, b2.class.as_str()), (kind::VTHREAD_UNMOUNT, 42, "sleep"));
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn a_long_block_is_split_into_batches_with_the_right_times() {
        let n = 2 * BATCH_MAX_EVENTS + 5;
        let data: Vec<jlong> = (0..n).map(|i| ev(i as u64 % 7, 6, (i % 2) as u64)).collect();
        let base = 1 << 40;
        let mut stack = Vec::new();
        let (out, written) = encode(base, &data, Some(&mut stack));
        assert_eq!(written, n as u64);
        let recs = decode(&out);
        assert_eq!(recs.len(), n);
        let mut ts = base;
        for (i, r) in recs.iter().enumerate() {
            ts += i as u64 % 7;
            assert_eq!((r.ts, method(r)), (ts, (i % 2 == 0, 6, 0)), "event {i}");
        }
        assert_eq!(end_time(base, &data), ts);
        // Without a stack (another thread's buffer at VM death) the same.
        let (again, _) = encode(base, &data, None);
        assert_eq!(again, out);
    }
}

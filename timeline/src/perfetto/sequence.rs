//! Packets, packet sequences and what they intern.
//!
//! Each thread's events are one packet sequence. A sequence starts with a
//! packet that clears its incremental state, sets its defaults (timestamps
//! on the sequence's incremental clock, track events on the thread's
//! track) and ties that clock to the trace's with a clock snapshot. Then a
//! packet's timestamp is the nanoseconds since the sequence's previous
//! timestamp (two or three bytes instead of eight); a packet earlier than
//! that (rare: a wakeup instant before the block it ends) is written with
//! its absolute time on the trace's clock instead.
//!
//! Names, argument names and evidence strings are interned per sequence:
//! defined in the packet that first uses them, referred to by a small id.

use super::fields::{annotation, clock, defaults, event, interned, packet, TRACE_PACKET};
use super::wire::{Buf, Cursor};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::io::Write;

/// Output bytes gathered before they go to the writer.
const CHUNK: usize = 256 << 10;

/// Distinct evidence strings remembered per sequence; past it the table
/// starts again (new ids; an id is never defined twice).
const MAX_STRINGS: usize = 1 << 16;

/// What determines an interned annotation string (words of the caller's
/// choosing: equal keys, equal strings).
pub type StringKey = crate::evidence::EvidenceKey;

/// The packets written so far, and the current sequence's clock.
pub struct Packets<W: Write> {
    out: W,
    /// Whole packets not yet written.
    pub buf: Buf,
    /// The first write error; nothing is written after it.
    pub error: Option<std::io::Error>,
    /// The current sequence.
    pub seq: u32,
    /// Its incremental clock's value.
    last_ts: u64,
}

/// Room for a packet's own fields around what it carries.
const PACKET_ROOM: usize = 64;

impl<W: Write> Packets<W> {
    /// Packets to `out`.
    pub fn new(out: W) -> Self {
        Packets {
            out,
            buf: Buf::default(),
            error: None,
            seq: 0,
            last_ts: 0,
        }
    }

    /// Starts sequence `seq`: clears its state, sets its defaults (the
    /// incremental clock, starting at `t0`; `track`, if any, for track
    /// events), and defines the clock.
    pub fn start_sequence(&mut self, seq: u32, t0: u64, track: Option<u64>) {
        self.seq = seq;
        self.last_ts = t0;
        let mut b = self.buf.cursor(256);
        let p = b.open(TRACE_PACKET);
        b.uint(packet::SEQUENCE_ID, seq as u64);
        b.uint(packet::SEQUENCE_FLAGS, packet::SEQ_INCREMENTAL_STATE_CLEARED);
        let d = b.open(packet::DEFAULTS);
        b.uint(defaults::TIMESTAMP_CLOCK_ID, clock::SEQUENCE_INCREMENTAL);
        if let Some(track) = track {
            let e = b.open(defaults::TRACK_EVENT_DEFAULTS);
            b.uint(defaults::TRACK_UUID, track);
            b.close(e);
        }
        b.close(d);
        let s = b.open(packet::CLOCK_SNAPSHOT);
        for (id, incremental) in [(clock::SEQUENCE_INCREMENTAL, true), (clock::BOOTTIME, false)] {
            let c = b.open(clock::CLOCKS);
            b.uint(clock::CLOCK_ID, id);
            b.uint(clock::TIMESTAMP, t0);
            if incremental {
                b.uint(clock::IS_INCREMENTAL, 1);
            }
            b.close(c);
        }
        b.close(s);
        b.close(p);
    }

    /// Writes a track event of the current sequence at `ts`, defining what
    /// `interned` holds; `body` writes the event's fields into at most
    /// `room` bytes.
    #[inline]
    pub fn track_event(&mut self, ts: u64, interned: &mut Vec<u8>, room: usize, body: impl FnOnce(&mut Cursor)) {
        let mut b = self.buf.cursor(PACKET_ROOM + room + interned.len());
        let p = b.open(TRACE_PACKET);
        if ts >= self.last_ts {
            b.uint(packet::TIMESTAMP, ts - self.last_ts);
            self.last_ts = ts;
        } else {
            b.uint(packet::TIMESTAMP, ts);
            b.uint(packet::TIMESTAMP_CLOCK_ID, clock::BOOTTIME);
        }
        b.uint(packet::SEQUENCE_ID, self.seq as u64);
        if !interned.is_empty() {
            b.bytes(packet::INTERNED_DATA, interned);
            interned.clear();
        }
        let e = b.open(packet::TRACK_EVENT);
        body(&mut b);
        b.close(e);
        b.close(p);
        drop(b);
        self.written();
    }

    /// After packets appended to `buf` directly: writes out what is
    /// gathered if it is enough.
    pub fn written(&mut self) {
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// Writes out what is gathered.
    pub fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(self.buf.bytes()) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Writes out everything and flushes the writer.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.flush();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

/// What the current sequence has interned, and the definitions the next
/// packet carries.
pub struct Interner {
    seq: u32,
    /// `InternedData` entries for the next packet.
    pub pending: Vec<u8>,
    /// Event names: per method, (sequence, iid); the fixed ones by index;
    /// others by name.
    methods: Vec<(u32, u64)>,
    fixed: Vec<(u32, u64)>,
    names: HashMap<String, u64>,
    next_name: u64,
    /// Argument names by their fixed iid: the sequence that defined it.
    args: Vec<u32>,
    /// Annotation strings: per method signature, (sequence, iid); others
    /// (evidence) by their key.
    signatures: Vec<(u32, u64)>,
    strings: FxHashMap<StringKey, u64>,
    next_string: u64,
}

impl Interner {
    /// For a trace of `methods` methods and `args` argument names.
    pub fn new(methods: usize, args: usize, fixed: usize) -> Self {
        Interner {
            seq: 0,
            pending: Vec::new(),
            methods: vec![(0, 0); methods],
            fixed: vec![(0, 0); fixed],
            names: HashMap::new(),
            next_name: 1,
            args: vec![0; args + 1],
            signatures: vec![(0, 0); methods],
            strings: FxHashMap::default(),
            next_string: 1,
        }
    }

    /// A new sequence (ids start again; nothing is defined).
    pub fn start_sequence(&mut self, seq: u32) {
        self.seq = seq;
        self.pending.clear();
        self.names.clear();
        self.strings.clear();
        self.next_name = 1;
        self.next_string = 1;
    }

    fn define(&mut self, field: u32, iid: u64, value: &[u8]) {
        // Rare (once per name and sequence): through a buffer of its own.
        let mut b = Buf::default();
        let mut c = b.cursor(32 + value.len());
        let m = c.open(field);
        c.uint(interned::IID, iid);
        c.bytes(interned::VALUE, value);
        c.close(m);
        drop(c);
        self.pending.extend_from_slice(b.bytes());
    }

    /// The event name iid of method `m`, named by `name` the first time.
    pub fn method(&mut self, m: usize, name: impl FnOnce() -> String) -> u64 {
        match self.methods.get(m) {
            Some(&(s, iid)) if s == self.seq => iid,
            _ => {
                let iid = self.new_name(&name());
                if let Some(slot) = self.methods.get_mut(m) {
                    *slot = (self.seq, iid);
                }
                iid
            }
        }
    }

    /// The event name iid of fixed name `i`, `name`.
    pub fn fixed(&mut self, i: usize, name: &str) -> u64 {
        match self.fixed[i] {
            (s, iid) if s == self.seq => iid,
            _ => {
                let iid = self.new_name(name);
                self.fixed[i] = (self.seq, iid);
                iid
            }
        }
    }

    /// The event name iid of `name`.
    pub fn name(&mut self, name: &str) -> u64 {
        match self.names.get(name) {
            Some(&iid) => iid,
            None => {
                let iid = self.new_name(name);
                self.names.insert(name.to_string(), iid);
                iid
            }
        }
    }

    fn new_name(&mut self, name: &str) -> u64 {
        let iid = self.next_name;
        self.next_name += 1;
        self.define(interned::EVENT_NAMES, iid, name.as_bytes());
        iid
    }

    /// Argument name `iid` (fixed), defined as `name` if this sequence has
    /// not yet.
    pub fn arg(&mut self, iid: u64, name: impl FnOnce() -> String) -> u64 {
        if self.args[iid as usize] != self.seq {
            self.args[iid as usize] = self.seq;
            self.define(interned::ANNOTATION_NAMES, iid, name().as_bytes());
        }
        iid
    }

    /// The string iid of method `m`'s signature.
    pub fn signature(&mut self, m: usize, sig: impl FnOnce() -> String) -> u64 {
        match self.signatures.get(m) {
            Some(&(s, iid)) if s == self.seq => iid,
            _ => {
                let iid = self.new_string(sig().as_bytes());
                if let Some(slot) = self.signatures.get_mut(m) {
                    *slot = (self.seq, iid);
                }
                iid
            }
        }
    }

    /// The string iid of the string `key` stands for, made by `value`
    /// the first time (the key spares making and hashing the string).
    pub fn string(&mut self, key: StringKey, value: impl FnOnce() -> String) -> u64 {
        if let Some(&iid) = self.strings.get(&key) {
            return iid;
        }
        if self.strings.len() >= MAX_STRINGS {
            self.strings.clear();
        }
        let iid = self.new_string(value().as_bytes());
        self.strings.insert(key, iid);
        iid
    }

    fn new_string(&mut self, s: &[u8]) -> u64 {
        let iid = self.next_string;
        self.next_string += 1;
        self.define(interned::ANNOTATION_STRINGS, iid, s);
        iid
    }
}

/// Room for one annotation.
pub const ARG_ROOM: usize = 24;

/// Appends annotation `name_iid` = `v` to a track event; `value_field` is
/// the value's kind (a varint in all three).
#[inline]
fn arg(ev: &mut Cursor, name_iid: u64, value_field: u32, v: u64) {
    let m = ev.open(event::DEBUG_ANNOTATIONS);
    ev.uint(annotation::NAME_IID, name_iid);
    ev.uint(value_field, v);
    ev.close(m);
}

/// Appends an annotation `name_iid` = `v` (unsigned) to a track event.
#[inline]
pub fn arg_uint(ev: &mut Cursor, name_iid: u64, v: u64) {
    arg(ev, name_iid, annotation::UINT_VALUE, v);
}

/// Appends an annotation `name_iid` = `true`.
#[inline]
pub fn arg_true(ev: &mut Cursor, name_iid: u64) {
    arg(ev, name_iid, annotation::BOOL_VALUE, 1);
}

/// Appends an annotation `name_iid` = interned string `iid`.
#[inline]
pub fn arg_string(ev: &mut Cursor, name_iid: u64, iid: u64) {
    arg(ev, name_iid, annotation::STRING_VALUE_IID, iid);
}

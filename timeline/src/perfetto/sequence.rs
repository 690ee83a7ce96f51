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

use super::fields::{annotation, clock, defaults, interned, packet, TRACE_PACKET};
use super::wire;
use std::collections::HashMap;
use std::io::Write;

/// Output bytes gathered before they go to the writer.
const CHUNK: usize = 256 << 10;

/// Distinct evidence strings remembered per sequence; past it the table
/// starts again (new ids; an id is never defined twice).
const MAX_STRINGS: usize = 1 << 16;

/// The packets written so far, and the current sequence's clock.
pub struct Packets<W: Write> {
    out: W,
    /// Whole packets not yet written.
    pub buf: Vec<u8>,
    /// The first write error; nothing is written after it.
    pub error: Option<std::io::Error>,
    /// The current sequence.
    pub seq: u32,
    /// Its incremental clock's value.
    last_ts: u64,
}

impl<W: Write> Packets<W> {
    /// Packets to `out`.
    pub fn new(out: W) -> Self {
        Packets {
            out,
            buf: Vec::with_capacity(CHUNK + (64 << 10)),
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
        let b = &mut self.buf;
        let p = wire::open(b, TRACE_PACKET);
        wire::uint(b, packet::SEQUENCE_ID, seq as u64);
        wire::uint(b, packet::SEQUENCE_FLAGS, packet::SEQ_INCREMENTAL_STATE_CLEARED);
        let d = wire::open(b, packet::DEFAULTS);
        wire::uint(b, defaults::TIMESTAMP_CLOCK_ID, clock::SEQUENCE_INCREMENTAL);
        if let Some(track) = track {
            let e = wire::open(b, defaults::TRACK_EVENT_DEFAULTS);
            wire::uint(b, defaults::TRACK_UUID, track);
            wire::close(b, e);
        }
        wire::close(b, d);
        let s = wire::open(b, packet::CLOCK_SNAPSHOT);
        for (id, incremental) in [(clock::SEQUENCE_INCREMENTAL, true), (clock::BOOTTIME, false)] {
            let c = wire::open(b, clock::CLOCKS);
            wire::uint(b, clock::CLOCK_ID, id);
            wire::uint(b, clock::TIMESTAMP, t0);
            if incremental {
                wire::uint(b, clock::IS_INCREMENTAL, 1);
            }
            wire::close(b, c);
        }
        wire::close(b, s);
        wire::close(b, p);
    }

    /// Opens a packet of the current sequence at `ts`, defining what
    /// `interned` holds; [`Packets::end`] closes it.
    #[must_use]
    pub fn begin(&mut self, ts: u64, interned: &mut Vec<u8>) -> usize {
        let b = &mut self.buf;
        let p = wire::open(b, TRACE_PACKET);
        if ts >= self.last_ts {
            wire::uint(b, packet::TIMESTAMP, ts - self.last_ts);
            self.last_ts = ts;
        } else {
            wire::uint(b, packet::TIMESTAMP, ts);
            wire::uint(b, packet::TIMESTAMP_CLOCK_ID, clock::BOOTTIME);
        }
        wire::uint(b, packet::SEQUENCE_ID, self.seq as u64);
        if !interned.is_empty() {
            wire::bytes(b, packet::INTERNED_DATA, interned);
            interned.clear();
        }
        p
    }

    /// Closes the packet opened at `mark`.
    pub fn end(&mut self, mark: usize) {
        wire::close(&mut self.buf, mark);
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// After packets appended to `buf` directly: writes out what is
    /// gathered if it is enough.
    pub fn end_raw(&mut self) {
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// Writes out what is gathered.
    pub fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(&self.buf) {
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
    /// Event names: per method, (sequence, iid); others by name.
    methods: Vec<(u32, u64)>,
    names: HashMap<String, u64>,
    next_name: u64,
    /// Argument names by their fixed iid: the sequence that defined it.
    args: Vec<u32>,
    /// Annotation strings: per method signature, (sequence, iid); others
    /// (evidence) by value.
    signatures: Vec<(u32, u64)>,
    strings: HashMap<String, u64>,
    next_string: u64,
}

impl Interner {
    /// For a trace of `methods` methods and `args` argument names.
    pub fn new(methods: usize, args: usize) -> Self {
        Interner {
            seq: 0,
            pending: Vec::new(),
            methods: vec![(0, 0); methods],
            names: HashMap::new(),
            next_name: 1,
            args: vec![0; args + 1],
            signatures: vec![(0, 0); methods],
            strings: HashMap::new(),
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
        let m = wire::open(&mut self.pending, field);
        wire::uint(&mut self.pending, interned::IID, iid);
        wire::bytes(&mut self.pending, interned::VALUE, value);
        wire::close(&mut self.pending, m);
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

    /// The string iid of `s`.
    pub fn string(&mut self, s: &str) -> u64 {
        if let Some(&iid) = self.strings.get(s) {
            return iid;
        }
        if self.strings.len() >= MAX_STRINGS {
            self.strings.clear();
        }
        let iid = self.new_string(s.as_bytes());
        self.strings.insert(s.to_string(), iid);
        iid
    }

    fn new_string(&mut self, s: &[u8]) -> u64 {
        let iid = self.next_string;
        self.next_string += 1;
        self.define(interned::ANNOTATION_STRINGS, iid, s);
        iid
    }
}

/// Appends an annotation `name_iid` = `v` (unsigned) to a track event.
pub fn arg_uint(ev: &mut Vec<u8>, field: u32, name_iid: u64, v: u64) {
    let m = wire::open(ev, field);
    wire::uint(ev, annotation::NAME_IID, name_iid);
    wire::uint(ev, annotation::UINT_VALUE, v);
    wire::close(ev, m);
}

/// Appends an annotation `name_iid` = `true`.
pub fn arg_true(ev: &mut Vec<u8>, field: u32, name_iid: u64) {
    let m = wire::open(ev, field);
    wire::uint(ev, annotation::NAME_IID, name_iid);
    wire::uint(ev, annotation::BOOL_VALUE, 1);
    wire::close(ev, m);
}

/// Appends an annotation `name_iid` = interned string `iid`.
pub fn arg_string(ev: &mut Vec<u8>, field: u32, name_iid: u64, iid: u64) {
    let m = wire::open(ev, field);
    wire::uint(ev, annotation::NAME_IID, name_iid);
    wire::uint(ev, annotation::STRING_VALUE_IID, iid);
    wire::close(ev, m);
}

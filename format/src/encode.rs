//! Writing records in the on-disk encoding.

use crate::record::{encode_payload, payload_kind};
use crate::{BatchWriter, Payload, Record};

/// Appends records to a byte buffer in the on-disk encoding.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    /// The encoded bytes so far.
    pub buf: Vec<u8>,
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Encoder { buf: Vec::new() }
    }

    fn begin(&mut self, kind: u16, tid: u32, ts: u64) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&kind.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf.extend_from_slice(&tid.to_le_bytes());
        self.buf.extend_from_slice(&ts.to_le_bytes());
        start
    }

    fn end(&mut self, start: usize) {
        while !(self.buf.len() - start).is_multiple_of(8) {
            self.buf.push(0);
        }
        let len = (self.buf.len() - start) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Appends one record of `kind` whose payload bytes are `payload`
    /// (zero-padded to 8 bytes): for writers that build payloads
    /// themselves, as the BPF programs do.
    pub fn raw(&mut self, kind: u16, tid: u32, ts: u64, payload: &[u8]) {
        let s = self.begin(kind, tid, ts);
        self.buf.extend_from_slice(payload);
        self.end(s);
    }

    /// Encodes one record.
    pub fn record(&mut self, r: &Record) {
        if let Payload::MethodBatch(p) = &r.payload {
            // The writer frames its own records: a batch may need several.
            let mut w = BatchWriter::new(r.tid);
            for e in &p.events {
                w.push(&mut self.buf, e.ts, e.method as u64, e.kind);
            }
            w.finish(&mut self.buf);
            return;
        }
        let s = self.begin(payload_kind(&r.payload), r.tid, r.ts);
        encode_payload(&r.payload, &mut self.buf);
        self.end(s);
    }
}

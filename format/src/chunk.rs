//! The CHUNK record that starts every chunk file of a ring recording
//! (`--max-size`, `--max-age`; docs/FORMAT.md, "Ring recordings").
//!
//! A chunk restates, right after its CHUNK record, what its later records
//! refer to (its *prologue*: definitions, live threads, open frames …), so
//! that it can be read without the chunks before it. A reader that did
//! read the previous chunk skips those `prologue` records: they would
//! repeat what it has seen.

use crate::RECORD_HEADER_LEN;

/// Bytes of a CHUNK record, header included.
pub const CHUNK_RECORD_LEN: usize = RECORD_HEADER_LEN + 16;

/// Payload of [`kind::CHUNK`](crate::kind::CHUNK) and
/// [`kind::JVM_CHUNK`](crate::kind::JVM_CHUNK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// The chunk's number in its stream, from 0.
    pub seq: u64,
    /// How many records after this one restate what came before the chunk.
    pub prologue: u32,
}

impl Chunk {
    /// The whole record (`kind`: [`kind::CHUNK`](crate::kind::CHUNK) or
    /// [`kind::JVM_CHUNK`](crate::kind::JVM_CHUNK); tid 0, `ts` = the
    /// chunk's start).
    pub fn record(&self, kind: u16, ts: u64) -> [u8; CHUNK_RECORD_LEN] {
        let mut b = [0u8; CHUNK_RECORD_LEN];
        b[..2].copy_from_slice(&kind.to_le_bytes());
        b[2..4].copy_from_slice(&(CHUNK_RECORD_LEN as u16).to_le_bytes());
        b[8..16].copy_from_slice(&ts.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..28].copy_from_slice(&self.prologue.to_le_bytes());
        b
    }

    /// Parses a CHUNK payload; None if it is too short.
    pub fn parse(payload: &[u8]) -> Option<Chunk> {
        Some(Chunk {
            seq: u64::from_le_bytes(payload.get(..8)?.try_into().ok()?),
            prologue: u32::from_le_bytes(payload.get(8..12)?.try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_record_decodes_as_itself() {
        let c = Chunk { seq: 7, prologue: 42 };
        let rec = c.record(crate::kind::JVM_CHUNK, 1234);
        let raw = crate::Decoder::new(&rec, 0).next_raw().unwrap().unwrap();
        assert_eq!((raw.kind, raw.tid, raw.ts), (crate::kind::JVM_CHUNK, 0, 1234));
        assert_eq!(Chunk::parse(raw.payload), Some(c));
    }
}

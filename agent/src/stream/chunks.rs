//! A ring recording's JVM stream (`chunk_bytes`, `chunk_ms`): the stream
//! is written as numbered chunk files `jvm-<pid>.<seq>.bin`, each a stream
//! of its own that begins with a JVM_CHUNK record and a prologue restating
//! what its records refer to (docs/FORMAT.md, "Ring recordings"), so that
//! a reader can begin with any chunk once the older ones are deleted.
//!
//! The [`Ledger`] notes every record appended to the stream, as the
//! recorder appends it: the JVM's start, the method definitions, the JVM's
//! code (generated code, compiled methods still loaded with their
//! inlining, `Method*` addresses), the demoted and trivial methods, and per thread its
//! THREAD_START, the frames it has open (each entry with its own time, so
//! that exits in the new chunk pair with them) and the JVM-level blocks it
//! is in; and a GC in progress. [`Ledger::prologue`] restates them.
//! Virtual threads' mounts are not restated.

use std::collections::HashMap;
use std::sync::Arc;

use crate::out_dir::OutDir;
use jtrace_format::{batch_events, kind, BatchedKind, Chunk, Encoder, MethodEvent, Payload, Record};

/// When the stream begins a new chunk, and where.
#[derive(Debug, Clone)]
pub(crate) struct ChunkPlan {
    /// Past this many bytes (0: no size bound).
    pub(crate) bytes: u64,
    /// Past this age in ns (0: no age bound).
    pub(crate) ns: u64,
    /// The trace directory.
    pub(crate) dir: Arc<OutDir>,
}

impl ChunkPlan {
    /// The file name of chunk `seq` of this JVM's stream.
    pub(crate) fn file(&self, seq: u64) -> String {
        let stream = format!("{}{}", jtrace_format::JVM_FILE_PREFIX, std::process::id());
        jtrace_format::chunk_file(&stream, seq)
    }

    /// How far ahead of the data a chunk's file may be allocated: an
    /// eighth of a chunk (what is allocated counts against the ring's size).
    pub(crate) fn max_step(&self) -> u64 {
        match self.bytes {
            0 => u64::MAX,
            b => b / 8,
        }
    }

    /// Whether a chunk holding `bytes` bytes, begun at `started`, is due to end at `now`.
    pub(crate) fn due(&self, bytes: u64, started: u64, now: u64) -> bool {
        (self.bytes > 0 && bytes >= self.bytes) || (self.ns > 0 && now.saturating_sub(started) >= self.ns)
    }
}

/// What one thread has open.
#[derive(Default)]
struct ThreadLedger {
    start: Option<Vec<u8>>,
    /// Open frames: (method id, entry time).
    frames: Vec<(u64, u64)>,
    /// Open JVM-level blocks: their begin records.
    blocks: Vec<Vec<u8>>,
}

/// What the stream written so far holds that later records refer to.
#[derive(Default)]
pub(crate) struct Ledger {
    jvm_start: Vec<u8>,
    defs: Vec<u8>,
    code: Vec<u8>,
    /// COMPILED_METHOD_LOAD and its COMPILED_INLINE records, by code address.
    compiled: HashMap<u64, Vec<u8>>,
    demoted: Vec<u8>,
    threads: HashMap<u32, ThreadLedger>,
    gc: Option<Vec<u8>>,
}

fn u64_at(p: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
}

/// The block a begin record's kind is ended by.
fn ends(begin: u16) -> Option<u16> {
    match begin {
        kind::MONITOR_CONTENDED_ENTER => Some(kind::MONITOR_CONTENDED_ENTERED),
        kind::MONITOR_WAIT => Some(kind::MONITOR_WAITED),
        kind::PARK_BEGIN => Some(kind::PARK_END),
        kind::SLEEP_BEGIN => Some(kind::SLEEP_END),
        _ => None,
    }
}

impl Ledger {
    /// Notes whole records just appended to the stream.
    pub(crate) fn note(&mut self, mut bytes: &[u8]) {
        while let Some(Ok(raw)) = jtrace_format::Decoder::new(bytes, 0).next_raw() {
            let len = 16 + raw.payload.len();
            let rec = &bytes[..len];
            self.note_one(raw.kind, raw.tid, raw.ts, raw.payload, rec);
            bytes = &bytes[len..];
        }
    }

    fn note_one(&mut self, k: u16, tid: u32, ts: u64, p: &[u8], rec: &[u8]) {
        match k {
            kind::JVM_START => self.jvm_start = rec.to_vec(),
            // Restated with JVM_START: a reader pairs the JVM's tids by it.
            kind::JVM_PIDNS => self.jvm_start.extend_from_slice(rec),
            kind::METHOD_DEF => self.defs.extend_from_slice(rec),
            kind::CODE_BLOB | kind::METHOD_ADDRS | kind::NATIVE_BIND => self.code.extend_from_slice(rec),
            kind::COMPILED_METHOD_LOAD => {
                if let Some(addr) = u64_at(p, 8) {
                    self.compiled.insert(addr, rec.to_vec());
                }
            }
            kind::COMPILED_INLINE => {
                if let Some(c) = u64_at(p, 0).and_then(|a| self.compiled.get_mut(&a)) {
                    c.extend_from_slice(rec);
                }
            }
            kind::COMPILED_METHOD_UNLOAD => {
                if let Some(addr) = u64_at(p, 8) {
                    self.compiled.remove(&addr);
                }
            }
            kind::METHOD_DEMOTED | kind::METHOD_TRIVIAL => self.demoted.extend_from_slice(rec),
            kind::GC_START => self.gc = Some(rec.to_vec()),
            kind::GC_END => self.gc = None,
            kind::THREAD_START => self.threads.entry(tid).or_default().start = Some(rec.to_vec()),
            kind::THREAD_END => {
                self.threads.remove(&tid);
            }
            kind::METHOD_ENTRY | kind::METHOD_EXIT => {
                if let Some(m) = u64_at(p, 0) {
                    self.frame(tid, m, ts, k == kind::METHOD_ENTRY);
                }
            }
            kind::METHOD_BATCH => {
                if let Some(events) = batch_events(ts, p) {
                    let th = self.threads.entry(tid).or_default();
                    for e in events {
                        frame_of(th, u64::from(e.method), e.ts, e.kind == BatchedKind::Entry);
                    }
                }
            }
            kind::MONITOR_CONTENDED_ENTER | kind::MONITOR_WAIT | kind::PARK_BEGIN | kind::SLEEP_BEGIN => {
                self.threads.entry(tid).or_default().blocks.push(rec.to_vec());
            }
            kind::MONITOR_CONTENDED_ENTERED | kind::MONITOR_WAITED | kind::PARK_END | kind::SLEEP_END => {
                if let Some(th) = self.threads.get_mut(&tid) {
                    let begun = |b: &Vec<u8>| ends(u16::from_le_bytes([b[0], b[1]])) == Some(k);
                    if let Some(i) = th.blocks.iter().rposition(begun) {
                        th.blocks.truncate(i);
                    }
                }
            }
            _ => {}
        }
    }

    fn frame(&mut self, tid: u32, method: u64, ts: u64, entry: bool) {
        frame_of(self.threads.entry(tid).or_default(), method, ts, entry);
    }

    /// The prologue of chunk `seq` begun at `ts`: its JVM_CHUNK record and
    /// the records restating what came before.
    pub(crate) fn prologue(&self, seq: u64, ts: u64) -> Vec<u8> {
        let mut enc = Encoder::new();
        enc.buf.extend_from_slice(&self.jvm_start);
        enc.buf.extend_from_slice(&self.defs);
        enc.buf.extend_from_slice(&self.code);
        let mut addrs: Vec<&u64> = self.compiled.keys().collect();
        addrs.sort();
        for a in addrs {
            enc.buf.extend_from_slice(&self.compiled[a]);
        }
        enc.buf.extend_from_slice(&self.demoted);
        let mut tids: Vec<&u32> = self.threads.keys().collect();
        tids.sort();
        for &tid in tids {
            let th = &self.threads[&tid];
            if let Some(s) = &th.start {
                enc.buf.extend_from_slice(s);
            }
            for &(method, at) in &th.frames {
                enc.record(&Record {
                    tid,
                    ts: at,
                    payload: Payload::MethodEntry(MethodEvent {
                        method,
                        flags: 0,
                        reserved: 0,
                    }),
                });
            }
            for b in &th.blocks {
                enc.buf.extend_from_slice(b);
            }
        }
        if let Some(g) = &self.gc {
            enc.buf.extend_from_slice(g);
        }
        let mut n = 0u32;
        let mut d = jtrace_format::Decoder::new(&enc.buf, 0);
        while let Some(Ok(_)) = d.next_raw() {
            n += 1;
        }
        let mut out = Chunk { seq, prologue: n }.record(kind::JVM_CHUNK, ts).to_vec();
        out.extend_from_slice(&enc.buf);
        out
    }
}

/// An entry opens a frame; an exit closes the innermost open frame of its
/// method and any left open above it (their exits were not recorded).
fn frame_of(th: &mut ThreadLedger, method: u64, ts: u64, entry: bool) {
    if entry {
        th.frames.push((method, ts));
    } else if let Some(i) = th.frames.iter().rposition(|&(m, _)| m == method) {
        th.frames.truncate(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::{JvmBlock, MethodDef, ThreadStart};

    fn enc(recs: &[Record]) -> Vec<u8> {
        let mut e = Encoder::new();
        for r in recs {
            e.record(r);
        }
        e.buf
    }

    fn ev(tid: u32, ts: u64, method: u64, entry: bool) -> Record {
        let e = MethodEvent {
            method,
            flags: 0,
            reserved: 0,
        };
        Record {
            tid,
            ts,
            payload: if entry {
                Payload::MethodEntry(e)
            } else {
                Payload::MethodExit(e)
            },
        }
    }

    /// The prologue restates the definition, the thread's start, its open
    /// frames with their entry times (not the closed one) and the block it
    /// is in (not the one it left), after a JVM_CHUNK that counts them.
    #[test]
    fn the_prologue_restates_open_frames_and_blocks() {
        let block = |k: u16, ts| Record {
            tid: 7,
            ts,
            payload: Payload::Jvm(
                k,
                JvmBlock {
                    arg: 0,
                    class: "L".into(),
                },
            ),
        };
        let mut l = Ledger::default();
        l.note(&enc(&[
            Record {
                tid: 7,
                ts: 1,
                payload: Payload::MethodDef(MethodDef {
                    method: 3,
                    class: "C".into(),
                    name: "m".into(),
                    signature: "()V".into(),
                }),
            },
            Record {
                tid: 7,
                ts: 2,
                payload: Payload::ThreadStart(ThreadStart {
                    daemon: 0,
                    name: "t".into(),
                    group: "g".into(),
                    parent: String::new(),
                }),
            },
            ev(7, 10, 3, true),
            ev(7, 11, 3, true),
            ev(7, 12, 3, false),
            block(kind::SLEEP_BEGIN, 13),
            block(kind::SLEEP_END, 14),
            block(kind::MONITOR_WAIT, 15),
        ]));
        let p = l.prologue(4, 100);
        let recs: Vec<Record> = jtrace_format::Decoder::new(&p[32..], 32).map(|r| r.unwrap()).collect();
        let raw = jtrace_format::Decoder::new(&p, 0).next_raw().unwrap().unwrap();
        assert_eq!(raw.kind, kind::JVM_CHUNK);
        assert_eq!(Chunk::parse(raw.payload), Some(Chunk { seq: 4, prologue: 4 }));
        assert_eq!(recs.len(), 4);
        assert!(matches!(recs[0].payload, Payload::MethodDef(_)));
        assert!(matches!(recs[1].payload, Payload::ThreadStart(_)));
        assert_eq!(recs[2], ev(7, 10, 3, true));
        assert_eq!(recs[3], block(kind::MONITOR_WAIT, 15));
    }
}

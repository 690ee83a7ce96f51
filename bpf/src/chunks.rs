//! A ring recording's kernel stream (`--max-size`, `--max-age`): when to
//! begin a new chunk file, and what each chunk restates so that it reads
//! without the ones before it (docs/FORMAT.md, "Ring recordings").
//!
//! A chunk's prologue holds the probe names (PROBE_DEF), every MAPPING,
//! KSYM and FILE_PATH written so far, and the live threads' last FORK,
//! COMM or EXEC. Stacks are not restated wholesale: at a new chunk the BPF
//! side forgets which stacks it wrote (ids below a floor no longer count
//! as written, [`Rotation::stack_floor`]), so it writes each again on its
//! next use; a record already on its way that refers to an older id gets
//! that STACK record copied in before it, from those of the last two chunks.

use std::collections::{HashMap, HashSet};
use std::fs::File;

use jtrace_format::{kind, Chunk};

/// Where and when the kernel stream's chunks begin; see
/// [`RecorderConfig::chunks`](crate::RecorderConfig::chunks).
pub struct KernelChunks {
    /// A new chunk once the current one holds this many bytes (0: no size bound).
    pub bytes: u64,
    /// A new chunk once the current one is this old, in ns (0: no age bound).
    pub max_ns: u64,
    /// Creates the file of chunk `seq` (≥ 1; the configuration's `out` is
    /// chunk 0), empty and open for writing.
    pub create: Box<dyn FnMut(u64) -> anyhow::Result<File> + Send>,
}

impl std::fmt::Debug for KernelChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelChunks")
            .field("bytes", &self.bytes)
            .field("max_ns", &self.max_ns)
            .finish()
    }
}

/// The sink's record of what the chunks need.
pub(crate) struct Rotation {
    pub(crate) plan: KernelChunks,
    /// The current chunk's number.
    pub(crate) seq: u64,
    /// When it began (CLOCK_MONOTONIC ns).
    pub(crate) started: u64,
    /// PROBE_DEF records, as written at the start.
    probe_defs: Vec<u8>,
    /// MAPPING, KSYM and FILE_PATH records written so far.
    names: Vec<u8>,
    /// Per live thread, its last FORK, COMM or EXEC record, and its
    /// TASK_NS record if it is in a pid namespace.
    tasks: HashMap<u32, Vec<u8>>,
    task_ns: HashMap<u32, Vec<u8>>,
    /// STACK records of the current and the previous chunk, by id.
    stacks: HashMap<u32, Vec<u8>>,
    previous_stacks: HashMap<u32, Vec<u8>>,
    /// Stack ids defined in the current chunk.
    defined: HashSet<u32>,
    /// The BPF side is to forget the stacks it wrote (set at a new chunk).
    pub(crate) stack_floor: bool,
}

/// The u16 at `at` of a record.
fn u16_at(rec: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([rec[at], rec[at + 1]])
}

/// The u32 at `at` of a record, if it has one.
fn u32_at(rec: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(rec.get(at..at + 4)?.try_into().ok()?))
}

impl Rotation {
    /// Chunk 0 of `plan`, begun at `started`, whose first records are `probe_defs`.
    pub(crate) fn new(plan: KernelChunks, started: u64, probe_defs: Vec<u8>) -> Rotation {
        Rotation {
            plan,
            seq: 0,
            started,
            probe_defs,
            names: Vec::new(),
            tasks: HashMap::new(),
            task_ns: HashMap::new(),
            stacks: HashMap::new(),
            previous_stacks: HashMap::new(),
            defined: HashSet::new(),
            stack_floor: false,
        }
    }

    /// Whether a chunk that holds `bytes` bytes at `now` is due to end.
    pub(crate) fn due(&self, bytes: u64, now: u64) -> bool {
        (self.plan.bytes > 0 && bytes >= self.plan.bytes)
            || (self.plan.max_ns > 0 && now.saturating_sub(self.started) >= self.plan.max_ns)
    }

    /// Notes one record about to be written, after appending to `out` the
    /// STACK records it refers to that the current chunk does not have yet;
    /// returns how many it appended.
    pub(crate) fn note(&mut self, rec: &[u8], out: &mut Vec<u8>) -> u64 {
        if rec.len() < 16 {
            return 0;
        }
        let tid = u32_at(rec, 4).unwrap_or(0);
        match u16_at(rec, 0) {
            // A process left out at its exec is over for the stream.
            kind::EXEC if crate::stack_names::exec_of(rec).is_some_and(|e| e.2) => {
                self.tasks.remove(&tid);
                self.task_ns.remove(&tid);
            }
            kind::FORK | kind::COMM | kind::EXEC => {
                self.tasks.insert(tid, rec.to_vec());
            }
            kind::TASK_NS => {
                self.task_ns.insert(tid, rec.to_vec());
            }
            kind::EXIT => {
                self.tasks.remove(&tid);
                self.task_ns.remove(&tid);
            }
            kind::MAPPING | kind::KSYM | kind::FILE_PATH => self.names.extend_from_slice(rec),
            // A probe added while recording (late_safepoints.rs).
            kind::PROBE_DEF => self.probe_defs.extend_from_slice(rec),
            kind::STACK => {
                if let Some(id) = u32_at(rec, 16) {
                    self.defined.insert(id);
                    self.stacks.insert(id, rec.to_vec());
                }
            }
            kind::SWITCH_OUT if rec.len() >= 40 => return self.refer(&[u32_at(rec, 32), u32_at(rec, 36)], out),
            kind::CPU_SAMPLE => return self.refer(&[u32_at(rec, 24), u32_at(rec, 28)], out),
            _ => {}
        }
        0
    }

    /// Appends to `out` the definitions of `ids` this chunk lacks.
    fn refer(&mut self, ids: &[Option<u32>], out: &mut Vec<u8>) -> u64 {
        let mut n = 0;
        for &id in ids.iter().flatten() {
            if id == 0 || self.defined.contains(&id) {
                continue;
            }
            let def = self.stacks.get(&id).or_else(|| self.previous_stacks.get(&id)).cloned();
            if let Some(def) = def {
                out.extend_from_slice(&def);
                self.defined.insert(id);
                self.stacks.insert(id, def);
                n += 1;
            }
        }
        n
    }

    /// Begins chunk `seq + 1` at `now`: its first bytes (stream header,
    /// CHUNK record, prologue) and how many records they hold.
    pub(crate) fn begin_next(&mut self, now: u64) -> (Vec<u8>, u64) {
        self.seq += 1;
        self.started = now;
        self.previous_stacks = std::mem::take(&mut self.stacks);
        self.defined.clear();
        self.stack_floor = true;
        let mut prologue = Vec::with_capacity(self.probe_defs.len() + self.names.len());
        prologue.extend_from_slice(&self.probe_defs);
        prologue.extend_from_slice(&self.names);
        let mut tids: Vec<&u32> = self.tasks.keys().collect();
        tids.sort();
        for t in tids {
            prologue.extend_from_slice(&self.tasks[t]);
        }
        let mut ns_tids: Vec<&u32> = self.task_ns.keys().collect();
        ns_tids.sort();
        for t in ns_tids {
            prologue.extend_from_slice(&self.task_ns[t]);
        }
        let mut n = 0u32;
        let mut d = jtrace_format::Decoder::new(&prologue, 0);
        while let Some(Ok(_)) = d.next_raw() {
            n += 1;
        }
        let mut head = jtrace_format::FileHeader::new(jtrace_format::KERNEL_MAGIC)
            .to_bytes()
            .to_vec();
        head.extend_from_slice(
            &Chunk {
                seq: self.seq,
                prologue: n,
            }
            .record(kind::CHUNK, now),
        );
        head.extend_from_slice(&prologue);
        (head, u64::from(n) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u16, tid: u32, ts: u64, words: &[u32]) -> Vec<u8> {
        let len = (16 + 4 * words.len()).next_multiple_of(8);
        let mut r = vec![0u8; len];
        r[..2].copy_from_slice(&kind.to_le_bytes());
        r[2..4].copy_from_slice(&(len as u16).to_le_bytes());
        r[4..8].copy_from_slice(&tid.to_le_bytes());
        r[8..16].copy_from_slice(&ts.to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            r[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        r
    }

    /// A new chunk restates the probes, names and live threads (not the
    /// exited one), and a switch-out in it that refers to a stack of the
    /// previous chunk gets its STACK record first, once.
    #[test]
    fn a_new_chunk_restates_what_its_records_refer_to() {
        let plan = KernelChunks {
            bytes: 100,
            max_ns: 0,
            create: Box::new(|_| anyhow::bail!("unused")),
        };
        let probe = rec(kind::PROBE_DEF, 0, 0, &[0, 0]);
        let mut r = Rotation::new(plan, 10, probe.clone());
        assert!(!r.due(99, 1 << 40) && r.due(100, 11));
        let mut out = Vec::new();
        for x in [
            rec(kind::COMM, 5, 1, &[5, 0, 0, 0, 0, 0]),
            rec(kind::COMM, 6, 2, &[5, 0, 0, 0, 0, 0]),
            rec(kind::EXIT, 6, 3, &[5, 0, 0, 0, 0, 0]),
            rec(kind::KSYM, 0, 0, &[1, 0, 2, 0, 0]),
            rec(kind::STACK, 5, 4, &[7, 5, 1, 0]),
        ] {
            r.note(&x, &mut out);
        }
        assert!(out.is_empty());
        let (head, n) = r.begin_next(50);
        // CHUNK + PROBE_DEF + KSYM + tid 5's COMM.
        assert_eq!(n, 4);
        let recs: Vec<_> = jtrace_format::Decoder::new(&head[16..], 16)
            .map(|x| x.unwrap())
            .collect();
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[3].tid, 5);
        assert_eq!(r.seq, 1);
        assert!(r.stack_floor);
        let sw = rec(kind::SWITCH_OUT, 5, 60, &[5, 1, 0, 0, 0, 7]);
        r.note(&sw, &mut out);
        assert_eq!(out, rec(kind::STACK, 5, 4, &[7, 5, 1, 0]));
        r.note(&sw, &mut out);
        assert_eq!(out.len(), 32, "defined once per chunk");
    }
}

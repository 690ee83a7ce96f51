//! JVMs in pid namespaces (containers). A JVM's agent learns its threads'
//! tids with gettid() on them, which inside a pid namespace gives the
//! namespace's numbers (2, 21, 22 …); the kernel records every thread by
//! its host tid. The JVM stream's JVM_PIDNS record says which namespace
//! its JVM is in; the kernel stream's TASK_NS records pair each task's
//! number there with its host tid. The reader gives every JVM record its
//! host tid (and the JVM its host pid), so both streams meet on one thread.
//!
//! A thread of such a JVM that no TASK_NS record pairs (the kernel stream
//! was cut, or written before jtrace knew namespaces) keeps an id of its
//! own, [`UNMATCHED_TID`] | its namespace tid, far from any kernel tid, and
//! is marked unmatched: the kernel's events of its real tid cannot be told
//! apart, so its time is not covered, never CPU.

use super::records::{RawRecords, RecordReader};
use super::streams::{Chain, StreamFiles};
use jtrace_format::{self as fmt, kind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The bit that marks a thread id as an unmatched namespace thread's (see
/// the module docs). Kernel tids are below 2^22; virtual threads use bit 31.
pub const UNMATCHED_TID: u32 = 0x4000_0000;

/// How many records of a JVM stream are looked at for its JVM_PIDNS (the
/// agent writes it right after JVM_START; a chunk restates it early).
const HEAD_RECORDS: usize = 64;

/// A task's host ids from a time on.
#[derive(Debug, Clone, Copy)]
struct HostIds {
    from: u64,
    tid: u32,
    tgid: u32,
}

/// The pairing of namespace tids with host tids (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct PidNamespaces {
    /// (namespace inode, tid there) → its host ids, in time order (a
    /// namespace's tid can be reused by a later task).
    tasks: HashMap<(u64, u32), Vec<HostIds>>,
    /// Each JVM stream (by path) in a namespace other than the initial
    /// one: that namespace's inode.
    streams: HashMap<PathBuf, u64>,
    /// Host tid → its tid in its namespace, for the threads paired.
    pub(crate) ns_tids: HashMap<u32, u32>,
    /// The unmatched threads' ids given (see [`UNMATCHED_TID`]).
    pub(crate) unmatched: std::collections::BTreeSet<u32>,
}

impl PidNamespaces {
    /// Finds the JVM streams of JVMs in a pid namespace and, if there are
    /// any, the TASK_NS records of the kernel stream (one pass over it,
    /// only then).
    pub(crate) fn read(kernel: &StreamFiles, jvms: &[StreamFiles]) -> PidNamespaces {
        let mut ns = PidNamespaces::default();
        for s in jvms {
            if let Some(ino) = s.parts.first().and_then(|p| stream_pidns(p)) {
                if ino != fmt::INITIAL_PIDNS_INO {
                    ns.streams.insert(s.path.clone(), ino);
                }
            }
        }
        if ns.streams.is_empty() || kernel.parts.is_empty() {
            return ns;
        }
        let Ok(mut recs) = Chain::open(kernel, fmt::KERNEL_MAGIC) else {
            return ns;
        };
        while let Some(Ok(raw)) = recs.next_raw() {
            if raw.kind != kind::TASK_NS {
                continue;
            }
            if let Some(t) = fmt::TaskNs::from_bytes(raw.payload) {
                let ids = HostIds {
                    from: raw.ts,
                    tid: raw.tid,
                    tgid: t.tgid,
                };
                ns.tasks.entry((t.pidns_ino, t.ns_tid)).or_default().push(ids);
            }
        }
        for v in ns.tasks.values_mut() {
            v.sort_by_key(|h| h.from);
        }
        ns
    }

    /// The host ids of `tid` (a tid in the namespace of the JVM stream
    /// `path`) at `ts`: the latest pairing from before `ts`, else the
    /// first one (the agent may name a thread before the kernel saw its
    /// fork: attach).
    fn host(&self, path: &Path, tid: u32, ts: u64) -> Option<Option<HostIds>> {
        let ino = *self.streams.get(path)?;
        let v = self.tasks.get(&(ino, tid));
        Some(v.map(|v| {
            let i = v.partition_point(|h| h.from <= ts);
            v[i.saturating_sub(1)]
        }))
    }

    /// The host tid of a record tid of the JVM stream `path` at `ts`: the
    /// tid itself for a JVM of the initial namespace, a virtual thread's
    /// or a process-wide record (0); else its pairing, or its unmatched id.
    #[inline]
    pub(crate) fn host_tid(&mut self, path: &Path, tid: u32, ts: u64) -> u32 {
        if self.streams.is_empty() || tid == 0 || fmt::virtual_thread_id(tid).is_some() {
            return tid;
        }
        match self.host(path, tid, ts) {
            None => tid,
            Some(Some(h)) => {
                self.ns_tids.insert(h.tid, tid);
                h.tid
            }
            Some(None) => {
                let id = UNMATCHED_TID | (tid & (UNMATCHED_TID - 1));
                self.unmatched.insert(id);
                id
            }
        }
    }

    /// The host pid of JVM `pid` (its own number, from JVM_START) of the
    /// stream `path`, if it is in a pid namespace and paired.
    pub(crate) fn host_pid(&self, path: &Path, pid: u32, ts: u64) -> u32 {
        match self.host(path, pid, ts) {
            Some(Some(h)) => h.tgid,
            _ => pid,
        }
    }
}

/// The pid namespace inode a JVM stream's JVM_PIDNS record gives, if it
/// has one among its first records.
fn stream_pidns(path: &Path) -> Option<u64> {
    let (_, mut recs) = RecordReader::open(path, fmt::JVM_MAGIC).ok()?;
    for _ in 0..HEAD_RECORDS {
        let raw = recs.next_raw()?.ok()?;
        if raw.kind == kind::JVM_PIDNS {
            return fmt::JvmPidNs::from_payload(raw.payload).map(|p| p.pidns_ino);
        }
    }
    None
}

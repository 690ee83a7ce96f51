//! The stacks of a trace as read: the kernel and user stacks by
//! id, which pair of them each switch-out or CPU sample had, and what names
//! their addresses (the processes' mappings, the kernel symbols, each JVM's
//! code: compiled methods with their inlining, generated code, `Method*`s).
//! [`crate::Symbolizer`] names them (`symbolize`, with `source_lines` for
//! DWARF lines); `tail` is the time after a thread's last switch-out;
//! `blame`, the frame a block is blamed on.

pub(crate) mod blame;
pub mod scale;
pub(crate) mod source_lines;
pub(crate) mod symbolize;
pub mod tail;

use crate::model::event::MethodIdx;
use jtrace_format as fmt;
use jtrace_symbols::codemap::CodeMap;
use std::collections::{BTreeMap, HashMap};

/// The stacks of one switch-out or CPU sample: its process, its kernel
/// stack id and its user stack id (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackPair {
    /// The thread's process.
    pub tgid: u32,
    /// Kernel stack id (0: none).
    pub kstack: u32,
    /// User stack id (0: none).
    pub ustack: u32,
}

/// Compiled code of a JVM: its method and what it inlines where.
#[derive(Debug, Clone, Default)]
pub struct CompiledCode {
    /// The compiled method.
    pub method: Option<MethodIdx>,
    /// Compilation tier (1–3 C1, 4 C2, 0 unknown).
    pub tier: u32,
    /// By pc (sorted): the methods at that pc, innermost first (the last
    /// is the compiled method); `None` for a method id never defined.
    pub inline: Vec<(u64, Vec<Option<MethodIdx>>)>,
}

/// A piece of code a JVM generated (CODE_BLOB).
#[derive(Debug, Clone)]
pub struct Blob {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// The interpreter (its frames carry a `Method*`).
    pub interpreter: bool,
    /// HotSpot's name.
    pub name: String,
}

/// What names the Java frames of one JVM.
#[derive(Debug, Default)]
pub struct JvmCode {
    /// Compiled methods over time (COMPILED_METHOD_LOAD/UNLOAD, COMPILED_INLINE).
    pub compiled: CodeMap<CompiledCode>,
    /// Generated code (sorted by start).
    pub blobs: Vec<Blob>,
    /// Method of each `Method*` over time (METHOD_ADDRS).
    pub methods: MethodAddrs,
    /// The native function (its symbol) each bound native method calls.
    pub natives: HashMap<MethodIdx, String>,
}

/// The method each `Method*` stands for, over time: a retransformation
/// gives a class's methods new `Method*`s (described again), and the
/// memory of the old ones may later hold another method's.
#[derive(Debug, Default)]
pub struct MethodAddrs {
    /// By `Method*`: (described at, method), in time order.
    by_addr: HashMap<u64, Vec<(u64, MethodIdx)>>,
}

impl MethodAddrs {
    /// `addr` is `method` from `ts` on.
    pub fn describe(&mut self, addr: u64, ts: u64, method: MethodIdx) {
        let v = self.by_addr.entry(addr).or_default();
        let at = v.partition_point(|&(t, _)| t <= ts);
        v.insert(at, (ts, method));
    }

    /// The method `addr` stood for at `ts`: the latest description at or
    /// before it, else the first (a frame seen before its class was
    /// described, as when recording begins).
    pub fn at(&self, addr: u64, ts: u64) -> Option<MethodIdx> {
        let v = self.by_addr.get(&addr)?;
        let i = v.partition_point(|&(t, _)| t <= ts);
        v.get(i.saturating_sub(1)).map(|&(_, m)| m)
    }
}

/// A stack's frames as recorded, with the time of its first use (the
/// JIT code map is looked up at that time).
#[derive(Debug, Clone)]
pub struct RawStack {
    /// The STACK record.
    pub stack: fmt::Stack,
    /// Its first use.
    pub ts: u64,
}

/// The stacks of a trace and what names them.
#[derive(Debug, Default)]
pub struct Stacks {
    /// Kernel stacks by id.
    pub kernel: HashMap<u32, RawStack>,
    /// User stacks by id.
    pub user: HashMap<u32, RawStack>,
    /// The pairs switch-outs and samples refer to ([`crate::Event::Stack`]).
    pub pairs: Vec<StackPair>,
    pair_ids: HashMap<StackPair, u32>,
    /// Executable mappings of each process (MAPPING) with the time they
    /// were read, in record order.
    pub mappings: HashMap<u32, Vec<(u64, fmt::Mapping)>>,
    /// Exec times of each process: a mapping read after an exec does not
    /// name a stack from before it.
    pub execs: HashMap<u32, Vec<u64>>,
    /// Kernel symbols (KSYM), sorted by start once read.
    pub ksyms: Vec<fmt::Ksym>,
    /// Each JVM's code, by pid.
    pub jvms: HashMap<u32, JvmCode>,
    /// CPU samples by (thread, pair index).
    pub cpu_samples: BTreeMap<(u32, u32), u64>,
    /// Each CPU sample as (time, thread, pair index), in record order: what
    /// a view of a time window counts ([`Stacks::cpu_samples`] sums them).
    pub cpu_sample_times: Vec<(u64, u32, u32)>,
    /// The last use of each user stack id (its first is its STACK
    /// record's time): a JIT frame is named only if the same code was at
    /// its pc over all of the stack's uses.
    pub user_last_use: HashMap<u32, u64>,
    /// BLOCK_STACK records read (deferred stacks), by what they hold.
    pub block_stacks: BlockStackCounts,
}

/// The BLOCK_STACK records of a trace (stacks taken after their block).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockStackCounts {
    /// Records read.
    pub records: u64,
    /// Of those, short blocks' stacks taken as samples.
    pub sampled: u64,
    /// Of those, without a user stack (the thread's registers moved
    /// before the walk, or it did not return to user mode).
    pub no_user: u64,
}

impl Stacks {
    /// The index of a pair in [`Stacks::pairs`] (interned).
    pub(crate) fn pair(&mut self, p: StackPair) -> u32 {
        if let Some(&i) = self.pair_ids.get(&p) {
            return i;
        }
        self.pairs.push(p);
        let i = (self.pairs.len() - 1) as u32;
        self.pair_ids.insert(p, i);
        i
    }

    /// User stack `id` used at `ts`.
    pub(crate) fn use_user(&mut self, id: u32, ts: u64) {
        if id != 0 {
            let last = self.user_last_use.entry(id).or_insert(ts);
            *last = (*last).max(ts);
        }
    }

    /// The stacks of a block taken after it (a BLOCK_STACK with `flags`),
    /// its user stack (if any) `user` in use from the block's start `out_ts`.
    pub(crate) fn note_block_stack(&mut self, flags: u32, user: u32, out_ts: u64) {
        self.block_stacks.records += 1;
        self.block_stacks.sampled += u64::from(flags & fmt::BLOCK_STACK_SAMPLED != 0);
        self.block_stacks.no_user += u64::from(flags & fmt::BLOCK_STACK_NO_USER != 0);
        // Its frames held since the switch-out, before the STACK record.
        if let Some(r) = self.user.get_mut(&user) {
            r.ts = r.ts.min(out_ts);
        }
    }

    /// A STACK record at `ts`.
    pub(crate) fn add_stack(&mut self, ts: u64, s: fmt::Stack) {
        let table = if s.is_kernel() {
            &mut self.kernel
        } else {
            &mut self.user
        };
        table.entry(s.id).or_insert(RawStack { stack: s, ts });
    }

    /// Whether the trace has any stack.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.cpu_samples.is_empty()
    }

    /// Sorts what lookups need sorted (after reading).
    pub(crate) fn finish(&mut self) {
        self.ksyms.sort_by_key(|k| k.start);
        for j in self.jvms.values_mut() {
            j.compiled.finish();
            j.blobs.sort_by_key(|b| b.start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_address_names_the_method_described_at_the_time() {
        let mut m = MethodAddrs::default();
        m.describe(0x1000, 500, 7); // reused after a retransformation freed it
        m.describe(0x1000, 100, 3);
        m.describe(0x2000, 300, 9);
        assert_eq!(m.at(0x1000, 50), Some(3), "before any description: the first");
        assert_eq!(m.at(0x1000, 100), Some(3));
        assert_eq!(m.at(0x1000, 499), Some(3));
        assert_eq!(m.at(0x1000, 500), Some(7));
        assert_eq!(m.at(0x1000, 10_000), Some(7));
        assert_eq!(m.at(0x2000, 0), Some(9));
        assert_eq!(m.at(0x3000, 400), None);
    }
}

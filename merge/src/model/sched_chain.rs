//! Which recorded switch-outs chain on their CPU: the CPU's previous
//! recorded switch put that thread there. On a kernel stream that lost
//! nothing every switch-out of a traced thread does (the thread ran from
//! its switch-in to its switch-out); one that does not marks lost or
//! inconsistent records. A view that writes a switch without its previous
//! thread, leaving the reader to take it from the CPU's last switch
//! (Perfetto's `compact_sched`), may do so only for switches that chain.
//!
//! Read with the kernel stream, in its order (a CPU's records are in time
//! order in it: the BPF ring takes them one at a time per CPU).

use std::collections::HashSet;

/// Breaks remembered at most; past it no switch is said to chain.
const MAX_BREAKS: usize = 1 << 16;

/// CPUs followed (the kernel's largest NR_CPUS): a damaged record's CPU
/// number past it must not size the per-CPU table (a fuzzed trace asked
/// for 6 GB); its switches do not chain.
const MAX_CPUS: u32 = 8192;

/// The switch-outs that do not chain, found while reading.
#[derive(Debug, Clone, Default)]
pub struct SchedChain {
    /// Per CPU, the thread its last recorded switch put on it (+1; 0: none
    /// seen yet).
    last_next: Vec<u64>,
    /// Switch-outs (tid, ts) that do not chain.
    breaks: HashSet<(u32, u64)>,
    /// More breaks than remembered: nothing chains.
    overflow: bool,
}

impl SchedChain {
    fn last(&mut self, cpu: u32) -> Option<&mut u64> {
        if cpu >= MAX_CPUS {
            return None;
        }
        let i = cpu as usize;
        if i >= self.last_next.len() {
            self.last_next.resize(i + 1, 0);
        }
        Some(&mut self.last_next[i])
    }

    /// A switch-out record: `tid` left `cpu` at `ts` for `next`.
    pub(crate) fn switch_out(&mut self, cpu: u32, ts: u64, tid: u32, next: u32) {
        let chains = match self.last(cpu) {
            Some(last) => {
                let chains = *last == tid as u64 + 1;
                *last = next as u64 + 1;
                chains
            }
            None => false,
        };
        if !chains && !self.overflow {
            self.breaks.insert((tid, ts));
            if self.breaks.len() > MAX_BREAKS {
                self.overflow = true;
                self.breaks = HashSet::new();
            }
        }
    }

    /// A switch-in record: `tid` took `cpu`.
    pub(crate) fn switch_in(&mut self, cpu: u32, tid: u32) {
        if let Some(last) = self.last(cpu) {
            *last = tid as u64 + 1;
        }
    }

    /// Whether the switch-out of `tid` at `ts` chains on its CPU.
    pub fn chains(&self, tid: u32, ts: u64) -> bool {
        !self.overflow && !self.breaks.contains(&(tid, ts))
    }

    /// Switch-outs that do not chain (`None`: more than it remembers).
    pub fn breaks(&self) -> Option<usize> {
        (!self.overflow).then_some(self.breaks.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_out_chains_when_the_cpu_last_switched_to_it() {
        let mut c = SchedChain::default();
        c.switch_out(0, 10, 5, 0); // first on CPU 0: nothing put 5 there
        c.switch_in(0, 7); // 0 -> 7
        c.switch_out(0, 20, 7, 9); // 7 -> 9: chains
        c.switch_out(0, 30, 8, 0); // 8 was not on CPU 0: a break
        c.switch_out(1, 40, 9, 0); // CPU 1 never saw 9
        assert!(!c.chains(5, 10));
        assert!(c.chains(7, 20));
        assert!(!c.chains(8, 30));
        assert!(!c.chains(9, 40));
        assert_eq!(c.breaks(), Some(3));
    }

    #[test]
    fn too_many_breaks_and_nothing_chains() {
        let mut c = SchedChain::default();
        for i in 0..=MAX_BREAKS as u64 {
            c.switch_out(0, i, 1, 2);
        }
        assert_eq!(c.breaks(), None);
        c.switch_in(0, 3);
        c.switch_out(0, u64::MAX, 3, 0);
        assert!(!c.chains(3, u64::MAX));
    }

    /// A damaged record's CPU number (found by tests/fuzz_readers.rs: a
    /// switch on CPU ≈ 750 M made the reader allocate 6 GB and abort) sizes
    /// nothing, and its switches do not chain.
    #[test]
    fn a_cpu_number_past_the_kernels_largest_does_not_chain() {
        let mut c = SchedChain::default();
        c.switch_in(751_622_881, 7);
        c.switch_out(751_622_881, 20, 7, 9);
        assert!(!c.chains(7, 20));
        c.switch_in(3, 7);
        c.switch_out(3, 30, 7, 9);
        assert!(c.chains(7, 30));
        assert_eq!(c.last_next.len(), 4);
    }
}

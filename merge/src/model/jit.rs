//! The JIT history of the traced methods: when each had compiled code.

use crate::model::event::MethodIdx;
use std::collections::HashMap;

/// One method's (time, compiled versions alive from then), by time.
type CompiledVersions = Vec<(u64, i32)>;

/// The JIT history of the traced methods: from the agent's
/// COMPILED_METHOD_LOAD/UNLOAD records, per JVM process and method, how many
/// compiled versions existed from when on.
#[derive(Debug, Clone, Default)]
pub struct JitHistory {
    /// Per JVM whose stream holds JIT records (the others say nothing either
    /// way): its pid and its methods' histories. Indexed, not hashed: the
    /// report asks once per invocation.
    live: Vec<(u32, Vec<CompiledVersions>)>,
    /// Method -> the first time it had compiled code in any JVM.
    first: HashMap<MethodIdx, u64>,
}

impl JitHistory {
    /// Adds one JVM's loads (`true`) and unloads of resolved methods.
    pub(crate) fn add(&mut self, pid: u32, mut changes: Vec<(MethodIdx, u64, bool)>) {
        changes.sort_by_key(|&(m, ts, load)| (m, ts, !load));
        let mut by_method: Vec<CompiledVersions> = Vec::new();
        for (m, ts, load) in changes {
            if by_method.len() <= m as usize {
                by_method.resize(m as usize + 1, Vec::new());
            }
            let v = &mut by_method[m as usize];
            let n = v.last().map_or(0, |&(_, n)| n) + if load { 1 } else { -1 };
            v.push((ts, n.max(0)));
            if n > 0 {
                let first = self.first.entry(m).or_insert(ts);
                *first = (*first).min(ts);
            }
        }
        self.live.push((pid, by_method));
    }

    /// Whether method `m` of JVM `pid` had compiled code at time `ts`:
    /// `None` when that JVM's stream has no JIT records (`jit off`). A method
    /// inlined into a compiled caller without code of its own counts as not
    /// compiled; code made not entrant counts until the JVM unloads it.
    pub fn compiled_at(&self, pid: u32, m: MethodIdx, ts: u64) -> Option<bool> {
        let (_, by_method) = self.live.iter().find(|(p, _)| *p == pid)?;
        let v = by_method.get(m as usize).map_or(&[][..], |v| &v[..]);
        let i = v.partition_point(|&(t, _)| t <= ts);
        Some(i > 0 && v[i - 1].1 > 0)
    }

    /// The first time method `m` had compiled code in any JVM.
    pub fn first_compiled(&self, m: MethodIdx) -> Option<u64> {
        self.first.get(&m).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_history_counts_live_compiled_versions() {
        let mut jit = JitHistory::default();
        // Method 0 of JVM 7: tier 3 at 100, tier 4 at 200, tier 3 unloaded
        // at 300, tier 4 at 400: compiled from 100 to 400. Method 1 never.
        jit.add(
            7,
            vec![(0, 300, false), (0, 100, true), (0, 200, true), (0, 400, false)],
        );
        let at = |m, ts| jit.compiled_at(7, m, ts);
        assert_eq!(
            [50, 100, 250, 300, 399, 400, 500].map(|ts| at(0, ts)),
            [false, true, true, true, true, false, false].map(Some)
        );
        assert_eq!(at(1, 250), Some(false));
        // A JVM without JIT records says nothing.
        assert_eq!(jit.compiled_at(8, 0, 250), None);
        assert_eq!(jit.first_compiled(0), Some(100));
        assert_eq!(jit.first_compiled(1), None);
    }
}

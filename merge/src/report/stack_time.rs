//! What the report sums while the trace is walked, for its stack figures:
//! off-CPU time under each recorded stack pair per thread (recorded, and
//! scaled up from sampled short blocks), per demotion epoch, and per
//! waker. Named and ranked after the walk (`stacks`, `working`,
//! `stack_methods`).

use crate::cause::OffCpu;
use crate::model::event::MethodIdx;
use crate::model::tid_map::TidMap;
use crate::visitor::OffCpuInterval;
use std::collections::BTreeMap;

/// Off-CPU time under each stack pair, per thread; and, when methods were
/// demoted, per demotion epoch too (how many demotion times came before
/// the interval), with the part in open recorded calls of demoted methods.
#[derive(Debug, Default)]
pub(crate) struct StackTime {
    pub(crate) by_thread: BTreeMap<u32, TidMap<OffCpu>>,
    /// Per thread, the time of short blocks without stacks scaled up from
    /// its sampled ones ([`crate::scale`]), by stack pair.
    pub(crate) scaled: BTreeMap<u32, TidMap<OffCpu>>,
    /// (tid, pair, epoch) → off-CPU time.
    pub(crate) by_epoch: TidMap<OffCpu, (u32, u32, u32)>,
    /// (tid, pair, epoch, demoted method) → the part of `by_epoch` spent
    /// in a recorded call of that method (begun before its demotion).
    pub(crate) in_recorded: TidMap<OffCpu, (u32, u32, u32, MethodIdx)>,
    /// (tid, pair if recorded, waker tid) → the woken blocks' time.
    wakes: TidMap<WokenTime, (u32, Option<u32>, u32)>,
}

/// The blocks of a thread under one stack that one waker ended.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WokenTime {
    /// Their blocked time (without the runqueue time after the wakeup).
    pub(crate) blocked: OffCpu,
    /// How many.
    pub(crate) count: u64,
    /// The waker's process.
    pub(crate) waker_tgid: u32,
}

impl StackTime {
    /// Adds an off-CPU interval of thread `tid` (if it carries stacks).
    pub(crate) fn add(&mut self, tid: u32, iv: &OffCpuInterval) {
        if let Some(pair) = iv.stack {
            self.add_time(tid, pair, &iv.split.off);
        }
        if let Some(w) = iv.wake {
            let e = self.wakes.entry((tid, iv.stack, w.waker_tid)).or_default();
            e.blocked += crate::idle::blocked_part(&iv.split.off);
            e.count += 1;
            e.waker_tgid = w.waker_tgid;
        }
    }

    /// Each thread's time by stack pair, recorded and scaled up.
    pub(crate) fn all_threads(&self) -> impl Iterator<Item = (&u32, &TidMap<OffCpu>)> {
        self.by_thread.iter().chain(&self.scaled)
    }

    /// The woken blocks, by (tid, pair if recorded, waker tid).
    pub(crate) fn wakes(&self) -> impl Iterator<Item = (&(u32, Option<u32>, u32), &WokenTime)> {
        self.wakes.iter()
    }

    /// Adds off-CPU time of thread `tid` under stack pair `pair`.
    pub(crate) fn add_time(&mut self, tid: u32, pair: u32, off: &OffCpu) {
        *self.by_thread.entry(tid).or_default().entry(pair).or_default() += *off;
    }

    /// Adds off-CPU time of thread `tid` scaled up to `pair` from the
    /// thread's sampled short blocks.
    pub(crate) fn add_scaled(&mut self, tid: u32, pair: u32, off: &OffCpu) {
        *self.scaled.entry(tid).or_default().entry(pair).or_default() += *off;
    }

    /// Adds off-CPU time of thread `tid` under `pair` that began after
    /// `epoch` demotion times, while the thread was in recorded calls of
    /// the demoted methods `open`.
    pub(crate) fn add_demoted(&mut self, tid: u32, pair: u32, epoch: u32, open: &[MethodIdx], off: &OffCpu) {
        *self.by_epoch.entry((tid, pair, epoch)).or_default() += *off;
        for &m in open {
            *self.in_recorded.entry((tid, pair, epoch, m)).or_default() += *off;
        }
    }
}

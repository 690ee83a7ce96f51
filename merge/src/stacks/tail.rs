//! The off-CPU time after a thread's last switch-out: no switch-in ends it,
//! so the walk gives it no interval, but the thread's totals count it. The
//! views that fold off-CPU time by stack (the report's top stacks, the
//! collapsed and pprof exports) put it where the other intervals go: under
//! the stacks recorded at that switch-out, else under the traced methods
//! open at the thread's last event.

use crate::{Event, Invocation, MethodIdx, OffCpu, ThreadInfo, ThreadTotals, Timed};

/// Where the tail's time goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailStack {
    /// The stacks recorded at the last switch-out (an index into the
    /// trace's stack pairs).
    Recorded(u32),
    /// The traced methods open at the thread's last event, outermost first
    /// (empty: none).
    Traced(Vec<MethodIdx>),
}

/// Follows one thread of a walk for its tail: fed the walk's events,
/// exits and intervals, asked at the thread's end.
#[derive(Debug, Default)]
pub struct Tail {
    /// The traced methods open at the thread's last event.
    traced: Option<Vec<MethodIdx>>,
    /// The switch-out not yet followed by a switch-in: its time and its
    /// recorded stacks.
    out: Option<(u64, Option<u32>)>,
    /// Off-CPU time given in intervals so far.
    off_sum: OffCpu,
}

impl Tail {
    /// A new thread begins.
    pub fn begin(&mut self) {
        *self = Tail::default();
    }

    /// A walk event (the walk's own rule: a stack belongs to the switch-out
    /// at its time).
    pub fn event(&mut self, e: &Timed) {
        match e.event {
            Event::SwitchOut { .. } => self.out = Some((e.ts, None)),
            Event::Stack(pair) => {
                if let Some((ts, stack)) = &mut self.out {
                    if *ts == e.ts {
                        *stack = Some(pair);
                    }
                }
            }
            Event::SwitchIn { .. } => self.out = None,
            _ => {}
        }
    }

    /// An invocation ends, with `open` the traced methods open until then
    /// (itself innermost).
    pub fn exit(&mut self, t: &ThreadInfo, inv: &Invocation, open: &[MethodIdx]) {
        if inv.unfinished && inv.exit == t.last_ts && self.traced.is_none() {
            self.traced = Some(open.to_vec());
        }
    }

    /// When the tail began: the last switch-out not followed by a switch-in.
    pub fn switch_out_ts(&self) -> Option<u64> {
        self.out.map(|(ts, _)| ts)
    }
    /// An off-CPU interval's time.
    pub fn off_cpu(&mut self, off: &OffCpu) {
        self.off_sum += *off;
    }

    /// The thread ends: its tail's time by cause and where it goes (`None`:
    /// no tail, or intervals that do not add up to the totals).
    pub fn end(&mut self, totals: &ThreadTotals) -> Option<(OffCpu, TailStack)> {
        let all = totals.breakdown.off;
        if !all.0.iter().zip(self.off_sum.0.iter()).all(|(a, b)| a >= b) {
            return None;
        }
        let tail = all - self.off_sum;
        if tail.total() == 0 {
            return None;
        }
        let stack = match self.out {
            Some((_, Some(pair))) => TailStack::Recorded(pair),
            _ => TailStack::Traced(self.traced.take().unwrap_or_default()),
        };
        Some((tail, stack))
    }
}

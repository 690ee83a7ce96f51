//! Cross-thread questions: which method was thread W in at time t? Used to
//! say who released a blocked thread ("woken by pool-1-thread-3 in
//! Cache.refresh()"), the first step of a critical path.

use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::visitor::{Invocation, Visitor, Wake};
use crate::walk::analyze;
use std::collections::HashMap;

/// One invocation interval of one thread.
#[derive(Debug, Clone, Copy)]
struct Span {
    entry: u64,
    exit: u64,
    method: MethodIdx,
}

/// Per-thread invocation intervals, sorted by entry, for point queries.
#[derive(Debug, Default)]
pub struct CallIndex {
    spans: HashMap<u32, Vec<Span>>,
}

struct Collect<'a>(&'a mut HashMap<u32, Vec<Span>>);

impl Visitor for Collect<'_> {
    fn exit(&mut self, t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        self.0.entry(t.tid).or_default().push(Span {
            entry: inv.entry,
            exit: inv.exit,
            method: inv.method,
        });
    }
}

impl CallIndex {
    /// Indexes every invocation of the trace (one pass of the merge).
    pub fn build(trace: &Trace) -> CallIndex {
        let mut spans = HashMap::new();
        analyze(trace, &mut Collect(&mut spans));
        for v in spans.values_mut() {
            v.sort_by_key(|s| s.entry);
        }
        CallIndex { spans }
    }

    /// The innermost traced method thread `tid` was in at `ts`, if any.
    pub fn method_at(&self, tid: u32, ts: u64) -> Option<MethodIdx> {
        let v = self.spans.get(&tid)?;
        // Intervals nest, so among those containing `ts` the innermost is
        // the one that started last: scan back from the last entry <= ts.
        let end = v.partition_point(|s| s.entry <= ts);
        v[..end].iter().rev().find(|s| s.exit >= ts).map(|s| s.method)
    }

    /// "tid 12 \"pool-1\" in Cache.refresh" for a wakeup, as views show it.
    pub fn describe_waker(&self, trace: &Trace, w: &Wake) -> String {
        let mut s = match trace.threads.get(&w.waker_tid) {
            _ if w.waker_tid == 0 => "the idle task / an interrupt (tid 0)".to_string(),
            Some(t) if !t.display_name().is_empty() => format!("tid {} \"{}\"", w.waker_tid, t.display_name()),
            _ if w.waker_tgid != trace.meta.pid && !trace.jvm_pids.contains(&w.waker_tgid) => {
                format!("tid {} (pid {}, outside the trace)", w.waker_tid, w.waker_tgid)
            }
            _ => format!("tid {}", w.waker_tid),
        };
        if let Some(m) = self.method_at(w.waker_tid, w.ts) {
            s.push_str(" in ");
            s.push_str(&trace.methods[m as usize].qualified());
        }
        s
    }
}

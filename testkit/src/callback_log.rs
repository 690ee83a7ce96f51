//! A visitor that writes down every callback as text, so that two analyses
//! of one trace (in memory, streaming) can be compared exactly.

use jtrace_merge::{Invocation, MethodIdx, OffCpuInterval, SyscallInfo, ThreadInfo, ThreadTotals, Visitor, Wake};

/// Every callback, as text.
#[derive(Default)]
pub struct Log(pub Vec<String>);

impl Visitor for Log {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.0.push(format!("begin {t:?}"));
    }
    fn enter(&mut self, t: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.0.push(format!("enter {} {ts} {depth} {m}", t.tid));
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.0.push(format!("exit {} {depth} {inv:?}", t.tid));
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.0.push(format!("off {} {depth} {iv:?}", t.tid));
    }
    fn syscall(&mut self, t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        self.0.push(format!("syscall {} {idx} {sc:?}", t.tid));
    }
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        self.0.push(format!("wake {} {depth} {w:?}", t.tid));
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        self.0.push(format!("end {} {totals:?}", t.tid));
    }
}

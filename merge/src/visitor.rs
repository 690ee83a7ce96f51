//! What a walk reports: the [`Visitor`] trait an analysis implements, and
//! the invocations, off-CPU intervals, wakeups and thread totals it receives.

use crate::cause::{Breakdown, Cause};
use crate::model::event::{MethodIdx, SyscallInfo, ThreadInfo, Timed};

/// The evidence that named an off-CPU interval's blocked part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Nothing explained it.
    None,
    /// Preempted while runnable.
    Preempted,
    /// A JVM-level state (monitor, wait, park, sleep); `detail` indexes
    /// [`Trace::details`](crate::Trace::details) (monitor or blocker class).
    Jvm {
        /// The state.
        cause: Cause,
        /// Index into [`Trace::details`](crate::Trace::details).
        detail: u32,
    },
    /// A JVM-wide stop (GC or safepoint).
    Window(Cause),
    /// The syscall in flight (index into [`Trace::syscalls`](crate::Trace::syscalls)).
    Syscall(u32),
    /// A page fault.
    PageFault,
    /// Preempted by CPU-quota throttling: its cgroup (or an ancestor)
    /// used up its quota; the split says until when (`throttled`, then
    /// `runqueue`).
    Throttled,
    /// Not a switch: time of an on-CPU stretch that the hypervisor gave
    /// to something else (the interval is all `steal`; the thread did not
    /// leave its CPU as far as the guest kernel knows).
    Steal,
}

/// Who woke a thread, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Time of the wakeup (sched_waking).
    pub ts: u64,
    /// The waking thread.
    pub waker_tid: u32,
    /// Its process.
    pub waker_tgid: u32,
}

/// One off-CPU interval: switch-out to switch-in, or (with
/// [`Evidence::Steal`]) time the hypervisor took inside an on-CPU stretch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffCpuInterval {
    /// Switch-out time.
    pub start: u64,
    /// Switch-in time.
    pub end: u64,
    /// Involuntary (preempted while runnable).
    pub preempted: bool,
    /// Raw kernel prev_state at switch-out.
    pub prev_state: u32,
    /// The wakeup that ended the block, if any.
    pub wake: Option<Wake>,
    /// The interval split by cause (sums to `end - start`).
    pub split: Breakdown,
    /// What explained the blocked part, as it stood at switch-out.
    pub evidence: Evidence,
    /// The thread's stacks at the switch-out, if recorded: an index into
    /// [`Stacks::pairs`](crate::Stacks::pairs), named by [`crate::Symbolizer`].
    pub stack: Option<u32>,
}

/// A finished method invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invocation {
    /// The method.
    pub method: MethodIdx,
    /// Entry time.
    pub entry: u64,
    /// Exit time.
    pub exit: u64,
    /// Exact wall/CPU/off-CPU split, inclusive of callees.
    pub breakdown: Breakdown,
    /// Exited by an exception.
    pub exception: bool,
    /// No exit was recorded: closed at the thread's last event.
    pub unfinished: bool,
    /// No other invocation of the same method is open below it on the stack
    /// (aggregates count only these, so recursion is not summed twice).
    pub outermost: bool,
}

/// Totals of a thread over its whole traced life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTotals {
    /// From the thread's first to its last event.
    pub breakdown: Breakdown,
    /// Events that contradicted the thread's state (e.g. a switch-in while on
    /// CPU, an exit with no matching entry): a sign of lost events.
    pub anomalies: u64,
}

/// Receives the merged stream of one thread. Every method has a default that
/// does nothing, so an analysis implements only what it needs.
pub trait Visitor {
    /// A thread's events begin.
    fn thread_begin(&mut self, _thread: &ThreadInfo) {}
    /// Each event the walk reads, before it is interpreted (an export that
    /// keeps the kernel's own detail, such as the CPU of a switch, reads it
    /// here); events past the kernel stream's coverage are not passed.
    fn event(&mut self, _thread: &ThreadInfo, _e: &Timed) {}
    /// A method was entered; `depth` is the number of frames below it.
    fn enter(&mut self, _thread: &ThreadInfo, _ts: u64, _depth: usize, _method: MethodIdx) {}
    /// A method returned.
    fn exit(&mut self, _thread: &ThreadInfo, _depth: usize, _inv: &Invocation) {}
    /// The thread came back on CPU after `iv` (or, for [`Evidence::Steal`],
    /// got its vCPU back); `depth` frames are open.
    fn off_cpu(&mut self, _thread: &ThreadInfo, _depth: usize, _iv: &OffCpuInterval) {}
    /// The thread entered syscall `idx` (what [`Evidence::Syscall`] names),
    /// whose record is `sc`: a streamed walk keeps no syscall table, so a
    /// view that describes the syscall a block was in keeps it from here.
    fn syscall(&mut self, _thread: &ThreadInfo, _idx: u32, _sc: &SyscallInfo) {}
    /// The thread was woken (reported when it happens, before the switch-in).
    fn wakeup(&mut self, _thread: &ThreadInfo, _depth: usize, _wake: &Wake) {}
    /// Right after [`Visitor::wakeup`], in [`crate::stream::analyze_with_wakers`]
    /// only: the traced method the waker was in at that moment, if any (what
    /// [`crate::CallIndex::method_at`] answers on a whole trace).
    fn waker_method(&mut self, _thread: &ThreadInfo, _depth: usize, _wake: &Wake, _method: Option<MethodIdx>) {}
    /// A thread's events end.
    fn thread_end(&mut self, _thread: &ThreadInfo, _totals: &ThreadTotals) {}
}

//! What a trace is made of: methods, threads, and the compact per-thread
//! events both streams are turned into (the input of every walk).

use crate::cause::Cause;
use jtrace_format as fmt;

/// Index of a method in [`Trace::methods`](crate::Trace::methods).
pub type MethodIdx = u32;

/// A traced method: a Java method as the agent named it, or an interposed
/// library call (a uprobe span) as the kernel recorder named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MethodInfo {
    /// Fully qualified class name with dots.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature; empty for a native library call.
    pub signature: String,
    /// An interposed library call (uprobe span), not a Java method.
    pub native: bool,
}

impl MethodInfo {
    /// `class.name`, as users write it.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }
}

/// What is known of a thread.
#[derive(Debug, Clone, Default)]
pub struct ThreadInfo {
    /// Kernel thread id.
    pub tid: u32,
    /// Process id.
    pub tgid: u32,
    /// Java thread name, if the agent saw the thread.
    pub java_name: Option<String>,
    /// Java thread group.
    pub group: String,
    /// Name of the Java thread that started it.
    pub parent: String,
    /// Daemon thread.
    pub daemon: bool,
    /// Kernel name (comm), last seen.
    pub comm: String,
    /// First and last timestamps of any event of this thread.
    pub first_ts: u64,
    /// See `first_ts`.
    pub last_ts: u64,
    /// Thread start seen (kernel fork or JVM thread start).
    pub started_ts: Option<u64>,
    /// Thread exit seen (kernel exit or JVM thread end).
    pub exited_ts: Option<u64>,
    /// The kernel stream covers this thread's time only up to here (it was
    /// cut off: jtrace killed, disk full); `None`: to its end. Later time
    /// is [not covered](crate::Breakdown::not_covered).
    pub kernel_until: Option<u64>,
    /// The JVM stream covers this thread only up to here (the JVM was
    /// killed, or the agent could not write its events from here on):
    /// invocations still open are closed here as unfinished, and no
    /// JVM-level state explains later blocks. `None`: to its end.
    pub jvm_until: Option<u64>,
    /// The streams cover this thread's time only from here (a ring
    /// recording whose oldest chunks were deleted): earlier time, and time
    /// until its first switch record from here on (what the thread was
    /// doing is known from there), is [not covered](crate::Breakdown::not_covered).
    /// `None`: from the start.
    pub covered_from: Option<u64>,
    /// A virtual thread's Java thread id (JDK 21 and later); `None` for a
    /// kernel thread. A virtual thread's `tid` is a key of the merge, not a
    /// kernel tid (docs/FORMAT.md, "Virtual threads").
    pub virtual_id: Option<u64>,
    /// The carrier thread a virtual thread spent the most time mounted on.
    pub carrier: Option<u32>,
    /// A thread of a JVM in a pid namespace (a container): its tid there,
    /// which the JVM itself sees (`tid` is the host's). `None` in the
    /// initial namespace.
    pub ns_tid: Option<u32>,
    /// A thread of a JVM in a pid namespace that could not be paired with
    /// a kernel thread (docs/REPORT.md, "Containers"): `tid` is an id of
    /// the merge's, its kernel events cannot be told apart, so none of its
    /// time is covered (never CPU).
    pub unmatched: bool,
}

impl ThreadInfo {
    /// Whether this is one of the threads jtrace's agent runs in the traced
    /// JVM (the stream grower, the demoter): the tracer's, not the program's.
    pub fn is_tracer(&self) -> bool {
        fmt::agent_threads::is_agent_thread(self.display_name()) || fmt::agent_threads::is_agent_thread(&self.comm)
    }

    /// The name to show: the Java name if known, else the kernel's.
    pub fn display_name(&self) -> &str {
        self.java_name.as_deref().unwrap_or(&self.comm)
    }
}

/// A bit of [`Event::SwitchOut`]'s `prev_state` no kernel state uses: the
/// switch-out is a virtual thread's unmount, not a kernel switch. Once
/// woken, such a thread waits for a carrier (`carrier`), not for a CPU.
pub const UNMOUNTED_STATE: u32 = 1 << 30;

/// One event of one thread, from either stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Switched out; `preempted` when still runnable (involuntary).
    SwitchOut {
        /// Involuntary switch (prev_state == TASK_RUNNING).
        preempted: bool,
        /// Raw kernel prev_state.
        prev_state: u32,
        /// CPU left.
        cpu: u32,
        /// Thread that got the CPU.
        next_tid: u32,
    },
    /// Switched in.
    SwitchIn {
        /// CPU taken.
        cpu: u32,
        /// Thread that left it.
        prev_tid: u32,
    },
    /// Woken up by `waker_tid`.
    Wakeup {
        /// The waking thread.
        waker_tid: u32,
        /// Its process.
        waker_tgid: u32,
        /// First wakeup of a new thread.
        new_task: bool,
    },
    /// A traced method was entered.
    Enter(MethodIdx),
    /// A traced method returned (`exception` = exited by throwing).
    Exit {
        /// The method.
        method: MethodIdx,
        /// Exited by an exception.
        exception: bool,
    },
    /// Thread began (kernel fork or JVM thread start).
    ThreadStart,
    /// Thread ended (kernel exit or JVM thread end).
    ThreadEnd,
    /// A syscall entered (`enter`) or returned; details in [`Trace::syscalls`](crate::Trace::syscalls).
    Syscall {
        /// Index into [`Trace::syscalls`](crate::Trace::syscalls).
        idx: u32,
        /// Entry (true) or exit (false).
        enter: bool,
    },
    /// A user page fault.
    PageFault {
        /// Faulting address.
        address: u64,
    },
    /// The thread begins or ends a JVM-level blocking state (monitor enter,
    /// Object.wait, park, sleep).
    Block {
        /// The cause the state stands for.
        cause: Cause,
        /// Begin (true) or end (false).
        begin: bool,
        /// Index into [`Trace::details`](crate::Trace::details) (monitor or blocker class).
        detail: u32,
    },
    /// The stacks of the switch-out just before it (same time): an index
    /// into [`Stacks::pairs`](crate::Stacks::pairs).
    Stack(u32),
    /// A JVM-wide stop (GC or safepoint) begins or ends; copied into every
    /// Java thread of that JVM.
    Window {
        /// [`Cause::Gc`] or [`Cause::Safepoint`].
        cause: Cause,
        /// Begin (true) or end (false).
        begin: bool,
    },
    /// The kernel or the hypervisor holds the thread from running, by the
    /// kernel stream's THROTTLE and STEAL records: [`Cause::Throttled`]
    /// (runnable, off CPU, its cgroup's CPU quota used up) or
    /// [`Cause::Steal`] (on CPU, its vCPU running another guest) begins or ends.
    Held {
        /// [`Cause::Throttled`] or [`Cause::Steal`].
        cause: Cause,
        /// Begin (true) or end (false).
        begin: bool,
    },
}

impl Event {
    /// Whether the event comes from the kernel stream (scheduler, thread
    /// life, syscalls, faults) rather than the JVM's (methods, JVM-level
    /// states and windows; library calls, though kernel-recorded, are spans
    /// like methods).
    pub fn from_kernel(&self) -> bool {
        !matches!(
            self,
            Event::Enter(_) | Event::Exit { .. } | Event::Block { .. } | Event::Window { .. }
        )
    }
}

/// A syscall with its arguments and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallInfo {
    /// The thread.
    pub tid: u32,
    /// Entry time.
    pub enter: u64,
    /// The kernel's record.
    pub rec: fmt::Syscall,
}

/// An event with its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// What happened.
    pub event: Event,
}

//! The payloads of the JVM streams' records, which the agent writes, each
//! with its encoding (`wire!`: its fields in that order).

use crate::wire::{wire, Cursor, Wire};

/// Flag in [`MethodEvent::flags`]: the method exited by an exception.
pub const EXIT_BY_EXCEPTION: u32 = 1;

/// The bit that marks a record's tid as a virtual thread's (JDK 21 and
/// later) rather than a kernel tid (kernel tids are below 2^22): the
/// agent writes a virtual thread's own records (its method events) with
/// tid = this bit | its Java thread id.
pub const VIRTUAL_THREAD_TID: u32 = 1 << 31;

/// The record tid of the virtual thread with Java thread id `java_id`, or
/// `None` if the id does not fit in the 31 bits below [`VIRTUAL_THREAD_TID`].
pub fn virtual_thread_tid(java_id: u64) -> Option<u32> {
    (java_id < VIRTUAL_THREAD_TID as u64).then_some(VIRTUAL_THREAD_TID | java_id as u32)
}

/// The Java thread id of a virtual thread's record tid, `None` for a kernel tid.
pub fn virtual_thread_id(tid: u32) -> Option<u64> {
    (tid & VIRTUAL_THREAD_TID != 0).then_some((tid & !VIRTUAL_THREAD_TID) as u64)
}

/// Why a virtual thread unmounted ([`kind::VTHREAD_UNMOUNT`](crate::kind::VTHREAD_UNMOUNT)'s
/// `class`, optionally followed by a space and the park blocker's class):
/// parked (LockSupport.park: j.u.c locks, conditions, queues).
pub const UNMOUNT_PARK: &str = "park";
/// In Thread.sleep.
pub const UNMOUNT_SLEEP: &str = "sleep";
/// Waiting for a socket (or another selectable channel) to be ready.
pub const UNMOUNT_SOCKET: &str = "socket";
/// In Object.wait (JDK 24 and later unmount there).
pub const UNMOUNT_WAIT: &str = "wait";
/// Blocked entering a monitor (JDK 24 and later unmount there).
pub const UNMOUNT_MONITOR: &str = "monitor";
/// Thread.yield: runnable, waiting for a carrier.
pub const UNMOUNT_YIELD: &str = "yield";
/// The last word of a timed unmount's reason, before its timeout in
/// nanoseconds (`sleep timeout=10000000`): the park ended at the unmount
/// plus that, unless it was unparked before.
pub const UNMOUNT_TIMEOUT: &str = "timeout=";

/// JVM payload shared by the blocking, GC and allocation kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmBlock {
    /// Kind-specific number (timeout, timed-out flag, size): see the kind.
    pub arg: u64,
    /// Class of the monitor / blocker / allocated object, or "".
    pub class: String,
}
wire! { JvmBlock { arg, class } }

/// JVM payload of [`kind::ALLOC_SAMPLE`](crate::kind::ALLOC_SAMPLE): a sampled object allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocSample {
    /// Size of the allocated object in bytes.
    pub size: u64,
    /// Its class (`java.lang.String`, `[B`).
    pub class: String,
    /// The allocating method (defined by a METHOD_DEF, which may come
    /// later); 0 if unknown (writers before the site was recorded).
    pub method: u64,
    /// Source line of the allocation in that method; -1 if unknown.
    pub line: i32,
}
/// The site (`method`, `line`) came later: a record that ends after the
/// class has none.
impl Wire for AllocSample {
    fn put(&self, out: &mut Vec<u8>) {
        self.size.put(out);
        self.class.put(out);
        self.method.put(out);
        (self.line as u32).put(out);
        0u32.put(out);
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let (size, class) = (u64::get(c)?, String::get(c)?);
        let (method, line) = match (u64::get(c), u32::get(c)) {
            (Some(m), Some(l)) => (m, l as i32),
            _ => (0, -1),
        };
        Some(AllocSample {
            size,
            class,
            method,
            line,
        })
    }
}

/// JVM payload of [`kind::COMPILED_METHOD_LOAD`](crate::kind::COMPILED_METHOD_LOAD) / [`kind::COMPILED_METHOD_UNLOAD`](crate::kind::COMPILED_METHOD_UNLOAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompiledMethod {
    /// Method id (defined by a METHOD_DEF, which may come later for
    /// methods that are not traced).
    pub method: u64,
    /// Start of the compiled code.
    pub code_addr: u64,
    /// Size of the compiled code in bytes.
    pub code_size: u32,
    /// Reserved, zero.
    pub reserved: u32,
}
wire! { CompiledMethod { method, code_addr, code_size, reserved } }

/// JVM payload of [`kind::JVM_START`](crate::kind::JVM_START).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmStart {
    /// Process id of the JVM.
    pub pid: u32,
    /// `java.vm.version` or similar, as the agent could learn it.
    pub vm_version: String,
}
wire! { JvmStart { pid, vm_version } }

/// JVM payload of [`kind::JVM_PIDNS`](crate::kind::JVM_PIDNS): the pid
/// namespace the JVM runs in, so that a reader can pair the tids its agent
/// records (the namespace's) with the kernel's (the host's) through the
/// kernel stream's TASK_NS records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmPidNs {
    /// The namespace's inode (as `/proc/self/ns/pid` names it).
    pub pidns_ino: u64,
    /// The JVM's pid there (what JVM_START says).
    pub ns_pid: u32,
    /// Reserved, zero.
    pub reserved: u32,
}
wire! { JvmPidNs { pidns_ino, ns_pid, reserved } }

/// The initial pid namespace's inode (the kernel's PROC_PID_INIT_INO): a
/// JVM there writes no JVM_PIDNS, its tids are the host's.
pub const INITIAL_PIDNS_INO: u64 = 0xEFFF_FFFC;

impl JvmPidNs {
    /// Reads a JVM_PIDNS payload without decoding a whole record.
    pub fn from_payload(b: &[u8]) -> Option<JvmPidNs> {
        Some(JvmPidNs {
            pidns_ino: u64::from_le_bytes(b.get(0..8)?.try_into().ok()?),
            ns_pid: u32::from_le_bytes(b.get(8..12)?.try_into().ok()?),
            reserved: u32::from_le_bytes(b.get(12..16)?.try_into().ok()?),
        })
    }
}

/// JVM payload of [`kind::THREAD_START`](crate::kind::THREAD_START).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStart {
    /// 1 if the thread is a daemon thread.
    pub daemon: u32,
    /// Java thread name.
    pub name: String,
    /// Thread group name ("" if unknown).
    pub group: String,
    /// Name of the thread that started it ("" if unknown).
    pub parent: String,
}
wire! { ThreadStart { daemon, name, group, parent } }

/// JVM payload of [`kind::METHOD_DEF`](crate::kind::METHOD_DEF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodDef {
    /// Identifier used by [`MethodEvent::method`] in this stream.
    pub method: u64,
    /// Fully qualified class name with dots (`com.acme.Foo`).
    pub class: String,
    /// Method name (`bar`, `<init>`).
    pub name: String,
    /// JVM signature (`(I)V`).
    pub signature: String,
}
wire! { MethodDef { method, class, name, signature } }

/// JVM payload of [`kind::METHOD_ENTRY`](crate::kind::METHOD_ENTRY) and [`kind::METHOD_EXIT`](crate::kind::METHOD_EXIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodEvent {
    /// Method id, defined by an earlier [`MethodDef`].
    pub method: u64,
    /// [`EXIT_BY_EXCEPTION`] on an exceptional exit, else 0.
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}
wire! { MethodEvent { method, flags, reserved } }

/// [`JvmLost::reason`]: the stream file could not grow (disk full, file
/// size limit, or the agent's mapping of it exhausted).
pub const LOST_STREAM_FULL: u32 = 1;

/// JVM payload of [`kind::JVM_LOST`](crate::kind::JVM_LOST): what one
/// thread lost. The thread's events are complete up to the header ts, and
/// none are recorded from there on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmLost {
    /// Events (records) of the thread not written.
    pub events: u64,
    /// Why: [`LOST_STREAM_FULL`].
    pub reason: u32,
    /// Reserved, zero.
    pub reserved: u32,
}
wire! { JvmLost { events, reason, reserved } }

/// JVM payload of [`kind::METHOD_DEMOTED`](crate::kind::METHOD_DEMOTED),
/// [`kind::METHOD_SHORT_DROPPED`](crate::kind::METHOD_SHORT_DROPPED) and
/// [`kind::METHOD_TRIVIAL`](crate::kind::METHOD_TRIVIAL): a count of calls
/// of one method (the kind says which calls; none for METHOD_TRIVIAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodTally {
    /// Method id, defined by an earlier [`MethodDef`].
    pub method: u64,
    /// Calls counted.
    pub calls: u64,
    /// Their mean rate in calls per second (0 when not applicable).
    pub rate_per_s: u64,
    /// Their mean wall in ns.
    pub mean_ns: u64,
}
wire! { MethodTally { method, calls, rate_per_s, mean_ns } }

/// Longest bytecode (bytes) of a method [`TRIVIAL_RULE`] skips.
pub const TRIVIAL_MAX_CODE_LEN: usize = 64;

/// Longest bytecode (bytes) of a forwarder [`TRIVIAL_RULE`] skips:
/// HotSpot's `MaxInlineSize`, under which C1 and C2 inline a method at
/// every call site. Probes would push such a method past it.
pub const FORWARDER_MAX_CODE_LEN: usize = 35;

/// The rule by which the agent leaves a selected method uninstrumented as
/// trivial ([`kind::METHOD_TRIVIAL`](crate::kind::METHOD_TRIVIAL)).
///
/// A getter: code that runs each instruction at most once, calls nothing,
/// allocates nothing, takes no lock and has no `athrow`, so it cannot block
/// or take time of its own worth a probe pair (a getter, a setter, a flag
/// test). What a first execution may trigger once (class loading, constant
/// resolution, a `<clinit>`, which is traced if selected) and an implicit
/// exception (a null receiver) are the caller's, as all of its time is.
///
/// A forwarder (when stacks are recorded, unless `--keep-forwarders`; with `--no-stacks`, only with
/// `--skip-forwarders`), selected by a wildcard: code short enough for the JIT to
/// inline it at every call site ([`FORWARDER_MAX_CODE_LEN`]; probes would
/// push it past that and cost the run its inlining), straight, with no
/// lock, whose every call goes to a method with probes of its own or to
/// one of java.base's that never blocks. Whatever blocks under it blocks
/// in a traced callee; its own time is its caller's, and the report takes
/// its blocking time from the stacks that hold it.
pub const TRIVIAL_RULE: &str = "bytecode of at most 64 bytes with no invoke*, new/newarray/anewarray/multianewarray, \
monitorenter/monitorexit, athrow, jsr/ret/wide or backward branch, no exception handler, \
not synchronized, not native, not a constructor or static initialiser; \
or, if a wildcard in the method name selected it and stacks are recorded (unless --keep-forwarders; with --no-stacks, only with --skip-forwarders), a forwarder: bytecode of at most 35 bytes (HotSpot's MaxInlineSize) \
with no backward branch, exception handler, monitorenter/monitorexit, invokedynamic or jsr/ret/wide, \
not synchronized, not a constructor or static initialiser, whose every call goes to a method the selection instruments \
or to one of java.base that never blocks (the boxed primitives and Number, Math, StrictMath, String, StringBuilder, \
java.util.Objects, Arrays, HashMap, ArrayList, AbstractMap.SimpleImmutableEntry, java.util.concurrent.atomic, \
Object's <init>, getClass, hashCode, equals and clone, and the constructors of java.lang's and java.util's exceptions)";

/// JVM payload of [`kind::JVM_END`](crate::kind::JVM_END).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmEnd {
    /// Events the agent could not record (buffer or write failures).
    pub lost_events: u64,
}
wire! { JvmEnd { lost_events } }

//! Record kinds: the `kind` field of every record header. Kernel kinds are
//! below 100 and numbered by c/kernel_records.h (`K_*`), which the BPF
//! programs write; JVM kinds are from 100 on.

use crate::c;

/// Kernel: the thread in the header was switched out. Payload: [`crate::SwitchOut`].
pub const SWITCH_OUT: u16 = c::K_SWITCH_OUT as u16;
/// Kernel: the thread in the header was switched in. Payload: [`crate::SwitchIn`].
pub const SWITCH_IN: u16 = c::K_SWITCH_IN as u16;
/// Kernel: the thread in the header was woken (sched_waking / sched_wakeup_new).
/// Payload: [`crate::Wakeup`].
pub const WAKEUP: u16 = c::K_WAKEUP as u16;
/// Kernel: the thread in the header was created. Payload: [`crate::Fork`].
pub const FORK: u16 = c::K_FORK as u16;
/// Kernel: the thread in the header exited. Payload: [`crate::TaskInfo`].
pub const EXIT: u16 = c::K_EXIT as u16;
/// Kernel: name (comm) of the thread in the header, at first sight or rename.
/// Payload: [`crate::TaskInfo`].
pub const COMM: u16 = c::K_COMM as u16;
/// Kernel: the thread in the header called exec. Payload: [`crate::TaskInfo`].
pub const EXEC: u16 = c::K_EXEC as u16;
/// Kernel: a syscall of the thread, from entry (header ts) to exit.
/// Payload: [`crate::Syscall`].
pub const SYSCALL: u16 = c::K_SYSCALL as u16;
/// Kernel: a user page fault of the thread. Payload: [`crate::PageFault`].
pub const PAGE_FAULT: u16 = c::K_PAGE_FAULT as u16;
/// Kernel: a block I/O request the thread issued (header ts = issue), with
/// its completion. Payload: [`crate::BlockIo`].
pub const BLOCK_IO: u16 = c::K_BLOCK_IO as u16;
/// Kernel: an interposed library call (uprobe/uretprobe pair), header ts =
/// entry. Payload: [`crate::LibCall`].
pub const LIB_CALL: u16 = c::K_LIB_CALL as u16;
/// Kernel stream: the name of a library-call probe id, written once by the
/// recorder at start (tid 0). Payload: [`crate::ProbeDef`].
pub const PROBE_DEF: u16 = c::K_PROBE_DEF as u16;
/// Kernel stream: the path of a file (device + inode) some SYSCALL record
/// names, resolved by the recorder in user space once per inode (tid 0,
/// ts = that of the SYSCALL record naming it). Payload: [`crate::FilePath`].
pub const FILE_PATH: u16 = c::K_FILE_PATH as u16;
/// Kernel: the definition of a stack id. Payload: [`crate::Stack`].
pub const STACK: u16 = c::K_STACK as u16;
/// Kernel: the stacks of a block, taken after its switch-out (deferred
/// stacks). Payload: [`crate::BlockStack`].
pub const BLOCK_STACK: u16 = c::K_BLOCK_STACK as u16;
/// Kernel: a CPU sample of a traced thread. Payload: [`crate::CpuSample`].
pub const CPU_SAMPLE: u16 = c::K_CPU_SAMPLE as u16;
/// Kernel stream, written by the recorder (tid 0): an executable mapping
/// of a traced process. Payload: [`crate::Mapping`].
pub const MAPPING: u16 = c::K_MAPPING as u16;
/// Kernel stream, written by the recorder (tid 0): a kernel symbol some
/// stack uses. Payload: [`crate::Ksym`].
pub const KSYM: u16 = c::K_KSYM as u16;
/// Kernel stream, written by the recorder (tid 0, ts = the chunk's start):
/// the first record of each chunk file of a ring recording. Payload:
/// [`crate::Chunk`].
pub const CHUNK: u16 = c::K_CHUNK as u16;
/// Kernel: the thread in the header (its host tid) as its own pid
/// namespace knows it. Payload: [`crate::TaskNs`].
pub const TASK_NS: u16 = c::K_TASK_NS as u16;
/// Kernel: the thread in the header was held off CPU by its cgroup's CPU
/// quota (CFS bandwidth throttling) from the header ts (its switch-out) on.
/// Payload: [`crate::Throttle`].
pub const THROTTLE: u16 = c::K_THROTTLE as u16;
/// Kernel: time the hypervisor took from an on-CPU stretch of the thread
/// in the header (paravirt steal), the stretch ending at the header ts.
/// Payload: [`crate::Steal`].
pub const STEAL: u16 = c::K_STEAL as u16;

/// JVM: the first record of each chunk file of a ring recording (tid 0,
/// ts = the chunk's start). Payload: [`crate::Chunk`].
pub const JVM_CHUNK: u16 = 170;

/// JVM: the agent started in this JVM. Payload: [`crate::JvmStart`].
pub const JVM_START: u16 = 100;
/// JVM: the pid namespace the JVM runs in (written after JVM_START).
/// Payload: [`crate::JvmPidNs`].
pub const JVM_PIDNS: u16 = 126;
/// JVM: a Java thread started (or was first seen). Payload: [`crate::ThreadStart`].
pub const THREAD_START: u16 = 101;
/// JVM: a Java thread ended. No payload.
pub const THREAD_END: u16 = 102;
/// JVM: definition of a method id, written once before its first use.
/// Payload: [`crate::MethodDef`].
pub const METHOD_DEF: u16 = 103;
/// JVM: a traced method was entered. Payload: [`crate::MethodEvent`].
pub const METHOD_ENTRY: u16 = 104;
/// JVM: a traced method returned or threw. Payload: [`crate::MethodEvent`].
pub const METHOD_EXIT: u16 = 105;
/// JVM: the JVM is shutting down; loss counters of the agent.
/// Payload: [`crate::JvmEnd`].
pub const JVM_END: u16 = 106;
/// JVM: the agent reports a problem (bad option, internal error).
/// Payload: one string.
pub const AGENT_ERROR: u16 = 107;
/// JVM: the thread starts blocking on a contended monitor.
/// Payload: [`crate::JvmBlock`] (`arg` unused).
pub const MONITOR_CONTENDED_ENTER: u16 = 108;
/// JVM: the thread entered the contended monitor. Payload: [`crate::JvmBlock`].
pub const MONITOR_CONTENDED_ENTERED: u16 = 109;
/// JVM: Object.wait begins. Payload: [`crate::JvmBlock`] (`arg` = timeout ms).
pub const MONITOR_WAIT: u16 = 110;
/// JVM: Object.wait ended. Payload: [`crate::JvmBlock`] (`arg` = 1 if timed out).
pub const MONITOR_WAITED: u16 = 111;
/// JVM: LockSupport/Unsafe.park begins. Payload: [`crate::JvmBlock`]
/// (`arg` = timeout ns or deadline, `class` = blocker class or "").
pub const PARK_BEGIN: u16 = 112;
/// JVM: park returned. Payload: [`crate::JvmBlock`].
pub const PARK_END: u16 = 113;
/// JVM: Thread.sleep begins. Payload: [`crate::JvmBlock`] (`arg` = ms).
pub const SLEEP_BEGIN: u16 = 114;
/// JVM: Thread.sleep returned. Payload: [`crate::JvmBlock`].
pub const SLEEP_END: u16 = 115;
/// JVM: a stop-the-world garbage collection starts (all Java threads of
/// the JVM are stopped until GC_END). Payload: [`crate::JvmBlock`].
pub const GC_START: u16 = 116;
/// JVM: the garbage collection finished. Payload: [`crate::JvmBlock`].
pub const GC_END: u16 = 117;
/// JVM: a non-GC safepoint / VM operation starts. Payload: [`crate::JvmBlock`].
pub const SAFEPOINT_BEGIN: u16 = 118;
/// JVM: the safepoint ended. Payload: [`crate::JvmBlock`].
pub const SAFEPOINT_END: u16 = 119;
/// JVM: a method was JIT-compiled. Payload: [`crate::CompiledMethod`].
pub const COMPILED_METHOD_LOAD: u16 = 120;
/// JVM: compiled code was unloaded. Payload: [`crate::CompiledMethod`].
pub const COMPILED_METHOD_UNLOAD: u16 = 121;
/// JVM: a sampled object allocation. Payload: [`crate::JvmBlock`]
/// (`arg` = size in bytes, `class` = allocated class).
pub const ALLOC_SAMPLE: u16 = 122;
/// JVM: a block of one thread's method entries and exits, 8 bytes each
/// (bytecode-rewriting agent). Payload: [`crate::MethodBatch`]; the
/// header ts is the first event's time. Logically the same as one
/// METHOD_ENTRY/METHOD_EXIT record per event: [`crate::Decoder`]'s
/// iterator yields it expanded into those.
pub const METHOD_BATCH: u16 = 123;
/// JVM: the thread in the header waits for the tracer itself: it is
/// writing its buffer of records into the stream (the agent's own work,
/// which can block when the stream file grows behind the writers). Any
/// time off CPU until [`TRACER_WAIT_END`] is the tracer's (cause
/// `tracer`), not the program's. Payload: [`crate::JvmBlock`] (`arg` = the
/// bytes written, `class` empty).
pub const TRACER_WAIT_BEGIN: u16 = 124;
/// JVM: the tracer's wait that [`TRACER_WAIT_BEGIN`] began is over.
/// Payload: [`crate::JvmBlock`] (`arg` = the bytes written, `class` empty).
pub const TRACER_WAIT_END: u16 = 125;
/// JVM: events of the thread in the header that the agent could not write
/// (its stream could not grow: disk full), the header ts being the first
/// one's time; written once per thread at the end, into room the agent
/// kept for it. Payload: [`crate::JvmLost`].
pub const JVM_LOST: u16 = 150;

/// JVM: a virtual thread (JDK 21 and later) started: its first mount, on
/// the carrier thread in the header (tid = the carrier's kernel tid).
/// Payload: [`crate::JvmBlock`] (`arg` = the virtual thread's Java thread
/// id, `class` = its name, often ""). See [`crate::virtual_thread_tid`].
pub const VTHREAD_START: u16 = 140;
/// JVM: a virtual thread ended: its last unmount, from the carrier in the
/// header. Payload: [`crate::JvmBlock`] (`arg` = its Java thread id,
/// `class` = its name then, which may have been set after its start).
pub const VTHREAD_END: u16 = 141;
/// JVM: a virtual thread was mounted on the carrier in the header.
/// Payload: [`crate::JvmBlock`] (`arg` = its Java thread id).
pub const VTHREAD_MOUNT: u16 = 142;
/// JVM: a virtual thread was unmounted from the carrier in the header.
/// Payload: [`crate::JvmBlock`] (`arg` = its Java thread id, `class` = why
/// it unmounted: [`crate::UNMOUNT_PARK`], `UNMOUNT_SLEEP`, ...).
pub const VTHREAD_UNMOUNT: u16 = 143;
/// JVM: the thread in the header (a carrier running a virtual thread, or a
/// platform thread) unparked a virtual thread (`VirtualThread.unpark()`
/// was called; the virtual thread may have been runnable already).
/// Payload: [`crate::JvmBlock`] (`arg` = the unparked virtual thread's Java
/// thread id).
pub const VTHREAD_UNPARK: u16 = 144;

/// JVM: the agent removed the probes of a traced method (adaptive
/// demotion, past the overhead budget): from the header ts on its calls are
/// not recorded and their time counts as the caller's own. Payload:
/// [`crate::MethodTally`] (`calls` = calls the agent had seen, `rate_per_s`
/// = their mean rate, `mean_ns` = their mean wall).
pub const METHOD_DEMOTED: u16 = 160;
/// JVM: calls of a method the agent did not write because they were
/// shorter than `--min-duration` (no traced child, no exception, no block
/// seen); written once per method at the end. Payload:
/// [`crate::MethodTally`] (`calls` = calls dropped, `rate_per_s` = 0,
/// `mean_ns` = their mean wall).
pub const METHOD_SHORT_DROPPED: u16 = 161;
/// JVM: a method the method filter selected that the agent did not
/// instrument at load time because its bytecode is trivial by
/// [`crate::TRIVIAL_RULE`] (`--complete` instruments it); its calls are
/// never recorded and their time is the caller's own. Written once per
/// method, after its METHOD_DEF. Payload: [`crate::MethodTally`] (`method`
/// set, the other fields 0).
pub const METHOD_TRIVIAL: u16 = 162;
/// JVM: code the JVM generated that is not a compiled method (the
/// interpreter, stubs). Payload: [`crate::CodeBlob`].
pub const CODE_BLOB: u16 = 130;
/// JVM: the tier and inlining of a compiled method's code. Payload: [`crate::CompiledInline`].
pub const COMPILED_INLINE: u16 = 131;
/// JVM: `Method*` addresses of methods, for interpreted frames. Payload: [`crate::MethodAddrs`].
pub const METHOD_ADDRS: u16 = 132;
/// JVM: the native function a Java native method is bound to
/// (NativeMethodBind), to put a JNI function without frame pointers back
/// between its Java method and what it called. Payload: [`crate::NativeBind`].
pub const NATIVE_BIND: u16 = 133;

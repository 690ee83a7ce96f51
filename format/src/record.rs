//! A decoded record: its header fields and the payload of its kind.

use crate::{
    kind, AllocSample, BlockIo, CodeBlob, CompiledInline, CompiledMethod, CpuSample, FilePath, Fork, JvmBlock, JvmEnd,
    JvmLost, JvmStart, Ksym, LibCall, Mapping, MethodAddrs, MethodBatch, MethodDef, MethodEvent, MethodTally,
    PageFault, ProbeDef, Stack, Steal, SwitchIn, SwitchOut, SwitchStacks, Syscall, TaskInfo, ThreadStart, Throttle,
    Wakeup,
};

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// See [`kind::SWITCH_OUT`].
    SwitchOut(SwitchOut),
    /// See [`kind::SWITCH_OUT`]: one that carries stack ids (40 bytes).
    SwitchOutStacks(SwitchOut, SwitchStacks),
    /// See [`kind::SWITCH_IN`].
    SwitchIn(SwitchIn),
    /// See [`kind::WAKEUP`].
    Wakeup(Wakeup),
    /// See [`kind::FORK`].
    Fork(Fork),
    /// See [`kind::EXIT`].
    Exit(TaskInfo),
    /// See [`kind::COMM`].
    Comm(TaskInfo),
    /// See [`kind::EXEC`].
    Exec(TaskInfo),
    /// See [`kind::JVM_START`].
    JvmStart(JvmStart),
    /// See [`kind::THREAD_START`].
    ThreadStart(ThreadStart),
    /// See [`kind::THREAD_END`].
    ThreadEnd,
    /// See [`kind::METHOD_DEF`].
    MethodDef(MethodDef),
    /// See [`kind::METHOD_ENTRY`].
    MethodEntry(MethodEvent),
    /// See [`kind::METHOD_EXIT`].
    MethodExit(MethodEvent),
    /// See [`kind::METHOD_BATCH`]. [`Decoder`](crate::Decoder)'s iterator never yields it
    /// (it yields the events one by one); [`RawRecord::decode`](crate::RawRecord::decode) does.
    MethodBatch(MethodBatch),
    /// See [`kind::JVM_END`].
    JvmEnd(JvmEnd),
    /// See [`kind::AGENT_ERROR`].
    AgentError(String),
    /// See [`kind::JVM_LOST`].
    JvmLost(JvmLost),
    /// See [`kind::METHOD_DEMOTED`], [`kind::METHOD_SHORT_DROPPED`] and
    /// [`kind::METHOD_TRIVIAL`]: the kind says which.
    MethodTally(u16, MethodTally),
    /// See [`kind::SYSCALL`].
    Syscall(Syscall),
    /// See [`kind::PAGE_FAULT`].
    PageFault(PageFault),
    /// See [`kind::BLOCK_IO`].
    BlockIo(BlockIo),
    /// See [`kind::LIB_CALL`].
    LibCall(LibCall),
    /// See [`kind::THROTTLE`].
    Throttle(Throttle),
    /// See [`kind::STEAL`].
    Steal(Steal),
    /// See [`kind::PROBE_DEF`].
    ProbeDef(ProbeDef),
    /// See [`kind::FILE_PATH`].
    FilePath(FilePath),
    /// One of the JVM kinds carrying a [`JvmBlock`] (monitor, wait, park,
    /// sleep, GC, safepoint, virtual thread start/end/mount/unmount): the
    /// kind says which.
    Jvm(u16, JvmBlock),
    /// See [`kind::ALLOC_SAMPLE`].
    Alloc(AllocSample),
    /// See [`kind::COMPILED_METHOD_LOAD`] (`true`) and `_UNLOAD` (`false`).
    Compiled(bool, CompiledMethod),
    /// See [`kind::STACK`].
    Stack(Stack),
    /// See [`kind::CPU_SAMPLE`].
    CpuSample(CpuSample),
    /// See [`kind::MAPPING`].
    Mapping(Mapping),
    /// See [`kind::KSYM`].
    Ksym(Ksym),
    /// See [`kind::CODE_BLOB`].
    CodeBlob(CodeBlob),
    /// See [`kind::COMPILED_INLINE`].
    CompiledInline(CompiledInline),
    /// See [`kind::METHOD_ADDRS`].
    MethodAddrs(MethodAddrs),
    /// A kind this reader does not know (skipped by length).
    Unknown(u16),
}

/// A decoded record: header fields plus payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Kernel thread id.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// What happened.
    pub payload: Payload,
}

/// The kind of a record with payload `p`.
pub(crate) fn payload_kind(p: &Payload) -> u16 {
    match p {
        Payload::SwitchOut(_) => kind::SWITCH_OUT,
        Payload::SwitchOutStacks(..) => kind::SWITCH_OUT,
        Payload::SwitchIn(_) => kind::SWITCH_IN,
        Payload::Wakeup(_) => kind::WAKEUP,
        Payload::Fork(_) => kind::FORK,
        Payload::Exit(_) => kind::EXIT,
        Payload::Comm(_) => kind::COMM,
        Payload::Exec(_) => kind::EXEC,
        Payload::JvmStart(_) => kind::JVM_START,
        Payload::ThreadStart(_) => kind::THREAD_START,
        Payload::ThreadEnd => kind::THREAD_END,
        Payload::MethodDef(_) => kind::METHOD_DEF,
        Payload::MethodEntry(_) => kind::METHOD_ENTRY,
        Payload::MethodExit(_) => kind::METHOD_EXIT,
        Payload::MethodBatch(_) => kind::METHOD_BATCH,
        Payload::JvmEnd(_) => kind::JVM_END,
        Payload::AgentError(_) => kind::AGENT_ERROR,
        Payload::JvmLost(_) => kind::JVM_LOST,
        Payload::MethodTally(k, _) => *k,
        Payload::Syscall(_) => kind::SYSCALL,
        Payload::PageFault(_) => kind::PAGE_FAULT,
        Payload::BlockIo(_) => kind::BLOCK_IO,
        Payload::LibCall(_) => kind::LIB_CALL,
        Payload::Throttle(_) => kind::THROTTLE,
        Payload::Steal(_) => kind::STEAL,
        Payload::ProbeDef(_) => kind::PROBE_DEF,
        Payload::FilePath(_) => kind::FILE_PATH,
        Payload::Jvm(k, _) => *k,
        Payload::Alloc(_) => kind::ALLOC_SAMPLE,
        Payload::Compiled(true, _) => kind::COMPILED_METHOD_LOAD,
        Payload::Compiled(false, _) => kind::COMPILED_METHOD_UNLOAD,
        Payload::Stack(_) => kind::STACK,
        Payload::CpuSample(_) => kind::CPU_SAMPLE,
        Payload::Mapping(_) => kind::MAPPING,
        Payload::Ksym(_) => kind::KSYM,
        Payload::CodeBlob(_) => kind::CODE_BLOB,
        Payload::CompiledInline(_) => kind::COMPILED_INLINE,
        Payload::MethodAddrs(_) => kind::METHOD_ADDRS,
        Payload::Unknown(k) => *k,
    }
}

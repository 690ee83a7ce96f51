//! A decoded record: its header fields and the payload of its kind, and
//! the table that ties each payload to its kind and encoding.

use crate::wire::{Cursor, Wire};
use crate::{
    kind, AllocSample, BlockIo, BlockStack, CodeBlob, CompiledInline, CompiledMethod, CpuSample, FilePath, Fork,
    JvmBlock, JvmEnd, JvmLost, JvmPidNs, JvmStart, Ksym, LibCall, Mapping, MethodAddrs, MethodBatch, MethodDef,
    MethodEvent, MethodTally, NativeBind, PageFault, ProbeDef, Stack, Steal, SwitchIn, SwitchOut, SwitchStacks,
    Syscall, TaskInfo, TaskNs, ThreadStart, Throttle, Wakeup,
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
    /// See [`kind::TASK_NS`].
    TaskNs(TaskNs),
    /// See [`kind::JVM_START`].
    JvmStart(JvmStart),
    /// See [`kind::JVM_PIDNS`].
    JvmPidNs(JvmPidNs),
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
    /// See [`kind::BLOCK_STACK`].
    BlockStack(BlockStack),
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
    /// See [`kind::NATIVE_BIND`].
    NativeBind(NativeBind),
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

/// Ties every [`Payload`] variant to its record kind(s): each row yields
/// its arm of [`payload_kind`], [`encode_payload`] and [`decode_payload`],
/// the payload's bytes being its type's [`Wire`] encoding. Rows read like
/// the decoder's match arms, tried in order:
/// - `KIND => Variant(Type),`
/// - `KIND => Variant,` (no payload)
/// - `KIND => Variant(true, Type),` (the kinds a `bool` tells apart)
/// - `KINDS => Variant(kind, Type),` (the variant holds its kind; `KINDS` a pattern)
/// - `KIND => Variant(TypeA, TypeB) if has,` (two payloads one after the
///   other, read when `has(payload bytes)` says they hold both)
///
/// A variant without a row does not compile: the matches are exhaustive.
macro_rules! payloads {
    // Every row read: the three functions. `$out`, `$c` and `$kind` come
    // from the first call, so that the rows' arms and the functions'
    // parameters are the same names.
    (@rows ($out:ident $c:ident $kind:ident) [$($k:tt)*] [$($e:tt)*] [$($d:tt)*]) => {
        /// The kind of a record with payload `p`.
        pub(crate) fn payload_kind(p: &Payload) -> u16 {
            match p {
                $($k)*
                Payload::Unknown(k) => *k,
            }
        }

        /// Appends the payload bytes of `p` to `out` (the record's header
        /// and padding are the caller's; a METHOD_BATCH is [`BatchWriter`](crate::BatchWriter)'s).
        pub(crate) fn encode_payload(p: &Payload, $out: &mut Vec<u8>) {
            match p {
                $($e)*
                Payload::Unknown(_) => {}
            }
        }

        /// The payload of a record of `kind` at `ts` whose payload bytes are
        /// `payload`; `None` if they are too short for it.
        pub(crate) fn decode_payload($kind: u16, ts: u64, payload: &[u8]) -> Option<Payload> {
            let $c = &mut Cursor::new(payload, ts);
            Some(match $kind {
                $($d)*
                other => Payload::Unknown(other),
            })
        }
    };
    (@rows $n:tt [$($k:tt)*] [$($e:tt)*] [$($d:tt)*] $kp:path => $v:ident, $($rest:tt)*) => {
        payloads!(@rows $n
            [$($k)* Payload::$v => $kp,]
            [$($e)* Payload::$v => {}]
            [$($d)* $kp => Payload::$v,]
            $($rest)*);
    };
    (@rows ($out:ident $c:ident $kind:ident) [$($k:tt)*] [$($e:tt)*] [$($d:tt)*]
        $kp:path => $v:ident($t:ty), $($rest:tt)*) => {
        payloads!(@rows ($out $c $kind)
            [$($k)* Payload::$v(_) => $kp,]
            [$($e)* Payload::$v(x) => Wire::put(x, $out),]
            [$($d)* $kp => Payload::$v(<$t as Wire>::get($c)?),]
            $($rest)*);
    };
    (@rows ($out:ident $c:ident $kind:ident) [$($k:tt)*] [$($e:tt)*] [$($d:tt)*]
        $kp:path => $v:ident($b:literal, $t:ty), $($rest:tt)*) => {
        payloads!(@rows ($out $c $kind)
            [$($k)* Payload::$v($b, _) => $kp,]
            [$($e)* Payload::$v($b, x) => Wire::put(x, $out),]
            [$($d)* $kp => Payload::$v($b, <$t as Wire>::get($c)?),]
            $($rest)*);
    };
    (@rows ($out:ident $c:ident $kind:ident) [$($k:tt)*] [$($e:tt)*] [$($d:tt)*]
        $kp:path => $v:ident($a:ty, $b:ty) if $has:expr, $($rest:tt)*) => {
        payloads!(@rows ($out $c $kind)
            [$($k)* Payload::$v(..) => $kp,]
            [$($e)* Payload::$v(a, b) => {
                Wire::put(a, $out);
                Wire::put(b, $out);
            }]
            [$($d)* $kp if ($has)($c.rest()) => Payload::$v(<$a as Wire>::get($c)?, <$b as Wire>::get($c)?),]
            $($rest)*);
    };
    (@rows ($out:ident $c:ident $kind:ident) [$($k:tt)*] [$($e:tt)*] [$($d:tt)*]
        $kp:pat => $v:ident(kind, $t:ty), $($rest:tt)*) => {
        payloads!(@rows ($out $c $kind)
            [$($k)* Payload::$v(k, _) => *k,]
            [$($e)* Payload::$v(_, x) => Wire::put(x, $out),]
            [$($d)* $kp => Payload::$v($kind, <$t as Wire>::get($c)?),]
            $($rest)*);
    };
    (@rows $n:tt [$($k:tt)*] [$($e:tt)*] [$($d:tt)*] $($rows:tt)*) => {
        compile_error!(concat!("payloads!: not a row: ", stringify!($($rows)*)));
    };
    ($($rows:tt)*) => {
        payloads!(@rows (out c kind) [] [] [] $($rows)*);
    };
}

payloads! {
    // Kernel: the BPF programs' records (c/kernel_records.h).
    kind::SWITCH_OUT => SwitchOutStacks(SwitchOut, SwitchStacks) if |b| SwitchStacks::of_switch_out(b).is_some(),
    kind::SWITCH_OUT => SwitchOut(SwitchOut),
    kind::SWITCH_IN => SwitchIn(SwitchIn),
    kind::WAKEUP => Wakeup(Wakeup),
    kind::FORK => Fork(Fork),
    kind::EXIT => Exit(TaskInfo),
    kind::COMM => Comm(TaskInfo),
    kind::EXEC => Exec(TaskInfo),
    kind::TASK_NS => TaskNs(TaskNs),
    kind::SYSCALL => Syscall(Syscall),
    kind::PAGE_FAULT => PageFault(PageFault),
    kind::BLOCK_IO => BlockIo(BlockIo),
    kind::LIB_CALL => LibCall(LibCall),
    kind::STACK => Stack(Stack),
    kind::CPU_SAMPLE => CpuSample(CpuSample),
    kind::BLOCK_STACK => BlockStack(BlockStack),
    kind::THROTTLE => Throttle(Throttle),
    kind::STEAL => Steal(Steal),
    // Kernel stream, the recorder's.
    kind::PROBE_DEF => ProbeDef(ProbeDef),
    kind::FILE_PATH => FilePath(FilePath),
    kind::MAPPING => Mapping(Mapping),
    kind::KSYM => Ksym(Ksym),
    // JVM.
    kind::JVM_START => JvmStart(JvmStart),
    kind::JVM_PIDNS => JvmPidNs(JvmPidNs),
    kind::THREAD_START => ThreadStart(ThreadStart),
    kind::THREAD_END => ThreadEnd,
    kind::METHOD_DEF => MethodDef(MethodDef),
    kind::METHOD_ENTRY => MethodEntry(MethodEvent),
    kind::METHOD_EXIT => MethodExit(MethodEvent),
    kind::METHOD_BATCH => MethodBatch(MethodBatch),
    kind::JVM_END => JvmEnd(JvmEnd),
    kind::AGENT_ERROR => AgentError(String),
    kind::JVM_LOST => JvmLost(JvmLost),
    kind::METHOD_DEMOTED | kind::METHOD_SHORT_DROPPED | kind::METHOD_TRIVIAL => MethodTally(kind, MethodTally),
    kind::MONITOR_CONTENDED_ENTER..=kind::SAFEPOINT_END
    | kind::TRACER_WAIT_BEGIN
    | kind::TRACER_WAIT_END
    | kind::VTHREAD_START..=kind::VTHREAD_UNPARK => Jvm(kind, JvmBlock),
    kind::ALLOC_SAMPLE => Alloc(AllocSample),
    kind::COMPILED_METHOD_LOAD => Compiled(true, CompiledMethod),
    kind::COMPILED_METHOD_UNLOAD => Compiled(false, CompiledMethod),
    kind::CODE_BLOB => CodeBlob(CodeBlob),
    kind::COMPILED_INLINE => CompiledInline(CompiledInline),
    kind::METHOD_ADDRS => MethodAddrs(MethodAddrs),
    kind::NATIVE_BIND => NativeBind(NativeBind),
}

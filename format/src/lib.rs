//! The jtrace on-disk record format, shared by the producers (the JVMTI agent
//! and the kernel recorder) and the reader (the merge crate).
//!
//! A trace is a directory. Each event stream in it (`kernel.bin`, one
//! `jvm-<pid>.bin` per traced JVM) is a [`FileHeader`] followed by records.
//! Every record starts with a 16-byte [`RecordHeader`] and is padded to a
//! multiple of 8 bytes, so a reader can skip kinds it does not know. All
//! integers are little-endian; all timestamps are CLOCK_MONOTONIC nanoseconds.
//! docs/FORMAT.md is the prose version of this crate.
//!
//! The kernel records are defined once, in C, by `c/kernel_records.h`, which
//! the BPF programs include; this crate's side of them is generated from it
//! (build.rs), as are the [`syscall_nr`] constants from `c/syscall_nr.h`.
//!
//! Inside: [`kind`] numbers the records; the payloads are in `kernel.rs`
//! and `jvm.rs` (`stacks.rs`: the stack records'), each with its encoding
//! (`wire.rs`: how fields are written and read), the one enum of them in
//! `record.rs` with the table that ties each to its kind; `encode.rs`
//! writes records, `decode.rs` reads them, `batch.rs` packs a thread's
//! method events into METHOD_BATCH records; `stream.rs` has the stream and
//! record headers and `trace_dir.rs` the names of a trace directory's
//! files; [`agent_threads`] the names the agent gives its own threads.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agent_threads;
mod batch;
mod chunk;
mod decode;
mod encode;
mod free_space;
mod jvm;
mod kernel;
pub mod kind;
mod record;
mod stacks;
mod stream;
pub mod syscall_nr;
mod trace_dir;
mod wire;

/// The kernel records as `c/kernel_records.h` defines them (bindgen, build.rs).
#[allow(non_camel_case_types, dead_code)]
mod c {
    include!(concat!(env!("OUT_DIR"), "/kernel_records.rs"));
}

pub use batch::{
    batch_event, batch_event_method, batch_events, batch_header, BatchEvents, BatchWriter, BatchedKind,
    BatchedMethodEvent, MethodBatch, BATCH_DELTA_MASK, BATCH_HEADER_LEN, BATCH_ID_SHIFT, BATCH_KIND_SHIFT,
    BATCH_MAX_EVENTS, BATCH_METHOD_LIMIT,
};
pub use chunk::{Chunk, CHUNK_RECORD_LEN};
pub use decode::{jvm_end_in_tail, DecodeError, Decoder, RawRecord, JVM_END_TAIL};
pub use encode::Encoder;
pub use free_space::{check_free_space, free_bytes};
pub use jvm::{
    virtual_thread_id, virtual_thread_tid, AllocSample, CompiledMethod, JvmBlock, JvmEnd, JvmLost, JvmPidNs, JvmStart,
    MethodDef, MethodEvent, MethodTally, ThreadStart, EXIT_BY_EXCEPTION, FORWARDER_MAX_CODE_LEN, INITIAL_PIDNS_INO,
    LOST_STREAM_FULL, TRIVIAL_MAX_CODE_LEN, TRIVIAL_RULE, UNMOUNT_MONITOR, UNMOUNT_PARK, UNMOUNT_SLEEP, UNMOUNT_SOCKET,
    UNMOUNT_TIMEOUT, UNMOUNT_WAIT, UNMOUNT_YIELD, VIRTUAL_THREAD_TID,
};
pub use kernel::{
    comm_str, fd_kind, BlockIo, BlockStack, FilePath, Fork, LibCall, PageFault, ProbeDef, Steal, SwitchIn, SwitchOut,
    Syscall, TaskInfo, TaskNs, Throttle, Wakeup, BLOCK_STACK_NO_USER, BLOCK_STACK_SAMPLED, EXEC_LEFT_OUT,
    PREV_TID_UNKNOWN, SYSCALL_AT_SWITCH, SYSCALL_BLOCKED, TASK_RUNNING, THROTTLE_CLAMPED, WAKEUP_HARDIRQ,
};
pub use record::{Payload, Record};
pub use stacks::{
    CodeBlob, CompiledInline, CpuSample, Ksym, Mapping, MethodAddrs, NativeBind, PcInline, Stack, StackFrame,
    SwitchStacks, BUILD_ID_MAX, CODE_INTERPRETER, CODE_STUB, STACK_JAVA_ANCHOR, STACK_KERNEL, STACK_TRUNCATED,
    STACK_USER,
};
pub use stream::{
    FileHeader, RecordHeader, FILE_HEADER_LEN, FORMAT_VERSION, JVM_MAGIC, KERNEL_MAGIC, RECORD_HEADER_LEN,
    STREAM_COMPLETE,
};
pub use trace_dir::{
    chunk_file, parse_stream_file, AGENT_CONFIG_FILE, JVM_FILE_PREFIX, KERNEL_FILE, KERNEL_STREAM, META_FILE,
};

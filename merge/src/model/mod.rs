//! The data model the reader fills and the walk reads: events, threads and
//! methods (`event`), JIT history (`jit`), the trace's tables (`trace`),
//! syscalls and their causes (`syscall`), the GC/safepoint windows a thread
//! sees (`windows`), which switch-outs their CPU's previous switch explains
//! (`sched_chain`), and a small map keyed by tid (`tid_map`).

pub(crate) mod event;
pub(crate) mod jit;
pub(crate) mod sched_chain;
pub(crate) mod syscall;
pub(crate) mod tid_map;
pub(crate) mod trace;
pub(crate) mod windows;

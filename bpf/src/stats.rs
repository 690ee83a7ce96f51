//! The counters of a recording session: what the BPF programs submitted
//! and lost, per kind, and what the consumer counted.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use anyhow::{Context, Result};
use jtrace_format::kind;
use libbpf_rs::{MapCore, MapFlags};

use crate::{jtrace_h, skel};

/// The kernel record kinds the BPF programs emit, with the names used in
/// [`KernelStats`].
const KINDS: [(u16, &str); 17] = [
    (kind::SWITCH_OUT, "switch_out"),
    (kind::SWITCH_IN, "switch_in"),
    (kind::WAKEUP, "wakeup"),
    (kind::FORK, "fork"),
    (kind::EXIT, "exit"),
    (kind::COMM, "comm"),
    (kind::EXEC, "exec"),
    (kind::SYSCALL, "syscall"),
    (kind::PAGE_FAULT, "page_fault"),
    (kind::BLOCK_IO, "block_io"),
    (kind::LIB_CALL, "lib_call"),
    (kind::STACK, "stack"),
    (kind::CPU_SAMPLE, "cpu_sample"),
    (kind::TASK_NS, "task_ns"),
    (kind::THROTTLE, "throttle"),
    (kind::STEAL, "steal"),
    (kind::BLOCK_STACK, "block_stack"),
];

/// The name of a kernel record kind in [`KernelStats`], the recorder's own
/// kinds included ("other" if unknown).
pub(crate) fn kind_name(k: u16) -> &'static str {
    match k {
        kind::FILE_PATH => "file_path",
        kind::PROBE_DEF => "probe_def",
        _ => KINDS.iter().find(|&&(x, _)| x == k).map_or("other", |&(_, n)| n),
    }
}

/// Counters of one recording session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Records written to the stream file (PROBE_DEF records included).
    pub records: u64,
    /// Records the BPF programs submitted, by kind name (`"switch_out"`,
    /// `"switch_in"`, `"wakeup"`, `"fork"`, `"exit"`, `"comm"`, `"exec"`,
    /// `"syscall"`, `"page_fault"`, `"block_io"`, `"lib_call"`, `"stack"`,
    /// `"cpu_sample"`, `"task_ns"`, `"throttle"`, `"steal"`, `"block_stack"`). Every kind is
    /// present, zero or not.
    pub emitted: BTreeMap<&'static str, u64>,
    /// PROBE_DEF records written by the recorder (one per library call probe).
    pub probe_defs: u64,
    /// FILE_PATH records written by the recorder (one per file or directory
    /// some SYSCALL record named and whose path could be resolved).
    pub file_paths: u64,
    /// MAPPING records written by the recorder (executable mappings of
    /// traced processes that hold some stack's addresses).
    pub mappings: u64,
    /// KSYM records written by the recorder (kernel functions of stacks).
    pub ksyms: u64,
    /// Records lost, by kind name: every kernel kind (ring buffer full), plus,
    /// when non-zero, `"filter_full"` (a process could not be added to the
    /// filter because its pid is beyond the filter's capacity, so its events
    /// are missing; jtrace refuses to start when `kernel.pid_max` allows
    /// such pids), `"lib_too_deep"` (library calls
    /// nested deeper than 16 per thread), `"block_map_full"` (a block request
    /// could not be followed to its completion), `"missed_runs"` (runs of a
    /// program the kernel skipped) and `"malformed"` (a record whose size
    /// disagreed with its header).
    pub lost: BTreeMap<&'static str, u64>,
    /// Sum of [`KernelStats::lost`].
    pub lost_total: u64,
    /// Records taken from the ring buffer but not written to the stream
    /// file (it could not be written: disk full), by kind name; empty when
    /// everything was written.
    pub unwritten: BTreeMap<&'static str, u64>,
    /// The earliest time of a record not written: the stream file covers
    /// the recording up to here. `None` when everything was written.
    pub unwritten_since: Option<u64>,
    /// Why the stream file could not be written to its end, if it could not
    /// (the recording went on: the ring buffer kept being drained).
    pub write_error: Option<String>,
    /// SWITCH_IN records (included in `emitted["switch_in"]`) that the BPF
    /// side inferred because a thread was switched out without its switch-in
    /// having been reported; they carry `prev_tid` [`PREV_TID_UNKNOWN`](crate::PREV_TID_UNKNOWN).
    /// Non-zero on kernels or sandboxes that run no tracepoint programs while
    /// some (hidden) task is current.
    pub inferred_switch_ins: u64,
    /// Switch-outs of throttled threads (CPU quota) whose throttle could
    /// not be timed: their cfs_rq timed no episode (it had nothing queued
    /// when throttled), or they left it before the episode ended. That
    /// time stays `runqueue` (docs/REPORT.md).
    pub throttles_untimed: u64,
    /// The traced processes seen to exec (or attached to), with their
    /// cgroups (CPU controller), read as each exec'd.
    pub process_cgroups: Vec<crate::ProcessCgroup>,
    /// The CPU quotas over those cgroups, with their counters when first
    /// seen and at the end.
    pub cpu_limits: Vec<crate::CpuLimit>,
}

/// What the ring-buffer consumer counted itself (the BPF maps hold the rest).
pub(crate) struct ConsumerCounts {
    /// Records written to the stream file, FILE_PATH records included.
    pub(crate) records: u64,
    /// Samples cut short because a record's length disagreed with them.
    pub(crate) malformed: u64,
    /// WAKEUP records the consumer wrote from the switch batches at the end.
    pub(crate) flushed_wakeups: u64,
    /// FILE_PATH records written.
    pub(crate) file_paths: u64,
    /// MAPPING records written.
    pub(crate) mappings: u64,
    /// KSYM records written.
    pub(crate) ksyms: u64,
}

/// Sums a per-CPU u64 counter array of the BPF programs.
fn percpu_sum(map: &dyn MapCore, slot: u32) -> Result<u64> {
    let vals = map
        .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading BPF map {:?}", map.name()))?
        .unwrap_or_default();
    Ok(vals
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .sum())
}

/// Runs of a program the kernel skipped because the same program was already
/// running on that CPU (its recursion guard); each may be lost records.
fn recursion_misses(fd: BorrowedFd<'_>) -> u64 {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` and `len` are valid for writes and `len` is the size of
    // `info`; the kernel writes at most `len` bytes.
    let ret = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if ret == 0 {
        info.recursion_misses
    } else {
        0
    }
}

/// The counters of the BPF maps and programs of `sk`, and those of the consumer.
pub(crate) fn read_stats(sk: &skel::JtraceSkel<'_>, sink: &ConsumerCounts) -> Result<KernelStats> {
    let mut st = KernelStats {
        records: sink.records,
        file_paths: sink.file_paths,
        mappings: sink.mappings,
        ksyms: sink.ksyms,
        ..Default::default()
    };
    debug_assert!(KINDS.iter().all(|&(k, _)| u32::from(k) < jtrace_h::N_KINDS));
    for (k, name) in KINDS {
        st.emitted.insert(name, percpu_sum(&sk.maps.emitted, k.into())?);
        st.lost.insert(name, percpu_sum(&sk.maps.dropped, k.into())?);
    }
    *st.emitted.entry("wakeup").or_default() += sink.flushed_wakeups;
    st.inferred_switch_ins = percpu_sum(&sk.maps.emitted, jtrace_h::K_INFERRED_SWITCH_IN)?;
    st.throttles_untimed = percpu_sum(&sk.maps.emitted, jtrace_h::K_THROTTLE_UNTIMED)?;
    let p = &sk.progs;
    let missed: u64 = [
        &p.sched_switch,
        &p.sched_waking,
        &p.sched_wakeup_new,
        &p.sched_process_fork,
        &p.sched_process_exit,
        &p.sched_process_exec,
        &p.task_rename,
        &p.sys_enter,
        &p.sys_exit,
        &p.page_fault_user,
        &p.block_rq_insert,
        &p.block_rq_issue,
        &p.block_rq_complete,
        &p.lib_enter,
        &p.lib_exit,
        &p.lib_enter_multi,
        &p.lib_exit_multi,
        &p.cpu_sample,
        &p.rseq_update,
        &p.block_stacks_exit,
    ]
    .into_iter()
    .filter(|prog| prog.autoload())
    .map(|prog| recursion_misses(prog.as_fd()))
    .sum();
    if missed > 0 {
        st.lost.insert("missed_runs", missed);
    }
    let filter_full = percpu_sum(&sk.maps.dropped, jtrace_h::K_FILTER_FULL)?;
    if filter_full > 0 {
        st.lost.insert("filter_full", filter_full);
    }
    for (slot, name) in [
        (jtrace_h::K_LIB_TOO_DEEP, "lib_too_deep"),
        (jtrace_h::K_BLOCK_MAP_FULL, "block_map_full"),
        (jtrace_h::K_BLOCK_UNTIMED, "block_untimed"),
    ] {
        let n = percpu_sum(&sk.maps.dropped, slot)?;
        if n > 0 {
            st.lost.insert(name, n);
        }
    }
    if sink.malformed > 0 {
        st.lost.insert("malformed", sink.malformed);
    }
    st.lost_total = st.lost.values().sum();
    Ok(st)
}

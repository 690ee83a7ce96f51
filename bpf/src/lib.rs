//! The kernel side of jtrace: eBPF programs on the scheduler, syscall,
//! page-fault and block tracepoints and on uprobes, and the user-space
//! recorder that writes their events to `kernel.bin`.
//!
//! The BPF programs (`bpf/c/*.bpf.c`) filter by process: only threads of
//! *traced* processes produce records. A process is traced when it is listed
//! in [`RecorderConfig::pids`], when it is a new process forked by the
//! launcher ([`RecorderConfig::launcher_tgid`], i.e. jtrace itself), or when
//! it is forked by a traced process, or when it enters the cgroup subtree
//! of [`RecorderConfig::cgroup`] while recording (`joins.rs`). Records go through one BPF ring buffer
//! and are appended to the stream file by a consumer thread (verbatim, but
//! for kernel addresses the trace's viewer may not see); their
//! layout is the one of the `jtrace-format` crate. A traced process that
//! execs into one the trace's [`Viewer`] may not ptrace (setuid, setgid,
//! file capabilities) leaves the filter at that exec (`viewer.bpf.h`).
//!
//! Every program is a BTF-enabled tracepoint (tp_btf) or a uprobe (one
//! uprobe.multi link per library on 6.6+, else one attached through the
//! uprobe PMU per function): nothing needs tracefs or kprobes. The kernel must
//! publish its BTF ([`required_kernel_features`]) and be 6.2 or later (the
//! `bpf_rdonly_cast` kfunc, used to read the file behind an fd).
//!
//! What is recorded besides the scheduler (see [`RecorderConfig`]):
//! syscalls ([`SyscallMode`]: by default the syscall of every voluntary
//! switch-out, read at the switch from the task's saved registers, with no
//! syscall hook), user page faults that blocked, block I/O requests issued
//! by traced threads, and interposed library calls
//! ([`RecorderConfig::lib_calls`]). With [`RecorderConfig::stacks`], every
//! switch-out carries the thread's kernel and user stacks (deduplicated
//! STACK records), CPU samples ([`RecorderConfig::cpu_sample_hz`]) too, and
//! the recorder stores what names them later (the processes' executable
//! mappings with build ids, the kernel symbols used).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use jtrace_bpf::{KernelRecorder, RecorderConfig};
//! let mut cfg = RecorderConfig::create("trace/kernel.bin")?;
//! cfg.launcher_tgid = Some(std::process::id());
//! let rec = KernelRecorder::start(cfg)?;
//! // ... spawn and wait for the traced command ...
//! let stats = rec.stop()?;
//! eprintln!("{} records, {} lost", stats.records, stats.lost_total);
//! # Ok(())
//! # }
//! ```
//!
//! Inside: `config.rs` says what to record, `features.rs` checks the
//! kernel, `setup.rs` loads and attaches the programs (`libcalls.rs`
//! finds the library functions), `recorder.rs` runs the session on its
//! consumer thread, `pump.rs` moves the ring buffer's records to
//! `sink.rs`, which writes them to the file (and counts what a full disk,
//! or the free-space floor of `jtrace_format::check_free_space`, keeps out of it; `cgroups.rs`
//! reads the CPU quotas of the processes whose execs it sees), `chunks.rs` says
//! when a ring recording's next chunk begins and what it restates, `paths.rs` names the files they refer to, `stack_names.rs` stores
//! what names the stacks' addresses (reading the maps as the trace's
//! [`Viewer`] with `viewer.rs`, and, when the kernel hides its addresses
//! from them, giving kernel frames stand-ins with `hidden_kernel.rs`),
//! `pid_ns.rs` names the tasks that are in
//! a pid namespace when recording starts, `sampling.rs` opens the CPU clocks,
//! and `stats.rs` counts.
//! The C side (`bpf/c/`) has one `*.bpf.c` per concern; `jtrace.h` is
//! shared with this crate (build.rs generates its Rust side), the
//! `*.bpf.h` headers are the programs' own, and the record layouts are the
//! format's (`format/c/kernel_records.h`).

#![deny(missing_docs)]

mod cgroup_members;
mod cgroups;
mod chunks;
mod config;
mod features;
mod hidden_kernel;
mod joins;
mod late_agents;
mod late_safepoints;
mod libcalls;
mod paths;
mod pid_ns;
mod pump;
mod recorder;
pub mod safepoints;
mod sampling;
mod setup;
mod sink;
mod stack_names;
mod stats;
mod viewer;

pub use cgroup_members::{cgroup_members, CgroupSubtree};
pub use cgroups::{CpuLimit, CpuStat, ProcessCgroup, Quota};
pub use chunks::KernelChunks;
pub use config::{
    RecorderConfig, SyscallMode, Viewer, DEFAULT_CPU_SAMPLE_HZ, DEFAULT_RINGBUF_BYTES, DEFAULT_SHORT_BLOCK_STACKS_HZ,
    DEFAULT_STACK_MIN_BLOCK_NS,
};
pub use features::{kernel_measures, required_kernel_features, KernelMeasures, Measure, VMLINUX_BTF};
pub use hidden_kernel::hide_kernel_addresses;
pub use joins::{FollowCgroup, Joined, RESCAN_EVERY};
pub use jtrace_format::PREV_TID_UNKNOWN;
pub use libcalls::{parse_lib_calls, resolve_lib_calls, LibCallSpec, OpenLibrary, ResolvedLibCall};
pub use recorder::KernelRecorder;
pub use stats::KernelStats;

/// The BPF object and its maps and programs (libbpf-cargo, build.rs).
#[allow(clippy::all, dead_code, unused_imports, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/jtrace.skel.rs"));
}

/// The constants of bpf/c/jtrace.h, which the BPF programs share with the
/// recorder (bindgen, build.rs).
#[allow(dead_code, non_camel_case_types)]
mod jtrace_h {
    include!(concat!(env!("OUT_DIR"), "/jtrace_h.rs"));
}

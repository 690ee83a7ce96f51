//! Loading and attaching the BPF programs: the skeleton opened with the
//! configuration applied, the filter filled, the tracepoint programs
//! attached, and the library calls' uprobes.

use std::collections::BTreeMap;
use std::mem::{offset_of, MaybeUninit};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, OpenObject, UprobeMultiOpts, UprobeOpts};

use crate::features::{kernel_older_than, missing_tracepoints, FILTER_TGID_LIMIT, VMLINUX_BTF};
use crate::libcalls::{lookup_functions, Sym};
use crate::sampling::open_cpu_clocks;
use crate::{jtrace_h, skel, RecorderConfig, ResolvedLibCall, SyscallMode};

/// Tracepoints (BTF names `btf_trace_<name>`) of the scheduler programs,
/// always needed (the interrupt and timer ones tell a wakeup an interrupt
/// did); the others depend on the configuration.
const SCHED_TRACEPOINTS: [&str; 13] = [
    "sched_switch",
    "sched_waking",
    "sched_wakeup_new",
    "sched_process_fork",
    "sched_process_exit",
    "sched_process_exec",
    "task_rename",
    "irq_handler_entry",
    "irq_handler_exit",
    "hrtimer_expire_entry",
    "hrtimer_expire_exit",
    "timer_expire_entry",
    "timer_expire_exit",
];

pub(crate) fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let perm = matches!(e.kind(), libbpf_rs::ErrorKind::PermissionDenied);
    let hint = if !root || perm {
        " (are you root / CAP_BPF+CAP_PERFMON?)"
    } else {
        " (the libbpf messages above say why)"
    };
    anyhow!("{what} failed: {e}{hint}")
}

/// Sets the filter bit of `tgid` (before the programs are attached: no
/// BPF program writes the bitmap yet).
fn filter_add(bits: &mut [u64], tgid: u32) -> Result<()> {
    let word = bits
        .get_mut((tgid / 64) as usize)
        .filter(|_| tgid < FILTER_TGID_LIMIT)
        .with_context(|| {
            format!("cannot trace pid {tgid}: above the {FILTER_TGID_LIMIT} process ids jtrace's filter holds")
        })?;
    *word |= 1 << (tgid % 64);
    Ok(())
}

/// Opens the BPF object with the configuration applied (programs of the
/// features not wanted are not even loaded), loads it, fills the filter
/// with the given pids, attaches the tracepoint programs (the cgroup
/// joins' if `joins_seen`: a subtree is followed and the kernel has the
/// tracepoint), one uprobe / uretprobe pair per library call, the agent's
/// hooks and the CPU sampler (whose clocks, returned, must outlive its
/// links).
pub(crate) fn setup<'o>(
    cfg: &RecorderConfig,
    probes: &[ResolvedLibCall],
    joins_seen: bool,
    object: &'o mut MaybeUninit<OpenObject>,
) -> Result<(skel::JtraceSkel<'o>, Vec<Link>, Vec<OwnedFd>)> {
    let mut open = skel::JtraceSkelBuilder::default()
        .open(object)
        .map_err(|e| load_error("opening the BPF object", e))?;
    open.maps
        .events
        .set_max_entries(cfg.ringbuf_bytes as u32)
        .map_err(|e| anyhow!("setting the ring buffer size to {}: {e}", cfg.ringbuf_bytes))?;
    let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped");
    rodata.launcher_tgid = cfg.launcher_tgid.unwrap_or(0);
    if let Some(v) = &cfg.viewer {
        rodata.viewer_limited = true;
        (rodata.viewer_uid, rodata.viewer_gid) = (v.uid, v.gid);
    }
    if let Some(f) = cfg.cgroup.as_ref().filter(|_| joins_seen) {
        rodata.follow_cgroup_id = f.subtree.id;
        rodata.follow_cgroup_level = f.subtree.level;
        rodata.follow_hierarchy = f.subtree.hierarchy as i32;
        rodata.follow_v2 = f.subtree.v2;
    }
    rodata.syscall_mode = cfg.syscalls.bpf_value();
    rodata.wake_bytes = cfg.ringbuf_bytes as u64 / 4;
    rodata.query_every = query_every(cfg.ringbuf_bytes, libbpf_rs::num_possible_cpus().unwrap_or(1024));
    let deferred = cfg.stacks && cfg.stack_min_block_ns.is_some();
    rodata.stack_mode = match (cfg.stacks, deferred) {
        (false, _) => 0,
        (true, false) => jtrace_h::STACKS_KERNEL | jtrace_h::STACKS_USER,
        (true, true) => jtrace_h::STACKS_KERNEL | jtrace_h::STACKS_USER | jtrace_h::STACKS_DEFERRED,
    };
    rodata.stack_min_block_ns = cfg.stack_min_block_ns.unwrap_or(0);
    rodata.short_stack_every_ns = match cfg.short_block_stacks_hz {
        0 => u64::MAX,
        hz => 1_000_000_000 / u64::from(hz),
    };
    // Full syscall records only: the at-switch ones need no program of their own.
    let syscalls = matches!(cfg.syscalls, SyscallMode::Io | SyscallMode::All);
    let p = &mut open.progs;
    p.sys_enter.set_autoload(syscalls);
    p.sys_exit.set_autoload(syscalls);
    p.page_fault_user.set_autoload(cfg.page_faults);
    p.block_rq_insert.set_autoload(cfg.block_io);
    p.block_rq_issue.set_autoload(cfg.block_io);
    p.block_rq_complete.set_autoload(cfg.block_io);
    // Multi links detach in one RCU grace period per link instead of one
    // per uprobe (≈0.1 s each here); they need Linux 6.6. The environment
    // variable lets the tests run the older path on a new kernel.
    let multi = uprobe_multi();
    let agent_hooks = cfg.stacks && cfg.agent_library.is_some();
    // JVMs announced to the agent hooks may get safepoint probes later
    // (late_safepoints.rs).
    let lib_calls = !probes.is_empty() || agent_hooks;
    p.lib_enter.set_autoload(lib_calls && !multi);
    p.lib_exit.set_autoload(lib_calls && !multi);
    p.lib_enter_multi.set_autoload(lib_calls && multi);
    p.lib_exit_multi.set_autoload(lib_calls && multi);
    p.hotspot_layout.set_autoload(agent_hooks && !multi);
    p.java_thread.set_autoload(agent_hooks && !multi);
    p.agent_hooks_multi.set_autoload(agent_hooks && multi);
    p.cpu_sample.set_autoload(cfg.stacks && cfg.cpu_sample_hz > 0);
    p.rseq_update.set_autoload(deferred);
    p.block_stacks_exit.set_autoload(deferred);
    p.cgroup_attach_task.set_autoload(joins_seen && cfg.cgroup.is_some());
    let mut wanted: Vec<&str> = SCHED_TRACEPOINTS.to_vec();
    if deferred {
        wanted.push("rseq_update");
    }
    if syscalls {
        wanted.extend(["sys_enter", "sys_exit"]);
    }
    if cfg.page_faults {
        wanted.push("page_fault_user");
    }
    if cfg.block_io {
        wanted.extend(["block_rq_insert", "block_rq_issue", "block_rq_complete"]);
    }
    // libbpf raises RLIMIT_MEMLOCK itself on kernels that still charge BPF
    // memory to it (< 5.11); newer ones do not need it.
    let mut sk = match open.load() {
        Ok(sk) => sk,
        Err(e) => {
            let missing = missing_tracepoints(&wanted);
            if !missing.is_empty() {
                bail!(
                    "this kernel lacks the tracepoint(s) {} (no btf_trace_<name> in {VMLINUX_BTF}); \
                     jtrace needs them{}",
                    missing.join(", "),
                    if missing
                        .iter()
                        .any(|m| m.starts_with("block_") || m.starts_with("page_"))
                    {
                        " (or turn the feature off)"
                    } else {
                        ""
                    }
                );
            }
            if let Some(release) = kernel_older_than(6, 2) {
                bail!(
                    "this kernel ({release}) is older than 6.2: jtrace needs the BPF helper \
                     bpf_task_pt_regs in tracing programs (5.15) to tell which syscall a thread \
                     blocks in, and the kfunc bpf_rdonly_cast (6.2) to read the file behind its \
                     fd ({e})"
                );
            }
            return Err(load_error("loading BPF programs", e));
        }
    };
    let filter = &mut sk
        .maps
        .bss_data
        .as_deref_mut()
        .context("the BPF filter (.bss) is not memory-mapped")?
        .traced_bits;
    // Of several (a cgroup's), those that exited meanwhile are skipped.
    let alive: Vec<u32> = (cfg.pids.iter().copied())
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    if let (true, Some(pid)) = (alive.is_empty(), cfg.pids.first()) {
        bail!("cannot trace pid {pid}: no such process");
    }
    for pid in alive {
        filter_add(filter, pid)?;
    }
    sk.attach().map_err(|e| load_error("attaching BPF programs", e))?;
    let mut links = if multi {
        attach_lib_calls_multi(&sk, probes, 0)?
    } else {
        attach_lib_calls(&sk, probes, 0)?
    };
    let mut clocks = Vec::new();
    if agent_hooks {
        links.extend(attach_agent_hooks(
            &sk,
            cfg.agent_library.as_deref().expect("checked"),
            multi,
        )?);
    }
    if cfg.stacks && cfg.cpu_sample_hz > 0 {
        clocks = open_cpu_clocks(cfg.cpu_sample_hz, libbpf_rs::num_possible_cpus().unwrap_or(1))?;
        for fd in &clocks {
            let link = sk
                .progs
                .cpu_sample
                .attach_perf_event(fd.as_raw_fd())
                .map_err(|e| load_error("attaching the CPU sampler", e))?;
            links.push(link);
        }
    }
    Ok((sk, links, clocks))
}

/// The agent's announcement functions (agent/src/events/code.rs), probed
/// in every process that maps the library: with `multi`, both in one
/// uprobe.multi link (their cookies say which), which detaches alongside
/// the library calls' links instead of a grace period after them.
fn attach_agent_hooks(sk: &skel::JtraceSkel<'_>, lib: &Path, multi: bool) -> Result<Vec<Link>> {
    let names = ["jtrace_hotspot_layout", "jtrace_java_thread"];
    let found = lookup_functions(lib, &names).with_context(|| format!("reading {}", lib.display()))?;
    let mut offsets = Vec::new();
    for (name, sym) in names.iter().zip(found) {
        let Sym::Function(offset) = sym else {
            bail!(
                "{}: no function {name} (not a jtrace agent of this version?)",
                lib.display()
            );
        };
        offsets.push(offset as usize);
    }
    let attach_error = |e| {
        load_error(
            &format!("attaching uprobes to {} ({})", names.join(" and "), lib.display()),
            e,
        )
    };
    if multi {
        let opts = UprobeMultiOpts {
            offsets,
            cookies: vec![
                u64::from(jtrace_h::AGENT_HOOK_HOTSPOT_LAYOUT),
                u64::from(jtrace_h::AGENT_HOOK_JAVA_THREAD),
            ],
            ..Default::default()
        };
        let link = sk
            .progs
            .agent_hooks_multi
            .attach_uprobe_multi_with_opts(-1, lib, "", opts)
            .map_err(attach_error)?;
        return Ok(vec![link]);
    }
    let mut links = Vec::new();
    for (offset, prog) in offsets
        .into_iter()
        .zip([&sk.progs.hotspot_layout, &sk.progs.java_thread])
    {
        links.push(
            prog.attach_uprobe_with_opts(-1, lib, offset, UprobeOpts::default())
                .map_err(attach_error)?,
        );
    }
    Ok(links)
}

/// The agent's hooks on another copy of the agent, while recording
/// (late_agents.rs).
pub(crate) fn attach_agent_hooks_late(sk: &skel::JtraceSkel<'_>, lib: &Path) -> Result<Vec<Link>> {
    attach_agent_hooks(sk, lib, uprobe_multi())
}

/// Whether library calls are probed with uprobe.multi links: they detach
/// in one RCU grace period per link instead of one per uprobe (≈0.1 s
/// each here); they need Linux 6.6. The environment variable lets the
/// tests run the older path on a new kernel.
fn uprobe_multi() -> bool {
    kernel_older_than(6, 6).is_none() && std::env::var_os("JTRACE_NO_UPROBE_MULTI").is_none()
}

/// Probes `probes` while recording, their ids (cookies) from `first_id` on.
pub(crate) fn attach_lib_calls_from(
    sk: &skel::JtraceSkel<'_>,
    probes: &[ResolvedLibCall],
    first_id: u32,
) -> Result<Vec<Link>> {
    if uprobe_multi() {
        attach_lib_calls_multi(sk, probes, first_id)
    } else {
        attach_lib_calls(sk, probes, first_id)
    }
}

/// One uprobe.multi and one uretprobe.multi link per library, for all of
/// its functions; the probe id (`first_id` + index in `probes`) is each
/// one's cookie.
fn attach_lib_calls_multi(sk: &skel::JtraceSkel<'_>, probes: &[ResolvedLibCall], first_id: u32) -> Result<Vec<Link>> {
    // By the open file (its descriptor): one file, one pair of links.
    let mut by_library: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (id, p) in probes.iter().enumerate() {
        by_library.entry(p.attach_path()).or_default().push(id);
    }
    let mut links = Vec::new();
    for (attach, ids) in by_library {
        let path = &probes[ids[0]].path;
        for (prog, retprobe) in [(&sk.progs.lib_enter_multi, false), (&sk.progs.lib_exit_multi, true)] {
            let opts = UprobeMultiOpts {
                offsets: ids.iter().map(|&id| probes[id].offset as usize).collect(),
                cookies: ids.iter().map(|&id| u64::from(first_id) + id as u64).collect(),
                retprobe,
                ..Default::default()
            };
            // pid -1: every process; the BPF side keeps traced ones only.
            let link = prog.attach_uprobe_multi_with_opts(-1, &attach, "", opts).map_err(|e| {
                let calls: Vec<String> = ids.iter().map(|&id| probes[id].spec.to_string()).collect();
                load_error(
                    &format!(
                        "attaching {} to {} ({})",
                        if retprobe { "uretprobes" } else { "uprobes" },
                        calls.join(", "),
                        path.display()
                    ),
                    e,
                )
            })?;
            links.push(link);
        }
    }
    Ok(links)
}

/// One uprobe / uretprobe pair per library call (kernels before 6.6).
fn attach_lib_calls(sk: &skel::JtraceSkel<'_>, probes: &[ResolvedLibCall], first_id: u32) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for (id, p) in probes.iter().enumerate() {
        for (prog, retprobe) in [(&sk.progs.lib_enter, false), (&sk.progs.lib_exit, true)] {
            let opts = UprobeOpts {
                cookie: u64::from(first_id) + id as u64,
                retprobe,
                ..Default::default()
            };
            // pid -1: every process; the BPF side keeps traced ones only.
            let link = prog
                .attach_uprobe_with_opts(-1, p.attach_path(), p.offset as usize, opts)
                .map_err(|e| {
                    load_error(
                        &format!(
                            "attaching a {} to {} ({})",
                            if retprobe { "uretprobe" } else { "uprobe" },
                            p.spec,
                            p.path.display()
                        ),
                        e,
                    )
                })?;
            links.push(link);
        }
    }
    Ok(links)
}

/// Most bytes one sched_switch batch writes: `struct switch_batch` of
/// bpf/c/sched.bpf.c from its WAKEUP through its records.
const BATCH_MAX_BYTES: usize =
    offset_of!(skel::types::switch_batch, in_tid) - offset_of!(skel::types::switch_batch, wake);

/// One switch batch in how many asks the ring buffer how full it is (to
/// wake the consumer early, see `batch_wake_flags` in sched.bpf.c): as
/// rarely as 1 in 64, but so that what all CPUs may write between two
/// queries stays within a quarter of the buffer, the slack between the
/// wake-up threshold (a quarter full) and the middle.
fn query_every(ringbuf_bytes: usize, cpus: usize) -> u32 {
    (ringbuf_bytes / 4 / (BATCH_MAX_BYTES * cpus.max(1))).clamp(1, 64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_RINGBUF_BYTES;

    #[test]
    fn filter_bits_are_set_per_tgid_and_out_of_range_refused() {
        let mut bits = vec![0u64; (FILTER_TGID_LIMIT / 64) as usize];
        filter_add(&mut bits, 1).unwrap();
        filter_add(&mut bits, 64 + 3).unwrap();
        filter_add(&mut bits, FILTER_TGID_LIMIT - 1).unwrap();
        assert_eq!(bits[0], 0b10);
        assert_eq!(bits[1], 1 << 3);
        assert_eq!(*bits.last().unwrap(), 1 << 63);
        assert_eq!(bits.iter().map(|w| w.count_ones()).sum::<u32>(), 3);
        let e = filter_add(&mut bits, FILTER_TGID_LIMIT).unwrap_err().to_string();
        assert!(e.contains("cannot trace pid 4194304"), "{e}");
    }

    #[test]
    fn ring_buffer_is_queried_often_enough_for_every_size() {
        assert_eq!(query_every(DEFAULT_RINGBUF_BYTES, 2), 64);
        assert_eq!(query_every(4096, 2), 1);
        assert_eq!(query_every(64 << 10, 2), 27);
        for shift in 12..=30 {
            for cpus in [1, 2, 64, 4096] {
                let rb = 1usize << shift;
                let q = query_every(rb, cpus) as usize;
                assert!((1..=64).contains(&q));
                // What all CPUs write unqueried fits in the slack (rb / 4),
                // unless a query on every batch is already the most we can do.
                assert!(q == 1 || q * BATCH_MAX_BYTES * cpus <= rb / 4, "{rb} {cpus}: {q}");
            }
        }
    }
}

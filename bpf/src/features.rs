//! What the running kernel must offer the recorder: BTF, the tracepoints
//! of the features asked for, a recent enough release, and a `pid_max` the
//! process filter can hold.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::jtrace_h;

/// Where the kernel publishes its BTF; the CO-RE programs need it.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Checks that this kernel can run the recorder at all: it must publish its
/// BTF (CONFIG_DEBUG_INFO_BTF=y), which the BTF-enabled tracepoints and the
/// CO-RE relocations need.
pub fn required_kernel_features() -> Result<()> {
    if !Path::new(VMLINUX_BTF).exists() {
        bail!(
            "kernel has no BTF at {VMLINUX_BTF}: jtrace needs a kernel built with \
             CONFIG_DEBUG_INFO_BTF=y (Linux 5.5 or later; most distribution kernels have it)"
        );
    }
    Ok(())
}

/// The running kernel's release if it is older than `major.minor`.
pub(crate) fn kernel_older_than(major: u32, minor: u32) -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim().to_string();
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let (ma, mi) = (it.next()??, it.next()??);
    ((ma, mi) < (major, minor)).then_some(release)
}

/// The tracepoints among `wanted` that this kernel's BTF does not know.
pub(crate) fn missing_tracepoints(wanted: &[&str]) -> Vec<String> {
    let Ok(btf) = std::fs::read(VMLINUX_BTF) else {
        return Vec::new();
    };
    let has = |name: &str| {
        let needle = format!("\0btf_trace_{name}\0");
        btf.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    wanted.iter().filter(|n| !has(n)).map(|n| n.to_string()).collect()
}

/// What the running kernel lets the recorder measure of one cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measure {
    /// Whether the recorder measures it on this kernel.
    pub measured: bool,
    /// How, or why not, in a few words (`jtrace info` prints it).
    pub how: String,
}

/// What the running kernel lets the recorder measure of the causes
/// `throttled` and `steal` (docs/REPORT.md, "throttled and steal"): found
/// in its BTF, as the BPF programs' CO-RE checks find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMeasures {
    /// CPU-quota throttling, timed per thread from its switch-out to its
    /// unthrottle.
    pub throttled: Measure,
    /// Steal time of the threads' on-CPU stretches.
    pub steal: Measure,
}

/// The members of kernel struct `name` in `btf` (empty if it has none).
fn members(btf: &libbpf_rs::btf::Btf<'_>, name: &str) -> Vec<String> {
    btf.type_by_name::<libbpf_rs::btf::types::Struct<'_>>(name)
        .map(|s| {
            s.iter()
                .filter_map(|m| m.name.map(|n| n.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// What this kernel lets the recorder measure of `throttled` and `steal`.
pub fn kernel_measures() -> KernelMeasures {
    let btf = libbpf_rs::btf::Btf::from_vmlinux().ok();
    let has = |ty: &str, field: &str| btf.as_ref().is_some_and(|b| members(b, ty).iter().any(|m| m == field));
    let no_steal_acc =
        std::fs::read_to_string("/proc/cmdline").is_ok_and(|c| c.split_whitespace().any(|w| w == "no-steal-acc"));
    measures(&has, no_steal_acc)
}

/// [`kernel_measures`] given which struct members the kernel has and
/// whether it was booted with `no-steal-acc`.
fn measures(has: &dyn Fn(&str, &str) -> bool, no_steal_acc: bool) -> KernelMeasures {
    let group = has("sched_entity", "cfs_rq");
    let throttled = if !group || !has("cfs_rq", "throttle_count") {
        Measure {
            measured: false,
            how: "not timed: this kernel has no CFS bandwidth control (CONFIG_CFS_BANDWIDTH,                   CONFIG_FAIR_GROUP_SCHED); no thread is throttled by a CPU quota"
                .into(),
        }
    } else if !has("cfs_rq", "throttled_clock_self_time") {
        Measure {
            measured: false,
            how: "not timed: this kernel's cfs_rq keeps no throttled time of its own                   (throttled_clock_self_time, Linux 6.6): time a CPU quota held a thread is runqueue"
                .into(),
        }
    } else if has("task_struct", "throttled") {
        Measure {
            measured: true,
            how: "timed per thread (task-based throttling, Linux 6.18): from its switch-out to its unthrottle".into(),
        }
    } else {
        Measure {
            measured: true,
            how: "timed per thread (cfs_rq throttling, before Linux 6.18) from its switch-out to its unthrottle;                   a wakeup into a throttled cgroup waits as runqueue"
                .into(),
        }
    };
    let steal = if !group || !has("rq", "prev_steal_time_rq") {
        Measure {
            measured: false,
            how: "not measured: this kernel keeps no steal clock per run queue (CONFIG_PARAVIRT_TIME_ACCOUNTING):                   time the hypervisor took is cpu"
                .into(),
        }
    } else if no_steal_acc {
        Measure {
            measured: false,
            how: "not measured: the kernel was booted with no-steal-acc: time the hypervisor took is cpu".into(),
        }
    } else {
        Measure {
            measured: true,
            how: "measured at every switch and CPU sample (the paravirt steal clock; 0 on bare metal)".into(),
        }
    };
    KernelMeasures { throttled, steal }
}

/// Capacity of the BPF filter bitmap (`TRACED_TGID_LIMIT` of bpf/c/jtrace.h):
/// PID_MAX_LIMIT of a 64-bit kernel, the largest `kernel.pid_max` allowed.
pub(crate) const FILTER_TGID_LIMIT: u32 = jtrace_h::TRACED_TGID_LIMIT;

/// Checks that every pid this kernel can hand out fits in the filter, so
/// that no process of the traced tree can be missed for want of room.
pub(crate) fn check_pid_max() -> Result<()> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
    let pid_max: u64 = text
        .trim()
        .parse()
        .with_context(|| format!("{PATH} holds {:?}, not a number", text.trim()))?;
    if pid_max > u64::from(FILTER_TGID_LIMIT) {
        bail!(
            "kernel.pid_max is {pid_max}, above the {FILTER_TGID_LIMIT} process ids jtrace's \
             filter holds; lower it (sysctl kernel.pid_max={FILTER_TGID_LIMIT})"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_can_run_the_recorder() {
        required_kernel_features().unwrap();
        // Linux caps pid_max at the filter's capacity.
        check_pid_max().unwrap();
        assert_eq!(kernel_older_than(6, 2), None);
        assert!(kernel_older_than(u32::MAX, 0).is_some());
        assert_eq!(missing_tracepoints(&["sched_switch"]), Vec::<String>::new());
        assert_eq!(missing_tracepoints(&["no_such_tracepoint"]), ["no_such_tracepoint"]);
    }

    /// This kernel (6.18, BTF, CFS bandwidth, paravirt time accounting)
    /// lets both be measured; older kernels say why not, by what they lack.
    #[test]
    fn throttle_and_steal_are_measured_by_what_the_kernel_has() {
        let m = kernel_measures();
        assert!(m.throttled.measured, "{}", m.throttled.how);
        assert!(m.throttled.how.contains("task-based"), "{}", m.throttled.how);
        assert!(m.steal.measured, "{}", m.steal.how);
        let without = |gone: &'static [(&str, &str)]| measures(&move |t, f| !gone.contains(&(t, f)), false);
        let older = without(&[("task_struct", "throttled")]);
        assert!(older.throttled.measured && older.throttled.how.contains("before Linux 6.18"));
        let oldest = without(&[("task_struct", "throttled"), ("cfs_rq", "throttled_clock_self_time")]);
        assert!(!oldest.throttled.measured && oldest.throttled.how.contains("runqueue"));
        let no_pv = without(&[("rq", "prev_steal_time_rq")]);
        assert!(!no_pv.steal.measured && no_pv.steal.how.contains("is cpu"));
        assert!(!measures(&|_, _| true, true).steal.measured);
    }
}

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
}

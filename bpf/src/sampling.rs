//! The CPU clocks that drive CPU samples: one software perf event
//! (cpu-clock) per CPU at a frequency, every task of that CPU; the BPF
//! program (`cpu_sample` of bpf/c/stacks.bpf.c) keeps traced threads only.

use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Result};

/// `struct perf_event_attr` (include/uapi/linux/perf_event.h) up to
/// PERF_ATTR_SIZE_VER5, the fields this needs; the rest stays zero.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
/// `attr.freq`: sample_freq is a frequency, not a period.
const FLAG_FREQ: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// Opens a cpu-clock event at `hz` on every CPU that is online; the fds
/// are for `attach_perf_event`. CPUs that are offline are skipped; none
/// at all is an error.
pub(crate) fn open_cpu_clocks(hz: u32, cpus: usize) -> Result<Vec<OwnedFd>> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_freq: u64::from(hz),
        flags: FLAG_FREQ,
        ..Default::default()
    };
    let mut fds = Vec::new();
    let mut last_err = None;
    for cpu in 0..cpus {
        // SAFETY: perf_event_open reads `attr` (valid, sized by its `size`)
        // and returns a new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            last_err = Some(std::io::Error::last_os_error());
            continue;
        }
        // SAFETY: a new fd that nothing else owns.
        fds.push(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    }
    if fds.is_empty() {
        bail!(
            "cannot open a CPU clock for CPU samples (perf_event_open: {}); use --cpu-samples 0",
            last_err.map_or_else(|| "no CPU".to_string(), |e| e.to_string())
        );
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_size_of_version_5() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }
}

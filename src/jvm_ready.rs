//! Whether a JVM that has just started may be attached to (`attach
//! --cgroup` finds JVMs starting in the cgroup): the attach protocol
//! begins with SIGQUIT, and a JVM that has not finished starting may not
//! have its attach machinery ready (it would print a thread dump, or
//! remove the socket it just made). HotSpot says it is done in its
//! performance counters: `sun.rt.createVmEndTime` is set at the end of
//! its start (Management::record_vm_init_completed). A JVM without them
//! (-XX:-UsePerfData, or a container without a user name for its
//! hsperfdata directory) is taken as ready once its threads show that its
//! start went past the attach machinery: HotSpot starts the "Signal
//! Dispatcher" (which handles SIGQUIT), readies the attach listener
//! (AttachListener::vm_start), and only then starts its "Service Thread".

use crate::hotspot::{hsperfdata, Jvm};
use std::time::Duration;

/// The counter HotSpot sets when it has finished starting.
const VM_STARTED: &str = "sun.rt.createVmEndTime";

/// The names (comm, at most 15 bytes) of the threads a JVM without
/// counters must have.
const READY_THREADS: [&str; 2] = ["Signal Dispatch", "Service Thread"];

/// Whether `jvm` has finished starting (see the module documentation).
pub(crate) fn started(jvm: &Jvm) -> bool {
    match hsperfdata(jvm).map(|data| perf_long(&data, VM_STARTED)) {
        Some(Some(end)) => end > 0,
        // Counters being written, or a file not HotSpot's: not yet.
        Some(None) => false,
        None => {
            let names = thread_names(jvm.pid);
            READY_THREADS.iter().all(|n| names.iter().any(|t| t == n))
        }
    }
}

/// The names of process `pid`'s threads.
fn thread_names(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    (tasks.flatten())
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim_end_matches('\n').to_string())
        .collect()
}

/// How long process `pid` has run.
pub(crate) fn age(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime, clock ticks after boot), counted after the `)`
    // that ends comm (field 2), which may hold spaces.
    let start: u64 = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    Some(Duration::from_secs_f64((uptime - start as f64 / hz as f64).max(0.0)))
}

/// The value of the long counter `name` in an hsperfdata file (HotSpot's
/// PerfDataPrologue, then PerfDataEntry records; perfMemory.hpp), if it
/// holds one.
fn perf_long(data: &[u8], name: &str) -> Option<i64> {
    const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
    if data.get(..4)? != MAGIC {
        return None;
    }
    let little = *data.get(4)? == 1;
    let i32_at = |at: usize| -> Option<i32> {
        let b: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if little {
            i32::from_le_bytes(b)
        } else {
            i32::from_be_bytes(b)
        })
    };
    let entry_offset = usize::try_from(i32_at(24)?).ok()?;
    let entries = i32_at(28)?;
    let mut at = entry_offset;
    for _ in 0..entries.clamp(0, 100_000) {
        let len = usize::try_from(i32_at(at)?).ok().filter(|&l| l >= 20)?;
        let name_at = at.checked_add(usize::try_from(i32_at(at + 4)?).ok()?)?;
        let kind = *data.get(at + 12)?;
        let value_at = at.checked_add(usize::try_from(i32_at(at + 16)?).ok()?)?;
        let rest = data.get(name_at..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        if kind == b'J' && &rest[..end] == name.as_bytes() {
            let b: [u8; 8] = data.get(value_at..value_at.checked_add(8)?)?.try_into().ok()?;
            return Some(if little {
                i64::from_le_bytes(b)
            } else {
                i64::from_be_bytes(b)
            });
        }
        at = at.checked_add(len)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An hsperfdata file of two entries, as HotSpot lays them out.
    fn file(value: i64) -> Vec<u8> {
        let mut d = vec![0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1];
        d.extend_from_slice(&[0; 16]);
        d.extend_from_slice(&32i32.to_le_bytes()); // entry_offset
        d.extend_from_slice(&2i32.to_le_bytes()); // num_entries
        for (name, kind, v) in [("sun.rt.other", b'J', 7i64), (VM_STARTED, b'J', value)] {
            let name_len = (name.len() + 1).next_multiple_of(8);
            let len = 24 + name_len + 8;
            d.extend_from_slice(&(len as i32).to_le_bytes());
            d.extend_from_slice(&24i32.to_le_bytes()); // name_offset
            d.extend_from_slice(&0i32.to_le_bytes()); // vector_length
            d.extend_from_slice(&[kind, 0, 0, 0]);
            d.extend_from_slice(&((24 + name_len) as i32).to_le_bytes()); // data_offset
            d.extend_from_slice(&[0; 4]);
            let mut n = name.as_bytes().to_vec();
            n.resize(name_len, 0);
            d.extend_from_slice(&n);
            d.extend_from_slice(&v.to_le_bytes());
        }
        d
    }

    #[test]
    fn long_counters_are_found_by_name() {
        assert_eq!(perf_long(&file(1234), VM_STARTED), Some(1234));
        assert_eq!(perf_long(&file(0), VM_STARTED), Some(0));
        assert_eq!(perf_long(&file(0), "sun.rt.other"), Some(7));
        assert_eq!(perf_long(&file(0), "sun.rt.none"), None);
        // Cut short, or not an hsperfdata file: nothing.
        let f = file(5);
        assert_eq!(perf_long(&f[..f.len() - 4], VM_STARTED), None);
        assert_eq!(perf_long(b"not hsperfdata at all, not at all", VM_STARTED), None);
    }

    /// This process has run for a while by the time the test runs; pid 1
    /// longer. Its threads have names (the test harness's among them).
    #[test]
    fn ages_and_threads_of_processes() {
        assert!(age(1).unwrap() >= age(std::process::id()).unwrap());
        assert!(age(4_999_999).is_none());
        assert!(!thread_names(std::process::id()).is_empty());
        assert!(thread_names(4_999_999).is_empty());
    }
}

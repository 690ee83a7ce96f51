//! Tasks in pid namespaces (containers). The BPF side writes a TASK_NS
//! record for each traced task forked in a namespace other than the initial
//! one; the tasks of a process that exist before the recording starts
//! (`attach`, `record -p`) get theirs here, from `/proc`: its NSpid line
//! lists the task's id at every level, the last in its own namespace,
//! which `/proc/PID/task/TID/ns/pid` names by inode.

use std::os::unix::fs::MetadataExt;

use jtrace_format::{Encoder, Payload, Record, TaskNs};

/// The ids of `/proc/{pid}/task/{tid}/status`'s NSpid line, outermost first.
fn nspid(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| v.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// TASK_NS records (encoded, time `ts`) for the threads of process `pid`
/// that live in a pid namespace other than the initial one; none for a
/// process of the initial namespace or one that is gone.
pub(crate) fn existing_tasks(pid: u32, ts: u64) -> Vec<u8> {
    let mut enc = Encoder::new();
    let Ok(proc_status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return enc.buf;
    };
    let tgids = nspid(&proc_status);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return enc.buf;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        let ids = nspid(&status);
        let (Some(&ns_tid), Some(&ns_tgid)) = (ids.last(), tgids.last()) else {
            continue;
        };
        if ids.len() < 2 || ids.len() != tgids.len() {
            continue;
        }
        // The namespace's inode: what `ns/pid` links to, as stat sees it.
        let Ok(ns) = std::fs::metadata(t.path().join("ns/pid")) else {
            continue;
        };
        enc.record(&Record {
            tid,
            ts,
            payload: Payload::TaskNs(TaskNs {
                tgid: pid,
                ns_tid,
                ns_tgid,
                level: (ids.len() - 1) as u32,
                pidns_ino: ns.ino(),
            }),
        });
    }
    enc.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nspid_lists_every_level() {
        assert_eq!(nspid("Name:\tjava\nNSpid:\t4242\t17\t1\n"), vec![4242, 17, 1]);
        assert_eq!(nspid("NSpid:\t4242\n"), vec![4242]);
        assert!(nspid("Name:\tx\n").is_empty());
    }

    /// A process of the initial namespace gets no record.
    #[test]
    fn the_initial_namespace_needs_no_record() {
        assert!(existing_tasks(std::process::id(), 1).is_empty());
    }
}

//! Pairing a JVM's namespace tids with host tids, on hand-built traces
//! written with the real encoder: a paired thread meets its kernel events;
//! one that no TASK_NS record names is unmatched, and none of its time is
//! CPU (the worst thing a tracer could say of a sleep).

use jtrace_format::{kind, JvmPidNs, Payload, TaskNs};
use jtrace_merge::{build_report, Cause, Trace};
use jtrace_testkit::TraceBuilder;

const NS_INO: u64 = 4_026_532_555;
const HOST_PID: u32 = 5000;
const NS_PID: u32 = 1;

/// A JVM in a pid namespace: its threads are ns tids 2 (host 5002, paired
/// by a TASK_NS) and 3 (host 5003, never paired). Both sleep 40 ms in
/// `Napper.nap` between 10 and 50 ms; the kernel sees both block.
fn namespace_trace(dir: &std::path::Path) {
    let mut b = TraceBuilder::default();
    // The JVM's own records, by its namespace's tids.
    b.jvm_start(NS_PID, 0);
    b.j(
        NS_PID,
        0,
        Payload::JvmPidNs(JvmPidNs {
            pidns_ino: NS_INO,
            ns_pid: NS_PID,
            reserved: 0,
        }),
    );
    b.method(NS_PID, 1, "Napper", "nap", "()V");
    for ns_tid in [2, 3] {
        b.thread_start(NS_PID, ns_tid, 1_000_000, &format!("napper-{ns_tid}"), "main");
        b.enter(ns_tid, 10_000_000, 1);
        b.jvm_event(ns_tid, 10_500_000, kind::SLEEP_BEGIN, "");
        b.jvm_event(ns_tid, 49_500_000, kind::SLEEP_END, "");
        b.exit(ns_tid, 50_000_000, 1);
    }
    // The kernel's, by host tids; only 5001 (the JVM) and 5002 are paired.
    for (host, ns_tid) in [(HOST_PID + 1, NS_PID), (HOST_PID + 2, 2)] {
        b.k(
            host,
            500_000,
            Payload::TaskNs(TaskNs {
                tgid: HOST_PID + 1,
                ns_tid,
                ns_tgid: NS_PID,
                level: 1,
                pidns_ino: NS_INO,
            }),
        );
    }
    for host in [HOST_PID + 2, HOST_PID + 3] {
        b.switch_in_on(host, 1_000_000, 0, 0);
        b.switch_out(host, 10_600_000, false, 0);
        b.wakeup(host, 49_400_000, 0);
        b.switch_in(host, 49_450_000, 0);
        b.switch_out(host, 60_000_000, false, 0);
    }
    b.write(dir, 0, 70_000_000);
}

#[test]
fn paired_threads_meet_the_kernel_and_unpaired_ones_are_never_cpu() {
    let dir = std::env::temp_dir().join(format!("jtrace-pidns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    namespace_trace(&dir);
    let trace = Trace::open(&dir).unwrap();
    let paired = &trace.threads[&(HOST_PID + 2)];
    assert_eq!(paired.java_name.as_deref(), Some("napper-2"));
    assert_eq!((paired.ns_tid, paired.unmatched), (Some(2), false));
    assert_eq!(paired.tgid, HOST_PID + 1, "the JVM's pid is the host's");
    let unpaired = (trace.threads.values())
        .find(|t| t.java_name.as_deref() == Some("napper-3"))
        .expect("the unpaired thread");
    assert!(unpaired.unmatched && unpaired.ns_tid == Some(3));
    assert_ne!(unpaired.tid, 3, "an unpaired tid never passes for a kernel tid");
    // The kernel's events of 5003 stay a thread of their own, unnamed.
    assert!(trace.threads[&(HOST_PID + 3)].java_name.is_none());

    let r = build_report(&trace, &Default::default());
    let nap = |tid: u32| {
        let t = r.threads.iter().find(|t| t.tid == tid).unwrap();
        (
            t.methods[0].cpu_ns,
            t.methods[0].off_cpu_ns.get(Cause::Sleep),
            t.methods[0].not_covered_ns,
        )
    };
    let (cpu, sleep, not_covered) = nap(paired.tid);
    assert_eq!(
        sleep, 38_800_000,
        "the paired thread's sleep: {cpu} cpu, {not_covered} not covered"
    );
    let (cpu, sleep, not_covered) = nap(unpaired.tid);
    assert_eq!((cpu, sleep), (0, 0), "an unpaired thread's time is no cause and no CPU");
    assert_eq!(not_covered, 40_000_000);
    let json = serde_json::to_value(&r).unwrap();
    let t = json["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == unpaired.tid)
        .unwrap();
    assert_eq!(
        (t["unmatched"].as_bool(), t["ns_tid"].as_u64()),
        (Some(true), Some(3)),
        "{t}"
    );
    let problems = json["trace"]["problems"].to_string();
    assert!(
        problems.contains("napper-3") && problems.contains("could not be paired"),
        "{problems}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! JVMs where production JVMs run: in pid namespaces of their own
//! (containers). The agent there records the namespace's tids; every
//! thread must still meet its kernel events under its host tid
//! (docs/REPORT.md, "Containers").

mod common;

use common::*;
use jtrace_merge::{Cause, Invocation, ThreadInfo, Trace};

const MS: u64 = 1_000_000;
const DELAY_MS: u64 = 100;

/// Records GroundTruth `scenario` under `jtrace run`, the JVM started in
/// `levels` nested pid namespaces (`unshare --pid --fork --mount-proc`).
fn record_in_namespaces(jdk: &str, scenario: &str, levels: usize) -> Trace {
    let classes = classes();
    let out = tempdir(&format!("pidns-{scenario}")).join("t.jtrace");
    let java = java(jdk);
    let delay = DELAY_MS.to_string();
    let mut cmd: Vec<&str> = Vec::new();
    for _ in 0..levels {
        cmd.extend(["unshare", "--pid", "--fork", "--mount-proc"]);
    }
    cmd.extend([
        java.to_str().unwrap(),
        "-cp",
        classes.to_str().unwrap(),
        "GroundTruth",
        scenario,
        &delay,
    ]);
    let o = jtrace_run(&out, &["--methods", "GroundTruth.*", "--complete"], &cmd);
    assert!(o.status.success(), "{jdk} {scenario}: jtrace run failed");
    Trace::open(&out).unwrap()
}

/// The one invocation of `GroundTruth.<name>` and its thread.
fn invocation(trace: &Trace, name: &str) -> (ThreadInfo, Invocation) {
    let found: Vec<_> = (invocations(trace).into_iter())
        .filter(|(_, i)| {
            let m = &trace.methods[i.method as usize];
            m.class == "GroundTruth" && m.name == name
        })
        .collect();
    assert_eq!(found.len(), 1, "expected one invocation of {name}");
    found[0].clone()
}

/// A sleep, a contended monitor and a socket wait, in a JVM in its own pid
/// namespace (and one two namespaces deep), on every JDK: each lands in its
/// cause (≥ 85 % of the injected delay), not in CPU; the method's thread is
/// its host tid with the namespace's tid beside it; no thread is unmatched.
#[test]
fn a_jvm_in_its_own_pid_namespace_meets_the_kernel() {
    let cases = [
        ("sleep", "sleepFor", Cause::Sleep),
        ("monitor", "enterMonitor", Cause::Monitor),
        ("socket", "readLateReply", Cause::Socket),
    ];
    let mut runs: Vec<(&str, usize, &(&str, &str, Cause))> = Vec::new();
    for jdk in JDKS {
        runs.extend(cases.iter().map(|c| (jdk, 1, c)));
    }
    // Nested: a container in a container.
    runs.push((JDKS[0], 2, &cases[0]));
    for (jdk, levels, (scenario, method, cause)) in runs {
        {
            let trace = record_in_namespaces(jdk, scenario, levels);
            assert_exact(&trace);
            let (th, inv) = invocation(&trace, method);
            let b = inv.breakdown;
            eprintln!(
                "{} {scenario} (ns depth {levels}): tid {} ns {:?}, wall {:.1} ms cpu {:.1} ms {} {:.1} ms",
                jdk_name(jdk),
                th.tid,
                th.ns_tid,
                b.wall as f64 / 1e6,
                b.cpu as f64 / 1e6,
                cause.name(),
                b.off.get(*cause) as f64 / 1e6
            );
            assert!(
                b.off.get(*cause) * 100 >= DELAY_MS * MS * 85,
                "{} {scenario}: {} is {} ns of a {DELAY_MS} ms delay (cpu {} ns)",
                jdk_name(jdk),
                cause.name(),
                b.off.get(*cause),
                b.cpu
            );
            assert!(
                b.cpu < DELAY_MS * MS / 2,
                "{} {scenario}: the wait is CPU",
                jdk_name(jdk)
            );
            let ns_tid = th.ns_tid.expect("the JVM's thread has a namespace tid");
            assert_ne!(ns_tid, th.tid, "the host tid is not the namespace's");
            assert!(!th.unmatched);
            assert!(
                trace.threads.values().all(|t| !t.unmatched),
                "{} {scenario}: unmatched threads",
                jdk_name(jdk)
            );
            // The report says both tids.
            let r = report_json(trace.dir.as_path());
            let t = r["threads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["tid"] == th.tid)
                .expect("the thread in the report");
            assert_eq!(t["ns_tid"], ns_tid, "{t}");
            assert!(t.get("unmatched").is_none());
        }
    }
}

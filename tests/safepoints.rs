//! Safepoint windows: JVMTI does not report safepoints, so the kernel
//! recorder probes HotSpot's SafepointSynchronize::begin/end (uprobes on
//! libjvm.so) and the merge blames time a Java thread spends stopped at a
//! safepoint on `safepoint`. Ground truth: a worker computes while another
//! thread forces a safepoint per Thread.getAllStackTraces() call.

mod common;

use common::*;
use jtrace_merge::{Cause, Event, Trace};

const DUMPS: usize = 1000;

#[test]
fn thread_dumps_stop_a_computing_worker_at_safepoints() {
    for jdk in JDKS {
        let out = tempdir("safepoints");
        let cp = classes();
        let java = java(jdk);
        let dumps = DUMPS.to_string();
        let o = jtrace_run(
            &out,
            &["--methods", "Safepoints.compute"],
            &[
                java.to_str().unwrap(),
                "-cp",
                cp.to_str().unwrap(),
                "Safepoints",
                &dumps,
            ],
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("done {DUMPS}")));
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);

        let worker = worker(&trace);
        // Each dump is one safepoint, seen by every Java thread of the JVM
        // (one that contains a GC counts as a GC stop).
        let windows = windows(&trace, worker.tid);
        assert!(windows >= DUMPS, "{jdk}: {windows} safepoint windows for {DUMPS} dumps");

        // The worker's compute() is stopped at those safepoints: that is
        // most of its blocked time, and little is unexplained.
        let (mut off, mut runq, mut safepoint, mut gc, mut unknown, mut wall) = (0, 0, 0, 0, 0, 0);
        for (t, inv) in invocations(&trace) {
            if t.tid == worker.tid && trace.methods[inv.method as usize].name == "compute" {
                let b = inv.breakdown;
                off += b.off.total();
                runq += b.off.get(Cause::Runqueue);
                safepoint += b.off.get(Cause::Safepoint);
                gc += b.off.get(Cause::Gc);
                unknown += b.off.get(Cause::Unknown);
                wall += b.wall;
            }
        }
        eprintln!(
            "{jdk}: compute wall {wall} off {off} runqueue {runq} safepoint {safepoint} gc {gc} unknown {unknown}"
        );
        // The dumps allocate, so a young GC may stop the worker too: a
        // safepoint that contains a GC is a `gc` stop, a different cause.
        assert!(safepoint > gc, "{jdk}: safepoint {safepoint} ns, gc {gc} ns");
        assert!(
            (safepoint + gc) * 100 >= (off - runq) * 85,
            "{jdk}: safepoint {safepoint} + gc {gc} of {} blocked ns",
            off - runq
        );
        assert!(unknown * 20 < wall, "{jdk}: unknown {unknown} of wall {wall}");
        // The probes are windows, not library calls of the VM thread.
        assert!(
            !invocations(&trace)
                .iter()
                .any(|(_, inv)| trace.methods[inv.method as usize].name.contains("SafepointSynchronize")),
            "{jdk}: safepoint probes became library-call invocations"
        );
        std::fs::remove_dir_all(&out).ok();
    }
}

fn worker(trace: &Trace) -> &jtrace_merge::ThreadInfo {
    trace
        .threads
        .values()
        .find(|t| t.java_name.as_deref() == Some("worker"))
        .expect("worker thread")
}

/// The safepoint (or GC) windows thread `tid` saw.
fn windows(trace: &Trace, tid: u32) -> usize {
    trace.events[&tid]
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                Event::Window {
                    cause: Cause::Safepoint | Cause::Gc,
                    begin: true
                }
            )
        })
        .count()
}

/// A JVM that a script starts from a JDK outside the system's JVM
/// directory (JDK 11 and 21 of target/jdks): jtrace cannot tell its
/// libjvm.so at start; the JVM's announcement to the stack walk gets its
/// safepoints probed while it runs.
#[test]
fn a_jvm_a_script_starts_gets_its_safepoints_probed() {
    let dumps = 200;
    for jdk in [JDKS[1], JDK21] {
        let out = tempdir("safepoints-script");
        let cp = classes();
        let java = java(jdk);
        // The dumps begin 1 s in: the probes come within 250 ms of the
        // agent's start.
        let cmd = format!("{} -cp {} Safepoints {dumps} 1000", java.display(), cp.display());
        let o = jtrace_run(&out, &["--methods", "Safepoints.compute"], &["sh", "-c", &cmd]);
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let windows = windows(&trace, worker(&trace).tid);
        // The first safepoints may come before the probes: most dumps.
        assert!(
            windows * 10 >= dumps * 9,
            "{jdk}: {windows} safepoint windows for {dumps} dumps"
        );
        std::fs::remove_dir_all(&out).ok();
    }
}

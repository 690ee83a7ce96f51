//! Gap attribution on ground-truth workloads: each scenario of
//! tests/java/GroundTruth.java injects one cause of a known size, released by
//! a thread named "releaser". Run under `jtrace run` on JDK 17 and 25, the
//! merged trace must give that cause ≥ 85% of the injected delay, keep
//! `unknown` under 5% of wall, and name the releaser as the waker.

mod common;

use common::*;
use jtrace_merge::{analyze, Cause, Invocation, OffCpuInterval, ThreadInfo, Trace, Visitor};
use std::path::PathBuf;

const MS: u64 = 1_000_000;
const DELAY_MS: u64 = 100;

#[derive(Default)]
struct Collect {
    invs: Vec<(ThreadInfo, Invocation)>,
    ivs: Vec<(u32, OffCpuInterval)>,
}

impl Visitor for Collect {
    fn exit(&mut self, t: &ThreadInfo, _d: usize, inv: &Invocation) {
        self.invs.push((t.clone(), *inv));
    }
    fn off_cpu(&mut self, t: &ThreadInfo, _d: usize, iv: &OffCpuInterval) {
        self.ivs.push((t.tid, *iv));
    }
}

struct Outcome {
    trace: Trace,
    c: Collect,
}

impl Outcome {
    /// The one invocation of `GroundTruth.<name>`.
    fn invocation(&self, name: &str) -> (ThreadInfo, Invocation) {
        let found: Vec<_> = self
            .c
            .invs
            .iter()
            .filter(|(_, i)| {
                let m = &self.trace.methods[i.method as usize];
                m.class == "GroundTruth" && m.name == name
            })
            .cloned()
            .collect();
        assert_eq!(found.len(), 1, "expected one invocation of {name}");
        found[0].clone()
    }

    /// Name of the Java thread whose wakeup ended the last `cause` block
    /// inside `inv` that a Java thread ended: the release. (HotSpot's
    /// contended enter parks with timed back-off, so earlier blocks end by
    /// timer interrupts; on JDK 11 a short block at a safepoint, ended by
    /// the VM thread, may follow the release.)
    fn waker_of(&self, tid: u32, inv: &Invocation, cause: Cause) -> String {
        let iv = self
            .c
            .ivs
            .iter()
            .filter(|(t, iv)| *t == tid && iv.start >= inv.entry && iv.end <= inv.exit)
            .filter(|(_, iv)| iv.split.off.get(cause) > 0)
            .filter(|(_, iv)| {
                iv.wake
                    .and_then(|w| self.trace.threads.get(&w.waker_tid))
                    .is_some_and(|t| t.java_name.is_some())
            })
            .max_by_key(|(_, iv)| iv.end)
            .map(|(_, iv)| *iv)
            .expect("an off-CPU interval inside the invocation ended by a Java thread");
        let w = iv.wake.expect("the block ended by a wakeup");
        self.trace
            .threads
            .get(&w.waker_tid)
            .map(|t| t.display_name().to_string())
            .unwrap_or_default()
    }
}

fn run_scenario(jdk: &str, scenario: &str, extra: &[&str], args: &[&str]) -> Outcome {
    let classes = classes();
    let out = tempdir(&format!("gt-{scenario}")).join("t.jtrace");
    let mut jargs: Vec<&str> = vec!["--methods", "GroundTruth.*", "--complete"];
    jargs.extend_from_slice(extra);
    let java = java(jdk);
    let delay = DELAY_MS.to_string();
    let mut cmd: Vec<&str> = vec![
        java.to_str().unwrap(),
        "-cp",
        classes.to_str().unwrap(),
        "GroundTruth",
        scenario,
    ];
    cmd.push(&delay);
    cmd.extend_from_slice(args);
    let o = jtrace_run(&out, &jargs, &cmd);
    assert!(o.status.success(), "{jdk} {scenario}: jtrace run failed");
    let trace = Trace::open(&out).unwrap();
    assert_exact(&trace);
    let mut c = Collect::default();
    analyze(&trace, &mut c);
    Outcome { trace, c }
}

fn report(jdk: &str, scenario: &str, inv: &Invocation) {
    let b = inv.breakdown;
    let causes: Vec<String> = b
        .off
        .nonzero()
        .map(|(c, v)| format!("{} {:.1}ms", c.name(), v as f64 / 1e6))
        .collect();
    eprintln!(
        "{jdk} {scenario}: wall {:.1}ms cpu {:.1}ms off [{}]",
        b.wall as f64 / 1e6,
        b.cpu as f64 / 1e6,
        causes.join(", ")
    );
}

/// The common assertions for a scenario with a known delay and releaser.
fn check_released(jdk: &str, scenario: &str, method: &str, cause: Cause) {
    let o = run_scenario(jdk, scenario, &[], &[]);
    let (t, inv) = o.invocation(method);
    report(jdk, scenario, &inv);
    let b = inv.breakdown;
    assert!(
        b.off.get(cause) * 100 >= DELAY_MS * MS * 85,
        "{jdk} {scenario}: {} holds {:.1} ms of the {DELAY_MS} ms delay",
        cause.name(),
        b.off.get(cause) as f64 / 1e6
    );
    assert!(
        b.off.get(Cause::Unknown) * 20 < b.wall,
        "{jdk} {scenario}: unknown ≥ 5% of wall"
    );
    assert_eq!(
        o.waker_of(t.tid, &inv, cause),
        "releaser",
        "{jdk} {scenario}: wrong waker"
    );
}

/// A cause whose size the program does not choose (fsync, GC): it must
/// hold ≥ 85% of the method's blocked (non-runqueue) off-CPU time.
fn check_dominant(jdk: &str, o: &Outcome, scenario: &str, method: &str, cause: Cause) {
    let (_, inv) = o.invocation(method);
    report(jdk, scenario, &inv);
    let b = inv.breakdown;
    // Runnable time (the run queue, a CPU quota, the hypervisor) is no block.
    let blocked = b.off.total() - b.off.get(Cause::Runqueue) - b.off.get(Cause::Throttled) - b.off.get(Cause::Steal);
    assert!(blocked > 0, "{jdk} {scenario}: {method} never blocked");
    assert!(
        b.off.get(cause) * 100 >= blocked * 85,
        "{jdk} {scenario}: {} is {:.1} of {:.1} ms blocked",
        cause.name(),
        b.off.get(cause) as f64 / 1e6,
        blocked as f64 / 1e6
    );
    assert!(
        b.off.get(Cause::Unknown) * 20 < b.wall,
        "{jdk} {scenario}: unknown ≥ 5% of wall"
    );
}

#[test]
fn sleep_is_sleep() {
    for jdk in JDKS {
        let o = run_scenario(jdk, "sleep", &[], &[]);
        let (_, inv) = o.invocation("sleepFor");
        report(jdk, "sleep", &inv);
        let b = inv.breakdown;
        assert!(
            b.off.get(Cause::Sleep) * 100 >= DELAY_MS * MS * 85,
            "{jdk}: sleep {} ns",
            b.off.get(Cause::Sleep)
        );
        assert!(b.off.get(Cause::Unknown) * 20 < b.wall);
    }
}

#[test]
fn contended_monitor_is_monitor_released_by_holder() {
    for jdk in JDKS {
        check_released(jdk, "monitor", "enterMonitor", Cause::Monitor);
    }
}

#[test]
fn object_wait_is_wait_released_by_notifier() {
    for jdk in JDKS {
        check_released(jdk, "wait", "waitForNotify", Cause::Wait);
    }
}

#[test]
fn reentrant_lock_is_park_released_by_holder() {
    for jdk in JDKS {
        check_released(jdk, "park", "lockReentrant", Cause::Park);
    }
}

#[test]
fn late_socket_reply_is_socket_released_by_server() {
    for jdk in JDKS {
        check_released(jdk, "socket", "readLateReply", Cause::Socket);
    }
}

#[test]
fn fsync_is_file() {
    // On the build's disk, not a tmpfs, so fsync really waits for the device.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for jdk in JDKS {
        let o = run_scenario(jdk, "file", &[], &[dir.to_str().unwrap()]);
        check_dominant(jdk, &o, "file", "writeAndSync", Cause::File);
    }
}

#[test]
fn explicit_gc_is_gc() {
    for jdk in JDKS {
        let o = run_scenario(jdk, "gc", &[], &[]);
        check_dominant(jdk, &o, "gc", "collect", Cause::Gc);
    }
}

/// zlib through an interposed library call: `inflate` is a span nested in
/// inflateBlock, with its own exact split.
#[test]
fn zlib_inflate_is_a_nested_library_span() {
    for jdk in JDKS {
        let lib = inflate_spec(jdk);
        let o = run_scenario(jdk, "zlib", &["--lib-calls", &lib], &[]);
        let (t, outer) = o.invocation("inflateBlock");
        let spans: Vec<_> =
            o.c.invs
                .iter()
                .filter(|(th, i)| th.tid == t.tid && o.trace.methods[i.method as usize].native)
                .filter(|(_, i)| o.trace.methods[i.method as usize].name == "inflate")
                // JDK 11's runtime (jlink-compressed modules) inflates
                // classes while loading them, outside inflateBlock.
                .filter(|(_, i)| i.exit > outer.entry && i.entry < outer.exit)
                .collect();
        assert!(!spans.is_empty(), "{jdk}: no inflate span in inflateBlock");
        for (_, s) in &spans {
            assert!(
                s.entry >= outer.entry && s.exit <= outer.exit,
                "{jdk}: inflate overlaps inflateBlock without being nested in it"
            );
            assert!(s.breakdown.is_exact());
        }
    }
}

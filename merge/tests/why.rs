//! `jtrace why` on hand-built traces, one per kind of edge a critical path
//! follows (monitor with HotSpot's timed back-off, wait/notify,
//! park/unpark, a socket across two processes, a pipe, a futex), each with
//! its exact expected path. The traces are written with the real encoder
//! and read by the real reader, streamed.

use jtrace_format::{fd_kind, kind};
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::why::{explain, Selection, WhyOptions};
use jtrace_testkit::TraceBuilder as Builder;
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-why-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The slowest invocation's path of `method` as
/// `(thread, method, state, ns, depth)`, its hops as `(via, waiter, blocker)`,
/// after checking that the path sums to the wall.
type Seg = (String, Option<String>, String, u64, u16);
fn why(dir: &Path, method: &str, budget: usize) -> (Vec<Seg>, Vec<(String, String, String)>, u64) {
    let opts = WhyOptions {
        method: method.into(),
        selection: Selection::Slowest(1),
        stream: StreamOptions {
            memory_budget: budget,
            ..Default::default()
        },
        ..Default::default()
    };
    let w = explain(dir, &opts).unwrap();
    // A tiny budget puts the index in a file; the answer is the same.
    assert_eq!(w.index_spilled, budget < 1024, "budget {budget}");
    let j = w.to_json();
    let inv = &j.invocations[0];
    let sum: u64 = inv.path.iter().map(|s| s.ns).sum();
    assert_eq!(sum, inv.wall_ns, "the path sums to the wall");
    let segs = inv
        .path
        .iter()
        .map(|s| (s.thread.clone(), s.method.clone(), s.state.to_string(), s.ns, s.depth))
        .collect();
    let hops = inv
        .hops
        .iter()
        .map(|h| (h.via.to_string(), h.waiter.thread.clone(), h.blocker.thread.clone()))
        .collect();
    (segs, hops, inv.wall_ns)
}

fn seg(thread: &str, method: Option<&str>, state: &str, ns: u64, depth: u16) -> Seg {
    (thread.into(), method.map(String::from), state.into(), ns, depth)
}

const A: u32 = 11;
const B: u32 = 12;
const C: u32 = 13;

/// chain-a (A) enters GtX.a at 1.5 µs and contends for a monitor that
/// chain-b (B) holds in GtX.b while it sleeps from 2 µs to 90 µs; A's
/// first back-off (a timer) ends at 2.7 µs.
fn monitor_held_by_a_sleeper() -> Builder {
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.b")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    b.enter(B, 1000, 2);
    b.jvm_event(B, 2000, kind::SLEEP_BEGIN, "");
    b.block(B, 2000, 90_000, 0, 90_010);
    b.jvm_event(B, 90_010, kind::SLEEP_END, "");
    b.enter(A, 1500, 1);
    b.jvm_event(A, 1600, kind::MONITOR_CONTENDED_ENTER, "java.lang.Object");
    b.block(A, 1700, 2700, 0, 2710); // 1 µs back-off, a timer
    b
}

/// One monitor enter, three holders in turn: A is woken by each release
/// but the next holder takes the monitor first, three times. Each blocked
/// stretch is the holder of its time (B, then C, then D), each followed
/// into what that holder did: never the whole wait on the last one.
#[test]
fn a_waiter_behind_three_holders_follows_each_in_turn() {
    const D: u32 = 14;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.hold")]);
    b.java_thread(100, A, 0, "waiter");
    for (t, name) in [(B, "holder-1"), (C, "holder-2"), (D, "holder-3")] {
        b.java_thread(100, t, 0, name);
    }
    // Each holder computes in GtX.hold; A's enter is woken at each release.
    b.enter(A, 1_000, 1);
    b.jvm_event(A, 1_100, kind::MONITOR_CONTENDED_ENTER, "Gate");
    b.enter(B, 500, 2);
    b.exit(B, 20_000, 2);
    b.block(A, 1_200, 20_000, B, 20_050);
    b.enter(C, 19_000, 2);
    b.exit(C, 40_000, 2);
    b.block(A, 20_100, 40_000, C, 40_050);
    b.enter(D, 39_000, 2);
    b.exit(D, 60_000, 2);
    b.block(A, 40_100, 60_000, D, 60_050);
    b.jvm_event(A, 60_060, kind::MONITOR_CONTENDED_ENTERED, "Gate");
    b.exit(A, 61_000, 1);
    for t in [A, B, C, D] {
        b.switch_out(t, 70_000, false, 0);
    }
    let dir = tempdir("holders");
    b.write_unended(&dir, 0, 80_000);
    let (path, hops, wall) = why(&dir, "GtX.a", 256 << 20);
    assert_eq!(wall, 60_000);
    // The time of each stretch, by the holder it was on.
    let mut on = std::collections::BTreeMap::new();
    for (thread, _, _, ns, depth) in &path {
        if *depth == 1 {
            *on.entry(thread.as_str()).or_insert(0u64) += ns;
        }
    }
    assert_eq!(
        on.into_iter().collect::<Vec<_>>(),
        vec![("holder-1", 18_800), ("holder-2", 19_900), ("holder-3", 19_900)],
        "{path:?}"
    );
    let blockers: Vec<&str> = hops.iter().map(|(_, _, b)| b.as_str()).collect();
    assert_eq!(blockers, ["holder-1", "holder-2", "holder-3"], "{hops:?}");
    assert_eq!(path.iter().map(|s| s.3).sum::<u64>(), wall);
}

/// A waits 89.3 µs on a monitor B holds while B sleeps: the back-off
/// wakeups (by the idle task) are not followed; the whole enter is B's.
#[test]
fn monitor_with_back_off_is_held_by_the_owner() {
    let mut b = monitor_held_by_a_sleeper();
    b.block(A, 2720, 10_720, 0, 10_730); // 8 µs back-off
    b.block(A, 10_740, 91_000, B, 91_050); // B releases the monitor
    b.jvm_event(A, 91_060, kind::MONITOR_CONTENDED_ENTERED, "java.lang.Object");
    b.exit(A, 92_000, 1);
    b.exit(B, 92_000, 2);
    b.switch_out(A, 93_000, false, 0);
    b.switch_out(B, 93_000, false, 0);
    let dir = tempdir("monitor");
    b.write_unended(&dir, 0, 100_000);
    for budget in [256 << 20, 0] {
        let (path, hops, wall) = why(&dir, "GtX.a", budget);
        assert_eq!(wall, 90_500);
        assert_eq!(
            path,
            vec![
                seg("chain-a", Some("GtX.a"), "cpu", 200, 0),
                seg("chain-b", Some("GtX.b"), "cpu", 300, 1),
                seg("chain-b", Some("GtX.b"), "sleep", 88_000, 1),
                seg("chain-b", Some("GtX.b"), "runqueue", 10, 1),
                seg("chain-b", Some("GtX.b"), "cpu", 990, 1),
                seg("chain-a", Some("GtX.a"), "runqueue", 50, 0),
                seg("chain-a", Some("GtX.a"), "cpu", 950, 0),
            ],
            "budget {budget}"
        );
        assert_eq!(hops, vec![("held_by".into(), "chain-a".into(), "chain-b".into())]);
    }
}

/// JDK 11: B's release wakes A, but A, back on CPU, is stopped again inside
/// the enter by a safepoint, which the VM thread ends. The VM thread owns
/// no Java monitor: the enter is held by B up to B's release, and the last
/// block (the safepoint stop) stays A's own, not followed.
#[test]
fn a_wakeup_by_the_vm_thread_inside_an_enter_is_not_the_release() {
    const V: u32 = 14;
    let mut b = monitor_held_by_a_sleeper();
    b.native_thread(100, V, 0, "VM Thread");
    b.switch_out(V, 100, false, 0);
    b.block(A, 2720, 91_000, B, 91_050); // B releases the monitor
    b.wakeup(V, 92_990, B); // the VM thread starts a safepoint
    b.switch_in(V, 92_995, 0);
    b.block(A, 91_100, 93_000, V, 93_010); // stopped by it until its end
    b.jvm_event(A, 93_020, kind::MONITOR_CONTENDED_ENTERED, "java.lang.Object");
    b.exit(A, 94_000, 1);
    b.exit(B, 94_000, 2);
    b.switch_out(A, 95_000, false, 0);
    b.switch_out(B, 95_000, false, 0);
    b.switch_out(V, 95_000, false, 0);
    let dir = tempdir("monitor-vm");
    b.write_unended(&dir, 0, 100_000);
    for budget in [256 << 20, 0] {
        let (path, hops, wall) = why(&dir, "GtX.a", budget);
        assert_eq!(wall, 92_500);
        assert_eq!(
            path,
            vec![
                seg("chain-a", Some("GtX.a"), "cpu", 200, 0),
                seg("chain-b", Some("GtX.b"), "cpu", 300, 1),
                seg("chain-b", Some("GtX.b"), "sleep", 88_000, 1),
                seg("chain-b", Some("GtX.b"), "runqueue", 10, 1),
                seg("chain-b", Some("GtX.b"), "cpu", 990, 1),
                seg("chain-a", Some("GtX.a"), "runqueue", 50, 0),
                seg("chain-a", Some("GtX.a"), "cpu", 50, 0),
                seg("chain-a", Some("GtX.a"), "monitor", 1_900, 0),
                seg("chain-a", Some("GtX.a"), "runqueue", 10, 0),
                seg("chain-a", Some("GtX.a"), "cpu", 990, 0),
            ],
            "budget {budget}"
        );
        assert_eq!(hops, vec![("held_by".into(), "chain-a".into(), "chain-b".into())]);
    }
}

/// A waits in Object.wait until B notifies; B was in an fsync no traced
/// thread ended (a disk interrupt): the path stops there.
#[test]
fn wait_is_notified_by_the_notifier() {
    use jtrace_format::syscall_nr as nr;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.b")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    b.enter(A, 500, 1);
    b.jvm_event(A, 1000, kind::MONITOR_WAIT, "GtX$Lock");
    b.block(A, 1100, 50_000, B, 50_020);
    b.jvm_event(A, 50_030, kind::MONITOR_WAITED, "GtX$Lock");
    b.exit(A, 51_000, 1);
    b.enter(B, 800, 2);
    b.blocked_syscall(B, 1900, 40_003, nr::FSYNC, fd_kind::FILE);
    b.block(B, 2000, 40_000, 0, 40_005);
    b.exit(B, 50_500, 2);
    let dir = tempdir("wait");
    b.write_unended(&dir, 0, 60_000);
    let (path, hops, _) = why(&dir, "GtX.a", 256 << 20);
    assert_eq!(
        path,
        vec![
            seg("chain-a", Some("GtX.a"), "cpu", 600, 0),
            seg("chain-b", Some("GtX.b"), "cpu", 900, 1),
            seg("chain-b", Some("GtX.b"), "file", 38_000, 1),
            seg("chain-b", Some("GtX.b"), "runqueue", 5, 1),
            seg("chain-b", Some("GtX.b"), "cpu", 9_995, 1),
            seg("chain-a", Some("GtX.a"), "runqueue", 20, 0),
            seg("chain-a", Some("GtX.a"), "cpu", 980, 0),
        ]
    );
    assert_eq!(hops, vec![("notified_by".into(), "chain-a".into(), "chain-b".into())]);
}

/// A parks until B unparks it; B was in a futex a native thread C woke:
/// two hops, the second through a futex.
#[test]
fn park_then_futex_two_hops() {
    use jtrace_format::syscall_nr as nr;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.b")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    b.native_thread(100, C, 0, "native-c");
    b.switch_out(C, 35_000, false, 0);
    b.enter(A, 500, 1);
    b.jvm_event(A, 1000, kind::PARK_BEGIN, "java.util.concurrent.CountDownLatch$Sync");
    b.block(A, 1100, 30_000, B, 30_010);
    b.jvm_event(A, 30_020, kind::PARK_END, "java.util.concurrent.CountDownLatch$Sync");
    b.exit(A, 31_000, 1);
    b.enter(B, 800, 2);
    b.blocked_syscall(B, 1990, 20_150, nr::FUTEX, fd_kind::NONE);
    b.block(B, 2000, 20_000, C, 20_100);
    b.exit(B, 30_500, 2);
    let dir = tempdir("park");
    b.write_unended(&dir, 0, 40_000);
    let (path, hops, _) = why(&dir, "GtX.a", 256 << 20);
    assert_eq!(
        path,
        vec![
            seg("chain-a", Some("GtX.a"), "cpu", 600, 0),
            seg("chain-b", Some("GtX.b"), "cpu", 900, 1),
            seg("native-c", None, "cpu", 18_000, 2),
            seg("chain-b", Some("GtX.b"), "runqueue", 100, 1),
            seg("chain-b", Some("GtX.b"), "cpu", 9_900, 1),
            seg("chain-a", Some("GtX.a"), "runqueue", 10, 0),
            seg("chain-a", Some("GtX.a"), "cpu", 990, 0),
        ]
    );
    assert_eq!(
        hops,
        vec![
            ("unparked_by".into(), "chain-a".into(), "chain-b".into()),
            ("woken_by".into(), "chain-b".into(), "native-c".into()),
        ]
    );
}

/// A client in one JVM reads a socket a server thread of another JVM
/// answers after sleeping: the path crosses the processes.
#[test]
fn socket_answered_by_another_process() {
    use jtrace_format::syscall_nr as nr;
    const S: u32 = 21;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a")]);
    b.jvm(200, &[(1, "Srv.handle")]);
    b.java_thread(100, A, 0, "main");
    b.java_thread(200, S, 0, "main");
    b.enter(A, 500, 1);
    b.blocked_syscall(A, 1000, 100_100, nr::READ, fd_kind::SOCKET);
    b.block(A, 1100, 100_000, S, 100_050);
    b.exit(A, 101_000, 1);
    b.enter(S, 500, 1);
    b.jvm_event(S, 4990, kind::SLEEP_BEGIN, "");
    b.block(S, 5000, 95_000, 0, 95_010);
    b.jvm_event(S, 95_010, kind::SLEEP_END, "");
    b.exit(S, 100_500, 1);
    let dir = tempdir("socket");
    b.write_unended(&dir, 0, 110_000);
    let opts = WhyOptions {
        method: "GtX.a".into(),
        ..Default::default()
    };
    let w = explain(&dir, &opts).unwrap().to_json();
    let inv = &w.invocations[0];
    let got: Vec<(u32, &str, Option<&str>, &str, u64)> = inv
        .path
        .iter()
        .map(|s| (s.pid, s.thread.as_str(), s.method.as_deref(), s.state, s.ns))
        .collect();
    assert_eq!(
        got,
        vec![
            (100, "main", Some("GtX.a"), "cpu", 600),
            (200, "main", Some("Srv.handle"), "cpu", 3_900),
            (200, "main", Some("Srv.handle"), "sleep", 90_000),
            (200, "main", Some("Srv.handle"), "runqueue", 10),
            (200, "main", Some("Srv.handle"), "cpu", 4_990),
            (100, "main", Some("GtX.a"), "runqueue", 50),
            (100, "main", Some("GtX.a"), "cpu", 950),
        ]
    );
    let hop = &inv.hops[0];
    assert_eq!((hop.via, hop.blocker.pid, hop.blocker.tid), ("answered_by", 200, S));
    assert_eq!(hop.blocker_method.as_deref(), Some("Srv.handle"));
    assert!(hop
        .evidence
        .as_deref()
        .unwrap()
        .contains("socket tcp 127.0.0.1:40000->127.0.0.1:7000"));
    let root = inv.root_cause.as_ref().unwrap();
    assert_eq!((root.thread.as_str(), root.state, root.pid), ("main", "sleep", 200));
    assert!(
        root.share >= 0.85,
        "the server's sleep is {:.0} % of the wall",
        root.share * 100.0
    );
    assert_eq!(inv.path.iter().map(|s| s.ns).sum::<u64>(), inv.wall_ns);
}

/// A reads a pipe a process outside any JVM writes to.
#[test]
fn pipe_written_by_a_native_process() {
    use jtrace_format::syscall_nr as nr;
    const W: u32 = 31;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a")]);
    b.java_thread(100, A, 0, "chain-a");
    b.native_thread(300, W, 0, "writer");
    b.switch_out(W, 15_000, false, 0);
    b.enter(A, 500, 1);
    b.blocked_syscall(A, 1000, 9_020, nr::READ, fd_kind::PIPE);
    b.block(A, 1100, 9_000, W, 9_010);
    b.exit(A, 10_000, 1);
    let dir = tempdir("pipe");
    b.write_unended(&dir, 0, 20_000);
    let (path, hops, _) = why(&dir, "GtX.a", 256 << 20);
    assert_eq!(
        path,
        vec![
            seg("chain-a", Some("GtX.a"), "cpu", 600, 0),
            seg("writer", None, "cpu", 7_900, 1),
            seg("chain-a", Some("GtX.a"), "runqueue", 10, 0),
            seg("chain-a", Some("GtX.a"), "cpu", 990, 0),
        ]
    );
    assert_eq!(hops, vec![("written_by".into(), "chain-a".into(), "writer".into())]);
}

/// Preempted: the run queue says who took the CPU. A futex wait on a
/// thread that earlier waited on A: the walk goes back in time, never
/// around, and stops at the depth limit.
#[test]
fn runqueue_holder_mutual_waits_and_limits() {
    use jtrace_format::syscall_nr as nr;
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.b")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    b.enter(A, 100, 1);
    b.enter(B, 100, 2);
    // B waits on A, then A on B, then A is preempted by B.
    b.blocked_syscall(B, 1000, 3_000, nr::FUTEX, fd_kind::NONE);
    b.block(B, 1000, 2_000, A, 2_100);
    b.blocked_syscall(A, 4000, 6_000, nr::FUTEX, fd_kind::NONE);
    b.block(A, 4000, 5_000, B, 5_050);
    b.switch_out(A, 7000, true, B);
    b.switch_in(A, 7500, B);
    b.exit(A, 8000, 1);
    b.exit(B, 8000, 2);
    let dir = tempdir("mutual");
    b.write_unended(&dir, 0, 10_000);
    let (path, hops, wall) = why(&dir, "GtX.a", 256 << 20);
    assert_eq!(wall, 7_900);
    assert_eq!(
        path,
        vec![
            seg("chain-a", Some("GtX.a"), "cpu", 3_900, 0),
            seg("chain-b", Some("GtX.b"), "cpu", 1_000, 1),
            seg("chain-a", Some("GtX.a"), "runqueue", 50, 0),
            seg("chain-a", Some("GtX.a"), "cpu", 1_950, 0),
            seg("chain-a", Some("GtX.a"), "runqueue", 500, 0),
            seg("chain-a", Some("GtX.a"), "cpu", 500, 0),
        ]
    );
    assert_eq!(hops.len(), 1);
    let w = explain(
        &dir,
        &WhyOptions {
            method: "GtX.a".into(),
            ..Default::default()
        },
    )
    .unwrap()
    .to_json();
    let holder = w.invocations[0].path[4].cpu_holder.as_ref().unwrap();
    assert_eq!((holder.tid, holder.thread.as_str()), (B, "chain-b"));
    // Depth 0: nothing followed, the path is the invocation's own breakdown.
    let opts = WhyOptions {
        method: "GtX.a".into(),
        limits: jtrace_merge::why::Limits {
            max_depth: 0,
            max_segments: 100,
        },
        ..Default::default()
    };
    let w = explain(&dir, &opts).unwrap().to_json();
    let states: Vec<(&str, u64)> = w.invocations[0].path.iter().map(|s| (s.state, s.ns)).collect();
    assert_eq!(
        states,
        vec![
            ("cpu", 3_900),
            ("lock_native", 1_000),
            ("runqueue", 50),
            ("cpu", 1_950),
            ("runqueue", 500),
            ("cpu", 500)
        ]
    );
    // Two segments at most: the rest is summed per state, exactly.
    let opts = WhyOptions {
        method: "GtX.a".into(),
        limits: jtrace_merge::why::Limits {
            max_depth: 32,
            max_segments: 2,
        },
        ..Default::default()
    };
    let w = explain(&dir, &opts).unwrap().to_json();
    let inv = &w.invocations[0];
    assert!(inv.truncated);
    assert_eq!(inv.path.iter().map(|s| s.ns).sum::<u64>(), 7_900);
}

/// Percentile selection and the slow-against-median comparison: of ten
/// calls, the slowest waits on a lock the others do not.
#[test]
fn percentile_and_compare() {
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    let mut t = 1000;
    for i in 0..10u64 {
        b.enter(A, t, 1);
        if i == 7 {
            b.jvm_event(A, t + 10, kind::MONITOR_CONTENDED_ENTER, "L");
            b.block(A, t + 100, t + 50_000, B, t + 50_010);
            b.jvm_event(A, t + 50_020, kind::MONITOR_CONTENDED_ENTERED, "L");
            t += 50_000;
        }
        b.exit(A, t + 1000 + i, 1);
        t += 2000;
    }
    b.switch_out(B, t, false, 0);
    let dir = tempdir("compare");
    b.write_unended(&dir, 0, t + 10_000);
    let opts = WhyOptions {
        method: "GtX.*".into(),
        selection: Selection::Percentile(95.0),
        compare: true,
        ..Default::default()
    };
    let w = explain(&dir, &opts).unwrap().to_json();
    assert_eq!(w.selection.matched, 10);
    assert_eq!(w.invocations.len(), 1);
    assert_eq!(w.invocations[0].wall_ns, 51_007);
    let c = w.compare.unwrap();
    assert_eq!((c.slow_count, c.median_count), (1, 1));
    let top = &c.rows[0];
    assert_eq!((top.thread.as_str(), top.state), ("chain-b", "cpu"));
    assert_eq!(top.difference_ns, 49_900.0);
    assert!(explain(
        &dir,
        &WhyOptions {
            method: "Nope.*".into(),
            ..Default::default()
        }
    )
    .unwrap_err()
    .to_string()
    .contains("no traced method matches"));
}

/// Time a thread's cgroup quota held it (throttled), and time the
/// hypervisor took from it (steal), are the thread's own: leaves on its
/// path, never followed to another thread; the run queue after the
/// unthrottle names the thread that had the CPU.
#[test]
fn throttled_and_steal_are_the_threads_own_time() {
    let mut b = Builder::default();
    b.jvm(100, &[(1, "GtX.a"), (2, "GtX.b")]);
    b.java_thread(100, A, 0, "chain-a");
    b.java_thread(100, B, 0, "chain-b");
    b.switch_in(A, 500, 0);
    b.enter(A, 1000, 1);
    b.steal(A, 500, 3000, 500);
    b.switch_out(A, 3000, true, B);
    b.switch_in(B, 3000, A);
    b.throttle(A, 3000, 8000);
    b.switch_out(B, 9000, false, A);
    b.switch_in(A, 9000, B);
    b.exit(A, 10_000, 1);
    b.switch_out(A, 11_000, false, 0);
    let dir = tempdir("throttled");
    b.write_unended(&dir, 0, 20_000);
    for budget in [256 << 20, 0] {
        let (path, hops, wall) = why(&dir, "GtX.a", budget);
        assert_eq!(wall, 9000);
        assert_eq!(
            path,
            vec![
                seg("chain-a", Some("GtX.a"), "cpu", 1500, 0),
                seg("chain-a", Some("GtX.a"), "steal", 500, 0),
                seg("chain-a", Some("GtX.a"), "throttled", 5000, 0),
                seg("chain-a", Some("GtX.a"), "runqueue", 1000, 0),
                seg("chain-a", Some("GtX.a"), "cpu", 1000, 0),
            ],
            "budget {budget}"
        );
        assert!(hops.is_empty(), "{hops:?}");
    }
}

/// The JDK's read poller as a virtual thread (JDK 25: `SubPoller-0`), one
/// carrier (tid 40). `reader` parks in a socket read; the poller, unparked
/// by the platform `MasterPoller`, polls, then yields; `spinner` takes the
/// carrier for 97 µs; only then does the poller run again and unpark the
/// reader. With `unpark_while_yielded`, the MasterPoller also unparks the
/// yielded poller (which blocked on nothing) in the middle of that.
fn poller_behind_a_spinner(unpark_while_yielded: bool) -> Builder {
    use jtrace_format::{virtual_thread_tid, JvmBlock, Payload};
    const CW: u32 = 40;
    const M: u32 = 50;
    let (poller, reader, spinner) = (1u64, 2u64, 3u64);
    let vt = |id: u64| virtual_thread_tid(id).unwrap();
    let mut b = Builder::default();
    b.jvm(100, &[(1, "VirtualPoller.receive"), (2, "VirtualPoller.spin")]);
    b.java_thread(100, CW, 0, "ForkJoinPool-1-worker-1");
    b.java_thread(100, M, 0, "MasterPoller");
    // A virtual thread event of `id`, on `tid` (its carrier, or the unparker).
    let v = |b: &mut Builder, tid: u32, ts: u64, k: u16, id: u64, class: &str| {
        let block = JvmBlock {
            arg: id,
            class: class.into(),
        };
        b.j(tid, ts, Payload::Jvm(k, block));
    };
    v(&mut b, CW, 100, kind::VTHREAD_START, poller, "SubPoller-0");
    v(&mut b, CW, 600, kind::VTHREAD_UNMOUNT, poller, "park");
    v(&mut b, CW, 700, kind::VTHREAD_START, reader, "reader");
    b.enter(vt(reader), 1100, 1);
    v(&mut b, CW, 2000, kind::VTHREAD_UNMOUNT, reader, "socket");
    // MasterPoller, in epoll_wait until an interrupt, unparks the poller.
    b.switch_out(M, 1000, false, 0);
    b.wakeup(M, 1900, 0);
    b.switch_in(M, 1950, 0);
    v(&mut b, M, 2050, kind::VTHREAD_UNPARK, poller, "");
    b.switch_out(M, 2060, false, 0);
    v(&mut b, CW, 2100, kind::VTHREAD_MOUNT, poller, "");
    v(&mut b, CW, 3000, kind::VTHREAD_UNMOUNT, poller, "yield");
    v(&mut b, CW, 3100, kind::VTHREAD_START, spinner, "spinner");
    b.enter(vt(spinner), 3200, 2);
    if unpark_while_yielded {
        b.wakeup(M, 49_990, 0);
        b.switch_in(M, 49_995, 0);
        v(&mut b, M, 50_000, kind::VTHREAD_UNPARK, poller, "");
        b.switch_out(M, 50_010, false, 0);
    }
    b.exit(vt(spinner), 100_000, 2);
    v(&mut b, CW, 100_100, kind::VTHREAD_END, spinner, "spinner");
    v(&mut b, CW, 100_200, kind::VTHREAD_MOUNT, poller, "");
    v(&mut b, CW, 100_500, kind::VTHREAD_UNPARK, reader, "");
    v(&mut b, CW, 100_600, kind::VTHREAD_UNMOUNT, poller, "park");
    v(&mut b, CW, 100_700, kind::VTHREAD_MOUNT, reader, "");
    b.exit(vt(reader), 101_000, 1);
    v(&mut b, CW, 101_100, kind::VTHREAD_END, reader, "reader");
    b.switch_out(CW, 101_200, false, 0);
    b
}

/// I/O behind a starved poller: the reader's wait stays `socket`,
/// answered by the poller; the poller's time after its yield is `carrier`
/// (runnable, not mounted: not `runqueue`), held by the spinner, whole
/// (an unpark of the yielded poller ends no block and is not followed).
#[test]
fn io_behind_a_poller_that_waits_for_its_carrier() {
    for unpark_while_yielded in [false, true] {
        let dir = tempdir(&format!("poller-{unpark_while_yielded}"));
        poller_behind_a_spinner(unpark_while_yielded).write_unended(&dir, 0, 110_000);
        for budget in [256 << 20, 0] {
            let (path, hops, wall) = why(&dir, "VirtualPoller.receive", budget);
            assert_eq!(wall, 99_900);
            let receive = Some("VirtualPoller.receive");
            assert_eq!(
                path,
                vec![
                    seg("reader", receive, "cpu", 900, 0),
                    seg("MasterPoller", None, "cpu", 50, 2),
                    seg("SubPoller-0", None, "carrier", 50, 1),
                    seg("SubPoller-0", None, "cpu", 900, 1),
                    seg("SubPoller-0", None, "carrier", 97_200, 1),
                    seg("SubPoller-0", None, "cpu", 300, 1),
                    seg("reader", receive, "carrier", 200, 0),
                    seg("reader", receive, "cpu", 300, 0),
                ],
                "unpark while yielded: {unpark_while_yielded}, budget {budget}"
            );
            assert_eq!(
                hops,
                vec![
                    ("answered_by".into(), "reader".into(), "SubPoller-0".into()),
                    ("unparked_by".into(), "SubPoller-0".into(), "MasterPoller".into()),
                ]
            );
        }
        // Who held the carrier: the virtual thread it ran before each mount.
        let opts = WhyOptions {
            method: "VirtualPoller.receive".into(),
            ..Default::default()
        };
        let w = explain(&dir, &opts).unwrap().to_json();
        let holders: Vec<(&str, u64, &str)> = (w.invocations[0].path.iter())
            .filter(|s| s.state == "carrier")
            .map(|s| (s.thread.as_str(), s.ns, s.cpu_holder.as_ref().unwrap().thread.as_str()))
            .collect();
        assert_eq!(
            holders,
            vec![
                ("SubPoller-0", 50, "reader"),
                ("SubPoller-0", 97_200, "spinner"),
                ("reader", 200, "SubPoller-0"),
            ]
        );
        // The root cause sums the poller's carrier waits.
        let root = w.invocations[0].root_cause.as_ref().unwrap();
        assert_eq!(
            (root.thread.as_str(), root.state, root.ns),
            ("SubPoller-0", "carrier", 97_250)
        );
    }
}

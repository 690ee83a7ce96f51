//! The walk's unit tests: small event sequences with known figures.

use super::*;
use crate::model::syscall::nr;
use crate::visitor::Invocation;

#[derive(Default)]
struct Collect {
    invs: Vec<Invocation>,
    ivs: Vec<OffCpuInterval>,
    totals: Option<ThreadTotals>,
}
impl Visitor for Collect {
    fn exit(&mut self, _: &ThreadInfo, _: usize, inv: &Invocation) {
        self.invs.push(*inv);
    }
    fn off_cpu(&mut self, _: &ThreadInfo, _: usize, iv: &OffCpuInterval) {
        self.ivs.push(*iv);
    }
    fn thread_end(&mut self, _: &ThreadInfo, t: &ThreadTotals) {
        self.totals = Some(*t);
    }
}

fn ev(ts: u64, event: Event) -> Timed {
    Timed { ts, event }
}
fn out(preempted: bool) -> Event {
    Event::SwitchOut {
        preempted,
        prev_state: if preempted { 0 } else { 1 },
        cpu: 0,
        next_tid: 0,
    }
}
const IN: Event = Event::SwitchIn { cpu: 0, prev_tid: 0 };
fn wake() -> Event {
    Event::Wakeup {
        waker_tid: 7,
        waker_tgid: 7,
        new_task: false,
    }
}

#[test]
fn blocked_then_runqueue_then_preempted() {
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(100, Event::Enter(0)),
        ev(150, out(false)), // blocks
        ev(400, wake()),     // woken after 250 ns blocked
        ev(420, IN),         // 20 ns on the run queue
        ev(500, Event::Enter(1)),
        ev(510, out(true)), // preempted
        ev(530, IN),
        ev(
            600,
            Event::Exit {
                method: 1,
                exception: true,
            },
        ),
        ev(
            700,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    assert_eq!(c.invs.len(), 2);
    let inner = c.invs[0];
    assert_eq!(inner.breakdown.wall, 100);
    assert_eq!(inner.breakdown.cpu, 80);
    assert_eq!(inner.breakdown.off.get(Cause::Runqueue), 20);
    assert_eq!(inner.breakdown.involuntary, 1);
    assert!(inner.exception);
    let outer = c.invs[1];
    assert_eq!(outer.breakdown.wall, 600);
    assert_eq!(outer.breakdown.off.get(Cause::Unknown), 250);
    assert_eq!(outer.breakdown.off.get(Cause::Runqueue), 40);
    assert_eq!(outer.breakdown.cpu, 310);
    assert_eq!((outer.breakdown.voluntary, outer.breakdown.involuntary), (1, 1));
    for i in &c.invs {
        assert!(i.breakdown.is_exact());
    }
    assert_eq!(c.ivs.len(), 2);
    assert_eq!(c.ivs[0].wake.unwrap().waker_tid, 7);
    assert_eq!(c.ivs[0].split.off.get(Cause::Unknown), 250);
    let t = c.totals.unwrap();
    assert_eq!(t.breakdown.wall, 600);
    assert!(t.breakdown.is_exact());
    assert_eq!(t.anomalies, 0);
}

fn syscall(trace: &mut Trace, nr: u32, fd_kind: u32) -> u32 {
    let rec = jtrace_format::Syscall {
        exit_ts: 0,
        nr,
        fd_kind,
        ret: 0,
        fd: 3,
        flags: 0,
        arg: 0,
        ..Default::default()
    };
    trace.syscalls.push(SyscallInfo { tid: 1, enter: 0, rec });
    (trace.syscalls.len() - 1) as u32
}

/// JVM states beat the futex under them; a socket wait stays a socket
/// wait during a GC, while a futex wait inside a GC window is the GC.
#[test]
fn evidence_precedence() {
    use jtrace_format::fd_kind;
    let mut trace = Trace::default();
    let futex = syscall(&mut trace, nr::FUTEX, fd_kind::NONE);
    let sock = syscall(&mut trace, nr::READ, fd_kind::SOCKET);
    let futex2 = syscall(&mut trace, nr::FUTEX, fd_kind::NONE);
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        // contended monitor over a futex: 100 ns monitor, 10 runqueue
        ev(
            10,
            Event::Block {
                cause: Cause::Monitor,
                begin: true,
                detail: 0,
            },
        ),
        ev(
            11,
            Event::Syscall {
                idx: futex,
                enter: true,
            },
        ),
        ev(20, out(false)),
        ev(120, wake()),
        ev(130, IN),
        ev(
            131,
            Event::Syscall {
                idx: futex,
                enter: false,
            },
        ),
        ev(
            132,
            Event::Block {
                cause: Cause::Monitor,
                begin: false,
                detail: 0,
            },
        ),
        // a socket read spanning a GC: all socket
        ev(200, Event::Syscall { idx: sock, enter: true }),
        ev(210, out(false)),
        ev(
            250,
            Event::Window {
                cause: Cause::Gc,
                begin: true,
            },
        ),
        ev(
            300,
            Event::Window {
                cause: Cause::Gc,
                begin: false,
            },
        ),
        ev(310, wake()),
        ev(310, IN),
        ev(
            311,
            Event::Syscall {
                idx: sock,
                enter: false,
            },
        ),
        // a futex wait partly inside a GC window: gc inside, lock_native outside
        ev(
            400,
            Event::Syscall {
                idx: futex2,
                enter: true,
            },
        ),
        ev(410, out(false)),
        ev(
            450,
            Event::Window {
                cause: Cause::Gc,
                begin: true,
            },
        ),
        ev(
            480,
            Event::Window {
                cause: Cause::Gc,
                begin: false,
            },
        ),
        ev(500, wake()),
        ev(500, IN),
        ev(
            501,
            Event::Syscall {
                idx: futex2,
                enter: false,
            },
        ),
        // a page fault that blocks outside any syscall
        ev(600, Event::PageFault { address: 0x1000 }),
        ev(601, out(false)),
        ev(700, wake()),
        ev(700, IN),
        ev(
            800,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&trace, &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert!(b.is_exact());
    assert_eq!(b.off.get(Cause::Monitor), 100);
    assert_eq!(b.off.get(Cause::Runqueue), 10);
    assert_eq!(b.off.get(Cause::Socket), 100);
    assert_eq!(b.off.get(Cause::Gc), 30);
    assert_eq!(b.off.get(Cause::LockNative), 60);
    assert_eq!(b.off.get(Cause::PageFault), 99);
    assert_eq!(b.off.get(Cause::Unknown), 0);
    assert_eq!(
        c.ivs[0].evidence,
        Evidence::Jvm {
            cause: Cause::Monitor,
            detail: 0
        }
    );
    assert_eq!(c.ivs[1].evidence, Evidence::Syscall(sock));
    assert_eq!(c.ivs[3].evidence, Evidence::PageFault);
}

/// A thread blocked on the stream's grow lock while the agent wrote
/// its records out (TRACER_WAIT) is the tracer's time, not the futex
/// under it; the write done, the Object.wait it happened in is a wait
/// again.
#[test]
fn the_tracers_own_wait_is_its_own_cause() {
    let mut trace = Trace::default();
    let futex = syscall(&mut trace, nr::FUTEX, jtrace_format::fd_kind::NONE);
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let block = |ts, cause, begin| {
        ev(
            ts,
            Event::Block {
                cause,
                begin,
                detail: 0,
            },
        )
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        block(10, Cause::Wait, true),
        // the MONITOR_WAIT record filled the buffer: its write waits 50 ns
        block(20, Cause::Tracer, true),
        ev(
            21,
            Event::Syscall {
                idx: futex,
                enter: true,
            },
        ),
        ev(30, out(false)),
        ev(80, wake()),
        ev(80, IN),
        ev(
            81,
            Event::Syscall {
                idx: futex,
                enter: false,
            },
        ),
        block(90, Cause::Tracer, false),
        // then the wait itself
        ev(
            100,
            Event::Syscall {
                idx: futex,
                enter: true,
            },
        ),
        ev(110, out(false)),
        ev(310, wake()),
        ev(310, IN),
        ev(
            311,
            Event::Syscall {
                idx: futex,
                enter: false,
            },
        ),
        block(320, Cause::Wait, false),
        ev(
            400,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&trace, &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert!(b.is_exact());
    assert_eq!(b.off.get(Cause::Tracer), 50);
    assert_eq!(b.off.get(Cause::Wait), 200);
    assert_eq!(b.off.get(Cause::LockNative), 0);
    assert_eq!(
        c.ivs[0].evidence,
        Evidence::Jvm {
            cause: Cause::Tracer,
            detail: 0
        }
    );
}

/// Past the kernel stream's coverage end, time is neither CPU nor a
/// cause: an invocation spanning it keeps its wall, split into what the
/// kernel saw and `not_covered`; the off-CPU interval in progress ends
/// there; kernel records written after it are ignored.
#[test]
fn time_past_the_kernel_coverage_is_not_covered() {
    let th = ThreadInfo {
        tid: 1,
        kernel_until: Some(200),
        ..Default::default()
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        ev(100, out(false)),
        // Written after the first record the recorder lost: ignored.
        ev(250, IN),
        ev(300, Event::Enter(1)),
        ev(
            400,
            Event::Exit {
                method: 1,
                exception: false,
            },
        ),
        ev(
            500,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let (inner, outer) = (c.invs[0].breakdown, c.invs[1].breakdown);
    assert_eq!(
        (inner.wall, inner.cpu, inner.off.total(), inner.not_covered),
        (100, 0, 0, 100)
    );
    assert_eq!((outer.wall, outer.cpu, outer.not_covered), (500, 100, 300));
    assert_eq!(outer.off.get(Cause::Unknown), 100);
    assert!(inner.is_exact() && outer.is_exact());
    assert_eq!(c.ivs.len(), 1);
    assert_eq!((c.ivs[0].start, c.ivs[0].end), (100, 200));
    assert_eq!(c.ivs[0].split.off.get(Cause::Unknown), 100);
    let t = c.totals.unwrap();
    assert_eq!((t.breakdown.wall, t.breakdown.not_covered, t.anomalies), (500, 300, 0));
    assert!(t.breakdown.is_exact());
}

/// A ring recording's window (its oldest chunks deleted) begins at 200:
/// time before, and up to the thread's first switch record from 200 on,
/// is not covered, whatever the records before it say (a switch-out at
/// 100 is ignored, as is a wakeup at 210); from the switch-in at 250 the
/// thread is known to be on CPU. An invocation entered before the window
/// (restated by the chunk's prologue) keeps its wall, exactly split.
#[test]
fn time_before_a_ring_window_is_not_covered() {
    let th = ThreadInfo {
        tid: 1,
        covered_from: Some(200),
        ..Default::default()
    };
    let evs = vec![
        ev(50, Event::Enter(0)),
        ev(100, out(false)),
        ev(
            210,
            Event::Wakeup {
                waker_tid: 9,
                waker_tgid: 9,
                new_task: false,
            },
        ),
        ev(250, IN),
        ev(300, out(false)),
        ev(350, IN),
        ev(
            400,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert_eq!((b.wall, b.not_covered, b.cpu, b.off.total()), (350, 200, 100, 50));
    assert!(b.is_exact());
    assert_eq!(c.ivs.len(), 1);
    assert_eq!((c.ivs[0].start, c.ivs[0].end), (300, 350));
    let t = c.totals.unwrap();
    assert_eq!(t.anomalies, 0);
}

/// A thread first seen after the kernel coverage end is not covered at all.
#[test]
fn a_thread_after_the_kernel_coverage_is_all_not_covered() {
    let th = ThreadInfo {
        tid: 1,
        kernel_until: Some(50),
        ..Default::default()
    };
    let evs = vec![
        ev(100, Event::Enter(0)),
        ev(
            160,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert_eq!((b.wall, b.cpu, b.not_covered), (60, 0, 60));
}

/// Where the JVM stream stops covering a thread, its open invocations
/// end unfinished, and a JVM-level state open then (here a park)
/// explains nothing later: the rest of the block has no cause.
#[test]
fn the_jvm_coverage_end_closes_invocations_and_forgets_jvm_states() {
    let th = ThreadInfo {
        tid: 1,
        jvm_until: Some(50),
        ..Default::default()
    };
    let park = |begin| Event::Block {
        cause: Cause::Park,
        begin,
        detail: 0,
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        ev(5, Event::Enter(1)),
        ev(10, park(true)),
        ev(20, out(false)),
        ev(90, wake()),
        ev(100, IN),
        ev(120, out(false)),
        ev(130, IN),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    assert_eq!(c.invs.len(), 2);
    assert!(c.invs.iter().all(|i| i.unfinished && i.exit == 50));
    let outer = c.invs[1].breakdown;
    assert_eq!((outer.wall, outer.cpu, outer.off.get(Cause::Park)), (50, 20, 30));
    assert_eq!(c.ivs[0].split.off.get(Cause::Park), 30);
    assert_eq!(c.ivs[0].split.off.get(Cause::Unknown), 40);
    assert_eq!(c.ivs[1].split.off.get(Cause::Unknown), 10);
    assert_eq!(c.totals.unwrap().anomalies, 0);
}

/// A thread that recorded nothing after its last event before the JVM
/// coverage end (its next event was the first one lost): its open
/// invocations still end at the coverage end, not at its last event.
#[test]
fn open_invocations_end_at_a_later_jvm_coverage_end() {
    let th = ThreadInfo {
        tid: 1,
        jvm_until: Some(50),
        ..Default::default()
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        ev(10, Event::Enter(1)),
        ev(20, out(true)),
        ev(40, IN),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    assert_eq!(c.invs.len(), 2);
    assert!(c.invs.iter().all(|i| i.unfinished && i.exit == 50), "{:?}", c.invs);
    let outer = c.invs[1].breakdown;
    assert_eq!((outer.wall, outer.cpu), (50, 30));
    assert_eq!(outer.wall, outer.cpu + outer.off.total() + outer.not_covered);
    // Without open invocations the thread's time is not extended.
    let evs = vec![
        ev(0, Event::Enter(0)),
        ev(
            10,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    assert_eq!(c.invs[0].exit, 10);
    assert_eq!(c.totals.unwrap().breakdown.wall, 10);
}

#[test]
fn recursion_marks_inner_not_outermost_and_missing_exits_close() {
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(0, Event::Enter(0)),
        ev(10, Event::Enter(0)),
        ev(20, Event::Enter(1)),
        // exit of the inner 0 with 1's exit lost
        ev(
            30,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
        ev(
            40,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
        ev(50, Event::Enter(2)),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let outer: Vec<bool> = c.invs.iter().map(|i| i.outermost).collect();
    // order of exits: 1 (closed), inner 0, outer 0, 2 (unfinished)
    assert_eq!(outer, vec![true, false, true, true]);
    assert!(c.invs[0].unfinished && c.invs[3].unfinished);
    assert_eq!(c.totals.unwrap().anomalies, 1);
}

fn held(cause: Cause, begin: bool) -> Event {
    Event::Held { cause, begin }
}

/// A thread throttled at its switch-out: `throttled` until the unthrottle,
/// then `runqueue` until its switch-in; a plain preemption after it is
/// all `runqueue` again. The interval's evidence says throttled.
#[test]
fn throttle_window_splits_a_preemption() {
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(100, Event::Enter(0)),
        ev(200, out(true)),
        ev(200, held(Cause::Throttled, true)),
        ev(900, held(Cause::Throttled, false)),
        ev(950, IN),
        ev(1000, out(true)),
        ev(1030, IN),
        ev(
            1100,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert!(b.is_exact());
    assert_eq!(b.wall, 1000);
    assert_eq!(b.off.get(Cause::Throttled), 700);
    assert_eq!(b.off.get(Cause::Runqueue), 50 + 30);
    assert_eq!(b.cpu, 220);
    assert_eq!(b.involuntary, 2);
    assert_eq!(c.ivs.len(), 2);
    assert_eq!(c.ivs[0].evidence, Evidence::Throttled);
    assert_eq!(c.ivs[0].split.off.get(Cause::Throttled), 700);
    assert_eq!(c.ivs[0].split.off.get(Cause::Runqueue), 50);
    assert_eq!(c.ivs[1].evidence, Evidence::Preempted);
    assert_eq!(c.ivs[1].split.off.get(Cause::Throttled), 0);
}

/// A throttle window whose end is lost closes at the switch-in, and one
/// that arrives while the thread blocked (not runnable) explains nothing.
#[test]
fn throttle_window_ends_at_the_switch_in() {
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(100, Event::Enter(0)),
        ev(200, out(true)),
        ev(200, held(Cause::Throttled, true)),
        ev(300, IN),
        ev(400, out(false)),
        ev(400, held(Cause::Throttled, true)),
        ev(500, wake()),
        ev(520, IN),
        ev(
            600,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let b = c.invs[0].breakdown;
    assert!(b.is_exact());
    assert_eq!(b.off.get(Cause::Throttled), 100);
    assert_eq!(b.off.get(Cause::Unknown), 100);
    assert_eq!(b.off.get(Cause::Runqueue), 20);
}

/// Steal inside an on-CPU stretch is `steal`, reported as an interval of
/// its own when it ends (before the switch-out that follows it), and the
/// CPU is the rest; a method that returns inside it gets its part.
#[test]
fn steal_window_is_taken_from_cpu() {
    let th = ThreadInfo {
        tid: 1,
        ..Default::default()
    };
    let evs = vec![
        ev(0, IN),
        ev(100, Event::Enter(0)),
        ev(150, Event::Enter(1)),
        ev(300, held(Cause::Steal, true)),
        ev(
            350,
            Event::Exit {
                method: 1,
                exception: false,
            },
        ),
        ev(400, out(true)),
        ev(400, held(Cause::Steal, false)),
        ev(450, IN),
        ev(500, held(Cause::Steal, true)),
        ev(520, held(Cause::Steal, false)),
        ev(
            600,
            Event::Exit {
                method: 0,
                exception: false,
            },
        ),
    ];
    let mut c = Collect::default();
    analyze_thread(&Trace::default(), &th, &evs, &mut c);
    let (inner, outer) = (c.invs[0].breakdown, c.invs[1].breakdown);
    assert!(inner.is_exact() && outer.is_exact());
    assert_eq!((inner.cpu, inner.off.get(Cause::Steal)), (150, 50));
    assert_eq!(outer.off.get(Cause::Steal), 100 + 20);
    assert_eq!(outer.off.get(Cause::Runqueue), 50);
    assert_eq!(outer.cpu, 500 - 120 - 50);
    let kinds: Vec<_> = c.ivs.iter().map(|iv| (iv.start, iv.end, iv.evidence)).collect();
    assert_eq!(
        kinds,
        [
            (300, 400, Evidence::Steal),
            (400, 450, Evidence::Preempted),
            (500, 520, Evidence::Steal)
        ]
    );
    assert_eq!(c.ivs[0].split.off.get(Cause::Steal), 100);
    assert_eq!(c.ivs[0].split.off.total(), 100);
    assert!(c.totals.unwrap().breakdown.is_exact());
}

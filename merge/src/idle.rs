//! Which blocked time is a thread waiting for work (idle) rather than
//! blocked while working: rules on the stack recorded as it blocked, listed
//! in docs/REPORT.md ("Working and idle time"). The report ranks working
//! time and folds idle time; both stay in its totals.

use crate::cause::{Cause, OffCpu};
use crate::model::event::ThreadInfo;
use crate::stacks::symbolize::Frame;

/// A rule that marks blocked time idle.
#[derive(Debug, PartialEq, Eq)]
pub struct IdleRule {
    /// Its short name, as the JSON report gives it (`pool`, `jvm`, …).
    pub id: &'static str,
    /// What a thread it matches is doing, for people.
    pub what: &'static str,
    /// Java methods (`package.Class.method`, nested classes with `$`) one
    /// of which the stack must hold, with no frame of the application's
    /// own code inside it. Empty: the rule is on the thread instead.
    pub methods: &'static [&'static str],
}

/// The rules on Java frames, then the rules on the thread (checked in
/// this order).
pub const RULES: &[IdleRule] = &[
    IdleRule {
        id: "pool",
        what: "a pool's thread waiting for a task",
        methods: &[
            "java.util.concurrent.ThreadPoolExecutor.getTask",
            "java.util.concurrent.ForkJoinPool.awaitWork",
            "org.apache.tomcat.util.threads.ThreadPoolExecutor.getTask",
            "org.apache.tomcat.util.threads.TaskQueue.take",
            "org.apache.tomcat.util.threads.TaskQueue.poll",
            "org.eclipse.jetty.util.thread.QueuedThreadPool$Runner.idleJobPoll",
            "org.eclipse.jetty.util.thread.ReservedThreadExecutor$ReservedThread.reservedWait",
            "io.netty.util.concurrent.SingleThreadEventExecutor.takeTask",
            "io.netty.util.concurrent.GlobalEventExecutor.takeTask",
        ],
    },
    IdleRule {
        id: "event-loop",
        what: "an event loop or poller waiting for I/O readiness",
        methods: &[
            "sun.nio.ch.SelectorImpl.lockAndDoSelect",
            "sun.nio.ch.EPollSelectorImpl.doSelect",
            "sun.nio.ch.Poller.pollerLoop",
            "sun.nio.ch.Poller.pollLoop",
            "io.netty.channel.nio.NioEventLoop.select",
            "io.netty.channel.epoll.EpollEventLoop.epollWait",
            "io.netty.channel.epoll.EpollEventLoop.epollWaitNoTimerChange",
        ],
    },
    IdleRule {
        id: "accept",
        what: "a server waiting for a connection",
        methods: &[
            "java.net.ServerSocket.accept",
            "sun.nio.ch.ServerSocketChannelImpl.accept",
        ],
    },
    IdleRule {
        id: "jdk-service",
        what: "a JDK service thread waiting for references, timers or signals",
        methods: &[
            "java.lang.ref.Reference.waitForReferencePendingList",
            "java.lang.ref.ReferenceQueue.remove",
            "java.util.TimerThread.mainLoop",
            "jdk.internal.misc.Signal.waitForSignal",
        ],
    },
    IdleRule {
        id: "launcher",
        what: "the java launcher's first thread waiting for the JVM to end",
        methods: &[],
    },
    IdleRule {
        id: "jvm",
        what: "a JVM thread (GC, JIT compiler, VM service) between tasks",
        methods: &[],
    },
];

/// Kernel names (comm, at most 15 bytes) of HotSpot's own threads, by
/// prefix: GC, JIT compilers, the VM thread and its services.
const JVM_THREADS: &[&str] = &[
    "GC Thread#",
    "G1 ",
    "VM Thread",
    "VM Periodic Tas",
    "C1 CompilerThre",
    "C2 CompilerThre",
    "Sweeper thread",
    "Monitor Deflati",
    "Signal Dispatch",
    "Service Thread",
    "Notification Th",
    "Attach Listener",
    "Common-Cleaner",
    "Reference Handl",
    "Finalizer",
    "ZDirector",
    "ZDriver",
    "ZStat",
    "ZUnmapper",
    "ZUncommitter",
    "ZWorker",
    "Shenandoah",
    "StrDedup",
    "Periodic GC",
    "JFR ",
];

/// Packages of the JDK: their frames do not end a rule's reach.
const JDK_PACKAGES: &[&str] = &["java.", "javax.", "jdk.", "sun.", "com.sun."];

/// Whether time of this cause can be idle: blocked time only. Time
/// runnable but held off a CPU (runqueue, throttled, steal, waiting for a
/// carrier) and the tracer's own work are delays, whatever the stack.
pub fn can_be_idle(cause: Cause) -> bool {
    !matches!(
        cause,
        Cause::Runqueue | Cause::Throttled | Cause::Steal | Cause::Carrier | Cause::Tracer
    )
}

/// The blocked part of an interval: its time but for the delays while
/// runnable (after a wakeup, or preempted), which are never idle.
pub fn blocked_part(off: &OffCpu) -> OffCpu {
    let mut b = OffCpu::default();
    for (c, ns) in off.nonzero().filter(|(c, _)| can_be_idle(*c)) {
        b.add(c, ns);
    }
    b
}

/// The rule that makes blocked time of `thread` under `frames`
/// (innermost first) idle, if any.
pub fn idle_rule(thread: &ThreadInfo, frames: &[Frame]) -> Option<&'static IdleRule> {
    let java: Vec<&Frame> = frames.iter().filter(|f| f.is_java()).collect();
    if let Some(rule) = java_rule(&java) {
        return Some(rule);
    }
    if !java.is_empty() || frames.is_empty() {
        return None;
    }
    let rule = |id: &str| RULES.iter().find(|r| r.id == id);
    if thread.tid == thread.tgid && thread.java_name.is_none() && thread.comm == "java" {
        return rule("launcher");
    }
    if JVM_THREADS.iter().any(|p| thread.comm.starts_with(p)) {
        return rule("jvm");
    }
    None
}

/// The innermost Java frame that a rule names, reached from the blocking
/// point through the JDK's frames and the rules' own only.
fn java_rule(java: &[&Frame]) -> Option<&'static IdleRule> {
    for f in java {
        if let Some(rule) = RULES.iter().find(|r| r.methods.contains(&f.name.as_str())) {
            return Some(rule);
        }
        if !JDK_PACKAGES.iter().any(|p| f.name.starts_with(p)) {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::symbolize::FrameKind;

    fn java(name: &str) -> Frame {
        Frame::new(name.into(), FrameKind::Jit)
    }

    fn native(name: &str) -> Frame {
        Frame::new(name.into(), FrameKind::Native)
    }

    fn thread(tid: u32, java_name: Option<&str>, comm: &str) -> ThreadInfo {
        ThreadInfo {
            tid,
            tgid: 100,
            java_name: java_name.map(String::from),
            comm: comm.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_pool_worker_waiting_for_a_task_is_idle() {
        let frames = [
            native("__futex_abstimed_wait_common"),
            java("jdk.internal.misc.Unsafe.park"),
            java("java.util.concurrent.locks.LockSupport.park"),
            java("java.util.concurrent.LinkedBlockingQueue.take"),
            java("java.util.concurrent.ThreadPoolExecutor.getTask"),
            java("java.util.concurrent.ThreadPoolExecutor.runWorker"),
        ];
        let t = thread(101, Some("pool-1-thread-1"), "pool-1-thread-1");
        assert_eq!(idle_rule(&t, &frames).map(|r| r.id), Some("pool"));
    }

    #[test]
    fn the_same_worker_blocked_in_its_task_is_working() {
        let frames = [
            native("__futex_abstimed_wait_common"),
            java("java.util.concurrent.locks.LockSupport.park"),
            java("java.util.concurrent.locks.ReentrantLock.lock"),
            java("com.acme.Orders.place"),
            java("java.util.concurrent.ThreadPoolExecutor.runWorker"),
        ];
        let t = thread(101, Some("pool-1-thread-1"), "pool-1-thread-1");
        assert_eq!(idle_rule(&t, &frames), None);
    }

    #[test]
    fn a_timer_task_blocking_is_working_but_the_timer_between_tasks_is_idle() {
        let t = thread(101, Some("Timer-0"), "Timer-0");
        let between = [java("java.lang.Object.wait"), java("java.util.TimerThread.mainLoop")];
        assert_eq!(idle_rule(&t, &between).map(|r| r.id), Some("jdk-service"));
        let in_task = [
            java("java.lang.Thread.sleep"),
            java("com.acme.Report.run"),
            java("java.util.TimerThread.mainLoop"),
        ];
        assert_eq!(idle_rule(&t, &in_task), None);
    }

    #[test]
    fn jvm_threads_without_java_frames_are_idle_and_app_native_threads_are_not() {
        let futex = [native("__futex_abstimed_wait_common")];
        assert_eq!(
            idle_rule(&thread(102, None, "GC Thread#0"), &futex).map(|r| r.id),
            Some("jvm")
        );
        assert_eq!(
            idle_rule(&thread(100, None, "java"), &futex).map(|r| r.id),
            Some("launcher")
        );
        assert_eq!(idle_rule(&thread(103, None, "my-native-io"), &futex), None);
        // Without a stack nothing is known.
        assert_eq!(idle_rule(&thread(102, None, "GC Thread#0"), &[]), None);
    }

    #[test]
    fn only_blocked_causes_can_be_idle() {
        assert!(can_be_idle(Cause::Park));
        assert!(can_be_idle(Cause::LockNative));
        assert!(!can_be_idle(Cause::Runqueue));
        assert!(!can_be_idle(Cause::Throttled));
    }
}

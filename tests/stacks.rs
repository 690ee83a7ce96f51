//! Stacks (issue 16), end to end: real JVMs (JDK 17 and 25) under real
//! eBPF, nothing traced (`--methods` not given). Each scenario thread of
//! tests/java/StackScenarios.java blocks in a method of its own; at least
//! 95 % of its blocked time must be under stacks that contain that method,
//! named as async-profiler names Java frames. The traces are read after
//! the JVMs exited, so their frames come from what the trace stored.

mod common;

use common::*;
use jtrace_merge::{analyze, Cause, Frame, FrameKind, OffCpuInterval, Symbolizer, ThreadInfo, Trace, Visitor};
use std::collections::HashMap;

/// Scenario thread, the cause of its blocks, the method it blocks in.
const SCENARIOS: [(&str, Cause, &str); 6] = [
    ("sleep", Cause::Sleep, "StackScenarios.sleepHere"),
    ("monitor", Cause::Monitor, "StackScenarios.monitorHere"),
    ("wait", Cause::Wait, "StackScenarios.waitHere"),
    ("park", Cause::Park, "StackScenarios.parkHere"),
    ("socket", Cause::Socket, "StackScenarios.socketHere"),
    ("file", Cause::File, "StackScenarios.fileHere"),
];

/// Per thread name: the off-CPU intervals and their frames.
struct Blocks<'a> {
    symbols: Symbolizer<'a>,
    by_thread: HashMap<String, Vec<(OffCpuInterval, Vec<Frame>)>>,
}

impl Visitor for Blocks<'_> {
    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, iv: &OffCpuInterval) {
        let frames = iv.stack.map(|p| self.symbols.frames(p)).unwrap_or_default();
        self.by_thread
            .entry(t.display_name().to_string())
            .or_default()
            .push((*iv, frames));
    }
}

fn record(jdk: &str, extra: &[&str]) -> (std::path::PathBuf, Trace) {
    let out = tempdir("stacks");
    let cp = classes();
    let java = java(jdk);
    let mut cmd = vec![java.to_str().unwrap()];
    cmd.extend_from_slice(extra);
    cmd.extend(["-cp", cp.to_str().unwrap(), "StackScenarios", "1500"]);
    let o = jtrace_run(&out, &[], &cmd);
    assert!(
        o.status.success(),
        "{jdk}: jtrace run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("DONE"));
    let trace = Trace::open(&out).unwrap();
    (out, trace)
}

fn blocks(trace: &Trace) -> HashMap<String, Vec<(OffCpuInterval, Vec<Frame>)>> {
    let mut b = Blocks {
        symbols: Symbolizer::new(trace),
        by_thread: HashMap::new(),
    };
    analyze(trace, &mut b);
    b.by_thread
}

#[test]
fn blocked_time_lands_under_the_scenarios_own_methods() {
    for jdk in JDKS {
        let (_dir, trace) = record(jdk, &[]);
        assert!(!trace.stacks.is_empty(), "{jdk}: no stacks recorded");
        let by_thread = blocks(&trace);
        for (thread, cause, method) in SCENARIOS {
            let ivs = by_thread
                .get(thread)
                .unwrap_or_else(|| panic!("{jdk}: no thread {thread}"));
            let (mut all, mut under) = (0u64, 0u64);
            for (iv, frames) in ivs {
                let ns = iv.split.off.get(cause);
                all += ns;
                if frames.iter().any(|f| f.is_java() && f.name == method) {
                    under += ns;
                }
            }
            assert!(all > 100_000_000, "{jdk}: {thread}: only {all} ns of {}", cause.name());
            let share = under as f64 / all as f64;
            assert!(
                share >= 0.95,
                "{jdk}: {thread}: {:.1} % of {} ns of {} under {method}",
                share * 100.0,
                all,
                cause.name()
            );
        }
        // The socket's stack reaches the kernel's receive path under the
        // JDK's native read, and native JVM frames are named from libjvm.so.
        let socket = &by_thread["socket"];
        let (_, frames) = socket
            .iter()
            .filter(|(iv, _)| iv.split.off.get(Cause::Socket) > 0)
            .max_by_key(|(iv, _)| iv.split.off.get(Cause::Socket))
            .unwrap();
        let names: Vec<String> = frames.iter().map(Frame::flame_name).collect();
        assert!(
            names.iter().any(|n| n == "tcp_recvmsg_[k]"),
            "{jdk}: no kernel receive path in {names:?}"
        );
        assert!(
            names.iter().any(|n| n.starts_with("sun.nio.ch.SocketDispatcher.read0")),
            "{jdk}: no native read method in {names:?}"
        );
        let sleep = &by_thread["sleep"];
        assert!(
            sleep.iter().any(|(_, f)| f
                .iter()
                .any(|f| f.kind == FrameKind::Native && f.name.starts_with("JavaCalls::call_helper"))),
            "{jdk}: JavaCalls::call_helper (libjvm.so) named in no sleep stack"
        );
    }
}

#[test]
fn interpreted_frames_are_named_as_interpreted() {
    let (_dir, trace) = record(JDKS[0], &["-Xint"]);
    let by_thread = blocks(&trace);
    let frames: Vec<&Frame> = by_thread["sleep"].iter().flat_map(|(_, f)| f).collect();
    assert!(
        frames
            .iter()
            .any(|f| f.kind == FrameKind::Interpreted && f.flame_name() == "StackScenarios.sleepHere_[0]"),
        "no interpreted sleepHere frame"
    );
    assert!(!frames
        .iter()
        .any(|f| matches!(f.kind, FrameKind::Jit | FrameKind::Inlined)));
}

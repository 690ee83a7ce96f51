//! The Perfetto export, decoded with Perfetto's official schema (PyPI
//! `perfetto`, installed into target/pydeps by scripts/test-python.sh),
//! with its incremental timestamps, per-sequence interning and compact
//! switches resolved as trace_processor resolves them: every invocation is
//! a slice on its thread's track with its exact times and arguments, every
//! off-CPU interval a slice on the thread's off-CPU track, every switch
//! and wakeup of the kernel stream a sched event, every wakeup by a traced
//! thread a flow, every GC/safepoint window a slice, and every interned id
//! resolves.

use jtrace_testkit::synth;

mod fixture;

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{
    describe_evidence, Cause, Event, Evidence, Invocation, OffCpuInterval, ThreadInfo, Timed, Trace, Visitor,
};
use jtrace_timeline::{jvm_windows, window_name, Chrome, Exporter, Perfetto};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs a checker of tests/python with the pinned packages on its path
/// (installing them first if they are not there) and parses its JSON.
pub fn python_json(script: &str, args: &[&Path]) -> serde_json::Value {
    let setup = std::process::Command::new("bash")
        .arg(root().join("scripts/test-python.sh"))
        .status()
        .unwrap();
    assert!(setup.success(), "scripts/test-python.sh failed");
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python").join(script))
        .args(args)
        .env("PYTHONPATH", root().join("target/pydeps"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the export must hold, counted on the whole trace.
#[derive(Default)]
struct Expected<'a> {
    trace: Option<&'a Trace>,
    slices: BTreeMap<String, u64>,
    cpu_ns: u64,
    max_depth: usize,
    off_cpu: u64,
    flows: u64,
    switches: u64,
    wakings: u64,
    /// Every slice, instant, switch and waking as the checker lists them
    /// (`perfetto_check.py --full`).
    slice_list: Vec<(String, u32, String, u64, u64, Value)>,
    instant_list: Vec<Value>,
    switch_list: Vec<[u64; 5]>,
    waking_list: Vec<[u64; 3]>,
}

/// `<cause>_ns` arguments of a split.
fn cause_args(args: &mut serde_json::Map<String, Value>, off: &jtrace_merge::OffCpu) {
    for (c, ns) in off.nonzero() {
        args.insert(format!("{}_ns", c.name()), json!(ns));
    }
}

impl Visitor for Expected<'_> {
    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        let trace = self.trace.unwrap();
        match e.event {
            Event::SwitchOut {
                prev_state,
                cpu,
                next_tid,
                ..
            } => {
                self.switches += 1;
                let s = [cpu as u64, e.ts, t.tid as u64, prev_state as u64, next_tid as u64];
                self.switch_list.push(s);
            }
            Event::SwitchIn { prev_tid, cpu } if !trace.threads.contains_key(&prev_tid) => {
                self.switches += 1;
                self.switch_list
                    .push([cpu as u64, e.ts, prev_tid as u64, 0, t.tid as u64]);
            }
            Event::Wakeup { waker_tid, .. } => {
                self.wakings += 1;
                self.waking_list.push([e.ts, waker_tid as u64, t.tid as u64]);
            }
            _ => {}
        }
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        let m = &self.trace.unwrap().methods[inv.method as usize];
        *self.slices.entry(m.qualified()).or_default() += 1;
        self.cpu_ns += inv.breakdown.cpu;
        self.max_depth = self.max_depth.max(depth + 1);
        let b = &inv.breakdown;
        let mut args = serde_json::Map::new();
        args.insert("signature".into(), json!(m.signature));
        args.insert("cpu_ns".into(), json!(b.cpu));
        cause_args(&mut args, &b.off);
        for (k, n) in [
            ("voluntary_switches", b.voluntary),
            ("involuntary_switches", b.involuntary),
            ("not_covered_ns", b.not_covered),
        ] {
            if n > 0 {
                args.insert(k.into(), json!(n));
            }
        }
        for (k, on) in [("exception", inv.exception), ("unfinished", inv.unfinished)] {
            if on {
                args.insert(k.into(), json!(true));
            }
        }
        let s = (
            "method".into(),
            t.tid,
            m.qualified(),
            inv.entry,
            inv.exit,
            Value::Object(args),
        );
        self.slice_list.push(s);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, o: &OffCpuInterval) {
        let trace = self.trace.unwrap();
        self.off_cpu += 1;
        let mut args = serde_json::Map::new();
        cause_args(&mut args, &o.split.off);
        if !matches!(o.evidence, Evidence::None | Evidence::Preempted) {
            args.insert("evidence".into(), json!(describe_evidence(trace, &o.evidence)));
        }
        if let Some(w) = o.wake {
            args.insert("waker_tid".into(), json!(w.waker_tid));
            if w.waker_tid != 0 && w.waker_tid != t.tid && trace.threads.contains_key(&w.waker_tid) {
                self.flows += 1;
                self.instant_list.push(json!([w.waker_tid, "wakes", w.ts]));
            }
        }
        // Named by its largest cause (the last of equals, as max_by_key).
        let main = o.split.off.nonzero().max_by_key(|&(_, ns)| ns).map(|(c, _)| c);
        let name = main.map_or("off-CPU", Cause::name).to_string();
        let s = ("off_cpu".into(), t.tid, name, o.start, o.end, Value::Object(args));
        self.slice_list.push(s);
    }
}

#[test]
fn perfetto_export_decodes_with_the_official_schema() {
    let base = std::env::temp_dir().join(format!("jtrace-perfetto-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let dir = base.join("t.jtrace");
    synth::generate(&dir, 200_000, 6).unwrap();
    let trace = Trace::open(&dir).unwrap();
    let mut exp = Expected {
        trace: Some(&trace),
        ..Default::default()
    };
    jtrace_merge::analyze(&trace, &mut exp);
    assert!(exp.slices.values().sum::<u64>() > 5_000 && exp.flows > 100 && exp.switches > 1_000);

    // Streamed in many small runs: the same bytes as from the whole trace.
    let file = base.join("t.pftrace");
    let mut streamed = Vec::new();
    let small = StreamOptions {
        memory_budget: 256 << 10,
        ..Default::default()
    };
    Perfetto.write_dir(&dir, &mut streamed, &small).unwrap();
    let mut whole = Vec::new();
    Perfetto.write_trace(&trace, &mut whole).unwrap();
    if streamed != whole {
        std::fs::write(base.join("whole.pftrace"), &whole).unwrap();
        std::fs::write(base.join("streamed.pftrace"), &streamed).unwrap();
        panic!(
            "streamed Perfetto export differs from the in-memory one: {}",
            base.display()
        );
    }
    std::fs::write(&file, &streamed).unwrap();

    let got = python_json("perfetto_check.py", &[&file, Path::new("--full")]);
    assert_same_content(&got, &mut exp, &trace);
    let slices: BTreeMap<String, u64> = serde_json::from_value(got["method_slices"].clone()).unwrap();
    assert_eq!(slices, exp.slices);
    assert_eq!(got["method_ends"], exp.slices.values().sum::<u64>());
    assert_eq!(got["method_cpu_ns"], exp.cpu_ns);
    assert_eq!(got["max_depth"], exp.max_depth as u64);
    let off: BTreeMap<String, u64> = serde_json::from_value(got["off_cpu_slices"].clone()).unwrap();
    assert_eq!(off.values().sum::<u64>(), exp.off_cpu);
    for cause in ["monitor", "sleep", "park", "socket", "runqueue"] {
        assert!(
            off.get(cause).copied().unwrap_or(0) > 0,
            "no {cause} interval in {off:?}"
        );
    }
    let evidence = got["evidence"].as_object().unwrap();
    for e in ["entering contended monitor of ", "in futex", "in read"] {
        assert!(
            evidence.keys().any(|k| k.starts_with(e)),
            "no evidence {e:?} in {evidence:?}"
        );
    }
    assert_eq!(got["flows"], exp.flows);
    assert_eq!(got["instants"], exp.flows);
    assert_eq!(got["flows_unmatched"], 0);
    assert_eq!(got["sched_switch"], exp.switches);
    assert_eq!(got["sched_waking"], exp.wakings);
    let stops: Vec<String> = serde_json::from_value(got["stops"].clone()).unwrap();
    let windows: Vec<String> = jvm_windows(&trace)
        .iter()
        .map(|w| format!("{} #{}", window_name(w.cause), w.seq))
        .collect();
    assert!(!windows.is_empty());
    assert_eq!(
        stops.iter().collect::<HashSet<_>>(),
        windows.iter().collect::<HashSet<_>>()
    );
    let threads: Vec<(u32, u32)> = serde_json::from_value(got["threads"].clone()).unwrap();
    assert_eq!(threads.len(), trace.threads.len());
    for (tid, pid) in threads {
        let t = &trace.threads[&tid];
        assert!(
            pid == t.tgid || (t.tgid == 0 && pid == trace.meta.pid),
            "tid {tid} pid {pid}"
        );
    }

    // Far smaller than the Chrome JSON of the same trace (the synthetic
    // trace is mostly scheduling; the Tomcat-like trace of BENCHMARKS.md,
    // mostly methods, is 9.5x).
    let mut chrome = Vec::new();
    Chrome.write_trace(&trace, &mut chrome).unwrap();
    let ratio = chrome.len() as f64 / whole.len() as f64;
    eprintln!(
        "perfetto {} bytes, chrome {} bytes: {ratio:.1}x",
        whole.len(),
        chrome.len()
    );
    assert!(ratio > 4.0, "perfetto {} bytes vs chrome {}", whole.len(), chrome.len());
    std::fs::remove_dir_all(&base).unwrap();
}

/// The decoded export (`perfetto_check.py --full`) holds exactly the
/// slices (names, times to the nanosecond, arguments), instants, switches
/// and wakings the walk of `trace` gives.
fn assert_same_content(got: &Value, exp: &mut Expected, trace: &Trace) {
    for w in jtrace_timeline::jvm_windows(trace) {
        let mut args = serde_json::Map::new();
        args.insert("seq".into(), json!(w.seq));
        if w.open {
            args.insert("open".into(), json!(true));
        }
        let name = format!("{} #{}", window_name(w.cause), w.seq);
        exp.slice_list
            .push(("stops".into(), w.pid, name, w.start, w.end, Value::Object(args)));
    }
    exp.slice_list.sort_by(|a, b| {
        (&a.0, a.1, a.3, std::cmp::Reverse(a.4), &a.2).cmp(&(&b.0, b.1, b.3, std::cmp::Reverse(b.4), &b.2))
    });
    let want: Vec<Value> = (exp.slice_list.iter())
        .map(|(w, tid, name, start, end, args)| json!([w, tid, name, start, end, args]))
        .collect();
    let slices = got["slices"].as_array().unwrap();
    assert_eq!(slices.len(), want.len(), "slices");
    for (g, w) in slices.iter().zip(&want) {
        assert_eq!(g, w, "first slice that differs");
    }
    exp.instant_list.sort_by_key(|v| v.to_string());
    let mut instants = got["instant_list"].as_array().unwrap().clone();
    instants.sort_by_key(|v| v.to_string());
    assert_eq!(instants, exp.instant_list, "instants");
    exp.switch_list.sort_by_key(|s| (s[0], s[1], s[2]));
    let switches: Vec<[u64; 5]> = serde_json::from_value(got["switches"].clone()).unwrap();
    assert_eq!(switches.len(), exp.switch_list.len(), "switches");
    for (g, w) in switches.iter().zip(&exp.switch_list) {
        assert_eq!(g, w, "first switch that differs ([cpu, ts, prev, state, next])");
    }
    assert_eq!(got["compact_unresolved"], 0);
    exp.waking_list.sort();
    let mut wakings: Vec<[u64; 3]> = (got["wakings"].as_array().unwrap().iter())
        .map(|w| [w[0].as_u64().unwrap(), w[1].as_u64().unwrap(), w[2].as_u64().unwrap()])
        .collect();
    wakings.sort();
    assert_eq!(wakings, exp.waking_list, "wakings ([ts, waker, wakee])");
}

/// A traced thread's switch-out whose CPU's previous recorded switch put
/// it there is written in compact_sched (its previous thread left to the
/// reader, which takes the CPU's last switch's next); one after a switch
/// of another thread on that CPU that did not (records lost) is written in
/// full. Decoded as trace_processor does, every switch is the recorded one.
#[test]
fn chained_switches_are_compact_and_resolve_to_the_recorded_ones() {
    use fixture::{Builder, PID};
    const A: u32 = 101;
    const B: u32 = 102;
    const OTHER: u32 = 999; // untraced
    let base = fixture::tempdir("perfetto-compact");
    let dir = base.join("t.jtrace");
    let mut b = Builder::default();
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "W", "work", "()V");
    b.thread_start(PID, A, 1000, "a", "main");
    b.thread_start(PID, B, 1000, "b", "main");
    b.comm(A, 1001, "a");
    b.comm(B, 1001, "b");
    // CPU 0: idle -> A -> B (traced to traced) -> other -> A -> idle.
    b.switch_in_on(A, 2000, 0, 0);
    b.enter(A, 2100, 1);
    b.switch_out_on(A, 3000, 0, B, 1); // chains: compact
    b.switch_in_on(B, 3000, 0, A);
    b.wakeup(A, 3500, B);
    b.switch_out_on(B, 4000, 0, OTHER, jtrace_format::TASK_RUNNING); // chains: compact
    b.switch_in_on(A, 5000, 0, OTHER); // untraced prev: full
    b.exit(A, 5500, 1);
    b.switch_out_on(A, 6000, 0, 0, 1); // chains: compact
                                       // CPU 1: A runs, then B (A's switch-out was lost), then A leaves: A's
                                       // own switch-in was on CPU 1, but B's switch came between: a break.
    b.switch_in_on(A, 7000, 1, 0);
    b.switch_in_on(B, 7500, 1, OTHER);
    b.switch_out_on(B, 8000, 1, 0, 1); // chains: compact
    b.switch_out_on(A, 9000, 1, 0, 1); // a break: full
    b.write(&dir, 1000, 10_000);

    let trace = Trace::open(&dir).unwrap();
    assert_eq!(trace.sched_chain.breaks(), Some(1), "A's switch-out on CPU 1");
    let mut exp = Expected {
        trace: Some(&trace),
        ..Default::default()
    };
    jtrace_merge::analyze(&trace, &mut exp);
    let mut out = Vec::new();
    Perfetto.write_trace(&trace, &mut out).unwrap();
    let file = base.join("t.pftrace");
    std::fs::write(&file, &out).unwrap();
    let got = python_json("perfetto_check.py", &[&file, Path::new("--full")]);
    assert_eq!(got["compact_switches"], 4, "{got}");
    // In full: the four switch-ins from untraced threads and the break.
    assert_eq!(got["sched_switch"], 9);
    assert_same_content(&got, &mut exp, &trace);
    std::fs::remove_dir_all(&base).unwrap();
}

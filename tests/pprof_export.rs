//! `jtrace export --format pprof`, end to end: a real JVM
//! (tests/java/StackScenarios.java with its CPU-bound "spin" thread) under
//! real eBPF, nothing traced (no `--methods`), decoded with profile.proto's
//! schema (timeline/tests/python/pprof_check.py, python protobuf from
//! target/pydeps, which also checks the profile is well formed):
//! * per thread and cause, the off-CPU samples add up to `report --json`'s
//!   `off_cpu_ns` exactly;
//! * each scenario's blocked time is under stacks that contain its own Java
//!   method, the socket's under the kernel's `tcp_recvmsg_[k]`, and the
//!   JIT scenario's inlined frame is a line of its compiled caller's location;
//! * the CPU samples are the `cpu` type, samples × period, and name the
//!   CPU-bound method;
//! * a trace recorded without stacks exports as before: the off-CPU type
//!   only, under the traced methods, and the same totals;
//! * a missing trace is a clear error, and no file is written.

mod common;

use common::*;
use jtrace_merge::Trace;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Thread, cause and the method it blocks in (as tests/stacks.rs).
const SCENARIOS: [(&str, &str, &str); 6] = [
    ("sleep", "sleep", "StackScenarios.sleepHere"),
    ("monitor", "monitor", "StackScenarios.monitorHere"),
    ("wait", "wait", "StackScenarios.waitHere"),
    ("park", "park", "StackScenarios.parkHere"),
    ("socket", "socket", "StackScenarios.socketHere"),
    ("file", "file", "StackScenarios.fileHere"),
];

/// A decoded profile (what pprof_check.py prints).
#[derive(Deserialize, Debug)]
struct Decoded {
    sample_type: Vec<[String; 2]>,
    period_type: [String; 2],
    period: i64,
    samples: Vec<DecodedSample>,
}

#[derive(Deserialize, Debug)]
struct DecodedSample {
    labels: BTreeMap<String, serde_json::Value>,
    values: Vec<i64>,
    /// Leaf first; each location's lines, inlined first.
    locations: Vec<Vec<String>>,
}

impl DecodedSample {
    fn label(&self, k: &str) -> String {
        match self.labels.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    }
    fn tid(&self) -> u64 {
        self.labels["tid"].as_u64().unwrap()
    }
    /// Whether a frame is the Java method `m` (any of async-profiler's
    /// Java suffixes, or none: a traced method).
    fn has_java(&self, m: &str) -> bool {
        self.locations.iter().flatten().any(|f| {
            f.strip_prefix(m)
                .is_some_and(|s| ["", "_[j]", "_[i]", "_[0]", "_[1]"].contains(&s))
        })
    }
    fn has(&self, frame: &str) -> bool {
        self.locations.iter().flatten().any(|f| f == frame)
    }
}

fn record(jdk: &str, args: &[&str], ms: &str) -> PathBuf {
    let out = tempdir("pprof");
    let cp = classes();
    let java = java(jdk);
    let cmd = [
        java.to_str().unwrap(),
        "-cp",
        cp.to_str().unwrap(),
        "StackScenarios",
        ms,
        "spin",
    ];
    let o = jtrace_run(&out, args, &cmd);
    assert!(
        o.status.success(),
        "{jdk}: jtrace run: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("DONE"));
    out
}

/// `jtrace export --format pprof` (small budget: the walk spills) and the
/// decoded profile.
fn export(trace: &Path) -> Decoded {
    let file = trace.with_extension("pb.gz");
    let o = Command::new(jtrace())
        .args(["export", "--format", "pprof", "--memory-budget", "4M", "-o"])
        .arg(&file)
        .arg(trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = python_script("timeline/tests/python/pprof_check.py", &[file.as_os_str()]);
    serde_json::from_slice(&out).unwrap()
}

/// Off-CPU ns per (tid, cause).
type OffByTidCause = BTreeMap<(u64, String), u64>;

/// `report --json`'s off-CPU ns per (tid, cause), and each thread's tid
/// and CPU ns by name.
fn report(trace: &Path) -> (OffByTidCause, BTreeMap<String, (u64, u64)>) {
    let o = Command::new(jtrace())
        .args(["report", "--json"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (mut off, mut threads) = (BTreeMap::new(), BTreeMap::new());
    for t in r["threads"].as_array().unwrap() {
        let tid = t["tid"].as_u64().unwrap();
        for (c, ns) in t["off_cpu_ns"].as_object().unwrap() {
            off.insert((tid, c.clone()), ns.as_u64().unwrap());
        }
        threads.insert(
            t["name"].as_str().unwrap().to_string(),
            (tid, t["cpu_ns"].as_u64().unwrap()),
        );
    }
    (off, threads)
}

#[test]
fn a_missing_trace_is_an_error_and_writes_nothing() {
    let dir = tempdir("pprof-bad");
    let out = dir.join("prof.pb.gz");
    for trace in [dir.join("missing"), dir.clone()] {
        let o = Command::new(jtrace())
            .args(["export", "--format", "pprof", "-o"])
            .arg(&out)
            .arg(&trace)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("cannot open trace"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn cleanup(trace: &Path) {
    std::fs::remove_dir_all(trace).unwrap();
    std::fs::remove_file(trace.with_extension("pb.gz")).unwrap();
}

/// The profile's off-CPU ns per (tid, cause).
fn off_by_tid_cause(p: &Decoded) -> OffByTidCause {
    let mut m = BTreeMap::new();
    for s in p.samples.iter().filter(|s| s.values[0] > 0) {
        *m.entry((s.tid(), s.label("cause"))).or_default() += s.values[0] as u64;
    }
    m
}

#[test]
fn pprof_has_the_recorded_stacks_and_the_cpu_samples() {
    for jdk in [JDK17, JDK25] {
        recorded_stacks_and_cpu_samples(jdk);
    }
}

fn recorded_stacks_and_cpu_samples(jdk: &str) {
    let jdk_name = jdk_name(jdk);
    let trace = record(jdk, &[], "2000");
    let p = export(&trace);
    let (report_off, threads) = report(&trace);
    let period = 1_000_000_000 / 99;
    let ns = "nanoseconds".to_string();
    assert_eq!(
        p.sample_type,
        [["off_cpu".to_string(), ns.clone()], ["cpu".to_string(), ns.clone()]]
    );
    assert_eq!((&p.period_type, p.period), (&["cpu".to_string(), ns], period));

    // Every thread's off-CPU time by cause: the report's, exactly.
    assert_eq!(off_by_tid_cause(&p), report_off, "{jdk_name}");

    // Each scenario's blocked time under its own method.
    for (thread, cause, method) in SCENARIOS {
        let tid = threads[thread].0;
        let all = report_off[&(tid, cause.to_string())];
        let under: u64 = (p.samples.iter())
            .filter(|s| s.tid() == tid && s.label("cause") == cause && s.has_java(method))
            .map(|s| s.values[0] as u64)
            .sum();
        assert!(all > 100_000_000, "{jdk_name}: {thread}: only {all} ns of {cause}");
        assert!(
            under * 100 >= all * 95,
            "{jdk_name}: {thread}: {under} of {all} ns of {cause} under {method}"
        );
        eprintln!("{jdk_name}: {thread}: {under} of {all} ns of {cause} under {method}");
    }
    // The socket's under the kernel's receive path.
    let socket = threads["socket"].0;
    let (all, kernel) = p
        .samples
        .iter()
        .filter(|s| s.tid() == socket && s.label("cause") == "socket")
        .fold((0, 0), |(a, k), s| {
            let ns = s.values[0] as u64;
            (a + ns, k + if s.has("tcp_recvmsg_[k]") { ns } else { 0 })
        });
    eprintln!("{jdk_name}: socket: {kernel} of {all} ns under tcp_recvmsg_[k]");
    assert!(
        kernel * 100 >= all * 90,
        "{jdk_name}: socket: {kernel} of {all} ns under tcp_recvmsg_[k]"
    );
    // Inlining: jitMiddle_[i] is a line of its compiled caller's location.
    let jit = threads["jit"].0;
    let (parked, inlined) = p
        .samples
        .iter()
        .filter(|s| s.tid() == jit && s.label("cause") == "park")
        .fold((0, 0), |(a, i), s| {
            let ns = s.values[0] as u64;
            let ok = s.locations.iter().any(|l| {
                let (last, inlined) = l.split_last().unwrap();
                inlined.iter().any(|f| f == "StackScenarios.jitMiddle_[i]")
                    && inlined.iter().all(|f| f.ends_with("_[i]"))
                    && last.ends_with("_[j]")
            });
            (a + ns, i + if ok { ns } else { 0 })
        });
    eprintln!("{jdk_name}: jit: {inlined} of {parked} ns parked with jitMiddle_[i] inlined in a location");
    let example = p.samples.iter().filter(|s| s.tid() == jit).max_by_key(|s| s.values[0]);
    assert!(
        inlined * 2 >= parked,
        "{jdk_name}: jit: {inlined} of {parked} ns; e.g. {example:?}"
    );

    // CPU samples: samples × period, and the spinning thread's name spinHere.
    let t = Trace::open(&trace).unwrap();
    let cpu: Vec<&DecodedSample> = p.samples.iter().filter(|s| s.values[0] == 0).collect();
    assert!(cpu
        .iter()
        .all(|s| s.values[1] > 0 && s.values[1] % period == 0 && s.label("cause").is_empty()));
    let total: i64 = cpu.iter().map(|s| s.values[1]).sum();
    assert_eq!(total as u64, t.stacks.cpu_samples.values().sum::<u64>() * period as u64);
    let (spin, spin_cpu) = threads["spin"];
    let (mine, named) = cpu.iter().filter(|s| s.tid() == spin).fold((0, 0), |(a, n), s| {
        let v = s.values[1] as u64;
        (a + v, n + if s.has_java("StackScenarios.spinHere") { v } else { 0 })
    });
    eprintln!("{jdk_name}: spin: {named} of {mine} sampled CPU ns under spinHere; its CPU time {spin_cpu} ns");
    assert!(
        named >= 20 * period as u64,
        "{jdk_name}: spin: {named} ns sampled under spinHere"
    );
    assert!(
        named * 100 >= mine * 80,
        "{jdk_name}: spin: {named} of {mine} ns under spinHere"
    );
    // Sampling at 99 Hz estimates the exact CPU time (loosely: a loaded machine).
    assert!(
        mine * 2 >= spin_cpu && mine <= spin_cpu * 2,
        "{jdk_name}: spin: {mine} sampled, {spin_cpu} exact"
    );
    cleanup(&trace);
}

#[test]
fn a_trace_without_stacks_exports_its_traced_methods() {
    let trace = record(JDK17, &["--no-stacks", "--methods", "StackScenarios.*"], "1000");
    let p = export(&trace);
    let (report_off, threads) = report(&trace);
    assert_eq!(p.sample_type, [["off_cpu".to_string(), "nanoseconds".to_string()]]);
    assert_eq!(off_by_tid_cause(&p), report_off);
    for (thread, cause, method) in SCENARIOS {
        let tid = threads[thread].0;
        let all = report_off[&(tid, cause.to_string())];
        // The traced method is the leaf, without suffix: no stack recorded.
        let under: u64 = (p.samples.iter())
            .filter(|s| s.tid() == tid && s.label("cause") == cause && s.locations[0] == [method])
            .map(|s| s.values[0] as u64)
            .sum();
        assert!(all > 50_000_000, "{thread}: only {all} ns of {cause}");
        assert!(
            under * 100 >= all * 95,
            "{thread}: {under} of {all} ns of {cause} under {method}"
        );
    }
    assert!(p.samples.iter().all(|s| s.locations.iter().all(|l| l.len() == 1)
        && !s
            .locations
            .iter()
            .flatten()
            .any(|f| f.ends_with(']') && f.contains("_["))));
    cleanup(&trace);
}

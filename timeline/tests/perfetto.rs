//! The Perfetto export, decoded with Perfetto's official schema (PyPI
//! `perfetto`, installed into target/pydeps by scripts/test-python.sh):
//! every invocation is a slice on its thread's track, every switch and
//! wakeup of the kernel stream is a sched event, every wakeup by a traced
//! thread a flow, every GC/safepoint window a slice, and every interned id
//! resolves.

#[path = "../../merge/examples/synth.rs"]
#[allow(dead_code)]
mod synth;

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{Event, Invocation, OffCpuInterval, ThreadInfo, Timed, Trace, Visitor};
use jtrace_timeline::export::{Chrome, Exporter, Perfetto};
use jtrace_timeline::{jvm_windows, window_name};
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
}

impl Visitor for Expected<'_> {
    fn event(&mut self, _t: &ThreadInfo, e: &Timed) {
        let trace = self.trace.unwrap();
        match e.event {
            Event::SwitchOut { .. } => self.switches += 1,
            Event::SwitchIn { prev_tid, .. } if !trace.threads.contains_key(&prev_tid) => self.switches += 1,
            Event::Wakeup { .. } => self.wakings += 1,
            _ => {}
        }
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, inv: &Invocation) {
        let m = &self.trace.unwrap().methods[inv.method as usize];
        *self.slices.entry(m.qualified()).or_default() += 1;
        self.cpu_ns += inv.breakdown.cpu;
        self.max_depth = self.max_depth.max(depth + 1);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, o: &OffCpuInterval) {
        self.off_cpu += 1;
        if let Some(w) = o.wake {
            let trace = self.trace.unwrap();
            if w.waker_tid != 0 && w.waker_tid != t.tid && trace.threads.contains_key(&w.waker_tid) {
                self.flows += 1;
            }
        }
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

    let got = python_json("perfetto_check.py", &[&file]);
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

    // Far smaller than the Chrome JSON of the same trace.
    let mut chrome = Vec::new();
    Chrome.write_trace(&trace, &mut chrome).unwrap();
    let ratio = chrome.len() as f64 / whole.len() as f64;
    eprintln!(
        "perfetto {} bytes, chrome {} bytes: {ratio:.1}x",
        whole.len(),
        chrome.len()
    );
    assert!(ratio > 3.0, "perfetto {} bytes vs chrome {}", whole.len(), chrome.len());
    std::fs::remove_dir_all(&base).unwrap();
}

//! The pprof export, decoded with profile.proto's schema (python protobuf,
//! installed into target/pydeps by scripts/test-python.sh): off-CPU
//! nanoseconds by cause and thread and by innermost method equal the walk's.

#[path = "../../merge/examples/synth.rs"]
#[allow(dead_code)]
mod synth;

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{Invocation, MethodIdx, OffCpuInterval, ThreadInfo, Trace, Visitor};
use jtrace_timeline::export::{Exporter, Pprof};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Default)]
struct Expected<'a> {
    trace: Option<&'a Trace>,
    stack: Vec<MethodIdx>,
    by_cause_tid: BTreeMap<String, u64>,
    by_leaf: BTreeMap<String, u64>,
}

impl Visitor for Expected<'_> {
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, _inv: &Invocation) {
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, o: &OffCpuInterval) {
        let leaf = match depth {
            0 => "(no traced method)".to_string(),
            d => self.trace.unwrap().methods[self.stack[d - 1] as usize].qualified(),
        };
        for (c, ns) in o.split.off.nonzero() {
            *self.by_cause_tid.entry(format!("{} {}", c.name(), t.tid)).or_default() += ns;
            *self.by_leaf.entry(leaf.clone()).or_default() += ns;
        }
    }
}

#[test]
fn pprof_off_cpu_profile_decodes_and_adds_up() {
    let base = std::env::temp_dir().join(format!("jtrace-pprof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let dir = base.join("t.jtrace");
    synth::generate(&dir, 200_000, 6).unwrap();
    let trace = Trace::open(&dir).unwrap();
    let mut exp = Expected {
        trace: Some(&trace),
        ..Default::default()
    };
    jtrace_merge::analyze(&trace, &mut exp);
    assert!(exp.by_leaf.len() > 5, "{:?}", exp.by_leaf);

    let mut whole = Vec::new();
    Pprof.write_trace(&trace, &mut whole).unwrap();
    let mut streamed = Vec::new();
    let small = StreamOptions {
        memory_budget: 256 << 10,
        ..Default::default()
    };
    Pprof.write_dir(&dir, &mut streamed, &small).unwrap();
    assert!(whole == streamed, "streamed pprof differs from the in-memory one");
    let file = base.join("off.pb.gz");
    std::fs::write(&file, &whole).unwrap();

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let setup = std::process::Command::new("bash")
        .arg(root.join("scripts/test-python.sh"))
        .status()
        .unwrap();
    assert!(setup.success());
    let out = std::process::Command::new("python3")
        .arg(root.join("timeline/tests/python/pprof_check.py"))
        .arg(&file)
        .env("PYTHONPATH", root.join("target/pydeps"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["sample_type"], serde_json::json!(["off_cpu", "nanoseconds"]));
    let by_cause_tid: BTreeMap<String, u64> = serde_json::from_value(got["by_cause_tid"].clone()).unwrap();
    assert_eq!(by_cause_tid, exp.by_cause_tid);
    let by_leaf: BTreeMap<String, u64> = serde_json::from_value(got["by_leaf"].clone()).unwrap();
    assert_eq!(by_leaf, exp.by_leaf);
    std::fs::remove_dir_all(&base).unwrap();
}

//! The fleet example (examples/fleet/fleet.py, docs/SCALE.md): one trace's
//! Parquet export filed under 100 (host, trace_id) partitions, queried with
//! DataFusion: off-CPU time by cause per method is 100 times the report's,
//! seen on every host and trace. Runs in the default test run: a few seconds.

use jtrace_testkit::synth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new("python3")
        .arg(root().join("examples/fleet/fleet.py"))
        .args(args)
        .env("PYTHONPATH", root().join("target/pydeps"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn datafusion_fleet_query_over_100_traces() {
    let base: PathBuf = std::env::temp_dir().join(format!("jtrace-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let trace = base.join("t.jtrace");
    synth::generate(&trace, 100_000, 4).unwrap();
    let tables = base.join("tables");
    let jtrace = env!("CARGO_BIN_EXE_jtrace");
    let out = Command::new(jtrace)
        .args(["export", "--format", "parquet", "-o"])
        .arg(&tables)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = Command::new(jtrace)
        .args(["report", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert!(Command::new("bash")
        .arg(root().join("scripts/test-python.sh"))
        .status()
        .unwrap()
        .success());

    // 10 hosts x 10 traces, filed in one Python process.
    let fleet = base.join("fleet");
    let add = format!(
        "import sys; sys.path.insert(0, {dir:?}); import fleet\n\
         for h in range(10):\n    for t in range(10):\n        \
         fleet.add({root:?}, f'host-{{h}}', f'trace-{{h}}-{{t}}', {tables:?})",
        dir = root().join("examples/fleet").to_str().unwrap(),
        root = fleet.to_str().unwrap(),
        tables = tables.to_str().unwrap(),
    );
    let out = Command::new("python3")
        .args(["-c", &add])
        .env("PYTHONPATH", root().join("target/pydeps"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<serde_json::Value> = serde_json::from_slice(&python(&["offcpu".as_ref(), fleet.as_os_str()])).unwrap();

    // The report's per-method off-CPU by cause (over all threads), times 100.
    let mut want: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for m in report["methods"].as_array().unwrap() {
        let key = format!("{}.{}", m["class"].as_str().unwrap(), m["name"].as_str().unwrap());
        let e = want.entry(key).or_default();
        *e.entry("calls".into()).or_default() += 100 * m["calls"].as_u64().unwrap();
        for (c, ns) in m["off_cpu_ns"].as_object().unwrap() {
            *e.entry(format!("{c}_ns")).or_default() += 100 * ns.as_u64().unwrap();
        }
    }
    assert_eq!(got.len(), want.len());
    for row in &got {
        let key = format!("{}.{}", row["class"].as_str().unwrap(), row["name"].as_str().unwrap());
        assert_eq!(row["hosts"], 10, "{key}");
        assert_eq!(row["traces"], 100, "{key}");
        let w = &want[&key];
        for (k, v) in w {
            assert_eq!(row[k].as_u64(), Some(*v), "{key} {k}");
        }
        let causes = row
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.ends_with("_ns") && *k != "off_cpu_ns");
        assert_eq!(causes.count(), w.len() - 1, "{key}: {row}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

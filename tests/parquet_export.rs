//! `jtrace export --format parquet -o DIR`: DuckDB (PyPI `duckdb`, installed
//! into target/pydeps by scripts/test-python.sh) recomputes `jtrace report
//! --json`'s per-thread and per-method totals from the tables, exactly; a
//! missing -o or a symbolic link as the directory is a clear error.

use jtrace_testkit::synth;

mod common;

use common::python_script;
use std::path::PathBuf;
use std::process::Command;

fn jtrace() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jtrace"))
}

#[test]
fn duckdb_reproduces_the_report_from_the_parquet_tables() {
    let base = std::env::temp_dir().join(format!("jtrace-parquet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let trace = base.join("t.jtrace");
    synth::generate(&trace, 300_000, 8).unwrap();
    let tables = base.join("tables");
    // A small budget: the walk spills runs, the tables are the same.
    let out = Command::new(jtrace())
        .args(["export", "--format", "parquet", "--memory-budget", "1M", "-o"])
        .arg(&tables)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names: Vec<String> = std::fs::read_dir(&tables)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}: one file per table, no temporary left");
    let report = Command::new(jtrace())
        .args(["report", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(report.status.success());
    let report_file = base.join("report.json");
    std::fs::write(&report_file, &report.stdout).unwrap();

    let check = python_script(
        "timeline/tests/python/parquet_check.py",
        &[tables.as_os_str(), report_file.as_os_str()],
    );
    let got: serde_json::Value = serde_json::from_slice(&check).unwrap();
    assert_eq!(got["mismatches"], serde_json::json!([]), "{got}");
    assert!(got["threads"].as_u64().unwrap() >= 8, "{got}");
    assert!(got["thread_methods"].as_u64().unwrap() >= 50, "{got}");
    assert!(got["off_cpu_intervals"].as_u64().unwrap() > 10_000, "{got}");
    assert!(got["wakeups_with_waker_method"].as_u64().unwrap() > 1_000, "{got}");
    assert!(got["windows"].as_u64().unwrap() > 0, "{got}");

    // Bad input: no directory given; a symbolic link as the directory.
    let out = Command::new(jtrace())
        .args(["export", "--format", "parquet"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o DIR"));
    let link = base.join("link");
    std::os::unix::fs::symlink(&tables, &link).unwrap();
    let out = Command::new(jtrace())
        .args(["export", "--format", "parquet", "-o"])
        .arg(&link)
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    std::fs::remove_dir_all(&base).unwrap();
}

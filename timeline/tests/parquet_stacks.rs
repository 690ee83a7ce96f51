//! The Parquet export's stacks: an off-CPU interval whose switch-out
//! recorded stacks names them in `off_cpu_intervals.stack_id`, and the
//! `stacks` table holds each stack's frames, named as the collapsed export
//! names them (kernel frames from the trace's KSYM records, `_[k]`);
//! DuckDB joins the two (PyPI `duckdb`, installed into target/pydeps by
//! scripts/test-python.sh).

mod fixture;

use fixture::{Builder, MAIN, PID, WORKER};
use jtrace_merge::stream::StreamOptions;
use std::path::Path;

#[test]
fn off_cpu_intervals_name_their_stacks_and_duckdb_joins_their_frames() {
    let base = fixture::tempdir("parquet-stacks");
    let dir = base.join("t.jtrace");
    let mut b = Builder::default();
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "A", "run", "()V");
    b.thread_start(PID, MAIN, 1000, "main", "main");
    b.thread_start(PID, WORKER, 1000, "worker", "main");
    b.ksym(0xffff_0000, 0xffff_0100, "schedule");
    b.ksym(0xffff_0100, 0xffff_0200, "futex_wait");
    b.kernel_stack(7, &[0xffff_0010, 0xffff_0120]);
    b.switch_in(MAIN, 1000, 0);
    b.enter(MAIN, 2000, 1);
    b.switch_out_with_stack(MAIN, 3000, 0, 7);
    b.wakeup(MAIN, 5000, WORKER);
    b.switch_in(MAIN, 5500, 0);
    b.switch_out(MAIN, 6000, false, 0); // no stack recorded
    b.switch_in(MAIN, 7000, 0);
    b.exit(MAIN, 8000, 1);
    b.write(&dir, 1000, 9000);

    let tables = base.join("tables");
    jtrace_timeline::write_parquet(&dir, &tables, &StreamOptions::default()).unwrap();
    let setup = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-python.sh"))
        .status()
        .unwrap();
    assert!(setup.success());
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/parquet_stacks.py"))
        .arg(&tables)
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pydeps"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let main: Vec<&serde_json::Value> = (got.as_array().unwrap().iter()).filter(|r| r["tid"] == MAIN).collect();
    assert_eq!(main.len(), 2, "{got}");
    assert_eq!(main[0]["start_ns"], 3000);
    assert_eq!(main[0]["frames"], serde_json::json!(["schedule_[k]", "futex_wait_[k]"]));
    assert_eq!(main[0]["kinds"], serde_json::json!(["kernel", "kernel"]));
    assert!(main[0]["stack_id"].is_u64());
    assert_eq!(main[1]["start_ns"], 6000);
    assert!(main[1]["stack_id"].is_null(), "{}", main[1]);
    assert_eq!(main[1]["frames"], serde_json::json!([]));
    std::fs::remove_dir_all(&base).unwrap();
}

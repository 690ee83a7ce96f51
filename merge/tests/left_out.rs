//! A process left out at its exec (EXEC with `EXEC_LEFT_OUT`: it became
//! one the invoking user may not trace), on a hand-built trace written
//! with the real encoder: its thread ends there, and every view's list of
//! problems says which process was left out, when, and why.

use jtrace_format::{Payload, TaskInfo, EXEC_LEFT_OUT};
use jtrace_merge::{trace_problems, LeftOut, Trace};
use jtrace_testkit::TraceBuilder;

const MS: u64 = 1_000_000;

fn comm(name: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[..name.len()].copy_from_slice(name.as_bytes());
    c
}

#[test]
fn a_process_left_out_at_its_exec_ends_there_and_is_reported() {
    let dir = std::env::temp_dir().join(format!("jtrace-merge-left-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut b = TraceBuilder::default();
    // Process 300 runs sh, blocks, runs again and execs a setuid program.
    b.native_thread(300, 300, MS, "sh");
    b.switch_out(300, 2 * MS, false, 1);
    b.wakeup(300, 3 * MS, 0);
    b.switch_in(300, 3 * MS, 0);
    b.k(
        300,
        5 * MS,
        Payload::Exec(TaskInfo {
            tgid: 300,
            flags: EXEC_LEFT_OUT,
            comm: comm("passwd"),
        }),
    );
    // Its neighbour goes on.
    b.native_thread(400, 400, MS, "sleep");
    b.switch_out(400, 90 * MS, false, 1);
    b.write(&dir, 0, 100 * MS);

    let t = Trace::open(&dir).unwrap();
    assert_eq!(
        t.losses.left_out,
        [LeftOut {
            pid: 300,
            comm: "passwd".into(),
            ts: 5 * MS
        }]
    );
    assert_eq!(t.threads[&300].exited_ts, Some(5 * MS));
    assert_eq!(t.threads[&400].exited_ts, None);
    let problems = trace_problems(&t);
    assert!(
        problems.iter().any(
            |p| p.starts_with("process 300 was left out from its exec of \"passwd\" at +5.000 ms")
                && p.contains("may not trace it")
        ),
        "{problems:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

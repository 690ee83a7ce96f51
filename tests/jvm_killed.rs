//! A JVM traced under `jtrace run` and killed with SIGKILL mid-run: the
//! agent's memory-mapped stream must still read as a valid prefix holding
//! every method event drained before the kill, and the trace must say it is
//! incomplete. Needs root, as CI has.

mod common;

use common::*;
use jtrace_format::{FileHeader, FILE_HEADER_LEN, STREAM_COMPLETE};
use jtrace_merge::Trace;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Method events the probes keep in Java before a drain (Probe.CAPACITY / 2).
const PROBE_BUFFER_EVENTS: u64 = 4096;

#[test]
fn killed_jvm_leaves_a_readable_prefix() {
    let classes = classes();
    ensure_agent();
    for jdk in JDKS {
        let dir = tempdir("killed");
        let out = dir.join("killed.jtrace");
        let marker = dir.join("ready");
        let calls: u64 = 300_000;
        let mut child = Command::new(jtrace())
            .arg("run")
            .arg("-o")
            .arg(&out)
            .args(["--methods", "KilledMidRun.work", "--complete", "--"])
            .arg(java(jdk))
            .arg("-cp")
            .arg(&classes)
            .arg("KilledMidRun")
            .arg(calls.to_string())
            .arg(&marker)
            .stdout(Stdio::null())
            .spawn()
            .expect("start jtrace run");
        let start = Instant::now();
        while !marker.exists() {
            if start.elapsed() > Duration::from_secs(120) || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                panic!("{jdk}: the traced JVM never got ready");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&marker).unwrap();
        let pid: i32 = text.split_whitespace().next().unwrap().parse().unwrap();
        // SAFETY: plain syscall; pid is the JVM we started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "{jdk}: kill -9 {pid}");
        let st = child.wait().unwrap();
        eprintln!("{jdk}: jtrace run exited with {st}");

        // The stream was never closed: no complete flag, zero fill after the data.
        let stream = out.join(format!("{}{pid}.bin", jtrace_format::JVM_FILE_PREFIX));
        let data = std::fs::read(&stream).unwrap_or_else(|e| panic!("{jdk}: {}: {e}", stream.display()));
        let header = FileHeader::parse(&data).unwrap();
        assert_eq!(
            header.flags & STREAM_COMPLETE,
            0,
            "{jdk}: a killed JVM cannot have closed its stream"
        );
        let records = jtrace_format::Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("{jdk}: the prefix does not decode: {e}"));
        assert!(!records.is_empty());

        // `jtrace report` reads it, and says it is incomplete.
        let report = Command::new(jtrace()).arg("report").arg(&out).output().unwrap();
        let report_text = String::from_utf8_lossy(&report.stdout);
        assert!(
            report.status.success(),
            "{jdk}: jtrace report failed: {}",
            String::from_utf8_lossy(&report.stderr)
        );
        assert!(
            report_text.contains("JVM stream was not finished"),
            "{jdk}: report does not say the JVM stream is incomplete:\n{report_text}"
        );

        // Every full probe buffer was drained and appended before the kill:
        // all calls but at most the last buffer's are in the trace.
        let trace = Trace::open(&out).unwrap();
        assert!(
            trace.losses.truncated.iter().any(|p| p.contains("not finished")),
            "{jdk}: {:?}",
            trace.losses.truncated
        );
        let work = invocations(&trace)
            .into_iter()
            .filter(|(_, inv)| trace.methods[inv.method as usize].qualified() == "KilledMidRun.work")
            .count() as u64;
        eprintln!("{jdk}: {work} of {calls} KilledMidRun.work invocations in the trace");
        assert!(work <= calls, "{jdk}: {work} invocations of {calls} calls");
        assert!(
            work + PROBE_BUFFER_EVENTS / 2 >= calls,
            "{jdk}: only {work} of {calls} invocations survived the kill"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

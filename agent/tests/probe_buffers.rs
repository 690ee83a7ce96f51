//! The probes' per-thread buffers against the program's own clock (real
//! JVMs 11, 17, 21 and 25): two threads that share a slot of the probes' thread-id
//! cache and take turns, a gap longer than a 32-bit delta between two events
//! of one buffer, and buffers drained when full and at every park. Every
//! traced call must appear on its own thread, in order, inside the
//! System.nanoTime() readings the program took around it.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jtrace_format::{Payload, Record};

/// Calls per turn-taking thread: several full buffers (8184 events, 4092 calls).
const CALLS: usize = 10_000;
/// main's pause between its two calls: more than 2^32 ns (4.295 s).
const GAP_MS: u64 = 4_400;

fn classes() -> &'static Path {
    static CLS: OnceLock<PathBuf> = OnceLock::new();
    program(&CLS, "ProbeThreads.java")
}

/// The program's "CALL <thread> <k> <before> <after>" lines: thread -> [(before, after)].
fn printed_calls(stdout: &str) -> HashMap<String, Vec<(u64, u64)>> {
    let mut calls: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
    for l in stdout.lines().filter_map(|l| l.strip_prefix("CALL ")) {
        let f: Vec<&str> = l.split(' ').collect();
        let v = calls.entry(f[0].to_string()).or_default();
        assert_eq!(f[1].parse::<usize>().unwrap(), v.len(), "{l}");
        v.push((f[2].parse().unwrap(), f[3].parse().unwrap()));
    }
    calls
}

/// (is entry, ts) of every method event of `tid`, in stream order.
fn method_events(records: &[Record], tid: u32) -> Vec<(bool, u64)> {
    records
        .iter()
        .filter(|r| r.tid == tid)
        .filter_map(|r| match &r.payload {
            Payload::MethodEntry(_) => Some((true, r.ts)),
            Payload::MethodExit(e) => {
                assert_eq!(e.flags, 0, "tid {tid}: exceptional exit");
                Some((false, r.ts))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_call_is_on_its_thread_inside_the_programs_own_readings() {
    for java in jvms() {
        let j = java.display().to_string();
        let dir = scratch_dir("buffers");
        let out = dir.join("out");
        let conf = dir.join("agent.conf");
        // `sleep off`: main's pause records nothing, so its buffer is not
        // drained before the event after the gap.
        let lines = format!(
            "output {}\ninclude_method ProbeThreads step\nsleep off\n",
            out.display()
        );
        std::fs::write(&conf, lines).unwrap();
        let o = Command::new(&java)
            .arg(format!("-agentpath:{}={}", agent_so().display(), conf.display()))
            .arg("-cp")
            .arg(classes())
            .args(["ProbeThreads", &CALLS.to_string(), &GAP_MS.to_string()])
            .output()
            .expect("run java");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{j}: {}", String::from_utf8_lossy(&o.stderr));
        let ids: Vec<u64> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("IDS "))
            .expect("IDS line")
            .split(' ')
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(ids[0] % 1024, ids[1] % 1024, "{j}: the threads must share a slot");
        let records = read_stream(&out, &j).expect("a JVM stream");
        let tids: HashMap<String, u32> = records
            .iter()
            .filter_map(|r| match &r.payload {
                Payload::ThreadStart(t) => Some((t.name.clone(), r.tid)),
                _ => None,
            })
            .collect();
        let calls = printed_calls(&stdout);
        let main = &calls["main"];
        assert!(
            main[1].0 - main[0].1 > 1 << 32,
            "{j}: main's gap {} ns is not beyond a 32-bit delta",
            main[1].0 - main[0].1
        );
        for (name, want) in [("main", 2), ("slot-a", CALLS), ("slot-b", CALLS)] {
            let got = &calls[name];
            assert_eq!(got.len(), want, "{j}: {name}");
            let events = method_events(&records, tids[name]);
            assert_eq!(events.len(), 2 * want, "{j}: {name}: method events");
            for (k, (&(before, after), pair)) in got.iter().zip(events.chunks(2)).enumerate() {
                let ((entry, t0), (exit, t1)) = (pair[0], pair[1]);
                assert!(entry && !exit, "{j}: {name} call {k}: not an entry then an exit");
                assert!(
                    before <= t0 && t0 <= t1 && t1 <= after,
                    "{j}: {name} call {k}: entry {t0} / exit {t1} outside the program's [{before}, {after}]"
                );
            }
        }
    }
}

/// Method calls on virtual threads (JDK 21 and 25) are recorded under the
/// virtual thread's own record tid (VIRTUAL_THREAD_TID | its Java id),
/// whichever carrier ran them: every call of every virtual thread, none on
/// a carrier, and main's on main. The virtual threads' starts, ends,
/// mounts and unparks are recorded on their carriers (from the bytecode),
/// and no "not traced" message.
#[test]
fn virtual_thread_calls_are_recorded_on_the_virtual_thread() {
    let (threads, calls, on_main) = (200u64, 1000u64, 3000u64);
    // JDK 25's javac compiles the Java 21 source for both JVMs.
    let javac = Path::new("/usr/lib/jvm/temurin-25-jdk-amd64/bin/javac");
    let dir = scratch_dir("virtual");
    let st = Command::new(javac)
        .args(["--release", "21", "-d"])
        .arg(&dir)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java21/VirtualCalls.java"))
        .status()
        .expect("run javac");
    assert!(st.success());
    for java in [launcher(JDK21), launcher("/usr/lib/jvm/temurin-25-jdk-amd64")] {
        let j = java.display().to_string();
        let out = scratch_dir("virtual-out").join("out");
        let conf = dir.join("agent.conf");
        std::fs::write(
            &conf,
            format!("output {}\ninclude_method VirtualCalls step\n", out.display()),
        )
        .unwrap();
        let o = Command::new(&java)
            .arg(format!("-agentpath:{}={}", agent_so().display(), conf.display()))
            .arg("-cp")
            .arg(&dir)
            .args([
                "VirtualCalls",
                &threads.to_string(),
                &calls.to_string(),
                &on_main.to_string(),
            ])
            .output()
            .expect("run java");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{j}: {stderr}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("DONE"));
        assert!(!stderr.contains("jtrace agent"), "{j}: the agent complained: {stderr}");
        let records = read_stream(&out, &j).expect("a JVM stream");
        let main = records
            .iter()
            .find_map(|r| match &r.payload {
                Payload::ThreadStart(t) if t.name == "main" => Some(r.tid),
                _ => None,
            })
            .expect("main");
        let mut per_thread: HashMap<u32, usize> = HashMap::new();
        for r in &records {
            if matches!(r.payload, Payload::MethodEntry(_) | Payload::MethodExit(_)) {
                *per_thread.entry(r.tid).or_default() += 1;
            }
            if let Payload::AgentError(m) = &r.payload {
                panic!("{j}: agent error {m}");
            }
        }
        assert_eq!(
            per_thread.remove(&main),
            Some(2 * on_main as usize),
            "{j}: main's calls"
        );
        // The virtual threads' Java ids, from their starts on the carriers.
        let mut started: HashMap<u64, u32> = HashMap::new();
        let (mut mounts, mut unmounts, mut ends, mut unparks) = (0, 0, 0, 0);
        for r in &records {
            match &r.payload {
                Payload::Jvm(jtrace_format::kind::VTHREAD_START, b) => {
                    assert!(
                        jtrace_format::virtual_thread_id(r.tid).is_none(),
                        "{j}: START on a carrier"
                    );
                    started.insert(b.arg, r.tid);
                }
                Payload::Jvm(jtrace_format::kind::VTHREAD_MOUNT, _) => mounts += 1,
                Payload::Jvm(jtrace_format::kind::VTHREAD_UNMOUNT, _) => unmounts += 1,
                Payload::Jvm(jtrace_format::kind::VTHREAD_END, _) => ends += 1,
                Payload::Jvm(jtrace_format::kind::VTHREAD_UNPARK, _) => unparks += 1,
                _ => {}
            }
        }
        assert!(
            started.len() as u64 >= threads,
            "{j}: {} virtual thread starts",
            started.len()
        );
        assert!(ends as u64 >= threads, "{j}: {ends} ends");
        // Each virtual thread sleeps every 100 calls: it unmounts and mounts again.
        assert!(mounts as u64 >= threads * (calls / 100 - 1), "{j}: {mounts} mounts");
        // Followed from the bytecode: each mount (the first one just before
        // the START) ends in an UNMOUNT or, the last one, the END; every
        // wake-up after a sleep is an unpark.
        assert_eq!(
            mounts,
            unmounts + ends,
            "{j}: {mounts} mounts, {unmounts} unmounts, {} starts, {ends} ends",
            started.len()
        );
        assert!(unparks as u64 >= threads * (calls / 100 - 1), "{j}: {unparks} unparks");
        let mut workers = 0;
        for (tid, n) in per_thread {
            let id = jtrace_format::virtual_thread_id(tid)
                .unwrap_or_else(|| panic!("{j}: method events on kernel tid {tid} (a carrier?)"));
            assert!(
                started.contains_key(&id),
                "{j}: calls of virtual thread {id}, never started"
            );
            assert_eq!(n, 2 * calls as usize, "{j}: virtual thread {id}'s calls");
            workers += 1;
        }
        assert_eq!(workers, threads, "{j}: virtual threads with calls");
    }
}

//! End-to-end tests of the agent with real JVMs (JDK 17 and JDK 25).
//!
//! Each test builds `libjtrace_agent.so` (via cargo), compiles
//! `tests/java/Demo.java` once, runs it under `-agentpath:<so>=<config>` and
//! decodes the resulting `jvm-<pid>.bin` with `jtrace_format::Decoder`.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jtrace_format::{kind, Payload, Record, EXIT_BY_EXCEPTION};

/// Calls of each workload method per thread.
const N: usize = 1000;

/// Compiles the Java workload once (with the JDK 17 javac, so both JVMs can run it).
fn classes() -> &'static Path {
    static CLS: OnceLock<PathBuf> = OnceLock::new();
    program(&CLS, "Demo.java")
}

/// One JVM run under the agent.
struct Run {
    java: PathBuf,
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    /// Decoded records of jvm-<pid>.bin, empty if the file does not exist.
    records: Vec<Record>,
    /// Records of each kind as written (batches not expanded).
    kinds: HashMap<u16, usize>,
    conf: PathBuf,
}

impl Run {
    /// `TID <name> <tid>` lines printed by the workload.
    fn printed_tids(&self) -> HashMap<String, u32> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("TID "))
            .filter_map(|l| {
                let (name, tid) = l.rsplit_once(' ')?;
                Some((name.to_string(), tid.parse().ok()?))
            })
            .collect()
    }

    fn printed(&self, key: &str) -> u64 {
        let line = self
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} missing"));
        line.trim().parse().expect("number")
    }

    /// Method id -> "class.method" from the METHOD_DEF records.
    fn defs(&self) -> HashMap<u64, String> {
        let mut defs = HashMap::new();
        for r in &self.records {
            if let Payload::MethodDef(d) = &r.payload {
                let prev = defs.insert(d.method, format!("{}.{}", d.class, d.name));
                assert!(
                    prev.is_none(),
                    "{}: METHOD_DEF twice for {}",
                    self.java.display(),
                    d.method
                );
            }
        }
        defs
    }

    fn id_of(&self, name: &str) -> Option<u64> {
        self.defs().into_iter().find(|(_, n)| n == name).map(|(id, _)| id)
    }

    /// Thread name -> tid from THREAD_START records.
    fn thread_tids(&self) -> HashMap<String, u32> {
        self.records
            .iter()
            .filter_map(|r| match &r.payload {
                Payload::ThreadStart(t) => Some((t.name.clone(), r.tid)),
                _ => None,
            })
            .collect()
    }

    /// (entries, exits) of method `id`, optionally only on thread `tid`.
    fn count(&self, id: u64, tid: Option<u32>) -> (usize, usize) {
        let mut n = (0, 0);
        for r in self.records.iter().filter(|r| tid.is_none() || tid == Some(r.tid)) {
            match &r.payload {
                Payload::MethodEntry(e) if e.method == id => n.0 += 1,
                Payload::MethodExit(e) if e.method == id => n.1 += 1,
                _ => {}
            }
        }
        n
    }
}

fn run(java: &Path, conf_lines: &str, tag: &str) -> Run {
    let dir = scratch_dir(tag);
    let out = dir.join("out");
    let conf = dir.join("agent.conf");
    // tests/agent_jvmti.rs includes this file as module `jvmti_mechanism`: every
    // test then runs again with JVMTI MethodEntry/MethodExit events instead of
    // bytecode rewriting (appended, so configuration line numbers stay).
    let conf_lines = if module_path!().ends_with("jvmti_mechanism") {
        format!("{conf_lines}\nbytecode_rewriting off\n")
    } else {
        conf_lines.to_string()
    };
    std::fs::write(&conf, conf_lines.replace("$OUT", &out.to_string_lossy())).expect("write conf");
    let o = Command::new(java)
        .arg(format!("-agentpath:{}={}", agent_so().display(), conf.display()))
        .arg("-cp")
        .arg(classes())
        .args(["Demo", &N.to_string()])
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let records = read_stream(&out, &java.display().to_string()).unwrap_or_default();
    let kinds = stream_kinds(&out);
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        java: java.to_path_buf(),
        status: o.status,
        stdout,
        stderr,
        records,
        kinds,
        conf,
    }
}

/// Common checks of a well-formed trace: JVM_START first, JVM_END last with
/// no losses, METHOD_DEF before any use, entries/exits strictly nested per thread.
fn check_well_formed(r: &Run) {
    let j = r.java.display();
    assert!(r.status.success(), "{j}: java failed: {}\n{}", r.status, r.stderr);
    assert!(r.stdout.contains("RESULT"), "{j}: no RESULT in output");
    assert!(
        !r.stderr.contains("jtrace agent"),
        "{j}: agent complained: {}",
        r.stderr
    );
    match &r.records.first().map(|x| &x.payload) {
        Some(Payload::JvmStart(s)) => {
            assert_ne!(s.pid, 0);
            assert!(!s.vm_version.is_empty(), "{j}: empty vm version");
        }
        other => panic!("{j}: first record is {other:?}"),
    }
    match &r.records.last().map(|x| &x.payload) {
        Some(Payload::JvmEnd(e)) => assert_eq!(e.lost_events, 0, "{j}: lost events"),
        other => panic!("{j}: last record is {other:?}"),
    }
    // Bytecode rewriting writes method events as batches (8 bytes an event);
    // JVMTI method events (jmethodID ids) as one record each.
    let n = |k| r.kinds.get(&k).copied().unwrap_or(0);
    let (batches, singles) = (n(kind::METHOD_BATCH), n(kind::METHOD_ENTRY) + n(kind::METHOD_EXIT));
    let methods = r.records.iter().any(|x| matches!(x.payload, Payload::MethodEntry(_)));
    let (used, unused) = if module_path!().ends_with("jvmti_mechanism") {
        (singles, batches)
    } else {
        (batches, singles)
    };
    assert!(
        unused == 0 && (used > 0) == methods,
        "{j}: {batches} METHOD_BATCH and {singles} METHOD_ENTRY/EXIT records"
    );
    let mut defined = std::collections::HashSet::new();
    let mut stacks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut last_ts: HashMap<u32, u64> = HashMap::new();
    for rec in &r.records {
        if in_thread_order(&rec.payload) {
            let prev = last_ts.insert(rec.tid, rec.ts).unwrap_or(0);
            assert!(rec.ts >= prev, "{j}: time goes backwards on tid {}", rec.tid);
        }
        match &rec.payload {
            Payload::MethodDef(d) => {
                defined.insert(d.method);
            }
            Payload::MethodEntry(e) => {
                assert!(
                    defined.contains(&e.method),
                    "{j}: entry of {} before its METHOD_DEF",
                    e.method
                );
                stacks.entry(rec.tid).or_default().push(e.method);
            }
            Payload::MethodExit(e) => {
                let top = stacks.entry(rec.tid).or_default().pop();
                assert_eq!(
                    top,
                    Some(e.method),
                    "{j}: exit not matching innermost entry on tid {}",
                    rec.tid
                );
            }
            Payload::AgentError(m) => panic!("{j}: AGENT_ERROR {m}"),
            _ => {}
        }
    }
    for (tid, s) in &stacks {
        assert!(s.is_empty(), "{j}: tid {tid} ends with open methods {s:?}");
    }
}

const BASIC: &str = "# methods of the workload\noutput $OUT\n\n\
                     include_method Demo traced\ninclude_method Demo thrower\ninclude_method Demo catcher\n";

#[test]
fn traced_method_counts_and_nesting() {
    for java in jvms() {
        // `jit off` and `stacks off`: compiled code and interpreter frames
        // would also define untraced methods.
        let r = run(&java, &format!("{BASIC}jit off\nstacks off\n"), "counts");
        check_well_formed(&r);
        let j = java.display();
        let defs = r.defs();
        let mut names: Vec<&str> = defs.values().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, ["Demo.catcher", "Demo.thrower", "Demo.traced"], "{j}");
        let traced = r.id_of("Demo.traced").unwrap();
        assert_eq!(r.count(traced, None), (3 * N, 3 * N), "{j}");
        let tids = r.thread_tids();
        for t in ["main", "worker-0", "worker-1"] {
            assert_eq!(r.count(traced, Some(tids[t])), (N, N), "{j}: thread {t}");
        }
        // Nothing else: every entry/exit is of a defined (traced) method.
        let events = r
            .records
            .iter()
            .filter(|x| matches!(x.payload, Payload::MethodEntry(_) | Payload::MethodExit(_)))
            .count();
        assert_eq!(events, 2 * (3 * N + 2), "{j}");
    }
}

#[test]
fn exception_exit_is_flagged() {
    for java in jvms() {
        let r = run(&java, BASIC, "exception");
        check_well_formed(&r);
        let j = java.display();
        let catcher = r.id_of("Demo.catcher").unwrap();
        let thrower = r.id_of("Demo.thrower").unwrap();
        let seq: Vec<(bool, u64, u32)> = r
            .records
            .iter()
            .filter_map(|x| match &x.payload {
                Payload::MethodEntry(e) if e.method == catcher || e.method == thrower => {
                    Some((true, e.method, e.flags))
                }
                Payload::MethodExit(e) if e.method == catcher || e.method == thrower => {
                    Some((false, e.method, e.flags))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            seq,
            vec![
                (true, catcher, 0),
                (true, thrower, 0),
                (false, thrower, EXIT_BY_EXCEPTION),
                (false, catcher, 0)
            ],
            "{j}"
        );
        // Normal returns carry no flag.
        let traced = r.id_of("Demo.traced").unwrap();
        assert!(r.records.iter().all(|x| !matches!(&x.payload,
            Payload::MethodExit(e) if e.method == traced && e.flags != 0)));
    }
}

#[test]
fn thread_identities_are_kernel_tids() {
    for java in jvms() {
        let r = run(&java, BASIC, "threads");
        check_well_formed(&r);
        let j = java.display();
        let printed = r.printed_tids();
        let recorded = r.thread_tids();
        assert_eq!(printed.len(), 3, "{j}: {printed:?}");
        for (name, tid) in &printed {
            assert_eq!(
                recorded.get(name),
                Some(tid),
                "{j}: thread {name}: recorded {recorded:?}"
            );
        }
        // A kernel thread may carry several Java threads one after the other
        // (main ends, then the same thread attaches as "DestroyJavaVM"), but
        // never two at once: a second THREAD_START needs a THREAD_END between.
        let mut live: HashMap<u32, String> = HashMap::new();
        for rec in &r.records {
            match &rec.payload {
                Payload::ThreadStart(t) => {
                    if let Some(other) = live.insert(rec.tid, t.name.clone()) {
                        panic!("{j}: tid {} is both {other} and {}", rec.tid, t.name);
                    }
                }
                Payload::ThreadEnd => {
                    live.remove(&rec.tid);
                }
                _ => {}
            }
        }
        let mut workload: Vec<u32> = printed.values().copied().collect();
        workload.sort();
        workload.dedup();
        assert_eq!(workload.len(), 3, "{j}: duplicate tids {printed:?}");
        for rec in &r.records {
            if let Payload::ThreadStart(t) = &rec.payload {
                if t.name.starts_with("worker-") {
                    assert_eq!(t.daemon, 0);
                    assert_eq!(t.group, "main", "{j}");
                }
            }
        }
        // Workers end before the JVM does: each has exactly one THREAD_END.
        for w in ["worker-0", "worker-1"] {
            let ends = r
                .records
                .iter()
                .filter(|x| x.tid == recorded[w] && matches!(x.payload, Payload::ThreadEnd))
                .count();
            assert_eq!(ends, 1, "{j}: THREAD_END of {w}");
        }
    }
}

/// Java threads started before VMInit get no ThreadStart event; the agent
/// names them at VMInit (GetAllThreads, matched to the kernel tasks by
/// name), once each.
#[test]
fn threads_started_before_vminit_are_named() {
    for java in jvms() {
        let r = run(&java, BASIC, "early-threads");
        check_well_formed(&r);
        let j = java.display();
        let recorded = r.thread_tids();
        let mut tids = Vec::new();
        for name in ["Reference Handler", "Finalizer", "Signal Dispatcher"] {
            let tid = recorded.get(name).copied();
            assert!(
                tid.is_some_and(|t| t > 0),
                "{j}: no THREAD_START for {name}: {recorded:?}"
            );
            tids.extend(tid);
        }
        let starts = |t: u32| {
            r.records
                .iter()
                .filter(|x| x.tid == t && matches!(x.payload, Payload::ThreadStart(_)))
                .count()
        };
        for t in &tids {
            assert_eq!(starts(*t), 1, "{j}: tid {t} named more than once");
        }
        tids.sort();
        tids.dedup();
        assert_eq!(tids.len(), 3, "{j}: {recorded:?}");
        assert!(!tids.contains(&recorded["main"]), "{j}: {recorded:?}");
    }
}

#[test]
fn timestamps_are_clock_monotonic() {
    for java in jvms() {
        let r = run(&java, BASIC, "clock");
        check_well_formed(&r);
        let j = java.display();
        let (t0, t1) = (r.printed("T0 "), r.printed("T1 "));
        let main = r.thread_tids()["main"];
        let traced = r.id_of("Demo.traced").unwrap();
        let start = r.records[0].ts;
        assert!(start < t0, "{j}: JVM_START {start} not before T0 {t0}");
        let ts: Vec<u64> = r
            .records
            .iter()
            .filter(|x| x.tid == main && matches!(&x.payload, Payload::MethodEntry(e) if e.method == traced))
            .map(|x| x.ts)
            .collect();
        assert_eq!(ts.len(), N);
        assert!(
            ts.iter().all(|&t| t0 < t && t < t1),
            "{j}: method events outside [T0, T1] = [{t0}, {t1}]"
        );
        let end = r.records.last().unwrap().ts;
        assert!(end > t1, "{j}: JVM_END {end} not after T1 {t1}");
    }
}

#[test]
fn malformed_config_runs_untraced() {
    for java in jvms() {
        let conf = "output $OUT\ninclude_method Demo traced\nbogus_directive 1\nmonitor_waiting maybe\n";
        let r = run(&java, conf, "malformed");
        let j = java.display();
        assert!(r.status.success(), "{j}: {}", r.status);
        assert!(r.stdout.contains("RESULT 4498500 caught=1"), "{j}: {}", r.stdout);
        let want3 = format!(
            "jtrace agent: {}:3: unknown directive `bogus_directive`",
            r.conf.display()
        );
        assert!(r.stderr.contains(&want3), "{j}: stderr: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("{}:4: ", r.conf.display())),
            "{j}: stderr: {}",
            r.stderr
        );
        let errors: Vec<&str> = r
            .records
            .iter()
            .filter_map(|x| match &x.payload {
                Payload::AgentError(m) => Some(m.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(errors.len(), 2, "{j}: {:?}", r.records);
        assert!(want3.ends_with(errors[0]), "{j}: {errors:?}");
        // Nothing traced: the errors, then the end record of a finished stream.
        assert!(
            r.records
                .iter()
                .all(|x| matches!(x.payload, Payload::AgentError(_) | Payload::JvmEnd(_))),
            "{j}: traced anyway"
        );
        assert!(
            matches!(r.records.last().map(|x| &x.payload), Some(Payload::JvmEnd(_))),
            "{j}: {:?}",
            r.records
        );
    }
}

#[test]
fn missing_config_runs_untraced() {
    for java in jvms() {
        let o = Command::new(&java)
            .arg(format!(
                "-agentpath:{}=config=/nonexistent/jtrace.conf",
                agent_so().display()
            ))
            .arg("-cp")
            .arg(classes())
            .args(["Demo", "10"])
            .output()
            .expect("run java");
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{}: {}", java.display(), o.status);
        assert!(out.contains("RESULT"), "{out}");
        assert!(
            err.contains("jtrace agent: /nonexistent/jtrace.conf: cannot read configuration"),
            "{err}"
        );
    }
}

#[test]
fn first_matching_rule_wins() {
    for java in jvms() {
        let j = java.display();
        // Exclude before a broader include: the exclude wins.
        let r = run(
            &java,
            "output $OUT\nexclude_method Demo untraced\ninclude_method Demo.*\njit off\nstacks off\n",
            "exclude-first",
        );
        check_well_formed(&r);
        assert!(r.id_of("Demo.untraced").is_none(), "{j}");
        assert_eq!(r.count(r.id_of("Demo.traced").unwrap(), None), (3 * N, 3 * N), "{j}");
        assert_eq!(r.count(r.id_of("Demo.main").unwrap(), None), (1, 1), "{j}");
        // The same rules the other way round: the include wins.
        let r = run(
            &java,
            "output $OUT\ninclude_method Demo.*\nexclude_method Demo untraced\n",
            "include-first",
        );
        check_well_formed(&r);
        assert_eq!(r.count(r.id_of("Demo.untraced").unwrap(), None), (3 * N, 3 * N), "{j}");
    }
}

#[test]
fn split_patterns_and_thread_rules() {
    for java in jvms() {
        let j = java.display();
        // `stacks off`: the code records stacks need are written by
        // whichever thread loads the code, excluded or not.
        let conf = "output $OUT\nexclude_thread worker-1\nstacks off\n\
                    include_method Demo$* run\ninclude_method Demo traced\n";
        let r = run(&java, conf, "threads-rules");
        check_well_formed(&r);
        let tids = r.thread_tids();
        assert!(
            tids.contains_key("main") && tids.contains_key("worker-0"),
            "{j}: {tids:?}"
        );
        assert!(!tids.contains_key("worker-1"), "{j}: excluded thread recorded");
        let w1 = r.printed_tids()["worker-1"];
        assert!(r.records.iter().all(|x| x.tid != w1), "{j}: records of excluded thread");
        // Demo$Worker.run on worker-0 only; traced on main and worker-0.
        assert_eq!(
            r.defs().get(&r.id_of("Demo$Worker.run").unwrap()).map(String::as_str),
            Some("Demo$Worker.run")
        );
        assert_eq!(r.count(r.id_of("Demo$Worker.run").unwrap(), None), (1, 1), "{j}");
        assert_eq!(r.count(r.id_of("Demo.traced").unwrap(), None), (2 * N, 2 * N), "{j}");
    }
}

#[test]
fn method_invocation_off_records_no_methods() {
    for java in jvms() {
        let r = run(
            &java,
            "output $OUT\nmethod_invocation off\ninclude_method *\njit off\nstacks off\n",
            "mi-off",
        );
        check_well_formed(&r);
        assert!(r.defs().is_empty(), "{}", java.display());
        assert!(r.thread_tids().contains_key("main"));
    }
}

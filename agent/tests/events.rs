//! End-to-end tests of the agent's off-CPU events (monitor contention,
//! Object.wait, park, sleep, GC, JIT code, sampled allocations) with real
//! JVMs (JDK 11, 17, 21 and 25) and no method rules, so no method events.
//!
//! `tests/java/Events.java` is the ground truth: each scenario runs on a
//! named thread that prints its kernel tid and `System.nanoTime()` marks
//! (CLOCK_MONOTONIC, the trace's clock) around what it does.
//!
//! JVM runs are serialised (one at a time) so the timing assertions are not
//! disturbed by other tests' JVMs on small machines.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use jtrace_format::{kind, AllocSample, Payload, Record};

const MS: u64 = 1_000_000;
/// Tolerance of the ~100 ms ground-truth intervals.
const SLACK: u64 = 30 * MS;

fn classes() -> &'static Path {
    static CLS: OnceLock<PathBuf> = OnceLock::new();
    program(&CLS, "Events.java")
}

struct Run {
    java: PathBuf,
    stdout: String,
    records: Vec<Record>,
}

impl Run {
    fn name(&self) -> String {
        self.java.display().to_string()
    }

    fn tid(&self, thread: &str) -> u32 {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("TID "))
            .find_map(|l| {
                let (n, t) = l.rsplit_once(' ')?;
                (n == thread).then(|| t.parse().ok())?
            })
            .unwrap_or_else(|| panic!("{}: no TID line for {thread}", self.name()))
    }

    fn mark(&self, label: &str) -> u64 {
        self.printed("MARK", label)
    }

    fn printed(&self, what: &str, label: &str) -> u64 {
        let prefix = format!("{what} {label} ");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{}: no `{prefix}` line", self.name()))
            .trim()
            .parse()
            .expect("number")
    }

    /// (ts, arg, class) of the JVM records of kind `k` on `tid`.
    fn jvm(&self, tid: u32, k: u16) -> Vec<(u64, u64, String)> {
        self.records
            .iter()
            .filter(|r| r.tid == tid)
            .filter_map(|r| match &r.payload {
                Payload::Jvm(x, b) if *x == k => Some((r.ts, b.arg, b.class.clone())),
                _ => None,
            })
            .collect()
    }

    /// The allocation samples of thread `tid`.
    fn allocs(&self, tid: u32) -> Vec<AllocSample> {
        self.records
            .iter()
            .filter(|r| r.tid == tid)
            .filter_map(|r| match &r.payload {
                Payload::Alloc(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    fn count_kind(&self, k: u16) -> usize {
        self.records.iter().filter(|r| kind_of(&r.payload) == k).count()
    }

    fn defs(&self) -> HashMap<u64, String> {
        self.records
            .iter()
            .filter_map(|r| match &r.payload {
                Payload::MethodDef(d) => Some((d.method, format!("{}.{}{}", d.class, d.name, d.signature))),
                _ => None,
            })
            .collect()
    }
}

fn kind_of(p: &Payload) -> u16 {
    match p {
        Payload::Jvm(k, _) => *k,
        Payload::Alloc(_) => kind::ALLOC_SAMPLE,
        Payload::Compiled(true, _) => kind::COMPILED_METHOD_LOAD,
        Payload::Compiled(false, _) => kind::COMPILED_METHOD_UNLOAD,
        Payload::MethodDef(_) => kind::METHOD_DEF,
        Payload::MethodEntry(_) => kind::METHOD_ENTRY,
        Payload::MethodExit(_) => kind::METHOD_EXIT,
        Payload::ThreadStart(_) => kind::THREAD_START,
        Payload::ThreadEnd => kind::THREAD_END,
        Payload::JvmStart(_) => kind::JVM_START,
        Payload::JvmEnd(_) => kind::JVM_END,
        Payload::AgentError(_) => kind::AGENT_ERROR,
        Payload::CodeBlob(_) => kind::CODE_BLOB,
        Payload::CompiledInline(_) => kind::COMPILED_INLINE,
        Payload::MethodAddrs(_) => kind::METHOD_ADDRS,
        Payload::NativeBind(_) => kind::NATIVE_BIND,
        _ => 0,
    }
}

/// One JVM at a time (see the module doc).
static JVM_LOCK: Mutex<()> = Mutex::new(());

fn run(java: &Path, conf_lines: &str, args: &[&str], tag: &str) -> Run {
    let dir = scratch_dir(tag);
    let out = dir.join("out");
    let conf = dir.join("agent.conf");
    std::fs::write(&conf, format!("output {}\n{conf_lines}", out.display())).expect("write conf");
    let o = {
        let _one = JVM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        Command::new(java)
            .arg(format!("-agentpath:{}={}", agent_so().display(), conf.display()))
            .arg("-cp")
            .arg(classes())
            .arg("Events")
            .args(args)
            .output()
            .expect("run java")
    };
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let j = java.display();
    assert!(o.status.success(), "{j}: java failed: {}\n{stderr}", o.status);
    assert!(stdout.contains("DONE"), "{j}: no DONE:\n{stdout}");
    assert!(!stderr.contains("jtrace agent"), "{j}: agent complained: {stderr}");
    // The agent must not make the JVM print anything into the program's
    // output (RegisterNatives on java.base would: "Re-registering …").
    for l in stdout.lines().chain(stderr.lines()) {
        assert!(
            !l.contains("[warning]") && !l.contains("Re-registering"),
            "{j}: JVM warning: {l}"
        );
    }
    let records = read_stream(&out, &j.to_string()).unwrap_or_else(|| panic!("{j}: no trace written"));
    let _ = std::fs::remove_dir_all(&dir);
    let r = Run {
        java: java.to_path_buf(),
        stdout,
        records,
    };
    check_well_formed(&r);
    r
}

/// JVM_START first, JVM_END last without losses, no AGENT_ERROR, per-thread
/// time order, METHOD_DEF before use, THREAD_START as the first record of
/// every Java thread that has one, BEGIN/END kinds alternating per thread.
fn check_well_formed(r: &Run) {
    let j = r.name();
    assert!(
        matches!(r.records.first().map(|x| &x.payload), Some(Payload::JvmStart(_))),
        "{j}: first record"
    );
    match r.records.last().map(|x| &x.payload) {
        Some(Payload::JvmEnd(e)) => assert_eq!(e.lost_events, 0, "{j}: lost events"),
        other => panic!("{j}: last record is {other:?}"),
    }
    let started: std::collections::HashSet<u32> = r
        .records
        .iter()
        .filter(|x| matches!(x.payload, Payload::ThreadStart(_)))
        .map(|x| x.tid)
        .collect();
    let mut defined = std::collections::HashSet::new();
    let mut last_ts: HashMap<u32, u64> = HashMap::new();
    let mut seen: std::collections::HashSet<u32> = std::collections::HashSet::new();
    // Open BEGIN kind per (tid, pair).
    let mut open: HashMap<(u32, u16), u64> = HashMap::new();
    for rec in &r.records {
        let k = kind_of(&rec.payload);
        if let Payload::AgentError(m) = &rec.payload {
            panic!("{j}: AGENT_ERROR {m}");
        }
        if k == kind::METHOD_DEF {
            if let Payload::MethodDef(d) = &rec.payload {
                assert!(defined.insert(d.method), "{j}: METHOD_DEF twice for {}", d.method);
            }
            continue;
        }
        if k == kind::JVM_START || k == kind::JVM_END {
            continue;
        }
        if !in_thread_order(&rec.payload) {
            continue;
        }
        let prev = last_ts.insert(rec.tid, rec.ts).unwrap_or(0);
        assert!(rec.ts >= prev, "{j}: time goes backwards on tid {}", rec.tid);
        if started.contains(&rec.tid) && seen.insert(rec.tid) {
            assert_eq!(
                k,
                kind::THREAD_START,
                "{j}: tid {} has {k} before THREAD_START",
                rec.tid
            );
        }
        if let Payload::Compiled(_, c) = &rec.payload {
            if k == kind::COMPILED_METHOD_LOAD {
                assert!(
                    defined.contains(&c.method),
                    "{j}: code of {} before its METHOD_DEF",
                    c.method
                );
                assert!(c.code_addr != 0 && c.code_size > 0, "{j}: empty code range {c:?}");
            }
        }
        let pair = match k {
            kind::MONITOR_CONTENDED_ENTER | kind::MONITOR_CONTENDED_ENTERED => Some((kind::MONITOR_CONTENDED_ENTER, k)),
            kind::MONITOR_WAIT | kind::MONITOR_WAITED => Some((kind::MONITOR_WAIT, k)),
            kind::PARK_BEGIN | kind::PARK_END => Some((kind::PARK_BEGIN, k)),
            kind::SLEEP_BEGIN | kind::SLEEP_END => Some((kind::SLEEP_BEGIN, k)),
            kind::GC_START | kind::GC_END => Some((kind::GC_START, k)),
            _ => None,
        };
        if let Some((first, k)) = pair {
            let is_begin = k == first;
            let was_open = open.contains_key(&(rec.tid, first));
            assert_eq!(
                is_begin,
                !was_open,
                "{j}: kind {k} on tid {} out of BEGIN/END alternation: {rec:?}; that thread: {:?}",
                rec.tid,
                r.records
                    .iter()
                    .filter(|x| x.tid == rec.tid && x.ts <= rec.ts)
                    .rev()
                    .take(6)
                    .collect::<Vec<_>>()
            );
            if is_begin {
                open.insert((rec.tid, first), rec.ts);
            } else {
                open.remove(&(rec.tid, first));
            }
        }
    }
}

/// The "all" scenario, run once per JDK and shared by the tests below.
fn all_runs() -> &'static Vec<Run> {
    static RUNS: OnceLock<Vec<Run>> = OnceLock::new();
    RUNS.get_or_init(|| {
        jvms()
            .iter()
            .map(|j| run(j, "object_allocation on\n", &["all"], "all"))
            .collect()
    })
}

/// (begin ts, end ts, begin arg, begin class, end arg) of the BEGIN/END pairs on a thread.
fn pairs(r: &Run, tid: u32, b: u16, e: u16) -> Vec<(u64, u64, u64, String, u64)> {
    let begins = r.jvm(tid, b);
    let ends = r.jvm(tid, e);
    assert_eq!(begins.len(), ends.len(), "{}: {b}/{e} unbalanced on {tid}", r.name());
    begins
        .into_iter()
        .zip(ends)
        .map(|((t0, a0, c0), (t1, a1, _))| {
            assert!(t1 >= t0, "{}: END before BEGIN", r.name());
            (t0, t1, a0, c0, a1)
        })
        .collect()
}

fn near(d: u64, want: u64) -> bool {
    d + SLACK >= want && d <= want + SLACK
}

#[test]
fn no_method_events_without_method_rules() {
    for r in all_runs() {
        assert_eq!(r.count_kind(kind::METHOD_ENTRY), 0, "{}", r.name());
        assert_eq!(r.count_kind(kind::METHOD_EXIT), 0, "{}", r.name());
    }
}

#[test]
fn contended_monitor_enter() {
    for r in all_runs() {
        let j = r.name();
        let tid = r.tid("mon-blocked");
        let p: Vec<_> = pairs(r, tid, kind::MONITOR_CONTENDED_ENTER, kind::MONITOR_CONTENDED_ENTERED)
            .into_iter()
            .filter(|x| x.3 == "Events$MonitorLock")
            .collect();
        assert_eq!(p.len(), 1, "{j}: {p:?}");
        let (t0, t1, arg, _, _) = p[0];
        assert_eq!(arg, 0);
        // The holder holds the monitor 100 ms from when it sees the thread
        // blocked on it ("mon-hold") to "mon-release": the contention spans
        // that hold, and at most from the thread's try to the release (more
        // before the hold when the machine is loaded).
        let hold = r.mark("mon-release") - r.mark("mon-hold");
        let most = r.mark("mon-release") - r.mark("mon-contend");
        // Up to JDK 14 biased locking is on: the first contention on an
        // object biased toward its holder revokes the bias (at safepoints)
        // before the JVM reports the contention, so ENTER may come late.
        let biased = feature_version(&r.java) < 15;
        assert!(
            (t1 - t0 + SLACK >= hold || biased) && t1 - t0 <= most + SLACK,
            "{j}: contended {} ms, the program held {} ms of {} ms",
            (t1 - t0) / MS,
            hold / MS,
            most / MS
        );
        assert!(t0 >= r.mark("mon-contend"), "{j}: ENTER before the thread tried");
        assert!(
            t1 >= r.mark("mon-release") - 1,
            "{j}: ENTERED before the holder released"
        );
        assert!(t1 <= r.mark("mon-entered"), "{j}: ENTERED after the thread went on");
        // The ENTERED record names the monitor class too, and nobody else contended on it.
        assert_eq!(
            r.jvm(tid, kind::MONITOR_CONTENDED_ENTERED)
                .iter()
                .filter(|x| x.2 == "Events$MonitorLock")
                .count(),
            1
        );
        let all = r
            .records
            .iter()
            .filter(|x| matches!(&x.payload, Payload::Jvm(k, b) if *k == kind::MONITOR_CONTENDED_ENTER && b.class == "Events$MonitorLock"))
            .count();
        assert_eq!(all, 1, "{j}: other threads contended on the monitor");
    }
}

#[test]
fn object_wait_notified_and_timed_out() {
    for r in all_runs() {
        let j = r.name();
        let tid = r.tid("waiter");
        let p = pairs(r, tid, kind::MONITOR_WAIT, kind::MONITOR_WAITED);
        let w: Vec<_> = p.iter().filter(|x| x.3 == "Events$WaitLock").collect();
        assert_eq!(w.len(), 1, "{j}: {p:?}");
        let (t0, t1, timeout, _, timed_out) = w[0].clone();
        assert_eq!((timeout, timed_out), (0, 0), "{j}");
        assert!(near(t1 - t0, 100 * MS), "{j}: waited {} ms", (t1 - t0) / MS);
        assert!(t0 >= r.mark("wait-begin") && t1 <= r.mark("wait-end"), "{j}");

        let tid = r.tid("timed-waiter");
        let p = pairs(r, tid, kind::MONITOR_WAIT, kind::MONITOR_WAITED);
        let w: Vec<_> = p.iter().filter(|x| x.3 == "Events$TimedLock").collect();
        assert_eq!(w.len(), 1, "{j}: {p:?}");
        let (t0, t1, timeout, _, timed_out) = w[0].clone();
        assert_eq!((timeout, timed_out), (50, 1), "{j}");
        assert!(
            t1 - t0 >= 49 * MS && t1 - t0 <= 50 * MS + SLACK,
            "{j}: {} ms",
            (t1 - t0) / MS
        );
    }
}

#[test]
fn park_nanos() {
    for r in all_runs() {
        let j = r.name();
        let p = pairs(r, r.tid("parker"), kind::PARK_BEGIN, kind::PARK_END);
        assert_eq!(p.len(), 1, "{j}: {p:?}");
        let (t0, t1, arg, class, _) = p[0].clone();
        assert_eq!(arg, 100 * MS, "{j}: park time");
        assert_eq!(class, "", "{j}: parkNanos(nanos) has no blocker");
        assert!(near(t1 - t0, 100 * MS), "{j}: parked {} ms", (t1 - t0) / MS);
        assert!(t0 >= r.mark("park-begin") && t1 <= r.mark("park-end"), "{j}");
    }
}

#[test]
fn reentrant_lock_contention_parks() {
    for r in all_runs() {
        let j = r.name();
        let (lock, locked) = (r.mark("rl-lock"), r.mark("rl-locked"));
        let p = pairs(r, r.tid("rl-blocked"), kind::PARK_BEGIN, kind::PARK_END);
        let in_lock: Vec<_> = p.iter().filter(|x| x.0 >= lock && x.1 <= locked).collect();
        assert!(!in_lock.is_empty(), "{j}: no park while blocked on the lock: {p:?}");
        for x in &in_lock {
            assert_eq!(
                x.3, "java.util.concurrent.locks.ReentrantLock$NonfairSync",
                "{j}: blocker"
            );
            assert_eq!(x.2, 0, "{j}: lock() parks without timeout");
        }
        let parked: u64 = in_lock.iter().map(|x| x.1 - x.0).sum();
        assert!(near(parked, 100 * MS), "{j}: parked {} ms", parked / MS);
    }
}

#[test]
fn thread_sleep() {
    for r in all_runs() {
        let j = r.name();
        let p = pairs(r, r.tid("sleeper"), kind::SLEEP_BEGIN, kind::SLEEP_END);
        assert_eq!(p.len(), 1, "{j}: {p:?}");
        let (t0, t1, ms, class, _) = p[0].clone();
        assert_eq!((ms, class.as_str()), (100, ""), "{j}");
        assert!(
            t1 - t0 >= 100 * MS && t1 - t0 <= 100 * MS + SLACK,
            "{j}: slept {} ms",
            (t1 - t0) / MS
        );
        assert!(t0 >= r.mark("sleep-begin") && t1 <= r.mark("sleep-end"), "{j}");
    }
}

#[test]
fn compiled_park_loop_is_not_bypassed() {
    for r in all_runs() {
        let j = r.name();
        assert_eq!(r.printed("COUNT", "hot-parks"), 30_000, "{j}");
        let tid = r.tid("hot-parker");
        let p = pairs(r, tid, kind::PARK_BEGIN, kind::PARK_END);
        assert_eq!(p.len(), 30_000, "{j}: park pairs of the hot loop");
        assert!(p.iter().all(|x| x.2 == 1), "{j}: parkNanos(1)");
        // The loop was compiled twice (C1, then C2 with parkNanos inlined) and
        // thousands of parks were still recorded after the last compilation.
        let defs = r.defs();
        let loads: Vec<u64> = r
            .records
            .iter()
            .filter_map(|x| match &x.payload {
                Payload::Compiled(true, c)
                    if defs.get(&c.method).map(String::as_str) == Some("Events.hotParks(I)I") =>
                {
                    Some(x.ts)
                }
                _ => None,
            })
            .collect();
        assert!(loads.len() >= 2, "{j}: hotParks compiled {} times", loads.len());
        let last = *loads.iter().max().unwrap();
        let after = p.iter().filter(|x| x.0 > last).count();
        assert!(
            after >= 5_000,
            "{j}: only {after} parks after the last compilation of the loop"
        );
    }
}

#[test]
fn system_gc() {
    for r in all_runs() {
        let j = r.name();
        let (b, e) = (r.mark("gc-begin"), r.mark("gc-end"));
        let gc_tids: std::collections::HashSet<u32> = r
            .records
            .iter()
            .filter(|x| matches!(&x.payload, Payload::Jvm(k, _) if *k == kind::GC_START))
            .map(|x| x.tid)
            .collect();
        let mut inside = 0;
        for tid in gc_tids {
            for (t0, t1, ..) in pairs(r, tid, kind::GC_START, kind::GC_END) {
                assert!(t1 > t0, "{j}");
                if t0 >= b && t1 <= e {
                    inside += 1;
                }
            }
        }
        assert!(inside >= 1, "{j}: no GC_START/GC_END pair inside System.gc()");
    }
}

#[test]
fn hot_method_gets_compiled_method_load_with_def() {
    for r in all_runs() {
        let j = r.name();
        let defs = r.defs();
        let id = defs
            .iter()
            .find(|(_, n)| n.as_str() == "Events.hot(J)J")
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("{j}: no METHOD_DEF for Events.hot"));
        let loads: Vec<_> = r
            .records
            .iter()
            .filter_map(|x| match &x.payload {
                Payload::Compiled(true, c) if c.method == id => Some(*c),
                _ => None,
            })
            .collect();
        assert!(!loads.is_empty(), "{j}: Events.hot never compiled");
        // Many methods compiled overall, each with a name.
        let all = r.count_kind(kind::COMPILED_METHOD_LOAD);
        assert!(all >= 50, "{j}: only {all} compiled methods");
    }
}

#[test]
fn allocation_samples() {
    for r in all_runs() {
        let j = r.name();
        let tid = r.tid("allocator");
        let allocs = r.allocs(tid);
        let samples: Vec<(u64, u64, String)> = allocs.iter().map(|a| (0, a.size, a.class.clone())).collect();
        // ~30 MB allocated with a 512 KiB mean interval: ~60 samples expected.
        assert!(samples.len() >= 15, "{j}: {} samples", samples.len());
        // The site: the allocating lambda of Events.alloc (the lines its
        // "alloc-site" comment names), also for the arrays ArrayList.add
        // grows (JDK frames are skipped).
        let source = include_str!("java/Events.java");
        let first = 1 + source.lines().position(|l| l.contains("// alloc-site")).unwrap() as i32;
        let site = first..=first + 5;
        let names = r.defs();
        let at_site = allocs
            .iter()
            .filter(|a| {
                names
                    .get(&a.method)
                    .is_some_and(|n| n.starts_with("Events.lambda$alloc"))
                    && site.contains(&a.line)
            })
            .count();
        assert!(
            at_site * 10 >= allocs.len() * 9,
            "{j}: {at_site} of {} samples at the site: {:?}",
            allocs.len(),
            allocs
                .iter()
                .map(|a| (names.get(&a.method), a.line, &a.class))
                .collect::<Vec<_>>()
        );
        let plausible = |c: &str| {
            c.starts_with('[')
                || (!c.is_empty()
                    && c.split(['.', '$'])
                        .all(|p| !p.is_empty() && p.chars().all(|ch| ch.is_alphanumeric() || ch == '_')))
        };
        for (_, size, class) in &samples {
            assert!(plausible(class), "{j}: class {class:?}");
            assert!(*size >= 16 && *size < 1 << 20, "{j}: size {size} of {class}");
        }
        let blob = samples.iter().filter(|s| s.2 == "Events$Blob").count();
        let bytes = samples.iter().filter(|s| s.2 == "[B").count();
        assert!(blob > 0 && bytes > 0, "{j}: {samples:?}");
        assert!(
            samples.iter().any(|s| s.2 == "[B" && s.1 >= 100 && s.1 <= 128),
            "{j}: byte[100] size"
        );
    }
}

#[test]
fn directives_switch_events_off() {
    for java in jvms() {
        let conf = "monitor_contention off\nmonitor_waiting off\ngarbage_collection off\n\
                    park off\nsleep off\njit off\nstacks off\n";
        let r = run(
            &java,
            conf,
            &["monitor", "waits", "park", "reentrant", "sleep", "gc", "alloc"],
            "off",
        );
        for k in kind::MONITOR_CONTENDED_ENTER..=kind::ALLOC_SAMPLE {
            assert_eq!(r.count_kind(k), 0, "{}: kind {k} recorded although off", r.name());
        }
        assert_eq!(r.count_kind(kind::METHOD_DEF), 0, "{}", r.name());
        for k in [kind::CODE_BLOB, kind::COMPILED_INLINE, kind::METHOD_ADDRS] {
            assert_eq!(r.count_kind(k), 0, "{}: kind {k} recorded although off", r.name());
        }
        // Defaults: everything but allocation sampling.
        let r = run(&java, "", &["waits", "park", "sleep", "gc", "alloc"], "defaults");
        for k in [
            kind::MONITOR_WAIT,
            kind::PARK_BEGIN,
            kind::SLEEP_BEGIN,
            kind::GC_START,
            kind::COMPILED_METHOD_LOAD,
            kind::CODE_BLOB,
            kind::COMPILED_INLINE,
        ] {
            assert!(r.count_kind(k) > 0, "{}: kind {k} not recorded by default", r.name());
        }
        assert_eq!(r.count_kind(kind::ALLOC_SAMPLE), 0, "{}", r.name());
    }
}

#[test]
fn parks_nest_inside_traced_methods() {
    for java in jvms() {
        let r = run(&java, "include_method Events hotParks\n", &["hotpark"], "with-methods");
        let j = r.name();
        let tid = r.tid("hot-parker");
        let id = *r
            .defs()
            .iter()
            .find(|(_, n)| n.as_str() == "Events.hotParks(I)I")
            .unwrap_or_else(|| panic!("{j}: no def"))
            .0;
        let mut depth = 0;
        let mut parks = 0;
        for x in r.records.iter().filter(|x| x.tid == tid) {
            match &x.payload {
                Payload::MethodEntry(e) if e.method == id => depth += 1,
                Payload::MethodExit(e) if e.method == id => depth -= 1,
                Payload::Jvm(k, _) if *k == kind::PARK_BEGIN => {
                    assert_eq!(depth, 1, "{j}: park outside hotParks: {x:?}");
                    parks += 1;
                }
                _ => {}
            }
        }
        assert_eq!(parks, 30_000, "{j}");
        assert_eq!(r.count_kind(kind::METHOD_ENTRY), 3000, "{j}");
    }
}

/// Overhead: a CPU loop must run as fast with the agent (no method rules)
/// as without it, and the park wrapper must be cheap. Prints the figures.
#[test]
fn overhead_of_the_agent() {
    for java in jvms() {
        let j = java.display();
        let bench = |with_agent: bool| -> HashMap<String, u64> {
            let mut cmd = Command::new(&java);
            let dir = scratch_dir("bench");
            if with_agent {
                let conf = dir.join("agent.conf");
                std::fs::write(&conf, format!("output {}\n", dir.join("out").display())).unwrap();
                cmd.arg(format!("-agentpath:{}={}", agent_so().display(), conf.display()));
            }
            let o = {
                let _one = JVM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
                cmd.arg("-cp")
                    .arg(classes())
                    .args(["Events", "bench"])
                    .output()
                    .expect("java")
            };
            let _ = std::fs::remove_dir_all(&dir);
            assert!(o.status.success(), "{j}: {}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("BENCH "))
                .filter_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect()
        };
        // Best of two runs each, to dampen noise from other processes.
        let best = |w: bool| {
            let (a, b) = (bench(w), bench(w));
            a.into_iter()
                .map(|(k, v)| (k.clone(), v.min(b[&k])))
                .collect::<HashMap<_, _>>()
        };
        let (without, with) = (best(false), best(true));
        for k in [
            "cpu-loop",
            "cpu-loop-cpu",
            "unpark-park-1M",
            "parkNanos1-20k",
            "sleep0-100k",
        ] {
            eprintln!(
                "{j}: {k}: without agent {:.1} ms, with agent {:.1} ms ({:+.0}%)",
                without[k] as f64 / 1e6,
                with[k] as f64 / 1e6,
                (with[k] as f64 / without[k] as f64 - 1.0) * 100.0
            );
        }
        // On the thread's CPU time: the wall time of a loaded VM measures
        // the other processes and the hypervisor as much as the agent.
        let ratio = with["cpu-loop-cpu"] as f64 / without["cpu-loop-cpu"] as f64;
        assert!(ratio < 1.25, "{j}: CPU loop takes {ratio:.2}x the CPU with the agent");
    }
}

//! End-to-end tests of bytecode rewriting (`bytecode_rewriting on`) with real
//! JVMs (JDK 17 and 25), on the corpus of tricky methods in
//! `tests/java/tricky*` (switches, exceptions, try/finally, synchronized,
//! constructors with this()/super() and a throwing super constructor,
//! lambdas, a default method, static init, long/double, 300 locals, a class
//! compiled for Java 8), run with full verification.
//!
//! The ignored test `bench_probe_overhead` measures the probe cost; run it
//! with `cargo test --release -p jtrace-agent --test rewrite -- --ignored --nocapture`.

mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jtrace_format::{Payload, Record, EXIT_BY_EXCEPTION, FILE_HEADER_LEN};

/// Verification of every class, boot classes included (works on 17 and 25).
const VERIFY: [&str; 3] = [
    "-Xverify:all",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+BytecodeVerificationLocal",
];

/// Settings that keep the other JVM events out of these tests.
/// `stacks off` too: the code records stacks need define every loaded method.
const QUIET: &str = "jit off\npark off\nsleep off\nstacks off\n";

/// The corpus: everything for Java 11, then TrickyOld again for Java 8.
fn corpus() -> &'static Path {
    static CLS: OnceLock<PathBuf> = OnceLock::new();
    CLS.get_or_init(|| {
        let out = scratch_dir("corpus");
        let java = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
        let old = java.join("tricky8/TrickyOld.java");
        compile(
            &out,
            "11",
            &[
                java.join("tricky/TrickyMain.java"),
                java.join("tricky/TrickyObjects.java"),
                old.clone(),
            ],
        );
        compile(&out, "8", &[old]);
        let class = std::fs::read(out.join("TrickyOld.class")).expect("TrickyOld.class");
        assert_eq!(
            u16::from_be_bytes([class[6], class[7]]),
            52,
            "TrickyOld is not a Java 8 class"
        );
        out
    })
}

struct Run {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    records: Vec<Record>,
}

fn run_java(java: &Path, conf: Option<&str>, extra: &[&str], cp: &Path, args: &[&str]) -> Run {
    run_java_to(java, conf, extra, cp, args, None)
}

/// Like [`run_java`], with the trace written under `out_base` if given.
fn run_java_to(
    java: &Path,
    conf: Option<&str>,
    extra: &[&str],
    cp: &Path,
    args: &[&str],
    out_base: Option<&Path>,
) -> Run {
    let dir = scratch_dir("run");
    let out = match out_base {
        Some(b) => b.join(format!("jtrace-bench-{}", std::process::id())),
        None => dir.join("out"),
    };
    let mut cmd = Command::new(java);
    cmd.args(extra);
    if let Some(conf) = conf {
        let path = dir.join("agent.conf");
        std::fs::write(&path, format!("output {}\n{conf}", out.display())).expect("write conf");
        cmd.arg(format!("-agentpath:{}={}", agent_so().display(), path.display()));
    }
    let o = cmd.arg("-cp").arg(cp).args(args).output().expect("run java");
    let mut records = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&out) {
        for e in entries {
            let data = std::fs::read(e.expect("entry").path()).expect("read stream");
            for r in jtrace_format::Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN) {
                records.push(r.expect("decode"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
    Run {
        status: o.status,
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        records,
    }
}

/// Per method id: (entries, exits, exceptional exits); checks definitions
/// precede uses, per-thread time order and strict nesting.
/// Method id -> ("Class.method", signature).
type Defs = HashMap<u64, (String, String)>;
/// Method id -> (entries, exits, exceptional exits).
type Counts = HashMap<u64, (u64, u64, u64)>;

fn tally(j: &str, records: &[Record]) -> (Defs, Counts) {
    let mut defs = HashMap::new();
    let mut counts: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    let mut stacks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut last: HashMap<u32, u64> = HashMap::new();
    for r in records {
        if in_thread_order(&r.payload) {
            let prev = last.insert(r.tid, r.ts).unwrap_or(0);
            assert!(r.ts >= prev, "{j}: time goes backwards on tid {}", r.tid);
        }
        match &r.payload {
            Payload::MethodDef(d) => {
                let prev = defs.insert(d.method, (format!("{}.{}", d.class, d.name), d.signature.clone()));
                assert!(prev.is_none(), "{j}: METHOD_DEF twice for {}", d.method);
            }
            Payload::MethodEntry(e) => {
                assert!(
                    defs.contains_key(&e.method),
                    "{j}: entry of {} before its METHOD_DEF",
                    e.method
                );
                stacks.entry(r.tid).or_default().push(e.method);
                counts.entry(e.method).or_default().0 += 1;
            }
            Payload::MethodExit(e) => {
                let top = stacks.entry(r.tid).or_default().pop();
                assert_eq!(top, Some(e.method), "{j}: exit does not match the innermost entry");
                let c = counts.entry(e.method).or_default();
                c.1 += 1;
                if e.flags & EXIT_BY_EXCEPTION != 0 {
                    c.2 += 1;
                }
            }
            Payload::AgentError(m) => panic!("{j}: AGENT_ERROR {m}"),
            _ => {}
        }
    }
    for (tid, s) in stacks {
        assert!(s.is_empty(), "{j}: tid {tid} ends with open methods {s:?}");
    }
    (defs, counts)
}

fn printed(stdout: &str, key: &str) -> HashMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(key))
        .filter_map(|l| {
            let (name, n) = l.rsplit_once(' ')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

const ROUNDS: &str = "300";

#[test]
fn tricky_corpus_verifies_and_counts_match() {
    for java in jvms() {
        let j = java.display().to_string();
        let plain = run_java(&java, None, &[], corpus(), &["TrickyMain", ROUNDS]);
        assert!(plain.status.success(), "{j}: untraced run failed: {}", plain.stderr);
        let conf = format!("{QUIET}include_method Tricky*\n");
        let r = run_java(&java, Some(&conf), &VERIFY, corpus(), &["TrickyMain", ROUNDS]);
        assert!(r.status.success(), "{j}: traced run failed: {}\n{}", r.status, r.stderr);
        assert!(!r.stderr.contains("Error"), "{j}: {}", r.stderr);
        assert!(
            !r.stderr.contains("jtrace agent"),
            "{j}: agent complained: {}",
            r.stderr
        );
        assert_eq!(
            r.stdout, plain.stdout,
            "{j}: traced output differs from the untraced one"
        );

        let (defs, counts) = tally(&j, &r.records);
        // Entries/exits by "Class.method" (overloads and lambda bodies summed).
        let mut by_name: HashMap<String, (u64, u64, u64)> = HashMap::new();
        for (id, (name, sig)) in &defs {
            let c = counts.get(id).copied().unwrap_or_default();
            assert_eq!(c.0, c.1, "{j}: {name}{sig}: {} entries, {} exits", c.0, c.1);
            let key = if name.starts_with("TrickyMain.lambda$lambdas$") {
                "TrickyMain.lambda".to_string()
            } else if name == "TrickyObjects$Child.<init>" && sig == "(I)V" {
                "TrickyObjects$Child.<init>(I)".to_string()
            } else {
                name.clone()
            };
            let e = by_name.entry(key).or_default();
            e.0 += c.0;
            e.1 += c.1;
            e.2 += c.2;
        }
        let counted = printed(&r.stdout, "COUNT ");
        let exceptional = printed(&r.stdout, "EXC ");
        assert!(counted.len() >= 20, "{j}: {counted:?}");
        for (name, n) in &counted {
            let got = by_name.get(name).map_or(0, |c| c.0);
            assert_eq!(got, *n, "{j}: {name}: traced entries vs the program's own count");
        }
        for (name, n) in &exceptional {
            let got = by_name.get(name).map_or(0, |c| c.2);
            assert_eq!(got, *n, "{j}: {name}: exceptional exits");
        }
        // Methods the program never leaves by an exception have none.
        for (name, c) in &by_name {
            if !exceptional.contains_key(name) && name != "TrickyObjects$Child.<init>" {
                assert_eq!(c.2, 0, "{j}: {name}: unexpected exceptional exits");
            }
        }
        // Constructors: one Child(int) -> Child(int, String) -> Base(int) per round.
        let rounds: u64 = ROUNDS.parse().unwrap();
        let throwing = exceptional["TrickyObjects$Base.<init>"];
        assert!(throwing > 0);
        for ctor in [
            "TrickyObjects$Child.<init>(I)",
            "TrickyObjects$Child.<init>",
            "TrickyObjects$Base.<init>",
        ] {
            let c = by_name[ctor];
            assert_eq!(c.0, rounds, "{j}: {ctor} entries");
            assert_eq!(c.2, throwing, "{j}: {ctor} exceptional exits");
        }
        assert_eq!(exceptional["TrickyObjects$Child.<init>(I)"], throwing);
        // Static init, a default method and the Java 8 class are traced.
        for m in [
            "TrickyMain.<clinit>",
            "TrickyObjects$Twice.twice",
            "TrickyOld.step",
            "TrickyMain.lambda",
        ] {
            assert!(by_name.get(m).is_some_and(|c| c.0 > 0), "{j}: {m} not traced");
        }
        let ids: HashSet<u64> = defs.keys().copied().collect();
        assert!(ids.iter().all(|&i| i < 1 << 16), "{j}: method ids are small ints");
    }
}

/// Demotion needs no retransformation: a demoted method keeps
/// its probe calls, the entry probe returns -1 and the exits get that from
/// a local of their own, so a call records both its ends or neither. Here
/// every method is demoted (through `jtrace.Probe.DEMOTED`, as the demoter
/// sets it) at the bottom of a recursion, which then unwinds normally or by
/// an exception: each of the open calls records its exit, and the calls
/// after the demotion record nothing. Full verification checks the
/// rewritten frames, which carry the new local.
#[test]
fn a_demotion_mid_call_keeps_every_open_call_whole() {
    let out = scratch_dir("demote");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/demote/DemoteMidCall.java");
    compile(&out, "11", &[src]);
    for java in jvms() {
        let j = java.display().to_string();
        for (arg, sum) in [("return", "SUM 99"), ("throw", "SUM 189")] {
            let conf = format!("{QUIET}include_method DemoteMidCall depth\ninclude_method DemoteMidCall thrower\n");
            let r = run_java(&java, Some(&conf), &VERIFY, &out, &["DemoteMidCall", arg]);
            assert!(r.status.success(), "{j} {arg}: {}", r.stderr);
            assert!(r.stdout.contains(sum), "{j} {arg}: {}", r.stdout);
            // tally checks that every exit closes the innermost open call
            // and that no call is left open.
            let (defs, counts) = tally(&j, &r.records);
            let by_name: HashMap<&str, (u64, u64, u64)> = defs
                .iter()
                .map(|(id, (n, _))| (n.as_str(), counts.get(id).copied().unwrap_or_default()))
                .collect();
            let (depth, thrower) = (by_name["DemoteMidCall.depth"], by_name["DemoteMidCall.thrower"]);
            if arg == "return" {
                // 5 recursions of 11 calls before, the 11 open at the demotion.
                assert_eq!(depth, (66, 66, 0), "{j} {arg}");
                assert_eq!(thrower, (0, 0, 0), "{j} {arg}");
            } else {
                assert_eq!(depth, (55, 55, 0), "{j} {arg}");
                // thrower(5)..thrower(0): six open calls, all left by the exception.
                assert_eq!(thrower, (6, 6, 6), "{j} {arg}");
            }
        }
        // The JIT's view: `depth` compiled before the demotion reads the
        // marks at every call; `later`, compiled after it, has them as
        // constants. Neither records a call after it.
        let conf = format!("{QUIET}include_method DemoteMidCall depth\ninclude_method DemoteMidCall later\n");
        let r = run_java(&java, Some(&conf), &["-Xbatch"], &out, &["DemoteMidCall", "jit"]);
        assert!(r.status.success(), "{j} jit: {}", r.stderr);
        assert!(r.stdout.contains("SUM 270000"), "{j} jit: {}", r.stdout);
        let (defs, counts) = tally(&j, &r.records);
        let by_name: HashMap<&str, (u64, u64, u64)> = defs
            .iter()
            .map(|(id, (n, _))| (n.as_str(), counts.get(id).copied().unwrap_or_default()))
            .collect();
        assert_eq!(by_name["DemoteMidCall.depth"], (120_000, 120_000, 0), "{j} jit");
        assert_eq!(
            by_name.get("DemoteMidCall.later").copied().unwrap_or_default(),
            (0, 0, 0),
            "{j} jit"
        );
    }
}

#[test]
fn loaded_before_vminit_classes_are_retransformed() {
    // java.util.ArrayList is loaded long before VMInit: the agent must
    // retransform it. The corpus's program calls no ArrayList method itself,
    // but the JDK does at startup and shutdown; a class without selected
    // methods must stay untouched.
    for java in jvms() {
        let j = java.display().to_string();
        let conf = format!("{QUIET}include_method java.util.ArrayList size\ninclude_method TrickyOld.run\n");
        let r = run_java(&java, Some(&conf), &VERIFY, corpus(), &["TrickyMain", "10"]);
        assert!(r.status.success(), "{j}: {}", r.stderr);
        let (defs, counts) = tally(&j, &r.records);
        let names: HashSet<&str> = defs.values().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains("java.util.ArrayList.size"), "{j}: {names:?}");
        assert_eq!(names.len(), 2, "{j}: {names:?}");
        let old = defs
            .iter()
            .find(|(_, (n, _))| n == "TrickyOld.run")
            .map(|(i, _)| *i)
            .unwrap();
        assert_eq!(counts[&old], (1, 1, 0), "{j}");
    }
}

#[test]
fn bytecode_rewriting_off_uses_jvmti_events() {
    for java in jvms() {
        let j = java.display().to_string();
        let conf = format!("{QUIET}bytecode_rewriting off\ninclude_method TrickyOld *\n");
        let r = run_java(&java, Some(&conf), &[], corpus(), &["TrickyMain", "10"]);
        assert!(r.status.success(), "{j}: {}", r.stderr);
        let (defs, counts) = tally(&j, &r.records);
        // JVMTI ids are jmethodIDs (pointers), not the small ints of rewriting.
        assert!(defs.keys().all(|&i| i > 1 << 16), "{j}: {defs:?}");
        let step = defs
            .iter()
            .find(|(_, (n, _))| n == "TrickyOld.step")
            .map(|(i, _)| *i)
            .unwrap();
        assert_eq!(counts[&step].0, 10, "{j}");
    }
}

/// The probes' recording halves stay out of line in compiled code and their
/// checks are inlined: HotSpot honours `@DontInline` on jtrace.Probe
/// (defined by the boot loader), so C2 does not copy a recording body
/// (thread-local lookup, buffer bounds, flush path) into every traced
/// method and every method that inlines one, and a new thread's first
/// recorded call deoptimises the small recorder rather than every hot
/// caller; `enter`, `exit` and `exitEx` themselves are a check that C2
/// inlines, so that a demoted method's probes cost no call, and that C1
/// calls (their padding puts them past its inlining limit), so that its
/// profiled code does not write their branch counters from every traced
/// method. The hot loop calls a traced method 300 000 times, enough for C2
/// to compile it; its inlining decisions must inline `enter` and `exit`
/// in C2 and leave them to a call in C1, name the annotation for
/// `recordEnter` and `recordExit`, and inline no recorder.
#[test]
fn probe_checks_are_inlined_and_recorders_are_not() {
    let out = scratch_dir("inlining");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/bench/Bench.java");
    compile(&out, "11", &[src]);
    for java in jvms() {
        let j = java.display().to_string();
        let r = run_java(
            &java,
            Some(&format!("{QUIET}include_method Bench tiny\n")),
            &["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintInlining"],
            &out,
            &["Bench", "300000", "1"],
        );
        assert!(r.status.success(), "{j}: {}", r.stderr);
        // One "@ BCI class::method (N bytes) decision" entry per call site;
        // two compiler threads may print onto one line, so split entries.
        let probe_lines: Vec<&str> = r
            .stdout
            .lines()
            .flat_map(|l| l.split('@'))
            .filter(|l| l.contains("jtrace.Probe::"))
            .collect();
        let inlined =
            |l: &str| l.trim_end().ends_with(" inline") || l.contains("inline (hot)") || l.contains("force inline");
        for probe in ["enter", "exit"] {
            assert!(
                probe_lines
                    .iter()
                    .any(|l| l.contains(&format!("jtrace.Probe::{probe} ")) && inlined(l)),
                "{j}: {probe} never inlined in {probe_lines:#?}"
            );
        }
        // C1 calls them (PAD in Probe.java): its profiled code would
        // otherwise write their branch counters, one profile for all.
        for probe in ["enter", "exit"] {
            assert!(
                probe_lines
                    .iter()
                    .any(|l| l.contains(&format!("jtrace.Probe::{probe} ")) && l.contains("callee is too large")),
                "{j}: {probe} never left to a call by C1 in {probe_lines:#?}"
            );
            assert!(
                !probe_lines
                    .iter()
                    .any(|l| l.contains(&format!("jtrace.Probe::{probe} ")) && l.trim_end().ends_with(" inline")),
                "{j}: C1 inlined {probe} in {probe_lines:#?}"
            );
        }
        for recorder in ["recordEnter", "recordExit"] {
            assert!(
                probe_lines
                    .iter()
                    .any(|l| l.contains(&format!("jtrace.Probe::{recorder} "))
                        && l.contains("don't inline by annotation")),
                "{j}: no out-of-line {recorder} in {probe_lines:#?}"
            );
        }
        for l in &probe_lines {
            assert!(
                !(l.contains("::record") && inlined(l)),
                "{j}: a recorder was inlined: {l}"
            );
        }
        // The trace itself is complete (entries and exits of every call).
        let (_, counts) = tally(&j, &r.records);
        assert!(counts.values().any(|c| c.0 >= 300_000 && c.1 == c.0), "{j}: {counts:?}");
    }
}

/// min and median of a sample.
fn min_median(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

#[test]
#[ignore = "benchmark; run with --release -- --ignored --nocapture"]
fn bench_probe_overhead() {
    let out = scratch_dir("bench");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/bench/Bench.java");
    compile(&out, "11", &[src]);
    let calls = std::env::var("JTRACE_BENCH_CALLS").unwrap_or_else(|_| "2000000".into());
    // The trace goes to memory (/dev/shm) unless JTRACE_BENCH_OUT names a
    // directory: the benchmark measures the tracer, not the disk.
    let base = std::env::var_os("JTRACE_BENCH_OUT")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()));
    println!(
        "trace output under {:?}",
        base.as_deref().unwrap_or(Path::new("target tmp dir"))
    );
    for java in jvms() {
        let j = java.display().to_string();
        for (label, conf, n) in [
            ("untraced (no agent)", None, calls.as_str()),
            (
                "bytecode rewriting",
                Some(format!("{QUIET}include_method Bench tiny\n")),
                calls.as_str(),
            ),
            (
                "JVMTI MethodEntry/Exit",
                Some(format!("{QUIET}bytecode_rewriting off\ninclude_method Bench tiny\n")),
                "200000",
            ),
        ] {
            let r = run_java_to(&java, conf.as_deref(), &[], &out, &["Bench", n, "5"], base.as_deref());
            assert!(r.status.success(), "{j}: {}", r.stderr);
            let rows: Vec<Vec<f64>> = r
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("ROUND "))
                .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
                .collect();
            assert_eq!(rows.len(), 5, "{j}: {}", r.stdout);
            let col = |k: usize| min_median(&mut rows.iter().map(|r| r[k]).collect::<Vec<_>>());
            let (t, u, c) = (col(0), col(1), col(2));
            let entries = r
                .records
                .iter()
                .filter(|x| matches!(x.payload, Payload::MethodEntry(_)))
                .count();
            println!(
                "{j} | {label}: tiny() {:.2}/{:.2} ns per call (min/median), plain call {:.2}/{:.2}, \
                 2 x nanoTime {:.2}/{:.2}; {entries} entries recorded",
                t.0, t.1, u.0, u.1, c.0, c.1
            );
        }
    }
}

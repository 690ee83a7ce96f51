//! The pprof export, decoded with profile.proto's schema (python protobuf,
//! installed into target/pydeps by scripts/test-python.sh;
//! tests/python/pprof_check.py also checks the profile is well formed):
//! * a synthetic trace without stacks: every thread's off-CPU nanoseconds
//!   by cause equal the walk's totals, each under its traced methods, the
//!   same bytes streamed in a small budget as from the whole trace, and
//!   no CPU sample type;
//! * a hand-made trace with kernel stacks and CPU samples: each interval
//!   under its recorded stack or, without one, its traced methods; the
//!   time after the last switch-out under that switch-out's stack; a
//!   lost stack labelled, and counted in a comment; the CPU samples as
//!   `cpu` nanoseconds, samples × period; the collapsed export folding the
//!   same time under the same stacks, and the report's top stacks too.

use jtrace_testkit::synth;

mod fixture;

use fixture::{Builder, MAIN, PID, WORKER};
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{Invocation, MethodIdx, OffCpuInterval, ThreadInfo, ThreadTotals, Trace, Visitor};
use jtrace_timeline::{write_collapsed, CollapsedOptions, Exporter, Pprof};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A decoded profile (what pprof_check.py prints).
#[derive(Deserialize, Debug)]
struct Decoded {
    sample_type: Vec<[String; 2]>,
    default_sample_type: String,
    period_type: [String; 2],
    period: i64,
    comments: Vec<String>,
    samples: Vec<DecodedSample>,
}

#[derive(Deserialize, Debug)]
struct DecodedSample {
    labels: BTreeMap<String, serde_json::Value>,
    values: Vec<i64>,
    /// Leaf first; each location's lines, inlined first.
    locations: Vec<Vec<String>>,
}

impl DecodedSample {
    fn label(&self, k: &str) -> String {
        match &self.labels[k] {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        }
    }
    /// The frames, innermost first (inlined lines expanded).
    fn frames(&self) -> Vec<&str> {
        self.locations.iter().flatten().map(String::as_str).collect()
    }
}

fn decode(file: &Path) -> Decoded {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let setup = std::process::Command::new("bash")
        .arg(root.join("scripts/test-python.sh"))
        .status()
        .unwrap();
    assert!(setup.success());
    let out = std::process::Command::new("python3")
        .arg(root.join("timeline/tests/python/pprof_check.py"))
        .arg(file)
        .env("PYTHONPATH", root.join("target/pydeps"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes the profile of `dir` whole and streamed in a small budget,
/// checks both are the same bytes, and decodes it.
fn export(dir: &Path) -> Decoded {
    let trace = Trace::open(dir).unwrap();
    let mut whole = Vec::new();
    Pprof::default().write_trace(&trace, &mut whole).unwrap();
    let mut streamed = Vec::new();
    let small = StreamOptions {
        memory_budget: 256 << 10,
        ..Default::default()
    };
    Pprof::default().write_dir(dir, &mut streamed, &small).unwrap();
    assert!(whole == streamed, "streamed pprof differs from the in-memory one");
    let file = dir.with_extension("pb.gz");
    std::fs::write(&file, &whole).unwrap();
    decode(&file)
}

/// What the walk says: per "cause tid" the threads' totals; per leaf the
/// intervals' time; the tails (time after the last switch-out).
#[derive(Default)]
struct Expected<'a> {
    trace: Option<&'a Trace>,
    stack: Vec<MethodIdx>,
    intervals: u64,
    by_cause_tid: BTreeMap<String, u64>,
    by_leaf: BTreeMap<String, u64>,
    tails: u64,
}

impl Visitor for Expected<'_> {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.intervals = 0;
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, _inv: &Invocation) {
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, _t: &ThreadInfo, depth: usize, o: &OffCpuInterval) {
        let leaf = match depth {
            0 => "(no traced method)".to_string(),
            d => self.trace.unwrap().methods[self.stack[d - 1] as usize].qualified(),
        };
        *self.by_leaf.entry(leaf).or_default() += o.split.off.total();
        self.intervals += o.split.off.total();
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        for (c, ns) in totals.breakdown.off.nonzero() {
            *self.by_cause_tid.entry(format!("{} {}", c.name(), t.tid)).or_default() += ns;
        }
        self.tails += totals.breakdown.off.total() - self.intervals;
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

    let got = export(&dir);
    // No stacks, no CPU samples: the off-CPU type only, as before.
    assert_eq!(got.sample_type, [["off_cpu".to_string(), "nanoseconds".to_string()]]);
    assert_eq!(got.default_sample_type, "off_cpu");
    assert_eq!((got.period_type[0].as_str(), got.period), ("off_cpu", 1));
    let mut by_cause_tid = BTreeMap::new();
    let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
    for s in &got.samples {
        assert!(s.locations.iter().all(|l| l.len() == 1), "a traced method is one line");
        let ns = s.values[0] as u64;
        *by_cause_tid
            .entry(format!("{} {}", s.label("cause"), s.label("tid")))
            .or_default() += ns;
        *by_leaf.entry(s.frames()[0].to_string()).or_default() += ns;
    }
    // Every thread's off-CPU time by cause, exactly (tails included).
    assert_eq!(by_cause_tid, exp.by_cause_tid);
    // Per innermost traced method: the intervals' time, plus the tails.
    let extra: u64 = by_leaf.iter().map(|(k, v)| v - exp.by_leaf.get(k).unwrap_or(&0)).sum();
    assert!(
        exp.by_leaf.iter().all(|(k, v)| by_leaf.get(k) >= Some(v)),
        "{by_leaf:?}"
    );
    assert_eq!(extra, exp.tails);
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn recorded_stacks_and_cpu_samples_are_the_profiles_stacks() {
    let base = fixture::tempdir("pprof-stacks");
    let dir = base.join("t.jtrace");
    let mut b = Builder::default();
    b.cpu_sample_hz = 99;
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "A", "run", "()V");
    b.thread_start(PID, MAIN, 1000, "main", "main");
    b.thread_start(PID, WORKER, 1000, "worker", "main");
    b.ksym(0xffff_0000, 0xffff_0100, "schedule");
    b.ksym(0xffff_0100, 0xffff_0200, "futex_wait");
    b.ksym(0xffff_0200, 0xffff_0300, "tcp_recvmsg");
    b.kernel_stack(7, &[0xffff_0010, 0xffff_0120]);
    b.kernel_stack(8, &[0xffff_0010, 0xffff_0220]);
    b.switch_in(MAIN, 1000, 0);
    b.cpu_sample(MAIN, 1500, 7);
    b.enter(MAIN, 2000, 1);
    b.cpu_sample(MAIN, 2500, 7);
    b.cpu_sample(MAIN, 2600, 8);
    b.switch_out_with_stack(MAIN, 3000, 0, 7);
    b.wakeup(MAIN, 5000, WORKER);
    b.switch_in(MAIN, 5500, 0);
    b.switch_out(MAIN, 6000, false, 0); // no stack recorded: A.run
    b.switch_in(MAIN, 7000, 0);
    b.switch_out_with_stack(MAIN, 7200, 0, 9); // stack 9 was lost: labelled
    b.switch_in(MAIN, 7300, 0);
    b.exit(MAIN, 8000, 1);
    // Off CPU until the end: the tail, under this switch-out's stack.
    b.switch_out_with_stack(MAIN, 8500, 0, 8);
    b.wakeup(MAIN, 8800, WORKER);
    b.cpu_sample(WORKER, 1300, 8);
    b.write(&dir, 1000, 9000);

    let got = export(&dir);
    assert_eq!(
        got.sample_type,
        [
            ["off_cpu".to_string(), "nanoseconds".to_string()],
            ["cpu".to_string(), "nanoseconds".to_string()]
        ]
    );
    assert_eq!(got.default_sample_type, "off_cpu");
    assert_eq!(got.period_type, ["cpu".to_string(), "nanoseconds".to_string()]);
    assert_eq!(got.period, 1_000_000_000 / 99);
    assert!(got.comments.iter().any(|c| c.contains("99 CPU samples per second")));
    let main = format!("main [{MAIN}]");
    let mut off: Vec<(String, String, i64, Vec<&str>)> = Vec::new();
    let mut cpu: Vec<(String, i64, Vec<&str>)> = Vec::new();
    for s in &got.samples {
        assert_eq!(
            s.label("tid"),
            s.label("thread").rsplit_once('[').unwrap().1.trim_end_matches(']')
        );
        match s.values[..] {
            [o, 0] if o > 0 => off.push((s.label("thread"), s.label("cause"), o, s.frames())),
            [0, c] if c > 0 => {
                assert!(!s.labels.contains_key("cause"), "a CPU sample has no cause");
                cpu.push((s.label("thread"), c, s.frames()))
            }
            ref v => panic!("a sample with values {v:?}"),
        }
    }
    off.sort();
    let k7 = vec!["schedule_[k]", "futex_wait_[k]"];
    let k8 = vec!["schedule_[k]", "tcp_recvmsg_[k]"];
    assert_eq!(
        off,
        vec![
            (main.clone(), "runqueue".into(), 500, k7.clone()),
            (main.clone(), "unknown".into(), 100, vec!["[kernel stack lost]"]),
            (main.clone(), "unknown".into(), 300, k8.clone()),
            (main.clone(), "unknown".into(), 1000, vec!["A.run"]),
            (main.clone(), "unknown".into(), 2000, k7.clone()),
        ]
    );
    // What could not be named is said, not only labelled.
    assert!(
        got.comments.iter().any(|c| c.contains("1 stack ids lost")),
        "{:?}",
        got.comments
    );
    assert!(!got.comments.iter().any(|c| c.contains("lost events")));
    cpu.sort();
    let period = 1_000_000_000 / 99;
    assert_eq!(
        cpu,
        vec![
            (main.clone(), period, k8.clone()),
            (main, 2 * period, k7),
            (format!("worker [{WORKER}]"), period, k8),
        ]
    );
    // The collapsed export folds the same time under the same stacks (root
    // first there), the tail included: under its switch-out's stack, not
    // under the traced methods open at the thread's last event (none).
    let trace = Trace::open(&dir).unwrap();
    let mut buf = Vec::new();
    let all = CollapsedOptions {
        all: true,
        ..Default::default()
    };
    write_collapsed(&trace, &all, &mut buf).unwrap();
    let mut folded: Vec<String> = String::from_utf8(buf).unwrap().lines().map(str::to_string).collect();
    folded.sort();
    let mut want: Vec<String> = off
        .iter()
        .map(|(_, cause, ns, frames)| {
            let root_first: Vec<&str> = frames.iter().rev().copied().collect();
            format!("{cause};{} {ns}", root_first.join(";"))
        })
        .collect();
    want.sort();
    assert_eq!(folded, want);
    // So do the report's top stacks by cause, the tail included (the
    // interval without a recorded stack is not among them).
    let report = jtrace_merge::build_report(&trace, &Default::default());
    let mut by_cause: Vec<(String, i64, Vec<String>)> = report
        .stacks
        .expect("the trace has stacks")
        .by_cause
        .iter()
        .flat_map(|g| g.stacks.iter().map(|s| (g.key.clone(), s.ns as i64, s.frames.clone())))
        .collect();
    by_cause.sort();
    let mut want: Vec<(String, i64, Vec<String>)> = off
        .iter()
        .filter(|(_, _, _, frames)| frames[..] != ["A.run"])
        .map(|(_, cause, ns, frames)| (cause.clone(), *ns, frames.iter().map(|f| f.to_string()).collect()))
        .collect();
    want.sort();
    assert_eq!(by_cause, want);
    std::fs::remove_dir_all(&base).unwrap();
}

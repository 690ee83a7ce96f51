//! The report's `stack_methods`: every Java method on the recorded stacks,
//! with the off-CPU time of the intervals whose stack holds it (each
//! interval once per method, recursion included), split by cause and into
//! working and idle, and the sampled CPU time under it. No `--methods`
//! needed: this is the default run's first table.

use crate::cause::OffCpu;
use crate::model::event::MethodIdx;
use crate::model::trace::Trace;
use crate::report::stack_time::StackTime;
use crate::report::working::Idleness;
use crate::stacks::blame::blamed_frame;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A Java method of the recorded stacks.
#[derive(Debug, Clone, Serialize)]
pub struct StackMethodsJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// Off-CPU time of the intervals whose stack holds it, by cause
    /// (inclusive of what it called; each interval once).
    pub off_cpu_ns: OffCpu,
    /// The part of `off_cpu_ns` that is idle (docs/REPORT.md, "Working
    /// and idle time"); absent when none.
    #[serde(skip_serializing_if = "OffCpu::is_empty")]
    pub idle_off_cpu_ns: OffCpu,
    /// Working off-CPU time of the intervals that blocked in it: it is the
    /// stack's innermost Java frame outside the JDK (else its innermost
    /// Java frame).
    pub blocked_here_ns: u64,
    /// CPU samples whose stack holds it.
    pub cpu_samples: u64,
    /// Those samples times the sampling period: CPU time, sampled.
    pub cpu_sampled_ns: u64,
    /// Threads whose stacks hold it.
    pub threads: u32,
}

impl StackMethodsJson {
    /// Its working off-CPU time: `off_cpu_ns` less `idle_off_cpu_ns`.
    pub fn working_off_cpu(&self) -> OffCpu {
        self.off_cpu_ns - self.idle_off_cpu_ns
    }
}

#[derive(Default)]
struct Sums {
    off: OffCpu,
    idle: OffCpu,
    blocked_here: u64,
    samples: u64,
    threads: BTreeSet<u32>,
}

/// The Java methods of each pair (each once) and the one it blocked in.
struct PairMethods<'a> {
    idleness: &'a Idleness<'a>,
    by_pair: HashMap<u32, (BTreeSet<MethodIdx>, Option<MethodIdx>)>,
}

impl PairMethods<'_> {
    fn of(&mut self, pair: u32) -> &(BTreeSet<MethodIdx>, Option<MethodIdx>) {
        let idleness = self.idleness;
        self.by_pair.entry(pair).or_insert_with(|| {
            let frames = idleness.frames(pair);
            let held = frames.iter().filter_map(|f| f.method).collect();
            (held, blamed_frame(&frames).and_then(|f| f.method))
        })
    }
}

/// The methods of the stacks of the threads `keep` keeps, most working
/// off-CPU time first (then most sampled CPU).
pub(crate) fn stack_methods(
    trace: &Trace,
    time: &StackTime,
    idleness: &Idleness,
    keep: &dyn Fn(u32) -> bool,
) -> Vec<StackMethodsJson> {
    let mut pairs = PairMethods {
        idleness,
        by_pair: HashMap::new(),
    };
    let mut sums: BTreeMap<MethodIdx, Sums> = BTreeMap::new();
    for (&tid, by_pair) in time.all_threads().filter(|(tid, _)| keep(**tid)) {
        for (&pair, off) in by_pair {
            let idle = idleness.idle_part(tid, pair, off);
            let (held, blamed) = pairs.of(pair);
            for &m in held {
                let s = sums.entry(m).or_default();
                s.off += *off;
                s.idle += idle;
                s.threads.insert(tid);
            }
            if let Some(m) = blamed {
                sums.entry(*m).or_default().blocked_here += (*off - idle).total();
            }
        }
    }
    for (&(tid, pair), &n) in trace.stacks.cpu_samples.iter().filter(|((tid, _), _)| keep(*tid)) {
        for &m in &pairs.of(pair).0 {
            let s = sums.entry(m).or_default();
            s.samples += n;
            s.threads.insert(tid);
        }
    }
    let period = 1_000_000_000u64
        .checked_div(u64::from(trace.meta.cpu_sample_hz))
        .unwrap_or(0);
    let mut v: Vec<StackMethodsJson> = (sums.into_iter())
        .filter(|(m, _)| !trace.methods[*m as usize].native)
        .map(|(m, s)| {
            let info = &trace.methods[m as usize];
            StackMethodsJson {
                class: info.class.clone(),
                name: info.name.clone(),
                signature: info.signature.clone(),
                off_cpu_ns: s.off,
                idle_off_cpu_ns: s.idle,
                blocked_here_ns: s.blocked_here,
                cpu_samples: s.samples,
                cpu_sampled_ns: s.samples * period,
                threads: s.threads.len() as u32,
            }
        })
        .collect();
    v.sort_by(|a, b| {
        (b.working_off_cpu().total().cmp(&a.working_off_cpu().total()))
            .then(b.cpu_samples.cmp(&a.cpu_samples))
            .then_with(|| (&a.class, &a.name, &a.signature).cmp(&(&b.class, &b.name, &b.signature)))
    });
    v
}

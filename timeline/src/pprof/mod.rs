//! The pprof export (`jtrace export --format pprof`): off-CPU time and CPU
//! samples as one gzipped `profile.proto` (github.com/google/pprof), for
//! `go tool pprof`, Pyroscope and Grafana (docs/EXPORTS.md, "pprof").
//!
//! Two sample types, `off_cpu` and (when the trace has CPU samples) `cpu`,
//! both nanoseconds. An off-CPU sample is one (stack, cause, thread) with
//! the nanoseconds off CPU there, labels `cause`, `thread` ("name [tid]")
//! and `tid`: its stack is the one recorded at the switch-out (kernel,
//! native and Java frames, named as the collapsed export names them, one
//! location per frame, inlined frames as lines of their compiled caller's
//! location), else the traced methods open then. A thread's short blocks
//! without stacks are under the stacks of its sampled short blocks,
//! scaled up (label `stack` = `scaled`). The time after a
//! thread's last switch-out is there too, so the off-CPU samples add up
//! to the report's per thread and cause. A CPU sample is one (stack,
//! thread) with samples × period.
//!
//! It streams: memory is the distinct (stack, cause, thread) keys and
//! stacks, not the trace's length. `proto.rs` holds the messages,
//! `builder.rs` the interned strings, functions and locations.

mod builder;
mod proto;

use crate::export::Exporter;
use builder::Tables;
use jtrace_merge::scale::ShortBlocks;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::tail::{Tail, TailStack};
use jtrace_merge::{
    Cause, Invocation, MethodIdx, OffCpu, OffCpuInterval, Symbolizer, ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use proto::{Label, Profile, Sample, ValueType};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// Where an off-CPU sample's stack comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum StackKey {
    /// The stacks recorded at the switch-out: an index into the trace's
    /// stack pairs.
    Recorded(u32),
    /// The traced methods open, outermost first (empty: none).
    Traced(Vec<MethodIdx>),
    /// A stack pair standing for short blocks without stacks, scaled up
    /// from the thread's sampled ones (label `stack` = `scaled`).
    Scaled(u32),
}

/// Off-CPU nanoseconds by (stack, cause, tid), from a walk.
#[derive(Default)]
struct Folder {
    /// The traced methods open on the thread being walked.
    stack: Vec<MethodIdx>,
    /// The time after the thread's last switch-out.
    tail: Tail,
    /// The thread's short blocks without stacks, scaled at its end.
    short: ShortBlocks<StackKey>,
    /// Stacks in order of first use (the samples refer to them by index).
    keys: Vec<StackKey>,
    key_ids: HashMap<StackKey, u32>,
    samples: BTreeMap<(u32, usize, u32), u64>,
}

impl Folder {
    fn new(trace: &Trace) -> Folder {
        Folder {
            short: ShortBlocks::new(trace),
            ..Folder::default()
        }
    }

    fn add(&mut self, key: StackKey, tid: u32, off: &OffCpu) {
        let id = match self.key_ids.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.keys.len() as u32;
                self.keys.push(key.clone());
                self.key_ids.insert(key, i);
                i
            }
        };
        for (c, ns) in off.nonzero() {
            *self.samples.entry((id, c as usize, tid)).or_default() += ns;
        }
    }

    fn traced(&self, depth: usize) -> StackKey {
        StackKey::Traced(self.stack[..depth.min(self.stack.len())].to_vec())
    }
}

impl Visitor for Folder {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.stack.clear();
        self.tail.begin();
    }
    fn event(&mut self, _t: &ThreadInfo, e: &Timed) {
        self.tail.event(e);
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.tail.exit(t, inv, &self.stack);
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.tail.off_cpu(&iv.split.off);
        let key = match iv.stack {
            Some(pair) => StackKey::Recorded(pair),
            None => self.traced(depth),
        };
        if !self.short.off_cpu(iv, || key.clone()) {
            self.add(key, t.tid, &iv.split.off);
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        let short = self.short.end();
        for (pair, off) in short.scaled {
            self.add(StackKey::Scaled(pair), t.tid, &off);
        }
        for (key, off) in short.unscaled {
            self.add(key, t.tid, &off);
        }
        if let Some((tail, stack)) = self.tail.end(totals) {
            let key = match stack {
                TailStack::Recorded(pair) => StackKey::Recorded(pair),
                TailStack::Traced(methods) => StackKey::Traced(methods),
            };
            self.add(key, t.tid, &tail);
        }
    }
}

/// `name [tid]` of a thread.
fn thread_label(trace: &Trace, tid: u32) -> String {
    match trace.threads.get(&tid) {
        Some(t) => format!("{} [{tid}]", t.display_name()),
        None => format!("[{tid}]"),
    }
}

/// The sampling period of the trace's CPU samples in nanoseconds (0: none).
fn cpu_period(trace: &Trace) -> u64 {
    match u64::from(trace.meta.cpu_sample_hz) {
        0 => 0,
        hz => 1_000_000_000 / hz,
    }
}

/// What the profile lacks, as comments (`go tool pprof -comments`): lost
/// events, damaged streams, and frames that could not be named (they
/// are labelled in the stacks; this counts them).
fn problems(trace: &Trace, symbols: &Symbolizer) -> Vec<String> {
    let mut out = Vec::new();
    let l = &trace.losses;
    if l.kernel > 0 || l.jvm > 0 {
        out.push(format!("lost events: kernel {}, jvm {} (jtrace info)", l.kernel, l.jvm));
    }
    out.extend(l.truncated.iter().map(|t| format!("stream problem: {t}")));
    if !trace.meta.complete {
        out.push("recording did not finish cleanly: this is a readable prefix".into());
    }
    let p = symbols.problems();
    if p.unresolved_frames + p.truncated_stacks + p.missing_stacks > 0 {
        out.push(format!(
            "stacks: {} frames unresolved ({} in unloaded JIT code), {} stacks truncated, {} stack ids lost",
            p.unresolved_frames, p.unloaded_jit_frames, p.truncated_stacks, p.missing_stacks
        ));
    }
    out
}

fn write_profile(trace: &Trace, f: Folder, lines: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut t = Tables::new();
    let period = cpu_period(trace);
    let (off_cpu, ns) = (t.string("off_cpu"), t.string("nanoseconds"));
    let mut p = Profile {
        sample_type: vec![ValueType {
            r#type: off_cpu,
            unit: ns,
        }],
        time_nanos: trace.meta.start_realtime_ns as i64,
        duration_nanos: trace.duration_ns() as i64,
        period_type: Some(ValueType {
            r#type: off_cpu,
            unit: ns,
        }),
        period: 1,
        default_sample_type: off_cpu,
        ..Default::default()
    };
    p.comment
        .push(t.string("off_cpu: exact nanoseconds off CPU from the scheduler's switches, by cause (label cause)"));
    if period > 0 {
        let cpu = t.string("cpu");
        p.sample_type.push(ValueType { r#type: cpu, unit: ns });
        p.period_type = Some(ValueType { r#type: cpu, unit: ns });
        p.period = period as i64;
        let note = format!(
            "cpu: {} CPU samples per second, nanoseconds = samples x {period}",
            trace.meta.cpu_sample_hz
        );
        p.comment.push(t.string(&note));
    }
    let width = p.sample_type.len();
    let (cause_key, thread_key, tid_key) = (t.string("cause"), t.string("thread"), t.string("tid"));
    let (stack_key, scaled) = (t.string("stack"), t.string("scaled"));
    let labels = |t: &mut Tables, tid: u32| {
        vec![
            Label {
                key: thread_key,
                str: t.string(&thread_label(trace, tid)),
                num: 0,
            },
            Label {
                key: tid_key,
                str: 0,
                num: tid as i64,
            },
        ]
    };
    let symbols = match lines {
        true => Symbolizer::new(trace).with_lines(),
        false => Symbolizer::new(trace),
    };
    // The locations of each recorded stack pair, made once.
    let mut pairs: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut recorded = |t: &mut Tables, pair: u32| -> Vec<u64> {
        pairs
            .entry(pair)
            .or_insert_with(|| t.recorded(&symbols.frames(pair)))
            .clone()
    };
    let stacks: Vec<Vec<u64>> = f
        .keys
        .iter()
        .map(|k| match k {
            StackKey::Recorded(pair) | StackKey::Scaled(pair) => recorded(&mut t, *pair),
            StackKey::Traced(methods) => t.traced(&trace.methods, methods),
        })
        .collect();
    for ((stack, cause, tid), ns) in f.samples {
        let mut value = vec![0; width];
        value[0] = ns as i64;
        let mut label = vec![Label {
            key: cause_key,
            str: t.string(Cause::ALL[cause].name()),
            num: 0,
        }];
        label.extend(labels(&mut t, tid));
        if let StackKey::Scaled(_) = f.keys[stack as usize] {
            label.push(Label {
                key: stack_key,
                str: scaled,
                num: 0,
            });
        }
        p.sample.push(Sample {
            location_id: stacks[stack as usize].clone(),
            value,
            label,
        });
    }
    if period > 0 {
        for (&(tid, pair), &n) in &trace.stacks.cpu_samples {
            let location_id = recorded(&mut t, pair);
            p.sample.push(Sample {
                location_id,
                value: vec![0, (n * period) as i64],
                label: labels(&mut t, tid),
            });
        }
    }
    for c in problems(trace, &symbols) {
        p.comment.push(t.string(&c));
    }
    p.string_table = t.strings;
    p.function = t.functions;
    p.location = t.locations;
    use prost::Message;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())?;
    gz.finish()?.flush()?;
    Ok(())
}

/// The pprof format as an [`Exporter`]; it streams.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pprof {
    /// Native frames with their source file and line (from DWARF, as
    /// `--lines` reads them): the function's `filename`, the line's
    /// `line`; the functions inlined there as lines of the location.
    pub lines: bool,
}

impl Exporter for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        let mut f = Folder::new(trace);
        jtrace_merge::analyze(trace, &mut f);
        write_profile(trace, f, self.lines, out)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, opts: &StreamOptions) -> anyhow::Result<()> {
        let (trace, events) = crate::open_streamed(dir, opts)?;
        let mut f = Folder::new(&trace);
        stream::analyze(&trace, events, &mut f)?;
        write_profile(&trace, f, self.lines, out)
    }
}

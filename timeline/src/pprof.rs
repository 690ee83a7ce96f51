//! The pprof export (`jtrace export --format pprof`): off-CPU time as a
//! gzipped `profile.proto` (github.com/google/pprof, proto/profile.proto,
//! Apache-2.0; the messages below keep its field numbers), for `go tool
//! pprof`, Pyroscope and Grafana.
//!
//! One sample per (traced-method stack, cause, thread) with the
//! nanoseconds off CPU there, labels `cause`, `thread` ("name [tid]") and
//! `tid`; one function and one location per method. Off-CPU time outside
//! any traced method has the stack "(no traced method)". CPU profiles need
//! sampled stacks, which traces do not have yet (issue 16).
//!
//! It streams: memory is the distinct (stack, cause, thread) keys, not the
//! trace's length.

use crate::export::Exporter;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{Cause, MethodIdx, OffCpuInterval, ThreadInfo, Trace, Visitor};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// `Profile`.
#[derive(Clone, PartialEq, prost::Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
}

/// `ValueType`: string-table indexes.
#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

/// `Sample`: locations leaf first.
#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

/// `Label`.
#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

/// `Location`.
#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

/// `Line`.
#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// Off-CPU nanoseconds by (stack, cause, tid), from a walk.
struct Folder {
    stack: Vec<MethodIdx>,
    /// Stack (outermost first) → index into `samples`.
    stacks: HashMap<Vec<MethodIdx>, u32>,
    samples: BTreeMap<(u32, usize, u32), u64>,
}

impl Visitor for Folder {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.stack.clear();
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, _t: &ThreadInfo, depth: usize, _inv: &jtrace_merge::Invocation) {
        self.stack.truncate(depth);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, o: &OffCpuInterval) {
        let stack = &self.stack[..depth.min(self.stack.len())];
        let next = self.stacks.len() as u32;
        let id = match self.stacks.get(stack) {
            Some(&i) => i,
            None => {
                self.stacks.insert(stack.to_vec(), next);
                next
            }
        };
        for (c, ns) in o.split.off.nonzero() {
            *self.samples.entry((id, c as usize, t.tid)).or_default() += ns;
        }
    }
}

/// Strings of the profile, deduplicated (index 0 is "", as pprof requires).
struct Strings(Vec<String>, HashMap<String, i64>);

impl Strings {
    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.1.get(s) {
            return i;
        }
        let i = self.0.len() as i64;
        self.0.push(s.to_string());
        self.1.insert(s.to_string(), i);
        i
    }
}

fn write_profile(trace: &Trace, f: Folder, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut s = Strings(vec![String::new()], HashMap::from([(String::new(), 0)]));
    let mut p = Profile {
        sample_type: vec![ValueType {
            r#type: s.get("off_cpu"),
            unit: s.get("nanoseconds"),
        }],
        time_nanos: trace.meta.start_realtime_ns as i64,
        duration_nanos: trace.duration_ns() as i64,
        period_type: Some(ValueType {
            r#type: s.get("off_cpu"),
            unit: s.get("nanoseconds"),
        }),
        period: 1,
        ..Default::default()
    };
    // Function and location ids: method index + 2; 1 is "(no traced method)".
    let none = s.get("(no traced method)");
    p.function.push(Function {
        id: 1,
        name: none,
        system_name: none,
        filename: 0,
    });
    for (i, m) in trace.methods.iter().enumerate() {
        let (name, sys, file) = (
            s.get(&m.qualified()),
            s.get(&format!("{}{}", m.qualified(), m.signature)),
            s.get(&m.class),
        );
        p.function.push(Function {
            id: i as u64 + 2,
            name,
            system_name: sys,
            filename: file,
        });
    }
    for id in 1..=trace.methods.len() as u64 + 1 {
        p.location.push(Location {
            id,
            line: vec![Line { function_id: id }],
        });
    }
    let mut stacks: Vec<Vec<MethodIdx>> = vec![Vec::new(); f.stacks.len()];
    for (st, i) in f.stacks {
        stacks[i as usize] = st;
    }
    let (cause_key, thread_key, tid_key) = (s.get("cause"), s.get("thread"), s.get("tid"));
    for ((stack, cause, tid), ns) in f.samples {
        let st = &stacks[stack as usize];
        let location_id = if st.is_empty() {
            vec![1]
        } else {
            st.iter().rev().map(|&m| m as u64 + 2).collect()
        };
        let thread = match trace.threads.get(&tid) {
            Some(t) => format!("{} [{tid}]", t.display_name()),
            None => format!("[{tid}]"),
        };
        p.sample.push(Sample {
            location_id,
            value: vec![ns as i64],
            label: vec![
                Label {
                    key: cause_key,
                    str: s.get(Cause::ALL[cause].name()),
                    num: 0,
                },
                Label {
                    key: thread_key,
                    str: s.get(&thread),
                    num: 0,
                },
                Label {
                    key: tid_key,
                    str: 0,
                    num: tid as i64,
                },
            ],
        });
    }
    p.string_table = s.0;
    use prost::Message;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())?;
    gz.finish()?.flush()?;
    Ok(())
}

fn folder() -> Folder {
    Folder {
        stack: Vec::new(),
        stacks: HashMap::new(),
        samples: BTreeMap::new(),
    }
}

/// The pprof format as an [`Exporter`]; it streams.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pprof;

impl Exporter for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        let mut f = folder();
        jtrace_merge::analyze(trace, &mut f);
        write_profile(trace, f, out)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, opts: &StreamOptions) -> anyhow::Result<()> {
        let (trace, events) = crate::open_streamed(dir, opts)?;
        let mut f = folder();
        stream::analyze(&trace, events, &mut f)?;
        write_profile(&trace, f, out)
    }
}

//! The Perfetto export (`jtrace export --format perfetto`): Perfetto's
//! native protobuf trace, which ui.perfetto.dev and trace_processor read
//! natively (its JSON import is a best-effort legacy path).
//!
//! What it holds (docs/EXPORTS.md has the layout):
//! * a process tree and one track per process and per thread, with the
//!   real pids and tids;
//! * the kernel's scheduling as ftrace `sched_switch` / `sched_waking`
//!   events with their CPUs, so Perfetto's thread states (running,
//!   runnable, sleeping, with the waker) and critical path work;
//! * per thread, the method invocations as slices (nesting as they did)
//!   with their CPU time and off-CPU time per cause as arguments;
//! * per thread, a child track "off-CPU" with one slice per off-CPU
//!   interval named by its main cause, with the evidence, the split by
//!   cause and the waker; a flow from an instant on the waker's track to
//!   the wakee's interval;
//! * per JVM, a track "JVM stops" with the GC and safepoint windows.
//!
//! It streams (a [`Visitor`] of [`stream::analyze`]): packets go out as the
//! walk produces them, sched events in bundles of at most [`BUNDLE`] per
//! CPU; Perfetto sorts by time on import. Event names, argument names and
//! evidence strings are interned on one packet sequence.

mod proto;

use crate::export::Exporter;
use crate::model::pid_of;
use crate::windows::{pair_windows, window_name, WindowMarks};
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    describe_evidence, describe_syscall, Cause, Event, Evidence, Invocation, MethodIdx, OffCpuInterval, SyscallInfo,
    ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use proto::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

/// Sched events buffered per CPU before they go out as one bundle.
pub const BUNDLE: usize = 512;

/// The one packet sequence every packet is on.
const SEQ: u32 = 1;

/// Track uuids: the tid or pid, then the kind in the low 3 bits (small
/// numbers: every event names its track in a varint).
fn thread_track(tid: u32) -> u64 {
    (tid as u64) << 3 | 1
}
fn state_track(tid: u32) -> u64 {
    (tid as u64) << 3 | 2
}
fn process_track(pid: u32) -> u64 {
    (pid as u64) << 3 | 3
}
fn stops_track(pid: u32) -> u64 {
    (pid as u64) << 3 | 4
}

/// Argument names, interned once in the first packet (iid = index + 1).
const ARG_NAMES: &[&str] = &[
    "signature",
    "cpu_ns",
    "voluntary_switches",
    "involuntary_switches",
    "exception",
    "unfinished",
    "not_covered_ns",
    "evidence",
    "waker_tid",
    "seq",
    "open",
];
fn arg_iid(name: &str) -> u64 {
    ARG_NAMES
        .iter()
        .position(|n| *n == name)
        .expect("an argument name of ARG_NAMES") as u64
        + 1
}
/// iid of the argument `<cause>_ns`, after [`ARG_NAMES`].
fn cause_arg_iid(c: Cause) -> u64 {
    (ARG_NAMES.len() + c as usize) as u64 + 1
}

/// Writes the Perfetto trace as a [`Visitor`] of a walk.
struct PerfettoWriter<'a, W: Write> {
    trace: &'a Trace,
    out: W,
    error: Option<std::io::Error>,
    /// Interned event names and evidence strings (each its own iid space).
    names: HashMap<String, u64>,
    strings: HashMap<String, u64>,
    /// Event names of methods by index (0: not interned yet).
    method_iids: Vec<u64>,
    /// Their signatures' string iids (0: not interned yet).
    signature_iids: Vec<u64>,
    /// The encoding buffer, reused.
    buf: Vec<u8>,
    /// Sched events per CPU not yet written.
    sched: BTreeMap<u32, Vec<FtraceEvent>>,
    /// The thread's wakeup waiting for the CPU it will run on: (ts, waker).
    pending_wake: Option<(u64, u32)>,
    last_cpu: u32,
    /// The thread's latest syscalls (what a block's evidence names).
    syscalls: Vec<(u32, SyscallInfo)>,
    flow_id: u64,
    windows: WindowMarks,
    window_last: HashMap<u32, u64>,
}

fn arg_u(name: u64, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(name),
        uint_value: Some(v),
        ..Default::default()
    }
}
fn arg_b(name: u64, v: bool) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(name),
        bool_value: Some(v),
        ..Default::default()
    }
}

impl<'a, W: Write> PerfettoWriter<'a, W> {
    fn new(trace: &'a Trace, out: W) -> Self {
        PerfettoWriter {
            trace,
            out,
            error: None,
            names: HashMap::new(),
            strings: HashMap::new(),
            method_iids: vec![0; trace.methods.len()],
            signature_iids: vec![0; trace.methods.len()],
            buf: Vec::new(),
            sched: BTreeMap::new(),
            pending_wake: None,
            last_cpu: 0,
            syscalls: Vec::new(),
            flow_id: 0,
            windows: WindowMarks::new(),
            window_last: HashMap::new(),
        }
    }

    /// Writes one packet as a `Trace.packet` field (the file is a `Trace`).
    fn packet(&mut self, p: TracePacket) {
        if self.error.is_some() {
            return;
        }
        use prost::Message;
        let len = p.encoded_len();
        let buf = &mut self.buf;
        buf.clear();
        buf.push(0x0a); // field 1, length-delimited
        prost::encoding::encode_varint(len as u64, buf);
        p.encode(buf).expect("a Vec grows");
        if let Err(e) = self.out.write_all(buf) {
            self.error = Some(e);
        }
    }

    /// A track event on the sequence, with whatever it interned.
    fn event(&mut self, ts: u64, ev: TrackEvent, interned: InternedData) {
        let has_interned = !interned.event_names.is_empty() || !interned.debug_annotation_string_values.is_empty();
        self.packet(TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(ev),
            interned_data: has_interned.then_some(interned),
            ..Default::default()
        });
    }

    fn name_iid(&mut self, name: &str, interned: &mut InternedData) -> u64 {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let i = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), i);
        interned.event_names.push(EventName {
            iid: Some(i),
            name: Some(name.to_string()),
        });
        i
    }

    fn method_iid(&mut self, m: MethodIdx, interned: &mut InternedData) -> u64 {
        match self.method_iids.get(m as usize) {
            Some(&i) if i != 0 => i,
            _ => {
                let name = self
                    .trace
                    .methods
                    .get(m as usize)
                    .map(|m| m.qualified())
                    .unwrap_or_default();
                let i = self.name_iid(&name, interned);
                if let Some(slot) = self.method_iids.get_mut(m as usize) {
                    *slot = i;
                }
                i
            }
        }
    }

    fn string_arg(&mut self, name: &str, s: String, interned: &mut InternedData) -> DebugAnnotation {
        let next = self.strings.len() as u64 + 1;
        let iid = *self.strings.entry(s).or_insert_with_key(|s| {
            interned.debug_annotation_string_values.push(InternedString {
                iid: Some(next),
                str: Some(s.as_bytes().to_vec()),
            });
            next
        });
        DebugAnnotation {
            name_iid: Some(arg_iid(name)),
            string_value_iid: Some(iid),
            ..Default::default()
        }
    }

    /// The first packets: interned argument names, process tree, tracks.
    fn header(&mut self) {
        let mut names: Vec<EventName> = ARG_NAMES
            .iter()
            .map(|n| n.to_string())
            .chain(Cause::ALL.iter().map(|c| format!("{}_ns", c.name())))
            .enumerate()
            .map(|(i, n)| EventName {
                iid: Some(i as u64 + 1),
                name: Some(n),
            })
            .collect();
        names.shrink_to_fit();
        self.packet(TracePacket {
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            interned_data: Some(InternedData {
                debug_annotation_names: names,
                ..Default::default()
            }),
            ..Default::default()
        });
        let trace = self.trace;
        let mut pids = BTreeSet::new();
        let mut tree = ProcessTree::default();
        for t in trace.threads.values() {
            let pid = pid_of(trace, t);
            pids.insert(pid);
            tree.threads.push(Thread {
                tid: Some(t.tid as i32),
                name: Some(t.display_name().to_string()),
                tgid: Some(pid as i32),
            });
        }
        for &pid in &pids {
            let cmdline = if pid == trace.meta.pid {
                trace.meta.command.clone()
            } else {
                Vec::new()
            };
            tree.processes.push(Process {
                pid: Some(pid as i32),
                ppid: Some(0),
                cmdline,
            });
        }
        self.packet(TracePacket {
            process_tree: Some(tree),
            ..Default::default()
        });
        for &pid in &pids {
            let name = if pid == trace.meta.pid && !trace.meta.command.is_empty() {
                trace.meta.command.join(" ")
            } else {
                format!("process {pid}")
            };
            self.track(TrackDescriptor {
                uuid: Some(process_track(pid)),
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: Some(name),
                }),
                ..Default::default()
            });
        }
        for t in trace.threads.values() {
            let pid = pid_of(trace, t);
            self.track(TrackDescriptor {
                uuid: Some(thread_track(t.tid)),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(t.tid as i32),
                    thread_name: Some(t.display_name().to_string()),
                }),
                ..Default::default()
            });
            self.track(TrackDescriptor {
                uuid: Some(state_track(t.tid)),
                parent_uuid: Some(thread_track(t.tid)),
                name: Some(format!("{} [{}] off-CPU", t.display_name(), t.tid)),
                ..Default::default()
            });
        }
    }

    fn track(&mut self, d: TrackDescriptor) {
        self.packet(TracePacket {
            track_descriptor: Some(d),
            trusted_packet_sequence_id: Some(SEQ),
            ..Default::default()
        });
    }

    fn comm(&self, tid: u32) -> String {
        match self.trace.threads.get(&tid) {
            Some(t) => t.comm.clone(),
            None if tid == 0 => "swapper".into(),
            None => String::new(),
        }
    }

    fn sched_event(&mut self, cpu: u32, e: FtraceEvent) {
        let buf = self.sched.entry(cpu).or_default();
        buf.push(e);
        if buf.len() >= BUNDLE {
            self.flush_cpu(cpu);
        }
    }

    fn flush_cpu(&mut self, cpu: u32) {
        let event = self.sched.get_mut(&cpu).map(std::mem::take).unwrap_or_default();
        if !event.is_empty() {
            self.packet(TracePacket {
                ftrace_events: Some(FtraceEventBundle { cpu: Some(cpu), event }),
                ..Default::default()
            });
        }
    }

    /// The wakeup waiting for its CPU, on `cpu`.
    fn waking(&mut self, wakee: &ThreadInfo, cpu: u32) {
        if let Some((ts, waker)) = self.pending_wake.take() {
            let e = FtraceEvent {
                timestamp: Some(ts),
                pid: Some(waker),
                sched_waking: Some(SchedWaking {
                    comm: Some(wakee.comm.clone()),
                    pid: Some(wakee.tid as i32),
                    success: Some(1),
                    target_cpu: Some(cpu as i32),
                }),
                ..Default::default()
            };
            self.sched_event(cpu, e);
        }
    }

    /// The JVM stops tracks, after the walk.
    fn finish(&mut self) {
        let cpus: Vec<u32> = self.sched.keys().copied().collect();
        for cpu in cpus {
            self.flush_cpu(cpu);
        }
        let windows = pair_windows(std::mem::take(&mut self.windows), &self.window_last);
        let mut named = BTreeSet::new();
        for w in windows {
            if named.insert(w.pid) {
                self.track(TrackDescriptor {
                    uuid: Some(stops_track(w.pid)),
                    parent_uuid: Some(process_track(w.pid)),
                    name: Some("JVM stops (GC, safepoints)".into()),
                    ..Default::default()
                });
            }
            let mut interned = InternedData::default();
            let name = self.name_iid(&format!("{} #{}", window_name(w.cause), w.seq), &mut interned);
            let mut args = vec![arg_u(arg_iid("seq"), w.seq as u64)];
            if w.open {
                args.push(arg_b(arg_iid("open"), true));
            }
            let ev = TrackEvent {
                r#type: Some(SLICE_BEGIN),
                name_iid: Some(name),
                track_uuid: Some(stops_track(w.pid)),
                debug_annotations: args,
                ..Default::default()
            };
            self.event(w.start, ev, interned);
            let end = TrackEvent {
                r#type: Some(SLICE_END),
                track_uuid: Some(stops_track(w.pid)),
                ..Default::default()
            };
            self.event(w.end, end, InternedData::default());
        }
    }
}

impl<W: Write> Visitor for PerfettoWriter<'_, W> {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.pending_wake = None;
        self.syscalls.clear();
    }

    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        match e.event {
            Event::SwitchOut {
                prev_state,
                cpu,
                next_tid,
                ..
            } => {
                self.last_cpu = cpu;
                let ev = FtraceEvent {
                    timestamp: Some(e.ts),
                    pid: Some(t.tid),
                    sched_switch: Some(SchedSwitch {
                        prev_comm: Some(t.comm.clone()),
                        prev_pid: Some(t.tid as i32),
                        prev_state: Some(prev_state as i64),
                        next_comm: Some(self.comm(next_tid)),
                        next_pid: Some(next_tid as i32),
                    }),
                    ..Default::default()
                };
                self.sched_event(cpu, ev);
            }
            Event::SwitchIn { cpu, prev_tid } => {
                self.last_cpu = cpu;
                self.waking(t, cpu);
                // A traced thread's own switch-out wrote this switch already.
                if !self.trace.threads.contains_key(&prev_tid) {
                    let ev = FtraceEvent {
                        timestamp: Some(e.ts),
                        pid: Some(prev_tid),
                        sched_switch: Some(SchedSwitch {
                            prev_comm: Some(self.comm(prev_tid)),
                            prev_pid: Some(prev_tid as i32),
                            prev_state: Some(0),
                            next_comm: Some(t.comm.clone()),
                            next_pid: Some(t.tid as i32),
                        }),
                        ..Default::default()
                    };
                    self.sched_event(cpu, ev);
                }
            }
            Event::Wakeup { waker_tid, .. } => {
                let cpu = self.last_cpu;
                self.waking(t, cpu);
                self.pending_wake = Some((e.ts, waker_tid));
            }
            Event::Window { cause, begin } => {
                let pid = pid_of(self.trace, t);
                self.windows
                    .entry(pid)
                    .or_default()
                    .insert((e.ts, begin, cause as usize, begin));
                let l = self.window_last.entry(pid).or_default();
                *l = (*l).max(t.last_ts);
            }
            _ => {}
        }
    }

    fn enter(&mut self, t: &ThreadInfo, ts: u64, _depth: usize, m: MethodIdx) {
        let mut interned = InternedData::default();
        let name = self.method_iid(m, &mut interned);
        let ev = TrackEvent {
            r#type: Some(SLICE_BEGIN),
            name_iid: Some(name),
            track_uuid: Some(thread_track(t.tid)),
            ..Default::default()
        };
        self.event(ts, ev, interned);
    }

    fn exit(&mut self, t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        let mut interned = InternedData::default();
        let b = &inv.breakdown;
        // The signature's string iid, per method (no lookup by string per call).
        let signature = match self.signature_iids.get(inv.method as usize) {
            Some(&i) if i != 0 => DebugAnnotation {
                name_iid: Some(arg_iid("signature")),
                string_value_iid: Some(i),
                ..Default::default()
            },
            _ => {
                let trace = self.trace;
                let sig = trace
                    .methods
                    .get(inv.method as usize)
                    .map(|m| m.signature.clone())
                    .unwrap_or_default();
                let a = self.string_arg("signature", sig, &mut interned);
                if let Some(slot) = self.signature_iids.get_mut(inv.method as usize) {
                    *slot = a.string_value_iid.unwrap_or(0);
                }
                a
            }
        };
        let mut args = vec![signature, arg_u(arg_iid("cpu_ns"), b.cpu)];
        args.extend(b.off.nonzero().map(|(c, ns)| arg_u(cause_arg_iid(c), ns)));
        for (name, n) in [
            ("voluntary_switches", b.voluntary),
            ("involuntary_switches", b.involuntary),
        ] {
            if n > 0 {
                args.push(arg_u(arg_iid(name), n));
            }
        }
        if b.not_covered > 0 {
            args.push(arg_u(arg_iid("not_covered_ns"), b.not_covered));
        }
        if inv.exception {
            args.push(arg_b(arg_iid("exception"), true));
        }
        if inv.unfinished {
            args.push(arg_b(arg_iid("unfinished"), true));
        }
        let ev = TrackEvent {
            r#type: Some(SLICE_END),
            track_uuid: Some(thread_track(t.tid)),
            debug_annotations: args,
            ..Default::default()
        };
        self.event(inv.exit, ev, interned);
    }

    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if self.syscalls.len() >= 8 {
            self.syscalls.remove(0);
        }
        self.syscalls.push((idx, *sc));
    }

    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, o: &OffCpuInterval) {
        let mut interned = InternedData::default();
        let main = o.split.off.nonzero().max_by_key(|&(_, ns)| ns).map(|(c, _)| c);
        let name = self.name_iid(main.map_or("off-CPU", |c| c.name()), &mut interned);
        let mut args: Vec<DebugAnnotation> = o
            .split
            .off
            .nonzero()
            .map(|(c, ns)| arg_u(cause_arg_iid(c), ns))
            .collect();
        let evidence = match o.evidence {
            Evidence::None | Evidence::Preempted => None,
            Evidence::Syscall(i) => Some(match self.syscalls.iter().rev().find(|(idx, _)| *idx == i) {
                Some((_, sc)) => format!("in {}", describe_syscall(self.trace, sc)),
                None => describe_evidence(self.trace, &o.evidence),
            }),
            e => Some(describe_evidence(self.trace, &e)),
        };
        if let Some(s) = evidence {
            args.push(self.string_arg("evidence", s, &mut interned));
        }
        let mut flow = Vec::new();
        if let Some(w) = o.wake {
            args.push(arg_u(arg_iid("waker_tid"), w.waker_tid as u64));
            if w.waker_tid != 0 && w.waker_tid != t.tid && self.trace.threads.contains_key(&w.waker_tid) {
                self.flow_id += 1;
                flow.push(self.flow_id);
                let mut wi = InternedData::default();
                let wname = self.name_iid("wakes", &mut wi);
                let instant = TrackEvent {
                    r#type: Some(INSTANT),
                    name_iid: Some(wname),
                    track_uuid: Some(state_track(w.waker_tid)),
                    flow_ids: vec![self.flow_id],
                    ..Default::default()
                };
                self.event(w.ts, instant, wi);
            }
        }
        let begin = TrackEvent {
            r#type: Some(SLICE_BEGIN),
            name_iid: Some(name),
            track_uuid: Some(state_track(t.tid)),
            debug_annotations: args,
            terminating_flow_ids: flow,
            ..Default::default()
        };
        self.event(o.start, begin, interned);
        let end = TrackEvent {
            r#type: Some(SLICE_END),
            track_uuid: Some(state_track(t.tid)),
            ..Default::default()
        };
        self.event(o.end, end, InternedData::default());
    }

    fn thread_end(&mut self, t: &ThreadInfo, _totals: &ThreadTotals) {
        let cpu = self.last_cpu;
        self.waking(t, cpu);
    }
}

/// Writes `trace`, read whole, as a Perfetto protobuf trace.
pub fn write_perfetto(trace: &Trace, out: impl Write) -> anyhow::Result<()> {
    let mut w = PerfettoWriter::new(trace, out);
    w.header();
    jtrace_merge::analyze(trace, &mut w);
    finish(w)
}

/// Writes the trace directory `dir` as a Perfetto protobuf trace, streamed
/// within `opts`' memory budget: the same bytes as [`write_perfetto`].
pub fn write_perfetto_streaming(dir: &Path, out: impl Write, opts: &StreamOptions) -> anyhow::Result<()> {
    let (trace, events) = crate::open_streamed(dir, opts)?;
    let mut w = PerfettoWriter::new(&trace, out);
    w.header();
    stream::analyze(&trace, events, &mut w)?;
    finish(w)
}

fn finish<W: Write>(mut w: PerfettoWriter<'_, W>) -> anyhow::Result<()> {
    w.finish();
    if let Some(e) = w.error.take() {
        return Err(e.into());
    }
    w.out.flush()?;
    Ok(())
}

/// The Perfetto format as an [`Exporter`]; it streams.
#[derive(Debug, Clone, Copy, Default)]
pub struct Perfetto;

impl Exporter for Perfetto {
    fn name(&self) -> &'static str {
        "perfetto"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        write_perfetto(trace, out)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, stream: &StreamOptions) -> anyhow::Result<()> {
        write_perfetto_streaming(dir, out, stream)
    }
}

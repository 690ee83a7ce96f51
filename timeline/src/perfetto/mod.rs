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
//! walk produces them, sched events in per-CPU bundles (`sched`);
//! Perfetto sorts by time on import. Each thread is a packet sequence with
//! its own incremental clock and interned names (`sequence`); packets are
//! written by an append-only encoder (`wire`) with the field numbers of
//! `fields`. Its size and speed: BENCHMARKS.md, "Exports against report".

mod fields;
mod sched;
mod sequence;
mod wire;

use crate::export::Exporter;
use crate::model::pid_of;
use crate::windows::{pair_windows, window_name, WindowMarks};
use fields::{event, track, tree, TRACE_PACKET};
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    describe_evidence, describe_syscall, Cause, Event, Evidence, Invocation, MethodIdx, OffCpuInterval, SyscallInfo,
    ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use sched::{Sched, Switch};
use sequence::{arg_string, arg_true, arg_uint, Interner, Packets};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

/// The sequence of the track descriptors; threads' sequences follow.
const HEADER_SEQ: u32 = 1;

/// Track uuids: the tid or pid, then the kind in the low 3 bits (small
/// numbers: an event on another track than its sequence's names it in a
/// varint).
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

/// Argument names; iid = index + 1, then `<cause>_ns` ([`cause_arg`]).
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
const SIGNATURE: usize = 0;
const CPU_NS: usize = 1;
const VOLUNTARY: usize = 2;
const INVOLUNTARY: usize = 3;
const EXCEPTION: usize = 4;
const UNFINISHED: usize = 5;
const NOT_COVERED: usize = 6;
const EVIDENCE: usize = 7;
const WAKER_TID: usize = 8;
const SEQ: usize = 9;
const OPEN: usize = 10;

/// Writes the Perfetto trace as a [`Visitor`] of a walk.
struct PerfettoWriter<'a, W: Write> {
    trace: &'a Trace,
    packets: Packets<W>,
    intern: Interner,
    /// The track event being built, and an off-CPU interval's begin.
    ev: Vec<u8>,
    begin: Vec<u8>,
    sched: Sched,
    /// The last sequence started.
    seq: u32,
    /// The thread's wakeup waiting for the CPU it will run on: (ts, waker).
    pending_wake: Option<(u64, u32)>,
    last_cpu: u32,
    /// The CPU the thread's recorded switch-in put it on, while it runs.
    on_cpu: Option<u32>,
    /// The thread's latest syscalls (what a block's evidence names).
    syscalls: Vec<(u32, SyscallInfo)>,
    flow_id: u64,
    windows: WindowMarks,
    window_last: HashMap<u32, u64>,
}

impl<'a, W: Write> PerfettoWriter<'a, W> {
    fn new(trace: &'a Trace, out: W) -> Self {
        PerfettoWriter {
            trace,
            packets: Packets::new(out),
            intern: Interner::new(trace.methods.len(), ARG_NAMES.len() + Cause::ALL.len()),
            ev: Vec::new(),
            begin: Vec::new(),
            sched: Sched::default(),
            seq: HEADER_SEQ,
            pending_wake: None,
            last_cpu: 0,
            on_cpu: None,
            syscalls: Vec::new(),
            flow_id: 0,
            windows: WindowMarks::new(),
            window_last: HashMap::new(),
        }
    }

    /// The iid of argument `i` of [`ARG_NAMES`], defined on first use.
    fn arg(&mut self, i: usize) -> u64 {
        self.intern.arg(i as u64 + 1, || ARG_NAMES[i].to_string())
    }

    /// The iid of the argument `<cause>_ns`.
    fn cause_arg(&mut self, c: Cause) -> u64 {
        let iid = (ARG_NAMES.len() + c as usize) as u64 + 1;
        self.intern.arg(iid, || format!("{}_ns", c.name()))
    }

    /// Writes the track event built in `ev` at `ts` on the current sequence.
    fn event(&mut self, ts: u64) {
        emit(&mut self.packets, &mut self.intern.pending, ts, &self.ev);
    }

    /// The first packets: process tree and tracks.
    fn header(&mut self) {
        let trace = self.trace;
        let mut pids = BTreeSet::new();
        let b = &mut self.packets.buf;
        let p = wire::open(b, TRACE_PACKET);
        let t = wire::open(b, fields::packet::PROCESS_TREE);
        for th in trace.threads.values() {
            let pid = pid_of(trace, th);
            pids.insert(pid);
            let m = wire::open(b, tree::THREADS);
            wire::uint(b, tree::ID, th.tid as i32 as u64);
            wire::bytes(b, tree::THREAD_NAME, th.display_name().as_bytes());
            wire::uint(b, tree::TGID, pid as i32 as u64);
            wire::close(b, m);
        }
        for &pid in &pids {
            let m = wire::open(b, tree::PROCESSES);
            wire::uint(b, tree::ID, pid as i32 as u64);
            wire::uint(b, tree::PPID, 0);
            if pid == trace.meta.pid {
                for arg in &trace.meta.command {
                    wire::bytes(b, tree::CMDLINE, arg.as_bytes());
                }
            }
            wire::close(b, m);
        }
        wire::close(b, t);
        wire::close(b, p);
        for &pid in &pids {
            let name = if pid == trace.meta.pid && !trace.meta.command.is_empty() {
                trace.meta.command.join(" ")
            } else {
                format!("process {pid}")
            };
            self.track(process_track(pid), None, |b| {
                let m = wire::open(b, track::PROCESS);
                wire::uint(b, track::PID, pid as i32 as u64);
                wire::bytes(b, track::PROCESS_NAME, name.as_bytes());
                wire::close(b, m);
            });
        }
        for t in trace.threads.values() {
            let pid = pid_of(trace, t);
            self.track(thread_track(t.tid), None, |b| {
                let m = wire::open(b, track::THREAD);
                wire::uint(b, track::PID, pid as i32 as u64);
                wire::uint(b, track::TID, t.tid as i32 as u64);
                wire::bytes(b, track::THREAD_NAME, t.display_name().as_bytes());
                wire::close(b, m);
            });
            let name = format!("{} [{}] off-CPU", t.display_name(), t.tid);
            self.track(state_track(t.tid), Some(thread_track(t.tid)), |b| {
                wire::bytes(b, track::NAME, name.as_bytes())
            });
        }
    }

    /// A track descriptor `uuid` under `parent`, with what `body` writes.
    fn track(&mut self, uuid: u64, parent: Option<u64>, body: impl FnOnce(&mut Vec<u8>)) {
        let b = &mut self.packets.buf;
        let p = wire::open(b, TRACE_PACKET);
        wire::uint(b, fields::packet::SEQUENCE_ID, self.seq as u64);
        let d = wire::open(b, fields::packet::TRACK_DESCRIPTOR);
        wire::uint(b, track::UUID, uuid);
        body(b);
        if let Some(parent) = parent {
            wire::uint(b, track::PARENT_UUID, parent);
        }
        wire::close(b, d);
        self.packets.end(p);
    }

    fn comm(&self, tid: u32) -> &'a str {
        match self.trace.threads.get(&tid) {
            Some(t) => &t.comm,
            None if tid == 0 => "swapper",
            None => "",
        }
    }

    /// Writes `cpu`'s sched bundle if it is full.
    fn sched_written(&mut self, cpu: u32) {
        if self.sched.full(cpu) {
            self.sched.flush(cpu, &mut self.packets.buf);
            self.packets.end_raw();
        }
    }

    /// The wakeup waiting for its CPU, on `cpu`.
    fn waking(&mut self, wakee: &ThreadInfo, cpu: u32) {
        if let Some((ts, waker)) = self.pending_wake.take() {
            self.sched.waking(cpu, ts, waker, (wakee.tid, &wakee.comm));
            self.sched_written(cpu);
        }
    }

    /// The JVM stops tracks, after the walk, on a sequence of their own.
    fn finish(&mut self) {
        let windows = pair_windows(std::mem::take(&mut self.windows), &self.window_last);
        self.seq += 1;
        self.packets.start_sequence(self.seq, 0, None);
        self.intern.start_sequence(self.seq);
        let mut named = BTreeSet::new();
        for w in windows {
            let track = stops_track(w.pid);
            if named.insert(w.pid) {
                self.track(track, Some(process_track(w.pid)), |b| {
                    wire::bytes(b, track::NAME, b"JVM stops (GC, safepoints)")
                });
            }
            let name = self.intern.name(&format!("{} #{}", window_name(w.cause), w.seq));
            let (seq, open) = (self.arg(SEQ), self.arg(OPEN));
            self.ev.clear();
            let ev = &mut self.ev;
            wire::uint(ev, event::TYPE, event::SLICE_BEGIN);
            wire::uint(ev, event::NAME_IID, name);
            wire::uint(ev, event::TRACK_UUID, track);
            arg_uint(ev, event::DEBUG_ANNOTATIONS, seq, w.seq as u64);
            if w.open {
                arg_true(ev, event::DEBUG_ANNOTATIONS, open);
            }
            self.event(w.start);
            self.ev.clear();
            wire::uint(&mut self.ev, event::TYPE, event::SLICE_END);
            wire::uint(&mut self.ev, event::TRACK_UUID, track);
            self.event(w.end);
        }
    }
}

impl<W: Write> Visitor for PerfettoWriter<'_, W> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.seq += 1;
        self.packets
            .start_sequence(self.seq, t.first_ts, Some(thread_track(t.tid)));
        self.intern.start_sequence(self.seq);
        self.pending_wake = None;
        self.on_cpu = None;
        self.syscalls.clear();
    }

    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        match e.event {
            // A virtual thread's switches and wakeups are its mounts on
            // carriers, not the kernel's: its tracks show them.
            Event::SwitchOut { .. } | Event::SwitchIn { .. } | Event::Wakeup { .. } if t.virtual_id.is_some() => {}
            Event::SwitchOut {
                prev_state,
                cpu,
                next_tid,
                ..
            } => {
                self.last_cpu = cpu;
                let next = (next_tid, self.comm(next_tid));
                let chained = self.on_cpu.take() == Some(cpu);
                if !(chained && self.sched.compact_switch(cpu, e.ts, prev_state, next)) {
                    let s = Switch {
                        ts: e.ts,
                        prev: (t.tid, &t.comm),
                        prev_state,
                        next,
                    };
                    self.sched.switch(cpu, &s);
                }
                self.sched_written(cpu);
            }
            Event::SwitchIn { cpu, prev_tid } => {
                self.last_cpu = cpu;
                self.on_cpu = Some(cpu);
                self.waking(t, cpu);
                // A traced thread's own switch-out wrote this switch already.
                if !self.trace.threads.contains_key(&prev_tid) {
                    let s = Switch {
                        ts: e.ts,
                        prev: (prev_tid, self.comm(prev_tid)),
                        prev_state: 0,
                        next: (t.tid, &t.comm),
                    };
                    self.sched.switch(cpu, &s);
                    self.sched_written(cpu);
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

    fn enter(&mut self, _t: &ThreadInfo, ts: u64, _depth: usize, m: MethodIdx) {
        let trace = self.trace;
        let name = self.intern.method(m as usize, || {
            trace.methods.get(m as usize).map(|m| m.qualified()).unwrap_or_default()
        });
        self.ev.clear();
        wire::uint(&mut self.ev, event::TYPE, event::SLICE_BEGIN);
        wire::uint(&mut self.ev, event::NAME_IID, name);
        self.event(ts);
    }

    fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        let trace = self.trace;
        let b = &inv.breakdown;
        let m = inv.method as usize;
        let sig = self.intern.signature(m, || {
            trace.methods.get(m).map(|m| m.signature.clone()).unwrap_or_default()
        });
        let (sig_arg, cpu_arg) = (self.arg(SIGNATURE), self.arg(CPU_NS));
        self.ev.clear();
        wire::uint(&mut self.ev, event::TYPE, event::SLICE_END);
        arg_string(&mut self.ev, event::DEBUG_ANNOTATIONS, sig_arg, sig);
        arg_uint(&mut self.ev, event::DEBUG_ANNOTATIONS, cpu_arg, b.cpu);
        for (c, ns) in b.off.nonzero() {
            let a = self.cause_arg(c);
            arg_uint(&mut self.ev, event::DEBUG_ANNOTATIONS, a, ns);
        }
        for (i, n) in [
            (VOLUNTARY, b.voluntary),
            (INVOLUNTARY, b.involuntary),
            (NOT_COVERED, b.not_covered),
        ] {
            if n > 0 {
                let a = self.arg(i);
                arg_uint(&mut self.ev, event::DEBUG_ANNOTATIONS, a, n);
            }
        }
        for (i, on) in [(EXCEPTION, inv.exception), (UNFINISHED, inv.unfinished)] {
            if on {
                let a = self.arg(i);
                arg_true(&mut self.ev, event::DEBUG_ANNOTATIONS, a);
            }
        }
        self.event(inv.exit);
    }

    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if self.syscalls.len() >= 8 {
            self.syscalls.remove(0);
        }
        self.syscalls.push((idx, *sc));
    }

    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, o: &OffCpuInterval) {
        let main = o.split.off.nonzero().max_by_key(|&(_, ns)| ns).map(|(c, _)| c);
        let name = self.intern.name(main.map_or("off-CPU", |c| c.name()));
        let evidence = match o.evidence {
            Evidence::None | Evidence::Preempted => None,
            Evidence::Syscall(i) => Some(match self.syscalls.iter().rev().find(|(idx, _)| *idx == i) {
                Some((_, sc)) => format!("in {}", describe_syscall(self.trace, sc)),
                None => describe_evidence(self.trace, &o.evidence),
            }),
            e => Some(describe_evidence(self.trace, &e)),
        };
        let mut ev = std::mem::take(&mut self.begin);
        ev.clear();
        wire::uint(&mut ev, event::TYPE, event::SLICE_BEGIN);
        wire::uint(&mut ev, event::NAME_IID, name);
        wire::uint(&mut ev, event::TRACK_UUID, state_track(t.tid));
        for (c, ns) in o.split.off.nonzero() {
            let a = self.cause_arg(c);
            arg_uint(&mut ev, event::DEBUG_ANNOTATIONS, a, ns);
        }
        if let Some(s) = evidence {
            let (a, iid) = (self.arg(EVIDENCE), self.intern.string(&s));
            arg_string(&mut ev, event::DEBUG_ANNOTATIONS, a, iid);
        }
        // The waker's instant, with a flow to this interval.
        let mut flow = None;
        if let Some(w) = o.wake {
            let a = self.arg(WAKER_TID);
            arg_uint(&mut ev, event::DEBUG_ANNOTATIONS, a, w.waker_tid as u64);
            if w.waker_tid != 0 && w.waker_tid != t.tid && self.trace.threads.contains_key(&w.waker_tid) {
                self.flow_id += 1;
                wire::fixed64(&mut ev, event::TERMINATING_FLOW_IDS, self.flow_id);
                flow = Some((w.ts, w.waker_tid, self.flow_id));
            }
        }
        // Packets in time order where they can be (shorter timestamps).
        let instant_first = flow.is_some_and(|(ts, _, _)| ts < o.start);
        if !instant_first {
            emit(&mut self.packets, &mut self.intern.pending, o.start, &ev);
        }
        if let Some((ts, waker, id)) = flow {
            let wname = self.intern.name("wakes");
            self.ev.clear();
            wire::uint(&mut self.ev, event::TYPE, event::INSTANT);
            wire::uint(&mut self.ev, event::NAME_IID, wname);
            wire::uint(&mut self.ev, event::TRACK_UUID, state_track(waker));
            wire::fixed64(&mut self.ev, event::FLOW_IDS, id);
            self.event(ts);
        }
        if instant_first {
            emit(&mut self.packets, &mut self.intern.pending, o.start, &ev);
        }
        self.begin = ev;
        self.ev.clear();
        wire::uint(&mut self.ev, event::TYPE, event::SLICE_END);
        wire::uint(&mut self.ev, event::TRACK_UUID, state_track(t.tid));
        self.event(o.end);
    }

    fn thread_end(&mut self, t: &ThreadInfo, _totals: &ThreadTotals) {
        let cpu = self.last_cpu;
        self.waking(t, cpu);
        // A bundle's compact switches are one thread's, in time order.
        self.sched.flush_all(&mut self.packets.buf);
        self.packets.end_raw();
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
    w.packets.finish()?;
    Ok(())
}

/// Writes track event `body` at `ts` on the current sequence, with the
/// definitions `pending` holds.
fn emit<W: Write>(packets: &mut Packets<W>, pending: &mut Vec<u8>, ts: u64, body: &[u8]) {
    let p = packets.begin(ts, pending);
    wire::bytes(&mut packets.buf, fields::packet::TRACK_EVENT, body);
    packets.end(p);
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

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

use crate::evidence::evidence_key;
use crate::export::Exporter;
use crate::process::pid_of;
use crate::windows::{pair_windows, window_name, WindowMarks};
use fields::{event, track, tree, TRACE_PACKET};
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{
    describe_evidence, describe_syscall, Cause, Event, Evidence, Invocation, MethodIdx, OffCpuInterval, SyscallInfo,
    ThreadInfo, ThreadTotals, Timed, Trace, Visitor,
};
use sched::{Sched, Switch};
use sequence::{arg_string, arg_true, arg_uint, Interner, Packets, ARG_ROOM};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::Write;
use std::path::Path;
use wire::Cursor;

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

/// The iid of the argument `<cause>_ns`, after [`ARG_NAMES`].
fn cause_arg_iid(c: Cause) -> u64 {
    (ARG_NAMES.len() + c as usize) as u64 + 1
}

/// Event names every thread may use: "off-CPU", a cause's name, "wakes".
const OFF_CPU_NAME: usize = 0;
const WAKES_NAME: usize = 1 + Cause::ALL.len();
fn cause_name(c: Cause) -> usize {
    1 + c as usize
}

/// Writes the Perfetto trace as a [`Visitor`] of a walk.
struct PerfettoWriter<'a, W: Write> {
    trace: &'a Trace,
    packets: Packets<W>,
    intern: Interner,
    sched: Sched,
    /// The last sequence started.
    seq: u32,
    /// The thread's wakeup waiting for the CPU it will run on: (ts, waker).
    pending_wake: Option<(u64, u32)>,
    last_cpu: u32,
    /// The CPU the thread's recorded switch-in put it on, while it runs.
    on_cpu: Option<u32>,
    /// The thread's latest syscalls (what a block's evidence names).
    syscalls: VecDeque<(u32, SyscallInfo)>,
    flow_id: u64,
    windows: WindowMarks,
    window_last: HashMap<u32, u64>,
}

/// Room for a track event's own fields (type, name, track, flow).
const EVENT_ROOM: usize = 48;

impl<'a, W: Write> PerfettoWriter<'a, W> {
    fn new(trace: &'a Trace, out: W) -> Self {
        PerfettoWriter {
            trace,
            packets: Packets::new(out),
            intern: Interner::new(trace.methods.len(), ARG_NAMES.len() + Cause::ALL.len(), WAKES_NAME + 1),
            sched: Sched::default(),
            seq: HEADER_SEQ,
            pending_wake: None,
            last_cpu: 0,
            on_cpu: None,
            syscalls: VecDeque::new(),
            flow_id: 0,
            windows: WindowMarks::new(),
            window_last: HashMap::new(),
        }
    }

    /// The iid of argument `i` of [`ARG_NAMES`], defined on first use.
    fn arg(&mut self, i: usize) -> u64 {
        self.intern.arg(i as u64 + 1, || ARG_NAMES[i].to_string())
    }

    /// The iid of the argument `<cause>_ns`, defined on first use.
    fn cause_arg(&mut self, c: Cause) -> u64 {
        let iid = cause_arg_iid(c);
        self.intern.arg(iid, || format!("{}_ns", c.name()))
    }

    /// Writes a track event at `ts` on the current sequence; `body` writes
    /// its fields into at most `room` bytes.
    fn event(&mut self, ts: u64, room: usize, body: impl FnOnce(&mut Cursor)) {
        self.packets.track_event(ts, &mut self.intern.pending, room, body);
    }

    /// The first packets: process tree and tracks.
    fn header(&mut self) {
        let trace = self.trace;
        let pids: BTreeSet<u32> = trace.threads.values().map(|t| pid_of(trace, t)).collect();
        let room = 64 * (trace.threads.len() + pids.len())
            + trace.threads.values().map(|t| t.display_name().len()).sum::<usize>()
            + trace.meta.command.iter().map(|a| a.len() + 8).sum::<usize>();
        let mut b = self.packets.buf.cursor(room);
        let p = b.open(TRACE_PACKET);
        let t = b.open(fields::packet::PROCESS_TREE);
        for th in trace.threads.values() {
            let m = b.open(tree::THREADS);
            b.uint(tree::ID, th.tid as i32 as u64);
            b.bytes(tree::THREAD_NAME, th.display_name().as_bytes());
            b.uint(tree::TGID, pid_of(trace, th) as i32 as u64);
            b.close(m);
        }
        for &pid in &pids {
            let m = b.open(tree::PROCESSES);
            b.uint(tree::ID, pid as i32 as u64);
            b.uint(tree::PPID, 0);
            if pid == trace.meta.pid {
                for arg in &trace.meta.command {
                    b.bytes(tree::CMDLINE, arg.as_bytes());
                }
            }
            b.close(m);
        }
        b.close(t);
        b.close(p);
        drop(b);
        for &pid in &pids {
            let name = if pid == trace.meta.pid && !trace.meta.command.is_empty() {
                trace.meta.command.join(" ")
            } else {
                format!("process {pid}")
            };
            self.track(process_track(pid), None, name.len(), |b| {
                let m = b.open(track::PROCESS);
                b.uint(track::PID, pid as i32 as u64);
                b.bytes(track::PROCESS_NAME, name.as_bytes());
                b.close(m);
            });
        }
        for t in trace.threads.values() {
            let pid = pid_of(trace, t);
            let name = t.display_name();
            self.track(thread_track(t.tid), None, name.len(), |b| {
                let m = b.open(track::THREAD);
                b.uint(track::PID, pid as i32 as u64);
                b.uint(track::TID, t.tid as i32 as u64);
                b.bytes(track::THREAD_NAME, name.as_bytes());
                b.close(m);
            });
            let name = format!("{name} [{}] off-CPU", t.tid);
            self.track(state_track(t.tid), Some(thread_track(t.tid)), name.len(), |b| {
                b.bytes(track::NAME, name.as_bytes())
            });
        }
    }

    /// A track descriptor `uuid` under `parent`, with what `body` writes
    /// (a name of `len` bytes and a few fields).
    fn track(&mut self, uuid: u64, parent: Option<u64>, len: usize, body: impl FnOnce(&mut Cursor)) {
        let mut b = self.packets.buf.cursor(128 + len);
        let p = b.open(TRACE_PACKET);
        b.uint(fields::packet::SEQUENCE_ID, self.seq as u64);
        let d = b.open(fields::packet::TRACK_DESCRIPTOR);
        b.uint(track::UUID, uuid);
        body(&mut b);
        if let Some(parent) = parent {
            b.uint(track::PARENT_UUID, parent);
        }
        b.close(d);
        b.close(p);
        drop(b);
        self.packets.written();
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
            self.packets.written();
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
                const NAME: &str = "JVM stops (GC, safepoints)";
                self.track(track, Some(process_track(w.pid)), NAME.len(), |b| {
                    b.bytes(track::NAME, NAME.as_bytes())
                });
            }
            let name = self.intern.name(&format!("{} #{}", window_name(w.cause), w.seq));
            let (seq, open) = (self.arg(SEQ), self.arg(OPEN));
            self.event(w.start, EVENT_ROOM + 2 * ARG_ROOM, |ev| {
                ev.uint(event::TYPE, event::SLICE_BEGIN);
                ev.uint(event::NAME_IID, name);
                ev.uint(event::TRACK_UUID, track);
                arg_uint(ev, seq, w.seq as u64);
                if w.open {
                    arg_true(ev, open);
                }
            });
            self.event(w.end, EVENT_ROOM, |ev| {
                ev.uint(event::TYPE, event::SLICE_END);
                ev.uint(event::TRACK_UUID, track);
            });
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
                // Only if the CPU's previous switch (any thread's) put it
                // there, as the reader infers; lost records break chains.
                let chained = self.on_cpu.take() == Some(cpu) && self.trace.sched_chain.chains(t.tid, e.ts);
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
        self.event(ts, EVENT_ROOM, |ev| {
            ev.uint(event::TYPE, event::SLICE_BEGIN);
            ev.uint(event::NAME_IID, name);
        });
    }

    fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        let trace = self.trace;
        let b = inv.breakdown;
        let m = inv.method as usize;
        let sig = self.intern.signature(m, || {
            trace.methods.get(m).map(|m| m.signature.clone()).unwrap_or_default()
        });
        // Every argument name defined before the packet that uses it.
        let (sig_arg, cpu_arg) = (self.arg(SIGNATURE), self.arg(CPU_NS));
        let mut args = 2;
        for c in Cause::ALL {
            if b.off.get(c) > 0 {
                self.cause_arg(c);
                args += 1;
            }
        }
        let counts = [
            (VOLUNTARY, b.voluntary),
            (INVOLUNTARY, b.involuntary),
            (NOT_COVERED, b.not_covered),
        ];
        let flags = [(EXCEPTION, inv.exception), (UNFINISHED, inv.unfinished)];
        for (i, _) in counts.iter().filter(|(_, n)| *n > 0) {
            self.arg(*i);
            args += 1;
        }
        for (i, _) in flags.iter().filter(|(_, on)| *on) {
            self.arg(*i);
            args += 1;
        }
        self.event(inv.exit, EVENT_ROOM + args * ARG_ROOM, |ev| {
            ev.uint(event::TYPE, event::SLICE_END);
            arg_string(ev, sig_arg, sig);
            arg_uint(ev, cpu_arg, b.cpu);
            for c in Cause::ALL {
                let ns = b.off.get(c);
                if ns > 0 {
                    arg_uint(ev, cause_arg_iid(c), ns);
                }
            }
            for (i, n) in counts {
                if n > 0 {
                    arg_uint(ev, i as u64 + 1, n);
                }
            }
            for (i, on) in flags {
                if on {
                    arg_true(ev, i as u64 + 1);
                }
            }
        });
    }

    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if self.syscalls.len() >= 8 {
            self.syscalls.pop_front();
        }
        self.syscalls.push_back((idx, *sc));
    }

    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, o: &OffCpuInterval) {
        // The main cause (the last of the largest, as max_by_key).
        let mut main = None;
        let mut most = 0;
        let mut args = 0;
        for c in Cause::ALL {
            let ns = o.split.off.get(c);
            if ns > 0 {
                self.cause_arg(c);
                args += 1;
                if ns >= most {
                    (main, most) = (Some(c), ns);
                }
            }
        }
        let name = match main {
            Some(c) => self.intern.fixed(cause_name(c), c.name()),
            None => self.intern.fixed(OFF_CPU_NAME, "off-CPU"),
        };
        let trace = self.trace;
        let evidence = match o.evidence {
            Evidence::None | Evidence::Preempted => None,
            Evidence::Syscall(i) => {
                let sc = self.syscalls.iter().rev().find(|(idx, _)| *idx == i).map(|(_, sc)| sc);
                let key = evidence_key(&o.evidence, sc);
                Some(self.intern.string(key, || match sc {
                    Some(sc) => format!("in {}", describe_syscall(trace, sc)),
                    None => describe_evidence(trace, &o.evidence),
                }))
            }
            e => Some(
                self.intern
                    .string(evidence_key(&e, None), || describe_evidence(trace, &e)),
            ),
        };
        let evidence_arg = evidence.map(|iid| (self.arg(EVIDENCE), iid));
        // The waker, and its instant with a flow to this interval.
        let waker_arg = o.wake.map(|w| (self.arg(WAKER_TID), w.waker_tid));
        let flow = o.wake.and_then(|w| {
            (w.waker_tid != 0 && w.waker_tid != t.tid && trace.threads.contains_key(&w.waker_tid)).then(|| {
                self.flow_id += 1;
                (w.ts, w.waker_tid, self.flow_id)
            })
        });
        let wakes = flow.map(|_| self.intern.fixed(WAKES_NAME, "wakes"));
        let split = o.split.off;
        let begin = |ev: &mut Cursor| {
            ev.uint(event::TYPE, event::SLICE_BEGIN);
            ev.uint(event::NAME_IID, name);
            ev.uint(event::TRACK_UUID, state_track(t.tid));
            for c in Cause::ALL {
                let ns = split.get(c);
                if ns > 0 {
                    arg_uint(ev, cause_arg_iid(c), ns);
                }
            }
            if let Some((a, iid)) = evidence_arg {
                arg_string(ev, a, iid);
            }
            if let Some((a, tid)) = waker_arg {
                arg_uint(ev, a, tid as u64);
            }
            if let Some((_, _, id)) = flow {
                ev.fixed64(event::TERMINATING_FLOW_IDS, id);
            }
        };
        let room = EVENT_ROOM + (args + 2) * ARG_ROOM;
        // Packets in time order where they can be (shorter timestamps).
        let mut begin = Some(begin);
        if let Some((ts, waker, id)) = flow {
            if ts >= o.start {
                self.event(o.start, room, begin.take().expect("not written yet"));
            }
            let wakes = wakes.expect("named with the flow");
            self.event(ts, EVENT_ROOM, |ev| {
                ev.uint(event::TYPE, event::INSTANT);
                ev.uint(event::NAME_IID, wakes);
                ev.uint(event::TRACK_UUID, state_track(waker));
                ev.fixed64(event::FLOW_IDS, id);
            });
        }
        if let Some(begin) = begin {
            self.event(o.start, room, begin);
        }
        self.event(o.end, EVENT_ROOM, |ev| {
            ev.uint(event::TYPE, event::SLICE_END);
            ev.uint(event::TRACK_UUID, state_track(t.tid));
        });
    }

    fn thread_end(&mut self, t: &ThreadInfo, _totals: &ThreadTotals) {
        let cpu = self.last_cpu;
        self.waking(t, cpu);
        // A bundle's compact switches are one thread's, in time order.
        self.sched.flush_all(&mut self.packets.buf);
        self.packets.written();
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

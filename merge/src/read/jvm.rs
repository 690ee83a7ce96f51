//! A JVM stream's records (`jvm-<pid>.bin`: threads, method definitions,
//! entries and exits, blocking states, GC and safepoint windows, JIT and
//! allocation samples) as per-thread events and the trace's tables.

use super::code_records::CodeRecords;
use super::records::RawRecords;
use super::span::{self, Open, Outside, TimeUse};
use super::{words, TraceReader};
use crate::cause::Cause;
use crate::model::event::{Event, MethodIdx, MethodInfo};
use crate::model::tid_map::TidMap;
use crate::printable::{printable, printable_owned};
use jtrace_format::{self as fmt, kind, FileHeader, Payload, RawRecord};
use std::collections::HashMap;
use std::path::Path;

/// What reading one JVM stream keeps between its records.
#[derive(Default)]
struct JvmStream {
    /// Method ids are only unique within one JVM.
    ids: TidMap<MethodIdx, u64>,
    interned: HashMap<MethodInfo, MethodIdx>,
    /// The JVM's pid, from its JVM_START.
    pid: Option<u32>,
    /// Its `java.vm.version`, from its JVM_START.
    vm_version: String,
    /// A stream the agent did not close (JVM killed) ends in zero fill,
    /// where the decoder stops: say so, the rest is a valid prefix. Only
    /// JVM_END says the agent finished: a stream flagged complete but cut
    /// at a record boundary has lost its tail.
    finished: bool,
    /// A record that could not be decoded ended the reading.
    cut: bool,
    /// The latest time, within the recording, of a record read.
    max_ts: u64,
    /// Records whose time lies outside the recording ([`span`]).
    outside: Outside,
    /// The blocks and windows open, where an end left out closes them.
    open: Open,
    /// JVM_LOST: threads, the events they lost and the earliest time.
    lost: (u64, u64, Option<u64>),
    /// Method events whose id had no definition: count, first id.
    undefined: Undefined,
    /// JIT records name methods by raw id, possibly before their
    /// METHOD_DEF: resolved at the end of the stream.
    compiles: Vec<(u64, u64, bool)>,
    /// Allocation samples, whose site is a raw id too: (tid, sample).
    allocs: Vec<(u32, fmt::AllocSample)>,
    /// What names Java frames, resolved at the end too.
    code: CodeRecords,
}

impl JvmStream {
    /// A stream read after the methods `methods` (of earlier streams) are known.
    fn new(methods: &[MethodInfo]) -> Self {
        let mut s = JvmStream::default();
        for (i, m) in methods.iter().enumerate() {
            s.interned.insert(m.clone(), i as MethodIdx);
        }
        s
    }

    /// The method recorded as `id` (counted if undefined).
    #[inline]
    fn method(&mut self, id: u64) -> Option<MethodIdx> {
        self.undefined.method(&self.ids, id)
    }

    /// A METHOD_DEF: its method interned in `methods`, under its id.
    fn define(&mut self, d: fmt::MethodDef, methods: &mut Vec<MethodInfo>) {
        let info = MethodInfo {
            class: printable_owned(d.class),
            name: printable_owned(d.name),
            signature: printable_owned(d.signature),
            native: false,
        };
        let next = methods.len() as MethodIdx;
        let idx = *self.interned.entry(info.clone()).or_insert_with(|| {
            methods.push(info);
            next
        });
        self.ids.insert(d.method, idx);
    }
}

impl TraceReader {
    /// Reads the records of the JVM stream at `path`; a stream the agent did
    /// not finish (a killed JVM, no JVM_END) is read up to its last whole
    /// record, and the trace's losses say so. Where the stream stops
    /// covering a thread (it was not finished, or the agent could not write
    /// the thread's later events) becomes the thread's
    /// [`jvm_until`](crate::ThreadInfo::jvm_until).
    pub(crate) fn read_jvm(&mut self, path: &Path, header: &FileHeader, mut records: impl RawRecords) {
        let mut s = JvmStream::new(&self.trace.methods);
        while let Some(raw) = records.next_raw() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    self.trace.losses.truncated.push(format!("{}: {e}", path.display()));
                    s.cut = true;
                    break;
                }
            };
            let ts = if self.span.contains(raw.ts) {
                s.max_ts = s.max_ts.max(raw.ts);
                raw.ts
            } else {
                match self.outside_recording(&mut s, path, &raw) {
                    Some(ts) => ts,
                    None => continue,
                }
            };
            let tid = self.jvm_tid(path, raw.tid, ts);
            if self.jvm_fast_path(&mut s, tid, ts, &raw) {
                continue;
            }
            match raw.decode() {
                Ok(rec) => {
                    self.trace.jvm_records += 1;
                    self.jvm_record(&mut s, path, tid, ts, rec.payload);
                }
                Err(e) => {
                    self.trace.losses.truncated.push(format!("{}: {e}", path.display()));
                    s.cut = true;
                    break;
                }
            }
        }
        self.jvm_stream_problems(path, header, &s);
        self.end_jvm_stream(path, s);
    }

    /// The thread of a JVM record: a JVM in a pid namespace names its
    /// threads by their tids there; a virtual thread's own records carry
    /// its record tid.
    #[inline]
    fn jvm_tid(&mut self, path: &Path, tid: u32, ts: u64) -> u32 {
        let ts = self.span.clamp(ts);
        self.vthreads.key(path, self.ns.host_tid(path, tid, ts))
    }

    /// A record whose time lies outside the recording, which the JVM cannot
    /// have written ([`span`]): the time to read it with, or `None` to
    /// leave it out. A METHOD_BATCH is read (its events are each looked
    /// at); an event is left out, and the end of a block or window closes
    /// it where it began; a loss's or demotion's time is moved into the
    /// recording; a time not used is not looked at.
    #[cold]
    fn outside_recording(&mut self, s: &mut JvmStream, path: &Path, raw: &RawRecord) -> Option<u64> {
        if raw.kind == kind::METHOD_BATCH {
            return Some(raw.ts);
        }
        let use_ = span::time_use(raw.kind);
        if use_ == TimeUse::Unused {
            return Some(self.span.clamp(raw.ts));
        }
        s.outside.note(self.span, raw.ts, use_);
        if use_ == TimeUse::Clamped {
            return Some(self.span.clamp(raw.ts));
        }
        if let Some((cause, false)) = block_of(raw.kind) {
            let tid = self.jvm_tid(path, raw.tid, raw.ts);
            if let Some(began) = s.open.close_block(tid, cause) {
                let end = Event::Block {
                    cause,
                    begin: false,
                    detail: 0,
                };
                self.push(tid, began, end);
            }
        } else if let Some((cause, false)) = window_of(raw.kind) {
            if let (Some(began), Some(pid)) = (s.open.close_window(cause), s.pid.or_else(|| pid_from_name(path))) {
                self.windows.entry(pid).or_default().push((began, cause, false));
            }
        }
        None
    }

    /// Method entry/exit and the blocking states straight from the bytes
    /// (the class name is looked up, not allocated); false for any other
    /// record (or a payload too short), which is decoded.
    #[inline]
    fn jvm_fast_path(&mut self, s: &mut JvmStream, tid: u32, ts: u64, raw: &RawRecord) -> bool {
        match raw.kind {
            kind::METHOD_ENTRY | kind::METHOD_EXIT => {
                let Some([lo, hi, flags, reserved]) = words(raw.payload) else {
                    return false;
                };
                self.trace.jvm_records += 1;
                let e = fmt::MethodEvent {
                    method: (hi as u64) << 32 | lo as u64,
                    flags,
                    reserved,
                };
                self.method_record(s, tid, ts, raw.kind == kind::METHOD_ENTRY, e);
                true
            }
            kind::METHOD_BATCH => {
                let Some(events) = fmt::batch_events(ts, raw.payload) else {
                    return false;
                };
                self.method_batch(s, tid, ts, events);
                true
            }
            k @ (kind::MONITOR_CONTENDED_ENTER..=kind::SAFEPOINT_END
            | kind::TRACER_WAIT_BEGIN
            | kind::TRACER_WAIT_END) => self.block_bytes(s, tid, ts, k, raw.payload),
            _ => false,
        }
    }

    /// A method entry or exit, dropped (and counted) if its id is undefined.
    #[inline]
    fn method_record(&mut self, s: &mut JvmStream, tid: u32, ts: u64, entry: bool, e: fmt::MethodEvent) {
        match s.method(e.method) {
            Some(method) if entry => self.push(tid, ts, Event::Enter(method)),
            Some(method) => {
                let exception = e.flags & fmt::EXIT_BY_EXCEPTION != 0;
                self.push(tid, ts, Event::Exit { method, exception })
            }
            None => {}
        }
    }

    /// The events of a METHOD_BATCH record whose header time is `ts`; an
    /// event outside the recording is left out (counted).
    #[inline]
    fn method_batch(&mut self, s: &mut JvmStream, tid: u32, ts: u64, events: fmt::BatchEvents) {
        self.trace.jvm_records += events.len() as u64;
        let span = self.span;
        if let (Some(cut), true) = (&mut self.cut, self.vthreads.is_empty()) {
            // A windowed read: the batch's thread looked up once, what the
            // cut keeps pushed after it.
            let mut out = std::mem::take(&mut self.cut_out);
            let mut t = cut.thread(tid);
            for e in events {
                if !span.contains(e.ts) {
                    s.outside.note_batched(span, ts, e.ts);
                    continue;
                }
                s.max_ts = s.max_ts.max(e.ts);
                let Some(method) = s.method(e.method as u64) else {
                    continue;
                };
                t.event(e.ts, method_event(method, e.kind), &mut out);
            }
            for (ts, e) in out.drain(..) {
                self.push_own(tid, ts, e);
            }
            self.cut_out = out;
            return;
        }
        for e in events {
            if !span.contains(e.ts) {
                s.outside.note_batched(span, ts, e.ts);
                continue;
            }
            s.max_ts = s.max_ts.max(e.ts);
            let Some(method) = s.method(e.method as u64) else {
                continue;
            };
            self.push(tid, e.ts, method_event(method, e.kind));
        }
    }

    /// A blocking state's begin or end from its bytes (JvmBlock: u64 arg,
    /// then a u16-length-prefixed class name); false if they are short or
    /// `k` is not a block (a GC or safepoint window is decoded).
    #[inline]
    fn block_bytes(&mut self, s: &mut JvmStream, tid: u32, ts: u64, k: u16, p: &[u8]) -> bool {
        let class = p
            .get(8..10)
            .map(|n| u16::from_le_bytes([n[0], n[1]]) as usize)
            .and_then(|n| p.get(10..10 + n));
        let (Some(class), Some((cause, begin))) = (class, block_of(k)) else {
            return false;
        };
        self.trace.jvm_records += 1;
        let detail = if class == self.last_detail.0.as_slice() {
            self.last_detail.1
        } else {
            let d = self.detail_str(&String::from_utf8_lossy(class));
            self.last_detail = (class.to_vec(), d);
            d
        };
        s.open.block(tid, cause, begin, ts);
        self.push(tid, ts, Event::Block { cause, begin, detail });
        true
    }

    /// A decoded record of thread `tid` at `ts`, by family.
    fn jvm_record(&mut self, s: &mut JvmStream, path: &Path, tid: u32, ts: u64, payload: Payload) {
        match payload {
            // The JVM and its threads.
            Payload::JvmStart(p) => {
                s.pid = Some(self.ns.host_pid(path, p.pid, ts));
                s.vm_version = p.vm_version;
            }
            Payload::ThreadStart(p) => self.java_thread(tid, s.pid, p),
            Payload::ThreadEnd => {
                let th = self.thread(tid);
                th.exited_ts = Some(th.exited_ts.map_or(ts, |t| t.min(ts)));
            }
            Payload::JvmEnd(p) => {
                self.trace.losses.jvm += p.lost_events;
                s.finished = true;
            }
            Payload::AgentError(e) => self.trace.losses.agent_errors.push(e),
            Payload::JvmLost(l) => {
                let th = self.thread(tid);
                th.jvm_until = Some(th.jvm_until.map_or(ts, |u| u.min(ts)));
                self.trace.losses.jvm_lost_threads.push((tid, ts, l.events));
                s.lost.0 += 1;
                s.lost.1 += l.events;
                s.lost.2 = Some(s.lost.2.map_or(ts, |u| u.min(ts)));
            }
            // Methods.
            Payload::MethodDef(d) => s.define(d, &mut self.trace.methods),
            Payload::MethodEntry(e) => self.method_record(s, tid, ts, true, e),
            Payload::MethodExit(e) => self.method_record(s, tid, ts, false, e),
            Payload::MethodTally(k, t) => self.method_tally(&s.ids, ts, k, t),
            // Code, and allocation samples: resolved at the stream's end.
            Payload::Compiled(load, c) => {
                s.compiles.push((c.method, ts, load));
                s.code.compiled.push((ts, load, c));
            }
            Payload::CodeBlob(b) => s.code.blobs.push(b),
            Payload::CompiledInline(c) => s.code.inline.push((ts, c)),
            Payload::MethodAddrs(m) => s.code.methods.extend(m.methods.into_iter().map(|(a, id)| (a, id, ts))),
            Payload::NativeBind(b) => s.code.natives.push((b.method, b.name)),
            Payload::Alloc(a) => s.allocs.push((tid, a)),
            // Blocking states, GC and safepoint windows.
            Payload::Jvm(k, b) => {
                if let Some((cause, begin)) = block_of(k) {
                    let detail = self.detail(b.class);
                    s.open.block(tid, cause, begin, ts);
                    self.push(tid, ts, Event::Block { cause, begin, detail });
                } else if let (Some((cause, begin)), Some(pid)) = (window_of(k), s.pid.or_else(|| pid_from_name(path)))
                {
                    s.open.window(cause, begin, ts);
                    self.windows.entry(pid).or_default().push((ts, cause, begin));
                }
            }
            _ => {}
        }
    }

    /// A THREAD_START: the Java thread's name, group, parent and process.
    fn java_thread(&mut self, tid: u32, pid: Option<u32>, p: fmt::ThreadStart) {
        let th = self.thread(tid);
        // HotSpot re-attaches the finished main thread as "DestroyJavaVM" on
        // the same tid: keep the first name.
        if th.java_name.is_some() {
            return;
        }
        th.java_name = Some(printable_owned(p.name));
        th.group = printable_owned(p.group);
        th.parent = printable_owned(p.parent);
        th.daemon = p.daemon != 0;
        if let Some(pid) = pid {
            th.tgid = pid;
        }
    }

    /// A method demoted, found trivial, or its short calls not written.
    fn method_tally(&mut self, ids: &TidMap<MethodIdx, u64>, ts: u64, k: u16, t: fmt::MethodTally) {
        let Some(&method) = ids.get(&t.method) else {
            return;
        };
        if k == kind::METHOD_DEMOTED {
            self.trace.demoted.push(crate::model::trace::Demotion {
                method,
                ts,
                calls: t.calls,
                rate_per_s: t.rate_per_s,
                mean_ns: t.mean_ns,
            });
        } else if k == kind::METHOD_TRIVIAL {
            self.trace.trivial.insert(method);
        } else {
            let e = self.trace.short_dropped.entry(method).or_default();
            e.1 = (e.0 * e.1 + t.calls * t.mean_ns)
                .checked_div(e.0 + t.calls)
                .unwrap_or(0);
            e.0 += t.calls;
        }
    }

    /// What the trace's losses say of the stream: undefined method ids,
    /// no end record, events the agent could not write, times outside the
    /// recording.
    fn jvm_stream_problems(&mut self, path: &Path, header: &FileHeader, s: &JvmStream) {
        if let Some(p) = self.outside_problem(&s.outside) {
            self.trace.losses.outside_recording += s.outside.total();
            self.trace.losses.truncated.push(format!("{}: {p}", path.display()));
        }
        if let Undefined {
            events: n,
            first: Some(first),
        } = s.undefined
        {
            self.trace.losses.truncated.push(format!(
                "{}: {n} method event(s) used a method id before its definition (first: {first:#x})",
                path.display()
            ));
        }
        if !s.finished && !s.cut {
            let why = if self.trace.meta.snapshot_ns.is_some() {
                "a snapshot taken while the JVM ran (`jtrace dump`): the stream is read up to its last \
                 record then"
            } else if header.flags & fmt::STREAM_COMPLETE != 0 {
                "the JVM stream is marked complete but has no end record (JVM_END): it was cut short; \
                 read up to its last whole record"
            } else {
                "the JVM stream was not finished (no JVM_END: the JVM was killed or crashed); \
                 read up to its last written record"
            };
            self.trace.losses.truncated.push(format!("{}: {why}", path.display()));
        }
        if let (threads, events, Some(first)) = s.lost {
            self.trace.losses.truncated.push(format!(
                "{}: the agent could not write {events} event(s) of {threads} thread(s) from +{} ms on (its \
                 stream could not grow: disk full?); their invocations open then are unfinished there",
                path.display(),
                super::ms(first.saturating_sub(self.trace.meta.start_monotonic_ns))
            ));
        }
    }

    /// What the trace's problems say of a stream's records outside the
    /// recording (none if it had none).
    fn outside_problem(&self, o: &Outside) -> Option<String> {
        if o.total() == 0 {
            return None;
        }
        let start = self.trace.meta.start_monotonic_ns;
        let at = |ts: u64| match ts.checked_sub(start) {
            Some(d) => format!("+{} ms", super::ms(d)),
            None => format!("-{} ms", super::ms(start - ts)),
        };
        let mut sides = Vec::new();
        if let Some(e) = o.earliest {
            sides.push(format!("{} before its start (from {})", o.before, at(e)));
        }
        if let Some(l) = o.latest {
            sides.push(format!("{} after its end (up to {})", o.after, at(l)));
        }
        let jumped = match o.jumped {
            0 => String::new(),
            n => format!("; {n} of them method events that a batch's time deltas carried past the end"),
        };
        let dated = match o.total() - o.left_out {
            0 => String::new(),
            n => format!(", {n} (lost events, demotions) are dated at the recording's nearest edge"),
        };
        Some(format!(
            "{} record(s) carry a time outside the recording ({} to {}): {}{jumped}. A JVM writes no such \
             time (the stream is damaged or forged): none is given time; {} event(s) among them are left out \
             (a block or GC whose end is among them ends where it began){dated}",
            o.total(),
            at(self.span.from),
            at(self.span.to),
            sides.join(", "),
            o.left_out,
        ))
    }

    /// At the stream's end: its threads' coverage, and the tables whose
    /// records named methods by id (allocation sites, code, JIT history).
    fn end_jvm_stream(&mut self, path: &Path, s: JvmStream) {
        let pid = s.pid.or_else(|| pid_from_name(path));
        if !s.finished || s.cut {
            // Every Java thread of this JVM is covered up to the stream's end at most.
            for th in self.trace.threads.values_mut() {
                if th.java_name.is_some() && Some(th.tgid) == pid {
                    th.jvm_until = Some(th.jvm_until.map_or(s.max_ts, |u| u.min(s.max_ts)));
                }
            }
        }
        let ids = s.ids;
        for (tid, a) in s.allocs {
            let site = (a.method != 0).then(|| ids.get(&a.method).copied()).flatten();
            let c = self.trace.allocations.entry((tid, a.class, site, a.line)).or_default();
            c.samples += 1;
            c.bytes += a.size;
        }
        if let Some(pid) = pid {
            if !s.code.is_empty() {
                let jvm = self.trace.stacks.jvms.entry(pid).or_default();
                s.code.resolve(jvm, |id| ids.get(&id).copied());
            }
            self.trace.jvm_pids.push(pid);
            if !s.vm_version.is_empty() {
                self.trace.jvm_versions.insert(pid, s.vm_version);
            }
            if !s.compiles.is_empty() {
                let resolved = s
                    .compiles
                    .iter()
                    .filter_map(|&(id, ts, load)| Some((*ids.get(&id)?, ts, load)))
                    .collect();
                self.trace.jit.add(pid, resolved);
            }
        }
    }

    /// The index of `s` in [`Trace::details`](crate::Trace::details).
    /// Interned: the table grows with the number of distinct strings (monitor
    /// and blocker classes), not with the number of events.
    pub(super) fn detail(&mut self, s: String) -> u32 {
        self.detail_str(&s)
    }

    /// [`TraceReader::detail`] of a borrowed string: allocates only for a new one.
    fn detail_str(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        if let Some(&i) = self.detail_ids.get(s) {
            return i;
        }
        self.trace.details.push(printable(s).into_owned());
        let i = (self.trace.details.len() - 1) as u32;
        self.detail_ids.insert(s.to_owned(), i);
        i
    }
}

/// Method events whose id had no definition (one message per stream, not
/// one per event).
#[derive(Default)]
struct Undefined {
    events: u64,
    first: Option<u64>,
}

impl Undefined {
    /// The method recorded as `id`, or `None`, counted, if it has no
    /// definition.
    #[inline]
    fn method(&mut self, ids: &TidMap<MethodIdx, u64>, id: u64) -> Option<MethodIdx> {
        let m = ids.get(&id).copied();
        if m.is_none() {
            self.events += 1;
            self.first.get_or_insert(id);
        }
        m
    }
}

/// A batched method event as the walk's event.
#[inline]
fn method_event(method: MethodIdx, kind: fmt::BatchedKind) -> Event {
    match kind {
        fmt::BatchedKind::Entry => Event::Enter(method),
        k => Event::Exit {
            method,
            exception: k == fmt::BatchedKind::ExitByException,
        },
    }
}

/// The blocking state a JVM kind begins or ends.
fn block_of(k: u16) -> Option<(Cause, bool)> {
    match k {
        kind::MONITOR_CONTENDED_ENTER => Some((Cause::Monitor, true)),
        kind::MONITOR_CONTENDED_ENTERED => Some((Cause::Monitor, false)),
        kind::MONITOR_WAIT => Some((Cause::Wait, true)),
        kind::MONITOR_WAITED => Some((Cause::Wait, false)),
        kind::PARK_BEGIN => Some((Cause::Park, true)),
        kind::PARK_END => Some((Cause::Park, false)),
        kind::SLEEP_BEGIN => Some((Cause::Sleep, true)),
        kind::SLEEP_END => Some((Cause::Sleep, false)),
        kind::TRACER_WAIT_BEGIN => Some((Cause::Tracer, true)),
        kind::TRACER_WAIT_END => Some((Cause::Tracer, false)),
        _ => None,
    }
}

/// The GC or safepoint window a JVM kind begins or ends.
fn window_of(k: u16) -> Option<(Cause, bool)> {
    match k {
        kind::GC_START => Some((Cause::Gc, true)),
        kind::GC_END => Some((Cause::Gc, false)),
        kind::SAFEPOINT_BEGIN => Some((Cause::Safepoint, true)),
        kind::SAFEPOINT_END => Some((Cause::Safepoint, false)),
        _ => None,
    }
}

/// The pid in a JVM stream's file name (`jvm-<pid>.bin`).
pub(super) fn pid_from_name(path: &Path) -> Option<u32> {
    path.file_stem()?
        .to_str()?
        .strip_prefix(fmt::JVM_FILE_PREFIX)?
        .parse()
        .ok()
}

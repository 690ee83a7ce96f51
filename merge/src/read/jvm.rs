//! A JVM stream's records (`jvm-<pid>.bin`: threads, method definitions,
//! entries and exits, blocking states, GC and safepoint windows, JIT and
//! allocation samples) as per-thread events and the trace's tables.

use super::records::RawRecords;
use super::{words, TraceReader};
use crate::cause::Cause;
use crate::event::{Event, MethodIdx, MethodInfo};
use crate::stacks::{Blob, CompiledCode, JvmCode};
use crate::tid_map::TidMap;
use jtrace_format::{self as fmt, kind, FileHeader, Payload};
use std::collections::HashMap;
use std::path::Path;

impl TraceReader {
    /// Reads the records of the JVM stream at `path`; a stream the agent did
    /// not finish (a killed JVM, no JVM_END) is read up to its last whole
    /// record, and the trace's losses say so. Where the stream stops
    /// covering a thread (it was not finished, or the agent could not write
    /// the thread's later events) becomes the thread's
    /// [`jvm_until`](crate::ThreadInfo::jvm_until).
    pub(crate) fn read_jvm(&mut self, path: &Path, header: &FileHeader, mut records: impl RawRecords) {
        // Method ids are only unique within one JVM.
        let mut ids: TidMap<MethodIdx, u64> = Default::default();
        let mut interned: HashMap<MethodInfo, MethodIdx> = HashMap::new();
        for (i, m) in self.trace.methods.iter().enumerate() {
            interned.insert(m.clone(), i as MethodIdx);
        }
        let mut jvm_pid = None;
        // A stream the agent did not close (JVM killed) ends in zero fill,
        // where the decoder stops: say so, the rest is a valid prefix. Only
        // JVM_END says the agent finished: a stream flagged complete but cut
        // at a record boundary has lost its tail.
        let mut finished = false;
        // A record that could not be decoded ended the reading.
        let mut cut = false;
        let mut max_ts = 0u64;
        // JVM_LOST: threads, the events they lost and the earliest time.
        let mut lost: (u64, u64, Option<u64>) = (0, 0, None);
        // Method events whose id had no definition: count, first id.
        let mut undefined = Undefined::default();
        // JIT records name methods by raw id, possibly before their
        // METHOD_DEF: resolved at the end of the stream.
        let mut compiles: Vec<(u64, u64, bool)> = Vec::new();
        // Allocation samples, whose site is a raw id too: (tid, sample).
        let mut allocs: Vec<(u32, fmt::AllocSample)> = Vec::new();
        // What names Java frames, resolved at the end too.
        let mut code = CodeRecords::default();
        while let Some(raw) = records.next_raw() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    self.trace.losses.truncated.push(format!("{}: {e}", path.display()));
                    cut = true;
                    break;
                }
            };
            // A virtual thread's own records carry its record tid.
            let (tid, ts) = (self.vthreads.key(path, raw.tid), raw.ts);
            max_ts = max_ts.max(ts);
            // Fast paths: method entry/exit and the blocking states straight
            // from the bytes (the class name is looked up, not allocated).
            match raw.kind {
                kind::METHOD_ENTRY | kind::METHOD_EXIT => {
                    if let Some([lo, hi, flags, _]) = words(raw.payload) {
                        self.trace.jvm_records += 1;
                        let id = (hi as u64) << 32 | lo as u64;
                        match undefined.method(&ids, id) {
                            Some(method) if raw.kind == kind::METHOD_ENTRY => self.push(tid, ts, Event::Enter(method)),
                            Some(method) => {
                                let exception = flags & fmt::EXIT_BY_EXCEPTION != 0;
                                self.push(tid, ts, Event::Exit { method, exception })
                            }
                            None => {}
                        }
                        continue;
                    }
                }
                kind::METHOD_BATCH => {
                    if let Some(events) = fmt::batch_events(ts, raw.payload) {
                        self.trace.jvm_records += events.len() as u64;
                        if let (Some(cut), true) = (&mut self.cut, self.vthreads.is_empty()) {
                            // A windowed read: the batch's thread looked
                            // up once, what the cut keeps pushed after it.
                            let mut out = std::mem::take(&mut self.cut_out);
                            let mut t = cut.thread(tid);
                            for e in events {
                                max_ts = max_ts.max(e.ts);
                                let Some(method) = undefined.method(&ids, e.method as u64) else {
                                    continue;
                                };
                                t.event(e.ts, method_event(method, e.kind), &mut out);
                            }
                            for (ts, e) in out.drain(..) {
                                self.push_own(tid, ts, e);
                            }
                            self.cut_out = out;
                            continue;
                        }
                        for e in events {
                            max_ts = max_ts.max(e.ts);
                            let Some(method) = undefined.method(&ids, e.method as u64) else {
                                continue;
                            };
                            self.push(tid, e.ts, method_event(method, e.kind));
                        }
                        continue;
                    }
                }
                k @ (kind::MONITOR_CONTENDED_ENTER..=kind::SAFEPOINT_END
                | kind::TRACER_WAIT_BEGIN
                | kind::TRACER_WAIT_END) => {
                    // JvmBlock: u64 arg, then a u16-length-prefixed string.
                    let p = raw.payload;
                    let class = p
                        .get(8..10)
                        .map(|n| u16::from_le_bytes([n[0], n[1]]) as usize)
                        .and_then(|n| p.get(10..10 + n));
                    if let (Some(class), Some((cause, begin))) = (class, block_of(k)) {
                        self.trace.jvm_records += 1;
                        let detail = if class == self.last_detail.0.as_slice() {
                            self.last_detail.1
                        } else {
                            let d = self.detail_str(&String::from_utf8_lossy(class));
                            self.last_detail = (class.to_vec(), d);
                            d
                        };
                        self.push(tid, ts, Event::Block { cause, begin, detail });
                        continue;
                    }
                }
                _ => {}
            }
            let rec = match raw.decode() {
                Ok(r) => r,
                Err(e) => {
                    self.trace.losses.truncated.push(format!("{}: {e}", path.display()));
                    cut = true;
                    break;
                }
            };
            self.trace.jvm_records += 1;
            match rec.payload {
                Payload::JvmStart(p) => jvm_pid = Some(p.pid),
                Payload::ThreadStart(p) => {
                    let th = self.thread(tid);
                    // HotSpot re-attaches the finished main thread as
                    // "DestroyJavaVM" on the same tid: keep the first name.
                    if th.java_name.is_some() {
                        continue;
                    }
                    th.java_name = Some(p.name);
                    th.group = p.group;
                    th.parent = p.parent;
                    th.daemon = p.daemon != 0;
                    if let Some(pid) = jvm_pid {
                        th.tgid = pid;
                    }
                }
                Payload::ThreadEnd => {
                    let th = self.thread(tid);
                    th.exited_ts = Some(th.exited_ts.map_or(ts, |s| s.min(ts)));
                }
                Payload::MethodDef(d) => {
                    let info = MethodInfo {
                        class: d.class,
                        name: d.name,
                        signature: d.signature,
                        native: false,
                    };
                    let next = self.trace.methods.len() as MethodIdx;
                    let idx = *interned.entry(info.clone()).or_insert_with(|| {
                        self.trace.methods.push(info);
                        next
                    });
                    ids.insert(d.method, idx);
                }
                Payload::MethodEntry(e) | Payload::MethodExit(e) => {
                    let entry = matches!(rec.payload, Payload::MethodEntry(_));
                    match undefined.method(&ids, e.method) {
                        Some(method) if entry => self.push(tid, ts, Event::Enter(method)),
                        Some(method) => {
                            let exception = e.flags & fmt::EXIT_BY_EXCEPTION != 0;
                            self.push(tid, ts, Event::Exit { method, exception })
                        }
                        None => {}
                    }
                }
                Payload::JvmEnd(p) => {
                    self.trace.losses.jvm += p.lost_events;
                    finished = true;
                }
                Payload::AgentError(s) => self.trace.losses.agent_errors.push(s),
                Payload::JvmLost(l) => {
                    let th = self.thread(tid);
                    th.jvm_until = Some(th.jvm_until.map_or(ts, |u| u.min(ts)));
                    self.trace.losses.jvm_lost_threads.push((tid, ts, l.events));
                    lost.0 += 1;
                    lost.1 += l.events;
                    lost.2 = Some(lost.2.map_or(ts, |u| u.min(ts)));
                }
                Payload::MethodTally(k, t) => {
                    if let Some(&method) = ids.get(&t.method) {
                        if k == kind::METHOD_DEMOTED {
                            self.trace.demoted.push(crate::trace::Demotion {
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
                }
                Payload::Compiled(load, c) => {
                    compiles.push((c.method, ts, load));
                    code.compiled.push((ts, load, c));
                }
                Payload::CodeBlob(b) => code.blobs.push(b),
                Payload::CompiledInline(c) => code.inline.push((ts, c)),
                Payload::MethodAddrs(m) => code.methods.extend(m.methods.into_iter().map(|(a, id)| (a, id, ts))),
                Payload::Alloc(a) => allocs.push((tid, a)),
                Payload::Jvm(k, b) => {
                    let block = block_of(k);
                    let window = match k {
                        kind::GC_START => Some((Cause::Gc, true)),
                        kind::GC_END => Some((Cause::Gc, false)),
                        kind::SAFEPOINT_BEGIN => Some((Cause::Safepoint, true)),
                        kind::SAFEPOINT_END => Some((Cause::Safepoint, false)),
                        _ => None,
                    };
                    if let Some((cause, begin)) = block {
                        let detail = self.detail(b.class);
                        self.push(tid, ts, Event::Block { cause, begin, detail });
                    } else if let (Some((cause, begin)), Some(pid)) = (window, jvm_pid.or_else(|| pid_from_name(path)))
                    {
                        self.windows.entry(pid).or_default().push((ts, cause, begin));
                    }
                }
                _ => {}
            }
        }
        if let Undefined {
            events: n,
            first: Some(first),
        } = undefined
        {
            self.trace.losses.truncated.push(format!(
                "{}: {n} method event(s) used a method id before its definition (first: {first:#x})",
                path.display()
            ));
        }
        if !finished && !cut {
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
        if let (threads, events, Some(first)) = lost {
            self.trace.losses.truncated.push(format!(
                "{}: the agent could not write {events} event(s) of {threads} thread(s) from +{} ms on (its \
                 stream could not grow: disk full?); their invocations open then are unfinished there",
                path.display(),
                super::ms(first.saturating_sub(self.trace.meta.start_monotonic_ns))
            ));
        }
        let pid = jvm_pid.or_else(|| pid_from_name(path));
        if !finished || cut {
            // Every Java thread of this JVM is covered up to the stream's end at most.
            for th in self.trace.threads.values_mut() {
                if th.java_name.is_some() && Some(th.tgid) == pid {
                    th.jvm_until = Some(th.jvm_until.map_or(max_ts, |u| u.min(max_ts)));
                }
            }
        }
        for (tid, a) in allocs {
            let site = (a.method != 0).then(|| ids.get(&a.method).copied()).flatten();
            let c = self.trace.allocations.entry((tid, a.class, site, a.line)).or_default();
            c.samples += 1;
            c.bytes += a.size;
        }
        if let Some(pid) = pid {
            if !code.is_empty() {
                let jvm = self.trace.stacks.jvms.entry(pid).or_default();
                code.resolve(jvm, |id| ids.get(&id).copied());
            }
            self.trace.jvm_pids.push(pid);
            if !compiles.is_empty() {
                let resolved = compiles
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
        self.trace.details.push(s.to_owned());
        let i = (self.trace.details.len() - 1) as u32;
        self.detail_ids.insert(s.to_owned(), i);
        i
    }
}

/// A JVM stream's records about code, kept until its method ids are all
/// defined (a METHOD_DEF may follow the record that uses its id).
#[derive(Default)]
struct CodeRecords {
    compiled: Vec<(u64, bool, fmt::CompiledMethod)>,
    inline: Vec<(u64, fmt::CompiledInline)>,
    blobs: Vec<fmt::CodeBlob>,
    /// (`Method*`, method id, when described).
    methods: Vec<(u64, u64, u64)>,
}

/// A compiled method's tier and, per pc, its inlining chain (innermost first).
type TierAndInlining = (u32, Vec<(u64, Vec<Option<MethodIdx>>)>);

impl CodeRecords {
    fn is_empty(&self) -> bool {
        self.compiled.is_empty() && self.blobs.is_empty() && self.methods.is_empty()
    }

    /// Into the JVM's code tables, naming methods with `method`.
    fn resolve(self, jvm: &mut JvmCode, method: impl Fn(u64) -> Option<MethodIdx>) {
        // COMPILED_INLINE goes with the COMPILED_METHOD_LOAD of the same
        // code address and time (one callback writes both): by address
        // alone, code put where unloaded code was would take the old
        // code's inlining too.
        let mut inline: HashMap<(u64, u64), TierAndInlining> = HashMap::new();
        for (ts, c) in self.inline {
            let e = inline.entry((c.code_addr, ts)).or_default();
            e.0 = c.tier;
            e.1.extend(c.pcs.into_iter().map(|p| {
                let chain = p.methods.iter().map(|&m| method(m)).collect();
                (p.pc, chain)
            }));
        }
        for (ts, load, c) in self.compiled {
            if load {
                let (tier, mut pcs) = inline.remove(&(c.code_addr, ts)).unwrap_or_default();
                pcs.sort_by_key(|p| p.0);
                let code = CompiledCode {
                    method: method(c.method),
                    tier,
                    inline: pcs,
                };
                jvm.compiled.load(c.code_addr, u64::from(c.code_size), ts, code);
            } else {
                jvm.compiled.unload(c.code_addr, ts);
            }
        }
        for b in self.blobs {
            jvm.blobs.push(Blob {
                start: b.start,
                end: b.start + u64::from(b.size),
                interpreter: b.kind == fmt::CODE_INTERPRETER,
                name: b.name,
            });
        }
        for (addr, id, ts) in self.methods {
            if let Some(m) = method(id) {
                jvm.methods.describe(addr, ts, m);
            }
        }
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

/// The pid in a JVM stream's file name (`jvm-<pid>.bin`).
pub(super) fn pid_from_name(path: &Path) -> Option<u32> {
    path.file_stem()?
        .to_str()?
        .strip_prefix(fmt::JVM_FILE_PREFIX)?
        .parse()
        .ok()
}

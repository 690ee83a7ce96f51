//! Reading a trace directory: the kernel and JVM streams' records turned
//! into per-thread events and the trace's tables.
//!
//! [`Trace::open`] keeps every thread's events in memory;
//! [`stream::open`](crate::stream::open) sends them to the external sort
//! ([`Sorter`]) instead. Both read the streams with the same decoders
//! ([`kernel`], [`jvm`]), so both see the same events in the same order.
//! A JVM in a pid namespace has its threads' tids turned into host tids
//! first ([`pid_ns`]). A JVM record whose time lies outside the recording
//! is never given time ([`span`]).

mod code_records;
pub(crate) mod cut;
mod jvm;
mod kernel;
pub(crate) mod pid_ns;
pub(crate) mod records;
mod span;
pub(crate) mod streams;
mod vthreads;

use crate::cause::Cause;
use crate::meta::Meta;
use crate::model::event::{Event, MethodIdx, SyscallInfo, ThreadInfo, Timed};
use crate::model::tid_map::TidMap;
use crate::model::trace::Trace;
use crate::sort::spill::Sorter;
use jtrace_format as fmt;
use pid_ns::PidNamespaces;
use span::Span;
use std::collections::HashMap;
use std::path::Path;
use streams::{Chain, StreamFiles};
use vthreads::VirtualThreads;

/// A trace being read: its tables, plus what the decoders keep between
/// records.
#[derive(Default)]
pub(crate) struct TraceReader {
    /// The trace being filled.
    pub(crate) trace: Trace,
    /// Streaming reads ([`crate::stream::open`]): events go to the external
    /// sort instead of `trace.events`, syscall records travel with their
    /// events.
    pub(crate) sorter: Option<Box<Sorter>>,
    /// Scans ([`Trace::scan`]): events are not kept, only each thread's
    /// first and last time.
    scan: Option<TidMap<(u64, u64)>>,
    /// GC / safepoint windows per JVM pid, spread into its Java threads
    /// after reading.
    pub(crate) windows: HashMap<u32, Vec<(u64, Cause, bool)>>,
    /// Library-call probe names by probe id.
    probes: HashMap<u32, MethodIdx>,
    /// Index of each string in `trace.details`.
    detail_ids: HashMap<String, u32>,
    /// The tgid last set from a switch record, per thread.
    tgids: TidMap<u32>,
    /// Per thread: the at-switch SYSCALL record whose block has not ended yet.
    open_blocks: TidMap<u32>,
    /// The raw bytes of the last class name a fast-path JVM block record
    /// carried and its detail index: blocks come in begin/end pairs of one
    /// class, so most lookups are this one.
    last_detail: (Vec<u8>, u32),
    /// The time the JVM streams' records may carry: the recording's
    /// ([`span`]).
    span: Span,
    /// The latest time of a kernel record read (0: none).
    kernel_max_ts: u64,
    /// Why the kernel stream was not read to its end, if it was not.
    kernel_cut: Option<String>,
    /// Where the streams' coverage begins, when the oldest chunks of a ring
    /// recording are gone: the latest first chunk's start of any stream.
    window_from: Option<u64>,
    /// The virtual threads' mounts on carriers (empty without any).
    pub(crate) vthreads: VirtualThreads,
    /// JVMs in pid namespaces: their threads' host tids ([`pid_ns`]).
    pub(crate) ns: PidNamespaces,
    /// A carrier's syscall copied to the virtual thread mounted then: the
    /// carrier's syscall index -> (virtual thread, its copy's index).
    vsyscalls: TidMap<(u32, u32)>,
    /// A block's detail -> the detail of its copy on a pinned virtual thread.
    pinned_details: TidMap<u32>,
    /// Streaming reads for a time window: the calls left out ([`cut`]).
    pub(crate) cut: Option<Box<cut::CallCut>>,
    /// The events the cut passes on for one method event or batch (reused).
    pub(crate) cut_out: Vec<(u64, Event)>,
}

impl Trace {
    /// Reads a trace directory written by `jtrace run` (or `record`,
    /// `attach`), every thread's events in memory. A trace of any length is
    /// better walked with [`stream::open`](crate::stream::open), in memory
    /// bounded by a budget.
    pub fn open(dir: &Path) -> anyhow::Result<Trace> {
        let mut r = TraceReader::begin(dir)?;
        let (kernel, jvms) = streams::list(dir)?;
        r.ns = PidNamespaces::read(&kernel, &jvms);
        r.add_virtual_threads(&jvms)?;
        r.read_streams(&kernel, &jvms, |_| {})?;
        let kpath = kernel.path;
        let kernel_until = r.kernel_coverage(&kpath);
        r.spread_windows();
        r.trace.stacks.finish();
        let window_from = r.window_from;
        let mut t = r.trace;
        for (tid, evs) in t.events.iter_mut() {
            // Stable sort: records of one thread from one stream keep their
            // order when timestamps tie.
            evs.sort_by_key(|e| e.ts);
            if let (Some(first), Some(last)) = (evs.first(), evs.last()) {
                let th = t.threads.entry(*tid).or_insert_with(|| ThreadInfo {
                    tid: *tid,
                    ..Default::default()
                });
                th.first_ts = first.ts;
                th.last_ts = last.ts;
            }
        }
        t.set_kernel_coverage(kernel_until);
        t.set_window(window_from);
        Ok(t)
    }

    /// Reads a trace directory's tables only: every table [`Trace::open`]
    /// fills (threads with their first and last times, methods, losses,
    /// counts, metadata) but no events and no syscall table, in memory
    /// bounded by the number of threads, methods and strings, not by the
    /// trace's length (the streams are read record by record, mapped and
    /// released behind the reader when finished). What `jtrace info` shows.
    pub fn scan(dir: &Path) -> anyhow::Result<Trace> {
        let mut r = TraceReader::begin(dir)?;
        r.scan = Some(TidMap::default());
        let (kernel, jvms) = streams::list(dir)?;
        r.ns = PidNamespaces::read(&kernel, &jvms);
        // The virtual threads too, so that `info` counts the threads the
        // report lists.
        r.add_virtual_threads(&jvms)?;
        r.read_streams(&kernel, &jvms, |_| {})?;
        let kernel_until = r.kernel_coverage(&kernel.path);
        for (pid, mut wins) in std::mem::take(&mut r.windows) {
            crate::model::windows::gc_safepoints(&mut wins);
            r.trace.jvm_stops.insert(pid, wins);
        }
        for (tid, (first, last)) in r.scan.take().unwrap_or_default() {
            let th = r.thread(tid);
            th.first_ts = first;
            th.last_ts = last;
        }
        r.trace.set_kernel_coverage(kernel_until);
        // The code maps and symbols sorted for lookups, as `open` leaves
        // them: `info` names every stack to count what it cannot name.
        r.trace.stacks.finish();
        let window_from = r.window_from;
        r.trace.set_window(window_from);
        Ok(r.trace)
    }

    /// Gives every thread the start of the streams' coverage (a ring
    /// recording whose oldest chunks are gone): time before it is not covered.
    pub(crate) fn set_window(&mut self, from: Option<u64>) {
        self.losses.window_from = from;
        for th in self.threads.values_mut() {
            th.covered_from = from;
        }
    }

    /// Gives every thread the kernel stream's coverage end; an unmatched
    /// thread of a pid namespace is not covered from the start on.
    pub(crate) fn set_kernel_coverage(&mut self, until: Option<u64>) {
        self.losses.kernel_covered_until = until;
        let start = self.meta.start_monotonic_ns;
        for th in self.threads.values_mut() {
            th.kernel_until = if th.unmatched {
                Some(start.min(th.first_ts))
            } else {
                until
            };
        }
    }
}

/// Nanoseconds as milliseconds with three decimals, for messages.
pub(crate) fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, ns / 1000 % 1000)
}

/// The first `N` little-endian u32 fields of a payload, if it has them: the
/// fast path of the fixed-size hot kinds (one bounds check, nothing built).
#[inline]
fn words<const N: usize>(p: &[u8]) -> Option<[u32; N]> {
    let mut out = [0u32; N];
    let b = p.get(..4 * N)?;
    for (o, c) in out.iter_mut().zip(b.chunks_exact(4)) {
        *o = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Some(out)
}

impl TraceReader {
    /// A trace with its metadata and no events yet.
    pub(crate) fn begin(dir: &Path) -> anyhow::Result<TraceReader> {
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("{} does not exist", dir.display())
            }
            Err(e) => anyhow::bail!("cannot read {}: {e}", dir.display()),
            Ok(m) if !m.is_dir() => anyhow::bail!("{} is not a jtrace trace directory", dir.display()),
            Ok(_) => {}
        }
        let meta = Meta::load(dir)?;
        let mut t = Trace {
            dir: dir.to_path_buf(),
            meta,
            details: vec![String::new()],
            ..Default::default()
        };
        t.losses.kernel = t.meta.kernel_lost_total();
        Ok(TraceReader {
            span: Span::now(&t.meta),
            trace: t,
            ..Default::default()
        })
    }

    /// Reads the kernel stream, then every JVM stream, through the
    /// decoders; `before_each` runs before each stream that is read.
    pub(crate) fn read_streams(
        &mut self,
        kernel: &StreamFiles,
        jvms: &[StreamFiles],
        mut before_each: impl FnMut(&mut TraceReader),
    ) -> anyhow::Result<()> {
        if self.readable_stream(kernel, true) {
            let mut recs = Chain::open(kernel, fmt::KERNEL_MAGIC)?;
            before_each(self);
            self.read_kernel(&kernel.path, &mut recs);
            self.end_stream(&kernel.path, &mut recs)?;
        }
        for s in jvms {
            if !self.readable_stream(s, false) {
                continue;
            }
            let mut recs = Chain::open(s, fmt::JVM_MAGIC)?;
            self.cut_stream(true);
            before_each(self);
            let header = recs.header();
            self.read_jvm(&s.path, &header, &mut recs);
            self.end_stream(&s.path, &mut recs)?;
        }
        self.cut_stream(false);
        self.mark_namespace_threads();
        Ok(())
    }

    /// The threads of JVMs in pid namespaces: their tids there, and those
    /// that could not be paired with a kernel thread ([`pid_ns`]).
    fn mark_namespace_threads(&mut self) {
        let ns = std::mem::take(&mut self.ns.ns_tids);
        for (host, ns_tid) in ns {
            self.thread(host).ns_tid = Some(ns_tid);
        }
        let unmatched = std::mem::take(&mut self.ns.unmatched);
        for id in unmatched {
            let th = self.thread(id);
            th.unmatched = true;
            th.ns_tid = Some(id & !pid_ns::UNMATCHED_TID);
        }
    }

    /// Where the streams' coverage begins (see [`TraceReader::window_from`]'s field).
    pub(crate) fn window_from(&self) -> Option<u64> {
        self.window_from
    }

    /// After a stream: an I/O error ends the reading; where its coverage
    /// begins joins the trace's window.
    fn end_stream(&mut self, path: &Path, recs: &mut Chain) -> anyhow::Result<()> {
        if let Some(e) = recs.error.take() {
            anyhow::bail!("cannot read {}: {e}", path.display());
        }
        if let Some(p) = recs.problem.take() {
            self.trace.losses.truncated.push(format!("{}: {p}", path.display()));
        }
        if let Some(from) = recs.covered_from() {
            self.window_from = Some(self.window_from.map_or(from, |w| w.max(from)));
        }
        Ok(())
    }

    /// Whether the stream `files` can be read: a missing or too short one
    /// is a problem of the trace, not a reason to give up on the others.
    /// A missing kernel stream (`kernel`) is reported, a missing JVM stream
    /// is not there to be listed.
    pub(crate) fn readable_stream(&mut self, files: &StreamFiles, kernel: bool) -> bool {
        let path = files.parts.first().unwrap_or(&files.path);
        let why = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !kernel => return false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "it is missing".to_string(),
            Ok(m) if !m.is_file() || files.parts.is_empty() => {
                "it is not a regular file (a link, a device or a FIFO put at its name): not read".to_string()
            }
            Ok(m) if m.is_file() && m.len() < fmt::FILE_HEADER_LEN as u64 => format!(
                "it is too short to be a jtrace stream ({} bytes, less than its {}-byte header): not read",
                m.len(),
                fmt::FILE_HEADER_LEN
            ),
            _ => return true,
        };
        self.trace.losses.truncated.push(format!("{}: {why}", path.display()));
        if kernel {
            self.kernel_cut = Some(why);
        }
        false
    }

    /// Where the kernel stream at `path` stops covering the recording, if it
    /// stops before the end: the earliest record the recorder could not
    /// write, or, when the recording or the stream was cut off, the latest
    /// record read. Says so in the trace's problems.
    pub(crate) fn kernel_coverage(&mut self, path: &Path) -> Option<u64> {
        let m = &self.trace.meta;
        let mut until = m.kernel_covered_until_ns;
        let mut why = m
            .kernel_write_error
            .as_ref()
            .map(|e| format!("the recorder could not write it: {e}"));
        if let Some(cut) = &self.kernel_cut {
            until = Some(until.map_or(self.kernel_max_ts, |u| u.min(self.kernel_max_ts)));
            why.get_or_insert_with(|| cut.clone());
        } else if !m.kernel_stream_complete() {
            until = Some(until.map_or(self.kernel_max_ts, |u| u.min(self.kernel_max_ts)));
            why.get_or_insert_with(|| "the recording was cut off (jtrace was killed, or the machine stopped)".into());
        }
        let until = until?;
        self.trace.losses.truncated.push(format!(
            "{}: kernel data covers the recording only up to +{} ms ({}); later time is not covered: \
             no CPU time or cause is given for it (not_covered)",
            path.display(),
            ms(until.saturating_sub(self.trace.meta.start_monotonic_ns)),
            why.unwrap_or_default()
        ));
        Some(until)
    }

    /// A JVM-wide stop applies to every Java thread of that JVM, within the
    /// thread's own life ([`windows_within`](crate::model::windows::windows_within)).
    fn spread_windows(&mut self) {
        for (pid, mut wins) in std::mem::take(&mut self.windows) {
            crate::model::windows::gc_safepoints(&mut wins);
            self.trace.jvm_stops.insert(pid, wins.clone());
            let tids: Vec<u32> = self
                .trace
                .threads
                .values()
                .filter(|t| t.java_name.is_some() && t.tgid == pid)
                .map(|t| t.tid)
                .collect();
            for tid in tids {
                let Some(evs) = self.trace.events.get(&tid) else {
                    continue;
                };
                let (Some(first), Some(last)) = (evs.iter().map(|e| e.ts).min(), evs.iter().map(|e| e.ts).max()) else {
                    continue;
                };
                let (lead, range) = crate::model::windows::windows_within(&wins, first, last);
                for (cause, n) in lead {
                    for _ in 0..n {
                        self.push(tid, first, Event::Window { cause, begin: true });
                    }
                }
                for &(ts, cause, begin) in &wins[range] {
                    self.push(tid, ts, Event::Window { cause, begin });
                }
            }
        }
    }

    /// The thread's entry (created if new), for a change.
    pub(crate) fn thread(&mut self, tid: u32) -> &mut ThreadInfo {
        // Whatever the caller changes, the switch records' tgid cache no
        // longer knows the thread's tgid.
        self.tgids.remove(&tid);
        self.trace.threads.entry(tid).or_insert_with(|| ThreadInfo {
            tid,
            ..Default::default()
        })
    }

    /// The first pass over the JVM streams ([`VirtualThreads::scan`]): the
    /// virtual threads, their synthetic events and their carriers' mounts,
    /// before any other record is read.
    pub(crate) fn add_virtual_threads(&mut self, jvms: &[StreamFiles]) -> anyhow::Result<()> {
        // Ring recordings' chunked streams are not followed (docs/FORMAT.md).
        let plain: Vec<_> = jvms.iter().filter(|s| s.is_plain()).map(|s| s.path.clone()).collect();
        let (vthreads, synthetic) = VirtualThreads::scan(&plain, &mut self.ns, self.span);
        for s in synthetic {
            let tid = s.info.tid;
            self.trace.threads.insert(tid, s.info);
            let mut events = s.events;
            for (i, class) in s.details {
                if let Event::Block { detail, .. } = &mut events[i].1 {
                    *detail = self.detail(class);
                }
            }
            for (ts, e) in events {
                self.push_own(tid, ts, e);
            }
        }
        self.vthreads = vthreads;
        Ok(())
    }

    /// A syscall record of `carrier` just added under `idx`: a copy for the
    /// virtual thread mounted then, with the events that name it.
    pub(crate) fn copy_syscall(&mut self, info: &SyscallInfo, idx: u32) {
        if self.vthreads.is_empty() {
            return;
        }
        let Some(vtid) = self.vthreads.mounted_on(info.tid, info.enter) else {
            return;
        };
        let copy = SyscallInfo { tid: vtid, ..*info };
        let vidx = match &mut self.sorter {
            Some(s) => s.add_syscall(copy),
            None => {
                self.trace.syscalls.push(copy);
                (self.trace.syscalls.len() - 1) as u32
            }
        };
        self.vsyscalls.insert(idx, (vtid, vidx));
    }

    /// Adds an event of thread `tid` (and its copy for the virtual thread
    /// mounted on it, if `tid` is a carrier): to the sort when streaming,
    /// else to the thread's events.
    fn push(&mut self, tid: u32, ts: u64, mut event: Event) {
        if !self.vthreads.is_empty() {
            let mut copies = Vec::new();
            self.vthreads.copies(tid, ts, &mut event, &mut copies);
            for (vtid, cts, mut copy) in copies {
                if let Event::Block { detail, .. } = &mut copy {
                    *detail = self.pinned_detail(*detail);
                }
                self.push_own(vtid, cts, copy);
            }
            if let Event::Syscall { idx, enter } = event {
                if let Some(&(vtid, vidx)) = self.vsyscalls.get(&idx) {
                    if !enter {
                        self.vsyscalls.remove(&idx);
                    }
                    self.push_own(vtid, ts, Event::Syscall { idx: vidx, enter });
                }
            }
        }
        if let (Some(cut), Event::Enter(_) | Event::Exit { .. }) = (&mut self.cut, event) {
            if !cut.jvm_stage() {
                cut.library_call(tid, ts, event);
                self.push_own(tid, ts, event);
                return;
            }
            let mut out = std::mem::take(&mut self.cut_out);
            cut.method_event(tid, ts, event, &mut out);
            for (ts, e) in out.drain(..) {
                self.push_own(tid, ts, e);
            }
            self.cut_out = out;
            return;
        }
        self.push_own(tid, ts, event);
    }

    /// A JVM stream begins (`first`) or the last one ended: the entries the
    /// cut still held back go to the sort.
    pub(crate) fn cut_stream(&mut self, first: bool) {
        let Some(cut) = &mut self.cut else { return };
        let mut pending = Vec::new();
        if first {
            cut.begin_stream(&mut pending);
        } else {
            cut.end_stream(&mut pending);
        }
        for (tid, ts, e) in pending {
            self.push_own(tid, ts, e);
        }
    }

    /// The detail of a carrier's JVM block as its mounted virtual thread
    /// sees it: the same class, marked as pinning the carrier
    /// ("<class> (carrier pinned)").
    fn pinned_detail(&mut self, detail: u32) -> u32 {
        if let Some(&d) = self.pinned_details.get(&detail) {
            return d;
        }
        let class = self.trace.details.get(detail as usize).cloned().unwrap_or_default();
        let d = self.detail(if class.is_empty() {
            "(carrier pinned)".to_string()
        } else {
            format!("{class} (carrier pinned)")
        });
        self.pinned_details.insert(detail, d);
        d
    }

    /// At the end of the kernel stream: the virtual threads' wakes still
    /// pending ([`VirtualThreads::pending_wakes`]).
    pub(crate) fn flush_virtual_wakes(&mut self) {
        for (vtid, ts, e) in self.vthreads.pending_wakes() {
            self.push_own(vtid, ts, e);
        }
    }

    /// Adds an event of thread `tid` only.
    pub(crate) fn push_own(&mut self, tid: u32, ts: u64, event: Event) {
        if let Some(c) = &mut self.cut {
            c.kernel_event(tid, ts, &event);
        }
        if let Some(s) = &mut self.sorter {
            s.push(tid, ts, event);
            return;
        }
        if let Some(spans) = &mut self.scan {
            let s = spans.entry(tid).or_insert((ts, ts));
            *s = (s.0.min(ts), s.1.max(ts));
            return;
        }
        self.trace.events.entry(tid).or_default().push(Timed { ts, event });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::visitor::{Evidence, OffCpuInterval, Visitor};
    use crate::walk::analyze;
    use fmt::{Encoder, Payload, Record};

    fn syscall(nr: u32, fd_kind: u32, flags: u32) -> Payload {
        Payload::Syscall(fmt::Syscall {
            exit_ts: 0,
            nr,
            fd_kind,
            ret: 0,
            fd: 5,
            flags,
            arg: 0,
            ..Default::default()
        })
    }

    fn switch_out(voluntary: bool) -> Payload {
        Payload::SwitchOut(fmt::SwitchOut {
            tgid: 7,
            prev_state: voluntary as u32,
            cpu: 0,
            next_tid: 0,
        })
    }

    fn switch_in() -> Payload {
        Payload::SwitchIn(fmt::SwitchIn {
            tgid: 7,
            cpu: 0,
            prev_tid: 0,
            reserved: 0,
        })
    }

    /// A complete trace in `dir` whose only stream is kernel.bin = `bytes`.
    fn write_kernel_only_trace(dir: &Path, bytes: &[u8]) {
        std::fs::write(dir.join(fmt::KERNEL_FILE), bytes).unwrap();
        Meta {
            format: "jtrace".into(),
            version: fmt::FORMAT_VERSION,
            complete: true,
            ..Default::default()
        }
        .store(dir)
        .unwrap();
    }

    /// A hot kind whose payload is too short is not read by the fast path:
    /// it ends the stream with the decoder's message, in both readers, and
    /// the records before it are kept.
    #[test]
    fn short_hot_record_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("jtrace-short-hot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut k = Encoder::new();
        k.record(&Record {
            tid: 8,
            ts: 100,
            payload: switch_out(true),
        });
        let mut bytes = fmt::FileHeader::new(fmt::KERNEL_MAGIC).to_bytes().to_vec();
        bytes.extend_from_slice(&k.buf);
        // A SWITCH_OUT record of 24 bytes: 8 of its 16 payload bytes.
        bytes.extend_from_slice(&fmt::kind::SWITCH_OUT.to_le_bytes());
        bytes.extend_from_slice(&24u16.to_le_bytes());
        bytes.extend_from_slice(&8u32.to_le_bytes());
        bytes.extend_from_slice(&200u64.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        write_kernel_only_trace(&dir, &bytes);
        let whole = Trace::open(&dir).unwrap();
        let (streamed, _) = crate::stream::open(&dir, &Default::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for t in [&whole, &streamed] {
            assert_eq!(t.kernel_records, 1);
            // The corrupt record, then where the kernel coverage ends (there).
            assert_eq!(t.losses.truncated.len(), 2, "{:?}", t.losses.truncated);
            assert!(t.losses.truncated[1].contains("covers the recording only up to"));
            assert_eq!(t.losses.kernel_covered_until, Some(100));
            assert!(
                t.losses.truncated[0].contains("payload shorter than its kind"),
                "{:?}",
                t.losses.truncated
            );
        }
        assert_eq!(whole.events[&8].len(), 1);
    }

    /// An at-switch SYSCALL record explains exactly the block it precedes:
    /// the next block of the same thread (no record) is not blamed on it.
    #[test]
    fn at_switch_syscall_explains_one_block() {
        let dir = std::env::temp_dir().join(format!("jtrace-at-switch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut k = Encoder::new();
        let at = fmt::SYSCALL_BLOCKED | fmt::SYSCALL_AT_SWITCH;
        for (ts, payload) in [
            (100, syscall(0, fmt::fd_kind::SOCKET, at)),
            (100, switch_out(true)),
            (300, switch_in()),
            (400, switch_out(true)),
            (500, switch_in()),
        ] {
            k.record(&Record { tid: 8, ts, payload });
        }
        let mut bytes = fmt::FileHeader::new(fmt::KERNEL_MAGIC).to_bytes().to_vec();
        bytes.extend_from_slice(&k.buf);
        write_kernel_only_trace(&dir, &bytes);

        let trace = Trace::open(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        struct Blocks(Vec<(u64, Evidence)>);
        impl Visitor for Blocks {
            fn off_cpu(&mut self, _: &ThreadInfo, _: usize, iv: &OffCpuInterval) {
                self.0.push((iv.start, iv.evidence));
            }
        }
        let mut v = Blocks(Vec::new());
        analyze(&trace, &mut v);
        assert_eq!(v.0, vec![(100, Evidence::Syscall(0)), (400, Evidence::None)]);
    }
}

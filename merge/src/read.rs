//! Reading a trace directory into per-thread, time-ordered event lists.

use crate::cause::Cause;
use crate::meta::Meta;
use jtrace_format::{self as fmt, kind, DecodeError, Decoder, FileHeader, Payload, RawRecord};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Index of a method in [`Trace::methods`].
pub type MethodIdx = u32;

/// A Java method, as the agent named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MethodInfo {
    /// Fully qualified class name with dots.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature; empty for a native library call.
    pub signature: String,
    /// An interposed library call (uprobe span), not a Java method.
    pub native: bool,
}

impl MethodInfo {
    /// `class.name`, as users write it.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }
}

/// What is known of a thread.
#[derive(Debug, Clone, Default)]
pub struct ThreadInfo {
    /// Kernel thread id.
    pub tid: u32,
    /// Process id.
    pub tgid: u32,
    /// Java thread name, if the agent saw the thread.
    pub java_name: Option<String>,
    /// Java thread group.
    pub group: String,
    /// Name of the Java thread that started it.
    pub parent: String,
    /// Daemon thread.
    pub daemon: bool,
    /// Kernel name (comm), last seen.
    pub comm: String,
    /// First and last timestamps of any event of this thread.
    pub first_ts: u64,
    /// See `first_ts`.
    pub last_ts: u64,
    /// Thread start seen (kernel fork or JVM thread start).
    pub started_ts: Option<u64>,
    /// Thread exit seen (kernel exit or JVM thread end).
    pub exited_ts: Option<u64>,
}

impl ThreadInfo {
    /// The name to show: the Java name if known, else the kernel's.
    pub fn display_name(&self) -> &str {
        self.java_name.as_deref().unwrap_or(&self.comm)
    }
}

/// One event of one thread, from either stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Switched out; `preempted` when still runnable (involuntary).
    SwitchOut {
        /// Involuntary switch (prev_state == TASK_RUNNING).
        preempted: bool,
        /// Raw kernel prev_state.
        prev_state: u32,
        /// CPU left.
        cpu: u32,
        /// Thread that got the CPU.
        next_tid: u32,
    },
    /// Switched in.
    SwitchIn {
        /// CPU taken.
        cpu: u32,
        /// Thread that left it.
        prev_tid: u32,
    },
    /// Woken up by `waker_tid`.
    Wakeup {
        /// The waking thread.
        waker_tid: u32,
        /// Its process.
        waker_tgid: u32,
        /// First wakeup of a new thread.
        new_task: bool,
    },
    /// A traced method was entered.
    Enter(MethodIdx),
    /// A traced method returned (`exception` = exited by throwing).
    Exit {
        /// The method.
        method: MethodIdx,
        /// Exited by an exception.
        exception: bool,
    },
    /// Thread began (kernel fork or JVM thread start).
    ThreadStart,
    /// Thread ended (kernel exit or JVM thread end).
    ThreadEnd,
    /// A syscall entered (`enter`) or returned; details in [`Trace::syscalls`].
    Syscall {
        /// Index into [`Trace::syscalls`].
        idx: u32,
        /// Entry (true) or exit (false).
        enter: bool,
    },
    /// A user page fault.
    PageFault {
        /// Faulting address.
        address: u64,
    },
    /// The thread begins or ends a JVM-level blocking state (monitor enter,
    /// Object.wait, park, sleep).
    Block {
        /// The cause the state stands for.
        cause: Cause,
        /// Begin (true) or end (false).
        begin: bool,
        /// Index into [`Trace::details`] (monitor or blocker class).
        detail: u32,
    },
    /// A JVM-wide stop (GC or safepoint) begins or ends; copied into every
    /// Java thread of that JVM.
    Window {
        /// [`Cause::Gc`] or [`Cause::Safepoint`].
        cause: Cause,
        /// Begin (true) or end (false).
        begin: bool,
    },
}

/// A syscall with its arguments and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallInfo {
    /// The thread.
    pub tid: u32,
    /// Entry time.
    pub enter: u64,
    /// The kernel's record.
    pub rec: fmt::Syscall,
}

/// An event with its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// What happened.
    pub event: Event,
}

/// Loss and health counters of a trace.
#[derive(Debug, Clone, Default)]
pub struct Losses {
    /// Kernel records lost in the kernel (ring buffer full, bad samples).
    pub kernel: u64,
    /// JVM events the agents reported lost.
    pub jvm: u64,
    /// Streams that ended inside a record (writer cut off): path and message.
    pub truncated: Vec<String>,
    /// Agent-reported problems (bad config lines, internal errors).
    pub agent_errors: Vec<String>,
}

/// A whole trace in memory, grouped by thread.
#[derive(Debug, Default)]
pub struct Trace {
    /// Trace directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub meta: Meta,
    /// Threads by tid.
    pub threads: BTreeMap<u32, ThreadInfo>,
    /// Each thread's events, sorted by time.
    pub events: BTreeMap<u32, Vec<Timed>>,
    /// Methods referenced by [`Event::Enter`]/[`Event::Exit`].
    pub methods: Vec<MethodInfo>,
    /// Loss counters.
    pub losses: Losses,
    /// Kernel records read.
    pub kernel_records: u64,
    /// JVM records read.
    pub jvm_records: u64,
    /// JVM process ids with an agent stream.
    pub jvm_pids: Vec<u32>,
    /// Syscalls referenced by [`Event::Syscall`].
    pub syscalls: Vec<SyscallInfo>,
    /// Strings referenced by [`Event::Block`] (index 0 is "").
    pub details: Vec<String>,
    /// Paths of the files SYSCALL records name, by (dev, ino) (FILE_PATH).
    pub file_paths: HashMap<(u64, u64), String>,
    /// When each traced method had compiled code, per JVM (COMPILED_METHOD_LOAD/UNLOAD).
    pub jit: JitHistory,
    /// Sampled allocations (ALLOC_SAMPLE) by thread, class and site.
    pub allocations: BTreeMap<AllocSite, AllocCount>,
    /// Library-call probe names by probe id.
    probes: HashMap<u32, MethodIdx>,
    /// GC / safepoint windows per JVM pid, copied into threads after reading.
    pub(crate) windows: HashMap<u32, Vec<(u64, Cause, bool)>>,
    /// Streaming reads ([`crate::stream`]): events go to the external sort
    /// instead of `events`, syscall records travel with their events.
    pub(crate) sorter: Option<Box<crate::stream::Sorter>>,
    /// Index of each string in `details`.
    detail_ids: HashMap<String, u32>,
    /// The tgid last set from a switch record, per thread.
    tgids: crate::stream::TidMap<u32>,
    /// Per thread: the at-switch SYSCALL record whose block has not ended yet.
    open_blocks: crate::stream::TidMap<u32>,
    /// The raw bytes of the last class name a fast-path JVM block record
    /// carried and its detail index: blocks come in begin/end pairs of one
    /// class, so most lookups are this one.
    last_detail: (Vec<u8>, u32),
}

/// Where sampled allocations happened: thread, allocated class, allocating
/// method (`None` if the agent did not say) and source line (-1: unknown).
pub type AllocSite = (u32, String, Option<MethodIdx>, i32);

/// Sampled allocations at one [`AllocSite`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCount {
    /// Samples.
    pub samples: u64,
    /// Σ size of the sampled objects in bytes.
    pub bytes: u64,
}

/// One method's (time, compiled versions alive from then), by time.
type CompiledVersions = Vec<(u64, i32)>;

/// The JIT history of the traced methods: from the agent's
/// COMPILED_METHOD_LOAD/UNLOAD records, per JVM process and method, how many
/// compiled versions existed from when on.
#[derive(Debug, Clone, Default)]
pub struct JitHistory {
    /// Per JVM whose stream holds JIT records (the others say nothing either
    /// way): its pid and its methods' histories. Indexed, not hashed: the
    /// report asks once per invocation.
    live: Vec<(u32, Vec<CompiledVersions>)>,
    /// Method -> the first time it had compiled code in any JVM.
    first: HashMap<MethodIdx, u64>,
}

impl JitHistory {
    /// Adds one JVM's loads (`true`) and unloads of resolved methods.
    fn add(&mut self, pid: u32, mut changes: Vec<(MethodIdx, u64, bool)>) {
        changes.sort_by_key(|&(m, ts, load)| (m, ts, !load));
        let mut by_method: Vec<CompiledVersions> = Vec::new();
        for (m, ts, load) in changes {
            if by_method.len() <= m as usize {
                by_method.resize(m as usize + 1, Vec::new());
            }
            let v = &mut by_method[m as usize];
            let n = v.last().map_or(0, |&(_, n)| n) + if load { 1 } else { -1 };
            v.push((ts, n.max(0)));
            if n > 0 {
                let first = self.first.entry(m).or_insert(ts);
                *first = (*first).min(ts);
            }
        }
        self.live.push((pid, by_method));
    }

    /// Whether method `m` of JVM `pid` had compiled code at time `ts`:
    /// `None` when that JVM's stream has no JIT records (`jit off`). A method
    /// inlined into a compiled caller without code of its own counts as not
    /// compiled; code made not entrant counts until the JVM unloads it.
    pub fn compiled_at(&self, pid: u32, m: MethodIdx, ts: u64) -> Option<bool> {
        let (_, by_method) = self.live.iter().find(|(p, _)| *p == pid)?;
        let v = by_method.get(m as usize).map_or(&[][..], |v| &v[..]);
        let i = v.partition_point(|&(t, _)| t <= ts);
        Some(i > 0 && v[i - 1].1 > 0)
    }

    /// The first time method `m` had compiled code in any JVM.
    pub fn first_compiled(&self, m: MethodIdx) -> Option<u64> {
        self.first.get(&m).copied()
    }
}

/// Records of a stream held whole in memory.
fn records(data: &[u8]) -> Decoder<'_> {
    Decoder::new(&data[fmt::FILE_HEADER_LEN..], fmt::FILE_HEADER_LEN)
}

/// Records with their payloads undecoded, from a stream held whole in
/// memory ([`Decoder`]) or read in chunks ([`crate::stream::RecordReader`]).
pub(crate) trait RawRecords {
    /// The next record; the reading stops at the first error.
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>>;
}

impl RawRecords for Decoder<'_> {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        Decoder::next_raw(self)
    }
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

impl<R: RawRecords + ?Sized> RawRecords for &mut R {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        (**self).next_raw()
    }
}

fn read_stream(path: &Path, magic: [u8; 8]) -> anyhow::Result<Vec<u8>> {
    let data = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    check_header(path, &data, magic)?;
    Ok(data)
}

/// The file header at the start of `bytes`, if it is a stream of the kind
/// `magic` names in a format version this jtrace reads.
pub(crate) fn check_header(path: &Path, bytes: &[u8], magic: [u8; 8]) -> anyhow::Result<FileHeader> {
    let header = FileHeader::parse(bytes)
        .ok_or_else(|| anyhow::anyhow!("{} is too short to be a jtrace stream", path.display()))?;
    if header.magic != magic {
        anyhow::bail!("{} is not a jtrace stream of the expected kind", path.display());
    }
    if header.version > fmt::FORMAT_VERSION {
        anyhow::bail!(
            "{} has format version {}, this jtrace reads up to {}",
            path.display(),
            header.version,
            fmt::FORMAT_VERSION
        );
    }
    Ok(header)
}

/// Sorts a JVM's stop windows by time and turns every safepoint that
/// contains a GC into a GC stop: DESIGN.md's `safepoint` is a non-GC stop,
/// and JVMTI's GC start/finish cover only the collection, not the
/// safepoint's synchronisation and clean-up around it (a few ms on JDK 25).
pub(crate) fn gc_safepoints(wins: &mut [(u64, Cause, bool)]) {
    wins.sort_by_key(|w| w.0);
    let mut open: Option<usize> = None;
    for i in 0..wins.len() {
        match wins[i] {
            (_, Cause::Safepoint, true) => open = Some(i),
            (_, Cause::Safepoint, false) => open = None,
            (_, Cause::Gc, true) => {
                if let Some(b) = open.take() {
                    wins[b].1 = Cause::Gc;
                    // Its end: the next safepoint end after the GC began.
                    if let Some(e) = (i..wins.len()).find(|&j| wins[j].1 == Cause::Safepoint && !wins[j].2) {
                        wins[e].1 = Cause::Gc;
                    }
                }
            }
            _ => {}
        }
    }
}

/// The part of a JVM's time-ordered stop windows that a thread living from
/// `first` to `last` (its own first and last events) sees: `(lead, range)`,
/// where `range` indexes the windows' events inside [first, last] and
/// `lead` counts the windows of each cause still open at `first` (the
/// thread sees them begin at `first`). So a window outside a thread's life
/// does not stretch it: its traced life stays its own.
pub(crate) fn windows_within(
    wins: &[(u64, Cause, bool)],
    first: u64,
    last: u64,
) -> ([(Cause, u32); 2], std::ops::Range<usize>) {
    let lo = wins.partition_point(|w| w.0 < first);
    let hi = wins.partition_point(|w| w.0 <= last);
    let mut lead = [(Cause::Gc, 0u32), (Cause::Safepoint, 0u32)];
    for &(_, cause, begin) in &wins[..lo] {
        if let Some(n) = lead.iter_mut().find(|(c, _)| *c == cause) {
            n.1 = if begin { n.1 + 1 } else { n.1.saturating_sub(1) };
        }
    }
    (lead, lo..hi.max(lo))
}

impl Trace {
    /// Reads a trace directory written by `jtrace run`.
    pub fn open(dir: &Path) -> anyhow::Result<Trace> {
        let mut t = Trace::begin(dir)?;
        let kpath = dir.join(fmt::KERNEL_FILE);
        if kpath.exists() {
            let data = read_stream(&kpath, fmt::KERNEL_MAGIC)?;
            t.read_kernel(&kpath, records(&data));
        }
        for p in Trace::jvm_files(dir)? {
            let data = read_stream(&p, fmt::JVM_MAGIC)?;
            let header = FileHeader::parse(&data).expect("checked by read_stream");
            t.read_jvm(&p, &header, records(&data));
        }
        t.spread_windows();
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
        Ok(t)
    }

    /// A trace with its metadata and no events yet.
    pub(crate) fn begin(dir: &Path) -> anyhow::Result<Trace> {
        if !dir.is_dir() {
            anyhow::bail!("{} is not a jtrace trace directory", dir.display());
        }
        let meta = Meta::load(dir)?;
        let mut t = Trace {
            dir: dir.to_path_buf(),
            meta,
            details: vec![String::new()],
            ..Default::default()
        };
        t.losses.kernel = t.meta.kernel_lost_total();
        Ok(t)
    }

    /// The JVM streams of a trace directory, in name order.
    pub(crate) fn jvm_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let mut jvm_files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(fmt::JVM_FILE_PREFIX) && n.ends_with(".bin"))
            })
            .collect();
        jvm_files.sort();
        Ok(jvm_files)
    }

    /// The VM thread's calls of `SafepointSynchronize::begin` and `end`
    /// (probed by the kernel recorder, see `jtrace_bpf::safepoints`) bound
    /// a safepoint of its JVM: from the call of begin to the return of end.
    /// Returns whether the call was one of them (then it is a window, not a
    /// library call of the VM thread's).
    fn safepoint_probe(&mut self, tid: u32, m: MethodIdx, call: u64, ret: u64) -> bool {
        let (ts, begin) = match self.methods[m as usize].name.as_str() {
            fmt::SAFEPOINT_BEGIN_SYMBOL => (call, true),
            fmt::SAFEPOINT_END_SYMBOL => (ret, false),
            _ => return false,
        };
        let pid = self.threads.get(&tid).map_or(self.meta.pid, |t| t.tgid);
        self.windows.entry(pid).or_default().push((ts, Cause::Safepoint, begin));
        true
    }

    /// A JVM-wide stop applies to every Java thread of that JVM, within the
    /// thread's own life ([`windows_within`]).
    fn spread_windows(&mut self) {
        for (pid, mut wins) in std::mem::take(&mut self.windows) {
            gc_safepoints(&mut wins);
            let tids: Vec<u32> = self
                .threads
                .values()
                .filter(|t| t.java_name.is_some() && t.tgid == pid)
                .map(|t| t.tid)
                .collect();
            for tid in tids {
                let Some(evs) = self.events.get(&tid) else { continue };
                let (Some(first), Some(last)) = (evs.iter().map(|e| e.ts).min(), evs.iter().map(|e| e.ts).max()) else {
                    continue;
                };
                let (lead, range) = windows_within(&wins, first, last);
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

    fn intern_method(&mut self, info: MethodInfo) -> MethodIdx {
        if let Some(i) = self.methods.iter().position(|m| *m == info) {
            return i as MethodIdx;
        }
        self.methods.push(info);
        (self.methods.len() - 1) as MethodIdx
    }

    /// Interned: the table grows with the number of distinct strings (monitor
    /// and blocker classes), not with the number of events.
    fn detail(&mut self, s: String) -> u32 {
        self.detail_str(&s)
    }

    /// [`Trace::detail`] of a borrowed string: allocates only for a new one.
    fn detail_str(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        if let Some(&i) = self.detail_ids.get(s) {
            return i;
        }
        self.details.push(s.to_owned());
        let i = (self.details.len() - 1) as u32;
        self.detail_ids.insert(s.to_owned(), i);
        i
    }

    /// Switch records repeat the thread's process id: look the thread up
    /// only when it changes (once per thread, not once per switch).
    fn set_tgid(&mut self, tid: u32, tgid: u32) {
        if self.tgids.get(&tid) != Some(&tgid) {
            self.thread(tid).tgid = tgid;
            self.tgids.insert(tid, tgid);
        }
    }

    /// The thread's entry (created if new), for a change.
    pub(crate) fn thread(&mut self, tid: u32) -> &mut ThreadInfo {
        // Whatever the caller changes, the switch records' tgid cache no
        // longer knows the thread's tgid.
        self.tgids.remove(&tid);
        self.threads.entry(tid).or_insert_with(|| ThreadInfo {
            tid,
            ..Default::default()
        })
    }

    /// The thread is back on CPU (or gone): the block an at-switch SYSCALL
    /// record described is over, and so is that syscall as far as we know.
    fn end_block(&mut self, tid: u32, ts: u64) {
        if let Some(idx) = self.open_blocks.remove(&tid) {
            self.push(tid, ts, Event::Syscall { idx, enter: false });
        }
    }

    fn push(&mut self, tid: u32, ts: u64, event: Event) {
        if let Some(s) = &mut self.sorter {
            s.push(tid, ts, event);
            return;
        }
        self.events.entry(tid).or_default().push(Timed { ts, event });
    }

    pub(crate) fn read_kernel(&mut self, path: &Path, mut records: impl RawRecords) {
        while let Some(raw) = records.next_raw() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    break;
                }
            };
            let (tid, ts) = (raw.tid, raw.ts);
            // Fast paths: the hot fixed-size kinds straight from the bytes,
            // exactly as the decoded payloads below would give them.
            match raw.kind {
                kind::SWITCH_OUT => {
                    if let Some([tgid, prev_state, cpu, next_tid]) = words(raw.payload) {
                        self.kernel_records += 1;
                        self.set_tgid(tid, tgid);
                        self.push(
                            tid,
                            ts,
                            Event::SwitchOut {
                                preempted: prev_state == fmt::TASK_RUNNING,
                                prev_state,
                                cpu,
                                next_tid,
                            },
                        );
                        continue;
                    }
                }
                kind::SWITCH_IN => {
                    if let Some([tgid, cpu, prev_tid, _]) = words(raw.payload) {
                        self.kernel_records += 1;
                        self.set_tgid(tid, tgid);
                        self.end_block(tid, ts);
                        self.push(tid, ts, Event::SwitchIn { cpu, prev_tid });
                        continue;
                    }
                }
                kind::WAKEUP => {
                    if let Some([_, waker_tid, waker_tgid, _, new_task, _]) = words(raw.payload) {
                        self.kernel_records += 1;
                        self.push(
                            tid,
                            ts,
                            Event::Wakeup {
                                waker_tid,
                                waker_tgid,
                                new_task: new_task != 0,
                            },
                        );
                        continue;
                    }
                }
                _ => {}
            }
            let rec = match raw.decode() {
                Ok(r) => r,
                Err(e) => {
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    break;
                }
            };
            self.kernel_records += 1;
            match rec.payload {
                Payload::SwitchOut(p) => {
                    self.set_tgid(tid, p.tgid);
                    self.push(
                        tid,
                        ts,
                        Event::SwitchOut {
                            preempted: p.prev_state == fmt::TASK_RUNNING,
                            prev_state: p.prev_state,
                            cpu: p.cpu,
                            next_tid: p.next_tid,
                        },
                    );
                }
                Payload::SwitchIn(p) => {
                    self.set_tgid(tid, p.tgid);
                    self.end_block(tid, ts);
                    self.push(
                        tid,
                        ts,
                        Event::SwitchIn {
                            cpu: p.cpu,
                            prev_tid: p.prev_tid,
                        },
                    );
                }
                Payload::Wakeup(p) => self.push(
                    tid,
                    ts,
                    Event::Wakeup {
                        waker_tid: p.waker_tid,
                        waker_tgid: p.waker_tgid,
                        new_task: p.new_task != 0,
                    },
                ),
                Payload::Fork(p) => {
                    let th = self.thread(tid);
                    th.tgid = p.tgid;
                    th.comm = fmt::comm_str(&p.comm);
                    th.started_ts = Some(th.started_ts.map_or(ts, |s| s.min(ts)));
                    self.push(tid, ts, Event::ThreadStart);
                }
                Payload::Exit(p) => {
                    self.end_block(tid, ts);
                    let th = self.thread(tid);
                    th.tgid = p.tgid;
                    th.exited_ts = Some(th.exited_ts.map_or(ts, |s| s.max(ts)));
                    self.push(tid, ts, Event::ThreadEnd);
                }
                Payload::Comm(p) | Payload::Exec(p) => {
                    let th = self.thread(tid);
                    th.tgid = p.tgid;
                    th.comm = fmt::comm_str(&p.comm);
                }
                Payload::Syscall(rec) => {
                    let info = SyscallInfo { tid, enter: ts, rec };
                    let idx = match &mut self.sorter {
                        Some(s) => s.add_syscall(info),
                        None => {
                            self.syscalls.push(info);
                            (self.syscalls.len() - 1) as u32
                        }
                    };
                    self.push(tid, ts, Event::Syscall { idx, enter: true });
                    if rec.flags & fmt::SYSCALL_AT_SWITCH != 0 {
                        // Its block ends at the thread's next switch-in.
                        if let Some(open) = self.open_blocks.insert(tid, idx) {
                            self.push(
                                tid,
                                ts,
                                Event::Syscall {
                                    idx: open,
                                    enter: false,
                                },
                            );
                        }
                    } else {
                        self.push(tid, rec.exit_ts.max(ts), Event::Syscall { idx, enter: false });
                    }
                }
                Payload::PageFault(p) => self.push(tid, ts, Event::PageFault { address: p.address }),
                Payload::FilePath(p) => {
                    self.file_paths.insert((p.dev, p.ino), p.path);
                }
                Payload::ProbeDef(p) => {
                    let m = self.intern_method(MethodInfo {
                        class: p.library,
                        name: p.symbol,
                        signature: String::new(),
                        native: true,
                    });
                    self.probes.insert(p.probe, m);
                }
                Payload::LibCall(p) => {
                    let m = match self.probes.get(&p.probe) {
                        Some(&m) => m,
                        None => self.intern_method(MethodInfo {
                            class: "?".into(),
                            name: format!("probe{}", p.probe),
                            signature: String::new(),
                            native: true,
                        }),
                    };
                    if self.safepoint_probe(tid, m, ts, p.exit_ts.max(ts)) {
                        continue;
                    }
                    self.push(tid, ts, Event::Enter(m));
                    self.push(
                        tid,
                        p.exit_ts.max(ts),
                        Event::Exit {
                            method: m,
                            exception: false,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    pub(crate) fn read_jvm(&mut self, path: &Path, header: &FileHeader, mut records: impl RawRecords) {
        // Method ids are only unique within one JVM.
        let mut ids: crate::stream::TidMap<MethodIdx, u64> = Default::default();
        let mut interned: HashMap<MethodInfo, MethodIdx> = HashMap::new();
        for (i, m) in self.methods.iter().enumerate() {
            interned.insert(m.clone(), i as MethodIdx);
        }
        let mut jvm_pid = None;
        // A stream the agent did not close (JVM killed) ends in zero fill,
        // where the decoder stops: say so, the rest is a valid prefix.
        let mut finished = header.flags & fmt::STREAM_COMPLETE != 0;
        // Method events whose id had no definition: count, first id.
        let mut undefined: (u64, Option<u64>) = (0, None);
        // JIT records name methods by raw id, possibly before their
        // METHOD_DEF: resolved at the end of the stream.
        let mut compiles: Vec<(u64, u64, bool)> = Vec::new();
        // Allocation samples, whose site is a raw id too: (tid, sample).
        let mut allocs: Vec<(u32, fmt::AllocSample)> = Vec::new();
        while let Some(raw) = records.next_raw() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    finished = true;
                    break;
                }
            };
            let (tid, ts) = (raw.tid, raw.ts);
            // Fast paths: method entry/exit and the blocking states straight
            // from the bytes (the class name is looked up, not allocated).
            match raw.kind {
                kind::METHOD_ENTRY | kind::METHOD_EXIT => {
                    if let Some([lo, hi, flags, _]) = words(raw.payload) {
                        self.jvm_records += 1;
                        let id = (hi as u64) << 32 | lo as u64;
                        match ids.get(&id) {
                            Some(&method) if raw.kind == kind::METHOD_ENTRY => self.push(tid, ts, Event::Enter(method)),
                            Some(&method) => {
                                let exception = flags & fmt::EXIT_BY_EXCEPTION != 0;
                                self.push(tid, ts, Event::Exit { method, exception })
                            }
                            None => {
                                undefined.0 += 1;
                                undefined.1.get_or_insert(id);
                            }
                        }
                        continue;
                    }
                }
                kind::METHOD_BATCH => {
                    if let Some(events) = fmt::batch_events(ts, raw.payload) {
                        self.jvm_records += events.len() as u64;
                        for e in events {
                            let Some(&method) = ids.get(&(e.method as u64)) else {
                                undefined.0 += 1;
                                undefined.1.get_or_insert(e.method as u64);
                                continue;
                            };
                            let event = match e.kind {
                                fmt::BatchedKind::Entry => Event::Enter(method),
                                k => Event::Exit {
                                    method,
                                    exception: k == fmt::BatchedKind::ExitByException,
                                },
                            };
                            self.push(tid, e.ts, event);
                        }
                        continue;
                    }
                }
                k @ kind::MONITOR_CONTENDED_ENTER..=kind::SAFEPOINT_END => {
                    // JvmBlock: u64 arg, then a u16-length-prefixed string.
                    let p = raw.payload;
                    let class = p
                        .get(8..10)
                        .map(|n| u16::from_le_bytes([n[0], n[1]]) as usize)
                        .and_then(|n| p.get(10..10 + n));
                    if let (Some(class), Some((cause, begin))) = (class, block_of(k)) {
                        self.jvm_records += 1;
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
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    finished = true;
                    break;
                }
            };
            self.jvm_records += 1;
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
                    let next = self.methods.len() as MethodIdx;
                    let idx = *interned.entry(info.clone()).or_insert_with(|| {
                        self.methods.push(info);
                        next
                    });
                    ids.insert(d.method, idx);
                }
                Payload::MethodEntry(e) | Payload::MethodExit(e) => {
                    let entry = matches!(rec.payload, Payload::MethodEntry(_));
                    match ids.get(&e.method) {
                        Some(&method) if entry => self.push(tid, ts, Event::Enter(method)),
                        Some(&method) => {
                            let exception = e.flags & fmt::EXIT_BY_EXCEPTION != 0;
                            self.push(tid, ts, Event::Exit { method, exception })
                        }
                        None => {
                            // One message per stream, not one per event.
                            undefined.0 += 1;
                            undefined.1.get_or_insert(e.method);
                        }
                    }
                }
                Payload::JvmEnd(p) => {
                    self.losses.jvm += p.lost_events;
                    finished = true;
                }
                Payload::AgentError(s) => self.losses.agent_errors.push(s),
                Payload::Compiled(load, c) => compiles.push((c.method, ts, load)),
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
        if let (n, Some(first)) = undefined {
            self.losses.truncated.push(format!(
                "{}: {n} method event(s) used a method id before its definition (first: {first:#x})",
                path.display()
            ));
        }
        if !finished {
            self.losses.truncated.push(format!(
                "{}: the JVM stream was not finished (no JVM_END: the JVM was killed or crashed); \
                 read up to its last written record",
                path.display()
            ));
        }
        for (tid, a) in allocs {
            let site = (a.method != 0).then(|| ids.get(&a.method).copied()).flatten();
            let c = self.allocations.entry((tid, a.class, site, a.line)).or_default();
            c.samples += 1;
            c.bytes += a.size;
        }
        if let Some(pid) = jvm_pid.or_else(|| pid_from_name(path)) {
            self.jvm_pids.push(pid);
            if !compiles.is_empty() {
                let resolved = compiles
                    .iter()
                    .filter_map(|&(id, ts, load)| Some((*ids.get(&id)?, ts, load)))
                    .collect();
                self.jit.add(pid, resolved);
            }
        }
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
        _ => None,
    }
}

fn pid_from_name(path: &Path) -> Option<u32> {
    path.file_stem()?
        .to_str()?
        .strip_prefix(fmt::JVM_FILE_PREFIX)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{analyze, Evidence, OffCpuInterval, Visitor};
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

    /// A safepoint around a GC is a GC stop; one without is a safepoint.
    #[test]
    fn safepoints_containing_a_gc_are_gc_stops() {
        use Cause::{Gc, Safepoint};
        let mut w = vec![
            (50, Gc, true),
            (10, Safepoint, true),
            (60, Gc, false),
            (70, Safepoint, false),
            (100, Safepoint, true),
            (120, Safepoint, false),
        ];
        gc_safepoints(&mut w);
        assert_eq!(
            w,
            vec![
                (10, Gc, true),
                (50, Gc, true),
                (60, Gc, false),
                (70, Gc, false),
                (100, Safepoint, true),
                (120, Safepoint, false),
            ]
        );
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
            assert_eq!(t.losses.truncated.len(), 1, "{:?}", t.losses.truncated);
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

    #[test]
    fn jit_history_counts_live_compiled_versions() {
        let mut jit = JitHistory::default();
        // Method 0 of JVM 7: tier 3 at 100, tier 4 at 200, tier 3 unloaded
        // at 300, tier 4 at 400: compiled from 100 to 400. Method 1 never.
        jit.add(
            7,
            vec![(0, 300, false), (0, 100, true), (0, 200, true), (0, 400, false)],
        );
        let at = |m, ts| jit.compiled_at(7, m, ts);
        assert_eq!(
            [50, 100, 250, 300, 399, 400, 500].map(|ts| at(0, ts)),
            [false, true, true, true, true, false, false].map(Some)
        );
        assert_eq!(at(1, 250), Some(false));
        // A JVM without JIT records says nothing.
        assert_eq!(jit.compiled_at(8, 0, 250), None);
        assert_eq!(jit.first_compiled(0), Some(100));
        assert_eq!(jit.first_compiled(1), None);
    }
}

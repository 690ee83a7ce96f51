//! Reading a trace directory into per-thread, time-ordered event lists.

use crate::meta::Meta;
use jtrace_format::{self as fmt, Decoder, FileHeader, Payload};
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
    /// JVM signature.
    pub signature: String,
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
}

fn read_stream(path: &Path, magic: [u8; 8]) -> anyhow::Result<Vec<u8>> {
    let data =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let header = FileHeader::parse(&data)
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
    Ok(data)
}

impl Trace {
    /// Reads a trace directory written by `jtrace run`.
    pub fn open(dir: &Path) -> anyhow::Result<Trace> {
        if !dir.is_dir() {
            anyhow::bail!("{} is not a jtrace trace directory", dir.display());
        }
        let meta = Meta::load(dir)?;
        let mut t = Trace { dir: dir.to_path_buf(), meta, ..Default::default() };
        t.losses.kernel = t.meta.kernel_lost_total();

        let kpath = dir.join(fmt::KERNEL_FILE);
        if kpath.exists() {
            let data = read_stream(&kpath, fmt::KERNEL_MAGIC)?;
            t.read_kernel(&kpath, &data);
        }
        let mut jvm_files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(fmt::JVM_FILE_PREFIX) && n.ends_with(".bin")
                })
            })
            .collect();
        jvm_files.sort();
        for p in jvm_files {
            let data = read_stream(&p, fmt::JVM_MAGIC)?;
            t.read_jvm(&p, &data);
        }
        for (tid, evs) in t.events.iter_mut() {
            // Stable sort: records of one thread from one stream keep their
            // order when timestamps tie.
            evs.sort_by_key(|e| e.ts);
            if let (Some(first), Some(last)) = (evs.first(), evs.last()) {
                let th = t.threads.entry(*tid).or_insert_with(|| ThreadInfo { tid: *tid, ..Default::default() });
                th.first_ts = first.ts;
                th.last_ts = last.ts;
            }
        }
        Ok(t)
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadInfo {
        self.threads.entry(tid).or_insert_with(|| ThreadInfo { tid, ..Default::default() })
    }

    fn push(&mut self, tid: u32, ts: u64, event: Event) {
        self.events.entry(tid).or_default().push(Timed { ts, event });
    }

    fn read_kernel(&mut self, path: &Path, data: &[u8]) {
        for rec in Decoder::new(&data[fmt::FILE_HEADER_LEN..], fmt::FILE_HEADER_LEN) {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    break;
                }
            };
            self.kernel_records += 1;
            let (tid, ts) = (rec.tid, rec.ts);
            match rec.payload {
                Payload::SwitchOut(p) => {
                    self.thread(tid).tgid = p.tgid;
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
                    self.thread(tid).tgid = p.tgid;
                    self.push(tid, ts, Event::SwitchIn { cpu: p.cpu, prev_tid: p.prev_tid });
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
                _ => {}
            }
        }
    }

    fn read_jvm(&mut self, path: &Path, data: &[u8]) {
        // Method ids are only unique within one JVM.
        let mut ids: HashMap<u64, MethodIdx> = HashMap::new();
        let mut interned: HashMap<MethodInfo, MethodIdx> = HashMap::new();
        for (i, m) in self.methods.iter().enumerate() {
            interned.insert(m.clone(), i as MethodIdx);
        }
        let mut jvm_pid = None;
        for rec in Decoder::new(&data[fmt::FILE_HEADER_LEN..], fmt::FILE_HEADER_LEN) {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    self.losses.truncated.push(format!("{}: {e}", path.display()));
                    break;
                }
            };
            self.jvm_records += 1;
            let (tid, ts) = (rec.tid, rec.ts);
            match rec.payload {
                Payload::JvmStart(p) => jvm_pid = Some(p.pid),
                Payload::ThreadStart(p) => {
                    let th = self.thread(tid);
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
                    let info = MethodInfo { class: d.class, name: d.name, signature: d.signature };
                    let next = self.methods.len() as MethodIdx;
                    let idx = *interned.entry(info.clone()).or_insert_with(|| {
                        self.methods.push(info);
                        next
                    });
                    ids.insert(d.method, idx);
                }
                Payload::MethodEntry(e) => match ids.get(&e.method) {
                    Some(&m) => self.push(tid, ts, Event::Enter(m)),
                    None => self.losses.truncated.push(format!(
                        "{}: method id {:#x} used before its definition",
                        path.display(),
                        e.method
                    )),
                },
                Payload::MethodExit(e) => match ids.get(&e.method) {
                    Some(&m) => self.push(
                        tid,
                        ts,
                        Event::Exit { method: m, exception: e.flags & fmt::EXIT_BY_EXCEPTION != 0 },
                    ),
                    None => self.losses.truncated.push(format!(
                        "{}: method id {:#x} used before its definition",
                        path.display(),
                        e.method
                    )),
                },
                Payload::JvmEnd(p) => self.losses.jvm += p.lost_events,
                Payload::AgentError(s) => self.losses.agent_errors.push(s),
                _ => {}
            }
        }
        if let Some(pid) = jvm_pid.or_else(|| pid_from_name(path)) {
            self.jvm_pids.push(pid);
        }
    }
}

fn pid_from_name(path: &Path) -> Option<u32> {
    path.file_stem()?.to_str()?.strip_prefix(fmt::JVM_FILE_PREFIX)?.parse().ok()
}

//! The jtrace on-disk record format, shared by the producers (the JVMTI agent
//! and the kernel recorder) and the reader (the merge crate).
//!
//! A trace is a directory. Each event stream in it (`kernel.bin`, one
//! `jvm-<pid>.bin` per traced JVM) is a [`FileHeader`] followed by records.
//! Every record starts with a 16-byte [`RecordHeader`] and is padded to a
//! multiple of 8 bytes, so a reader can skip kinds it does not know. All
//! integers are little-endian; all timestamps are CLOCK_MONOTONIC nanoseconds.
//! docs/FORMAT.md is the prose version of this file.

#![forbid(unsafe_code)]

/// Format version written into every stream header; bumped on incompatible change.
pub const FORMAT_VERSION: u32 = 1;
/// Magic of the kernel event stream.
pub const KERNEL_MAGIC: [u8; 8] = *b"JTRACEK\0";
/// Magic of a JVM event stream.
pub const JVM_MAGIC: [u8; 8] = *b"JTRACEJ\0";
/// Size of the stream header in bytes.
pub const FILE_HEADER_LEN: usize = 16;
/// Size of the record header in bytes.
pub const RECORD_HEADER_LEN: usize = 16;
/// Name of the kernel stream inside a trace directory.
pub const KERNEL_FILE: &str = "kernel.bin";
/// Name of the metadata file inside a trace directory.
pub const META_FILE: &str = "meta.json";
/// Prefix of JVM stream file names (`jvm-<pid>.bin`).
pub const JVM_FILE_PREFIX: &str = "jvm-";
/// Name of the agent's configuration file inside a trace directory.
pub const AGENT_CONFIG_FILE: &str = "agent.conf";

/// Record kinds. Kernel kinds are below 100, JVM kinds from 100 on.
pub mod kind {
    /// Kernel: the thread in the header was switched out. Payload: [`super::SwitchOut`].
    pub const SWITCH_OUT: u16 = 1;
    /// Kernel: the thread in the header was switched in. Payload: [`super::SwitchIn`].
    pub const SWITCH_IN: u16 = 2;
    /// Kernel: the thread in the header was woken (sched_waking / sched_wakeup_new).
    /// Payload: [`super::Wakeup`].
    pub const WAKEUP: u16 = 3;
    /// Kernel: the thread in the header was created. Payload: [`super::Fork`].
    pub const FORK: u16 = 4;
    /// Kernel: the thread in the header exited. Payload: [`super::TaskInfo`].
    pub const EXIT: u16 = 5;
    /// Kernel: name (comm) of the thread in the header, at first sight or rename.
    /// Payload: [`super::TaskInfo`].
    pub const COMM: u16 = 6;
    /// Kernel: the thread in the header called exec. Payload: [`super::TaskInfo`].
    pub const EXEC: u16 = 7;
    /// Kernel: a syscall of the thread, from entry (header ts) to exit.
    /// Payload: [`super::Syscall`].
    pub const SYSCALL: u16 = 8;
    /// Kernel: a user page fault of the thread. Payload: [`super::PageFault`].
    pub const PAGE_FAULT: u16 = 9;
    /// Kernel: a block I/O request the thread issued (header ts = issue), with
    /// its completion. Payload: [`super::BlockIo`].
    pub const BLOCK_IO: u16 = 10;
    /// Kernel: an interposed library call (uprobe/uretprobe pair), header ts =
    /// entry. Payload: [`super::LibCall`].
    pub const LIB_CALL: u16 = 11;
    /// Kernel stream: the name of a library-call probe id, written once by the
    /// recorder at start (tid 0). Payload: [`super::ProbeDef`].
    pub const PROBE_DEF: u16 = 12;
    /// Kernel stream: the path of a file (device + inode) some SYSCALL record
    /// names, resolved by the recorder in user space once per inode (tid 0,
    /// ts = that of the SYSCALL record naming it). Payload: [`super::FilePath`].
    pub const FILE_PATH: u16 = 13;

    /// JVM: the agent started in this JVM. Payload: [`super::JvmStart`].
    pub const JVM_START: u16 = 100;
    /// JVM: a Java thread started (or was first seen). Payload: [`super::ThreadStart`].
    pub const THREAD_START: u16 = 101;
    /// JVM: a Java thread ended. No payload.
    pub const THREAD_END: u16 = 102;
    /// JVM: definition of a method id, written once before its first use.
    /// Payload: [`super::MethodDef`].
    pub const METHOD_DEF: u16 = 103;
    /// JVM: a traced method was entered. Payload: [`super::MethodEvent`].
    pub const METHOD_ENTRY: u16 = 104;
    /// JVM: a traced method returned or threw. Payload: [`super::MethodEvent`].
    pub const METHOD_EXIT: u16 = 105;
    /// JVM: the JVM is shutting down; loss counters of the agent.
    /// Payload: [`super::JvmEnd`].
    pub const JVM_END: u16 = 106;
    /// JVM: the agent reports a problem (bad option, internal error).
    /// Payload: one string.
    pub const AGENT_ERROR: u16 = 107;
    /// JVM: the thread starts blocking on a contended monitor.
    /// Payload: [`super::JvmBlock`] (`arg` unused).
    pub const MONITOR_CONTENDED_ENTER: u16 = 108;
    /// JVM: the thread entered the contended monitor. Payload: [`super::JvmBlock`].
    pub const MONITOR_CONTENDED_ENTERED: u16 = 109;
    /// JVM: Object.wait begins. Payload: [`super::JvmBlock`] (`arg` = timeout ms).
    pub const MONITOR_WAIT: u16 = 110;
    /// JVM: Object.wait ended. Payload: [`super::JvmBlock`] (`arg` = 1 if timed out).
    pub const MONITOR_WAITED: u16 = 111;
    /// JVM: LockSupport/Unsafe.park begins. Payload: [`super::JvmBlock`]
    /// (`arg` = timeout ns or deadline, `class` = blocker class or "").
    pub const PARK_BEGIN: u16 = 112;
    /// JVM: park returned. Payload: [`super::JvmBlock`].
    pub const PARK_END: u16 = 113;
    /// JVM: Thread.sleep begins. Payload: [`super::JvmBlock`] (`arg` = ms).
    pub const SLEEP_BEGIN: u16 = 114;
    /// JVM: Thread.sleep returned. Payload: [`super::JvmBlock`].
    pub const SLEEP_END: u16 = 115;
    /// JVM: a stop-the-world garbage collection starts (all Java threads of
    /// the JVM are stopped until GC_END). Payload: [`super::JvmBlock`].
    pub const GC_START: u16 = 116;
    /// JVM: the garbage collection finished. Payload: [`super::JvmBlock`].
    pub const GC_END: u16 = 117;
    /// JVM: a non-GC safepoint / VM operation starts. Payload: [`super::JvmBlock`].
    pub const SAFEPOINT_BEGIN: u16 = 118;
    /// JVM: the safepoint ended. Payload: [`super::JvmBlock`].
    pub const SAFEPOINT_END: u16 = 119;
    /// JVM: a method was JIT-compiled. Payload: [`super::CompiledMethod`].
    pub const COMPILED_METHOD_LOAD: u16 = 120;
    /// JVM: compiled code was unloaded. Payload: [`super::CompiledMethod`].
    pub const COMPILED_METHOD_UNLOAD: u16 = 121;
    /// JVM: a sampled object allocation. Payload: [`super::JvmBlock`]
    /// (`arg` = size in bytes, `class` = allocated class).
    pub const ALLOC_SAMPLE: u16 = 122;
    /// JVM: a block of one thread's method entries and exits, 8 bytes each
    /// (bytecode-rewriting agent). Payload: [`super::MethodBatch`]; the
    /// header ts is the first event's time. Logically the same as one
    /// METHOD_ENTRY/METHOD_EXIT record per event: [`super::Decoder`]'s
    /// iterator yields it expanded into those.
    pub const METHOD_BATCH: u16 = 123;
}

/// [`SwitchIn::prev_tid`] of a switch-in the kernel never reported and the
/// recorder inferred (from the thread's CPU time at its next switch-out).
pub const PREV_TID_UNKNOWN: u32 = u32::MAX;

/// `prev_state` value of a task that was preempted while runnable.
pub const TASK_RUNNING: u32 = 0;

/// Flag in [`MethodEvent::flags`]: the method exited by an exception.
pub const EXIT_BY_EXCEPTION: u32 = 1;

/// Method ids in a [`MethodBatch`] are below this (30 bits); larger ids
/// need METHOD_ENTRY/METHOD_EXIT records.
pub const BATCH_METHOD_LIMIT: u64 = 1 << 30;

/// Most events one [`MethodBatch`] record holds (its length is a u16).
pub const BATCH_MAX_EVENTS: usize = (u16::MAX as usize - RECORD_HEADER_LEN - 8) / 8;

/// The 16 bytes at the start of every stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// [`KERNEL_MAGIC`] or [`JVM_MAGIC`].
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// [`STREAM_COMPLETE`] once the writer finished the stream; other bits zero.
    pub flags: u32,
}

/// Flag in [`FileHeader::flags`]: the writer closed the stream normally (a
/// JVM stream without it was cut off, e.g. by kill -9: it is read up to the
/// first zero-filled record and reported as incomplete).
pub const STREAM_COMPLETE: u32 = 1;

impl FileHeader {
    /// A header for a stream with the given magic, at the current version.
    pub fn new(magic: [u8; 8]) -> Self {
        FileHeader {
            magic,
            version: FORMAT_VERSION,
            flags: 0,
        }
    }

    /// Serialises the header.
    pub fn to_bytes(&self) -> [u8; FILE_HEADER_LEN] {
        let mut b = [0u8; FILE_HEADER_LEN];
        b[..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b
    }

    /// Parses a header; `None` if `b` is too short.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < FILE_HEADER_LEN {
            return None;
        }
        Some(FileHeader {
            magic: b[..8].try_into().ok()?,
            version: u32::from_le_bytes(b[8..12].try_into().ok()?),
            flags: u32::from_le_bytes(b[12..16].try_into().ok()?),
        })
    }
}

/// The 16 bytes at the start of every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// One of the [`kind`] constants.
    pub kind: u16,
    /// Total record length in bytes, header and padding included; a multiple of 8.
    pub len: u16,
    /// Kernel thread id the record is about.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
}

/// Kernel payload of [`kind::SWITCH_OUT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchOut {
    /// Thread group (process) id of the thread.
    pub tgid: u32,
    /// Kernel `prev_state`: [`TASK_RUNNING`] (0) means preempted (involuntary).
    pub prev_state: u32,
    /// CPU the thread left.
    pub cpu: u32,
    /// Thread that got the CPU.
    pub next_tid: u32,
}

/// Kernel payload of [`kind::SWITCH_IN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchIn {
    /// Thread group (process) id of the thread.
    pub tgid: u32,
    /// CPU the thread got.
    pub cpu: u32,
    /// Thread that left the CPU.
    pub prev_tid: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Kernel payload of [`kind::WAKEUP`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wakeup {
    /// Thread group of the woken thread.
    pub tgid: u32,
    /// Thread that did the waking (the current task at sched_waking).
    pub waker_tid: u32,
    /// Process of the waker.
    pub waker_tgid: u32,
    /// CPU the woken thread is queued on.
    pub target_cpu: u32,
    /// 0 = sched_waking, 1 = sched_wakeup_new (a new thread's first wakeup).
    pub new_task: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Kernel payload of [`kind::FORK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    /// Thread group of the new thread (== tid for a new process).
    pub tgid: u32,
    /// Thread that created it.
    pub parent_tid: u32,
    /// Process of the creator.
    pub parent_tgid: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Name (comm) inherited at creation, NUL-padded.
    pub comm: [u8; 16],
}

/// Kernel payload of [`kind::EXIT`], [`kind::COMM`] and [`kind::EXEC`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskInfo {
    /// Thread group of the thread.
    pub tgid: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Name (comm), NUL-padded.
    pub comm: [u8; 16],
}

/// Kind of the file behind an fd, resolved in the kernel at the syscall.
pub mod fd_kind {
    /// No fd, or not resolved.
    pub const NONE: u32 = 0;
    /// A socket.
    pub const SOCKET: u32 = 1;
    /// A regular file.
    pub const FILE: u32 = 2;
    /// A pipe or FIFO.
    pub const PIPE: u32 = 3;
    /// A block device.
    pub const BLOCK: u32 = 4;
    /// A character device.
    pub const CHAR: u32 = 5;
    /// An anonymous inode (eventfd, epoll, timerfd, ...).
    pub const ANON: u32 = 6;
    /// A directory.
    pub const DIR: u32 = 7;
    /// Anything else.
    pub const OTHER: u32 = 8;

    /// Name of an fd kind.
    pub fn name(k: u32) -> &'static str {
        match k {
            SOCKET => "socket",
            FILE => "file",
            PIPE => "pipe",
            BLOCK => "block",
            CHAR => "char",
            ANON => "anon",
            DIR => "dir",
            OTHER => "other",
            _ => "none",
        }
    }
}

/// Symbol of HotSpot's `SafepointSynchronize::begin()`: the kernel recorder
/// probes it as a library call (LIB_CALL); a safepoint starts when it is called.
pub const SAFEPOINT_BEGIN_SYMBOL: &str = "_ZN20SafepointSynchronize5beginEv";
/// Symbol of HotSpot's `SafepointSynchronize::end()`: the safepoint is over when it returns.
pub const SAFEPOINT_END_SYMBOL: &str = "_ZN20SafepointSynchronize3endEv";

/// Flag in [`Syscall::flags`]: the thread switched out inside the syscall.
pub const SYSCALL_BLOCKED: u32 = 1;

/// Flag in [`Syscall::flags`]: written at a voluntary switch-out inside the
/// syscall (read from the task's saved registers), not at its exit. The
/// record describes that one block: the header ts is the switch-out, the
/// block ends at the thread's next SWITCH_IN, `exit_ts` and `ret` are 0
/// (not known). Costs nothing on syscalls that do not block.
pub const SYSCALL_AT_SWITCH: u32 = 2;

/// Kernel payload of [`kind::SYSCALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Syscall {
    /// Exit time (the header ts is the entry time); 0 with [`SYSCALL_AT_SWITCH`].
    pub exit_ts: u64,
    /// x86-64 syscall number.
    pub nr: u32,
    /// [`fd_kind`] of `fd`.
    pub fd_kind: u32,
    /// Return value (0 with [`SYSCALL_AT_SWITCH`]: not known).
    pub ret: i64,
    /// The fd argument, or -1.
    pub fd: i32,
    /// [`SYSCALL_BLOCKED`], [`SYSCALL_AT_SWITCH`].
    pub flags: u32,
    /// A syscall-specific argument: futex address and op, timeout, ...
    pub arg: u64,
    /// Socket address family (AF_INET 2, AF_INET6 10, AF_UNIX 1) or 0.
    pub family: u16,
    /// Socket protocol (IPPROTO_TCP 6, IPPROTO_UDP 17) or 0.
    pub protocol: u16,
    /// Local port (host order).
    pub sport: u16,
    /// Remote port (host order).
    pub dport: u16,
    /// Local address (IPv4 in the first 4 bytes).
    pub saddr: [u8; 16],
    /// Remote address.
    pub daddr: [u8; 16],
    /// File: device number (kernel dev_t).
    pub dev: u64,
    /// File: inode number.
    pub ino: u64,
}

impl Syscall {
    /// Bytes of the payload on the wire (no padding needed: a multiple of 8).
    pub const LEN: usize = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 2 * 4 + 16 * 2 + 8 + 8;

    /// The payload as the stream carries it. The one encoding of the
    /// record: [`Encoder`] writes it, and the merge's sorted runs reuse it.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Syscall::LEN] {
        let mut o = [0u8; Syscall::LEN];
        let mut at = 0;
        let mut put = |b: &[u8]| {
            o[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        put(&self.exit_ts.to_le_bytes());
        put(&self.nr.to_le_bytes());
        put(&self.fd_kind.to_le_bytes());
        put(&self.ret.to_le_bytes());
        put(&self.fd.to_le_bytes());
        put(&self.flags.to_le_bytes());
        put(&self.arg.to_le_bytes());
        for v in [self.family, self.protocol, self.sport, self.dport] {
            put(&v.to_le_bytes());
        }
        put(&self.saddr);
        put(&self.daddr);
        put(&self.dev.to_le_bytes());
        put(&self.ino.to_le_bytes());
        o
    }

    /// Reads the payload from the start of `b` (the inverse of
    /// [`Syscall::to_bytes`]); `None` when `b` is shorter than [`Syscall::LEN`].
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Option<Syscall> {
        let b: &[u8; Syscall::LEN] = b.first_chunk()?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let arr_at = |i: usize| -> [u8; 16] { b[i..i + 16].try_into().expect("16 bytes") };
        Some(Syscall {
            exit_ts: u64_at(0),
            nr: u32_at(8),
            fd_kind: u32_at(12),
            ret: u64_at(16) as i64,
            fd: u32_at(24) as i32,
            flags: u32_at(28),
            arg: u64_at(32),
            family: u16_at(40),
            protocol: u16_at(42),
            sport: u16_at(44),
            dport: u16_at(46),
            saddr: arr_at(48),
            daddr: arr_at(64),
            dev: u64_at(80),
            ino: u64_at(88),
        })
    }
}

/// Kernel payload of [`kind::PAGE_FAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFault {
    /// Faulting address.
    pub address: u64,
    /// User instruction pointer.
    pub ip: u64,
    /// Hardware error code.
    pub error_code: u64,
}

/// Kernel payload of [`kind::BLOCK_IO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIo {
    /// Completion time (0 if not seen).
    pub complete_ts: u64,
    /// Device (kernel dev_t).
    pub dev: u64,
    /// First sector.
    pub sector: u64,
    /// Bytes.
    pub bytes: u32,
    /// 1 = write, 0 = read.
    pub write: u32,
}

/// Kernel payload of [`kind::LIB_CALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibCall {
    /// Return time (the header ts is the call time).
    pub exit_ts: u64,
    /// Probe id, named by a [`ProbeDef`].
    pub probe: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Return value.
    pub ret: u64,
}

/// Kernel payload of [`kind::PROBE_DEF`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeDef {
    /// Id used by [`LibCall::probe`].
    pub probe: u32,
    /// Library as the user named it (`libz.so.1`).
    pub library: String,
    /// Symbol (`inflate`).
    pub symbol: String,
}

/// Kernel payload of [`kind::FILE_PATH`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePath {
    /// Device (kernel dev_t), as in [`Syscall::dev`].
    pub dev: u64,
    /// Inode number, as in [`Syscall::ino`].
    pub ino: u64,
    /// Absolute path the file had when it was resolved.
    pub path: String,
}

/// JVM payload shared by the blocking, GC and allocation kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmBlock {
    /// Kind-specific number (timeout, timed-out flag, size): see the kind.
    pub arg: u64,
    /// Class of the monitor / blocker / allocated object, or "".
    pub class: String,
}

/// JVM payload of [`kind::ALLOC_SAMPLE`]: a sampled object allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocSample {
    /// Size of the allocated object in bytes.
    pub size: u64,
    /// Its class (`java.lang.String`, `[B`).
    pub class: String,
    /// The allocating method (defined by a METHOD_DEF, which may come
    /// later); 0 if unknown (writers before the site was recorded).
    pub method: u64,
    /// Source line of the allocation in that method; -1 if unknown.
    pub line: i32,
}

/// JVM payload of [`kind::COMPILED_METHOD_LOAD`] / [`kind::COMPILED_METHOD_UNLOAD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompiledMethod {
    /// Method id (defined by a METHOD_DEF, which may come later for
    /// methods that are not traced).
    pub method: u64,
    /// Start of the compiled code.
    pub code_addr: u64,
    /// Size of the compiled code in bytes.
    pub code_size: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// JVM payload of [`kind::JVM_START`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmStart {
    /// Process id of the JVM.
    pub pid: u32,
    /// `java.vm.version` or similar, as the agent could learn it.
    pub vm_version: String,
}

/// JVM payload of [`kind::THREAD_START`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStart {
    /// 1 if the thread is a daemon thread.
    pub daemon: u32,
    /// Java thread name.
    pub name: String,
    /// Thread group name ("" if unknown).
    pub group: String,
    /// Name of the thread that started it ("" if unknown).
    pub parent: String,
}

/// JVM payload of [`kind::METHOD_DEF`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodDef {
    /// Identifier used by [`MethodEvent::method`] in this stream.
    pub method: u64,
    /// Fully qualified class name with dots (`com.acme.Foo`).
    pub class: String,
    /// Method name (`bar`, `<init>`).
    pub name: String,
    /// JVM signature (`(I)V`).
    pub signature: String,
}

/// JVM payload of [`kind::METHOD_ENTRY`] and [`kind::METHOD_EXIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodEvent {
    /// Method id, defined by an earlier [`MethodDef`].
    pub method: u64,
    /// [`EXIT_BY_EXCEPTION`] on an exceptional exit, else 0.
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// What a [`BatchedMethodEvent`] is (the top two bits of its tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchedKind {
    /// The method was entered.
    Entry = 0,
    /// The method returned.
    Exit = 1,
    /// The method exited by an exception.
    ExitByException = 2,
}

/// One event of a [`MethodBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchedMethodEvent {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// Method id (below [`BATCH_METHOD_LIMIT`]), defined by an earlier [`MethodDef`].
    pub method: u32,
    /// Entry or exit.
    pub kind: BatchedKind,
}

impl BatchedMethodEvent {
    /// The same event as a METHOD_ENTRY/METHOD_EXIT payload.
    pub fn to_payload(self) -> Payload {
        method_payload(self.method as u64, self.kind)
    }
}

fn method_payload(method: u64, kind: BatchedKind) -> Payload {
    let ev = |flags| MethodEvent {
        method,
        flags,
        reserved: 0,
    };
    match kind {
        BatchedKind::Entry => Payload::MethodEntry(ev(0)),
        BatchedKind::Exit => Payload::MethodExit(ev(0)),
        BatchedKind::ExitByException => Payload::MethodExit(ev(EXIT_BY_EXCEPTION)),
    }
}

/// JVM payload of [`kind::METHOD_BATCH`]: u32 count, u32 reserved, then
/// `count` events of a u32 time delta (ns since the previous event, the
/// first one's since the header ts) and a u32 tag (method id in bits 0–29,
/// [`BatchedKind`] in bits 30–31). A quarter of the bytes of one 32-byte
/// record per event, which is what a traced call costs in page supply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodBatch {
    /// The events, in time order (the first one's ts is the header ts).
    pub events: Vec<BatchedMethodEvent>,
}

/// Iterates over the events of a METHOD_BATCH payload; see [`batch_events`].
#[derive(Debug, Clone)]
pub struct BatchEvents<'a> {
    entries: std::slice::ChunksExact<'a, u8>,
    ts: u64,
}

impl Iterator for BatchEvents<'_> {
    type Item = BatchedMethodEvent;

    #[inline]
    fn next(&mut self) -> Option<BatchedMethodEvent> {
        let e = self.entries.next()?;
        let delta = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let tag = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        self.ts += delta as u64;
        let kind = match tag >> 30 {
            0 => BatchedKind::Entry,
            1 => BatchedKind::Exit,
            // 3 is unassigned: read as an exceptional exit rather than lose
            // the frame's end.
            _ => BatchedKind::ExitByException,
        };
        Some(BatchedMethodEvent {
            ts: self.ts,
            method: tag & (BATCH_METHOD_LIMIT as u32 - 1),
            kind,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for BatchEvents<'_> {}

/// The events of a METHOD_BATCH record with header time `ts` and payload
/// `payload`; `None` when the payload is shorter than its count says.
#[inline]
pub fn batch_events(ts: u64, payload: &[u8]) -> Option<BatchEvents<'_>> {
    let count = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let entries = payload.get(8..8 + count.checked_mul(8)?)?;
    Some(BatchEvents {
        entries: entries.chunks_exact(8),
        ts,
    })
}

/// Writes METHOD_BATCH records for one thread into a byte buffer: events
/// are appended to an open batch, which is closed (its length and count
/// written) when it is full, when the next event is more than u32::MAX ns
/// later or earlier than the last, or by [`BatchWriter::finish`]. An event
/// whose method id does not fit 30 bits gets a METHOD_ENTRY/METHOD_EXIT
/// record of its own. The agent's hot flush path; the bytes are what
/// [`Encoder::record`] writes for the same batches.
#[derive(Debug)]
pub struct BatchWriter {
    tid: u32,
    /// Offset of the open batch record in the buffer; usize::MAX if none.
    start: usize,
    /// Events in the open batch; [`BATCH_MAX_EVENTS`] when none is open,
    /// so that one test sends both "full" and "closed" to the slow path.
    count: usize,
    last_ts: u64,
}

impl BatchWriter {
    /// A writer of thread `tid`'s events.
    pub fn new(tid: u32) -> Self {
        BatchWriter {
            tid,
            start: usize::MAX,
            count: BATCH_MAX_EVENTS,
            last_ts: 0,
        }
    }

    /// Appends one event to `out` (which must be the same buffer until
    /// [`BatchWriter::finish`]).
    #[inline(always)]
    pub fn push(&mut self, out: &mut Vec<u8>, ts: u64, method: u64, kind: BatchedKind) {
        // An earlier ts wraps to a huge delta: one test covers "too far"
        // and "backwards".
        let delta = ts.wrapping_sub(self.last_ts);
        if delta > u32::MAX as u64 || method >= BATCH_METHOD_LIMIT || self.count >= BATCH_MAX_EVENTS {
            return self.push_slow(out, ts, method, kind);
        }
        let entry = delta | ((method as u32 | (kind as u32) << 30) as u64) << 32;
        out.extend_from_slice(&entry.to_le_bytes());
        self.last_ts = ts;
        self.count += 1;
    }

    #[cold]
    fn push_slow(&mut self, out: &mut Vec<u8>, ts: u64, method: u64, kind: BatchedKind) {
        self.finish(out);
        if method >= BATCH_METHOD_LIMIT {
            let mut enc = Encoder::new();
            enc.record(&Record {
                tid: self.tid,
                ts,
                payload: method_payload(method, kind),
            });
            out.extend_from_slice(&enc.buf);
            return;
        }
        self.start = out.len();
        self.count = 0;
        self.last_ts = ts;
        let mut head = [0u8; RECORD_HEADER_LEN + 8];
        head[..2].copy_from_slice(&kind::METHOD_BATCH.to_le_bytes());
        head[4..8].copy_from_slice(&self.tid.to_le_bytes());
        head[8..16].copy_from_slice(&ts.to_le_bytes());
        out.extend_from_slice(&head);
        self.push(out, ts, method, kind);
    }

    /// Closes the open batch, if any (writes its length and count).
    pub fn finish(&mut self, out: &mut [u8]) {
        if self.start == usize::MAX {
            return;
        }
        let len = (RECORD_HEADER_LEN + 8 + 8 * self.count) as u16;
        let s = self.start;
        out[s + 2..s + 4].copy_from_slice(&len.to_le_bytes());
        out[s + RECORD_HEADER_LEN..s + RECORD_HEADER_LEN + 4].copy_from_slice(&(self.count as u32).to_le_bytes());
        self.start = usize::MAX;
        self.count = BATCH_MAX_EVENTS;
    }
}

/// JVM payload of [`kind::JVM_END`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmEnd {
    /// Events the agent could not record (buffer or write failures).
    pub lost_events: u64,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// See [`kind::SWITCH_OUT`].
    SwitchOut(SwitchOut),
    /// See [`kind::SWITCH_IN`].
    SwitchIn(SwitchIn),
    /// See [`kind::WAKEUP`].
    Wakeup(Wakeup),
    /// See [`kind::FORK`].
    Fork(Fork),
    /// See [`kind::EXIT`].
    Exit(TaskInfo),
    /// See [`kind::COMM`].
    Comm(TaskInfo),
    /// See [`kind::EXEC`].
    Exec(TaskInfo),
    /// See [`kind::JVM_START`].
    JvmStart(JvmStart),
    /// See [`kind::THREAD_START`].
    ThreadStart(ThreadStart),
    /// See [`kind::THREAD_END`].
    ThreadEnd,
    /// See [`kind::METHOD_DEF`].
    MethodDef(MethodDef),
    /// See [`kind::METHOD_ENTRY`].
    MethodEntry(MethodEvent),
    /// See [`kind::METHOD_EXIT`].
    MethodExit(MethodEvent),
    /// See [`kind::METHOD_BATCH`]. [`Decoder`]'s iterator never yields it
    /// (it yields the events one by one); [`RawRecord::decode`] does.
    MethodBatch(MethodBatch),
    /// See [`kind::JVM_END`].
    JvmEnd(JvmEnd),
    /// See [`kind::AGENT_ERROR`].
    AgentError(String),
    /// See [`kind::SYSCALL`].
    Syscall(Syscall),
    /// See [`kind::PAGE_FAULT`].
    PageFault(PageFault),
    /// See [`kind::BLOCK_IO`].
    BlockIo(BlockIo),
    /// See [`kind::LIB_CALL`].
    LibCall(LibCall),
    /// See [`kind::PROBE_DEF`].
    ProbeDef(ProbeDef),
    /// See [`kind::FILE_PATH`].
    FilePath(FilePath),
    /// One of the JVM kinds carrying a [`JvmBlock`] (monitor, wait, park,
    /// sleep, GC, safepoint): the kind says which.
    Jvm(u16, JvmBlock),
    /// See [`kind::ALLOC_SAMPLE`].
    Alloc(AllocSample),
    /// See [`kind::COMPILED_METHOD_LOAD`] (`true`) and `_UNLOAD` (`false`).
    Compiled(bool, CompiledMethod),
    /// A kind this reader does not know (skipped by length).
    Unknown(u16),
}

/// A decoded record: header fields plus payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Kernel thread id.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// What happened.
    pub payload: Payload,
}

/// Appends records to a byte buffer in the on-disk encoding.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    /// The encoded bytes so far.
    pub buf: Vec<u8>,
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Encoder { buf: Vec::new() }
    }

    fn begin(&mut self, kind: u16, tid: u32, ts: u64) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&kind.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf.extend_from_slice(&tid.to_le_bytes());
        self.buf.extend_from_slice(&ts.to_le_bytes());
        start
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Strings are a u16 byte length then UTF-8 bytes, cut at 4096 bytes.
    fn str(&mut self, s: &str) {
        let mut n = s.len().min(4096);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf.extend_from_slice(&(n as u16).to_le_bytes());
        self.buf.extend_from_slice(&s.as_bytes()[..n]);
    }

    fn end(&mut self, start: usize) {
        while !(self.buf.len() - start).is_multiple_of(8) {
            self.buf.push(0);
        }
        let len = (self.buf.len() - start) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Encodes one record.
    pub fn record(&mut self, r: &Record) {
        let kind = payload_kind(&r.payload);
        let s = self.begin(kind, r.tid, r.ts);
        match &r.payload {
            Payload::SwitchOut(p) => {
                self.u32(p.tgid);
                self.u32(p.prev_state);
                self.u32(p.cpu);
                self.u32(p.next_tid);
            }
            Payload::SwitchIn(p) => {
                self.u32(p.tgid);
                self.u32(p.cpu);
                self.u32(p.prev_tid);
                self.u32(p.reserved);
            }
            Payload::Wakeup(p) => {
                self.u32(p.tgid);
                self.u32(p.waker_tid);
                self.u32(p.waker_tgid);
                self.u32(p.target_cpu);
                self.u32(p.new_task);
                self.u32(p.reserved);
            }
            Payload::Fork(p) => {
                self.u32(p.tgid);
                self.u32(p.parent_tid);
                self.u32(p.parent_tgid);
                self.u32(p.reserved);
                self.buf.extend_from_slice(&p.comm);
            }
            Payload::Exit(p) | Payload::Comm(p) | Payload::Exec(p) => {
                self.u32(p.tgid);
                self.u32(p.reserved);
                self.buf.extend_from_slice(&p.comm);
            }
            Payload::JvmStart(p) => {
                self.u32(p.pid);
                self.str(&p.vm_version);
            }
            Payload::ThreadStart(p) => {
                self.u32(p.daemon);
                self.str(&p.name);
                self.str(&p.group);
                self.str(&p.parent);
            }
            Payload::ThreadEnd => {}
            Payload::MethodDef(p) => {
                self.u64(p.method);
                self.str(&p.class);
                self.str(&p.name);
                self.str(&p.signature);
            }
            Payload::MethodEntry(p) | Payload::MethodExit(p) => {
                self.u64(p.method);
                self.u32(p.flags);
                self.u32(p.reserved);
            }
            Payload::MethodBatch(p) => {
                let mut w = BatchWriter::new(r.tid);
                // The writer opens its own record(s): drop the header begun above.
                self.buf.truncate(s);
                for e in &p.events {
                    w.push(&mut self.buf, e.ts, e.method as u64, e.kind);
                }
                w.finish(&mut self.buf);
                return;
            }
            Payload::JvmEnd(p) => self.u64(p.lost_events),
            Payload::AgentError(s) => self.str(s),
            Payload::Syscall(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::PageFault(p) => {
                self.u64(p.address);
                self.u64(p.ip);
                self.u64(p.error_code);
            }
            Payload::BlockIo(p) => {
                self.u64(p.complete_ts);
                self.u64(p.dev);
                self.u64(p.sector);
                self.u32(p.bytes);
                self.u32(p.write);
            }
            Payload::LibCall(p) => {
                self.u64(p.exit_ts);
                self.u32(p.probe);
                self.u32(p.reserved);
                self.u64(p.ret);
            }
            Payload::ProbeDef(p) => {
                self.u32(p.probe);
                self.str(&p.library);
                self.str(&p.symbol);
            }
            Payload::FilePath(p) => {
                self.u64(p.dev);
                self.u64(p.ino);
                self.str(&p.path);
            }
            Payload::Jvm(_, p) => {
                self.u64(p.arg);
                self.str(&p.class);
            }
            Payload::Alloc(p) => {
                self.u64(p.size);
                self.str(&p.class);
                self.u64(p.method);
                self.u32(p.line as u32);
                self.u32(0);
            }
            Payload::Compiled(_, p) => {
                self.u64(p.method);
                self.u64(p.code_addr);
                self.u32(p.code_size);
                self.u32(p.reserved);
            }
            Payload::Unknown(_) => {}
        }
        self.end(s);
    }
}

fn payload_kind(p: &Payload) -> u16 {
    match p {
        Payload::SwitchOut(_) => kind::SWITCH_OUT,
        Payload::SwitchIn(_) => kind::SWITCH_IN,
        Payload::Wakeup(_) => kind::WAKEUP,
        Payload::Fork(_) => kind::FORK,
        Payload::Exit(_) => kind::EXIT,
        Payload::Comm(_) => kind::COMM,
        Payload::Exec(_) => kind::EXEC,
        Payload::JvmStart(_) => kind::JVM_START,
        Payload::ThreadStart(_) => kind::THREAD_START,
        Payload::ThreadEnd => kind::THREAD_END,
        Payload::MethodDef(_) => kind::METHOD_DEF,
        Payload::MethodEntry(_) => kind::METHOD_ENTRY,
        Payload::MethodExit(_) => kind::METHOD_EXIT,
        Payload::MethodBatch(_) => kind::METHOD_BATCH,
        Payload::JvmEnd(_) => kind::JVM_END,
        Payload::AgentError(_) => kind::AGENT_ERROR,
        Payload::Syscall(_) => kind::SYSCALL,
        Payload::PageFault(_) => kind::PAGE_FAULT,
        Payload::BlockIo(_) => kind::BLOCK_IO,
        Payload::LibCall(_) => kind::LIB_CALL,
        Payload::ProbeDef(_) => kind::PROBE_DEF,
        Payload::FilePath(_) => kind::FILE_PATH,
        Payload::Jvm(k, _) => *k,
        Payload::Alloc(_) => kind::ALLOC_SAMPLE,
        Payload::Compiled(true, _) => kind::COMPILED_METHOD_LOAD,
        Payload::Compiled(false, _) => kind::COMPILED_METHOD_UNLOAD,
        Payload::Unknown(k) => *k,
    }
}

/// Why a stream could not be decoded further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ends inside a record: a writer was cut off. Everything
    /// before `offset` is valid.
    Truncated {
        /// Byte offset of the incomplete record.
        offset: usize,
    },
    /// A record header is malformed (length 0, not a multiple of 8, or a
    /// payload shorter than its kind needs).
    Corrupt {
        /// Byte offset of the bad record.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated { offset } => {
                write!(f, "stream ends inside a record at byte {offset}")
            }
            DecodeError::Corrupt { offset, what } => {
                write!(f, "corrupt record at byte {offset}: {what}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Iterates over the records of a stream body (the bytes after the file header).
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
    /// The rest of the METHOD_BATCH the iterator is expanding (its tid).
    batch: Option<(u32, BatchEvents<'a>)>,
}

impl<'a> Decoder<'a> {
    /// Decodes `data`; `base` is the offset of `data` in the file, for messages.
    pub fn new(data: &'a [u8], base: usize) -> Self {
        Decoder {
            data,
            pos: 0,
            base,
            batch: None,
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let v = u32::from_le_bytes(self.b.get(self.at..self.at + 4)?.try_into().ok()?);
        self.at += 4;
        Some(v)
    }
    fn u64(&mut self) -> Option<u64> {
        let v = u64::from_le_bytes(self.b.get(self.at..self.at + 8)?.try_into().ok()?);
        self.at += 8;
        Some(v)
    }
    fn comm(&mut self) -> Option<[u8; 16]> {
        let v: [u8; 16] = self.b.get(self.at..self.at + 16)?.try_into().ok()?;
        self.at += 16;
        Some(v)
    }
    fn str(&mut self) -> Option<String> {
        let n = u16::from_le_bytes(self.b.get(self.at..self.at + 2)?.try_into().ok()?) as usize;
        self.at += 2;
        let s = String::from_utf8_lossy(self.b.get(self.at..self.at + n)?).into_owned();
        self.at += n;
        Some(s)
    }
}

fn decode_payload(kind: u16, ts: u64, b: &[u8]) -> Option<Payload> {
    let mut c = Cursor { b, at: 0 };
    Some(match kind {
        kind::SWITCH_OUT => Payload::SwitchOut(SwitchOut {
            tgid: c.u32()?,
            prev_state: c.u32()?,
            cpu: c.u32()?,
            next_tid: c.u32()?,
        }),
        kind::SWITCH_IN => Payload::SwitchIn(SwitchIn {
            tgid: c.u32()?,
            cpu: c.u32()?,
            prev_tid: c.u32()?,
            reserved: c.u32()?,
        }),
        kind::WAKEUP => Payload::Wakeup(Wakeup {
            tgid: c.u32()?,
            waker_tid: c.u32()?,
            waker_tgid: c.u32()?,
            target_cpu: c.u32()?,
            new_task: c.u32()?,
            reserved: c.u32()?,
        }),
        kind::FORK => Payload::Fork(Fork {
            tgid: c.u32()?,
            parent_tid: c.u32()?,
            parent_tgid: c.u32()?,
            reserved: c.u32()?,
            comm: c.comm()?,
        }),
        kind::EXIT | kind::COMM | kind::EXEC => {
            let t = TaskInfo {
                tgid: c.u32()?,
                reserved: c.u32()?,
                comm: c.comm()?,
            };
            match kind {
                kind::EXIT => Payload::Exit(t),
                kind::COMM => Payload::Comm(t),
                _ => Payload::Exec(t),
            }
        }
        kind::JVM_START => Payload::JvmStart(JvmStart {
            pid: c.u32()?,
            vm_version: c.str()?,
        }),
        kind::THREAD_START => Payload::ThreadStart(ThreadStart {
            daemon: c.u32()?,
            name: c.str()?,
            group: c.str()?,
            parent: c.str()?,
        }),
        kind::THREAD_END => Payload::ThreadEnd,
        kind::METHOD_DEF => Payload::MethodDef(MethodDef {
            method: c.u64()?,
            class: c.str()?,
            name: c.str()?,
            signature: c.str()?,
        }),
        kind::METHOD_ENTRY | kind::METHOD_EXIT => {
            let e = MethodEvent {
                method: c.u64()?,
                flags: c.u32()?,
                reserved: c.u32()?,
            };
            if kind == kind::METHOD_ENTRY {
                Payload::MethodEntry(e)
            } else {
                Payload::MethodExit(e)
            }
        }
        kind::METHOD_BATCH => Payload::MethodBatch(MethodBatch {
            events: batch_events(ts, b)?.collect(),
        }),
        kind::JVM_END => Payload::JvmEnd(JvmEnd { lost_events: c.u64()? }),
        kind::AGENT_ERROR => Payload::AgentError(c.str()?),
        kind::SYSCALL => Payload::Syscall(Syscall::from_bytes(b)?),
        kind::PAGE_FAULT => Payload::PageFault(PageFault {
            address: c.u64()?,
            ip: c.u64()?,
            error_code: c.u64()?,
        }),
        kind::BLOCK_IO => Payload::BlockIo(BlockIo {
            complete_ts: c.u64()?,
            dev: c.u64()?,
            sector: c.u64()?,
            bytes: c.u32()?,
            write: c.u32()?,
        }),
        kind::LIB_CALL => Payload::LibCall(LibCall {
            exit_ts: c.u64()?,
            probe: c.u32()?,
            reserved: c.u32()?,
            ret: c.u64()?,
        }),
        kind::PROBE_DEF => Payload::ProbeDef(ProbeDef {
            probe: c.u32()?,
            library: c.str()?,
            symbol: c.str()?,
        }),
        kind::FILE_PATH => Payload::FilePath(FilePath {
            dev: c.u64()?,
            ino: c.u64()?,
            path: c.str()?,
        }),
        kind::MONITOR_CONTENDED_ENTER..=kind::SAFEPOINT_END => Payload::Jvm(
            kind,
            JvmBlock {
                arg: c.u64()?,
                class: c.str()?,
            },
        ),
        kind::ALLOC_SAMPLE => {
            let (size, class) = (c.u64()?, c.str()?);
            // The site came later: older streams end after the class.
            let (method, line) = match (c.u64(), c.u32()) {
                (Some(m), Some(l)) => (m, l as i32),
                _ => (0, -1),
            };
            Payload::Alloc(AllocSample {
                size,
                class,
                method,
                line,
            })
        }
        kind::COMPILED_METHOD_LOAD | kind::COMPILED_METHOD_UNLOAD => Payload::Compiled(
            kind == kind::COMPILED_METHOD_LOAD,
            CompiledMethod {
                method: c.u64()?,
                code_addr: c.u64()?,
                code_size: c.u32()?,
                reserved: c.u32()?,
            },
        ),
        other => Payload::Unknown(other),
    })
}

/// A record whose payload is not decoded yet: its header fields and the
/// payload bytes, borrowed from the stream. Readers that only need a few
/// fixed-offset fields of the hot kinds read them from `payload` directly
/// (no [`Payload`] built, nothing allocated) and [`RawRecord::decode`] the rest.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// Record kind ([`kind`]).
    pub kind: u16,
    /// Kernel thread id.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// The payload bytes (record length minus the header; may include padding).
    pub payload: &'a [u8],
    /// Offset of the record in the file, for messages.
    pub offset: usize,
}

impl RawRecord<'_> {
    /// Decodes the payload, exactly as [`Decoder`]'s iterator does.
    pub fn decode(&self) -> Result<Record, DecodeError> {
        match decode_payload(self.kind, self.ts, self.payload) {
            Some(payload) => Ok(Record {
                tid: self.tid,
                ts: self.ts,
                payload,
            }),
            None => Err(DecodeError::Corrupt {
                offset: self.offset,
                what: "payload shorter than its kind",
            }),
        }
    }
}

impl<'a> Decoder<'a> {
    /// The next record with its payload undecoded. After an error (or a
    /// payload that then fails to [`RawRecord::decode`]) the caller stops.
    #[inline]
    pub fn next_raw(&mut self) -> Option<Result<RawRecord<'a>, DecodeError>> {
        let data: &'a [u8] = self.data;
        let rest = &data[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let offset = self.base + self.pos;
        let Some(head) = rest.first_chunk::<RECORD_HEADER_LEN>() else {
            self.pos = data.len();
            return Some(Err(DecodeError::Truncated { offset }));
        };
        let kind = u16::from_le_bytes([head[0], head[1]]);
        let len = u16::from_le_bytes([head[2], head[3]]) as usize;
        let tid = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let ts = u64::from_le_bytes([
            head[8], head[9], head[10], head[11], head[12], head[13], head[14], head[15],
        ]);
        if kind == 0 && len == 0 {
            // Zero fill: a preallocated or mmap'd file that was not written
            // to the end. Treat as the end of the stream.
            self.pos = data.len();
            return None;
        }
        if len < RECORD_HEADER_LEN || !len.is_multiple_of(8) {
            self.pos = data.len();
            return Some(Err(DecodeError::Corrupt {
                offset,
                what: "bad record length",
            }));
        }
        if rest.len() < len {
            self.pos = data.len();
            return Some(Err(DecodeError::Truncated { offset }));
        }
        self.pos += len;
        Some(Ok(RawRecord {
            kind,
            tid,
            ts,
            payload: &rest[RECORD_HEADER_LEN..len],
            offset,
        }))
    }
}

/// Yields every record decoded, METHOD_BATCH records as the
/// METHOD_ENTRY/METHOD_EXIT records they stand for.
impl<'a> Iterator for Decoder<'a> {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((tid, events)) = &mut self.batch {
                if let Some(e) = events.next() {
                    return Some(Ok(Record {
                        tid: *tid,
                        ts: e.ts,
                        payload: e.to_payload(),
                    }));
                }
                self.batch = None;
            }
            let raw = match self.next_raw()? {
                Ok(raw) if raw.kind == kind::METHOD_BATCH => raw,
                other => return Some(self.decoded(other)),
            };
            match batch_events(raw.ts, raw.payload) {
                Some(events) => self.batch = Some((raw.tid, events)),
                None => return Some(self.decoded(Ok(raw))),
            }
        }
    }
}

impl<'a> Decoder<'a> {
    fn decoded(&mut self, raw: Result<RawRecord<'a>, DecodeError>) -> Result<Record, DecodeError> {
        let r = raw.and_then(|raw| raw.decode());
        if r.is_err() {
            self.pos = self.data.len();
        }
        r
    }
}

/// Turns a NUL-padded comm into a string.
pub fn comm_str(comm: &[u8; 16]) -> String {
    let n = comm.iter().position(|&c| c == 0).unwrap_or(16);
    String::from_utf8_lossy(&comm[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_kind() {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"java");
        let records = vec![
            Payload::SwitchOut(SwitchOut {
                tgid: 1,
                prev_state: 1,
                cpu: 0,
                next_tid: 9,
            }),
            Payload::SwitchIn(SwitchIn {
                tgid: 1,
                cpu: 1,
                prev_tid: 0,
                reserved: 0,
            }),
            Payload::Wakeup(Wakeup {
                tgid: 1,
                waker_tid: 3,
                waker_tgid: 1,
                target_cpu: 1,
                new_task: 0,
                reserved: 0,
            }),
            Payload::Fork(Fork {
                tgid: 1,
                parent_tid: 1,
                parent_tgid: 1,
                reserved: 0,
                comm,
            }),
            Payload::Exit(TaskInfo {
                tgid: 1,
                reserved: 0,
                comm,
            }),
            Payload::Comm(TaskInfo {
                tgid: 1,
                reserved: 0,
                comm,
            }),
            Payload::Exec(TaskInfo {
                tgid: 1,
                reserved: 0,
                comm,
            }),
            Payload::JvmStart(JvmStart {
                pid: 7,
                vm_version: "17.0.15".into(),
            }),
            Payload::ThreadStart(ThreadStart {
                daemon: 1,
                name: "main".into(),
                group: "main".into(),
                parent: "".into(),
            }),
            Payload::ThreadEnd,
            Payload::MethodDef(MethodDef {
                method: 0xdead_beef,
                class: "com.acme.Foo".into(),
                name: "bär".into(),
                signature: "(I)V".into(),
            }),
            Payload::MethodEntry(MethodEvent {
                method: 5,
                flags: 0,
                reserved: 0,
            }),
            Payload::MethodExit(MethodEvent {
                method: 5,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0,
            }),
            Payload::JvmEnd(JvmEnd { lost_events: 3 }),
            Payload::AgentError("bad line 3".into()),
            Payload::Syscall(Syscall {
                exit_ts: 99,
                nr: 0,
                fd_kind: fd_kind::SOCKET,
                ret: -11,
                fd: 5,
                flags: SYSCALL_BLOCKED,
                arg: 7,
                family: 2,
                protocol: 6,
                sport: 1234,
                dport: 80,
                saddr: [1; 16],
                daddr: [2; 16],
                dev: 3,
                ino: 4,
            }),
            Payload::PageFault(PageFault {
                address: 1,
                ip: 2,
                error_code: 3,
            }),
            Payload::BlockIo(BlockIo {
                complete_ts: 5,
                dev: 6,
                sector: 7,
                bytes: 4096,
                write: 1,
            }),
            Payload::LibCall(LibCall {
                exit_ts: 9,
                probe: 1,
                reserved: 0,
                ret: 42,
            }),
            Payload::ProbeDef(ProbeDef {
                probe: 1,
                library: "libz.so.1".into(),
                symbol: "inflate".into(),
            }),
            Payload::FilePath(FilePath {
                dev: 8 << 20 | 1,
                ino: 1234,
                path: "/var/lib/data/é.bin".into(),
            }),
            Payload::Jvm(
                kind::MONITOR_WAIT,
                JvmBlock {
                    arg: 100,
                    class: "java.lang.Object".into(),
                },
            ),
            Payload::Jvm(
                kind::GC_END,
                JvmBlock {
                    arg: 0,
                    class: String::new(),
                },
            ),
            Payload::Alloc(AllocSample {
                size: 24,
                class: "java.lang.String".into(),
                method: 7,
                line: 42,
            }),
            Payload::Compiled(
                true,
                CompiledMethod {
                    method: 1,
                    code_addr: 2,
                    code_size: 3,
                    reserved: 0,
                },
            ),
            Payload::Compiled(
                false,
                CompiledMethod {
                    method: 1,
                    code_addr: 2,
                    code_size: 3,
                    reserved: 0,
                },
            ),
        ];
        let mut enc = Encoder::new();
        for (i, p) in records.iter().enumerate() {
            enc.record(&Record {
                tid: i as u32,
                ts: 1000 + i as u64,
                payload: p.clone(),
            });
        }
        assert_eq!(enc.buf.len() % 8, 0);
        let decoded: Vec<Record> = Decoder::new(&enc.buf, 16).map(|r| r.unwrap()).collect();
        assert_eq!(decoded.len(), records.len());
        for (i, (d, p)) in decoded.iter().zip(&records).enumerate() {
            assert_eq!(d.tid, i as u32);
            assert_eq!(d.ts, 1000 + i as u64);
            assert_eq!(&d.payload, p);
        }
    }

    #[test]
    fn truncated_stream_keeps_prefix() {
        let mut enc = Encoder::new();
        let p = Payload::MethodEntry(MethodEvent {
            method: 1,
            flags: 0,
            reserved: 0,
        });
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: p.clone(),
        });
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: p,
        });
        let cut = &enc.buf[..enc.buf.len() - 3];
        let out: Vec<_> = Decoder::new(cut, 0).collect();
        assert_eq!(out.len(), 2);
        assert!(out[0].is_ok());
        assert_eq!(out[1], Err(DecodeError::Truncated { offset: 32 }));
    }

    #[test]
    fn unknown_kind_is_skipped() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::Unknown(999),
        });
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: Payload::ThreadEnd,
        });
        let out: Vec<_> = Decoder::new(&enc.buf, 0).map(|r| r.unwrap().payload).collect();
        assert_eq!(out, vec![Payload::Unknown(999), Payload::ThreadEnd]);
    }

    #[test]
    fn alloc_sample_without_a_site_still_decodes() {
        // An ALLOC_SAMPLE as written before the site was added: u64 size, str class.
        let mut payload = 24u64.to_le_bytes().to_vec();
        payload.extend_from_slice(&3u16.to_le_bytes());
        payload.extend_from_slice(b"[B;");
        assert_eq!(
            decode_payload(kind::ALLOC_SAMPLE, 0, &payload[..payload.len() - 1]),
            None,
            "a class cut short is corrupt"
        );
        payload[8] = 2;
        assert_eq!(
            decode_payload(kind::ALLOC_SAMPLE, 0, &payload),
            Some(Payload::Alloc(AllocSample {
                size: 24,
                class: "[B".into(),
                method: 0,
                line: -1
            }))
        );
    }

    #[test]
    fn zero_fill_ends_stream() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::ThreadEnd,
        });
        enc.buf.extend_from_slice(&[0u8; 64]);
        assert_eq!(Decoder::new(&enc.buf, 0).count(), 1);
    }

    fn batched(ts: u64, method: u32, kind: BatchedKind) -> BatchedMethodEvent {
        BatchedMethodEvent { ts, method, kind }
    }

    /// Every METHOD_BATCH record of an encoded buffer, as (tid, ts, count).
    fn batch_headers(buf: &[u8]) -> Vec<(u32, u64, usize)> {
        let mut d = Decoder::new(buf, 0);
        let mut out = Vec::new();
        while let Some(r) = d.next_raw() {
            let r = r.unwrap();
            if r.kind == kind::METHOD_BATCH {
                out.push((r.tid, r.ts, batch_events(r.ts, r.payload).unwrap().len()));
            }
        }
        out
    }

    #[test]
    fn method_batch_round_trips_and_expands() {
        use BatchedKind::*;
        let events = vec![
            batched(1_000, 7, Entry),
            batched(1_000, 8, Entry),
            batched(1_250, 8, ExitByException),
            batched(4_000_001_250, 7, Exit),
        ];
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 42,
            ts: 1_000,
            payload: Payload::MethodBatch(MethodBatch { events: events.clone() }),
        });
        // 8 bytes per event after a 24-byte record head: a quarter of
        // METHOD_ENTRY/EXIT's 32 bytes per event.
        assert_eq!(enc.buf.len(), 24 + 4 * 8);
        let raw = Decoder::new(&enc.buf, 0).next_raw().unwrap().unwrap();
        assert_eq!(raw.kind, kind::METHOD_BATCH);
        assert_eq!(
            raw.decode().unwrap().payload,
            Payload::MethodBatch(MethodBatch { events: events.clone() })
        );
        // The iterator yields the records the batch stands for.
        let expanded: Vec<Record> = Decoder::new(&enc.buf, 0).map(|r| r.unwrap()).collect();
        let want: Vec<Record> = events
            .iter()
            .map(|e| Record {
                tid: 42,
                ts: e.ts,
                payload: e.to_payload(),
            })
            .collect();
        assert_eq!(expanded, want);
        assert_eq!(
            want[2].payload,
            Payload::MethodExit(MethodEvent {
                method: 8,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0
            })
        );
    }

    #[test]
    fn batch_writer_splits_where_a_delta_does_not_fit() {
        use BatchedKind::*;
        let mut out = Vec::new();
        let mut w = BatchWriter::new(9);
        let gap = u32::MAX as u64;
        // Exactly u32::MAX later fits; one more ns does not; earlier never does.
        for (ts, m) in [(10, 1), (10 + gap, 2), (11 + 2 * gap, 3), (5, 4), (6, 5)] {
            w.push(&mut out, ts, m, Entry);
        }
        w.finish(&mut out);
        assert_eq!(batch_headers(&out), vec![(9, 10, 2), (9, 11 + 2 * gap, 1), (9, 5, 2)]);
        let ts: Vec<u64> = Decoder::new(&out, 0).map(|r| r.unwrap().ts).collect();
        assert_eq!(ts, vec![10, 10 + gap, 11 + 2 * gap, 5, 6]);
    }

    #[test]
    fn batch_writer_splits_full_batches_and_writes_big_ids_alone() {
        let mut out = Vec::new();
        let mut w = BatchWriter::new(1);
        let n = BATCH_MAX_EVENTS + 3;
        for i in 0..n as u64 {
            w.push(&mut out, 100 + i, i % 5, BatchedKind::Entry);
        }
        w.push(
            &mut out,
            100 + n as u64,
            BATCH_METHOD_LIMIT + 5,
            BatchedKind::ExitByException,
        );
        w.push(&mut out, 101 + n as u64, 3, BatchedKind::Exit);
        w.finish(&mut out);
        assert_eq!(
            batch_headers(&out),
            vec![
                (1, 100, BATCH_MAX_EVENTS),
                (1, 100 + BATCH_MAX_EVENTS as u64, 3),
                (1, 101 + n as u64, 1)
            ]
        );
        let all: Vec<Record> = Decoder::new(&out, 0).map(|r| r.unwrap()).collect();
        assert_eq!(all.len(), n + 2);
        assert!(all.iter().enumerate().all(|(i, r)| r.ts == 100 + i as u64));
        assert_eq!(
            all[n].payload,
            Payload::MethodExit(MethodEvent {
                method: BATCH_METHOD_LIMIT + 5,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0
            })
        );
    }

    #[test]
    fn batch_shorter_than_its_count_is_corrupt() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::MethodBatch(MethodBatch {
                events: vec![batched(1, 1, BatchedKind::Entry)],
            }),
        });
        // Claim two events in a record that holds one.
        enc.buf[16..20].copy_from_slice(&2u32.to_le_bytes());
        let out: Vec<_> = Decoder::new(&enc.buf, 0).collect();
        assert!(
            matches!(out[..], [Err(DecodeError::Corrupt { offset: 0, .. })]),
            "{out:?}"
        );
    }
}

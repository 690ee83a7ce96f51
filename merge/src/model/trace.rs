//! [`Trace`]: a trace's tables (threads, methods, syscalls, losses, JIT
//! history, allocations) and, when opened whole, every thread's events.

use crate::meta::Meta;
use crate::model::event::{MethodIdx, MethodInfo, SyscallInfo, ThreadInfo, Timed};
use crate::model::jit::JitHistory;
use crate::stacks::Stacks;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// Loss and health counters of a trace.
#[derive(Debug, Clone, Default)]
pub struct Losses {
    /// Kernel records lost in the kernel (ring buffer full, bad samples).
    pub kernel: u64,
    /// JVM events the agents reported lost.
    pub jvm: u64,
    /// Problems with the streams, one message each (starting with the
    /// stream's path): a stream cut off inside a record, too short to
    /// read, ended early, or whose writer could not write everything.
    pub truncated: Vec<String>,
    /// Per thread whose events an agent could not write (JVM_LOST): the
    /// thread, the time of its first lost event and how many it lost.
    pub jvm_lost_threads: Vec<(u32, u64, u64)>,
    /// Where the kernel stream's coverage ends when it ends before the
    /// recording did (see [`ThreadInfo::kernel_until`](crate::ThreadInfo::kernel_until)).
    pub kernel_covered_until: Option<u64>,
    /// Agent-reported problems (bad config lines, internal errors).
    pub agent_errors: Vec<String>,
    /// Where the streams' coverage begins when it begins after the
    /// recording did: a ring recording (`--max-size`, `--max-age`) whose
    /// oldest chunks were deleted (see [`ThreadInfo::covered_from`](crate::ThreadInfo::covered_from)).
    pub window_from: Option<u64>,
    /// JVM records (a batch's method events each) whose time lies outside
    /// the recording (before meta.json's start or after its end): a
    /// damaged or forged JVM stream. None is given time: an event is left
    /// out, a loss's or demotion's time moved to the recording's edge
    /// (docs/FORMAT.md, "Times outside the recording"); `truncated` says
    /// which streams and how many.
    pub outside_recording: u64,
    /// Processes left out from an exec on: they became ones the invoking
    /// user may not trace (an EXEC with `EXEC_LEFT_OUT`), so nothing of
    /// them was recorded after it.
    pub left_out: Vec<LeftOut>,
}

/// A process left out of the trace at its exec (see [`Losses::left_out`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The process.
    pub pid: u32,
    /// The program it exec'd (its comm).
    pub comm: String,
    /// When (CLOCK_MONOTONIC ns).
    pub ts: u64,
}

/// A trace read from its directory: [`Trace::open`] holds every thread's
/// events in memory; [`stream::open`](crate::stream::open) fills every table
/// but `events` and `syscalls`, whose contents a streamed walk hands out.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Trace {
    /// Trace directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub meta: Meta,
    /// Threads by tid.
    pub threads: BTreeMap<u32, ThreadInfo>,
    /// Each thread's events, sorted by time.
    pub events: BTreeMap<u32, Vec<Timed>>,
    /// Methods referenced by [`Event::Enter`](crate::Event::Enter)/[`Event::Exit`](crate::Event::Exit).
    pub methods: Vec<MethodInfo>,
    /// Loss counters.
    pub losses: Losses,
    /// Kernel records read.
    pub kernel_records: u64,
    /// JVM records read.
    pub jvm_records: u64,
    /// JVM process ids with an agent stream.
    pub jvm_pids: Vec<u32>,
    /// Each JVM's version (`java.vm.version`, from its JVM_START), by pid.
    pub jvm_versions: BTreeMap<u32, String>,
    /// Syscalls referenced by [`Event::Syscall`](crate::Event::Syscall).
    pub syscalls: Vec<SyscallInfo>,
    /// Strings referenced by [`Event::Block`](crate::Event::Block) (index 0 is "").
    pub details: Vec<String>,
    /// Paths of the files SYSCALL records name, by (dev, ino) (FILE_PATH).
    pub file_paths: HashMap<(u64, u64), String>,
    /// When each traced method had compiled code, per JVM (COMPILED_METHOD_LOAD/UNLOAD).
    pub jit: JitHistory,
    /// Sampled allocations (ALLOC_SAMPLE) by thread, class and site.
    pub allocations: BTreeMap<AllocSite, AllocCount>,
    /// Methods whose probes the agent removed (METHOD_DEMOTED), in time order.
    pub demoted: Vec<Demotion>,
    /// Calls the agent left out as shorter than `--min-duration`
    /// (METHOD_SHORT_DROPPED), by method: (calls, their mean wall ns).
    pub short_dropped: BTreeMap<MethodIdx, (u64, u64)>,
    /// Selected methods the agent did not instrument because they are
    /// trivial by [`jtrace_format::TRIVIAL_RULE`] (METHOD_TRIVIAL): never
    /// recorded, their time is their callers' own.
    pub trivial: BTreeSet<MethodIdx>,
    /// The JVM-wide stops (GC and safepoint windows) of each JVM, by pid:
    /// (time, cause, begin) marks in time order, as the walk copies them to
    /// every Java thread of that JVM ([`Event::Window`](crate::Event::Window)).
    pub jvm_stops: BTreeMap<u32, Vec<(u64, crate::Cause, bool)>>,
    /// Stacks of switch-outs and CPU samples, and what names them.
    pub stacks: Stacks,
    /// Method events a streamed read for a time window left out of the
    /// walk: calls wholly outside
    /// [`StreamOptions::calls_within`](crate::stream::StreamOptions::calls_within)
    /// (0 for any other read).
    pub calls_left_out: u64,
    /// Which switch-outs chain on their CPU (read with the kernel stream).
    pub sched_chain: crate::SchedChain,
}

/// A method the agent demoted (its probes turned off past the overhead budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demotion {
    /// The method.
    pub method: MethodIdx,
    /// When its probes were removed (CLOCK_MONOTONIC ns).
    pub ts: u64,
    /// Calls the agent had seen by then.
    pub calls: u64,
    /// Their mean rate, calls per second.
    pub rate_per_s: u64,
    /// Their mean wall, ns.
    pub mean_ns: u64,
}

impl Trace {
    /// How long the recording ran: from meta.json, or, when the recording
    /// was cut off before it could say, up to the last event read.
    pub fn duration_ns(&self) -> u64 {
        let m = &self.meta;
        let end = if m.end_monotonic_ns > 0 {
            m.end_monotonic_ns
        } else {
            self.threads.values().map(|t| t.last_ts).max().unwrap_or(0)
        };
        end.saturating_sub(m.start_monotonic_ns)
    }

    /// The traced process: from meta.json, or, when the recording was cut
    /// off before it could say, the JVM's if there is one.
    pub fn pid(&self) -> u32 {
        match (self.meta.pid, self.jvm_pids.as_slice()) {
            (0, [only]) => *only,
            (pid, _) => pid,
        }
    }
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

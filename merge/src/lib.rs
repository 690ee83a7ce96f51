//! jtrace's event trace API: read a trace directory, merge the JVM and kernel
//! streams per thread, and split every method invocation's wall time exactly
//! into CPU time and named off-CPU causes. The on-disk format it reads is
//! docs/FORMAT.md; the causes and the report are docs/REPORT.md.
//!
//! # Reading a trace
//!
//! An analysis implements [`Visitor`]: the walk of each thread calls it for
//! every invocation ([`Invocation`], with its exact [`Breakdown`]), every
//! off-CPU interval ([`OffCpuInterval`], with its cause and [`Evidence`]),
//! every wakeup ([`Wake`]) and the thread's totals. There are two ways to
//! walk a trace, with the same callbacks in the same order:
//!
//! * [`Trace::open`] reads the whole trace into memory; [`analyze`] then
//!   walks every thread (and may walk again). For views that need all of it
//!   at once, such as the HTML timeline, or for [`CallIndex`] (which method
//!   a thread was in at a given time).
//! * [`stream::open`] reads a trace of any length in memory bounded by a
//!   budget ([`stream::StreamOptions`]); [`stream::analyze`] walks it once.
//!   [`stream::analyze_with_wakers`] also tells the method each waker was
//!   in (walking twice); [`stream::analyze_answering_wakers`] tells it after
//!   one walk. This is what `jtrace report` uses.
//!
//! ```no_run
//! use jtrace_merge::{analyze, Invocation, ThreadInfo, Trace, Visitor};
//! struct Slowest(u64);
//! impl Visitor for Slowest {
//!     fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
//!         self.0 = self.0.max(inv.breakdown.wall);
//!     }
//! }
//! let trace = Trace::open("demo.jtrace".as_ref()).unwrap();
//! let mut v = Slowest(0);
//! analyze(&trace, &mut v);
//! println!("slowest invocation: {} ns", v.0);
//!
//! // The same on a trace too long to hold in memory.
//! let opts = jtrace_merge::stream::StreamOptions::default();
//! let (trace, events) = jtrace_merge::stream::open("big.jtrace".as_ref(), &opts).unwrap();
//! let mut v = Slowest(0);
//! jtrace_merge::stream::analyze(&trace, events, &mut v).unwrap();
//! ```
//!
//! [`Trace`] holds the tables events refer to (methods, thread names,
//! syscall records, details of monitors); [`describe_evidence`] and
//! [`describe_syscall`] word the evidence as every jtrace view shows it.
//!
//! # The report
//!
//! [`build_report`] (a trace in memory) and [`build_report_streaming`] (a
//! trace directory, in bounded memory) aggregate per thread and per method
//! into a [`Report`], which serialises to the `jtrace.report.v1` JSON of
//! `jtrace report --json`:
//!
//! ```no_run
//! use jtrace_merge::{build_report_streaming, stream::StreamOptions, ReportFilter};
//! let report =
//!     build_report_streaming("demo.jtrace".as_ref(), &ReportFilter::default(), &StreamOptions::default()).unwrap();
//! println!("{}", serde_json::to_string_pretty(&report).unwrap());
//! ```
//!
//! # Inside
//!
//! Data flows one way, from the stream files to the report; a module uses
//! only modules listed before it:
//!
//! 1. Helpers: `cause` (causes, breakdowns), `meta` (`meta.json`),
//!    `options` ([`stream::StreamOptions`], sizes), `file_io` (mapping,
//!    unlinked temporary files), `shrink_guard` (a mapped file that shrinks
//!    is not a SIGBUS), [`method_label`] (method names as the text views
//!    print them).
//! 2. The data model, `model/`: `event` (events, threads, methods), `jit`,
//!    `trace` ([`Trace`]), `syscall` (syscall numbers and their causes),
//!    `windows` (which GC/safepoint windows a thread sees), `sched_chain`
//!    (which switch-outs their CPU's previous switch explains), `tid_map`.
//!    And what the trace recorded of stacks, `stacks/` (its `mod.rs`).
//! 3. The external sort, `sort/`: `run` (the run file encoding and
//!    reader), `spill` (the per-thread buffers that write sorted runs),
//!    `kway` (the per-thread k-way merge of the runs:
//!    [`stream::SortedEvents`]).
//! 4. The reader, `read/`: `records` (a stream file's records, mapped or
//!    read in chunks), `kernel` and `jvm` (their decoders), with
//!    `vthreads` (virtual threads: the first pass over the JVM streams,
//!    their carriers' events copied to them), `streams` (the stream files,
//!    a ring recording's chunks read as one), `span` (the recording's
//!    time: JVM records outside it are given none) and `cut` (a streamed read
//!    for a time window leaves out the calls wholly outside it), feeding
//!    [`Trace::open`]'s memory or, streaming, `sort/spill`.
//! 5. The analysis: `visitor` (what a walk reports), `walk/` (the
//!    per-thread walk that attributes every gap: [`ThreadWalk`]; `frames`
//!    its stack of open calls), `wakers`, [`stream`] (the streamed read and
//!    walk), `call_index`, `describe`; naming frames, `stacks/`:
//!    `symbolize` ([`Symbolizer`]), `source_lines` (DWARF source lines of
//!    native frames, read only when a view asks), [`tail`] (the time
//!    after a thread's last switch-out), [`scale`] (short blocks' sampled
//!    stacks scaled up); [`idle`] (the stack rules that tell a thread
//!    waiting for work from one blocked while working).
//! 6. [`report`]: the `jtrace.report.v1` aggregation (`aggregate`, the
//!    visitor that adds up per method and per thread; `percentile`,
//!    wall-time percentiles in bounded memory; [`left_out`], the methods
//!    the agent demoted and the short calls it did not write;
//!    `demoted_estimate`; [`report_stacks`], the top stacks and the
//!    stack-only methods; [`report::compare`], two reports side by side,
//!    `jtrace.compare.v1`); [`why`]: the critical paths of `jtrace why`
//!    (`jtrace.why.v1`).

#![deny(missing_docs)]

mod call_index;
mod cause;
mod describe;
mod file_io;
pub mod idle;
mod meta;
pub mod method_label;
mod model;
mod options;
pub mod printable;
mod read;
pub mod report;
mod shrink_guard;
mod sort;
mod stacks;
pub mod stream;
mod visitor;
mod wakers;
mod walk;
pub mod why;

// The public paths of modules that live in a folder of their part.
pub use report::left_out;
pub use report::stacks as report_stacks;
pub use stacks::scale;
pub use stacks::tail;

pub use call_index::CallIndex;
pub use cause::{Breakdown, Cause, OffCpu, N_CAUSES};
pub use describe::{describe_evidence, describe_syscall, describe_window};
pub use jtrace_symbols::lines::SourceLine;
pub use meta::{CpuLimit, JvmNotAttached, Measured, Meta, ProcessCgroup};
pub use model::event::{Event, MethodIdx, MethodInfo, SyscallInfo, ThreadInfo, Timed, UNMOUNTED_STATE};
pub use model::jit::JitHistory;
pub use model::sched_chain::SchedChain;
pub use model::syscall::{nr, syscall_cause, syscall_name};
pub use model::trace::{AllocCount, AllocSite, Demotion, LeftOut, Losses, Trace};
pub use report::percentile::WallDist;
pub use report::{
    build_report, build_report_streaming, glob_match, trace_problems, window, Report, ReportFilter, WindowJson,
};
pub use stacks::source_lines::LineProblems;
pub use stacks::symbolize::{Frame, FrameKind, SymbolProblems, Symbolizer, TRUNCATED_FRAME};
pub use stacks::{Blob, CompiledCode, JvmCode, RawStack, StackPair, Stacks};
pub use visitor::{Evidence, Invocation, OffCpuInterval, ThreadTotals, Visitor, Wake};
pub use walk::{analyze, analyze_thread, ThreadWalk};

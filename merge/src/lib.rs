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
//! 1. `cause` (causes, breakdowns), `meta` (`meta.json`), `tid_map`,
//!    `options` ([`stream::StreamOptions`], sizes), `file_io` (mapping,
//!    unlinked temporary files), `shrink_guard` (a mapped file that shrinks
//!    is not a SIGBUS).
//! 2. The data model: `event` (events, threads, methods), `jit`, `trace`
//!    ([`Trace`]), `syscall` (syscall numbers and their causes), `windows`
//!    (which GC/safepoint windows a thread sees), `sched_chain` (which
//!    switch-outs their CPU's previous switch explains).
//! 3. The external sort: `run` (the run file encoding and reader), `spill`
//!    (the per-thread buffers that write sorted runs).
//! 4. The reader, `read/`: `records` (a stream file's records, mapped or
//!    read in chunks), `kernel` and `jvm` (their decoders), with
//!    `vthreads` (virtual threads: the first pass over the JVM streams,
//!    their carriers' events copied to them) and `cut` (a streamed read
//!    for a time window leaves out the calls wholly outside it), feeding
//!    [`Trace::open`]'s memory or, streaming, `spill`.
//! 5. `kway`: the per-thread k-way merge of the runs
//!    ([`stream::SortedEvents`]).
//! 6. The analysis: `visitor` (what a walk reports), `walk` (the
//!    per-thread walk that attributes every gap: [`ThreadWalk`]), `wakers`,
//!    [`stream`] (the streamed read and walk), `call_index`, `describe`.
//! 7. [`report`]: the `jtrace.report.v1` aggregation (with `percentile`,
//!    wall-time percentiles in bounded memory, and [`left_out`], the
//!    methods the agent demoted and the short calls it did not write); [`why`]: the critical paths
//!    of `jtrace why` (`jtrace.why.v1`).
//!
//! Stacks: `stacks` holds what the trace recorded of them (read
//! with the rest, in layer 2), `symbolize` names their frames
//! ([`Symbolizer`], layer 6), with `source_lines` (DWARF source lines of
//! native frames, read only when a view asks for them).

#![deny(missing_docs)]

mod call_index;
mod cause;
mod demoted_estimate;
mod describe;
mod event;
mod file_io;
mod jit;
mod kway;
pub mod left_out;
mod meta;
pub mod method_label;
mod options;
mod percentile;
mod read;
pub mod report;
mod report_aggregate;
pub mod report_stacks;
mod run;
mod sched_chain;
mod shrink_guard;
mod source_lines;
mod spill;
mod stacks;
pub mod stream;
mod symbolize;
mod syscall;
pub mod tail;
mod tid_map;
mod trace;
mod visitor;
mod wakers;
mod walk;
pub mod why;
mod windows;

pub use call_index::CallIndex;
pub use cause::{Breakdown, Cause, OffCpu, N_CAUSES};
pub use describe::{describe_evidence, describe_syscall, describe_window};
pub use event::{Event, MethodIdx, MethodInfo, SyscallInfo, ThreadInfo, Timed};
pub use jit::JitHistory;
pub use jtrace_symbols::lines::SourceLine;
pub use meta::Meta;
pub use percentile::WallDist;
pub use report::{build_report, build_report_streaming, glob_match, window, Report, ReportFilter, WindowJson};
pub use sched_chain::SchedChain;
pub use source_lines::LineProblems;
pub use stacks::{Blob, CompiledCode, JvmCode, RawStack, StackPair, Stacks};
pub use symbolize::{Frame, FrameKind, SymbolProblems, Symbolizer, TRUNCATED_FRAME};
pub use syscall::{nr, syscall_cause, syscall_name};
pub use trace::{AllocCount, AllocSite, Demotion, Losses, Trace};
pub use visitor::{Evidence, Invocation, OffCpuInterval, ThreadTotals, Visitor, Wake};
pub use walk::{analyze, analyze_thread, ThreadWalk};

//! jtrace's event trace API: read a trace directory, merge the JVM and kernel
//! streams per thread, and split every method invocation's wall time exactly
//! into CPU time and named off-CPU causes.
//!
//! ```no_run
//! use jtrace_merge::{Trace, analyze, Visitor, Invocation, ThreadInfo};
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
//! ```
//!
//! [`Trace::open`] holds the whole trace in memory (views that need all of it,
//! e.g. the HTML timeline). [`stream`] runs the same analysis on a trace of any
//! length in memory bounded by a budget (what `jtrace report` uses), with the
//! same results, including the waker's method of every wakeup
//! ([`stream::analyze_with_wakers`]).

pub mod analyze;
pub mod cause;
pub mod describe;
pub mod index;
pub mod meta;
pub mod read;
pub mod report;
pub mod stream;

pub use analyze::{
    analyze, analyze_thread, syscall_cause, syscall_name, Evidence, Invocation, OffCpuInterval, ThreadTotals,
    ThreadWalk, Visitor, Wake,
};
pub use cause::{Breakdown, Cause, OffCpu, N_CAUSES};
pub use describe::{describe_evidence, describe_syscall};
pub use index::CallIndex;
pub use meta::Meta;
pub use read::{Event, MethodIdx, MethodInfo, SyscallInfo, ThreadInfo, Timed, Trace};
pub use report::{build_report, build_report_streaming, glob_match, Report, ReportFilter};

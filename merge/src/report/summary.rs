//! The report's `summary`: the application's threads' time, split into
//! CPU, working off-CPU time by cause and idle time, so that the first
//! screen answers where the wall time went (the tracer's own threads
//! apart).

use crate::cause::OffCpu;
use crate::report::ThreadJson;
use serde::Serialize;

/// Σ over a set of threads. `wall_ns == cpu_ns + Σ off_cpu_ns +
/// Σ idle_off_cpu_ns + not_covered_ns`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ThreadSetJson {
    /// Threads that did work: neither waiting for work (idle at least 90 %
    /// of their wall) nor the tracer's.
    pub working_threads: u32,
    /// Threads waiting for work.
    pub waiting_threads: u32,
    /// Σ wall over their traced lives.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
    /// Σ working off-CPU time, by cause.
    pub off_cpu_ns: OffCpu,
    /// Σ idle time, by cause.
    pub idle_off_cpu_ns: OffCpu,
    /// Σ time not covered by the kernel stream.
    pub not_covered_ns: u64,
}

impl ThreadSetJson {
    fn add(&mut self, t: &ThreadJson) {
        if t.waiting_for_work {
            self.waiting_threads += 1;
        } else {
            self.working_threads += 1;
        }
        self.wall_ns += t.wall_ns;
        self.cpu_ns += t.cpu_ns;
        self.off_cpu_ns += t.off_cpu_ns - t.idle_off_cpu_ns;
        self.idle_off_cpu_ns += t.idle_off_cpu_ns;
        self.not_covered_ns += t.not_covered_ns;
    }
}

/// The `summary` object.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SummaryJson {
    /// The platform (kernel) threads but the tracer's.
    pub threads: ThreadSetJson,
    /// The virtual threads, apart: their time on a carrier is also the
    /// carrier's. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_threads: Option<ThreadSetJson>,
    /// The tracer's own threads (left out of the above).
    pub tracer_threads: u32,
    /// Their CPU time.
    pub tracer_cpu_ns: u64,
}

/// The summary of the report's threads.
pub fn summary(threads: &[ThreadJson]) -> SummaryJson {
    let mut s = SummaryJson::default();
    for t in threads {
        if t.tracer {
            s.tracer_threads += 1;
            s.tracer_cpu_ns += t.cpu_ns;
        } else if t.is_virtual {
            s.virtual_threads.get_or_insert_with(ThreadSetJson::default).add(t);
        } else {
            s.threads.add(t);
        }
    }
    s
}

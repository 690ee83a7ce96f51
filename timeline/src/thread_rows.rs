//! The rows of the text report's threads table: the tracer's own threads
//! left out (unless asked for). The JSON report keeps every thread.

use jtrace_merge::report::ThreadJson;
use jtrace_merge::OffCpu;

/// One row of the threads table: one thread, or the threads of a group.
pub(crate) struct ThreadRow<'a> {
    /// Its threads, in the report's order (one, unless a group).
    pub members: Vec<&'a ThreadJson>,
    /// Σ wall.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
    /// Σ off-CPU by cause.
    pub off_cpu_ns: OffCpu,
    /// Σ time not covered.
    pub not_covered_ns: u64,
    /// Σ voluntary switches.
    pub voluntary_switches: u64,
    /// Σ involuntary switches.
    pub involuntary_switches: u64,
}

impl<'a> ThreadRow<'a> {
    fn new(first: &'a ThreadJson) -> ThreadRow<'a> {
        let mut row = ThreadRow {
            members: Vec::new(),
            wall_ns: 0,
            cpu_ns: 0,
            off_cpu_ns: OffCpu::default(),
            not_covered_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
        };
        row.add(first);
        row
    }

    fn add(&mut self, t: &'a ThreadJson) {
        self.members.push(t);
        self.wall_ns += t.wall_ns;
        self.cpu_ns += t.cpu_ns;
        self.off_cpu_ns += t.off_cpu_ns;
        self.not_covered_ns += t.not_covered_ns;
        self.voluntary_switches += t.voluntary_switches;
        self.involuntary_switches += t.involuntary_switches;
    }

    /// The name cell: the thread's name (`[comm]` when the JVM agent did not
    /// know it); ` (tracer)` for the tracer's.
    pub fn name(&self) -> String {
        let first = self.members[0];
        let name = if first.java {
            first.name.clone()
        } else {
            format!("[{}]", first.name)
        };
        if first.tracer {
            format!("{name} (tracer)")
        } else {
            name
        }
    }
}

/// What the default table leaves out of the tracer's own threads.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TracerLeftOut {
    /// Their tids.
    pub tids: Vec<u32>,
    /// Their names, each once.
    pub names: Vec<String>,
    /// Σ wall.
    pub wall_ns: u64,
    /// Σ CPU.
    pub cpu_ns: u64,
}

/// The table's rows: the tracer's threads left out unless `all`.
pub(crate) fn thread_rows(threads: &[ThreadJson], all: bool) -> (Vec<ThreadRow<'_>>, TracerLeftOut) {
    let mut left_out = TracerLeftOut::default();
    let mut rows: Vec<ThreadRow> = Vec::new();
    for t in threads {
        if t.tracer && !all {
            left_out.tids.push(t.tid);
            if !left_out.names.contains(&t.name) {
                left_out.names.push(t.name.clone());
            }
            left_out.wall_ns += t.wall_ns;
            left_out.cpu_ns += t.cpu_ns;
            continue;
        }
        rows.push(ThreadRow::new(t));
    }
    (rows, left_out)
}

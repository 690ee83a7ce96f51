//! The CSV export (`jtrace export --format csv`): one row per method
//! invocation. It streams: rows come out in the in-memory order from a walk
//! in bounded memory (see `rows.rs`).

mod rows;

use crate::export::Exporter;
use crate::model::{collect, pid_of, Span};
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{Cause, ThreadInfo, Trace};
use rows::CsvRows;
use std::io::Write;
use std::path::Path;

/// A column (or group of columns) of the CSV export, see [`CSV_COLUMNS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvColumn {
    /// One column of this name.
    Named(&'static str),
    /// One column `<cause>_ns` per cause, in [`Cause::ALL`] order: the
    /// invocation's off-CPU time with that cause.
    PerCause,
}

/// The columns of [`write_csv`], in order: the one list its header is
/// written from ([`csv_header`] spells the names out).
pub const CSV_COLUMNS: &[CsvColumn] = {
    use CsvColumn::{Named, PerCause};
    &[
        Named("tid"),
        Named("pid"),
        Named("thread"),
        Named("class"),
        Named("method"),
        Named("signature"),
        Named("entry_ns"),
        Named("exit_ns"),
        Named("wall_ns"),
        Named("cpu_ns"),
        Named("off_cpu_ns"),
        PerCause,
        Named("voluntary"),
        Named("involuntary"),
        Named("exception"),
        Named("depth"),
        Named("outermost"),
        Named("unfinished"),
        Named("native"),
        Named("compiled"),
        Named("not_covered_ns"),
    ]
};

/// Column names of [`write_csv`], in order: [`CSV_COLUMNS`] with the cause
/// columns named.
pub fn csv_header() -> Vec<String> {
    let mut h = Vec::new();
    for c in CSV_COLUMNS {
        match c {
            CsvColumn::Named(n) => h.push(n.to_string()),
            CsvColumn::PerCause => h.extend(Cause::ALL.iter().map(|c| format!("{}_ns", c.name()))),
        }
    }
    h
}

/// Writes one CSV row per method invocation (threads in tid order,
/// invocations by entry time), with the columns of [`CSV_COLUMNS`]: the
/// report's columns, `off_cpu_ns` (their sum) and one `<cause>_ns` column
/// per cause in [`Cause::ALL`] order, times in CLOCK_MONOTONIC ns, booleans
/// as `true`/`false`. `outermost` is false for a recursive invocation nested
/// in another of the same method; the report sums only outermost rows.
/// `native` marks a library call (uprobe span). `compiled`: the method had
/// compiled code of its own when the call began (the report's JIT state);
/// empty when the JVM recorded no JIT events or for a library call.
pub fn write_csv(trace: &Trace, out: impl Write) -> anyhow::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(csv_header())?;
    for t in collect(trace) {
        let name = t.info.display_name().to_string();
        for s in &t.spans {
            w.write_record(csv_row(trace, &t.info, &name, s))?;
        }
    }
    w.flush()?;
    Ok(())
}

/// One row of [`write_csv`], in [`CSV_COLUMNS`] order; `name` is the
/// thread's display name.
fn csv_row(trace: &Trace, t: &ThreadInfo, name: &str, s: &Span) -> Vec<String> {
    let m = &trace.methods[s.inv.method as usize];
    let b = &s.inv.breakdown;
    let mut row: Vec<String> = vec![
        t.tid.to_string(),
        pid_of(trace, t).to_string(),
        name.to_string(),
        m.class.clone(),
        m.name.clone(),
        m.signature.clone(),
        s.inv.entry.to_string(),
        s.inv.exit.to_string(),
        b.wall.to_string(),
        b.cpu.to_string(),
        b.off.total().to_string(),
    ];
    row.extend(Cause::ALL.iter().map(|c| b.off.get(*c).to_string()));
    row.extend([
        b.voluntary.to_string(),
        b.involuntary.to_string(),
        s.inv.exception.to_string(),
        s.depth.to_string(),
        s.inv.outermost.to_string(),
        s.inv.unfinished.to_string(),
        m.native.to_string(),
        (!m.native)
            .then(|| trace.jit.compiled_at(pid_of(trace, t), s.inv.method, s.inv.entry))
            .flatten()
            .map_or(String::new(), |c| c.to_string()),
        b.not_covered.to_string(),
    ]);
    row
}

/// [`write_csv`] of the trace directory `dir`, streaming: the same bytes, in
/// memory bounded by `stream`'s budget, not by the trace's length (rows
/// waiting for their turn beyond a quarter of the budget go to sorted runs
/// in the temporary directory, see `rows.rs`).
pub fn write_csv_streaming(dir: &Path, out: impl Write, stream: &StreamOptions) -> anyhow::Result<()> {
    let (trace, events) = crate::open_streamed(dir, stream)?;
    let cap = (stream.memory_budget / 4).max(64 << 10);
    let temp_dir = stream.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut w = CsvRows::new(&trace, out, cap, temp_dir);
    w.write_header(&csv_header())?;
    stream::analyze(&trace, events, &mut w)?;
    w.finish()
}

/// The CSV format as an [`Exporter`]: [`write_csv`], streamed by
/// [`write_csv_streaming`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Csv;

impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn streams(&self) -> bool {
        true
    }
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()> {
        write_csv(trace, out)
    }
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, stream: &StreamOptions) -> anyhow::Result<()> {
        write_csv_streaming(dir, out, stream)
    }
}

//! The CSV export (`jtrace export --format csv`): one row per method
//! invocation. It streams: rows come out in the in-memory order from a walk
//! in bounded memory (see `rows.rs`).

mod row_bytes;
mod rows;

use crate::export::Exporter;
use crate::model::collect;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{Cause, Trace};
use row_bytes::RowBytes;
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
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    out.write_all(&header_bytes())?;
    let mut rows = RowBytes::new(trace);
    let mut buf = Vec::new();
    for t in collect(trace) {
        rows.thread(&t.info);
        for s in &t.spans {
            buf.clear();
            rows.row(&t.info, s, &mut buf);
            out.write_all(&buf)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The header record's bytes.
fn header_bytes() -> Vec<u8> {
    let mut b = Vec::new();
    for (i, name) in csv_header().iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        row_bytes::push_field(&mut b, name);
    }
    b.push(b'\n');
    b
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
    w.write_header(&header_bytes())?;
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

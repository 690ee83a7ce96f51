//! Exports of a merged trace into formats other tools read, one module per
//! format behind one interface, [`Exporter`]:
//!
//! * [`Chrome`] ([`write_chrome`], `chrome.rs`): Chrome trace-event JSON,
//!   for Perfetto UI and chrome://tracing;
//! * [`Collapsed`] ([`write_collapsed`], `collapsed.rs`): folded stacks of
//!   off-CPU time by cause (flame graphs, speedscope);
//! * [`Csv`] ([`write_csv`], `csv/`): one row per method invocation with
//!   the report's columns;
//! * [`Perfetto`] ([`write_perfetto`], `perfetto/`): Perfetto's native
//!   protobuf trace (track events plus the kernel's scheduling), streamed;
//! * [`write_parquet`] (`parquet/`): a directory of Parquet tables, streamed
//!   (not an [`Exporter`]: it writes files, not one stream);
//! * [`Pprof`] (`pprof/`): off-CPU time by cause and the CPU samples as
//!   one gzipped pprof profile, with their recorded stacks and `cause` and
//!   `thread` labels, streamed;
//! * [`Text`] ([`crate::write_text`], `text.rs`): the merged text trace.
//!
//! A new format is one more module with
//! one more [`Exporter`]: a streaming format implements
//! [`Exporter::write_dir`] with a [`jtrace_merge::Visitor`] driven by
//! [`jtrace_merge::stream::analyze`] (as collapsed and CSV do, the same
//! bytes as from the whole trace); a format that needs every event at once
//! keeps the default, which reads the whole trace (as Chrome does).

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::Trace;
use std::io::Write;
use std::path::Path;

pub use crate::chrome::{write_chrome, write_chrome_view, Chrome, STATE_TID_OFFSET, STOPS_TID};
pub use crate::collapsed::{write_collapsed, write_collapsed_streaming, Collapsed, CollapsedOptions, NO_METHOD_FRAME};
pub use crate::csv::{csv_header, write_csv, write_csv_streaming, Csv, CsvColumn, CSV_COLUMNS};
pub use crate::parquet::{write_parquet, TABLES as PARQUET_TABLES};
pub use crate::perfetto::{write_perfetto, write_perfetto_streaming, Perfetto};
pub use crate::pprof::Pprof;
pub use crate::text::Text;

/// One output format of `jtrace export`.
pub trait Exporter {
    /// The format's name on the command line (`--format NAME`).
    fn name(&self) -> &'static str;

    /// Whether [`Exporter::write_dir`] streams: reads the trace within the
    /// memory budget whatever its length, instead of whole.
    fn streams(&self) -> bool;

    /// Writes `trace`, read whole into memory, to `out`.
    fn write_trace(&self, trace: &Trace, out: &mut dyn Write) -> anyhow::Result<()>;

    /// Writes the trace directory `dir` to `out`: the same bytes as
    /// [`Exporter::write_trace`], streamed within `stream`'s budget where the
    /// format [streams](Exporter::streams). The default reads the whole
    /// trace.
    fn write_dir(&self, dir: &Path, out: &mut dyn Write, stream: &StreamOptions) -> anyhow::Result<()> {
        let _ = stream;
        self.write_trace(&crate::open_whole(dir)?, out)
    }
}

//! Exports of a merged trace into formats other tools read, one module per
//! format behind one interface, [`Exporter`] (the crate root re-exports
//! the formats; this module imports none of them):
//!
//! * [`Chrome`](crate::Chrome) ([`write_chrome`](crate::write_chrome), `chrome.rs`): Chrome
//!   trace-event JSON, for Perfetto UI and chrome://tracing;
//! * [`Collapsed`](crate::Collapsed) ([`write_collapsed`](crate::write_collapsed),
//!   `collapsed.rs`): folded stacks of off-CPU time by cause (flame graphs, speedscope);
//! * [`Csv`](crate::Csv) ([`write_csv`](crate::write_csv), `csv/`): one row per method
//!   invocation with the report's columns;
//! * [`Perfetto`](crate::Perfetto) ([`write_perfetto`](crate::write_perfetto), `perfetto/`):
//!   Perfetto's native protobuf trace (track events plus the kernel's scheduling), streamed;
//! * [`write_parquet`](crate::write_parquet) (`parquet/`): a directory of Parquet tables,
//!   streamed (not an [`Exporter`]: it writes files, not one stream);
//! * [`Pprof`](crate::Pprof) (`pprof/`): off-CPU time by cause and the CPU samples as
//!   one gzipped pprof profile, with their recorded stacks and `cause` and
//!   `thread` labels, streamed;
//! * [`Text`](crate::Text) ([`crate::write_text`], `text.rs`): the merged text trace.
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

//! jtrace's views of a merged trace: the JPMT-style text trace, the report
//! table, the HTML timeline and the exports (Chrome trace-event JSON,
//! collapsed stacks, CSV).
//!
//! Layout, each layer importing only those above it (and the helpers at
//! the end of this file):
//!
//! * helpers: `process.rs` (the process a thread belongs to), `windows.rs`
//!   (GC and safepoint windows), `evidence.rs` (what determines an
//!   evidence string, so exports make each once), `export.rs` (the
//!   [`Exporter`] trait the export formats implement);
//! * the model the in-memory views share: `model.rs` (threads with their
//!   invocations and off-CPU intervals, of the whole trace or of a part a
//!   [`Scope`] selects), `scope.rs` (a part read in bounded memory, and the
//!   memory a view needs), `segments.rs` (where each cause of an interval
//!   lies in time: the one layout rule the Chrome export and the HTML page
//!   use);
//! * one module per output: `text.rs`, `table.rs` (the report as text,
//!   with `report_summary.rs`, its first screen, `method_table.rs`,
//!   `thread_table.rs` with `thread_rows.rs`, the threads table's rows,
//!   `stack_table.rs`; below them `report_options.rs`, what it shows,
//!   `text_table.rs`, its tables, and `text_fit.rs`, which fits lines
//!   into 120 columns),
//!   `html.rs` (with its viewer in `assets/`, the critical paths it
//!   highlights in `highlight.rs`, and `chromium.rs` for PNG shots),
//!   `chrome.rs`, `collapsed.rs` (with `flame.rs`, the flame graph page
//!   built from its folded stacks, viewer in `assets/flame/`), `csv/`, `perfetto/`, `pprof/`, `parquet/`
//!   (a directory of tables, not an [`Exporter`]); `why.rs`, the critical
//!   paths of `jtrace why` as text; `compare_text.rs`, `jtrace report
//!   --compare` as text (with `table.rs`'s tables). This file re-exports them.
//!
//! The off-CPU time after a thread's last switch-out, which the
//! stack-folding exports put under its stack, is the merge crate's
//! ([`jtrace_merge::tail`]).
//!
//! The streaming views (text, collapsed, CSV, Perfetto) are [`jtrace_merge::Visitor`]s
//! that read a trace of any length in bounded memory; the others read the
//! whole trace ([`collect`]).

#![deny(missing_docs)]

mod chrome;
mod chromium;
mod collapsed;
mod compare_text;
mod csv;
mod evidence;
pub mod export;
pub mod flame;
mod highlight;
pub mod html;
mod method_table;
mod model;
mod page;
mod parquet;
mod perfetto;
mod pprof;
mod process;
mod report_options;
mod report_summary;
pub mod scope;
mod segments;
mod stack_table;
mod table;
/// Public as a module for [`text::ms`], which the CLI formats times with.
pub mod text;
mod text_fit;
mod text_table;
mod thread_rows;
mod thread_table;
mod why;
mod windows;

pub use chrome::{write_chrome, write_chrome_view, Chrome, STATE_TID_OFFSET, STOPS_TID};
pub use collapsed::{
    fold_streaming, write_collapsed, write_collapsed_streaming, Collapsed, CollapsedOptions, Folded, NO_METHOD_FRAME,
    SCALED_FRAME,
};
pub use compare_text::{render_compare, CompareTextOptions};
pub use csv::{csv_header, write_csv, write_csv_streaming, Csv, CsvColumn, CSV_COLUMNS};
pub use export::Exporter;
pub use highlight::{highlight_paths, HighlightPath};
pub use html::{write_html, write_html_view, HtmlOptions};
pub use model::{collect, thread_order, time_origin, OffSpan, Scope, Span, ThreadData, View};
pub use parquet::{write_parquet, TABLES as PARQUET_TABLES};
pub use perfetto::{write_perfetto, write_perfetto_streaming, Perfetto};
pub use pprof::Pprof;
pub use report_options::ReportTextOptions;
pub use segments::{cause_segments, cause_segments_in};
pub use table::render_report;
pub use text::{write_text, write_text_streaming, Text, TextOptions};
pub use why::{render_why, WhyTextOptions};
pub use windows::{jvm_windows, jvm_windows_of_stops, window_name, JvmWindow};

/// Formats CLOCK_REALTIME nanoseconds as an ISO 8601 UTC date.
pub fn fmt_realtime(ns: u64) -> String {
    match chrono::DateTime::from_timestamp((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as u32) {
        Some(d) => d.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        None => format!("{ns} ns"),
    }
}

/// [`jtrace_merge::stream::open`], its errors prefixed with the trace's name
/// (the views' later errors are about writing their output).
pub(crate) fn open_streamed(
    dir: &std::path::Path,
    opts: &jtrace_merge::stream::StreamOptions,
) -> anyhow::Result<(jtrace_merge::Trace, jtrace_merge::stream::SortedEvents)> {
    use anyhow::Context;
    jtrace_merge::stream::open(dir, opts).with_context(|| format!("cannot open trace {}", dir.display()))
}

/// [`jtrace_merge::Trace::open`] (the whole trace in memory), its errors
/// prefixed as [`open_streamed`]'s.
pub(crate) fn open_whole(dir: &std::path::Path) -> anyhow::Result<jtrace_merge::Trace> {
    use anyhow::Context;
    jtrace_merge::Trace::open(dir).with_context(|| format!("cannot open trace {}", dir.display()))
}

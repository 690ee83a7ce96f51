//! jtrace's views of a merged trace: the JPMT-style text trace and the
//! human-readable report table.

pub mod table;
pub mod text;

pub use table::render_report;
pub use text::{write_text, write_text_streaming, TextOptions};

/// Formats CLOCK_REALTIME nanoseconds as an ISO 8601 UTC date.
pub fn fmt_realtime(ns: u64) -> String {
    match chrono::DateTime::from_timestamp((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as u32) {
        Some(d) => d.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        None => format!("{ns} ns"),
    }
}
pub mod export;
pub mod html;
pub use export::{
    write_chrome, write_collapsed, write_collapsed_streaming, write_csv, write_csv_streaming, CollapsedOptions,
};
pub use html::{write_html, HtmlOptions};

/// [`jtrace_merge::stream::open`], its errors prefixed with the trace's name
/// (the views' later errors are about writing their output).
pub(crate) fn open_streamed(
    dir: &std::path::Path,
    opts: &jtrace_merge::stream::StreamOptions,
) -> anyhow::Result<(jtrace_merge::Trace, jtrace_merge::stream::SortedEvents)> {
    use anyhow::Context;
    jtrace_merge::stream::open(dir, opts).with_context(|| format!("cannot open trace {}", dir.display()))
}

//! What the text report shows (`jtrace report`'s options), and writing a
//! line of it: wrapped at 120 columns unless `--wide`.

use std::fmt::Write as _;

/// What the text report shows (`jtrace report`'s options).
#[derive(Debug, Clone, Copy)]
pub struct ReportTextOptions {
    /// Rows in the method and stack tables.
    pub top: usize,
    /// Show everything (`--all`): jtrace's own threads, the threads
    /// waiting for work in the threads table, idle time in the methods and
    /// stacks; by default the tables rank working time.
    pub all: bool,
    /// One row per thread, threads named alike not summed (`--per-thread`).
    pub per_thread: bool,
    /// Today's full tables (`--wide`): one column per cause and the
    /// switches, stacks unfolded; by default every line fits 120 columns.
    pub wide: bool,
}

impl Default for ReportTextOptions {
    fn default() -> Self {
        ReportTextOptions {
            top: 25,
            all: false,
            per_thread: false,
            wide: false,
        }
    }
}

/// `text` as one line, or wrapped to 120 columns unless `--wide`.
pub(crate) fn line(s: &mut String, text: &str, indent: usize, opts: &ReportTextOptions) {
    if opts.wide {
        let _ = writeln!(s, "{text}");
    } else {
        s.push_str(&crate::text_fit::wrap(text, crate::text_fit::WIDTH, indent));
    }
}

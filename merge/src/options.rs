//! How a streaming analysis may use memory and disk, and the parsing of the
//! sizes users give for it (`--memory-budget 64M`).

use std::path::PathBuf;

/// Default memory budget for buffered events: 256 MiB (about 10 M events).
pub const DEFAULT_BUDGET: usize = 256 << 20;

/// How a streaming analysis may use memory and disk.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Bytes of buffered events before a sorted run is written to disk.
    pub memory_budget: usize,
    /// Where runs go (default `$TMPDIR`, else /tmp). The files are unlinked
    /// as soon as they are created, so nothing is left behind.
    pub temp_dir: Option<PathBuf>,
    /// Also prepare [`analyze_with_wakers`](crate::stream::analyze_with_wakers)
    /// (the waker's method of every wakeup): each wakeup is sent to its
    /// waker's stream as a query.
    pub waker_methods: bool,
    /// Only the method calls that overlap this time window (CLOCK_MONOTONIC
    /// ns, both ends included) are wanted: calls wholly outside it may be
    /// left out of the walk, which then reports them to no visitor
    /// ([`Visitor::enter`](crate::Visitor::enter)/[`exit`](crate::Visitor::exit)).
    /// Every other figure — invocations and off-CPU intervals overlapping the
    /// window, with their depths and breakdowns, every off-CPU interval and
    /// wakeup, the threads' totals — is exactly what the full walk reports;
    /// anomalies of the method stacks count in the totals only if the
    /// events behind them are kept, which they are (docs in
    /// `merge/src/read/cut.rs`). For views of a window (`jtrace timeline
    /// --window`).
    pub calls_within: Option<(u64, u64)>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            memory_budget: DEFAULT_BUDGET,
            temp_dir: None,
            waker_methods: false,
            calls_within: None,
        }
    }
}

/// `64 KiB`, `256 MiB`: a budget as messages show it.
pub(crate) fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Parses a size such as `64M`, `512K`, `2G` or a number of bytes.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: usize = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("{s}: unknown unit {c} (use K, M or G)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: usize = num.trim().parse().map_err(|e| format!("{s}: {e}"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_or_without_a_unit() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 64k "), Ok(64 << 10));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("3 M"), Ok(3 << 20));
        assert!(parse_size("12T").unwrap_err().contains("unknown unit T"));
        assert!(parse_size("M").is_err());
        assert!(parse_size("-1K").is_err());
        assert!(parse_size(&format!("{}G", usize::MAX))
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn budgets_show_in_their_largest_whole_unit() {
        assert_eq!(human(256 << 20), "256 MiB");
        assert_eq!(human(2 << 30), "2 GiB");
        assert_eq!(human((1 << 30) + (1 << 20)), "1025 MiB");
        assert_eq!(human(64 << 10), "64 KiB");
        assert_eq!(human(100), "100 bytes");
    }
}

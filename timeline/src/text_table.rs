//! The text report's table: columns at least as wide as asked, a name
//! column that gives up width to fit 120 columns, and its cells (shares,
//! causes, names cut at their start).

use crate::text::ms;
use jtrace_merge::{Cause, OffCpu};
use std::fmt::Write as _;

pub(crate) fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Causes that are non-zero anywhere in `rows`, in column order.
pub(crate) fn used_causes<'a>(rows: impl Iterator<Item = &'a OffCpu>) -> Vec<Cause> {
    let mut any = [false; jtrace_merge::N_CAUSES];
    for r in rows {
        for (c, _) in r.nonzero() {
            any[c as usize] = true;
        }
    }
    Cause::ALL.into_iter().filter(|c| any[*c as usize]).collect()
}

/// A text table: columns at least as wide as asked, wider where a cell
/// needs it (a number never loses digits), separated by one space.
pub(crate) struct Table {
    /// Per column: minimum width, left-aligned.
    cols: Vec<(usize, bool)>,
    rows: Vec<Vec<String>>,
    /// Lines written as they are before the row of their index (a group's
    /// heading).
    headings: Vec<(usize, String)>,
    /// A column that gives up width (its cells cut, keeping their end)
    /// when the lines would pass 120 columns, down to a least width.
    flex: Option<(usize, usize)>,
}

impl Table {
    pub(crate) fn new(cols: Vec<(usize, bool)>) -> Table {
        Table {
            cols,
            rows: Vec::new(),
            headings: Vec::new(),
            flex: None,
        }
    }

    /// A line written whole before the next row.
    pub(crate) fn heading(&mut self, line: String) {
        self.headings.push((self.rows.len(), line));
    }

    /// Lets column `col` shrink down to `least` so that lines fit 120
    /// columns.
    pub(crate) fn fit(mut self, col: usize, least: usize) -> Table {
        self.flex = Some((col, least));
        self
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.cols.len());
        self.rows.push(cells);
    }

    pub(crate) fn write(&self, s: &mut String) {
        let mut widths: Vec<usize> = (self.cols.iter().enumerate())
            .map(|(i, &(min, _))| (self.rows.iter()).map(|r| r[i].chars().count()).fold(min, usize::max))
            .collect();
        let line_width = widths.iter().sum::<usize>() + widths.len() - 1;
        let flex = self.flex.filter(|_| line_width > crate::text_fit::WIDTH);
        if let Some((col, least)) = flex {
            let over = line_width - crate::text_fit::WIDTH;
            widths[col] = widths[col].saturating_sub(over).max(least);
        }
        for (n, r) in self.rows.iter().enumerate() {
            for (_, h) in self.headings.iter().filter(|(at, _)| *at == n) {
                let _ = writeln!(s, "{h}");
            }
            let line: Vec<String> = (r.iter().enumerate().zip(&self.cols).zip(&widths))
                .map(|(((i, cell), &(_, left)), &w)| {
                    let cut;
                    let cell = match flex {
                        Some((col, _)) if col == i => {
                            cut = truncate(cell, w);
                            &cut
                        }
                        _ => cell,
                    };
                    if left {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(s, "{}", line.join(" ").trim_end());
        }
    }
}

/// One cell per cause of `cols`: `cell` of its time, `-` for none.
pub(crate) fn by_cause_columns(off: &OffCpu, cols: &[Cause], cell: impl Fn(u64) -> String) -> Vec<String> {
    (cols.iter())
        .map(|c| match off.get(*c) {
            0 => "-".to_string(),
            v => cell(v),
        })
        .collect()
}

/// `12.345 (sleep 10.002, runqueue 2.343)`: the total and its causes, or `-`.
pub(crate) fn by_cause(off: &OffCpu) -> String {
    if off.total() == 0 {
        return "-".into();
    }
    let causes: Vec<String> = off
        .nonzero()
        .map(|(c, ns)| format!("{} {}", c.name(), ms(ns)))
        .collect();
    format!("{} ({})", ms(off.total()), causes.join(", "))
}

/// The `not covered` column's cell: ms, or `-`.
pub(crate) fn not_covered_cell(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        ms(ns)
    }
}

/// `s` cut to `n` characters, keeping its end (`…` for the rest).
pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(n - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number wider than its column (1104506.691 ms in an
    /// 11-wide column) widens the column instead of losing digits.
    #[test]
    fn a_wide_number_keeps_its_digits() {
        let mut t = Table::new(vec![(8, true), (11, false), (11, false)]);
        t.row(vec!["method".into(), "wall".into(), "cpu".into()]);
        t.row(vec!["a".into(), ms(1_104_506_691_000), ms(1_000_000)]);
        let mut s = String::new();
        t.write(&mut s);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[1].contains(" 1104506.691 "), "{s}");
        // The column stays aligned: both rows end at the same place.
        assert_eq!(lines[0].len(), lines[1].len(), "{s}");
    }
}

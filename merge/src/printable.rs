//! Names made safe to print: a thread, class or method name comes from the
//! traced program, which may put terminal control sequences (ESC, BEL, CR)
//! or newlines in it to forge lines of a view (`== Thread "main"`) or drive
//! the reader's terminal. The reader stores every such name escaped, so all
//! views (text, report, timeline, exports) show what was there, inert.

use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1), line or paragraph
/// separator and bidirectional override written as an escape (`\n`, `\r`,
/// `\t`, `\x1b`, `\u{202e}`); `s` itself, unallocated, when it has none.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] of an owned string: moved through when it needs nothing.
pub fn printable_owned(s: String) -> String {
    match printable(&s) {
        Cow::Borrowed(_) => s,
        Cow::Owned(o) => o,
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_and_line_breaks_are_escaped() {
        assert_eq!(printable("main"), "main");
        assert!(matches!(printable("pool-1-thread-3 ü"), Cow::Borrowed(_)));
        assert_eq!(
            printable("x\n== Thread \"main\"\r\x1b[31mred\x07\t\u{7f}\u{9b}"),
            "x\\n== Thread \"main\"\\r\\x1b[31mred\\x07\\t\\x7f\\x9b"
        );
        assert_eq!(printable("a\u{202e}b\u{2028}c"), "a\\u{202e}b\\u{2028}c");
        assert_eq!(printable_owned("ok".into()), "ok");
    }
}

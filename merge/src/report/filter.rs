//! The report's filters (JPMT's offline filtering): threads and methods by
//! glob, methods by cause.

use crate::cause::Cause;

/// Filters applied while building a report (JPMT's offline filtering).
#[derive(Debug, Clone, Default)]
pub struct ReportFilter {
    /// Keep threads whose tid or name matches (glob).
    pub thread: Option<String>,
    /// Keep methods whose `class.name` matches (glob).
    pub method: Option<String>,
    /// Keep methods with time off CPU for this cause, sorted by it.
    pub cause: Option<Cause>,
    /// Give the top stacks' native frames their source lines (DWARF:
    /// `frame_lines`), with the functions inlined there as frames.
    pub lines: bool,
}

/// Glob match: `*` any run, `?` one character.
pub fn glob_match(pat: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pat.chars().collect(), s.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("Demo.*", "Demo.spin"));
        assert!(!glob_match("Demo.*", "Demo$Inner.run"));
        assert!(glob_match("com.acme.*", "com.acme.sub.Foo.bar"));
        assert!(glob_match("*.run", "Demo$Worker.run"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*", ""));
    }
}

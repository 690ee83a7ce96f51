//! `*`/`?` globs over dotted class and method names and thread names, as
//! the configuration's rules use them ([`crate::config`]).

/// A `*`/`?` wildcard pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pat: Vec<char>,
    /// The pattern itself when it has no wildcard: matched by comparison.
    literal: Option<String>,
}

impl Glob {
    /// Compiles `pattern`: `*` matches any run of characters (dots and `$`
    /// included), `?` exactly one character, everything else itself.
    pub fn new(pattern: &str) -> Self {
        let pat: Vec<char> = pattern.chars().collect();
        let literal = (!pat.iter().any(|&c| c == '*' || c == '?')).then(|| pattern.to_string());
        Glob { pat, literal }
    }

    /// Whether it has a wildcard (`*` or `?`) after the last `.` (all of
    /// it when there is none): whether it names a method outright.
    pub(crate) fn wild_after_last_dot(&self) -> bool {
        let from = self.pat.iter().rposition(|&c| c == '.').map_or(0, |i| i + 1);
        self.pat[from..].iter().any(|&c| c == '*' || c == '?')
    }

    /// The pattern itself, if it has no wildcard.
    pub(crate) fn literal(&self) -> Option<&str> {
        self.literal.as_deref()
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        if let Some(lit) = &self.literal {
            return lit == text;
        }
        if text.is_ascii() {
            // One byte per character: no copy of the text.
            return wildcard_match(&self.pat, text.as_bytes(), |p, t| p == t as char);
        }
        let t: Vec<char> = text.chars().collect();
        wildcard_match(&self.pat, &t, |p, t| p == t)
    }
}

/// Whether `t` matches the glob `p` as a whole (`eq` compares a pattern
/// character with a text element).
fn wildcard_match<T: Copy>(p: &[char], t: &[T], eq: impl Fn(char, T) -> bool) -> bool {
    // Classic linear backtracking: remember the last `*` and retry it
    // with one more character whenever the rest fails to match.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && eq(p[pi], t[ti]))) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn glob() {
        let g = |p: &str, t: &str| Glob::new(p).matches(t);
        assert!(g("Demo.*", "Demo.main"));
        assert!(g("com.acme.*", "com.acme.sub.Foo.bar"));
        assert!(g("*.run", "java.lang.Thread.run"));
        assert!(!g("*.run", "java.lang.Thread.runx"));
        assert!(g("Outer$*", "Outer$Inner"));
        assert!(g("a?c", "abc"));
        assert!(!g("a?c", "ac"));
        assert!(g("*", ""));
        assert!(!g("", "a"));
        assert!(g("a*b*c", "aXbYbZc"));
        assert!(!g("a*b*c", "aXbYbZ"));
        assert!(g("**x", "abx"));
        assert!(g("wörker-?", "wörker-1"));
        assert!(g("w?rker-1", "wörker-1"), "`?` is one character, not one byte");
        assert!(!g("w??rker-1", "wörker-1"));
        assert!(g("Demo.main", "Demo.main") && !g("Demo.main", "Demo.mainx"));
    }
}

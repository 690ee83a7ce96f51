//! Fitting the text report into a terminal: lines wrapped at word
//! boundaries, off-CPU causes folded to the largest few with their share,
//! stacks cut to the frames that fit.

use jtrace_merge::OffCpu;

/// Columns the default text report fits in (`--wide` does not fold).
pub(crate) const WIDTH: usize = 120;

/// `text` wrapped at spaces into lines of at most `width` characters, the
/// later ones indented by `indent` spaces; a word longer than a line is
/// cut. Each line ends with a newline.
pub(crate) fn wrap(text: &str, width: usize, indent: usize) -> String {
    if text.chars().count() <= width {
        return format!("{text}\n");
    }
    let mut out = String::new();
    let mut line: Vec<char> = Vec::new();
    // Whether the line holds a word, and whether it was just broken (the
    // spaces at a break are dropped).
    let (mut has_word, mut broke) = (false, false);
    for (i, word) in text.split(' ').enumerate() {
        let word: Vec<char> = word.chars().collect();
        if broke && word.is_empty() {
            continue;
        }
        if i > 0 && !broke {
            if has_word && line.len() + 1 + word.len() > width {
                out.extend(&line);
                out.push('\n');
                line = vec![' '; indent];
                has_word = false;
                if word.is_empty() {
                    broke = true;
                    continue;
                }
            } else {
                line.push(' ');
            }
        }
        broke = false;
        let mut rest = &word[..];
        // A word longer than a whole line is cut across lines.
        while line.len() + rest.len() > width && line.len() + 1 < width {
            let take = width - line.len();
            line.extend(&rest[..take]);
            out.extend(&line);
            out.push('\n');
            rest = &rest[take..];
            line = vec![' '; indent];
        }
        line.extend(rest);
        has_word |= !word.is_empty();
    }
    out.extend(&line);
    out.push('\n');
    out
}

/// A share of `whole` as a whole percent (`<1%` for a small non-zero one).
pub(crate) fn share(part: u64, whole: u64) -> String {
    match (part, whole) {
        (_, 0) => "-".into(),
        (p, w) if p * 100 < w && p > 0 => "<1%".into(),
        (p, w) => format!("{}%", (p as f64 * 100.0 / w as f64).round() as u64),
    }
}

/// The `keep` largest causes of `off` with their share of it, the rest
/// folded into one `+N x%`: `monitor 95% · sleep 4% · +2 1%`; `-` when
/// there is no time.
pub(crate) fn fold_causes(off: &OffCpu, keep: usize) -> String {
    let total = off.total();
    if total == 0 {
        return "-".into();
    }
    let mut causes: Vec<(jtrace_merge::Cause, u64)> = off.nonzero().collect();
    causes.sort_by_key(|&(c, ns)| (std::cmp::Reverse(ns), c as usize));
    let mut parts: Vec<String> = (causes.iter().take(keep))
        .map(|(c, ns)| format!("{} {}", c.name(), share(*ns, total)))
        .collect();
    if causes.len() > keep {
        let rest: u64 = causes[keep..].iter().map(|(_, ns)| ns).sum();
        parts.push(format!("+{} {}", causes.len() - keep, share(rest, total)));
    }
    parts.join(" · ")
}

/// `frames` joined with ` < ` into at most `lines` lines of at most
/// `width` characters (a frame too long for a line is cut at its end),
/// `… N more` where frames were left out.
pub(crate) fn fit_frames(frames: &[String], width: usize, lines: usize) -> Vec<String> {
    const MORE: usize = 14; // " < … 999 more"
    let frames: Vec<String> = frames.iter().map(|f| cut(f, width.saturating_sub(MORE))).collect();
    let len = |v: &[String]| v.iter().map(|f| f.chars().count() + 3).sum::<usize>().saturating_sub(3);
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let last = out.len() + 1 == lines;
        if last && len(&frames[i..]) <= width {
            out.push(frames[i..].join(" < "));
            return out;
        }
        let room = if last { width - MORE } else { width - 2 };
        let mut j = i + 1;
        while j < frames.len() && len(&frames[i..=j]) <= room {
            j += 1;
        }
        if j == frames.len() {
            out.push(frames[i..].join(" < "));
            return out;
        }
        let mut line = frames[i..j].join(" < ");
        if last {
            line.push_str(&format!(" < … {} more", frames.len() - j));
            out.push(line);
            return out;
        }
        line.push_str(" <");
        out.push(line);
        i = j;
    }
    out
}

/// `s` cut to `n` characters, with `…` at the cut.
pub(crate) fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_merge::Cause;

    #[test]
    fn wrapped_lines_fit_and_keep_every_word() {
        let text = "WARNING: thread \"pool-1-thread-3\" of JVM pid 4242 could not be paired with a kernel thread: \
                    none of its time is covered (no TASK_NS record names it; docs/REPORT.md, \"Containers\") \
                    /a/very/long/path/without/any/space/in/it/that/goes/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/x";
        let w = wrap(text, 60, 9);
        assert!(w.lines().all(|l| l.chars().count() <= 60), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("         ")), "{w}");
        let words: String = w.split_whitespace().collect();
        assert_eq!(words, text.split_whitespace().collect::<String>());
    }

    #[test]
    fn causes_fold_past_the_largest() {
        let mut off = OffCpu::default();
        off.add(Cause::Monitor, 950);
        off.add(Cause::Sleep, 40);
        off.add(Cause::Runqueue, 6);
        off.add(Cause::File, 4);
        assert_eq!(fold_causes(&off, 2), "monitor 95% · sleep 4% · +2 1%");
        assert_eq!(fold_causes(&OffCpu::default(), 2), "-");
        let mut one = OffCpu::default();
        one.add(Cause::Park, 3);
        assert_eq!(fold_causes(&one, 2), "park 100%");
    }

    #[test]
    fn frames_fit_their_lines() {
        let frames: Vec<String> = (0..40).map(|i| format!("com.acme.deep.Frame{i}.call_[j]")).collect();
        let lines = fit_frames(&frames, 80, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:?}");
        assert!(lines[1].contains("more"), "{lines:?}");
        let few = fit_frames(&frames[..2], 80, 2);
        assert_eq!(
            few,
            vec!["com.acme.deep.Frame0.call_[j] < com.acme.deep.Frame1.call_[j]"]
        );
    }
}

//! `jtrace report --exclude-demoted`: the methods a trace demoted, as
//! configuration rules (`exclude_method <class> <method>`) that leave them
//! without probes from the start of the next run (`jtrace run --config`).
//! A demoted method's probes still cost a call each time it runs until the
//! JIT's top tier folds them (docs/OVERHEAD.md); a method excluded at load
//! time costs nothing. Rules name methods, not signatures, so a name is
//! listed only when every overload of it that ran in the trace was demoted.

use jtrace_merge::Report;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The configuration text for `report` (made from trace `trace`): a
/// commented header, one `exclude_method` line per method name all of whose
/// overloads that ran were demoted, and the names left out, commented.
pub(crate) fn exclude_demoted(report: &Report, trace: &str) -> String {
    let demoted: BTreeSet<(&str, &str, &str)> = report
        .demoted
        .iter()
        .map(|d| (d.class.as_str(), d.name.as_str(), d.signature.as_str()))
        .collect();
    // Per (class, name): whether every overload that ran was demoted.
    let mut all_demoted: BTreeMap<(&str, &str), bool> = BTreeMap::new();
    for &(class, name, _) in &demoted {
        all_demoted.insert((class, name), true);
    }
    for m in &report.methods {
        let key = (m.class.as_str(), m.name.as_str());
        if let Some(all) = all_demoted.get_mut(&key) {
            *all &= demoted.contains(&(key.0, key.1, m.signature.as_str()));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `jtrace report --exclude-demoted` from {trace}: the methods its agent demoted\n\
         # (hot, short, never blocked inside). With `jtrace run --config <this file> --methods ...`\n\
         # they get no probes from the start: rules apply top to bottom and these come before\n\
         # --methods. Their time is then their callers' own, as after a demotion, and the next\n\
         # report does not list them."
    );
    let mut kept = Vec::new();
    for (&(class, name), &all) in &all_demoted {
        if !all {
            kept.push(format!("{class}.{name} (an overload of it was not demoted)"));
        } else if !literal(class) || !literal(name) {
            kept.push(format!(
                "{class}.{name} (its name holds a character a rule reads otherwise)"
            ));
        } else {
            let _ = writeln!(out, "exclude_method {class} {name}");
        }
    }
    for k in kept {
        let _ = writeln!(out, "# not excluded: {k}");
    }
    out
}

/// Whether a rule can name `s` as it is: no wildcard (`*`, `?`), comment
/// (`#`) or white space, which a configuration line reads otherwise (the
/// JVM allows them in names).
fn literal(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(|c| c == '*' || c == '?' || c == '#' || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn only_plain_names_become_rules() {
        assert!(literal("org.h2.Outer$Inner") && literal("<init>"));
        assert!(!literal("a*b") && !literal("a?") && !literal("x#y") && !literal("a b") && !literal(""));
    }
}

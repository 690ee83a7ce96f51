//! Kernel symbols from `/proc/kallsyms` (text symbols only), to name the
//! kernel addresses of stacks while recording: the trace then stores the
//! names it uses (KSYM records), so it reads the same on any machine.
//! [`shown_to_unprivileged`]: whether an ordinary user may see them.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// The kernel's text symbols, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms`. Addresses all zero (kptr_restrict, not root)
    /// are an error: nothing could be named.
    pub fn load() -> Result<Kallsyms> {
        Kallsyms::load_from(Path::new("/proc/kallsyms"))
    }

    /// Reads a kallsyms file.
    pub fn load_from(path: &Path) -> Result<Kallsyms> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let k = Kallsyms::parse(&text);
        if k.syms.is_empty() {
            bail!(
                "{}: no kernel symbol addresses (restricted by kernel.kptr_restrict, or not root)",
                path.display()
            );
        }
        Ok(k)
    }

    /// Parses kallsyms text: `address type name [module]` lines.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let name = match it.next() {
                Some(module) => format!("{name} {module}"),
                None => name.to_string(),
            };
            syms.push((addr, name));
        }
        syms.sort_by_key(|s| s.0);
        Kallsyms { syms }
    }

    /// The symbol holding `addr`: its start, the next symbol's start
    /// (its end) and its name.
    pub fn lookup(&self, addr: u64) -> Option<(u64, u64, &str)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, name) = &self.syms[i];
        let end = self.syms.get(i + 1).map_or(u64::MAX, |n| n.0);
        Some((*start, end, name))
    }
}

/// Symbols from (start, name) pairs, in any order: those a trace's KSYM
/// records name.
impl FromIterator<(u64, String)> for Kallsyms {
    fn from_iter<I: IntoIterator<Item = (u64, String)>>(iter: I) -> Self {
        let mut syms: Vec<(u64, String)> = iter.into_iter().collect();
        syms.sort_by_key(|s| s.0);
        Kallsyms { syms }
    }
}

/// Whether the kernel shows its addresses to a user without capabilities
/// (in /proc/kallsyms, /proc/modules, perf), by the rule of the kernel's
/// `kallsyms_show_value`: only when `kernel.kptr_restrict` is 0 and
/// `kernel.perf_event_paranoid` is at most 1. A setting that cannot be
/// read counts as hiding them. (Root, with CAP_SYSLOG, sees them unless
/// kptr_restrict is 2.)
pub fn shown_to_unprivileged() -> bool {
    let sysctl = |name: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    match (sysctl("kptr_restrict"), sysctl("perf_event_paranoid")) {
        (Some(kptr_restrict), Some(paranoid)) => shown_by(kptr_restrict, paranoid),
        _ => false,
    }
}

/// [`shown_to_unprivileged`] for these settings.
pub fn shown_by(kptr_restrict: i64, perf_event_paranoid: i64) -> bool {
    kptr_restrict == 0 && perf_event_paranoid <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_user_sees_kernel_addresses_only_when_both_settings_allow() {
        assert!(shown_by(0, 1));
        assert!(shown_by(0, -1));
        assert!(
            !shown_by(0, 2),
            "perf_event_paranoid 2 hides them (the kernel's default)"
        );
        assert!(!shown_by(1, 1), "kptr_restrict 1: CAP_SYSLOG only");
        assert!(!shown_by(2, -1));
    }

    #[test]
    fn parses_text_symbols_and_modules() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t helper\nffffffff82000000 D data\n\
             ffffffffc0000000 t mod_fn\t[kvm]\n0000000000000000 T zero\n",
        );
        assert_eq!(
            k.lookup(0xffffffff81000050),
            Some((0xffffffff81000000, 0xffffffff81000100, "_stext"))
        );
        assert_eq!(k.lookup(0xffffffffc0000010).unwrap().2, "mod_fn [kvm]");
        assert_eq!(k.lookup(0x10), None);
    }

    #[test]
    #[cfg_attr(
        not(feature = "system-tests"),
        ignore = "needs root (kallsyms shows addresses to root only)"
    )]
    fn reads_this_kernel() {
        // Root (the tests run as root): addresses are visible.
        let k = Kallsyms::load().unwrap();
        assert!(k.syms.len() > 1000);
        let (_, _, name) = k.lookup(k.syms[k.syms.len() / 2].0 + 1).unwrap();
        assert!(!name.is_empty());
    }
}

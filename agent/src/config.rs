//! The agent's configuration: a JPMT-style directive file.
//!
//! One directive per line; `#` starts a comment; blank lines are ignored.
//!
//! | directive | argument |
//! |---|---|
//! | `output` | trace directory; the stream goes to `<dir>/jvm-<pid>.bin` |
//! | `include_method`, `exclude_method` | `<class.method glob>` or `<class glob> <method glob>` |
//! | `include_thread`, `exclude_thread` | thread name glob (the rest of the line, spaces allowed) |
//! | `overhead_budget` | percent of each thread's time its probes may cost before hot, short methods are demoted (`2`, `0.5%`), or `off` (the default) |
//! | `skip_trivial` | `on`: selected methods trivial by `jtrace_format::TRIVIAL_RULE` get no probes (listed in the trace); `off` (the default) |
//! | `skip_forwarders` | `on`: with `skip_trivial`, the rule's forwarders a wildcard selected get no probes too; `off` (the default) |
//! | `min_duration_ns` | calls shorter than this many ns with no traced child, no exception and no block are left out (default 0: none) |
//! | `min_free_bytes` | the stream stops growing (its later events counted as lost) when its file system would keep fewer free bytes than this (default 0: until the disk is full) |
//! | `chunk_bytes`, `chunk_ms` | a ring recording: the stream is written as numbered chunk files, a new one begun when the current one holds this many bytes or is this old (default 0: one file) |
//! | `method_invocation`, `bytecode_rewriting`, `monitor_contention`, `monitor_waiting`, `garbage_collection`, `object_allocation`, `lt_process_scheduling`, `park`, `sleep`, `jit`, `virtual_threads`, `stacks` | `on` or `off` |
//!
//! Monitor contention, monitor waiting, garbage collection, park, sleep and
//! JIT (compiled method load/unload) events are on by default; sampled object
//! allocation is off. None of them needs method events. `virtual_threads`
//! (default on; JDK 21 and later) follows virtual threads' mounts on their
//! carriers: with it off their method calls are still recorded as theirs,
//! but their time is not attributed (see agent/src/vthreads/mod.rs for
//! its cost).
//!
//! Rules are tried top to bottom and the first match wins. A method that
//! matches no rule is not traced; a thread that matches no rule is traced.

pub use crate::glob::Glob;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// One problem found in the configuration, with its 1-based line number
/// (0 when it concerns the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Line of the problem, 1-based; 0 for the whole file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// Formats the error as `<file>:<line>: <message>` (or `<file>: <message>`).
    pub fn located(&self, file: &str) -> String {
        if self.line == 0 {
            format!("{file}: {}", self.message)
        } else {
            format!("{file}:{}: {}", self.line, self.message)
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// What a method rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MethodPattern {
    /// One glob over `class.method` (dotted class name).
    Full(Glob),
    /// A class glob and a method-name glob, matched separately.
    Split(Glob, Glob),
}

impl MethodPattern {
    /// Whether the method `name` of class `class` (dotted) matches, given
    /// `full` = `class.name` (joined once per lookup, not once per rule).
    fn matches_joined(&self, full: &str, class: &str, name: &str) -> bool {
        match self {
            MethodPattern::Full(g) => g.matches(full),
            MethodPattern::Split(c, m) => c.matches(class) && m.matches(name),
        }
    }

    /// The one `class.method` it matches, if it has no wildcard.
    fn exact_name(&self) -> Option<String> {
        match self {
            MethodPattern::Full(g) => g.literal().map(str::to_string),
            // A method name has no dot: `a b.c` matches nothing, not `a.b.c`.
            MethodPattern::Split(c, m) => match (c.literal(), m.literal()) {
                (Some(c), Some(m)) if !m.contains('.') => Some(format!("{c}.{m}")),
                _ => None,
            },
        }
    }
}

impl MethodPattern {
    /// Whether the pattern names its methods outright (no wildcard in the
    /// method name): `Main.run`, `*.run`, not `Main.*` or `org.h2.*`.
    pub fn names_methods(&self) -> bool {
        match self {
            MethodPattern::Full(g) | MethodPattern::Split(_, g) => !g.wild_after_last_dot(),
        }
    }
}

/// A method include/exclude rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodRule {
    /// `true` for `include_method`, `false` for `exclude_method`.
    pub include: bool,
    /// What it matches.
    pub pattern: MethodPattern,
}

/// A thread include/exclude rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRule {
    /// `true` for `include_thread`, `false` for `exclude_thread`.
    pub include: bool,
    /// Glob over the Java thread name.
    pub pattern: Glob,
}

/// The method rules, indexed ([`Config::method_rule`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct RuleIndex {
    /// The first rule naming each `class.method` outright, by that name.
    exact: HashMap<String, usize>,
    /// The other rules (wildcards), in order.
    wildcard: Vec<usize>,
}

/// The parsed configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Trace directory (`output`).
    pub output: Option<String>,
    /// `method_invocation` (default on): record method entry/exit.
    pub method_invocation: bool,
    /// `bytecode_rewriting` (default on): trace methods by rewriting their
    /// bytecode at load time; `off` uses JVMTI MethodEntry/MethodExit events.
    pub bytecode_rewriting: bool,
    /// `monitor_contention` (default on): contended monitor enter/entered.
    pub monitor_contention: bool,
    /// `monitor_waiting` (default on): Object.wait begin/end.
    pub monitor_waiting: bool,
    /// `garbage_collection` (default on): GC start/finish.
    pub garbage_collection: bool,
    /// `object_allocation` (default off): sampled object allocations.
    pub object_allocation: bool,
    /// `park` (default on): Unsafe.park (LockSupport) begin/end.
    pub park: bool,
    /// `sleep` (default on): Thread.sleep begin/end.
    pub sleep: bool,
    /// `jit` (default on): compiled method load/unload.
    pub jit: bool,
    /// `virtual_threads` (default on): virtual threads' starts, ends,
    /// mounts, unmounts and unparks (JDK 21 and later).
    pub virtual_threads: bool,
    /// `stacks` (default on): what the kernel recorder's stacks need
    /// (generated code, inlining, `Method*`s, Java threads' frame anchors).
    pub stacks: bool,
    /// `lt_process_scheduling` (default off; accepted, not implemented yet).
    pub lt_process_scheduling: bool,
    /// `overhead_budget` in hundredths of a percent (0: off, the default):
    /// past it, hot short methods are demoted ([`crate::demotion`]).
    pub overhead_budget: u32,
    /// `min_duration_ns` (0: off): shorter leaf calls are left out ([`crate::demotion::watch`]).
    pub min_duration_ns: u64,
    /// `skip_trivial` (default off): selected methods trivial by
    /// [`jtrace_format::TRIVIAL_RULE`] are not instrumented.
    pub skip_trivial: bool,
    /// `skip_forwarders` (default off): with `skip_trivial`, forwarders
    /// (the rule's second part) get no probes either.
    pub skip_forwarders: bool,
    /// `min_free_bytes` (0: none): the free-space floor of the stream's
    /// file system ([`crate::stream::file`]).
    pub min_free_bytes: u64,
    /// `chunk_bytes` (0: no size bound): a new chunk past this size ([`crate::stream::chunks`]).
    pub chunk_bytes: u64,
    /// `chunk_ms` (0: no age bound): a new chunk past this age ([`crate::stream::chunks`]).
    pub chunk_ms: u64,
    /// Method rules in file order.
    pub(crate) method_rules: Vec<MethodRule>,
    /// Thread rules in file order.
    pub thread_rules: Vec<ThreadRule>,
    /// The method rules indexed, built at the first lookup after a rule
    /// was added: a configuration listing thousands of methods costs each
    /// method one hash lookup, not a match per rule.
    rule_index: OnceLock<RuleIndex>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            output: None,
            method_invocation: true,
            bytecode_rewriting: true,
            monitor_contention: true,
            monitor_waiting: true,
            garbage_collection: true,
            object_allocation: false,
            park: true,
            sleep: true,
            jit: true,
            virtual_threads: true,
            stacks: true,
            lt_process_scheduling: false,
            overhead_budget: 0,
            min_duration_ns: 0,
            skip_trivial: false,
            skip_forwarders: false,
            min_free_bytes: 0,
            chunk_bytes: 0,
            chunk_ms: 0,
            method_rules: Vec::new(),
            thread_rules: Vec::new(),
            rule_index: OnceLock::new(),
        }
    }
}

impl Config {
    /// Parses a configuration file's text. Returns the configuration read so
    /// far together with every problem found; any problem means the agent
    /// must not trace.
    pub fn parse(text: &str) -> (Config, Vec<ConfigError>) {
        let mut cfg = Config::default();
        let mut errors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = match raw.find('#') {
                Some(p) => &raw[..p],
                None => raw,
            };
            let content = content.trim();
            if content.is_empty() {
                continue;
            }
            let (directive, rest) = match content.split_once(char::is_whitespace) {
                Some((d, r)) => (d, r.trim()),
                None => (content, ""),
            };
            if let Err(message) = cfg.apply(directive, rest) {
                errors.push(ConfigError { line, message });
            }
        }
        (cfg, errors)
    }

    fn apply(&mut self, directive: &str, rest: &str) -> Result<(), String> {
        let args: Vec<&str> = rest.split_whitespace().collect();
        match directive {
            "output" => {
                if rest.is_empty() {
                    return Err("`output` needs a directory".into());
                }
                if self.output.is_some() {
                    return Err("`output` given twice".into());
                }
                self.output = Some(rest.to_string());
            }
            "include_method" | "exclude_method" => {
                let pattern = match args.as_slice() {
                    [full] => MethodPattern::Full(Glob::new(full)),
                    [class, method] => MethodPattern::Split(Glob::new(class), Glob::new(method)),
                    _ => {
                        return Err(format!(
                            "`{directive}` takes `<class.method>` or `<class> <method>` patterns, got {} arguments",
                            args.len()
                        ))
                    }
                };
                self.method_rules.push(MethodRule {
                    include: directive == "include_method",
                    pattern,
                });
                // Rebuilt at the next lookup with this rule.
                self.rule_index = OnceLock::new();
            }
            "include_thread" | "exclude_thread" => {
                // Thread names may contain spaces ("Signal Dispatcher"), so the
                // whole rest of the line is the pattern.
                if rest.is_empty() {
                    return Err(format!("`{directive}` needs a thread name pattern"));
                }
                self.thread_rules.push(ThreadRule {
                    include: directive == "include_thread",
                    pattern: Glob::new(rest),
                });
            }
            "overhead_budget" => {
                self.overhead_budget = match args.as_slice() {
                    ["off"] => 0,
                    [pct] => match pct.trim_end_matches('%').parse::<f64>() {
                        Ok(p) if p > 0.0 && p <= 100.0 => (p * 100.0).round().max(1.0) as u32,
                        _ => {
                            return Err(format!(
                                "`overhead_budget` takes a percentage in (0, 100] or `off`, got `{rest}`"
                            ))
                        }
                    },
                    _ => return Err(format!("`overhead_budget` takes a percentage or `off`, got `{rest}`")),
                };
            }
            "min_duration_ns" => {
                self.min_duration_ns =
                    match args.as_slice() {
                        [n] => n.parse::<u64>().ok().filter(|&n| n < 1 << 31).ok_or_else(|| {
                            format!("`min_duration_ns` takes a number of ns below 2^31, got `{rest}`")
                        })?,
                        _ => return Err(format!("`min_duration_ns` takes one number, got `{rest}`")),
                    };
            }
            "min_free_bytes" | "chunk_bytes" | "chunk_ms" => {
                let n = match args.as_slice() {
                    [n] => n
                        .parse::<u64>()
                        .map_err(|_| format!("`{directive}` takes one number, got `{rest}`"))?,
                    _ => return Err(format!("`{directive}` takes one number, got `{rest}`")),
                };
                match directive {
                    "min_free_bytes" => self.min_free_bytes = n,
                    "chunk_bytes" => self.chunk_bytes = n,
                    _ => self.chunk_ms = n,
                }
            }
            "method_invocation"
            | "bytecode_rewriting"
            | "monitor_contention"
            | "monitor_waiting"
            | "garbage_collection"
            | "object_allocation"
            | "lt_process_scheduling"
            | "park"
            | "sleep"
            | "jit"
            | "virtual_threads"
            | "skip_trivial"
            | "skip_forwarders"
            | "stacks" => {
                let on = match args.as_slice() {
                    ["on"] => true,
                    ["off"] => false,
                    _ => return Err(format!("`{directive}` takes `on` or `off`, got `{rest}`")),
                };
                let slot = match directive {
                    "method_invocation" => &mut self.method_invocation,
                    "bytecode_rewriting" => &mut self.bytecode_rewriting,
                    "monitor_contention" => &mut self.monitor_contention,
                    "monitor_waiting" => &mut self.monitor_waiting,
                    "garbage_collection" => &mut self.garbage_collection,
                    "object_allocation" => &mut self.object_allocation,
                    "park" => &mut self.park,
                    "sleep" => &mut self.sleep,
                    "jit" => &mut self.jit,
                    "virtual_threads" => &mut self.virtual_threads,
                    "stacks" => &mut self.stacks,
                    "skip_trivial" => &mut self.skip_trivial,
                    "skip_forwarders" => &mut self.skip_forwarders,
                    _ => &mut self.lt_process_scheduling,
                };
                *slot = on;
            }
            other => return Err(format!("unknown directive `{other}`")),
        }
        Ok(())
    }

    /// Whether any method can be traced at all (saves enabling the costly
    /// method events when no rule could ever select a method).
    pub fn traces_methods(&self) -> bool {
        self.method_invocation && self.method_rules.iter().any(|r| r.include)
    }

    /// How method `name` of class `class` (dotted) is selected, with one
    /// rule lookup: `None` if it is not traced, `Some(true)` if the rule
    /// that traces it names it outright ([`MethodPattern::names_methods`]:
    /// the trivial rule's forwarders are only those a wildcard selected),
    /// `Some(false)` if a wildcard in the method name does.
    pub fn method_selection(&self, class: &str, name: &str) -> Option<bool> {
        self.method_rule(class, name)
            .filter(|r| r.include)
            .map(|r| r.pattern.names_methods())
    }

    /// Whether method `name` of class `class` (dotted) is traced: first
    /// matching rule wins, no match means not traced.
    pub fn method_traced(&self, class: &str, name: &str) -> bool {
        self.method_rule(class, name).is_some_and(|r| r.include)
    }

    /// The first rule matching method `name` of class `class` (dotted),
    /// if methods are traced at all.
    fn method_rule(&self, class: &str, name: &str) -> Option<&MethodRule> {
        if !self.method_invocation {
            return None;
        }
        let index = self.rule_index.get_or_init(|| {
            let mut index = RuleIndex::default();
            for (i, r) in self.method_rules.iter().enumerate() {
                match r.pattern.exact_name() {
                    Some(n) => {
                        index.exact.entry(n).or_insert(i);
                    }
                    None => index.wildcard.push(i),
                }
            }
            index
        });
        let full = format!("{class}.{name}");
        // First match wins: an exact rule, or an earlier wildcard rule.
        let first_exact = index.exact.get(&full).copied().unwrap_or(self.method_rules.len());
        index
            .wildcard
            .iter()
            .take_while(|&&i| i < first_exact)
            .map(|&i| &self.method_rules[i])
            .find(|r| r.pattern.matches_joined(&full, class, name))
            .or_else(|| self.method_rules.get(first_exact))
    }

    /// Whether the thread called `name` is traced: first matching rule wins,
    /// no match means traced.
    pub fn thread_traced(&self, name: &str) -> bool {
        match self.thread_rules.iter().find(|r| r.pattern.matches(name)) {
            Some(r) => r.include,
            None => true,
        }
    }
}

/// Converts a JVM class signature (`Lcom/acme/Foo;`, `[I`) to the dotted
/// name used in rules and records (`com.acme.Foo`, `[I`).
pub fn class_name_from_signature(sig: &str) -> String {
    let inner = match sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) {
        Some(s) => s,
        None => sig,
    };
    inner.replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_rules_keep_first_match_wins() {
        let text = "exclude_method Demo.skip*\ninclude_method Demo.skipNot\n\
                    include_method Demo.run\nexclude_method Demo.run\n\
                    exclude_method Demo kept\ninclude_method Demo.*\n\
                    include_method a b.c\n";
        let (cfg, errs) = Config::parse(text);
        assert!(errs.is_empty(), "{errs:?}");
        // An earlier wildcard rule wins over a later exact one.
        assert!(!cfg.method_traced("Demo", "skipNot"));
        // The first of two exact rules wins.
        assert_eq!(cfg.method_selection("Demo", "run"), Some(true));
        // An exact split rule (class, method) excludes before the wildcard.
        assert!(!cfg.method_traced("Demo", "kept"));
        assert_eq!(cfg.method_selection("Demo", "other"), Some(false));
        // A method name has no dot: `a b.c` is not `a.b.c`.
        assert!(!cfg.method_traced("a.b", "c"));
        // Thousands of exact rules, each found by its name.
        let many: String = (0..20_000).map(|i| format!("include_method C{i}.m\n")).collect();
        let (cfg, _) = Config::parse(&many);
        for i in (0..20_000).step_by(7) {
            assert!(cfg.method_traced(&format!("C{i}"), "m"));
            assert!(!cfg.method_traced(&format!("C{i}"), "n"));
        }
    }

    #[test]
    fn parse_and_rules() {
        let text = "# comment\n\noutput /tmp/t dir\nexclude_method Demo untraced  # trailing\n\
                    include_method Demo.*\ninclude_method com.acme.* get*\n\
                    exclude_thread Signal Dispatcher\ninclude_thread *\nmonitor_waiting on\n";
        let (cfg, errs) = Config::parse(text);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(cfg.output.as_deref(), Some("/tmp/t dir"));
        assert!(cfg.monitor_waiting);
        assert!(cfg.traces_methods());
        assert!(!cfg.method_traced("Demo", "untraced"));
        assert!(cfg.method_traced("Demo", "traced"));
        assert!(cfg.method_traced("com.acme.x.Foo", "getBar"));
        assert!(!cfg.method_traced("com.acme.Foo", "setBar"));
        assert!(!cfg.method_traced("java.lang.String", "length"));
        assert!(!cfg.thread_traced("Signal Dispatcher"));
        assert!(cfg.thread_traced("main"));
    }

    #[test]
    fn defaults() {
        let (cfg, errs) = Config::parse("output /x\n");
        assert!(errs.is_empty());
        assert!(!cfg.traces_methods());
        assert!(!cfg.method_traced("Demo", "main"));
        assert!(cfg.thread_traced("anything"));
        assert!(cfg.monitor_contention && cfg.monitor_waiting && cfg.garbage_collection);
        assert!(cfg.park && cfg.sleep && cfg.jit && !cfg.object_allocation);
        let (cfg, errs) = Config::parse(
            "park off
sleep off
jit off
object_allocation on
",
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert!(!cfg.park && !cfg.sleep && !cfg.jit && cfg.object_allocation);
        let (cfg, _) = Config::parse("include_method *\nmethod_invocation off\n");
        assert!(!cfg.traces_methods());
        assert!(!cfg.method_traced("Demo", "main"));
    }

    #[test]
    fn budget_and_min_duration() {
        let (cfg, errs) = Config::parse("overhead_budget 2%\nmin_duration_ns 5000\n");
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!((cfg.overhead_budget, cfg.min_duration_ns), (200, 5000));
        assert!(!cfg.skip_trivial);
        let (cfg, errs) = Config::parse("skip_trivial on\n");
        assert!(errs.is_empty() && cfg.skip_trivial && !cfg.skip_forwarders, "{errs:?}");
        let (cfg, errs) = Config::parse("skip_forwarders on\n");
        assert!(errs.is_empty() && cfg.skip_forwarders, "{errs:?}");
        let (cfg, _) = Config::parse("overhead_budget 0.25\n");
        assert_eq!(cfg.overhead_budget, 25);
        let (cfg, _) = Config::parse("overhead_budget off\n");
        assert_eq!(cfg.overhead_budget, 0);
        assert_eq!(Config::default().overhead_budget, 0);
        for bad in [
            "overhead_budget 0",
            "overhead_budget lots",
            "min_duration_ns -1",
            "min_duration_ns 1 2",
        ] {
            assert_eq!(Config::parse(bad).1.len(), 1, "{bad}");
        }
    }

    #[test]
    fn errors_name_lines() {
        let (_, errs) = Config::parse(
            "output /x\n\nbogus 1\ninclude_method a b c\nmonitor_waiting maybe\noutput /y\ninclude_thread\n",
        );
        let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6, 7]);
        assert_eq!(errs[0].located("a.conf"), "a.conf:3: unknown directive `bogus`");
    }

    #[test]
    fn class_names() {
        assert_eq!(class_name_from_signature("Lcom/acme/Foo;"), "com.acme.Foo");
        assert_eq!(class_name_from_signature("LOuter$Inner;"), "Outer$Inner");
        assert_eq!(class_name_from_signature("[I"), "[I");
    }

    #[test]
    fn a_rule_names_a_method_unless_its_method_name_has_a_wildcard() {
        let (cfg, errs) = Config::parse(
            "include_method Main.run\ninclude_method *.handle\ninclude_method Main.*\n\
             include_method org.h2.*\ninclude_method com.acme.* get?\ninclude_method com.acme.* put\n",
        );
        assert!(errs.is_empty(), "{errs:?}");
        let named = |class: &str, name: &str| cfg.method_selection(class, name);
        assert_eq!(named("Main", "run"), Some(true));
        assert_eq!(named("x.Y", "handle"), Some(true));
        assert_eq!(named("Main", "other"), Some(false), "Main.* selects it");
        assert!(cfg.method_traced("Main", "other"));
        assert_eq!(named("org.h2.Driver", "connect"), Some(false));
        assert_eq!(named("com.acme.A", "getX"), Some(false));
        assert_eq!(named("com.acme.A", "put"), Some(true));
        assert_eq!(named("elsewhere.B", "put"), None, "not selected at all");
    }
}

//! The report's top stacks: off-CPU time under each recorded
//! stack, summed while the report is built, then named and ranked per
//! cause, per thread and per method (the stack's innermost Java frame
//! outside the JDK, else its innermost Java frame: no `--methods` needed). Memory grows with the distinct
//! stacks, never with the number of events. Also the off-CPU time of the
//! selected methods left without probes, from the stacks that hold them.

use crate::cause::{Cause, OffCpu};
use crate::model::event::{MethodIdx, ThreadInfo};
use crate::model::trace::Trace;
use crate::report::stack_time::StackTime;
use crate::stacks::blame::blamed_frame;
use crate::stacks::symbolize::{Frame, Symbolizer};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Stacks listed per cause, thread or method.
pub const TOP_STACKS: usize = 5;

/// One stack and the off-CPU time under it.
#[derive(Debug, Clone, Serialize)]
pub struct StackJson {
    /// Off-CPU time under it, ns.
    pub ns: u64,
    /// That time by cause.
    pub off_cpu_ns: OffCpu,
    /// The part of `ns` scaled up from sampled short blocks (their
    /// stacks standing for the thread's short blocks without one).
    #[serde(skip_serializing_if = "is_zero")]
    pub scaled_ns: u64,
    /// The part of `ns` that is idle: a thread waiting for work
    /// (docs/REPORT.md, "Working and idle time"); absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub idle_ns: u64,
    /// The idle rule that matched it (`pool`, `jvm`, …), when `idle_ns` > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<&'static str>,
    /// Its frames, innermost first, named as in `export --format
    /// collapsed` (`_[k]`, `_[j]`, `_[i]`, `_[0]`, `_[1]` suffixes).
    pub frames: Vec<String>,
    /// With `report --lines` only: one entry per frame, its source line
    /// (native frames whose binary has DWARF) or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_lines: Option<Vec<Option<LineJson>>>,
}

/// A frame's source line.
#[derive(Debug, Clone, Serialize)]
pub struct LineJson {
    /// The source file's path as DWARF composes it.
    pub file: String,
    /// The line (1-based).
    pub line: u32,
}

/// The top stacks of one cause, thread or method.
#[derive(Debug, Clone, Serialize)]
pub struct StackGroupJson {
    /// The cause's name, the thread's tid and name (`"12 main"`), or the
    /// method (`package.Class.method`).
    pub key: String,
    /// Off-CPU time of the group that has a stack, ns.
    pub ns: u64,
    /// The part of `ns` scaled up from sampled short blocks.
    #[serde(skip_serializing_if = "is_zero")]
    pub scaled_ns: u64,
    /// The part of `ns` that is idle; absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub idle_ns: u64,
    /// Its stacks: the [`TOP_STACKS`] with the most working time (most
    /// first), then the [`TOP_STACKS`] all idle with the most time.
    pub stacks: Vec<StackJson>,
}

/// The report's `stacks` object (present only if the trace has stacks).
#[derive(Debug, Clone, Serialize)]
pub struct StacksJson {
    /// Per off-CPU cause, most time first (the tracer's own threads are
    /// in `by_thread` only).
    pub by_cause: Vec<StackGroupJson>,
    /// Per thread, most time first.
    pub by_thread: Vec<StackGroupJson>,
    /// Per method (the stack's innermost Java frame outside the JDK, else
    /// its innermost Java frame), most time first.
    pub by_method: Vec<StackGroupJson>,
    /// Which share of the off-CPU time has a stack.
    pub coverage: CoverageJson,
}

/// How much of the off-CPU time of the kept threads has a stack: recorded
/// for its own block, or scaled up from sampled short blocks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CoverageJson {
    /// Blocks at least this long (ns) got their stacks as the thread
    /// resumed; absent: every switch-out got its stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_min_block_ns: Option<u64>,
    /// Shorter blocks got theirs at most this often, per CPU and second.
    pub short_block_stacks_hz: u32,
    /// Over all causes.
    pub all: CoverageOfJson,
    /// Per cause with off-CPU time, most time first.
    pub by_cause: Vec<CauseCoverageJson>,
}

/// Off-CPU time and the part of it under a stack.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CoverageOfJson {
    /// Off-CPU time, ns.
    pub off_cpu_ns: u64,
    /// Of it, under the stack recorded for its own block.
    pub recorded_ns: u64,
    /// Of it, under a stack scaled up from sampled short blocks.
    pub scaled_ns: u64,
}

/// One cause's coverage.
#[derive(Debug, Clone, Serialize)]
pub struct CauseCoverageJson {
    /// The cause.
    pub cause: String,
    /// Its time and the parts under stacks.
    #[serde(flatten)]
    pub of: CoverageOfJson,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Off-CPU time under each stack pair, and the parts of it scaled up and
/// idle.
#[derive(Debug, Clone, Copy, Default)]
struct Under {
    off: OffCpu,
    scaled: OffCpu,
    idle: OffCpu,
    rule: Option<&'static str>,
}

impl Under {
    fn add(&mut self, off: &OffCpu, idle: &OffCpu, rule: Option<&'static str>, scaled: bool) {
        add_off(&mut self.off, off);
        add_off(&mut self.idle, idle);
        if idle.total() > 0 {
            self.rule = self.rule.or(rule);
        }
        if scaled {
            add_off(&mut self.scaled, off);
        }
    }

    fn working(&self) -> u64 {
        self.off.total() - self.idle.total()
    }
}

/// Groups, most time first, each with its top stacks.
fn ranked(groups: HashMap<String, HashMap<u32, Under>>, names: &Names, top: usize) -> Vec<StackGroupJson> {
    let mut v: Vec<StackGroupJson> = groups
        .into_iter()
        .map(|(key, pairs)| {
            let mut stacks: Vec<(u32, Under)> = pairs.into_iter().collect();
            stacks.sort_by_key(|(pair, u)| (std::cmp::Reverse(u.working()), std::cmp::Reverse(u.off.total()), *pair));
            let ns = stacks.iter().map(|(_, u)| u.off.total()).sum();
            let scaled_ns = stacks.iter().map(|(_, u)| u.scaled.total()).sum();
            let idle_ns = stacks.iter().map(|(_, u)| u.idle.total()).sum();
            let (working, mut idle): (Vec<_>, Vec<_>) = stacks.into_iter().partition(|(_, u)| u.working() > 0);
            idle.sort_by_key(|(pair, u)| (std::cmp::Reverse(u.off.total()), *pair));
            let stacks = (working.into_iter().take(top))
                .chain(idle.into_iter().take(top))
                .map(|(pair, under)| {
                    let off_cpu_ns = under.off;
                    let frames = names.of(pair);
                    let frame_lines = names.lines.then(|| {
                        frames
                            .iter()
                            .map(|f| {
                                f.line.as_ref().map(|l| LineJson {
                                    file: l.file.clone(),
                                    line: l.line,
                                })
                            })
                            .collect()
                    });
                    StackJson {
                        ns: off_cpu_ns.total(),
                        scaled_ns: under.scaled.total(),
                        idle_ns: under.idle.total(),
                        idle: under.rule,
                        off_cpu_ns,
                        frames: frames.iter().map(Frame::flame_name).collect(),
                        frame_lines,
                    }
                })
                .collect();
            StackGroupJson {
                key,
                ns,
                scaled_ns,
                idle_ns,
                stacks,
            }
        })
        .filter(|g| g.ns > 0)
        .collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.key.cmp(&b.key)));
    v
}

/// Frames of stack pairs, named once.
struct Names<'t> {
    symbols: Symbolizer<'t>,
    /// Whether frames carry source lines.
    lines: bool,
}

impl Names<'_> {
    fn of(&self, pair: u32) -> Vec<Frame> {
        self.symbols.frames(pair)
    }
}

/// What the stacks say beyond the top stacks: of the methods without
/// probes (those `keep_method` keeps, over the threads `keep_thread`
/// keeps), of every method on them, of each thread's idle time and of
/// who woke the working blocks.
#[derive(Debug, Default)]
pub(crate) struct FromStacks {
    /// The selected methods left without probes: `stack_only_methods`.
    pub(crate) methods: Vec<StackMethodJson>,
    /// By demoted method: the off-CPU time of its calls after its demotion
    /// (not recorded), from the stacks that hold it.
    pub(crate) after_demotion: BTreeMap<MethodIdx, OffCpu>,
    /// Every Java method on the stacks: `stack_methods`.
    pub(crate) stack_methods: Vec<crate::report::stack_methods::StackMethodsJson>,
    /// Each thread's idle time, by tid.
    pub(crate) idle: BTreeMap<u32, crate::report::working::ThreadIdle>,
    /// Who woke the working blocks: `wakers`.
    pub(crate) wakers: Vec<crate::report::working::WakerJson>,
}

/// What [`stacks_json`] reports on: the threads and methods kept, and what
/// bounds each thread's idle time.
pub(crate) struct StackScope<'a> {
    /// The threads kept (`--thread`).
    pub(crate) keep: &'a dyn Fn(&ThreadInfo) -> bool,
    /// The methods kept (`--method`).
    pub(crate) keep_method: &'a dyn Fn(MethodIdx) -> bool,
    /// A method's demotion index, if demoted.
    pub(crate) demotion: &'a dyn Fn(MethodIdx) -> Option<u32>,
    /// A thread's off-CPU time by cause (its idle time is never more).
    pub(crate) thread_off: &'a dyn Fn(u32) -> OffCpu,
    /// A thread that is the tracer's own (left out of `stack_methods` and
    /// `wakers`).
    pub(crate) tracer: &'a dyn Fn(u32) -> bool,
}

/// The `stacks` object of the threads `scope` keeps (their off-CPU time
/// `off_cpu`, for the coverage), `None` if the trace recorded no stacks
/// (with `lines`, native frames with their source lines), and the rest
/// of what the stacks say ([`FromStacks`]).
pub(crate) fn stacks_json(
    trace: &Trace,
    time: &StackTime,
    scope: &StackScope,
    off_cpu: &OffCpu,
    lines: bool,
) -> (Option<StacksJson>, FromStacks) {
    if trace.stacks.is_empty() {
        return (None, FromStacks::default());
    }
    let symbols = Symbolizer::new(trace);
    let names = Names {
        symbols: if lines { symbols.with_lines() } else { symbols },
        lines,
    };
    let keep = scope.keep;
    let idleness = crate::report::working::Idleness::new(trace, &names.symbols);
    let kept = |tid: u32| trace.threads.get(&tid).is_some_and(keep);
    let app = |tid: u32| kept(tid) && !(scope.tracer)(tid);
    let from_stacks = FromStacks {
        methods: stack_only_methods(trace, time, &names.symbols, keep, scope.keep_method),
        after_demotion: after_demotion(trace, time, &names.symbols, keep, scope.keep_method, scope.demotion),
        stack_methods: crate::report::stack_methods::stack_methods(trace, time, &idleness, &app),
        idle: crate::report::working::thread_idle(time, &idleness, &kept, scope.thread_off),
        wakers: crate::report::working::wakers(trace, time, &idleness, &app),
    };
    let mut by_cause: HashMap<String, HashMap<u32, Under>> = HashMap::new();
    let mut by_thread: HashMap<String, HashMap<u32, Under>> = HashMap::new();
    let mut by_method: HashMap<String, HashMap<u32, Under>> = HashMap::new();
    let mut method_of: HashMap<u32, Option<String>> = HashMap::new();
    let (mut recorded, mut scaled) = (OffCpu::default(), OffCpu::default());
    let times = (time.by_thread.iter().map(|t| (t, false))).chain(time.scaled.iter().map(|t| (t, true)));
    for ((tid, pairs), is_scaled) in times {
        let Some(info) = trace.threads.get(tid).filter(|t| keep(t)) else {
            continue;
        };
        let thread = format!("{tid} {}", info.display_name());
        for (&pair, off) in pairs {
            add_off(if is_scaled { &mut scaled } else { &mut recorded }, off);
            let idle = idleness.idle_part(*tid, pair, off);
            let rule = idleness.rule(*tid, pair).map(|r| r.id);
            // The tracer's threads are in `by_thread` only.
            for (c, ns) in off.nonzero().filter(|_| !(scope.tracer)(*tid)) {
                let (mut one, mut one_idle) = (OffCpu::default(), OffCpu::default());
                one.add(c, ns);
                one_idle.add(c, idle.get(c));
                let group = by_cause.entry(c.name().to_string()).or_default();
                group.entry(pair).or_default().add(&one, &one_idle, rule, is_scaled);
            }
            let group = by_thread.entry(thread.clone()).or_default();
            group.entry(pair).or_default().add(off, &idle, rule, is_scaled);
            if (scope.tracer)(*tid) {
                continue;
            }
            let method =
                (method_of.entry(pair)).or_insert_with(|| blamed_frame(&idleness.frames(pair)).map(|f| f.name.clone()));
            if let Some(m) = method {
                let group = by_method.entry(m.clone()).or_default();
                group.entry(pair).or_default().add(off, &idle, rule, is_scaled);
            }
        }
    }
    let stacks = StacksJson {
        by_cause: ranked(by_cause, &names, TOP_STACKS),
        by_thread: ranked(by_thread, &names, TOP_STACKS),
        by_method: ranked(by_method, &names, TOP_STACKS),
        coverage: coverage(trace, off_cpu, &recorded, &scaled),
    };
    (Some(stacks), from_stacks)
}

/// The coverage of `off_cpu` (the kept threads' off-CPU time) by the
/// `recorded` and `scaled` time under stacks.
fn coverage(trace: &Trace, off_cpu: &OffCpu, recorded: &OffCpu, scaled: &OffCpu) -> CoverageJson {
    let of = |c: Cause| CoverageOfJson {
        off_cpu_ns: off_cpu.get(c),
        recorded_ns: recorded.get(c).min(off_cpu.get(c)),
        scaled_ns: scaled.get(c).min(off_cpu.get(c).saturating_sub(recorded.get(c))),
    };
    let mut by_cause: Vec<CauseCoverageJson> = (off_cpu.nonzero())
        .map(|(c, _)| CauseCoverageJson {
            cause: c.name().to_string(),
            of: of(c),
        })
        .collect();
    by_cause.sort_by_key(|c| std::cmp::Reverse(c.of.off_cpu_ns));
    let all = by_cause.iter().fold(CoverageOfJson::default(), |a, c| CoverageOfJson {
        off_cpu_ns: a.off_cpu_ns + c.of.off_cpu_ns,
        recorded_ns: a.recorded_ns + c.of.recorded_ns,
        scaled_ns: a.scaled_ns + c.of.scaled_ns,
    });
    CoverageJson {
        stack_min_block_ns: trace.meta.stack_min_block_ns,
        short_block_stacks_hz: trace.meta.short_block_stacks_hz,
        all,
        by_cause,
    }
}

fn add_off(to: &mut OffCpu, off: &OffCpu) {
    for (c, ns) in off.nonzero() {
        to.add(c, ns);
    }
}

/// Whether the name is one of a cause (for readers of [`StackGroupJson::key`]).
pub fn is_cause(key: &str) -> bool {
    Cause::from_name(key).is_some()
}

/// A selected method the agent left without probes (`trivial_skipped`:
/// a getter, or a forwarder), with the off-CPU time of every interval
/// whose stack holds it: what its probes would have measured, from the
/// stacks instead (each interval once, however often the stack holds the
/// method).
#[derive(Debug, Clone, Serialize)]
pub struct StackMethodJson {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// Off-CPU time of the intervals whose stack holds it, by cause.
    pub off_cpu_ns: OffCpu,
}

/// The methods that stack pairs hold (their Java frames' methods) and that
/// `wanted` keeps, each once per pair, named once per pair.
struct HeldMethods<'a> {
    symbols: &'a Symbolizer<'a>,
    wanted: &'a dyn Fn(MethodIdx) -> bool,
    by_pair: HashMap<u32, BTreeSet<MethodIdx>>,
}

impl<'a> HeldMethods<'a> {
    fn new(symbols: &'a Symbolizer<'a>, wanted: &'a dyn Fn(MethodIdx) -> bool) -> HeldMethods<'a> {
        HeldMethods {
            symbols,
            wanted,
            by_pair: HashMap::new(),
        }
    }

    fn of(&mut self, pair: u32) -> &BTreeSet<MethodIdx> {
        let (symbols, wanted) = (self.symbols, self.wanted);
        self.by_pair.entry(pair).or_insert_with(|| {
            (symbols.frames(pair).iter())
                .filter_map(|f| f.method)
                .filter(|&m| wanted(m))
                .collect()
        })
    }
}

/// The methods of `trace.trivial` that `keep_method` keeps, with the
/// off-CPU time under the stacks that hold them, over the threads
/// `keep_thread` keeps; most time first, none without time.
fn stack_only_methods(
    trace: &Trace,
    time: &StackTime,
    symbols: &Symbolizer,
    keep_thread: &dyn Fn(&ThreadInfo) -> bool,
    keep_method: &dyn Fn(MethodIdx) -> bool,
) -> Vec<StackMethodJson> {
    if trace.trivial.is_empty() {
        return Vec::new();
    }
    let wanted = |m| trace.trivial.contains(&m) && keep_method(m);
    let mut held = HeldMethods::new(symbols, &wanted);
    let mut off: BTreeMap<MethodIdx, OffCpu> = BTreeMap::new();
    // Short blocks' time scaled up from sampled stacks counts too.
    for (tid, pairs) in time.by_thread.iter().chain(&time.scaled) {
        if !trace.threads.get(tid).is_some_and(keep_thread) {
            continue;
        }
        for (&pair, o) in pairs {
            for &m in held.of(pair) {
                add_off(off.entry(m).or_default(), o);
            }
        }
    }
    let mut v: Vec<StackMethodJson> = (off.into_iter())
        .filter(|(_, o)| o.total() > 0)
        .map(|(m, off_cpu_ns)| {
            let info = &trace.methods[m as usize];
            StackMethodJson {
                class: info.class.clone(),
                name: info.name.clone(),
                signature: info.signature.clone(),
                off_cpu_ns,
            }
        })
        .collect();
    v.sort_by_key(|m| std::cmp::Reverse(m.off_cpu_ns.total()));
    v
}

/// By demoted method that `keep_method` keeps: the off-CPU time, over the
/// threads `keep_thread` keeps, of the intervals that began after its
/// demotion with it on the stack, less those in a recorded call of it
/// (one begun before the demotion, still open): the time of the calls its
/// probes no longer record.
fn after_demotion(
    trace: &Trace,
    time: &StackTime,
    symbols: &Symbolizer,
    keep_thread: &dyn Fn(&ThreadInfo) -> bool,
    keep_method: &dyn Fn(MethodIdx) -> bool,
    demotion: &dyn Fn(MethodIdx) -> Option<u32>,
) -> BTreeMap<MethodIdx, OffCpu> {
    let wanted = |m| demotion(m).is_some() && keep_method(m);
    let mut held = HeldMethods::new(symbols, &wanted);
    let kept = |tid: &u32| trace.threads.get(tid).is_some_and(keep_thread);
    let after = |m: MethodIdx, epoch: u32| demotion(m).is_some_and(|d| epoch > d);
    let mut added: BTreeMap<MethodIdx, OffCpu> = BTreeMap::new();
    for (&(_, pair, epoch), off) in time.by_epoch.iter().filter(|((tid, ..), _)| kept(tid)) {
        for &m in held.of(pair).iter().filter(|&&m| after(m, epoch)) {
            add_off(added.entry(m).or_default(), off);
        }
    }
    let mut recorded: BTreeMap<MethodIdx, OffCpu> = BTreeMap::new();
    for (&(tid, pair, epoch, m), off) in &time.in_recorded {
        if kept(&tid) && after(m, epoch) && held.of(pair).contains(&m) {
            add_off(recorded.entry(m).or_default(), off);
        }
    }
    (added.into_iter())
        .map(|(m, off)| {
            let mut left = OffCpu::default();
            let minus = recorded.get(&m).copied().unwrap_or_default();
            for (c, ns) in off.nonzero() {
                left.add(c, ns.saturating_sub(minus.get(c)));
            }
            (m, left)
        })
        .filter(|(_, off)| off.total() > 0)
        .collect()
}

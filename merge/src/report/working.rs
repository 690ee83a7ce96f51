//! Working and idle time in the report: each thread's blocked time under a
//! stack that [`crate::idle`]'s rules call waiting for work is idle, the
//! rest is working; and who woke the working threads' blocks.

use crate::cause::OffCpu;
use crate::idle::{blocked_part, idle_rule, IdleRule};
use crate::model::trace::Trace;
use crate::report::stack_time::StackTime;
use crate::stacks::symbolize::{Frame, Symbolizer};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// A thread counts as waiting for work (folded into one line per group in
/// the text report) when idle time is at least this share of its wall.
pub const IDLE_THREAD_SHARE: f64 = 0.9;

/// Which stacks are idle for which thread, decided once per (tid, pair).
pub(crate) struct Idleness<'a> {
    trace: &'a Trace,
    symbols: &'a Symbolizer<'a>,
    rules: RefCell<HashMap<(u32, u32), Option<&'static IdleRule>>>,
    /// Each pair's frames, named once for the rules and the methods.
    frames: RefCell<HashMap<u32, Rc<[Frame]>>>,
}

impl<'a> Idleness<'a> {
    pub(crate) fn new(trace: &'a Trace, symbols: &'a Symbolizer<'a>) -> Idleness<'a> {
        Idleness {
            trace,
            symbols,
            rules: RefCell::new(HashMap::new()),
            frames: RefCell::new(HashMap::new()),
        }
    }

    /// The frames of stack pair `pair`, innermost first.
    pub(crate) fn frames(&self, pair: u32) -> Rc<[Frame]> {
        let mut frames = self.frames.borrow_mut();
        frames
            .entry(pair)
            .or_insert_with(|| self.symbols.frames(pair).into())
            .clone()
    }

    /// The rule that makes thread `tid`'s blocked time under `pair` idle.
    pub(crate) fn rule(&self, tid: u32, pair: u32) -> Option<&'static IdleRule> {
        if let Some(r) = self.rules.borrow().get(&(tid, pair)) {
            return *r;
        }
        let r = (self.trace.threads.get(&tid)).and_then(|t| idle_rule(t, &self.frames(pair)));
        self.rules.borrow_mut().insert((tid, pair), r);
        r
    }

    /// The idle part of `off`, thread `tid`'s time under `pair`.
    pub(crate) fn idle_part(&self, tid: u32, pair: u32, off: &OffCpu) -> OffCpu {
        match self.rule(tid, pair) {
            Some(_) => blocked_part(off),
            None => OffCpu::default(),
        }
    }
}

/// A thread's idle time and the rule that holds most of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadIdle {
    pub(crate) off: OffCpu,
    pub(crate) rule: Option<&'static str>,
}

/// Each thread's idle time (recorded and scaled-up stacks), by tid, over
/// the threads `keep` keeps; none for threads without idle time. Never
/// more than the thread's off-CPU time per cause (`limit`).
pub(crate) fn thread_idle(
    time: &StackTime,
    idleness: &Idleness,
    keep: &dyn Fn(u32) -> bool,
    limit: &dyn Fn(u32) -> OffCpu,
) -> BTreeMap<u32, ThreadIdle> {
    let mut out: BTreeMap<u32, ThreadIdle> = BTreeMap::new();
    // By tid, the idle time of each rule.
    let mut by_rule: BTreeMap<u32, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for (&tid, pairs) in time.all_threads().filter(|(tid, _)| keep(**tid)) {
        for (&pair, off) in pairs {
            let idle = idleness.idle_part(tid, pair, off);
            if let Some(rule) = idleness.rule(tid, pair).filter(|_| idle.total() > 0) {
                out.entry(tid).or_default().off += idle;
                *by_rule.entry(tid).or_default().entry(rule.id).or_default() += idle.total();
            }
        }
    }
    for (tid, e) in out.iter_mut() {
        e.rule = (by_rule.remove(tid).into_iter().flatten())
            .max_by_key(|&(id, ns)| (ns, std::cmp::Reverse(id)))
            .map(|(id, _)| id);
        let most = limit(*tid);
        let mut capped = OffCpu::default();
        for (c, ns) in e.off.nonzero() {
            capped.add(c, ns.min(most.get(c)));
        }
        e.off = capped;
    }
    out
}

/// A thread that woke the working threads' blocks.
#[derive(Debug, Clone, Serialize)]
pub struct WakerJson {
    /// Its tid; 0: the kernel (an interrupt or a timer).
    pub tid: u32,
    /// Its process (0 for the kernel).
    pub pid: u32,
    /// Its name, as the threads table gives it ("" if unknown).
    pub name: String,
    /// Blocked time of the working blocks it ended (runqueue after the
    /// wakeup left out: that is the CPU's, not the waker's), ns.
    pub blocked_ns: u64,
    /// That time by cause.
    pub off_cpu_ns: OffCpu,
    /// The blocks it ended.
    pub wakes: u64,
}

/// The wakers of the working blocks of the threads `keep` keeps, most
/// blocked time first.
pub(crate) fn wakers(
    trace: &Trace,
    time: &StackTime,
    idleness: &Idleness,
    keep: &dyn Fn(u32) -> bool,
) -> Vec<WakerJson> {
    let mut by_waker: BTreeMap<u32, WakerJson> = BTreeMap::new();
    for (&(tid, pair, waker), w) in time.wakes() {
        if !keep(tid) || pair.is_some_and(|p| idleness.rule(tid, p).is_some()) {
            continue;
        }
        let e = by_waker.entry(waker).or_insert_with(|| WakerJson {
            tid: waker,
            pid: w.waker_tgid,
            name: match waker {
                0 => "the kernel: an interrupt or timer".into(),
                _ => trace
                    .threads
                    .get(&waker)
                    .map_or(String::new(), |t| t.display_name().to_string()),
            },
            blocked_ns: 0,
            off_cpu_ns: OffCpu::default(),
            wakes: 0,
        });
        e.off_cpu_ns += w.blocked;
        e.blocked_ns += w.blocked.total();
        e.wakes += w.count;
    }
    let mut v: Vec<WakerJson> = by_waker.into_values().filter(|w| w.blocked_ns > 0).collect();
    v.sort_by(|a, b| b.blocked_ns.cmp(&a.blocked_ns).then(a.tid.cmp(&b.tid)));
    v
}

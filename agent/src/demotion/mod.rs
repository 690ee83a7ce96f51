//! Adaptive demotion's shared state and decisions: every traced method's
//! calls as the threads' watches ([`watch`]) report them, which
//! methods to demote when a thread's probes cost more than the overhead
//! budget, the methods demoted (the rewriter leaves them alone), and their
//! METHOD_DEMOTED and METHOD_SHORT_DROPPED records. Turning their probes
//! off is [`demoter`]'s.
//!
//! The cost model: each probe event costs [`EVENT_COST_NS`] of the thread's
//! CPU time (two clock reads and a store per call, measured at 60 ns a call
//! in BENCHMARKS.md, plus draining and writing). When the events a thread
//! recorded since its last decision cost more than the budget's share of
//! its CPU time meanwhile (`--overhead-budget`, default 2 %; the wall time
//! they span before its first decision, and it is never more), the methods it
//! called most that are *hot* (at least [`MIN_CALLS`] calls seen),
//! *short* (at least 90 % of its calls shorter than [`watch::SHORT_NS`]: a mean
//! would count the preemptions of a loaded machine) and *not blocking* (no JVM-level
//! block inside any call, and voluntary switches guessed inside fewer than
//! one call in [`GUESSES_PER_BLOCKING`]: see [`watch`]) are demoted, most calls first, until its events
//! would cost half the budget.

pub(crate) mod demoter;
pub(crate) mod watch;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

use jtrace_format::{kind, MethodTally, Payload, Record};

use crate::demotion::watch::{Tally, ThreadWatch};
use crate::mutex::lock;
use crate::recorder::Recorder;

/// Estimated cost of one probe event on the calling thread, ns.
pub(crate) const EVENT_COST_NS: u64 = 35;
/// A thread decides once it watched this many events since its last decision.
const DECIDE_EVERY: u64 = 4096;
/// Calls a method must have made (as far as reported) before it is
/// demoted: the fewest for which [`GUESSES_PER_BLOCKING`] can tell a
/// blocking method. 20 000 (an earlier default) had H2's methods that are
/// called a few times per statement recorded whole through the warm-up.
pub(crate) const MIN_CALLS: u64 = 1_000;
/// A method with guessed voluntary switches inside one call in this many
/// (or more often) counts as blocking.
pub(crate) const GUESSES_PER_BLOCKING: u64 = 1000;

/// What the agent knows of one traced method.
#[derive(Debug, Default, Clone, Copy)]
struct Watched {
    calls: u64,
    ns: u64,
    /// Calls shorter than [`watch::SHORT_NS`].
    short: u64,
    /// Time its first reported calls began counting.
    first_ts: u64,
    dropped: u64,
    dropped_ns: u64,
    jvm_block: bool,
    switched: u64,
    demoted: bool,
}

/// Every traced method by id.
static TABLE: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
/// Ids chosen for demotion, not yet marked in the probe class; the condition wakes the demoter.
pub(crate) static PENDING: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Signalled when [`PENDING`] gets ids.
pub(crate) static PENDING_SIGNAL: Condvar = Condvar::new();
/// Demoted methods by (internal class name, name, descriptor): the
/// rewriter leaves them out.
static DEMOTED: Mutex<Option<HashSet<(String, String, String)>>> = Mutex::new(None);
/// Some method is demoted (saves a lock per method rewritten otherwise).
static ANY_DEMOTED: AtomicBool = AtomicBool::new(false);

/// Starts the thread that applies demotions ([`demoter`], set by
/// the session: it sits above this module), at the first demotion.
static STARTER: Mutex<Option<fn()>> = Mutex::new(None);
/// The starter ran in this session.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Forgets everything (a new recording session); `starter` starts the
/// demoter when the session first demotes.
pub(crate) fn reset(starter: fn()) {
    *lock(&STARTER) = Some(starter);
    STARTED.store(false, Ordering::SeqCst);
    lock(&TABLE).clear();
    lock(&PENDING).clear();
    *lock(&DEMOTED) = None;
    ANY_DEMOTED.store(false, Ordering::SeqCst);
}

/// Takes back the marks of methods the demoter could not demote: they
/// keep their probes, and a later rewrite of their class must keep them too.
pub(crate) fn unmark_demoted(keys: &[(String, String, String)]) {
    if let Some(set) = lock(&DEMOTED).as_mut() {
        for k in keys {
            set.remove(k);
        }
    }
}

/// Whether the method is demoted: the rewriter must not instrument it.
pub(crate) fn is_demoted(class: &str, name: &str, desc: &str) -> bool {
    if !ANY_DEMOTED.load(Ordering::Acquire) {
        return false;
    }
    let key = (class.to_string(), name.to_string(), desc.to_string());
    lock(&DEMOTED).as_ref().is_some_and(|s| s.contains(&key))
}

/// Marks methods demoted (by class, name, descriptor): a later rewrite of
/// their class (a retransformation) leaves them out.
pub(crate) fn mark_demoted(keys: impl IntoIterator<Item = (String, String, String)>) {
    lock(&DEMOTED).get_or_insert_with(HashSet::new).extend(keys);
    ANY_DEMOTED.store(true, Ordering::Release);
}

/// After a drain of the calling thread's own buffer: reports its watch's
/// tallies to the shared table when a decision is due or something must
/// not wait (calls dropped, calls blocked), and with a budget (in
/// hundredths of a percent; 0: none) decides what to demote.
pub(crate) fn after_drain(watch: &mut ThreadWatch, budget: u32) {
    let (events, wall) = watch.window();
    if events < DECIDE_EVERY && !watch.has_news() {
        return;
    }
    // The thread's own CPU time: waiting for a CPU on a loaded machine, or
    // blocked, it spends none, and its probes' share of what it spends is
    // what the budget bounds.
    let span = watch.cpu_since_take().map_or(wall, |cpu| cpu.min(wall));
    let since = watch.since();
    let tallies = watch.take();
    let mut table = lock(&TABLE);
    for &(id, t) in &tallies {
        merge(&mut table, id, t, since);
    }
    if budget == 0 || events < DECIDE_EVERY || events * EVENT_COST_NS * 10_000 <= budget as u64 * span {
        return;
    }
    let chosen = choose(&table, &tallies, events, span, budget);
    if chosen.is_empty() {
        return;
    }
    for &id in &chosen {
        let w = &mut table[id as usize];
        w.demoted = true;
        crate::state::debug(&format!(
            "demotion: method {id}: {} calls, mean {} ns, {} switch guesses",
            w.calls,
            w.ns.checked_div(w.calls).unwrap_or(0),
            w.switched
        ));
    }
    drop(table);
    lock(&PENDING).extend(chosen);
    if !STARTED.swap(true, Ordering::SeqCst) {
        if let Some(start) = *lock(&STARTER) {
            start();
        }
    }
    PENDING_SIGNAL.notify_one();
}

fn merge(table: &mut Vec<Watched>, id: u32, t: Tally, since: u64) {
    let i = id as usize;
    if i >= table.len() {
        table.resize(i + 1, Watched::default());
    }
    let w = &mut table[i];
    if w.first_ts == 0 {
        w.first_ts = since;
    }
    w.calls += t.calls;
    w.ns += t.ns;
    w.short += t.short;
    w.dropped += t.dropped;
    w.dropped_ns += t.dropped_ns;
    w.jvm_block |= t.jvm_block;
    w.switched += t.switched;
}

/// Whether a method counts as blocking: a JVM-level block inside any of
/// its calls, or voluntary switches guessed inside at least one call in
/// [`GUESSES_PER_BLOCKING`] (a guess may be a preemption).
fn blocks(w: &Watched) -> bool {
    w.jvm_block || w.switched * GUESSES_PER_BLOCKING >= w.calls.max(1)
}

/// The methods to demote so that a thread's `events` over `span` ns would
/// cost half the budget: hot, short, never blocked, most calls first.
fn choose(table: &[Watched], window: &[(u32, Tally)], events: u64, span: u64, budget: u32) -> Vec<u32> {
    let mut candidates: Vec<(u64, u32)> = window
        .iter()
        .filter(|(id, t)| {
            let w = &table[*id as usize];
            t.calls > 0 && !blocks(w) && !w.demoted && w.calls >= MIN_CALLS && w.short * 10 >= w.calls * 9
        })
        .map(|(id, t)| (t.calls, *id))
        .collect();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    let target = (budget as u64 * span / 10_000 / EVENT_COST_NS) / 2;
    let mut left = events;
    let mut chosen = Vec::new();
    for (calls, id) in candidates {
        if left <= target {
            break;
        }
        left = left.saturating_sub(2 * calls);
        chosen.push(id);
    }
    chosen
}

/// Writes a METHOD_DEMOTED record per method (probes turned off at `ts`).
pub(crate) fn record_demoted(rec: &Recorder, tid: u32, ts: u64, ids: &[u32]) {
    let table = lock(&TABLE);
    for &id in ids {
        let w = table.get(id as usize).copied().unwrap_or_default();
        let secs = ts.saturating_sub(w.first_ts).max(1);
        let tally = MethodTally {
            method: id as u64,
            calls: w.calls,
            rate_per_s: (w.calls as u128 * 1_000_000_000 / secs as u128) as u64,
            mean_ns: w.ns.checked_div(w.calls).unwrap_or(0),
        };
        rec.write_direct(&Record {
            tid,
            ts,
            payload: Payload::MethodTally(kind::METHOD_DEMOTED, tally),
        });
    }
}

/// At the end of a session: a METHOD_SHORT_DROPPED record per method that
/// had calls left out by `--min-duration`.
pub(crate) fn record_short_dropped(rec: &Recorder, tid: u32, ts: u64) {
    let table = lock(&TABLE);
    if std::env::var_os("JTRACE_AGENT_DEBUG").is_some() {
        // The most called methods and what the agent knew of them.
        let mut hot: Vec<(usize, &Watched)> = table.iter().enumerate().collect();
        hot.sort_by_key(|(_, w)| std::cmp::Reverse(w.calls));
        for (id, w) in hot.iter().take(15) {
            crate::state::debug(&format!("demotion: method {id}: {w:?}"));
        }
    }
    for (id, w) in table.iter().enumerate().filter(|(_, w)| w.dropped > 0) {
        let tally = MethodTally {
            method: id as u64,
            calls: w.dropped,
            rate_per_s: 0,
            mean_ns: w.dropped_ns / w.dropped,
        };
        rec.write_direct(&Record {
            tid,
            ts,
            payload: Payload::MethodTally(kind::METHOD_SHORT_DROPPED, tally),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demotion::watch::SHORT_NS;

    fn tally(calls: u64, ns: u64) -> Tally {
        Tally {
            calls,
            ns,
            short: if ns / calls < SHORT_NS { calls } else { 0 },
            ..Tally::default()
        }
    }

    #[test]
    fn the_hot_short_unblocked_methods_go_first_until_half_the_budget() {
        let mut table = Vec::new();
        let window = vec![
            (1, tally(30_000, 30_000 * 50)),  // hot and tiny
            (2, tally(25_000, 25_000 * 100)), // hot and tiny
            (3, tally(100, 100 * 1_000_000)), // slow
            (4, tally(50_000, 50_000 * 30)),  // hot, tiny, but blocked once
        ];
        for &(id, t) in &window {
            merge(&mut table, id, t, 1);
        }
        table[4].jvm_block = true;
        // 210200 events in 100 ms: 7.4 ms of probes, 7.4 % > 2 %; half the
        // budget is 1 ms = 28571 events: both tiny ones must go.
        let chosen = choose(&table, &window, 210_200, 100_000_000, 200);
        assert_eq!(chosen, vec![1, 2]);
        // A generous budget takes only the first.
        let chosen = choose(&table, &window, 210_200, 100_000_000, 1200);
        assert_eq!(chosen, vec![1]);
        // Too few calls seen yet: nothing.
        let mut young = Vec::new();
        merge(&mut young, 1, tally(500, 500), 1);
        assert!(choose(&young, &[(1, tally(500, 500))], 21_200, 10_000_000, 200).is_empty());
        // Voluntary switches guessed in one call of GUESSES_PER_BLOCKING or more: blocking.
        table[1].switched = table[1].calls / GUESSES_PER_BLOCKING + 1;
        let chosen = choose(&table, &window, 210_200, 100_000_000, 200);
        assert_eq!(chosen, vec![2]);
    }
}

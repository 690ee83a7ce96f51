//! `jtrace why` as text: each explained invocation's critical path as an
//! indented chain (a blocked stretch, then "→ held by B in GtX.b" and what
//! B did meanwhile, one level deeper), its root cause, then the critical
//! path time of all of them by thread, method and state, and with
//! `--compare` slow against median.

use jtrace_merge::why::json::{HopJson, InvocationJson, SegmentJson, WhyJson};
use std::fmt::Write as _;

/// Options of the text.
#[derive(Debug, Clone)]
pub struct WhyTextOptions {
    /// Chains printed (the slowest invocations first); the summary covers all.
    pub chains: usize,
    /// Rows of the summary tables.
    pub top: usize,
    /// Items of a chain shorter than this fraction of the wall are folded
    /// into one "… N more" line.
    pub fold_below: f64,
}

impl Default for WhyTextOptions {
    fn default() -> Self {
        WhyTextOptions {
            chains: 5,
            top: 15,
            fold_below: 0.005,
        }
    }
}

/// `12.345 ms`, `1.204 s`, `850 ns`: a duration at a readable scale.
pub fn dur(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.3} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.3} ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.3} µs", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

fn edge_words(via: &str) -> &str {
    match via {
        "held_by" => "held by",
        "notified_by" => "notified by",
        "unparked_by" => "unparked by",
        "answered_by" => "answered by",
        "written_by" => "written by",
        _ => "woken by",
    }
}

fn in_method(m: &Option<String>) -> String {
    match m {
        Some(m) => format!(" in {m}"),
        None => String::new(),
    }
}

/// One line of a chain before folding.
enum Item<'a> {
    /// Consecutive segments of one (thread, method, state), merged.
    Leaf {
        seg: &'a SegmentJson,
        ns: u64,
        count: usize,
    },
    /// A hop and what is under it.
    Hop { hop: &'a HopJson, index: u32 },
}

impl Item<'_> {
    fn ns(&self) -> u64 {
        match self {
            Item::Leaf { ns, .. } => *ns,
            Item::Hop { hop, .. } => hop.ns,
        }
    }
}

/// The items directly under `parent` (None: the invocation itself), in time order.
fn children(inv: &InvocationJson, parent: Option<u32>) -> Vec<Item<'_>> {
    let mut timed: Vec<(u64, u8, Item)> = Vec::new();
    for (i, h) in inv.hops.iter().enumerate() {
        if h.parent == parent {
            timed.push((
                h.start_ns,
                0,
                Item::Hop {
                    hop: h,
                    index: i as u32,
                },
            ));
        }
    }
    for s in inv.path.iter().filter(|s| s.hop == parent) {
        timed.push((
            s.start_ns,
            1,
            Item::Leaf {
                seg: s,
                ns: s.ns,
                count: 1,
            },
        ));
    }
    timed.sort_by_key(|t| (t.0, t.1));
    let mut out: Vec<Item> = Vec::new();
    for (_, _, it) in timed {
        if let (Some(Item::Leaf { seg, ns, count }), Item::Leaf { seg: s, ns: n, .. }) = (out.last_mut(), &it) {
            if seg.tid == s.tid && seg.method == s.method && seg.state == s.state {
                *ns += n;
                *count += 1;
                continue;
            }
        }
        out.push(it);
    }
    out
}

fn leaf_line(seg: &SegmentJson, ns: u64, count: usize) -> String {
    let mut s = format!("{}{}: {} {}", seg.thread, in_method(&seg.method), seg.state, dur(ns));
    if count > 1 {
        let _ = write!(s, " ({count} segments)");
    }
    // What a virtual thread waits for is a carrier; anything else, a CPU.
    let what = if seg.state == "carrier" { "carrier" } else { "CPU" };
    match &seg.cpu_holder {
        Some(h) if h.tid == 0 => {
            let _ = write!(s, ", the {what} was idle");
        }
        Some(h) => {
            let _ = write!(s, ", {what} held by {} [{}]", h.thread, h.tid);
        }
        None => {}
    }
    if let Some(e) = &seg.evidence {
        let _ = write!(s, ", {e}");
    }
    s
}

/// Writes the items under `parent` at `indent`.
fn chain(out: &mut String, inv: &InvocationJson, parent: Option<u32>, indent: usize, opts: &WhyTextOptions) {
    let pad = " ".repeat(indent);
    let small = (inv.wall_ns as f64 * opts.fold_below) as u64;
    let mut folded = (0usize, 0u64);
    let flush = |out: &mut String, folded: &mut (usize, u64)| {
        if folded.0 > 0 {
            let _ = writeln!(out, "{pad}… {} more, {} together", folded.0, dur(folded.1));
            *folded = (0, 0);
        }
    };
    for it in children(inv, parent) {
        if it.ns() < small {
            folded.0 += 1;
            folded.1 += it.ns();
            continue;
        }
        flush(out, &mut folded);
        match it {
            Item::Leaf { seg, ns, count } => {
                let _ = writeln!(out, "{pad}{}", leaf_line(seg, ns, count));
            }
            Item::Hop { hop, index } => {
                let mut l = format!(
                    "{pad}{}{}: {} {}",
                    hop.waiter.thread,
                    in_method(&hop.waiter_method),
                    hop.cause,
                    dur(hop.ns)
                );
                if let Some(e) = &hop.evidence {
                    let _ = write!(l, ", {e}");
                }
                let _ = writeln!(out, "{l}");
                let pid = if hop.blocker.pid != hop.waiter.pid {
                    format!(" (pid {})", hop.blocker.pid)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "{pad}→ {} {} [{}]{pid}{}",
                    edge_words(hop.via),
                    hop.blocker.thread,
                    hop.blocker.tid,
                    in_method(&hop.blocker_method)
                );
                chain(out, inv, Some(index), indent + 4, opts);
            }
        }
    }
    flush(out, &mut folded);
}

fn pct(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        "-".into()
    } else {
        format!("{:.1} %", part * 100.0 / whole)
    }
}

/// The text of a `jtrace why` answer.
pub fn render_why(w: &WhyJson, opts: &WhyTextOptions) -> String {
    let mut s = String::new();
    let sel = &w.selection;
    let what = match (sel.mode, sel.value) {
        ("slowest", Some(n)) => format!("the {} slowest", n as u64),
        ("percentile", Some(p)) => format!("those at or above p{p} ({})", sel.threshold_ns.map_or("-".into(), dur)),
        _ => "all".to_string(),
    };
    let _ = writeln!(
        s,
        "{} invocation(s) of {}{} matched (median {}); explaining {}: {} invocation(s){}",
        sel.matched,
        sel.method,
        sel.thread
            .as_ref()
            .map_or(String::new(), |t| format!(" on threads {t}")),
        dur(sel.median_wall_ns),
        what,
        sel.explained,
        if (sel.explained as u64) < sel.eligible {
            format!(" of {} (--max-invocations)", sel.eligible)
        } else {
            String::new()
        }
    );
    for inv in w.invocations.iter().take(opts.chains) {
        let _ = writeln!(
            s,
            "\n{} on {} [tid {}, pid {}]: wall {}, from +{}{}",
            inv.method.as_deref().unwrap_or("?"),
            inv.thread,
            inv.tid,
            inv.pid,
            dur(inv.wall_ns),
            dur(inv.start_ns),
            if inv.truncated {
                " (path truncated by a walk limit: part of it summed per state)"
            } else {
                ""
            }
        );
        chain(&mut s, inv, None, 2, opts);
        if let Some(r) = &inv.root_cause {
            let _ = writeln!(
                s,
                "  root cause: {}{}: {} {} ({} of the wall)",
                r.thread,
                in_method(&r.method),
                r.state,
                dur(r.ns),
                pct(r.ns as f64, inv.wall_ns as f64)
            );
        }
    }
    if w.invocations.len() > opts.chains {
        let _ = writeln!(
            s,
            "\n… {} more invocation(s) explained (--json has every path); the summary covers all",
            w.invocations.len() - opts.chains
        );
    }
    if !w.summary.is_empty() {
        let total: u64 = w.invocations.iter().map(|i| i.wall_ns).sum();
        let _ = writeln!(
            s,
            "\n== critical path time by thread, method and state ({} invocation(s), {} wall)",
            w.invocations.len(),
            dur(total)
        );
        let _ = writeln!(
            s,
            "{:>12} {:>7}  {:<14} {:<28} method",
            "time", "share", "state", "thread"
        );
        for r in w.summary.iter().take(opts.top) {
            let _ = writeln!(
                s,
                "{:>12} {:>7}  {:<14} {:<28} {}",
                dur(r.ns),
                pct(r.ns as f64, total as f64),
                r.state,
                format!("{} [{}]", r.thread, r.tid),
                r.method.as_deref().unwrap_or("-")
            );
        }
    }
    if let Some(c) = &w.compare {
        let _ = writeln!(
            s,
            "\n== slow against median: {} slow invocation(s) (mean {}) vs {} near the median (mean {})",
            c.slow_count,
            dur(c.slow_wall_mean_ns as u64),
            c.median_count,
            dur(c.median_wall_mean_ns as u64)
        );
        let _ = writeln!(
            s,
            "{:>12} {:>12} {:>12}  {:<14} {:<24} method",
            "difference", "slow", "median", "state", "thread"
        );
        for r in c.rows.iter().take(opts.top) {
            let signed = |v: f64| {
                if v < 0.0 {
                    format!("-{}", dur((-v) as u64))
                } else {
                    format!("+{}", dur(v as u64))
                }
            };
            let _ = writeln!(
                s,
                "{:>12} {:>12} {:>12}  {:<14} {:<24} {}",
                signed(r.difference_ns),
                dur(r.slow_ns as u64),
                dur(r.median_ns as u64),
                r.state,
                r.thread,
                r.method.as_deref().unwrap_or("-")
            );
        }
    }
    s
}

//! Where in time an off-CPU interval's causes lie: the one layout rule the
//! views share. The Chrome export writes these segments as slices of the
//! state track; the HTML page carries them and its viewer only draws them.

use crate::model::OffSpan;
use crate::windows::JvmWindow;
use jtrace_merge::{Cause, OffCpu};

/// The causes of an off-CPU split in the order [`cause_segments`] lays
/// them out in time: the blocked causes in column order, then `runqueue`.
pub(crate) fn layout_order(off: &OffCpu) -> impl Iterator<Item = (Cause, u64)> + '_ {
    let rq = off.get(Cause::Runqueue);
    off.nonzero()
        .filter(|(c, _)| *c != Cause::Runqueue)
        .chain((rq > 0).then_some((Cause::Runqueue, rq)))
}

/// The causes of an interval laid out in time, as `(start, end, cause)`.
///
/// The merge gives only the per-cause split of an interval. Its rule
/// (`merge/src/analyze.rs`: time after the wakeup is `runqueue`) puts the
/// blocked part first and the `runqueue` part (wakeup to switch-in) last,
/// so the non-runqueue causes are laid out from the start in column order,
/// and `runqueue` at the end.
/// Durations are exact; the segments tile the interval from its start.
/// See [`cause_segments_in`] to place GC/safepoint parts at their windows.
pub fn cause_segments(o: &OffSpan) -> Vec<(u64, u64, Cause)> {
    let mut t = o.start;
    layout_order(&o.split.off)
        .map(|(c, ns)| {
            t += ns;
            (t - ns, t, c)
        })
        .collect()
}

/// [`cause_segments`], with the parts of window causes (GC, safepoint) put
/// where the windows of the thread's JVM (`pid`) overlap the blocked part:
/// the merge counts exactly those overlaps as the window's cause (the first
/// cause in column order wins where windows nest, as gc inside a
/// safepoint), so the slices line up with the windows. The other blocked
/// causes fill the rest of the blocked part around them in column order
/// (cut where a window interrupts them); `runqueue` stays last. Durations
/// are exact; segments are in time order and tile the interval from its
/// start with no gap (the placed parts lie inside the blocked part, and the
/// other causes add up to what they leave free). A cause whose windows
/// cannot hold its part is laid out like the others.
///
/// `windows` is sorted by start, as [`crate::jvm_windows`] returns them.
pub fn cause_segments_in(o: &OffSpan, windows: &[JvmWindow], pid: u32) -> Vec<(u64, u64, Cause)> {
    window_segments(o, windows, pid).unwrap_or_else(|| cause_segments(o))
}

/// [`cause_segments_in`] where a window holds a part of the interval, or
/// `None` where the layout is [`cause_segments`]' (most intervals: this
/// case costs no allocation).
pub(crate) fn window_segments(o: &OffSpan, windows: &[JvmWindow], pid: u32) -> Option<Vec<(u64, u64, Cause)>> {
    let off = &o.split.off;
    let b_end = o.start + off.total() - off.get(Cause::Runqueue);
    let holds_part =
        |w: &JvmWindow| w.pid == pid && w.end > o.start && w.cause != Cause::Runqueue && off.get(w.cause) > 0;
    if !windows.iter().take_while(|w| w.start < b_end).any(holds_part) {
        return None;
    }
    let blocked: Vec<(Cause, u64)> = off.nonzero().filter(|(c, _)| *c != Cause::Runqueue).collect();
    // Disjoint, sorted by start.
    let mut reserved: Vec<(u64, u64, Cause)> = Vec::new();
    for &(wc, v) in &blocked {
        let mut slots = Vec::new();
        let mut left = v;
        for w in windows
            .iter()
            .take_while(|w| w.start < b_end)
            .filter(|w| w.cause == wc && w.pid == pid && w.end > o.start)
        {
            // Past this cause's earlier slots too, should its windows overlap
            // (jvm_windows never returns such, but nothing else forbids it).
            let from = w
                .start
                .max(o.start)
                .max(slots.last().map_or(0, |s: &(u64, u64, Cause)| s.1));
            for (a, b) in free_parts(from, w.end.min(b_end), &reserved) {
                if left == 0 {
                    break;
                }
                let n = (b - a).min(left);
                slots.push((a, a + n, wc));
                left -= n;
            }
        }
        if !slots.is_empty() && left == 0 {
            reserved.extend(slots);
            reserved.sort_by_key(|r| r.0);
        }
    }
    if reserved.is_empty() {
        return None;
    }
    let mut out = reserved.clone();
    let (mut t, mut si) = (o.start, 0);
    for &(c, ns) in blocked.iter().filter(|(c, _)| !reserved.iter().any(|r| r.2 == *c)) {
        let mut n = ns;
        while n > 0 {
            while si < reserved.len() && t >= reserved[si].0 {
                t = t.max(reserved[si].1);
                si += 1;
            }
            let lim = reserved.get(si).map_or(b_end, |r| r.0);
            let p = n.min(lim.saturating_sub(t));
            if p == 0 {
                break;
            }
            out.push((t, t + p, c));
            t += p;
            n -= p;
        }
    }
    let rq = o.split.off.get(Cause::Runqueue);
    if rq > 0 {
        out.push((b_end, b_end + rq, Cause::Runqueue));
    }
    out.sort_by_key(|s| s.0);
    Some(out)
}

/// The parts of `[a, b)` not covered by `reserved` (disjoint, sorted).
fn free_parts(a: u64, b: u64, reserved: &[(u64, u64, Cause)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = a;
    for &(ra, rb, _) in reserved {
        if rb <= t {
            continue;
        }
        if ra >= b {
            break;
        }
        if ra > t {
            out.push((t, ra));
        }
        t = t.max(rb);
    }
    if t < b {
        out.push((t, b));
    }
    out
}

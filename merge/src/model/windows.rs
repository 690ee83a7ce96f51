//! JVM-wide stop windows (GC, safepoint): which are GC stops, and the part
//! of a JVM's windows a thread's life sees. Both ways of opening a trace
//! spread them into the Java threads with these rules.

use crate::cause::Cause;

/// Sorts a JVM's stop windows by time and turns every safepoint that
/// contains a GC into a GC stop: [`Cause::Safepoint`] is a non-GC stop,
/// and JVMTI's GC start/finish cover only the collection, not the
/// safepoint's synchronisation and clean-up around it (a few ms on JDK 25).
pub(crate) fn gc_safepoints(wins: &mut [(u64, Cause, bool)]) {
    wins.sort_by_key(|w| w.0);
    let mut open: Option<usize> = None;
    for i in 0..wins.len() {
        match wins[i] {
            (_, Cause::Safepoint, true) => open = Some(i),
            (_, Cause::Safepoint, false) => open = None,
            (_, Cause::Gc, true) => {
                if let Some(b) = open.take() {
                    wins[b].1 = Cause::Gc;
                    // Its end: the next safepoint end after the GC began.
                    if let Some(e) = (i..wins.len()).find(|&j| wins[j].1 == Cause::Safepoint && !wins[j].2) {
                        wins[e].1 = Cause::Gc;
                    }
                }
            }
            _ => {}
        }
    }
}

/// The part of a JVM's time-ordered stop windows that a thread living from
/// `first` to `last` (its own first and last events) sees: `(lead, range)`,
/// where `range` indexes the windows' events inside [first, last] and
/// `lead` counts the windows of each cause still open at `first` (the
/// thread sees them begin at `first`). So a window outside a thread's life
/// does not stretch it: its traced life stays its own.
pub(crate) fn windows_within(
    wins: &[(u64, Cause, bool)],
    first: u64,
    last: u64,
) -> ([(Cause, u32); 2], std::ops::Range<usize>) {
    let lo = wins.partition_point(|w| w.0 < first);
    let hi = wins.partition_point(|w| w.0 <= last);
    let mut lead = [(Cause::Gc, 0u32), (Cause::Safepoint, 0u32)];
    for &(_, cause, begin) in &wins[..lo] {
        if let Some(n) = lead.iter_mut().find(|(c, _)| *c == cause) {
            n.1 = if begin { n.1 + 1 } else { n.1.saturating_sub(1) };
        }
    }
    (lead, lo..hi.max(lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safepoint around a GC is a GC stop; one without is a safepoint.
    #[test]
    fn safepoints_containing_a_gc_are_gc_stops() {
        use Cause::{Gc, Safepoint};
        let mut w = vec![
            (50, Gc, true),
            (10, Safepoint, true),
            (60, Gc, false),
            (70, Safepoint, false),
            (100, Safepoint, true),
            (120, Safepoint, false),
        ];
        gc_safepoints(&mut w);
        assert_eq!(
            w,
            vec![
                (10, Gc, true),
                (50, Gc, true),
                (60, Gc, false),
                (70, Gc, false),
                (100, Safepoint, true),
                (120, Safepoint, false),
            ]
        );
    }
}

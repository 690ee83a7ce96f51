//! A streamed read for a time window ([`StreamOptions::calls_within`]):
//! the method calls that lie wholly outside the window are left out of the
//! sort and the walk, so that a window of a long trace costs one reading of
//! its streams, not a sort and a walk of all of them.
//!
//! What the walk reports for anything that overlaps the window stays
//! exactly what it reports from every event:
//!
//! * every record but a method entry or exit is kept (the CPU state, the
//!   evidence, the thread's totals come from them), and so is every method
//!   event inside the window;
//! * a call is left out only as a pair, its entry and its exit, when it
//!   returns normally to its caller (its exit matches the innermost open
//!   frame, which the walk's own rule would match too) and ends before the
//!   window or begins after it. A call left out has no frame open inside
//!   the window, so the stack there, the depths, the `outermost` flags and
//!   the calls that cross the window's edges are those of the full walk;
//!   the walk's running totals are sums over the time between events, which
//!   leaving out events that change no state does not change;
//! * library calls (spans of the kernel stream, on the same stack) are
//!   kept, and put on the thread's stack in time order among its Java
//!   calls, so the innermost frame is the walk's (a Java call's exit
//!   that would close a library call above it is kept);
//! * every other method event is kept: an exit that matches no frame or
//!   closes frames above its own (the walk counts those as anomalies) is
//!   passed with the entries of every frame it closes;
//! * an entry is held back (a pending frame) until its call is known to be
//!   left out or kept; kept, it is pushed late, and the sort puts it back
//!   in place. Held-back entries are pushed before any method event of the
//!   same time (a thread's events of equal time keep their stream order),
//!   and a thread whose method events go back in time is not cut any more;
//! * the thread's first and last event and its first switch are kept (a
//!   call is left out only between a switch and a later kernel event of the
//!   thread, read before the JVM streams), so the thread's span and the
//!   walk's start state are those of the full walk; after the window, only
//!   calls that begin after the thread's next switch-in are left out, so an
//!   off-CPU interval that crosses the window's end sees the stack the full
//!   walk would.
//!
//! Three things only known later can make a cut unsound: a thread's JVM
//! coverage ending before a call left out returned (the walk would have
//! closed that call there), one thread's method events in two JVM streams
//! (a tid reused), and a thread's method events going back in time (the
//! format says they do not). [`CallCut::sound`] says so, and the reader
//! then reads the trace again without the cut. So does a ring recording
//! (`--max-size`/`--max-age`) whose window starts after its first records:
//! the walk ignores kernel events before that start, which the rules above
//! do not follow yet.
//!
//! [`StreamOptions::calls_within`]: crate::stream::StreamOptions::calls_within

use crate::model::event::{Event, MethodIdx, ThreadInfo};
use crate::model::tid_map::TidMap;

/// The method calls of a window being cut out of a streamed read.
#[derive(Debug)]
pub(crate) struct CallCut {
    /// The window, CLOCK_MONOTONIC ns, inclusive.
    from: u64,
    to: u64,
    /// What the kernel stream (and the virtual threads' synthetic events)
    /// said of each thread, gathered before the JVM streams are read.
    kernel: TidMap<KernelSide>,
    /// The JVM streams are being read: no more kernel-side events.
    jvm_stage: bool,
    /// Serial of the JVM stream being read.
    stream: u32,
    /// Per thread, its method stack as the walk will see it.
    threads: TidMap<ThreadCut>,
    /// Method events left out.
    pub(crate) left_out: u64,
    /// After some of a thread's calls were left out, its method events
    /// came from a second JVM stream, or went back in time.
    unsound: bool,
    /// Library calls of the kernel stream held for the threads' stacks,
    /// and how many may be (past that the cut is given up: nothing was
    /// left out yet).
    lib_events: usize,
    lib_cap: usize,
    /// Given up: every event is passed on.
    disabled: bool,
}

/// A thread's kernel-side events: the first switch, the last event, the
/// first switch-in after the window.
#[derive(Debug, Clone, Copy)]
struct KernelSide {
    first_switch: u64,
    last: u64,
    first_in_after: u64,
}

impl Default for KernelSide {
    fn default() -> Self {
        KernelSide {
            first_switch: u64::MAX,
            last: 0,
            first_in_after: u64::MAX,
        }
    }
}

/// One open frame of a thread's method stack.
#[derive(Debug, Clone, Copy)]
struct Frame {
    method: MethodIdx,
    ts: u64,
    /// Its entry is held back, not yet pushed.
    pending: bool,
}

/// A thread's method stack and what was left out of it.
#[derive(Debug, Default)]
struct ThreadCut {
    stack: Vec<Frame>,
    /// Time of its previous method event.
    last: u64,
    /// The JVM stream its method events come from.
    stream: u32,
    /// Its method events went back in time: no longer cut.
    uncut: bool,
    /// Method events left out, and the latest exit left out.
    left_out: u64,
    last_left_out: u64,
    /// Its library calls from the kernel stream (spans on the same stack:
    /// entry or exit, time, probe), in time order once the JVM streams
    /// begin, and the next one to apply.
    libs: Vec<(u64, MethodIdx, bool)>,
    next_lib: usize,
}

impl CallCut {
    /// A cut of everything outside `[from, to]`, holding at most
    /// `lib_cap` library-call events of the kernel stream.
    pub(crate) fn new(from: u64, to: u64, lib_cap: usize) -> CallCut {
        CallCut {
            from,
            to,
            kernel: TidMap::default(),
            jvm_stage: false,
            stream: 0,
            threads: TidMap::default(),
            left_out: 0,
            unsound: false,
            lib_events: 0,
            lib_cap,
            disabled: false,
        }
    }

    /// Whether the JVM streams are being read (method events before are
    /// library calls of the kernel stream, passed on and held).
    pub(crate) fn jvm_stage(&self) -> bool {
        self.jvm_stage
    }

    /// A library call's entry or exit from the kernel stream: held, to be
    /// put on the thread's stack in time order among its Java calls.
    pub(crate) fn library_call(&mut self, tid: u32, ts: u64, event: Event) {
        if self.disabled {
            return;
        }
        let (m, enter) = match event {
            Event::Enter(m) => (m, true),
            Event::Exit { method, .. } => (method, false),
            _ => return,
        };
        self.lib_events += 1;
        if self.lib_events > self.lib_cap {
            self.disabled = true;
            self.threads = TidMap::default();
            return;
        }
        self.threads.entry(tid).or_default().libs.push((ts, m, enter));
    }

    /// An event read before the JVM streams (kernel records, the virtual
    /// threads' synthetic events and copies).
    #[inline]
    pub(crate) fn kernel_event(&mut self, tid: u32, ts: u64, event: &Event) {
        if self.jvm_stage {
            return;
        }
        let k = self.kernel.entry(tid).or_default();
        k.last = k.last.max(ts);
        match event {
            Event::SwitchOut { .. } => k.first_switch = k.first_switch.min(ts),
            Event::SwitchIn { .. } => {
                k.first_switch = k.first_switch.min(ts);
                if ts > self.to {
                    k.first_in_after = k.first_in_after.min(ts);
                }
            }
            _ => {}
        }
    }

    /// The next JVM stream begins; `pending` receives the entries held back
    /// at the end of the previous one.
    pub(crate) fn begin_stream(&mut self, pending: &mut Vec<(u32, u64, Event)>) {
        if !self.jvm_stage {
            // In the walk's order: by time, ties in stream order.
            for t in self.threads.values_mut() {
                t.libs.sort_by_key(|l| l.0);
            }
        }
        self.end_stream(pending);
        self.jvm_stage = true;
        self.stream += 1;
    }

    /// The entries still held back (calls that never returned in this
    /// stream: the walk ends them), to be pushed now.
    pub(crate) fn end_stream(&mut self, pending: &mut Vec<(u32, u64, Event)>) {
        for (&tid, t) in self.threads.iter_mut() {
            for f in t.stack.iter_mut().filter(|f| f.pending) {
                f.pending = false;
                pending.push((tid, f.ts, Event::Enter(f.method)));
            }
        }
        // Threads in tid order, each in its own order: deterministic.
        pending.sort_by_key(|&(tid, _, _)| tid);
    }

    /// A method event of thread `tid`: the events to push now go to `out`
    /// (none when the event is held back or left out).
    pub(crate) fn method_event(&mut self, tid: u32, ts: u64, event: Event, out: &mut Vec<(u64, Event)>) {
        self.thread(tid).event(ts, event, out);
    }

    /// Thread `tid`'s side of the cut, for its next method events (one
    /// lookup for a whole METHOD_BATCH).
    #[inline]
    pub(crate) fn thread(&mut self, tid: u32) -> ThreadCutter<'_> {
        let stream = self.stream;
        let t = self.threads.entry(tid).or_insert_with(|| ThreadCut {
            stream,
            ..Default::default()
        });
        if t.stream != stream {
            // The same tid in another JVM's stream: its frames of the other
            // JVM were all pushed at that stream's end.
            self.unsound |= t.left_out > 0;
            t.stream = stream;
        }
        t.uncut |= self.disabled;
        ThreadCutter {
            t,
            kernel: self.kernel.get(&tid).copied().unwrap_or_default(),
            from: self.from,
            to: self.to,
            left_out: &mut self.left_out,
            unsound: &mut self.unsound,
        }
    }

    /// Whether the walk of what was kept reports what the walk of every
    /// event would, given the threads' coverage as read (`threads`).
    pub(crate) fn sound<'a>(&self, mut threads: impl Iterator<Item = &'a ThreadInfo>) -> bool {
        !self.unsound
            && !threads.any(|th| {
                let left = self.threads.get(&th.tid);
                matches!((left, th.jvm_until), (Some(t), Some(until)) if t.left_out > 0 && t.last_left_out > until)
            })
    }
}

/// One thread's side of a [`CallCut`].
pub(crate) struct ThreadCutter<'a> {
    t: &'a mut ThreadCut,
    kernel: KernelSide,
    from: u64,
    to: u64,
    left_out: &'a mut u64,
    unsound: &'a mut bool,
}

impl ThreadCutter<'_> {
    /// The thread's next method event: the events to push now go to `out`
    /// (none when the event is held back or left out).
    #[inline]
    pub(crate) fn event(&mut self, ts: u64, event: Event, out: &mut Vec<(u64, Event)>) {
        let t = &mut *self.t;
        if t.uncut {
            out.push((ts, event));
            return;
        }
        if ts <= t.last {
            // Equal times keep their order only if nothing held back is
            // pushed after this event. Going back in time, the walk's
            // order is not the stream's: stop cutting the thread (and if
            // calls were left out already, the cut is not sound).
            flush(t, out);
            if ts < t.last {
                t.uncut = true;
                *self.unsound |= t.left_out > 0;
                out.push((ts, event));
                return;
            }
        }
        t.last = ts;
        // The library calls before it (or at its time: the kernel stream's
        // events come first) are on the walk's stack too.
        while let Some(&(lts, m, enter)) = t.libs.get(t.next_lib) {
            if lts > ts {
                break;
            }
            t.next_lib += 1;
            if enter {
                t.stack.push(Frame {
                    method: m,
                    ts: lts,
                    pending: false,
                });
            } else if let Some(p) = t.stack.iter().rposition(|f| f.method == m) {
                // The walk closes the frames above it: pass them on.
                for g in t.stack.drain(p..) {
                    if g.pending {
                        out.push((g.ts, Event::Enter(g.method)));
                    }
                }
            }
        }
        match event {
            Event::Enter(method) => {
                let inside = ts >= self.from && ts <= self.to;
                t.stack.push(Frame {
                    method,
                    ts,
                    pending: !inside,
                });
                if inside {
                    out.push((ts, event));
                }
            }
            Event::Exit { method, .. } => {
                // The walk's rule: the innermost frame of the method.
                let top = t.stack.len().wrapping_sub(1);
                let pos = match t.stack.last() {
                    Some(f) if f.method == method => top,
                    _ => match t.stack.iter().rposition(|f| f.method == method) {
                        Some(p) => p,
                        None => {
                            out.push((ts, event));
                            return;
                        }
                    },
                };
                let f = t.stack[pos];
                let k = &self.kernel;
                let before = ts < self.from;
                let after = f.ts > self.to && f.ts > k.first_in_after;
                let inside_kernel_span = k.first_switch < f.ts && ts < k.last;
                if pos == top && f.pending && (before || after) && inside_kernel_span {
                    t.stack.pop();
                    t.left_out += 2;
                    t.last_left_out = t.last_left_out.max(ts);
                    *self.left_out += 2;
                    return;
                }
                for g in t.stack.drain(pos..) {
                    if g.pending {
                        out.push((g.ts, Event::Enter(g.method)));
                    }
                }
                out.push((ts, event));
            }
            _ => out.push((ts, event)),
        }
    }
}

/// Pushes the entries `t` holds back (in stack order) to `out`.
fn flush(t: &mut ThreadCut, out: &mut Vec<(u64, Event)>) {
    for f in t.stack.iter_mut().filter(|f| f.pending) {
        f.pending = false;
        out.push((f.ts, Event::Enter(f.method)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enter(m: MethodIdx) -> Event {
        Event::Enter(m)
    }

    fn exit(m: MethodIdx) -> Event {
        Event::Exit {
            method: m,
            exception: false,
        }
    }

    /// A cut of [100, 200] for thread 1, whose kernel side runs from a
    /// switch at 10 to 1000 and switches in again at 250 after the window.
    fn cut() -> CallCut {
        let mut c = CallCut::new(100, 200, 1000);
        let switch_in = Event::SwitchIn { cpu: 0, prev_tid: 0 };
        c.kernel_event(1, 10, &switch_in);
        c.kernel_event(1, 250, &switch_in);
        c.kernel_event(1, 1000, &Event::ThreadEnd);
        c.begin_stream(&mut Vec::new());
        c
    }

    fn feed(c: &mut CallCut, evs: &[(u64, Event)]) -> Vec<(u64, Event)> {
        let mut out = Vec::new();
        for &(ts, e) in evs {
            c.method_event(1, ts, e, &mut out);
        }
        let mut rest = Vec::new();
        c.end_stream(&mut rest);
        out.extend(rest.into_iter().map(|(_, ts, e)| (ts, e)));
        out
    }

    /// Calls returning before the window and beginning after the next
    /// switch-in after it go; the one open across the window's start
    /// comes back (late, before the exit that closes it), the calls in the
    /// window stay.
    #[test]
    fn calls_outside_the_window_are_left_out_in_pairs() {
        let mut c = cut();
        let out = feed(
            &mut c,
            &[
                (20, enter(1)),
                (30, enter(2)),
                (40, exit(2)),
                (50, exit(1)),
                (60, enter(3)),
                (150, enter(4)),
                (160, exit(4)),
                (170, exit(3)),
                (210, enter(5)),
                (220, exit(5)),
                (300, enter(6)),
                (310, exit(6)),
            ],
        );
        assert_eq!(
            format!("{out:?}"),
            format!(
                "{:?}",
                [
                    (150, enter(4)),
                    (160, exit(4)),
                    (60, enter(3)),
                    (170, exit(3)),
                    (210, enter(5)),
                    (220, exit(5)),
                ]
            )
        );
        assert_eq!(c.left_out, 6);
    }

    /// An exit that closes frames above its own keeps them all; one that
    /// matches nothing is kept; a frame never closed is pushed at the end.
    #[test]
    fn anomalies_keep_their_frames() {
        let mut c = cut();
        let out = feed(
            &mut c,
            &[
                (20, enter(1)),
                (30, enter(2)),
                (40, exit(1)),
                (45, exit(7)),
                (50, enter(3)),
            ],
        );
        assert_eq!(
            format!("{out:?}"),
            format!(
                "{:?}",
                [
                    (20, enter(1)),
                    (30, enter(2)),
                    (40, exit(1)),
                    (45, exit(7)),
                    (50, enter(3))
                ]
            )
        );
        assert_eq!(c.left_out, 0);
    }

    /// Equal times push what is held back first; going back in time stops
    /// the cut for the thread, and makes it unsound once calls were left
    /// out (the walk would see them in another order).
    #[test]
    fn equal_and_earlier_times_keep_the_order() {
        let mut c = cut();
        let out = feed(&mut c, &[(20, enter(1)), (20, enter(2)), (22, enter(3)), (21, exit(3))]);
        let want = [(20, enter(1)), (20, enter(2)), (22, enter(3)), (21, exit(3))];
        assert_eq!(format!("{out:?}"), format!("{want:?}"));
        assert!(c.sound([].iter()));
        let mut c = cut();
        feed(&mut c, &[(20, enter(1)), (30, exit(1)), (25, enter(3))]);
        assert_eq!(c.left_out, 2);
        assert!(!c.sound([].iter()));
    }

    /// Before the thread's first switch, and after its last kernel event,
    /// nothing is left out.
    #[test]
    fn the_thread_span_is_kept() {
        let mut c = cut();
        let out = feed(
            &mut c,
            &[(5, enter(1)), (8, exit(1)), (1100, enter(2)), (1200, exit(2))],
        );
        assert_eq!(out.len(), 4);
        assert!(c.sound([].iter()));
    }
}

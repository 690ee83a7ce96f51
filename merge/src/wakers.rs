//! The waker's method of every wakeup in a streamed walk
//! ([`analyze_with_wakers`]): each thread answers, from its own stack, the
//! queries of the wakeups it caused, without any other thread's stack in
//! memory.

use crate::model::event::{Event, MethodIdx, SyscallInfo, ThreadInfo, Timed};
use crate::model::trace::Trace;
use crate::sort::kway::{SortedEvents, ThreadEvents};
use crate::sort::spill::{cross, Sorter};
use crate::visitor::{Invocation, OffCpuInterval, ThreadTotals, Visitor, Wake};
use crate::walk::ThreadWalk;

/// Tracks a thread's stack from the walk's callbacks to answer "which traced
/// method was the thread in at `t`" exactly as [`crate::CallIndex::method_at`]
/// does: among the invocations containing `t` (entry ≤ t ≤ exit), the one
/// entered last, ties to the one that ended last.
#[derive(Default)]
struct StackAt {
    /// Open frames: (entry, method).
    stack: Vec<(u64, MethodIdx)>,
    /// Of the invocations that ended at the latest end time: that time, and
    /// the best (entry, method).
    closed: Option<(u64, u64, MethodIdx)>,
}

impl Visitor for StackAt {
    fn enter(&mut self, _: &ThreadInfo, ts: u64, _: usize, m: MethodIdx) {
        self.stack.push((ts, m));
    }
    fn exit(&mut self, _: &ThreadInfo, _: usize, inv: &Invocation) {
        self.stack.pop();
        match self.closed {
            Some((at, entry, _)) if at == inv.exit && inv.entry < entry => {}
            _ => self.closed = Some((inv.exit, inv.entry, inv.method)),
        }
    }
}

impl StackAt {
    /// The answer for `t`, once every event at or before `t` was walked and
    /// none after it.
    fn at(&self, t: u64) -> Option<MethodIdx> {
        let closed = self.closed.filter(|c| c.0 == t);
        // Open frames all contain t; the top one was entered last, and of
        // frames entered at that same time the lowest ends last.
        let open = self.stack.last().map(|&(top, _)| {
            let low = self.stack.iter().rev().take_while(|f| f.0 == top).last().unwrap();
            (low.0, low.1)
        });
        match (open, closed) {
            (Some((e, m)), Some((_, ce, cm))) => Some(if e >= ce { m } else { cm }),
            (Some((_, m)), None) => Some(m),
            (None, Some((_, _, cm))) => Some(cm),
            (None, None) => None,
        }
    }
}

/// The walk's visitor while a thread answers its queries: its stack, and
/// the caller's visitor (none in the first walk of [`analyze_with_wakers`]).
struct Tee<'v> {
    inner: Option<&'v mut dyn Visitor>,
    st: StackAt,
}

impl Visitor for Tee<'_> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        if let Some(v) = &mut self.inner {
            v.thread_begin(t)
        }
    }
    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        if let Some(v) = &mut self.inner {
            v.event(t, e)
        }
    }
    fn enter(&mut self, t: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.st.enter(t, ts, depth, m);
        if let Some(v) = &mut self.inner {
            v.enter(t, ts, depth, m)
        }
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.st.exit(t, depth, inv);
        if let Some(v) = &mut self.inner {
            v.exit(t, depth, inv)
        }
    }
    fn syscall(&mut self, t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if let Some(v) = &mut self.inner {
            v.syscall(t, idx, sc)
        }
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        if let Some(v) = &mut self.inner {
            v.off_cpu(t, depth, iv)
        }
    }
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        if let Some(v) = &mut self.inner {
            v.wakeup(t, depth, w)
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        if let Some(v) = &mut self.inner {
            v.thread_end(t, totals)
        }
    }
}

/// Walks thread `info` (all of it, or with no visitor only up to its last
/// query) and answers its queries, `q` then the rest of `qs`, as a waker
/// from its stack, each once every event at or before the query's time was
/// walked.
fn walk_answering(
    info: &ThreadInfo,
    mut evs: ThreadEvents,
    mut q: Option<Timed>,
    mut qs: ThreadEvents,
    answers: &mut Sorter,
    tee: &mut Tee,
) -> anyhow::Result<()> {
    let whole = tee.inner.is_some();
    let mut walk = ThreadWalk::new(info, tee);
    let mut error = None;
    evs.for_each(|e, sc| {
        while let Some(qe) = q.filter(|qe| qe.ts < e.ts && error.is_none()) {
            answer(answers, &tee.st, info.tid, &qe);
            match qs.next() {
                Ok(n) => q = n.map(|(qe, _)| qe),
                Err(err) => error = Some(err),
            }
        }
        // Past its last query the rest of the thread answers nothing.
        if whole || q.is_some() {
            walk.event(e, sc, tee);
        }
    })?;
    if let Some(e) = error {
        return Err(e);
    }
    walk.finish(tee);
    while let Some(qe) = q {
        answer(answers, &tee.st, info.tid, &qe);
        q = qs.next()?.map(|(qe, _)| qe);
    }
    Ok(())
}

/// The waker's method of each wakeup, sorted by wakee: what a walk that
/// answered the queries leaves ([`analyze_answering_wakers`]).
pub struct WakerAnswers(SortedEvents);

impl WakerAnswers {
    /// The answers for thread `info`'s wakeups (take threads in tid order,
    /// as the walk does, for the answers to be read sequentially).
    pub fn thread(&mut self, info: &ThreadInfo) -> anyhow::Result<ThreadAnswers<'_>> {
        Ok(ThreadAnswers {
            answers: self.0.thread(info)?,
            group: Vec::new(),
            group_ts: None,
            held: None,
        })
    }
}

/// One thread's answers, asked for wakeup by wakeup in walk order.
pub struct ThreadAnswers<'a> {
    answers: ThreadEvents<'a>,
    /// Answers at `group_ts`: (waker, method).
    group: Vec<(u32, Option<MethodIdx>)>,
    group_ts: Option<u64>,
    held: Option<Timed>,
}

impl ThreadAnswers<'_> {
    /// The traced method `waker` was in when it woke the thread at `ts`
    /// (what [`Visitor::waker_method`] gets). Asked in time order.
    pub fn method(&mut self, ts: u64, waker: u32) -> anyhow::Result<Option<MethodIdx>> {
        if self.group_ts != Some(ts) {
            self.group.clear();
            self.group_ts = Some(ts);
            loop {
                let e = match self.held.take() {
                    Some(e) => e,
                    None => match self.answers.next()? {
                        Some((e, _)) => e,
                        None => break,
                    },
                };
                if e.ts < ts {
                    continue;
                }
                if e.ts > ts {
                    self.held = Some(e);
                    break;
                }
                if let Event::Wakeup {
                    waker_tid, waker_tgid, ..
                } = e.event
                {
                    self.group
                        .push((waker_tid, (waker_tgid != u32::MAX).then_some(waker_tgid)));
                }
            }
        }
        Ok(self.group.iter().find(|a| a.0 == waker).and_then(|a| a.1))
    }
}

/// Passes a walk on, adding each wakeup's waker method from the answers.
struct WithWakers<'a, 'b> {
    inner: &'b mut dyn Visitor,
    answers: ThreadAnswers<'a>,
    error: Option<anyhow::Error>,
}

impl Visitor for WithWakers<'_, '_> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.inner.thread_begin(t)
    }
    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        self.inner.event(t, e)
    }
    fn enter(&mut self, t: &ThreadInfo, ts: u64, depth: usize, m: MethodIdx) {
        self.inner.enter(t, ts, depth, m)
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.inner.exit(t, depth, inv)
    }
    fn syscall(&mut self, t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        self.inner.syscall(t, idx, sc);
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, iv: &OffCpuInterval) {
        self.inner.off_cpu(t, depth, iv)
    }
    fn wakeup(&mut self, t: &ThreadInfo, depth: usize, w: &Wake) {
        self.inner.wakeup(t, depth, w);
        match self.answers.method(w.ts, w.waker_tid) {
            Ok(m) => self.inner.waker_method(t, depth, w, m),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        self.inner.thread_end(t, totals)
    }
}

/// The queries, sorted by waker, and an empty sort for the answers.
fn queries_of(events: &mut SortedEvents) -> anyhow::Result<(SortedEvents, Sorter)> {
    let Some(queries) = events.queries.take() else {
        anyhow::bail!("these events were read without waker queries");
    };
    let mut queries = SortedEvents::new(queries.finish()?).0;
    queries.rewind()?;
    events.rewind()?;
    Ok((queries, Sorter::new(&events.opts_small)))
}

/// [`stream::analyze`](crate::stream::analyze), plus
/// [`Visitor::waker_method`] after every wakeup: the traced method the waker
/// was in at that moment (what [`crate::CallIndex`] says on the whole
/// trace), without holding other threads' stacks in memory.
///
/// How: the reading pass sent each wakeup, as a query, into a second sorted
/// stream keyed by the waker; a first walk over every thread that woke
/// someone answers its queries from its own stack as it goes and sends the
/// answers, keyed by the wakee, into a third; the second walk hands them
/// out. Memory stays bounded by the budget; the price is a second walk
/// (a view that can wait for the answers takes
/// [`analyze_answering_wakers`] instead).
pub fn analyze_with_wakers(trace: &Trace, mut events: SortedEvents, v: &mut dyn Visitor) -> anyhow::Result<()> {
    let (mut queries, mut answers) = queries_of(&mut events)?;
    for info in trace.threads.values() {
        let mut qs = queries.thread(info)?;
        // Queries carry no syscall record: keep just the event.
        let Some(q) = qs.next()?.map(|(qe, _)| qe) else {
            // It woke no one: nothing to answer, no need to walk it.
            continue;
        };
        let mut tee = Tee {
            inner: None,
            st: StackAt::default(),
        };
        walk_answering(info, events.thread(info)?, Some(q), qs, &mut answers, &mut tee)?;
    }
    let mut answers = WakerAnswers(SortedEvents::new(answers.finish()?).0);
    answers.0.rewind()?;
    events.rewind()?;
    for info in trace.threads.values() {
        let mut evs = events.thread(info)?;
        let mut w = WithWakers {
            inner: v,
            answers: answers.thread(info)?,
            error: None,
        };
        let mut walk = ThreadWalk::new(info, &mut w);
        evs.for_each(|e, sc| walk.event(e, sc, &mut w))?;
        walk.finish(&mut w);
        if let Some(e) = w.error {
            return Err(e);
        }
    }
    Ok(())
}

/// [`stream::analyze`](crate::stream::analyze) in one walk, which also
/// answers the waker queries: the waker's method of every wakeup comes
/// after the walk, from the returned [`WakerAnswers`] (thread by thread, in
/// the walk's order), for a view that defers what needs it (the Parquet
/// export's `wakeups` and `off_cpu_intervals` rows). What
/// [`analyze_with_wakers`] gives, without its second walk.
pub fn analyze_answering_wakers(
    trace: &Trace,
    mut events: SortedEvents,
    v: &mut dyn Visitor,
) -> anyhow::Result<WakerAnswers> {
    let (mut queries, mut answers) = queries_of(&mut events)?;
    let mut tee = Tee {
        inner: Some(v),
        st: StackAt::default(),
    };
    for info in trace.threads.values() {
        tee.st = StackAt::default();
        let mut qs = queries.thread(info)?;
        let q = qs.next()?.map(|(qe, _)| qe);
        walk_answering(info, events.thread(info)?, q, qs, &mut answers, &mut tee)?;
    }
    let mut answers = WakerAnswers(SortedEvents::new(answers.finish()?).0);
    answers.0.rewind()?;
    Ok(answers)
}

/// Answers query `q` of a wakeup that thread `waker` caused, from the
/// waker's stack `st`: its method, sent to the wakee's answers.
fn answer(answers: &mut Sorter, st: &StackAt, waker: u32, q: &Timed) {
    if let Event::Wakeup { waker_tid: wakee, .. } = q.event {
        // Only known methods travel back; no answer means none.
        if let Some(m) = st.at(q.ts) {
            answers.push(wakee, q.ts, cross(waker, Some(m)));
        }
    }
}

//! Virtual threads (JDK 21 and later) as threads of their own.
//!
//! A virtual thread is identified by (pid, Java thread id) and gets a
//! thread key of its own in the merge ([`ThreadInfo::virtual_id`] set; the
//! key is its record tid, `VIRTUAL_THREAD_TID | id`, or the next free one
//! when two JVMs use the same id). Its events are:
//!
//! * its own method events (the agent writes them under its record tid);
//! * while it is mounted on a carrier: a copy of the carrier's scheduling,
//!   wakeup, syscall, page fault and JVM blocking events, so its CPU time,
//!   runqueue time and the causes of a blocked carrier (a pinned virtual
//!   thread's `park`, `sleep`, `monitor`, `socket`...) are the carrier's
//!   over that time;
//! * while it is unmounted: a switch-out at the unmount with the block the
//!   agent named ([`jtrace_format::UNMOUNT_PARK`] ...) as the evidence, and
//!   a switch-in at the next mount. A `Thread.yield`
//!   ([`jtrace_format::UNMOUNT_YIELD`]) blocks on nothing: the virtual
//!   thread stays runnable, waiting for a carrier (`carrier`) until it is
//!   mounted again (the JDK's sub-pollers yield after each poll that found
//!   events). When the carrier that mounts it was idle and woken
//!   meanwhile, that wakeup stands for the unpark: from it to the mount is
//!   `carrier` (waiting for a carrier), and its waker (the
//!   virtual thread mounted on the waking carrier then, or the waking
//!   platform thread: the poller, the timer thread) is the waker.
//!
//! A wakeup by a carrier names the virtual thread mounted on it at that
//! time as the waker, for every woken thread.
//!
//! The mounts come from a first pass over the JVM streams
//! ([`VirtualThreads::scan`]), before any kernel record is read, so both
//! the in-memory and the streaming reader copy the carriers' events as they
//! read them ([`VirtualThreads::copies`]).

use super::jvm::pid_from_name;
use super::pid_ns::PidNamespaces;
use super::records::{RawRecords, RecordReader};
use super::span::{self, Span, TimeUse};
use crate::cause::Cause;
use crate::model::event::{Event, ThreadInfo, UNMOUNTED_STATE};
use crate::model::tid_map::TidMap;
use crate::printable::printable_owned;
use jtrace_format::{self as fmt, kind, Payload};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One mount of a virtual thread on a carrier.
#[derive(Debug, Clone, Copy)]
struct Mount {
    /// Mounted at (VTHREAD_START or VTHREAD_MOUNT).
    start: u64,
    /// Unmounted at (VTHREAD_UNMOUNT or VTHREAD_END); `u64::MAX` if the
    /// stream ends first.
    end: u64,
    /// The virtual thread's merge key.
    vtid: u32,
    /// Its previous unmount (0 for its first mount).
    prev_unmount: u64,
}

/// What the first pass learned of a trace's virtual threads.
#[derive(Default)]
pub(crate) struct VirtualThreads {
    /// Per carrier tid: its mounts in time order.
    mounts: TidMap<Vec<Mount>>,
    /// Per JVM stream: Java thread id -> merge key.
    keys: HashMap<PathBuf, HashMap<u64, u32>>,
    /// Per idle carrier: its last wakeup, which may stand for the unpark of
    /// the next virtual thread it mounts: (ts, the wakeup, that virtual
    /// thread, its mount).
    pending: TidMap<(u64, Event, u32, u64)>,
    /// The agent recorded the unparks (VTHREAD_UNPARK): no carrier wakeup
    /// stands for one.
    exact_unparks: bool,
    /// The JDK's unblocker threads (JDK 24 and later), by tid: they unpark
    /// a virtual thread waiting for a monitor on behalf of the thread that
    /// released it, which woke them ([`UNBLOCKER`]).
    unblockers: std::collections::HashSet<u32>,
    /// Each unblocker's wakeups: (ts, waker), as the kernel read goes.
    unblocker_wakes: TidMap<Vec<(u64, u32)>>,
    /// Unparks by an unblocker, whose waker is found once its wakeups are
    /// read: (virtual thread, ts, unblocker, pid).
    relayed: Vec<(u32, u64, u32, u32)>,
}

/// The name of the JDK's platform thread that unparks virtual threads
/// waiting for a monitor its owner released (JDK 24 and later): plumbing,
/// never the waker the reports name.
pub(crate) const UNBLOCKER: &str = "VirtualThread-unblocker";

/// One virtual thread's records, as the first pass collects them.
#[derive(Default)]
struct Life {
    name: Option<String>,
    /// (ts, kind, carrier tid, unmount reason).
    steps: Vec<(u64, u16, u32, String)>,
    /// First record of its own (method events), for one without mounts.
    first_own: Option<u64>,
}

/// What the first pass hands the reader for one virtual thread: its
/// identity and its synthetic events.
pub(crate) struct Synthetic {
    /// The thread as the merge knows it.
    pub(crate) info: ThreadInfo,
    /// (ts, event) in time order.
    pub(crate) events: Vec<(u64, Event)>,
    /// Unmount reasons' classes to intern: (index in `events`, class).
    pub(crate) details: Vec<(usize, String)>,
    /// Its unmounted stretches: (unmount, next mount or `u64::MAX`).
    gaps: Vec<(u64, u64)>,
}

impl VirtualThreads {
    /// True when the trace has no virtual thread (nothing to copy).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// The merge key of a record tid of the JVM stream `path` (a virtual
    /// thread's own records), or the tid itself.
    #[inline]
    pub(crate) fn key(&self, path: &Path, tid: u32) -> u32 {
        match fmt::virtual_thread_id(tid) {
            Some(id) => self.keys.get(path).and_then(|k| k.get(&id)).copied().unwrap_or(tid),
            None => tid,
        }
    }

    /// The key of the virtual thread mounted on `carrier` at `ts`.
    pub(crate) fn mounted_on(&self, carrier: u32, ts: u64) -> Option<u32> {
        self.mounted(carrier, ts).map(|m| m.vtid)
    }

    /// The virtual thread mounted on `carrier` at `ts` (strictly inside a mount).
    fn mounted(&self, carrier: u32, ts: u64) -> Option<&Mount> {
        let m = self.mounts.get(&carrier)?;
        let i = m.partition_point(|x| x.start < ts);
        let prev = m.get(i.checked_sub(1)?)?;
        (ts < prev.end).then_some(prev)
    }

    /// The events of other threads that carrier `tid`'s event at `ts`
    /// implies, into `out` as (thread, ts, event): the copy for the virtual
    /// thread mounted then, and the wakeup that stands for the unpark of the
    /// next virtual thread an idle carrier mounts (the carrier's last
    /// wakeup before that mount, if it did not go back to sleep in
    /// between). Also rewrites a wakeup's waker to the virtual thread its
    /// carrier ran.
    pub(crate) fn copies(&mut self, tid: u32, ts: u64, event: &mut Event, out: &mut Vec<(u32, u64, Event)>) {
        if let Event::Wakeup { waker_tid, .. } = event {
            if let Some(m) = self.mounted(*waker_tid, ts) {
                *waker_tid = m.vtid;
            }
            // An unblocker woken by a virtual thread: by one releasing a
            // monitor (its carrier's other wakeups of it are not releases).
            if self.unblockers.contains(&tid) && fmt::virtual_thread_id(*waker_tid).is_some() {
                self.unblocker_wakes.entry(tid).or_default().push((ts, *waker_tid));
            }
        }
        if let Some(&(wts, wake, vtid, mount)) = self.pending.get(&tid) {
            if ts >= mount {
                out.push((vtid, wts, wake));
                self.pending.remove(&tid);
            } else if matches!(event, Event::SwitchOut { preempted: false, .. }) {
                // Back to sleep before mounting it: not its wake.
                self.pending.remove(&tid);
            }
        }
        // Syscalls are copied with a record of their own: see
        // `mounted_on`. GC/safepoint windows reach every Java thread anyway.
        let copied = matches!(
            event,
            Event::SwitchOut { .. }
                | Event::SwitchIn { .. }
                | Event::Wakeup { .. }
                | Event::PageFault { .. }
                | Event::Block { .. }
                | Event::Held { .. }
        );
        if !copied {
            return;
        }
        if let Some(m) = self.mounted(tid, ts) {
            out.push((m.vtid, ts, *event));
            return;
        }
        if let (Event::Wakeup { .. }, false) = (&event, self.exact_unparks) {
            // An idle carrier woken: maybe the wake of the next virtual
            // thread it mounts, if that one was unmounted (parked) then.
            let Some(mounts) = self.mounts.get(&tid) else { return };
            let Some(next) = mounts.get(mounts.partition_point(|x| x.start < ts)) else {
                return;
            };
            if next.prev_unmount != 0 && next.prev_unmount < ts {
                self.pending.insert(tid, (ts, *event, next.vtid, next.start));
            }
        }
    }

    /// Each mount's switch-in names the virtual thread its carrier ran
    /// before (its `prev_tid`): the one a thread waiting for a carrier
    /// waited behind.
    fn name_carrier_holders(&self, synthetic: &mut [Synthetic]) {
        let mut before: HashMap<(u32, u64), u32> = HashMap::new();
        for mounts in self.mounts.values() {
            for w in mounts.windows(2) {
                if w[0].end <= w[1].start && w[0].vtid != w[1].vtid {
                    before.insert((w[1].vtid, w[1].start), w[0].vtid);
                }
            }
        }
        for s in synthetic {
            for (ts, e) in s.events.iter_mut() {
                if let Event::SwitchIn { prev_tid, .. } = e {
                    if let Some(&p) = before.get(&(s.info.tid, *ts)) {
                        *prev_tid = p;
                    }
                }
            }
        }
    }

    /// At the end of the kernel stream: the wakeups still pending (their
    /// carrier's events ended before the mount), and the unparks by an
    /// unblocker, each named after the virtual thread that woke the
    /// unblocker last before it: the monitor's releaser (exact for the
    /// first unblock of a batch; later ones the unblocker took from its
    /// list without a new wakeup get that batch's releaser), the unblocker
    /// itself if no virtual thread woke it.
    pub(crate) fn pending_wakes(&mut self) -> Vec<(u32, u64, Event)> {
        let mut out: Vec<(u32, u64, Event)> = self
            .pending
            .drain()
            .map(|(_, (ts, e, vtid, _))| (vtid, ts, e))
            .collect();
        for (vtid, ts, by, pid) in std::mem::take(&mut self.relayed) {
            let waker_tid = (self.unblocker_wakes.get_mut(&by))
                .map(|w| {
                    w.sort_by_key(|x| x.0);
                    &*w
                })
                .and_then(|w| w[..w.partition_point(|x| x.0 <= ts)].last())
                .map_or(by, |&(_, w)| w);
            let wake = Event::Wakeup {
                waker_tid,
                waker_tgid: pid,
                new_task: false,
            };
            out.push((vtid, ts, wake));
        }
        out
    }

    /// The first pass over the JVM streams `files`: every virtual thread's
    /// mounts, and its identity and synthetic events for the reader. Two
    /// JVMs' virtual threads with the same Java id get different keys. A
    /// record whose time lies outside the recording `span` places nothing
    /// (the reader counts it, [`span`]).
    pub(crate) fn scan(files: &[PathBuf], ns: &mut PidNamespaces, span: Span) -> (VirtualThreads, Vec<Synthetic>) {
        let mut out = VirtualThreads::default();
        let mut synthetic = Vec::new();
        let mut used: std::collections::HashSet<u32> = Default::default();
        for path in files {
            // Record by record, released behind the reader: never the
            // whole stream in memory (it is as large as the trace).
            let Ok((_, mut recs)) = RecordReader::open(path, fmt::JVM_MAGIC) else {
                continue;
            };
            let mut pid = pid_from_name(path).map_or(0, |p| ns.host_pid(path, p, 0));
            let mut lives: HashMap<u64, Life> = HashMap::new();
            // (ts, the unparking thread's tid, the unparked one's id).
            let mut unparks: Vec<(u64, u32, u64)> = Vec::new();
            // Per carrier, its contended monitor enters (ts, class): JVMTI's
            // event, posted for the virtual thread it runs, names the
            // monitor a virtual thread that unmounts to wait (JDK 24 and
            // later) waits for. Carriers' buffers come out of time order:
            // paired once all is read.
            let mut enters: HashMap<u32, Vec<(u64, String)>> = HashMap::new();
            while let Some(Ok(mut raw)) = recs.next_raw() {
                if !span.contains(raw.ts) {
                    if span::time_use(raw.kind) != TimeUse::Unused {
                        continue;
                    }
                    raw.ts = span.clamp(raw.ts);
                }
                if let Some(id) = fmt::virtual_thread_id(raw.tid) {
                    let l = lives.entry(id).or_default();
                    l.first_own = Some(l.first_own.map_or(raw.ts, |f| f.min(raw.ts)));
                    continue;
                }
                if !(kind::VTHREAD_START..=kind::VTHREAD_UNPARK).contains(&raw.kind)
                    && !matches!(
                        raw.kind,
                        kind::JVM_START | kind::MONITOR_CONTENDED_ENTER | kind::THREAD_START
                    )
                {
                    continue;
                }
                // A carrier's tid, as the kernel knows it.
                let carrier = ns.host_tid(path, raw.tid, raw.ts);
                match raw.decode().map(|r| r.payload) {
                    Ok(Payload::JvmStart(s)) => pid = ns.host_pid(path, s.pid, raw.ts),
                    Ok(Payload::Jvm(kind::VTHREAD_UNPARK, b)) => unparks.push((raw.ts, carrier, b.arg)),
                    Ok(Payload::ThreadStart(t)) if t.name == UNBLOCKER => {
                        out.unblockers.insert(carrier);
                    }
                    Ok(Payload::Jvm(kind::MONITOR_CONTENDED_ENTER, b)) => {
                        enters.entry(carrier).or_default().push((raw.ts, b.class));
                    }
                    Ok(Payload::Jvm(k, b)) => {
                        let l = lives.entry(b.arg).or_default();
                        // The name at the end, else at the start.
                        if (k == kind::VTHREAD_START && l.name.is_none())
                            || (k == kind::VTHREAD_END && !b.class.is_empty())
                        {
                            l.name = Some(b.class.clone());
                        }
                        l.steps.push((raw.ts, k, carrier, b.class));
                    }
                    _ => {}
                }
            }
            if lives.is_empty() {
                continue;
            }
            name_monitors(&mut lives, enters);
            let mut ids: Vec<u64> = lives.keys().copied().collect();
            ids.sort_unstable();
            let keys = out.keys.entry(path.clone()).or_default();
            let first = synthetic.len();
            for id in ids {
                let mut key = fmt::virtual_thread_tid(id).unwrap_or(fmt::VIRTUAL_THREAD_TID);
                while !used.insert(key) {
                    key = fmt::VIRTUAL_THREAD_TID | (key.wrapping_add(1) & !fmt::VIRTUAL_THREAD_TID);
                }
                keys.insert(id, key);
                let life = lives.remove(&id).unwrap_or_default();
                synthetic.push(synthesize(&mut out.mounts, pid, id, key, life));
            }
            for m in out.mounts.values_mut() {
                m.sort_by_key(|x| x.start);
            }
            out.exact_unparks |= !unparks.is_empty();
            let keys = keys.clone();
            out.name_carrier_holders(&mut synthetic[first..]);
            let mine = &mut synthetic[first..];
            for (ts, by, id) in unparks {
                let Some(s) = keys.get(&id).and_then(|k| mine.iter_mut().find(|s| s.info.tid == *k)) else {
                    continue;
                };
                // Only an unpark of an unmounted virtual thread resumes it.
                if !s.gaps.iter().any(|&(from, to)| from < ts && ts < to) {
                    continue;
                }
                if out.unblockers.contains(&by) {
                    out.relayed.push((s.info.tid, ts, by, pid));
                    continue;
                }
                let waker_tid = out.mounted_on(by, ts).unwrap_or(by);
                let wake = Event::Wakeup {
                    waker_tid,
                    waker_tgid: pid,
                    new_task: false,
                };
                s.events.push((ts, wake));
            }
        }
        (out, synthetic)
    }
}

/// Names the monitor of every unmount to wait for one (JDK 24 and later:
/// the reason says `monitor` alone): the class of the last contended enter
/// its carrier posted while the virtual thread was mounted there, else (a
/// retry of the same enter after an unblock that lost the race, which
/// posts no new event) the monitor of its previous such unmount.
fn name_monitors(lives: &mut HashMap<u64, Life>, mut enters: HashMap<u32, Vec<(u64, String)>>) {
    for v in enters.values_mut() {
        v.sort_by_key(|e| e.0);
    }
    for life in lives.values_mut() {
        life.steps.sort_by_key(|s| s.0);
        let mut mounted_at = 0;
        let mut last: Option<String> = None;
        for (ts, k, carrier, reason) in life.steps.iter_mut() {
            if matches!(*k, kind::VTHREAD_START | kind::VTHREAD_MOUNT) {
                mounted_at = *ts;
                continue;
            }
            if *k != kind::VTHREAD_UNMOUNT || unmount_timeout(reason).0 != fmt::UNMOUNT_MONITOR {
                continue;
            }
            let posted = enters.get(carrier).and_then(|v| {
                let i = v.partition_point(|e| e.0 <= *ts);
                v[..i].last().filter(|e| e.0 >= mounted_at).map(|e| e.1.clone())
            });
            if let Some(class) = posted.or_else(|| last.clone()) {
                let rest = &reason[fmt::UNMOUNT_MONITOR.len()..];
                *reason = format!("{} {class}{rest}", fmt::UNMOUNT_MONITOR);
                last = Some(class);
            }
        }
    }
}

/// A timed unmount's timeout (ns), from the last word of its reason
/// ([`fmt::UNMOUNT_TIMEOUT`]), and the reason without it.
fn unmount_timeout(reason: &str) -> (&str, Option<u64>) {
    match reason.rsplit_once(' ') {
        Some((rest, last)) => match last.strip_prefix(fmt::UNMOUNT_TIMEOUT).and_then(|n| n.parse().ok()) {
            Some(ns) => (rest, Some(ns)),
            None => (reason, None),
        },
        None => (reason, None),
    }
}

/// The cause a VTHREAD_UNMOUNT reason stands for, and the class after it.
fn unmount_cause(reason: &str) -> Option<(Cause, &str)> {
    let (reason, _) = unmount_timeout(reason);
    let (word, class) = reason.split_once(' ').unwrap_or((reason, ""));
    let cause = match word {
        fmt::UNMOUNT_PARK => Cause::Park,
        fmt::UNMOUNT_SLEEP => Cause::Sleep,
        fmt::UNMOUNT_SOCKET => Cause::Socket,
        fmt::UNMOUNT_WAIT => Cause::Wait,
        fmt::UNMOUNT_MONITOR => Cause::Monitor,
        // Runnable: the JDK's scheduler, not the kernel's, is the queue.
        fmt::UNMOUNT_YIELD => Cause::Carrier,
        _ => return None,
    };
    Some((cause, class))
}

/// One virtual thread's identity, mounts and synthetic events.
fn synthesize(mounts: &mut TidMap<Vec<Mount>>, pid: u32, id: u64, key: u32, mut life: Life) -> Synthetic {
    life.steps.sort_by_key(|s| s.0);
    let name = match life.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => format!("VirtualThread[#{id}]"),
    };
    let mut events = Vec::new();
    let mut details = Vec::new();
    // The open mount: (carrier, since); the last unmount's block.
    let mut open: Option<(u32, u64)> = None;
    let mut prev_unmount = 0u64;
    let mut block: Option<Cause> = None;
    let mut mounted_ns: HashMap<u32, u64> = HashMap::new();
    let mut started = None;
    let mut ended = None;
    let mut close = |mounts: &mut TidMap<Vec<Mount>>, open: &mut Option<(u32, u64)>, end: u64, prev: u64| {
        if let Some((carrier, start)) = open.take() {
            mounts.entry(carrier).or_default().push(Mount {
                start,
                end,
                vtid: key,
                prev_unmount: prev,
            });
            if end != u64::MAX {
                *mounted_ns.entry(carrier).or_default() += end - start;
            }
        }
    };
    let mut this_prev = 0u64;
    let mut gaps = Vec::new();
    // The last timed unmount's deadline: the park ended there at the
    // latest (JDK 25 records the expiry's unpark only once a carrier runs it).
    let mut deadline: Option<u64> = None;
    for (ts, k, carrier, reason) in life.steps {
        match k {
            kind::VTHREAD_START | kind::VTHREAD_MOUNT => {
                // (Recording may have begun while it was unmounted: it is
                // then known from its first mount.)
                if k == kind::VTHREAD_START {
                    started = Some(ts);
                    if open.is_some_and(|(c, _)| c == carrier) {
                        // Followed from the bytecode, the start comes just
                        // after the first mount: the same mount.
                        continue;
                    }
                }
                if prev_unmount != 0 && this_prev != prev_unmount {
                    gaps.push((prev_unmount, ts));
                }
                close(mounts, &mut open, ts, this_prev);
                if let Some(d) = deadline.take().filter(|&d| d < ts) {
                    // A timer ends the park: no thread woke it.
                    let wake = Event::Wakeup {
                        waker_tid: 0,
                        waker_tgid: 0,
                        new_task: false,
                    };
                    events.push((d, wake));
                }
                if let Some(cause) = block.take() {
                    events.push((
                        ts,
                        Event::Block {
                            cause,
                            begin: false,
                            detail: 0,
                        },
                    ));
                }
                events.push((ts, Event::SwitchIn { cpu: 0, prev_tid: 0 }));
                open = Some((carrier, ts));
                this_prev = prev_unmount;
            }
            kind::VTHREAD_UNMOUNT | kind::VTHREAD_END => {
                if open.is_none() && events.is_empty() {
                    // Recording began while it was mounted: on since its first record.
                    let since = life.first_own.unwrap_or(ts).min(ts);
                    events.push((since, Event::SwitchIn { cpu: 0, prev_tid: 0 }));
                    open = Some((carrier, since));
                }
                close(mounts, &mut open, ts, this_prev);
                if k == kind::VTHREAD_END {
                    ended = Some(ts);
                    events.push((ts, Event::ThreadEnd));
                    continue;
                }
                prev_unmount = ts;
                deadline = unmount_timeout(&reason).1.map(|ns| ts.saturating_add(ns));
                if let Some((cause, class)) = unmount_cause(&reason) {
                    details.push((events.len(), class.to_string()));
                    events.push((
                        ts,
                        Event::Block {
                            cause,
                            begin: true,
                            detail: 0,
                        },
                    ));
                    block = Some(cause);
                }
                events.push((
                    ts,
                    Event::SwitchOut {
                        preempted: false,
                        prev_state: UNMOUNTED_STATE | 1,
                        cpu: 0,
                        next_tid: 0,
                    },
                ));
            }
            _ => {}
        }
    }
    // Unmounted when the stream ended, or still mounted.
    if open.is_none() && prev_unmount != 0 && prev_unmount != this_prev && ended.is_none() {
        gaps.push((prev_unmount, u64::MAX));
    }
    close(mounts, &mut open, u64::MAX, this_prev);
    if events.is_empty() {
        // Method events but no mount recorded (virtual thread events off):
        // its time off and on its carriers is not known.
        if let Some(first) = life.first_own {
            events.push((first, Event::ThreadStart));
        }
    }
    let carrier = mounted_ns
        .iter()
        .max_by_key(|(&c, &ns)| (ns, std::cmp::Reverse(c)))
        .map(|(&c, _)| c);
    let info = ThreadInfo {
        tid: key,
        tgid: pid,
        java_name: Some(printable_owned(name)),
        group: "VirtualThreads".into(),
        daemon: true,
        started_ts: started,
        exited_ts: ended,
        virtual_id: Some(id),
        carrier,
        ..Default::default()
    };
    Synthetic {
        info,
        events,
        details,
        gaps,
    }
}

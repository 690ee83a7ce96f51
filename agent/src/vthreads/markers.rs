//! The JDK methods the agent marks to follow virtual threads from the
//! bytecode (JDK 21 and later), and the virtual thread events the marks
//! append to carriers' probe buffers (agent/java/jtrace/Probe.java).
//!
//! `java.lang.VirtualThread`'s `mount()`, `unmount()`, `run(Runnable)` and
//! the methods that resume it (`unpark()`, from JDK 24 `parkTimeoutExpired()`
//! and `unblock()`) hand the virtual thread to the probes; `sleepNanos` and
//! the socket parks tell the next unmount its reason. This replaces JVMTI's
//! virtual thread events, which make every mount and unmount take HotSpot's
//! slow JVMTI transition (BENCHMARKS.md, "Virtual threads").

use std::sync::Mutex;

use jtrace_format::{kind, JvmBlock, Payload};

use crate::mutex::lock;
use crate::probe::layout::{
    ID_SHIFT, NATIVE_BLOCKER_SHIFT, VTHREAD_ID_BITS, VTHREAD_WHAT_BITS, VTHREAD_WHAT_SHIFT, V_BLOCKER, V_MONITOR,
    V_MOUNT, V_PARK, V_SLEEP, V_SOCKET, V_TIMEOUT, V_UNMOUNT, V_UNPARK, V_WAIT, V_YIELD,
};
use crate::rewrite::{MOUNT_MARKER, REASON_MARKER, START_MARKER, UNMOUNT_MARKER, UNPARK_MARKER};

/// Park blockers' class names by id (`Probe.blockerId0`; a V_BLOCKER
/// event's id bits), each once.
static BLOCKERS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The id of park blocker class `name` (dotted), given on first sight.
pub(crate) fn blocker_id(name: String) -> u32 {
    let mut all = lock(&BLOCKERS);
    match all.iter().position(|n| *n == name) {
        Some(i) => i as u32,
        None => {
            all.push(name);
            (all.len() - 1) as u32
        }
    }
}

/// The class name of park blocker `id`, if one has it.
fn blocker_name(id: u64) -> Option<String> {
    lock(&BLOCKERS).get(id as usize).cloned()
}

/// Classes with marked methods.
const CLASSES: [&str; 4] = [
    "java/lang/VirtualThread",
    "sun/nio/ch/NioSocketImpl",
    "sun/nio/ch/SelChImpl",
    "sun/nio/ch/Poller",
];

/// Whether `class` (internal name) has methods to mark.
pub(crate) fn marks_class(class: &str) -> bool {
    CLASSES.contains(&class)
}

/// The marker id of a method (see [`crate::rewrite::MARKER_MIN`]), if it is one.
pub(crate) fn marker(class: &str, name: &str, desc: &str) -> Option<u32> {
    let reason = |why: u64| Some(REASON_MARKER + why as u32);
    match (class, name, desc) {
        ("java/lang/VirtualThread", "unpark" | "parkTimeoutExpired" | "unblock", "()V") => Some(UNPARK_MARKER),
        ("java/lang/VirtualThread", "mount", "()V") => Some(MOUNT_MARKER),
        ("java/lang/VirtualThread", "unmount", "()V") => Some(UNMOUNT_MARKER),
        ("java/lang/VirtualThread", "run", "(Ljava/lang/Runnable;)V") => Some(START_MARKER),
        ("java/lang/VirtualThread", "sleepNanos", "(J)V") => reason(V_SLEEP),
        ("sun/nio/ch/NioSocketImpl" | "sun/nio/ch/SelChImpl", "park", _) => reason(V_SOCKET),
        ("sun/nio/ch/Poller", "poll", "(IIJLjava/util/function/BooleanSupplier;)V") => reason(V_SOCKET),
        _ => None,
    }
}

/// The VTHREAD_UNMOUNT reason of a V_* value.
fn unmount_reason(what: u64) -> &'static str {
    use jtrace_format::{UNMOUNT_MONITOR, UNMOUNT_PARK, UNMOUNT_SLEEP, UNMOUNT_SOCKET, UNMOUNT_WAIT, UNMOUNT_YIELD};
    match what {
        V_PARK => UNMOUNT_PARK,
        V_SLEEP => UNMOUNT_SLEEP,
        V_SOCKET => UNMOUNT_SOCKET,
        V_WAIT => UNMOUNT_WAIT,
        V_MONITOR => UNMOUNT_MONITOR,
        V_YIELD => UNMOUNT_YIELD,
        _ => "",
    }
}

/// What the events just before an unmount said of it: its park blocker
/// (an id from [`blocker_id`]) and its timeout (µs, saturated at the id
/// bits' maximum), each from the same buffer.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pending {
    /// V_BLOCKER's id.
    pub(crate) blocker: Option<u64>,
    /// V_TIMEOUT's microseconds.
    pub(crate) timeout_us: Option<u64>,
}

/// The record a V_* value `what` about virtual thread `id` stands for; a
/// park's unmount names the class of its park blocker when it had one, and
/// a timed unmount ends with ` timeout=<ns>` when its timeout is known
/// (below the saturation; docs/FORMAT.md, "Virtual threads").
pub(crate) fn payload(what: u64, id: u64, pending: Pending) -> Option<Payload> {
    let k = match what {
        V_MOUNT => kind::VTHREAD_MOUNT,
        V_UNPARK => kind::VTHREAD_UNPARK,
        V_UNMOUNT..=V_YIELD => kind::VTHREAD_UNMOUNT,
        _ => return None,
    };
    let mut class = match (what, pending.blocker.and_then(blocker_name)) {
        (V_PARK, Some(b)) => format!("{} {b}", jtrace_format::UNMOUNT_PARK),
        _ if k == kind::VTHREAD_UNMOUNT => unmount_reason(what).to_string(),
        _ => String::new(),
    };
    let saturated = (1 << VTHREAD_ID_BITS) - 1;
    if let (kind::VTHREAD_UNMOUNT, Some(us)) = (k, pending.timeout_us.filter(|&us| us < saturated)) {
        class.push_str(&format!(" {}{}", jtrace_format::UNMOUNT_TIMEOUT, us * 1000));
    }
    Some(Payload::Jvm(k, JvmBlock { arg: id, class }))
}

/// Decodes a virtual thread event of a probe buffer: the record it stands
/// for, or None when it only tells of the next one (a V_BLOCKER or a
/// V_TIMEOUT, kept in `pending` for it) or is unknown.
pub(crate) fn probe_event(e: u64, pending: &mut Pending) -> Option<Payload> {
    let what = (e >> VTHREAD_WHAT_SHIFT) & ((1 << VTHREAD_WHAT_BITS) - 1);
    let id = (e >> ID_SHIFT) & ((1 << VTHREAD_ID_BITS) - 1);
    match what {
        V_BLOCKER => pending.blocker = Some(id),
        V_TIMEOUT => pending.timeout_us = Some(id),
        _ => return payload(what, id, std::mem::take(pending)),
    }
    None
}

/// Splits `Probe.vthreadEvent0`'s `what`: the V_* value and, for a park,
/// its blocker's id (stored + 1, 0: none).
pub(crate) fn split_native_what(what: u32) -> (u64, Pending) {
    let blocker = (what >> NATIVE_BLOCKER_SHIFT) as u64;
    let pending = Pending {
        blocker: blocker.checked_sub(1),
        timeout_us: None,
    };
    (u64::from(what & ((1 << NATIVE_BLOCKER_SHIFT) - 1)), pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::layout::VTHREAD;

    #[test]
    fn events_decode_to_the_records_they_stand_for() {
        let ev = |what: u64, id: u64| VTHREAD | what << VTHREAD_WHAT_SHIFT | id << ID_SHIFT | 12345;
        let rec = |e| match probe_event(e, &mut Pending::default()) {
            Some(Payload::Jvm(k, b)) => (k, b.arg, b.class),
            _ => panic!("not a record"),
        };
        assert_eq!(rec(ev(V_MOUNT, 7)), (kind::VTHREAD_MOUNT, 7, String::new()));
        assert_eq!(
            rec(ev(V_UNPARK, (1 << VTHREAD_ID_BITS) - 1)),
            (kind::VTHREAD_UNPARK, (1 << VTHREAD_ID_BITS) - 1, String::new())
        );
        assert_eq!(rec(ev(V_SOCKET, 9)), (kind::VTHREAD_UNMOUNT, 9, "socket".to_string()));
        assert_eq!(rec(ev(V_UNMOUNT, 9)), (kind::VTHREAD_UNMOUNT, 9, String::new()));
        assert!(probe_event(ev(15, 1), &mut Pending::default()).is_none());
    }

    #[test]
    fn a_park_names_its_blocker() {
        let ev = |what: u64, id: u64| VTHREAD | what << VTHREAD_WHAT_SHIFT | id << ID_SHIFT;
        let lock = blocker_id("java.util.concurrent.locks.ReentrantLock$NonfairSync".into());
        assert_eq!(
            blocker_id("java.util.concurrent.locks.ReentrantLock$NonfairSync".into()),
            lock
        );
        let latch = blocker_id("java.util.concurrent.CountDownLatch$Sync".into());
        assert_ne!(lock, latch);
        let mut pending = Pending::default();
        assert!(probe_event(ev(V_BLOCKER, lock.into()), &mut pending).is_none());
        assert_eq!(pending.blocker, Some(lock.into()));
        let Some(Payload::Jvm(k, block)) = probe_event(ev(V_PARK, 5), &mut pending) else {
            panic!("not a record")
        };
        assert_eq!((k, block.arg), (kind::VTHREAD_UNMOUNT, 5));
        assert_eq!(block.class, "park java.util.concurrent.locks.ReentrantLock$NonfairSync");
        // Only a park takes a blocker; an unknown id leaves the reason alone.
        let with = |blocker, timeout_us| Pending { blocker, timeout_us };
        let Some(Payload::Jvm(_, block)) = probe_event(ev(V_SLEEP, 5), &mut with(Some(lock.into()), None)) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "sleep");
        let Some(Payload::Jvm(_, block)) = probe_event(ev(V_PARK, 5), &mut with(Some(1 << 20), None)) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "park");
        let (what, p) = split_native_what(3);
        assert_eq!((what, p.blocker), (V_PARK, None));
        let (what, p) = split_native_what(3 | (latch + 1) << NATIVE_BLOCKER_SHIFT);
        assert_eq!((what, p.blocker), (V_PARK, Some(latch.into())));
    }

    /// A timed unmount says its timeout (in ns) after its reason; a
    /// saturated one is no deadline.
    #[test]
    fn a_timed_unmount_says_its_timeout() {
        let ev = |what: u64, id: u64| VTHREAD | what << VTHREAD_WHAT_SHIFT | id << ID_SHIFT;
        let mut pending = Pending::default();
        assert!(probe_event(ev(V_TIMEOUT, 10_000), &mut pending).is_none());
        let Some(Payload::Jvm(_, block)) = probe_event(ev(V_SLEEP, 5), &mut pending) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "sleep timeout=10000000");
        assert!(pending.timeout_us.is_none(), "taken by its unmount");
        let mut pending = Pending::default();
        probe_event(ev(V_TIMEOUT, (1 << VTHREAD_ID_BITS) - 1), &mut pending);
        let Some(Payload::Jvm(_, block)) = probe_event(ev(V_PARK, 5), &mut pending) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "park");
    }

    #[test]
    fn markers_of_this_jdks_methods() {
        assert_eq!(marker("java/lang/VirtualThread", "mount", "()V"), Some(MOUNT_MARKER));
        assert_eq!(marker("java/lang/VirtualThread", "unblock", "()V"), Some(UNPARK_MARKER));
        assert_eq!(
            marker("java/lang/VirtualThread", "sleepNanos", "(J)V"),
            Some(REASON_MARKER + V_SLEEP as u32)
        );
        assert_eq!(
            marker("sun/nio/ch/NioSocketImpl", "park", "(Ljava/io/FileDescriptor;IJ)V"),
            Some(REASON_MARKER + V_SOCKET as u32)
        );
        assert_eq!(marker("sun/nio/ch/Poller", "poll", "(I)I"), None);
        assert_eq!(marker("java/lang/Thread", "sleep", "(J)V"), None);
    }
}

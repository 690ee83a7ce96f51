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
use crate::probe_layout::{
    ID_SHIFT, NATIVE_BLOCKER_SHIFT, VTHREAD_ID_BITS, VTHREAD_WHAT_BITS, VTHREAD_WHAT_SHIFT, V_BLOCKER, V_MONITOR,
    V_MOUNT, V_PARK, V_SLEEP, V_SOCKET, V_UNMOUNT, V_UNPARK, V_WAIT, V_YIELD,
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

/// The record a V_* value `what` about virtual thread `id` stands for; a
/// park's unmount names the class of its park blocker `blocker` (an id
/// from [`blocker_id`]) when it had one.
pub(crate) fn payload(what: u64, id: u64, blocker: Option<u64>) -> Option<Payload> {
    let k = match what {
        V_MOUNT => kind::VTHREAD_MOUNT,
        V_UNPARK => kind::VTHREAD_UNPARK,
        V_UNMOUNT..=V_YIELD => kind::VTHREAD_UNMOUNT,
        _ => return None,
    };
    let class = match (what, blocker.and_then(blocker_name)) {
        (V_PARK, Some(b)) => format!("{} {b}", jtrace_format::UNMOUNT_PARK),
        _ if k == kind::VTHREAD_UNMOUNT => unmount_reason(what).to_string(),
        _ => String::new(),
    };
    Some(Payload::Jvm(k, JvmBlock { arg: id, class }))
}

/// What a virtual thread event of a probe buffer says (its layout:
/// [`crate::probe_layout`]).
pub(crate) enum ProbeEvent {
    /// The record it stands for (`blocker`: the V_BLOCKER just before it).
    Record(Payload),
    /// The park blocker of the next event, by id.
    Blocker(u64),
    /// Nothing known.
    Unknown,
}

/// Decodes a virtual thread event of a probe buffer; `blocker` is the
/// V_BLOCKER right before it, if any.
pub(crate) fn probe_event(e: u64, blocker: Option<u64>) -> ProbeEvent {
    let what = (e >> VTHREAD_WHAT_SHIFT) & ((1 << VTHREAD_WHAT_BITS) - 1);
    let id = (e >> ID_SHIFT) & ((1 << VTHREAD_ID_BITS) - 1);
    if what == V_BLOCKER {
        return ProbeEvent::Blocker(id);
    }
    payload(what, id, blocker).map_or(ProbeEvent::Unknown, ProbeEvent::Record)
}

/// Splits `Probe.vthreadEvent0`'s `what`: the V_* value and, for a park,
/// its blocker's id (stored + 1, 0: none).
pub(crate) fn split_native_what(what: u32) -> (u64, Option<u64>) {
    let blocker = (what >> NATIVE_BLOCKER_SHIFT) as u64;
    (
        u64::from(what & ((1 << NATIVE_BLOCKER_SHIFT) - 1)),
        blocker.checked_sub(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe_layout::VTHREAD;

    #[test]
    fn events_decode_to_the_records_they_stand_for() {
        let ev = |what: u64, id: u64| VTHREAD | what << VTHREAD_WHAT_SHIFT | id << ID_SHIFT | 12345;
        let rec = |e| match probe_event(e, None) {
            ProbeEvent::Record(Payload::Jvm(k, b)) => (k, b.arg, b.class),
            _ => panic!("not a record"),
        };
        assert_eq!(rec(ev(V_MOUNT, 7)), (kind::VTHREAD_MOUNT, 7, String::new()));
        assert_eq!(
            rec(ev(V_UNPARK, (1 << VTHREAD_ID_BITS) - 1)),
            (kind::VTHREAD_UNPARK, (1 << VTHREAD_ID_BITS) - 1, String::new())
        );
        assert_eq!(rec(ev(V_SOCKET, 9)), (kind::VTHREAD_UNMOUNT, 9, "socket".to_string()));
        assert_eq!(rec(ev(V_UNMOUNT, 9)), (kind::VTHREAD_UNMOUNT, 9, String::new()));
        assert!(matches!(probe_event(ev(15, 1), None), ProbeEvent::Unknown));
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
        let ProbeEvent::Blocker(b) = probe_event(ev(V_BLOCKER, lock.into()), None) else {
            panic!("not a blocker")
        };
        let ProbeEvent::Record(Payload::Jvm(k, block)) = probe_event(ev(V_PARK, 5), Some(b)) else {
            panic!("not a record")
        };
        assert_eq!((k, block.arg), (kind::VTHREAD_UNMOUNT, 5));
        assert_eq!(block.class, "park java.util.concurrent.locks.ReentrantLock$NonfairSync");
        // Only a park takes a blocker; an unknown id leaves the reason alone.
        let ProbeEvent::Record(Payload::Jvm(_, block)) = probe_event(ev(V_SLEEP, 5), Some(b)) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "sleep");
        let ProbeEvent::Record(Payload::Jvm(_, block)) = probe_event(ev(V_PARK, 5), Some(1 << 20)) else {
            panic!("not a record")
        };
        assert_eq!(block.class, "park");
        assert_eq!(split_native_what(3), (V_PARK, None));
        assert_eq!(
            split_native_what(3 | (latch + 1) << NATIVE_BLOCKER_SHIFT),
            (V_PARK, Some(latch.into()))
        );
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

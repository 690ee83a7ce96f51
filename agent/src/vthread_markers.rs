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

use jtrace_format::{kind, JvmBlock, Payload};

use crate::rewrite::{MOUNT_MARKER, REASON_MARKER, START_MARKER, UNMOUNT_MARKER, UNPARK_MARKER};

// What a virtual thread event says (Probe.java's V_* constants).
/// Mounted on the carrier.
pub(crate) const V_MOUNT: u64 = 0;
/// Resumed by the thread whose buffer holds the event.
pub(crate) const V_UNPARK: u64 = 1;
/// Unmounted, reason not known.
pub(crate) const V_UNMOUNT: u64 = 2;
const V_PARK: u64 = 3;
const V_SLEEP: u64 = 4;
const V_SOCKET: u64 = 5;
const V_WAIT: u64 = 6;
const V_MONITOR: u64 = 7;
const V_YIELD: u64 = 8;

/// Bit of a virtual thread event where its V_* starts.
const WHAT_SHIFT: u32 = 58;
/// Bits of the Java id in a virtual thread event (from bit 32).
const ID_BITS: u32 = 26;

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

/// The record a V_* value `what` about virtual thread `id` stands for.
pub(crate) fn payload(what: u64, id: u64) -> Option<Payload> {
    let k = match what {
        V_MOUNT => kind::VTHREAD_MOUNT,
        V_UNPARK => kind::VTHREAD_UNPARK,
        V_UNMOUNT..=V_YIELD => kind::VTHREAD_UNMOUNT,
        _ => return None,
    };
    let class = if k == kind::VTHREAD_UNMOUNT {
        unmount_reason(what).to_string()
    } else {
        String::new()
    };
    Some(Payload::Jvm(k, JvmBlock { arg: id, class }))
}

/// The record a virtual thread event of a probe buffer stands for (kind
/// bits 62–63 both set; V_* in bits 58–61; the Java id in bits 32–57).
pub(crate) fn probe_event(e: u64) -> Option<Payload> {
    payload((e >> WHAT_SHIFT) & 0xF, (e >> 32) & ((1 << ID_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_decode_to_the_records_they_stand_for() {
        let ev = |what: u64, id: u64| 3u64 << 62 | what << WHAT_SHIFT | id << 32 | 12345;
        let rec = |e| match probe_event(e) {
            Some(Payload::Jvm(k, b)) => (k, b.arg, b.class),
            p => panic!("{p:?}"),
        };
        assert_eq!(rec(ev(V_MOUNT, 7)), (kind::VTHREAD_MOUNT, 7, String::new()));
        assert_eq!(
            rec(ev(V_UNPARK, (1 << ID_BITS) - 1)),
            (kind::VTHREAD_UNPARK, (1 << ID_BITS) - 1, String::new())
        );
        assert_eq!(rec(ev(V_SOCKET, 9)), (kind::VTHREAD_UNMOUNT, 9, "socket".to_string()));
        assert_eq!(rec(ev(V_UNMOUNT, 9)), (kind::VTHREAD_UNMOUNT, 9, String::new()));
        assert!(probe_event(ev(15, 1)).is_none());
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

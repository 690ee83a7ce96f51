//! The numbers the probe class (agent/java/jtrace/Probe.java) and the agent
//! share: how an event sits in a probe buffer's long, the virtual thread
//! event codes, the sizes the agent relies on. Defined here once; build.rs
//! includes this file and writes every constant below as a `static final`
//! of `jtrace.Layout` (in OUT_DIR), which Probe.java imports. javac inlines
//! such constants, so the probes' bytecode holds the values themselves,
//! as it did when they were written in Probe.java.
//!
//! A method event is a METHOD_BATCH event as the stream stores it
//! (`jtrace_format::batch_event`). A virtual thread event (a mount,
//! unmount or unpark, in a carrier's buffer) takes the kind that METHOD_BATCH
//! leaves unassigned, [`VTHREAD_KIND`]; below the kind, its V_* code
//! ([`VTHREAD_WHAT_BITS`] bits), then the virtual thread's Java id, then the
//! delta as in a method event.

use jtrace_format::{BatchedKind, BATCH_ID_SHIFT, BATCH_KIND_SHIFT, BATCH_MAX_EVENTS, BATCH_METHOD_LIMIT};

/// Declares each constant in Rust and lists it for build.rs:
/// `java_type NAME: rust_type = value;` (java_type `int` or `long`).
macro_rules! shared {
    ($($(#[doc = $doc:literal])* $java:ident $name:ident: $t:ty = $v:expr;)*) => {
        $(
            $(#[doc = $doc])*
            // Some are the probe class's alone.
            #[allow(dead_code)]
            pub(crate) const $name: $t = $v;
        )*

        /// Every constant above for Java: (type, name, value, doc).
        #[allow(dead_code)]
        pub(crate) const JAVA: &[(&str, &str, i128, &str)] = &[
            $((stringify!($java), stringify!($name), $name as i128, concat!($($doc, "\n"),*)),)*
        ];
    };
}

shared! {
    /// Bit of an event where the method id (or the virtual thread's Java
    /// id) starts: the delta since the thread's previous event is the bits
    /// below it.
    int ID_SHIFT: u32 = BATCH_ID_SHIFT;
    /// Bit of an event where its kind starts.
    int KIND_SHIFT: u32 = BATCH_KIND_SHIFT;
    /// Kind bits of a method's normal exit (an entry's are 0).
    long EXIT: u64 = (BatchedKind::Exit as u64) << BATCH_KIND_SHIFT;
    /// Kind bits of a method's exit by exception.
    long EXIT_EX: u64 = (BatchedKind::ExitByException as u64) << BATCH_KIND_SHIFT;

    /// Kind of a virtual thread event: one METHOD_BATCH does not use.
    long VTHREAD_KIND: u64 = 3;
    /// Kind bits of a virtual thread event.
    long VTHREAD: u64 = VTHREAD_KIND << BATCH_KIND_SHIFT;
    /// Bits of a virtual thread event's V_* code, right below the kind.
    int VTHREAD_WHAT_BITS: u32 = 4;
    /// Bit of a virtual thread event where its V_* code starts.
    int VTHREAD_WHAT_SHIFT: u32 = BATCH_KIND_SHIFT - VTHREAD_WHAT_BITS;
    /// Bits of the Java id in a virtual thread event (from ID_SHIFT): ids
    /// from 2^26 on go through `Probe.vthreadEvent0` instead.
    int VTHREAD_ID_BITS: u32 = VTHREAD_WHAT_SHIFT - BATCH_ID_SHIFT;

    /// V_*: mounted on the carrier.
    int V_MOUNT: u64 = 0;
    /// V_*: resumed by the thread whose buffer holds the event.
    int V_UNPARK: u64 = 1;
    /// V_*: unmounted, reason not known.
    int V_UNMOUNT: u64 = 2;
    /// V_*: unmounted to park.
    int V_PARK: u64 = 3;
    /// V_*: unmounted to sleep.
    int V_SLEEP: u64 = 4;
    /// V_*: unmounted to wait for a socket.
    int V_SOCKET: u64 = 5;
    /// V_*: unmounted in Object.wait.
    int V_WAIT: u64 = 6;
    /// V_*: unmounted entering a monitor.
    int V_MONITOR: u64 = 7;
    /// V_*: unmounted by Thread.yield.
    int V_YIELD: u64 = 8;
    /// V_*: not an unmount: the park blocker's class (its agent id in the
    /// id bits) of the V_PARK right after.
    int V_BLOCKER: u64 = 9;
    /// V_*: not an unmount: the timeout of the timed park or wait right
    /// after, in microseconds in the id bits (all ones: that long or
    /// longer). JDK 25 runs a timed park's expiry as a task of the carriers'
    /// pool, so the unpark it records comes only when a carrier is free: the
    /// deadline says when the park really ended.
    int V_TIMEOUT: u64 = 10;

    /// Bit of `Probe.vthreadEvent0`'s `what` where a park's blocker id + 1
    /// starts (0: none); its V_* code is the bits below.
    int NATIVE_BLOCKER_SHIFT: u32 = 8;

    /// Method ids are below this: `Probe.DEMOTED` holds one mark for each.
    int MAX_METHODS: u32 = 1 << 20;
    /// Events per platform thread's buffer: a full one is one METHOD_BATCH.
    int CAPACITY: usize = 8184;
}

const _: () = {
    // The kind's bits are the top ones; the V_* code and the Java id fill
    // the rest down to the delta.
    assert!(BATCH_KIND_SHIFT + 2 == 64);
    assert!(V_BLOCKER < 1 << VTHREAD_WHAT_BITS);
    assert!(V_TIMEOUT < 1 << VTHREAD_WHAT_BITS);
    assert!(V_BLOCKER < 1 << NATIVE_BLOCKER_SHIFT);
    assert!(VTHREAD_KIND > BatchedKind::ExitByException as u64);
    assert!(MAX_METHODS as u64 <= BATCH_METHOD_LIMIT);
    assert!(CAPACITY <= BATCH_MAX_EVENTS);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A constant of the probe class's own would hide Layout's of the same
    /// name (its wildcard import yields to it) and could drift from it.
    #[test]
    fn the_probe_class_has_no_copies_of_its_own() {
        let probe = include_str!("../../java/jtrace/Probe.java");
        for (_, name, _, _) in JAVA {
            assert!(
                !probe.contains(&format!(" {name} =")),
                "Probe.java declares {name}: it is Layout's (probe/layout.rs)"
            );
        }
    }
}

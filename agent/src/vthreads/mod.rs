//! Virtual threads (JDK 21 and later): their starts, ends, mounts and
//! unmounts on carrier threads, and their method calls.
//!
//! A virtual thread is a thread of its own, identified by its Java thread
//! id; its mounts on carrier threads (kernel tids) join it to the kernel's
//! events. The agent records, on the carrier (record tid = the carrier's
//! tid): VTHREAD_START / VTHREAD_END (the first mount and the last
//! unmount, with the virtual thread's name), VTHREAD_MOUNT /
//! VTHREAD_UNMOUNT (an unmount names why the virtual thread left its
//! carrier), and VTHREAD_UNPARK on the resuming thread (a carrier running a
//! virtual thread, or a platform thread: a lock's releaser, the poller, the
//! timer thread). Two ways:
//!
//! * from the bytecode (the default when the agent may rewrite classes):
//!   `java.lang.VirtualThread`'s mount(), unmount(), run(Runnable) and
//!   unpark() & co. are marked ([`markers`]); the probes
//!   append mounts, unmounts and unparks to the carrier's probe buffer (the
//!   reason of an unmount from the virtual thread's state and the blocking
//!   call marked, e.g. `sleepNanos`), and call [`started0`]/[`ended0`] once
//!   per virtual thread. `can_support_virtual_threads` is not asked for:
//!   it makes every mount take HotSpot's slow JVMTI transition;
//! * else with JVMTI's virtual thread events ([`jvmti`]).
//!
//! Method calls: a virtual thread's probe buffer (agent/java/jtrace/Probe.java)
//! travels with it from carrier to carrier; the agent writes it out, with
//! record tid = [`jtrace_format::virtual_thread_tid`] of its Java thread id,
//! when it is full (`flushVirtual0`, on the carrier running it), at its end
//! and at VM death ([`records`]).

mod jvmti;
pub(crate) mod markers;
mod records;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use jtrace_format::kind;

use crate::jvm::{self, clear_exception, jni};
use crate::mutex::lock;
use crate::probe;
use crate::state::{active, debug, guard, now_ns, CONFIG};
use crate::sys::*;
use crate::thread::{record_raw, with_carrier_buf};
use crate::vthreads::jvmti as jvmti_way;
use crate::vthreads::records::{drain, end, java_id, probe_thread_id, record, thread_name, PROBES};

pub(crate) use crate::vthreads::jvmti::{callbacks, Callbacks};
pub(crate) use crate::vthreads::records::drain_all;

/// This JVM has virtual threads and the agent may rewrite classes: follow
/// them from the bytecode if the probes know this JDK's VirtualThread.
static WANT_BYTECODE: AtomicBool = AtomicBool::new(false);
/// They are followed from the bytecode (the probe class said it can).
static BYTECODE_ROUTE: AtomicBool = AtomicBool::new(false);

/// At load, when the agent is to `follow` virtual threads: whether this JVM
/// has them; if so, follows them from the bytecode when `bytecode` (the
/// agent may rewrite classes; the caller adds the capabilities for it),
/// else with JVMTI.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn on_load(env: *mut jvmtiEnv, follow: bool, bytecode: bool) {
    // A new session (attach) decides again.
    WANT_BYTECODE.store(false, Ordering::SeqCst);
    BYTECODE_ROUTE.store(false, Ordering::SeqCst);
    // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
    // (# Safety).
    if !unsafe { jvmti_way::has_virtual_threads(env) } || !follow {
        return;
    }
    if bytecode {
        WANT_BYTECODE.store(true, Ordering::SeqCst);
    } else {
        // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
        // (# Safety).
        unsafe {
            jvmti_way::add_capability(env);
        }
    }
}

/// The capabilities for rewriting classes were refused: JVMTI's way.
///
/// # Safety
/// As [`on_load`].
pub(crate) unsafe fn bytecode_refused(env: *mut jvmtiEnv) {
    WANT_BYTECODE.store(false, Ordering::SeqCst);
    // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
    // (# Safety).
    unsafe {
        jvmti_way::add_capability(env);
    }
}

/// Whether the agent wants to follow virtual threads from the bytecode (it
/// then rewrites classes even when no method is traced).
pub(crate) fn wants_bytecode() -> bool {
    WANT_BYTECODE.load(Ordering::Relaxed)
}

/// Whether virtual threads are followed from the bytecode: the hook marks
/// [`markers`]'s methods.
pub(crate) fn bytecode_route() -> bool {
    BYTECODE_ROUTE.load(Ordering::Relaxed)
}

/// Once the probe class is defined and initialised (before any class is
/// rewritten): follows virtual threads from the bytecode if the probes
/// know this JDK's VirtualThread (`Probe.virtualThreadsFollowed()`).
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn choose_route(jni: *mut JNIEnv) {
    let class = probe::class::class();
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        let m = jni!(
            jni,
            GetStaticMethodID,
            class,
            c"virtualThreadsFollowed".as_ptr(),
            c"()Z".as_ptr()
        )
        .unwrap_or(std::ptr::null_mut());
        if m.is_null() {
            clear_exception(jni);
            return;
        }
        let yes = jni!(jni, CallStaticBooleanMethodA, class, m, std::ptr::null()).unwrap_or(0) != 0;
        clear_exception(jni);
        BYTECODE_ROUTE.store(yes, Ordering::SeqCst);
        debug(if yes {
            "virtual threads followed from the bytecode"
        } else {
            "the probes do not know this JDK's VirtualThread: virtual threads followed with JVMTI"
        });
    }
}

/// At VMInit (or attach): looks up what the records need, then follows
/// virtual threads the chosen way. Returns a message when the JVM has
/// virtual threads but they cannot be followed.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni` (or null).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv) -> Result<(), String> {
    if jni.is_null() {
        return Ok(());
    }
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv or null
    // (# Safety).
    unsafe {
        let virtual_class = jni!(jni, FindClass, c"java/lang/VirtualThread".as_ptr()).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        if virtual_class.is_null() {
            // Before JDK 21: no virtual threads.
            return Ok(());
        }
        jvm::delete_local(jni, virtual_class);
        if CONFIG.get().is_some_and(|c| !c.virtual_threads) {
            return Err(
                "virtual threads are not followed (virtual_threads off): their method calls are recorded, \
                    their time is not attributed"
                    .into(),
            );
        }
        let thread = jni!(jni, FindClass, c"java/lang/Thread".as_ptr()).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        let known = !thread.is_null() && records::find_fields(jni, thread);
        let started = if !known {
            Err("virtual threads: java.lang.Thread has no tid field; not followed".into())
        } else if bytecode_route() {
            Ok(())
        } else {
            if wants_bytecode() {
                // The probes do not know this JDK's VirtualThread: JVMTI's way.
                WANT_BYTECODE.store(false, Ordering::SeqCst);
                jvmti_way::add_capability(env);
            }
            jvmti_way::start(env, jni, thread)
        };
        jvm::delete_local(jni, thread);
        started
    }
}

/// At the end of an attach session: stops JVMTI's virtual thread events.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase.
pub(crate) unsafe fn stop(env: *mut jvmtiEnv) {
    // SAFETY: the caller guarantees `env` is the agent's environment in the live phase (# Safety).
    unsafe {
        jvmti_way::stop(env);
    }
}

/// `Probe.registerVirtual0(Probe p)`: a virtual thread's first traced call.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.registerVirtual0`, with the calling
/// thread's `jni` and live local references.
unsafe extern "C" fn register_virtual0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.registerVirtual0", || {
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        let Some(id) = (unsafe { probe_thread_id(jni, probe) }) else {
            return;
        };
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        let global = unsafe { jni!(jni, NewGlobalRef, probe) }.unwrap_or(std::ptr::null_mut());
        if global.is_null() {
            return;
        }
        let old = lock(&PROBES)
            .get_or_insert_with(HashMap::new)
            .insert(id, global as usize);
        if let Some(old) = old {
            // SAFETY: the JVM calls this native with the calling thread's `jni` and live local
            // references (# Safety).
            unsafe {
                jni!(jni, DeleteGlobalRef, old as jobject);
            }
        }
    });
}

/// `Probe.flushVirtual0(Probe p)`: a virtual thread's buffer is full; on
/// the carrier running it.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.flushVirtual0`, with the calling thread's
/// `jni` and live local references.
unsafe extern "C" fn flush_virtual0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.flushVirtual0", || {
        let Some((rec, _)) = active() else { return };
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        let Some(id) = (unsafe { probe_thread_id(jni, probe) }) else {
            return;
        };
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        with_carrier_buf(rec, |buf| unsafe { drain(jni, rec, buf, probe, id) });
    });
}

/// `Probe.vthreadEvent0(Object vthread, int what)`: a mount, unmount or
/// unpark the probes could not append to a carrier's buffer, recorded on
/// the calling kernel thread (after its buffered events).
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.vthreadEvent0`, with the calling thread's
/// `jni` and live local references.
unsafe extern "C" fn vthread_event0(jni: *mut JNIEnv, _class: jclass, vthread: jobject, what: jint) {
    let ts = now_ns();
    guard("Probe.vthreadEvent0", || {
        if active().is_none() {
            return;
        }
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        let Some(id) = (unsafe { java_id(jni, vthread) }) else {
            return;
        };
        let (what, mut pending) = crate::vthreads::markers::split_native_what(what as u32);
        pending.timeout_us = NATIVE_TIMEOUT_US.take();
        if let Some(payload) = crate::vthreads::markers::payload(what, id, pending) {
            record_raw(ts, payload);
        }
    });
}

/// `Probe.blockerId0(Class c)`: the id of a park blocker's class, by its
/// name (-1 if JVMTI cannot name it).
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.blockerId0`, with the calling thread's
/// `jni` and live local references.
unsafe extern "C" fn blocker_id0(_jni: *mut JNIEnv, _class: jclass, blocker: jclass) -> jint {
    let mut id = -1;
    guard("Probe.blockerId0", || {
        // SAFETY: the JVM calls this native with a live `blocker` class reference (# Safety).
        let name = unsafe { crate::jvm::class_name(crate::jvm::env(), blocker) };
        if !name.is_empty() {
            id = crate::vthreads::markers::blocker_id(name) as jint;
        }
    });
    id
}

/// `Probe.started0(Object vthread)`: its first mount (VirtualThread.run
/// began), on the carrier.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.started0`, with the calling thread's `jni`
/// and live local references.
unsafe extern "C" fn started0(jni: *mut JNIEnv, _class: jclass, vthread: jobject) {
    let ts = now_ns();
    guard("Probe.started0", || {
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        unsafe { record(jni, vthread, ts, kind::VTHREAD_START, || thread_name(jni, vthread)) }
    });
}

/// `Probe.ended0(Object vthread)`: its last unmount (its task is done), on
/// the carrier.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.ended0`, with the calling thread's `jni`
/// and live local references.
unsafe extern "C" fn ended0(jni: *mut JNIEnv, _class: jclass, vthread: jobject) {
    let ts = now_ns();
    // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
    // (# Safety).
    guard("Probe.ended0", || unsafe {
        end(jni, vthread, ts, || thread_name(jni, vthread))
    });
}

thread_local! {
    /// The timeout (µs) `Probe.timeout0` gave the next `vthreadEvent0` on
    /// this carrier: the timed unmount it comes right before.
    static NATIVE_TIMEOUT_US: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// `Probe.timeout0(long nanos)`: the timeout of the timed unmount that
/// `vthreadEvent0` records next on this thread (a virtual thread whose
/// events do not fit a probe buffer's).
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.timeout0`, with the calling thread's `jni`
/// and live local references.
unsafe extern "C" fn timeout0(_jni: *mut JNIEnv, _class: jclass, nanos: jlong) {
    guard("Probe.timeout0", || {
        NATIVE_TIMEOUT_US.set(Some((nanos.max(0) as u64) / 1000));
    });
}

/// The natives of `jtrace.Probe` this module implements.
pub(crate) fn natives() -> [JNINativeMethod; 7] {
    [
        probe::class::native(c"blockerId0", c"(Ljava/lang/Class;)I", blocker_id0 as *mut c_void),
        probe::class::native(
            c"vthreadEvent0",
            c"(Ljava/lang/Object;I)V",
            vthread_event0 as *mut c_void,
        ),
        probe::class::native(c"started0", c"(Ljava/lang/Object;)V", started0 as *mut c_void),
        probe::class::native(c"ended0", c"(Ljava/lang/Object;)V", ended0 as *mut c_void),
        probe::class::native(
            c"registerVirtual0",
            c"(Ljtrace/Probe;)V",
            register_virtual0 as *mut c_void,
        ),
        probe::class::native(c"flushVirtual0", c"(Ljtrace/Probe;)V", flush_virtual0 as *mut c_void),
        probe::class::native(c"timeout0", c"(J)V", timeout0 as *mut c_void),
    ]
}

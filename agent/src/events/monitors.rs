//! Contended monitor enter (MONITOR_CONTENDED_ENTER/ENTERED) and
//! Object.wait (MONITOR_WAIT/WAITED), recorded as begin/end pairs on the
//! blocked thread, with the monitor's class. A begin that is class loading
//! ([`super::class_loading`]) is recorded as well, but does not keep the
//! calls open around it probed.

use std::cell::Cell;

use jtrace_format::{kind, JvmBlock, Payload};

use crate::jvm::object_class_name;
use crate::state::{guard, now_ns};
use crate::sys::*;
use crate::thread::{record_java, record_java_block};

thread_local! {
    /// Begins recorded on this thread and not yet ended: [`OPEN_ENTER`] | [`OPEN_WAIT`].
    static OPEN: Cell<u8> = const { Cell::new(0) };
}
const OPEN_ENTER: u8 = 1;
const OPEN_WAIT: u8 = 2;

/// Installs the monitor callbacks (their events are enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.MonitorContendedEnter = Some(on_contended_enter);
    cb.MonitorContendedEntered = Some(on_contended_entered);
    cb.MonitorWait = Some(on_monitor_wait);
    cb.MonitorWaited = Some(on_monitor_waited);
}

/// Records the BEGIN of a per-thread pair and remembers it is open.
///
/// # Safety
/// In a monitor callback, with its `env`, `jni` and `thread`.
unsafe fn begin_pair(
    bit: u8,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) {
    let class_loading = || {
        // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
        let yes = unsafe { super::class_loading::is_class_loading(env, jni, thread) };
        if yes {
            crate::state::debug("a class-loading wait: the open calls stay unblocked");
        } else if crate::state::debugging() {
            // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
            unsafe {
                super::class_loading::debug_missed(env, jni, thread);
            }
        }
        yes
    };
    // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
    if unsafe { record_java_block(env, jni, thread, ts, payload, class_loading) } {
        let _ = OPEN.try_with(|o| o.set(o.get() | bit));
    }
}

/// Records the END of a per-thread pair only if its BEGIN was recorded: a
/// wait or contended enter already under way when the events were enabled,
/// or HotSpot's MonitorWaited for a thread interrupted before it waited,
/// has no begin, and an unmatched end would mislead the merge.
///
/// # Safety
/// In a monitor callback, with its `env`, `jni` and `thread`.
unsafe fn end_pair(
    bit: u8,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) {
    let was_open = OPEN
        .try_with(|o| {
            let v = o.get();
            o.set(v & !bit);
            v & bit != 0
        })
        .unwrap_or(false);
    if was_open {
        // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
        unsafe {
            record_java(env, jni, thread, ts, payload);
        }
    }
}

fn block(k: u16, arg: u64, class: String) -> Payload {
    Payload::Jvm(k, JvmBlock { arg, class })
}

/// # Safety
/// Called by the JVM as the MonitorContendedEnter callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_contended_enter(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject) {
    let ts = now_ns();
    guard("MonitorContendedEnter", || {
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            begin_pair(OPEN_ENTER, env, jni, thread, ts, || {
                block(kind::MONITOR_CONTENDED_ENTER, 0, object_class_name(env, jni, object))
            });
        }
    });
}

/// # Safety
/// Called by the JVM as the MonitorContendedEntered callback, with the agent's `env` and the
/// current thread's `jni`.
unsafe extern "C" fn on_contended_entered(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject) {
    let ts = now_ns();
    guard("MonitorContendedEntered", || {
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            end_pair(OPEN_ENTER, env, jni, thread, ts, || {
                block(kind::MONITOR_CONTENDED_ENTERED, 0, object_class_name(env, jni, object))
            });
        }
    });
}

/// # Safety
/// Called by the JVM as the MonitorWait callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_monitor_wait(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    object: jobject,
    timeout: jlong,
) {
    let ts = now_ns();
    guard("MonitorWait", || {
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            begin_pair(OPEN_WAIT, env, jni, thread, ts, || {
                block(
                    kind::MONITOR_WAIT,
                    timeout.max(0) as u64,
                    object_class_name(env, jni, object),
                )
            });
        }
    });
}

/// # Safety
/// Called by the JVM as the MonitorWaited callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_monitor_waited(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    object: jobject,
    timed_out: jboolean,
) {
    let ts = now_ns();
    guard("MonitorWaited", || {
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            end_pair(OPEN_WAIT, env, jni, thread, ts, || {
                block(
                    kind::MONITOR_WAITED,
                    (timed_out != 0) as u64,
                    object_class_name(env, jni, object),
                )
            });
        }
    });
}

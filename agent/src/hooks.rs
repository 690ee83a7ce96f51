//! The JVMTI callbacks of the agent's own life and of threads and methods:
//! VMInit, VMDeath, ThreadStart, ThreadEnd, MethodEntry and MethodExit
//! (JVMTI method events, used when bytecode rewriting is off), and the
//! ClassFileLoadHook of [`crate::classes`]. The other event families'
//! callbacks are in [`crate::events`].

use std::sync::atomic::Ordering;

use jtrace_format::{virtual_thread_tid, MethodDef, MethodEvent, Payload, Record, EXIT_BY_EXCEPTION};

use crate::config::Config;
use crate::probe::drain;
use crate::recorder::Recorder;
use crate::state::{active, guard, now_ns, tid, ThreadState, ENABLED, RECORDER};
use crate::sys::*;
use crate::thread::{register, with_carrier_buf, with_state};
use crate::{classes, demotion, jvm, session, vthreads};

/// The callbacks of this module (installed at load; their events are
/// enabled at load or at VMInit).
pub(crate) fn callbacks() -> jvmtiEventCallbacks {
    jvmtiEventCallbacks {
        VMInit: Some(on_vm_init),
        VMDeath: Some(on_vm_death),
        ThreadStart: Some(on_thread_start),
        ThreadEnd: Some(on_thread_end),
        MethodEntry: Some(on_method_entry),
        MethodExit: Some(on_method_exit),
        ClassFileLoadHook: Some(classes::on_class_file_load_hook),
        ..Default::default()
    }
}

/// Decides whether `method` is traced, consulting the thread cache, then the
/// global table, then JVMTI (once per method for the whole VM).
///
/// # Safety
/// In a JVMTI callback, with its `env`, `jni` and `method`.
unsafe fn method_traced(
    st: &mut ThreadState,
    rec: &Recorder,
    cfg: &Config,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    method: jmethodID,
    ts: u64,
) -> bool {
    let id = method as usize;
    if let Some(&t) = st.cache.get(&id) {
        return t;
    }
    let t = match rec.known_method(id) {
        Some(t) => t,
        // SAFETY: the caller passes this callback's `env`, `jni` and `method` (# Safety).
        None => match unsafe { jvm::method_info(env, jni, method) } {
            Some(m) => {
                let traced = cfg.method_traced(&m.class, &m.name);
                let def = MethodDef {
                    method: id as u64,
                    class: m.class,
                    name: m.name,
                    signature: m.signature,
                };
                rec.define_method(tid(), ts, def, traced)
            }
            // JVMTI cannot describe it (obsolete method …): not traced.
            None => false,
        },
    };
    st.cache.insert(id, t);
    t
}

/// # Safety
/// Called by the JVM as the MethodEntry callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_method_entry(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, method: jmethodID) {
    let ts = now_ns();
    guard("MethodEntry", || {
        let Some((rec, cfg)) = active() else { return };
        with_state(rec, |st| {
            if !st.registered {
                // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's
                // `jni` (# Safety).
                unsafe {
                    register(st, rec, cfg, env, jni, thread, ts);
                }
            }
            // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's
            // `jni` (# Safety).
            if !st.traced || !unsafe { method_traced(st, rec, cfg, env, jni, method, ts) } {
                return;
            }
            let Some(buf) = &st.buf else { return };
            let Some((tid, stack)) = frames(&mut st.mounted, &mut st.stack) else {
                rec.count_lost(1);
                return;
            };
            stack.push(method as usize);
            let ev = MethodEvent {
                method: method as usize as u64,
                flags: 0,
                reserved: 0,
            };
            rec.push(
                buf,
                &Record {
                    tid,
                    ts,
                    payload: Payload::MethodEntry(ev),
                },
            );
        });
    });
}

/// # Safety
/// Called by the JVM as the MethodExit callback.
unsafe extern "C" fn on_method_exit(
    _env: *mut jvmtiEnv,
    _jni: *mut JNIEnv,
    _thread: jthread,
    method: jmethodID,
    was_popped_by_exception: jboolean,
    _return_value: jvalue,
) {
    let ts = now_ns();
    guard("MethodExit", || {
        let Some((rec, _)) = active() else { return };
        with_state(rec, |st| {
            // Only the innermost open traced method can be exiting if it is
            // traced at all; anything else is untraced (or entered before
            // tracing started), so no filter lookup is needed here.
            let Some(buf) = &st.buf else { return };
            let Some((tid, stack)) = frames(&mut st.mounted, &mut st.stack) else {
                return;
            };
            if !st.traced || stack.last() != Some(&(method as usize)) {
                return;
            }
            stack.pop();
            let flags = if was_popped_by_exception != 0 {
                EXIT_BY_EXCEPTION
            } else {
                0
            };
            let ev = MethodEvent {
                method: method as usize as u64,
                flags,
                reserved: 0,
            };
            rec.push(
                buf,
                &Record {
                    tid,
                    ts,
                    payload: Payload::MethodExit(ev),
                },
            );
        });
    });
}

/// Whose JVMTI method event this is: the virtual thread `mounted` on the
/// calling carrier (its record tid and open methods), else the thread's own
/// (`own`); `None` for a virtual thread whose id has no record tid.
fn frames<'a>(
    mounted: &'a mut Option<(u64, Vec<usize>)>,
    own: &'a mut Vec<usize>,
) -> Option<(u32, &'a mut Vec<usize>)> {
    match mounted {
        Some((id, frames)) => Some((virtual_thread_tid(*id)?, frames)),
        None => Some((tid(), own)),
    }
}

/// # Safety
/// Called by the JVM as the ThreadStart callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_thread_start(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("ThreadStart", || {
        let Some((rec, cfg)) = active() else { return };
        with_state(rec, |st| {
            if !st.registered {
                // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's
                // `jni` (# Safety).
                unsafe {
                    register(st, rec, cfg, env, jni, thread, ts);
                }
            }
        });
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            crate::events::code::thread_started(jni, thread);
        }
    });
}

/// # Safety
/// Called by the JVM as the ThreadEnd callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_thread_end(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("ThreadEnd", || {
        let Some((rec, cfg)) = active() else { return };
        // The bytecode probes' buffer goes first, before THREAD_END.
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            end_own_probe(jni);
        }
        crate::events::code::thread_ended();
        with_state(rec, |st| {
            // A thread never seen before still gets its identity recorded.
            if !st.registered {
                // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's
                // `jni` (# Safety).
                unsafe {
                    register(st, rec, cfg, env, jni, thread, ts);
                }
            }
            if let Some(buf) = st.buf.take() {
                rec.push(
                    &buf,
                    &Record {
                        tid: tid(),
                        ts,
                        payload: Payload::ThreadEnd,
                    },
                );
                rec.retire(&buf);
            }
            // The OS thread may be attached again later (JNI AttachCurrentThread):
            // it then registers afresh.
            st.registered = false;
            st.traced = false;
            st.stack.clear();
        });
    });
}

/// At ThreadEnd, on the ending thread, before its THREAD_END is recorded:
/// drains and forgets the thread's probe buffer.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, at its ThreadEnd.
unsafe fn end_own_probe(jni: *mut JNIEnv) {
    let Some((rec, _)) = active() else { return };
    let Some((probe, _)) = drain::own_probe() else {
        return;
    };
    // with_state drains the buffer before running the closure.
    with_state(rec, |_| {});
    // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
    unsafe {
        drain::release_own(jni, probe);
    }
}

/// # Safety
/// Called by the JVM as the VMInit callback, with the agent's `env` and the current thread's `jni`.
unsafe extern "C" fn on_vm_init(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
    // (# Safety).
    guard("VMInit", || unsafe { session::start_recording(env, jni, thread, ts) });
}

/// # Safety
/// Called by the JVM as the VMDeath callback, with the current thread's `jni`.
unsafe extern "C" fn on_vm_death(_env: *mut jvmtiEnv, jni: *mut JNIEnv) {
    let ts = now_ns();
    guard("VMDeath", || {
        if active().is_some() {
            // SAFETY: the JVM calls this callback with the current thread's `jni` (# Safety).
            unsafe {
                drain_at_vm_death(jni);
            }
        }
        // Finalise even if an internal error disabled recording: what was
        // recorded until then is valid and the loss count must be written.
        if let Some(rec) = RECORDER.get() {
            ENABLED.store(false, Ordering::SeqCst);
            crate::demotion::demoter::stop();
            // A callback already past its check (a GC or JIT event, another
            // thread's allocation sample) may still be recording: let it
            // finish, or its record would come after JVM_END and be lost.
            crate::state::others_done_within(std::time::Duration::from_millis(200));
            rec.finish(tid(), ts);
        }
    });
}

/// At VM death, before the recorder's final flush: drains every thread's
/// probe buffer (other threads' into their own stream buffers, the live
/// virtual threads' into this thread's).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, in the VMDeath callback.
unsafe fn drain_at_vm_death(jni: *mut JNIEnv) {
    if let Some((rec, _)) = active() {
        // with_state drains the calling thread's own buffer first.
        with_state(rec, |_| {});
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
        let jni = unsafe { jvm::jni_env(jni) };
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
        unsafe {
            drain::drain_others(jni, rec);
        }
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
        with_carrier_buf(rec, |buf| unsafe { vthreads::drain_all(jni, rec, buf) });
        demotion::record_short_dropped(rec, tid(), now_ns());
    }
    classes::report_counters();
}

//! A recording session's start (at VMInit, or at once when attaching to a
//! live VM) and, for a session started by attach, its stop.

use std::sync::atomic::Ordering;

use jtrace_format::{JvmPidNs, JvmStart, Payload, Record};

use crate::config::Config;
use crate::demotion::{self, demoter};
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::probe::{self, drain};
use crate::recorder::{self, Recorder, SharedBuf};
use crate::state::{
    active, debug, internal_error, now_ns, others_done_within, say, tid, ATTACHED, CONFIG, CONTROL, ENABLED, RECORDER,
    SESSION_BUFS,
};
use crate::sys::*;
use crate::thread::{register, with_state};
use crate::{classes, events, existing_threads, vthreads};

/// Everything VMInit does; also run directly when attaching to a live VM
/// (`thread` null): JVM_START, then the threads, methods and events the
/// configuration asks for.
///
/// # Safety
/// Live phase, with the agent's `env`; `jni` and `thread` are the calling
/// thread's (or null when attaching).
pub(crate) unsafe fn start_recording(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, ts: u64) {
    let Some((rec, cfg)) = active() else { return };
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni` or null
    // (# Safety).
    unsafe {
        let vm_version = jvm::system_property(env, c"java.vm.version").unwrap_or_default();
        let pid = std::process::id();
        rec.write_direct(&Record {
            tid: tid(),
            ts,
            payload: Payload::JvmStart(JvmStart { pid, vm_version }),
        });
        // Inside a pid namespace (a container) the tids the agent records are
        // the namespace's: the reader pairs them with the kernel's by it.
        if let Some(pidns_ino) = crate::os::pid_namespace().filter(|&i| i != jtrace_format::INITIAL_PIDNS_INO) {
            rec.write_direct(&Record {
                tid: tid(),
                ts,
                payload: Payload::JvmPidNs(JvmPidNs {
                    pidns_ino,
                    ns_pid: pid,
                    reserved: 0,
                }),
            });
        }
        if !thread.is_null() {
            with_state(rec, |st| {
                if !st.registered {
                    register(st, rec, cfg, env, jni, thread, ts);
                }
            });
            // Threads started before VMInit (Reference Handler, Finalizer,
            // Signal Dispatcher, ...) get no ThreadStart event: name them now.
            existing_threads::name(env, jni, ts);
        }
        events::bind_park_sleep(env, jni);
        let mut events = vec![JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END];
        if cfg.traces_methods() && !classes::enabled(cfg) {
            events.extend([JVMTI_EVENT_METHOD_ENTRY, JVMTI_EVENT_METHOD_EXIT]);
        }
        if classes::hook_needed(cfg) {
            if classes::enabled(cfg) {
                demotion::reset(demoter::start);
                if probe::class::ready() {
                    // A method demoted in an earlier session is traced again;
                    // cleared before any class gets its probes back.
                    probe::class::set_demoted(jvm::jni_env(jni), &[], true);
                }
            }
            if let Err(e) = classes::start(env, jni, cfg) {
                if classes::enabled(cfg) {
                    internal_error(&e);
                    return;
                }
                // Only virtual threads wanted it: JVMTI's events follow them.
                debug(&e);
            }
        }
        for e in events {
            let err = jvm::set_event(env, e, true);
            if err != JVMTI_ERROR_NONE {
                internal_error(&format!("cannot enable JVMTI event {e} (error {err})"));
                return;
            }
        }
        events::start(env, jni);
        if let Err(msg) = vthreads::start(env, jvm::jni_env(jni)) {
            say(&msg);
            rec.write_direct(&Record {
                tid: tid(),
                ts: now_ns(),
                payload: Payload::AgentError(msg),
            });
        }
    }
}

/// `stop`: ends the session a previous attach started; false if there is
/// none.
///
/// # Safety
/// Called from Agent_OnAttach, on the JVM's attach listener thread.
pub(crate) unsafe fn stop() -> bool {
    let _control = lock(&CONTROL);
    if !ATTACHED.load(Ordering::SeqCst) || RECORDER.get().is_none() {
        return false;
    }
    let env = jvm::env();
    if env.is_null() {
        return false;
    }
    // SAFETY: the caller guarantees this runs from Agent_OnAttach on the attach listener thread
    // (# Safety).
    unsafe {
        stop_session(env);
    }
    true
}

/// Ends an attach session: no more events, the probes removed (the classes
/// retransformed back to their original bytes), every buffered event
/// written and the stream finished with JVM_END, the capabilities given
/// back. The JVM runs on as if the agent had never been there, and a later
/// attach starts a new session.
///
/// # Safety
/// Live phase, with the agent's `env`, inside a guarded callback.
pub(crate) unsafe fn stop_session(env: *mut jvmtiEnv) {
    ENABLED.store(false, Ordering::SeqCst);
    // SAFETY: the caller guarantees the live phase and the agent's `env` (# Safety).
    unsafe {
        for e in JVMTI_MIN_EVENT_TYPE_VAL..=JVMTI_MAX_EVENT_TYPE_VAL {
            // Events never enabled or not known to this JVM simply fail.
            jvm::set_event(env, e as jvmtiEvent, false);
        }
        vthreads::stop(env);
        let jni = jvm::jni_env(std::ptr::null_mut());
        // Park and sleep natives an attach re-bound go back to the JVM's own.
        events::park_sleep::detach(jni);
        if let (Some(rec), Some(cfg)) = (RECORDER.get(), CONFIG.get()) {
            {
                let bufs: Vec<(u32, SharedBuf)> = lock(&SESSION_BUFS).clone();
                // The last entry of a tid is its current buffer; a thread whose
                // probes ran but that recorded nothing else gets one now.
                let find = |t: u32| {
                    let found = bufs.iter().rev().find(|(x, _)| *x == t).map(|(_, b)| b.clone());
                    found.or_else(|| thread_traced_by_comm(cfg, t).then(|| rec.new_thread_buf_of(t)))
                };
                stop_probes(env, jni, cfg, rec, &find);
            }
            rec.finish(tid(), now_ns());
            // Everything is written: give the threads' buffer memory back now
            // (each thread keeps its handle until its next event or its end).
            for (_, b) in lock(&SESSION_BUFS).iter() {
                *lock(b) = recorder::ThreadBuf::default();
            }
        }
        let mut caps = jvmtiCapabilities::default();
        if jvmti!(env, GetCapabilities, &mut caps) == JVMTI_ERROR_NONE {
            jvmti!(env, RelinquishCapabilities, &caps);
        }
    }
    lock(&SESSION_BUFS).clear();
    let rec = RECORDER.take();
    let cfg = CONFIG.take();
    // Callbacks that got the session's state before it was taken may still
    // be using it; we are a guarded callback ourselves. Once the others are
    // done, nothing can reach it any more: free it (this unmaps and closes
    // the stream). If one lingers, leak it rather than risk a crash.
    if others_done_within(std::time::Duration::from_secs(2)) {
        drop(rec);
        drop(cfg);
    } else {
        std::mem::forget(rec);
        std::mem::forget(cfg);
    }
}

/// Stops method tracing at the end of an attach session (the agent is
/// disabled already, so the hook leaves classes alone): if the session
/// traced methods, retransforms the classes with selected methods back to
/// their original bytes; then writes every thread's buffered events into
/// its stream buffer of this session (`buf_of(tid)`, which gives a thread
/// that recorded nothing else in this session a new buffer). Frames still
/// running an instrumented version keep calling the probes until they
/// return; those events are discarded at the next attach.
///
/// # Safety
/// Live phase, with the agent's `env` and the calling thread's `jni` (or null).
unsafe fn stop_probes(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    cfg: &Config,
    rec: &Recorder,
    buf_of: &dyn Fn(u32) -> Option<SharedBuf>,
) {
    if !probe::class::ready() || jni.is_null() {
        return;
    }
    if classes::hook_needed(cfg) {
        // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni`
        // (# Safety).
        unsafe {
            classes::retransform_loaded(env, jni, cfg);
        }
    }
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni`
    // (# Safety).
    unsafe {
        vthreads::drain_all(jni, rec, buf_of(tid()).as_ref());
    }
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni`
    // (# Safety).
    unsafe {
        drain::drain_all(jni, rec, buf_of);
    }
    demotion::record_short_dropped(rec, tid(), now_ns());
}

/// The thread rules applied to a thread known only by its tid (one whose
/// probes ran in a session but that recorded nothing else): its kernel name
/// is its Java name cut to 15 bytes.
fn thread_traced_by_comm(cfg: &Config, t: u32) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/self/task/{t}/comm")).unwrap_or_default();
    cfg.thread_traced(comm.trim_end_matches('\n'))
}

//! JVM events that explain time off CPU without method events: contended
//! monitor enter and Object.wait ([`monitors`]; which of them are class
//! loading: [`class_loading`]), garbage collection pauses
//! ([`gc`]), JIT code load/unload ([`jit`]; the ids of the methods they
//! name: [`method_ids`]), sampled allocations
//! ([`alloc`]), park and sleep ([`park_sleep`]), native method bindings
//! for the stacks ([`native_binds`]). This module decides which
//! families are on: it asks for their capabilities at load and enables
//! their events at VMInit (or attach).
//!
//! None of these needs MethodEntry/MethodExit or any capability that keeps
//! code interpreted or deoptimises it, so they are cheap enough to be on by
//! default (allocation sampling excepted). [`code`] tells what the kernel
//! recorder's stacks need (`stacks`). Each is switched by a directive of
//! the configuration: `monitor_contention`, `monitor_waiting`,
//! `garbage_collection`, `jit`, `object_allocation`, `park`, `sleep`,
//! `stacks`.
//!
//! A capability the JVM refuses turns that event family off and is reported
//! as an AGENT_ERROR record (after JVM_START); the rest keeps working.

mod alloc;
mod class_loading;
pub(crate) mod code;
mod gc;
mod jit;
mod method_ids;
mod monitors;
mod native_binds;
pub(crate) mod park_sleep;

use std::sync::{Mutex, OnceLock};

use jtrace_format::{Payload, Record};

use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::state::{now_ns, say, tid, RECORDER};
use crate::sys::*;

/// Event families enabled by the configuration whose capabilities the JVM granted.
#[derive(Debug, Default, Clone, Copy)]
struct Features {
    monitor_contention: bool,
    monitor_waiting: bool,
    gc: bool,
    jit: bool,
    alloc: bool,
    park: bool,
    sleep: bool,
    stacks: bool,
    /// Native method bindings are reported (for the stacks' JNI frames).
    native_binds: bool,
    /// Loaded into a live JVM: park and sleep natives are re-bound by
    /// [`park_sleep::attach`], not through NativeMethodBind.
    attach: bool,
}

static FEATURES: OnceLock<Features> = OnceLock::new();

/// Problems found at load time, recorded as AGENT_ERROR once JVM_START is written.
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// JVMTI's default and async-profiler's usual sampling interval.
const HEAP_SAMPLING_INTERVAL: jint = 512 * 1024;

fn note(msg: String) {
    lock(&NOTES).push(msg);
}

/// Asks for one capability; on refusal notes why and returns false.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
unsafe fn add_capability(env: *mut jvmtiEnv, what: &str, set: impl FnOnce(&mut jvmtiCapabilities)) -> bool {
    let mut caps = jvmtiCapabilities::default();
    set(&mut caps);
    // SAFETY: the caller passes the agent's `env` in the OnLoad or live phase (# Safety).
    let err = unsafe { jvmti!(env, AddCapabilities, &caps) };
    if err != JVMTI_ERROR_NONE {
        note(format!(
            "{what} events not recorded: the JVM refused the capability (JVMTI error {err})"
        ));
        return false;
    }
    true
}

/// At load: asks for the capabilities of the configured event families and
/// installs their callbacks. `attach` is true for a live VM (dynamic attach),
/// whose natives are bound already: park and sleep are then re-bound at
/// start ([`park_sleep::attach`]).
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn on_load(env: *mut jvmtiEnv, cfg: &Config, attach: bool, cb: &mut jvmtiEventCallbacks) {
    let mut f = Features::default();
    // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
    // (# Safety).
    unsafe {
        if cfg.monitor_contention || cfg.monitor_waiting {
            let ok = add_capability(env, "monitor", |c| c.set_can_generate_monitor_events(1));
            f.monitor_contention = ok && cfg.monitor_contention;
            f.monitor_waiting = ok && cfg.monitor_waiting;
            if ok {
                class_loading::on_load(env);
            }
        }
        if cfg.garbage_collection {
            f.gc = add_capability(env, "garbage collection", |c| {
                c.set_can_generate_garbage_collection_events(1)
            });
        }
        if cfg.jit {
            f.jit = add_capability(env, "compiled method", |c| {
                c.set_can_generate_compiled_method_load_events(1)
            });
        }
        if cfg.object_allocation {
            f.alloc = add_capability(env, "sampled allocation", |c| {
                c.set_can_generate_sampled_object_alloc_events(1)
            });
            // For the allocation sites' lines; without it they are -1.
            let mut caps = jvmtiCapabilities::default();
            caps.set_can_get_line_numbers(1);
            jvmti!(env, AddCapabilities, &caps);
        }
        f.attach = attach;
        f.stacks = cfg.stacks;
        if cfg.stacks && !attach {
            f.native_binds = add_capability(env, "native method bind (stacks' JNI frames)", |c| {
                c.set_can_generate_native_method_bind_events(1)
            });
        }
        if cfg.park || cfg.sleep {
            if attach {
                // No capability needed: RegisterNatives, at start.
                f.park = cfg.park;
                f.sleep = cfg.sleep;
                park_sleep::configure(f.park, f.sleep);
            } else if add_capability(env, "park/sleep (native method bind)", |c| {
                c.set_can_generate_native_method_bind_events(1);
                // The start phase then begins before java.base registers its
                // natives, so the bind callback can name them (park_sleep.rs).
                c.set_can_generate_early_vmstart(1);
            }) {
                f.park = cfg.park;
                f.sleep = cfg.sleep;
                park_sleep::configure(f.park, f.sleep);
            }
        }
    }
    monitors::install(cb);
    gc::install(cb);
    jit::install(cb);
    alloc::install(cb);
    code::install(cb);
    cb.NativeMethodBind = Some(native_binds::on_native_method_bind);
    let _ = FEATURES.set(f);
}

/// Events that must be on from Agent_OnLoad (native binds happen in the
/// primordial phase, long before VMInit).
pub(crate) fn early_events() -> Vec<jvmtiEvent> {
    match FEATURES.get() {
        Some(f) if (f.park || f.sleep || f.native_binds) && !f.attach => vec![JVMTI_EVENT_NATIVE_METHOD_BIND],
        _ => Vec::new(),
    }
}

/// At VMInit (or attach), after JVM_START and before the method probes
/// start: re-binds the park/sleep natives, so that no traced call begun
/// once the probes run sleeps or parks unseen (on attach, a call entered
/// between the two would show its sleep as the kernel's futex wait).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase; `jni` is the
/// current thread's JNIEnv or null (attach).
pub(crate) unsafe fn bind_park_sleep(env: *mut jvmtiEnv, jni: *mut JNIEnv) {
    let f = FEATURES.get().copied().unwrap_or_default();
    if !(f.park || f.sleep) {
        return;
    }
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni` or null
    // (# Safety).
    let r = unsafe {
        if f.attach {
            park_sleep::attach(env, jvm::jni_env(jni), f.park, f.sleep)
        } else if !jni.is_null() {
            park_sleep::start(env, jni, f.park, f.sleep)
        } else {
            Ok(())
        }
    };
    if let Err(e) = r {
        note(e);
    }
}

/// At VMInit (or attach), after JVM_START and [`bind_park_sleep`]: writes
/// the load-time notes, enables the configured events and asks for the
/// code compiled so far.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase; `jni` is the
/// current thread's JNIEnv or null (attach).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv) {
    let f = FEATURES.get().copied().unwrap_or_default();
    // A new session (attach) describes its methods and GC windows afresh.
    method_ids::new_session();
    gc::new_session();
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni` or null
    // (# Safety).
    unsafe {
        let mut wanted = Vec::new();
        if f.monitor_contention {
            wanted.extend([
                JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
                JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
            ]);
        }
        if f.monitor_waiting {
            wanted.extend([JVMTI_EVENT_MONITOR_WAIT, JVMTI_EVENT_MONITOR_WAITED]);
        }
        if f.gc {
            wanted.extend([
                JVMTI_EVENT_GARBAGE_COLLECTION_START,
                JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
            ]);
        }
        if f.jit {
            jit::track_code_sizes();
            wanted.extend([JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD]);
        }
        if f.alloc {
            let err = jvmti!(env, SetHeapSamplingInterval, HEAP_SAMPLING_INTERVAL);
            if err != JVMTI_ERROR_NONE {
                note(format!("cannot set the heap sampling interval (JVMTI error {err})"));
            }
            wanted.push(JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
        }
        for e in wanted {
            let err = jvm::set_event(env, e, true);
            if err != JVMTI_ERROR_NONE {
                note(format!("cannot enable JVMTI event {e} (error {err}); not recorded"));
            }
        }
        if f.jit {
            // Code compiled before now (during startup) is reported once, on this thread.
            let err = jvmti!(env, GenerateEvents, JVMTI_EVENT_COMPILED_METHOD_LOAD);
            if err != JVMTI_ERROR_NONE {
                note(format!(
                    "cannot list the code compiled before VMInit (JVMTI error {err})"
                ));
            }
        }
        // Last: describing every loaded class for the stacks takes a while
        // (tens of thousands of methods), and on attach the method probes are
        // already on; the blocks they time must be named from the start.
        if f.native_binds {
            native_binds::start(env);
        }
        if f.stacks {
            let notes = code::start(env, jni);
            notes.into_iter().for_each(note);
        }
    }
    write_notes();
}

/// Writes the pending notes as AGENT_ERROR records (the agent keeps running).
fn write_notes() {
    let notes = std::mem::take(&mut *lock(&NOTES));
    let Some(rec) = RECORDER.get() else { return };
    for m in notes {
        say(&m);
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(m),
        });
    }
}

//! Recording on the calling thread: its [`ThreadState`], registering it
//! (thread rules, THREAD_START) and appending a record to its buffer, after
//! whatever its bytecode probes buffered ([`crate::probe::drain`]).

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use jtrace_format::{kind, Payload, Record, ThreadStart};

use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::probe::drain;
use crate::recorder::{Recorder, SharedBuf};
use crate::state::{active, now_ns, tid, ThreadState, NAMED, SESSION, SESSION_BUFS};
use crate::sys::*;

thread_local! {
    /// Per-thread recording state.
    static STATE: RefCell<ThreadState> = RefCell::new(ThreadState::default());
}

/// Runs `f` on this thread's state; if it is unavailable (thread teardown,
/// or re-entry) the event is counted as lost instead.
pub(crate) fn with_state(rec: &Recorder, f: impl FnOnce(&mut ThreadState)) {
    let ok = STATE
        .try_with(|s| match s.try_borrow_mut() {
            Ok(mut st) => {
                let session = SESSION.load(Ordering::Acquire);
                if st.session != session {
                    // First event of this thread in a new session (attach):
                    // forget the old one.
                    *st = ThreadState {
                        session,
                        ..ThreadState::default()
                    };
                }
                if !st.registered {
                    // A thread whose probe buffer predates this session.
                    register_own(rec, &mut st);
                }
                // Method events the bytecode probes buffered come first.
                drain::drain_own(rec, &mut st);
                f(&mut st);
                true
            }
            Err(_) => false,
        })
        .unwrap_or(false);
    if !ok {
        rec.count_lost(1);
    }
}

/// Registers the calling thread: decides the thread filter from its name and
/// records THREAD_START. Threads JVMTI cannot name are traced under the name
/// "" but get no THREAD_START.
///
/// # Safety
/// On a Java thread, with the agent's `env` and the thread's `jni`; `thread`
/// is the calling thread's reference.
pub(crate) unsafe fn register(
    st: &mut ThreadState,
    rec: &Recorder,
    cfg: &Config,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
) {
    st.registered = true;
    st.stack.clear();
    // SAFETY: the caller guarantees the agent's `env`, this thread's `jni` and its own `thread`
    // (# Safety).
    let info = unsafe { jvm::thread_info(env, jni, thread) };
    let name = info.as_ref().map_or("", |i| i.name.as_str());
    st.traced = cfg.thread_traced(name);
    if !st.traced {
        return;
    }
    let buf = rec.new_thread_buf();
    lock(&SESSION_BUFS).push((tid(), buf.clone()));
    // Named already (and only this once: a later thread on a reused tid is not).
    let named = {
        let mut n = lock(&NAMED);
        n.iter().position(|&t| t == tid()).map(|i| n.swap_remove(i)).is_some()
    };
    if let (Some(i), false) = (info, named) {
        let payload = Payload::ThreadStart(ThreadStart {
            daemon: i.daemon as u32,
            name: i.name,
            group: i.group,
            parent: String::new(),
        });
        rec.push(
            &buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
    }
    st.buf = Some(buf);
}

/// [`register`] for a caller that has no reference to its own thread (a
/// JNI native, or a thread whose probes outlived a session): asks JVMTI
/// for it.
///
/// # Safety
/// On a Java thread whose JNIEnv is `jni`, with the agent's `env`.
pub(crate) unsafe fn register_current(
    st: &mut ThreadState,
    rec: &Recorder,
    cfg: &Config,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
) {
    let mut thread: jthread = std::ptr::null_mut();
    // SAFETY: the caller guarantees the agent's `env` and this Java thread's `jni` (# Safety).
    if unsafe { jvmti!(env, GetCurrentThread, &mut thread) } == JVMTI_ERROR_NONE {
        // SAFETY: the caller guarantees the agent's `env` and this Java thread's `jni` (# Safety).
        unsafe {
            register(st, rec, cfg, env, jni, thread, now_ns());
        }
        // SAFETY: the caller guarantees the agent's `env` and this Java thread's `jni` (# Safety).
        unsafe {
            jvm::delete_local(jni, thread);
        }
    }
}

/// Registers the calling thread in the current session if it has a probe
/// buffer from an earlier one (its `Probe` object outlives sessions, so
/// `register0` is not called again).
fn register_own(rec: &Recorder, st: &mut ThreadState) {
    let Some((_, jni)) = drain::own_probe() else {
        return;
    };
    let Some((_, cfg)) = active() else { return };
    let env = jvm::env();
    if jni.is_null() || env.is_null() {
        return;
    }
    // SAFETY: on a Java thread with its JNIEnv; the thread reference is local.
    unsafe { register_current(st, rec, cfg, env, jni) };
}

/// Records `payload()` on the calling Java thread, registering the thread
/// first (THREAD_START) if this is its first event. Returns whether a record
/// was written (false for excluded threads or when the agent is off).
/// `payload` runs only for traced threads, so costly lookups go there.
///
/// # Safety
/// Must run on a Java thread in a JVMTI callback or a JNI native, with
/// `env` the agent's environment and `jni` the thread's JNIEnv (or null;
/// `thread` may be null for the current thread).
pub(crate) unsafe fn record_java(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) -> bool {
    // SAFETY: the caller guarantees the agent's `env`, this thread's `jni` or null, and `thread`
    // (# Safety).
    unsafe { record_java_block(env, jni, thread, ts, payload, || false) }
}

/// [`record_java`] for a record that may begin a JVM-level block which is
/// class loading: `class_loading()`, asked only when the thread has traced
/// calls open, tells, and such a block does not count as blocked inside
/// them (it happens in a call site's first executions only: see
/// `events/class_loading.rs`).
///
/// # Safety
/// As [`record_java`].
pub(crate) unsafe fn record_java_block(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
    class_loading: impl FnOnce() -> bool,
) -> bool {
    let Some((rec, cfg)) = active() else { return false };
    let mut done = false;
    with_state(rec, |st| {
        if !st.registered {
            // SAFETY: the caller upholds `record_java`'s contract (# Safety).
            unsafe {
                register(st, rec, cfg, env, jni, thread, ts);
            }
        }
        if !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        let payload = payload();
        if blocks(&payload) {
            if st.watch.in_call() && class_loading() {
                st.watch.class_loading_begins();
            } else {
                st.watch.block_begins();
            }
        }
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
        done = true;
    });
    done
}

/// Whether a record says the thread begins a JVM-level block (contended
/// monitor, wait, park, sleep): the calls open on it are blocked inside.
fn blocks(p: &Payload) -> bool {
    matches!(
        p,
        Payload::Jvm(
            kind::MONITOR_CONTENDED_ENTER | kind::MONITOR_WAIT | kind::PARK_BEGIN | kind::SLEEP_BEGIN,
            _
        )
    )
}

/// Records on the calling thread without any JNI or JVMTI call (GC callbacks
/// run with the VM stopped, where neither may be used). A thread seen for
/// the first time gets a buffer but no THREAD_START: these are the VM's own
/// threads, which the trace names from the kernel's comm.
pub(crate) fn record_raw(ts: u64, payload: Payload) {
    let Some((rec, _)) = active() else { return };
    with_state(rec, |st| {
        if !st.registered {
            st.registered = true;
            st.traced = true;
            st.buf = Some(rec.new_thread_buf());
        }
        if !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
    });
}

/// Records on the calling thread only if it is registered already (no JNI
/// or JVMTI call: the end of a park or sleep may have an exception pending).
pub(crate) fn record_registered(ts: u64, payload: Payload) {
    let Some((rec, _)) = active() else { return };
    with_state(rec, |st| {
        if !st.registered || !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
    });
}

/// Runs `f` with the calling thread's stream buffer, registering the thread
/// without any JNI or JVMTI call if it is new (as [`record_raw`] does): a
/// carrier writing the records of the virtual thread it runs, whose
/// identity JVMTI would give instead of the carrier's. `None` for a thread
/// the rules exclude.
pub(crate) fn with_carrier_buf(rec: &Recorder, f: impl FnOnce(Option<&SharedBuf>)) {
    let mut f = Some(f);
    with_state(rec, |st| {
        if !st.registered {
            st.registered = true;
            st.traced = true;
            st.buf = Some(rec.new_thread_buf());
        }
        let buf = if st.traced { st.buf.as_ref() } else { None };
        if let Some(f) = f.take() {
            f(buf);
        }
    });
}

//! The natives through which the bytecode probes hand their buffers to the
//! agent, `Probe.register0` and `Probe.flush0` (a virtual thread's are
//! [`crate::vthreads`]'), and the definition of
//! `jtrace.Probe` with them bound (`bindWaits0` is park and sleep's,
//! [`crate::events::park_sleep`]).

use std::ffi::c_void;

use crate::jvm::{self, jni};
use crate::probe::class;
use crate::probe::drain;
use crate::state::{active, guard, tid};
use crate::sys::*;
use crate::thread::{register_current, with_state};
use crate::vthreads;

/// Defines `jtrace.Probe` with its natives bound, unless an earlier session
/// did (a later attach reuses the class, whose threads keep their buffers).
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn define_probe_class(jni: *mut JNIEnv) -> Result<(), String> {
    if class::ready() {
        return Ok(());
    }
    let mut natives = vec![
        class::native(c"register0", c"(Ljtrace/Probe;)V", register0 as *mut c_void),
        class::native(c"flush0", c"()V", flush0 as *mut c_void),
    ];
    natives.extend(vthreads::natives());
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe { class::define(jni, &natives) }
}

/// `Probe.register0(Probe p)`: the calling thread's first probe call.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.register0`, with the calling thread's `jni`
/// and live local references.
unsafe extern "C" fn register0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.register0", || {
        let Some((rec, cfg)) = active() else { return };
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        let global = unsafe { jni!(jni, NewGlobalRef, probe) }.unwrap_or(std::ptr::null_mut());
        if global.is_null() {
            return;
        }
        // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
        // (# Safety).
        unsafe {
            drain::set_own_probe(global, jni);
        }
        with_state(rec, |st| {
            if !st.registered {
                // SAFETY: the JVM calls this native with the calling thread's `jni` and live local
                // references (# Safety).
                unsafe {
                    register_current(st, rec, cfg, jvm::env(), jni);
                }
            }
            let buf = if st.traced { st.buf.clone() } else { None };
            drain::register(global, tid(), buf);
        });
    });
}

/// `Probe.flush0()`: the calling thread's buffer is full.
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.flush0`, with the calling thread's `jni`
/// and live local references.
unsafe extern "C" fn flush0(_jni: *mut JNIEnv, _class: jclass) {
    guard("Probe.flush0", || {
        let Some((rec, _)) = active() else { return };
        // with_state drains the buffer before running the closure.
        with_state(rec, |_| {});
    });
}

//! Garbage collection pauses: GC_START/GC_END, recorded on the JVM thread
//! that reports them without any JNI or JVMTI call (the VM is stopped), as
//! one window however the reports nest.

use std::sync::atomic::{AtomicBool, Ordering};

use jtrace_format::{kind, JvmBlock, Payload};

use crate::state::{guard, now_ns};
use crate::sys::*;
use crate::thread::record_raw;

/// A GC_START is recorded and its GC_END is not.
static GC_OPEN: AtomicBool = AtomicBool::new(false);

/// Installs the GC callbacks (their events are enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.GarbageCollectionStart = Some(on_gc_start);
    cb.GarbageCollectionFinish = Some(on_gc_finish);
}

/// At the start of a session: no GC window is open in it.
pub(super) fn new_session() {
    GC_OPEN.store(false, Ordering::SeqCst);
}

fn gc_block(k: u16) -> Payload {
    Payload::Jvm(
        k,
        JvmBlock {
            arg: 0,
            class: String::new(),
        },
    )
}

/// # Safety
/// Called by the JVM as the GarbageCollectionStart callback.
unsafe extern "C" fn on_gc_start(_env: *mut jvmtiEnv) {
    let ts = now_ns();
    guard("GarbageCollectionStart", || {
        // Started before the events were enabled, or nested: one window.
        if !GC_OPEN.swap(true, Ordering::SeqCst) {
            record_raw(ts, gc_block(kind::GC_START));
        }
    });
}

/// # Safety
/// Called by the JVM as the GarbageCollectionFinish callback.
unsafe extern "C" fn on_gc_finish(_env: *mut jvmtiEnv) {
    let ts = now_ns();
    guard("GarbageCollectionFinish", || {
        if GC_OPEN.swap(false, Ordering::SeqCst) {
            record_raw(ts, gc_block(kind::GC_END));
        }
    });
}

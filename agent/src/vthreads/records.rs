//! A virtual thread's own records, whichever way its mounts are followed
//! ([`crate::vthreads`]): its identity (Java id, name), its
//! VTHREAD_* records on the calling carrier, and its probe buffer (written
//! out under its own record tid when full, at its end and at VM death).

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use jtrace_format::{kind, virtual_thread_tid, JvmBlock, Payload};

use crate::jvm::{self, clear_exception, jni};
use crate::mutex::lock;
use crate::probe::class::take_buffer;
use crate::probe::{self, batch};
use crate::recorder::{Recorder, SharedBuf};
use crate::state::active;
use crate::sys::*;
use crate::thread::{record_raw, with_carrier_buf};

/// jfieldID of `Thread.name`.
static NAME_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// jfieldID of `Thread.tid` (a thread's Java id).
static TID_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// jfieldID of `Probe.threadId`.
static PROBE_THREAD_ID: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// Live virtual threads' probe buffers (global references), by Java thread id.
pub(crate) static PROBES: Mutex<Option<HashMap<u64, usize>>> = Mutex::new(None);

/// Looks up `java.lang.Thread`'s `tid` and `name` fields (`thread` is its
/// class); returns whether `tid` exists.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn find_fields(jni: *mut JNIEnv, thread: jclass) -> bool {
    let field = |name: &CStr, sig: &CStr| {
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        let f = unsafe { jni!(jni, GetFieldID, thread, name.as_ptr(), sig.as_ptr()) }.unwrap_or(std::ptr::null_mut());
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        unsafe {
            clear_exception(jni);
        }
        f
    };
    TID_FIELD.store(field(c"tid", c"J"), Ordering::SeqCst);
    NAME_FIELD.store(field(c"name", c"Ljava/lang/String;"), Ordering::SeqCst);
    !TID_FIELD.load(Ordering::SeqCst).is_null()
}

/// The Java thread id of `thread`.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` a live `java.lang.Thread` reference.
pub(crate) unsafe fn java_id(jni: *mut JNIEnv, thread: jthread) -> Option<u64> {
    let f = TID_FIELD.load(Ordering::Relaxed);
    if f.is_null() || thread.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
    (unsafe { jni!(jni, GetLongField, thread, f) }).map(|id| id as u64)
}

/// Records `k` for the virtual thread `thread` on the calling carrier.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` a live `java.lang.Thread` reference.
pub(crate) unsafe fn record(jni: *mut JNIEnv, thread: jthread, ts: u64, k: u16, class: impl FnOnce() -> String) {
    if active().is_none() {
        return;
    }
    // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
    let Some(id) = (unsafe { java_id(jni, thread) }) else {
        return;
    };
    record_raw(
        ts,
        Payload::Jvm(
            k,
            JvmBlock {
                arg: id,
                class: class(),
            },
        ),
    );
}

/// A virtual thread ended, on its carrier: writes out its probe buffer and
/// records VTHREAD_END with its name (named again: a name set after the
/// start shows here).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` a live `java.lang.Thread` reference.
pub(crate) unsafe fn end(jni: *mut JNIEnv, thread: jthread, ts: u64, name: impl FnOnce() -> String) {
    let Some((rec, _)) = active() else { return };
    // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
    unsafe {
        if let Some(id) = java_id(jni, thread) {
            let probe = lock(&PROBES).as_mut().and_then(|p| p.remove(&id));
            if let Some(probe) = probe {
                with_carrier_buf(rec, |buf| drain(jni, rec, buf, probe as jobject, id));
                probe::class::forget_slot(jni, probe as jobject);
                jni!(jni, DeleteGlobalRef, probe as jobject);
            }
        }
        record(jni, thread, ts, kind::VTHREAD_END, name);
    }
}

/// `thread`'s name, read from `Thread.name` (JVMTI's GetThreadInfo wants
/// `can_support_virtual_threads` for a virtual thread); "" if none.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` a live `java.lang.Thread` reference.
pub(crate) unsafe fn thread_name(jni: *mut JNIEnv, thread: jthread) -> String {
    let f = NAME_FIELD.load(Ordering::Relaxed);
    if f.is_null() || thread.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
    unsafe {
        let s = jni!(jni, GetObjectField, thread, f).unwrap_or(std::ptr::null_mut());
        if s.is_null() {
            return String::new();
        }
        let chars = jni!(jni, GetStringUTFChars, s, std::ptr::null_mut()).unwrap_or(std::ptr::null());
        let name = if chars.is_null() {
            clear_exception(jni);
            String::new()
        } else {
            let n = CStr::from_ptr(chars).to_string_lossy().into_owned();
            jni!(jni, ReleaseStringUTFChars, s, chars);
            n
        };
        jvm::delete_local(jni, s);
        name
    }
}

/// Writes a virtual thread's buffered method events (probe `probe`, Java
/// id `id`) into `buf`, under the virtual thread's record tid.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `probe` a live reference.
pub(crate) unsafe fn drain(jni: *mut JNIEnv, rec: &Recorder, buf: Option<&SharedBuf>, probe: jobject, id: u64) {
    let tid = virtual_thread_tid(id);
    // SAFETY: the caller guarantees this thread's `jni` and a live `probe` (# Safety).
    unsafe {
        take_buffer(jni, probe, |block| match (buf, tid) {
            (Some(b), Some(tid)) => rec.encode_with(b, |out| batch::encode_events(out, tid, block, None)),
            _ => rec.count_lost(block.events.len() as u64),
        });
    }
    if let Some(b) = buf {
        rec.flush_if_full(b);
    }
}

/// The Java thread id a virtual thread's `Probe` holds.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `probe` a live `jtrace.Probe` reference.
pub(crate) unsafe fn probe_thread_id(jni: *mut JNIEnv, probe: jobject) -> Option<u64> {
    let mut f = PROBE_THREAD_ID.load(Ordering::Relaxed);
    if f.is_null() {
        // SAFETY: the caller guarantees this thread's `jni` and a live `probe` (# Safety).
        f = unsafe {
            jni!(
                jni,
                GetFieldID,
                probe::class::class(),
                c"threadId".as_ptr(),
                c"J".as_ptr()
            )
        }
        .unwrap_or(std::ptr::null_mut());
        // SAFETY: the caller guarantees this thread's `jni` and a live `probe` (# Safety).
        unsafe {
            clear_exception(jni);
        }
        if f.is_null() {
            return None;
        }
        PROBE_THREAD_ID.store(f, Ordering::Relaxed);
    }
    // SAFETY: the caller guarantees this thread's `jni` and a live `probe` (# Safety).
    (unsafe { jni!(jni, GetLongField, probe, f) }).map(|v| v as u64)
}

/// Writes every live virtual thread's buffered events into `buf` (VM
/// death, the end of an attach session); `None` drops them.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn drain_all(jni: *mut JNIEnv, rec: &Recorder, buf: Option<&SharedBuf>) {
    if jni.is_null() {
        return;
    }
    let all: Vec<(u64, usize)> = lock(&PROBES)
        .as_ref()
        .map(|p| p.iter().map(|(&id, &probe)| (id, probe)).collect())
        .unwrap_or_default();
    for (id, probe) in all {
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv, checked non-null here
        // (# Safety).
        unsafe {
            drain(jni, rec, buf, probe as jobject, id);
        }
    }
}

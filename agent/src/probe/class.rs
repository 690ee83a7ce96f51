//! The helper class `jtrace.Probe` (agent/java/jtrace/Probe.java, compiled
//! by build.rs) as the agent sees it: defining it into the bootstrap class
//! loader, and reading a thread's `Probe` object (its event buffer, its
//! slot in `Probe.BY_THREAD`) through JNI field and array access, never
//! calling into Java.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

use crate::jvm::{self, clear_exception, jni, jvmti};
use crate::probe::batch::Block;
use crate::state::debug;
use crate::sys::*;

/// The compiled helper class.
static PROBE_CLASS_FILE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jtrace/Probe.class"));

/// The probe class is defined and its natives registered: rewriting may start.
static READY: AtomicBool = AtomicBool::new(false);
/// Global reference to the probe class.
static CLASS: AtomicPtr<_jobject> = AtomicPtr::new(std::ptr::null_mut());
/// Field ids of `Probe.buf` ([J), `Probe.pos` (I), `Probe.base` and
/// `Probe.last` (J), `Probe.slot` (I) and of the static `Probe.BY_THREAD`.
static BUF_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
static POS_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
static BASE_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
static LAST_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
static SLOT_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
static BY_THREAD_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());

/// Whether `jtrace.Probe` is defined (once per JVM: a later attach reuses
/// the class, whose threads keep their buffers).
pub(crate) fn ready() -> bool {
    READY.load(Ordering::Acquire)
}

/// Global reference to `jtrace.Probe` (null until [`define`]).
pub(crate) fn class() -> jclass {
    CLASS.load(Ordering::SeqCst)
}

/// Defines `jtrace.Probe` in the bootstrap class loader (visible from every
/// loader), binds `natives`, looks up the fields the agent reads and
/// initialises the class.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`; `natives` point to
/// functions of the signatures they name.
pub(crate) unsafe fn define(jni: *mut JNIEnv, natives: &[JNINativeMethod]) -> Result<(), String> {
    // SAFETY: the caller guarantees the live phase, this Java thread's `jni` and valid `natives`
    // (# Safety).
    unsafe {
        let class = jni!(
            jni,
            DefineClass,
            c"jtrace/Probe".as_ptr(),
            std::ptr::null_mut(),
            PROBE_CLASS_FILE.as_ptr().cast(),
            PROBE_CLASS_FILE.len() as jsize
        )
        .unwrap_or(std::ptr::null_mut());
        if class.is_null() || clear_exception(jni) {
            return Err("bytecode rewriting: cannot define the probe class jtrace.Probe".into());
        }
        // Before anything initialises the class (GetFieldID and GetStaticMethodID
        // do): its initialiser looks up Unsafe.
        export_unsafe(jni, class);
        if jni!(jni, RegisterNatives, class, natives.as_ptr(), natives.len() as jint) != Some(0) {
            clear_exception(jni);
            return Err("bytecode rewriting: cannot register the probe natives".into());
        }
        let field = |name: &CStr, sig: &CStr| {
            let f = jni!(jni, GetFieldID, class, name.as_ptr(), sig.as_ptr()).unwrap_or(std::ptr::null_mut());
            clear_exception(jni);
            f
        };
        let fields = [
            (&BUF_FIELD, field(c"buf", c"[J")),
            (&POS_FIELD, field(c"pos", c"I")),
            (&BASE_FIELD, field(c"base", c"J")),
            (&LAST_FIELD, field(c"last", c"J")),
            (&SLOT_FIELD, field(c"slot", c"I")),
        ];
        let by_thread = jni!(
            jni,
            GetStaticFieldID,
            class,
            c"BY_THREAD".as_ptr(),
            c"[Ljtrace/Probe;".as_ptr()
        )
        .unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        let init =
            jni!(jni, GetStaticMethodID, class, c"init".as_ptr(), c"()V".as_ptr()).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        if init.is_null() || by_thread.is_null() || fields.iter().any(|(_, f)| f.is_null()) {
            return Err("bytecode rewriting: probe class lacks its members".into());
        }
        let global = jni!(jni, NewGlobalRef, class).unwrap_or(std::ptr::null_mut());
        if global.is_null() {
            return Err("bytecode rewriting: no global reference to the probe class".into());
        }
        jni!(jni, CallStaticVoidMethodA, global, init, std::ptr::null());
        if clear_exception(jni) {
            return Err("bytecode rewriting: initialising jtrace.Probe failed".into());
        }
        // `enter` indexes the marks unchecked: an id past them would throw in
        // the traced program, so the two sides' bound must agree.
        if marks_length(jni, global) != Some(MAX_METHOD_ID as jsize) {
            return Err(format!(
                "bytecode rewriting: jtrace.Probe's DEMOTED marks do not hold {MAX_METHOD_ID} method ids"
            ));
        }
        CLASS.store(global, Ordering::SeqCst);
        for (slot, f) in fields {
            slot.store(f, Ordering::SeqCst);
        }
        BY_THREAD_FIELD.store(by_thread, Ordering::SeqCst);
        READY.store(true, Ordering::Release);
        Ok(())
    }
}

/// Exports java.base's `jdk.internal.misc` to the probe class's module (the
/// boot loader's unnamed one), so that the probe can read `Thread.tid`
/// with Unsafe for its thread-id cache. Without the export the probe still
/// works, through its ThreadLocal alone (about 10 ns more per traced call).
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`; `class` is a valid reference to
/// `jtrace.Probe`.
unsafe fn export_unsafe(jni: *mut JNIEnv, class: jclass) {
    let env = jvm::env();
    if env.is_null() {
        return;
    }
    let mut java_base: jobject = std::ptr::null_mut();
    // SAFETY: the caller guarantees the live phase, this Java thread's `jni` and a valid `class`
    // (# Safety).
    unsafe {
        let err = jvmti!(
            env,
            GetNamedModule,
            std::ptr::null_mut(),
            c"java/lang".as_ptr(),
            &mut java_base
        );
        let probe_module = jni!(jni, GetModule, class).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        let err = if err != JVMTI_ERROR_NONE || java_base.is_null() || probe_module.is_null() {
            err
        } else {
            jvmti!(
                env,
                AddModuleExports,
                java_base,
                c"jdk.internal.misc".as_ptr(),
                probe_module
            )
        };
        if err != JVMTI_ERROR_NONE {
            debug(&format!(
            "cannot export jdk.internal.misc to jtrace.Probe (JVMTI error {err}): probes look up their buffer through a ThreadLocal"
        ));
        }
        jvm::delete_local(jni, java_base);
        jvm::delete_local(jni, probe_module);
    }
}

/// Reads and empties the Java buffer of `probe` (any thread's), calling
/// `f` with its events in place: the array is pinned with
/// GetPrimitiveArrayCritical (no copy), so `f` must not call JNI or block.
/// The next events then count from the last one (`base = last`). A pending
/// exception is set aside meanwhile.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null) and `probe` a live
/// reference to a `jtrace.Probe` (or null).
pub(crate) unsafe fn take_buffer(jni: *mut JNIEnv, probe: jobject, f: impl FnOnce(Block)) {
    let [buf_field, pos_field, base_field, last_field] =
        [&BUF_FIELD, &POS_FIELD, &BASE_FIELD, &LAST_FIELD].map(|f| f.load(Ordering::SeqCst));
    if jni.is_null() || probe.is_null() || buf_field.is_null() {
        return;
    }
    // SAFETY: `jni` is this thread's JNIEnv and `probe` a live `jtrace.Probe`, both checked non-null
    // (# Safety).
    unsafe {
        let n = jni!(jni, GetIntField, probe, pos_field).unwrap_or(0).max(0) as usize;
        if n == 0 {
            return;
        }
        let pending = if jni!(jni, ExceptionCheck).unwrap_or(0) != 0 {
            let e = jni!(jni, ExceptionOccurred).unwrap_or(std::ptr::null_mut());
            jni!(jni, ExceptionClear);
            e
        } else {
            std::ptr::null_mut()
        };
        let base = jni!(jni, GetLongField, probe, base_field).unwrap_or(0) as u64;
        let last = jni!(jni, GetLongField, probe, last_field).unwrap_or(0);
        let arr = jni!(jni, GetObjectField, probe, buf_field).unwrap_or(std::ptr::null_mut());
        if !arr.is_null() {
            let len = jni!(jni, GetArrayLength, arr).unwrap_or(0).max(0) as usize;
            let data = jni!(jni, GetPrimitiveArrayCritical, arr, std::ptr::null_mut()).unwrap_or(std::ptr::null_mut());
            if !data.is_null() {
                f(Block {
                    base,
                    events: std::slice::from_raw_parts(data as *const jlong, n.min(len)),
                });
                // JNI_ABORT: nothing to copy back (the array was not changed).
                jni!(jni, ReleasePrimitiveArrayCritical, arr, data, 2);
                jni!(jni, SetIntField, probe, pos_field, 0);
                jni!(jni, SetLongField, probe, base_field, last);
            }
            jvm::delete_local(jni, arr);
            clear_exception(jni);
        }
        if !pending.is_null() {
            jni!(jni, Throw, pending);
            jvm::delete_local(jni, pending);
        }
    }
}

/// Empties the probe's slot in `Probe.BY_THREAD` if it still holds it, so
/// that the ended thread and its buffer can be collected.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `probe` a live reference to a
/// `jtrace.Probe`.
pub(crate) unsafe fn forget_slot(jni: *mut JNIEnv, probe: jobject) {
    let (slot_field, by_thread) = (
        SLOT_FIELD.load(Ordering::SeqCst),
        BY_THREAD_FIELD.load(Ordering::SeqCst),
    );
    let class = class();
    if slot_field.is_null() || by_thread.is_null() || class.is_null() {
        return;
    }
    // SAFETY: the caller guarantees this thread's `jni` and a live `jtrace.Probe` `probe` (# Safety).
    unsafe {
        let slot = jni!(jni, GetIntField, probe, slot_field).unwrap_or(-1);
        let slots = jni!(jni, GetStaticObjectField, class, by_thread).unwrap_or(std::ptr::null_mut());
        if slot >= 0 && !slots.is_null() {
            let held = jni!(jni, GetObjectArrayElement, slots, slot).unwrap_or(std::ptr::null_mut());
            if !held.is_null() && jni!(jni, IsSameObject, held, probe) == Some(1) {
                // Another thread may have taken the slot meanwhile: it then
                // misses it once and puts itself back.
                jni!(jni, SetObjectArrayElement, slots, slot, std::ptr::null_mut());
            }
            jvm::delete_local(jni, held);
        }
        jvm::delete_local(jni, slots);
        clear_exception(jni);
    }
}

/// A native of `jtrace.Probe`, for [`define`] or RegisterNatives.
pub(crate) fn native(name: &'static CStr, signature: &'static CStr, f: *mut c_void) -> JNINativeMethod {
    JNINativeMethod {
        name: name.as_ptr().cast_mut(),
        signature: signature.as_ptr().cast_mut(),
        fnPtr: f,
    }
}

/// Method ids are below this (`Probe.DEMOTED`'s length): `Probe.enter`
/// indexes its marks without a bounds check of its own, to stay a load
/// and a test. (The events could hold ids up to
/// [`jtrace_format::BATCH_METHOD_LIMIT`].)
pub(crate) const MAX_METHOD_ID: u32 = crate::probe::layout::MAX_METHODS;
/// Serialises the writers of `Probe.DEMOTED` (the demoter, a session's start).
static MARKS: Mutex<()> = Mutex::new(());

/// Marks method `ids` demoted in `Probe.DEMOTED`, so that their later
/// calls record nothing (each call records both its ends or neither: the
/// exit probes get what the entry probe returned); `clear` first forgets
/// every earlier demotion, for a new session, before its classes get their
/// probes: the marks are stable to the JIT, and only the end of the
/// previous session, which retransformed every class with probes back
/// (deoptimising all compiled code that had a mark as a constant), makes
/// clearing them safe. Returns false if the marks could not be written (no
/// demotion then took effect).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (a Java thread, live phase).
pub(crate) unsafe fn set_demoted(jni: *mut JNIEnv, ids: &[u32], clear: bool) -> bool {
    let class = class();
    if jni.is_null() || class.is_null() {
        return false;
    }
    let _writers = crate::mutex::lock(&MARKS);
    if ids.iter().any(|&i| i >= MAX_METHOD_ID) {
        return false;
    }
    // SAFETY: the caller guarantees `jni` is this Java thread's JNIEnv in the live phase (# Safety).
    unsafe {
        let Some(field) = static_field(jni, class, c"DEMOTED", c"[B") else {
            return false;
        };
        let marks = jni!(jni, GetStaticObjectField, class, field).unwrap_or(std::ptr::null_mut());
        if marks.is_null() || clear_exception(jni) {
            return false;
        }
        let mut ok = true;
        if clear {
            const BLOCK: u32 = 1 << 14;
            let zeros = [0i8; BLOCK as usize];
            for at in (0..MAX_METHOD_ID).step_by(BLOCK as usize) {
                jni!(
                    jni,
                    SetByteArrayRegion,
                    marks,
                    at as jsize,
                    BLOCK as jsize,
                    zeros.as_ptr()
                );
                if clear_exception(jni) {
                    ok = false;
                    break;
                }
            }
        }
        for &id in ids {
            if !ok {
                break;
            }
            ok = jni!(jni, SetByteArrayRegion, marks, id as jsize, 1, &1i8).is_some() && !clear_exception(jni);
        }
        jvm::delete_local(jni, marks);
        ok
    }
}

/// The length of `Probe.DEMOTED` (`MAX_METHODS`), if it can be read.
///
/// # Safety
/// `jni` is the calling Java thread's JNIEnv and `class` a valid reference to `jtrace.Probe`.
unsafe fn marks_length(jni: *mut JNIEnv, class: jclass) -> Option<jsize> {
    // SAFETY: the caller guarantees this Java thread's `jni` and a valid `class` (# Safety).
    unsafe {
        let field = static_field(jni, class, c"DEMOTED", c"[B")?;
        let marks = jni!(jni, GetStaticObjectField, class, field).unwrap_or(std::ptr::null_mut());
        if marks.is_null() || clear_exception(jni) {
            return None;
        }
        let len = jni!(jni, GetArrayLength, marks);
        jvm::delete_local(jni, marks);
        len
    }
}

/// A static field of the probe class (looked up at each demotion batch: they are few).
///
/// # Safety
/// `jni` is the calling Java thread's JNIEnv and `class` a valid class reference.
unsafe fn static_field(jni: *mut JNIEnv, class: jclass, name: &CStr, sig: &CStr) -> Option<jfieldID> {
    // SAFETY: the caller guarantees this Java thread's `jni` and a valid `class` (# Safety).
    let field =
        unsafe { jni!(jni, GetStaticFieldID, class, name.as_ptr(), sig.as_ptr()) }.unwrap_or(std::ptr::null_mut());
    // SAFETY: the caller guarantees this Java thread's `jni` and a valid `class` (# Safety).
    if field.is_null() || unsafe { clear_exception(jni) } {
        return None;
    }
    Some(field)
}

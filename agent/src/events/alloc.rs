//! Sampled allocations (SampledObjectAlloc, at the interval events/mod.rs
//! sets): size, class and the allocation site in application code.

use std::collections::HashMap;
use std::sync::Mutex;

use jtrace_format::{AllocSample, Payload};

use super::method_ids::code_method_id;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::recorder::Recorder;
use crate::state::{active, guard, now_ns};
use crate::sys::*;
use crate::thread::record_java;

/// Whether a method is the JDK's own (allocation sites skip those), by jmethodID.
static PLATFORM_METHODS: Mutex<Option<HashMap<usize, bool>>> = Mutex::new(None);

/// Frames an allocation site is looked for in.
const SITE_FRAMES: usize = 16;

/// Installs the allocation callback (its event is enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.SampledObjectAlloc = Some(on_sampled_alloc);
}

/// # Safety
/// Called by the JVM as the SampledObjectAlloc callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_sampled_alloc(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    _object: jobject,
    klass: jclass,
    size: jlong,
) {
    let ts = now_ns();
    guard("SampledObjectAlloc", || {
        let Some((rec, _)) = active() else { return };
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        let (method, line) = unsafe { alloc_site(rec, env, thread, ts) };
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            record_java(env, jni, thread, ts, || {
                Payload::Alloc(AllocSample {
                    size: size.max(0) as u64,
                    class: jvm::class_name(env, klass),
                    method,
                    line,
                })
            });
        }
    });
}

/// The site of a sampled allocation on `thread` (the allocating thread, in
/// its SampledObjectAlloc callback): the innermost frame of application
/// code, i.e. outside the JDK's own packages, else the innermost frame; as
/// (record id of its method, described if needed; source line or -1).
/// (0, -1) if the stack cannot be read.
///
/// # Safety
/// Inside a JVMTI callback: `env` is the agent's environment and `thread` a live thread reference.
unsafe fn alloc_site(rec: &Recorder, env: *mut jvmtiEnv, thread: jthread, ts: u64) -> (u64, i32) {
    let mut frames = [jvmtiFrameInfo::default(); SITE_FRAMES];
    let mut n: jint = 0;
    // SAFETY: the caller passes the agent's live `env` and a valid `thread` (# Safety).
    unsafe {
        let err = jvmti!(
            env,
            GetStackTrace,
            thread,
            0,
            SITE_FRAMES as jint,
            frames.as_mut_ptr(),
            &mut n
        );
        let frames = &frames[..if err == JVMTI_ERROR_NONE {
            n.clamp(0, SITE_FRAMES as jint) as usize
        } else {
            0
        }];
        let Some(&first) = frames.first() else {
            return (0, -1);
        };
        let site = frames
            .iter()
            .find(|f| !in_platform_code(env, f.method))
            .copied()
            .unwrap_or(first);
        let id = code_method_id(rec, env, site.method, ts).unwrap_or(0);
        (id, line_at(env, site.method, site.location))
    }
}

/// Whether `method` belongs to the JDK itself (java., javax., jdk., sun.,
/// com.sun.); remembered per method.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `method` a valid method id.
unsafe fn in_platform_code(env: *mut jvmtiEnv, method: jmethodID) -> bool {
    if let Some(&p) = lock(&PLATFORM_METHODS).as_ref().and_then(|m| m.get(&(method as usize))) {
        return p;
    }
    // SAFETY: the caller passes the agent's live `env` and a valid `method` (# Safety).
    let platform = unsafe { jvm::method_info(env, std::ptr::null_mut(), method) }.is_some_and(|m| {
        ["java.", "javax.", "jdk.", "sun.", "com.sun."]
            .iter()
            .any(|p| m.class.starts_with(p))
    });
    lock(&PLATFORM_METHODS)
        .get_or_insert_with(HashMap::new)
        .insert(method as usize, platform);
    platform
}

/// The source line of bytecode index `location` in `method`, or -1.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `method` a valid method id.
unsafe fn line_at(env: *mut jvmtiEnv, method: jmethodID, location: jlocation) -> i32 {
    let mut n: jint = 0;
    let mut table: *mut jvmtiLineNumberEntry = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's live `env` and a valid `method` (# Safety).
    if unsafe { jvmti!(env, GetLineNumberTable, method, &mut n, &mut table) } != JVMTI_ERROR_NONE || table.is_null() {
        return -1;
    }
    // SAFETY: `table` points to the `n` elements JVMTI returned, still allocated.
    let entries = unsafe { std::slice::from_raw_parts(table, n.max(0) as usize) };
    let line = entries
        .iter()
        .filter(|e| e.start_location <= location)
        .max_by_key(|e| e.start_location)
        .map_or(-1, |e| e.line_number);
    // SAFETY: `table` was allocated by JVMTI in `env` and is not used after this.
    unsafe {
        jvmti!(env, Deallocate, table.cast());
    }
    line
}

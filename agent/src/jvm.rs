//! The JVM the agent runs in: its two handles (the `JavaVM` and the agent's
//! JVMTI environment), the [`jvmti!`] and [`jni!`] call macros, and thin,
//! checked wrappers over the JVMTI/JNI calls the agent makes.
//!
//! Every wrapper returns `None`/an error code instead of panicking, frees what
//! JVMTI allocated (Deallocate) and deletes the local references it created.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::sys::*;

/// Calls a JVMTI function through the environment's function table; a missing
/// entry yields `JVMTI_ERROR_NOT_AVAILABLE` instead of a crash.
macro_rules! jvmti {
    ($env:expr, $f:ident $(, $a:expr)* $(,)?) => {{
        let env: *mut $crate::sys::jvmtiEnv = $env;
        match (**env).$f {
            Some(f) => f(env $(, $a)*),
            None => $crate::sys::JVMTI_ERROR_NOT_AVAILABLE,
        }
    }};
}
pub(crate) use jvmti;

/// Calls a JNI function through the environment's function table; `None`
/// if the table lacks it.
macro_rules! jni {
    ($env:expr, $f:ident $(, $a:expr)* $(,)?) => {{
        let env: *mut $crate::sys::JNIEnv = $env;
        match (**env).$f {
            Some(f) => Some(f(env $(, $a)*)),
            None => None,
        }
    }};
}
pub(crate) use jni;

/// JVMTI version requested from GetEnv: 1.2 exists in every JDK from 7 on,
/// and the agent uses nothing newer.
const JVMTI_VERSION_1_2: jint = 0x3001_0200;
/// JNI version requested from GetEnv for a thread's JNIEnv.
const JNI_VERSION_1_8: jint = 0x0001_0008;

/// The JavaVM (set at load; gives a JNIEnv to code called without one).
static VM: AtomicPtr<JavaVM> = AtomicPtr::new(std::ptr::null_mut());
/// The agent's one JVMTI environment, reused by every attach of this JVM.
static ENV: AtomicPtr<jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());

/// Connects to `vm` at load: returns the agent's JVMTI environment, the one
/// of an earlier attach (a JVM keeps one environment for the agent, however
/// often it is attached), else a new one; both handles are kept for
/// [`env`] and [`jni_env`].
///
/// # Safety
/// `vm` is the JavaVM the JVM passed to Agent_OnLoad/Agent_OnAttach, or null.
pub(crate) unsafe fn connect(vm: *mut JavaVM) -> Result<*mut jvmtiEnv, String> {
    // SAFETY: the caller guarantees `vm` is the JVM's JavaVM or null (# Safety).
    let env = unsafe { jvmti_env(vm) }?;
    VM.store(vm, Ordering::SeqCst);
    Ok(env)
}

/// # Safety
/// `vm` is the JavaVM the JVM passed to Agent_OnLoad/Agent_OnAttach, or null.
unsafe fn jvmti_env(vm: *mut JavaVM) -> Result<*mut jvmtiEnv, String> {
    let old = ENV.load(Ordering::SeqCst);
    if !old.is_null() {
        return Ok(old);
    }
    let mut envp: *mut c_void = std::ptr::null_mut();
    // SAFETY: `vm` is checked non-null and is the JVM's JavaVM (# Safety).
    unsafe {
        let get_env = if vm.is_null() { None } else { (**vm).GetEnv };
        let Some(get_env) = get_env else {
            return Err("the JavaVM has no GetEnv".into());
        };
        let rc = get_env(vm, &mut envp, JVMTI_VERSION_1_2);
        if rc != 0 || envp.is_null() {
            return Err(format!("cannot get a JVMTI 1.2 environment (JNI error {rc})"));
        }
        ENV.store(envp.cast(), Ordering::SeqCst);
        Ok(envp.cast())
    }
}

/// The agent's JVMTI environment (null before the first load).
pub(crate) fn env() -> *mut jvmtiEnv {
    ENV.load(Ordering::SeqCst)
}

/// A JNIEnv for the calling thread: `jni` if given, else the thread's own
/// from the JavaVM (null if the thread is not attached to the JVM).
///
/// # Safety
/// `jni` is null or the calling thread's JNIEnv.
pub(crate) unsafe fn jni_env(jni: *mut JNIEnv) -> *mut JNIEnv {
    if !jni.is_null() {
        return jni;
    }
    let vm = VM.load(Ordering::SeqCst);
    if vm.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `vm` is the non-null JavaVM stored by `connect`.
    unsafe {
        let Some(get_env) = (**vm).GetEnv else {
            return std::ptr::null_mut();
        };
        let mut p: *mut c_void = std::ptr::null_mut();
        if get_env(vm, &mut p, JNI_VERSION_1_8) != 0 {
            return std::ptr::null_mut();
        }
        p.cast()
    }
}

/// JNI's JavaVMAttachArgs.
#[repr(C)]
struct AttachArgs {
    version: jint,
    name: *mut c_char,
    group: jobject,
}

/// Attaches the calling native thread to the JVM as a daemon thread named
/// `name`; returns its JNIEnv (null if the JVM refused).
///
/// # Safety
/// On a thread the agent created, after [`connect`].
pub(crate) unsafe fn attach_daemon(name: &CStr) -> *mut JNIEnv {
    let vm = VM.load(Ordering::SeqCst);
    // SAFETY: `vm` is the non-null JavaVM stored by `connect`, on an agent thread (# Safety).
    let Some(attach) = (unsafe { vm.as_ref().and_then(|v| (**v).AttachCurrentThreadAsDaemon) }) else {
        return std::ptr::null_mut();
    };
    let mut args = AttachArgs {
        version: JNI_VERSION_1_8,
        name: name.as_ptr().cast_mut(),
        group: std::ptr::null_mut(),
    };
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the non-null JavaVM stored by `connect`, on an agent thread (# Safety).
    if unsafe { attach(vm, &mut p, (&mut args as *mut AttachArgs).cast()) } != 0 {
        return std::ptr::null_mut();
    }
    p.cast()
}

/// Detaches the calling thread, attached by [`attach_daemon`]. A thread
/// left attached waits in native code, and the JVM's exit waits up to
/// 0.3 s for such threads to block (HotSpot's
/// `VM_Exit::wait_for_threads_in_native_to_block`).
///
/// # Safety
/// On a thread [`attach_daemon`] attached, with no JNI frame of it in use.
pub(crate) unsafe fn detach_current() {
    let vm = VM.load(Ordering::SeqCst);
    // SAFETY: `vm` is the non-null JavaVM stored by `connect`, on a thread `attach_daemon` attached
    // (# Safety).
    if let Some(detach) = unsafe { vm.as_ref().and_then(|v| (**v).DetachCurrentThread) } {
        // SAFETY: `vm` is the non-null JavaVM stored by `connect`, on a thread `attach_daemon`
        // attached (# Safety).
        unsafe {
            detach(vm);
        }
    }
}

/// Clears (and returns whether there was) a pending Java exception, such
/// as the NoSuchMethodError of a failed lookup.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv.
pub(crate) unsafe fn clear_exception(jni: *mut JNIEnv) -> bool {
    // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
    if unsafe { jni!(jni, ExceptionCheck) }.unwrap_or(0) != 0 {
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
        unsafe {
            jni!(jni, ExceptionClear);
        }
        return true;
    }
    false
}

/// Copies a JVMTI-allocated C string and deallocates it.
///
/// # Safety
/// `p` is null or a NUL-terminated string allocated by `env`.
pub(crate) unsafe fn take_string(env: *mut jvmtiEnv, p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees `p` is a NUL-terminated string that `env` allocated (# Safety).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: `p` was allocated by JVMTI in `env` and is not used after this.
    unsafe {
        jvmti!(env, Deallocate, p.cast());
    }
    Some(s)
}

/// Deletes a JNI local reference (no-op for null).
///
/// # Safety
/// `jni` is the current thread's JNIEnv (or null) and `obj` a local reference of it.
pub(crate) unsafe fn delete_local(jni: *mut JNIEnv, obj: jobject) {
    if jni.is_null() || obj.is_null() {
        return;
    }
    // SAFETY: `jni` is this thread's JNIEnv, checked non-null, and `obj` its local reference
    // (# Safety).
    unsafe {
        if let Some(f) = (**jni).DeleteLocalRef {
            f(jni, obj);
        }
    }
}

/// Identity of a Java thread as JVMTI reports it.
pub(crate) struct ThreadInfo {
    /// Java thread name.
    pub name: String,
    /// Daemon flag.
    pub daemon: bool,
    /// Thread group name, "" when unknown.
    pub group: String,
}

/// Name, daemon flag and group name of `thread`; `None` when JVMTI has no
/// name for it.
///
/// # Safety
/// Must run inside a JVMTI callback with that callback's `env` and `jni`.
pub(crate) unsafe fn thread_info(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> Option<ThreadInfo> {
    let mut info = jvmtiThreadInfo::default();
    // SAFETY: the caller guarantees this callback's `env` and `jni` (# Safety).
    unsafe {
        if jvmti!(env, GetThreadInfo, thread, &mut info) != JVMTI_ERROR_NONE {
            return None;
        }
        let name = take_string(env, info.name);
        let mut group = String::new();
        if !info.thread_group.is_null() {
            let mut g = jvmtiThreadGroupInfo::default();
            if jvmti!(env, GetThreadGroupInfo, info.thread_group, &mut g) == JVMTI_ERROR_NONE {
                group = take_string(env, g.name).unwrap_or_default();
                delete_local(jni, g.parent);
            }
        }
        delete_local(jni, info.thread_group);
        delete_local(jni, info.context_class_loader);
        Some(ThreadInfo {
            name: name?,
            daemon: info.is_daemon != 0,
            group,
        })
    }
}

/// Class (dotted), name and signature of a method.
pub(crate) struct MethodInfo {
    /// Declaring class, dotted (`com.acme.Foo`, `Outer$Inner`).
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
}

/// Looks up what `method` is; `None` if JVMTI cannot tell (e.g. an obsolete method).
///
/// # Safety
/// Must run inside a JVMTI callback with that callback's `env` and `jni`.
pub(crate) unsafe fn method_info(env: *mut jvmtiEnv, jni: *mut JNIEnv, method: jmethodID) -> Option<MethodInfo> {
    let mut name: *mut c_char = std::ptr::null_mut();
    let mut sig: *mut c_char = std::ptr::null_mut();
    // SAFETY: the caller guarantees this callback's `env` and `jni` (# Safety).
    unsafe {
        if jvmti!(env, GetMethodName, method, &mut name, &mut sig, std::ptr::null_mut()) != JVMTI_ERROR_NONE {
            return None;
        }
        let name = take_string(env, name);
        let signature = take_string(env, sig).unwrap_or_default();
        let mut klass: jclass = std::ptr::null_mut();
        if jvmti!(env, GetMethodDeclaringClass, method, &mut klass) != JVMTI_ERROR_NONE {
            return None;
        }
        let mut csig: *mut c_char = std::ptr::null_mut();
        let err = jvmti!(env, GetClassSignature, klass, &mut csig, std::ptr::null_mut());
        delete_local(jni, klass);
        if err != JVMTI_ERROR_NONE {
            return None;
        }
        let class = crate::config::class_name_from_signature(&take_string(env, csig)?);
        Some(MethodInfo {
            class,
            name: name?,
            signature,
        })
    }
}

/// Dotted name of a class, "" if JVMTI cannot tell.
///
/// # Safety
/// `env` is a live JVMTI environment and `klass` a valid reference or null.
pub(crate) unsafe fn class_name(env: *mut jvmtiEnv, klass: jclass) -> String {
    if klass.is_null() {
        return String::new();
    }
    let mut sig: *mut c_char = std::ptr::null_mut();
    // SAFETY: the caller guarantees a live `env` and a valid non-null `klass` (# Safety).
    if unsafe { jvmti!(env, GetClassSignature, klass, &mut sig, std::ptr::null_mut()) } != JVMTI_ERROR_NONE {
        return String::new();
    }
    // SAFETY: the caller guarantees a live `env` and a valid non-null `klass` (# Safety).
    (unsafe { take_string(env, sig) })
        .map(|s| crate::config::class_name_from_signature(&s))
        .unwrap_or_default()
}

/// Dotted class name of an object, "" for null or when unknown.
///
/// # Safety
/// `jni` is the current thread's JNIEnv (or null), `obj` a valid reference or null.
pub(crate) unsafe fn object_class_name(env: *mut jvmtiEnv, jni: *mut JNIEnv, obj: jobject) -> String {
    if obj.is_null() || jni.is_null() {
        return String::new();
    }
    // SAFETY: `jni` is this thread's JNIEnv, checked non-null, and `obj` a valid reference (# Safety).
    unsafe {
        let Some(get) = (**jni).GetObjectClass else {
            return String::new();
        };
        let klass = get(jni, obj);
        let name = class_name(env, klass);
        delete_local(jni, klass);
        name
    }
}

/// A system property of the VM, if it has one.
///
/// # Safety
/// `env` is a valid JVMTI environment.
pub(crate) unsafe fn system_property(env: *mut jvmtiEnv, key: &CStr) -> Option<String> {
    let mut v: *mut c_char = std::ptr::null_mut();
    // SAFETY: the caller guarantees `env` is valid (# Safety).
    if unsafe { jvmti!(env, GetSystemProperty, key.as_ptr(), &mut v) } != JVMTI_ERROR_NONE {
        return None;
    }
    // SAFETY: the caller guarantees `env` is valid (# Safety).
    unsafe { take_string(env, v) }
}

/// Enables or disables delivery of `event` for all threads.
///
/// # Safety
/// `env` is a valid JVMTI environment.
pub(crate) unsafe fn set_event(env: *mut jvmtiEnv, event: jvmtiEvent, on: bool) -> jvmtiError {
    let mode = if on { JVMTI_ENABLE } else { JVMTI_DISABLE };
    // SAFETY: the caller guarantees `env` is valid (# Safety).
    unsafe {
        jvmti!(
            env,
            SetEventNotificationMode,
            mode,
            event,
            std::ptr::null_mut::<_jobject>()
        )
    }
}

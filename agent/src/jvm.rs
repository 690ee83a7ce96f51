//! Thin, checked wrappers over the JVMTI/JNI calls the agent makes.
//!
//! Every wrapper returns `None`/an error code instead of panicking, frees what
//! JVMTI allocated (Deallocate) and deletes the local references it created.

use std::ffi::{c_char, CStr};

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

/// Copies a JVMTI-allocated C string and deallocates it.
///
/// # Safety
/// `p` is null or a NUL-terminated string allocated by `env`.
pub unsafe fn take_string(env: *mut jvmtiEnv, p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = CStr::from_ptr(p).to_string_lossy().into_owned();
    jvmti!(env, Deallocate, p.cast());
    Some(s)
}

/// Deletes a JNI local reference (no-op for null).
///
/// # Safety
/// `jni` is the current thread's JNIEnv (or null) and `obj` a local reference of it.
pub unsafe fn delete_local(jni: *mut JNIEnv, obj: jobject) {
    if jni.is_null() || obj.is_null() {
        return;
    }
    if let Some(f) = (**jni).DeleteLocalRef {
        f(jni, obj);
    }
}

/// Identity of a Java thread as JVMTI reports it.
pub struct ThreadInfo {
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
pub unsafe fn thread_info(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> Option<ThreadInfo> {
    let mut info = jvmtiThreadInfo::default();
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

/// Class (dotted), name and signature of a method.
pub struct MethodInfo {
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
pub unsafe fn method_info(env: *mut jvmtiEnv, jni: *mut JNIEnv, method: jmethodID) -> Option<MethodInfo> {
    let mut name: *mut c_char = std::ptr::null_mut();
    let mut sig: *mut c_char = std::ptr::null_mut();
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

/// A system property of the VM, if it has one.
///
/// # Safety
/// `env` is a valid JVMTI environment.
pub unsafe fn system_property(env: *mut jvmtiEnv, key: &CStr) -> Option<String> {
    let mut v: *mut c_char = std::ptr::null_mut();
    if jvmti!(env, GetSystemProperty, key.as_ptr(), &mut v) != JVMTI_ERROR_NONE {
        return None;
    }
    take_string(env, v)
}

/// Enables or disables delivery of `event` for all threads.
///
/// # Safety
/// `env` is a valid JVMTI environment.
pub unsafe fn set_event(env: *mut jvmtiEnv, event: jvmtiEvent, on: bool) -> jvmtiError {
    let mode = if on { JVMTI_ENABLE } else { JVMTI_DISABLE };
    jvmti!(
        env,
        SetEventNotificationMode,
        mode,
        event,
        std::ptr::null_mut::<_jobject>()
    )
}

//! JIT code: COMPILED_METHOD_LOAD/UNLOAD with each code range's method.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

use jtrace_format::{CompiledMethod, Payload};

use super::method_ids::{code_method_id, recorded_id};
use crate::mutex::lock;
use crate::state::{active, guard, now_ns};
use crate::sys::*;
use crate::thread::{record_java, record_raw};

/// Size of the compiled code at each live code address, for the unload
/// record (CompiledMethodUnload does not carry the size).
static CODE_SIZES: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);

/// Installs the compiled-method callbacks (their events are enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.CompiledMethodLoad = Some(on_compiled_method_load);
    cb.CompiledMethodUnload = Some(on_compiled_method_unload);
}

/// Starts remembering code sizes (when JIT events are on).
pub(super) fn track_code_sizes() {
    *lock(&CODE_SIZES) = Some(HashMap::new());
}

/// # Safety
/// Called by the JVM as the CompiledMethodLoad callback, with the agent's `env` and a
/// `compile_info` valid for the call.
unsafe extern "C" fn on_compiled_method_load(
    env: *mut jvmtiEnv,
    method: jmethodID,
    code_size: jint,
    code_addr: *const c_void,
    _map_length: jint,
    _map: *const jvmtiAddrLocationMap,
    compile_info: *const c_void,
) {
    let ts = now_ns();
    guard("CompiledMethodLoad", || {
        let Some((rec, _)) = active() else { return };
        // SAFETY: the JVM passes the agent's `env` and the callback's `compile_info` (# Safety).
        let Some(id) = (unsafe { code_method_id(rec, env, method, ts) }) else {
            rec.count_lost(1);
            return;
        };
        let size = code_size.max(0) as u32;
        if let Some(map) = lock(&CODE_SIZES).as_mut() {
            map.insert(code_addr as usize, size);
        }
        let cm = CompiledMethod {
            method: id,
            code_addr: code_addr as u64,
            code_size: size,
            reserved: 0,
        };
        // SAFETY: the JVM passes the agent's `env` and the callback's `compile_info` (# Safety).
        unsafe {
            record_java(env, std::ptr::null_mut(), std::ptr::null_mut(), ts, || {
                Payload::Compiled(true, cm)
            });
        }
        // SAFETY: the JVM passes the agent's `env` and the callback's `compile_info` (# Safety).
        unsafe {
            super::code::compiled_inline(rec, env, method, code_addr as u64, size, compile_info, ts);
        }
    });
}

/// # Safety
/// Called by the JVM as the CompiledMethodUnload callback.
unsafe extern "C" fn on_compiled_method_unload(_env: *mut jvmtiEnv, method: jmethodID, code_addr: *const c_void) {
    let ts = now_ns();
    guard("CompiledMethodUnload", || {
        // The method may be gone already: no JVMTI lookup here.
        let size = lock(&CODE_SIZES)
            .as_mut()
            .and_then(|m| m.remove(&(code_addr as usize)))
            .unwrap_or(0);
        let id = recorded_id(method);
        let cm = CompiledMethod {
            method: id,
            code_addr: code_addr as u64,
            code_size: size,
            reserved: 0,
        };
        record_raw(ts, Payload::Compiled(false, cm));
    });
}

//! JIT code: COMPILED_METHOD_LOAD/UNLOAD with each code range's method, and
//! the record id of a method named by a JIT or allocation record.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

use jtrace_format::{CompiledMethod, MethodDef, Payload};

use crate::classes::rewritten_method_id;
use crate::jvm;
use crate::mutex::lock;
use crate::recorder::Recorder;
use crate::state::{active, guard, now_ns, tid};
use crate::sys::*;
use crate::thread::{record_java, record_raw};

/// Size of the compiled code at each live code address, for the unload
/// record (CompiledMethodUnload does not carry the size).
static CODE_SIZES: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);

/// Record id of each method named by a JIT or allocation record, by jmethodID.
static CODE_IDS: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

/// Installs the compiled-method callbacks (their events are enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.CompiledMethodLoad = Some(on_compiled_method_load);
    cb.CompiledMethodUnload = Some(on_compiled_method_unload);
}

/// At the start of a session: its methods are described afresh.
pub(super) fn new_session() {
    *lock(&CODE_IDS) = None;
}

/// Starts remembering code sizes (when JIT events are on).
pub(super) fn track_code_sizes() {
    *lock(&CODE_SIZES) = Some(HashMap::new());
}

/// The record id of a method that has compiled code: the id bytecode
/// rewriting gave it if it was rewritten (already described), else its
/// jmethodID, described here (METHOD_DEF) the first time: the merge needs a
/// name for every code range, traced method or not.
pub(super) unsafe fn code_method_id(rec: &Recorder, env: *mut jvmtiEnv, method: jmethodID, ts: u64) -> Option<u64> {
    if let Some(&id) = lock(&CODE_IDS).as_ref().and_then(|m| m.get(&(method as usize))) {
        return Some(id);
    }
    let m = jvm::method_info(env, std::ptr::null_mut(), method)?;
    let id = match rewritten_method_id(&m.class, &m.name, &m.signature) {
        Some(id) => u64::from(id),
        None => {
            let id = method as usize as u64;
            let def = MethodDef {
                method: id,
                class: m.class,
                name: m.name,
                signature: m.signature,
            };
            rec.describe_method(tid(), ts, def);
            id
        }
    };
    lock(&CODE_IDS)
        .get_or_insert_with(HashMap::new)
        .insert(method as usize, id);
    Some(id)
}

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
        let Some(id) = code_method_id(rec, env, method, ts) else {
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
        record_java(env, std::ptr::null_mut(), std::ptr::null_mut(), ts, || {
            Payload::Compiled(true, cm)
        });
        super::code::compiled_inline(rec, env, method, code_addr as u64, size, compile_info, ts);
    });
}

unsafe extern "C" fn on_compiled_method_unload(_env: *mut jvmtiEnv, method: jmethodID, code_addr: *const c_void) {
    let ts = now_ns();
    guard("CompiledMethodUnload", || {
        // The method may be gone already: no JVMTI lookup here.
        let size = lock(&CODE_SIZES)
            .as_mut()
            .and_then(|m| m.remove(&(code_addr as usize)))
            .unwrap_or(0);
        let id = lock(&CODE_IDS)
            .as_ref()
            .and_then(|m| m.get(&(method as usize)).copied())
            .unwrap_or(method as usize as u64);
        let cm = CompiledMethod {
            method: id,
            code_addr: code_addr as u64,
            code_size: size,
            reserved: 0,
        };
        record_raw(ts, Payload::Compiled(false, cm));
    });
}

//! The record id of a method named by a JIT, code or allocation record:
//! described (METHOD_DEF) once per session, shared by those families.

use std::collections::HashMap;
use std::sync::Mutex;

use jtrace_format::MethodDef;

use crate::classes::rewritten_method_id;
use crate::jvm;
use crate::mutex::lock;
use crate::recorder::Recorder;
use crate::state::tid;
use crate::sys::*;

/// Record id of each method named by a JIT or allocation record, by jmethodID.
static CODE_IDS: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

/// At the start of a session: its methods are described afresh.
pub(super) fn new_session() {
    *lock(&CODE_IDS) = None;
}

/// The record id of a method that has compiled code: the id bytecode
/// rewriting gave it if it was rewritten (already described), else its
/// jmethodID, described here (METHOD_DEF) the first time: the merge needs a
/// name for every code range, traced method or not.
///
/// # Safety
/// `env` is the JVMTI environment and `method` a method of a loaded class,
/// in a JVMTI callback.
pub(super) unsafe fn code_method_id(rec: &Recorder, env: *mut jvmtiEnv, method: jmethodID, ts: u64) -> Option<u64> {
    if let Some(&id) = lock(&CODE_IDS).as_ref().and_then(|m| m.get(&(method as usize))) {
        return Some(id);
    }
    // SAFETY: as the caller promises.
    let m = unsafe { jvm::method_info(env, std::ptr::null_mut(), method) }?;
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

/// The id [`code_method_id`] gave `method` in this session, without a
/// JVMTI lookup (the method may be gone: its code is being unloaded); its
/// jmethodID if it got none.
pub(super) fn recorded_id(method: jmethodID) -> u64 {
    lock(&CODE_IDS)
        .as_ref()
        .and_then(|m| m.get(&(method as usize)).copied())
        .unwrap_or(method as usize as u64)
}

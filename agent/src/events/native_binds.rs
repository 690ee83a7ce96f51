//! The native functions Java native methods are bound to (NativeMethodBind),
//! for the stacks: native code without frame pointers (libnio, libjava)
//! drops the JNI function from the kernel recorder's walk, and the merge
//! puts it back from these bindings (NATIVE_BIND records, each naming the
//! function by the symbol the dynamic linker has at exactly its address).
//! The natives the JVM implements itself (in libjvm.so) are left out: the
//! stacks there are the JVM's own code, which keeps its frame pointers.
//!
//! Bindings start in the primordial phase, before anything can be written
//! or a method named: they wait here until [`start`] (VMInit), then are
//! written as they come. The address recorded is the one the JVM will call,
//! except [`park_sleep`](super::park_sleep)'s wrappers (jtrace's own). On
//! attach the natives were bound long ago and no event comes: those stacks
//! keep only the frames the walk found.

use std::ffi::c_void;
use std::sync::Mutex;

use jtrace_format::{NativeBind, Payload, Record};

use super::method_ids::code_method_id;
use crate::mutex::lock;
use crate::state::{active, guard, now_ns, tid};
use crate::sys::*;

/// Bindings seen before [`start`]: (jmethodID, function).
static PENDING: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// Whether bindings are written as they come (after [`start`]).
static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// NativeMethodBind callback (any phase): park and sleep's wrappers first,
/// then the binding the JVM will make, recorded.
///
/// # Safety
/// Called by the JVM as the NativeMethodBind callback: `env` is the agent's and `new_address_ptr`
/// is null or writable.
pub(crate) unsafe extern "C" fn on_native_method_bind(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    method: jmethodID,
    address: *mut c_void,
    new_address_ptr: *mut *mut c_void,
) {
    let Some(f) = super::FEATURES.get() else { return };
    if f.park || f.sleep {
        // SAFETY: the JVM's arguments, passed on as it gave them (# Safety).
        unsafe {
            super::park_sleep::on_native_method_bind(env, jni, thread, method, address, new_address_ptr);
        }
    }
    if !f.native_binds {
        return;
    }
    // HotSpot passes the binding's own slot: what it holds now is called.
    let bound = if new_address_ptr.is_null() {
        address
    } else {
        // SAFETY: non-null and readable (# Safety).
        unsafe { *new_address_ptr }
    };
    // jtrace's own wrappers are no JNI function of the program's.
    if bound.is_null() || super::park_sleep::is_wrapper(bound as usize) {
        return;
    }
    guard("NativeMethodBind", || {
        if STARTED.load(std::sync::atomic::Ordering::SeqCst) {
            // SAFETY: the JVM's `env` in a JVMTI callback, `method` the method being bound.
            unsafe { write(env, &[(method as usize, bound as usize)]) };
        } else {
            lock(&PENDING).push((method as usize, bound as usize));
        }
    });
}

/// At VMInit, stacks on: the bindings so far, then each as it comes.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase.
pub(super) unsafe fn start(env: *mut jvmtiEnv) {
    let pending = {
        let mut p = lock(&PENDING);
        STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
        std::mem::take(&mut *p)
    };
    // SAFETY: as the caller promises; the jmethodIDs stay valid while their classes are loaded.
    unsafe { write(env, &pending) };
}

/// A NATIVE_BIND for each of `binds` (jmethodID, function) whose function
/// a symbol starts at, outside libjvm.so; each method described.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the live phase or a callback.
unsafe fn write(env: *mut jvmtiEnv, binds: &[(usize, usize)]) {
    let Some((rec, _)) = active() else { return };
    let ts = now_ns();
    for &(method, addr) in binds {
        let Some(name) = symbol_at(addr) else { continue };
        // SAFETY: as the caller promises.
        if let Some(id) = unsafe { code_method_id(rec, env, method as jmethodID, ts) } {
            rec.write_direct(&Record {
                tid: tid(),
                ts,
                payload: Payload::NativeBind(NativeBind {
                    addr: addr as u64,
                    method: id,
                    name,
                }),
            });
        }
    }
}

/// The symbol that starts exactly at `addr`, if it is outside libjvm.so.
fn symbol_at(addr: usize) -> Option<String> {
    // SAFETY: dladdr only looks the address up in the loaded objects, and
    // fills `info` with pointers into their string tables (or nulls).
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0
            || info.dli_sname.is_null()
            || info.dli_fname.is_null()
            || info.dli_saddr as usize != addr
        {
            return None;
        }
        let file = std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy();
        if file.ends_with("/libjvm.so") {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(info.dli_sname).to_string_lossy().into_owned())
    }
}

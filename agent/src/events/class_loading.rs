//! Whether a contended monitor enter (or a wait) the JVM reports is class
//! loading rather than contention of the program's own: such a block
//! happens in the first executions of a call site only (a constant pool
//! entry is resolved once), so it must not keep the methods open around it
//! probed ([`crate::demotion::watch`]). It is still recorded as what it is.
//!
//! Two shapes, read from the blocked thread's top frames (GetStackTrace;
//! contended enters are rare, and the thread is about to sleep anyway):
//!
//! * **The VM's own lock, taken for a bytecode**: the top frame is a Java
//!   method stopped at a bytecode that resolves a constant pool entry
//!   (`new`, `getstatic`, `invoke*`, `ldc`, `checkcast` …), not at (or
//!   right after) a `monitorenter` nor at the entry of a synchronized
//!   method. Only class
//!   loading, linking and initialisation lock there (HotSpot's class
//!   init lock, an `int[]`, held while linking; the loader itself for a
//!   loader that is not parallel capable).
//! * **A class loader's lock, in a load the VM asked for**: the top frames
//!   are methods of `java.lang.ClassLoader` subclasses (its `loadClass`
//!   holding `getClassLoadingLock(name)`) and the first frame under them is
//!   a Java method at such a bytecode, which did not call them itself: its
//!   bytecode is not an invoke of the method the frame above it runs
//!   (HotSpot calls `loadClass(String)` to resolve). A program calling
//!   `loadClass` or `Class.forName` itself may do so on every call, so that
//!   counts as a block like any other.
//!
//! Anything else (a native frame on top, an unreadable stack, a method
//! whose bytecodes or constant pool JVMTI does not give) counts as a real
//! block: the rule errs towards keeping probes.

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::jvm::{delete_local, jni, jvmti, take_string};
use crate::sys::*;

/// Frames read from the top of the blocked thread's stack: a loader's own
/// frames (delegation to its parents included) and the one under them.
const FRAMES: usize = 16;
/// `ACC_SYNCHRONIZED` and `ACC_NATIVE` of a method's modifiers.
const ACC_SYNCHRONIZED: jint = 0x20;
const ACC_NATIVE: jint = 0x100;
/// The `monitorenter` opcode.
const MONITORENTER: u8 = 0xc2;
/// `invokevirtual` … `invokeinterface`: the invokes that name a Methodref.
const INVOKES: std::ops::RangeInclusive<u8> = 0xb6..=0xb9;

/// The JVM gave the capabilities to read bytecodes and constant pools.
static ABLE: AtomicBool = AtomicBool::new(false);

/// At load: asks for the capabilities the rule reads with (HotSpot has
/// them always; without them every block counts, as before the rule).
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(super) unsafe fn on_load(env: *mut jvmtiEnv) {
    let mut caps = jvmtiCapabilities::default();
    caps.set_can_get_bytecodes(1);
    caps.set_can_get_constant_pool(1);
    ABLE.store(
        // SAFETY: the caller guarantees `env` is the agent's environment in a phase that allows this
        // (# Safety).
        unsafe { jvmti!(env, AddCapabilities, &caps) } == JVMTI_ERROR_NONE,
        Ordering::Relaxed,
    );
}

/// Whether `op` resolves a constant pool entry naming a class (and may so
/// load, link or initialise one): `ldc`/`ldc_w`, field access, invokes,
/// `new`, `anewarray`, `checkcast`, `instanceof`, `multianewarray`.
fn resolves(op: u8) -> bool {
    matches!(op, 0x12 | 0x13 | 0xb2..=0xbb | 0xbd | 0xc0 | 0xc1 | 0xc5)
}

/// Whether the block `thread` (the current thread) begins, in a
/// MonitorContendedEnter or MonitorWait callback, is class loading: see
/// the module doc.
///
/// # Safety
/// In a JVMTI callback on `thread`, with the agent's `env` and the
/// thread's `jni`.
pub(super) unsafe fn is_class_loading(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> bool {
    if jni.is_null() || !ABLE.load(Ordering::Relaxed) {
        return false;
    }
    // The top frame alone first: most blocks are settled by it, and
    // reading deeper frames of compiled code costs.
    let mut frames = [jvmtiFrameInfo::default(); FRAMES];
    // SAFETY: the caller guarantees a JVMTI callback on `thread` with the agent's `env` and its `jni`
    // (# Safety).
    unsafe {
        let top = top_frames(env, thread, &mut frames[..1]);
        let Some(&top) = top.first() else { return false };
        let mut modifiers: jint = 0;
        if jvmti!(env, GetMethodModifiers, top.method, &mut modifiers) != JVMTI_ERROR_NONE
            || modifiers & ACC_NATIVE != 0
        {
            // Object.wait, a native's JNI MonitorEnter: the program's.
            return false;
        }
        if !in_class_loader(env, jni, top.method) {
            // The VM's own lock, or the program's monitorenter.
            return vm_lock_for_bytecode(env, &top);
        }
        let frames = top_frames(env, thread, &mut frames);
        let loaders = frames
            .iter()
            .take_while(|f| in_class_loader(env, jni, f.method))
            .count();
        if loaders == 0 {
            return false;
        }
        // A loader's lock: in a load the VM asked for, on behalf of the frame
        // under the loader's.
        let Some(trigger) = frames.get(loaders) else {
            return false;
        };
        let Some(op) = opcode(env, trigger) else { return false };
        if !resolves(op) {
            return false;
        }
        if INVOKES.contains(&op) {
            // The trigger may call the loader itself: then the invoke names the
            // method of the frame above it.
            let called = method_name(env, frames[loaders - 1].method);
            let invoked = invoked_name(env, jni, trigger);
            return match (called, invoked) {
                (Some(c), Some(i)) => c != i,
                _ => false,
            };
        }
    }
    true
}

/// For `JTRACE_AGENT_DEBUG`: prints the blocked thread's top frames when
/// a class loader's method is among them but the rule counted the block as
/// the program's, so that a wait the rule misses can be told apart.
///
/// # Safety
/// In a JVMTI callback on `thread`, with the agent's `env` and the thread's `jni`.
pub(super) unsafe fn debug_missed(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let mut frames = [jvmtiFrameInfo::default(); FRAMES + 8];
    // SAFETY: the caller guarantees a JVMTI callback on `thread` with the agent's `env` and its `jni`
    // (# Safety).
    unsafe {
        let frames = top_frames(env, thread, &mut frames);
        if !frames.iter().any(|f| in_class_loader(env, jni, f.method)) {
            return;
        }
        let mut out = String::from("a block under a class loader counted as the program's:");
        for f in frames {
            let info = crate::jvm::method_info(env, jni, f.method);
            let (class, name) = info
                .as_ref()
                .map_or(("?", "?"), |i| (i.class.as_str(), i.name.as_str()));
            out.push_str(&format!(
                " {class}.{name}@{} (opcode {:?});",
                f.location,
                opcode(env, f)
            ));
        }
        crate::state::debug(&out);
    }
}

/// The top `frames.len()` frames of `thread` (fewer if its stack is
/// shallower; none if JVMTI cannot tell).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `thread` a live thread reference.
unsafe fn top_frames(env: *mut jvmtiEnv, thread: jthread, frames: &mut [jvmtiFrameInfo]) -> &[jvmtiFrameInfo] {
    let mut n: jint = 0;
    let max = frames.len() as jint;
    // SAFETY: the caller passes the agent's live `env` and a valid `thread`; `frames` bounds what
    // JVMTI writes (# Safety).
    if unsafe { jvmti!(env, GetStackTrace, thread, 0, max, frames.as_mut_ptr(), &mut n) } != JVMTI_ERROR_NONE {
        return &[];
    }
    &frames[..n.clamp(0, max) as usize]
}

/// Whether `top`, the thread's top frame, is a Java method stopped at a
/// bytecode that resolves, outside a `monitorenter` and a synchronized
/// method's entry: the VM locks there for class loading only. HotSpot
/// reports a `monitorenter` at its own index from compiled code, and at the
/// next instruction from the interpreter (which steps past it before it
/// locks), so neither may be one.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `top` a frame JVMTI returned.
unsafe fn vm_lock_for_bytecode(env: *mut jvmtiEnv, top: &jvmtiFrameInfo) -> bool {
    let mut modifiers: jint = 0;
    // SAFETY: the caller passes the agent's live `env`; `top.method` comes from JVMTI (# Safety).
    if unsafe { jvmti!(env, GetMethodModifiers, top.method, &mut modifiers) } != JVMTI_ERROR_NONE
        || modifiers & ACC_NATIVE != 0
        || (modifiers & ACC_SYNCHRONIZED != 0 && top.location == 0)
        || top.location < 0
    {
        return false;
    }
    // SAFETY: the caller passes the agent's live `env`; `top.method` comes from JVMTI (# Safety).
    let Some(code) = (unsafe { bytecodes(env, top.method) }) else {
        return false;
    };
    match crate::rewrite::opcode_and_previous(&code, top.location as usize) {
        Some((op, previous)) => resolves(op) && previous != Some(MONITORENTER),
        None => false,
    }
}

/// The opcode `frame` is stopped at; `None` for a native method or when
/// JVMTI does not give the bytecodes.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `frame` a frame JVMTI returned.
unsafe fn opcode(env: *mut jvmtiEnv, frame: &jvmtiFrameInfo) -> Option<u8> {
    let mut modifiers: jint = 0;
    // SAFETY: the caller passes the agent's live `env`; `frame.method` comes from JVMTI (# Safety).
    if unsafe { jvmti!(env, GetMethodModifiers, frame.method, &mut modifiers) } != JVMTI_ERROR_NONE
        || modifiers & ACC_NATIVE != 0
        || frame.location < 0
    {
        return None;
    }
    // SAFETY: the caller passes the agent's live `env`; `frame.method` comes from JVMTI (# Safety).
    let code = unsafe { bytecodes(env, frame.method) }?;
    code.get(frame.location as usize).copied()
}

/// A copy of `method`'s bytecodes (as the class file has them).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `method` a valid method id.
unsafe fn bytecodes(env: *mut jvmtiEnv, method: jmethodID) -> Option<Vec<u8>> {
    let mut len: jint = 0;
    let mut p: *mut u8 = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's live `env` and a valid `method` (# Safety).
    if unsafe { jvmti!(env, GetBytecodes, method, &mut len, &mut p) } != JVMTI_ERROR_NONE || p.is_null() {
        return None;
    }
    // SAFETY: `p` points to the `len` elements JVMTI returned, still allocated.
    let v = unsafe { std::slice::from_raw_parts(p, len.max(0) as usize) }.to_vec();
    // SAFETY: `p` was allocated by JVMTI in `env` and is not used after this.
    unsafe {
        jvmti!(env, Deallocate, p);
    }
    Some(v)
}

/// The name of the method the invoke `frame` is stopped at calls, from its
/// class's constant pool.
///
/// # Safety
/// In a JVMTI callback, with the agent's `env` and the current thread's `jni`; `frame` is a frame
/// JVMTI returned.
unsafe fn invoked_name(env: *mut jvmtiEnv, jni: *mut JNIEnv, frame: &jvmtiFrameInfo) -> Option<String> {
    // SAFETY: the caller passes the agent's live `env` and this thread's `jni`; `frame` comes from
    // JVMTI (# Safety).
    unsafe {
        let code = bytecodes(env, frame.method)?;
        let at = frame.location as usize;
        let index = u16::from_be_bytes([*code.get(at + 1)?, *code.get(at + 2)?]);
        let mut klass: jclass = std::ptr::null_mut();
        if jvmti!(env, GetMethodDeclaringClass, frame.method, &mut klass) != JVMTI_ERROR_NONE {
            return None;
        }
        let (mut count, mut len): (jint, jint) = (0, 0);
        let mut p: *mut u8 = std::ptr::null_mut();
        let err = jvmti!(env, GetConstantPool, klass, &mut count, &mut len, &mut p);
        delete_local(jni, klass);
        if err != JVMTI_ERROR_NONE || p.is_null() {
            return None;
        }
        let pool = std::slice::from_raw_parts(p, len.max(0) as usize).to_vec();
        jvmti!(env, Deallocate, p);
        crate::rewrite::invoked_name(u16::try_from(count).ok()?, &pool, index)
    }
}

/// The name of `method`.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `method` a valid method id.
unsafe fn method_name(env: *mut jvmtiEnv, method: jmethodID) -> Option<String> {
    let mut name: *mut c_char = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's live `env` and a valid `method` (# Safety).
    if unsafe {
        jvmti!(
            env,
            GetMethodName,
            method,
            &mut name,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        )
    } != JVMTI_ERROR_NONE
    {
        return None;
    }
    // SAFETY: the caller passes the agent's live `env` and a valid `method` (# Safety).
    unsafe { take_string(env, name) }
}

/// Whether `method` is declared by `java.lang.ClassLoader` or a subclass
/// (found by walking the superclasses: FindClass could ask a class loader,
/// the very thing the thread waits for).
///
/// # Safety
/// In a JVMTI callback, with the agent's `env` and the current thread's `jni`; `method` is a valid
/// method id.
unsafe fn in_class_loader(env: *mut jvmtiEnv, jni: *mut JNIEnv, method: jmethodID) -> bool {
    let mut klass: jclass = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's live `env`, this thread's `jni` and a valid `method`
    // (# Safety).
    unsafe {
        if jvmti!(env, GetMethodDeclaringClass, method, &mut klass) != JVMTI_ERROR_NONE {
            return false;
        }
        let mut found = false;
        while !klass.is_null() {
            let mut sig: *mut c_char = std::ptr::null_mut();
            if jvmti!(env, GetClassSignature, klass, &mut sig, std::ptr::null_mut()) == JVMTI_ERROR_NONE {
                found = take_string(env, sig).is_some_and(|s| s == "Ljava/lang/ClassLoader;");
            }
            let up = if found {
                std::ptr::null_mut()
            } else {
                jni!(jni, GetSuperclass, klass).unwrap_or(std::ptr::null_mut())
            };
            delete_local(jni, klass);
            klass = up;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolving_opcodes_are_those_that_name_a_class() {
        for op in [0x12, 0x13, 0xb2, 0xb5, 0xb6, 0xb9, 0xba, 0xbb, 0xbd, 0xc0, 0xc1, 0xc5] {
            assert!(resolves(op), "{op:#x}");
        }
        // aload_0, iadd, monitorenter, monitorexit, athrow, newarray (of a
        // primitive), arraylength, areturn.
        for op in [0x2a, 0x60, MONITORENTER, 0xc3, 0xbf, 0xbc, 0xbe, 0xb0] {
            assert!(!resolves(op), "{op:#x}");
        }
    }
}

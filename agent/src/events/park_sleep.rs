//! Park and sleep events, by re-binding the natives behind them.
//!
//! JVMTI has no park or sleep event, and MethodEntry/MethodExit would keep
//! every method interpreted. Instead the native methods that do the blocking
//! are bound to wrappers that record PARK_BEGIN/PARK_END or
//! SLEEP_BEGIN/SLEEP_END around a call of the JVM's own implementation:
//!
//! | method | JDK | event |
//! |---|---|---|
//! | `jdk.internal.misc.Unsafe.park(ZJ)V` | 9 on (LockSupport.park*, so every j.u.c lock, condition, queue, future) | PARK, `arg` = time (ns, or deadline ms when absolute), class = the thread's park blocker |
//! | `java.lang.Thread.sleep(J)V` (static native) | 11, 17 tested (native up to 18) | SLEEP, `arg` = ms |
//! | `java.lang.Thread.sleep0(J)V` (static native) | 21 tested (19–20: ms, 21–22: ns) | SLEEP, `arg` = ms (rounded up from ns) |
//! | `java.lang.Thread.sleepNanos0(J)V` (static native) | 25 tested (23 on) | SLEEP, `arg` = ms (rounded up from ns) |
//!
//! Other shapes of Thread.sleep's native are not wrapped: VMInit then
//! records an AGENT_ERROR naming the natives it looked for, and the report
//! shows that sleep is not recorded (the time then gets the kernel's cause,
//! never `sleep`).
//!
//! Neither is a JIT intrinsic: compiled callers go through the native
//! wrapper, which calls whatever address the method is bound to.
//!
//! How the wrappers get bound: the NativeMethodBind event, enabled from
//! Agent_OnLoad, reports every binding with the JVM's address and lets the
//! agent substitute its own. java.base registers Unsafe's and Thread's natives
//! while it initialises; with the `can_generate_early_vmstart` capability
//! that happens in the start phase, where the bind callback can name the
//! method (GetMethodName does not work in the primordial phase), so the
//! wrapper is substituted right there; a target bound later (lazy JNI
//! linking, live phase) is handled the same way. No RegisterNatives call is
//! needed, which matters: JDK 17+ prints "Re-registering of platform native
//! method" on the program's stdout when an agent calls RegisterNatives on a
//! java.base class. Only if a target was bound in the primordial phase anyway
//! (not the case on JDK 17 or 25) does VMInit fall back to RegisterNatives,
//! with that warning.
//!
//! The wrappers record nothing before VMInit (JVM_START comes first).
//!
//! On attach the targets were bound long ago and no bind event comes:
//! [`attach`] reads the address each is bound to from the `Method` (HotSpot
//! keeps it right after the object, whose size the VM's type table gives;
//! trusted only once the same read finds `JVM_HoldsLock` behind
//! `Thread.holdsLock`, and only for addresses inside libjvm.so), then
//! re-binds the targets with RegisterNatives from Java code of the boot
//! loader (`jtrace.Probe.bindWaits`): the JVM checks the Java caller of
//! RegisterNatives and warns only when it belongs to another loader (or
//! there is none, as in an agent callback). [`detach`] binds them back when
//! the session stops; a wrapper still running then records nothing more.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use jtrace_format::{kind, JvmBlock, Payload};

use crate::jvm::{self, clear_exception, jni, jvmti, object_class_name};
use crate::mutex::lock;
use crate::state::{guard, now_ns, say};
use crate::sys::*;
use crate::thread::{record_java, record_registered};
use crate::{probe, vmstructs};

/// What a wrapped native does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Park,
    SleepMillis,
    SleepNanos,
    /// `Thread.sleep0`: ms up to JDK 20, ns from 21 (JDK-8305092).
    Sleep0,
}

/// One native method to wrap.
struct Target {
    class: &'static CStr,
    name: &'static CStr,
    sig: &'static CStr,
    is_static: bool,
    what: What,
}

const TARGETS: [Target; 4] = [
    Target {
        class: c"jdk/internal/misc/Unsafe",
        name: c"park",
        sig: c"(ZJ)V",
        is_static: false,
        what: What::Park,
    },
    Target {
        class: c"java/lang/Thread",
        name: c"sleep",
        sig: c"(J)V",
        is_static: true,
        what: What::SleepMillis,
    },
    Target {
        class: c"java/lang/Thread",
        name: c"sleepNanos0",
        sig: c"(J)V",
        is_static: true,
        what: What::SleepNanos,
    },
    Target {
        class: c"java/lang/Thread",
        name: c"sleep0",
        sig: c"(J)V",
        is_static: true,
        what: What::Sleep0,
    },
];

impl Target {
    /// `class.name(sig)`, for messages.
    fn describe(&self) -> String {
        format!(
            "{}.{}{}",
            self.class.to_string_lossy(),
            self.name.to_string_lossy(),
            self.sig.to_string_lossy()
        )
    }
}

/// The JVM's own implementation of each target (0 = not known).
static ORIG: [AtomicUsize; TARGETS.len()] = [const { AtomicUsize::new(0) }; TARGETS.len()];

/// `Thread.sleep0` takes nanoseconds (JDK 21 on) rather than milliseconds.
static SLEEP0_NANOS: AtomicBool = AtomicBool::new(true);

/// Learns the unit of `Thread.sleep0`'s argument from the JNI version of
/// the JVM (`GetVersion`): JNI_VERSION_21 and later pass nanoseconds.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv.
unsafe fn learn_sleep0_unit(jni: *mut JNIEnv) {
    // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
    let version = unsafe { jni!(jni, GetVersion) }.unwrap_or(0);
    SLEEP0_NANOS.store(version >= 0x0015_0000, Ordering::SeqCst);
}

/// jfieldID of `Thread.parkBlocker` (0 = unknown: no blocker class recorded).
static PARK_BLOCKER: AtomicUsize = AtomicUsize::new(0);

type ParkFn = unsafe extern "C" fn(*mut JNIEnv, jobject, jboolean, jlong);
type SleepFn = unsafe extern "C" fn(*mut JNIEnv, jclass, jlong);

fn wrapper(i: usize) -> *mut c_void {
    match TARGETS[i].what {
        What::Park => park_wrapper as ParkFn as *mut c_void,
        What::SleepMillis => sleep_millis_wrapper as SleepFn as *mut c_void,
        What::SleepNanos => sleep_nanos_wrapper as SleepFn as *mut c_void,
        What::Sleep0 => sleep0_wrapper as SleepFn as *mut c_void,
    }
}

/// Whether `addr` is one of the wrappers that record park and sleep.
pub(super) fn is_wrapper(addr: usize) -> bool {
    (0..TARGETS.len()).any(|i| wrapper(i) as usize == addr)
}

/// Which targets the configuration wants wrapped (set at load).
static WANT_PARK: AtomicBool = AtomicBool::new(false);
static WANT_SLEEP: AtomicBool = AtomicBool::new(false);
/// VMInit has run: the wrappers may record.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Bindings seen in the primordial phase, where methods cannot be named:
/// jmethodID -> address (a handful on JDK 17/25, none of them a target).
static EARLY: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

/// At load: which families to wrap.
pub(crate) fn configure(park: bool, sleep: bool) {
    WANT_PARK.store(park, Ordering::SeqCst);
    WANT_SLEEP.store(sleep, Ordering::SeqCst);
}

fn wanted(w: What) -> bool {
    match w {
        What::Park => WANT_PARK.load(Ordering::Relaxed),
        _ => WANT_SLEEP.load(Ordering::Relaxed),
    }
}

/// Which target `method` is, if any (start or live phase only).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the start or live phase and `method` a valid method
/// id.
unsafe fn identify(env: *mut jvmtiEnv, method: jmethodID) -> Option<usize> {
    let mut name: *mut c_char = std::ptr::null_mut();
    let mut sig: *mut c_char = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's `env` in the start or live phase and a valid `method`
    // (# Safety).
    unsafe {
        if jvmti!(env, GetMethodName, method, &mut name, &mut sig, std::ptr::null_mut()) != JVMTI_ERROR_NONE {
            return None;
        }
        let name = jvm::take_string(env, name)?;
        let sig = jvm::take_string(env, sig)?;
        // Cheap test first: most bindings are not a target by name.
        let candidates: Vec<usize> = (0..TARGETS.len())
            .filter(|&i| {
                let t = &TARGETS[i];
                wanted(t.what) && t.name.to_bytes() == name.as_bytes() && t.sig.to_bytes() == sig.as_bytes()
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let mut klass: jclass = std::ptr::null_mut();
        if jvmti!(env, GetMethodDeclaringClass, method, &mut klass) != JVMTI_ERROR_NONE {
            return None;
        }
        let mut csig: *mut c_char = std::ptr::null_mut();
        // No JNIEnv is needed: the local reference goes with the callback's frame.
        if jvmti!(env, GetClassSignature, klass, &mut csig, std::ptr::null_mut()) != JVMTI_ERROR_NONE {
            return None;
        }
        let csig = jvm::take_string(env, csig)?;
        let class = csig.strip_prefix('L').and_then(|c| c.strip_suffix(';'))?;
        candidates
            .into_iter()
            .find(|&i| TARGETS[i].class.to_bytes() == class.as_bytes())
    }
}

/// NativeMethodBind callback (any phase from primordial on).
///
/// # Safety
/// Called by the JVM as the NativeMethodBind callback: `env` is the agent's and `new_address_ptr`
/// is null or writable.
pub(crate) unsafe extern "C" fn on_native_method_bind(
    env: *mut jvmtiEnv,
    _jni: *mut JNIEnv,
    _thread: jthread,
    method: jmethodID,
    address: *mut c_void,
    new_address_ptr: *mut *mut c_void,
) {
    // SAFETY: the JVM passes the agent's `env` and a writable `new_address_ptr` or null (# Safety).
    unsafe {
        guard("NativeMethodBind", || {
            let addr = address as usize;
            // Our own RegisterNatives, or a re-bind to a wrapper.
            if addr == 0 || is_wrapper(addr) {
                return;
            }
            let mut phase: jvmtiPhase = 0;
            if jvmti!(env, GetPhase, &mut phase) != JVMTI_ERROR_NONE {
                return;
            }
            if phase != JVMTI_PHASE_START && phase != JVMTI_PHASE_LIVE {
                lock(&EARLY)
                    .get_or_insert_with(HashMap::new)
                    .insert(method as usize, addr);
                return;
            }
            if let Some(i) = identify(env, method) {
                if !new_address_ptr.is_null() {
                    ORIG[i].store(addr, Ordering::SeqCst);
                    *new_address_ptr = wrapper(i);
                }
            }
        });
    }
}

/// Binds target `i`, a method of `cls`, to `addr`; the JNI result (0: done).
///
/// # Safety
/// `jni` is the calling Java thread's JNIEnv, `cls` the class of target `i` and `addr` a function
/// of that target's signature.
unsafe fn register(jni: *mut JNIEnv, cls: jclass, i: usize, addr: *mut c_void) -> jint {
    let t = &TARGETS[i];
    let m = JNINativeMethod {
        name: t.name.as_ptr() as *mut _,
        signature: t.sig.as_ptr() as *mut _,
        fnPtr: addr,
    };
    // SAFETY: the caller guarantees `jni` is this Java thread's JNIEnv and `cls` declares target `i`
    // (# Safety).
    let rc = unsafe { jni!(jni, RegisterNatives, cls, &m, 1) }.unwrap_or(-1);
    if rc != 0 {
        // SAFETY: the caller guarantees `jni` is this Java thread's JNIEnv and `cls` declares target
        // `i` (# Safety).
        unsafe {
            clear_exception(jni);
        }
    }
    rc
}

/// The wanted targets present in this JVM as native methods: (index in
/// TARGETS, method, local class reference); also looks up
/// `Thread.parkBlocker` when park is wanted.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
unsafe fn find_targets(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    park: bool,
    sleep: bool,
) -> Vec<(usize, jmethodID, jclass)> {
    let mut found: Vec<(usize, jmethodID, jclass)> = Vec::new();
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        for (i, t) in TARGETS.iter().enumerate() {
            if (t.what == What::Park && !park) || (t.what != What::Park && !sleep) {
                continue;
            }
            let cls = jni!(jni, FindClass, t.class.as_ptr()).unwrap_or(std::ptr::null_mut());
            if cls.is_null() {
                clear_exception(jni);
                continue;
            }
            let mid = if t.is_static {
                jni!(jni, GetStaticMethodID, cls, t.name.as_ptr(), t.sig.as_ptr())
            } else {
                jni!(jni, GetMethodID, cls, t.name.as_ptr(), t.sig.as_ptr())
            }
            .unwrap_or(std::ptr::null_mut());
            if mid.is_null() {
                clear_exception(jni);
                jvm::delete_local(jni, cls);
                continue;
            }
            // Thread.sleep(J)V exists in every JDK but is native only up to 18.
            let mut native: jboolean = 0;
            if jvmti!(env, IsMethodNative, mid, &mut native) != JVMTI_ERROR_NONE || native == 0 {
                jvm::delete_local(jni, cls);
                continue;
            }
            found.push((i, mid, cls));
        }
        if park {
            let thread = jni!(jni, FindClass, c"java/lang/Thread".as_ptr()).unwrap_or(std::ptr::null_mut());
            if !thread.is_null() {
                let fid = jni!(
                    jni,
                    GetFieldID,
                    thread,
                    c"parkBlocker".as_ptr(),
                    c"Ljava/lang/Object;".as_ptr()
                )
                .unwrap_or(std::ptr::null_mut());
                PARK_BLOCKER.store(fid as usize, Ordering::SeqCst);
                jvm::delete_local(jni, thread);
            }
            clear_exception(jni);
        }
    }
    found
}

/// At VMInit: finds the targets present in this JVM and binds the wrappers.
/// Returns a message when a wanted target could not be wrapped.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv, park: bool, sleep: bool) -> Result<(), String> {
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        learn_sleep0_unit(jni);
        let found = find_targets(env, jni, park, sleep);
        // Targets bound in the primordial phase could not be named then: re-bind
        // them now (fallback; JDK 17 and 25 bind them in the start phase).
        let mut to_register = Vec::new();
        {
            let early = lock(&EARLY).take().unwrap_or_default();
            for &(i, mid, cls) in &found {
                match early.get(&(mid as usize)) {
                    Some(&addr) if ORIG[i].load(Ordering::SeqCst) == 0 => {
                        ORIG[i].store(addr, Ordering::SeqCst);
                        to_register.push((i, cls));
                    }
                    // Wrapped already, or not bound yet (the bind callback will).
                    _ => jvm::delete_local(jni, cls),
                }
            }
        }
        let mut problems = Vec::new();
        for (i, cls) in to_register {
            let t = &TARGETS[i];
            let rc = register(jni, cls, i, wrapper(i));
            if rc != 0 {
                problems.push(format!(
                    "cannot re-bind {} (JNI error {rc}); not recorded",
                    t.describe()
                ));
            }
            jvm::delete_local(jni, cls);
        }
        let found: Vec<usize> = found.iter().map(|&(i, _, _)| i).collect();
        missing(&found, park, sleep, &mut problems);
        STARTED.store(true, Ordering::SeqCst);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Says which wanted family has no target in this JVM.
fn missing(found: &[usize], park: bool, sleep: bool, problems: &mut Vec<String>) {
    let park_found = found.iter().any(|&i| TARGETS[i].what == What::Park);
    let sleep_found = found.iter().any(|&i| TARGETS[i].what != What::Park);
    if park && !park_found {
        problems.push("no native Unsafe.park(ZJ)V in this JVM: park events not recorded".into());
    }
    if sleep && !sleep_found {
        problems.push(
            "no native Thread.sleep(J)V, Thread.sleep0(J)V or Thread.sleepNanos0(J)V in this JVM: sleep events not recorded"
                .into(),
        );
    }
}

/// Targets an attach re-bound to their wrappers (bound back at detach).
static ATTACH_WRAPPED: [AtomicBool; TARGETS.len()] = [const { AtomicBool::new(false) }; TARGETS.len()];
/// Targets `bind_waits0` could not re-bind, as bits.
static REBIND_FAILED: AtomicUsize = AtomicUsize::new(0);

/// On attach, where every target was bound long ago and no bind event will
/// come: reads the address each wanted target is bound to
/// ([`vmstructs::NativeAddresses`], checked against a known binding) and
/// re-binds the target to its wrapper. The re-binding is done by
/// `jtrace.Probe.bindWaits`, Java code of the boot loader, as the JVM
/// prints a warning on the program's output when code of another loader
/// (or none) re-registers a native of java.base. [`detach`] binds them back.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni` (or null: nothing is done).
pub(crate) unsafe fn attach(env: *mut jvmtiEnv, jni: *mut JNIEnv, park: bool, sleep: bool) -> Result<(), String> {
    if jni.is_null() {
        return Err("park and sleep events are not recorded: no JNI environment at attach".into());
    }
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        learn_sleep0_unit(jni);
        let found = find_targets(env, jni, park, sleep);
        let Some(addrs) = vmstructs::NativeAddresses::new(jni) else {
            for &(_, _, cls) in &found {
                jvm::delete_local(jni, cls);
            }
            return Err(
                "park and sleep events are not recorded: this JVM does not tell where its natives are bound".into(),
            );
        };
        let mut problems = Vec::new();
        let mut any = false;
        for &(i, mid, cls) in &found {
            match addrs.bound(mid) {
                // Still wrapped by an earlier session that was not stopped.
                Some(a) if is_wrapper(a) && ORIG[i].load(Ordering::SeqCst) != 0 => {
                    ATTACH_WRAPPED[i].store(true, Ordering::SeqCst);
                }
                Some(a) if addrs.in_libjvm(a) => {
                    ORIG[i].store(a, Ordering::SeqCst);
                    ATTACH_WRAPPED[i].store(true, Ordering::SeqCst);
                    any = true;
                }
                _ => problems.push(format!(
                    "{} is bound outside the JVM (another agent?): not recorded",
                    TARGETS[i].describe()
                )),
            }
            jvm::delete_local(jni, cls);
        }
        STARTED.store(true, Ordering::SeqCst);
        if any {
            rebind(jni, true, &mut problems);
        }
        let found: Vec<usize> = found.iter().map(|&(i, _, _)| i).collect();
        missing(&found, park, sleep, &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// At the end of an attach session: binds the targets [`attach`] wrapped
/// back to the JVM's own functions, so the JVM runs on as before.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni` (or null: nothing is done).
pub(crate) unsafe fn detach(jni: *mut JNIEnv) {
    if jni.is_null() || !ATTACH_WRAPPED.iter().any(|w| w.load(Ordering::SeqCst)) {
        return;
    }
    let mut problems = Vec::new();
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        rebind(jni, false, &mut problems);
    }
    for w in &ATTACH_WRAPPED {
        w.store(false, Ordering::SeqCst);
    }
    for p in problems {
        say(&p);
    }
}

/// Calls `jtrace.Probe.bindWaits(wrap)`, noting what failed.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
unsafe fn rebind(jni: *mut JNIEnv, wrap: bool, problems: &mut Vec<String>) {
    REBIND_FAILED.store(0, Ordering::SeqCst);
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    if let Err(e) = unsafe { bind_waits(jni, wrap) } {
        problems.push(format!("park and sleep events: {e}"));
        return;
    }
    let failed = REBIND_FAILED.load(Ordering::SeqCst);
    for (i, t) in TARGETS.iter().enumerate() {
        if failed & (1 << i) != 0 {
            problems.push(format!("cannot re-bind {}; not recorded", t.describe()));
        }
    }
}

/// Calls `jtrace.Probe.bindWaits(wrap)`, which calls [`bind_waits0`] with
/// itself as the Java caller (see [`attach`]); defines the class first if
/// no session has, and binds `bindWaits0`.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
unsafe fn bind_waits(jni: *mut JNIEnv, wrap: bool) -> Result<(), String> {
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
        probe::natives::define_probe_class(jni)?;
        let class = probe::class::class();
        let native = probe::class::native(c"bindWaits0", c"(Z)V", bind_waits0 as *mut c_void);
        if jni!(jni, RegisterNatives, class, &native, 1) != Some(0) {
            clear_exception(jni);
            return Err("cannot register jtrace.Probe.bindWaits0".into());
        }
        let mid = jni!(jni, GetStaticMethodID, class, c"bindWaits".as_ptr(), c"(Z)V".as_ptr())
            .unwrap_or(std::ptr::null_mut());
        if mid.is_null() {
            clear_exception(jni);
            return Err("jtrace.Probe has no bindWaits(boolean)".into());
        }
        let args = [jvalue { z: wrap as jboolean }];
        jni!(jni, CallStaticVoidMethodA, class, mid, args.as_ptr());
        if clear_exception(jni) {
            return Err("jtrace.Probe.bindWaits threw".into());
        }
    }
    Ok(())
}

/// `jtrace.Probe.bindWaits0(boolean)`: binds each target an attach wrapped
/// to its wrapper (`wrap`) or back to the JVM's function. Runs with
/// `jtrace.Probe.bindWaits` as the Java caller (see [`attach`]).
///
/// # Safety
/// Called by the JVM as the native method `jtrace.Probe.bindWaits0`, with the calling thread's
/// `jni` and live local references.
unsafe extern "C" fn bind_waits0(jni: *mut JNIEnv, _probe: jclass, wrap: jboolean) {
    // SAFETY: the JVM calls this native with the calling thread's `jni` and live local references
    // (# Safety).
    unsafe {
        guard("bindWaits0", || {
            for (i, t) in TARGETS.iter().enumerate() {
                let orig = ORIG[i].load(Ordering::SeqCst);
                if !ATTACH_WRAPPED[i].load(Ordering::SeqCst) || orig == 0 {
                    continue;
                }
                let cls = jni!(jni, FindClass, t.class.as_ptr()).unwrap_or(std::ptr::null_mut());
                let addr = if wrap != 0 { wrapper(i) } else { orig as *mut c_void };
                if cls.is_null() || register(jni, cls, i, addr) != 0 {
                    clear_exception(jni);
                    REBIND_FAILED.fetch_or(1 << i, Ordering::SeqCst);
                }
                jvm::delete_local(jni, cls);
            }
        });
    }
}

/// Dotted class of the calling thread's park blocker, "" if none.
///
/// # Safety
/// On a Java thread, with the agent's `env` and the thread's `jni`.
unsafe fn blocker_class(env: *mut jvmtiEnv, jni: *mut JNIEnv) -> String {
    let fid = PARK_BLOCKER.load(Ordering::Relaxed) as jfieldID;
    if fid.is_null() {
        return String::new();
    }
    let mut thread: jthread = std::ptr::null_mut();
    // SAFETY: the caller passes the agent's `env` and this Java thread's `jni` (# Safety).
    unsafe {
        if jvmti!(env, GetCurrentThread, &mut thread) != JVMTI_ERROR_NONE || thread.is_null() {
            return String::new();
        }
        let blocker = jni!(jni, GetObjectField, thread, fid).unwrap_or(std::ptr::null_mut());
        jvm::delete_local(jni, thread);
        let name = object_class_name(env, jni, blocker);
        jvm::delete_local(jni, blocker);
        name
    }
}

/// Records a BEGIN; true if recorded (the END is then recorded too).
///
/// # Safety
/// On a Java thread whose JNIEnv is `jni`, in one of the wrappers.
unsafe fn begin(jni: *mut JNIEnv, k: u16, arg: u64, with_blocker: bool) -> bool {
    let ts = now_ns();
    let mut on = false;
    guard("park/sleep", || {
        let env = jvm::env();
        if env.is_null() || !STARTED.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: the caller guarantees `jni` is this Java thread's JNIEnv (# Safety).
        on = unsafe {
            record_java(env, jni, std::ptr::null_mut(), ts, || {
                let class = if with_blocker {
                    blocker_class(env, jni)
                } else {
                    String::new()
                };
                Payload::Jvm(k, JvmBlock { arg, class })
            })
        };
    });
    on
}

fn end(k: u16) {
    let ts = now_ns();
    guard("park/sleep", || {
        record_registered(
            ts,
            Payload::Jvm(
                k,
                JvmBlock {
                    arg: 0,
                    class: String::new(),
                },
            ),
        )
    });
}

/// # Safety
/// Called by the JVM as the native `Unsafe.park`, with the calling thread's `jni` and a live
/// `unsafe_`.
unsafe extern "C" fn park_wrapper(jni: *mut JNIEnv, unsafe_: jobject, absolute: jboolean, time: jlong) {
    let orig = ORIG[0].load(Ordering::Acquire);
    if orig == 0 {
        // Cannot happen (the wrapper is bound only once the original is
        // known); park may return spuriously, so returning is still correct.
        return;
    }
    // SAFETY: `orig` is the address the JVM bound to Unsafe.park(ZJ)V.
    let f: ParkFn = unsafe { std::mem::transmute::<usize, ParkFn>(orig) };
    // SAFETY: the JVM called this native with the current thread's `jni` (# Safety).
    let on = unsafe { begin(jni, kind::PARK_BEGIN, time as u64, true) };
    // SAFETY: `f` is the JVM's Unsafe.park, called with the arguments the JVM passed us.
    unsafe {
        f(jni, unsafe_, absolute, time);
    }
    if on {
        end(kind::PARK_END);
    }
}

/// # Safety
/// Called from a sleep wrapper with the arguments the JVM passed it; `i` is that wrapper's target.
unsafe fn sleep_common(i: usize, jni: *mut JNIEnv, cls: jclass, arg: jlong, millis: u64) {
    let orig = ORIG[i].load(Ordering::Acquire);
    if orig == 0 {
        return;
    }
    // SAFETY: `orig` is the address the JVM bound to this static native (J)V.
    let f: SleepFn = unsafe { std::mem::transmute::<usize, SleepFn>(orig) };
    // SAFETY: `jni` is the current thread's, as the JVM passed it to the wrapper (# Safety).
    let on = unsafe { begin(jni, kind::SLEEP_BEGIN, millis, false) };
    // SAFETY: `f` is the JVM's own sleep native, called with the arguments the JVM passed us.
    unsafe {
        f(jni, cls, arg);
    }
    if on {
        end(kind::SLEEP_END);
    }
}

/// # Safety
/// Called by the JVM as the native method `Thread.sleep`, with the calling thread's `jni` and live
/// local references.
unsafe extern "C" fn sleep_millis_wrapper(jni: *mut JNIEnv, cls: jclass, millis: jlong) {
    // SAFETY: the JVM calls this as `Thread.sleep` with its arguments (# Safety).
    unsafe {
        sleep_common(1, jni, cls, millis, millis.max(0) as u64);
    }
}

/// # Safety
/// Called by the JVM as the native method `Thread.sleepNanos0`, with the calling thread's `jni` and
/// live local references.
unsafe extern "C" fn sleep_nanos_wrapper(jni: *mut JNIEnv, cls: jclass, nanos: jlong) {
    // SAFETY: the JVM calls this as `Thread.sleepNanos0` with its arguments (# Safety).
    unsafe {
        sleep_common(2, jni, cls, nanos, (nanos.max(0) as u64).div_ceil(1_000_000));
    }
}

/// # Safety
/// Called by the JVM as the native method `Thread.sleep0`, with the calling thread's `jni` and live
/// local references.
unsafe extern "C" fn sleep0_wrapper(jni: *mut JNIEnv, cls: jclass, arg: jlong) {
    let arg_ms = if SLEEP0_NANOS.load(Ordering::Relaxed) {
        (arg.max(0) as u64).div_ceil(1_000_000)
    } else {
        arg.max(0) as u64
    };
    // SAFETY: the JVM calls this as `Thread.sleep0` with its arguments (# Safety).
    unsafe {
        sleep_common(3, jni, cls, arg, arg_ms);
    }
}

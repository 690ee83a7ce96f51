//! Method tracing by load-time bytecode rewriting (`bytecode_rewriting on`,
//! the default).
//!
//! At VMInit the agent defines the helper class `jtrace.Probe`
//! (java/jtrace/Probe.java, compiled by build.rs) into the bootstrap class
//! loader, registers its natives, enables ClassFileLoadHook and retransforms
//! the already loaded classes that have selected methods. The hook rewrites
//! the selected methods ([`crate::rewrite`]) to call `Probe.enter/exit/exitEx`
//! with a small int method id; the probes buffer one long per event per
//! thread in a Java long[], already in METHOD_BATCH's event layout (a 32-bit
//! time delta to the thread's previous event, the id and the kind;
//! docs/FORMAT.md). Each thread registers its buffer once ([`register0`]);
//! the agent then drains it through JNI field and array access (never
//! calling into Java) into METHOD_BATCH records of that thread, copying the
//! events as they are when they nest: when it is full ([`flush0`]), before any other record of the
//! thread is written ([`drain`], called by `with_state`, so a thread's
//! records stay in time order), at ThreadEnd ([`thread_end`]) and, for every
//! thread, at VM death ([`vm_death`]).
//!
//! The METHOD_DEF of an id is queued when the method is rewritten, before any
//! code that can use the id exists, so it always precedes the id's first use.
//! Ids are per (class, name, descriptor): a class retransformed again (or the
//! same class in two loaders) reuses its ids.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_uchar, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use jtrace_format::{
    kind, BatchWriter, BatchedKind, MethodDef, BATCH_MAX_EVENTS, BATCH_METHOD_LIMIT, RECORD_HEADER_LEN,
};
#[cfg(test)]
use jtrace_format::{Payload, Record, EXIT_BY_EXCEPTION};

use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::recorder::{lock, Recorder, SharedBuf};
use crate::sys::*;
use crate::{active, guard, now_ns, register, tid, with_state, ThreadState};

/// The compiled helper class.
static PROBE_CLASS_FILE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jtrace/Probe.class"));

/// Calls a JNI function through the environment's function table.
macro_rules! jni {
    ($env:expr, $f:ident $(, $a:expr)* $(,)?) => {{
        let env: *mut JNIEnv = $env;
        match (**env).$f {
            Some(f) => Some(f(env $(, $a)*)),
            None => None,
        }
    }};
}

/// The JVMTI environment (set at load).
static JVMTI: AtomicPtr<jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());
/// The JavaVM (set at load; used to get a JNIEnv when attaching).
static VM: AtomicPtr<JavaVM> = AtomicPtr::new(std::ptr::null_mut());
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

/// Bits of a probe event (the METHOD_BATCH event layout): bits 0–31 the ns
/// since the thread's previous event, 32–61 the method id, 62–63 the kind
/// ([`BatchedKind`] as a number).
const EVENT_ID_SHIFT: u32 = 32;
const EVENT_KIND_SHIFT: u32 = 62;

/// Counters, printed at VM death when JTRACE_AGENT_DEBUG is set.
static CLASSES_REWRITTEN: AtomicU64 = AtomicU64::new(0);
static METHODS_REWRITTEN: AtomicU64 = AtomicU64::new(0);
/// Selected methods left untraced because they could not be rewritten.
static METHODS_SKIPPED: AtomicU64 = AtomicU64::new(0);
static CLASSES_UNPARSABLE: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct Ids {
    by_method: HashMap<(String, String, String), u32>,
    next: u32,
}

fn ids() -> &'static Mutex<Ids> {
    static IDS: OnceLock<Mutex<Ids>> = OnceLock::new();
    IDS.get_or_init(|| {
        Mutex::new(Ids {
            by_method: HashMap::new(),
            next: 1,
        })
    })
}

/// A registered probe buffer: global reference to the thread's `Probe`,
/// its kernel tid and stream buffer (`None` for threads the rules exclude).
struct Registered {
    probe: usize,
    tid: u32,
    buf: Option<SharedBuf>,
}

/// Every live thread's probe buffer, for the final drain at VM death.
static REGISTERED: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

thread_local! {
    /// The calling thread's `Probe` (global reference) and JNIEnv, once registered.
    static MINE: Cell<(jobject, *mut JNIEnv)> = const { Cell::new((std::ptr::null_mut(), std::ptr::null_mut())) };
}

/// Whether method tracing uses bytecode rewriting under `cfg`.
pub(crate) fn enabled(cfg: &Config) -> bool {
    cfg.traces_methods() && cfg.bytecode_rewriting
}

/// Capabilities bytecode rewriting needs (added at load). In a live VM
/// (`attach`) only retransformation is needed (and available): every class
/// is either loaded already, and retransformed, or loaded later, and hooked.
pub(crate) fn capabilities(caps: &mut jvmtiCapabilities, attach: bool) {
    caps.set_can_retransform_classes(1);
    if !attach {
        caps.set_can_generate_all_class_hook_events(1);
    }
}

/// Remembers the JVM and JVMTI environment (at load).
pub(crate) fn set_vm(vm: *mut JavaVM, env: *mut jvmtiEnv) {
    VM.store(vm, Ordering::SeqCst);
    JVMTI.store(env, Ordering::SeqCst);
}

/// Classes never rewritten: the probe itself and what it runs on (rewriting
/// them would make the probes recurse), and JVM internals.
fn excluded_class(internal: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "jtrace/",
        "java/lang/Thread",
        "java/lang/ref/",
        "java/lang/invoke/",
        "jdk/internal/",
        "sun/invoke/",
        "java/lang/VirtualThread",
    ];
    matches!(internal, "java/lang/Object" | "java/lang/System" | "java/lang/Class")
        || PREFIXES.iter().any(|p| internal.starts_with(p))
}

fn method_id(class: &str, name: &str, desc: &str) -> Option<u32> {
    let mut ids = lock(ids());
    let key = (class.to_string(), name.to_string(), desc.to_string());
    if let Some(&id) = ids.by_method.get(&key) {
        return Some(id);
    }
    let id = ids.next;
    if id as u64 >= BATCH_METHOD_LIMIT {
        // The probes pack the id into 30 bits; 2^30 distinct methods is
        // beyond any real program: leave the rest untraced.
        return None;
    }
    ids.next += 1;
    ids.by_method.insert(key, id);
    Some(id)
}

/// The method id bytecode rewriting gave a method (class dotted or internal,
/// JVM signature), if it was rewritten. Other records about the same method
/// (e.g. COMPILED_METHOD_LOAD) should use this id rather than define the
/// method a second time under another id.
#[allow(dead_code)]
pub(crate) fn rewritten_method_id(class: &str, name: &str, signature: &str) -> Option<u32> {
    let key = (class.replace('.', "/"), name.to_string(), signature.to_string());
    lock(ids()).by_method.get(&key).copied()
}

/// Rewrites a class file if it has selected methods; queues their METHOD_DEFs.
fn transform(rec: &Recorder, cfg: &Config, data: &[u8]) -> Option<Vec<u8>> {
    let mut dotted = String::new();
    let mut select = |class: &str, name: &str, desc: &str| -> Option<u32> {
        if dotted.is_empty() {
            dotted = class.replace('/', ".");
        }
        if excluded_class(class) || !cfg.method_traced(&dotted, name) {
            return None;
        }
        method_id(class, name, desc)
    };
    let res = match crate::rewrite::instrument_class(data, &mut select) {
        Ok(r) => r,
        Err(e) => {
            CLASSES_UNPARSABLE.fetch_add(1, Ordering::Relaxed);
            debug(&format!("cannot parse a class file: {e}"));
            return None;
        }
    };
    for s in &res.skipped {
        METHODS_SKIPPED.fetch_add(1, Ordering::Relaxed);
        debug(&format!("not tracing {}.{}{}: {}", res.class, s.name, s.desc, s.reason));
    }
    let bytes = res.bytes?;
    let dotted = res.class.replace('/', ".");
    let (t, ts) = (tid(), now_ns());
    for m in &res.methods {
        let def = MethodDef {
            method: m.id as u64,
            class: dotted.clone(),
            name: m.name.clone(),
            signature: m.desc.clone(),
        };
        rec.define_method(t, ts, def, true);
    }
    CLASSES_REWRITTEN.fetch_add(1, Ordering::Relaxed);
    METHODS_REWRITTEN.fetch_add(res.methods.len() as u64, Ordering::Relaxed);
    Some(bytes)
}

fn debug(msg: &str) {
    if std::env::var_os("JTRACE_AGENT_DEBUG").is_some() {
        eprintln!("jtrace agent (debug): {msg}");
    }
}

/// JVMTI ClassFileLoadHook: rewrites classes with selected methods.
pub(crate) unsafe extern "C" fn on_class_file_load_hook(
    env: *mut jvmtiEnv,
    _jni: *mut JNIEnv,
    _class_being_redefined: jclass,
    _loader: jobject,
    name: *const c_char,
    _protection_domain: jobject,
    class_data_len: jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut jint,
    new_class_data: *mut *mut c_uchar,
) {
    if !READY.load(Ordering::Acquire) || class_data.is_null() || class_data_len <= 0 {
        return;
    }
    guard("ClassFileLoadHook", || {
        let Some((rec, cfg)) = active() else { return };
        if !name.is_null() {
            // Cheap early out before parsing.
            if excluded_class(&CStr::from_ptr(name).to_string_lossy()) {
                return;
            }
        }
        let data = std::slice::from_raw_parts(class_data, class_data_len as usize);
        let Some(out) = transform(rec, cfg, data) else { return };
        let mut mem: *mut c_uchar = std::ptr::null_mut();
        if jvmti!(env, Allocate, out.len() as jlong, &mut mem) != JVMTI_ERROR_NONE || mem.is_null() {
            return;
        }
        std::ptr::copy_nonoverlapping(out.as_ptr(), mem, out.len());
        *new_class_data_len = out.len() as jint;
        *new_class_data = mem;
    });
}

/// A JNIEnv for the calling thread (`jni` if given, else from the JavaVM).
pub(crate) unsafe fn jni_env(jni: *mut JNIEnv) -> *mut JNIEnv {
    if !jni.is_null() {
        return jni;
    }
    let vm = VM.load(Ordering::SeqCst);
    if vm.is_null() {
        return std::ptr::null_mut();
    }
    let Some(get_env) = (**vm).GetEnv else {
        return std::ptr::null_mut();
    };
    let mut p: *mut c_void = std::ptr::null_mut();
    // JNI_VERSION_1_8
    if get_env(vm, &mut p, 0x0001_0008) != 0 {
        return std::ptr::null_mut();
    }
    p.cast()
}

/// Clears (and returns whether there was) a pending Java exception.
unsafe fn clear_exception(jni: *mut JNIEnv) -> bool {
    if jni!(jni, ExceptionCheck).unwrap_or(0) != 0 {
        jni!(jni, ExceptionClear);
        return true;
    }
    false
}

/// Defines the probe class, registers its natives, enables the hook and
/// retransforms the loaded classes with selected methods (at VMInit).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv, cfg: &Config) -> Result<(), String> {
    let jni = jni_env(jni);
    if jni.is_null() {
        return Err("bytecode rewriting: no JNI environment".into());
    }
    JVMTI.store(env, Ordering::SeqCst);
    if !READY.load(Ordering::Acquire) {
        define_probe_class(jni)?;
    }
    let err = jvm::set_event(env, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, true);
    if err != JVMTI_ERROR_NONE {
        return Err(format!("cannot enable ClassFileLoadHook (JVMTI error {err})"));
    }
    retransform_loaded(env, jni, cfg);
    Ok(())
}

/// Defines `jtrace.Probe` in the bootstrap class loader (visible from every
/// loader) and binds its natives. Done once per JVM: a later attach reuses
/// the class, whose threads keep their buffers.
unsafe fn define_probe_class(jni: *mut JNIEnv) -> Result<(), String> {
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
    let natives = [
        JNINativeMethod {
            name: c"register0".as_ptr().cast_mut(),
            signature: c"(Ljtrace/Probe;)V".as_ptr().cast_mut(),
            fnPtr: register0 as *mut c_void,
        },
        JNINativeMethod {
            name: c"flush0".as_ptr().cast_mut(),
            signature: c"()V".as_ptr().cast_mut(),
            fnPtr: flush0 as *mut c_void,
        },
        JNINativeMethod {
            name: c"bindWaits0".as_ptr().cast_mut(),
            signature: c"(Z)V".as_ptr().cast_mut(),
            fnPtr: crate::natives::bind_waits0 as *mut c_void,
        },
    ];
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
    let init = jni!(jni, GetStaticMethodID, class, c"init".as_ptr(), c"()V".as_ptr()).unwrap_or(std::ptr::null_mut());
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
    CLASS.store(global, Ordering::SeqCst);
    for (slot, f) in fields {
        slot.store(f, Ordering::SeqCst);
    }
    BY_THREAD_FIELD.store(by_thread, Ordering::SeqCst);
    READY.store(true, Ordering::Release);
    Ok(())
}

/// Exports java.base's `jdk.internal.misc` to the probe class's module (the
/// boot loader's unnamed one), so that the probe can read `Thread.tid`
/// with Unsafe for its thread-id cache. Without the export the probe still
/// works, through its ThreadLocal alone (about 10 ns more per traced call).
unsafe fn export_unsafe(jni: *mut JNIEnv, class: jclass) {
    let env = JVMTI.load(Ordering::SeqCst);
    if env.is_null() {
        return;
    }
    let mut java_base: jobject = std::ptr::null_mut();
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

/// Calls `jtrace.Probe.bindWaits(wrap)` (see [`crate::natives::attach`]),
/// defining the class first if no session has.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn bind_waits(jni: *mut JNIEnv, wrap: bool) -> Result<(), String> {
    if !READY.load(Ordering::Acquire) {
        define_probe_class(jni)?;
    }
    let class = CLASS.load(Ordering::SeqCst);
    let mid =
        jni!(jni, GetStaticMethodID, class, c"bindWaits".as_ptr(), c"(Z)V".as_ptr()).unwrap_or(std::ptr::null_mut());
    if mid.is_null() {
        clear_exception(jni);
        return Err("jtrace.Probe has no bindWaits(boolean)".into());
    }
    let args = [jvalue { z: wrap as jboolean }];
    jni!(jni, CallStaticVoidMethodA, class, mid, args.as_ptr());
    if clear_exception(jni) {
        return Err("jtrace.Probe.bindWaits threw".into());
    }
    Ok(())
}

/// At the start of an attach session, before any probe of it exists:
/// empties every thread's probe buffer without recording it. What the probes
/// buffered since the last session stopped (frames that kept running
/// instrumented code) belongs to no session.
pub(crate) unsafe fn purge_buffers(jni: *mut JNIEnv) {
    if !READY.load(Ordering::Acquire) || jni.is_null() {
        return;
    }
    let all: Vec<usize> = lock(&REGISTERED).iter().map(|r| r.probe).collect();
    for probe in all {
        take_buffer(jni, probe as jobject, |_| {});
    }
}

/// Registers the calling thread in the current session if it has a probe
/// buffer from an earlier one (its `Probe` object outlives sessions, so
/// register0 is not called again).
pub(crate) fn register_own(rec: &Recorder, st: &mut ThreadState) {
    let Ok((probe, jni)) = MINE.try_with(Cell::get) else {
        return;
    };
    let Some((_, cfg)) = active() else { return };
    let env = JVMTI.load(Ordering::SeqCst);
    if probe.is_null() || jni.is_null() || env.is_null() {
        return;
    }
    // SAFETY: on a Java thread with its JNIEnv; the thread reference is local.
    unsafe {
        let mut thread: jthread = std::ptr::null_mut();
        if jvmti!(env, GetCurrentThread, &mut thread) == JVMTI_ERROR_NONE {
            register(st, rec, cfg, env, jni, thread, now_ns());
            jvm::delete_local(jni, thread);
        }
    }
}

/// Stops method tracing at the end of an attach session (the agent is
/// disabled already, so the hook leaves classes alone): if the session
/// traced methods, retransforms the classes with selected methods back to
/// their original bytes; then writes
/// every thread's buffered events into its stream buffer of this session
/// (`buf_of(tid)`, which gives a thread that recorded nothing else in this
/// session a new buffer). Frames still running an instrumented version keep
/// calling the probes until they return; those events are discarded at the
/// next attach.
pub(crate) unsafe fn stop(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    cfg: &Config,
    rec: &Recorder,
    buf_of: &dyn Fn(u32) -> Option<SharedBuf>,
) {
    if !READY.load(Ordering::Acquire) || jni.is_null() {
        return;
    }
    if enabled(cfg) {
        retransform_loaded(env, jni, cfg);
    }
    report_virtual_threads(jni, rec);
    let all: Vec<(usize, u32)> = lock(&REGISTERED).iter().map(|r| (r.probe, r.tid)).collect();
    for (probe, t) in all {
        match buf_of(t) {
            Some(b) => {
                take_buffer(jni, probe as jobject, |data| encode_block(rec, &b, t, data, None));
                rec.flush_if_full(&b);
            }
            None => take_buffer(jni, probe as jobject, |_| {}),
        }
    }
}

/// Retransforms the loaded classes that have a selected method, so that
/// classes loaded before VMInit are traced too.
unsafe fn retransform_loaded(env: *mut jvmtiEnv, jni: *mut JNIEnv, cfg: &Config) {
    let mut n: jint = 0;
    let mut classes: *mut jclass = std::ptr::null_mut();
    if jvmti!(env, GetLoadedClasses, &mut n, &mut classes) != JVMTI_ERROR_NONE || classes.is_null() {
        return;
    }
    let all = std::slice::from_raw_parts(classes, n.max(0) as usize);
    let mut chosen: Vec<jclass> = Vec::new();
    for &c in all {
        if class_has_selected_method(env, c, cfg) {
            chosen.push(c);
        } else {
            jvm::delete_local(jni, c);
        }
    }
    jvmti!(env, Deallocate, classes.cast());
    if chosen.is_empty() {
        return;
    }
    let err = jvmti!(env, RetransformClasses, chosen.len() as jint, chosen.as_ptr());
    if err != JVMTI_ERROR_NONE {
        // One bad class fails the batch: retry one by one.
        for c in &chosen {
            let e = jvmti!(env, RetransformClasses, 1, c);
            if e != JVMTI_ERROR_NONE {
                debug(&format!("RetransformClasses failed (JVMTI error {e})"));
            }
        }
    }
    for c in chosen {
        jvm::delete_local(jni, c);
    }
}

unsafe fn class_has_selected_method(env: *mut jvmtiEnv, c: jclass, cfg: &Config) -> bool {
    let mut modifiable: jboolean = 0;
    if jvmti!(env, IsModifiableClass, c, &mut modifiable) != JVMTI_ERROR_NONE || modifiable == 0 {
        return false;
    }
    let mut sig: *mut c_char = std::ptr::null_mut();
    if jvmti!(env, GetClassSignature, c, &mut sig, std::ptr::null_mut()) != JVMTI_ERROR_NONE {
        return false;
    }
    let Some(sig) = jvm::take_string(env, sig) else {
        return false;
    };
    let Some(internal) = sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) else {
        return false;
    };
    if excluded_class(internal) {
        return false;
    }
    let dotted = internal.replace('/', ".");
    let mut count: jint = 0;
    let mut methods: *mut jmethodID = std::ptr::null_mut();
    if jvmti!(env, GetClassMethods, c, &mut count, &mut methods) != JVMTI_ERROR_NONE || methods.is_null() {
        return false;
    }
    let mut found = false;
    for &m in std::slice::from_raw_parts(methods, count.max(0) as usize) {
        let mut name: *mut c_char = std::ptr::null_mut();
        if jvmti!(
            env,
            GetMethodName,
            m,
            &mut name,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        ) != JVMTI_ERROR_NONE
        {
            continue;
        }
        if let Some(name) = jvm::take_string(env, name) {
            if cfg.method_traced(&dotted, &name) {
                found = true;
                break;
            }
        }
    }
    jvmti!(env, Deallocate, methods.cast());
    found
}

/// The events of one probe buffer: `events[0]`'s delta counts from `base`.
#[derive(Clone, Copy)]
struct Block<'a> {
    base: u64,
    events: &'a [jlong],
}

/// Reads and empties the Java buffer of `probe` (any thread's), calling
/// `f` with its events in place: the array is pinned with
/// GetPrimitiveArrayCritical (no copy), so `f` must not call JNI or block.
/// The next events then count from the last one (`base = last`). A pending
/// exception is set aside meanwhile.
unsafe fn take_buffer(jni: *mut JNIEnv, probe: jobject, f: impl FnOnce(Block)) {
    let [buf_field, pos_field, base_field, last_field] =
        [&BUF_FIELD, &POS_FIELD, &BASE_FIELD, &LAST_FIELD].map(|f| f.load(Ordering::SeqCst));
    if jni.is_null() || probe.is_null() || buf_field.is_null() {
        return;
    }
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

/// Drains the calling thread's probe buffer into its stream buffer. Called
/// by `with_state` before every record of the thread, so that the thread's
/// records stay in time order.
pub(crate) fn drain(rec: &Recorder, st: &mut ThreadState) {
    let Ok((probe, jni)) = MINE.try_with(Cell::get) else {
        return;
    };
    if probe.is_null() {
        return;
    }
    let buf = if st.traced { st.buf.clone() } else { None };
    let traced = st.traced;
    let stack = &mut st.stack;
    // SAFETY: `probe` is a live global reference and `jni` this thread's JNIEnv.
    unsafe {
        take_buffer(jni, probe, |data| match &buf {
            Some(b) => encode_block(rec, b, tid(), data, Some(stack)),
            None if traced => rec.count_lost(data.events.len() as u64),
            None => {}
        })
    };
    if let Some(b) = &buf {
        rec.flush_if_full(b);
    }
}

/// At ThreadEnd, on the ending thread, before its THREAD_END is recorded:
/// drains and forgets the thread's probe buffer.
pub(crate) unsafe fn thread_end(jni: *mut JNIEnv) {
    let Some((rec, _)) = active() else { return };
    let Ok((probe, _)) = MINE.try_with(Cell::get) else {
        return;
    };
    if probe.is_null() {
        return;
    }
    with_state(rec, |_| {});
    lock(&REGISTERED).retain(|r| r.probe != probe as usize);
    let _ = MINE.try_with(|m| m.set((std::ptr::null_mut(), std::ptr::null_mut())));
    if !jni.is_null() {
        forget_slot(jni, probe);
        jni!(jni, DeleteGlobalRef, probe);
    }
}

/// Records (as an agent message in the stream) that virtual threads called
/// traced methods since the last report, and resets the probes' counts:
/// their calls are not traced (see Probe.java), and the loss is not silent.
unsafe fn report_virtual_threads(jni: *mut JNIEnv, rec: &Recorder) {
    let class = CLASS.load(Ordering::SeqCst);
    if jni.is_null() || class.is_null() {
        return;
    }
    let field = |name: &CStr| {
        let f = jni!(jni, GetStaticFieldID, class, name.as_ptr(), c"J".as_ptr()).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        f
    };
    let (threads_field, events_field) = (field(c"virtualThreads"), field(c"virtualEvents"));
    if threads_field.is_null() || events_field.is_null() || jni!(jni, MonitorEnter, class) != Some(0) {
        clear_exception(jni);
        return;
    }
    // The probes update both under the class's lock.
    let threads = jni!(jni, GetStaticLongField, class, threads_field).unwrap_or(0);
    let events = jni!(jni, GetStaticLongField, class, events_field).unwrap_or(0);
    jni!(jni, SetStaticLongField, class, threads_field, 0);
    jni!(jni, SetStaticLongField, class, events_field, 0);
    jni!(jni, MonitorExit, class);
    clear_exception(jni);
    if threads > 0 {
        let msg = format!(
            "method calls on virtual threads are not traced: {threads} virtual thread(s) called traced methods \
             (at least {events} method events not recorded)"
        );
        crate::say(&msg);
        rec.write_direct(&jtrace_format::Record {
            tid: tid(),
            ts: now_ns(),
            payload: jtrace_format::Payload::AgentError(msg),
        });
    }
}

/// Empties the probe's slot in `Probe.BY_THREAD` if it still holds it, so
/// that the ended thread and its buffer can be collected.
unsafe fn forget_slot(jni: *mut JNIEnv, probe: jobject) {
    let (slot_field, by_thread) = (
        SLOT_FIELD.load(Ordering::SeqCst),
        BY_THREAD_FIELD.load(Ordering::SeqCst),
    );
    let class = CLASS.load(Ordering::SeqCst);
    if slot_field.is_null() || by_thread.is_null() || class.is_null() {
        return;
    }
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

/// At VM death, before the recorder's final flush: drains every thread's
/// probe buffer (other threads' into their own stream buffers).
pub(crate) unsafe fn vm_death(jni: *mut JNIEnv) {
    if let Some((rec, _)) = active() {
        with_state(rec, |_| {});
        let jni = jni_env(jni);
        let mine = MINE.try_with(Cell::get).map(|m| m.0 as usize).unwrap_or(0);
        let all: Vec<(usize, u32, Option<SharedBuf>)> = lock(&REGISTERED)
            .iter()
            .map(|r| (r.probe, r.tid, r.buf.clone()))
            .collect();
        for (probe, t, buf) in all {
            if probe == mine {
                continue;
            }
            if let Some(b) = &buf {
                take_buffer(jni, probe as jobject, |data| encode_block(rec, b, t, data, None));
                rec.flush_if_full(b);
            }
        }
        report_virtual_threads(jni, rec);
    }
    if std::env::var_os("JTRACE_AGENT_DEBUG").is_some() {
        eprintln!(
            "jtrace agent (debug): classes rewritten {}, methods rewritten {}, methods skipped {}, unparsable classes {}",
            CLASSES_REWRITTEN.load(Ordering::Relaxed),
            METHODS_REWRITTEN.load(Ordering::Relaxed),
            METHODS_SKIPPED.load(Ordering::Relaxed),
            CLASSES_UNPARSABLE.load(Ordering::Relaxed)
        );
    }
}

/// `Probe.register0(Probe p)`: the calling thread's first probe call.
unsafe extern "C" fn register0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.register0", || {
        let Some((rec, cfg)) = active() else { return };
        let global = jni!(jni, NewGlobalRef, probe).unwrap_or(std::ptr::null_mut());
        if global.is_null() {
            return;
        }
        let old = MINE
            .try_with(|m| m.replace((global, jni)))
            .unwrap_or((std::ptr::null_mut(), jni));
        if !old.0.is_null() {
            // A second Probe on this thread (its ThreadLocal was cleared).
            lock(&REGISTERED).retain(|r| r.probe != old.0 as usize);
            jni!(jni, DeleteGlobalRef, old.0);
        }
        with_state(rec, |st| {
            if !st.registered {
                let env = JVMTI.load(Ordering::SeqCst);
                let mut thread: jthread = std::ptr::null_mut();
                if jvmti!(env, GetCurrentThread, &mut thread) == JVMTI_ERROR_NONE {
                    register(st, rec, cfg, env, jni, thread, now_ns());
                    jvm::delete_local(jni, thread);
                }
            }
            let buf = if st.traced { st.buf.clone() } else { None };
            lock(&REGISTERED).push(Registered {
                probe: global as usize,
                tid: tid(),
                buf,
            });
        });
    });
}

/// `Probe.flush0()`: the calling thread's buffer is full.
unsafe extern "C" fn flush0(_jni: *mut JNIEnv, _class: jclass) {
    guard("Probe.flush0", || {
        let Some((rec, _)) = active() else { return };
        // with_state drains the buffer before running the closure.
        with_state(rec, |_| {});
    });
}

/// Writes a block of probe events as METHOD_BATCH records straight into the
/// thread's stream buffer (runs inside the JNI critical region, so it does
/// not write the buffer out). See [`encode_events`].
fn encode_block(rec: &Recorder, buf: &SharedBuf, tid: u32, block: Block, stack: Option<&mut Vec<usize>>) {
    rec.encode_with(buf, |out| encode_events(out, tid, block, stack));
}

/// The body of [`encode_block`]; returns the number of events written.
///
/// With the thread's stack of open methods (`stack`), exits are matched
/// against it: an exit whose method is open below the innermost one closes
/// the frames above it as exited by exception (a constructor whose
/// super()/this() call threw has no exit probe of its own), and an exit of a
/// method that is not open at all is dropped. So every thread's entries and
/// exits stay strictly nested. The events up to the first one that needs
/// such a repair (normally all of them) are copied as they are.
fn encode_events(out: &mut Vec<u8>, tid: u32, block: Block, mut stack: Option<&mut Vec<usize>>) -> u64 {
    let events = block.events;
    let nested = match stack.as_deref_mut() {
        Some(s) => nested_prefix(s, events),
        None => events.len(),
    };
    let mut ts = block.base;
    let mut chunks = events[..nested].chunks(BATCH_MAX_EVENTS).peekable();
    while let Some(chunk) = chunks.next() {
        write_batch(out, tid, ts, chunk);
        if chunks.peek().is_some() || nested < events.len() {
            ts = end_time(ts, chunk);
        }
    }
    if nested == events.len() {
        return nested as u64;
    }
    let mut w = BatchWriter::new(tid);
    let mut n = nested as u64;
    for &e in &events[nested..] {
        let e = e as u64;
        ts += e & 0xFFFF_FFFF;
        let id = (e >> EVENT_ID_SHIFT) & (BATCH_METHOD_LIMIT - 1);
        let kind = e >> EVENT_KIND_SHIFT;
        if kind == 0 {
            if let Some(s) = stack.as_deref_mut() {
                s.push(id as usize);
            }
            w.push(out, ts, id, BatchedKind::Entry);
            n += 1;
            continue;
        }
        if let Some(s) = stack.as_deref_mut() {
            if s.last() != Some(&(id as usize)) {
                if !s.contains(&(id as usize)) {
                    continue;
                }
                while let Some(&top) = s.last() {
                    if top == id as usize {
                        break;
                    }
                    s.pop();
                    w.push(out, ts, top as u64, BatchedKind::ExitByException);
                    n += 1;
                }
            }
            s.pop();
        }
        let kind = if kind == 1 {
            BatchedKind::Exit
        } else {
            BatchedKind::ExitByException
        };
        w.push(out, ts, id, kind);
        n += 1;
    }
    w.finish(out);
    n
}

/// How many leading `events` nest properly on top of `stack` (every exit
/// leaves the innermost open method); applies them to `stack`.
fn nested_prefix(stack: &mut Vec<usize>, events: &[jlong]) -> usize {
    for (i, &e) in events.iter().enumerate() {
        let e = e as u64;
        let id = ((e >> EVENT_ID_SHIFT) & (BATCH_METHOD_LIMIT - 1)) as usize;
        if e >> EVENT_KIND_SHIFT == 0 {
            stack.push(id);
        } else if stack.last() == Some(&id) {
            stack.pop();
        } else {
            return i;
        }
    }
    events.len()
}

/// Appends one METHOD_BATCH record holding `events` (at most
/// [`BATCH_MAX_EVENTS`], already in its event layout; the first one's delta
/// counts from `base`).
fn write_batch(out: &mut Vec<u8>, tid: u32, base: u64, events: &[jlong]) {
    let Some((&first, rest)) = events.split_first() else {
        return;
    };
    let first = first as u64;
    let len = RECORD_HEADER_LEN + 8 + 8 * events.len();
    out.reserve(len);
    out.extend_from_slice(&kind::METHOD_BATCH.to_le_bytes());
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&tid.to_le_bytes());
    out.extend_from_slice(&(base + (first & 0xFFFF_FFFF)).to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    // The header holds the first event's time: its own delta is 0.
    out.extend_from_slice(&(first & !0xFFFF_FFFF).to_le_bytes());
    out.extend_from_slice(as_le_bytes(rest));
}

/// The time of the last of `events`, the first one's delta counting from `base`.
fn end_time(base: u64, events: &[jlong]) -> u64 {
    base + events.iter().map(|&e| e as u64 & 0xFFFF_FFFF).sum::<u64>()
}

/// The bytes of `events` in little-endian order: the slice itself (the
/// agent is built for little-endian machines only, see below).
fn as_le_bytes(events: &[jlong]) -> &[u8] {
    // SAFETY: any initialised memory is valid as bytes; the length covers
    // exactly the slice.
    unsafe { std::slice::from_raw_parts(events.as_ptr().cast::<u8>(), std::mem::size_of_val(events)) }
}

#[cfg(not(target_endian = "little"))]
compile_error!("the probe buffers are written out as little-endian bytes");

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(buf: &[u8]) -> Vec<Record> {
        jtrace_format::Decoder::new(buf, 0).map(|r| r.unwrap()).collect()
    }

    fn method(r: &Record) -> (bool, u64, u32) {
        match &r.payload {
            Payload::MethodEntry(e) => (true, e.method, e.flags),
            Payload::MethodExit(e) => (false, e.method, e.flags),
            p => panic!("not a method event: {p:?}"),
        }
    }

    /// A probe event as `Probe.java` stores it.
    fn ev(delta: u64, id: u64, kind: u64) -> jlong {
        (delta | id << EVENT_ID_SHIFT | kind << EVENT_KIND_SHIFT) as jlong
    }

    fn encode(base: u64, events: &[jlong], stack: Option<&mut Vec<usize>>) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let n = encode_events(&mut out, 77, Block { base, events }, stack);
        (out, n)
    }

    #[test]
    fn nested_events_are_copied_into_one_batch_as_they_are() {
        // enter 3, enter 4, exit 4, exitEx 3, counted from base 90.
        let data = [ev(10, 3, 0), ev(10, 4, 0), ev(10, 4, 1), ev(10, 3, 2)];
        let mut stack = Vec::new();
        let (out, n) = encode(90, &data, Some(&mut stack));
        assert_eq!(n, 4);
        assert!(stack.is_empty());
        assert_eq!(out.len(), RECORD_HEADER_LEN + 8 + 4 * 8);
        // After the first (whose time moved into the header), the events
        // are the probe's longs byte for byte.
        assert_eq!(&out[out.len() - 24..], as_le_bytes(&data[1..]));
        let recs = decode(&out);
        assert!(recs.iter().all(|r| r.tid == 77));
        assert_eq!(recs.iter().map(|r| r.ts).collect::<Vec<_>>(), vec![100, 110, 120, 130]);
        assert_eq!(
            recs.iter().map(method).collect::<Vec<_>>(),
            vec![(true, 3, 0), (true, 4, 0), (false, 4, 0), (false, 3, EXIT_BY_EXCEPTION)]
        );
    }

    #[test]
    fn an_exit_below_the_top_closes_the_frames_above_it() {
        // enter 1, enter 2 (a constructor whose super() threw: no exit of
        // its own), exit 1; then an exit of a method never entered, whose
        // time still counts for the next event; then enter 5.
        let data = [ev(10, 1, 0), ev(10, 2, 0), ev(10, 1, 1), ev(10, 9, 1), ev(10, 5, 0)];
        let mut stack = vec![8];
        let (out, n) = encode(0, &data, Some(&mut stack));
        assert_eq!(n, 5);
        assert_eq!(stack, vec![8, 5]);
        let recs = decode(&out);
        assert_eq!(
            recs.iter().map(method).collect::<Vec<_>>(),
            vec![
                (true, 1, 0),
                (true, 2, 0),
                (false, 2, EXIT_BY_EXCEPTION),
                (false, 1, 0),
                (true, 5, 0)
            ]
        );
        assert_eq!(recs.iter().map(|r| r.ts).collect::<Vec<_>>(), vec![10, 20, 30, 30, 50]);
    }

    #[test]
    fn a_long_block_is_split_into_batches_with_the_right_times() {
        let n = 2 * BATCH_MAX_EVENTS + 5;
        let data: Vec<jlong> = (0..n).map(|i| ev(i as u64 % 7, 6, (i % 2) as u64)).collect();
        let base = 1 << 40;
        let mut stack = Vec::new();
        let (out, written) = encode(base, &data, Some(&mut stack));
        assert_eq!(written, n as u64);
        let recs = decode(&out);
        assert_eq!(recs.len(), n);
        let mut ts = base;
        for (i, r) in recs.iter().enumerate() {
            ts += i as u64 % 7;
            assert_eq!((r.ts, method(r)), (ts, (i % 2 == 0, 6, 0)), "event {i}");
        }
        assert_eq!(end_time(base, &data), ts);
        // Without a stack (another thread's buffer at VM death) the same.
        let (again, _) = encode(base, &data, None);
        assert_eq!(again, out);
    }
}

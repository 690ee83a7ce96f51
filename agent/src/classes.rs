//! Which classes get the bytecode probes, and getting them in: the
//! ClassFileLoadHook that rewrites classes with selected methods as they
//! load ([`crate::rewrite`]), the method ids the probes carry, and the
//! retransformation of classes loaded already (at VMInit or attach) and
//! back to their original bytes (at the end of an attach session).
//!
//! The METHOD_DEF of an id is queued when the method is rewritten, before any
//! code that can use the id exists, so it always precedes the id's first use.
//! Ids are per (class, name, descriptor): a class retransformed again (or the
//! same class in two loaders) reuses its ids.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_uchar, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use jtrace_format::{kind, MethodDef, MethodTally, Payload, Record};

use crate::config::Config;
use crate::demotion;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::probe;
use crate::recorder::Recorder;
use crate::rewrite::Selected;
use crate::state::{active, debug, guard, now_ns, say, tid};
use crate::sys::*;
use crate::vthreads;

/// Counters, printed at VM death when JTRACE_AGENT_DEBUG is set.
/// Told of each class a retransformation changed, its new methods in place
/// (set by the stacks' code records, a module above this one: the methods'
/// `Method*`s are new).
static RETRANSFORMED: Mutex<Option<RetransformedFn>> = Mutex::new(None);
/// See [`RETRANSFORMED`].
pub(crate) type RetransformedFn = unsafe fn(*mut jvmtiEnv, jclass);

/// Sets what is told of each retransformed class ([`RETRANSFORMED`]).
pub(crate) fn on_retransformed(f: RetransformedFn) {
    *lock(&RETRANSFORMED) = Some(f);
}

/// Tells [`RETRANSFORMED`] of `classes`, retransformed.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `classes` are valid class
/// references.
unsafe fn retransformed(env: *mut jvmtiEnv, classes: &[jclass]) {
    let f = *lock(&RETRANSFORMED);
    if let Some(f) = f {
        for &c in classes {
            // SAFETY: the caller passes the agent's live `env` and valid class references (# Safety).
            unsafe {
                f(env, c);
            }
        }
    }
}

static CLASSES_REWRITTEN: AtomicU64 = AtomicU64::new(0);
static METHODS_REWRITTEN: AtomicU64 = AtomicU64::new(0);
/// Selected methods left untraced because they could not be rewritten.
static METHODS_SKIPPED: AtomicU64 = AtomicU64::new(0);
static CLASSES_UNPARSABLE: AtomicU64 = AtomicU64::new(0);
/// A selected method found no id left ([`crate::probe::class::MAX_METHOD_ID`]).
static OUT_OF_IDS: AtomicBool = AtomicBool::new(false);
/// The trace says so once.
static OUT_OF_IDS_SAID: AtomicBool = AtomicBool::new(false);
/// Selected methods left without probes as trivial.
static METHODS_TRIVIAL: AtomicU64 = AtomicU64::new(0);
/// The ids whose METHOD_TRIVIAL the current session wrote (a class
/// retransformed again, or loaded twice, states its trivial methods once),
/// with that session's number.
static TRIVIAL_WRITTEN: Mutex<(u64, Option<HashSet<u32>>)> = Mutex::new((0, None));

/// The method ids given so far, by (internal class name, name, descriptor).
#[derive(Default)]
struct Ids {
    by_method: HashMap<(String, String, String), u32>,
    /// The keys by id - 1 (the demoter looks ids up by the hundred).
    by_id: Vec<(String, String, String)>,
    next: u32,
}

fn ids() -> &'static Mutex<Ids> {
    static IDS: OnceLock<Mutex<Ids>> = OnceLock::new();
    IDS.get_or_init(|| {
        Mutex::new(Ids {
            by_method: HashMap::new(),
            by_id: Vec::new(),
            next: 1,
        })
    })
}

/// Whether method tracing uses bytecode rewriting under `cfg`.
pub(crate) fn enabled(cfg: &Config) -> bool {
    cfg.traces_methods() && cfg.bytecode_rewriting
}

/// Whether the agent rewrites classes: to trace methods, or to follow
/// virtual threads from the bytecode.
pub(crate) fn hook_needed(cfg: &Config) -> bool {
    enabled(cfg) || vthreads::wants_bytecode()
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

/// The marker of a method the agent marks to follow virtual threads
/// ([`crate::vthreads::markers`]), when it follows them from the bytecode.
fn vthread_marker(class: &str, name: &str, desc: &str) -> Option<u32> {
    if !vthreads::bytecode_route() {
        return None;
    }
    vthreads::markers::marker(class, name, desc)
}

/// Whether the hook has anything to do in `class` (internal name): methods
/// to trace or to mark.
fn class_wanted(cfg: &Config, class: &str) -> bool {
    if vthreads::bytecode_route() && vthreads::markers::marks_class(class) {
        return true;
    }
    enabled(cfg) && !excluded_class(class)
}

fn method_id(class: &str, name: &str, desc: &str) -> Option<u32> {
    let mut ids = lock(ids());
    let key = (class.to_string(), name.to_string(), desc.to_string());
    if let Some(&id) = ids.by_method.get(&key) {
        return Some(id);
    }
    let id = ids.next;
    if id >= crate::probe::class::MAX_METHOD_ID {
        // Beyond any real program: the rest stay untraced, and the trace says so.
        OUT_OF_IDS.store(true, Ordering::Relaxed);
        return None;
    }
    ids.next += 1;
    ids.by_id.push(key.clone());
    ids.by_method.insert(key, id);
    Some(id)
}

/// The method id bytecode rewriting gave a method (class dotted or internal,
/// JVM signature), if it was rewritten. Other records about the same method
/// (COMPILED_METHOD_LOAD, allocation sites) use this id rather than define
/// the method a second time under another id.
pub(crate) fn rewritten_method_id(class: &str, name: &str, signature: &str) -> Option<u32> {
    let key = (class.replace('.', "/"), name.to_string(), signature.to_string());
    lock(ids()).by_method.get(&key).copied()
}

/// The (internal class name, name, descriptor) of a method id.
pub(crate) fn method_key(id: u32) -> Option<(String, String, String)> {
    let ids = lock(ids());
    ids.by_id.get((id as usize).checked_sub(1)?).cloned()
}

/// Rewrites a class file if it has selected methods; queues their METHOD_DEFs.
fn transform(rec: &Recorder, cfg: &Config, data: &[u8]) -> Option<Vec<u8>> {
    let mut dotted = String::new();
    let mut select = |class: &str, name: &str, desc: &str| -> Option<u32> {
        if dotted.is_empty() {
            dotted = class.replace('/', ".");
        }
        if let Some(m) = vthread_marker(class, name, desc) {
            return Some(m);
        }
        if excluded_class(class) || !cfg.method_traced(&dotted, name) || demotion::is_demoted(class, name, desc) {
            return None;
        }
        method_id(class, name, desc)
    };
    let opts = crate::rewrite::Options {
        skip_trivial: cfg.skip_trivial,
        skip_forwarders: cfg.skip_forwarders,
    };
    let mut selection = |class: &str, name: &str| -> Selected {
        if excluded_class(class) {
            return Selected::No;
        }
        match cfg.method_selection(&class.replace('/', "."), name) {
            None => Selected::No,
            Some(true) => Selected::ByName,
            Some(false) => Selected::Broadly,
        }
    };
    let res = match crate::rewrite::instrument_class(data, &mut select, &mut selection, opts) {
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
    let dotted = res.class.replace('/', ".");
    let (t, ts) = (tid(), now_ns());
    if OUT_OF_IDS.load(Ordering::Relaxed) && !OUT_OF_IDS_SAID.swap(true, Ordering::Relaxed) {
        let msg = format!(
            "method tracing: more than {} methods selected; those past it are not traced",
            crate::probe::class::MAX_METHOD_ID - 1
        );
        say(&msg);
        rec.write_direct(&Record {
            tid: t,
            ts,
            payload: Payload::AgentError(msg),
        });
    }
    if !res.trivial.is_empty() {
        record_trivial(rec, &dotted, &res.trivial, t, ts);
    }
    let bytes = res.bytes?;
    for m in res.methods.iter().filter(|m| m.id < crate::rewrite::MARKER_MIN) {
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

/// Writes a METHOD_DEF and a METHOD_TRIVIAL for each method of `class`
/// (dotted) left without probes as trivial, once per session and method:
/// nothing selected goes untraced without the trace saying so.
fn record_trivial(rec: &Recorder, class: &str, methods: &[crate::rewrite::Instrumented], t: u32, ts: u64) {
    let session = crate::state::SESSION.load(Ordering::SeqCst);
    let mut written = lock(&TRIVIAL_WRITTEN);
    if written.0 != session {
        *written = (session, None);
    }
    let set = written.1.get_or_insert_with(HashSet::new);
    for m in methods.iter().filter(|m| set.insert(m.id)) {
        let def = MethodDef {
            method: m.id as u64,
            class: class.to_string(),
            name: m.name.clone(),
            signature: m.desc.clone(),
        };
        rec.describe_method(t, ts, def);
        let tally = MethodTally {
            method: m.id as u64,
            calls: 0,
            rate_per_s: 0,
            mean_ns: 0,
        };
        rec.write_direct(&Record {
            tid: t,
            ts,
            payload: Payload::MethodTally(kind::METHOD_TRIVIAL, tally),
        });
        METHODS_TRIVIAL.fetch_add(1, Ordering::Relaxed);
    }
}

/// JVMTI ClassFileLoadHook: rewrites classes with selected methods.
///
/// # Safety
/// Called by the JVM as the ClassFileLoadHook callback: `name` is null or NUL-terminated,
/// `class_data` holds `class_data_len` bytes and the two `new_class_data*` pointers are writable.
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
    if !probe::class::ready() || class_data.is_null() || class_data_len <= 0 {
        return;
    }
    // SAFETY: the JVM passes `class_data` of `class_data_len` bytes, a NUL-terminated `name` or null,
    // and writable out-pointers (# Safety).
    unsafe {
        guard("ClassFileLoadHook", || {
            let Some((rec, cfg)) = active() else { return };
            if !name.is_null() {
                // Cheap early out before parsing.
                if !class_wanted(cfg, &CStr::from_ptr(name).to_string_lossy()) {
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
}

/// Starts method tracing by bytecode rewriting (at VMInit, or at attach):
/// defines the probe class, enables the hook and retransforms the loaded
/// classes with selected methods.
///
/// # Safety
/// Live phase; `jni` is the calling thread's JNIEnv or null (attach).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv, cfg: &Config) -> Result<(), String> {
    // SAFETY: the caller guarantees the live phase and that `jni` is this thread's JNIEnv or null
    // (# Safety).
    unsafe {
        let jni = jvm::jni_env(jni);
        if jni.is_null() {
            return Err("bytecode rewriting: no JNI environment".into());
        }
        probe::natives::define_probe_class(jni)?;
        if vthreads::wants_bytecode() {
            vthreads::choose_route(jni);
        }
        let err = jvm::set_event(env, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, true);
        if err != JVMTI_ERROR_NONE {
            return Err(format!("cannot enable ClassFileLoadHook (JVMTI error {err})"));
        }
        retransform_loaded(env, jni, cfg);
    }
    Ok(())
}

/// Retransforms the loaded classes that have a selected method: with the
/// hook on, so that classes loaded before VMInit (or the attach) are
/// traced too; with the agent disabled (a stop), back to their original
/// bytes.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn retransform_loaded(env: *mut jvmtiEnv, jni: *mut JNIEnv, cfg: &Config) {
    let mut n: jint = 0;
    let mut classes: *mut jclass = std::ptr::null_mut();
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe {
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
                if e == JVMTI_ERROR_NONE {
                    retransformed(env, &[*c]);
                } else {
                    debug(&format!("RetransformClasses failed (JVMTI error {e})"));
                }
            }
        } else {
            retransformed(env, &chosen);
        }
        for c in chosen {
            jvm::delete_local(jni, c);
        }
    }
}

/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `c` a valid class reference.
unsafe fn class_has_selected_method(env: *mut jvmtiEnv, c: jclass, cfg: &Config) -> bool {
    let mut modifiable: jboolean = 0;
    // SAFETY: the caller passes the agent's live `env` and a valid class reference `c` (# Safety).
    unsafe {
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
        if vthreads::bytecode_route() && vthreads::markers::marks_class(internal) {
            return true;
        }
        if !class_wanted(cfg, internal) {
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
}

/// Prints the rewriting counters (at VM death) when JTRACE_AGENT_DEBUG is set.
pub(crate) fn report_counters() {
    debug(&format!(
        "classes rewritten {}, methods rewritten {}, methods skipped {}, trivial {}, unparsable classes {}",
        CLASSES_REWRITTEN.load(Ordering::Relaxed),
        METHODS_REWRITTEN.load(Ordering::Relaxed),
        METHODS_SKIPPED.load(Ordering::Relaxed),
        METHODS_TRIVIAL.load(Ordering::Relaxed),
        CLASSES_UNPARSABLE.load(Ordering::Relaxed)
    ));
}

//! JVM events that explain time off CPU without method events: contended
//! monitor enter, Object.wait, garbage collection pauses, JIT code
//! load/unload and sampled allocations (park and sleep are in
//! [`crate::natives`]).
//!
//! None of these needs MethodEntry/MethodExit or any capability that keeps
//! code interpreted or deoptimises it, so they are cheap enough to be on by
//! default (allocation sampling excepted). Each is switched by a directive of
//! the configuration: `monitor_contention`, `monitor_waiting`,
//! `garbage_collection`, `jit`, `object_allocation`, `park`, `sleep`.
//!
//! A capability the JVM refuses turns that event family off and is reported
//! as an AGENT_ERROR record (after JVM_START); the rest keeps working.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

use jtrace_format::{kind, AllocSample, CompiledMethod, JvmBlock, MethodDef, Payload, Record};

use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::recorder::lock;
use crate::sys::*;
use crate::{active, guard, now_ns, register, tid, with_state, RECORDER};

/// The agent's JVMTI environment (for callbacks that get none: the native wrappers).
static ENV: AtomicPtr<jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());

/// Event families enabled by the configuration whose capabilities the JVM granted.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Features {
    pub monitor_contention: bool,
    pub monitor_waiting: bool,
    pub gc: bool,
    pub jit: bool,
    pub alloc: bool,
    pub park: bool,
    pub sleep: bool,
    /// Loaded into a live JVM: park and sleep natives are re-bound by
    /// [`crate::natives::attach`], not through NativeMethodBind.
    pub attach: bool,
}

static FEATURES: OnceLock<Features> = OnceLock::new();

/// Problems found at load time, recorded as AGENT_ERROR once JVM_START is written.
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Size of the compiled code at each live code address, for the unload
/// record (CompiledMethodUnload does not carry the size).
static CODE_SIZES: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);

/// Record id of each method named by a JIT or allocation record, by jmethodID.
static CODE_IDS: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);
/// Whether a method is the JDK's own (allocation sites skip those), by jmethodID.
static PLATFORM_METHODS: Mutex<Option<HashMap<usize, bool>>> = Mutex::new(None);

/// JVMTI's default and async-profiler's usual sampling interval.
const HEAP_SAMPLING_INTERVAL: jint = 512 * 1024;

/// The agent's JVMTI environment (null before load).
pub(crate) fn env() -> *mut jvmtiEnv {
    ENV.load(Ordering::Acquire)
}

fn note(msg: String) {
    lock(&NOTES).push(msg);
}

/// Asks for one capability; on refusal notes why and returns false.
unsafe fn add_capability(env: *mut jvmtiEnv, what: &str, set: impl FnOnce(&mut jvmtiCapabilities)) -> bool {
    let mut caps = jvmtiCapabilities::default();
    set(&mut caps);
    let err = jvmti!(env, AddCapabilities, &caps);
    if err != JVMTI_ERROR_NONE {
        note(format!(
            "{what} events not recorded: the JVM refused the capability (JVMTI error {err})"
        ));
        return false;
    }
    true
}

/// At load: asks for the capabilities of the configured event families and
/// installs their callbacks. `attach` is true for a live VM (dynamic attach),
/// whose natives are bound already: park and sleep are then re-bound at
/// start ([`crate::natives::attach`]).
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn on_load(env: *mut jvmtiEnv, cfg: &Config, attach: bool, cb: &mut jvmtiEventCallbacks) {
    ENV.store(env, Ordering::Release);
    let mut f = Features::default();
    if cfg.monitor_contention || cfg.monitor_waiting {
        let ok = add_capability(env, "monitor", |c| c.set_can_generate_monitor_events(1));
        f.monitor_contention = ok && cfg.monitor_contention;
        f.monitor_waiting = ok && cfg.monitor_waiting;
    }
    if cfg.garbage_collection {
        f.gc = add_capability(env, "garbage collection", |c| {
            c.set_can_generate_garbage_collection_events(1)
        });
    }
    if cfg.jit {
        f.jit = add_capability(env, "compiled method", |c| {
            c.set_can_generate_compiled_method_load_events(1)
        });
    }
    if cfg.object_allocation {
        f.alloc = add_capability(env, "sampled allocation", |c| {
            c.set_can_generate_sampled_object_alloc_events(1)
        });
        // For the allocation sites' lines; without it they are -1.
        let mut caps = jvmtiCapabilities::default();
        caps.set_can_get_line_numbers(1);
        jvmti!(env, AddCapabilities, &caps);
    }
    f.attach = attach;
    if cfg.park || cfg.sleep {
        if attach {
            // No capability needed: RegisterNatives, at start.
            f.park = cfg.park;
            f.sleep = cfg.sleep;
            crate::natives::configure(f.park, f.sleep);
        } else if add_capability(env, "park/sleep (native method bind)", |c| {
            c.set_can_generate_native_method_bind_events(1);
            // The start phase then begins before java.base registers its
            // natives, so the bind callback can name them (natives.rs).
            c.set_can_generate_early_vmstart(1);
        }) {
            f.park = cfg.park;
            f.sleep = cfg.sleep;
            crate::natives::configure(f.park, f.sleep);
        }
    }
    cb.MonitorContendedEnter = Some(on_contended_enter);
    cb.MonitorContendedEntered = Some(on_contended_entered);
    cb.MonitorWait = Some(on_monitor_wait);
    cb.MonitorWaited = Some(on_monitor_waited);
    cb.GarbageCollectionStart = Some(on_gc_start);
    cb.GarbageCollectionFinish = Some(on_gc_finish);
    cb.CompiledMethodLoad = Some(on_compiled_method_load);
    cb.CompiledMethodUnload = Some(on_compiled_method_unload);
    cb.SampledObjectAlloc = Some(on_sampled_alloc);
    cb.NativeMethodBind = Some(crate::natives::on_native_method_bind);
    let _ = FEATURES.set(f);
}

/// Events that must be on from Agent_OnLoad (native binds happen in the
/// primordial phase, long before VMInit).
pub(crate) fn early_events() -> Vec<jvmtiEvent> {
    match FEATURES.get() {
        Some(f) if (f.park || f.sleep) && !f.attach => vec![JVMTI_EVENT_NATIVE_METHOD_BIND],
        _ => Vec::new(),
    }
}

/// At VMInit (or attach), after JVM_START: writes the load-time notes,
/// enables the configured events, asks for the code compiled so far and
/// re-binds the park/sleep natives.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase; `jni` is the
/// current thread's JNIEnv or null (attach).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv, _cfg: &Config) {
    let f = FEATURES.get().copied().unwrap_or_default();
    // A new session (attach) describes its methods and GC windows afresh.
    *lock(&CODE_IDS) = None;
    GC_OPEN.store(false, Ordering::SeqCst);
    let mut wanted = Vec::new();
    if f.monitor_contention {
        wanted.extend([
            JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
            JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
        ]);
    }
    if f.monitor_waiting {
        wanted.extend([JVMTI_EVENT_MONITOR_WAIT, JVMTI_EVENT_MONITOR_WAITED]);
    }
    if f.gc {
        wanted.extend([
            JVMTI_EVENT_GARBAGE_COLLECTION_START,
            JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
        ]);
    }
    if f.jit {
        *lock(&CODE_SIZES) = Some(HashMap::new());
        wanted.extend([JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD]);
    }
    if f.alloc {
        let err = jvmti!(env, SetHeapSamplingInterval, HEAP_SAMPLING_INTERVAL);
        if err != JVMTI_ERROR_NONE {
            note(format!("cannot set the heap sampling interval (JVMTI error {err})"));
        }
        wanted.push(JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
    }
    for e in wanted {
        let err = jvm::set_event(env, e, true);
        if err != JVMTI_ERROR_NONE {
            note(format!("cannot enable JVMTI event {e} (error {err}); not recorded"));
        }
    }
    if f.jit {
        // Code compiled before now (during startup) is reported once, on this thread.
        let err = jvmti!(env, GenerateEvents, JVMTI_EVENT_COMPILED_METHOD_LOAD);
        if err != JVMTI_ERROR_NONE {
            note(format!(
                "cannot list the code compiled before VMInit (JVMTI error {err})"
            ));
        }
    }
    if f.park || f.sleep {
        let r = if f.attach {
            crate::natives::attach(env, crate::probe::jni_env(jni), f.park, f.sleep)
        } else if !jni.is_null() {
            crate::natives::start(env, jni, f.park, f.sleep)
        } else {
            Ok(())
        };
        if let Err(e) = r {
            note(e);
        }
    }
    write_notes();
}

/// Writes the pending notes as AGENT_ERROR records (the agent keeps running).
fn write_notes() {
    let notes = std::mem::take(&mut *lock(&NOTES));
    let Some(rec) = RECORDER.get() else { return };
    for m in notes {
        crate::say(&m);
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(m),
        });
    }
}

/// Records `payload()` on the calling Java thread, registering the thread
/// first (THREAD_START) if this is its first event. Returns whether a record
/// was written (false for excluded threads or when the agent is off).
/// `payload` runs only for traced threads, so costly lookups go there.
///
/// # Safety
/// Must run on a Java thread in a JVMTI callback or a JNI native, with
/// `env` the agent's environment and `jni` the thread's JNIEnv (or null;
/// `thread` may be null for the current thread).
pub(crate) unsafe fn record_java(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) -> bool {
    let Some((rec, cfg)) = active() else { return false };
    let mut done = false;
    with_state(rec, |st| {
        if !st.registered {
            register(st, rec, cfg, env, jni, thread, ts);
        }
        if !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload: payload(),
            },
        );
        done = true;
    });
    done
}

/// Records on the calling thread without any JNI or JVMTI call (GC callbacks
/// run with the VM stopped, where neither may be used). A thread seen for
/// the first time gets a buffer but no THREAD_START: these are the VM's own
/// threads, which the trace names from the kernel's comm.
pub(crate) fn record_raw(ts: u64, payload: Payload) {
    let Some((rec, _)) = active() else { return };
    with_state(rec, |st| {
        if !st.registered {
            st.registered = true;
            st.traced = true;
            st.buf = Some(rec.new_thread_buf());
        }
        if !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
    });
}

/// Records on the calling thread only if it is registered already (no JNI
/// or JVMTI call: the end of a park or sleep may have an exception pending).
pub(crate) fn record_registered(ts: u64, payload: Payload) {
    let Some((rec, _)) = active() else { return };
    with_state(rec, |st| {
        if !st.registered || !st.traced {
            return;
        }
        let Some(buf) = &st.buf else { return };
        rec.push(
            buf,
            &Record {
                tid: tid(),
                ts,
                payload,
            },
        );
    });
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
    if jvmti!(env, GetClassSignature, klass, &mut sig, std::ptr::null_mut()) != JVMTI_ERROR_NONE {
        return String::new();
    }
    jvm::take_string(env, sig)
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
    let Some(get) = (**jni).GetObjectClass else {
        return String::new();
    };
    let klass = get(jni, obj);
    let name = class_name(env, klass);
    jvm::delete_local(jni, klass);
    name
}

thread_local! {
    /// Begins recorded on this thread and not yet ended: [`OPEN_ENTER`] | [`OPEN_WAIT`].
    static OPEN: Cell<u8> = const { Cell::new(0) };
}
const OPEN_ENTER: u8 = 1;
const OPEN_WAIT: u8 = 2;
/// A GC_START is recorded and its GC_END is not.
static GC_OPEN: AtomicBool = AtomicBool::new(false);

/// Records the BEGIN of a per-thread pair and remembers it is open.
unsafe fn begin_pair(
    bit: u8,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) {
    if record_java(env, jni, thread, ts, payload) {
        let _ = OPEN.try_with(|o| o.set(o.get() | bit));
    }
}

/// Records the END of a per-thread pair only if its BEGIN was recorded: a
/// wait or contended enter already under way when the events were enabled,
/// or HotSpot's MonitorWaited for a thread interrupted before it waited,
/// has no begin, and an unmatched end would mislead the merge.
unsafe fn end_pair(
    bit: u8,
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    ts: u64,
    payload: impl FnOnce() -> Payload,
) {
    let was_open = OPEN
        .try_with(|o| {
            let v = o.get();
            o.set(v & !bit);
            v & bit != 0
        })
        .unwrap_or(false);
    if was_open {
        record_java(env, jni, thread, ts, payload);
    }
}

fn block(k: u16, arg: u64, class: String) -> Payload {
    Payload::Jvm(k, JvmBlock { arg, class })
}

unsafe extern "C" fn on_contended_enter(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject) {
    let ts = now_ns();
    guard("MonitorContendedEnter", || {
        begin_pair(OPEN_ENTER, env, jni, thread, ts, || {
            block(kind::MONITOR_CONTENDED_ENTER, 0, object_class_name(env, jni, object))
        });
    });
}

unsafe extern "C" fn on_contended_entered(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject) {
    let ts = now_ns();
    guard("MonitorContendedEntered", || {
        end_pair(OPEN_ENTER, env, jni, thread, ts, || {
            block(kind::MONITOR_CONTENDED_ENTERED, 0, object_class_name(env, jni, object))
        });
    });
}

unsafe extern "C" fn on_monitor_wait(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    object: jobject,
    timeout: jlong,
) {
    let ts = now_ns();
    guard("MonitorWait", || {
        begin_pair(OPEN_WAIT, env, jni, thread, ts, || {
            block(
                kind::MONITOR_WAIT,
                timeout.max(0) as u64,
                object_class_name(env, jni, object),
            )
        });
    });
}

unsafe extern "C" fn on_monitor_waited(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    object: jobject,
    timed_out: jboolean,
) {
    let ts = now_ns();
    guard("MonitorWaited", || {
        end_pair(OPEN_WAIT, env, jni, thread, ts, || {
            block(
                kind::MONITOR_WAITED,
                (timed_out != 0) as u64,
                object_class_name(env, jni, object),
            )
        });
    });
}

unsafe extern "C" fn on_gc_start(_env: *mut jvmtiEnv) {
    let ts = now_ns();
    guard("GarbageCollectionStart", || {
        // Started before the events were enabled, or nested: one window.
        if !GC_OPEN.swap(true, Ordering::SeqCst) {
            record_raw(ts, block(kind::GC_START, 0, String::new()));
        }
    });
}

unsafe extern "C" fn on_gc_finish(_env: *mut jvmtiEnv) {
    let ts = now_ns();
    guard("GarbageCollectionFinish", || {
        if GC_OPEN.swap(false, Ordering::SeqCst) {
            record_raw(ts, block(kind::GC_END, 0, String::new()));
        }
    });
}

/// The record id of a method that has compiled code: the id bytecode
/// rewriting gave it if it was rewritten (already described), else its
/// jmethodID, described here (METHOD_DEF) the first time: the merge needs a
/// name for every code range, traced method or not.
unsafe fn code_method_id(
    rec: &crate::recorder::Recorder,
    env: *mut jvmtiEnv,
    method: jmethodID,
    ts: u64,
) -> Option<u64> {
    if let Some(&id) = lock(&CODE_IDS).as_ref().and_then(|m| m.get(&(method as usize))) {
        return Some(id);
    }
    let m = jvm::method_info(env, std::ptr::null_mut(), method)?;
    let id = match crate::probe::rewritten_method_id(&m.class, &m.name, &m.signature) {
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
    _compile_info: *const c_void,
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

unsafe extern "C" fn on_sampled_alloc(
    env: *mut jvmtiEnv,
    jni: *mut JNIEnv,
    thread: jthread,
    _object: jobject,
    klass: jclass,
    size: jlong,
) {
    let ts = now_ns();
    guard("SampledObjectAlloc", || {
        let Some((rec, _)) = active() else { return };
        let (method, line) = alloc_site(rec, env, thread, ts);
        record_java(env, jni, thread, ts, || {
            Payload::Alloc(AllocSample {
                size: size.max(0) as u64,
                class: class_name(env, klass),
                method,
                line,
            })
        });
    });
}

/// Frames an allocation site is looked for in.
const SITE_FRAMES: usize = 16;

/// The site of a sampled allocation on `thread` (the allocating thread, in
/// its SampledObjectAlloc callback): the innermost frame of application
/// code, i.e. outside the JDK's own packages, else the innermost frame; as
/// (record id of its method, described if needed; source line or -1).
/// (0, -1) if the stack cannot be read.
unsafe fn alloc_site(rec: &crate::recorder::Recorder, env: *mut jvmtiEnv, thread: jthread, ts: u64) -> (u64, i32) {
    let mut frames = [jvmtiFrameInfo::default(); SITE_FRAMES];
    let mut n: jint = 0;
    let err = jvmti!(
        env,
        GetStackTrace,
        thread,
        0,
        SITE_FRAMES as jint,
        frames.as_mut_ptr(),
        &mut n
    );
    let frames = &frames[..if err == JVMTI_ERROR_NONE {
        n.clamp(0, SITE_FRAMES as jint) as usize
    } else {
        0
    }];
    let Some(&first) = frames.first() else {
        return (0, -1);
    };
    let site = frames
        .iter()
        .find(|f| !in_platform_code(env, f.method))
        .copied()
        .unwrap_or(first);
    let id = code_method_id(rec, env, site.method, ts).unwrap_or(0);
    (id, line_at(env, site.method, site.location))
}

/// Whether `method` belongs to the JDK itself (java., javax., jdk., sun.,
/// com.sun.); remembered per method.
unsafe fn in_platform_code(env: *mut jvmtiEnv, method: jmethodID) -> bool {
    if let Some(&p) = lock(&PLATFORM_METHODS).as_ref().and_then(|m| m.get(&(method as usize))) {
        return p;
    }
    let platform = jvm::method_info(env, std::ptr::null_mut(), method).is_some_and(|m| {
        ["java.", "javax.", "jdk.", "sun.", "com.sun."]
            .iter()
            .any(|p| m.class.starts_with(p))
    });
    lock(&PLATFORM_METHODS)
        .get_or_insert_with(HashMap::new)
        .insert(method as usize, platform);
    platform
}

/// The source line of bytecode index `location` in `method`, or -1.
unsafe fn line_at(env: *mut jvmtiEnv, method: jmethodID, location: jlocation) -> i32 {
    let mut n: jint = 0;
    let mut table: *mut jvmtiLineNumberEntry = std::ptr::null_mut();
    if jvmti!(env, GetLineNumberTable, method, &mut n, &mut table) != JVMTI_ERROR_NONE || table.is_null() {
        return -1;
    }
    let entries = std::slice::from_raw_parts(table, n.max(0) as usize);
    let line = entries
        .iter()
        .filter(|e| e.start_location <= location)
        .max_by_key(|e| e.start_location)
        .map_or(-1, |e| e.line_number);
    jvmti!(env, Deallocate, table.cast());
    line
}

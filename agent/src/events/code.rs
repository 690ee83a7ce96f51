//! What the stacks need from the JVM: where generated code is
//! (CODE_BLOB, from DynamicCodeGenerated: the interpreter and the stubs),
//! what compiled code inlines (COMPILED_INLINE, from CompiledMethodLoad's
//! inline records), which method each `Method*` is (METHOD_ADDRS, for
//! interpreted frames, per prepared class), and, for the kernel recorder's
//! stack walk, the interpreter's range and each Java thread's
//! `JavaThread*` (where HotSpot keeps its last Java frame). The last two
//! go to the kernel side through [`jtrace_hotspot_layout`] and
//! [`jtrace_java_thread`], functions that do nothing but that the recorder
//! probes (bpf/c/stacks.bpf.c reads their arguments).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use jtrace_format::{CodeBlob, CompiledInline, MethodAddrs, Payload, PcInline, Record, CODE_INTERPRETER, CODE_STUB};

use super::method_ids::code_method_id;
use crate::classes;
use crate::comp_level::CompLevels;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::recorder::Recorder;
use crate::state::{active, guard, now_ns, tid};
use crate::sys::*;
use crate::vmstructs::{self, TidReader};

/// What the kernel recorder's stack walk needs of this JVM (the C side is
/// `struct hotspot_layout` of bpf/c/jtrace.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct HotspotLayout {
    /// The template interpreter's code.
    pub interp_lo: u64,
    /// Its end (exclusive).
    pub interp_hi: u64,
    /// Offset of `_anchor._last_Java_sp` in a JavaThread.
    pub anchor_sp: u32,
    /// Offset of `_anchor._last_Java_fp`.
    pub anchor_fp: u32,
    /// Offset of `_anchor._last_Java_pc`.
    pub anchor_pc: u32,
    /// Zero.
    pub reserved: u32,
    /// The JVM's code seen so far (generated code and compiled methods):
    /// its lowest address ...
    pub code_lo: u64,
    /// ... and its end (exclusive).
    pub code_hi: u64,
}

/// Widens the layout's code range to [start, end); republishes it if it grew.
fn code_seen(start: u64, end: u64) {
    let grew = {
        let mut l = lock(&LAYOUT);
        let l = l.get_or_insert_with(HotspotLayout::default);
        let grew = l.code_lo == 0 || start < l.code_lo || end > l.code_hi;
        if l.code_lo == 0 || start < l.code_lo {
            l.code_lo = start;
        }
        l.code_hi = l.code_hi.max(end);
        grew
    };
    if grew {
        publish_layout();
    }
}

/// Called with this JVM's layout once it is known; the kernel recorder
/// probes it. Does nothing itself.
#[no_mangle]
#[inline(never)]
pub extern "C" fn jtrace_hotspot_layout(layout: *const HotspotLayout) {
    std::hint::black_box(layout);
}

/// Called on each Java thread as it starts (and for the threads that exist
/// at start) with its tid and `JavaThread*`, and with 0 when it ends; the
/// kernel recorder probes it. Does nothing itself.
#[no_mangle]
#[inline(never)]
pub extern "C" fn jtrace_java_thread(tid: u64, java_thread: u64) {
    std::hint::black_box((tid, java_thread));
}

/// Stacks are on (the `stacks` directive).
static ON: AtomicBool = AtomicBool::new(false);

/// The layout, complete once the interpreter and the anchor offsets are known.
static LAYOUT: Mutex<Option<HotspotLayout>> = Mutex::new(None);

/// How to read a Java thread's `JavaThread*` (None: this VM does not say).
static THREADS: OnceLock<Option<TidReader>> = OnceLock::new();

/// How to read a compiled method's level (None: this VM does not say).
static LEVELS: OnceLock<Option<CompLevels>> = OnceLock::new();

/// Installs the callbacks (their events are enabled at start).
pub(super) fn install(cb: &mut jvmtiEventCallbacks) {
    cb.DynamicCodeGenerated = Some(on_dynamic_code);
    cb.ClassPrepare = Some(on_class_prepare);
}

/// At start (VMInit or attach), stacks on: the events, the code generated
/// so far, the classes prepared so far, the threads running.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase; `jni` is the
/// current thread's JNIEnv.
pub(super) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv) -> Vec<String> {
    let mut notes = Vec::new();
    ON.store(true, Ordering::SeqCst);
    // SAFETY: the caller guarantees the live phase, the agent's `env` and this thread's `jni`
    // (# Safety).
    unsafe {
        let jni = jvm::jni_env(jni);
        anchor_offsets(jni, &mut notes);
        let _ = THREADS.set(TidReader::new(jni));
        if LEVELS.get_or_init(|| CompLevels::new(jni)).is_none() {
            notes.push(
                "stacks: this JVM does not describe its nmethods' compilation level: C1 frames are named _[j]".into(),
            );
        }
        for e in [JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_CLASS_PREPARE] {
            let err = jvm::set_event(env, e, true);
            if err != JVMTI_ERROR_NONE {
                notes.push(format!("stacks: cannot enable JVMTI event {e} (error {err})"));
            }
        }
        let err = jvmti!(env, GenerateEvents, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
        if err != JVMTI_ERROR_NONE {
            notes.push(format!(
                "stacks: cannot list the JVM's generated code (JVMTI error {err})"
            ));
        }
        describe_loaded_classes(env, jni);
        classes::on_retransformed(on_retransformed);
        announce_threads(env, jni);
    }
    notes
}

/// A retransformation gave `klass` new methods (HotSpot moves each
/// jmethodID to its method's new `Method*`): their METHOD_ADDRS again, so
/// that interpreted frames of the new code are named (demotion and attach
/// retransform classes while they run).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `klass` a valid class reference.
unsafe fn on_retransformed(env: *mut jvmtiEnv, klass: jclass) {
    if let Some((rec, _)) = active() {
        // SAFETY: the caller passes the agent's live `env` and a valid `klass` (# Safety).
        unsafe {
            describe_class(rec, env, klass, now_ns());
        }
    }
}

/// The offsets of the frame anchor's fields in a JavaThread.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
unsafe fn anchor_offsets(jni: *mut JNIEnv, notes: &mut Vec<String>) {
    let wanted = [
        ("JavaThread", "_anchor"),
        ("JavaFrameAnchor", "_last_Java_sp"),
        ("JavaFrameAnchor", "_last_Java_fp"),
        ("JavaFrameAnchor", "_last_Java_pc"),
    ];
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    match unsafe { vmstructs::field_offsets(jni, &wanted) }.as_deref() {
        Some(&[Some(a), Some(sp), Some(fp), Some(pc)]) => {
            let mut l = lock(&LAYOUT);
            let l = l.get_or_insert_with(HotspotLayout::default);
            l.anchor_sp = (a + sp) as u32;
            l.anchor_fp = (a + fp) as u32;
            l.anchor_pc = (a + pc) as u32;
        }
        _ => notes.push(
            "stacks: this JVM does not describe its frame anchor (gHotSpotVMStructs): Java frames \
             below native code are not walked"
                .into(),
        ),
    }
}

/// Tells the kernel side the layout once both halves are known.
fn publish_layout() {
    let l = *lock(&LAYOUT);
    if let Some(l) = l.filter(|l| l.interp_hi > l.interp_lo) {
        jtrace_hotspot_layout(&l);
    }
}

/// Tells the kernel side the calling thread's `JavaThread*` (at ThreadStart).
///
/// # Safety
/// On the started thread, in its ThreadStart callback.
pub(crate) unsafe fn thread_started(jni: *mut JNIEnv, thread: jthread) {
    if !ON.load(Ordering::Relaxed) || thread.is_null() {
        return;
    }
    if let Some(Some(r)) = THREADS.get() {
        // SAFETY: the caller guarantees this is the started thread's ThreadStart callback (# Safety).
        let jt = unsafe { r.java_thread(jni, thread) };
        if jt != 0 {
            jtrace_java_thread(u64::from(tid()), jt as u64);
        }
    }
}

/// The calling thread ends: the kernel side forgets it.
pub(crate) fn thread_ended() {
    if ON.load(Ordering::Relaxed) {
        jtrace_java_thread(u64::from(tid()), 0);
    }
}

/// The threads that run already: their tids and `JavaThread*`s.
///
/// # Safety
/// Live phase, with the agent's `env` and the current thread's `jni`.
unsafe fn announce_threads(env: *mut jvmtiEnv, jni: *mut JNIEnv) {
    let Some(Some(r)) = THREADS.get() else { return };
    let mut n: jint = 0;
    let mut threads: *mut jthread = std::ptr::null_mut();
    // SAFETY: `env` is the agent's live environment, `jni` this thread's, and `threads` holds the `n`
    // references JVMTI returned (# Safety).
    unsafe {
        if jvmti!(env, GetAllThreads, &mut n, &mut threads) != JVMTI_ERROR_NONE || threads.is_null() {
            return;
        }
        for i in 0..n.max(0) as usize {
            let t = *threads.add(i);
            if let Some(tid) = r.tid(jni, t) {
                jtrace_java_thread(u64::from(tid), r.java_thread(jni, t) as u64);
            }
            jvm::delete_local(jni, t);
        }
        jvmti!(env, Deallocate, threads.cast());
    }
}

/// # Safety
/// Called by the JVM as the DynamicCodeGenerated callback: `name` is null or NUL-terminated.
unsafe extern "C" fn on_dynamic_code(_env: *mut jvmtiEnv, name: *const c_char, address: *const c_void, length: jint) {
    let ts = now_ns();
    guard("DynamicCodeGenerated", || {
        let Some((rec, _)) = active() else { return };
        let name = if name.is_null() {
            String::new()
        } else {
            // SAFETY: the JVM passes a NUL-terminated `name` or null (# Safety).
            (unsafe { CStr::from_ptr(name) }).to_string_lossy().into_owned()
        };
        let interpreter = name == "Interpreter";
        let size = length.max(0) as u32;
        if interpreter {
            let l = &mut *lock(&LAYOUT);
            let l = l.get_or_insert_with(HotspotLayout::default);
            l.interp_lo = address as u64;
            l.interp_hi = address as u64 + u64::from(size);
        }
        write(
            rec,
            ts,
            Payload::CodeBlob(CodeBlob {
                start: address as u64,
                size,
                kind: if interpreter { CODE_INTERPRETER } else { CODE_STUB },
                name,
            }),
        );
        code_seen(address as u64, address as u64 + u64::from(size));
    });
}

/// # Safety
/// Called by the JVM as the ClassPrepare callback, with the agent's `env` and the current thread's
/// `jni`.
unsafe extern "C" fn on_class_prepare(env: *mut jvmtiEnv, _jni: *mut JNIEnv, _thread: jthread, klass: jclass) {
    let ts = now_ns();
    guard("ClassPrepare", || {
        if let Some((rec, _)) = active() {
            // SAFETY: the JVM passes the agent's `env` and a valid `klass` (# Safety).
            unsafe {
                describe_class(rec, env, klass, ts);
            }
        }
    });
}

/// The classes prepared before start.
///
/// # Safety
/// Live phase, with the agent's `env` and the current thread's `jni`.
unsafe fn describe_loaded_classes(env: *mut jvmtiEnv, jni: *mut JNIEnv) {
    let Some((rec, _)) = active() else { return };
    let mut n: jint = 0;
    let mut classes: *mut jclass = std::ptr::null_mut();
    // SAFETY: `env` is the agent's live environment, `jni` this thread's, and `classes` holds the `n`
    // references JVMTI returned (# Safety).
    unsafe {
        if jvmti!(env, GetLoadedClasses, &mut n, &mut classes) != JVMTI_ERROR_NONE || classes.is_null() {
            return;
        }
        let ts = now_ns();
        for i in 0..n.max(0) as usize {
            let k = *classes.add(i);
            let mut status: jint = 0;
            if jvmti!(env, GetClassStatus, k, &mut status) == JVMTI_ERROR_NONE
                && status & JVMTI_CLASS_STATUS_PREPARED != 0
            {
                describe_class(rec, env, k, ts);
            }
            jvm::delete_local(jni, k);
        }
        jvmti!(env, Deallocate, classes.cast());
    }
}

/// METHOD_ADDRS for the methods of `klass` (each described by a METHOD_DEF).
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase and `klass` a valid class reference.
unsafe fn describe_class(rec: &Recorder, env: *mut jvmtiEnv, klass: jclass, ts: u64) {
    let mut n: jint = 0;
    let mut methods: *mut jmethodID = std::ptr::null_mut();
    // SAFETY: `env` is the agent's live environment and `methods` holds the `n` ids JVMTI returned
    // (# Safety).
    unsafe {
        if jvmti!(env, GetClassMethods, klass, &mut n, &mut methods) != JVMTI_ERROR_NONE || methods.is_null() {
            return;
        }
        let ids = std::slice::from_raw_parts(methods, n.max(0) as usize);
        // A jmethodID points at its Method* (HotSpot).
        let addrs = vmstructs::read_words_at(&ids.iter().map(|&m| m as usize).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(ids.len());
        for (&m, addr) in ids.iter().zip(addrs) {
            let Some(addr) = addr.filter(|&a| a != 0) else {
                continue;
            };
            if let Some(id) = code_method_id(rec, env, m, ts) {
                out.push((addr as u64, id));
            }
        }
        jvmti!(env, Deallocate, methods.cast());
        // A record holds at most 64 KiB.
        for chunk in out.chunks(4000) {
            write(
                rec,
                ts,
                Payload::MethodAddrs(MethodAddrs {
                    methods: chunk.to_vec(),
                }),
            );
        }
    }
}

/// jvmticmlr.h: the records CompiledMethodLoad's `compile_info` points to.
#[repr(C)]
struct CmlrHeader {
    kind: c_int,
    major: jint,
    minor: jint,
    next: *const CmlrHeader,
}

#[repr(C)]
struct CmlrInline {
    header: CmlrHeader,
    numpcs: jint,
    pcinfo: *const PcStackInfo,
}

#[repr(C)]
struct PcStackInfo {
    pc: *const c_void,
    numstackframes: jint,
    methods: *const jmethodID,
    bcis: *const jint,
}

/// `JVMTI_CLASS_STATUS_PREPARED` of GetClassStatus.
const JVMTI_CLASS_STATUS_PREPARED: jint = 2;

/// `jvmtiCMLRKind` of inline records.
const JVMTI_CMLR_INLINE_INFO: c_int = 2;

/// COMPILED_INLINE for the code at `code_addr` of `method` from
/// CompiledMethodLoad's `compile_info`, after its COMPILED_METHOD_LOAD:
/// the code's compilation level and its inlining.
///
/// # Safety
/// In the CompiledMethodLoad callback, with its `compile_info`.
pub(super) unsafe fn compiled_inline(
    rec: &Recorder,
    env: *mut jvmtiEnv,
    method: jmethodID,
    code_addr: u64,
    code_size: u32,
    info: *const c_void,
    ts: u64,
) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    code_seen(code_addr, code_addr + u64::from(code_size));
    let tier = LEVELS
        .get()
        .and_then(Option::as_ref)
        .map_or(0, |l| l.level(method, code_addr));
    let mut pcs = Vec::new();
    let mut h = info as *const CmlrHeader;
    // SAFETY: the caller passes CompiledMethodLoad's `compile_info`, a record list the JVM keeps valid
    // for the callback (# Safety).
    unsafe {
        while !h.is_null() {
            if (*h).kind == JVMTI_CMLR_INLINE_INFO {
                let r = h as *const CmlrInline;
                for i in 0..(*r).numpcs.max(0) as usize {
                    let p = &*(*r).pcinfo.add(i);
                    let mut methods = Vec::with_capacity(p.numstackframes.max(0) as usize);
                    for j in 0..p.numstackframes.max(0) as usize {
                        let m = *p.methods.add(j);
                        methods.push(code_method_id(rec, env, m, ts).unwrap_or(0));
                    }
                    pcs.push(PcInline {
                        pc: p.pc as u64,
                        methods,
                    });
                }
            }
            h = (*h).next;
        }
        pcs.sort_by_key(|p| p.pc);
        // Split to stay within a record's 64 KiB.
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for p in pcs {
            bytes += 16 + 8 * p.methods.len();
            chunk.push(p);
            if bytes > 48 * 1024 {
                write_inline(rec, code_addr, tier, std::mem::take(&mut chunk), ts);
                bytes = 0;
            }
        }
        // Code without inline records still says its level.
        if !chunk.is_empty() || tier != 0 {
            write_inline(rec, code_addr, tier, chunk, ts);
        }
    }
}

fn write_inline(rec: &Recorder, code_addr: u64, tier: u32, pcs: Vec<PcInline>, ts: u64) {
    write(
        rec,
        ts,
        Payload::CompiledInline(CompiledInline { code_addr, tier, pcs }),
    );
}

/// These records describe code, not a thread's events: written directly,
/// whatever the thread filter says.
fn write(rec: &Recorder, ts: u64, payload: Payload) {
    rec.write_direct(&Record {
        tid: tid(),
        ts,
        payload,
    });
}

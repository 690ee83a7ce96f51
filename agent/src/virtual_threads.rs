//! Virtual threads (JDK 21 and later): their starts, ends, mounts and
//! unmounts on carrier threads, and their method calls.
//!
//! A virtual thread is a thread of its own, identified by its Java thread
//! id; its mounts on carrier threads (kernel tids) join it to the kernel's
//! events. The agent records, on the carrier (record tid = the carrier's
//! tid): VTHREAD_START / VTHREAD_END (the first mount and the last
//! unmount, with the virtual thread's name), VTHREAD_MOUNT /
//! VTHREAD_UNMOUNT (an unmount names why the virtual thread left its
//! carrier), and VTHREAD_UNPARK on the resuming thread (a carrier running a
//! virtual thread, or a platform thread: a lock's releaser, the poller, the
//! timer thread). Two ways:
//!
//! * from the bytecode (the default when the agent may rewrite classes):
//!   `java.lang.VirtualThread`'s mount(), unmount(), run(Runnable) and
//!   unpark() & co. are marked ([`crate::vthread_markers`]); the probes
//!   append mounts, unmounts and unparks to the carrier's probe buffer (the
//!   reason of an unmount from the virtual thread's state and the blocking
//!   call marked, e.g. `sleepNanos`), and call [`started0`]/[`ended0`] once
//!   per virtual thread. `can_support_virtual_threads` is not asked for:
//!   it makes every mount take HotSpot's slow JVMTI transition;
//! * else with JVMTI: VirtualThreadStart/End (events 87 and 88, with
//!   `can_support_virtual_threads`), HotSpot's extension events
//!   `com.sun.hotspot.events.VirtualThreadMount`/`Unmount` (the unmount's
//!   reason from the top of the virtual thread's stack, [`Markers`]); no
//!   unparks (the merge takes the carrier's wakeup for one).
//!
//! Method calls: a virtual thread's probe buffer (agent/java/jtrace/Probe.java)
//! travels with it from carrier to carrier; the agent writes it out, with
//! record tid = [`jtrace_format::virtual_thread_tid`] of its Java thread id,
//! when it is full (`flushVirtual0`, on the carrier running it), at its end
//! and at VM death. The bindings come from a JDK 17 `jvmti.h`, which
//! predates virtual threads: the capability bit, the two event numbers and
//! their callback slots are spelt out here.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

use jtrace_format::{kind, virtual_thread_tid, JvmBlock, Payload};

use crate::batch;
use crate::jvm::{self, clear_exception, jni, jvmti, object_class_name};
use crate::mutex::lock;
use crate::probe_class::{self, take_buffer};
use crate::recorder::{Recorder, SharedBuf};
use crate::state::{active, debug, guard, now_ns, CONFIG};
use crate::sys::*;
use crate::thread::{record_raw, with_carrier_buf};

/// Bit of `can_support_virtual_threads` in `jvmtiCapabilities` (JDK 21's
/// jvmti.h: the 45th one-bit field).
const CAN_SUPPORT_VIRTUAL_THREADS_BIT: usize = 44;
/// JVMTI_EVENT_VIRTUAL_THREAD_START and _END (JDK 21's jvmti.h).
const EVENT_VIRTUAL_THREAD_START: jvmtiEvent = 87;
const EVENT_VIRTUAL_THREAD_END: jvmtiEvent = 88;
/// HotSpot's extension events, by id.
const MOUNT_EVENT: &str = "com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT_EVENT: &str = "com.sun.hotspot.events.VirtualThreadUnmount";
/// Frames of a virtual thread's stack looked at to tell why it unmounted.
const UNMOUNT_FRAMES: usize = 16;

/// A virtual thread event callback (start, end; the extension events have
/// the same parameters).
type VirtualThreadFn = unsafe extern "C" fn(*mut jvmtiEnv, *mut JNIEnv, jthread);

/// The JVMTI callbacks with JDK 21's two more slots, for virtual thread
/// start and end. A JVM that knows fewer events copies only its own part.
#[repr(C)]
pub(crate) struct Callbacks {
    /// The callbacks of JDK 17's table (events 50–86).
    pub(crate) base: jvmtiEventCallbacks,
    /// Event 87, VirtualThreadStart.
    pub(crate) virtual_thread_start: Option<VirtualThreadFn>,
    /// Event 88, VirtualThreadEnd.
    pub(crate) virtual_thread_end: Option<VirtualThreadFn>,
}

/// The JVM granted `can_support_virtual_threads` (the JVMTI way).
static SUPPORTED: AtomicBool = AtomicBool::new(false);
/// This JVM has virtual threads and the agent may rewrite classes: follow
/// them from the bytecode if the probes know this JDK's VirtualThread.
static WANT_BYTECODE: AtomicBool = AtomicBool::new(false);
/// They are followed from the bytecode (the probe class said it can).
static BYTECODE_ROUTE: AtomicBool = AtomicBool::new(false);
/// jfieldID of `Thread.name`.
static NAME_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// jfieldID of `Thread.tid` (a thread's Java id).
static TID_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// jfieldID of `Thread.parkBlocker`.
static BLOCKER_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// jfieldID of `Probe.threadId`.
static PROBE_THREAD_ID: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// The methods whose presence on a virtual thread's stack tells why it unmounted.
static MARKERS: Mutex<Option<Markers>> = Mutex::new(None);
/// Live virtual threads' probe buffers (global references), by Java thread id.
static PROBES: Mutex<Option<HashMap<u64, usize>>> = Mutex::new(None);

fn has_bit(caps: &jvmtiCapabilities, bit: usize) -> bool {
    // SAFETY: the capabilities are 16 bytes of one-bit fields, allocated
    // from the lowest bit on (x86-64 SysV).
    let bytes = unsafe { std::slice::from_raw_parts(caps as *const _ as *const u8, size_of::<jvmtiCapabilities>()) };
    bytes.get(bit / 8).is_some_and(|b| b & (1 << (bit % 8)) != 0)
}

fn set_bit(caps: &mut jvmtiCapabilities, bit: usize) {
    // SAFETY: as in `has_bit`.
    let bytes = unsafe { std::slice::from_raw_parts_mut(caps as *mut _ as *mut u8, size_of::<jvmtiCapabilities>()) };
    if let Some(b) = bytes.get_mut(bit / 8) {
        *b |= 1 << (bit % 8);
    }
}

/// At load, when the agent is to `follow` virtual threads: whether this JVM
/// has them (JDK 21 and later offer `can_support_virtual_threads`); if so,
/// follows them from the bytecode
/// when `bytecode` (the agent may rewrite classes; the caller adds the
/// capabilities for it), else asks for `can_support_virtual_threads`.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn on_load(env: *mut jvmtiEnv, follow: bool, bytecode: bool) {
    // A new session (attach) decides again.
    for flag in [&SUPPORTED, &WANT_BYTECODE, &BYTECODE_ROUTE] {
        flag.store(false, Ordering::SeqCst);
    }
    if !follow {
        return;
    }
    let mut potential = jvmtiCapabilities::default();
    if jvmti!(env, GetPotentialCapabilities, &mut potential) != JVMTI_ERROR_NONE
        || !has_bit(&potential, CAN_SUPPORT_VIRTUAL_THREADS_BIT)
    {
        return;
    }
    if bytecode {
        WANT_BYTECODE.store(true, Ordering::SeqCst);
    } else {
        add_capability(env);
    }
}

/// The capabilities for rewriting classes were refused: JVMTI's way.
///
/// # Safety
/// As [`on_load`].
pub(crate) unsafe fn bytecode_refused(env: *mut jvmtiEnv) {
    WANT_BYTECODE.store(false, Ordering::SeqCst);
    add_capability(env);
}

/// Asks for `can_support_virtual_threads`; remembers whether it was granted.
unsafe fn add_capability(env: *mut jvmtiEnv) {
    let mut caps = jvmtiCapabilities::default();
    set_bit(&mut caps, CAN_SUPPORT_VIRTUAL_THREADS_BIT);
    let ok = jvmti!(env, AddCapabilities, &caps) == JVMTI_ERROR_NONE;
    SUPPORTED.store(ok, Ordering::SeqCst);
}

/// Whether the agent wants to follow virtual threads from the bytecode (it
/// then rewrites classes even when no method is traced).
pub(crate) fn wants_bytecode() -> bool {
    WANT_BYTECODE.load(Ordering::Relaxed)
}

/// Whether virtual threads are followed from the bytecode: the hook marks
/// [`crate::vthread_markers`]'s methods.
pub(crate) fn bytecode_route() -> bool {
    BYTECODE_ROUTE.load(Ordering::Relaxed)
}

/// Once the probe class is defined and initialised (before any class is
/// rewritten): follows virtual threads from the bytecode if the probes
/// know this JDK's VirtualThread (`Probe.virtualThreadsFollowed()`).
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn choose_route(jni: *mut JNIEnv) {
    let class = probe_class::class();
    let m = jni!(
        jni,
        GetStaticMethodID,
        class,
        c"virtualThreadsFollowed".as_ptr(),
        c"()Z".as_ptr()
    )
    .unwrap_or(std::ptr::null_mut());
    if m.is_null() {
        clear_exception(jni);
        return;
    }
    let yes = jni!(jni, CallStaticBooleanMethodA, class, m, std::ptr::null()).unwrap_or(0) != 0;
    clear_exception(jni);
    BYTECODE_ROUTE.store(yes, Ordering::SeqCst);
    debug(if yes {
        "virtual threads followed from the bytecode"
    } else {
        "the probes do not know this JDK's VirtualThread: virtual threads followed with JVMTI"
    });
}

/// The callbacks with the virtual thread start and end slots filled.
pub(crate) fn callbacks(base: jvmtiEventCallbacks) -> Callbacks {
    Callbacks {
        base,
        virtual_thread_start: Some(on_start),
        virtual_thread_end: Some(on_end),
    }
}

/// At VMInit (or attach): looks up what the callbacks read, then enables
/// the start/end events and the mount/unmount extension events. Returns a
/// message when the JVM has virtual threads but they cannot be followed.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni` (or null).
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv) -> Result<(), String> {
    if jni.is_null() {
        return Ok(());
    }
    let thread = jni!(jni, FindClass, c"java/lang/Thread".as_ptr()).unwrap_or(std::ptr::null_mut());
    if !thread.is_null() {
        let field = |name: &CStr, sig: &CStr| {
            let f = jni!(jni, GetFieldID, thread, name.as_ptr(), sig.as_ptr()).unwrap_or(std::ptr::null_mut());
            clear_exception(jni);
            f
        };
        TID_FIELD.store(field(c"tid", c"J"), Ordering::SeqCst);
        BLOCKER_FIELD.store(field(c"parkBlocker", c"Ljava/lang/Object;"), Ordering::SeqCst);
        NAME_FIELD.store(field(c"name", c"Ljava/lang/String;"), Ordering::SeqCst);
        jvm::delete_local(jni, thread);
    }
    clear_exception(jni);
    let virtual_class = jni!(jni, FindClass, c"java/lang/VirtualThread".as_ptr()).unwrap_or(std::ptr::null_mut());
    clear_exception(jni);
    if virtual_class.is_null() {
        // Before JDK 21: no virtual threads.
        return Ok(());
    }
    jvm::delete_local(jni, virtual_class);
    if CONFIG.get().is_some_and(|c| !c.virtual_threads) {
        return Err(
            "virtual threads are not followed (virtual_threads off): their method calls are recorded, \
                    their time is not attributed"
                .into(),
        );
    }
    if TID_FIELD.load(Ordering::SeqCst).is_null() {
        return Err("virtual threads: java.lang.Thread has no tid field; not followed".into());
    }
    if bytecode_route() {
        return Ok(());
    }
    if wants_bytecode() {
        // The probes do not know this JDK's VirtualThread: JVMTI's way.
        WANT_BYTECODE.store(false, Ordering::SeqCst);
        add_capability(env);
    }
    *lock(&MARKERS) = Some(Markers::find(jni));
    if !SUPPORTED.load(Ordering::SeqCst) {
        return Err(
            "virtual threads: the JVM refused can_support_virtual_threads; their mounts are not recorded".into(),
        );
    }
    let mut problems = Vec::new();
    for e in [EVENT_VIRTUAL_THREAD_START, EVENT_VIRTUAL_THREAD_END] {
        let err = jvm::set_event(env, e, true);
        if err != JVMTI_ERROR_NONE {
            problems.push(format!("cannot enable JVMTI event {e} (error {err})"));
        }
    }
    for (id, f) in [(MOUNT_EVENT, on_mount as VirtualThreadFn), (UNMOUNT_EVENT, on_unmount)] {
        if let Err(e) = set_extension_callback(env, id, Some(f)) {
            problems.push(e);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "virtual threads: {}; their mounts are not all recorded",
            problems.join("; ")
        ))
    }
}

/// At the end of an attach session: stops the virtual thread events.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase.
pub(crate) unsafe fn stop(env: *mut jvmtiEnv) {
    if !SUPPORTED.load(Ordering::SeqCst) || TID_FIELD.load(Ordering::SeqCst).is_null() {
        return;
    }
    for e in [EVENT_VIRTUAL_THREAD_START, EVENT_VIRTUAL_THREAD_END] {
        jvm::set_event(env, e, false);
    }
    for id in [MOUNT_EVENT, UNMOUNT_EVENT] {
        let _ = set_extension_callback(env, id, None);
    }
}

/// Sets (or clears) the callback of the extension event `id`.
unsafe fn set_extension_callback(env: *mut jvmtiEnv, id: &str, f: Option<VirtualThreadFn>) -> Result<(), String> {
    let mut count: jint = 0;
    let mut infos: *mut jvmtiExtensionEventInfo = std::ptr::null_mut();
    if jvmti!(env, GetExtensionEvents, &mut count, &mut infos) != JVMTI_ERROR_NONE || infos.is_null() {
        return Err(format!("no extension event {id}"));
    }
    let mut index = None;
    for info in std::slice::from_raw_parts(infos, count.max(0) as usize) {
        if !info.id.is_null() && CStr::from_ptr(info.id).to_bytes() == id.as_bytes() {
            index = Some(info.extension_event_index);
        }
        for p in std::slice::from_raw_parts(info.params, info.param_count.max(0) as usize) {
            jvmti!(env, Deallocate, p.name as *mut u8);
        }
        jvmti!(env, Deallocate, info.params as *mut u8);
        jvmti!(env, Deallocate, info.id as *mut u8);
        jvmti!(env, Deallocate, info.short_description as *mut u8);
    }
    jvmti!(env, Deallocate, infos as *mut u8);
    let index = index.ok_or_else(|| format!("no extension event {id}"))?;
    // SAFETY: HotSpot calls the extension event with (jvmtiEnv*, JNIEnv*,
    // jthread), the parameters of `VirtualThreadFn`; the bindings declare the
    // callback type variadic.
    let callback: jvmtiExtensionEvent = f.map(|f| std::mem::transmute::<VirtualThreadFn, _>(f));
    let err = jvmti!(env, SetExtensionEventCallback, index, callback);
    if err != JVMTI_ERROR_NONE {
        return Err(format!("cannot set extension event {id} (error {err})"));
    }
    // HotSpot also wants the event enabled by its number (its extension
    // events are numbered just below the standard ones).
    let err = jvm::set_event(env, index as jvmtiEvent, f.is_some());
    if err != JVMTI_ERROR_NONE {
        return Err(format!("cannot enable extension event {id} (error {err})"));
    }
    Ok(())
}

/// The Java thread id of `thread`.
unsafe fn java_id(jni: *mut JNIEnv, thread: jthread) -> Option<u64> {
    let f = TID_FIELD.load(Ordering::Relaxed);
    if f.is_null() || thread.is_null() {
        return None;
    }
    jni!(jni, GetLongField, thread, f).map(|id| id as u64)
}

/// Records `k` for the virtual thread `thread` on the calling carrier.
unsafe fn record(jni: *mut JNIEnv, thread: jthread, ts: u64, k: u16, class: impl FnOnce() -> String) {
    if active().is_none() {
        return;
    }
    let Some(id) = java_id(jni, thread) else { return };
    record_raw(
        ts,
        Payload::Jvm(
            k,
            JvmBlock {
                arg: id,
                class: class(),
            },
        ),
    );
}

unsafe extern "C" fn on_start(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadStart", || {
        record(jni, thread, ts, kind::VTHREAD_START, || {
            jvm::thread_info(env, jni, thread).map(|i| i.name).unwrap_or_default()
        })
    });
}

unsafe extern "C" fn on_end(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadEnd", || {
        end(jni, thread, ts, || {
            jvm::thread_info(env, jni, thread).map(|i| i.name).unwrap_or_default()
        })
    });
}

/// A virtual thread ended, on its carrier: writes out its probe buffer and
/// records VTHREAD_END with its name (named again: a name set after the
/// start shows here).
unsafe fn end(jni: *mut JNIEnv, thread: jthread, ts: u64, name: impl FnOnce() -> String) {
    let Some((rec, _)) = active() else { return };
    if let Some(id) = java_id(jni, thread) {
        let probe = lock(&PROBES).as_mut().and_then(|p| p.remove(&id));
        if let Some(probe) = probe {
            with_carrier_buf(rec, |buf| drain(jni, rec, buf, probe as jobject, id));
            probe_class::forget_slot(jni, probe as jobject);
            jni!(jni, DeleteGlobalRef, probe as jobject);
        }
    }
    record(jni, thread, ts, kind::VTHREAD_END, name);
}

/// `thread`'s name, read from `Thread.name` (JVMTI's GetThreadInfo wants
/// `can_support_virtual_threads` for a virtual thread); "" if none.
unsafe fn thread_name(jni: *mut JNIEnv, thread: jthread) -> String {
    let f = NAME_FIELD.load(Ordering::Relaxed);
    if f.is_null() || thread.is_null() {
        return String::new();
    }
    let s = jni!(jni, GetObjectField, thread, f).unwrap_or(std::ptr::null_mut());
    if s.is_null() {
        return String::new();
    }
    let chars = jni!(jni, GetStringUTFChars, s, std::ptr::null_mut()).unwrap_or(std::ptr::null());
    let name = if chars.is_null() {
        clear_exception(jni);
        String::new()
    } else {
        let n = CStr::from_ptr(chars).to_string_lossy().into_owned();
        jni!(jni, ReleaseStringUTFChars, s, chars);
        n
    };
    jvm::delete_local(jni, s);
    name
}

unsafe extern "C" fn on_mount(_env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadMount", || {
        record(jni, thread, ts, kind::VTHREAD_MOUNT, String::new)
    });
}

unsafe extern "C" fn on_unmount(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadUnmount", || {
        record(jni, thread, ts, kind::VTHREAD_UNMOUNT, || {
            unmount_reason(env, jni, thread)
        })
    });
}

/// Why a virtual thread is unmounting, from the methods on its stack: a
/// [`jtrace_format::UNMOUNT_PARK`]-style word, with the park blocker's
/// class after a space; "" when the stack shows none of the markers.
unsafe fn unmount_reason(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> String {
    let mut frames = [jvmtiFrameInfo::default(); UNMOUNT_FRAMES];
    let mut n: jint = 0;
    if jvmti!(
        env,
        GetStackTrace,
        thread,
        0,
        UNMOUNT_FRAMES as jint,
        frames.as_mut_ptr(),
        &mut n
    ) != JVMTI_ERROR_NONE
    {
        return String::new();
    }
    let frames = &frames[..n.max(0) as usize];
    let why = match lock(&MARKERS).as_ref() {
        Some(m) => m.classify(frames),
        None => None,
    };
    match why {
        Some(jtrace_format::UNMOUNT_PARK) => {
            let blocker = blocker_class(env, jni, thread);
            if blocker.is_empty() {
                jtrace_format::UNMOUNT_PARK.to_string()
            } else {
                format!("{} {blocker}", jtrace_format::UNMOUNT_PARK)
            }
        }
        Some(w) => w.to_string(),
        None => String::new(),
    }
}

/// Dotted class of `thread`'s park blocker, "" if none.
unsafe fn blocker_class(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> String {
    let f = BLOCKER_FIELD.load(Ordering::Relaxed);
    if f.is_null() {
        return String::new();
    }
    let blocker = jni!(jni, GetObjectField, thread, f).unwrap_or(std::ptr::null_mut());
    let name = object_class_name(env, jni, blocker);
    jvm::delete_local(jni, blocker);
    name
}

/// Methods that tell why a virtual thread unmounted, resolved once.
struct Markers {
    /// (method, reason), most specific first.
    methods: Vec<(usize, &'static str)>,
}

impl Markers {
    /// Looks the markers up in this JVM (those it lacks are skipped).
    unsafe fn find(jni: *mut JNIEnv) -> Markers {
        use jtrace_format::{UNMOUNT_PARK, UNMOUNT_SLEEP, UNMOUNT_SOCKET, UNMOUNT_WAIT, UNMOUNT_YIELD};
        let wanted: [(&CStr, &CStr, &CStr, bool, &'static str); 9] = [
            (c"java/lang/VirtualThread", c"sleepNanos", c"(J)V", false, UNMOUNT_SLEEP),
            (
                c"sun/nio/ch/NioSocketImpl",
                c"park",
                c"(Ljava/io/FileDescriptor;IJ)V",
                false,
                UNMOUNT_SOCKET,
            ),
            (c"sun/nio/ch/SelChImpl", c"park", c"(IJ)V", false, UNMOUNT_SOCKET),
            (
                c"sun/nio/ch/Poller",
                c"poll",
                c"(IJLjava/util/function/BooleanSupplier;)V",
                true,
                UNMOUNT_SOCKET,
            ),
            (c"java/lang/Object", c"wait0", c"(J)V", false, UNMOUNT_WAIT),
            (c"java/lang/Object", c"wait", c"(J)V", false, UNMOUNT_WAIT),
            (c"java/lang/Thread", c"yield", c"()V", true, UNMOUNT_YIELD),
            (c"java/lang/VirtualThread", c"park", c"()V", false, UNMOUNT_PARK),
            (c"java/lang/VirtualThread", c"parkNanos", c"(J)V", false, UNMOUNT_PARK),
        ];
        let mut methods = Vec::new();
        for (class, name, sig, is_static, why) in wanted {
            let cls = jni!(jni, FindClass, class.as_ptr()).unwrap_or(std::ptr::null_mut());
            if cls.is_null() {
                clear_exception(jni);
                continue;
            }
            let mid = if is_static {
                jni!(jni, GetStaticMethodID, cls, name.as_ptr(), sig.as_ptr())
            } else {
                jni!(jni, GetMethodID, cls, name.as_ptr(), sig.as_ptr())
            }
            .unwrap_or(std::ptr::null_mut());
            clear_exception(jni);
            jvm::delete_local(jni, cls);
            if !mid.is_null() {
                methods.push((mid as usize, why));
            }
        }
        Markers { methods }
    }

    /// The reason of the first marker (in order of specificity) on `frames`.
    fn classify(&self, frames: &[jvmtiFrameInfo]) -> Option<&'static str> {
        self.methods
            .iter()
            .find(|(m, _)| frames.iter().any(|f| f.method as usize == *m))
            .map(|&(_, why)| why)
    }
}

/// Writes a virtual thread's buffered method events (probe `probe`, Java
/// id `id`) into `buf`, under the virtual thread's record tid.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `probe` a live reference.
unsafe fn drain(jni: *mut JNIEnv, rec: &Recorder, buf: Option<&SharedBuf>, probe: jobject, id: u64) {
    let tid = virtual_thread_tid(id);
    take_buffer(jni, probe, |block| match (buf, tid) {
        (Some(b), Some(tid)) => rec.encode_with(b, |out| batch::encode_events(out, tid, block, None)),
        _ => rec.count_lost(block.events.len() as u64),
    });
    if let Some(b) = buf {
        rec.flush_if_full(b);
    }
}

/// The Java thread id a virtual thread's `Probe` holds.
unsafe fn probe_thread_id(jni: *mut JNIEnv, probe: jobject) -> Option<u64> {
    let mut f = PROBE_THREAD_ID.load(Ordering::Relaxed);
    if f.is_null() {
        f = jni!(
            jni,
            GetFieldID,
            probe_class::class(),
            c"threadId".as_ptr(),
            c"J".as_ptr()
        )
        .unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        if f.is_null() {
            return None;
        }
        PROBE_THREAD_ID.store(f, Ordering::Relaxed);
    }
    jni!(jni, GetLongField, probe, f).map(|v| v as u64)
}

/// `Probe.registerVirtual0(Probe p)`: a virtual thread's first traced call.
unsafe extern "C" fn register_virtual0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.registerVirtual0", || {
        let Some(id) = probe_thread_id(jni, probe) else { return };
        let global = jni!(jni, NewGlobalRef, probe).unwrap_or(std::ptr::null_mut());
        if global.is_null() {
            return;
        }
        let old = lock(&PROBES)
            .get_or_insert_with(HashMap::new)
            .insert(id, global as usize);
        if let Some(old) = old {
            jni!(jni, DeleteGlobalRef, old as jobject);
        }
    });
}

/// `Probe.flushVirtual0(Probe p)`: a virtual thread's buffer is full; on
/// the carrier running it.
unsafe extern "C" fn flush_virtual0(jni: *mut JNIEnv, _class: jclass, probe: jobject) {
    guard("Probe.flushVirtual0", || {
        let Some((rec, _)) = active() else { return };
        let Some(id) = probe_thread_id(jni, probe) else { return };
        with_carrier_buf(rec, |buf| drain(jni, rec, buf, probe, id));
    });
}

/// `Probe.vthreadEvent0(Object vthread, int what)`: a mount, unmount or
/// unpark the probes could not append to a carrier's buffer, recorded on
/// the calling kernel thread (after its buffered events).
unsafe extern "C" fn vthread_event0(jni: *mut JNIEnv, _class: jclass, vthread: jobject, what: jint) {
    let ts = now_ns();
    guard("Probe.vthreadEvent0", || {
        if active().is_none() {
            return;
        }
        let Some(id) = java_id(jni, vthread) else { return };
        if let Some(payload) = crate::vthread_markers::payload(what as u64, id) {
            record_raw(ts, payload);
        }
    });
}

/// `Probe.started0(Object vthread)`: its first mount (VirtualThread.run
/// began), on the carrier.
unsafe extern "C" fn started0(jni: *mut JNIEnv, _class: jclass, vthread: jobject) {
    let ts = now_ns();
    guard("Probe.started0", || {
        record(jni, vthread, ts, kind::VTHREAD_START, || thread_name(jni, vthread))
    });
}

/// `Probe.ended0(Object vthread)`: its last unmount (its task is done), on
/// the carrier.
unsafe extern "C" fn ended0(jni: *mut JNIEnv, _class: jclass, vthread: jobject) {
    let ts = now_ns();
    guard("Probe.ended0", || end(jni, vthread, ts, || thread_name(jni, vthread)));
}

/// The natives of `jtrace.Probe` this module implements.
pub(crate) fn natives() -> [JNINativeMethod; 5] {
    [
        probe_class::native(
            c"vthreadEvent0",
            c"(Ljava/lang/Object;I)V",
            vthread_event0 as *mut c_void,
        ),
        probe_class::native(c"started0", c"(Ljava/lang/Object;)V", started0 as *mut c_void),
        probe_class::native(c"ended0", c"(Ljava/lang/Object;)V", ended0 as *mut c_void),
        probe_class::native(
            c"registerVirtual0",
            c"(Ljtrace/Probe;)V",
            register_virtual0 as *mut c_void,
        ),
        probe_class::native(c"flushVirtual0", c"(Ljtrace/Probe;)V", flush_virtual0 as *mut c_void),
    ]
}

/// Writes every live virtual thread's buffered events into `buf` (VM
/// death, the end of an attach session); `None` drops them.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn drain_all(jni: *mut JNIEnv, rec: &Recorder, buf: Option<&SharedBuf>) {
    if jni.is_null() {
        return;
    }
    let all: Vec<(u64, usize)> = lock(&PROBES)
        .as_ref()
        .map(|p| p.iter().map(|(&id, &probe)| (id, probe)).collect())
        .unwrap_or_default();
    for (id, probe) in all {
        drain(jni, rec, buf, probe as jobject, id);
    }
}

//! Virtual threads followed with JVMTI (`bytecode_rewriting off`, or a JDK
//! whose VirtualThread the probes do not know; see
//! [`crate::vthreads`]): VirtualThreadStart/End (events 87 and 88,
//! with `can_support_virtual_threads`) and HotSpot's extension events
//! `com.sun.hotspot.events.VirtualThreadMount`/`Unmount`, the unmount's
//! reason from the top of the virtual thread's stack ([`Markers`]); no
//! unparks (the merge takes the carrier's wakeup for one). While a virtual
//! thread is mounted, JVMTI's method events on its carrier are its own
//! ([`crate::state::ThreadState::mounted`]); its open traced methods wait in
//! [`OPEN_FRAMES`] while it is unmounted. The capability
//! makes every mount and unmount of the JVM take HotSpot's slow JVMTI
//! transition (BENCHMARKS.md). The bindings come from a JDK 17 `jvmti.h`,
//! which predates virtual threads: the capability bit, the two event
//! numbers and their callback slots are spelt out here.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

use jtrace_format::kind;

use crate::jvm::{self, clear_exception, jni, jvmti, object_class_name};
use crate::mutex::lock;
use crate::state::{active, guard, now_ns};
use crate::sys::*;
use crate::thread::with_state;
use crate::vthreads::records::{end, java_id, record};

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

/// The JVM granted `can_support_virtual_threads`.
static SUPPORTED: AtomicBool = AtomicBool::new(false);
/// jfieldID of `Thread.parkBlocker`.
static BLOCKER_FIELD: AtomicPtr<_jfieldID> = AtomicPtr::new(std::ptr::null_mut());
/// The methods whose presence on a virtual thread's stack tells why it unmounted.
static MARKERS: Mutex<Option<Markers>> = Mutex::new(None);
/// Unmounted virtual threads' traced methods entered and not yet exited
/// (JVMTI method events), by Java thread id.
static OPEN_FRAMES: Mutex<Option<HashMap<u64, Vec<usize>>>> = Mutex::new(None);

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

/// Whether this JVM has virtual threads (JDK 21 and later offer
/// `can_support_virtual_threads`); forgets an earlier session's grant.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn has_virtual_threads(env: *mut jvmtiEnv) -> bool {
    SUPPORTED.store(false, Ordering::SeqCst);
    let mut potential = jvmtiCapabilities::default();
    // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
    // (# Safety).
    (unsafe { jvmti!(env, GetPotentialCapabilities, &mut potential) }) == JVMTI_ERROR_NONE
        && has_bit(&potential, CAN_SUPPORT_VIRTUAL_THREADS_BIT)
}

/// Asks for `can_support_virtual_threads`; remembers whether it was granted.
///
/// # Safety
/// `env` is the agent's JVMTI environment, in the OnLoad or live phase.
pub(crate) unsafe fn add_capability(env: *mut jvmtiEnv) {
    let mut caps = jvmtiCapabilities::default();
    set_bit(&mut caps, CAN_SUPPORT_VIRTUAL_THREADS_BIT);
    // SAFETY: the caller guarantees `env` is the agent's environment in the OnLoad or live phase
    // (# Safety).
    let ok = unsafe { jvmti!(env, AddCapabilities, &caps) } == JVMTI_ERROR_NONE;
    SUPPORTED.store(ok, Ordering::SeqCst);
}

/// The callbacks with the virtual thread start and end slots filled.
pub(crate) fn callbacks(base: jvmtiEventCallbacks) -> Callbacks {
    Callbacks {
        base,
        virtual_thread_start: Some(on_start),
        virtual_thread_end: Some(on_end),
    }
}

/// At VMInit (or attach), when following them with JVMTI: enables the
/// start/end events and the mount/unmount extension events; a message when
/// they cannot all be.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`; `thread` is
/// `java.lang.Thread`'s class.
pub(crate) unsafe fn start(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jclass) -> Result<(), String> {
    // SAFETY: the caller guarantees the live phase, this Java thread's `jni` and `thread` =
    // `java.lang.Thread` (# Safety).
    unsafe {
        let f = jni!(
            jni,
            GetFieldID,
            thread,
            c"parkBlocker".as_ptr(),
            c"Ljava/lang/Object;".as_ptr()
        )
        .unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        BLOCKER_FIELD.store(f, Ordering::SeqCst);
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
}

/// At the end of an attach session: stops the virtual thread events.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase.
pub(crate) unsafe fn stop(env: *mut jvmtiEnv) {
    if !SUPPORTED.load(Ordering::SeqCst) {
        return;
    }
    for e in [EVENT_VIRTUAL_THREAD_START, EVENT_VIRTUAL_THREAD_END] {
        // SAFETY: the caller guarantees `env` is the agent's environment in the live phase (# Safety).
        unsafe {
            jvm::set_event(env, e, false);
        }
    }
    for id in [MOUNT_EVENT, UNMOUNT_EVENT] {
        // SAFETY: the caller guarantees `env` is the agent's environment in the live phase (# Safety).
        let _ = unsafe { set_extension_callback(env, id, None) };
    }
}

/// Sets (or clears) the callback of the extension event `id`.
///
/// # Safety
/// `env` is the agent's JVMTI environment in the live phase.
unsafe fn set_extension_callback(env: *mut jvmtiEnv, id: &str, f: Option<VirtualThreadFn>) -> Result<(), String> {
    let mut count: jint = 0;
    let mut infos: *mut jvmtiExtensionEventInfo = std::ptr::null_mut();
    // SAFETY: `env` is the agent's live environment and `infos` holds the `count` entries JVMTI
    // returned (# Safety).
    unsafe {
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
}

/// # Safety
/// Called by the JVM as the VirtualThreadStart callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_start(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadStart", || {
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            record(jni, thread, ts, kind::VTHREAD_START, || {
                jvm::thread_info(env, jni, thread).map(|i| i.name).unwrap_or_default()
            });
        }
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            mounted(jni, thread);
        }
    });
}

/// # Safety
/// Called by the JVM as the VirtualThreadEnd callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_end(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadEnd", || {
        unmounted(false);
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            end(jni, thread, ts, || {
                jvm::thread_info(env, jni, thread).map(|i| i.name).unwrap_or_default()
            })
        }
    });
}

/// # Safety
/// Called by the JVM as the VirtualThreadMount callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_mount(_env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadMount", || {
        // SAFETY: the JVM calls this callback with the current thread's `jni` and the mounted `thread`
        // (# Safety).
        unsafe {
            record(jni, thread, ts, kind::VTHREAD_MOUNT, String::new);
        }
        // SAFETY: the JVM calls this callback with the current thread's `jni` and the mounted `thread`
        // (# Safety).
        unsafe {
            mounted(jni, thread);
        }
    });
}

/// # Safety
/// Called by the JVM as the VirtualThreadUnmount callback, with the agent's `env` and the current
/// thread's `jni`.
unsafe extern "C" fn on_unmount(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    let ts = now_ns();
    guard("VirtualThreadUnmount", || {
        unmounted(true);
        // SAFETY: the JVM calls this callback with the agent's `env` and the current thread's `jni`
        // (# Safety).
        unsafe {
            record(jni, thread, ts, kind::VTHREAD_UNMOUNT, || {
                unmount_reason(env, jni, thread)
            })
        }
    });
}

/// The virtual thread `thread` is mounted on the calling carrier: its
/// method events are its own from now on.
///
/// # Safety
/// In a virtual thread callback, with its `jni` and `thread`.
unsafe fn mounted(jni: *mut JNIEnv, thread: jthread) {
    let Some((rec, _)) = active() else { return };
    // SAFETY: the caller passes this callback's `jni` and `thread` (# Safety).
    let Some(id) = (unsafe { java_id(jni, thread) }) else {
        return;
    };
    let frames = lock(&OPEN_FRAMES)
        .as_mut()
        .and_then(|m| m.remove(&id))
        .unwrap_or_default();
    with_state(rec, |st| st.mounted = Some((id, frames)));
}

/// The calling carrier's virtual thread leaves it; its open methods are
/// kept for its next mount unless it `ends` (is not `parked`).
fn unmounted(parked: bool) {
    let Some((rec, _)) = active() else { return };
    with_state(rec, |st| {
        if let Some((id, frames)) = st.mounted.take() {
            if parked && !frames.is_empty() {
                lock(&OPEN_FRAMES).get_or_insert_with(HashMap::new).insert(id, frames);
            }
        }
    });
}

/// Why a virtual thread is unmounting, from the methods on its stack: a
/// [`jtrace_format::UNMOUNT_PARK`]-style word, with the park blocker's
/// class after a space; "" when the stack shows none of the markers.
///
/// # Safety
/// In the VirtualThreadUnmount callback, with its `env`, `jni` and `thread`.
unsafe fn unmount_reason(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> String {
    let mut frames = [jvmtiFrameInfo::default(); UNMOUNT_FRAMES];
    let mut n: jint = 0;
    // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
    if unsafe {
        jvmti!(
            env,
            GetStackTrace,
            thread,
            0,
            UNMOUNT_FRAMES as jint,
            frames.as_mut_ptr(),
            &mut n
        )
    } != JVMTI_ERROR_NONE
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
            // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
            let blocker = unsafe { blocker_class(env, jni, thread) };
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
///
/// # Safety
/// In a virtual thread callback, with its `env`, `jni` and `thread`.
unsafe fn blocker_class(env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) -> String {
    let f = BLOCKER_FIELD.load(Ordering::Relaxed);
    if f.is_null() {
        return String::new();
    }
    // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
    let blocker = unsafe { jni!(jni, GetObjectField, thread, f) }.unwrap_or(std::ptr::null_mut());
    // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
    let name = unsafe { object_class_name(env, jni, blocker) };
    // SAFETY: the caller passes this callback's `env`, `jni` and `thread` (# Safety).
    unsafe {
        jvm::delete_local(jni, blocker);
    }
    name
}

/// Methods that tell why a virtual thread unmounted, resolved once.
struct Markers {
    /// (method, reason), most specific first.
    methods: Vec<(usize, &'static str)>,
}

impl Markers {
    /// Looks the markers up in this JVM (those it lacks are skipped).
    ///
    /// # Safety
    /// Live phase, on a Java thread whose JNIEnv is `jni`.
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
                c"(IIJLjava/util/function/BooleanSupplier;)V",
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
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        unsafe {
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

//! What the agent keeps between callbacks: the recording session (its
//! configuration, recorder and flags), each thread's recording state, and
//! [`guard`], which every callback runs in.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use jtrace_format::{Payload, Record};

use crate::config::Config;
use crate::demotion::watch::ThreadWatch;
use crate::recorder::{Recorder, SharedBuf};

/// A value installed for one recording session and read lock-free by every
/// callback. Callbacks only use it inside [`guard`], so a stop frees it once
/// no guarded callback is running ([`IN_FLIGHT`]).
pub(crate) struct Slot<T>(AtomicPtr<T>);

impl<T> Slot<T> {
    const fn new() -> Self {
        Slot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The value in force, if any.
    pub(crate) fn get(&self) -> Option<&'static T> {
        // SAFETY: non-null pointers come from Box::into_raw in `set`, and are
        // freed only once no callback can hold them (see `take`).
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }

    /// Installs `v` (at the start of a session).
    pub(crate) fn set(&self, v: T) {
        self.0.store(Box::into_raw(Box::new(v)), Ordering::Release);
    }

    /// Removes the value; the caller frees it when no callback can hold it.
    pub(crate) fn take(&self) -> Option<Box<T>> {
        let p = self.0.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: non-null pointers come from Box::into_raw in `set`.
        (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
    }
}

/// Guarded callbacks running now, on every thread (see [`guard`]).
pub(crate) static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Configuration in force (set at load or attach, cleared at stop).
pub(crate) static CONFIG: Slot<Config> = Slot::new();
/// The stream writer (set at load or attach when the configuration is valid).
pub(crate) static RECORDER: Slot<Recorder> = Slot::new();
/// Cleared on an internal error or a stop: every callback then returns at once.
pub(crate) static ENABLED: AtomicBool = AtomicBool::new(false);
/// Recording session number, incremented by every load or attach: a
/// thread's state from an earlier session is reset on its next event.
pub(crate) static SESSION: AtomicU64 = AtomicU64::new(0);
/// The session was started by a dynamic attach (so it may be stopped).
pub(crate) static ATTACHED: AtomicBool = AtomicBool::new(false);
/// Every traced thread's stream buffer in the current session, by tid (for
/// the final drain of a stop).
pub(crate) static SESSION_BUFS: Mutex<Vec<(u32, SharedBuf)>> = Mutex::new(Vec::new());
/// Threads of the current session given a THREAD_START by
/// [`crate::existing_threads`] (they get no second one when they register).
pub(crate) static NAMED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Serialises load, attach and stop (attach commands come one at a time on
/// HotSpot's attach listener, but nothing else guarantees it).
pub(crate) static CONTROL: Mutex<()> = Mutex::new(());

/// Prints a message of the agent on the JVM's stderr, except in a JVM
/// attached to: its output must stay as it was (the trace and jtrace's
/// own output carry the message instead).
pub(crate) fn say(msg: &str) {
    if !ATTACHED.load(Ordering::Relaxed) {
        eprintln!("jtrace agent: {msg}");
    }
}

/// Whether JTRACE_AGENT_DEBUG is set: diagnostics are wanted.
pub(crate) fn debugging() -> bool {
    std::env::var_os("JTRACE_AGENT_DEBUG").is_some()
}

/// Prints a diagnostic on stderr when JTRACE_AGENT_DEBUG is set.
pub(crate) fn debug(msg: &str) {
    if debugging() {
        eprintln!("jtrace agent (debug): {msg}");
    }
}

pub(crate) use crate::os::{now_ns, tid};

/// A cheap hash for jmethodID pointers (8-byte aligned, so fold the high
/// bits of the product into the low ones that pick the bucket).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        let h = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One thread's recording state (kept in [`crate::thread`]).
#[derive(Default)]
pub(crate) struct ThreadState {
    /// The session this state belongs to ([`SESSION`]).
    pub session: u64,
    /// THREAD_START handled (recorded, or the thread was excluded).
    pub registered: bool,
    /// Thread passes the thread rules.
    pub traced: bool,
    /// The thread's buffer, for traced threads.
    pub buf: Option<SharedBuf>,
    /// Filter decisions this thread has already looked up (JVMTI method events).
    pub cache: HashMap<usize, bool, BuildHasherDefault<IdHasher>>,
    /// Traced methods entered and not yet exited, innermost last. Exits are
    /// matched against it, so an exit from a frame entered before tracing
    /// began is dropped rather than unbalancing the trace.
    pub stack: Vec<usize>,
    /// The virtual thread mounted on this carrier when JVMTI's events follow
    /// them ([`crate::vthreads`]'s `jvmti`): its Java id and its traced methods
    /// entered and not yet exited. JVMTI's method events on the carrier are
    /// then that virtual thread's.
    pub mounted: Option<(u64, Vec<usize>)>,
    /// What its probes recorded, for demotion and `--min-duration`.
    pub watch: ThreadWatch,
}

/// Runs a callback body, turning a panic into a disabled agent plus an
/// AGENT_ERROR record: a panic must never unwind into the JVM.
pub(crate) fn guard(what: &str, f: impl FnOnce()) {
    // Counted so that a stop knows when the session's state is no longer used.
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        internal_error(&format!("internal error (panic) in {what}; agent disabled"));
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}

/// From inside a guarded callback: waits up to `max` for every other
/// guarded callback to return; whether they all did.
pub(crate) fn others_done_within(max: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    while IN_FLIGHT.load(Ordering::SeqCst) > 1 && t0.elapsed() < max {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    IN_FLIGHT.load(Ordering::SeqCst) <= 1
}

/// Disables the agent and records why.
pub(crate) fn internal_error(msg: &str) {
    ENABLED.store(false, Ordering::SeqCst);
    say(msg);
    // Recording the error must not panic again; ignore a failure here.
    let _ = catch_unwind(|| {
        if let Some(r) = RECORDER.get() {
            r.write_direct(&Record {
                tid: tid(),
                ts: now_ns(),
                payload: Payload::AgentError(msg.into()),
            });
        }
    });
}

/// The session's recorder and configuration while recording is on.
pub(crate) fn active() -> Option<(&'static Recorder, &'static Config)> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    Some((RECORDER.get()?, CONFIG.get()?))
}

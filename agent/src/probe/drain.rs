//! Draining the bytecode probes' buffers into the stream.
//!
//! Each thread registers its `Probe` buffer once (`register0`,
//! [`crate::probe::natives`]); the agent keeps every live one here, and
//! writes a buffer's events as METHOD_BATCH records ([`crate::probe::batch`]) into
//! the stream buffer of its thread: the calling thread's before any other
//! record of it ([`drain_own`], called by [`crate::thread::with_state`], so
//! a thread's records stay in time order), when its buffer is full
//! (`flush0`), at its ThreadEnd, and every thread's at VM death
//! ([`drain_others`]) and at the end of an attach session ([`drain_all`]).

use std::cell::Cell;
use std::sync::Mutex;

use crate::demotion;
use crate::jvm::jni;
use crate::mutex::lock;
use crate::probe::batch::{self, Block};
use crate::probe::class::{self, take_buffer};
use crate::recorder::{Recorder, SharedBuf};
use crate::state::{active, now_ns, tid, ThreadState};
use crate::sys::*;

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

/// The calling thread's `Probe` (global reference) and JNIEnv, if it has one.
pub(crate) fn own_probe() -> Option<(jobject, *mut JNIEnv)> {
    MINE.try_with(Cell::get).ok().filter(|(probe, _)| !probe.is_null())
}

/// Makes `probe` (a global reference) the calling thread's; a probe it had
/// before (its ThreadLocal was cleared) is forgotten.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv.
pub(crate) unsafe fn set_own_probe(probe: jobject, jni: *mut JNIEnv) {
    let old = MINE
        .try_with(|m| m.replace((probe, jni)))
        .unwrap_or((std::ptr::null_mut(), jni));
    if !old.0.is_null() {
        lock(&REGISTERED).retain(|r| r.probe != old.0 as usize);
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv (# Safety).
        unsafe {
            jni!(jni, DeleteGlobalRef, old.0);
        }
    }
}

/// Adds `probe` (a global reference) of thread `tid` to the registry, with
/// the thread's stream buffer (`None`: its events are not recorded).
pub(crate) fn register(probe: jobject, tid: u32, buf: Option<SharedBuf>) {
    lock(&REGISTERED).push(Registered {
        probe: probe as usize,
        tid,
        buf,
    });
}

/// Forgets the calling thread's `probe` (at its end, once drained): out of
/// the registry and of `Probe.BY_THREAD`, and its global reference deleted.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null) and `probe` its own.
pub(crate) unsafe fn release_own(jni: *mut JNIEnv, probe: jobject) {
    lock(&REGISTERED).retain(|r| r.probe != probe as usize);
    let _ = MINE.try_with(|m| m.set((std::ptr::null_mut(), std::ptr::null_mut())));
    if !jni.is_null() {
        // SAFETY: `jni` is this thread's JNIEnv, checked non-null, and `probe` its own global
        // reference (# Safety).
        unsafe {
            class::forget_slot(jni, probe);
        }
        // SAFETY: `jni` is this thread's JNIEnv, checked non-null, and `probe` its own global
        // reference (# Safety).
        unsafe {
            jni!(jni, DeleteGlobalRef, probe);
        }
    }
}

/// Drains the calling thread's probe buffer into its stream buffer (the
/// events of a thread the rules exclude are dropped, those of a traced
/// thread without a buffer counted as lost).
pub(crate) fn drain_own(rec: &Recorder, st: &mut ThreadState) {
    let Some((probe, jni)) = own_probe() else {
        return;
    };
    let buf = if st.traced { st.buf.clone() } else { None };
    let traced = st.traced;
    let (budget, min_duration) = active().map_or((0, 0), |(_, c)| (c.overhead_budget, c.min_duration_ns));
    let stack = &mut st.stack;
    let watch = &mut st.watch;
    let watched = buf.is_some();
    // SAFETY: `probe` is a live global reference and `jni` this thread's JNIEnv.
    unsafe {
        take_buffer(jni, probe, |data| match &buf {
            Some(b) => {
                if watch.observe(data, min_duration) {
                    let kept = Block {
                        base: data.base,
                        events: watch.filtered(),
                    };
                    encode_block(rec, b, tid(), kept, Some(stack));
                } else {
                    encode_block(rec, b, tid(), data, Some(stack));
                }
            }
            None if traced => rec.count_lost(data.events.len() as u64),
            None => {}
        })
    };
    if let Some(b) = &buf {
        rec.flush_if_full(b);
    }
    if watched {
        demotion::after_drain(watch, budget);
        watch.drained(now_ns());
    }
}

/// At VM death, before the recorder's final flush: drains every other
/// thread's probe buffer into its own stream buffer.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn drain_others(jni: *mut JNIEnv, rec: &Recorder) {
    let mine = own_probe().map_or(0, |(probe, _)| probe as usize);
    let all: Vec<(usize, u32, Option<SharedBuf>)> = lock(&REGISTERED)
        .iter()
        .map(|r| (r.probe, r.tid, r.buf.clone()))
        .collect();
    for (probe, t, buf) in all {
        if probe == mine {
            continue;
        }
        if let Some(b) = &buf {
            // SAFETY: the caller guarantees `jni` is this thread's JNIEnv or null (# Safety).
            unsafe {
                take_buffer(jni, probe as jobject, |data| encode_block(rec, b, t, data, None));
            }
            rec.flush_if_full(b);
        }
    }
}

/// At the end of an attach session: writes every thread's buffered events
/// into its stream buffer of this session (`buf_of(tid)`; `None` drops
/// them).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn drain_all(jni: *mut JNIEnv, rec: &Recorder, buf_of: &dyn Fn(u32) -> Option<SharedBuf>) {
    let all: Vec<(usize, u32)> = lock(&REGISTERED).iter().map(|r| (r.probe, r.tid)).collect();
    for (probe, t) in all {
        match buf_of(t) {
            Some(b) => {
                // SAFETY: the caller guarantees `jni` is this thread's JNIEnv, checked non-null here
                // (# Safety).
                unsafe {
                    take_buffer(jni, probe as jobject, |data| encode_block(rec, &b, t, data, None));
                }
                rec.flush_if_full(&b);
            }
            // SAFETY: the caller guarantees `jni` is this thread's JNIEnv, checked non-null here
            // (# Safety).
            None => unsafe { take_buffer(jni, probe as jobject, |_| {}) },
        }
    }
}

/// At the start of an attach session, before any probe of it exists:
/// empties every thread's probe buffer without recording it. What the probes
/// buffered since the last session stopped (frames that kept running
/// instrumented code) belongs to no session.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn purge(jni: *mut JNIEnv) {
    if !class::ready() || jni.is_null() {
        return;
    }
    let all: Vec<usize> = lock(&REGISTERED).iter().map(|r| r.probe).collect();
    for probe in all {
        // SAFETY: the caller guarantees `jni` is this thread's JNIEnv, checked non-null here
        // (# Safety).
        unsafe {
            take_buffer(jni, probe as jobject, |_| {});
        }
    }
}

/// Writes a block of probe events as METHOD_BATCH records straight into the
/// thread's stream buffer (runs inside the JNI critical region, so it does
/// not write the buffer out). See [`batch::encode_events`].
fn encode_block(rec: &Recorder, buf: &SharedBuf, tid: u32, block: Block, stack: Option<&mut Vec<usize>>) {
    rec.encode_with(buf, |out| batch::encode_events(out, tid, block, stack));
}

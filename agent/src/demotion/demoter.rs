//! The demoter: an agent thread (a daemon Java thread, "jtrace demoter")
//! that takes the methods [`crate::demotion`] chose, marks them demoted in
//! the probe class (`Probe.DEMOTED`: their probes then record nothing and
//! return at once) and writes their METHOD_DEMOTED records. No class is
//! retransformed: a retransformation would deoptimise every compiled
//! method that inlined the class and restart its methods in the
//! interpreter (BENCHMARKS.md, "H2 JDBC load"). The rewriter still leaves
//! demoted methods out should their class be rewritten again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::classes;
use crate::demotion::{self, PENDING, PENDING_SIGNAL};
use crate::jvm;
use crate::mutex::lock;
use crate::probe;
use crate::state::{active, debug, guard, now_ns, say, tid, SESSION};
use jtrace_format::agent_threads::DEMOTER;
use jtrace_format::{Payload, Record};

/// Demoter threads attached to the JVM (one per session, the last one's
/// until it sees its session end).
static ATTACHED: AtomicUsize = AtomicUsize::new(0);

/// Starts the demoter of the current session (at its first demotion: a
/// session that demotes nothing has no demoter thread). It ends when the
/// session does.
pub(crate) fn start() {
    let session = SESSION.load(Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name(DEMOTER.into())
        .spawn(move || run(session));
    if let Err(e) = spawned {
        debug(&format!("demotion: cannot start the demoter thread: {e}"));
    }
}

fn run(session: u64) {
    // Its Java name is its kernel name: readers know the tracer's threads by it.
    let name = std::ffi::CString::new(DEMOTER).expect("no NUL in a thread name");
    // SAFETY: a thread of the agent's own, after the agent connected.
    let jni = unsafe { jvm::attach_daemon(&name) };
    if jni.is_null() {
        debug("demotion: the JVM refused to attach the demoter thread");
        return;
    }
    ATTACHED.fetch_add(1, Ordering::SeqCst);
    work(session, jni);
    // SAFETY: attached above; no JNI frame of ours is in use.
    unsafe { jvm::detach_current() };
    ATTACHED.fetch_sub(1, Ordering::SeqCst);
}

/// Wakes the demoter of an ended session and waits (briefly) until it has
/// left the JVM: at VM death, a thread still attached would hold the JVM's
/// exit up for 0.3 s ([`jvm::detach_current`]).
pub(crate) fn stop() {
    {
        let _pending = lock(&PENDING);
        PENDING_SIGNAL.notify_all();
    }
    let until = Instant::now() + Duration::from_millis(200);
    while ATTACHED.load(Ordering::SeqCst) != 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Applies the session's demotions as they come, until the session ends.
fn work(session: u64, jni: *mut crate::sys::JNIEnv) {
    loop {
        let ids: Vec<u32> = {
            let mut pending = lock(&PENDING);
            // Checked under the lock that [`stop`] notifies under: its wake-up is not lost.
            if pending.is_empty() && SESSION.load(Ordering::SeqCst) == session && active().is_some() {
                pending = PENDING_SIGNAL
                    .wait_timeout(pending, Duration::from_millis(200))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            std::mem::take(&mut *pending)
        };
        if SESSION.load(Ordering::SeqCst) != session || active().is_none() {
            return;
        }
        if !ids.is_empty() {
            guard("demoter", || demote(jni, &ids));
        }
    }
}

/// Demotes `ids`: marked, recorded.
fn demote(jni: *mut crate::sys::JNIEnv, ids: &[u32]) {
    let Some((rec, _)) = active() else { return };
    let keys: Vec<(String, String, String)> = ids.iter().filter_map(|&id| classes::method_key(id)).collect();
    demotion::mark_demoted(keys.iter().cloned());
    // SAFETY: a Java thread (attached) with its JNIEnv, in the live phase.
    if !unsafe { probe::class::set_demoted(jni, ids, false) } {
        // Not demoted after all: their probes record on, and the trace says why.
        demotion::unmark_demoted(&keys);
        let msg = format!(
            "demotion: cannot mark {} method(s) demoted in jtrace.Probe: they keep their probes",
            ids.len()
        );
        say(&msg);
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(msg),
        });
        return;
    }
    demotion::record_demoted(rec, tid(), now_ns(), ids);
    debug(&format!("demotion: {} method(s) demoted", ids.len()));
}

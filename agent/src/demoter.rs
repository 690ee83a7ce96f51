//! The demoter: an agent thread (a daemon Java thread, "jtrace demoter")
//! that takes the methods [`crate::demotion`] chose, marks them demoted and
//! retransforms their classes, so that their new calls run the original
//! bytecode; then writes their METHOD_DEMOTED records. Retransforming
//! stops the JVM at a safepoint briefly; doing it here keeps that off the
//! application threads that decided.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::classes;
use crate::demotion::{self, PENDING, PENDING_SIGNAL};
use crate::jvm;
use crate::mutex::lock;
use crate::state::{active, debug, guard, now_ns, say, tid, SESSION};
use jtrace_format::{Payload, Record};

/// How long the demoter waits for more methods once one is pending, at
/// first; the wait doubles after each batch, up to [`MAX_BATCH_WAIT`]:
/// each retransformation deoptimises the code that inlined the classes,
/// so the later, smaller decisions wait to join larger batches.
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// The longest wait between two batches.
const MAX_BATCH_WAIT: Duration = Duration::from_millis(800);

/// Starts the demoter of the current session (at its first demotion: a
/// session that demotes nothing has no demoter thread). It ends when the
/// session does.
pub(crate) fn start() {
    let session = SESSION.load(Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name("jtrace demoter".into())
        .spawn(move || run(session));
    if let Err(e) = spawned {
        debug(&format!("demotion: cannot start the demoter thread: {e}"));
    }
}

fn run(session: u64) {
    // SAFETY: a thread of the agent's own, after the agent connected.
    let jni = unsafe { jvm::attach_daemon(c"jtrace demoter") };
    if jni.is_null() {
        debug("demotion: the JVM refused to attach the demoter thread");
        return;
    }
    let mut wait = BATCH_WAIT;
    loop {
        let ids: Vec<u32> = {
            let mut pending = lock(&PENDING);
            if pending.is_empty() {
                pending = PENDING_SIGNAL
                    .wait_timeout(pending, Duration::from_millis(200))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            if !pending.is_empty() {
                // Let the other threads' decisions join this batch: each
                // retransformation deoptimises the code that inlined the
                // classes, so fewer, larger batches cost less.
                drop(pending);
                std::thread::sleep(wait);
                wait = (wait * 2).min(MAX_BATCH_WAIT);
                pending = lock(&PENDING);
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

/// Demotes `ids`: marked, their classes retransformed, recorded.
fn demote(jni: *mut crate::sys::JNIEnv, ids: &[u32]) {
    let Some((rec, _)) = active() else { return };
    let env = jvm::env();
    let keys: Vec<(u32, (String, String, String))> = ids
        .iter()
        .filter_map(|&id| Some((id, classes::method_key(id)?)))
        .collect();
    let names: HashSet<String> = keys.iter().map(|(_, k)| k.0.clone()).collect();
    demotion::mark_demoted(keys.iter().map(|(_, k)| k.clone()));
    // SAFETY: a Java thread (attached) with its JNIEnv, in the live phase.
    let (classes, failed) = unsafe { classes::retransform_named(env, jni, &names) };
    let (kept, done): (Vec<_>, Vec<_>) = keys
        .iter()
        .partition(|(_, k)| failed.iter().any(|(class, _)| *class == k.0));
    // Not demoted after all: their probes stay, and the trace says why.
    let kept_keys: Vec<(String, String, String)> = kept.iter().map(|(_, k)| k.clone()).collect();
    demotion::unmark_demoted(&kept_keys);
    for (class, e) in &failed {
        let methods: Vec<&str> = kept_keys
            .iter()
            .filter(|k| k.0 == *class)
            .map(|k| k.1.as_str())
            .collect();
        let msg = format!(
            "demotion: the JVM refused to retransform {} (JVMTI error {e}): {} keep their probes",
            class.replace('/', "."),
            methods.join(", ")
        );
        say(&msg);
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(msg),
        });
    }
    let done: Vec<u32> = done.iter().map(|(id, _)| *id).collect();
    demotion::record_demoted(rec, tid(), now_ns(), &done);
    debug(&format!(
        "demotion: {} method(s) of {} class(es) demoted ({} retransformed, {} refused)",
        done.len(),
        names.len(),
        classes,
        failed.len()
    ));
}

//! Naming the Java threads that exist before recording starts (those
//! started before VMInit, or every thread when attaching): they get no
//! ThreadStart event, so the agent records their THREAD_START itself.
//!
//! JVMTI does not give a thread's kernel tid: HotSpot's own structure table
//! does ([`crate::vmstructs`]); failing that, a thread whose name matches
//! the kernel name of exactly one task of this process (HotSpot names the
//! threads it starts after their Java name, cut to 15 bytes) is recorded
//! with that task's tid. The others are named when they record their first
//! event.

use jtrace_format::{Payload, Record, ThreadStart};

use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::state::{active, NAMED};
use crate::sys::*;
use crate::vmstructs;

/// Records THREAD_START (at `ts`) for the live Java threads the thread
/// rules trace, except the calling thread (it names itself when it
/// registers) and those named already in this session.
///
/// # Safety
/// Live phase, with the agent's `env` and the calling thread's `jni` (or null).
pub(crate) unsafe fn name(env: *mut jvmtiEnv, jni: *mut JNIEnv, ts: u64) {
    let Some((rec, cfg)) = active() else { return };
    let mut n: jint = 0;
    let mut threads: *mut jthread = std::ptr::null_mut();
    // SAFETY: `env` is the agent's live environment, `jni` this thread's, and `threads` holds the `n`
    // references JVMTI returned (# Safety).
    unsafe {
        if jvmti!(env, GetAllThreads, &mut n, &mut threads) != JVMTI_ERROR_NONE || threads.is_null() {
            return;
        }
        let reader = vmstructs::TidReader::new(jni);
        let mut infos = Vec::new();
        for &t in std::slice::from_raw_parts(threads, n.max(0) as usize) {
            if let Some(i) = jvm::thread_info(env, jni, t) {
                let tid = reader.as_ref().and_then(|r| r.tid(jni, t));
                infos.push((i, tid));
            }
            jvm::delete_local(jni, t);
        }
        jvmti!(env, Deallocate, threads.cast());
        let mut comms: Vec<(u32, Vec<u8>)> = Vec::new();
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for e in dir.flatten() {
                let Some(t) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if let Ok(c) = std::fs::read(e.path().join("comm")) {
                    comms.push((t, c.strip_suffix(b"\n").unwrap_or(&c).to_vec()));
                }
            }
        }
        let short = |name: &str| -> Vec<u8> {
            let b = name.as_bytes();
            b[..b.len().min(15)].to_vec()
        };
        let pid = std::process::id();
        for (i, tid) in infos {
            if !cfg.thread_traced(&i.name) {
                continue;
            }
            let tid = match tid {
                Some(t) => t,
                None => {
                    let mut same_name = tasks_named(&comms, &short(&i.name));
                    if i.name == "main" && same_name.is_empty() {
                        // The launcher's main thread keeps the launcher's name; the
                        // other task of that name is the primordial thread (tid = pid).
                        same_name = tasks_named(&comms, b"java");
                        same_name.retain(|&t| t != pid);
                    }
                    if same_name.len() != 1 {
                        continue;
                    }
                    same_name[0]
                }
            };
            // The calling thread names itself when it registers; a thread is
            // named once per session.
            if tid == crate::state::tid() || lock(&NAMED).contains(&tid) {
                continue;
            }
            lock(&NAMED).push(tid);
            rec.write_direct(&Record {
                tid,
                ts,
                payload: Payload::ThreadStart(ThreadStart {
                    daemon: i.daemon as u32,
                    name: i.name,
                    group: i.group,
                    parent: String::new(),
                }),
            });
        }
    }
}

/// The tids whose comm is `key`.
fn tasks_named(comms: &[(u32, Vec<u8>)], key: &[u8]) -> Vec<u32> {
    comms.iter().filter(|(_, c)| c == key).map(|(t, _)| *t).collect()
}

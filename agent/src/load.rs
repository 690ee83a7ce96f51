//! Loading the agent into a JVM, at start-up or by attach: the options and
//! configuration file, the stream file, the JVMTI capabilities and
//! callbacks. Every failure leaves the JVM running untraced.

use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;

use jtrace_format::{Payload, Record};

use crate::chunks::ChunkPlan;
use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::recorder::Recorder;
use crate::state::{
    guard, now_ns, say, tid, ATTACHED, CONFIG, CONTROL, ENABLED, NAMED, RECORDER, SESSION, SESSION_BUFS,
};
use crate::sys::*;
use crate::{classes, drain, events, existing_threads, hooks, session, virtual_threads};

/// Why a load did not start a recording session.
pub(crate) enum Failure {
    /// The configuration is unusable; the stream, if any, says why.
    BadConfig,
    /// A session is already recording (or the agent was loaded at start-up).
    Busy,
    /// The JVM refused what the agent needs; the stream says what.
    JvmRefused,
}

/// Loads the agent (at start-up, or into a live VM with `attach`) and
/// starts a recording session; every failure leaves the JVM running
/// untraced.
///
/// # Safety
/// `vm` and `options` as the JVM passes them to Agent_OnLoad/Agent_OnAttach.
pub(crate) unsafe fn load(vm: *mut JavaVM, options: *const c_char, attach: bool) -> Result<(), Failure> {
    let _control = lock(&CONTROL);
    if RECORDER.get().is_some() || CONFIG.get().is_some() {
        if !attach {
            eprintln!("jtrace agent: already loaded in this JVM; ignoring");
        }
        return Err(Failure::Busy);
    }
    if attach {
        ATTACHED.store(true, Ordering::SeqCst);
    } else if ATTACHED.load(Ordering::SeqCst) {
        return Err(Failure::Busy);
    }
    let path = match config_path(options) {
        Ok(p) => p,
        Err(e) => {
            report_untraced(&[e.message], None);
            return Err(Failure::BadConfig);
        }
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            report_untraced(&[format!("{path}: cannot read configuration: {e}")], None);
            return Err(Failure::BadConfig);
        }
    };
    let (cfg, errors) = Config::parse(&text);
    if !errors.is_empty() {
        let msgs: Vec<String> = errors.iter().map(|e| e.located(&path)).collect();
        report_untraced(&msgs, cfg.output.as_deref());
        return Err(Failure::BadConfig);
    }
    let Some(output) = cfg.output.clone() else {
        report_untraced(&[format!("{path}: no `output` directive")], None);
        return Err(Failure::BadConfig);
    };
    let chunks = (cfg.chunk_bytes > 0 || cfg.chunk_ms > 0).then(|| ChunkPlan {
        bytes: cfg.chunk_bytes,
        ns: cfg.chunk_ms.saturating_mul(1_000_000),
        dir: output.clone().into(),
    });
    let file = match create_stream(&output, chunks.as_ref().map(|_| 0)) {
        Ok(f) => f,
        Err(e) => {
            report_untraced(&[e], None);
            return Err(Failure::BadConfig);
        }
    };
    let made = match chunks.clone() {
        Some(plan) => Recorder::chunked(file, say, cfg.min_free_bytes, plan, now_ns()),
        None => Recorder::new(file, say, cfg.min_free_bytes),
    };
    let rec = match made {
        Ok(r) => r,
        Err(e) => {
            report_untraced(&[format!("cannot write the stream header: {e}")], None);
            return Err(Failure::BadConfig);
        }
    };
    let fail = |rec: Recorder, msg: String| {
        say(&msg);
        say("not tracing this JVM");
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(msg),
        });
        Err(Failure::JvmRefused)
    };
    let env = match jvm::connect(vm) {
        Ok(e) => e,
        Err(e) => return fail(rec, e),
    };

    // Virtual threads (JDK 21 and later) are followed from the bytecode
    // when the agent may rewrite classes, else with JVMTI's events.
    virtual_threads::on_load(env, cfg.virtual_threads, cfg.bytecode_rewriting);
    if virtual_threads::wants_bytecode() && !classes::enabled(&cfg) {
        let mut caps = jvmtiCapabilities::default();
        classes::capabilities(&mut caps, attach);
        if jvmti!(env, AddCapabilities, &caps) != JVMTI_ERROR_NONE {
            virtual_threads::bytecode_refused(env);
        }
    }
    if cfg.traces_methods() {
        let mut caps = jvmtiCapabilities::default();
        if classes::enabled(&cfg) {
            classes::capabilities(&mut caps, attach);
        } else {
            caps.set_can_generate_method_entry_events(1);
            caps.set_can_generate_method_exit_events(1);
        }
        let err = jvmti!(env, AddCapabilities, &caps);
        if err != JVMTI_ERROR_NONE {
            let how = if classes::enabled(&cfg) {
                "class retransformation"
            } else {
                "method entry/exit (only available at start-up; use bytecode_rewriting on)"
            };
            return fail(rec, format!("cannot get the {how} capabilities (JVMTI error {err})"));
        }
    }
    let mut callbacks = hooks::callbacks();
    // Monitor, wait, park, sleep, GC, JIT and allocation events (events/).
    events::on_load(env, &cfg, attach, &mut callbacks);
    let callbacks = virtual_threads::callbacks(callbacks);
    let size = std::mem::size_of::<virtual_threads::Callbacks>() as jint;
    // The JVM reads the slots it knows of the longer table.
    let err = jvmti!(env, SetEventCallbacks, &callbacks.base, size);
    if err != JVMTI_ERROR_NONE {
        return fail(rec, format!("cannot set JVMTI callbacks (error {err})"));
    }
    // The rest is enabled at VMInit, after JVM_START is in the file.
    let mut first = vec![JVMTI_EVENT_VM_DEATH];
    if !attach {
        first.push(JVMTI_EVENT_VM_INIT);
    }
    first.extend(events::early_events());
    for e in first {
        let err = jvm::set_event(env, e, true);
        if err != JVMTI_ERROR_NONE {
            return fail(rec, format!("cannot enable JVMTI event {e} (error {err})"));
        }
    }
    lock(&SESSION_BUFS).clear();
    lock(&NAMED).clear();
    SESSION.fetch_add(1, Ordering::SeqCst);
    CONFIG.set(cfg);
    RECORDER.set(rec);
    ENABLED.store(true, Ordering::SeqCst);
    if chunks.is_some() {
        start_rotation();
    }
    if attach {
        // The VM is already live: no VMInit will come. Threads register
        // lazily, on their first event; the existing ones are named now.
        let ts = now_ns();
        let jni = jvm::jni_env(std::ptr::null_mut());
        drain::purge(jni);
        session::start_recording(env, jni, std::ptr::null_mut(), ts);
        existing_threads::name(env, jni, ts);
        if !ENABLED.load(Ordering::SeqCst) {
            // start_recording hit an internal error (recorded): undo what
            // is on, so the JVM runs on as before.
            session::stop_session(env);
            return Err(Failure::JvmRefused);
        }
    }
    Ok(())
}

/// A problem found before the stream exists.
struct LoadError {
    message: String,
}

/// Extracts the configuration path from the agent options (`<path>` or `config=<path>`).
fn config_path(options: *const c_char) -> Result<String, LoadError> {
    let opts = if options.is_null() {
        String::new()
    } else {
        // SAFETY: the JVM passes a NUL-terminated string.
        unsafe { CStr::from_ptr(options) }.to_string_lossy().into_owned()
    };
    let path = opts.strip_prefix("config=").unwrap_or(&opts).trim().to_string();
    if path.is_empty() {
        return Err(LoadError {
            message: "no configuration file given (use -agentpath:libjtrace_agent.so=<config file>)".into(),
        });
    }
    Ok(path)
}

/// The thread that begins the chunks of a ring recording when due
/// ([`Recorder::rotate_if_due`]); it ends with the recording. Guarded,
/// so that a stopping attach session waits for it before freeing the recorder.
fn start_rotation() {
    let spawned = std::thread::Builder::new().name("jtrace-chunks".into()).spawn(|| loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut go_on = false;
        guard("chunk rotation", || {
            if let Some(rec) = RECORDER.get().filter(|r| !r.is_dead()) {
                rec.rotate_if_due(now_ns());
                go_on = true;
            }
        });
        if !go_on {
            return;
        }
    });
    if let Err(e) = spawned {
        say(&format!(
            "cannot start the chunks' thread ({e}): the stream is one chunk"
        ));
    }
}

/// Creates `<dir>/jvm-<pid>.bin`, or chunk `chunk` of it in a ring
/// recording (mode 0600; the directory 0700 if missing).
fn create_stream(dir: &str, chunk: Option<u64>) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = std::path::Path::new(dir);
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
    }
    let stream = format!("{}{}", jtrace_format::JVM_FILE_PREFIX, std::process::id());
    let path = dir.join(match chunk {
        Some(seq) => jtrace_format::chunk_file(&stream, seq),
        None => format!("{stream}.bin"),
    });
    // Read-write: the recorder maps it.
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// Reports problems that keep the agent from tracing: on stderr, and as
/// AGENT_ERROR records in the stream when the output directory is known.
fn report_untraced(messages: &[String], output: Option<&str>) {
    for m in messages {
        say(m);
    }
    say("not tracing this JVM");
    let Some(dir) = output else { return };
    let Ok(file) = create_stream(dir, None) else { return };
    if let Ok(rec) = Recorder::new(file, say, 0) {
        for m in messages {
            rec.write_direct(&Record {
                tid: tid(),
                ts: now_ns(),
                payload: Payload::AgentError(m.clone()),
            });
        }
    }
}

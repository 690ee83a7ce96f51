//! Loading the agent into a JVM, at start-up or by attach: the options and
//! configuration file, the stream file, the JVMTI capabilities and
//! callbacks. Every failure leaves the JVM running untraced.

use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;

use jtrace_format::{Payload, Record};

use crate::config::Config;
use crate::jvm::{self, jvmti};
use crate::mutex::lock;
use crate::out_dir::{DirId, OutDir};
use crate::probe::drain;
use crate::recorder::Recorder;
use crate::state::{
    guard, now_ns, say, tid, ATTACHED, CONFIG, CONTROL, ENABLED, NAMED, RECORDER, SESSION, SESSION_BUFS,
};
use crate::stream::chunks::ChunkPlan;
use crate::sys::*;
use crate::{classes, events, existing_threads, hooks, session, vthreads};

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
    let opts = match AgentOptions::parse(options) {
        Ok(o) => o,
        Err(e) => {
            report_untraced(&[e], None);
            return Err(Failure::BadConfig);
        }
    };
    let (text, dir) = match opts.read_config() {
        Ok(t) => t,
        Err(e) => {
            report_untraced(&[e], None);
            return Err(Failure::BadConfig);
        }
    };
    let path = &opts.config;
    let (cfg, errors) = Config::parse(&text);
    if !errors.is_empty() {
        let msgs: Vec<String> = errors.iter().map(|e| e.located(path)).collect();
        let dir = dir.or_else(|| cfg.output.as_deref().and_then(|o| OutDir::open(o, None).ok()));
        report_untraced(&msgs, dir.as_ref());
        return Err(Failure::BadConfig);
    }
    let Some(output) = cfg.output.clone() else {
        report_untraced(&[format!("{path}: no `output` directive")], None);
        return Err(Failure::BadConfig);
    };
    let dir = match dir {
        // jtrace's configuration lives in the trace directory it names.
        Some(d) if same_dir(&output, &opts.config_dir()) => d,
        Some(_) => {
            report_untraced(
                &[format!(
                    "{path}: `output {output}` is not the directory the configuration is in"
                )],
                None,
            );
            return Err(Failure::BadConfig);
        }
        None => match OutDir::open(&output, None) {
            Ok(d) => d,
            Err(e) => {
                report_untraced(&[e], None);
                return Err(Failure::BadConfig);
            }
        },
    };
    let dir = std::sync::Arc::new(dir);
    let chunks = (cfg.chunk_bytes > 0 || cfg.chunk_ms > 0).then(|| ChunkPlan {
        bytes: cfg.chunk_bytes,
        ns: cfg.chunk_ms.saturating_mul(1_000_000),
        dir: dir.clone(),
    });
    let file = match create_stream(&dir, chunks.as_ref().map(|_| 0)) {
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
    // SAFETY: the caller passes `vm` and `options` as the JVM gave them (# Safety).
    unsafe {
        let env = match jvm::connect(vm) {
            Ok(e) => e,
            Err(e) => return fail(rec, e),
        };

        // Virtual threads (JDK 21 and later) are followed from the bytecode
        // when the agent may rewrite classes, else with JVMTI's events.
        vthreads::on_load(env, cfg.virtual_threads, cfg.bytecode_rewriting);
        if vthreads::wants_bytecode() && !classes::enabled(&cfg) {
            let mut caps = jvmtiCapabilities::default();
            classes::capabilities(&mut caps, attach);
            if jvmti!(env, AddCapabilities, &caps) != JVMTI_ERROR_NONE {
                vthreads::bytecode_refused(env);
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
        let callbacks = vthreads::callbacks(callbacks);
        let size = std::mem::size_of::<vthreads::Callbacks>() as jint;
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
    }
    Ok(())
}

/// The agent's options: `[dir=<dev>:<ino>,]config=<path>` or a bare path.
/// jtrace gives `dir`, the identity of the trace directory it prepared
/// (which holds the configuration): then nothing is read or written
/// anywhere else, whatever is put at that path meanwhile.
struct AgentOptions {
    config: String,
    dir: Option<DirId>,
}

impl AgentOptions {
    fn parse(options: *const c_char) -> Result<AgentOptions, String> {
        let opts = if options.is_null() {
            String::new()
        } else {
            // SAFETY: the JVM passes a NUL-terminated string.
            unsafe { CStr::from_ptr(options) }.to_string_lossy().into_owned()
        };
        let mut rest = opts.trim();
        let mut dir = None;
        if let Some(r) = rest.strip_prefix("dir=") {
            let (id, after) = r.split_once(',').unwrap_or((r, ""));
            dir =
                Some(DirId::parse(id).ok_or_else(|| format!("bad directory identity {id:?} in the agent's options"))?);
            rest = after;
        }
        let config = rest.strip_prefix("config=").unwrap_or(rest).trim().to_string();
        if config.is_empty() {
            return Err("no configuration file given (use -agentpath:libjtrace_agent.so=<config file>)".into());
        }
        Ok(AgentOptions { config, dir })
    }

    /// The directory the configuration file is in.
    fn config_dir(&self) -> String {
        match self.config.rsplit_once('/') {
            Some(("", _)) => "/".into(),
            Some((d, _)) => d.into(),
            None => ".".into(),
        }
    }

    /// The configuration's text, and with jtrace's directory identity the
    /// trace directory, opened and checked, that it was read from.
    fn read_config(&self) -> Result<(String, Option<OutDir>), String> {
        let path = &self.config;
        let Some(id) = self.dir else {
            // Used by hand: the JVM's own user names its own file.
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: cannot read configuration: {e}"))?;
            return Ok((text, None));
        };
        let dir = OutDir::open(&self.config_dir(), Some(id))?;
        let name = path.rsplit('/').next().unwrap_or(path);
        let text = dir
            .read_small(name)
            .map_err(|e| format!("{path}: cannot read configuration: {e}"))?;
        Ok((text, Some(dir)))
    }
}

/// Whether two spellings of an absolute directory path are the same
/// (trailing slashes aside).
fn same_dir(a: &str, b: &str) -> bool {
    let t = |s: &str| s.trim_end_matches('/').to_string();
    t(a) == t(b)
}

/// The thread that begins the chunks of a ring recording when due
/// ([`Recorder::rotate_if_due`]); it ends with the recording. Guarded,
/// so that a stopping attach session waits for it before freeing the recorder.
fn start_rotation() {
    let spawned = std::thread::Builder::new()
        .name(jtrace_format::agent_threads::CHUNKS.into())
        .spawn(|| loop {
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

/// Creates `jvm-<pid>.bin` in the trace directory, or chunk `chunk` of
/// it in a ring recording (mode 0600, new: nothing there is reused or
/// followed).
fn create_stream(dir: &OutDir, chunk: Option<u64>) -> Result<std::fs::File, String> {
    let stream = format!("{}{}", jtrace_format::JVM_FILE_PREFIX, std::process::id());
    let name = match chunk {
        Some(seq) => jtrace_format::chunk_file(&stream, seq),
        None => format!("{stream}.bin"),
    };
    // Read-write: the recorder maps it.
    dir.create_new(&name)
        .map_err(|e| format!("cannot create {}: {e}", dir.shown(&name)))
}

/// Reports problems that keep the agent from tracing: on stderr, and as
/// AGENT_ERROR records in the stream when the output directory is known.
fn report_untraced(messages: &[String], dir: Option<&OutDir>) {
    for m in messages {
        say(m);
    }
    say("not tracing this JVM");
    let Some(dir) = dir else { return };
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

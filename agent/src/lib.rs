//! jtrace's JVMTI agent (`libjtrace_agent.so`).
//!
//! Loaded with `-agentpath:libjtrace_agent.so=<config>` (or `=config=<config>`),
//! or into a running JVM by `jtrace attach`, it reads a JPMT-style
//! configuration file (see `config.rs`) and records into
//! `<output>/jvm-<pid>.bin`, in the format of the `jtrace-format` crate:
//! JVM start/end, Java thread identities (with their kernel tids), entry/exit
//! of the selected methods and the JVM events that explain time off CPU,
//! timestamped with CLOCK_MONOTONIC.
//!
//! The agent never stops the JVM: configuration problems are reported on
//! stderr (and as AGENT_ERROR records when the output is known) and the
//! program then runs untraced; every callback is guarded against panics, and
//! an internal error disables recording instead of crashing.
//!
//! This file is the entry point only. A part with several modules has a
//! folder (`events/`, `demotion/`, `probe/`, `rewrite/`, `stream/`,
//! `vthreads/`). The modules, by path, each of which uses only modules
//! listed below it:
//!
//! | module | job |
//! |---|---|
//! | `load` | loading: the configuration, the stream file, capabilities and callbacks |
//! | `out_dir` | the trace directory: opened once and checked, files created in it without following links |
//! | `hooks` | JVMTI callbacks: VM init/death, thread start/end, JVMTI method events |
//! | `session` | starting a recording session (VMInit or attach), stopping an attached one |
//! | `existing_threads` | THREAD_START for the threads that exist before recording starts |
//! | `events/` | the other event families: monitors, GC, JIT, allocations, park and sleep |
//! | `demotion::demoter` | the thread that demotes methods: turns their probes off in the probe class (no retransformation) |
//! | `classes` | bytecode rewriting: which classes, the load hook, method ids, retransformation |
//! | `probe::natives` | `Probe.register0`/`flush0`, and defining `jtrace.Probe` with them |
//! | `vthreads` | virtual threads: which way they are followed, the probes' natives for them |
//! | `vthreads::jvmti` | virtual threads followed with JVMTI's events (`bytecode_rewriting off`) |
//! | `vthreads::records` | a virtual thread's own records: identity, start/end, its probe buffer |
//! | `thread` | the calling thread's recording: its state, registering it, recording on it |
//! | `probe::drain` | the probes' buffers: the registry, draining them into the stream |
//! | `probe::class` | `jtrace.Probe` through JNI: its definition, fields and buffers |
//! | `demotion` | adaptive demotion: the methods' calls across threads, the budget, what to demote |
//! | `demotion::watch` | one thread's probe events watched at drain: calls, blocks, the `--min-duration` filter |
//! | `probe::batch` | probe events encoded as METHOD_BATCH records |
//! | `vthreads::markers` | the JDK methods marked to follow virtual threads, their probe events |
//! | `state` | the session and per-thread state, the guard around every callback |
//! | `recorder` | per-thread buffers, method definitions, lost events |
//! | `stream::chunks` | a ring recording's chunk files: when to begin one, what its prologue restates |
//! | `stream::file` | the memory-mapped stream file and its grower |
//! | `stream::limits` | the sizes that bound the stream file's mapping |
//! | `mutex` | locking that survives a poisoned mutex |
//! | `os` | the clock and the calling thread's id, asked of the kernel |
//! | `rewrite/` | the class-file rewriter that inserts the probe calls |
//! | `probe::layout` | the probe events' layout and codes, shared with `Probe.java` (build.rs writes them as `jtrace.Layout`) |
//! | `comp_level` | a compiled method's compilation level, from HotSpot's `nmethod` |
//! | `vmstructs` | HotSpot's structure table: thread tids, native bindings |
//! | `jvm`, `sys` | JVMTI/JNI handles, call macros and checked wrappers; the bindings |
//! | `config` | the configuration file |
//! | `glob` | the `*`/`?` patterns of its rules |
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod classes;
mod comp_level;
mod config;
mod demotion;
mod events;
mod existing_threads;
mod glob;
mod hooks;
mod jvm;
mod load;
mod mutex;
mod os;
mod out_dir;
mod probe;
mod recorder;
mod rewrite;
mod session;
mod state;
mod stream;
mod sys;
mod thread;
mod vmstructs;
mod vthreads;

use std::ffi::{c_char, c_void, CStr};

use load::Failure;
use state::guard;
use sys::{jint, JavaVM};

/// Return codes of Agent_OnAttach (jtrace attach reports them).
mod rc {
    /// Recording (or the stop) went as asked.
    pub const OK: i32 = 0;
    /// The configuration is unusable; the stream, if any, says why.
    pub const BAD_CONFIG: i32 = 1;
    /// A session is already recording (or the agent was loaded at start-up).
    pub const BUSY: i32 = 2;
    /// `stop` without a session started by attach.
    pub const NOT_RECORDING: i32 = 3;
    /// The JVM refused what the agent needs; the stream says what.
    pub const JVM_REFUSED: i32 = 4;
}

/// The [`rc`] code of a load.
fn load_code(r: Result<(), Failure>) -> i32 {
    match r {
        Ok(()) => rc::OK,
        Err(Failure::BadConfig) => rc::BAD_CONFIG,
        Err(Failure::Busy) => rc::BUSY,
        Err(Failure::JvmRefused) => rc::JVM_REFUSED,
    }
}

/// Keeps this library loaded for good: HotSpot unloads an agent library
/// whose Agent_OnAttach returns an error, which would leave a session's
/// callbacks pointing into unmapped code.
fn pin_library() {
    // SAFETY: dladdr on an address of this library; dlopen with RTLD_NOLOAD
    // only takes another reference on the already loaded object.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(pin_library as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE);
        }
    }
}

/// Entry point when the JVM starts with `-agentpath:libjtrace_agent.so=<config>`.
/// Always returns 0: a problem leaves the JVM running untraced.
///
/// # Safety
/// Called by the JVM with a valid `JavaVM` and a NUL-terminated (or null) option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(vm: *mut JavaVM, options: *mut c_char, _reserved: *mut c_void) -> jint {
    guard("Agent_OnLoad", || {
        // SAFETY: the JVM passes a valid `vm` and a NUL-terminated or null `options` (# Safety).
        let _ = unsafe { load::load(vm, options, false) };
    });
    0
}

/// Entry point when loaded into a running JVM (dynamic attach, `jtrace
/// attach`): options `config=<file>` start a recording session, `stop` ends
/// it and leaves the JVM as it was. HotSpot calls this again each time the
/// library is loaded again, so one JVM can be attached to many times.
/// Returns 0 on success, else an `rc` code (the stream and jtrace say
/// why); the JVM runs on in every case.
///
/// # Safety
/// Called by the JVM with a valid `JavaVM` and a NUL-terminated (or null) option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnAttach(vm: *mut JavaVM, options: *mut c_char, _reserved: *mut c_void) -> jint {
    let mut code = rc::JVM_REFUSED;
    guard("Agent_OnAttach", || {
        pin_library();
        let opts = if options.is_null() {
            String::new()
        } else {
            // SAFETY: the JVM passes a valid `vm` and a NUL-terminated or null `options` (# Safety).
            (unsafe { CStr::from_ptr(options) }).to_string_lossy().into_owned()
        };
        code = if opts.trim() == "stop" {
            // SAFETY: this is Agent_OnAttach, on the JVM's attach listener thread.
            if unsafe { session::stop() } {
                rc::OK
            } else {
                rc::NOT_RECORDING
            }
        } else {
            // SAFETY: the JVM passes a valid `vm` and a NUL-terminated or null `options` (# Safety).
            load_code(unsafe { load::load(vm, options, true) })
        };
    });
    code
}

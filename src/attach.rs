//! `jtrace attach PID`: trace a HotSpot JVM that is already running.
//!
//! The agent is loaded through the HotSpot dynamic attach protocol
//! (src/hotspot.rs). The kernel recorder starts first, then the agent is
//! loaded with `config=<file>`; after the duration (or Ctrl-C/SIGTERM) the
//! same library is loaded again with `stop`, which makes the agent remove
//! its probes and finish its stream, so the JVM runs on as before.
//!
//! The trace directory is created by the invoking user, belongs to the
//! JVM's user while the agent writes into it, and is handed to the invoking
//! user at the end.

use crate::agent_lib::{agent_path, check_readable_by};
use crate::disk::DiskArgs;
use crate::hotspot::{self, load_agent, Jvm};
use crate::options::{parse_duration, KernelArgs, TraceArgs};
use crate::session::{self, jvm_stream_problems, kernel_events, kernel_stream_problem, Session, Traced};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{bail, Context};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `jtrace attach`.
#[derive(clap::Args)]
pub(crate) struct AttachArgs {
    /// Process id of the running HotSpot JVM.
    pid: u32,
    /// Stop after this long (`10s`, `500ms`, `2m`; a bare number is
    /// seconds); default: until Ctrl-C or until the JVM exits.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// What the agent records and where the trace goes.
    #[command(flatten)]
    trace: TraceArgs,
    /// Only end a recording session left running in the JVM by a `jtrace
    /// attach` that was killed (its trace stays incomplete).
    #[arg(long, conflicts_with_all = ["duration", "methods", "config", "output", "alloc_samples"])]
    stop: bool,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
    /// How much disk the recording may use.
    #[command(flatten)]
    disk: DiskArgs,
}

/// Checks, as the JVM's user, that it can write the trace directory.
fn check_writable_by_jvm(jvm: &Jvm, dir: &Path) -> anyhow::Result<()> {
    use rustix::fs::{Access, AtFlags};
    jvm.user.run_as(|| {
        rustix::fs::accessat(
            rustix::fs::CWD,
            dir,
            Access::WRITE_OK | Access::EXEC_OK,
            AtFlags::EACCESS,
        )
        .with_context(|| {
            format!(
                "the JVM runs as uid {} and cannot write the trace directory {}; choose one it can reach with -o",
                jvm.user.uid.as_raw(),
                dir.display()
            )
        })
    })
}

/// What the agent has written when it has started: whether JVM_START is
/// there, and its AGENT_ERROR messages.
struct StreamState {
    started: bool,
    errors: Vec<String>,
}

/// Reads the agent's stream file `name` as it starts (a few records),
/// written by the JVM's user into the trace directory (so opened without
/// following links).
fn read_stream(dir: &TraceDir, name: &str) -> StreamState {
    let mut st = StreamState {
        started: false,
        errors: Vec::new(),
    };
    let Ok(data) = dir.read_file(name) else { return st };
    let h = jtrace_format::FILE_HEADER_LEN;
    if data.len() < h {
        return st;
    }
    // A record being written may be cut at the end: stop at the first error.
    for r in jtrace_format::Decoder::new(&data[h..], h) {
        let Ok(r) = r else { break };
        match r.payload {
            jtrace_format::Payload::JvmStart(_) => st.started = true,
            jtrace_format::Payload::AgentError(m) => st.errors.push(m),
            _ => {}
        }
    }
    st
}

/// Runs `jtrace attach`.
pub(crate) fn attach(args: AttachArgs) -> ExitCode {
    let lib_calls = match session::prepare(&args.kernel, &args.disk, "attach") {
        Ok(l) => l,
        Err(code) => return code,
    };
    match attach_inner(args, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => session::failed(e),
    }
}

/// `jtrace attach PID --stop`: ends an orphaned session.
fn stop_orphan(pid: u32) -> anyhow::Result<()> {
    User::invoking()?.check_may_trace(pid)?;
    let jvm = hotspot::inspect(pid)?;
    let agent = agent_path()?;
    match load_agent(&jvm, &agent, "stop")? {
        0 => {
            eprintln!("jtrace: stopped the jtrace session in JVM {pid}; it runs on untraced");
            Ok(())
        }
        3 => bail!("no jtrace attach session is recording in JVM {pid}"),
        rc => bail!("the agent in JVM {pid} did not stop (code {rc})"),
    }
}

fn attach_inner(args: AttachArgs, lib_calls: Vec<jtrace_bpf::LibCallSpec>) -> anyhow::Result<()> {
    if args.stop {
        return stop_orphan(args.pid);
    }
    let owner = User::invoking()?;
    owner.check_may_trace(args.pid)?;
    let jvm = hotspot::inspect(args.pid)?;
    let agent = agent_path()?;
    check_readable_by(&agent, &jvm.user)?;
    jtrace_bpf::required_kernel_features()?;
    let setup = args.trace.agent_setup(&owner, args.kernel.stacks())?;
    let out = &setup.out;
    // While recording, the directory belongs to the JVM's user (the agent
    // writes its stream there); it is handed to the invoking user at the end.
    let dir = TraceDir::prepare(out, &owner)?;
    if let Err(e) = dir.lend_to(&jvm.user).and_then(|()| check_writable_by_jvm(&jvm, out)) {
        dir.discard();
        return Err(e);
    }
    let disk = args.disk.plan(&dir);
    let conf = setup.conf.clone() + &disk.agent_lines();
    dir.write_file(jtrace_format::AGENT_CONFIG_FILE, conf.as_bytes())?;
    let agent_options = dir.agent_options(jtrace_format::AGENT_CONFIG_FILE)?;
    let meta = session::new_meta(session::command_line(jvm.pid), jvm.pid, &args.trace.methods);
    // JVMTI reports no safepoints: probe the JVM's libjvm.so for them, as
    // `run` and `record` do.
    let libjvm = jtrace_bpf::safepoints::libjvm_of_pid(jvm.pid);
    let traced = Traced::Pid(jvm.pid);
    let mut session = Session::start(dir, meta, &args.kernel, &disk, lib_calls, libjvm, traced, &jvm.user)?;
    signals::stop_on_signals()?;

    let stream = crate::ring::first_stream_file(&format!("{}{}", jtrace_format::JVM_FILE_PREFIX, jvm.nspid), &disk);
    let started = load_agent(&jvm, &agent, &agent_options);
    let state = read_stream(&session.dir, &stream);
    if let Err(e) = check_started(&jvm, started.as_ref(), &state) {
        // No answer in time, or a session started whose stream is not
        // where it should be: the agent may be recording all the same, so
        // make sure it does not stay on. (Any other code says the agent
        // started nothing: a session it found running is not ours to stop.)
        let maybe_on = matches!(started, Err(_) | Ok(0));
        if maybe_on && hotspot::alive(jvm.pid) {
            let _ = load_agent(&jvm, &agent, "stop");
        }
        session.abandon();
        return Err(e);
    }
    for m in &state.errors {
        eprintln!("jtrace: note from the agent: {m}");
    }
    eprintln!(
        "jtrace: attached to JVM {}; recording{}",
        jvm.pid,
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until Ctrl-C or until it exits".into(),
        }
    );
    let why = signals::wait_for_stop(jvm.pid, args.duration);
    let mut problem = None;
    if hotspot::alive(jvm.pid) {
        match load_agent(&jvm, &agent, "stop") {
            Ok(0) => {}
            Ok(rc) => problem = Some(format!("the agent did not stop cleanly (code {rc})")),
            Err(e) => problem = Some(format!("cannot stop the agent: {e:#}")),
        }
    }
    let stats = session.stop_kernel();
    // The agent's end record, and what it lost (its stream's last bytes).
    let mut warnings = jvm_stream_problems(&session.dir);
    let unended = |w: &String| {
        let ours =
            jtrace_format::parse_stream_file(w.split_whitespace().next().unwrap_or_default().trim_end_matches(':'))
                .is_some_and(|(s, _)| stream.starts_with(&format!("{s}.")));
        ours && w.contains("no end record")
    };
    if warnings.iter().any(unended) {
        problem.get_or_insert_with(|| "the agent's stream has no end record".into());
        warnings.retain(|w| !unended(w));
    }
    let kernel_problem = kernel_stream_problem(&stats, &session.meta);
    session.meta.complete = problem.is_none();
    session.finish(&owner)?;
    if let Some(p) = &problem {
        eprintln!("jtrace: {p}; the JVM side of the trace is a readable prefix");
    }
    eprintln!(
        "jtrace: {why}; detached; trace written to {} ({}); read it with `jtrace report {}`",
        out.display(),
        kernel_events(&stats),
        out.display()
    );
    for w in kernel_problem.iter().chain(&warnings) {
        eprintln!("jtrace: WARNING: {w}");
    }
    if problem.is_some() || kernel_problem.is_some() {
        bail!("the trace is incomplete");
    }
    Ok(())
}

/// Whether the agent started: the `load` command's result and what the
/// agent wrote (JVM_START, or AGENT_ERROR messages saying why not).
fn check_started(jvm: &Jvm, started: Result<&i32, &anyhow::Error>, state: &StreamState) -> anyhow::Result<()> {
    let rc = match started {
        Err(e) => bail!("cannot load the agent into the JVM {}: {e:#}", jvm.pid),
        Ok(0) if state.started => return Ok(()),
        Ok(rc) => *rc,
    };
    // The agent's return codes (agent/src/lib.rs, mod rc).
    let why = match rc {
        1 => "it could not use its configuration",
        2 => {
            "the JVM is traced by jtrace already (started under `jtrace run`, or another `jtrace attach` \
             is recording; if that one was killed, end its session with `jtrace attach PID --stop`)"
        }
        4 => "the JVM refused what the agent needs",
        0 => "it wrote no JVM_START",
        _ => "it failed",
    };
    bail!(
        "the agent did not start in the JVM {}: {why} (code {rc}){}",
        jvm.pid,
        if state.errors.is_empty() {
            String::new()
        } else {
            format!(": {}", state.errors.join("; "))
        }
    )
}

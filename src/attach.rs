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
//! user at the end. A JVM in a container sees neither the agent nor the
//! trace directory: the agent is copied into a private directory of the
//! session in the JVM's /tmp, writes its stream there, and the stream is
//! copied into the trace directory at the end (src/container.rs).

use crate::agent_lib::{agent_path, check_readable_by};
use crate::container::{self, ContainerDir};
use crate::disk::DiskArgs;
use crate::hotspot::{self, load_agent, Jvm};
use crate::options::{parse_duration, KernelArgs, TraceArgs};
use crate::session::{self, jvm_stream_problems, kernel_events, kernel_stream_problem, JvmLibraries, Session, Traced};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
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
#[derive(Default)]
struct StreamState {
    started: bool,
    errors: Vec<String>,
}

/// What the first bytes of the agent's stream say (a record being written
/// may be cut at the end: the reading stops at the first error).
fn stream_state(data: &[u8]) -> StreamState {
    let mut st = StreamState::default();
    let h = jtrace_format::FILE_HEADER_LEN;
    if data.len() < h {
        return st;
    }
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

/// Where the agent is loaded from and writes its stream.
enum Place {
    /// The JVM sees jtrace's files: the agent as installed, its stream
    /// in the trace directory.
    Host(PathBuf),
    /// A JVM in a container: the session's directory there, and the
    /// library the JVM loads (the copy there, or the agent an earlier
    /// session left loaded) with the file jtrace probes for it.
    Container {
        dir: ContainerDir,
        library: String,
        probed: Option<PathBuf>,
    },
}

impl Place {
    /// The library's path as the JVM loads it.
    fn library(&self) -> &Path {
        match self {
            Place::Host(p) => p,
            Place::Container { library, .. } => Path::new(library),
        }
    }

    /// The agent's stream `name` as it starts (a few records): written by
    /// the JVM's user, so opened without following links.
    fn stream_state(&mut self, trace: &TraceDir, name: &str) -> StreamState {
        let data = match self {
            Place::Host(_) => trace.read_file(name).ok(),
            Place::Container { dir, .. } => dir.stream_head(name),
        };
        data.map(|d| stream_state(&d)).unwrap_or_default()
    }
}

/// Prepares the agent's side of the session: on the host, agent.conf in
/// the trace directory (lent to the JVM's user); in a container, the
/// session's directory there. Returns the place and the agent's options.
fn place_agent(
    jvm: &Jvm,
    owner: &User,
    agent: PathBuf,
    conf: impl FnOnce(Option<&str>) -> String,
    dir: &TraceDir,
) -> anyhow::Result<(Place, String)> {
    if !jvm.in_container {
        dir.lend_to(&jvm.user)?;
        check_writable_by_jvm(jvm, dir.path())?;
        dir.write_file(jtrace_format::AGENT_CONFIG_FILE, conf(None).as_bytes())?;
        let options = dir.agent_options(jtrace_format::AGENT_CONFIG_FILE)?;
        return Ok((Place::Host(agent), options));
    }
    // The installed agent, read with the invoking user's rights (it is
    // copied where the JVM's user reads it).
    let installed = owner
        .run_as(|| std::fs::File::open(&agent).with_context(|| format!("cannot read the agent {}", agent.display())))?;
    // A JVM keeps the first agent it loaded: an earlier session's, by its
    // name there, if it is this jtrace's.
    let loaded = container::mapped_agent(jvm.pid);
    if let Some((path, file)) = &loaded {
        let same = std::fs::File::open(file).and_then(|f| container::same_bytes(&installed, &f));
        if !same.unwrap_or(false) {
            bail!(
                "the JVM {} has another jtrace agent loaded ({path}; a JVM keeps the first one it loaded): \
                 attach with the jtrace that loaded it, or restart the JVM",
                jvm.pid
            );
        }
    }
    let copy = loaded.is_none().then_some(&installed);
    let placed = ContainerDir::create(jvm, copy, |d| conf(Some(d)))?;
    let options = placed.agent_options()?;
    let (library, probed) = match loaded {
        Some((path, file)) => (path, Some(file)),
        None => (placed.library(), placed.library_for_probes()),
    };
    Ok((
        Place::Container {
            dir: placed,
            library,
            probed,
        },
        options,
    ))
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

/// `jtrace attach PID --stop`: ends an orphaned session (and in a
/// container removes the directories it left there).
fn stop_orphan(pid: u32) -> anyhow::Result<()> {
    User::invoking()?.check_may_trace(pid)?;
    let jvm = hotspot::inspect(pid)?;
    let (agent, left) = if jvm.in_container {
        let Some((path, _)) = container::mapped_agent(pid) else {
            bail!("no jtrace attach session is recording in JVM {pid} (it has no jtrace agent loaded)");
        };
        // Known by the files the agent has open there: looked at before it closes them.
        (PathBuf::from(path), container::open_session_dirs(pid))
    } else {
        (agent_path()?, Vec::new())
    };
    let rc = load_agent(&jvm, &agent, "stop");
    for d in &left {
        if let Err(e) = container::remove_left_dir(&jvm, d) {
            eprintln!("jtrace: {e:#}");
        }
    }
    match rc? {
        0 => {
            eprintln!("jtrace: stopped the jtrace session in JVM {pid}; it runs on untraced");
            Ok(())
        }
        3 => bail!("no jtrace attach session is recording in JVM {pid}"),
        rc => bail!("the agent in JVM {pid} did not stop (code {rc})"),
    }
}

fn attach_inner(args: AttachArgs, lib_calls: Vec<jtrace_bpf::ResolvedLibCall>) -> anyhow::Result<()> {
    if args.stop {
        return stop_orphan(args.pid);
    }
    let owner = User::invoking()?;
    owner.check_may_trace(args.pid)?;
    let jvm = hotspot::inspect(args.pid)?;
    let agent = agent_path()?;
    if !jvm.in_container {
        check_readable_by(&agent, &jvm.user)?;
    } else if args.disk.max_size.is_some() || args.disk.max_age.is_some() {
        bail!(
            "the JVM {} runs in a container: a ring recording (--max-size, --max-age) cannot attach to it \
             (the agent's chunks would age inside the container); record without them (--min-free applies)",
            jvm.pid
        );
    }
    jtrace_bpf::required_kernel_features()?;
    let setup = args.trace.agent_setup(&owner, args.kernel.stacks())?;
    let out = &setup.out;
    // While recording, the directory belongs to the JVM's user (the agent
    // writes its stream there) unless the JVM is in a container; it is
    // handed to the invoking user at the end.
    let dir = TraceDir::prepare(out, &owner)?;
    let disk = args.disk.plan(&dir);
    let conf = |inside: Option<&str>| {
        inside.map_or_else(|| setup.conf.clone(), |d| setup.conf_with_output(d)) + &disk.agent_lines()
    };
    let (mut place, agent_options) = match place_agent(&jvm, &owner, agent, conf, &dir) {
        Ok(p) => p,
        Err(e) => {
            dir.discard();
            return Err(e);
        }
    };
    let meta = session::new_meta(session::command_line(jvm.pid), jvm.pid, &args.trace.methods);
    // JVMTI reports no safepoints: probe the JVM's libjvm.so for them, as
    // `run` and `record` do.
    let libs = JvmLibraries {
        libjvm: jtrace_bpf::safepoints::libjvm_of_pid(jvm.pid),
        agent: match &place {
            Place::Container { probed, .. } => probed.clone(),
            Place::Host(_) => None,
        },
    };
    let traced = Traced::Pid(jvm.pid);
    let writer = if jvm.in_container { &owner } else { &jvm.user };
    let mut session = Session::start(dir, meta, &args.kernel, &disk, lib_calls, libs, traced, writer)?;
    signals::stop_on_signals()?;

    let stream = crate::ring::first_stream_file(&format!("{}{}", jtrace_format::JVM_FILE_PREFIX, jvm.nspid), &disk);
    let started = load_agent(&jvm, place.library(), &agent_options);
    if let Place::Container { dir, .. } = &mut place {
        // What the JVM mapped must be the copy jtrace wrote; then the copy
        // may go (the JVM finds it by name from now on).
        if let Err(e) = dir.check_loaded(matches!(started, Ok(0))) {
            session.abandon();
            return Err(e);
        }
        dir.release_library();
    }
    let state = place.stream_state(&session.dir, &stream);
    if let Err(e) = check_started(&jvm, started.as_ref(), &state) {
        // No answer in time, or a session started whose stream is not
        // where it should be: the agent may be recording all the same, so
        // make sure it does not stay on. (Any other code says the agent
        // started nothing: a session it found running is not ours to stop.)
        let maybe_on = matches!(started, Err(_) | Ok(0));
        if maybe_on && hotspot::alive(jvm.pid) {
            let _ = load_agent(&jvm, place.library(), "stop");
        }
        session.abandon();
        return Err(e);
    }
    for m in &state.errors {
        eprintln!("jtrace: note from the agent: {m}");
    }
    eprintln!(
        "jtrace: attached to JVM {}{}; recording{}",
        jvm.pid,
        if jvm.in_container { " (in a container)" } else { "" },
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until Ctrl-C or until it exits".into(),
        }
    );
    let why = signals::wait_for_stop(&[jvm.pid], args.duration);
    let mut problem = None;
    if hotspot::alive(jvm.pid) {
        match load_agent(&jvm, place.library(), "stop") {
            Ok(0) => {}
            Ok(rc) => problem = Some(format!("the agent did not stop cleanly (code {rc})")),
            Err(e) => problem = Some(format!("cannot stop the agent: {e:#}")),
        }
    }
    let stats = session.stop_kernel();
    let mut copy_problem = None;
    if let Place::Container { mut dir, .. } = place {
        copy_problem = dir.collect_into(&session.dir, &stream, disk.min_free);
        dir.remove();
    }
    // The agent's end record, and what it lost (its stream's last bytes).
    let mut warnings = jvm_stream_problems(&session.dir);
    warnings.extend(copy_problem);
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

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
use crate::container::ContainerDir;
use crate::disk::DiskArgs;
use crate::hotspot::{self, load_agent, Jvm};
use crate::jvm_agent::{check_started, stream_state, StreamState};
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
    #[arg(required_unless_present = "cgroup", conflicts_with = "cgroup")]
    pid: Option<u32>,
    /// Every process in this cgroup and the cgroups beneath it (a
    /// container's or a pod's, as /proc/PID/cgroup names it: the `cpu` line
    /// on cgroup v1): each JVM among them attached, all recorded on the
    /// kernel side into one trace, those that start in it or enter it
    /// while recording too (docs/CONTAINERS.md, "A whole pod").
    #[arg(long, value_name = "PATH")]
    pub(crate) cgroup: Option<String>,
    /// Stop after this long (`10s`, `500ms`, `2m`; a bare number is
    /// seconds); default: until Ctrl-C or until the JVM exits (with
    /// --cgroup: until no process is left in the cgroup).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// What the agent records and where the trace goes.
    #[command(flatten)]
    pub(crate) trace: TraceArgs,
    /// Only end a recording session left running in the JVM by a `jtrace
    /// attach` that was killed (its trace stays incomplete); with
    /// --cgroup, in every JVM of the cgroup that has the agent loaded.
    #[arg(long, conflicts_with_all = ["duration", "methods", "config", "output", "alloc_samples"])]
    pub(crate) stop: bool,
    /// Kernel recording options.
    #[command(flatten)]
    pub(crate) kernel: KernelArgs,
    /// How much disk the recording may use.
    #[command(flatten)]
    pub(crate) disk: DiskArgs,
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
        // The JVM's user reads it; what jtrace writes is the invoking user's.
        dir.write_file_for(jtrace_format::AGENT_CONFIG_FILE, conf(None).as_bytes(), &jvm.user)?;
        let options = dir.agent_options(jtrace_format::AGENT_CONFIG_FILE)?;
        return Ok((Place::Host(agent), options));
    }
    let (placed, library, probed) = crate::jvm_agent::place_copy(jvm, owner, &agent, |d| conf(Some(d)))?;
    let options = placed.agent_options()?;
    Ok((
        Place::Container {
            dir: placed,
            library,
            probed,
        },
        options,
    ))
}

impl AttachArgs {
    /// `attach --cgroup PATH` (src/attach_cgroup.rs), not one JVM by pid.
    pub(crate) fn for_cgroup(&self) -> bool {
        self.pid.is_none()
    }
}

/// Runs `jtrace attach`.
pub(crate) fn attach(args: AttachArgs) -> ExitCode {
    let lib_calls = match session::prepare(&args.kernel, &args.disk, "attach") {
        Ok(l) => l,
        Err(code) => return code,
    };
    let Some(pid) = args.pid else {
        unreachable!("src/lib.rs sends `attach --cgroup` to attach_cgroup");
    };
    match attach_inner(args, pid, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => session::failed(e),
    }
}

fn attach_inner(args: AttachArgs, pid: u32, lib_calls: Vec<jtrace_bpf::ResolvedLibCall>) -> anyhow::Result<()> {
    if args.stop {
        return crate::jvm_agent::stop_orphan(pid);
    }
    let owner = User::invoking()?;
    owner.check_may_trace(pid)?;
    let jvm = hotspot::inspect(pid)?;
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

//! One JVM's agent among several (`attach --cgroup`, one trace): the
//! session's private directory in the JVM's own /tmp (src/container.rs),
//! where the agent reads its configuration and writes its stream, for a
//! JVM on the host as for one in a container, so that the trace directory
//! stays the invoking user's whichever users the JVMs run as; the agent
//! loaded (in a container a copy placed there, as `attach PID` places it;
//! on the host the installed one, which the JVM's user must be able to
//! read); at the end stopped, and its stream copied into the trace as
//! `jvm-<host pid>.bin` (the pid namespaces of a pod number their JVMs
//! alike; the reader pairs a stream with its process by its namespace).
//! Also whether an agent started, from its stream's first records, which
//! `attach PID` asks too.

use crate::agent_lib::{agent_path, check_readable_by};
use crate::container::{self, ContainerDir};
use crate::hotspot::{self, load_agent, Jvm};
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{bail, Context};
use jtrace_bpf::KernelRecorder;
use std::path::{Path, PathBuf};

/// The agent placed for a JVM in a container (`owner` reads the installed
/// `agent`, which is copied in): the session's directory there, the
/// library's path as the JVM loads it (the copy, or the agent an earlier
/// session left loaded, if it is this jtrace's), and the file jtrace
/// probes for it.
pub(crate) fn place_copy(
    jvm: &Jvm,
    owner: &User,
    agent: &Path,
    conf: impl FnOnce(&str) -> String,
) -> anyhow::Result<(ContainerDir, String, Option<PathBuf>)> {
    // The installed agent, read with the invoking user's rights (it is
    // copied where the JVM's user reads it).
    let installed = owner
        .run_as(|| std::fs::File::open(agent).with_context(|| format!("cannot read the agent {}", agent.display())))?;
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
    let placed = ContainerDir::create(jvm, copy, conf)?;
    let (library, probed) = match loaded {
        Some((path, file)) => (path, Some(file)),
        None => (placed.library(), placed.library_for_probes()),
    };
    Ok((placed, library, probed))
}

/// The agent recording in one JVM (see the module documentation).
pub(crate) struct JvmAgent {
    /// The JVM.
    pub(crate) jvm: Jvm,
    dir: ContainerDir,
    /// The library's path as the JVM loads it (`stop` names it again).
    library: String,
    /// The agent's stream in `dir`: `jvm-<pid in its namespace>.bin`.
    stream: String,
}

impl JvmAgent {
    /// Loads the agent into `jvm` (`conf`: its configuration, given the
    /// directory's path as the JVM sees it) and checks that it started; a
    /// copy in a container is probed by `kernel` first, so that its
    /// announcements name the stacks' Java frames. Returns notes (the
    /// agent's AGENT_ERROR messages) with it, or why it is not recording;
    /// nothing is left in the JVM's file system then.
    pub(crate) fn start(
        jvm: Jvm,
        owner: &User,
        agent: &Path,
        conf: impl FnOnce(&str) -> String,
        kernel: Option<&KernelRecorder>,
    ) -> anyhow::Result<(JvmAgent, Vec<String>)> {
        let mut notes = Vec::new();
        let (mut dir, library) = if jvm.in_container {
            let (dir, library, probed) = place_copy(&jvm, owner, agent, conf)?;
            if let (Some(k), Some(p)) = (kernel, probed) {
                if let Err(e) = k.probe_agent(&p) {
                    notes.push(format!("{e:#}: the Java frames of its stacks stay unnamed"));
                }
            }
            (dir, library)
        } else {
            check_readable_by(agent, &jvm.user)?;
            (
                ContainerDir::create(&jvm, None, conf)?,
                agent.to_string_lossy().into_owned(),
            )
        };
        let options = dir.agent_options()?;
        let stream = format!("{}{}.bin", jtrace_format::JVM_FILE_PREFIX, jvm.nspid);
        let started = load_agent(&jvm, Path::new(&library), &options);
        // What the JVM mapped must be the copy jtrace wrote (else code not
        // jtrace's runs there, and it is not talked to again).
        dir.check_loaded(matches!(started, Ok(0)))?;
        dir.release_library();
        let state = dir.stream_head(&stream).map(|d| stream_state(&d)).unwrap_or_default();
        if let Err(e) = check_started(&jvm, started.as_ref(), &state) {
            // As `attach PID`: an agent that may be recording all the same is stopped.
            if matches!(started, Err(_) | Ok(0)) && hotspot::alive(jvm.pid) {
                let _ = load_agent(&jvm, Path::new(&library), "stop");
            }
            return Err(e);
        }
        notes.extend(state.errors);
        Ok((
            JvmAgent {
                jvm,
                dir,
                library,
                stream,
            },
            notes,
        ))
    }

    /// Stops the agent if the JVM still runs; what went wrong, if anything.
    pub(crate) fn stop(&self) -> Option<String> {
        if !hotspot::alive(self.jvm.pid) {
            return None;
        }
        match load_agent(&self.jvm, Path::new(&self.library), "stop") {
            Ok(0) => None,
            Ok(rc) => Some(format!(
                "the agent in JVM {} did not stop cleanly (code {rc})",
                self.jvm.pid
            )),
            Err(e) => Some(format!("cannot stop the agent in JVM {}: {e:#}", self.jvm.pid)),
        }
    }

    /// The stream's name in the trace.
    pub(crate) fn trace_name(&self) -> String {
        format!("{}{}.bin", jtrace_format::JVM_FILE_PREFIX, self.jvm.pid)
    }

    /// Copies the agent's stream into `trace` (within the free-space floor
    /// `min_free`) and removes the session's directory; what to warn of.
    pub(crate) fn collect(mut self, trace: &TraceDir, min_free: u64) -> Option<String> {
        let dest = self.trace_name();
        let problem = self.dir.collect_as(trace, &self.stream, &dest, min_free);
        self.dir.remove();
        problem
    }
}

/// What the agent has written when it has started: whether JVM_START is
/// there, and its AGENT_ERROR messages.
#[derive(Default)]
pub(crate) struct StreamState {
    started: bool,
    pub(crate) errors: Vec<String>,
}

/// What the first bytes of the agent's stream say (a record being written
/// may be cut at the end: the reading stops at the first error).
pub(crate) fn stream_state(data: &[u8]) -> StreamState {
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

/// Whether the agent started: the `load` command's result and what the
/// agent wrote (JVM_START, or AGENT_ERROR messages saying why not).
pub(crate) fn check_started(
    jvm: &Jvm,
    started: Result<&i32, &anyhow::Error>,
    state: &StreamState,
) -> anyhow::Result<()> {
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

/// `jtrace attach PID --stop`: ends an orphaned session (and in a
/// container removes the directories it left there).
pub(crate) fn stop_orphan(pid: u32) -> anyhow::Result<()> {
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

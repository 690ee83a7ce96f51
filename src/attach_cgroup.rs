//! `jtrace attach --cgroup PATH`: a whole container or pod. Every process
//! of the cgroup subtree is recorded on the kernel side (one kernel.bin),
//! those that enter it while recording too (src/cgroup_watch.rs), and the
//! agent is attached to every JVM among them (one `jvm-<pid>.bin` each,
//! src/jvm_agent.rs), in parallel; at the end every agent is stopped and
//! its stream copied into the trace.
//!
//! The subtree is read again every [`cgroup_watch::TICK`]: a JVM that
//! starts in it (forked there, or moved in) is attached once it has
//! finished starting (src/jvm_ready.rs), waited for at most
//! [`WAIT_LIMIT`]. A JVM that cannot be attached (attach disabled, a user
//! the invoking one may not trace, not started in time, the agent
//! refused) is said at once and named in the trace's metadata
//! (`jvms_not_attached`, which the views show) with why; the others go on.

use crate::agent_lib::agent_path;
use crate::attach::AttachArgs;
use crate::cgroup_watch::{self, comm};
use crate::hotspot::{self, Jvm};
use crate::jvm_agent::stop_orphan;
use crate::jvm_agent::JvmAgent;
use crate::session::{self, jvm_stream_problems, kernel_events, kernel_stream_problem, JvmLibraries, Session, Traced};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{anyhow, bail};
use jtrace_bpf::{KernelRecorder, ResolvedLibCall};
use jtrace_merge::JvmNotAttached;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long a JVM found in the cgroup is waited for (to load libjvm.so
/// and finish starting) before it is given up.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(20);
/// A process younger than this is looked at again at every tick (a
/// program may load libjvm.so late, as one that embeds a JVM does); an
/// older one when its executable changes (an exec).
const YOUNG: Duration = Duration::from_secs(5);

/// What a process of the cgroup is to `attach --cgroup`.
enum Member {
    /// Not a JVM, as of its executable then.
    Other { exe: Option<PathBuf> },
    /// A JVM (or a `java` launcher) not yet ready: since when, and why.
    Waiting { since: Instant, why: String },
    /// Its agent records.
    Attached(Box<JvmAgent>),
    /// A JVM not attached (said, and noted in the trace).
    NotAttached,
}

/// What a look at one process found.
enum Exam {
    Gone,
    Other(Option<PathBuf>),
    Wait(String),
    Ready(Jvm),
    Fail(String),
}

/// An agent started, with notes, or why not ([`JvmAgent::start`]).
type Started = anyhow::Result<(JvmAgent, Vec<String>)>;

/// The JVMs of the cgroup and their agents.
struct Fleet<'a> {
    owner: &'a User,
    agent: &'a Path,
    /// The agent's configuration, given its directory as the JVM sees it.
    conf: &'a (dyn Fn(&str) -> String + Sync),
    members: BTreeMap<u32, Member>,
    not_attached: Vec<JvmNotAttached>,
}

impl Fleet<'_> {
    /// Looks at the cgroup's processes `pids` (sorted): new ones and those
    /// that may have become JVMs examined, the JVMs ready attached (in
    /// parallel), those waited for too long given up. Returns how many
    /// were attached (`kernel` probes their agents' copies).
    fn look(&mut self, pids: &[u32], kernel: Option<&KernelRecorder>) -> usize {
        // Processes that left: forgotten, unless their agent records.
        self.members
            .retain(|pid, m| matches!(m, Member::Attached(_) | Member::NotAttached) || pids.binary_search(pid).is_ok());
        let mut ready = Vec::new();
        for &pid in pids {
            let again = match self.members.get(&pid) {
                None | Some(Member::Waiting { .. }) => true,
                Some(Member::Other { exe }) => exe_of(pid) != *exe || jvm_ready_age(pid) < YOUNG,
                Some(Member::Attached(_) | Member::NotAttached) => false,
            };
            if !again {
                continue;
            }
            match self.examine(pid) {
                Exam::Gone => {
                    self.members.remove(&pid);
                }
                Exam::Other(exe) => {
                    self.members.insert(pid, Member::Other { exe });
                }
                Exam::Fail(why) => self.give_up(pid, why),
                Exam::Wait(why) => {
                    let since = match self.members.get(&pid) {
                        Some(Member::Waiting { since, .. }) => *since,
                        _ => Instant::now(),
                    };
                    if since.elapsed() > WAIT_LIMIT {
                        self.give_up(pid, format!("{why} after {} s", WAIT_LIMIT.as_secs()));
                    } else {
                        self.members.insert(pid, Member::Waiting { since, why });
                    }
                }
                Exam::Ready(jvm) => ready.push(jvm),
            }
        }
        self.attach(ready, kernel)
    }

    /// What process `pid` is now (see [`Exam`]).
    fn examine(&self, pid: u32) -> Exam {
        let exe = exe_of(pid);
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return Exam::Gone;
        };
        if !maps.lines().any(|l| l.ends_with("/libjvm.so")) {
            return match exe.as_ref().and_then(|e| e.file_name()) {
                Some(n) if n == "java" => Exam::Wait("it has not loaded libjvm.so".into()),
                _ => Exam::Other(exe),
            };
        }
        if let Err(e) = self.owner.check_may_trace(pid) {
            return Exam::Fail(format!("{e:#}"));
        }
        match hotspot::inspect(pid) {
            Ok(jvm) if crate::jvm_ready::started(&jvm) => Exam::Ready(jvm),
            Ok(_) => Exam::Wait("it has not finished starting".into()),
            Err(_) if !hotspot::alive(pid) => Exam::Gone,
            Err(e) => Exam::Fail(format!("{e:#}")),
        }
    }

    /// Notes that JVM `pid` is not attached, and says why.
    fn give_up(&mut self, pid: u32, why: String) {
        eprintln!(
            "jtrace: JVM {pid} ({}) is NOT attached: {why}; its kernel side is recorded",
            comm(pid)
        );
        self.not_attached.push(JvmNotAttached { pid, why });
        self.members.insert(pid, Member::NotAttached);
    }

    /// Attaches the agent to `jvms`, in parallel; how many it records in.
    fn attach(&mut self, jvms: Vec<Jvm>, kernel: Option<&KernelRecorder>) -> usize {
        let (owner, agent, conf) = (self.owner, self.agent, self.conf);
        let results: Vec<(u32, Started)> = std::thread::scope(|s| {
            let started: Vec<_> = (jvms.into_iter())
                .map(|jvm| {
                    (
                        jvm.pid,
                        s.spawn(move || JvmAgent::start(jvm, owner, agent, conf, kernel)),
                    )
                })
                .collect();
            (started.into_iter())
                .map(|(pid, h)| (pid, h.join().unwrap_or_else(|_| Err(anyhow!("attaching panicked")))))
                .collect()
        });
        let mut attached = 0;
        for (pid, r) in results {
            match r {
                Ok((a, notes)) => {
                    attached += 1;
                    let place = if a.jvm.in_container { " (in a container)" } else { "" };
                    eprintln!("jtrace: attached to JVM {pid} ({}){place}", comm(pid));
                    for m in notes {
                        eprintln!("jtrace: note from the agent in JVM {pid}: {m}");
                    }
                    self.members.insert(pid, Member::Attached(Box::new(a)));
                }
                Err(e) => self.give_up(pid, format!("{e:#}")),
            }
        }
        attached
    }

    /// Stops every agent (in parallel), and gives up the JVMs still
    /// waited for; what went wrong.
    fn stop(&mut self) -> Vec<String> {
        let waiting: Vec<(u32, String)> = (self.members.iter())
            .filter_map(|(pid, m)| match m {
                Member::Waiting { why, .. } => Some((*pid, why.clone())),
                _ => None,
            })
            .collect();
        for (pid, why) in waiting {
            self.give_up(pid, format!("{why} when the recording ended"));
        }
        std::thread::scope(|s| {
            let stops: Vec<_> = (self.members.values())
                .filter_map(|m| match m {
                    Member::Attached(a) => Some(s.spawn(|| a.stop())),
                    _ => None,
                })
                .collect();
            stops.into_iter().filter_map(|h| h.join().ok().flatten()).collect()
        })
    }

    /// Copies every agent's stream into `trace`; what to warn of.
    fn collect(&mut self, trace: &TraceDir, min_free: u64) -> Vec<String> {
        let members = std::mem::take(&mut self.members);
        (members.into_values())
            .filter_map(|m| match m {
                Member::Attached(a) => a.collect(trace, min_free),
                _ => None,
            })
            .collect()
    }
}

/// The executable of process `pid`, if it can be read.
fn exe_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// How long process `pid` has run (long, if that cannot be read).
fn jvm_ready_age(pid: u32) -> Duration {
    crate::jvm_ready::age(pid).unwrap_or(Duration::MAX)
}

/// Runs `jtrace attach --cgroup`.
pub(crate) fn attach_cgroup(args: AttachArgs) -> ExitCode {
    let lib_calls = match session::prepare(&args.kernel, &args.disk, "attach") {
        Ok(l) => l,
        Err(code) => return code,
    };
    let path = args.cgroup.clone().expect("clap requires a pid or --cgroup");
    let (subtree, pids) = match cgroup_watch::open(&path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let result = if args.stop {
        stop_all(&path, &pids)
    } else {
        record(args, subtree, pids, lib_calls)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => session::failed(e),
    }
}

/// `attach --cgroup PATH --stop`: ends the sessions left running in the
/// cgroup's JVMs (those that map a jtrace agent).
fn stop_all(path: &str, pids: &[u32]) -> anyhow::Result<()> {
    let with_agent: Vec<u32> = (pids.iter().copied())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.lines().any(|l| l.ends_with(crate::container::LIB_NAME)))
        })
        .collect();
    if with_agent.is_empty() {
        bail!("no JVM in cgroup {path} has a jtrace agent loaded");
    }
    let failed: Vec<String> = (with_agent.iter())
        .filter_map(|&pid| stop_orphan(pid).err().map(|e| format!("JVM {pid}: {e:#}")))
        .collect();
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

fn record(
    args: AttachArgs,
    subtree: jtrace_bpf::CgroupSubtree,
    pids: Vec<u32>,
    lib_calls: Vec<ResolvedLibCall>,
) -> anyhow::Result<()> {
    let path = subtree.path.clone();
    let owner = User::invoking()?;
    for &pid in &pids {
        owner.check_may_trace(pid)?;
    }
    if args.disk.max_size.is_some() || args.disk.max_age.is_some() {
        bail!(
            "attach --cgroup writes each JVM's stream in its own /tmp until the end, where a ring recording \
             (--max-size, --max-age) cannot age it; record without them (--min-free applies)"
        );
    }
    jtrace_bpf::required_kernel_features()?;
    let agent = agent_path()?;
    let setup = args.trace.agent_setup(&owner, args.kernel.stacks())?;
    let out = &setup.out;
    // The directory stays the invoking user's: every agent writes in its
    // JVM's /tmp, and its stream is copied in at the end.
    let dir = TraceDir::prepare(out, &owner)?;
    let disk = args.disk.plan(&dir);
    let agent_lines = disk.agent_lines();
    let conf = |d: &str| setup.conf_with_output(d) + &agent_lines;
    let meta = session::new_meta(vec!["--cgroup".into(), path.clone()], 0, &args.trace.methods);
    let libs = JvmLibraries {
        libjvm: pids.iter().find_map(|&p| jtrace_bpf::safepoints::libjvm_of_pid(p)),
        agent: None,
    };
    let watched = subtree.try_clone()?;
    let traced = Traced::Cgroup(pids.clone(), cgroup_watch::follow(subtree, &owner));
    let mut session = Session::start(dir, meta, &args.kernel, &disk, lib_calls, libs, traced, &owner)?;
    signals::stop_on_signals()?;
    eprintln!(
        "jtrace: recording the {} processes of cgroup {path}{}",
        pids.len(),
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until none is left in it or Ctrl-C".into(),
        }
    );
    if let Some(how) = session.kernel().and_then(|k| k.cgroup_joins_seen()) {
        eprintln!("jtrace: processes that enter the cgroup are recorded {how}");
    }
    let mut fleet = Fleet {
        owner: &owner,
        agent: &agent,
        conf: &conf,
        members: BTreeMap::new(),
        not_attached: Vec::new(),
    };
    let t0 = Instant::now();
    let first = fleet.look(&pids, session.kernel());
    eprintln!(
        "jtrace: attached to {first} JVM(s) of the cgroup in {} ms; JVMs that start in it or enter it are \
         attached once started (waited for at most {} s)",
        t0.elapsed().as_millis(),
        WAIT_LIMIT.as_secs()
    );
    let stopped = cgroup_watch::wait(&session, &watched, args.duration, |kernel| {
        fleet.look(&watched.members().unwrap_or_default(), kernel);
    });
    let problems = fleet.stop();
    let stats = session.stop_kernel();
    let mut warnings = fleet.collect(&session.dir, disk.min_free);
    warnings.extend(jvm_stream_problems(&session.dir));
    session.meta.jvms_not_attached = std::mem::take(&mut fleet.not_attached);
    let kernel_problem = kernel_stream_problem(&stats, &session.meta);
    session.meta.complete = problems.is_empty();
    let not_attached = session.meta.jvms_not_attached.len();
    session.finish(&owner)?;
    for p in &problems {
        eprintln!("jtrace: {p}; that JVM's side of the trace is a readable prefix");
    }
    let joined = match stopped.joined {
        0 => String::new(),
        n => format!("{n} processes entered the cgroup meanwhile; "),
    };
    let unattached = match not_attached {
        0 => String::new(),
        n => format!(", {n} JVM(s) not attached (kernel side only)"),
    };
    eprintln!(
        "jtrace: {}; {joined}detached; trace written to {} ({}{unattached}); read it with `jtrace report {}`",
        stopped.why,
        out.display(),
        kernel_events(&stats),
        out.display()
    );
    for w in kernel_problem.iter().chain(&warnings) {
        eprintln!("jtrace: WARNING: {w}");
    }
    if !problems.is_empty() || kernel_problem.is_some() {
        bail!("the trace is incomplete");
    }
    Ok(())
}

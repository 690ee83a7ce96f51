//! `jtrace record`: the kernel side only, on a process that is already
//! running, or every process of a cgroup subtree (a container, a pod) and
//! those that enter it while recording (src/cgroup_watch.rs), and those
//! they fork from now on.

use crate::cgroup_watch;
use crate::disk::DiskArgs;
use crate::options::{parse_duration, KernelArgs};
use crate::session::{self, kernel_events, kernel_stream_problem, JvmLibraries, Session, Traced, EXIT_USAGE};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use jtrace_bpf::ResolvedLibCall;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `jtrace record`.
#[derive(clap::Args)]
pub(crate) struct RecordArgs {
    /// Process to record (with the processes it forks from now on).
    #[arg(short, long, required_unless_present = "cgroup", conflicts_with = "cgroup")]
    pid: Option<u32>,
    /// Record every process in this cgroup and the cgroups beneath it (a
    /// container's or a pod's), as /proc/PID/cgroup names it (the `cpu`
    /// line on cgroup v1), with the processes they fork from now on.
    /// Processes that enter it while recording (moved in from outside:
    /// `podman exec`, `kubectl exec`) are recorded from then on; without
    /// --duration, recording ends when no process is left in it.
    #[arg(long, value_name = "PATH")]
    cgroup: Option<String>,
    /// Stop after this long (`10s`, `500ms`, `2m`; a bare number is
    /// seconds); default: until Ctrl-C or until the process exits.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// Trace directory to write.
    #[arg(short, long, default_value = "trace.jtrace")]
    output: PathBuf,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
    /// How much disk the recording may use.
    #[command(flatten)]
    disk: DiskArgs,
}

/// Runs `jtrace record`.
pub(crate) fn record(args: RecordArgs) -> ExitCode {
    let lib_calls = match session::prepare(&args.kernel, &args.disk, "record") {
        Ok(l) => l,
        Err(code) => return code,
    };
    let targets = match (&args.pid, &args.cgroup) {
        (Some(pid), _) => {
            let exists = i32::try_from(*pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .is_some_and(|p| rustix::process::test_kill_process(p) != Err(rustix::io::Errno::SRCH));
            if !exists {
                eprintln!("jtrace: no process with pid {pid}");
                return ExitCode::from(EXIT_USAGE);
            }
            Targets::Pid(*pid)
        }
        (None, Some(path)) => match cgroup_watch::open(path) {
            Ok((subtree, pids)) => Targets::Cgroup(subtree, pids),
            Err(code) => return code,
        },
        (None, None) => unreachable!("clap requires --pid or --cgroup"),
    };
    match record_inner(args, targets, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => session::failed(e),
    }
}

/// What `record` follows.
enum Targets {
    /// `--pid`.
    Pid(u32),
    /// `--cgroup`: the subtree and the processes in it now.
    Cgroup(jtrace_bpf::CgroupSubtree, Vec<u32>),
}

fn record_inner(args: RecordArgs, targets: Targets, lib_calls: Vec<ResolvedLibCall>) -> anyhow::Result<()> {
    let owner = User::invoking()?;
    let (pids, command, pid, what, subtree) = match targets {
        Targets::Pid(pid) => (vec![pid], session::command_line(pid), pid, format!("pid {pid}"), None),
        Targets::Cgroup(subtree, pids) => {
            let path = subtree.path.clone();
            let what = format!("the {} processes of cgroup {path}", pids.len());
            (pids, vec!["--cgroup".into(), path], 0, what, Some(subtree))
        }
    };
    for &pid in &pids {
        owner.check_may_trace(pid)?;
    }
    jtrace_bpf::required_kernel_features()?;
    let out = std::path::absolute(&args.output)?;
    let dir = TraceDir::prepare(&out, &owner)?;
    let disk = args.disk.plan(&dir);
    let meta = session::new_meta(command, pid, &[]);
    // The safepoint probes go into the first JVM's libjvm (every JDK's when none).
    let libs = JvmLibraries {
        libjvm: pids.iter().find_map(|&p| jtrace_bpf::safepoints::libjvm_of_pid(p)),
        agent: None,
    };
    // The subtree is read again while recording: a second handle.
    let watched = subtree.as_ref().map(|s| s.try_clone()).transpose()?;
    let traced = match subtree {
        Some(s) => Traced::Cgroup(pids.clone(), cgroup_watch::follow(s, &owner)),
        None => Traced::Pids(pids.clone()),
    };
    let mut session = Session::start(dir, meta, &args.kernel, &disk, lib_calls, libs, traced, &owner)?;
    signals::stop_on_signals()?;
    eprintln!(
        "jtrace: recording {what}{}",
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None if watched.is_some() => " until none is left in it or Ctrl-C".into(),
            None if pids.len() == 1 => " until it exits or Ctrl-C".into(),
            None => " until they exit or Ctrl-C".into(),
        }
    );
    if let Some(how) = session.kernel().and_then(|k| k.cgroup_joins_seen()) {
        eprintln!("jtrace: processes that enter the cgroup are recorded {how}");
    }
    let why = match &watched {
        Some(subtree) => {
            let stopped = cgroup_watch::wait(&session, subtree, args.duration, |_| {});
            if stopped.joined > 0 {
                eprintln!(
                    "jtrace: {} processes entered the cgroup while recording",
                    stopped.joined
                );
            }
            stopped.why
        }
        None => signals::wait_for_stop(&pids, args.duration),
    };
    let stats = session.stop_kernel();
    session.meta.complete = true;
    let kernel_problem = kernel_stream_problem(&stats, &session.meta);
    session.finish(&owner)?;
    eprintln!(
        "jtrace: {why}; trace written to {} ({}); read it with `jtrace text {}`",
        out.display(),
        kernel_events(&stats),
        out.display()
    );
    if let Some(p) = kernel_problem {
        eprintln!("jtrace: WARNING: {p}");
        anyhow::bail!("the trace is incomplete");
    }
    Ok(())
}

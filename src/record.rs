//! `jtrace record`: the kernel side only, on a process that is already
//! running (and those it forks from now on).

use crate::disk::DiskArgs;
use crate::options::{parse_duration, KernelArgs};
use crate::session::{self, kernel_events, kernel_stream_problem, JvmLibraries, Session, Traced, EXIT_USAGE};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use jtrace_bpf::LibCallSpec;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `jtrace record`.
#[derive(clap::Args)]
pub(crate) struct RecordArgs {
    /// Process to record (with the processes it forks from now on).
    #[arg(short, long)]
    pid: u32,
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
    let exists = i32::try_from(args.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH));
    if !exists {
        eprintln!("jtrace: no process with pid {}", args.pid);
        return ExitCode::from(EXIT_USAGE);
    }
    match record_inner(args, lib_calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => session::failed(e),
    }
}

fn record_inner(args: RecordArgs, lib_calls: Vec<LibCallSpec>) -> anyhow::Result<()> {
    let owner = User::invoking()?;
    owner.check_may_trace(args.pid)?;
    jtrace_bpf::required_kernel_features()?;
    let out = std::path::absolute(&args.output)?;
    let command = session::command_line(args.pid);
    let dir = TraceDir::prepare(&out, &owner)?;
    let disk = args.disk.plan(&dir);
    let meta = session::new_meta(command, args.pid, &[]);
    let libs = JvmLibraries {
        libjvm: jtrace_bpf::safepoints::libjvm_of_pid(args.pid),
        agent: None,
    };
    let traced = Traced::Pid(args.pid);
    let mut session = Session::start(dir, meta, &args.kernel, &disk, lib_calls, libs, traced, &owner)?;
    signals::stop_on_signals()?;
    eprintln!(
        "jtrace: recording pid {}{}",
        args.pid,
        match args.duration {
            Some(d) => format!(" for {d:?} (Ctrl-C stops earlier)"),
            None => " until it exits or Ctrl-C".into(),
        }
    );
    let why = signals::wait_for_stop(args.pid, args.duration);
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

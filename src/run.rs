//! `jtrace run`: record the kernel and the JVM while a command runs.
//!
//! Order matters: the BPF programs are loaded and told to follow every process
//! forked by jtrace before the command is started, so its first instruction
//! is already traced; the command runs as the user who invoked sudo; the
//! trace's metadata is written first as incomplete and rewritten as complete
//! only when everything is flushed.

use crate::agent_lib::{agent_path, check_readable_by};
use crate::disk::DiskArgs;
use crate::options::{KernelArgs, TraceArgs};
use crate::session::{self, jvm_stream_problems, kernel_events, kernel_stream_problem, JvmLibraries, Session, Traced};
use crate::signals;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::bail;
use jtrace_bpf::safepoints::Libjvm;
use jtrace_bpf::ResolvedLibCall;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode};

/// Arguments of `jtrace run`.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// What the agent records and where the trace goes.
    #[command(flatten)]
    trace: TraceArgs,
    /// Kernel recording options.
    #[command(flatten)]
    kernel: KernelArgs,
    /// How much disk the recording may use.
    #[command(flatten)]
    disk: DiskArgs,
    /// The command to run, after `--`.
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

/// Runs `jtrace run`; returns the command's exit status as ours.
pub(crate) fn run(args: RunArgs) -> ExitCode {
    match session::prepare(&args.kernel, &args.disk, "run") {
        Ok(lib_calls) => run_inner(args, lib_calls).unwrap_or_else(session::failed),
        Err(code) => code,
    }
}

fn run_inner(args: RunArgs, lib_calls: Vec<ResolvedLibCall>) -> anyhow::Result<ExitCode> {
    let owner = User::invoking()?;
    let agent = agent_path()?;
    if agent.to_string_lossy().chars().any(char::is_whitespace) {
        bail!(
            "agent path {} contains white space, which JAVA_TOOL_OPTIONS cannot carry",
            agent.display()
        );
    }
    check_readable_by(&agent, &owner)?;
    jtrace_bpf::required_kernel_features()?;
    let setup = args.trace.agent_setup(&owner, args.kernel.stacks())?;
    if setup.out.to_string_lossy().chars().any(char::is_whitespace) {
        bail!(
            "output path {:?} contains white space, which JAVA_TOOL_OPTIONS cannot carry",
            setup.out
        );
    }
    // Found and opened as the user, before anything touches the disk.
    let libjvm = launcher_libjvm(&args.command[0], &owner);
    let dir = TraceDir::prepare(&setup.out, &owner)?;
    let disk = args.disk.plan(&dir);
    let conf = setup.conf.clone() + &disk.agent_lines();
    dir.write_file(jtrace_format::AGENT_CONFIG_FILE, conf.as_bytes())?;
    let agent_options = dir.agent_options(jtrace_format::AGENT_CONFIG_FILE)?;
    let meta = session::new_meta(args.command.clone(), 0, &args.trace.methods);
    let libs = JvmLibraries { libjvm, agent: None };
    let mut session = Session::start(
        dir,
        meta,
        &args.kernel,
        &disk,
        lib_calls,
        libs,
        Traced::OurChildren,
        &owner,
    )?;

    let mut tool_opts = std::env::var("JAVA_TOOL_OPTIONS").unwrap_or_default();
    if !tool_opts.is_empty() {
        tool_opts.push(' ');
    }
    tool_opts.push_str(&format!("-agentpath:{}={agent_options}", agent.display()));
    // Frame pointers in JIT-compiled code, so that stacks walk through it.
    if !args.trace.no_frame_pointer {
        tool_opts.push_str(" -XX:+PreserveFramePointer");
    }

    signals::forward_to_child()?;
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]).env("JAVA_TOOL_OPTIONS", &tool_opts);
    let change_identity = !owner.is_current();
    if change_identity {
        // Groups, group and user in that order, each checked; a failure is
        // the spawn's error and the command does not run. (std's own uid()
        // would drop the supplementary groups.)
        let user = owner.clone();
        // SAFETY: become_for_exec makes raw syscalls only and allocates
        // nothing, as the forked child of a threaded process must.
        unsafe { cmd.pre_exec(move || user.become_for_exec()) };
    }
    let status = match cmd.spawn() {
        Ok(mut child) => {
            signals::set_child(Some(child.id()));
            session.set_pid(child.id());
            let s = child.wait();
            signals::set_child(None);
            s
        }
        Err(e) => {
            session.abandon();
            let as_whom = if change_identity {
                format!(" as {}", owner.describe())
            } else {
                String::new()
            };
            eprintln!("jtrace: cannot run {}{as_whom}: {e}", args.command[0]);
            return Ok(ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }));
        }
    };
    // From here on the command's exit status is ours whatever happens to
    // the trace: a problem with it is said, not turned into a failure.
    let stats = session.stop_kernel();
    let code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    };
    session.meta.exit_code = Some(code);
    session.meta.complete = true;
    let kernel_problem = kernel_stream_problem(&stats, &session.meta);
    let mut agent_problems = jvm_stream_problems(&session.dir);
    agent_problems.extend(no_jvm_problem(&session.dir, &args.command, &args.trace.methods));
    let out = setup.out.display();
    match session.finish(&owner) {
        Ok(()) => eprintln!(
            "jtrace: trace written to {out} ({}); read it with `jtrace text {out}` or `jtrace report {out}`",
            kernel_events(&stats),
        ),
        Err(e) => eprintln!("jtrace: the trace in {out} could not be finished: {e:#}"),
    }
    for p in kernel_problem.iter().chain(&agent_problems) {
        eprintln!("jtrace: WARNING: {p}");
    }
    if let Err(e) = &status {
        eprintln!("jtrace: waiting for the command: {e}");
    }
    Ok(ExitCode::from((code & 0xff) as u8))
}

/// What to say when no JVM loaded the agent though the command runs `java`
/// or methods were asked for (the command dropped JAVA_TOOL_OPTIONS, or its
/// JVM ignores it): the trace holds the kernel's view only.
fn no_jvm_problem(dir: &TraceDir, command: &[String], methods: &[String]) -> Option<String> {
    let runs_java = command
        .first()
        .is_some_and(|c| std::path::Path::new(c).file_name().is_some_and(|n| n == "java"));
    if !dir.jvm_streams().is_empty() || (methods.is_empty() && !runs_java) {
        return None;
    }
    Some(
        "no JVM loaded jtrace's agent (did the command drop JAVA_TOOL_OPTIONS, or run a JVM that ignores it?): \
         the trace has no methods, monitors or JVM threads, only the kernel's view"
            .into(),
    )
}

/// The `libjvm.so` of the JDK whose `java` the command names
/// (`<home>/bin/java` → `<home>/lib/server/libjvm.so`), for its safepoint
/// probes: the command is the user's, so the launcher is looked for and
/// the library opened with `owner`'s rights (what `owner` cannot open is
/// said, and left unprobed). None: no JDK launcher, or a library that
/// cannot be opened (the installed JDKs are probed instead).
fn launcher_libjvm(program: &str, owner: &User) -> Option<Libjvm> {
    let found = owner.run_as(|| {
        Ok(jtrace_bpf::safepoints::libjvm_of_launcher(program)
            .map(|name| (jtrace_symbols::bounded_read::open_regular(&name), name)))
    });
    match found {
        Ok(Some((Ok(file), name))) => Some(Libjvm { name, file }),
        Ok(Some((Err(e), name))) => {
            eprintln!(
                "jtrace: cannot open {} as uid {}: {e}: its safepoints will not be recorded",
                name.display(),
                owner.uid.as_raw()
            );
            None
        }
        Ok(None) => None,
        Err(e) => {
            eprintln!("jtrace: {e:#}");
            None
        }
    }
}

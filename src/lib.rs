//! `jtrace`: trace a Java program together with the kernel, then read the
//! merged per-thread result. This library is the command line; the binaries
//! `jtrace` and `trace` (a second name, for `sudo trace run -- java …`) call
//! [`main`].
//!
//! `dump` snapshots a ring recording as it goes on (`dump.rs`).
//! Recording (`run`, `record`, `attach`) runs as root: a session (`session.rs`) of the
//! kernel recorder and the JVM agent writing into a trace directory
//! (`trace_dir.rs`) that belongs to the traced user, touched only as
//! docs/ARCHITECTURE.md invariant 6 says. Reading (`text`, `report`, `why`, `timeline`,
//! `export`, `info`) is the views of jtrace-timeline over jtrace-merge.

mod agent_conf;
mod agent_lib;
mod attach;
mod attach_cgroup;
mod cgroup_watch;
mod clock;
mod container;
mod demoted_rules;
mod disk;
mod dump;
mod flame;
mod hotspot;
mod info;
mod jvm_agent;
mod jvm_ready;
mod memory;
mod options;
mod output;
mod proc_root;
mod progress;
mod record;
mod report;
mod ring;
mod run;
mod session;
mod signals;
mod stream_copy;
mod trace_dir;
mod user;
mod view_plan;
mod views;
mod why;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "jtrace",
    version,
    about = "Kernel-assisted tracer for Java programs: where did the time go?"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command under the tracer (needs root: CAP_BPF + CAP_PERFMON).
    Run(run::RunArgs),
    /// Attach to a running HotSpot JVM (or every JVM of a cgroup: a
    /// container, a pod): load the agent, record the JVM and the kernel for
    /// a while, then detach and leave the JVM running (needs root).
    Attach(attach::AttachArgs),
    /// Record the kernel side of a running process (needs root).
    Record(record::RecordArgs),
    /// Write a readable snapshot of a ring recording (`--max-size`,
    /// `--max-age`) while it goes on, as the invoking user.
    Dump(dump::DumpArgs),
    /// Print the merged per-thread text trace.
    Text(views::TextArgs),
    /// Print the gap-attribution report.
    Report(report::ReportArgs),
    /// Explain slow invocations: their critical path across threads and
    /// processes (what each blocker did meanwhile, recursively).
    Why(why::WhyArgs),
    /// Write the per-thread timeline as one self-contained HTML file (reads
    /// the whole trace into memory: the page embeds every event).
    Timeline(views::TimelineArgs),
    /// Write a flame graph of CPU samples and off-CPU time by cause as one
    /// self-contained HTML file; with two traces, their difference.
    Flame(flame::FlameArgs),
    /// Export for other viewers: chrome (Perfetto), collapsed (flame graphs), csv, text.
    Export(views::ExportArgs),
    /// Print a trace's metadata, event counts and losses.
    Info(info::InfoArgs),
}

/// The name jtrace was invoked by (`jtrace`, or `trace`), which its help
/// and version show.
fn invoked_name() -> &'static str {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    match std::path::Path::new(&arg0).file_name().and_then(|n| n.to_str()) {
        Some("trace") => "trace",
        _ => "jtrace",
    }
}

/// The command line: parses the arguments, runs the command, and returns
/// its exit code (a recording command's, or 1 after an error message).
pub fn main() -> ExitCode {
    let matches = Cli::command().name(invoked_name()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.cmd {
        Cmd::Run(args) => return run::run(args),
        Cmd::Attach(args) if args.for_cgroup() => return attach_cgroup::attach_cgroup(args),
        Cmd::Attach(args) => return attach::attach(args),
        Cmd::Record(args) => return record::record(args),
        Cmd::Dump(args) => dump::dump(args),
        Cmd::Text(args) => views::text(args),
        Cmd::Report(args) => {
            let _p = progress::Progress::start("report");
            report::report(args)
        }
        Cmd::Why(args) => {
            let _p = progress::Progress::start("why");
            why::why(args)
        }
        Cmd::Timeline(args) => {
            let _p = progress::Progress::start("timeline");
            views::timeline(args)
        }
        Cmd::Flame(args) => {
            let _p = progress::Progress::start("flame");
            flame::flame(args)
        }
        Cmd::Export(args) => {
            let _p = progress::Progress::start("export");
            views::export(args)
        }
        Cmd::Info(args) => info::info(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`jtrace text t | head`) is not an error worth a message.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("jtrace: {e:#}");
            ExitCode::from(1)
        }
    }
}

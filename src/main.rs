//! `jtrace`: trace a Java program together with the kernel, then read the
//! merged per-thread result.

mod attach;
mod run;
mod signals;
mod trace_dir;
mod user;
mod views;

use anyhow::Context;
use clap::{Parser, Subcommand};
use jtrace_merge::{build_report, build_report_streaming, ReportFilter, Trace};
use std::io::Write;
use std::path::PathBuf;
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
    /// Attach to a running HotSpot JVM: load the agent, record the JVM and
    /// the kernel for a while, then detach and leave the JVM running (needs root).
    Attach(attach::AttachArgs),
    /// Record the kernel side of a running process (needs root).
    Record(run::RecordArgs),
    /// Print the merged per-thread text trace.
    Text(views::TextArgs),
    /// Print the gap-attribution report.
    Report {
        /// Trace directory.
        trace: PathBuf,
        /// Emit JSON (schema jtrace.report.v1).
        #[arg(long)]
        json: bool,
        /// Only threads whose name (glob) or tid matches.
        #[arg(long)]
        thread: Option<String>,
        /// Only methods whose `class.method` matches (glob).
        #[arg(long)]
        method: Option<String>,
        /// Only methods that were off CPU for this cause, sorted by it
        /// (runqueue, monitor, wait, park, sleep, gc, safepoint, socket, file,
        /// page_fault, lock_native, syscall_other, unknown).
        #[arg(long, value_parser = parse_cause)]
        cause: Option<jtrace_merge::Cause>,
        /// Rows in the method tables.
        #[arg(long, default_value_t = 25)]
        top: usize,
        #[command(flatten)]
        stream: views::StreamArgs,
    },
    /// Write the per-thread timeline as one self-contained HTML file (reads
    /// the whole trace into memory: the page embeds every event).
    Timeline(views::TimelineArgs),
    /// Export for other viewers: chrome (Perfetto), collapsed (flame graphs), csv, text.
    Export(views::ExportArgs),
    /// Print a trace's metadata, event counts and losses.
    Info {
        /// Trace directory.
        trace: PathBuf,
    },
}

fn parse_cause(s: &str) -> Result<jtrace_merge::Cause, String> {
    jtrace_merge::Cause::from_name(s).ok_or_else(|| {
        let names: Vec<_> = jtrace_merge::Cause::ALL.iter().map(|c| c.name()).collect();
        format!("unknown cause {s:?}; one of: {}", names.join(", "))
    })
}

fn open(path: &std::path::Path) -> anyhow::Result<Trace> {
    Trace::open(path).with_context(|| format!("cannot open trace {}", path.display()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run(args) => return run::run(args),
        Cmd::Attach(args) => return attach::attach(args),
        Cmd::Record(args) => return run::record(args),
        Cmd::Text(args) => views::text(args),
        Cmd::Report {
            trace,
            json,
            thread,
            method,
            cause,
            top,
            stream,
        } => {
            let filter = ReportFilter { thread, method, cause };
            let report = if stream.in_memory {
                open(&trace).map(|t| build_report(&t, &filter))
            } else {
                build_report_streaming(&trace, &filter, &stream.options())
                    .with_context(|| format!("cannot report on trace {}", trace.display()))
            };
            report.and_then(|r| {
                let mut out = std::io::stdout().lock();
                if json {
                    serde_json::to_writer_pretty(&mut out, &r)?;
                    writeln!(out)?;
                } else {
                    out.write_all(jtrace_timeline::render_report(&r, top).as_bytes())?;
                }
                Ok(())
            })
        }
        Cmd::Timeline(args) => views::timeline(args),
        Cmd::Export(args) => views::export(args),
        Cmd::Info { trace } => open(&trace).and_then(|t| print_info(&t).map_err(Into::into)),
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

/// `jtrace info`: written in one go, so that a closed pipe (`| head`) is an
/// error to ignore, not a panic of println!.
/// `jtrace info`. Errors, not println!'s panic, on a closed pipe (`| head`).
fn print_info(t: &Trace) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let m = &t.meta;
    writeln!(out, "trace      {}", t.dir.display())?;
    writeln!(
        out,
        "format     v{}  (written by jtrace {})",
        m.version, m.jtrace_version
    )?;
    writeln!(
        out,
        "complete   {}",
        if m.complete {
            "yes"
        } else {
            "NO: recording was cut off; this is a readable prefix"
        }
    )?;
    writeln!(out, "command    {}", m.command.join(" "))?;
    writeln!(out, "pid        {}", m.pid)?;
    if let Some(c) = m.exit_code {
        writeln!(out, "exit code  {c}")?;
    }
    writeln!(out, "kernel     {}", m.kernel)?;
    writeln!(out, "started    {}", jtrace_timeline::fmt_realtime(m.start_realtime_ns))?;
    writeln!(
        out,
        "duration   {} ms",
        jtrace_timeline::text::ms(m.end_monotonic_ns.saturating_sub(m.start_monotonic_ns))
    )?;
    if !m.methods.is_empty() {
        writeln!(out, "methods    {}", m.methods.join(" "))?;
    }
    writeln!(
        out,
        "threads    {} ({} known to the JVM)",
        t.threads.len(),
        t.threads.values().filter(|x| x.java_name.is_some()).count()
    )?;
    writeln!(out, "JVMs       {:?}", t.jvm_pids)?;
    writeln!(out, "methods    {} traced", t.methods.len())?;
    writeln!(out, "events     kernel {}  jvm {}", t.kernel_records, t.jvm_records)?;
    writeln!(out, "lost       kernel {}  jvm {}", t.losses.kernel, t.losses.jvm)?;
    if m.kernel_inferred_switch_ins > 0 {
        writeln!(
            out,
            "inferred   {} switch-ins the kernel did not report",
            m.kernel_inferred_switch_ins
        )?;
    }
    for (k, v) in &m.kernel_lost {
        if *v > 0 {
            writeln!(out, "  kernel lost {k}: {v}")?;
        }
    }
    for p in &t.losses.truncated {
        writeln!(out, "problem    {p}")?;
    }
    for p in &t.losses.agent_errors {
        writeln!(out, "agent      {p}")?;
    }
    out.flush()
}

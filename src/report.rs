//! `jtrace report`: the gap-attribution report, as a table or as JSON
//! (schema jtrace.report.v1).

use crate::views::StreamArgs;
use anyhow::Context;
use jtrace_merge::{build_report, build_report_streaming, Cause, ReportFilter, Trace};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `jtrace report`.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
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
    /// page_fault, lock_native, syscall_other, unknown, tracer, throttled,
    /// steal).
    #[arg(long, value_parser = parse_cause)]
    cause: Option<Cause>,
    /// Rows in the method tables.
    #[arg(long, default_value_t = 25)]
    top: usize,
    /// Top stacks: native frames with their source line (DWARF; JSON:
    /// `frame_lines`), functions inlined there as frames of their own.
    #[arg(long)]
    lines: bool,
    /// Threads table: show jtrace's own threads (the agent's, in the traced
    /// JVM) too; left out by default, JSON marks them `tracer`.
    #[arg(long)]
    all: bool,
    /// Threads table: one row per thread; by default threads named alike
    /// but for a trailing number (`pool-1-thread-1` … `-8`) are one row.
    #[arg(long)]
    per_thread: bool,
    /// Instead of the report, print configuration rules (`exclude_method`)
    /// for the methods the trace demoted, for `jtrace run --config`: they
    /// then get no probes from the start (docs/OVERHEAD.md).
    #[arg(long, conflicts_with_all = ["json", "thread", "method", "cause"])]
    exclude_demoted: bool,
    #[command(flatten)]
    stream: StreamArgs,
}

fn parse_cause(s: &str) -> Result<Cause, String> {
    Cause::from_name(s).ok_or_else(|| {
        let names: Vec<_> = Cause::ALL.iter().map(|c| c.name()).collect();
        format!("unknown cause {s:?}; one of: {}", names.join(", "))
    })
}

/// `jtrace report TRACE`: streamed unless `--in-memory`.
pub(crate) fn report(args: ReportArgs) -> anyhow::Result<()> {
    let filter = ReportFilter {
        thread: args.thread,
        method: args.method,
        cause: args.cause,
        lines: args.lines,
    };
    let trace = &args.trace;
    let report = if args.stream.in_memory {
        Trace::open(trace)
            .with_context(|| format!("cannot open trace {}", trace.display()))
            .map(|t| build_report(&t, &filter))
    } else {
        build_report_streaming(trace, &filter, &args.stream.options())
            .with_context(|| format!("cannot report on trace {}", trace.display()))
    }?;
    let mut out = std::io::stdout().lock();
    if args.exclude_demoted {
        out.write_all(crate::demoted_rules::exclude_demoted(&report, &trace.display().to_string()).as_bytes())?;
    } else if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let opts = jtrace_timeline::ReportTextOptions {
            top: args.top,
            all_threads: args.all,
            per_thread: args.per_thread,
        };
        out.write_all(jtrace_timeline::render_report(&report, &opts).as_bytes())?;
    }
    Ok(())
}

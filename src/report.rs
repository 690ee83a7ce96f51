//! `jtrace report`: the gap-attribution report, as a table or as JSON
//! (schema jtrace.report.v1); with `--compare BEFORE AFTER`, what changed
//! between two traces' reports (schema jtrace.compare.v1).

use crate::views::StreamArgs;
use anyhow::Context;
use jtrace_merge::report::compare::{compare, CompareOptions};
use jtrace_merge::{build_report, build_report_streaming, Cause, Report, ReportFilter, Trace};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `jtrace report`.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// Trace directory.
    #[arg(required_unless_present = "compare")]
    trace: Option<PathBuf>,
    /// Instead of one trace's report, what changed from BEFORE to AFTER:
    /// the methods (matched by class, name and signature) and causes that
    /// changed most, largest change of wall first (with --cause, of that
    /// cause). --thread, --method, --cause and --top apply to both.
    #[arg(
        long,
        num_args = 2,
        value_names = ["BEFORE", "AFTER"],
        conflicts_with_all = ["trace", "exclude_demoted", "lines", "all", "per_thread", "wide"]
    )]
    compare: Option<Vec<PathBuf>>,
    /// Emit JSON (schema jtrace.report.v1; with --compare, jtrace.compare.v1).
    #[arg(long)]
    json: bool,
    /// Write the report as one self-contained HTML page to --output: its
    /// tables with a bar per method and thread (CPU and off-CPU by cause),
    /// then the flame graph of the same selection (as `jtrace flame`).
    #[arg(long, requires = "output", conflicts_with_all = ["json", "compare", "exclude_demoted"])]
    html: bool,
    /// The file --html writes.
    #[arg(short, long, requires = "html")]
    output: Option<PathBuf>,
    /// With --html: also render the page to this PNG (headless Chromium).
    #[arg(long, requires = "html")]
    png: Option<PathBuf>,
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
    /// Show everything: the threads waiting for work in the threads table,
    /// idle time in the methods and stacks tables, and jtrace's own threads
    /// (the agent's, in the traced JVM). By default the tables rank working
    /// time, fold idle threads into one line per kind and leave the
    /// tracer's threads out (so does --html's flame graph); JSON has all
    /// of it, marked.
    #[arg(long)]
    all: bool,
    /// Full tables: one column per cause and the switches, stacks on one
    /// line; by default every line fits 120 columns.
    #[arg(long, conflicts_with_all = ["json", "html"])]
    wide: bool,
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

/// The report of `trace` with `filter`: streamed unless `--in-memory`;
/// an error names the trace as `what` (`trace`, `BEFORE trace` …).
fn build(trace: &Path, what: &str, filter: &ReportFilter, stream: &StreamArgs) -> anyhow::Result<Report> {
    if stream.in_memory {
        Trace::open(trace)
            .with_context(|| format!("cannot open {what} {}", trace.display()))
            .map(|t| build_report(&t, filter))
    } else {
        build_report_streaming(trace, filter, &stream.options())
            .with_context(|| format!("cannot report on {what} {}", trace.display()))
    }
}

/// `jtrace report TRACE`, or `jtrace report --compare BEFORE AFTER`.
pub(crate) fn report(args: ReportArgs) -> anyhow::Result<()> {
    let filter = ReportFilter {
        thread: args.thread.clone(),
        method: args.method.clone(),
        cause: args.cause,
        lines: args.lines,
    };
    if let Some(pair) = &args.compare {
        return report_compare(&args, &pair[0], &pair[1], filter);
    }
    let trace = args.trace.as_deref().context("no trace given")?;
    let report = build(trace, "trace", &filter, &args.stream)?;
    if let Some(output) = &args.output {
        return report_html(&args, trace, &report, output);
    }
    let mut out = std::io::stdout().lock();
    if args.exclude_demoted {
        out.write_all(crate::demoted_rules::exclude_demoted(&report, &trace.display().to_string()).as_bytes())?;
    } else if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let opts = jtrace_timeline::ReportTextOptions {
            top: args.top,
            all: args.all,
            per_thread: args.per_thread,
            wide: args.wide,
        };
        out.write_all(jtrace_timeline::render_report(&report, &opts).as_bytes())?;
    }
    Ok(())
}

/// `jtrace report --html -o FILE`: the report's tables and the flame
/// graph of the same selection, in one page written whole or not at all.
fn report_html(args: &ReportArgs, trace: &Path, report: &Report, output: &Path) -> anyhow::Result<()> {
    use jtrace_timeline::flame::{flame_fold_options, write_flame, FlameOptions};
    let fold = flame_fold_options(&jtrace_timeline::CollapsedOptions {
        threads: args.thread.clone(),
        lines: args.lines,
        working: !args.all,
        ..Default::default()
    });
    let opts = FlameOptions {
        title: Some(format!("jtrace report: {}", report.trace.command)),
        selection: [("threads", &args.thread), ("methods", &args.method)]
            .into_iter()
            .filter_map(|(what, v)| v.as_ref().map(|v| format!("{what} {v}")))
            .chain(args.cause.map(|c| format!("cause {}", c.name())))
            .collect(),
        method: args.method.clone(),
        cause: args.cause.map(|c| c.name().to_string()),
        report: Some(serde_json::to_value(report)?),
        report_top: args.top,
    };
    let mut out = crate::output::OutputFile::create(output)?;
    write_flame(trace, &fold, &args.stream.options(), &opts, &mut out)
        .with_context(|| format!("cannot draw the flame graph of {}", trace.display()))?;
    out.commit()?;
    eprintln!("jtrace: wrote {}", output.display());
    if let Some(png) = &args.png {
        jtrace_timeline::html::screenshot(output, png, 1400, 1000)?;
        eprintln!("jtrace: wrote {}", png.display());
    }
    Ok(())
}

/// `jtrace report --compare BEFORE AFTER`: both reports with the same
/// filters, but every method kept whatever its causes: `--cause` selects
/// the methods with that cause on either side, in the comparison.
fn report_compare(args: &ReportArgs, before: &Path, after: &Path, filter: ReportFilter) -> anyhow::Result<()> {
    let cause = filter.cause;
    let filter = ReportFilter { cause: None, ..filter };
    let before = build(before, "BEFORE trace", &filter, &args.stream)?;
    let after = build(after, "AFTER trace", &filter, &args.stream)?;
    let comparison = compare(&before, &after, &CompareOptions { cause });
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &comparison)?;
        writeln!(out)?;
    } else {
        let opts = jtrace_timeline::CompareTextOptions { top: args.top };
        out.write_all(jtrace_timeline::render_compare(&comparison, &opts).as_bytes())?;
    }
    Ok(())
}

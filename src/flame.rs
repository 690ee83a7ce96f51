//! `jtrace flame`: the flame graph page of a trace (CPU samples and
//! off-CPU time by cause), or of the difference of two traces; the page
//! itself is jtrace-timeline's `flame` module.

use crate::output::OutputFile;
use crate::views::StreamArgs;
use anyhow::Context;
use jtrace_timeline::flame::{flame_fold_options, write_flame, write_flame_diff, FlameOptions};
use jtrace_timeline::{html, CollapsedOptions};
use std::path::PathBuf;

/// Arguments of `jtrace flame`.
#[derive(clap::Args)]
pub(crate) struct FlameArgs {
    /// Trace directory; with two, BEFORE AFTER: a differential flame graph
    /// (widths: AFTER's time; colour: growth red, shrink blue).
    #[arg(num_args = 1..=2, required = true, value_names = ["TRACE", "AFTER"])]
    traces: Vec<PathBuf>,
    /// The HTML file to write (self-contained; open it from disk).
    #[arg(short, long)]
    output: PathBuf,
    /// Only the threads whose name matches this glob, or this tid.
    #[arg(long)]
    thread: Option<String>,
    /// Only the stacks through a frame whose `Class.method` (or native
    /// function) matches this glob.
    #[arg(long)]
    method: Option<String>,
    /// Only this time window, FROM..TO since the trace start (e.g.
    /// 120ms..180ms): off-CPU time clipped to it, CPU samples taken in it.
    #[arg(long, value_parser = html::parse_window)]
    window: Option<(u64, u64)>,
    /// Only this cause (runqueue, monitor, …, or cpu for the CPU samples).
    #[arg(long, value_parser = parse_cause)]
    cause: Option<String>,
    /// The thread as the first frame of every stack.
    #[arg(long)]
    per_thread: bool,
    /// Also the idle time (blocked time of threads waiting for work, by
    /// the report's idle rules) and jtrace's own threads, which are left
    /// out by default.
    #[arg(long)]
    all: bool,
    /// Native frames with their source line (DWARF), functions inlined
    /// there as frames of their own.
    #[arg(long)]
    lines: bool,
    /// Page title (default: the traced command).
    #[arg(long)]
    title: Option<String>,
    /// Also render the page to this PNG, with headless Chromium.
    #[arg(long)]
    png: Option<PathBuf>,
    #[command(flatten)]
    stream: StreamArgs,
}

fn parse_cause(s: &str) -> Result<String, String> {
    if s == "cpu" || jtrace_merge::Cause::from_name(s).is_some() {
        return Ok(s.to_string());
    }
    let names: Vec<_> = jtrace_merge::Cause::ALL.iter().map(|c| c.name()).collect();
    Err(format!("unknown cause {s:?}; one of: {}, cpu", names.join(", ")))
}

/// `jtrace flame TRACE [AFTER] -o flame.html`.
pub(crate) fn flame(args: FlameArgs) -> anyhow::Result<()> {
    let fold = flame_fold_options(&CollapsedOptions {
        thread: args.per_thread,
        lines: args.lines,
        window: args.window,
        threads: args.thread.clone(),
        working: !args.all,
        ..Default::default()
    });
    let mut selection = Vec::new();
    if let Some(t) = &args.thread {
        selection.push(format!("threads {t}"));
    }
    if let Some(m) = &args.method {
        selection.push(format!("stacks through {m}"));
    }
    if let Some((from, to)) = args.window {
        selection.push(format!(
            "window {}..{} ms since the trace start",
            from as f64 / 1e6,
            to as f64 / 1e6
        ));
    }
    if let Some(c) = &args.cause {
        selection.push(format!("cause {c}"));
    }
    let opts = FlameOptions {
        title: args.title,
        selection,
        method: args.method,
        cause: args.cause,
        ..Default::default()
    };
    let stream = args.stream.options();
    let mut out = OutputFile::create(&args.output)?;
    match args.traces.as_slice() {
        [one] => write_flame(one, &fold, &stream, &opts, &mut out)
            .with_context(|| format!("cannot draw the flame graph of {}", one.display()))?,
        [before, after] => write_flame_diff(before, after, &fold, &stream, &opts, &mut out).with_context(|| {
            format!(
                "cannot draw the flame graph of {} against {}",
                after.display(),
                before.display()
            )
        })?,
        _ => unreachable!("clap takes one or two traces"),
    }
    out.commit()?;
    eprintln!("jtrace: wrote {}", args.output.display());
    if let Some(png) = args.png {
        html::screenshot(&args.output, &png, 1600, 900)?;
        eprintln!("jtrace: wrote {}", png.display());
    }
    Ok(())
}

//! `jtrace why`: the critical path of slow invocations across threads and
//! processes, as an indented chain or as JSON (schema jtrace.why.v1).

use crate::views::StreamArgs;
use anyhow::Context;
use jtrace_merge::why::{explain, Limits, Selection, WhyOptions};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `jtrace why`.
#[derive(clap::Args)]
pub(crate) struct WhyArgs {
    /// Trace directory.
    trace: PathBuf,
    /// The method whose invocations to explain (`Class.name`, glob).
    #[arg(long)]
    method: String,
    /// Explain the N slowest invocations (default 1).
    #[arg(long, conflicts_with = "percentile")]
    slowest: Option<usize>,
    /// Explain the invocations at or above the P-th percentile of wall
    /// time (0 < P ≤ 100), at most --max-invocations of them.
    #[arg(long, value_parser = parse_percentile)]
    percentile: Option<f64>,
    /// Only invocations on threads whose name (glob) or tid matches; alone,
    /// all of their invocations (at most --max-invocations).
    #[arg(long)]
    thread: Option<String>,
    /// Contrast the slow invocations (--percentile, default 99, or
    /// --slowest) with as many near the median: which causes and blockers
    /// make up the difference.
    #[arg(long)]
    compare: bool,
    /// Emit JSON (schema jtrace.why.v1).
    #[arg(long)]
    json: bool,
    /// Explain at most this many invocations (the slowest).
    #[arg(long, default_value_t = 1000)]
    max_invocations: usize,
    /// Chains printed in the text (the summary covers every invocation).
    #[arg(long, default_value_t = 5)]
    chains: usize,
    /// Hops followed from the invocation's thread.
    #[arg(long, default_value_t = Limits::default().max_depth)]
    max_depth: u16,
    /// Segments per path before the walk sums the rest per state.
    #[arg(long, default_value_t = Limits::default().max_segments)]
    max_segments: usize,
    #[command(flatten)]
    stream: StreamArgs,
}

fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.trim().trim_start_matches('p').parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        Ok(p) => Err(format!("{p}: a percentile is above 0 and at most 100")),
        Err(e) => Err(format!("{s}: {e}")),
    }
}

/// `jtrace why TRACE --method GLOB …`.
pub(crate) fn why(args: WhyArgs) -> anyhow::Result<()> {
    if args.stream.in_memory {
        anyhow::bail!("jtrace why always streams (--in-memory is for report, text and export)");
    }
    let selection = match (args.slowest, args.percentile, &args.thread) {
        (Some(0), _, _) => anyhow::bail!("--slowest 0 explains nothing"),
        (Some(n), _, _) => Selection::Slowest(n),
        (None, Some(p), _) => Selection::Percentile(p),
        (None, None, _) if args.compare => Selection::Percentile(99.0),
        (None, None, Some(_)) => Selection::All,
        (None, None, None) => Selection::Slowest(1),
    };
    let opts = WhyOptions {
        method: args.method,
        thread: args.thread,
        selection,
        max_invocations: args.max_invocations,
        compare: args.compare,
        limits: Limits {
            max_depth: args.max_depth,
            max_segments: args.max_segments.max(1),
        },
        stream: args.stream.options(),
    };
    let trace = &args.trace;
    let w = explain(trace, &opts).with_context(|| format!("cannot explain trace {}", trace.display()))?;
    let doc = w.to_json();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else if doc.invocations.is_empty() {
        writeln!(
            out,
            "no finished invocation of {} on the threads asked about ({} matched)",
            doc.selection.method, doc.selection.matched
        )?;
    } else {
        let text = jtrace_timeline::render_why(
            &doc,
            &jtrace_timeline::WhyTextOptions {
                chains: args.chains,
                ..Default::default()
            },
        );
        out.write_all(text.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

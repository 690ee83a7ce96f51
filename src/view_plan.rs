//! How an in-memory view (`jtrace timeline`, `jtrace export --format
//! chrome`) reads a trace: whole when it fits in the memory available, the
//! part the user selected (`--window`, `--thread`) in memory bounded by
//! that part, or not at all, with a message saying what to do — checked
//! before anything is read in full, so a view never dies of an allocation
//! failure.

use crate::memory;
use anyhow::{bail, Context};
use jtrace_merge::stream::{parse_size, StreamOptions};
use jtrace_merge::Trace;
use jtrace_timeline::scope::{self, ViewKind};
use jtrace_timeline::{html, View};
use std::path::Path;

/// What part of the trace an in-memory view draws, and with how much
/// memory. Shared by `timeline` and `export`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ScopeArgs {
    /// Draw only this time window, FROM..TO since the trace start (e.g.
    /// 120ms..180ms; units ns, us, ms, s): a trace too large to draw whole
    /// is drawn in part. timeline: the PNG shows it too.
    #[arg(long, value_parser = html::parse_window)]
    pub window: Option<(u64, u64)>,
    /// Draw only the threads whose name matches this glob, or this tid.
    #[arg(long)]
    pub thread: Option<String>,
    /// Memory the view may use (e.g. 2G); default: what the system has
    /// available (MemAvailable, within jtrace's cgroup limit).
    #[arg(long, value_parser = parse_size)]
    pub max_memory: Option<usize>,
}

/// How the view reads the trace.
pub enum Plan {
    /// The whole trace, in memory.
    Whole(Trace),
    /// The selected part: the scoped model.
    Part(scope::ScopedModel),
}

impl Plan {
    /// Draws the view with `draw`.
    pub fn draw<R>(self, draw: impl FnOnce(&View) -> R) -> R {
        match self {
            Plan::Whole(t) => draw(&View::whole(&t)),
            Plan::Part((trace, threads, windows, scope)) => draw(&View::scoped(&trace, threads, windows, scope)),
        }
    }
}

/// Decides how to read the trace in `dir` for a view of `kind` (see the
/// module documentation); `what` names the view in messages.
pub fn plan(dir: &Path, kind: ViewKind, what: &str, args: &ScopeArgs, stream: &StreamOptions) -> anyhow::Result<Plan> {
    let limit = args.max_memory.map_or_else(memory::available, |m| m as u64);
    let open = || Trace::open(dir).with_context(|| format!("cannot open trace {}", dir.display()));
    if !dir.is_dir() {
        // The reader says what is wrong with the path.
        return open().map(Plan::Whole);
    }
    if args.window.is_some() || args.thread.is_some() {
        // A part, however large the trace: the events are streamed within a
        // budget, what is kept is bounded by what is left.
        let budget = stream.memory_budget.min((limit / 4) as usize).max(1 << 20);
        let opts = StreamOptions {
            memory_budget: budget,
            ..stream.clone()
        };
        let items = (limit.saturating_sub(budget as u64) / kind.bytes_per_item()) as usize;
        let model = scope::collect_scoped(dir, args.window, args.thread.clone(), &opts, items).with_context(|| {
            format!(
                "cannot draw the {what} of {} in {}",
                dir.display(),
                memory::human(limit)
            )
        })?;
        return Ok(Plan::Part(model));
    }
    // The file sizes bound the events from above; only if that bound does
    // not fit are they counted.
    let bound = scope::events_upper_bound(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if scope::view_bytes(kind, bound) <= limit {
        return open().map(Plan::Whole);
    }
    let tables = Trace::scan(dir).with_context(|| format!("cannot open trace {}", dir.display()))?;
    let events = tables.kernel_records + tables.jvm_records;
    let need = scope::view_bytes(kind, events);
    if need <= limit {
        drop(tables);
        return open().map(Plan::Whole);
    }
    let secs = tables.duration_ns() as f64 / 1e9;
    let part = (secs * limit as f64 / need as f64 / 2.0).max(0.001);
    bail!(
        "the {what} of {} would need about {} of memory ({:.1} M events), more than the {} available; \
         draw part of it with --window FROM..TO (the trace lasts {secs:.3} s: about {part:.3} s fits, e.g. \
         --window 0s..{part:.3}s) and/or --thread NAME, or allow more with --max-memory SIZE \
         (the collapsed, csv and text exports stream in bounded memory)",
        dir.display(),
        memory::human(need),
        events as f64 / 1e6,
        memory::human(limit)
    )
}

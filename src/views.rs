//! `jtrace timeline` and `jtrace export`: the CLI side of the views in
//! jtrace-timeline, and the streaming flags shared by `report`, `text` and
//! `export`. Output files are written whole or not at all (`output.rs`);
//! the in-memory views read as much of the trace as fits (`view_plan.rs`).

use crate::output::OutputFile;
use crate::view_plan::{plan, ScopeArgs};
use anyhow::Context;
use jtrace_merge::Trace;
use jtrace_timeline::export::Exporter;
use jtrace_timeline::scope::ViewKind;
use jtrace_timeline::{
    html, write_chrome_view, write_collapsed, write_collapsed_streaming, write_csv, write_csv_streaming, write_parquet,
    write_perfetto, write_perfetto_streaming, CollapsedOptions, Pprof,
};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a view reads a trace: streamed within a memory budget (default), or
/// whole. Shared by `jtrace report`, `jtrace text` and `jtrace export`.
#[derive(clap::Args, Debug, Clone)]
pub struct StreamArgs {
    /// Memory for buffered events (e.g. 64M, 1G); a longer trace is
    /// sorted in runs on disk, so memory does not grow with its length.
    #[arg(long, value_parser = jtrace_merge::stream::parse_size, default_value = "256M")]
    pub memory_budget: usize,
    /// Where sorted runs go when the trace exceeds the budget (default $TMPDIR or /tmp).
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Read the whole trace into memory first (the pre-streaming path; for comparisons).
    #[arg(long, hide = true)]
    pub in_memory: bool,
}

impl StreamArgs {
    /// The merge's options for these flags.
    pub fn options(&self) -> jtrace_merge::stream::StreamOptions {
        jtrace_merge::stream::StreamOptions {
            memory_budget: self.memory_budget,
            temp_dir: self.temp_dir.clone(),
            ..Default::default()
        }
    }
}

/// Arguments of `jtrace text`.
#[derive(clap::Args)]
pub struct TextArgs {
    /// Trace directory.
    pub trace: PathBuf,
    /// Also show off-CPU intervals outside traced methods and every thread in full.
    #[arg(long)]
    pub all: bool,
    /// Frames of each block's recorded stack to show, innermost first (0:
    /// none); blocks of 1 ms or more outside traced methods are shown with
    /// their stack too.
    #[arg(long, default_value_t = 3)]
    pub stack_depth: usize,
    /// Native frames with their source line (` (file.c:123)`, from DWARF in
    /// the binary or its debug file), functions inlined there as frames of
    /// their own.
    #[arg(long)]
    pub lines: bool,
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// Arguments of `jtrace timeline` (the page embeds every invocation and
/// interval it draws: the whole trace when it fits in memory, else the
/// part `--window`/`--thread` select).
#[derive(clap::Args)]
pub struct TimelineArgs {
    /// Trace directory.
    pub trace: PathBuf,
    /// The HTML file to write (self-contained; open it from disk).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Also render the timeline to this PNG, with headless Chromium
    /// (`chromium` on PATH, or $JTRACE_CHROMIUM).
    #[arg(long)]
    pub png: Option<PathBuf>,
    /// Size of the PNG, WIDTHxHEIGHT.
    #[arg(long, default_value = "1600x1000", value_parser = parse_size)]
    pub png_size: (u32, u32),
    /// What to draw, and in how much memory.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Page title (default: the traced command).
    #[arg(long)]
    pub title: Option<String>,
    /// Highlight the critical paths of this method's slowest invocations
    /// across the lanes (`Class.name` glob; as `jtrace why`, docs/WHY.md).
    #[arg(long, value_name = "METHOD")]
    pub why: Option<String>,
    /// How many of the slowest invocations --why offers.
    #[arg(long, default_value_t = 5, requires = "why")]
    pub why_slowest: usize,
    /// Stack tooltips: native frames with their source line (` (file.c:123)`,
    /// DWARF), functions inlined there as frames of their own.
    #[arg(long)]
    pub lines: bool,
    /// How a part (`--window`, `--thread`) is read: streamed, within a budget.
    #[command(flatten)]
    pub stream: StreamArgs,
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once('x').ok_or("expected WIDTHxHEIGHT, e.g. 1600x1000")?;
    let p = |v: &str| v.trim().parse::<u32>().map_err(|e| format!("{v}: {e}"));
    Ok((p(w)?, p(h)?))
}

/// Export formats of `jtrace export`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Perfetto's native protobuf trace, for Perfetto UI (ui.perfetto.dev) and trace_processor:
    /// method slices, the kernel's scheduling with wakers, off-CPU causes, GC/safepoint tracks.
    Perfetto,
    /// A directory of Parquet tables (threads, methods, invocations, off_cpu_intervals,
    /// wakeups, windows; docs/EXPORTS.md), for DuckDB, Spark, DataFusion: needs -o DIR.
    Parquet,
    /// A gzipped pprof profile (profile.proto) for go tool pprof, Pyroscope, Grafana: off-CPU
    /// time (labels `cause`, `thread`) and the CPU samples (`-sample_index=cpu`), with stacks.
    Pprof,
    /// Chrome trace-event JSON, for chrome://tracing (Perfetto reads it too, but prefer
    /// `perfetto`; embeds every event, so it reads the whole trace into memory; the others stream).
    Chrome,
    /// Folded stacks of off-CPU time by cause (`cause;frame;... ns`), for flame graphs and speedscope.
    Collapsed,
    /// One CSV row per method invocation.
    Csv,
    /// The merged text trace (as `jtrace text`).
    Text,
}

/// Arguments of `jtrace export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// Trace directory.
    pub trace: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Output file (default: standard output); for parquet, the directory of the tables.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// collapsed: put the thread (`name [tid]`) after the cause.
    #[arg(long)]
    pub per_thread: bool,
    /// collapsed: also count off-CPU time outside traced methods; text: show everything.
    #[arg(long)]
    pub all: bool,
    /// collapsed: also write the CPU samples, under the root `cpu`.
    #[arg(long)]
    pub cpu: bool,
    /// text: frames of each block's stack to show (innermost first; 0: none).
    #[arg(long, default_value_t = 3)]
    pub stack_depth: usize,
    /// collapsed, text, pprof: native frames with their source line, from
    /// DWARF (` (file.c:123)`; pprof: the function's file and the line's
    /// number), functions inlined there as frames of their own.
    #[arg(long)]
    pub lines: bool,
    // collapsed, csv, text; chrome reads the whole trace, or the part
    // `--window`/`--thread` select, streamed.
    #[command(flatten)]
    pub stream: StreamArgs,
    /// chrome: what to draw, and in how much memory.
    #[command(flatten)]
    pub scope: ScopeArgs,
}

fn open(path: &Path) -> anyhow::Result<Trace> {
    Trace::open(path).with_context(|| format!("cannot open trace {}", path.display()))
}

/// `jtrace timeline TRACE -o timeline.html [--png out.png]`.
pub fn timeline(args: TimelineArgs) -> anyhow::Result<()> {
    let paths = match &args.why {
        Some(method) => {
            let opts = jtrace_merge::why::WhyOptions {
                method: method.clone(),
                selection: jtrace_merge::why::Selection::Slowest(args.why_slowest.max(1)),
                ..Default::default()
            };
            let why = jtrace_merge::why::explain(&args.trace, &opts)
                .with_context(|| format!("cannot explain trace {}", args.trace.display()))?;
            jtrace_timeline::highlight_paths(&why)
        }
        None => Vec::new(),
    };
    let plan = plan(
        &args.trace,
        ViewKind::Html,
        "timeline",
        &args.scope,
        &args.stream.options(),
    )?;
    let opts = html::HtmlOptions {
        title: args.title,
        paths,
        lines: args.lines,
    };
    let mut out = OutputFile::create(&args.output)?;
    plan.draw(|view| html::write_html_view(view, &opts, &mut out))
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    out.commit()?;
    eprintln!("jtrace: wrote {}", args.output.display());
    if let Some(png) = args.png {
        let (w, h) = args.png_size;
        html::screenshot_window(&args.output, &png, w, h, args.scope.window)?;
        eprintln!("jtrace: wrote {}", png.display());
    }
    Ok(())
}

/// `jtrace text TRACE [--all]`: streamed unless `--in-memory`.
pub fn text(args: TextArgs) -> anyhow::Result<()> {
    let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let opts = jtrace_timeline::TextOptions {
        all_events: args.all,
        stack_depth: args.stack_depth,
        lines: args.lines,
    };
    write_text(&args.trace, &opts, &args.stream, out)
}

fn write_text(
    dir: &Path,
    opts: &jtrace_timeline::TextOptions,
    stream: &StreamArgs,
    out: impl Write,
) -> anyhow::Result<()> {
    if stream.in_memory {
        jtrace_timeline::write_text(&open(dir)?, out, opts)?;
    } else {
        jtrace_timeline::write_text_streaming(dir, out, opts, &stream.options())?;
    }
    Ok(())
}

/// `jtrace export TRACE --format perfetto|parquet|pprof|chrome|collapsed|csv|text [-o FILE]`:
/// chrome reads the whole trace, the others stream unless `--in-memory`.
pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let scoped = args.scope.window.is_some() || args.scope.thread.is_some() || args.scope.max_memory.is_some();
    if scoped && args.format != ExportFormat::Chrome {
        anyhow::bail!("--window, --thread and --max-memory are for --format chrome (the other formats stream)");
    }
    let with_lines = matches!(
        args.format,
        ExportFormat::Collapsed | ExportFormat::Text | ExportFormat::Pprof
    );
    if args.lines && !with_lines {
        anyhow::bail!("--lines is for --format collapsed, text and pprof");
    }
    if args.format == ExportFormat::Parquet {
        let Some(dir) = &args.output else {
            anyhow::bail!("--format parquet writes a directory of tables: give it with -o DIR");
        };
        // It always streams (--in-memory gives the same tables).
        let paths = write_parquet(&args.trace, dir, &args.stream.options())?;
        eprintln!("jtrace: wrote {} tables in {}", paths.len(), dir.display());
        return Ok(());
    }
    // Open (and check) the trace before creating the output file.
    let (chrome, whole) = match args.format {
        ExportFormat::Chrome => {
            let p = plan(
                &args.trace,
                ViewKind::Chrome,
                "Chrome export",
                &args.scope,
                &args.stream.options(),
            )?;
            (Some(p), None)
        }
        _ if args.stream.in_memory => (None, Some(open(&args.trace)?)),
        _ => (None, None),
    };
    let mut file = args.output.as_deref().map(OutputFile::create).transpose()?;
    let out: Box<dyn Write + '_> = match &mut file {
        Some(f) => Box::new(f),
        None => Box::new(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    };
    write_export(&args, chrome, whole.as_ref(), out)?;
    if let Some(f) = file {
        f.commit()?;
    }
    Ok(())
}

/// The export of `args.format` to `out`.
fn write_export(
    args: &ExportArgs,
    chrome: Option<crate::view_plan::Plan>,
    whole: Option<&Trace>,
    mut out: Box<dyn Write + '_>,
) -> anyhow::Result<()> {
    let (dir, stream) = (&args.trace, args.stream.options());
    let text_opts = jtrace_timeline::TextOptions {
        all_events: args.all,
        stack_depth: args.stack_depth,
        lines: args.lines,
    };
    if let Some(plan) = chrome {
        return Ok(plan.draw(|view| write_chrome_view(view, out))?);
    }
    let pprof = Pprof { lines: args.lines };
    match (args.format, whole) {
        (ExportFormat::Collapsed, _) => {
            let opts = CollapsedOptions {
                thread: args.per_thread,
                all: args.all,
                cpu: args.cpu,
                lines: args.lines,
                ..Default::default()
            };
            match whole {
                Some(trace) => write_collapsed(trace, &opts, out)?,
                None => write_collapsed_streaming(dir, &opts, out, &stream)?,
            }
        }
        (ExportFormat::Csv, Some(trace)) => write_csv(trace, out)?,
        (ExportFormat::Csv, None) => write_csv_streaming(dir, out, &stream)?,
        (ExportFormat::Perfetto, Some(trace)) => write_perfetto(trace, out)?,
        (ExportFormat::Perfetto, None) => write_perfetto_streaming(dir, out, &stream)?,
        (ExportFormat::Text, Some(trace)) => jtrace_timeline::write_text(trace, out, &text_opts)?,
        (ExportFormat::Text, None) => write_text(dir, &text_opts, &args.stream, out)?,
        (ExportFormat::Chrome, _) => unreachable!("chrome is drawn from its plan"),
        (ExportFormat::Parquet, _) => unreachable!("parquet is written above"),
        (ExportFormat::Pprof, Some(trace)) => pprof.write_trace(trace, &mut out)?,
        (ExportFormat::Pprof, None) => pprof.write_dir(dir, &mut out, &stream)?,
    }
    Ok(())
}

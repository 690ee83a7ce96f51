//! `jtrace timeline` and `jtrace export`: the CLI side of the views in
//! jtrace-timeline.

use anyhow::Context;
use jtrace_merge::Trace;
use jtrace_timeline::{export, html};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `jtrace timeline`.
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
    /// Time window of the PNG, FROM..TO since the trace start (e.g.
    /// 120ms..180ms; units ns, us, ms, s); default: the whole trace.
    #[arg(long, requires = "png", value_parser = html::parse_window)]
    pub window: Option<(u64, u64)>,
    /// Page title (default: the traced command).
    #[arg(long)]
    pub title: Option<String>,
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once('x').ok_or("expected WIDTHxHEIGHT, e.g. 1600x1000")?;
    let p = |v: &str| v.trim().parse::<u32>().map_err(|e| format!("{v}: {e}"));
    Ok((p(w)?, p(h)?))
}

/// Export formats of `jtrace export`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Chrome trace-event JSON, for Perfetto UI (ui.perfetto.dev) and chrome://tracing.
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
    /// Output file (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// collapsed: put the thread (`name [tid]`) after the cause.
    #[arg(long)]
    pub per_thread: bool,
    /// collapsed: also count off-CPU time outside traced methods; text: show everything.
    #[arg(long)]
    pub all: bool,
}

fn open(path: &Path) -> anyhow::Result<Trace> {
    Trace::open(path).with_context(|| format!("cannot open trace {}", path.display()))
}

fn create(path: &Path) -> anyhow::Result<std::io::BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(std::io::BufWriter::with_capacity(1 << 20, f))
}

/// `jtrace timeline TRACE -o timeline.html [--png out.png]`.
pub fn timeline(args: TimelineArgs) -> anyhow::Result<()> {
    let trace = open(&args.trace)?;
    let opts = html::HtmlOptions { title: args.title };
    html::write_html(&trace, &opts, create(&args.output)?)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!("jtrace: wrote {}", args.output.display());
    if let Some(png) = args.png {
        let (w, h) = args.png_size;
        html::screenshot_window(&args.output, &png, w, h, args.window)?;
        eprintln!("jtrace: wrote {}", png.display());
    }
    Ok(())
}

/// `jtrace export TRACE --format chrome|collapsed|csv|text [-o FILE]`.
pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let trace = open(&args.trace)?;
    let out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(create(p)?),
        None => Box::new(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    };
    match args.format {
        ExportFormat::Chrome => export::write_chrome(&trace, out)?,
        ExportFormat::Collapsed => {
            let opts = export::CollapsedOptions {
                thread: args.per_thread,
                all: args.all,
            };
            export::write_collapsed(&trace, &opts, out)?
        }
        ExportFormat::Csv => export::write_csv(&trace, out)?,
        ExportFormat::Text => {
            jtrace_timeline::write_text(&trace, out, &jtrace_timeline::TextOptions { all_events: args.all })?
        }
    }
    Ok(())
}

//! `jtrace timeline`: one self-contained HTML file (no network) with a
//! per-thread timeline: thread state coloured by off-CPU cause, the method
//! spans under it flame-chart style, zoom/pan, details, search and filter.
//!
//! The page embeds the trace as JSON (columnar arrays per thread, times in ns
//! relative to the trace start) and draws it on a canvas with level-of-detail
//! merging, so it stays interactive with millions of events. See
//! `assets/timeline.js` for the viewer.

use crate::export::{collect, jvm_windows, thread_order, time_origin, window_name, ThreadData};
use jtrace_merge::{describe_evidence, Cause, Evidence, OffCpu, Trace};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TEMPLATE: &str = include_str!("assets/timeline.html");
const CSS: &str = include_str!("assets/timeline.css");
const JS: &str = include_str!("assets/timeline.js");

/// Options of the HTML timeline.
#[derive(Debug, Clone, Default)]
pub struct HtmlOptions {
    /// Page title; defaults to the traced command.
    pub title: Option<String>,
}

/// Sparse off-CPU split: `[cause index, ns, cause index, ns, …]`, or `0` when
/// nothing was off CPU (most spans), to keep the page small.
fn sparse(o: &OffCpu) -> serde_json::Value {
    if o.total() == 0 {
        return serde_json::Value::from(0);
    }
    let mut v = Vec::new();
    for (c, ns) in o.nonzero() {
        v.push(c as u64);
        v.push(ns);
    }
    serde_json::Value::from(v)
}

/// Method spans of one thread, column by column (same index = same span).
#[derive(Serialize, Default)]
struct Spans {
    /// Entry, ns since the trace start.
    s: Vec<u64>,
    /// Wall ns.
    d: Vec<u64>,
    /// Depth.
    z: Vec<u32>,
    /// Method index.
    m: Vec<u32>,
    /// CPU ns.
    c: Vec<u64>,
    /// Voluntary switches.
    v: Vec<u64>,
    /// Involuntary switches.
    i: Vec<u64>,
    /// Flags: 1 exception, 2 unfinished, 4 recursive (not outermost).
    f: Vec<u8>,
    /// Off-CPU split (see [`sparse`]).
    o: Vec<serde_json::Value>,
}

/// Off-CPU intervals of one thread, column by column.
#[derive(Serialize, Default)]
struct Offs {
    /// Switch-out, ns since the trace start.
    s: Vec<u64>,
    /// Switch-in.
    e: Vec<u64>,
    /// 1 preempted (involuntary), 0 blocked, 2 never switched back in.
    p: Vec<u8>,
    /// Waker tid, or -1.
    w: Vec<i64>,
    /// Wakeup time, ns since the trace start (0 if none).
    wt: Vec<u64>,
    /// Split by cause (see [`sparse`]).
    k: Vec<serde_json::Value>,
    /// Evidence text, as an index into [`PageJson::strings`] (0 = none).
    x: Vec<u32>,
}

/// Strings shared by many items (evidence texts), stored once in the page.
struct Interner {
    strings: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    fn new() -> Interner {
        Interner {
            strings: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
    fn get(&mut self, s: String) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.clone());
        self.index.insert(s, i);
        i
    }
}

/// A GC or safepoint window, drawn across every lane.
#[derive(Serialize)]
struct WindowJson {
    /// Cause index (into [`PageJson::causes`]).
    c: usize,
    /// "GC" or "safepoint".
    kind: &'static str,
    /// Number among the JVM's windows of that kind.
    n: u32,
    pid: u32,
    /// Begin and end, ns since the trace start.
    s: u64,
    e: u64,
    /// No end was recorded: the window runs to the JVM's last event.
    open: bool,
}

#[derive(Serialize)]
struct ThreadJson {
    tid: u32,
    pid: u32,
    name: String,
    comm: String,
    /// 0 application, 1 JVM (Java, group system), 2 native.
    kind: u8,
    group: String,
    daemon: bool,
    first: u64,
    last: u64,
    wall: u64,
    cpu: u64,
    off: Vec<u64>,
    vol: u64,
    invol: u64,
    anomalies: u64,
    spans: Spans,
    offs: Offs,
}

#[derive(Serialize)]
struct PageJson {
    title: String,
    command: String,
    pid: u32,
    /// CLOCK_MONOTONIC of time 0, as a string (it may exceed 2^53).
    t0: String,
    /// CLOCK_REALTIME at the trace start, as a string.
    realtime: String,
    start_date: String,
    duration: u64,
    complete: bool,
    causes: Vec<&'static str>,
    /// `[class, name, signature]` by method index.
    methods: Vec<[String; 3]>,
    lost_kernel: u64,
    lost_jvm: u64,
    problems: Vec<String>,
    events: u64,
    /// Interned strings (evidence texts), referenced by index.
    strings: Vec<String>,
    /// JVM-wide stops, by start.
    windows: Vec<WindowJson>,
    threads: Vec<ThreadJson>,
}

fn thread_json(trace: &Trace, strings: &mut Interner, t: &ThreadData, pid: u32, t0: u64) -> ThreadJson {
    let rel = |ts: u64| ts.saturating_sub(t0);
    let mut spans = Spans::default();
    for s in &t.spans {
        let b = &s.inv.breakdown;
        spans.s.push(rel(s.inv.entry));
        spans.d.push(b.wall);
        spans.z.push(s.depth as u32);
        spans.m.push(s.inv.method);
        spans.c.push(b.cpu);
        spans.v.push(b.voluntary);
        spans.i.push(b.involuntary);
        spans
            .f
            .push(s.inv.exception as u8 | (s.inv.unfinished as u8) << 1 | (!s.inv.outermost as u8) << 2);
        spans.o.push(sparse(&b.off));
    }
    let mut offs = Offs::default();
    for o in &t.offs {
        offs.s.push(rel(o.start));
        offs.e.push(rel(o.end));
        offs.p.push(if o.open { 2 } else { o.preempted as u8 });
        offs.w.push(o.wake.map_or(-1, |w| w.waker_tid as i64));
        offs.wt.push(o.wake.map_or(0, |w| rel(w.ts)));
        offs.k.push(sparse(&o.split.off));
        offs.x.push(match o.evidence {
            // The page says "preempted" from `p` already.
            Evidence::None | Evidence::Preempted => 0,
            e => strings.get(describe_evidence(trace, &e)),
        });
    }
    let b = &t.totals.breakdown;
    ThreadJson {
        tid: t.info.tid,
        pid,
        name: t.info.display_name().to_string(),
        comm: t.info.comm.clone(),
        kind: t.category(),
        group: t.info.group.clone(),
        daemon: t.info.daemon,
        first: rel(t.info.first_ts),
        last: rel(t.info.last_ts),
        wall: b.wall,
        cpu: b.cpu,
        off: b.off.0.to_vec(),
        vol: b.voluntary,
        invol: b.involuntary,
        anomalies: t.totals.anomalies,
        spans,
        offs,
    }
}

/// The page's data as JSON, safe to put inside a `<script>` element.
fn page_json(trace: &Trace, opts: &HtmlOptions) -> serde_json::Result<String> {
    let threads = collect(trace);
    let t0 = time_origin(trace);
    let m = &trace.meta;
    let last = threads
        .iter()
        .map(|t| t.info.last_ts)
        .max()
        .unwrap_or(t0)
        .max(m.end_monotonic_ns);
    let mut problems = trace.losses.truncated.clone();
    problems.extend(trace.losses.agent_errors.iter().map(|e| format!("agent: {e}")));
    if !m.complete {
        problems.push("recording did not finish cleanly: this is a readable prefix".into());
    }
    let command = m.command.join(" ");
    let mut strings = Interner::new();
    let threads: Vec<ThreadJson> = thread_order(&threads)
        .into_iter()
        .map(|i| {
            let t = &threads[i];
            let pid = if t.info.tgid != 0 { t.info.tgid } else { m.pid };
            thread_json(trace, &mut strings, t, pid, t0)
        })
        .collect();
    let windows = jvm_windows(trace)
        .into_iter()
        .map(|w| WindowJson {
            c: w.cause as usize,
            kind: window_name(w.cause),
            n: w.seq,
            pid: w.pid,
            s: w.start.saturating_sub(t0),
            e: w.end.saturating_sub(t0),
            open: w.open,
        })
        .collect();
    let page = PageJson {
        title: opts.title.clone().unwrap_or_else(|| {
            if command.is_empty() {
                trace.dir.display().to_string()
            } else {
                command.clone()
            }
        }),
        command,
        pid: m.pid,
        t0: t0.to_string(),
        realtime: m.start_realtime_ns.to_string(),
        start_date: crate::fmt_realtime(m.start_realtime_ns),
        duration: last.saturating_sub(t0),
        complete: m.complete,
        causes: Cause::ALL.iter().map(|c| c.name()).collect(),
        methods: trace
            .methods
            .iter()
            .map(|mi| [mi.class.clone(), mi.name.clone(), mi.signature.clone()])
            .collect(),
        lost_kernel: trace.losses.kernel,
        lost_jvm: trace.losses.jvm,
        problems,
        events: trace.kernel_records + trace.jvm_records,
        strings: strings.strings,
        windows,
        threads,
    };
    // `<` only occurs inside JSON strings, where `\u003c` means the same, and
    // then no `</script>` or `<!--` can end the script element early.
    Ok(serde_json::to_string(&page)?.replace('<', "\\u003c"))
}

/// Writes the timeline of `trace` as one self-contained HTML page.
pub fn write_html(trace: &Trace, opts: &HtmlOptions, mut out: impl Write) -> io::Result<()> {
    let data = page_json(trace, opts)?;
    let title = html_escape(
        &opts
            .title
            .clone()
            .unwrap_or_else(|| format!("jtrace timeline: {}", trace.meta.command.join(" "))),
    );
    let (head, rest) = TEMPLATE.split_once("{{DATA}}").expect("template has {{DATA}}");
    let head = head.replace("{{TITLE}}", &title).replace("{{CSS}}", CSS);
    out.write_all(head.as_bytes())?;
    out.write_all(data.as_bytes())?;
    out.write_all(rest.replace("{{JS}}", JS).as_bytes())?;
    out.flush()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Finds a Chromium (or Chrome) binary: `$JTRACE_CHROMIUM`, then the usual
/// names on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("JTRACE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "chrome",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Flags for a headless Chromium that touches no network and no profile of
/// the user's: every run gets a fresh `user_data_dir`.
pub fn chromium_flags(user_data_dir: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--mute-audio",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(std::iter::once(format!("--user-data-dir={}", user_data_dir.display())))
    .collect()
}

/// Parses a time window `FROM..TO` of a trace, times since its start with
/// a unit (`ns`, `us`/`µs`, `ms`, `s`; none = ms), e.g. `120ms..180ms`,
/// `1.5s..2s`; returns ns.
pub fn parse_window(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s}: expected FROM..TO, e.g. 120ms..180ms"))?;
    let (a, b) = (parse_time(a)?, parse_time(b)?);
    if b <= a {
        return Err(format!("{s}: the window ends before it starts"));
    }
    Ok((a, b))
}

fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "" | "ms" => 1e6,
        "s" => 1e9,
        u => return Err(format!("{s}: unknown unit {u:?} (ns, us, ms, s)")),
    };
    let v: f64 = num.parse().map_err(|_| format!("{s}: not a time"))?;
    Ok((v * scale).round() as u64)
}

/// Renders a timeline HTML file to a PNG with headless Chromium
/// (`--screenshot`); the page draws synchronously on load, so the shot
/// shows the whole trace.
pub fn screenshot(html: &Path, png: &Path, width: u32, height: u32) -> anyhow::Result<()> {
    screenshot_window(html, png, width, height, None)
}

/// [`screenshot`] of the time window `window` (ns since the trace start,
/// see [`parse_window`]) instead of the whole trace.
pub fn screenshot_window(
    html: &Path,
    png: &Path,
    width: u32,
    height: u32,
    window: Option<(u64, u64)>,
) -> anyhow::Result<()> {
    let chromium = find_chromium()
        .ok_or_else(|| anyhow::anyhow!("no chromium found for --png (install chromium or set JTRACE_CHROMIUM)"))?;
    let profile = std::env::temp_dir().join(format!("jtrace-chromium-{}-{}", std::process::id(), nanos()));
    std::fs::create_dir_all(&profile)?;
    let html = std::fs::canonicalize(html)?;
    let png_abs = if png.is_absolute() {
        png.to_path_buf()
    } else {
        std::env::current_dir()?.join(png)
    };
    let _ = std::fs::remove_file(&png_abs);
    let mut child = Command::new(&chromium)
        .args(chromium_flags(&profile))
        .arg(format!("--screenshot={}", png_abs.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!(
            "file://{}{}",
            html.display(),
            window.map_or(String::new(), |(a, b)| format!("#view={a},{b}"))
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(profile.join("stderr.log"))?))
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", chromium.display()))?;
    // Chromium sometimes lingers after writing the shot; do not hang on it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(profile.join("stderr.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&profile);
    if !png_abs.is_file() {
        anyhow::bail!("chromium wrote no screenshot (status {status:?}): {}", err.trim());
    }
    Ok(())
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::parse_window;

    #[test]
    fn windows_parse_with_units() {
        assert_eq!(parse_window("120ms..180ms"), Ok((120_000_000, 180_000_000)));
        assert_eq!(parse_window("1.5s..2s"), Ok((1_500_000_000, 2_000_000_000)));
        assert_eq!(parse_window("10..20"), Ok((10_000_000, 20_000_000)));
        assert_eq!(parse_window("500us..900µs"), Ok((500_000, 900_000)));
        assert!(parse_window("20ms..10ms").is_err());
        assert!(parse_window("10ms").is_err());
        assert!(parse_window("1h..2h").is_err());
        assert!(parse_window("x..2").is_err());
    }
}

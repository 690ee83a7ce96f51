//! Headless Chromium for the HTML timeline: finding a browser, its flags,
//! and rendering a page (or a time window of it, `#view=`) to a PNG.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// One time of [`parse_window`], in ns.
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

/// Wall-clock ns, to name a fresh profile directory.
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

//! Progress on stderr for the commands that read a whole trace (`report`,
//! `why`, `timeline`, `export`): a spinner with the elapsed time, shown
//! only when stderr is a terminal and only once the work has taken more
//! than [`SHOW_AFTER`] (a quick run prints nothing extra), cleared when
//! the work ends.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the work runs before the spinner appears; `JTRACE_PROGRESS_AFTER_MS`
/// overrides it (the tests show it at once).
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// The spinner of one command; it disappears when dropped.
pub struct Progress {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
    shower: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts the spinner of `command` (shown later, if ever).
    pub fn start(command: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let done = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Progress {
                bar,
                done,
                shower: None,
            };
        }
        let style = ProgressStyle::with_template("{spinner} jtrace {msg}: working ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message(command.to_string());
        let after = std::env::var("JTRACE_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(SHOW_AFTER, Duration::from_millis);
        let (b, d) = (bar.clone(), done.clone());
        let shower = std::thread::spawn(move || {
            let step = Duration::from_millis(20);
            let mut waited = Duration::ZERO;
            while waited < after {
                if d.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(step);
                waited += step;
            }
            if !d.load(Ordering::Relaxed) {
                b.set_draw_target(ProgressDrawTarget::stderr());
                b.enable_steady_tick(Duration::from_millis(100));
            }
        });
        Progress {
            bar,
            done,
            shower: Some(shower),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.shower.take() {
            let _ = h.join();
        }
        self.bar.finish_and_clear();
    }
}

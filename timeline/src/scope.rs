//! The in-memory views of a trace too large to hold whole: the model of
//! the part a [`Scope`] selects (a time window, some threads), built by a
//! streamed walk in bounded memory, and the memory a view needs.
//!
//! The HTML timeline and the Chrome export embed every invocation and
//! interval they draw in one document, so their memory grows with what
//! they draw. Before drawing, the CLI estimates it ([`view_bytes`]) and,
//! when the whole trace would not fit, either draws the part the user
//! selected (memory bounded by the part, checked as it is collected:
//! [`collect_scoped`] stops past a limit) or refuses with what to do.

use crate::model::{Collector, Scope, View};
use crate::windows::{jvm_windows_of_stops, JvmWindow};
use jtrace_format as fmt;
use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::Trace;
use std::path::Path;

/// Which in-memory view: their memory per drawn item differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    /// The HTML timeline (`jtrace timeline`).
    Html,
    /// The Chrome trace-event JSON (`jtrace export --format chrome`).
    Chrome,
}

impl ViewKind {
    /// Peak bytes per event of the trace when drawn whole: the events read,
    /// the model (an invocation or interval is about 200 bytes) and the
    /// document being built. Measured (BENCHMARKS.md) with a margin: HTML
    /// 151, Chrome 83 bytes per event on 1.4 M events.
    pub fn bytes_per_event(self) -> u64 {
        match self {
            ViewKind::Html => 200,
            ViewKind::Chrome => 120,
        }
    }

    /// Bytes per invocation or interval a scoped view keeps (the events
    /// themselves are streamed, within the stream budget).
    pub fn bytes_per_item(self) -> u64 {
        match self {
            ViewKind::Html => 500,
            ViewKind::Chrome => 300,
        }
    }
}

/// The events in a trace directory's streams, at most: a JVM stream's
/// method events take one packed entry each in METHOD_BATCH records, every
/// other record at least the smallest kernel record — known from the file
/// sizes (and the record sizes of [`jtrace_format`]), without reading them.
pub fn events_upper_bound(dir: &Path) -> std::io::Result<u64> {
    let (kernel_record, batched) = (kernel_record_min(), batch_event_len());
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let len = e.metadata()?.len();
        match fmt::parse_stream_file(&name) {
            Some((fmt::KERNEL_STREAM, _)) => n += len / kernel_record,
            Some(_) => n += len / batched,
            None => {}
        }
    }
    Ok(n)
}

/// Bytes of the smallest kernel record: a header and the smallest fixed
/// payload (the records with variable parts are longer).
fn kernel_record_min() -> u64 {
    let payloads = [
        fmt::SwitchOut::LEN,
        fmt::SwitchIn::LEN,
        fmt::Wakeup::LEN,
        fmt::Fork::LEN,
        fmt::TaskInfo::LEN,
        fmt::Syscall::LEN,
        fmt::PageFault::LEN,
        fmt::BlockIo::LEN,
        fmt::LibCall::LEN,
    ];
    let smallest = payloads.into_iter().min().expect("payload sizes");
    (fmt::RECORD_HEADER_LEN + smallest) as u64
}

/// Bytes one more event adds to a METHOD_BATCH record, as the format's
/// writer packs it.
fn batch_event_len() -> u64 {
    let (mut w, mut buf) = (fmt::BatchWriter::new(0), Vec::new());
    w.push(&mut buf, 0, 0, fmt::BatchedKind::Entry);
    let one = buf.len();
    w.push(&mut buf, 0, 0, fmt::BatchedKind::Exit);
    (buf.len() - one) as u64
}

/// Memory a view of `events` events needs, whole.
pub fn view_bytes(kind: ViewKind, events: u64) -> u64 {
    events.saturating_mul(kind.bytes_per_event())
}

/// A scoped model: the trace's tables, the threads drawn, the JVM stops
/// drawn, and the scope (its window made absolute).
pub type ScopedModel = (Trace, Vec<crate::ThreadData>, Vec<JvmWindow>, Scope);

/// Reads the part of the trace in `dir` selected by `window` (FROM..TO in
/// ns since the trace's start, [`crate::time_origin`]) and `thread` (a
/// name glob or a tid) into a model, streaming the walk within
/// `stream_opts`' budget: what it keeps is bounded by `max_items`
/// invocations and intervals (an error past it, saying so).
///
/// With a window, the calls wholly outside it are left out of the sort and
/// the walk ([`StreamOptions::calls_within`]): the trace is read once, but
/// only the window is sorted and walked. The model is exactly
/// [`collect_scoped_full`]'s.
pub fn collect_scoped(
    dir: &Path,
    window: Option<(u64, u64)>,
    thread: Option<String>,
    stream_opts: &StreamOptions,
    max_items: usize,
) -> anyhow::Result<ScopedModel> {
    // The window is relative to the trace's origin, known once the trace
    // is read: assume the recording's start (the origin unless an event
    // is earlier), and read again in full if it was not.
    let start = jtrace_merge::Meta::load(dir).map_or(0, |m| m.start_monotonic_ns);
    if let (Some((from, to)), true) = (window, start > 0) {
        let opts = StreamOptions {
            calls_within: Some((start.saturating_add(from), start.saturating_add(to))),
            ..stream_opts.clone()
        };
        let (trace, events) = crate::open_streamed(dir, &opts)?;
        if crate::time_origin(&trace) == start {
            return collect(trace, events, window, thread, max_items);
        }
    }
    collect_scoped_full(dir, window, thread, stream_opts, max_items)
}

/// [`collect_scoped`] from a walk of every event of the trace (what the
/// windowed read must equal; for comparisons).
pub fn collect_scoped_full(
    dir: &Path,
    window: Option<(u64, u64)>,
    thread: Option<String>,
    stream_opts: &StreamOptions,
    max_items: usize,
) -> anyhow::Result<ScopedModel> {
    let opts = StreamOptions {
        calls_within: None,
        ..stream_opts.clone()
    };
    let (trace, events) = crate::open_streamed(dir, &opts)?;
    collect(trace, events, window, thread, max_items)
}

/// The model of the part of a streamed trace `window` and `thread` select.
fn collect(
    trace: Trace,
    events: stream::SortedEvents,
    window: Option<(u64, u64)>,
    thread: Option<String>,
    max_items: usize,
) -> anyhow::Result<ScopedModel> {
    let t0 = crate::time_origin(&trace);
    let scope = Scope {
        window: window.map(|(a, b)| (t0 + a, t0 + b)),
        thread,
    };
    let mut c = Collector::scoped(scope.clone(), max_items.max(1));
    stream::analyze(&trace, events, &mut c)?;
    if c.overflow {
        anyhow::bail!(
            "the part of the trace selected still holds more than {max_items} invocations and off-CPU intervals, \
             more than the memory allowed; select less (a shorter --window, one --thread)"
        );
    }
    let windows = (jvm_windows_of_stops(&trace).into_iter())
        .filter(|w| scope.keeps(w.start, w.end))
        .collect();
    Ok((trace, c.threads, windows, scope))
}

impl<'a> View<'a> {
    /// The view of a scoped model ([`collect_scoped`]).
    pub fn scoped(
        trace: &'a Trace,
        threads: Vec<crate::ThreadData>,
        windows: Vec<JvmWindow>,
        scope: Scope,
    ) -> View<'a> {
        View {
            trace,
            threads,
            windows,
            scope,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams of the smallest records: the bound counts at least every event.
    #[test]
    fn the_bound_is_at_least_the_events() {
        let dir = std::env::temp_dir().join(format!("jtrace-scope-bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let n = 1000;
        let mut enc = fmt::Encoder::new();
        for i in 0..n {
            let payload = fmt::Payload::SwitchIn(fmt::SwitchIn {
                tgid: 1,
                cpu: 0,
                prev_tid: 0,
                reserved: 0,
            });
            enc.record(&fmt::Record { tid: 1, ts: i, payload });
        }
        std::fs::write(dir.join(fmt::KERNEL_FILE), &enc.buf).unwrap();
        let (mut w, mut jvm) = (fmt::BatchWriter::new(1), Vec::new());
        for i in 0..n {
            w.push(&mut jvm, i, 7, fmt::BatchedKind::Entry);
        }
        w.finish(&mut jvm);
        std::fs::write(dir.join(format!("{}1.bin", fmt::JVM_FILE_PREFIX)), &jvm).unwrap();
        let bound = events_upper_bound(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!((2 * n..2 * n + 10).contains(&bound), "{bound}");
    }
}

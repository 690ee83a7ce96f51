//! Ring recordings (`--max-size`, `--max-age`): the chunk files' names,
//! and the [`Keeper`] that deletes the oldest chunks while the recording
//! runs (every producer begins its own chunks: bpf/src/chunks.rs,
//! agent/src/stream/chunks.rs).
//!
//! A finished chunk (any but its stream's newest) ends where the next one
//! begins. The keeper deletes a finished chunk once it ended more than
//! `--max-age` ago, and, while the trace is larger than `--max-size`, the
//! finished chunk that ended first, of whichever stream; then any finished
//! chunk that ends before the window every stream still covers. It works
//! through [`TraceDir`] (the directory's descriptor, nothing followed),
//! holding the directory's lock so that `jtrace dump` never links half a
//! ring.

use crate::clock::clock_ns;
use crate::disk::{DiskPlan, Ring};
use crate::trace_dir::TraceDir;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the keeper looks at the chunks.
const EVERY: Duration = Duration::from_millis(100);

/// The name of the first file of stream `stream` (`kernel`, `jvm-<pid>`):
/// its only file, or its first chunk in a ring recording.
pub(crate) fn first_stream_file(stream: &str, disk: &DiskPlan) -> String {
    match disk.ring {
        Some(_) => jtrace_format::chunk_file(stream, 0),
        None => format!("{stream}.bin"),
    }
}

/// What fell out of the ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// Chunks deleted.
    pub(crate) chunks: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// The latest end of a deleted chunk: the window begins at or after it.
    pub(crate) until_ns: Option<u64>,
}

/// The thread that keeps a ring recording within its bounds.
pub(crate) struct Keeper {
    stop: Arc<AtomicBool>,
    dropped: Arc<Mutex<Dropped>>,
    thread: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts keeping the chunks of `dir` within `ring`.
    pub(crate) fn start(dir: TraceDir, ring: Ring) -> anyhow::Result<Keeper> {
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(Mutex::new(Dropped::default()));
        let (s, d) = (stop.clone(), dropped.clone());
        let thread = std::thread::Builder::new().name("jtrace-ring".into()).spawn(move || {
            while !s.load(Ordering::Acquire) {
                keep(&dir, &ring, &d);
                std::thread::sleep(EVERY);
            }
            keep(&dir, &ring, &d);
        })?;
        Ok(Keeper {
            stop,
            dropped,
            thread: Some(thread),
        })
    }

    /// Stops the keeper (after a last pass) and says what fell out.
    pub(crate) fn stop(mut self) -> Dropped {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.dropped.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// One chunk as the keeper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkFile {
    pub(crate) name: String,
    pub(crate) bytes: u64,
    /// When it began (its CHUNK record), if it says.
    pub(crate) start: Option<u64>,
    /// When it ended (the next chunk's start); None for the newest.
    pub(crate) end: Option<u64>,
    /// Its writer finished it (truncated it to its data, marked it complete).
    pub(crate) done: bool,
}

/// One pass: deletes what is out of bounds.
fn keep(dir: &TraceDir, ring: &Ring, dropped: &Mutex<Dropped>) {
    dir.locked(true, || {
        let Ok(list) = dir.chunks() else { return };
        let mut streams: BTreeMap<String, Vec<ChunkFile>> = BTreeMap::new();
        for (name, stream, seq, bytes) in list {
            let start = dir.chunk_start(&name);
            streams.entry(stream).or_default().push(ChunkFile {
                name: format!("{seq:020}\0{name}"),
                bytes,
                start: start.map(|s| s.0),
                end: None,
                done: start.is_some_and(|s| s.1),
            });
        }
        let mut streams: Vec<Vec<ChunkFile>> = streams.into_values().collect();
        for s in &mut streams {
            s.sort_by(|a, b| a.name.cmp(&b.name));
            for c in s.iter_mut() {
                c.name = c.name.split('\0').nth(1).unwrap_or_default().to_string();
            }
            for i in 1..s.len() {
                s[i - 1].end = s[i].start;
            }
        }
        for name in to_delete(&streams, ring, clock_ns(rustix::time::ClockId::Monotonic)) {
            let Some(c) = streams.iter().flatten().find(|c| c.name == name) else {
                continue;
            };
            match dir.remove_chunk(&name) {
                Ok(()) => {
                    if let Ok(mut d) = dropped.lock() {
                        d.chunks += 1;
                        d.bytes += c.bytes;
                        d.until_ns = d.until_ns.max(c.end);
                    }
                }
                Err(e) => eprintln!("jtrace: {e:#}"),
            }
        }
    });
}

/// The chunks to delete from `streams` (each in order) at `now`.
pub(crate) fn to_delete(streams: &[Vec<ChunkFile>], ring: &Ring, now: u64) -> Vec<String> {
    // Finished chunks, by when they ended; a chunk that does not say when
    // (being written as the keeper looks) is kept.
    let mut finished: Vec<(u64, usize, usize)> = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        for (j, c) in s.iter().enumerate() {
            if let (Some(end), true) = (c.end, j + 1 < s.len() && c.done) {
                finished.push((end, i, j));
            }
        }
    }
    finished.sort();
    let mut gone = vec![Vec::new(); streams.len()];
    let mut total: u64 = streams.iter().flatten().map(|c| c.bytes).sum();
    for &(end, i, j) in &finished {
        let old = ring.max_age_ns.is_some_and(|age| end.saturating_add(age) < now);
        let big = ring.max_size.is_some_and(|max| total > max);
        // Chunks of one stream go in order: a later one never before an earlier one.
        if (old || big) && gone[i].len() == j {
            gone[i].push(j);
            total -= streams[i][j].bytes;
        }
    }
    // What ends before the window every stream still covers is of no use.
    let window = streams
        .iter()
        .zip(&gone)
        .filter_map(|(s, g)| s.get(g.len()).and_then(|c| c.start))
        .max();
    if let Some(w) = window {
        for &(end, i, j) in &finished {
            if end <= w && gone[i].len() == j {
                gone[i].push(j);
            }
        }
    }
    gone.iter()
        .enumerate()
        .flat_map(|(i, g)| g.iter().map(move |&j| streams[i][j].name.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(stream: &str, spans: &[(u64, u64)]) -> Vec<ChunkFile> {
        let mut v: Vec<ChunkFile> = spans
            .iter()
            .enumerate()
            .map(|(i, &(start, bytes))| ChunkFile {
                name: jtrace_format::chunk_file(stream, i as u64),
                bytes,
                start: Some(start),
                end: None,
                done: true,
            })
            .collect();
        for i in 1..v.len() {
            v[i - 1].end = v[i].start;
        }
        v
    }

    fn ring(size: Option<u64>, age: Option<u64>) -> Ring {
        Ring {
            max_size: size,
            max_age_ns: age,
            chunk_bytes: 0,
            chunk_ns: 0,
        }
    }

    /// Over the size bound, the finished chunks that ended first go, of
    /// any stream, never a stream's newest; then those that end before the
    /// window the remaining chunks cover.
    #[test]
    fn the_oldest_finished_chunks_go_first() {
        let k = chunks("kernel", &[(0, 10), (100, 10), (200, 10), (300, 10)]);
        let j = chunks("jvm-7", &[(50, 30), (250, 30)]);
        // 100 bytes, at most 70: jvm-7.0 (ends 250) would be third;
        // kernel.0 (ends 100) and kernel.1 (ends 200) first: 80 left,
        // then jvm-7.0: 50.
        let d = to_delete(&[k.clone(), j.clone()], &ring(Some(70), None), 1000);
        assert_eq!(d, ["kernel.000000.bin", "kernel.000001.bin", "jvm-7.000000.bin"]);
        // At most 85: kernel.0 and .1 go (80 left); the window then begins
        // at jvm-7.0's 50 and kernel.2's 200: kernel.2 ends after it and stays.
        let d = to_delete(&[k.clone(), j.clone()], &ring(Some(85), None), 1000);
        assert_eq!(d, ["kernel.000000.bin", "kernel.000001.bin"]);
        // Nothing finished can go: one chunk each.
        let lone = to_delete(
            &[chunks("kernel", &[(0, 100)]), chunks("jvm-7", &[(0, 100)])],
            &ring(Some(10), None),
            1000,
        );
        assert!(lone.is_empty());
    }

    /// By age: chunks that ended more than max_age ago.
    #[test]
    fn chunks_that_ended_long_ago_go() {
        let k = chunks("kernel", &[(0, 1), (100, 1), (200, 1), (300, 1)]);
        let d = to_delete(&[k], &ring(None, Some(150)), 400);
        assert_eq!(d, ["kernel.000000.bin", "kernel.000001.bin"]);
    }
}

//! The ring-buffer consumer: samples split into records and appended to
//! the stream file (with the FILE_PATH records they call for), until the
//! recorder stops; then the programs are detached and what is left drained.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::offset_of;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use jtrace_format::{kind, Encoder, RECORD_HEADER_LEN};
use libbpf_rs::{Link, MapCore, MapFlags, RingBuffer, RingBufferBuilder};

use crate::paths::PathResolver;
use crate::skel;
use crate::stats::ConsumerCounts;

/// How long one ring buffer poll may wait. The BPF side only wakes the
/// consumer when the buffer is a quarter full, so this is also the normal
/// latency from event to file.
const POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// The file is flushed at least this often so that a killed jtrace still
/// leaves a readable prefix.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// The consumer side of the ring buffer: appends samples to the file.
pub(crate) struct Sink {
    out: BufWriter<File>,
    records: u64,
    malformed: u64,
    /// WAKEUP records written by [`flush_pending_wakeups`]: not counted by
    /// the BPF side.
    flushed_wakeups: u64,
    error: Option<std::io::Error>,
    paths: PathResolver,
}

impl Sink {
    /// A sink appending to `file`, which holds the stream so far.
    pub(crate) fn new(file: File) -> Sink {
        Sink {
            out: BufWriter::with_capacity(1 << 20, file),
            records: 0,
            malformed: 0,
            flushed_wakeups: 0,
            error: None,
            paths: PathResolver::default(),
        }
    }

    /// One ring-buffer sample: one record, or several written together (a
    /// switch with its SYSCALL / PAGE_FAULT, SWITCH_OUT and SWITCH_IN).
    pub(crate) fn sample(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // The BPF side writes each record's length into its header; a
            // length that disagrees with the sample would desynchronise every
            // reader after it, so the rest of the sample is dropped.
            let len = match data.get(2..4) {
                Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize,
                None => 0,
            };
            if len < RECORD_HEADER_LEN || len > data.len() || len & 7 != 0 {
                self.malformed += 1;
                return;
            }
            let (rec, rest) = data.split_at(len);
            self.record(rec);
            data = rest;
        }
    }

    fn record(&mut self, data: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.out.write_all(data) {
            Ok(()) => self.records += 1,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        }
        if u16::from_le_bytes([data[0], data[1]]) == kind::SYSCALL {
            if let Some(rec) = self.paths.file_path(data) {
                let mut enc = Encoder::new();
                enc.record(&rec);
                match self.out.write_all(&enc.buf) {
                    Ok(()) => self.records += 1,
                    Err(e) => self.error = Some(e),
                }
            }
        }
    }

    pub(crate) fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }

    /// What the sink counted.
    pub(crate) fn counts(&self) -> ConsumerCounts {
        ConsumerCounts {
            records: self.records,
            malformed: self.malformed,
            flushed_wakeups: self.flushed_wakeups,
            file_paths: self.paths.written,
        }
    }

    /// The stream file with everything written to it, or the first write
    /// error; `path` names it in messages.
    pub(crate) fn finish(self, path: &Path) -> Result<File> {
        if let Some(e) = self.error {
            return Err(e).with_context(|| format!("writing {}", path.display()));
        }
        Ok(self.out.into_inner().map_err(|e| e.into_error())?)
    }
}

/// The consumer of the skeleton's ring buffer, feeding `sink`.
pub(crate) fn ring_buffer<'a>(sk: &skel::JtraceSkel<'_>, sink: &'a RefCell<Sink>) -> Result<RingBuffer<'a>> {
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&sk.maps.events, |data: &[u8]| {
            sink.borrow_mut().sample(data);
            0
        })
        .map_err(|e| anyhow!("setting up the ring buffer consumer: {e}"))?;
    builder
        .build()
        .map_err(|e| anyhow!("setting up the ring buffer consumer: {e}"))
}

/// Moves samples from the ring buffer to the sink until `stop`, then
/// detaches the programs and drains what is left.
pub(crate) fn pump(
    rb: &RingBuffer<'_>,
    sk: &mut skel::JtraceSkel<'_>,
    uprobes: &mut Vec<Link>,
    sink: &RefCell<Sink>,
    stop: &AtomicBool,
) -> Result<()> {
    let mut last_flush = Instant::now();
    while !stop.load(Ordering::Acquire) {
        // The BPF side usually submits without a wakeup, so a poll that
        // times out has not consumed anything: consume explicitly.
        if let Err(e) = rb.poll(POLL_TIMEOUT).and_then(|()| rb.consume()) {
            // EINTR from a signal (Ctrl-C) is not a reason to stop recording.
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                return Err(anyhow!("polling the BPF ring buffer: {e}"));
            }
        }
        if last_flush.elapsed() >= FLUSH_EVERY {
            sink.borrow_mut().flush();
            last_flush = Instant::now();
        }
    }
    // Detach first so that nothing arrives after the final drain. Each
    // uprobe link's release waits for an RCU grace period (≈0.1 s here):
    // released together, the waits overlap.
    std::thread::scope(|s| {
        for link in uprobes.drain(..) {
            s.spawn(move || drop(link));
        }
    });
    sk.links = Default::default();
    rb.consume().map_err(|e| anyhow!("draining the BPF ring buffer: {e}"))?;
    flush_pending_wakeups(sk, &mut sink.borrow_mut())
}

/// Offset of the WAKEUP record in a `struct switch_batch` value
/// (bpf/c/sched.bpf.c).
const BATCH_WAKE_OFFSET: usize = offset_of!(skel::types::switch_batch, wake);

/// Writes the WAKEUP records still waiting in the per-CPU switch batches
/// (sched.bpf.c defers a wakeup to the next switch of its CPU): once the
/// programs are detached, nothing else will write them.
fn flush_pending_wakeups(sk: &skel::JtraceSkel<'_>, sink: &mut Sink) -> Result<()> {
    let per_cpu = sk
        .maps
        .switch_batches
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .context("reading the BPF switch batches")?
        .unwrap_or_default();
    for v in per_cpu {
        let pending = v.get(..4).is_some_and(|b| b != [0; 4]);
        let len = v
            .get(BATCH_WAKE_OFFSET + 2..BATCH_WAKE_OFFSET + 4)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
        if let (true, Some(rec)) = (pending, v.get(BATCH_WAKE_OFFSET..BATCH_WAKE_OFFSET + len)) {
            let before = sink.records;
            sink.sample(rec);
            sink.flushed_wakeups += sink.records - before;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_split_into_records_and_bad_lengths_counted() {
        let path = std::env::temp_dir().join(format!("jtrace-bpf-sink-{}", std::process::id()));
        let mut sink = Sink::new(File::create(&path).unwrap());
        let rec = |kind: u16, len: u16| {
            let mut r = vec![0u8; len as usize];
            r[..2].copy_from_slice(&kind.to_le_bytes());
            r[2..4].copy_from_slice(&len.to_le_bytes());
            r
        };
        // A batch of three records, then a lone one.
        let batch = [
            rec(kind::WAKEUP, 40),
            rec(kind::SWITCH_OUT, 32),
            rec(kind::SWITCH_IN, 32),
        ]
        .concat();
        sink.sample(&batch);
        sink.sample(&rec(kind::SWITCH_IN, 32));
        assert_eq!((sink.records, sink.malformed), (4, 0));
        // A length past the sample's end: the rest of the sample is dropped.
        let mut bad = [rec(kind::SWITCH_OUT, 32), rec(kind::SWITCH_IN, 32)].concat();
        bad[34] = 64;
        sink.sample(&bad);
        // Not a multiple of 8, and shorter than a header.
        sink.sample(&rec(kind::SWITCH_IN, 20));
        sink.sample(&[0u8; 3]);
        assert_eq!((sink.records, sink.malformed), (5, 3));
        sink.flush();
        drop(sink);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 40 + 32 + 32 + 32 + 32);
        std::fs::remove_file(&path).unwrap();
    }
}

//! The stream file's writer: records from the ring buffer, buffered and
//! appended to `kernel.bin` (with the FILE_PATH records they call for).
//!
//! A write that fails (disk full) does not stop the recording: the file is
//! cut back to its last whole write, the failure is reported at once, and
//! every later record is counted, by kind, as not written, with the
//! earliest time among them, while the consumer keeps draining the ring
//! buffer so that the kernel side never stalls. A write that would take
//! the file system below its free-space floor
//! ([`RecorderConfig::min_free`](crate::RecorderConfig::min_free)) fails
//! the same way, before anything is written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;

use jtrace_format::{kind, Encoder, RECORD_HEADER_LEN};

use crate::cgroups::Cgroups;
use crate::chunks::Rotation;
use crate::paths::PathResolver;
use crate::stack_names::{exec_of, is_stack, now_ns, StackNames};
use crate::stats::{kind_name, ConsumerCounts};

/// Records are written to the file in blocks of about this many bytes.
const BLOCK: usize = 1 << 20;

/// Why records stopped being written, and what was not.
pub(crate) struct WriteFailure {
    /// The error, with the file's name.
    pub(crate) error: String,
    /// Records not written, by kind name.
    pub(crate) unwritten: BTreeMap<&'static str, u64>,
    /// The earliest time of a record not written: the file covers the
    /// recording up to here.
    pub(crate) since: u64,
}

impl WriteFailure {
    fn count(&mut self, rec: &[u8]) {
        let k = u16::from_le_bytes([rec[0], rec[1]]);
        *self.unwritten.entry(kind_name(k)).or_default() += 1;
        // KSYM records name addresses, whenever: they carry no time (0).
        if let Some(ts) = rec
            .get(8..16)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        {
            if ts != 0 {
                self.since = self.since.min(ts);
            }
        }
    }
}

/// The consumer side of the ring buffer: appends samples to the file.
pub(crate) struct Sink {
    file: File,
    /// For messages.
    name: String,
    /// Records not yet written, whole.
    buf: Vec<u8>,
    /// Records in `buf`.
    buffered: u64,
    /// Bytes in the file.
    written: u64,
    /// Records written to the file.
    pub(crate) records: u64,
    malformed: u64,
    /// WAKEUP records written by [`crate::pump`] at the end: not counted by
    /// the BPF side.
    pub(crate) flushed_wakeups: u64,
    paths: PathResolver,
    /// MAPPING and KSYM records for the addresses of new STACK records.
    stack_names: StackNames,
    failure: Option<WriteFailure>,
    /// Told of a write failure when it happens.
    on_error: Option<fn(&str)>,
    /// The free-space floor (0: none).
    min_free: u64,
    /// In a ring recording: the chunks.
    rotation: Option<Rotation>,
    /// The cgroups (CPU quotas) of the processes seen to exec.
    pub(crate) cgroups: Cgroups,
}

impl Sink {
    /// A sink appending to `file` (named `name` in messages), which holds
    /// `written` bytes of the stream so far; `on_error` hears of a failure
    /// when it happens; ready to name stacks if `stacks`.
    #[cfg(test)]
    pub(crate) fn new(file: File, name: String, written: u64, on_error: Option<fn(&str)>, stacks: bool) -> Sink {
        Self::with_floor(file, name, written, on_error, stacks, 0)
    }

    /// [`Sink::new`] that keeps `min_free` bytes free on the file's file
    /// system (0: writes until it is full).
    pub(crate) fn with_floor(
        file: File,
        name: String,
        written: u64,
        on_error: Option<fn(&str)>,
        stacks: bool,
        min_free: u64,
    ) -> Sink {
        let mut stack_names = StackNames::default();
        if stacks {
            stack_names.preload();
        }
        Sink {
            file,
            name,
            buf: Vec::with_capacity(BLOCK + 4096),
            buffered: 0,
            written,
            records: 0,
            malformed: 0,
            flushed_wakeups: 0,
            paths: PathResolver::default(),
            stack_names,
            failure: None,
            on_error,
            min_free,
            rotation: None,
            cgroups: Cgroups::default(),
        }
    }

    /// Records for `viewer` (see [`crate::Viewer`]).
    pub(crate) fn set_viewer(&mut self, viewer: &crate::Viewer) {
        self.stack_names.set_viewer(viewer);
    }

    /// Writes the stream as chunks (`rotation` says when a new one begins
    /// and what it restates).
    pub(crate) fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = Some(rotation);
    }

    /// Begins a new chunk if the current one is old enough (the consumer
    /// calls this between polls).
    pub(crate) fn maybe_rotate(&mut self, now: u64) {
        if self.rotation.as_ref().is_some_and(|r| r.due(self.written, now)) {
            self.flush();
            self.rotate(now);
        }
    }

    /// Whether the BPF side is to forget which stacks it wrote (once per new chunk).
    pub(crate) fn take_stack_floor(&mut self) -> bool {
        self.rotation
            .as_mut()
            .is_some_and(|r| std::mem::take(&mut r.stack_floor))
    }

    /// Ends the current chunk and begins the next (the buffer is empty).
    fn rotate(&mut self, now: u64) {
        if self.failure.is_some() {
            return;
        }
        let Some(r) = &mut self.rotation else { return };
        let next = r.seq + 1;
        let file = match (r.plan.create)(next) {
            Ok(f) => f,
            Err(e) => return self.fail(&std::io::Error::other(format!("cannot begin chunk {next}: {e:#}"))),
        };
        let (head, n) = r.begin_next(now);
        // The chunk is finished: its header says so (the ring's keeper
        // deletes only finished chunks).
        let mut done = jtrace_format::FileHeader::new(jtrace_format::KERNEL_MAGIC);
        done.flags |= jtrace_format::STREAM_COMPLETE;
        let _ = std::os::unix::fs::FileExt::write_all_at(&self.file, &done.to_bytes(), 0);
        self.file = file;
        self.written = 0;
        let floor = jtrace_format::check_free_space(&self.file, head.len() as u64, self.min_free);
        match floor.and_then(|()| self.file.write_all(&head)) {
            Ok(()) => {
                self.written = head.len() as u64;
                self.records += n;
            }
            Err(e) => self.fail(&e),
        }
    }

    /// One ring-buffer sample: one record, or several written together (a
    /// switch with its SYSCALL / PAGE_FAULT, SWITCH_OUT and SWITCH_IN).
    /// Returns how many records it held.
    pub(crate) fn sample(&mut self, mut data: &[u8]) -> u64 {
        let mut n = 0;
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
                break;
            }
            let (rec, rest) = data.split_at(len);
            self.record(rec);
            n += 1;
            data = rest;
        }
        n
    }

    fn record(&mut self, data: &[u8]) {
        if let Some(f) = &mut self.failure {
            f.count(data);
            return;
        }
        // Kernel addresses the viewer may not see go before anything keeps
        // the record (the chunks' restatements included).
        let mut enc = Encoder::new();
        let hidden = self.stack_names.hide_kernel(data, &mut enc);
        let data = hidden.as_deref().unwrap_or(data);
        if let Some(r) = &mut self.rotation {
            self.buffered += r.note(data, &mut self.buf);
        }
        self.buf.extend_from_slice(data);
        self.buffered += 1;
        if let Some((tgid, ts, left_out)) = exec_of(data) {
            self.stack_names.exec(tgid, ts);
            // Nothing of a process left out, its cgroup neither.
            if !left_out {
                self.cgroups.note(tgid);
            }
        }
        if is_stack(data) {
            self.stack_names.note(data, &mut enc);
            if !enc.buf.is_empty() {
                self.buffered += jtrace_format::Decoder::new(&enc.buf, 0).count() as u64;
                self.buf.extend_from_slice(&enc.buf);
                self.note_made(&enc.buf);
            }
        } else if u16::from_le_bytes([data[0], data[1]]) == kind::SYSCALL {
            if let Some(rec) = self.paths.file_path(data) {
                let mut enc = Encoder::new();
                enc.record(&rec);
                self.buf.extend_from_slice(&enc.buf);
                self.buffered += 1;
                self.note_made(&enc.buf);
            }
        }
        if self.buf.len() >= BLOCK {
            self.flush();
        }
    }

    /// Notes records the sink made itself (names of files, mappings and
    /// symbols) for the chunks' prologues.
    fn note_made(&mut self, recs: &[u8]) {
        let Some(r) = &mut self.rotation else { return };
        let mut rest = recs;
        while rest.len() >= RECORD_HEADER_LEN {
            let len = (u16::from_le_bytes([rest[2], rest[3]]) as usize).clamp(RECORD_HEADER_LEN, rest.len());
            r.note(&rest[..len], &mut Vec::new());
            rest = &rest[len..];
        }
    }

    /// Writes the buffered records to the file; on failure, cuts the file
    /// back to its last whole write and counts them as not written.
    pub(crate) fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let floor = jtrace_format::check_free_space(&self.file, self.buf.len() as u64, self.min_free);
        match floor.and_then(|()| self.file.write_all(&self.buf)) {
            Ok(()) => {
                self.written += self.buf.len() as u64;
                self.records += self.buffered;
            }
            Err(e) => self.fail(&e),
        }
        self.buf.clear();
        self.buffered = 0;
        if self.rotation.as_ref().is_some_and(|r| r.due(self.written, 0)) {
            self.rotate(now_ns());
        }
    }

    fn fail(&mut self, e: &std::io::Error) {
        let error = format!("cannot write {}: {e}", self.name);
        if let Some(report) = self.on_error {
            report(&format!(
                "{error}; the kernel events from now on are counted as lost, and the recording goes on"
            ));
        }
        // A partial write leaves part of a record; the blocks it took are
        // better given back (meta.json still has to be written).
        let _ = self.file.set_len(self.written);
        let mut f = WriteFailure {
            error,
            unwritten: BTreeMap::new(),
            since: u64::MAX,
        };
        let mut rest = &self.buf[..];
        while rest.len() >= RECORD_HEADER_LEN {
            let len = (u16::from_le_bytes([rest[2], rest[3]]) as usize).clamp(RECORD_HEADER_LEN, rest.len());
            f.count(&rest[..len]);
            rest = &rest[len..];
        }
        self.failure = Some(f);
    }

    /// What the sink counted.
    pub(crate) fn counts(&self) -> ConsumerCounts {
        ConsumerCounts {
            records: self.records,
            malformed: self.malformed,
            flushed_wakeups: self.flushed_wakeups,
            file_paths: self.paths.written,
            mappings: self.stack_names.mappings,
            ksyms: self.stack_names.symbols,
        }
    }

    /// Writes the buffer out and syncs the file's data to disk, ahead of
    /// [`Sink::finish`]'s sync (which reports a failure: this one's is
    /// left to it).
    pub(crate) fn sync_written(&mut self) {
        self.flush();
        let _ = self.file.sync_data();
    }

    /// Writes what is buffered; returns the file and, if some records could
    /// not be written, why and which.
    pub(crate) fn finish(mut self) -> (File, Option<WriteFailure>) {
        self.flush();
        if let Err(e) = self.file.sync_all() {
            if self.failure.is_none() {
                self.fail(&e);
            }
        }
        (self.file, self.failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u16, len: u16, ts: u64) -> Vec<u8> {
        let mut r = vec![0u8; len as usize];
        r[..2].copy_from_slice(&kind.to_le_bytes());
        r[2..4].copy_from_slice(&len.to_le_bytes());
        r[8..16].copy_from_slice(&ts.to_le_bytes());
        r
    }

    #[test]
    fn samples_are_split_into_records_and_bad_lengths_counted() {
        let path = std::env::temp_dir().join(format!("jtrace-bpf-sink-{}", std::process::id()));
        let mut sink = Sink::new(File::create(&path).unwrap(), "test".into(), 0, None, false);
        // A batch of three records, then a lone one.
        let batch = [
            rec(kind::WAKEUP, 40, 1),
            rec(kind::SWITCH_OUT, 32, 2),
            rec(kind::SWITCH_IN, 32, 3),
        ]
        .concat();
        sink.sample(&batch);
        sink.sample(&rec(kind::SWITCH_IN, 32, 4));
        sink.flush();
        assert_eq!((sink.records, sink.malformed), (4, 0));
        // A length past the sample's end: the rest of the sample is dropped.
        let mut bad = [rec(kind::SWITCH_OUT, 32, 5), rec(kind::SWITCH_IN, 32, 6)].concat();
        bad[34] = 64;
        sink.sample(&bad);
        // Not a multiple of 8, and shorter than a header.
        sink.sample(&rec(kind::SWITCH_IN, 20, 7));
        sink.sample(&[0u8; 3]);
        let (_, failure) = sink.finish();
        assert!(failure.is_none());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 40 + 32 + 32 + 32 + 32);
        std::fs::remove_file(&path).unwrap();
    }

    /// A full device: the file keeps its whole blocks, the records that did
    /// not fit are counted by kind with the earliest time, and later
    /// samples are only counted; the failure is reported once, at once.
    #[test]
    fn a_full_device_counts_what_was_not_written() {
        static REPORTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // /dev/full: every write fails with ENOSPC.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let mut sink = Sink::new(
            full,
            "/dev/full".into(),
            0,
            Some(|m| {
                assert!(m.contains("No space left on device"), "{m}");
                REPORTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
            false,
        );
        // More than a block, so that the first write happens while sampling.
        let n = BLOCK / 64 + 10;
        for i in 0..n as u64 {
            sink.sample(&[rec(kind::SWITCH_OUT, 32, 1000 + i), rec(kind::SWITCH_IN, 32, 1000 + i)].concat());
        }
        assert_eq!(REPORTS.load(std::sync::atomic::Ordering::SeqCst), 1);
        sink.sample(&rec(kind::WAKEUP, 40, 500));
        // A KSYM has no time: it does not move where the file's coverage ends.
        sink.sample(&rec(kind::KSYM, 32, 0));
        let (_, failure) = sink.finish();
        let f = failure.expect("a failure");
        assert!(f.error.contains("cannot write /dev/full"), "{}", f.error);
        assert_eq!(f.unwritten["switch_out"], n as u64);
        assert_eq!(f.unwritten["switch_in"], n as u64);
        assert_eq!(f.unwritten["wakeup"], 1);
        assert_eq!(f.since, 500);
        assert_eq!(REPORTS.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A floor above the free space of the file system: nothing is written
    /// (not even part of a block), the records are counted, and the error
    /// names the floor.
    #[test]
    fn a_floor_above_the_free_space_writes_nothing() {
        let path = std::env::temp_dir().join(format!("jtrace-bpf-sink-floor-{}", std::process::id()));
        let mut sink = Sink::with_floor(
            File::create(&path).unwrap(),
            "floor".into(),
            0,
            None,
            false,
            u64::MAX / 2,
        );
        sink.sample(&rec(kind::SWITCH_OUT, 32, 7));
        let (_, failure) = sink.finish();
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::remove_file(&path).unwrap();
        let f = failure.expect("a failure");
        assert!(f.error.contains("free-space floor"), "{}", f.error);
        assert_eq!((len, f.unwritten["switch_out"], f.since), (0, 1, 7));
    }
}

//! The records of one stream file, undecoded, read record by record
//! ([`RecordReader`]: mapped and released behind the reader when the file
//! is finished, else in chunks); nothing reads a whole stream into memory.

use crate::file_io::{map_file, read_full, release_behind};
use crate::shrink_guard::ShrinkGuard;
use jtrace_format::{self as fmt, DecodeError, Decoder, FileHeader, RawRecord};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Records with their payloads undecoded, from a stream held whole in
/// memory ([`Decoder`]) or read record by record ([`RecordReader`]).
pub(crate) trait RawRecords {
    /// The next record; the reading stops at the first error.
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>>;
}

impl RawRecords for Decoder<'_> {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        Decoder::next_raw(self)
    }
}

impl<R: RawRecords + ?Sized> RawRecords for &mut R {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        (**self).next_raw()
    }
}

/// The file header at the start of `bytes`, if it is a stream of the kind
/// `magic` names in a format version this jtrace reads.
fn check_header(path: &Path, bytes: &[u8], magic: [u8; 8]) -> anyhow::Result<FileHeader> {
    let header = FileHeader::parse(bytes)
        .ok_or_else(|| anyhow::anyhow!("{} is too short to be a jtrace stream", path.display()))?;
    if header.magic != magic {
        anyhow::bail!("{} is not a jtrace stream of the expected kind", path.display());
    }
    if header.version > fmt::FORMAT_VERSION {
        anyhow::bail!(
            "{} has format version {}, this jtrace reads up to {}",
            path.display(),
            header.version,
            fmt::FORMAT_VERSION
        );
    }
    Ok(header)
}

/// Size of a read from a stream file.
const CHUNK: usize = 4 << 20;

/// Mapped input released to the kernel (MADV_DONTNEED) in steps of this
/// many bytes behind the reader: the page cache keeps the file, the
/// process's resident set stays bounded whatever the trace's size.
const RELEASE_STEP: usize = 4 << 20;

/// The records of a stream file: mapped when no writer can shrink it any
/// more, read in chunks otherwise.
///
/// Decoding straight from the page cache saves `read()`'s copy of every
/// byte (≈ 10 % of a streaming report's time, all of it memory traffic). A
/// mapping is safe only while the file does not shrink under it (a read
/// past the end of a truncated mapping is SIGBUS): the kernel stream is
/// only ever appended to, and the agent's JVM stream is truncated once, at
/// VM death, before it is marked [`fmt::STREAM_COMPLETE`]; an unfinished
/// JVM stream (a live JVM, a killed one) is read with `read()`.
pub(crate) struct RecordReader {
    path: PathBuf,
    file: File,
    /// The whole file, when mapped (`buf`, `pos` and `base` are then
    /// unused; `mapped_pos` is the file offset), guarded against the file
    /// shrinking under it (declared first: unregistered before unmapped).
    guard: Option<ShrinkGuard>,
    map: Option<memmap2::Mmap>,
    mapped_pos: usize,
    /// Mapped bytes below this offset were released.
    released: usize,
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    base: usize,
    eof: bool,
    done: bool,
    /// An I/O error that ended the reading early.
    pub(crate) error: Option<std::io::Error>,
}

impl RecordReader {
    /// Opens a stream and checks its header; returns it with the header.
    pub(crate) fn open(path: &Path, magic: [u8; 8]) -> anyhow::Result<(FileHeader, RecordReader)> {
        let mut file = open_stream_file(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut head = [0u8; fmt::FILE_HEADER_LEN];
        let n = read_full(&mut file, &mut head).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let header = check_header(path, &head[..n], magic)?;
        let shrinks_no_more = magic == fmt::KERNEL_MAGIC || header.flags & fmt::STREAM_COMPLETE != 0;
        let map = if shrinks_no_more { map_file(&file, CHUNK) } else { None };
        let guard = map.as_ref().map(|m| ShrinkGuard::new(m.as_ptr(), m.len()));
        let r = RecordReader {
            path: path.to_path_buf(),
            file,
            guard,
            mapped_pos: fmt::FILE_HEADER_LEN,
            released: 0,
            map,
            buf: Vec::new(),
            pos: 0,
            base: fmt::FILE_HEADER_LEN,
            eof: false,
            done: false,
            error: None,
        };
        Ok((header, r))
    }

    /// Whether `buf[pos..]` starts with a whole record, or with something
    /// the decoder decides on by itself (zero fill, a bad length).
    #[inline]
    fn decidable(&self) -> bool {
        let rest = &self.buf[self.pos..];
        if rest.len() < fmt::RECORD_HEADER_LEN {
            return false;
        }
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        len < fmt::RECORD_HEADER_LEN || rest.len() >= len
    }

    /// Reads the next chunk behind the unread tail (`eof` once nothing
    /// more comes; an I/O error also ends the reading, in `error`).
    fn fill(&mut self) {
        // Keep the unread tail, then read into the (already zeroed)
        // capacity behind it.
        let tail = self.buf.len() - self.pos;
        self.buf.copy_within(self.pos.., 0);
        self.base += self.pos;
        self.pos = 0;
        let want = tail + CHUNK;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let n = match read_full(&mut self.file, &mut self.buf[tail..want]) {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(e);
                0
            }
        };
        self.buf.truncate(tail + n);
        if n == 0 {
            self.eof = true;
        }
    }

    /// [`RawRecords::next_raw`] of a mapped stream.
    fn next_mapped(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        let map = self.map.as_ref()?;
        let at = self.mapped_pos;
        // The records before `at` were handed out by earlier calls, whose
        // borrows have ended (`&mut self`).
        release_behind(map, &mut self.released, at, RELEASE_STEP);
        let rest = &map[at..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let r = Decoder::new(rest, at).next_raw();
        let end = match &r {
            Some(Ok(raw)) => at + fmt::RECORD_HEADER_LEN + raw.payload.len(),
            _ => map.len(),
        };
        // The file shrank under the mapping: what was read from its cut
        // on is zeros, not records.
        if let Some(cut) = self.guard.as_ref().and_then(ShrinkGuard::shrunk_at) {
            if cut < end {
                self.done = true;
                let now = self.file.metadata().map_or(cut as u64, |m| m.len()) as usize;
                return Some(Err(DecodeError::Shrunk { offset: now.min(at) }));
            }
        }
        match &r {
            Some(Ok(_)) => self.mapped_pos = end,
            _ => {
                self.done = true;
                // Zeros or a cut record inside the mapped length: the file
                // shrank within a page (past its end the page reads as
                // zeros, no fault). The last record may have been cut.
                let now = self.file.metadata().map_or(u64::MAX, |m| m.len()) as usize;
                if now < map.len() {
                    return Some(Err(DecodeError::Shrunk { offset: now.min(at) }));
                }
            }
        }
        r
    }
}

impl RawRecords for RecordReader {
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        if self.done {
            return None;
        }
        if self.map.is_some() {
            return self.next_mapped();
        }
        while !self.eof && !self.decidable() {
            self.fill();
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let r = Decoder::new(rest, self.base + self.pos).next_raw();
        match &r {
            Some(Ok(raw)) => self.pos += fmt::RECORD_HEADER_LEN + raw.payload.len(),
            _ => self.done = true,
        }
        r
    }
}

impl std::fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordReader({})", self.path.display())
    }
}

/// Opens a stream file for reading: a regular file only (a link there is
/// not followed, a FIFO not waited on, a device not read: what is put at a
/// stream's name is not a stream).
fn open_stream_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished stream larger than a read is decoded from a mapping that
    /// releases what it has passed; an unfinished JVM stream (the agent may
    /// still truncate it) is read with read(). Both give every record, in
    /// order, with its file offset, and stop at the zero fill.
    #[test]
    fn mapped_and_read_streams_give_the_same_records() {
        let dir = std::env::temp_dir().join(format!("jtrace-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut enc = fmt::Encoder::new();
        // 32-byte records, past two release steps and several reads.
        let n = (3 * RELEASE_STEP + CHUNK) / 32 + 1000;
        for i in 0..n as u64 {
            enc.record(&fmt::Record {
                tid: 1 + (i % 3) as u32,
                ts: i,
                payload: fmt::Payload::MethodEntry(fmt::MethodEvent {
                    method: i,
                    flags: 0,
                    reserved: 0,
                }),
            });
        }
        let stream = |magic, flags| {
            let mut h = fmt::FileHeader::new(magic);
            h.flags = flags;
            let mut bytes = h.to_bytes().to_vec();
            bytes.extend_from_slice(&enc.buf);
            // What a grown-ahead JVM stream ends with.
            bytes.extend_from_slice(&[0; 4096]);
            bytes
        };
        let cases = [
            ("kernel.bin", fmt::KERNEL_MAGIC, 0, true),
            ("jvm-done.bin", fmt::JVM_MAGIC, fmt::STREAM_COMPLETE, true),
            ("jvm-live.bin", fmt::JVM_MAGIC, 0, false),
        ];
        for (name, magic, flags, mapped) in cases {
            let path = dir.join(name);
            std::fs::write(&path, stream(magic, flags)).unwrap();
            let (_, mut r) = RecordReader::open(&path, magic).unwrap();
            assert_eq!(r.map.is_some(), mapped, "{name}");
            let mut i = 0u64;
            while let Some(rec) = r.next_raw() {
                let rec = rec.unwrap();
                assert_eq!((rec.tid, rec.ts), (1 + (i % 3) as u32, i), "{name}");
                assert_eq!(rec.offset, fmt::FILE_HEADER_LEN + 32 * i as usize, "{name}");
                i += 1;
            }
            assert_eq!(i, n as u64, "{name}");
            assert!(r.error.is_none());
            if mapped {
                assert!(r.released >= RELEASE_STEP, "{name}: released {}", r.released);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A mapped stream truncated by another process while it is read: no
    /// SIGBUS; the records before the cut come out, then the cut is said.
    /// At a page boundary the next read faults (the SIGBUS handler maps
    /// zeros there); inside a page the rest of the page reads as zeros.
    #[test]
    fn a_mapped_stream_that_shrinks_is_read_up_to_the_cut() {
        let dir = std::env::temp_dir().join(format!("jtrace-shrink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut enc = fmt::Encoder::new();
        let n = 3 * CHUNK / 32;
        for i in 0..n as u64 {
            enc.record(&fmt::Record {
                tid: 1,
                ts: i,
                payload: fmt::Payload::MethodEntry(fmt::MethodEvent {
                    method: i,
                    flags: 0,
                    reserved: 0,
                }),
            });
        }
        let mut bytes = fmt::FileHeader::new(fmt::KERNEL_MAGIC).to_bytes().to_vec();
        bytes.extend_from_slice(&enc.buf);
        // Past the release step behind the reader: at a page boundary, and
        // inside a record inside a page.
        for cut in [RELEASE_STEP * 2 + 4096, RELEASE_STEP * 2 + 4096 + 8] {
            let path = dir.join(format!("kernel-{cut}.bin"));
            std::fs::write(&path, &bytes).unwrap();
            let (_, mut r) = RecordReader::open(&path, fmt::KERNEL_MAGIC).unwrap();
            assert!(r.map.is_some());
            let mut read = 0usize;
            for _ in 0..1000 {
                r.next_raw().unwrap().unwrap();
                read += 1;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut as u64)
                .unwrap();
            let err = loop {
                match r.next_raw() {
                    Some(Ok(rec)) => {
                        assert_eq!(rec.ts, read as u64);
                        read += 1;
                    }
                    Some(Err(e)) => break e,
                    None => panic!("cut at {cut}: not noticed"),
                }
            };
            // Every whole record before the cut; inside a page, the one
            // the cut went through too (its tail zeros: the message says).
            let whole = (cut - fmt::FILE_HEADER_LEN) / 32;
            assert!(read == whole || read == whole + 1, "cut at {cut}: {read} of {whole}");
            assert_eq!(err, DecodeError::Shrunk { offset: cut }, "{err}");
            assert!(r.next_raw().is_none());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

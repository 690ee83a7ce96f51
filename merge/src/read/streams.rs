//! The streams of a trace directory and their files: a stream is one file
//! (`kernel.bin`, `jvm-<pid>.bin`), or, in a ring recording, a run of
//! numbered chunk files (`kernel.<seq>.bin`, `jvm-<pid>.<seq>.bin`; docs/FORMAT.md,
//! "Ring recordings") read as one stream by [`Chain`].

use super::records::{RawRecords, RecordReader};
use jtrace_format::{self as fmt, Chunk, DecodeError, FileHeader, RawRecord};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One stream of a trace directory and the files that hold it.
#[derive(Debug, Clone)]
pub(crate) struct StreamFiles {
    /// The stream as messages name it: `<dir>/kernel.bin`, `<dir>/jvm-<pid>.bin`,
    /// whether it is one file or chunks.
    pub(crate) path: PathBuf,
    /// Its files in order (none: the stream is missing).
    pub(crate) parts: Vec<PathBuf>,
}

impl StreamFiles {
    /// Whether the stream is one file (not chunks).
    pub(crate) fn is_plain(&self) -> bool {
        self.parts.len() == 1 && self.parts[0] == self.path
    }
}

/// The kernel stream and the JVM streams (in name order) of `dir`. A
/// stream's chunks are the run of consecutive numbers that ends with its
/// newest: chunks before a gap (one deleted while a snapshot was taken)
/// cannot be read as one stream with the later ones and are left out.
pub(crate) fn list(dir: &Path) -> anyhow::Result<(StreamFiles, Vec<StreamFiles>)> {
    let mut plain: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut chunks: BTreeMap<String, BTreeMap<u64, PathBuf>> = BTreeMap::new();
    // Streams whose name holds something else: said, not read.
    let mut not_files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for e in std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))? {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        let Some((stream, seq)) = name.to_str().and_then(fmt::parse_stream_file) else {
            continue;
        };
        // A link or anything else under a stream's name is not one of its files.
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            if seq.is_none() {
                not_files.insert(stream.to_string(), e.path());
            }
            continue;
        }
        match seq {
            None => {
                plain.insert(stream.to_string(), e.path());
            }
            Some(n) => {
                chunks.entry(stream.to_string()).or_default().insert(n, e.path());
            }
        }
    }
    let mut streams: BTreeMap<String, StreamFiles> = BTreeMap::new();
    for (stream, parts) in chunks {
        let mut run: Vec<PathBuf> = Vec::new();
        let mut next = None;
        for (n, p) in parts.into_iter().rev() {
            if next.is_some_and(|m: u64| n + 1 != m) {
                break;
            }
            next = Some(n);
            run.push(p);
        }
        run.reverse();
        let path = dir.join(format!("{stream}.bin"));
        streams.insert(stream, StreamFiles { path, parts: run });
    }
    // A stream written as one file is read as such.
    for (stream, p) in plain {
        streams.insert(
            stream,
            StreamFiles {
                path: p.clone(),
                parts: vec![p],
            },
        );
    }
    for (stream, path) in not_files {
        streams.entry(stream).or_insert(StreamFiles {
            path,
            parts: Vec::new(),
        });
    }
    let kernel = streams.remove(fmt::KERNEL_STREAM).unwrap_or_else(|| StreamFiles {
        path: dir.join(fmt::KERNEL_FILE),
        parts: Vec::new(),
    });
    Ok((kernel, streams.into_values().collect()))
}

/// The records of a stream's files read as one stream. Each chunk but the
/// first begins with its CHUNK record and a prologue restating what came
/// before it, which the previous chunk already gave: both are skipped.
/// The first chunk's CHUNK record is skipped too, and when that chunk is
/// not the stream's first (older ones were deleted), its start is where the
/// stream's coverage begins ([`Chain::covered_from`]).
pub(crate) struct Chain {
    parts: Vec<PathBuf>,
    magic: [u8; 8],
    cur: RecordReader,
    /// Index of `cur` in `parts`.
    at: usize,
    /// Records of `cur` still to skip.
    skip: u64,
    /// The header of the last file opened.
    header: FileHeader,
    covered_from: Option<u64>,
    /// Chunks after the first.
    chunks: u64,
    /// An I/O error that ended the reading early.
    pub(crate) error: Option<std::io::Error>,
    /// A later chunk that could not be read (not yet a stream: its writer
    /// was creating it when it was copied): the stream ends before it.
    pub(crate) problem: Option<String>,
}

impl Chain {
    /// Opens the first of `files`' parts (there must be one).
    pub(crate) fn open(files: &StreamFiles, magic: [u8; 8]) -> anyhow::Result<Chain> {
        let Some(first) = files.parts.first() else {
            anyhow::bail!("{}: not a regular file", files.path.display());
        };
        let (header, cur) = RecordReader::open(first, magic)?;
        let mut c = Chain {
            parts: files.parts.clone(),
            magic,
            cur,
            at: 0,
            skip: 0,
            header,
            covered_from: None,
            chunks: 0,
            error: None,
            problem: None,
        };
        if let Some((chunk, ts)) = read_chunk(first)? {
            c.skip = 1;
            if chunk.seq > 0 {
                c.covered_from = Some(ts);
            }
        }
        Ok(c)
    }

    /// The header of the stream's last file read (whether it was finished).
    pub(crate) fn header(&self) -> FileHeader {
        self.header
    }

    /// When the stream's first chunk began, if chunks before it are gone:
    /// the stream covers nothing before.
    pub(crate) fn covered_from(&self) -> Option<u64> {
        self.covered_from
    }

    /// Goes on with the next file; false at the last.
    fn advance(&mut self) -> bool {
        if let Some(e) = self.cur.error.take() {
            self.error.get_or_insert(e);
        }
        if self.at + 1 >= self.parts.len() || self.error.is_some() {
            return false;
        }
        self.at += 1;
        let path = &self.parts[self.at];
        let opened = RecordReader::open(path, self.magic).and_then(|(h, r)| Ok((h, r, read_chunk(path)?)));
        match opened {
            Ok((h, r, chunk)) => {
                self.header = h;
                self.cur = r;
                self.skip = chunk.map_or(0, |(c, _)| 1 + u64::from(c.prologue));
                self.chunks += 1;
                true
            }
            Err(e) => {
                self.problem = Some(format!("{e:#}; the stream is read up to the chunk before"));
                false
            }
        }
    }
}

impl RawRecords for Chain {
    fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, DecodeError>> {
        loop {
            if self.skip > 0 {
                match self.cur.next_raw() {
                    Some(Ok(_)) => {
                        self.skip -= 1;
                        continue;
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        self.skip = 0;
                        if !self.advance() {
                            return None;
                        }
                        continue;
                    }
                }
            }
            let cur: *mut RecordReader = &mut self.cur;
            // SAFETY: `cur` points to `self.cur`, which lives as long as the
            // borrow of `self` the result carries; the pointer only spells
            // out what the borrow checker cannot see yet (NLL, problem case
            // #3): when `None` comes back nothing is borrowed any more, so
            // `advance` may replace `self.cur`.
            match unsafe { &mut *cur }.next_raw() {
                None => {
                    if !self.advance() {
                        return None;
                    }
                }
                r => return r,
            }
        }
    }
}

/// The CHUNK record at the start of the stream file `path` and its time,
/// if the file is a chunk.
fn read_chunk(path: &Path) -> anyhow::Result<Option<(Chunk, u64)>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let mut b = [0u8; fmt::FILE_HEADER_LEN + fmt::CHUNK_RECORD_LEN];
    let mut n = 0;
    while n < b.len() {
        match f.read(&mut b[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }
    let Some(Ok(raw)) = fmt::Decoder::new(&b[fmt::FILE_HEADER_LEN..n], fmt::FILE_HEADER_LEN).next_raw() else {
        return Ok(None);
    };
    if raw.kind != fmt::kind::CHUNK && raw.kind != fmt::kind::JVM_CHUNK {
        return Ok(None);
    }
    Ok(Chunk::parse(raw.payload).map(|c| (c, raw.ts)))
}

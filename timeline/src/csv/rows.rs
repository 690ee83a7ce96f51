//! The streamed CSV export's row order: rows are final when an invocation
//! exits but go out by entry, so they wait, sorted in memory and, past a
//! cap, in sorted runs on disk.

use super::row_bytes::RowBytes;
use crate::model::Span;
use jtrace_merge::stream;
use jtrace_merge::{Invocation, ThreadInfo, ThreadTotals, Trace, Visitor};
use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::PathBuf;

/// Sort key of a row: (entry, depth, seq), ties in exit order (`seq`), as
/// `write_csv` sorts a thread's spans.
type Key = (u64, u64, u64);

/// A formatted CSV row waiting for its turn, its bytes in
/// [`CsvRows::arena`] (one buffer for all: no allocation per row).
struct Row {
    key: Key,
    at: usize,
    len: usize,
}

/// A row read back from a sorted run on disk.
struct RunRow {
    key: Key,
    bytes: Vec<u8>,
}

/// Bytes a waiting row costs besides its text.
const ROW_OVERHEAD: usize = std::mem::size_of::<Row>() + 16;

/// Writes CSV rows as a walk finishes invocations, in `write_csv`'s order
/// (per thread by entry time, then depth; ties in exit order).
///
/// A row is final at its exit, but rows go out by entry: an invocation's
/// row precedes its callees'. So the rows of an outermost invocation wait
/// until it returns; then those that entered before that moment are sorted
/// and written (any later row enters later), the others wait for the next.
/// Rows waiting beyond `cap` bytes (a long outermost invocation such as a
/// traced `main`) are written, sorted, to a temporary file and merged back at
/// the flush, so memory stays bounded whatever the trace's length.
pub(super) struct CsvRows<'a, W: Write> {
    out: W,
    fmt: RowBytes<'a>,
    rows: Vec<Row>,
    /// The bytes of `rows`.
    arena: Vec<u8>,
    /// Bytes `rows` hold, with [`ROW_OVERHEAD`] each.
    bytes: usize,
    /// Rows pushed so far: the tie-break in exit order.
    seq: u64,
    /// Sorted runs of waiting rows on disk.
    runs: Vec<File>,
    /// Bytes of waiting rows kept in memory before a spill.
    cap: usize,
    temp_dir: PathBuf,
    /// The first error of the walk (a [`Visitor`] cannot return one).
    err: Option<anyhow::Error>,
}

impl<'a, W: Write> CsvRows<'a, W> {
    /// Rows of `trace` to `out`, at most `cap` bytes of them waiting in
    /// memory, the rest in sorted runs in `temp_dir`.
    pub(super) fn new(trace: &'a Trace, out: W, cap: usize, temp_dir: PathBuf) -> Self {
        CsvRows {
            out,
            fmt: RowBytes::new(trace),
            rows: Vec::new(),
            arena: Vec::new(),
            bytes: 0,
            seq: 0,
            runs: Vec::new(),
            cap,
            temp_dir,
            err: None,
        }
    }

    /// Writes the header record, before any row.
    pub(super) fn write_header(&mut self, header: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(header)?;
        Ok(())
    }

    /// Ends the output after the walk: the walk's first error, if any, or
    /// the flushed writer's.
    pub(super) fn finish(mut self) -> anyhow::Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(())
    }

    /// Adds the row of a finished invocation; spills if over the cap.
    fn push(&mut self, t: &ThreadInfo, s: &Span) -> anyhow::Result<()> {
        let at = self.arena.len();
        self.fmt.row(t, s, &mut self.arena);
        let len = self.arena.len() - at;
        self.bytes += len + ROW_OVERHEAD;
        self.rows.push(Row {
            key: (s.inv.entry, s.depth as u64, self.seq),
            at,
            len,
        });
        self.seq += 1;
        if self.bytes > self.cap {
            self.spill()?;
        }
        Ok(())
    }

    /// The bytes of a waiting row.
    fn text(&self, r: &Row) -> &[u8] {
        &self.arena[r.at..r.at + r.len]
    }

    /// Writes the waiting rows, sorted, as a run on disk.
    fn spill(&mut self) -> anyhow::Result<()> {
        let file = stream::unlinked_temp_file(&self.temp_dir, "csv").map_err(|e| {
            anyhow::anyhow!(
                "cannot create a sorted run of CSV rows in {}: {e} (set TMPDIR or --temp-dir)",
                self.temp_dir.display()
            )
        })?;
        let werr = |e: io::Error| anyhow::anyhow!("cannot write a sorted run of CSV rows: {e}");
        let mut w = io::BufWriter::with_capacity(1 << 20, &file);
        self.rows.sort_unstable_by_key(|r| r.key);
        for r in &self.rows {
            let (e, d, q) = r.key;
            for v in [e, d, q, r.len as u64] {
                w.write_all(&v.to_le_bytes()).map_err(werr)?;
            }
            w.write_all(self.text(r)).map_err(werr)?;
        }
        w.flush().map_err(werr)?;
        drop(w);
        self.rows.clear();
        self.arena.clear();
        self.bytes = 0;
        self.runs.push(file);
        Ok(())
    }

    /// Keeps `rows` (and only their bytes) waiting.
    fn keep(&mut self, rows: Vec<(Key, Vec<u8>)>) {
        self.rows.clear();
        self.arena.clear();
        self.bytes = 0;
        for (key, bytes) in rows {
            self.rows.push(Row {
                key,
                at: self.arena.len(),
                len: bytes.len(),
            });
            self.bytes += bytes.len() + ROW_OVERHEAD;
            self.arena.extend_from_slice(&bytes);
        }
    }

    /// Writes, in order, the waiting rows that entered before `before`; the
    /// others (entered at `before` exactly) keep waiting.
    fn flush(&mut self, before: u64) -> anyhow::Result<()> {
        self.rows.sort_unstable_by_key(|r| r.key);
        if self.runs.is_empty() {
            let n = self.rows.partition_point(|r| r.key.0 < before);
            for r in &self.rows[..n] {
                self.out.write_all(&self.arena[r.at..r.at + r.len])?;
            }
            if n == self.rows.len() {
                self.rows.clear();
                self.arena.clear();
                self.bytes = 0;
            } else {
                let left = self.rows[n..].iter().map(|r| (r.key, self.text(r).to_vec())).collect();
                self.keep(left);
            }
            return Ok(());
        }
        // Merge the runs and the rows in memory by key.
        let rerr = |e: io::Error| anyhow::anyhow!("cannot read back a sorted run of CSV rows: {e}");
        let mut readers = Vec::new();
        for f in std::mem::take(&mut self.runs) {
            let mut f = f;
            f.seek(io::SeekFrom::Start(0)).map_err(rerr)?;
            readers.push(io::BufReader::with_capacity(64 << 10, f));
        }
        let mut heads: Vec<Option<RunRow>> = Vec::new();
        for r in &mut readers {
            heads.push(read_row(r).map_err(rerr)?);
        }
        let mem = std::mem::take(&mut self.rows);
        let arena = std::mem::take(&mut self.arena);
        let mut mem = mem.iter().peekable();
        let mut left = Vec::new();
        loop {
            // The smallest head among the runs and the memory.
            let mut best: Option<(usize, Key)> = None;
            for (i, h) in heads.iter().enumerate() {
                if let Some(h) = h {
                    if best.is_none_or(|b| h.key < b.1) {
                        best = Some((i, h.key));
                    }
                }
            }
            let from_mem = match (best, mem.peek()) {
                (Some((_, k)), Some(m)) => m.key < k,
                (None, Some(_)) => true,
                (_, None) => false,
            };
            let (key, bytes): (Key, std::borrow::Cow<[u8]>) = if from_mem {
                let r = mem.next().expect("peeked");
                (r.key, std::borrow::Cow::Borrowed(&arena[r.at..r.at + r.len]))
            } else if let Some((i, _)) = best {
                let next = read_row(&mut readers[i]).map_err(rerr)?;
                let row = std::mem::replace(&mut heads[i], next).expect("a head");
                (row.key, std::borrow::Cow::Owned(row.bytes))
            } else {
                break;
            };
            if key.0 < before {
                self.out.write_all(&bytes)?;
            } else {
                left.push((key, bytes.into_owned()));
            }
        }
        self.keep(left);
        Ok(())
    }
}

/// The next row of a run, `None` at its end.
fn read_row(r: &mut impl io::Read) -> io::Result<Option<RunRow>> {
    let mut h = [0u8; 32];
    match r.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let w = |i: usize| u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let mut bytes = vec![0u8; w(3) as usize];
    r.read_exact(&mut bytes)?;
    Ok(Some(RunRow {
        key: (w(0), w(1), w(2)),
        bytes,
    }))
}

impl<W: Write> Visitor for CsvRows<'_, W> {
    fn thread_begin(&mut self, t: &ThreadInfo) {
        self.fmt.thread(t);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        if self.err.is_some() {
            return;
        }
        let mut r = self.push(t, &Span { inv: *inv, depth });
        if r.is_ok() && depth == 0 {
            r = self.flush(inv.exit);
        }
        if let Err(e) = r {
            self.err = Some(e);
        }
    }
    fn thread_end(&mut self, _t: &ThreadInfo, _totals: &ThreadTotals) {
        if self.err.is_none() {
            if let Err(e) = self.flush(u64::MAX) {
                self.err = Some(e);
            }
        }
    }
}

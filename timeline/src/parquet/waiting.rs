//! Row groups waiting for one column: the `off_cpu_intervals` rows are
//! written as the walk goes, but their waker's method is known only after
//! it ([`jtrace_merge::stream::analyze_answering_wakers`]). Each full row
//! group's other columns are encoded at once, as the file will hold them,
//! and parked with the waiting column's references in a temporary file;
//! after the walk each group is read back, in order, its column filled in,
//! and its encoded chunks copied into the table unchanged. Memory holds one
//! group's buffers and each parked group's chunk metadata (what the file's
//! footer holds anyway).

use super::column::{Buf, NULL};
use bytes::Bytes;
use parquet::column::writer::{get_column_writer, ColumnCloseResult};
use parquet::file::properties::WriterPropertiesPtr;
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::SchemaDescriptor;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The parked row groups of a table.
pub(super) struct Waiting {
    /// The column that waits.
    col: usize,
    /// Where the groups are parked (an unlinked temporary file).
    store: File,
    /// Bytes written to `store`.
    end: u64,
    groups: VecDeque<Group>,
    /// The group [`Waiting::load`] read back: its encoded chunks and their
    /// metadata.
    loaded: Option<(Bytes, Vec<ColumnCloseResult>)>,
}

/// A parked row group: in `store` at `at`, its encoded chunks
/// (`chunks` bytes, every column but the waiting one, in order) then its
/// references (`refs` bytes).
struct Group {
    at: u64,
    chunks: usize,
    refs: usize,
    closes: Vec<ColumnCloseResult>,
}

impl Waiting {
    /// Column `col` waits; groups are parked in `store`.
    pub(super) fn new(col: usize, store: File) -> Waiting {
        Waiting {
            col,
            store,
            end: 0,
            groups: VecDeque::new(),
            loaded: None,
        }
    }

    /// The column that waits.
    pub(super) fn col(&self) -> usize {
        self.col
    }

    /// Parks a full row group: every column of `bufs` but the waiting one
    /// encoded with the file's `schema` and `props`, and the waiting one's
    /// references (null, or an integer that does not decrease from row to
    /// row, kept as varint deltas).
    pub(super) fn park(
        &mut self,
        schema: &SchemaDescriptor,
        props: &WriterPropertiesPtr,
        bufs: &[Buf],
    ) -> anyhow::Result<()> {
        let mut sink = TrackedWrite::new(Vec::new());
        let mut closes = Vec::with_capacity(bufs.len());
        for (i, b) in bufs.iter().enumerate().filter(|(i, _)| *i != self.col) {
            let pages = Box::new(SerializedPageWriter::new(&mut sink));
            let mut w = get_column_writer(schema.column(i), props.clone(), pages);
            b.put(&mut w)?;
            closes.push(w.close()?);
        }
        let mut blob = sink.into_inner()?;
        let chunks = blob.len();
        let refs = &bufs[self.col];
        let mut ints = refs.ints.iter();
        let mut prev = 0;
        for &d in &refs.defs {
            if d == 0 {
                blob.push(0);
            } else {
                let k = *ints.next().expect("a value per present cell");
                anyhow::ensure!(k >= prev, "references must not decrease");
                varint(&mut blob, (k - prev) as u64 + 1);
                prev = k;
            }
        }
        self.store
            .write_all_at(&blob, self.end)
            .map_err(|e| anyhow::anyhow!("cannot park a row group in a temporary file: {e}"))?;
        self.groups.push_back(Group {
            at: self.end,
            chunks,
            refs: blob.len() - chunks,
            closes,
        });
        self.end += blob.len() as u64;
        Ok(())
    }

    /// Reads the next parked group back: its references ([`NULL`] for
    /// null), or None when none is left.
    pub(super) fn load(&mut self) -> anyhow::Result<Option<Vec<i64>>> {
        let Some(g) = self.groups.pop_front() else {
            return Ok(None);
        };
        let mut blob = vec![0; g.chunks + g.refs];
        self.store
            .read_exact_at(&mut blob, g.at)
            .map_err(|e| anyhow::anyhow!("cannot read a parked row group back: {e}"))?;
        let rows = g.closes.first().map_or(0, |c| c.rows_written as usize);
        let mut refs = Vec::with_capacity(rows);
        let (mut at, mut prev) = (g.chunks, 0);
        while at < blob.len() {
            let d = read_varint(&blob, &mut at)?;
            refs.push(match d {
                0 => NULL,
                d => {
                    prev += (d - 1) as i64;
                    prev
                }
            });
        }
        blob.truncate(g.chunks);
        self.loaded = Some((Bytes::from(blob), g.closes));
        Ok(Some(refs))
    }

    /// The encoded chunks of the group [`Waiting::load`] read, with their
    /// metadata (offsets within the chunks' bytes).
    pub(super) fn loaded(&mut self) -> anyhow::Result<(Bytes, Vec<ColumnCloseResult>)> {
        self.loaded.take().ok_or_else(|| anyhow::anyhow!("no row group loaded"))
    }
}

/// Appends `v` as an unsigned LEB128 varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an unsigned LEB128 varint at `*at`.
fn read_varint(b: &[u8], at: &mut usize) -> anyhow::Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b
            .get(*at)
            .ok_or_else(|| anyhow::anyhow!("a parked row group ends inside a reference"))?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    anyhow::bail!("a parked row group holds a reference too long")
}

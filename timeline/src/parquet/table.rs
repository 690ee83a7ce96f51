//! One Parquet file being written: its columns buffered for the current row
//! group, flushed every [`ROW_GROUP`] rows, so memory stays bounded by the
//! row group whatever the table's length. A column can wait for its values
//! until after the walk ([`Table::wait_for`], `waiting.rs`).

use super::column::{Buf, Kind, NULL};
use super::waiting::Waiting;
use anyhow::Context;
use parquet::basic::{Compression, Encoding};
use parquet::data_type::ByteArray;
use parquet::file::properties::{DeltaBinaryPackedEncoderOptions, EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// Rows per row group.
pub const ROW_GROUP: usize = 64 * 1024;

/// Rows buffered row-major before they are spread into the columns.
const MINI: usize = 256;

/// A Parquet file being written, row by row.
///
/// A value is one store into a small row-major buffer ([`MINI`] rows, in
/// the L2 cache), spread into the columns every [`MINI`] rows. Stored
/// straight into ~30 column buffers of a row group each (megabytes), the
/// stores missed the cache: a fifth of the export's time (BENCHMARKS.md,
/// "Exports against `report`").
pub struct Table {
    bufs: Vec<Buf>,
    /// The rows not yet spread: a cell per column (strings are in their
    /// column already; their cell says present or null).
    cells: Vec<i64>,
    /// Where the row being added begins in `cells`.
    row_start: usize,
    /// Rows in the row group, spread or not.
    rows: usize,
    writer: Option<SerializedFileWriter<File>>,
    /// Where it is written (renamed by the caller when every table is complete).
    temp: PathBuf,
    /// The row groups that wait for a column, if one does.
    waiting: Option<Waiting>,
    /// No more rows: the last waiting group is parked.
    closed: bool,
}

/// The Parquet message type of `columns`.
pub fn message_type(name: &str, columns: &[(String, Kind)]) -> String {
    let mut s = format!("message {name} {{\n");
    for (c, k) in columns {
        let string = if matches!(k, Kind::Str | Kind::OptStr) {
            " (STRING)"
        } else {
            ""
        };
        s.push_str(&format!("  {} {c}{string};\n", k.parquet()));
    }
    s.push('}');
    s
}

impl Table {
    /// Starts `file` (already created, at `temp`).
    pub fn new(name: &str, columns: Vec<(String, Kind)>, file: File, temp: PathBuf) -> anyhow::Result<Table> {
        let schema = Arc::new(parquet::schema::parser::parse_message_type(&message_type(
            name, &columns,
        ))?);
        // Dictionaries for strings; every integer (ids too: in runs, their
        // deltas pack to a few bits, and a dictionary hashes every value,
        // ≈ 2× the cost) as deltas bit-packed. One data page per column
        // chunk up to its 1 MiB size limit (pages of 20 000 rows, the
        // default, add a header, a block start and a compression call each:
        // files 7 % larger); delta blocks of 1 024 values in 8 mini blocks
        // (files 5 % smaller than with 256 in 4). Statistics per column
        // chunk (row group): what engines prune with. BENCHMARKS.md,
        // "Exports against `report`".
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("jtrace {}", env!("CARGO_PKG_VERSION")))
            .set_dictionary_enabled(false)
            .set_data_page_row_count_limit(usize::MAX)
            .set_write_batch_size(8192)
            .set_delta_binary_packed_encoder_options(DeltaBinaryPackedEncoderOptions::try_new(1024, 8)?)
            .set_statistics_enabled(EnabledStatistics::Chunk);
        for (c, k) in &columns {
            let c = ColumnPath::from(c.as_str());
            props = match k {
                Kind::Str | Kind::OptStr => props.set_column_dictionary_enabled(c, true),
                Kind::I64 | Kind::OptI64 => props.set_column_encoding(c, Encoding::DELTA_BINARY_PACKED),
                Kind::Bool | Kind::OptBool => props,
            };
        }
        let props = Arc::new(props.build());
        let writer = SerializedFileWriter::new(file, schema, props)?;
        Ok(Table {
            cells: Vec::with_capacity(MINI * columns.len()),
            row_start: 0,
            bufs: columns.iter().map(|&(_, kind)| Buf::new(kind)).collect(),
            rows: 0,
            writer: Some(writer),
            temp,
            waiting: None,
            closed: false,
        })
    }

    /// Column `col` (a nullable integer) gets its values only after the
    /// walk: until then each of its cells holds a reference (an integer, or
    /// null), and each full row group waits, its other columns encoded,
    /// in `store` (a temporary file). After the last row,
    /// [`Table::next_waiting`] and [`Table::fill_waiting`] give the row
    /// groups, in order, their values.
    pub fn wait_for(&mut self, col: usize, store: File) {
        assert_eq!(self.bufs[col].kind, Kind::OptI64, "a nullable integer column waits");
        self.waiting = Some(Waiting::new(col, store));
    }

    /// After the last row: the references of the next waiting row group's
    /// column ([`NULL`] for null), or None when every group is written.
    pub fn next_waiting(&mut self) -> anyhow::Result<Option<Vec<i64>>> {
        if !self.closed {
            self.flush()?;
            self.closed = true;
        }
        let w = self.waiting.as_mut().expect("a table that waits");
        w.load()
    }

    /// Writes the row group [`Table::next_waiting`] gave, the waiting
    /// column's `values` ([`NULL`] for null) in place of its references.
    pub fn fill_waiting(&mut self, values: &[i64]) -> anyhow::Result<()> {
        let w = self.waiting.as_mut().expect("a table that waits");
        let (chunks, closes) = w.loaded()?;
        let col = w.col();
        let b = &mut self.bufs[col];
        b.clear();
        for &v in values {
            if v != NULL {
                b.ints.push(v);
            }
            b.defs.push((v != NULL) as i16);
        }
        let writer = self.writer.as_mut().expect("open until finish");
        let mut rg = writer.next_row_group()?;
        let mut closes = closes.into_iter();
        for i in 0..self.bufs.len() {
            if i == col {
                let mut c = rg.next_column()?.context("a column per buffer")?;
                self.bufs[col].put(c.untyped())?;
                c.close()?;
            } else {
                rg.append_column(&chunks, closes.next().context("a chunk per column")?)?;
            }
        }
        rg.close()?;
        self.bufs[col].clear();
        Ok(())
    }

    /// The next column's kind (checked in debug builds only).
    #[inline(always)]
    fn next_kind(&self) -> Kind {
        self.bufs[self.cells.len() - self.row_start].kind
    }

    /// The next column's value: an integer (below 2^63).
    #[inline(always)]
    pub fn i64(&mut self, v: i64) -> &mut Self {
        debug_assert!(matches!(self.next_kind(), Kind::I64 | Kind::OptI64) && v != NULL);
        self.cells.push(v);
        self
    }
    /// The next column's value: an unsigned integer (below 2^63).
    #[inline(always)]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.i64(v as i64)
    }
    /// The next column's value: a nullable integer.
    #[inline(always)]
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.i64(v as i64),
            None => self.null(),
        }
    }
    /// The next column's value: a boolean.
    #[inline(always)]
    pub fn bool(&mut self, v: bool) -> &mut Self {
        debug_assert!(matches!(self.next_kind(), Kind::Bool | Kind::OptBool));
        self.cells.push(v as i64);
        self
    }
    /// The next column's value: a nullable boolean.
    #[inline(always)]
    pub fn opt_bool(&mut self, v: Option<bool>) -> &mut Self {
        match v {
            Some(v) => self.bool(v),
            None => self.null(),
        }
    }
    /// The next column's value: a string.
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(ByteArray::from(v.as_bytes().to_vec()))
    }
    /// The next column's value: a string already made (a clone of a kept
    /// one shares its bytes: no copy per row).
    #[inline]
    pub fn bytes(&mut self, v: ByteArray) -> &mut Self {
        let b = &mut self.bufs[self.cells.len() - self.row_start];
        debug_assert!(matches!(b.kind, Kind::Str | Kind::OptStr));
        b.strs.push(v);
        self.cells.push(1);
        self
    }
    /// The next column's value: a nullable string.
    pub fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.str(v),
            None => self.null(),
        }
    }
    /// The next column's value: null.
    #[inline(always)]
    pub fn null(&mut self) -> &mut Self {
        debug_assert!(self.next_kind().nullable());
        self.cells.push(NULL);
        self
    }

    /// Ends the row; writes a row group when it is full.
    #[inline]
    pub fn end_row(&mut self) -> anyhow::Result<()> {
        let n = self.bufs.len();
        assert_eq!(self.cells.len() - self.row_start, n, "a row with a value per column");
        self.row_start = self.cells.len();
        self.rows += 1;
        if self.row_start >= MINI * n {
            self.spread();
        }
        if self.rows >= ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    /// Moves the buffered rows' cells into their columns, a column at a time.
    fn spread(&mut self) {
        let n = self.bufs.len();
        for (c, b) in self.bufs.iter_mut().enumerate() {
            let cells = self.cells.get(c..).unwrap_or(&[]).iter().step_by(n).copied();
            match b.kind {
                Kind::I64 => b.ints.extend(cells),
                Kind::Bool => b.bools.extend(cells.map(|v| v != 0)),
                Kind::Str => {}
                Kind::OptI64 => {
                    for v in cells {
                        if v != NULL {
                            b.ints.push(v);
                        }
                        b.defs.push((v != NULL) as i16);
                    }
                }
                Kind::OptBool => {
                    for v in cells {
                        if v != NULL {
                            b.bools.push(v != 0);
                        }
                        b.defs.push((v != NULL) as i16);
                    }
                }
                Kind::OptStr => b.defs.extend(cells.map(|v| (v != NULL) as i16)),
            }
        }
        self.cells.clear();
        self.row_start = 0;
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        self.spread();
        let w = self.writer.as_mut().expect("open until finish");
        if let Some(waiting) = &mut self.waiting {
            waiting.park(w.schema_descr(), w.properties(), &self.bufs)?;
        } else {
            let mut rg = w.next_row_group()?;
            let mut i = 0;
            while let Some(mut col) = rg.next_column()? {
                self.bufs[i].put(col.untyped())?;
                col.close()?;
                i += 1;
            }
            rg.close()?;
        }
        for b in &mut self.bufs {
            b.clear();
        }
        self.rows = 0;
        Ok(())
    }

    /// Writes the last row group and the footer (the file stays at `temp`).
    pub fn finish(mut self) -> anyhow::Result<()> {
        if self.waiting.is_some() {
            anyhow::ensure!(
                self.closed && self.next_waiting()?.is_none(),
                "row groups still wait for a column"
            );
        }
        self.flush()?;
        let w = self.writer.take().expect("open until finish");
        w.close()
            .with_context(|| format!("cannot write {}", self.temp.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    /// Row `i`'s values: every kind, nulls at different strides, so they
    /// fall anywhere in the row-major blocks and row groups.
    #[allow(clippy::type_complexity)]
    fn row(i: u64) -> (u64, Option<u64>, bool, Option<bool>, String, Option<&'static str>) {
        let nth = |n: u64| i.is_multiple_of(n);
        (
            i,
            nth(3).then_some(7 * i),
            nth(2),
            (!nth(5)).then_some(nth(4)),
            format!("s{}", i % 10),
            nth(7).then_some("x"),
        )
    }

    fn or_null<T>(v: Option<T>, f: impl FnOnce(T) -> Field) -> Field {
        v.map_or(Field::Null, f)
    }

    #[test]
    fn rows_across_blocks_and_row_groups_read_back_as_written() {
        use Kind::*;
        let columns: Vec<(String, Kind)> = [I64, OptI64, Bool, OptBool, Str, OptStr]
            .iter()
            .enumerate()
            .map(|(i, k)| (format!("c{i}"), *k))
            .collect();
        let path = std::env::temp_dir().join(format!("jtrace-table-test-{}.parquet", std::process::id()));
        let file = File::create(&path).unwrap();
        let mut t = Table::new("t", columns, file, path.clone()).unwrap();
        // One full row group, then a part of a block.
        let n = (ROW_GROUP + MINI + 3) as u64;
        for i in 0..n {
            let (a, b, c, d, e, f) = row(i);
            t.u64(a).opt_u64(b).bool(c).opt_bool(d).str(&e).opt_str(f);
            t.end_row().unwrap();
        }
        t.finish().unwrap();
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let mut rows = 0;
        for (i, got) in reader.get_row_iter(None).unwrap().enumerate() {
            let got: Vec<Field> = got.unwrap().get_column_iter().map(|(_, f)| f.clone()).collect();
            let (a, b, c, d, e, f) = row(i as u64);
            let want = vec![
                Field::Long(a as i64),
                or_null(b, |v| Field::Long(v as i64)),
                Field::Bool(c),
                or_null(d, Field::Bool),
                Field::Str(e),
                or_null(f, |v| Field::Str(v.into())),
            ];
            assert_eq!(got, want, "row {i}");
            rows += 1;
        }
        assert_eq!(rows, n);
        std::fs::remove_file(&path).unwrap();
    }

    /// Row `i`: an id, its reference (null every third row, else
    /// non-decreasing), a string and a nullable boolean.
    fn reference(i: i64) -> i64 {
        if i % 3 == 0 {
            NULL
        } else {
            i / 2 + (i << 20)
        }
    }

    /// The value a reference stands for: null for some.
    fn answer(r: i64) -> i64 {
        if r == NULL || r % 5 == 0 {
            NULL
        } else {
            r % 1000
        }
    }

    fn write(path: &std::path::Path, n: i64, waits: bool) {
        use Kind::*;
        let columns: Vec<(String, Kind)> = [I64, OptI64, Str, OptBool]
            .iter()
            .enumerate()
            .map(|(i, k)| (format!("c{i}"), *k))
            .collect();
        let mut t = Table::new("t", columns, File::create(path).unwrap(), path.into()).unwrap();
        if waits {
            t.wait_for(
                1,
                jtrace_merge::stream::unlinked_temp_file(&std::env::temp_dir(), "waiting-test").unwrap(),
            );
        }
        for i in 0..n {
            let r = reference(i);
            let v = if waits { r } else { answer(r) };
            t.i64(i).opt_u64((v != NULL).then_some(v as u64));
            t.str(&format!("s{}", i % 7))
                .opt_bool((i % 4 != 0).then_some(i % 8 == 1));
            t.end_row().unwrap();
        }
        if waits {
            let mut groups = 0;
            while let Some(refs) = t.next_waiting().unwrap() {
                let values: Vec<i64> = refs.iter().map(|&r| answer(r)).collect();
                t.fill_waiting(&values).unwrap();
                groups += 1;
            }
            assert_eq!(groups, (n as usize).div_ceil(ROW_GROUP));
        }
        t.finish().unwrap();
    }

    /// A column filled in after the rows, group by group, gives the very
    /// file written with its values at once.
    #[test]
    fn a_column_filled_after_the_rows_gives_the_same_file() {
        let dir = std::env::temp_dir();
        let pid = std::process::id();
        let (direct, later) = (
            dir.join(format!("jtrace-direct-{pid}.parquet")),
            dir.join(format!("jtrace-later-{pid}.parquet")),
        );
        let n = (2 * ROW_GROUP + 1000) as i64;
        write(&direct, n, false);
        write(&later, n, true);
        let (a, b) = (std::fs::read(&direct).unwrap(), std::fs::read(&later).unwrap());
        assert!(a.len() > 10_000);
        assert!(a == b, "the files differ");
        std::fs::remove_file(direct).unwrap();
        std::fs::remove_file(later).unwrap();
    }
}

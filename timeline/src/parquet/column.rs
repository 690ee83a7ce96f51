//! A column of a Parquet table: its type, and its values buffered for the
//! row group being written (what `table.rs` fills and `waiting.rs` parks).

use parquet::column::writer::{get_typed_column_writer_mut, ColumnWriter};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int64Type};

/// A column's type: every integer is INT64 (signed, which every engine
/// reads; the values are below 2^63), strings are UTF-8 BYTE_ARRAY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `int64`, not null.
    I64,
    /// `int64`, nullable.
    OptI64,
    /// `boolean`, not null.
    Bool,
    /// `boolean`, nullable.
    OptBool,
    /// `string`, not null.
    Str,
    /// `string`, nullable.
    OptStr,
}

impl Kind {
    /// The column's Parquet type.
    pub(super) fn parquet(self) -> &'static str {
        match self {
            Kind::I64 => "required int64",
            Kind::OptI64 => "optional int64",
            Kind::Bool => "required boolean",
            Kind::OptBool => "optional boolean",
            Kind::Str => "required binary",
            Kind::OptStr => "optional binary",
        }
    }
    pub(super) fn nullable(self) -> bool {
        matches!(self, Kind::OptI64 | Kind::OptBool | Kind::OptStr)
    }
}

/// What a nullable integer or boolean cell holds for null (values are
/// below 2^63, so never negative).
pub const NULL: i64 = i64::MIN;

/// A column's buffered values (present ones only) and definition levels
/// (nullable columns only).
pub(super) struct Buf {
    pub(super) kind: Kind,
    pub(super) ints: Vec<i64>,
    pub(super) bools: Vec<bool>,
    pub(super) strs: Vec<ByteArray>,
    pub(super) defs: Vec<i16>,
}

impl Buf {
    /// An empty buffer of a `kind` column.
    pub(super) fn new(kind: Kind) -> Buf {
        Buf {
            kind,
            ints: Vec::new(),
            bools: Vec::new(),
            strs: Vec::new(),
            defs: Vec::new(),
        }
    }

    /// Writes the values into a column chunk's writer.
    pub(super) fn put(&self, w: &mut ColumnWriter) -> parquet::errors::Result<()> {
        let defs = self.kind.nullable().then_some(&self.defs[..]);
        match self.kind {
            Kind::I64 | Kind::OptI64 => get_typed_column_writer_mut::<Int64Type>(w).write_batch(&self.ints, defs, None),
            Kind::Bool | Kind::OptBool => {
                get_typed_column_writer_mut::<BoolType>(w).write_batch(&self.bools, defs, None)
            }
            Kind::Str | Kind::OptStr => {
                get_typed_column_writer_mut::<ByteArrayType>(w).write_batch(&self.strs, defs, None)
            }
        }?;
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.ints.clear();
        self.bools.clear();
        self.strs.clear();
        self.defs.clear();
    }
}

//! How a payload is written and read: the [`Wire`] encoding of each
//! payload type. Together with the table in `record.rs`, which ties each
//! payload to its kind, this is the one definition of a record's bytes.
//!
//! Numbers are little-endian; a string is a u16 byte length and its UTF-8
//! bytes, cut at 4096 bytes. A payload whose fields are just these, in
//! order, gets its encoding from [`wire!`]; the others implement [`Wire`]
//! next to their type.

/// A payload (or field) type's encoding.
pub(crate) trait Wire: Sized {
    /// Appends its bytes to `out`.
    fn put(&self, out: &mut Vec<u8>);
    /// Reads it at the cursor; `None` if the payload is too short.
    fn get(c: &mut Cursor<'_>) -> Option<Self>;
}

/// Reading position in one record's payload.
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    /// The record header's ts (a METHOD_BATCH's events count from it).
    pub ts: u64,
}

impl<'a> Cursor<'a> {
    /// At the start of `payload`, of a record at `ts`.
    pub fn new(payload: &'a [u8], ts: u64) -> Self {
        Cursor { b: payload, at: 0, ts }
    }

    /// The bytes from the cursor on.
    pub fn rest(&self) -> &'a [u8] {
        self.b.get(self.at..).unwrap_or_default()
    }

    /// The next `n` bytes, read.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(b)
    }

    /// Reads an array of `N` bytes.
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

impl Wire for u32 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        c.array().map(u32::from_le_bytes)
    }
}

impl Wire for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        c.array().map(u64::from_le_bytes)
    }
}

impl Wire for String {
    fn put(&self, out: &mut Vec<u8>) {
        let mut n = self.len().min(4096);
        while !self.is_char_boundary(n) {
            n -= 1;
        }
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&self.as_bytes()[..n]);
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let n = u16::from_le_bytes(c.array()?) as usize;
        Some(String::from_utf8_lossy(c.take(n)?).into_owned())
    }
}

/// Gives payload struct `$name` the [`Wire`] encoding of its fields one
/// after the other, in the order listed (which the compiler checks is all
/// of them, each once).
macro_rules! wire {
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl $crate::wire::Wire for $name {
            fn put(&self, out: &mut Vec<u8>) {
                $($crate::wire::Wire::put(&self.$field, out);)*
            }
            fn get(c: &mut $crate::wire::Cursor<'_>) -> Option<Self> {
                // Fields are evaluated in the order written: the wire order.
                Some($name { $($field: $crate::wire::Wire::get(c)?),* })
            }
        }
    };
}
pub(crate) use wire;

//! An append-only protobuf encoder, as Perfetto's own protozero writes:
//! fields go straight into a byte buffer, a nested message's length is
//! patched when it closes (no message structs, no sizes computed twice, no
//! owned strings). Lengths are written in their shortest form: a nested
//! message reserves one byte and, in the rare case it grows past 127
//! bytes, is moved right to make room for the longer varint.
//!
//! A [`Buf`]'s bytes are allocated ahead; a [`Cursor`] writes into them by
//! index with its position in a register (pushing byte by byte onto a
//! `Vec` reloads and stores its length at every byte: a u8 store may alias
//! it), and gives the position back when it is dropped.

/// Wire type of varint fields.
const VARINT: u64 = 0;
/// Wire type of fixed64 fields.
const FIXED64: u64 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages, packed).
const LEN: u64 = 2;

/// Bytes of `v` as a varint.
#[inline]
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A growable byte buffer written through cursors.
#[derive(Default)]
pub struct Buf {
    /// Allocated (and zeroed) bytes; `len` of them are written.
    data: Vec<u8>,
    len: usize,
}

impl Buf {
    /// The bytes written.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// How many bytes are written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Forgets what is written (keeps the room).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// A cursor at the end, with room for `room` more bytes: writing more
    /// than that through it is a bug (it panics on the index).
    #[inline]
    pub fn cursor(&mut self, room: usize) -> Cursor<'_> {
        if self.len + room > self.data.len() {
            let want = (self.len + room).max(2 * self.data.len()).max(4096);
            self.data.resize(want, 0);
        }
        Cursor {
            b: &mut self.data,
            n: self.len,
            len: &mut self.len,
        }
    }
}

/// Writes at the end of a [`Buf`]; dropping it ends the write.
pub struct Cursor<'a> {
    b: &'a mut [u8],
    n: usize,
    len: &'a mut usize,
}

impl Drop for Cursor<'_> {
    fn drop(&mut self) {
        *self.len = self.n;
    }
}

impl Cursor<'_> {
    /// Appends `v` as a varint.
    #[inline]
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.b[self.n] = v as u8 | 0x80;
            self.n += 1;
            v >>= 7;
        }
        self.b[self.n] = v as u8;
        self.n += 1;
    }

    #[inline]
    fn key(&mut self, field: u32, wire_type: u64) {
        self.varint((field as u64) << 3 | wire_type);
    }

    /// A varint field (uint32/uint64/enum/bool; int32/int64 as their two's
    /// complement, so a negative value takes ten bytes, as in protobuf).
    #[inline]
    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    /// A fixed64 field.
    #[inline]
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, FIXED64);
        self.raw(&v.to_le_bytes());
    }

    /// A length-delimited field holding `b` (a string, bytes, or a message
    /// encoded elsewhere).
    #[inline]
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.raw(b);
    }

    /// Bytes as they are.
    #[inline]
    pub fn raw(&mut self, b: &[u8]) {
        self.b[self.n..self.n + b.len()].copy_from_slice(b);
        self.n += b.len();
    }

    /// `n` zero bytes.
    #[inline]
    pub fn zeros(&mut self, n: usize) {
        self.b[self.n..self.n + n].fill(0);
        self.n += n;
    }

    /// Opens a nested message (or packed field) `field`; what is written
    /// until [`Cursor::close`] with the returned mark is its content.
    #[inline]
    #[must_use]
    pub fn open(&mut self, field: u32) -> usize {
        self.key(field, LEN);
        self.n += 1;
        self.n
    }

    /// Closes the nested message opened at `mark`: writes its length. The
    /// room for a length past 127 bytes is one byte per 7 bits, which a
    /// caller counts in its cursor's room.
    #[inline]
    pub fn close(&mut self, mark: usize) {
        let len = self.n - mark;
        if len < 0x80 {
            self.b[mark - 1] = len as u8;
            return;
        }
        let extra = varint_len(len as u64) - 1;
        self.b.copy_within(mark..mark + len, mark + extra);
        self.n += extra;
        let mut v = len as u64;
        let mut i = mark - 1;
        while v >= 0x80 {
            self.b[i] = v as u8 | 0x80;
            v >>= 7;
            i += 1;
        }
        self.b[i] = v as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_shortest() {
        for (v, n) in [(0u64, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (u64::MAX, 10)] {
            let mut b = Buf::default();
            b.cursor(10).varint(v);
            assert_eq!(b.len(), n, "{v}");
            assert_eq!(varint_len(v), n, "{v}");
        }
    }

    /// Nested messages of every length class get their shortest length
    /// prefix, and what follows them is intact (checked against prost).
    #[test]
    fn nested_lengths_are_patched() {
        for len in [0usize, 1, 127, 128, 300, 16383, 16384, 70_000] {
            let mut b = Buf::default();
            b.cursor(3).raw(b"abc");
            {
                let mut c = b.cursor(len + 32);
                let outer = c.open(1);
                let inner = c.open(2);
                c.zeros(len);
                c.close(inner);
                c.uint(3, 150);
                c.close(outer);
            }
            let mut want = b"abc".to_vec();
            let mut msg = Vec::new();
            prost::encoding::bytes::encode(2, &vec![0u8; len], &mut msg);
            prost::encoding::uint64::encode(3, &150, &mut msg);
            prost::encoding::bytes::encode(1, &msg, &mut want);
            assert_eq!(b.bytes(), &want[..], "length {len}");
        }
    }
}

//! An append-only protobuf encoder, as Perfetto's own protozero writes:
//! fields go straight into a byte buffer, a nested message's length is
//! patched when it closes (no message structs, no sizes computed twice, no
//! owned strings). Lengths are written in their shortest form: a nested
//! message reserves one byte and, in the rare case it grows past 127
//! bytes, is moved right to make room for the longer varint.

/// Wire type of varint fields.
const VARINT: u64 = 0;
/// Wire type of fixed64 fields.
const FIXED64: u64 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages, packed).
const LEN: u64 = 2;

/// Appends `v` as a varint.
#[inline]
pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Bytes of `v` as a varint.
#[inline]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn key(buf: &mut Vec<u8>, field: u32, wire_type: u64) {
    varint(buf, (field as u64) << 3 | wire_type);
}

/// A varint field (uint32/uint64/enum/bool; int32/int64 as their two's
/// complement, so a negative value takes ten bytes, as in protobuf).
#[inline]
pub fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, VARINT);
    varint(buf, v);
}

/// A fixed64 field.
#[inline]
pub fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, FIXED64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// A length-delimited field holding `b` (a string, bytes, or a message
/// encoded elsewhere).
#[inline]
pub fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(buf, field, LEN);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Opens a nested message (or packed field) `field`; what is appended
/// until [`close`] with the returned mark is its content.
#[inline]
#[must_use]
pub fn open(buf: &mut Vec<u8>, field: u32) -> usize {
    key(buf, field, LEN);
    buf.push(0);
    buf.len()
}

/// Closes the nested message opened at `mark`: writes its length.
#[inline]
pub fn close(buf: &mut Vec<u8>, mark: usize) {
    let len = buf.len() - mark;
    if len < 0x80 {
        buf[mark - 1] = len as u8;
        return;
    }
    let extra = varint_len(len as u64) - 1;
    buf.resize(buf.len() + extra, 0);
    buf.copy_within(mark..mark + len, mark + extra);
    let mut v = len as u64;
    let mut i = mark - 1;
    while v >= 0x80 {
        buf[i] = v as u8 | 0x80;
        v >>= 7;
        i += 1;
    }
    buf[i] = v as u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_shortest() {
        for (v, n) in [(0u64, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (u64::MAX, 10)] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(b.len(), n, "{v}");
            assert_eq!(varint_len(v), n, "{v}");
        }
    }

    /// Nested messages of every length class get their shortest length
    /// prefix, and what follows them is intact (checked against prost).
    #[test]
    fn nested_lengths_are_patched() {
        for len in [0usize, 1, 127, 128, 300, 16383, 16384, 70_000] {
            let mut b = Vec::new();
            let outer = open(&mut b, 1);
            let inner = open(&mut b, 2);
            b.extend(std::iter::repeat_n(7u8, len));
            close(&mut b, inner);
            uint(&mut b, 3, 150);
            close(&mut b, outer);
            let mut want = Vec::new();
            let mut msg = Vec::new();
            prost::encoding::bytes::encode(2, &vec![7u8; len], &mut msg);
            prost::encoding::uint64::encode(3, &150, &mut msg);
            prost::encoding::bytes::encode(1, &msg, &mut want);
            assert_eq!(b, want, "length {len}");
        }
    }
}

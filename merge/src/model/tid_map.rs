//! `TidMap`: a hash map keyed by thread id (or another integer id) with a
//! hasher cheap enough for the per-event paths of reading and walking.

use std::collections::HashMap;

/// A multiplicative hasher for tids (SipHash costs more than the rest of
/// buffering an event).
#[derive(Default, Clone, Copy)]
pub(crate) struct TidHasher(u64);

impl std::hash::Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by tid (or another integer id).
pub(crate) type TidMap<V, K = u32> = HashMap<K, V, std::hash::BuildHasherDefault<TidHasher>>;

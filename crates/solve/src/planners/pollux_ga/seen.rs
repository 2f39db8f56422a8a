//! The seen-set: which genomes a generation has had already, so that a
//! child is kept only if new. Apart from the search because it is a data
//! structure of its own (a hash of the cells, a map that does not hash
//! again, equality deciding), whatever the search does with it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The genomes a generation has seen, without copies: 64-bit hash → the
/// first genome with it (0.. the parents, then the children); equality, not
/// the hash, decides, so a collision only costs a look in `overflow`.
pub(super) struct Seen {
    pub(super) first: HashMap<u64, u32, BuildHasherDefault<PassHasher>>,
    pub(super) overflow: Vec<(u64, u32)>,
}

/// For keys that are hashes already.
#[derive(Default)]
pub(super) struct PassHasher(u64);

impl Hasher for PassHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// FxHash-style over the genome's words two at a time, then murmur3's
/// finaliser so every bit depends on every word: the hash only decides
/// where a genome sits in [`Seen`], never whether it is there.
pub(super) fn genome_hash(g: &[u32]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let add = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let mut pairs = g.chunks_exact(2);
    let mut h = (&mut pairs).fold(0, |h, p| add(h, u64::from(p[0]) | u64::from(p[1]) << 32));
    if let [x] = pairs.remainder() {
        h = add(h, u64::from(*x));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

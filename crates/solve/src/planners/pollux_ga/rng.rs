//! The random-number stream, replayed: `rand`'s shuffle drawn word for
//! word without its branches, skipped without its swaps, and drawn again
//! later from a second stream. It exists apart so that what keeps a
//! seed's plans from moving (the exact words drawn, in order) sits in one
//! place with the test that holds it against `rand`.

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

/// `rand` 0.8's rejection zone for a draw below `range` (< 2^32): a 32-bit
/// word `v` is accepted iff the low half of `v × range` is at most this.
pub(super) fn zone(range: u32) -> u32 {
    (range << range.leading_zeros()).wrapping_sub(1)
}

/// `order.shuffle(rng)` exactly: the same words drawn, the same swaps, so the
/// same permutation and the same stream after it (the seed's results must
/// not move), for slices shorter than 2^32. `rand` loops on each rejected
/// word; a rejection is a coin flip to the branch predictor (up to half the
/// words are rejected), and the shuffles were a quarter of a pollux-ga
/// simulation. Here a rejected word swaps an element with itself and the
/// same index is drawn again: no branch on the word. `zones[i]` is
/// [`zone`]`(i + 1)`.
fn shuffle_exact(order: &mut [usize], rng: &mut ChaCha8Rng, zones: &[u32]) {
    debug_assert!(order.len() <= zones.len() && order.len() as u64 <= u64::from(u32::MAX));
    let Some(mut i) = order.len().checked_sub(1) else {
        return;
    };
    while i > 0 {
        let m = u64::from(rng.next_u32()) * (i as u64 + 1);
        let accept = (m as u32) <= zones[i];
        let j = if accept { (m >> 32) as usize } else { i };
        order.swap(i, j);
        i -= usize::from(accept);
    }
}

/// The words [`shuffle_exact`] of `len` elements would draw, drawn and
/// dropped: the same rejections, no swaps. Most children never walk a
/// node order, so the breeder only moves the stream past them and repair
/// draws an order again ([`NodeOrders`]) when it needs one.
pub(super) fn skip_shuffle(len: usize, rng: &mut ChaCha8Rng, zones: &[u32]) {
    debug_assert!(len <= zones.len());
    let Some(mut i) = len.checked_sub(1) else {
        return;
    };
    while i > 0 {
        let m = u64::from(rng.next_u32()) * (i as u64 + 1);
        i -= usize::from((m as u32) <= zones[i]);
    }
}

/// The node orders of one repair, drawn on demand: the u-th unpinned job's
/// order is `0..nodes` shuffled u + 1 times in a row from `at`, as the
/// breeder drew them before it only skipped them (the same plans for a
/// seed). `rng` is a second stream of the same seed, moved to `at` at the
/// first order asked for.
pub(super) struct NodeOrders<'a> {
    pub(super) rng: &'a mut ChaCha8Rng,
    pub(super) at: u128,
    pub(super) order: &'a mut Vec<usize>,
    pub(super) drawn: usize,
}

impl NodeOrders<'_> {
    pub(super) fn get(&mut self, u: usize, zones: &[u32]) -> &[usize] {
        if self.drawn == 0 {
            self.rng.set_word_pos(self.at);
            self.order.clear();
            self.order.extend(0..zones.len());
        }
        while self.drawn <= u {
            shuffle_exact(self.order, self.rng, zones);
            self.drawn += 1;
        }
        self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The GA's results for a seed must not move: [`shuffle_exact`] draws
    /// the very words, and makes the very swaps, of `rand`'s shuffle;
    /// [`skip_shuffle`] draws the very words; [`NodeOrders`] gives the u-th
    /// of a run of shuffles, asked for out of turn.
    #[test]
    fn exact_shuffle_is_rands_shuffle() {
        use rand::seq::SliceRandom;
        for len in 0..70usize {
            let zones: Vec<u32> = (1..=len as u32).map(zone).collect();
            for seed in 0..40u64 {
                let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(seed), ChaCha8Rng::seed_from_u64(seed));
                // Start mid-block, as repair does after other draws.
                for _ in 0..seed % 7 {
                    a.next_u32();
                    b.next_u32();
                }
                let (mut x, mut y): (Vec<usize>, Vec<usize>) = ((0..len).collect(), (0..len).collect());
                // The breeder skips the orders; repair draws them again from there.
                let mut c = b.clone();
                let at = c.get_word_pos();
                let (mut replay, mut order) = (ChaCha8Rng::seed_from_u64(seed), Vec::new());
                let mut lazy = NodeOrders {
                    rng: &mut replay,
                    at,
                    order: &mut order,
                    drawn: 0,
                };
                for u in 0..5 {
                    x.shuffle(&mut a);
                    shuffle_exact(&mut y, &mut b, &zones);
                    skip_shuffle(len, &mut c, &zones);
                    assert_eq!(x, y, "len {len}, seed {seed}");
                    assert_eq!(a.get_word_pos(), b.get_word_pos(), "len {len}, seed {seed}");
                    assert_eq!(a.get_word_pos(), c.get_word_pos(), "len {len}, seed {seed}");
                    if u % 2 == 1 || len < 3 {
                        assert_eq!(lazy.get(u, &zones), &x[..], "len {len}, seed {seed}, order {u}");
                    }
                }
            }
        }
    }
}

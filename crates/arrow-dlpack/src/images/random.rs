//! The randomness of random crops and flips: one generator per row, made from the caller's seed
//! and the row's own key, so that a row's crop never depends on the thread that decodes it, on
//! the other rows of its batch, or on the order in which they are decoded.

/// The SplitMix64 increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijection of `u64` that mixes every input bit into every
/// output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of one row, from the parts that place it: for a loader, its epoch, the unit (record
/// batch or row group) it comes from and its row inside that unit; for one in-memory column,
/// `(0, 0, row)`.
///
/// Each part goes through SplitMix64's mixing in turn, so keys that differ in any part differ
/// everywhere.
///
/// ```
/// use arrow_dlpack::images::row_key;
///
/// assert_eq!(row_key(1, 7, 42), row_key(1, 7, 42));
/// assert_ne!(row_key(1, 7, 42), row_key(2, 7, 42));
/// assert_ne!(row_key(0, 1, 0), row_key(0, 0, 1));
/// ```
pub fn row_key(epoch: u64, unit: u64, row: u64) -> u64 {
    [epoch, unit, row].into_iter().fold(GOLDEN, |state, part| {
        mix(state ^ mix(part.wrapping_add(GOLDEN)))
    })
}

/// The generator of one row: SplitMix64 started from the seed and the row's key.
#[derive(Debug, Clone)]
pub(crate) struct RowRng {
    state: u64,
}

impl RowRng {
    /// The generator of the row with `key`, for the run seeded with `seed`.
    pub(crate) fn new(seed: u64, key: u64) -> Self {
        RowRng {
            state: mix(seed ^ mix(key ^ GOLDEN)),
        }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// A number uniform in `[0, 1)`, from the top 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A number uniform in `[low, high)` (`low` when they are equal).
    pub(crate) fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    /// An integer uniform in `0..=high`, without modulo bias (Lemire's multiply-shift, with
    /// rejection).
    pub(crate) fn below_or_equal(&mut self, high: u64) -> u64 {
        let Some(range) = high.checked_add(1) else {
            return self.next_u64();
        };
        loop {
            let product = u128::from(self.next_u64()) * u128::from(range);
            let low = product as u64;
            if low >= range.wrapping_neg() % range {
                return (product >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_key_give_the_same_draws() {
        let draws = |seed, key| {
            let mut rng = RowRng::new(seed, key);
            (0..4).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draws(3, row_key(0, 1, 2)), draws(3, row_key(0, 1, 2)));
        assert_ne!(draws(3, row_key(0, 1, 2)), draws(4, row_key(0, 1, 2)));
        assert_ne!(draws(3, row_key(0, 1, 2)), draws(3, row_key(0, 1, 3)));
    }

    #[test]
    fn draws_stay_in_their_ranges_and_cover_them() {
        let mut rng = RowRng::new(0, 0);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let value = rng.below_or_equal(4);
            assert!(value <= 4);
            seen[value as usize] = true;
            let x = rng.uniform(0.25, 0.5);
            assert!((0.25..0.5).contains(&x));
        }
        assert!(seen.iter().all(|&seen| seen));
        assert_eq!(rng.below_or_equal(0), 0);
    }
}

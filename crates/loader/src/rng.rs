//! A small seeded generator for reproducible shuffles: SplitMix64 (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", 2014), the same on every platform and
//! every version of this crate, which a dependency's generator does not promise.

/// The stream of the generator that shuffles the rows of shard `shard`'s windows (a loader's,
/// and a plan's that cuts a rank's windows as its loader would).
pub(crate) fn row_stream(shard: u64) -> u64 {
    // The stream of rows, apart from the streams of units and of planned windows.
    const ROWS: u64 = 2;
    ROWS ^ (shard << 8)
}

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`, with `stream` choosing an independent sequence for the same seed.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Rng {
            state: seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        // One step away from the raw seed, so that small seeds do not start with small outputs.
        rng.next_u64();
        rng
    }

    /// A generator that continues from `state`, as [`Rng::state`] gave it.
    pub(crate) fn from_state(state: u64) -> Self {
        Rng { state }
    }

    /// The generator's state: [`Rng::from_state`] continues the same sequence from here.
    pub(crate) fn state(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-shift; its bias, below `n / 2^64`, does
    /// not matter for shuffling data.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_gives_the_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 0);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 0);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<u32> = (0..1000).collect();
        Rng::new(1, 0).shuffle(&mut items);
        assert_ne!(items, (0..1000).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..1000).collect::<Vec<_>>());
    }
}

//! Drops repeated candidates of one call (the first one kept), by their hashes.
//!
//! The hashes are already uniformly distributed, so an open-addressing table indexed by the
//! hash's top bits needs no hasher of its own. Its slots hold positions in the caller's hash
//! slice rather than the hashes: 4 bytes a slot instead of 8, and the table is sized once for
//! the known number of inserts at most half full. For 1,000 candidates that is 8 KiB, where a
//! table of hashes at a quarter full took 32 KiB and pushed the array's text I/O, which runs
//! around this call, out of the level-1 cache.

pub struct DistinctHashes<'a> {
    hashes: &'a [u64],
    /// 0 for an empty slot, else 1 + the position in `hashes` of the hash stored there.
    slots: Vec<u32>,
    shift: u32,
    /// Inserts left before the table would be more than half full.
    room: usize,
}

impl<'a> DistinctHashes<'a> {
    /// A set over `hashes` for at most `inserts` calls of `insert`.
    ///
    /// # Panics
    /// When `hashes` has `u32::MAX` elements or more (a candidate array cannot).
    pub fn over(hashes: &'a [u64], inserts: usize) -> DistinctHashes<'a> {
        assert!(hashes.len() < u32::MAX as usize, "too many hashes");
        let inserts = inserts.min(hashes.len());
        let slots = (inserts.max(4) * 2).next_power_of_two();
        DistinctHashes {
            hashes,
            slots: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
            room: slots / 2,
        }
    }

    /// Adds `hashes[i]`; true if no equal hash was added before.
    ///
    /// # Panics
    /// When called more often than `over` was told, or with `i` out of range.
    #[inline]
    pub fn insert(&mut self, i: usize) -> bool {
        let h = self.hashes[i];
        let mask = self.slots.len() - 1;
        let mut s = (h >> self.shift) as usize;
        loop {
            match self.slots[s] {
                0 => {
                    self.room = self
                        .room
                        .checked_sub(1)
                        .expect("more inserts than sized for");
                    self.slots[s] = i as u32 + 1;
                    return true;
                }
                at if self.hashes[at as usize - 1] == h => return false,
                _ => s = (s + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DistinctHashes;

    #[test]
    fn first_insert_wins_and_repeats_are_refused() {
        let input = [
            5u64,
            0,
            u64::MAX,
            5,
            0,
            7,
            u64::MAX,
            1 << 63,
            9,
            10,
            11,
            12,
            13,
            7,
        ];
        let mut set = DistinctHashes::over(&input, input.len());
        let kept: Vec<u64> = (0..input.len())
            .filter(|&i| set.insert(i))
            .map(|i| input[i])
            .collect();
        assert_eq!(kept, vec![5, 0, u64::MAX, 7, 1 << 63, 9, 10, 11, 12, 13]);
    }

    #[test]
    fn colliding_top_bits_are_told_apart() {
        // Equal top bits, so every hash starts at the same slot and probes past the others.
        let input: Vec<u64> = (0..1000u64).chain(0..1000).collect();
        let mut set = DistinctHashes::over(&input, input.len());
        let kept: Vec<bool> = (0..input.len()).map(|i| set.insert(i)).collect();
        assert!(kept[..1000].iter().all(|&k| k));
        assert!(kept[1000..].iter().all(|&k| !k));
    }

    #[test]
    fn a_full_table_of_distinct_hashes() {
        let input: Vec<u64> = (1..=10_000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let mut set = DistinctHashes::over(&input, input.len());
        assert!((0..input.len()).all(|i| set.insert(i)));
        assert!((0..input.len()).all(|i| !set.insert(i)));
    }

    #[test]
    #[should_panic(expected = "more inserts than sized for")]
    fn more_inserts_than_sized_for_panic() {
        let input: Vec<u64> = (1..=100u64).map(|i| i << 40).collect();
        let mut set = DistinctHashes::over(&input, 2);
        for i in 0..input.len() {
            set.insert(i);
        }
    }
}

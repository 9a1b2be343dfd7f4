//! A set of item hashes for one call, used to drop repeated candidates (first one kept).
//!
//! The hashes are already uniformly distributed, so an open-addressing table indexed by the
//! hash's top bits needs no hasher of its own; zero is tracked apart as the empty marker.

pub struct DistinctHashes {
    slots: Vec<u64>,
    shift: u32,
    len: usize,
    has_zero: bool,
}

impl DistinctHashes {
    /// A set that holds `n` hashes at most a quarter full, without growing: few collisions,
    /// so an insert is one load and a well-predicted branch.
    pub fn with_capacity(n: usize) -> DistinctHashes {
        let slots = (n.max(4) * 4).next_power_of_two();
        DistinctHashes {
            slots: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
            len: 0,
            has_zero: false,
        }
    }

    /// Adds `h`; true if it was not there yet.
    pub fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            return !std::mem::replace(&mut self.has_zero, true);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = h;
                    self.len += 1;
                    return true;
                }
                x if x == h => return false,
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        *self = DistinctHashes {
            has_zero: self.has_zero,
            ..DistinctHashes::with_capacity(old.len())
        };
        for h in old.into_iter().filter(|&h| h != 0) {
            self.insert(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DistinctHashes;

    #[test]
    fn first_insert_wins_and_repeats_are_refused() {
        let mut set = DistinctHashes::with_capacity(3);
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
        let kept: Vec<u64> = input.iter().copied().filter(|&h| set.insert(h)).collect();
        assert_eq!(kept, vec![5, 0, u64::MAX, 7, 1 << 63, 9, 10, 11, 12, 13]);
    }

    #[test]
    fn grows_past_its_initial_capacity() {
        let mut set = DistinctHashes::with_capacity(1);
        for i in 1..10_000u64 {
            assert!(set.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        }
        for i in 1..10_000u64 {
            assert!(!set.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        }
    }
}

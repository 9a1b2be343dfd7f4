//! The exact hashes of a user's window as a set built for one batch of lookups: open
//! addressing with linear probing over a power-of-two table at most half full, indexed by a
//! hash's top bits (item hashes are uniform, so the top bits spread them as well as any).
//!
//! A read over exact rows used to binary-search a sorted array: about 10 dependent, poorly
//! predicted steps per candidate over a window of ~1,000 exact hashes, against one or two
//! loads here.

/// A set of 64-bit hashes; 0 marks an empty slot, so a hash of 0 is kept apart.
#[derive(Default)]
pub(crate) struct ExactSet {
    slots: Vec<u64>,
    /// `64 - log2(slots.len())`: a hash's top bits are its home slot.
    shift: u32,
    holds_zero: bool,
}

impl ExactSet {
    pub fn build(hashes: &[u64]) -> ExactSet {
        if hashes.is_empty() {
            return ExactSet::default();
        }
        let len = (2 * hashes.len()).next_power_of_two().max(2);
        let shift = 64 - len.trailing_zeros();
        let mask = len - 1;
        let mut set = ExactSet {
            slots: vec![0; len],
            shift,
            holds_zero: false,
        };
        for &h in hashes {
            if h == 0 {
                set.holds_zero = true;
                continue;
            }
            let mut i = (h >> shift) as usize;
            loop {
                let slot = &mut set.slots[i];
                if *slot == 0 {
                    *slot = h;
                    break;
                }
                if *slot == h {
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        set
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        if h == 0 {
            return self.holds_zero;
        }
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        // The table is at most half full, so an empty slot ends every probe sequence.
        loop {
            let slot = self.slots[i];
            if slot == h {
                return true;
            }
            if slot == 0 {
                return false;
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash_i64;
    use proptest::prelude::*;

    #[test]
    fn empty_holds_nothing() {
        let set = ExactSet::build(&[]);
        assert!(set.is_empty());
        assert!(!set.contains(0) && !set.contains(1) && !set.contains(u64::MAX));
    }

    #[test]
    fn holds_its_hashes_and_no_others() {
        let hashes: Vec<u64> = (0..1152).map(hash_i64).collect();
        let set = ExactSet::build(&hashes);
        assert!(hashes.iter().all(|&h| set.contains(h)));
        assert!((10_000..60_000).map(hash_i64).all(|h| !set.contains(h)));
    }

    /// Colliding top bits, duplicates, zero and the extremes, against a sorted reference.
    #[test]
    fn clustered_duplicated_and_zero_hashes() {
        let hashes = [
            0u64,
            5,
            6,
            7,
            5,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) | 1,
            0,
        ];
        let set = ExactSet::build(&hashes);
        for probe in [
            0u64,
            1,
            4,
            5,
            6,
            7,
            8,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX - 2,
            1 << 63,
            (1 << 63) | 1,
            (1 << 63) | 2,
        ] {
            assert_eq!(set.contains(probe), hashes.contains(&probe), "{probe:#x}");
        }
        assert!(!ExactSet::build(&[3]).contains(0));
    }

    proptest! {
        #[test]
        fn answers_like_a_sorted_array(
            stored in proptest::collection::vec(any::<u64>(), 0..300),
            probes in proptest::collection::vec(any::<u64>(), 0..300),
            low_bits in any::<bool>(),
        ) {
            // Small values share their top bits: the worst case for the home slots.
            let fold = |v: u64| if low_bits { v % 512 } else { v };
            let stored: Vec<u64> = stored.into_iter().map(fold).collect();
            let set = ExactSet::build(&stored);
            let mut sorted = stored.clone();
            sorted.sort_unstable();
            for p in probes.into_iter().map(fold).chain(stored.iter().copied()) {
                prop_assert_eq!(set.contains(p), sorted.binary_search(&p).is_ok());
            }
        }
    }
}

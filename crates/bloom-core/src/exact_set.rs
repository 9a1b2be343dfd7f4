//! The exact hashes of a user's window as a set built for one batch of lookups, probed
//! without a branch on the answer: each hash sits within [`WINDOW`] slots after its home slot
//! (its top bits) in a table at most a quarter full, so a lookup compares one fixed window;
//! the rare hash that finds its window full goes to a short overflow list, scanned the same
//! way.
//!
//! Whether a feed's candidate was seen is a coin toss for the branch predictor: a binary
//! search over ~1,000 sorted exact hashes (about 10 such branches per candidate), or a probe
//! loop that stops at the first empty slot, mispredicts on most candidates. For 1,000 fresh
//! candidates against one 170-hash exact row, in a server, that loop took about a fifth of the
//! call.

/// Slots compared per lookup: a hash is stored at most this many slots after its home.
const WINDOW: usize = 4;

/// Sets of at most this many hashes are compared whole instead (one row of a light user's open
/// generation: 2 hashes for a 10-item user).
const SMALL: usize = 8;

/// A set of 64-bit hashes; 0 marks an empty slot, so a hash of 0 is kept apart.
#[derive(Default)]
pub(crate) struct ExactSet {
    /// `2^bits` home slots, then `WINDOW - 1` more so that no window wraps.
    slots: Vec<u64>,
    /// `64 - bits`: a hash's top bits are its home slot.
    shift: u32,
    /// Hashes whose window was full (colliding top bits).
    overflow: Vec<u64>,
    holds_zero: bool,
    /// A set of at most SMALL hashes, as given (duplicates are harmless): compared whole by
    /// `mark`.
    small: Vec<u64>,
}

impl ExactSet {
    pub fn build(hashes: &[u64]) -> ExactSet {
        if hashes.is_empty() {
            return ExactSet::default();
        }
        let homes = (4 * hashes.len()).next_power_of_two();
        let shift = 64 - homes.trailing_zeros();
        let mut set = ExactSet {
            slots: vec![0; homes + WINDOW - 1],
            shift,
            overflow: Vec::new(),
            holds_zero: false,
            small: if hashes.len() <= SMALL {
                hashes.to_vec()
            } else {
                Vec::new()
            },
        };
        for &h in hashes {
            if h == 0 {
                set.holds_zero = true;
                continue;
            }
            let home = (h >> shift) as usize;
            let window = &mut set.slots[home..home + WINDOW];
            if window.contains(&h) {
                continue;
            }
            match window.iter_mut().find(|slot| **slot == 0) {
                Some(slot) => *slot = h,
                None if !set.overflow.contains(&h) => set.overflow.push(h),
                None => {}
            }
        }
        set
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let home = (h >> self.shift) as usize;
        let in_window = self.slots[home..home + WINDOW]
            .iter()
            .fold(false, |hit, &slot| hit | (slot == h));
        let in_overflow = self
            .overflow
            .iter()
            .fold(false, |hit, &slot| hit | (slot == h));
        // A zero hash matches the empty slots: only `holds_zero` answers for it.
        ((h != 0) & (in_window | in_overflow)) | ((h == 0) & self.holds_zero)
    }

    /// Sets `found[i]` where the set holds `hashes[i]`, never clearing one: the batch lookup.
    /// A set of at most SMALL hashes is compared whole; a larger one's window is one AVX2
    /// compare where the CPU has it. For 1,000 candidates the scalar lookup took 1.8 us
    /// against a 2-hash exact row beside a compacted filter whose probe took 2.1 (`cargo
    /// bench -p bloom-core --bench probe -- peak_10_items`).
    pub fn mark(&self, hashes: &[u64], found: &mut [bool]) {
        self.mark_using(hashes, found, true)
    }

    /// `mark`, with AVX-512 only if `allow_avx512` (tests compare the kernels).
    #[allow(unsafe_code)] // dispatches to the AVX2 and AVX-512 kernels
    fn mark_using(&self, hashes: &[u64], found: &mut [bool], allow_avx512: bool) {
        if self.slots.is_empty() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let avx512 = allow_avx512 && std::is_x86_feature_detected!("avx512f");
            // SAFETY: the CPU has just been seen to support AVX2, and AVX-512F where
            // `avx512` says so.
            unsafe {
                if !self.small.is_empty() {
                    mark_small_avx2(&self.small, hashes, found);
                } else if avx512 {
                    self.mark_window_avx512(hashes, found);
                } else {
                    self.mark_window_avx2(hashes, found);
                }
            }
            return;
        }
        for (&h, f) in hashes.iter().zip(found.iter_mut()) {
            *f |= self.contains(h);
        }
    }

    /// `mark` through the windows, each one load and one compare of its 4 slots. An
    /// overflow list of up to 4 hashes (about a tenth of the sets of 60 to 300 hashes have
    /// one) is one more compare in the same pass; a longer one a second pass.
    ///
    /// # Safety
    /// The CPU must support AVX2; the set is not empty.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn mark_window_avx2(&self, hashes: &[u64], found: &mut [bool]) {
        use std::arch::x86_64::*;
        const { assert!(WINDOW == 4) };
        debug_assert!(!self.slots.is_empty());
        let slots = self.slots.as_ptr();
        // Zero slots pad the overflow to a vector: a zero hash is answered apart.
        let mut padded = [0u64; WINDOW];
        let short_overflow = self.overflow.len() <= WINDOW;
        if short_overflow {
            padded[..self.overflow.len()].copy_from_slice(&self.overflow);
        }
        // SAFETY: WINDOW (4) u64s, 32 readable bytes.
        let overflow = unsafe { _mm256_loadu_si256(padded.as_ptr() as *const __m256i) };
        let holds = |h: u64, with_overflow: bool| {
            let home = (h >> self.shift) as usize;
            let h_vector = _mm256_set1_epi64x(h as i64);
            // SAFETY: a home is below 2^(64 - shift), and `slots` holds that many and
            // WINDOW - 1 more u64s, so the 4 slots from `home` are inside it.
            let window = unsafe { _mm256_loadu_si256(slots.add(home) as *const __m256i) };
            let mut equal = _mm256_cmpeq_epi64(window, h_vector);
            if with_overflow {
                equal = _mm256_or_si256(equal, _mm256_cmpeq_epi64(overflow, h_vector));
            }
            let in_window = _mm256_testz_si256(equal, equal) == 0;
            // A zero hash matches the empty slots: only `holds_zero` answers for it.
            ((h != 0) & in_window) | ((h == 0) & self.holds_zero)
        };
        if self.overflow.is_empty() {
            crate::flags::mark_each(hashes, found, |h| holds(h, false));
        } else if short_overflow {
            crate::flags::mark_each(hashes, found, |h| holds(h, true));
        } else {
            crate::flags::mark_each(hashes, found, |h| holds(h, false));
            for (&h, f) in hashes.iter().zip(found.iter_mut()) {
                *f |= (h != 0) & self.overflow.contains(&h);
            }
        }
    }

    /// `mark` through the windows eight candidates at a time: their homes in one shift, each
    /// window slot of all eight in one gather, the overflow list (any length) one compare
    /// per hash. For 1,000 candidates against a 66-hash set: 1.02 us with AVX2 one
    /// candidate at a time, 0.80 with these gathers (`cargo bench -p bloom-core --bench
    /// probe -- exact_row`).
    ///
    /// # Safety
    /// The CPU must support AVX-512F; the set is not empty.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn mark_window_avx512(&self, hashes: &[u64], found: &mut [bool]) {
        use std::arch::x86_64::*;
        debug_assert!(!self.slots.is_empty());
        let slots = self.slots.as_ptr() as *const i64;
        let shift = _mm_cvtsi32_si128(self.shift as i32);
        let zero_answer: u8 = if self.holds_zero { 0xff } else { 0 };
        let eight = |eight: &[u64; 8]| {
            // SAFETY: eight u64s, 64 readable bytes.
            let h = unsafe { _mm512_loadu_si512(eight.as_ptr() as *const __m512i) };
            let home = _mm512_srl_epi64(h, shift);
            let mut equal: u8 = 0;
            for slot in 0..WINDOW {
                // SAFETY: a home is below 2^(64 - shift), and `slots` holds that many and
                // WINDOW - 1 more u64s, so slot `home + slot` is inside it.
                let window = unsafe { _mm512_i64gather_epi64::<8>(home, slots.add(slot)) };
                equal |= _mm512_cmpeq_epi64_mask(window, h);
            }
            for &o in &self.overflow {
                equal |= _mm512_cmpeq_epi64_mask(_mm512_set1_epi64(o as i64), h);
            }
            // A zero hash matches the empty slots: only `holds_zero` answers for it.
            let nonzero = _mm512_test_epi64_mask(h, h);
            (equal & nonzero) | (!nonzero & zero_answer)
        };
        crate::flags::mark_eights(hashes, found, eight, |h| self.contains(h));
    }
}

/// `ExactSet::mark` of a small set: eight candidates at a time, each of the set's hashes two
/// compares against all eight.
///
/// # Safety
/// The CPU must support AVX2.
#[allow(unsafe_code)] // a SIMD kernel
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mark_small_avx2(small: &[u64], hashes: &[u64], found: &mut [bool]) {
    use std::arch::x86_64::*;
    let eight = |eight: &[u64; 8]| {
        // SAFETY: eight u64s, two vectors of 32 readable bytes.
        let (low, high) = unsafe {
            (
                _mm256_loadu_si256(eight.as_ptr() as *const __m256i),
                _mm256_loadu_si256(eight.as_ptr().add(4) as *const __m256i),
            )
        };
        let (mut equal_low, mut equal_high) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for &x in small {
            let x = _mm256_set1_epi64x(x as i64);
            equal_low = _mm256_or_si256(equal_low, _mm256_cmpeq_epi64(low, x));
            equal_high = _mm256_or_si256(equal_high, _mm256_cmpeq_epi64(high, x));
        }
        (_mm256_movemask_pd(_mm256_castsi256_pd(equal_low))
            | _mm256_movemask_pd(_mm256_castsi256_pd(equal_high)) << 4) as u8
    };
    crate::flags::mark_eights(hashes, found, eight, |h| small.contains(&h));
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

    /// Colliding top bits (small values share them: more than a window's worth overflow),
    /// duplicates, zero and the extremes, against a sorted reference.
    #[test]
    fn clustered_duplicated_and_zero_hashes() {
        let small: Vec<u64> = (1..40).chain(1..10).collect();
        let set = ExactSet::build(&small);
        assert!(!set.overflow.is_empty());
        for probe in 0..60u64 {
            assert_eq!(set.contains(probe), small.contains(&probe), "{probe}");
        }
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

    /// Sets whose overflow lists hold 1 to 4 hashes (compared in the windows' pass) and more
    /// (a second pass): the batch lookup answers as single lookups do, for held and fresh
    /// hashes and zero.
    #[test]
    fn mark_compares_short_and_long_overflow_lists() {
        let mut lengths_seen = [false; WINDOW + 2];
        for cluster in 5..=10u64 {
            // 1..=cluster share their top bits (home 0): all but a window's 4 overflow.
            let stored: Vec<u64> = (0..300)
                .map(|i| hash_i64(cluster as i64 * 1_000 + i))
                .chain(1..=cluster)
                .collect();
            let set = ExactSet::build(&stored);
            assert!(set.overflow.len() as u64 >= cluster - 4);
            lengths_seen[set.overflow.len().min(WINDOW + 1)] = true;
            let probes: Vec<u64> = stored
                .iter()
                .copied()
                .chain((0..700).map(|i| hash_i64(9_000_000 + i)))
                .chain(set.overflow.iter().map(|h| h ^ (1 << 40)))
                .chain(0..20)
                .collect();
            for allow_avx512 in [false, true] {
                let mut found = vec![false; probes.len()];
                set.mark_using(&probes, &mut found, allow_avx512);
                for (p, f) in probes.iter().zip(&found) {
                    assert_eq!(*f, stored.contains(p), "{p:#x}, cluster of {cluster}");
                }
            }
        }
        assert!(lengths_seen[1..].iter().all(|&s| s), "{lengths_seen:?}");
    }

    proptest! {
        /// The batch lookup, small sets and windows alike, answers as single lookups do.
        #[test]
        fn mark_answers_like_contains(
            stored in proptest::collection::vec(any::<u64>(), 0..40),
            probes in proptest::collection::vec(any::<u64>(), 0..100),
            low_bits in any::<bool>(),
        ) {
            let fold = |v: u64| if low_bits { v % 64 } else { v };
            let stored: Vec<u64> = stored.into_iter().map(fold).collect();
            let set = ExactSet::build(&stored);
            let probes: Vec<u64> = probes.into_iter().map(fold).chain(stored.iter().copied()).chain([0]).collect();
            for allow_avx512 in [false, true] {
                let mut found = vec![false; probes.len()];
                set.mark_using(&probes, &mut found, allow_avx512);
                for (p, f) in probes.iter().zip(&found) {
                    prop_assert_eq!(*f, stored.contains(p), "{:#x}", p);
                }
                // Flags already set stay set.
                let mut all = vec![true; probes.len()];
                set.mark_using(&probes, &mut all, allow_avx512);
                prop_assert!(all.iter().all(|&f| f));
            }
        }

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

//! A static filter read in three memory accesses: an xor filter (Graf & Lemire 2020) of k-bit
//! fingerprints, for the parts of a compacted window (see compacted.rs) since 0.5.0.
//!
//! Each hash is mixed with the filter's seed into three slots, one in each third of an array
//! of about 1.23 n + 32 slots, and a k-bit fingerprint; the slots' values XOR to the
//! fingerprint of every item built in, and to that of a fresh item with probability 2^-k. A
//! lookup is one multiply, three reads and a compare, with no branch on the data: 1,000
//! lookups in a 3,000-item window cut into 3 rows took 3.1 us, against 3.0 for the same
//! items' split-block probes in 6 generations and 13.5 for the Elias-Fano set (static_set,
//! which it replaces in new rows and which is still read), measured side by side (`cargo
//! bench -p bloom-core --bench probe -- 3000_items`). It takes 1.23 k bits per item and 32
//! slots: 9.8 bits at k = 8, where the Elias-Fano set takes k + 2.5.
//!
//! Built by peeling: slots holding one item are assigned last-first; a set that does not
//! peel (two items on the same three slots, or a 2-core, rare at 1.23 n slots) is tried again
//! with the next seed.
//!
//! Layout (little-endian): a 16-byte header (version 2, k, two zero bytes, then as u32 each:
//! the seed, the items, the slots of one third), the slots packed as k-bit values from each
//! byte's low bit, and 8 zero bytes so that a 64-bit read of any slot stays inside the value.

use crate::error::Error;
use crate::static_set::u32_at;

/// Bytes before the slots.
pub const XOR_HEADER_BYTES: usize = 16;
/// The static filter version (the header's first byte) of an xor filter; static_set's is 1.
pub const XOR_VERSION: u8 = 2;
const PADDING: usize = 8;
/// Seeds tried before giving up (each fails with probability well under 1%).
const SEEDS: u32 = 64;

/// Slots in each third for `n` items.
fn third_for(n: u64) -> u64 {
    (32 + n + n.div_ceil(4) - n / 50).div_ceil(3).max(1)
}

/// Bytes of a filter of `n` items at k = `bits`.
pub fn xor_bytes_for(n: u64, bits: u8) -> u64 {
    XOR_HEADER_BYTES as u64 + (3 * third_for(n) * u64::from(bits)).div_ceil(8) + PADDING as u64
}

/// An item's mixed hash under `seed`: one multiply by the seed's odd multiplier. Item hashes
/// are uniform already (MurmurHash3, docs/FORMAT.md), so the mix has only to give each seed
/// slots of its own for peeling. MurmurHash3's finalizer here, and a lookup through each
/// part's header, took 5.1 us for the 3.1 above.
#[inline(always)]
fn mixed(hash: u64, seed: u32) -> u64 {
    hash.wrapping_mul(multiplier(seed))
}

/// The seed's odd multiplier.
#[inline(always)]
fn multiplier(seed: u32) -> u64 {
    (u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD6E8_FEB8_6659_FD93) | 1
}

/// The three slots of a mixed hash, one per third.
#[inline(always)]
fn slots(m: u64, third: u64) -> [u64; 3] {
    let reduce = |x: u64| ((x & 0xffff_ffff) * third) >> 32;
    [
        reduce(m),
        third + reduce(m.rotate_left(21)),
        2 * third + reduce(m.rotate_left(42)),
    ]
}

#[inline(always)]
fn fingerprint(m: u64, mask: u64) -> u64 {
    (m ^ (m >> 32)) & mask
}

/// Builds the filter of `hashes` (sorted and distinct) with k = `bits`.
pub fn build_xor(hashes: &[u64], bits: u8) -> Result<Vec<u8>, Error> {
    if !(1..=32).contains(&bits) {
        return Err(Error::BadParameter(format!(
            "fingerprint bits must be between 1 and 32, got {bits}"
        )));
    }
    if !hashes.is_sorted_by(|a, b| a < b) {
        return Err(Error::BadParameter(
            "an xor filter is built from sorted, distinct hashes".into(),
        ));
    }
    let n = hashes.len() as u64;
    let third = third_for(n);
    let size = (3 * third) as usize;
    let mask = (1u64 << bits) - 1;
    for seed in 0..SEEDS {
        if let Some(order) = peel(hashes, seed, third) {
            let mut values = vec![0u64; size];
            for &(m, slot) in order.iter().rev() {
                let [a, b, c] = slots(m, third);
                // Its own slot is still 0 and XORs in as nothing.
                values[slot] ^= fingerprint(m, mask)
                    ^ values[a as usize]
                    ^ values[b as usize]
                    ^ values[c as usize];
            }
            let mut out = Vec::with_capacity(xor_bytes_for(n, bits) as usize);
            out.extend_from_slice(&[XOR_VERSION, bits, 0, 0]);
            out.extend_from_slice(&seed.to_le_bytes());
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&(third as u32).to_le_bytes());
            let mut packed =
                vec![0u8; (size as u64 * u64::from(bits)).div_ceil(8) as usize + PADDING];
            for (i, &v) in values.iter().enumerate() {
                let bit = i as u64 * u64::from(bits);
                for b in 0..u64::from(bits) {
                    if v >> b & 1 == 1 {
                        let at = bit + b;
                        packed[(at / 8) as usize] |= 1 << (at % 8);
                    }
                }
            }
            out.extend_from_slice(&packed);
            return Ok(out);
        }
    }
    Err(Error::BadParameter(format!(
        "{n} items did not make an xor filter in {SEEDS} seeds"
    )))
}

/// The peeling order under `seed`: (mixed hash, the slot it is assigned), first peeled
/// first; None when the set does not peel.
fn peel(hashes: &[u64], seed: u32, third: u64) -> Option<Vec<(u64, usize)>> {
    let size = (3 * third) as usize;
    let mut count = vec![0u32; size];
    let mut xored = vec![0u64; size];
    for &h in hashes {
        let m = mixed(h, seed);
        for s in slots(m, third) {
            count[s as usize] += 1;
            xored[s as usize] ^= m;
        }
    }
    let mut queue: Vec<usize> = (0..size).filter(|&s| count[s] == 1).collect();
    let mut order = Vec::with_capacity(hashes.len());
    while let Some(slot) = queue.pop() {
        if count[slot] != 1 {
            continue;
        }
        let m = xored[slot];
        order.push((m, slot));
        for s in slots(m, third) {
            let s = s as usize;
            count[s] -= 1;
            xored[s] ^= m;
            if count[s] == 1 {
                queue.push(s);
            }
        }
    }
    (order.len() == hashes.len()).then_some(order)
}

/// An xor filter read in place from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct XorSet<'a> {
    bits: u8,
    seed: u32,
    len: u64,
    third: u64,
    /// The low k bits.
    mask: u64,
    /// The packed slots and their padding.
    slots: &'a [u8],
}

impl<'a> XorSet<'a> {
    /// Reads a filter written by [`build_xor`], checking that its parts fit its length.
    pub fn parse(bytes: &'a [u8]) -> Result<XorSet<'a>, Error> {
        let malformed = |why: &str| Error::Malformed(format!("xor filter: {why}"));
        if bytes.len() < XOR_HEADER_BYTES + PADDING {
            return Err(malformed("shorter than its header"));
        }
        if bytes[0] != XOR_VERSION {
            return Err(malformed(&format!("unknown version {}", bytes[0])));
        }
        let bits = bytes[1];
        if !(1..=32).contains(&bits) || bytes[2] != 0 || bytes[3] != 0 {
            return Err(malformed("bad fingerprint bits"));
        }
        let seed = u32_at(bytes, 4);
        let len = u64::from(u32_at(bytes, 8));
        let third = u64::from(u32_at(bytes, 12));
        if third != third_for(len) || bytes.len() as u64 != xor_bytes_for(len, bits) {
            return Err(malformed("its lengths do not match"));
        }
        Ok(XorSet {
            bits,
            seed,
            len,
            third,
            mask: (1u64 << bits) - 1,
            slots: &bytes[XOR_HEADER_BYTES..],
        })
    }

    /// The chance that an item not held matches: 2^-k.
    pub fn false_positive_rate(&self) -> f64 {
        0.5f64.powi(i32::from(self.bits))
    }

    /// Slot `i`'s value (`i` below the slots: `slots` gives each third's below `third`).
    #[inline(always)]
    #[allow(unsafe_code)] // an unaligned read of checked bounds
    fn slot(&self, i: u64) -> u64 {
        let bit = i * u64::from(self.bits);
        let at = (bit / 8) as usize;
        debug_assert!(at + 8 <= self.slots.len());
        // SAFETY: parse checked the length: every slot's bytes and 8 bytes of padding, so an
        // 8-byte read from any slot's first byte is inside; an unaligned read of them is a
        // u64's bytes.
        let word = unsafe { self.slots.as_ptr().add(at).cast::<u64>().read_unaligned() };
        (u64::from_le(word) >> (bit % 8)) & self.mask
    }

    /// Whether `hash` may be held (never false for a hash built in).
    #[inline(always)]
    pub fn contains(&self, hash: u64) -> bool {
        if let Some(probe) = self.byte_probe() {
            return probe.contains(hash);
        }
        let m = mixed(hash, self.seed);
        let [a, b, c] = slots(m, self.third);
        // (An empty filter's slots are all zero: a fingerprint of 0 would match.)
        self.len > 0 && fingerprint(m, self.mask) == self.slot(a) ^ self.slot(b) ^ self.slot(c)
    }

    /// At 8 <= k <= 25 (a 0.1% table's k is 11, a 1% table's 8), the lookup of packed slots
    /// with the filter's constants copied out; None at any other k.
    #[inline(always)]
    pub fn packed_probe(&self) -> Option<PackedProbe<'a>> {
        (8..=25).contains(&self.bits).then_some(PackedProbe {
            multiplier: multiplier(self.seed),
            third: self.third,
            bits: u64::from(self.bits),
            mask: self.mask,
            held: self.len > 0,
            slots: self.slots,
        })
    }

    /// At k = 8 (a 1% table's), the lookup on whole bytes; None at any other k.
    #[inline(always)]
    pub fn byte_probe(&self) -> Option<ByteProbe<'a>> {
        (self.bits == 8).then_some(ByteProbe {
            seed: self.seed,
            third: self.third,
            held: self.len > 0,
            slots: self.slots,
        })
    }
}

/// An xor filter of byte slots (k = 8), copied out of its header so that a loop over
/// candidates keeps it in registers: three byte reads a lookup.
#[derive(Debug, Clone, Copy)]
pub struct ByteProbe<'a> {
    seed: u32,
    third: u64,
    /// Whether it holds any item: an empty filter's zero slots would match fingerprint 0.
    held: bool,
    slots: &'a [u8],
}

impl ByteProbe<'_> {
    /// Whether `hash` may be held, with no branch on the data.
    #[inline(always)]
    pub fn contains(&self, hash: u64) -> bool {
        let m = mixed(hash, self.seed);
        let [a, b, c] = slots(m, self.third);
        self.held & (fingerprint(m, 0xff) == u64::from(self.byte(a) ^ self.byte(b) ^ self.byte(c)))
    }

    /// Slot `i` (below the slots: `slots` gives each third's below `third`).
    #[inline(always)]
    #[allow(unsafe_code)] // a read of checked bounds, without the check per slot
    fn byte(&self, i: u64) -> u8 {
        debug_assert!((i as usize) < self.slots.len());
        // SAFETY: `slots` keeps each index below 3 * third, and parse checked that the slots
        // take 3 * third bytes at k = 8 (then 8 bytes of padding).
        unsafe { *self.slots.get_unchecked(i as usize) }
    }
}

/// An xor filter of packed slots of 8 to 25 bits, copied out of its header so that a loop
/// over candidates keeps it in registers: three 4-byte reads a lookup (a slot's bits start
/// within the first byte read, and 7 + 25 bits fit in 32).
#[derive(Debug, Clone, Copy)]
pub struct PackedProbe<'a> {
    multiplier: u64,
    third: u64,
    bits: u64,
    mask: u64,
    /// Whether it holds any item: an empty filter's zero slots would match fingerprint 0.
    held: bool,
    slots: &'a [u8],
}

impl PackedProbe<'_> {
    /// Whether `hash` may be held, with no branch on the data.
    #[inline(always)]
    pub fn contains(&self, hash: u64) -> bool {
        let m = hash.wrapping_mul(self.multiplier);
        let [a, b, c] = slots(m, self.third);
        self.held & (fingerprint(m, self.mask) == self.slot(a) ^ self.slot(b) ^ self.slot(c))
    }

    /// Sets `found[i]` where the filter may hold `hashes[i]`, eight candidates at a time
    /// with AVX-512: the multiplies and shifts of eight lookups in one vector each, the
    /// slots read by three gathers.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512DQ.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub unsafe fn mark_avx512(&self, hashes: &[u64], found: &mut [bool]) {
        use std::arch::x86_64::*;
        let multiplier = _mm512_set1_epi64(self.multiplier as i64);
        let third = _mm512_set1_epi64(self.third as i64);
        let bits = _mm512_set1_epi64(self.bits as i64);
        let mask = _mm512_set1_epi64(self.mask as i64);
        let seven = _mm512_set1_epi64(7);
        let base = self.slots.as_ptr();
        // Slot `i`'s value: 8 bytes from its first byte (inside the slots and their 8 bytes
        // of padding, as `slot` reads 4), shifted to its first bit.
        let slot = |i: __m512i| {
            let bit = _mm512_mul_epu32(i, bits);
            // SAFETY: each index is below 3 * third (the caller's reduce), so each byte
            // offset is below the slots' length and 8 bytes from it are inside (parse).
            let words = unsafe {
                _mm512_i64gather_epi64::<1>(_mm512_srli_epi64::<3>(bit), base as *const i64)
            };
            _mm512_and_si512(_mm512_srlv_epi64(words, _mm512_and_si512(bit, seven)), mask)
        };
        // ((x & 0xffff_ffff) * third) >> 32: a multiply of the low 32 bits of each lane.
        let reduce = |x: __m512i| _mm512_srli_epi64::<32>(_mm512_mul_epu32(x, third));
        let second = third;
        let last = _mm512_add_epi64(third, third);
        let held = if self.held { 0xff } else { 0 };
        let eight = |eight: &[u64; 8]| {
            // SAFETY: eight u64s, 64 readable bytes.
            let h = unsafe { _mm512_loadu_si512(eight.as_ptr() as *const __m512i) };
            let m = _mm512_mullo_epi64(h, multiplier);
            let a = reduce(m);
            let b = _mm512_add_epi64(second, reduce(_mm512_rol_epi64::<21>(m)));
            let c = _mm512_add_epi64(last, reduce(_mm512_rol_epi64::<42>(m)));
            let fingerprint =
                _mm512_and_si512(_mm512_xor_si512(m, _mm512_srli_epi64::<32>(m)), mask);
            let xored = _mm512_xor_si512(_mm512_xor_si512(slot(a), slot(b)), slot(c));
            _mm512_cmpeq_epi64_mask(fingerprint, xored) & held
        };
        crate::flags::mark_eights(hashes, found, eight, |h| self.contains(h));
    }

    /// Slot `i` (below the slots: `slots` gives each third's below `third`).
    #[inline(always)]
    #[allow(unsafe_code)] // an unaligned read of checked bounds, without the check per slot
    fn slot(&self, i: u64) -> u64 {
        let bit = i * self.bits;
        let at = (bit / 8) as usize;
        debug_assert!(at + 4 <= self.slots.len());
        // SAFETY: `slots` keeps each index below 3 * third, and parse checked that the slots
        // take 3 * third * k bits and then 8 bytes of padding, so 4 bytes from any slot's
        // first byte are inside; an unaligned read of them is a u32's bytes.
        let word = unsafe { self.slots.as_ptr().add(at).cast::<u32>().read_unaligned() };
        (u64::from(u32::from_le(word)) >> (bit % 8)) & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: [u8; 42] = [
        2, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10,
        64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn hashes(seed: u64, n: usize) -> Vec<u64> {
        let mut h: Vec<u64> = (0..n as u64)
            .map(|i| crate::hash_i64((seed << 40) as i64 + i as i64))
            .collect();
        h.sort_unstable();
        h.dedup();
        h
    }

    #[test]
    fn holds_every_item_at_its_rate() {
        for (n, bits) in [
            (0, 8),
            (1, 8),
            (2, 1),
            (600, 8),
            (1000, 8),
            (1000, 11),
            (3000, 13),
            (100_000, 8),
            (2000, 32),
        ] {
            let items = hashes(1, n);
            let bytes = build_xor(&items, bits).unwrap();
            assert_eq!(bytes.len() as u64, xor_bytes_for(n as u64, bits));
            let set = XorSet::parse(&bytes).unwrap();
            assert!(
                items.iter().all(|&h| set.contains(h)),
                "a false negative at n = {n}, k = {bits}"
            );
            let fresh = hashes(2, 200_000);
            let rate = fresh.iter().filter(|&&h| set.contains(h)).count() as f64 / 200_000.0;
            let model = set.false_positive_rate();
            let expected = if n == 0 { 0.0 } else { model };
            assert!(
                rate <= expected * 1.25 + 2e-5 && (n < 100 || bits > 16 || rate >= model * 0.75),
                "n = {n}, k = {bits}: measured {rate}, modelled {model}"
            );
        }
    }

    /// The copied-out lookup of packed slots answers as the filter's own, for every k it
    /// takes, empty filters included; none is offered at other k.
    #[test]
    #[allow(unsafe_code)] // the AVX-512 kernel is tested directly
    fn packed_probe_answers_like_the_filter() {
        for bits in [1u8, 8, 9, 11, 13, 16, 25, 26, 32] {
            for n in [0usize, 1, 300, 2400] {
                let bytes = build_xor(&hashes(3, n), bits).unwrap();
                let set = XorSet::parse(&bytes).unwrap();
                let Some(probe) = set.packed_probe() else {
                    assert!(!(8..=25).contains(&bits), "no probe at k = {bits}");
                    continue;
                };
                let candidates: Vec<u64> =
                    hashes(3, n).into_iter().chain(hashes(4, 20_003)).collect();
                for &h in &candidates {
                    assert_eq!(probe.contains(h), set.contains(h), "k = {bits}, n = {n}");
                }
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512dq")
                {
                    // The vector kernel, over a length that leaves a tail of 3, with flags
                    // already set kept.
                    let mut found: Vec<bool> = (0..candidates.len()).map(|i| i % 5 == 0).collect();
                    // SAFETY: the CPU has just been seen to support AVX-512F and DQ.
                    unsafe { probe.mark_avx512(&candidates, &mut found) };
                    for (i, (&h, &f)) in candidates.iter().zip(&found).enumerate() {
                        assert_eq!(
                            f,
                            i % 5 == 0 || set.contains(h),
                            "k = {bits}, n = {n}, candidate {i}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn takes_1_23_k_bits_per_item() {
        for (n, bits) in [(1000, 8), (1000, 11), (100_000, 8)] {
            let bytes = build_xor(&hashes(3, n), bits).unwrap();
            let per_item = (bytes.len() * 8) as f64 / n as f64;
            let most = 1.24 * f64::from(bits) + 8.0 * 60.0 / n as f64;
            assert!(
                per_item <= most,
                "n = {n}, k = {bits}: {per_item} bits per item"
            );
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        let bytes = build_xor(&hashes(4, 500), 8).unwrap();
        assert!(XorSet::parse(&bytes).is_ok());
        assert!(XorSet::parse(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes.clone();
        bad[0] = 1;
        assert!(XorSet::parse(&bad).is_err());
        let mut bad = bytes.clone();
        bad[1] = 0;
        assert!(XorSet::parse(&bad).is_err());
        let mut bad = bytes.clone();
        bad[8] ^= 1;
        assert!(XorSet::parse(&bad).is_err());
        assert!(build_xor(&[2, 1], 8).is_err());
        assert!(build_xor(&[1, 2], 0).is_err());
    }

    /// The bytes of a small filter, fixed: a change of the mix, the slots or the packing
    /// would misread every stored row.
    #[test]
    fn golden_bytes() {
        let bytes = build_xor(&hashes(5, 3), 4).unwrap();
        assert_eq!(bytes, GOLDEN);
    }
}

//! A static filter: a set of item hashes kept as sorted fingerprints, Elias-Fano coded, for
//! items that never change again (a closed generation, a user's window up to its open
//! generation), built once from the items.
//!
//! Each hash maps to a fingerprint in [0, n * 2^k) (the high bits of hash * range). A fresh
//! item matches one of n fingerprints with probability about 2^-k. A fingerprint is stored as
//! its k low bits, in a packed array, and its high part (the fingerprint >> k, the bucket) in
//! unary: the i-th fingerprint sets bit bucket + i of a bit vector of about 2n bits. That is
//! k + 2 bits per item whatever n, with a sampled select index (the position of every
//! [`SAMPLE`]-th zero, 0.5 bits per item): 10.6 bits at k = 8 for 3,000 items, where a Bloom
//! filter needs 1.44 log2(1/e) (11.5 bits at 0.39%) and a binary fuse filter 1.37 k at 3,000
//! items (its size factor for small sets). A lookup finds its bucket through the index, two
//! windows and a pdep (BMI2), then compares the low bits of the bucket's fingerprints (one on
//! average) at once: 15.7 us for 1,000 lookups in a 3,000-item window cut into 3 rows, on
//! candidates new to the branch predictor, against 2.6 us for the split-block probes of the
//! same items in 6 generations (`cargo bench -p bloom-core --bench probe -- batch_new_sets`;
//! 23.8 us with a branch per word and per fingerprint). Golomb-Rice coding (k + 1.6 bits)
//! decoded the gaps before each lookup: 42 us in 3,000 items, 556 us in 100,000. Samples every
//! 256 zeros took 0.4 bits per item less and twice the time.
//!
//! Layout (little-endian): a 20-byte header (version 1, k, two zero bytes, then as u32 each:
//! the distinct hashes the range was sized for, the fingerprints held, the high bit vector's
//! 64-bit words, the select samples), the samples (u32 each), the high words (u64 each), the
//! low bits packed from each byte's low bit, and 8 zero bytes so that a 64-bit read of any
//! low bits stays inside the value.

use crate::error::Error;

/// Bytes before the samples.
pub const STATIC_HEADER_BYTES: usize = 20;
/// Zeros of the high bit vector per select sample.
pub const SAMPLE: u64 = 64;
const VERSION: u8 = 1;
const PADDING: usize = 8;

/// `LANE_ONES[k]`: a 1 at the bottom of every k-bit lane of a 64-bit word.
const LANE_ONES: [u64; 33] = {
    let mut table = [0u64; 33];
    let mut k = 1;
    while k <= 32 {
        let mut lane = 0;
        while lane * k < 64 {
            table[k] |= 1 << (lane * k);
            lane += 1;
        }
        k += 1;
    }
    table
};

/// The fingerprint bits k for a target false-positive rate: the least k with 2^-k at most
/// `error_rate`, between 1 and 32.
pub fn static_bits_for(error_rate: f64) -> u8 {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return 32;
    }
    (1.0 / error_rate).log2().ceil().clamp(1.0, 32.0) as u8
}

/// The fingerprint of `hash` among `range` values.
fn fingerprint(hash: u64, range: u64) -> u64 {
    ((u128::from(hash) * u128::from(range)) >> 64) as u64
}

/// Whether this CPU runs the `FAST` probes (BMI2's pdep and POPCNT): callers check once per
/// batch and enter a `#[target_feature(enable = "bmi2,popcnt")]` function, inside which
/// `contains_with::<true>` compiles to those instructions. Per lookup, the check and a
/// software popcount took 1,000 lookups in a 3,000-item filter (3 parts) from 10 to 16 us.
pub fn fast_probes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("bmi2") && std::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The position of set bit number `n` (from 0) of `word`, which has more than `n`: one
/// instruction with BMI2 (pdep) when `FAST`, else a byte at a time and a bit at a time within
/// the byte.
#[inline(always)]
#[allow(unsafe_code)] // the BMI2 instruction
fn select_in_word<const FAST: bool>(word: u64, n: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if FAST {
        // SAFETY: FAST is true only inside functions entered after fast_probes() saw BMI2.
        // pdep scatters the bit 1 << n to the place of word's set bit number n.
        return u64::from(unsafe { std::arch::x86_64::_pdep_u64(1 << n, word) }.trailing_zeros());
    }
    select_in_word_portable(word, n)
}

fn select_in_word_portable(word: u64, mut n: u64) -> u64 {
    let mut shift = 0;
    loop {
        let in_byte = u64::from(((word >> shift) & 0xff).count_ones());
        if n < in_byte {
            break;
        }
        n -= in_byte;
        shift += 8;
    }
    let mut byte = (word >> shift) & 0xff;
    for _ in 0..n {
        byte &= byte - 1;
    }
    shift + u64::from(byte.trailing_zeros())
}

/// Builds the filter of `hashes` (any order, repeats allowed) with k = `bits`.
pub fn build_static(hashes: &[u64], bits: u8) -> Result<Vec<u8>, Error> {
    if !(1..=32).contains(&bits) {
        return Err(Error::BadParameter(format!(
            "fingerprint bits must be between 1 and 32, got {bits}"
        )));
    }
    if hashes.len() > (u32::MAX / 4) as usize {
        return Err(Error::BadParameter(format!(
            "a static filter holds at most {} items, got {}",
            u32::MAX / 4,
            hashes.len()
        )));
    }
    // Sorted and distinct: as compacted.rs passes each part, so that no copy is made.
    let distinct: std::borrow::Cow<[u64]> = if hashes.is_sorted_by(|a, b| a < b) {
        hashes.into()
    } else {
        let mut owned = hashes.to_vec();
        owned.sort_unstable();
        owned.dedup();
        owned.into()
    };
    // Sized for the distinct hashes; two of them may still share a fingerprint.
    let sized_for = distinct.len() as u64;
    let range = sized_for.max(1) << bits;
    // A fingerprint grows with its hash, so sorted hashes give sorted fingerprints.
    let mut prints: Vec<u64> = distinct.iter().map(|&h| fingerprint(h, range)).collect();
    prints.dedup();
    let n = prints.len() as u64;
    // Buckets 0..=max: one zero each, after its fingerprints' ones.
    let buckets = (range - 1) >> bits;
    let high_bits = n + buckets + 1;
    let mut high = vec![0u64; high_bits.div_ceil(64) as usize];
    let mut low = vec![0u8; (n * u64::from(bits)).div_ceil(8) as usize + PADDING];
    let low_mask = (1u64 << bits) - 1;
    for (i, &print) in prints.iter().enumerate() {
        let at = (print >> bits) + i as u64;
        high[(at / 64) as usize] |= 1 << (at % 64);
        let value = print & low_mask;
        let start = i as u64 * u64::from(bits);
        for b in 0..u64::from(bits) {
            if value >> b & 1 == 1 {
                let bit = start + b;
                low[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
    }
    // The position of zero number 0, SAMPLE, 2 SAMPLE, ...
    let mut samples = Vec::new();
    let mut zeros = 0u64;
    for at in 0..high_bits {
        if high[(at / 64) as usize] >> (at % 64) & 1 == 0 {
            if zeros.is_multiple_of(SAMPLE) {
                samples.push(at as u32);
            }
            zeros += 1;
        }
    }
    let mut out =
        Vec::with_capacity(STATIC_HEADER_BYTES + samples.len() * 4 + high.len() * 8 + low.len());
    out.extend_from_slice(&[VERSION, bits, 0, 0]);
    out.extend_from_slice(&(sized_for as u32).to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&(high.len() as u32).to_le_bytes());
    out.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    for s in &samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
    for w in &high {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(&low);
    Ok(out)
}

/// The little-endian u32 at byte `at` (the static filters' headers).
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// A static filter read in place from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct StaticSet<'a> {
    len: u64,
    bits: u8,
    /// The range the hashes were mapped to: the distinct hashes built from, times 2^k.
    range: u64,
    samples: &'a [u8],
    high: &'a [u8],
    /// The low bits and their padding.
    low: &'a [u8],
    /// Fingerprints compared at once: the whole k-bit lanes of one 57-bit read (precomputed:
    /// a division per lookup cost 0.7 ns of 16).
    fit: u64,
}

impl<'a> StaticSet<'a> {
    /// Reads a filter written by [`build_static`], checking that its parts fit its length
    /// and that every sample points at a zero of the high bit vector.
    pub fn parse(bytes: &'a [u8]) -> Result<StaticSet<'a>, Error> {
        let malformed = |why: &str| Error::Malformed(format!("static filter: {why}"));
        if bytes.len() < STATIC_HEADER_BYTES + PADDING {
            return Err(malformed("shorter than its header"));
        }
        if bytes[0] != VERSION {
            return Err(malformed(&format!("unknown version {}", bytes[0])));
        }
        let bits = bytes[1];
        if !(1..=32).contains(&bits) || bytes[2] != 0 || bytes[3] != 0 {
            return Err(malformed("bad fingerprint bits"));
        }
        let sized_for = u64::from(u32_at(bytes, 4));
        let len = u64::from(u32_at(bytes, 8));
        let words = u32_at(bytes, 12) as usize;
        let sample_count = u32_at(bytes, 16) as usize;
        let range = sized_for.max(1) << bits;
        let high_bits = len + ((range - 1) >> bits) + 1;
        let zeros = high_bits - len;
        let low_bytes = (len * u64::from(bits)).div_ceil(8) as usize + PADDING;
        let samples_end = STATIC_HEADER_BYTES + sample_count * 4;
        let high_end = samples_end + words * 8;
        if len > sized_for
            || words as u64 != high_bits.div_ceil(64)
            || sample_count as u64 != zeros.div_ceil(SAMPLE)
            || bytes.len() != high_end + low_bytes
        {
            return Err(malformed("its lengths do not match"));
        }
        let set = StaticSet {
            len,
            bits,
            range,
            samples: &bytes[STATIC_HEADER_BYTES..samples_end],
            high: &bytes[samples_end..high_end],
            low: &bytes[high_end..],
            fit: 57 / u64::from(bits),
        };
        for s in 0..sample_count {
            let at = u64::from(u32_at(set.samples, s * 4));
            if at >= high_bits || set.high_bit(at) {
                return Err(malformed("a select sample does not point at a zero"));
            }
        }
        Ok(set)
    }

    /// Distinct fingerprints held.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The fingerprint bits k.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The chance that an item not held matches: one of `len` fingerprints among `range`.
    pub fn false_positive_rate(&self) -> f64 {
        self.len as f64 / self.range as f64
    }

    #[inline(always)]
    fn high_word(&self, w: usize) -> u64 {
        u64_at(self.high, w * 8)
    }

    #[inline(always)]
    fn high_bit(&self, at: u64) -> bool {
        self.high_word((at / 64) as usize) >> (at % 64) & 1 == 1
    }

    /// The low bits of fingerprint `i`.
    #[inline(always)]
    fn low_bits(&self, i: u64) -> u64 {
        let bit = i * u64::from(self.bits);
        // The padding keeps the 8 bytes inside the value.
        let word = u64_at(self.low, (bit / 8) as usize) >> (bit % 8);
        word & ((1u64 << self.bits) - 1)
    }

    /// 64 bits of the high bit vector from bit `at` on (bits past its end read as zeros: a
    /// select looks only for zeros that exist, which come first).
    #[inline(always)]
    fn high_window(&self, at: u64) -> u64 {
        let w = (at / 64) as usize;
        let words = self.high.len() / 8;
        let word = |i: usize| if i < words { self.high_word(i) } else { 0 };
        let shift = at % 64;
        let low = word(w) >> shift;
        // (A shift by 64 is not defined: the second word adds nothing at shift 0.)
        let high = (word(w + 1) << 1) << (63 - shift);
        low | high
    }

    /// The position of zero number `z` of the high bit vector (`z` below the zeros there).
    /// From the sample before it, two 64-bit windows, chosen without a branch, hold the zero
    /// 95% of the time (a window holds about 32 zeros, and `z` is up to 63 past the sample);
    /// further windows are read in a loop.
    #[inline(always)]
    fn select_zero<const FAST: bool>(&self, z: u64) -> u64 {
        let sample = z / SAMPLE;
        let mut at = u64::from(u32_at(self.samples, sample as usize * 4));
        let mut left = z - sample * SAMPLE;
        let first = !self.high_window(at);
        let second = !self.high_window(at + 64);
        let in_first = u64::from(first.count_ones());
        let (mut zeros, skip) = match left < in_first {
            true => (first, 0),
            false => (second, in_first),
        };
        if left >= in_first {
            at += 64;
        }
        left -= skip;
        loop {
            let count = u64::from(zeros.count_ones());
            if left < count {
                return at + select_in_word::<FAST>(zeros, left);
            }
            left -= count;
            at += 64;
            zeros = !self.high_window(at);
        }
    }

    /// Whether `hash` may be held (never false for a hash built in).
    #[allow(unsafe_code)] // dispatches to the BMI2 kernel
    pub fn contains(&self, hash: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if fast_probes() {
            // SAFETY: the CPU has just been seen to support BMI2 and POPCNT.
            return unsafe { self.contains_fast(hash) };
        }
        self.contains_with::<false>(hash)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2,popcnt")]
    #[allow(unsafe_code)] // a BMI2 kernel
    unsafe fn contains_fast(&self, hash: u64) -> bool {
        self.contains_with::<true>(hash)
    }

    /// [`Self::contains`], with BMI2 and POPCNT when `FAST` (only from a function entered
    /// after [`fast_probes`]).
    #[inline(always)]
    pub fn contains_with<const FAST: bool>(&self, hash: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let print = fingerprint(hash, self.range);
        let bucket = print >> self.bits;
        let want = print & ((1u64 << self.bits) - 1);
        // The bucket's ones lie between its zero's predecessor and its zero: the fingerprints
        // before it are the ones before that zero's predecessor.
        let start = if bucket == 0 {
            0
        } else {
            self.select_zero::<FAST>(bucket - 1) + 1
        };
        let first = start - bucket;
        // The bucket's size: the ones from `start` on (one on average).
        let size = u64::from((!self.high_window(start)).trailing_zeros());
        self.bucket_holds(first, size, want)
    }

    /// Whether one of the `size` fingerprints from number `first` on has low bits `want`:
    /// as many as fit one 64-bit read at once, comparing k-bit lanes with no branch (the
    /// lane test of "has a zero byte", for any lane width; a bucket is empty a third of the
    /// time and holds the item half the time, so branches there mispredict), the rest, in
    /// the 0.4% of buckets larger than the read, one at a time.
    #[inline(always)]
    fn bucket_holds(&self, first: u64, size: u64, want: u64) -> bool {
        let k = u64::from(self.bits);
        // Whole lanes in the 57 bits a read from any bit offset gives; none for an empty
        // bucket, whose mask is then 0 (the read stays inside the padding).
        let fit = self.fit;
        let used = fit.min(size) * k;
        let bit = first * k;
        let word = u64_at(self.low, (bit / 8) as usize) >> (bit % 8);
        let mask = (1u64 << used) - 1;
        // One 1 per lane, and the lanes' top bits.
        let ones = LANE_ONES[k as usize] & mask;
        let tops = ones << (k - 1);
        let diff = (word ^ want.wrapping_mul(ones)) & mask;
        // A lane is zero where `want` matches; a false mark only lies above a true one.
        let hit = diff.wrapping_sub(ones) & !diff & tops != 0;
        // (`|`, not `||`: no branch on the answer, which is random.)
        hit | (size > fit && (fit..size).any(|i| self.low_bits(first + i) == want))
    }

    /// `out[i]`: whether `hashes[i]` may be held.
    pub fn contains_each(&self, hashes: &[u64], out: &mut [bool]) {
        assert_eq!(hashes.len(), out.len(), "one answer per hash");
        for (&h, o) in hashes.iter().zip(out.iter_mut()) {
            *o = self.contains(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(seed: u64, n: usize) -> Vec<u64> {
        (0..n as u64)
            .map(|i| crate::hash_i64((seed << 40) as i64 + i as i64))
            .collect()
    }

    #[test]
    fn holds_every_item_and_few_others() {
        for (n, bits) in [
            (0, 8),
            (1, 8),
            (600, 8),
            (3000, 8),
            (3000, 11),
            (100_000, 7),
            (5000, 1),
            (2000, 32),
        ] {
            let items = hashes(1, n);
            let bytes = build_static(&items, bits).unwrap();
            let set = StaticSet::parse(&bytes).unwrap();
            let mut out = vec![false; items.len()];
            set.contains_each(&items, &mut out);
            assert!(
                out.iter().all(|&x| x),
                "a false negative at n = {n}, k = {bits}"
            );
            let fresh = hashes(2, 200_000);
            let found = fresh.iter().filter(|&&h| set.contains(h)).count();
            let rate = found as f64 / fresh.len() as f64;
            // The model: held fingerprints among the range, at most 2^-k (fewer where hashes
            // share a fingerprint: 0.39 at k = 1).
            let model = set.false_positive_rate();
            assert!(model <= 0.5f64.powi(i32::from(bits)));
            assert!(
                rate <= model * 1.2 + 1e-5 && (n < 100 || bits > 16 || rate >= model * 0.8),
                "n = {n}, k = {bits}: measured {rate}, modelled {model}"
            );
        }
    }

    /// Every lookup answers as a search of the sorted fingerprints does, for lane widths that
    /// fill a read to a few lanes, over sets whose buckets hold up to a dozen fingerprints
    /// (the loops past the two windows and past the lanes), with and without BMI2.
    #[test]
    fn lookups_answer_as_the_fingerprints_say() {
        for (n, bits) in [
            (1, 3),
            (50, 1),
            (3000, 8),
            (20_000, 11),
            (100_000, 5),
            (2000, 19),
            (500, 32),
        ] {
            let items = hashes(7, n);
            let bytes = build_static(&items, bits).unwrap();
            let set = StaticSet::parse(&bytes).unwrap();
            let mut prints: Vec<u64> = items.iter().map(|&h| fingerprint(h, set.range)).collect();
            prints.sort_unstable();
            prints.dedup();
            let probes = hashes(8, 200_000).into_iter().chain(items.iter().copied());
            for h in probes {
                let want = prints.binary_search(&fingerprint(h, set.range)).is_ok();
                assert_eq!(set.contains_with::<false>(h), want, "n = {n}, k = {bits}");
                assert_eq!(set.contains(h), want, "n = {n}, k = {bits}");
            }
        }
        // Long runs of ones: every fingerprint in a few buckets.
        let crowded: Vec<u64> = (0..400u64).map(|i| i << 50 | i).collect();
        let bytes = build_static(&crowded, 2).unwrap();
        let set = StaticSet::parse(&bytes).unwrap();
        assert!(crowded.iter().all(|&h| set.contains(h)));
    }

    #[test]
    fn takes_k_plus_about_2_5_bits_per_item() {
        for (n, bits) in [(600, 8), (3000, 8), (3000, 11), (100_000, 8)] {
            let bytes = build_static(&hashes(3, n), bits).unwrap();
            let per_item = (bytes.len() * 8) as f64 / n as f64;
            let most = f64::from(bits) + 2.0 + 0.6 + 8.0 * 36.0 / n as f64;
            assert!(
                per_item <= most,
                "n = {n}, k = {bits}: {per_item} bits per item"
            );
        }
    }

    #[test]
    fn repeats_and_order_do_not_matter() {
        let items = hashes(4, 1000);
        let mut shuffled: Vec<u64> = items.iter().rev().copied().collect();
        shuffled.extend_from_slice(&items[..100]);
        assert_eq!(
            build_static(&items, 9).unwrap(),
            build_static(&shuffled, 9).unwrap()
        );
    }

    #[test]
    fn golden_bytes() {
        // The format is stored: these bytes must not change. k = 2, 3 hashes: range 12,
        // fingerprints 3, 6, 9: buckets 0, 1, 2 (one zero each, and bucket 3's zero
        // ends the vector), low bits 3, 2, 1.
        let bytes = build_static(&[1 << 62, 3 << 62, 1 << 63], 2).unwrap();
        assert_eq!(
            bytes,
            [
                1,
                2,
                0,
                0,
                3,
                0,
                0,
                0,
                3,
                0,
                0,
                0,
                1,
                0,
                0,
                0,
                1,
                0,
                0,
                0, // header
                1,
                0,
                0,
                0, // the first zero is bit 1
                0b0001_0101,
                0,
                0,
                0,
                0,
                0,
                0,
                0, // ones at 0, 2, 4
                0b0001_1011,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0, // low bits 11 10 01, then padding
            ]
        );
        let set = StaticSet::parse(&bytes).unwrap();
        assert!(set.contains(1 << 62) && set.contains(3 << 62) && set.contains(1 << 63));
    }

    #[test]
    fn malformed_values_are_refused() {
        let good = build_static(&hashes(5, 2000), 8).unwrap();
        assert!(StaticSet::parse(&good).is_ok());
        for bad in [&good[..10], &good[..good.len() - 1], &[2u8; 40][..]] {
            assert!(matches!(StaticSet::parse(bad), Err(Error::Malformed(_))));
        }
        let mut wrong_bits = good.clone();
        wrong_bits[1] = 40;
        assert!(StaticSet::parse(&wrong_bits).is_err());
        let mut too_many = good.clone();
        too_many[8..12].copy_from_slice(&2001u32.to_le_bytes());
        assert!(StaticSet::parse(&too_many).is_err());
        // A sample moved onto a one.
        let mut bad_sample = good.clone();
        let high_start = STATIC_HEADER_BYTES + 4 * u32_at(&good, 16) as usize;
        let first_one = (0..8).find(|b| good[high_start] >> b & 1 == 1);
        if let Some(b) = first_one {
            bad_sample[STATIC_HEADER_BYTES..STATIC_HEADER_BYTES + 4]
                .copy_from_slice(&(b as u32).to_le_bytes());
            assert!(StaticSet::parse(&bad_sample).is_err());
        }
        assert!(build_static(&[1], 0).is_err());
    }

    #[test]
    fn select_in_a_word() {
        let word =
            0b1011_0000_0000_0001_0000_0000_0000_0000_0000_0000_1000_0000_0000_0000_0000_0101u64;
        let ones: Vec<u64> = (0..64).filter(|b| word >> b & 1 == 1).collect();
        for (n, &at) in ones.iter().enumerate() {
            if fast_probes() {
                assert_eq!(select_in_word::<true>(word, n as u64), at);
            }
            assert_eq!(select_in_word::<false>(word, n as u64), at);
            assert_eq!(select_in_word_portable(word, n as u64), at);
        }
    }

    #[test]
    fn bits_for_a_rate() {
        assert_eq!(static_bits_for(0.01), 7);
        assert_eq!(static_bits_for(0.0039), 9);
        assert_eq!(static_bits_for(0.5), 1);
        assert_eq!(static_bits_for(0.0), 32);
    }
}

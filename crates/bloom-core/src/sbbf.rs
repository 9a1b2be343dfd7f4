//! Split-block Bloom filter primitives (the Parquet SBBF scheme): one 32-byte block per item,
//! one bit in each of its eight 32-bit lanes. Public because the per-user tracking tables cut
//! one filter into row-sized segments of blocks and probe them with these same functions.

use crate::hash::fmix64;

/// Bytes in one block: eight little-endian u32 lanes.
pub const BLOCK_BYTES: usize = 32;

/// The Parquet split-block salts, one per lane (FORMAT.md, "Split-block body").
pub(crate) const SALTS: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// Golden-ratio constant that separates the hashes of different layers.
const LAYER_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// The block an item falls in: the high 32 bits scaled into `0..blocks` by multiply-shift
/// (no modulo bias, no division). `blocks` is at most 2^32 - 1, so the product fits.
#[inline(always)]
pub fn block_index(h: u64, blocks: u64) -> u64 {
    ((h >> 32).wrapping_mul(blocks)) >> 32
}

/// The eight single-bit masks an item sets, one per lane, from the low 32 bits of its hash.
/// Public so a probe of many blocks with one hash (tracking's generations) computes them once.
#[inline(always)]
pub fn lane_masks(h: u64) -> [u32; 8] {
    let lo = h as u32;
    SALTS.map(|salt| 1u32 << (lo.wrapping_mul(salt) >> 27))
}

#[inline(always)]
fn lane(block: &[u8; BLOCK_BYTES], l: usize) -> u32 {
    let (lanes, _) = block.as_chunks::<4>();
    u32::from_le_bytes(lanes[l])
}

/// Sets the item's eight bits; true if any bit was not set before.
#[inline]
pub fn block_insert(block: &mut [u8; BLOCK_BYTES], h: u64) -> bool {
    let masks = lane_masks(h);
    let (lanes, _) = block.as_chunks_mut::<4>();
    let mut changed = false;
    for (bytes, mask) in lanes.iter_mut().zip(masks) {
        let old = u32::from_le_bytes(*bytes);
        changed |= old & mask != mask;
        *bytes = (old | mask).to_le_bytes();
    }
    changed
}

/// Whether all eight of the item's bits are set.
#[inline]
pub fn block_contains(block: &[u8; BLOCK_BYTES], h: u64) -> bool {
    block_has_masks(block, &lane_masks(h))
}

/// Whether all bits of `masks` (from [`lane_masks`]) are set in the block.
#[inline(always)]
pub fn block_has_masks(block: &[u8; BLOCK_BYTES], masks: &[u32; 8]) -> bool {
    // Fold all lanes before deciding: branch-free, and the compiler vectorises it.
    let mut missing = 0u32;
    for (l, mask) in masks.iter().enumerate() {
        missing |= mask & !lane(block, l);
    }
    missing == 0
}

/// Whether a layer with these blocks holds the item whose layer hash is `layer_h`. The one
/// probe used by both the stored-bytes view and the owned filter.
#[inline]
pub(crate) fn blocks_contain(blocks: &[[u8; BLOCK_BYTES]], layer_h: u64) -> bool {
    let b = block_index(layer_h, blocks.len() as u64);
    blocks
        .get(b as usize)
        .is_some_and(|block| block_contains(block, layer_h))
}

/// The hash an item probes layer `layer` with: the item hash itself for layer 0, a remix for
/// later layers so that layers collide independently.
#[inline(always)]
pub fn layer_hash(h: u64, layer: u32) -> u64 {
    if layer == 0 {
        h
    } else {
        fmix64(h ^ u64::from(layer).wrapping_mul(LAYER_MIX))
    }
}

/// Fraction of bits set over whole blocks (trailing bytes short of a block are ignored).
pub fn blocks_fill(bytes: &[u8]) -> f64 {
    let (blocks, _) = bytes.as_chunks::<BLOCK_BYTES>();
    if blocks.is_empty() {
        return 0.0;
    }
    let set = popcount(&bytes[..blocks.len() * BLOCK_BYTES]);
    set as f64 / (blocks.len() * BLOCK_BYTES * 8) as f64
}

/// Set bits in `bytes`. A layer's fill is counted at every insert (1,536 bytes): counted a
/// 32-bit lane at a time in portable code that was 1.1 us per fold at commit, so 64-bit words
/// are counted with the CPU's popcnt where it has one, and eight words at a time where it
/// counts them in one instruction (checked once, then cached by std).
#[allow(unsafe_code)] // dispatches to the popcnt and AVX-512 builds
pub fn popcount(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512vpopcntdq")
            && std::arch::is_x86_feature_detected!("avx512f")
        {
            // SAFETY: the CPU has AVX-512F and VPOPCNTDQ.
            return unsafe { popcount_avx512(bytes) };
        }
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has popcnt.
            return unsafe { popcount_with_popcnt(bytes) };
        }
    }
    popcount_words(bytes)
}

/// `popcount` 64 bytes at a time: a 1,536-byte segment in 24 counts instead of 192.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
#[allow(unsafe_code)] // a SIMD kernel
fn popcount_avx512(bytes: &[u8]) -> u64 {
    use std::arch::x86_64::*;
    let (lines, rest) = bytes.as_chunks::<64>();
    let mut sum = _mm512_setzero_si512();
    for line in lines {
        // SAFETY: 64 readable bytes; an unaligned load.
        let v = unsafe { _mm512_loadu_si512(line.as_ptr() as *const __m512i) };
        sum = _mm512_add_epi64(sum, _mm512_popcnt_epi64(v));
    }
    _mm512_reduce_add_epi64(sum) as u64 + popcount_words(rest)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn popcount_with_popcnt(bytes: &[u8]) -> u64 {
    popcount_words(bytes)
}

#[inline(always)]
fn popcount_words(bytes: &[u8]) -> u64 {
    let (words, rest) = bytes.as_chunks::<8>();
    let whole: u64 = words
        .iter()
        .map(|w| u64::from(u64::from_ne_bytes(*w).count_ones()))
        .sum();
    whole + rest.iter().map(|b| u64::from(b.count_ones())).sum::<u64>()
}

/// The chance that a fresh item finds all its bits set, averaged over whole blocks.
pub fn blocks_fpr(bytes: &[u8]) -> f64 {
    let (blocks, _) = bytes.as_chunks::<BLOCK_BYTES>();
    if blocks.is_empty() {
        return 0.0;
    }
    blocks.iter().map(block_fpr).sum::<f64>() / blocks.len() as f64
}

/// Set bits in one block.
#[inline]
pub(crate) fn block_popcount(block: &[u8; BLOCK_BYTES]) -> u32 {
    (0..8).map(|l| lane(block, l).count_ones()).sum()
}

/// The chance that a fresh item finds all its bits set in this block: the product over
/// lanes of the lane's fill, as each lane contributes one independent bit.
#[inline]
pub(crate) fn block_fpr(block: &[u8; BLOCK_BYTES]) -> f64 {
    (0..8)
        .map(|l| f64::from(lane(block, l).count_ones()) / 32.0)
        .product()
}

#[cfg(test)]
mod tests {
    #[test]
    fn popcount_counts_every_set_bit() {
        let bytes: Vec<u8> = (0..1543u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let slow: u64 = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(super::popcount(&bytes), slow);
        assert_eq!(super::popcount_words(&bytes), slow);
        assert_eq!(super::popcount(&[]), 0);
        // Every length around the 64-byte counts and their remainders.
        for end in 0..200 {
            let slow: u64 = bytes[..end].iter().map(|b| u64::from(b.count_ones())).sum();
            assert_eq!(super::popcount(&bytes[..end]), slow, "{end} bytes");
        }
        assert_eq!(super::popcount(&[0xff; 1536]), 1536 * 8);
    }

    use super::*;

    #[test]
    fn insert_then_contains() {
        let mut block = [0u8; BLOCK_BYTES];
        let h = 0x0123_4567_89ab_cdef;
        assert!(!block_contains(&block, h));
        assert!(block_insert(&mut block, h));
        assert!(block_contains(&block, h));
        assert!(
            !block_insert(&mut block, h),
            "a second insert changes no bit"
        );
        assert_eq!(block_popcount(&block), 8, "one bit per lane");
    }

    #[test]
    fn bits_follow_the_salts() {
        // lo32 = 1: lane l gets bit SALT[l] >> 27.
        let mut block = [0u8; BLOCK_BYTES];
        block_insert(&mut block, 1);
        for (l, salt) in SALTS.iter().enumerate() {
            assert_eq!(lane(&block, l), 1 << (salt >> 27), "lane {l}");
        }
    }

    #[test]
    fn block_index_spans_the_range() {
        assert_eq!(block_index(0, 7), 0);
        assert_eq!(block_index(u64::MAX, 7), 6);
        assert_eq!(
            block_index(u64::MAX, u64::from(u32::MAX)),
            u64::from(u32::MAX) - 1
        );
        assert_eq!(block_index(1 << 63, 10), 5);
    }

    #[test]
    fn layer_zero_keeps_the_hash() {
        assert_eq!(layer_hash(12345, 0), 12345);
        assert_eq!(layer_hash(12345, 1), fmix64(12345 ^ LAYER_MIX));
        assert_ne!(layer_hash(12345, 1), layer_hash(12345, 2));
    }

    #[test]
    fn fpr_of_full_and_empty_blocks() {
        assert_eq!(block_fpr(&[0; BLOCK_BYTES]), 0.0);
        assert_eq!(block_fpr(&[0xff; BLOCK_BYTES]), 1.0);
        assert_eq!(block_popcount(&[0xff; BLOCK_BYTES]), 256);
    }
}

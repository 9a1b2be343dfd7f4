//! Item hashing: MurmurHash3_x64_128, the one hash every stored value depends on.
//!
//! This is our own implementation of Austin Appleby's reference `MurmurHash3_x64_128`
//! (slice based, no `Read`), so the bytes we store never depend on a third-party crate's
//! behaviour. Tests cross-check it against the `murmur3` crate and published vectors.

/// The seed recorded in every value built by this version (FORMAT.md, "Items and hashing").
pub const SEED: u32 = 0x5EED_B100;

/// Header code of the hash algorithm: MurmurHash3_x64_128, low 64 bits.
pub const HASH_MURMUR3_X64_128: u8 = 1;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// MurmurHash3's 64-bit finaliser; also mixes the per-layer hashes of split-block filters.
#[inline(always)]
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// The two little-endian 64-bit words of a 16-byte block.
#[inline]
fn split_words(block: &[u8; 16]) -> (u64, u64) {
    let v = u128::from_le_bytes(*block);
    (v as u64, (v >> 64) as u64)
}

/// The reference MurmurHash3_x64_128 of `data` with `seed`, as the two 64-bit halves `(h1, h2)`.
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);

    let (blocks, tail) = data.as_chunks::<16>();
    for block in blocks {
        let (k1, k2) = split_words(block);

        h1 ^= mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);

        h2 ^= mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    // The reference's fall-through switch reads the tail as two zero-padded little-endian
    // words; a zero-padded copy gives the same values without the switch.
    if !tail.is_empty() {
        let mut padded = [0u8; 16];
        padded[..tail.len()].copy_from_slice(tail);
        let (k1, k2) = split_words(&padded);
        if tail.len() > 8 {
            h2 ^= mix_k2(k2);
        }
        h1 ^= mix_k1(k1);
    }

    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// The item hash of canonical bytes: the low 64 bits (h1) of MurmurHash3_x64_128 with [`SEED`].
#[inline]
pub fn hash_bytes(data: &[u8]) -> u64 {
    murmur3_x64_128(data, SEED).0
}

/// The item hash of any SQL integer: its value as a little-endian i64, so that
/// `42::int` and `42::bigint` are one item. `hash_bytes` of those 8 bytes, written out for
/// that length (no blocks, one tail word): straight-line code the read path inlines into its
/// loop over candidates.
#[inline(always)]
pub fn hash_i64(v: i64) -> u64 {
    let seed = u64::from(SEED);
    let mut h1 = seed ^ mix_k1(v as u64);
    let mut h2 = seed;
    h1 ^= 8;
    h2 ^= 8;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    fmix64(h1).wrapping_add(fmix64(h2))
}

/// `hash_i64` of each 8-byte value in the machine's byte order (a bigint array's data, read
/// in place).
///
/// Where the CPU has AVX-512DQ and VL (detected at run time), four values at a time (see
/// `hash_i64_extend_x4`); elsewhere the baseline build's loop.
pub fn hash_i64_each(values: &[[u8; 8]]) -> Vec<u64> {
    let mut hashes = Vec::with_capacity(values.len());
    hash_i64_extend(values, &mut hashes);
    hashes
}

/// `hash_i64_each`, appended to `hashes`: a caller may hash a long array in pieces and do
/// other work between them.
#[allow(unsafe_code)] // dispatches to the SIMD kernel
pub fn hash_i64_extend(values: &[[u8; 8]], hashes: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512dq") && std::is_x86_feature_detected!("avx512vl") {
        // SAFETY: the CPU has just been seen to support AVX-512DQ and VL.
        return unsafe { hash_i64_extend_x4(values, hashes) };
    }
    hash_i64_extend_portable(values, hashes)
}

fn hash_i64_extend_portable(values: &[[u8; 8]], hashes: &mut Vec<u64>) {
    hashes.extend(values.iter().map(|v| hash_i64(i64::from_ne_bytes(*v))))
}

/// `hash_i64` of four values at a time in 256-bit vectors, with AVX-512DQ's 64-bit multiply.
///
/// Not 512-bit vectors: on the bench machine a loop of 512-bit multiplies hashed 1,000
/// candidates in about 1 us where scalar code took 4, yet the backend then spent 6-8 us more
/// CPU per call (task-clock over pgbench runs, interleaved, on users with and without rows):
/// heavy 512-bit instructions slow the core down for a while after them.
///
/// # Safety
/// The CPU must support AVX-512DQ and AVX-512VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl")]
#[allow(unsafe_code)] // a SIMD kernel
unsafe fn hash_i64_extend_x4(values: &[[u8; 8]], hashes: &mut Vec<u64>) {
    use std::arch::x86_64::*;
    hashes.reserve(values.len());
    let (quads, rest) = values.as_chunks::<4>();
    let c1 = _mm256_set1_epi64x(C1 as i64);
    let c2 = _mm256_set1_epi64x(C2 as i64);
    let f1 = _mm256_set1_epi64x(0xff51_afd7_ed55_8ccd_u64 as i64);
    let f2 = _mm256_set1_epi64x(0xc4ce_b9fe_1a85_ec53_u64 as i64);
    // hash_i64 with its constants folded: h2 starts as seed ^ 8 for every value.
    let seed = u64::from(SEED) ^ 8;
    let h2_start = _mm256_set1_epi64x(seed as i64);
    let fmix = |mut k: __m256i| {
        k = _mm256_xor_si256(k, _mm256_srli_epi64(k, 33));
        k = _mm256_mullo_epi64(k, f1);
        k = _mm256_xor_si256(k, _mm256_srli_epi64(k, 33));
        k = _mm256_mullo_epi64(k, f2);
        _mm256_xor_si256(k, _mm256_srli_epi64(k, 33))
    };
    for quad in quads {
        // SAFETY: a [[u8; 8]; 4] is 32 readable bytes.
        let v = unsafe { _mm256_loadu_si256(quad.as_ptr() as *const __m256i) };
        let k1 = _mm256_mullo_epi64(_mm256_rol_epi64::<31>(_mm256_mullo_epi64(v, c1)), c2);
        let h1 = _mm256_add_epi64(_mm256_xor_si256(h2_start, k1), h2_start);
        let h2 = _mm256_add_epi64(h2_start, h1);
        let h = _mm256_add_epi64(fmix(h1), fmix(h2));
        let mut out = [0u64; 4];
        // SAFETY: `out` is 32 writable bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, h) };
        hashes.extend_from_slice(&out);
    }
    hash_i64_extend_portable(rest, hashes)
}

#[cfg(test)]
#[allow(unsafe_code)] // the SIMD kernel is tested directly
mod tests {
    use super::*;

    #[test]
    fn batch_hash_is_hash_i64_of_each_value() {
        let values: Vec<i64> = (-70_000..70_000)
            .map(|i: i64| i.wrapping_mul(0x1E37_79B9_7F4A_7C15))
            .chain([i64::MIN, i64::MAX, 0, -1])
            .collect();
        let bytes: Vec<[u8; 8]> = values.iter().map(|v| v.to_ne_bytes()).collect();
        let expected: Vec<u64> = values.iter().map(|&v| hash_i64(v)).collect();
        // Every length through a vector width and its tail.
        for n in [0, 1, 7, 8, 9, 17, bytes.len()] {
            assert_eq!(hash_i64_each(&bytes[..n]), expected[..n], "dispatched, {n}");
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx512dq")
                && std::is_x86_feature_detected!("avx512vl")
            {
                let mut x4 = vec![7];
                // SAFETY: the CPU supports AVX-512DQ and VL (just checked).
                unsafe { hash_i64_extend_x4(&bytes[..n], &mut x4) };
                assert_eq!(x4[1..], expected[..n], "four at a time, {n}");
            }
            let mut portable = vec![7];
            hash_i64_extend_portable(&bytes[..n], &mut portable);
            assert_eq!(portable[0], 7, "extend keeps what was there");
            assert_eq!(portable[1..], expected[..n], "portable, {n}");
            let mut pieces = Vec::new();
            for piece in bytes[..n].chunks(5) {
                hash_i64_extend(piece, &mut pieces);
            }
            assert_eq!(pieces, expected[..n], "in pieces, {n}");
        }
    }

    // Published MurmurHash3_x64_128 vectors with seed 0 (the same numbers Python's
    // `mmh3.hash64(s, signed=False)` and the murmur3 crate give); checked again against
    // the murmur3 crate in tests below.
    #[test]
    fn reference_vectors() {
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        assert_eq!(
            murmur3_x64_128(b"hello", 0),
            (0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19)
        );
        assert_eq!(
            murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0),
            (0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347)
        );
    }

    fn crate_reference(data: &[u8], seed: u32) -> (u64, u64) {
        let mut cursor = std::io::Cursor::new(data);
        let v = murmur3::murmur3_x64_128(&mut cursor, seed).expect("reading a slice cannot fail");
        (v as u64, (v >> 64) as u64)
    }

    #[test]
    fn agrees_with_murmur3_crate_on_every_tail_length() {
        let data: Vec<u8> = (0u8..=255)
            .map(|b| b.wrapping_mul(167).wrapping_add(13))
            .collect();
        for len in 0..=64 {
            for seed in [0, 1, SEED, u32::MAX] {
                assert_eq!(
                    murmur3_x64_128(&data[..len], seed),
                    crate_reference(&data[..len], seed),
                    "len {len} seed {seed:#x}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_murmur3_crate(data in proptest::collection::vec(proptest::num::u8::ANY, 0..=300), seed: u32) {
            proptest::prop_assert_eq!(murmur3_x64_128(&data, seed), crate_reference(&data, seed));
        }

        #[test]
        fn agrees_on_short_tails(data in proptest::collection::vec(proptest::num::u8::ANY, 0..=31), seed: u32) {
            proptest::prop_assert_eq!(murmur3_x64_128(&data, seed), crate_reference(&data, seed));
        }
    }

    #[test]
    fn integers_hash_as_little_endian_i64() {
        assert_eq!(hash_i64(42), hash_bytes(&42i64.to_le_bytes()));
        assert_eq!(hash_i64(-1), hash_bytes(&[0xff; 8]));
        // The written-out 8-byte path is the general one, over the whole range of values.
        let mut v = 0x0123_4567_89ab_cdefu64;
        for _ in 0..100_000 {
            v = v.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
            for x in [
                v as i64,
                (v >> 40) as i64,
                -((v >> 3) as i64),
                0,
                i64::MIN,
                i64::MAX,
            ] {
                assert_eq!(hash_i64(x), hash_bytes(&x.to_le_bytes()), "{x}");
            }
        }
        assert_eq!(hash_bytes(b"abc"), murmur3_x64_128(b"abc", SEED).0);
    }
}

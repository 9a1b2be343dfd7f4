//! The batch probes' answers: one `bool` per candidate, set and never cleared, so that the
//! structures of a window (exact set, layers, compacted filter) each add theirs in turn.
//!
//! A kernel that answers eight candidates at once writes their eight flags with one 8-byte
//! read and write instead of eight 1-byte ones: 1,000 candidates against a 300-item user at
//! 0.1% took 2.80 us at a compaction's peak and 1.71 after it, and 2.34 and 1.31 so (`cargo
//! bench -p bloom-core --bench probe -- 'peak_|after_'`).

/// Byte k of `SPREAD[b]` is bit k of `b` (little-endian): eight answer bits as eight flags.
const SPREAD: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            table[b] |= ((b as u64 >> k) & 1) << (8 * k);
            k += 1;
        }
        b += 1;
    }
    table
};

/// Sets `flags[k]` where bit k of `bits` is set, never clearing one.
#[inline(always)]
fn or_flags8(flags: &mut [bool; 8], bits: u8) {
    #[allow(unsafe_code)]
    // SAFETY: [bool; 8] and [u8; 8] have one size and alignment; every byte stays 0 or 1,
    // a valid bool, as both sides of the OR are 0 or 1 in each byte.
    let bytes = unsafe { &mut *(flags as *mut [bool; 8]).cast::<[u8; 8]>() };
    *bytes = (u64::from_le_bytes(*bytes) | SPREAD[bits as usize]).to_le_bytes();
}

/// Sets `found[i]` where `holds(hashes[i])`, never clearing one: eight answers gathered into
/// one write of their flags.
#[inline(always)]
pub(crate) fn mark_each(hashes: &[u64], found: &mut [bool], holds: impl Fn(u64) -> bool) {
    mark_eights(
        hashes,
        found,
        |eight| {
            let mut bits = 0u8;
            for (k, &h) in eight.iter().enumerate() {
                bits |= u8::from(holds(h)) << k;
            }
            bits
        },
        &holds,
    );
}

/// The batch probes' loop: `eight` answers each whole eight of `hashes` as a byte (bit k for
/// its hash k), written with one `or_flags8`; `one` answers the last few one at a time.
#[inline(always)]
pub(crate) fn mark_eights<E, O>(hashes: &[u64], found: &mut [bool], mut eight: E, mut one: O)
where
    E: FnMut(&[u64; 8]) -> u8,
    O: FnMut(u64) -> bool,
{
    let (chunks, rest) = hashes.as_chunks::<8>();
    let (flags, rest_flags) = found.split_at_mut(chunks.len() * 8);
    for (hashes, flags) in chunks.iter().zip(flags.as_chunks_mut::<8>().0) {
        or_flags8(flags, eight(hashes));
    }
    for (&h, f) in rest.iter().zip(rest_flags) {
        *f |= one(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_each_bit_to_its_flag_and_keeps_set_ones() {
        for bits in 0..=255u8 {
            for before in [0u8, 0b1010_0101, 0xff] {
                let mut flags: [bool; 8] = std::array::from_fn(|k| before >> k & 1 != 0);
                or_flags8(&mut flags, bits);
                for (k, &f) in flags.iter().enumerate() {
                    assert_eq!(
                        f,
                        (bits | before) >> k & 1 != 0,
                        "{bits:#x} {before:#x} {k}"
                    );
                }
            }
        }
    }

    /// Every length, the eights and the rest alike, and flags already set kept.
    #[test]
    fn marks_each_answer_and_keeps_set_flags() {
        for n in 0..40u64 {
            let hashes: Vec<u64> = (0..n).collect();
            let mut found: Vec<bool> = (0..n).map(|h| h % 5 == 0).collect();
            mark_each(&hashes, &mut found, |h| h % 3 == 0);
            for (h, f) in found.iter().enumerate() {
                assert_eq!(*f, h % 5 == 0 || h % 3 == 0, "n {n}, hash {h}");
            }
        }
    }
}

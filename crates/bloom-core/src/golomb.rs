//! A static filter: a set of item hashes kept as sorted fingerprints, Golomb-Rice coded. For
//! items that never change again (a closed generation, a user's window up to its open
//! generation), built once from the items.
//!
//! Each hash maps to a fingerprint in [0, n * 2^k) (the high bits of hash * range); the
//! sorted, distinct fingerprints are stored as gaps, each a quotient in unary and a k-bit
//! remainder. A fresh item matches one of n fingerprints with probability about 2^-k, and a
//! gap costs k + 1.58 bits on average (the quotient of a geometric gap of mean 2^k is 0.58):
//! log2(1/e) + 1.6 bits per item whatever n, where a Bloom filter needs 1.44 log2(1/e) (11.5
//! bits at 0.39%, against 9.6 here) and a binary fuse filter 1.37 k at 3,000 items (its size
//! factor for small sets). An index entry every [`BLOCK`] items (0.19 bits per item) lets a
//! lookup start near its fingerprint. Lookups decode gaps in order: a batch of 1,000 took
//! 42 us against 3,000 items, 556 us against 100,000 (docs/DESIGN.md weighs that).
//!
//! Layout (little-endian): a 20-byte header (version 1, k, two zero bytes, then as u32 each:
//! the hashes the range was sized for, the fingerprints held, index entries, stream bytes),
//! the index entries (the value before the block, u64, and the bit
//! offset of its first gap, u32), the bit stream (bits in order from each byte's low bit),
//! then 8 zero bytes so that a 64-bit read at any bit of the stream stays inside the value.

use crate::error::Error;

/// Bytes before the index.
pub const GOLOMB_HEADER_BYTES: usize = 20;
/// Fingerprints per index entry.
pub const BLOCK: usize = 512;
const VERSION: u8 = 1;
const INDEX_ENTRY_BYTES: usize = 12;
const PADDING: usize = 8;

/// The fingerprint bits k for a target false-positive rate: the least k with 2^-k at most
/// `error_rate`, between 1 and 32.
pub fn golomb_bits_for(error_rate: f64) -> u8 {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return 32;
    }
    (1.0 / error_rate).log2().ceil().clamp(1.0, 32.0) as u8
}

/// The fingerprint of `hash` among `range` values.
fn fingerprint(hash: u64, range: u64) -> u64 {
    ((u128::from(hash) * u128::from(range)) >> 64) as u64
}

/// Writes bits from each byte's low bit up.
struct BitWriter {
    bytes: Vec<u8>,
    bits: u64,
}

impl BitWriter {
    fn push(&mut self, value: u64, count: u32) {
        for i in 0..count {
            let at = self.bits as usize;
            if at / 8 == self.bytes.len() {
                self.bytes.push(0);
            }
            self.bytes[at / 8] |= (((value >> i) & 1) as u8) << (at % 8);
            self.bits += 1;
        }
    }

    fn unary(&mut self, quotient: u64) {
        for _ in 0..quotient {
            self.push(1, 1);
        }
        self.push(0, 1);
    }
}

/// Builds the filter of `hashes` (any order, repeats allowed) with k = `bits`.
pub fn build_golomb(hashes: &[u64], bits: u8) -> Result<Vec<u8>, Error> {
    if !(1..=32).contains(&bits) {
        return Err(Error::BadParameter(format!(
            "fingerprint bits must be between 1 and 32, got {bits}"
        )));
    }
    if hashes.len() > u32::MAX as usize / 2 {
        return Err(Error::BadParameter(format!(
            "a static filter holds at most {} items, got {}",
            u32::MAX / 2,
            hashes.len()
        )));
    }
    let mut distinct = hashes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    // The range is sized for the distinct hashes; two of them may still share a fingerprint.
    let sized_for = distinct.len() as u64;
    let range = sized_for.max(1) << bits;
    let mut prints: Vec<u64> = distinct.iter().map(|&h| fingerprint(h, range)).collect();
    prints.sort_unstable();
    prints.dedup();
    let mut stream = BitWriter {
        bytes: Vec::with_capacity(prints.len() * (usize::from(bits) + 2) / 8 + 1),
        bits: 0,
    };
    let mut index = Vec::with_capacity(prints.len() / BLOCK * INDEX_ENTRY_BYTES);
    let mut previous = 0u64;
    for (i, &print) in prints.iter().enumerate() {
        if i > 0 && i % BLOCK == 0 {
            index.extend_from_slice(&previous.to_le_bytes());
            index.extend_from_slice(&(stream.bits as u32).to_le_bytes());
        }
        let gap = print - previous;
        stream.unary(gap >> bits);
        stream.push(gap, u32::from(bits));
        previous = print;
    }
    if stream.bits > u64::from(u32::MAX) {
        return Err(Error::TooLarge {
            bytes: stream.bits / 8,
            limit: u64::from(u32::MAX) / 8,
        });
    }
    let mut out =
        Vec::with_capacity(GOLOMB_HEADER_BYTES + index.len() + stream.bytes.len() + PADDING);
    out.extend_from_slice(&[VERSION, bits, 0, 0]);
    out.extend_from_slice(&(sized_for as u32).to_le_bytes());
    out.extend_from_slice(&(prints.len() as u32).to_le_bytes());
    out.extend_from_slice(&((index.len() / INDEX_ENTRY_BYTES) as u32).to_le_bytes());
    out.extend_from_slice(&(stream.bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&index);
    out.extend_from_slice(&stream.bytes);
    out.extend_from_slice(&[0; PADDING]);
    Ok(out)
}

/// A static filter read in place from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct GolombSet<'a> {
    /// Distinct fingerprints.
    len: u64,
    bits: u8,
    /// The range the hashes were mapped to: the distinct hashes built from, times 2^k.
    range: u64,
    index: &'a [u8],
    /// The stream and its padding.
    stream: &'a [u8],
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

impl<'a> GolombSet<'a> {
    /// Reads a filter written by [`build_golomb`], checking that its parts fit its length.
    pub fn parse(bytes: &'a [u8]) -> Result<GolombSet<'a>, Error> {
        let malformed = |why: &str| Error::Malformed(format!("static filter: {why}"));
        if bytes.len() < GOLOMB_HEADER_BYTES + PADDING {
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
        let entries = u32_at(bytes, 12) as usize;
        let stream_bytes = u32_at(bytes, 16) as usize;
        let index_end = GOLOMB_HEADER_BYTES + entries * INDEX_ENTRY_BYTES;
        if len > sized_for
            || entries != (len as usize).saturating_sub(1) / BLOCK
            || bytes.len() != index_end + stream_bytes + PADDING
            || stream_bytes as u64 * 8 < len * (u64::from(bits) + 1)
        {
            return Err(malformed("its lengths do not match"));
        }
        let index = &bytes[GOLOMB_HEADER_BYTES..index_end];
        for e in 0..entries {
            if u32_at(index, e * INDEX_ENTRY_BYTES + 8) as usize > stream_bytes * 8 {
                return Err(malformed("an index entry points past the stream"));
            }
        }
        Ok(GolombSet {
            len,
            bits,
            range: sized_for.max(1) << bits,
            index,
            stream: &bytes[index_end..],
        })
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

    /// 64 bits of the stream from bit `at` (at least 57 valid: the padding keeps the read
    /// inside the value; past the stream's end they are zeros).
    fn peek(&self, at: u64) -> u64 {
        let byte = (at / 8) as usize;
        let mut word = [0u8; 8];
        let end = (byte + 8).min(self.stream.len());
        if byte < end {
            word[..end - byte].copy_from_slice(&self.stream[byte..end]);
        }
        u64::from_le_bytes(word) >> (at % 8)
    }

    /// The gap coded at bit `at` and the bit after it.
    fn gap_at(&self, mut at: u64) -> (u64, u64) {
        let mut quotient = 0u64;
        loop {
            let ones = self.peek(at).trailing_ones().min(56);
            quotient += u64::from(ones);
            at += u64::from(ones);
            if ones < 56 {
                break;
            }
        }
        at += 1;
        let remainder = self.peek(at) & ((1u64 << self.bits) - 1);
        (
            (quotient << self.bits) | remainder,
            at + u64::from(self.bits),
        )
    }

    /// Where decoding may start for a fingerprint of at least `print`: (block, value before
    /// it, bit offset).
    fn block_for(&self, print: u64) -> (usize, u64, u64) {
        let entries = self.index.len() / INDEX_ENTRY_BYTES;
        // The last entry whose value before the block is below `print`.
        let (mut lo, mut hi) = (0usize, entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if u64_at(self.index, mid * INDEX_ENTRY_BYTES) < print {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        match lo {
            0 => (0, 0, 0),
            b => {
                let at = (b - 1) * INDEX_ENTRY_BYTES;
                (
                    b,
                    u64_at(self.index, at),
                    u64::from(u32_at(self.index, at + 8)),
                )
            }
        }
    }

    /// Whether `hash` may be held (never false for a hash built in).
    pub fn contains(&self, hash: u64) -> bool {
        let mut out = [false];
        self.contains_each(&[hash], &mut out);
        out[0]
    }

    /// `out[i]`: whether `hashes[i]` may be held. One pass over the stream in fingerprint
    /// order, skipping blocks no fingerprint asked for falls in.
    pub fn contains_each(&self, hashes: &[u64], out: &mut [bool]) {
        assert_eq!(hashes.len(), out.len(), "one answer per hash");
        if self.len == 0 {
            out.fill(false);
            return;
        }
        let mut asked: Vec<(u64, usize)> = hashes
            .iter()
            .enumerate()
            .map(|(i, &h)| (fingerprint(h, self.range), i))
            .collect();
        asked.sort_unstable();
        // The decoder: the item `next` is about to be read at bit `at`, after value `current`.
        let (mut next, mut current, mut at) = (0u64, 0u64, 0u64);
        let mut value = None;
        for (print, i) in asked {
            let (block, before, offset) = self.block_for(print);
            let block_start = (block * BLOCK) as u64;
            if block_start > next {
                (next, current, at, value) = (block_start, before, offset, None);
            }
            loop {
                match value {
                    Some(v) if v >= print => break,
                    _ if next == self.len => {
                        value = Some(u64::MAX);
                        break;
                    }
                    _ => {
                        let (gap, after) = self.gap_at(at);
                        current += gap;
                        (value, next, at) = (Some(current), next + 1, after);
                    }
                }
            }
            out[i] = value == Some(print);
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
        ] {
            let items = hashes(1, n);
            let bytes = build_golomb(&items, bits).unwrap();
            let set = GolombSet::parse(&bytes).unwrap();
            let mut out = vec![false; items.len()];
            set.contains_each(&items, &mut out);
            assert!(out.iter().all(|&x| x), "a false negative at n = {n}");
            assert!(items.iter().take(50).all(|&h| set.contains(h)));
            let fresh = hashes(2, 200_000);
            let mut out = vec![false; fresh.len()];
            set.contains_each(&fresh, &mut out);
            let rate = out.iter().filter(|&&x| x).count() as f64 / fresh.len() as f64;
            let target = 0.5f64.powi(i32::from(bits));
            assert!(
                rate <= target * 1.2 && (n < 100 || rate >= target * 0.8),
                "n = {n}, k = {bits}: measured {rate}, 2^-k = {target}"
            );
        }
    }

    #[test]
    fn takes_k_plus_about_1_6_bits_per_item() {
        for (n, bits) in [(600, 8), (3000, 8), (3000, 11), (100_000, 8)] {
            let bytes = build_golomb(&hashes(3, n), bits).unwrap();
            let per_item = (bytes.len() * 8) as f64 / n as f64;
            let most = f64::from(bits) + 1.75 + 0.2 + 8.0 * 28.0 / n as f64;
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
            GolombSet::parse(&build_golomb(&items, 9).unwrap())
                .unwrap()
                .len(),
            GolombSet::parse(&build_golomb(&shuffled, 9).unwrap())
                .unwrap()
                .len()
        );
    }

    #[test]
    fn golden_bytes() {
        // The format is stored: these bytes must not change.
        let bytes = build_golomb(&[1 << 62, 3 << 62, 1 << 63], 2).unwrap();
        assert_eq!(
            bytes,
            // k = 2, 3 hashes: range 12, fingerprints 3, 6, 9; gaps of 3, each a unary 0 and
            // the remainder 3 (bits 0 1 1): 0xb6, 0x01.
            [
                1, 2, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0xb6, 0x01, 0, 0, 0, 0,
                0, 0, 0, 0
            ]
        );
        let set = GolombSet::parse(&bytes).unwrap();
        assert!(set.contains(1 << 62) && set.contains(3 << 62) && set.contains(1 << 63));
    }

    #[test]
    fn malformed_values_are_refused() {
        let good = build_golomb(&hashes(5, 2000), 8).unwrap();
        assert!(GolombSet::parse(&good).is_ok());
        for bad in [&good[..10], &good[..good.len() - 1], &[2u8; 40][..]] {
            assert!(matches!(GolombSet::parse(bad), Err(Error::Malformed(_))));
        }
        let mut wrong_bits = good.clone();
        wrong_bits[1] = 40;
        assert!(GolombSet::parse(&wrong_bits).is_err());
        // More fingerprints than hashes: refused. A count off by one within that passes the
        // checks (they do not decode the stream) and answers from the zero padding, never
        // reading outside the value.
        let mut too_many = good.clone();
        too_many[8..12].copy_from_slice(&2001u32.to_le_bytes());
        assert!(GolombSet::parse(&too_many).is_err());
        let mut off_by_one = good.clone();
        off_by_one[8..12].copy_from_slice(&1999u32.to_le_bytes());
        let set = GolombSet::parse(&off_by_one).unwrap();
        let probes = hashes(6, 1000);
        let mut out = vec![false; probes.len()];
        set.contains_each(&probes, &mut out);
        assert!(build_golomb(&[1], 0).is_err());
    }

    #[test]
    fn bits_for_a_rate() {
        assert_eq!(golomb_bits_for(0.01), 7);
        assert_eq!(golomb_bits_for(0.0039), 9);
        assert_eq!(golomb_bits_for(0.5), 1);
        assert_eq!(golomb_bits_for(0.0), 32);
    }
}

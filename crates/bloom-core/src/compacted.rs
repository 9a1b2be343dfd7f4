//! A heavy user's window compacted into one split-block filter sized for exactly the items it
//! holds (`seen_bloom.compact`): the row of layer [`COMPACTED_LAYER`].
//!
//! A generation's layers grow by 4 times the items at 0.4 times the error, so a user past
//! the first layer pays for room it has not used, and every generation's layers are tested
//! at `error_rate / 6`: 1,442,611 bytes for 100,000 items against 146,924 for one `bloom`
//! value. One filter over the whole window at half the error rate costs about 1.53 bytes per
//! item (the other half is left to the layers that later impressions fill until the next
//! compaction), and is read with one probe per candidate.
//!
//! Unlike a layer row it is never written by a fold, so it records what it is: a 32-byte
//! header, then its blocks (docs/FORMAT.md).

use crate::error::Error;
use crate::sbbf::{block_insert, blocks_contain, blocks_fill, layer_hash, BLOCK_BYTES};
use crate::shape::MAX_VALUE_BYTES;
use crate::sizing::blocks_for;

/// The `layer` of a compacted row: below the exact row's -1, so it is never a generation's
/// top row while layered rows exist.
pub const COMPACTED_LAYER: i16 = -2;

/// Bytes before the blocks.
pub const COMPACTED_HEADER_BYTES: usize = 32;

const MAGIC: [u8; 4] = *b"SBWC";
const VERSION: u32 = 1;

/// The layer-hash index a compacted filter probes with: past every generation layer's
/// (0..MAX_LAYERS), so its collisions are independent of theirs.
const HASH_INDEX: u32 = 64;

/// What a compacted row's header records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactedHeader {
    /// Distinct items the filter was built from.
    pub items: u64,
    /// The error rate it was sized for.
    pub error_rate: f64,
    /// The oldest and newest generations its items came from: it is stale once the window
    /// no longer reaches `oldest_generation`, and expired once it no longer reaches
    /// `newest_generation` (the row's key).
    pub oldest_generation: i32,
    pub newest_generation: i32,
}

/// A parsed compacted row: its header and its blocks, in place.
#[derive(Debug, Clone, Copy)]
pub struct Compacted<'a> {
    pub header: CompactedHeader,
    blocks: &'a [[u8; BLOCK_BYTES]],
}

/// Builds a compacted row from item hashes (duplicates counted once) at `error_rate`.
pub fn build_compacted(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
) -> Result<Vec<u8>, Error> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(Error::BadParameter(format!(
            "error rate must be between 0 and 1, got {error_rate}"
        )));
    }
    if oldest_generation > newest_generation {
        return Err(Error::BadParameter(format!(
            "oldest generation {oldest_generation} is after newest {newest_generation}"
        )));
    }
    hashes.sort_unstable();
    hashes.dedup();
    let blocks = blocks_for(hashes.len().max(1) as u64, error_rate);
    let bytes = COMPACTED_HEADER_BYTES as u64 + blocks * BLOCK_BYTES as u64;
    if bytes > MAX_VALUE_BYTES {
        return Err(Error::TooLarge {
            bytes,
            limit: MAX_VALUE_BYTES,
        });
    }
    let mut out = vec![0u8; bytes as usize];
    let (head, body) = out.split_at_mut(COMPACTED_HEADER_BYTES);
    head[0..4].copy_from_slice(&MAGIC);
    head[4..8].copy_from_slice(&VERSION.to_le_bytes());
    head[8..16].copy_from_slice(&(hashes.len() as u64).to_le_bytes());
    head[16..24].copy_from_slice(&error_rate.to_le_bytes());
    head[24..28].copy_from_slice(&oldest_generation.to_le_bytes());
    head[28..32].copy_from_slice(&newest_generation.to_le_bytes());
    let (body, _) = body.as_chunks_mut::<BLOCK_BYTES>();
    for &h in hashes.iter() {
        let lh = layer_hash(h, HASH_INDEX);
        let b = crate::sbbf::block_index(lh, blocks) as usize;
        block_insert(&mut body[b], lh);
    }
    Ok(out)
}

/// The header alone (the first [`COMPACTED_HEADER_BYTES`] of a row suffice).
pub fn compacted_header(bits: &[u8]) -> Result<CompactedHeader, Error> {
    let bad = |why: &str| Err(Error::Malformed(format!("compacted filter row: {why}")));
    if bits.len() < COMPACTED_HEADER_BYTES {
        return bad("shorter than its header");
    }
    if bits[0..4] != MAGIC {
        return bad("no compacted-filter header");
    }
    let word = |at: usize| u32::from_le_bytes(bits[at..at + 4].try_into().unwrap());
    if word(4) != VERSION {
        return bad(&format!("version {} is not known", word(4)));
    }
    let header = CompactedHeader {
        items: u64::from_le_bytes(bits[8..16].try_into().unwrap()),
        error_rate: f64::from_le_bytes(bits[16..24].try_into().unwrap()),
        oldest_generation: word(24) as i32,
        newest_generation: word(28) as i32,
    };
    if header.oldest_generation > header.newest_generation {
        return bad("oldest generation after newest");
    }
    Ok(header)
}

impl<'a> Compacted<'a> {
    /// Checks and reads a stored compacted row.
    pub fn parse(bits: &'a [u8]) -> Result<Compacted<'a>, Error> {
        let header = compacted_header(bits)?;
        let (blocks, rest) = bits[COMPACTED_HEADER_BYTES..].as_chunks::<BLOCK_BYTES>();
        if blocks.is_empty() || !rest.is_empty() {
            return Err(Error::Malformed(format!(
                "compacted filter row of {} bytes is not a header and whole blocks",
                bits.len()
            )));
        }
        Ok(Compacted { header, blocks })
    }

    /// Whether the filter (probably) holds the item with hash `h`.
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        blocks_contain(self.blocks, layer_hash(h, HASH_INDEX))
    }

    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Fraction of bits set.
    pub fn fill(&self) -> f64 {
        blocks_fill(self.blocks.as_flattened())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash_i64;

    fn hashes(range: std::ops::Range<i64>) -> Vec<u64> {
        range.map(hash_i64).collect()
    }

    #[test]
    fn holds_every_item_at_its_error_rate() {
        let mut items = hashes(0..100_000);
        items.extend(hashes(0..1_000)); // duplicates are counted once
        let bits = build_compacted(&mut items, 0.005, 10, 15).unwrap();
        let c = Compacted::parse(&bits).unwrap();
        assert_eq!(
            c.header,
            CompactedHeader {
                items: 100_000,
                error_rate: 0.005,
                oldest_generation: 10,
                newest_generation: 15
            }
        );
        assert!(hashes(0..100_000).into_iter().all(|h| c.contains(h)));
        let fresh = 200_000;
        let false_positives = hashes(1_000_000..1_000_000 + fresh)
            .into_iter()
            .filter(|&h| c.contains(h))
            .count();
        let fpr = false_positives as f64 / fresh as f64;
        assert!(fpr <= 0.005 * 1.15, "fpr {fpr}");
        assert!(fpr >= 0.005 * 0.5, "sized too large: fpr {fpr}");
        // About 1.53 bytes per item at 0.5% (one bloom value at 1%: 1.47).
        let per_item = bits.len() as f64 / 100_000.0;
        assert!((1.4..1.65).contains(&per_item), "{per_item} bytes per item");
    }

    #[test]
    fn empty_set_is_one_block() {
        let bits = build_compacted(&mut Vec::new(), 0.01, 3, 3).unwrap();
        assert_eq!(bits.len(), COMPACTED_HEADER_BYTES + BLOCK_BYTES);
        let c = Compacted::parse(&bits).unwrap();
        assert_eq!(c.header.items, 0);
        assert!(!c.contains(hash_i64(1)));
    }

    #[test]
    fn refuses_bad_input_and_malformed_rows() {
        assert!(matches!(
            build_compacted(&mut vec![1], 0.0, 1, 1),
            Err(Error::BadParameter(_))
        ));
        assert!(matches!(
            build_compacted(&mut vec![1], 0.01, 2, 1),
            Err(Error::BadParameter(_))
        ));
        let good = build_compacted(&mut hashes(0..100), 0.01, 1, 2).unwrap();
        let mut wrong_magic = good.clone();
        wrong_magic[0] = b'X';
        let mut wrong_version = good.clone();
        wrong_version[4] = 9;
        let mut reversed = good.clone();
        reversed[24..28].copy_from_slice(&5i32.to_le_bytes());
        for bad in [
            &good[..10],
            &good[..COMPACTED_HEADER_BYTES],
            &good[..good.len() - 1],
            &wrong_magic[..],
            &wrong_version[..],
            &reversed[..],
        ] {
            assert!(
                matches!(Compacted::parse(bad), Err(Error::Malformed(_))),
                "{} bytes accepted",
                bad.len()
            );
        }
    }
}

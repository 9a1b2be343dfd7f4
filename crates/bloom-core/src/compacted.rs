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
//! header, then its filter (docs/FORMAT.md). Version 1 holds split-block filter blocks, as
//! `compact` builds them; version 2 a static filter (static_set: 10.6 bits per item at
//! k = 8, where the blocks take 12.2 at 0.5%), which reads accept since 0.5.0 so that a later
//! release may build it.

use crate::error::Error;
use crate::sbbf::{block_insert, blocks_contain, blocks_fpr, layer_hash, BLOCK_BYTES};
use crate::shape::MAX_VALUE_BYTES;
use crate::sizing::blocks_for;
use crate::static_set::{build_static, static_bits_for, StaticSet};

/// The `layer` of a compacted row: below the exact row's -1, so it is never a generation's
/// top row while layered rows exist.
pub const COMPACTED_LAYER: i16 = -2;

/// Bytes before the blocks.
pub const COMPACTED_HEADER_BYTES: usize = 32;

const MAGIC: [u8; 4] = *b"SBWC";
/// Split-block blocks.
const VERSION_BLOCKS: u32 = 1;
/// A static filter (read since 0.5.0).
const VERSION_STATIC: u32 = 2;

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
    /// The format version: 1 (split-block blocks) or 2 (a static filter).
    pub version: u32,
}

/// What a compacted row holds after its header.
#[derive(Debug, Clone, Copy)]
enum Body<'a> {
    Blocks(&'a [[u8; BLOCK_BYTES]]),
    Static(StaticSet<'a>),
}

/// A parsed compacted row: its header and its filter, in place.
#[derive(Debug, Clone, Copy)]
pub struct Compacted<'a> {
    pub header: CompactedHeader,
    body: Body<'a>,
}

/// What a row is built from: the arguments checked, the hashes sorted and made distinct.
struct Build<'h> {
    hashes: &'h [u64],
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
}

impl<'h> Build<'h> {
    fn new(
        hashes: &'h mut Vec<u64>,
        error_rate: f64,
        oldest_generation: i32,
        newest_generation: i32,
    ) -> Result<Build<'h>, Error> {
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
        Ok(Build {
            hashes,
            error_rate,
            oldest_generation,
            newest_generation,
        })
    }

    /// The row of `version` with `body` bytes after its header, the header written and the
    /// body zeroed (54000 past the largest value PostgreSQL stores).
    fn row(&self, version: u32, body: usize) -> Result<Vec<u8>, Error> {
        let bytes = (COMPACTED_HEADER_BYTES + body) as u64;
        if bytes > MAX_VALUE_BYTES {
            return Err(Error::TooLarge {
                bytes,
                limit: MAX_VALUE_BYTES,
            });
        }
        let mut out = vec![0u8; bytes as usize];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..8].copy_from_slice(&version.to_le_bytes());
        out[8..16].copy_from_slice(&(self.hashes.len() as u64).to_le_bytes());
        out[16..24].copy_from_slice(&self.error_rate.to_le_bytes());
        out[24..28].copy_from_slice(&self.oldest_generation.to_le_bytes());
        out[28..32].copy_from_slice(&self.newest_generation.to_le_bytes());
        Ok(out)
    }
}

/// Builds a compacted row of version 2, a static filter, from item hashes (duplicates counted
/// once), with false positives at most `error_rate`. Read since 0.5.0, not yet built by
/// `compact`: a probe took 13.5 us per 1,000 candidates against the blocks' 9.1 (docs/DESIGN.md).
pub fn build_compacted_static(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
) -> Result<Vec<u8>, Error> {
    let build = Build::new(hashes, error_rate, oldest_generation, newest_generation)?;
    let body = build_static(build.hashes, static_bits_for(error_rate))?;
    let mut out = build.row(VERSION_STATIC, body.len())?;
    out[COMPACTED_HEADER_BYTES..].copy_from_slice(&body);
    Ok(out)
}

/// Builds a compacted row of version 1, split-block blocks, from item hashes (duplicates
/// counted once) at `error_rate` (`seen_bloom.compact`).
pub fn build_compacted(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
) -> Result<Vec<u8>, Error> {
    let build = Build::new(hashes, error_rate, oldest_generation, newest_generation)?;
    let blocks = blocks_for(build.hashes.len().max(1) as u64, error_rate);
    let mut out = build.row(VERSION_BLOCKS, blocks as usize * BLOCK_BYTES)?;
    let (body, _) = out[COMPACTED_HEADER_BYTES..].as_chunks_mut::<BLOCK_BYTES>();
    for &h in build.hashes {
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
    let version = word(4);
    if version != VERSION_BLOCKS && version != VERSION_STATIC {
        return bad(&format!("version {version} is not known"));
    }
    let header = CompactedHeader {
        items: u64::from_le_bytes(bits[8..16].try_into().unwrap()),
        error_rate: f64::from_le_bytes(bits[16..24].try_into().unwrap()),
        oldest_generation: word(24) as i32,
        newest_generation: word(28) as i32,
        version,
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
        let rest = &bits[COMPACTED_HEADER_BYTES..];
        let body = if header.version == VERSION_STATIC {
            Body::Static(StaticSet::parse(rest)?)
        } else {
            let (blocks, tail) = rest.as_chunks::<BLOCK_BYTES>();
            if blocks.is_empty() || !tail.is_empty() {
                return Err(Error::Malformed(format!(
                    "compacted filter row of {} bytes is not a header and whole blocks",
                    bits.len()
                )));
            }
            Body::Blocks(blocks)
        };
        Ok(Compacted { header, body })
    }

    /// Whether the filter (probably) holds the item with hash `h`.
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        match self.body {
            Body::Blocks(blocks) => blocks_contain(blocks, layer_hash(h, HASH_INDEX)),
            Body::Static(set) => set.contains(h),
        }
    }

    /// The chance that an item it does not hold is reported held: the split-block model of
    /// its fill (version 1), held fingerprints over their range (version 2).
    pub fn false_positive_rate(&self) -> f64 {
        match self.body {
            Body::Blocks(blocks) => blocks_fpr(blocks.as_flattened()),
            Body::Static(set) => set.false_positive_rate(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash_i64;

    fn hashes(range: std::ops::Range<i64>) -> Vec<u64> {
        range.map(hash_i64).collect()
    }

    /// Every item held, false positives near the rate, and the bytes per item of each
    /// version: (version, error rate asked, least and most measured rate, bytes per item).
    #[test]
    fn holds_every_item_at_its_error_rate() {
        type Build = fn(&mut Vec<u64>, f64, i32, i32) -> Result<Vec<u8>, Error>;
        // The static filter takes k = 8 for 0.5%: 2^-8 = 0.39%, 10.6 bits per item; the
        // blocks about 1.53 bytes per item at 0.5% (one bloom value at 1%: 1.47).
        let builds: [(Build, u32, f64, f64, std::ops::Range<f64>); 2] = [
            (
                build_compacted_static,
                2,
                0.0039 * 0.85,
                0.0039 * 1.15,
                1.25..1.4,
            ),
            (build_compacted, 1, 0.005 * 0.5, 0.005 * 1.15, 1.4..1.65),
        ];
        for (build, version, least, most, bytes) in builds {
            let mut items = hashes(0..100_000);
            items.extend(hashes(0..1_000)); // duplicates are counted once
            let bits = build(&mut items, 0.005, 10, 15).unwrap();
            let c = Compacted::parse(&bits).unwrap();
            assert_eq!(
                c.header,
                CompactedHeader {
                    items: 100_000,
                    error_rate: 0.005,
                    oldest_generation: 10,
                    newest_generation: 15,
                    version,
                }
            );
            assert!(hashes(0..100_000).into_iter().all(|h| c.contains(h)));
            let fresh = 200_000;
            let false_positives = hashes(1_000_000..1_000_000 + fresh)
                .into_iter()
                .filter(|&h| c.contains(h))
                .count();
            let fpr = false_positives as f64 / fresh as f64;
            assert!(
                (least..=most).contains(&fpr),
                "version {version}: fpr {fpr}"
            );
            let modelled = c.false_positive_rate();
            assert!(
                (fpr * 0.8..=fpr * 1.25).contains(&modelled),
                "version {version}: modelled {modelled}, measured {fpr}"
            );
            let per_item = bits.len() as f64 / 100_000.0;
            assert!(
                bytes.contains(&per_item),
                "version {version}: {per_item} bytes per item"
            );
        }
    }

    #[test]
    fn empty_set_holds_nothing() {
        let v1 = build_compacted(&mut Vec::new(), 0.01, 3, 3).unwrap();
        assert_eq!(v1.len(), COMPACTED_HEADER_BYTES + BLOCK_BYTES);
        for bits in [
            v1,
            build_compacted_static(&mut Vec::new(), 0.01, 3, 3).unwrap(),
        ] {
            let c = Compacted::parse(&bits).unwrap();
            assert_eq!(c.header.items, 0);
            assert!(!c.contains(hash_i64(1)));
        }
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
        for good in [
            build_compacted_static(&mut hashes(0..100), 0.01, 1, 2).unwrap(),
            build_compacted(&mut hashes(0..100), 0.01, 1, 2).unwrap(),
        ] {
            refuses_malformed(&good);
        }
    }

    fn refuses_malformed(good: &[u8]) {
        let good = good.to_vec();
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

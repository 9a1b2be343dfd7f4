//! A user's window compacted into one filter sized for exactly the items it holds
//! (`seen_bloom.compact`): the row of layer [`COMPACTED_LAYER`].
//!
//! A generation's layers grow by 4 times the items at 0.4 times the error, so a user past
//! the first layer pays for room it has not used, and every generation's layers are tested
//! at `error_rate / 6`: 1,442,611 bytes for 100,000 items against 146,924 for one `bloom`
//! value. One filter over the whole window at half the error rate is read with one probe
//! per candidate; the other half of the budget is left to the layers that later
//! impressions fill until the next compaction.
//!
//! Unlike a layer row it is never written by a fold, so it records what it is: a 32-byte
//! header, then its filter (docs/FORMAT.md). Version 2, built since 0.5.0, is a static
//! filter (xor_set: 9.8 bits per item at k = 8, where split-block blocks take 12.2 at 0.5%;
//! static_set's Elias-Fano set, 10.6 bits and 5 times slower to probe, is still read), cut
//! by item hash into parts of at most [`STATIC_ROW_BYTES`], one row each, so that every row
//! stays inline and five fill a page. Version 1, one row of split-block blocks, is what 0.4.0
//! built, and since 0.5.0 what a few items' filter is built as, where it is the smaller.

use crate::error::Error;
use crate::sbbf::{block_insert, blocks_contain, blocks_fpr, layer_hash, BLOCK_BYTES};
use crate::shape::MAX_VALUE_BYTES;
use crate::sizing::blocks_for;
use crate::static_set::{build_static, static_bits_for, StaticSet, SAMPLE, STATIC_HEADER_BYTES};
use crate::xor_set::{build_xor, xor_bytes_for, XorSet, XOR_VERSION};

/// The `layer` of a compacted row: below the exact row's -1, so it is never a generation's
/// top row while layered rows exist.
pub const COMPACTED_LAYER: i16 = -2;

/// Bytes of the header every version starts with.
pub const COMPACTED_HEADER_BYTES: usize = 32;
/// Version 2 adds the part's index and the number of parts.
const PART_HEADER_BYTES: usize = COMPACTED_HEADER_BYTES + 8;

/// Most bytes of a version 2 row's value. The filter table's `bits` is stored MAIN: a value
/// up to about 8 KB stays inline, so one compacted row of 4 KB (3,000 items at 1%) took a
/// page to itself under the fillfactor of 90 (8,257 bytes per user measured). Five rows of a
/// value this long (a 48-byte tuple header and key, a 4-byte line pointer) fit the 7,349
/// bytes an insert may fill.
pub const STATIC_ROW_BYTES: usize = 1416;

const MAGIC: [u8; 4] = *b"SBWC";
/// Split-block blocks.
const VERSION_BLOCKS: u32 = 1;
/// A static filter (read since 0.5.0).
const VERSION_STATIC: u32 = 2;

/// The layer-hash index a compacted filter probes with: past every generation layer's
/// (0..MAX_LAYERS), so its collisions are independent of theirs.
pub(crate) const HASH_INDEX: u32 = 64;

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
    /// Version 2: which part of the items this row holds (those with
    /// `part_of(hash, parts) == part`), of how many. Version 1: part 0 of 1.
    pub part: u32,
    pub parts: u32,
}

/// The part of `parts` an item hash belongs to: from its low 32 bits, which a static filter's
/// fingerprint (the hash's high bits) leaves independent.
#[inline]
pub fn part_of(hash: u64, parts: u32) -> u32 {
    (((hash & 0xffff_ffff) * u64::from(parts)) >> 32) as u32
}

/// What a compacted row holds after its header.
#[derive(Debug, Clone, Copy)]
enum Body<'a> {
    Blocks(&'a [[u8; BLOCK_BYTES]]),
    /// The Elias-Fano set (static filter version 1).
    Static(StaticSet<'a>),
    /// The xor filter (static filter version 2).
    Xor(XorSet<'a>),
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

    /// The row of `version` holding `items` items with `body` bytes after its header (and,
    /// in version 2, the part's index and count), the header written and the body zeroed
    /// (54000 past the largest value PostgreSQL stores).
    fn row(
        &self,
        version: u32,
        items: usize,
        part: Option<(u32, u32)>,
        body: usize,
    ) -> Result<Vec<u8>, Error> {
        let head = if part.is_some() {
            PART_HEADER_BYTES
        } else {
            COMPACTED_HEADER_BYTES
        };
        let bytes = (head + body) as u64;
        if bytes > MAX_VALUE_BYTES {
            return Err(Error::TooLarge {
                bytes,
                limit: MAX_VALUE_BYTES,
            });
        }
        let mut out = vec![0u8; bytes as usize];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..8].copy_from_slice(&version.to_le_bytes());
        out[8..16].copy_from_slice(&(items as u64).to_le_bytes());
        out[16..24].copy_from_slice(&self.error_rate.to_le_bytes());
        out[24..28].copy_from_slice(&self.oldest_generation.to_le_bytes());
        out[28..32].copy_from_slice(&self.newest_generation.to_le_bytes());
        if let Some((part, parts)) = part {
            out[32..36].copy_from_slice(&part.to_le_bytes());
            out[36..40].copy_from_slice(&parts.to_le_bytes());
        }
        Ok(out)
    }
}

/// Builds the rows of version 2, a static filter cut into parts, from item hashes
/// (duplicates counted once), with false positives at most `error_rate`
/// (`seen_bloom.compact`): as few parts as keep a row of the mean part's items within
/// `max_row_bytes` ([`STATIC_ROW_BYTES`] for the filter table; `usize::MAX` for one row). A
/// part holds a few percent more or less than the mean (3% at 1,000 items): rows are
/// packed by the mean, the page of a long row holds four. The filter of each part is an xor
/// filter.
pub fn build_compacted_static(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
    max_row_bytes: usize,
) -> Result<Vec<Vec<u8>>, Error> {
    let build = Build::new(hashes, error_rate, oldest_generation, newest_generation)?;
    build.parts(max_row_bytes, xor_bytes_for, build_xor)
}

/// [`build_compacted_static`] with the Elias-Fano set of static_set as each part's filter:
/// what development builds of 0.5.0 wrote, still read (tests and the probe benchmark).
pub fn build_compacted_elias_fano(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
    max_row_bytes: usize,
) -> Result<Vec<Vec<u8>>, Error> {
    let build = Build::new(hashes, error_rate, oldest_generation, newest_generation)?;
    // Its headers and padding, then k + 2 bits per item and one 32-bit sample per 64
    // buckets (one bucket per item).
    let bytes = |items: u64, k: u8| {
        (STATIC_HEADER_BYTES + 8) as u64
            + (items * u64::from(k) + 2 * items + 64).div_ceil(8)
            + 4 * (items / SAMPLE + 1)
    };
    build.parts(max_row_bytes, bytes, build_static)
}

impl Build<'_> {
    /// The rows of version 2: the items cut into as few parts as keep a row within
    /// `max_row_bytes` by `body_bytes(items, k)`, each part's filter built by `build`.
    fn parts(
        &self,
        max_row_bytes: usize,
        body_bytes: impl Fn(u64, u8) -> u64,
        build: impl Fn(&[u64], u8) -> Result<Vec<u8>, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let k = static_bits_for(self.error_rate);
        let n = self.hashes.len() as u64;
        let estimate = |parts: u64| PART_HEADER_BYTES as u64 + body_bytes(n.div_ceil(parts), k);
        let mut parts = 1u64;
        while estimate(parts) > max_row_bytes as u64 && parts < n.max(1) {
            parts += 1;
        }
        let parts = u32::try_from(parts)
            .map_err(|_| Error::BadParameter(format!("{n} items in too many parts")))?;
        let mut split: Vec<Vec<u64>> = vec![Vec::new(); parts as usize];
        for &h in self.hashes {
            split[part_of(h, parts) as usize].push(h);
        }
        split
            .iter()
            .enumerate()
            .map(|(part, items)| {
                let body = build(items, k)?;
                let mut out = self.row(
                    VERSION_STATIC,
                    items.len(),
                    Some((part as u32, parts)),
                    body.len(),
                )?;
                out[PART_HEADER_BYTES..].copy_from_slice(&body);
                Ok(out)
            })
            .collect()
    }
}

/// Builds the rows of a compacted filter (`seen_bloom.compact`): split-block blocks in one
/// row (version 1) when they take no more bytes than the xor filter in one row, else the
/// static filter's parts (version 2). Their lookups cost about the same (2.3 and 2.8 us for
/// 1,000 candidates in a 300-item window: `cargo bench -p bloom-core --bench probe --
/// compacted_300`), so bytes decide: blocks for a handful of items, where the xor filter's
/// 32 spare slots and its header weigh most (up to 125 to 209 items at 0.5%, 79 to 92 at
/// 0.05%).
pub fn build_compacted(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
    max_row_bytes: usize,
) -> Result<Vec<Vec<u8>>, Error> {
    let build = Build::new(hashes, error_rate, oldest_generation, newest_generation)?;
    let blocks_row = COMPACTED_HEADER_BYTES as u64 + build.blocks() * BLOCK_BYTES as u64;
    let xor_row = PART_HEADER_BYTES as u64
        + xor_bytes_for(build.hashes.len() as u64, static_bits_for(error_rate));
    if blocks_row <= xor_row.min(STATIC_ROW_BYTES.min(max_row_bytes) as u64) {
        return Ok(vec![build.blocks_row()?]);
    }
    build.parts(max_row_bytes, xor_bytes_for, build_xor)
}

/// Builds a compacted row of version 1, split-block blocks, from item hashes (duplicates
/// counted once) at `error_rate`: what `seen_bloom.compact` built in 0.4.0, and builds again
/// for a few items (see [`build_compacted`]).
pub fn build_compacted_blocks(
    hashes: &mut Vec<u64>,
    error_rate: f64,
    oldest_generation: i32,
    newest_generation: i32,
) -> Result<Vec<u8>, Error> {
    Build::new(hashes, error_rate, oldest_generation, newest_generation)?.blocks_row()
}

impl Build<'_> {
    /// Blocks of the split-block filter of the items (at least one).
    fn blocks(&self) -> u64 {
        blocks_for(self.hashes.len().max(1) as u64, self.error_rate)
    }

    /// The row of version 1: the items in split-block blocks.
    fn blocks_row(&self) -> Result<Vec<u8>, Error> {
        let blocks = self.blocks();
        let mut out = self.row(
            VERSION_BLOCKS,
            self.hashes.len(),
            None,
            blocks as usize * BLOCK_BYTES,
        )?;
        let (body, _) = out[COMPACTED_HEADER_BYTES..].as_chunks_mut::<BLOCK_BYTES>();
        for &h in self.hashes {
            let lh = layer_hash(h, HASH_INDEX);
            let b = crate::sbbf::block_index(lh, blocks) as usize;
            block_insert(&mut body[b], lh);
        }
        Ok(out)
    }
}

/// The header alone (the first [`COMPACTED_HEADER_BYTES`] of a row suffice; the part is read
/// when the row is longer).
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
        part: 0,
        parts: 1,
    };
    if header.oldest_generation > header.newest_generation {
        return bad("oldest generation after newest");
    }
    if version == VERSION_STATIC && bits.len() >= PART_HEADER_BYTES {
        let (part, parts) = (word(32), word(36));
        if part >= parts {
            return bad(&format!("part {part} of {parts}"));
        }
        return Ok(CompactedHeader {
            part,
            parts,
            ..header
        });
    }
    Ok(header)
}

impl<'a> Compacted<'a> {
    /// Checks and reads a stored compacted row.
    pub fn parse(bits: &'a [u8]) -> Result<Compacted<'a>, Error> {
        let header = compacted_header(bits)?;
        let rest = &bits[COMPACTED_HEADER_BYTES..];
        let body = if header.version == VERSION_STATIC {
            if bits.len() < PART_HEADER_BYTES {
                return Err(Error::Malformed(
                    "compacted filter row: no part in its header".into(),
                ));
            }
            let body = &bits[PART_HEADER_BYTES..];
            match body.first() {
                Some(&XOR_VERSION) => Body::Xor(XorSet::parse(body)?),
                _ => Body::Static(StaticSet::parse(body)?),
            }
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

    /// Whether the filter (probably) holds the item with hash `h`, which must be of this
    /// row's part (see [`part_of`]; a row of another part would answer at its own error rate).
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        match self.body {
            Body::Blocks(blocks) => blocks_contain(blocks, layer_hash(h, HASH_INDEX)),
            Body::Static(set) => set.contains(h),
            Body::Xor(set) => set.contains(h),
        }
    }

    /// The xor filter of a version 2 row (None for blocks or the Elias-Fano set).
    pub fn xor(&self) -> Option<XorSet<'a>> {
        match self.body {
            Body::Xor(set) => Some(set),
            Body::Blocks(_) | Body::Static(_) => None,
        }
    }

    /// The blocks of a version 1 row (None for a static filter).
    pub fn blocks(&self) -> Option<&'a [[u8; BLOCK_BYTES]]> {
        match self.body {
            Body::Blocks(blocks) => Some(blocks),
            Body::Static(_) | Body::Xor(_) => None,
        }
    }

    /// [`Self::contains`], with BMI2 and POPCNT when `FAST` (see static_set's `fast_probes`).
    #[inline(always)]
    pub fn contains_with<const FAST: bool>(&self, h: u64) -> bool {
        match self.body {
            Body::Blocks(blocks) => blocks_contain(blocks, layer_hash(h, HASH_INDEX)),
            Body::Static(set) => set.contains_with::<FAST>(h),
            Body::Xor(set) => set.contains(h),
        }
    }

    /// The chance that an item it does not hold is reported held: the split-block model of
    /// its fill (version 1), held fingerprints over their range (version 2).
    pub fn false_positive_rate(&self) -> f64 {
        match self.body {
            Body::Blocks(blocks) => blocks_fpr(blocks.as_flattened()),
            Body::Static(set) => set.false_positive_rate(),
            Body::Xor(set) => set.false_positive_rate(),
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
        // The static filters take k = 8 for 0.5%: 2^-8 = 0.39%, the xor filter 9.8 bits per
        // item, the Elias-Fano set 10.6; the blocks about 1.53 bytes per item at 0.5% (one
        // bloom value at 1%: 1.47).
        let builds: [(Build, u32, f64, f64, std::ops::Range<f64>); 3] = [
            (
                |h, e, o, n| {
                    build_compacted_static(h, e, o, n, usize::MAX).map(|mut rows| rows.remove(0))
                },
                2,
                0.0039 * 0.85,
                0.0039 * 1.15,
                1.2..1.25,
            ),
            (
                |h, e, o, n| {
                    build_compacted_elias_fano(h, e, o, n, usize::MAX)
                        .map(|mut rows| rows.remove(0))
                },
                2,
                0.0039 * 0.85,
                0.0039 * 1.15,
                1.25..1.4,
            ),
            (
                build_compacted_blocks,
                1,
                0.005 * 0.5,
                0.005 * 1.15,
                1.4..1.65,
            ),
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
                    part: 0,
                    parts: 1,
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

    /// A compacted filter is whichever of blocks and the xor filter takes fewer bytes: blocks
    /// for a few items (all up to 125 at 0.5% and 79 at 0.05%, some up to 209 and 92: whole
    /// blocks round their size), the xor filter past them (smaller by 41 bytes at 300 items and 0.5%, 279 at 0.05%).
    #[test]
    fn the_smaller_filter_is_built() {
        for (e, blocks_to, xor_from) in [(0.005, 125, 210), (0.0005, 79, 93)] {
            for n in 1..=600 {
                let rows = build_compacted(&mut hashes(0..n), e, 1, 2, STATIC_ROW_BYTES).unwrap();
                let blocks = build_compacted_blocks(&mut hashes(0..n), e, 1, 2).unwrap();
                let xor = build_compacted_static(&mut hashes(0..n), e, 1, 2, usize::MAX).unwrap();
                let version = Compacted::parse(&rows[0]).unwrap().header.version;
                let built: usize = rows.iter().map(Vec::len).sum();
                assert_eq!(blocks.len().min(xor[0].len()), built, "{n} items at {e}");
                if n <= blocks_to {
                    assert_eq!(version, 1, "{n} items at {e}");
                }
                if n >= xor_from {
                    assert_eq!(version, 2, "{n} items at {e}");
                }
            }
        }
    }

    #[test]
    fn empty_set_holds_nothing() {
        let v1 = build_compacted_blocks(&mut Vec::new(), 0.01, 3, 3).unwrap();
        assert_eq!(v1.len(), COMPACTED_HEADER_BYTES + BLOCK_BYTES);
        let v2 = build_compacted_static(&mut Vec::new(), 0.01, 3, 3, STATIC_ROW_BYTES).unwrap();
        assert_eq!(v2.len(), 1);
        for bits in [v1, v2[0].clone()] {
            let c = Compacted::parse(&bits).unwrap();
            assert_eq!(c.header.items, 0);
            assert!(!c.contains(hash_i64(1)));
        }
    }

    #[test]
    fn refuses_bad_input_and_malformed_rows() {
        assert!(matches!(
            build_compacted_blocks(&mut vec![1], 0.0, 1, 1),
            Err(Error::BadParameter(_))
        ));
        assert!(matches!(
            build_compacted_blocks(&mut vec![1], 0.01, 2, 1),
            Err(Error::BadParameter(_))
        ));
        for good in [
            build_compacted_static(&mut hashes(0..100), 0.01, 1, 2, STATIC_ROW_BYTES).unwrap()[0]
                .clone(),
            build_compacted_blocks(&mut hashes(0..100), 0.01, 1, 2).unwrap(),
        ] {
            refuses_malformed(&good);
        }
        // A part past the count.
        let mut bad = build_compacted_static(&mut hashes(0..100), 0.01, 1, 2, STATIC_ROW_BYTES)
            .unwrap()[0]
            .clone();
        bad[32..36].copy_from_slice(&1u32.to_le_bytes());
        assert!(matches!(Compacted::parse(&bad), Err(Error::Malformed(_))));
    }

    /// 3,000 items at 0.5% (a 1% table's compacted rows) take 3 rows of STATIC_ROW_BYTES at
    /// most on average (a part within 15% of the mean: 3.5 standard deviations at 1,100 items);
    /// 100,000 take as many as they need; every item reads held from the row
    /// of its part and fresh ones at the rate of k = 8 (0.39%).
    #[test]
    fn parts_stay_within_a_row_and_hold_every_item() {
        for (n, parts) in [(3_000i64, 3..=3), (100_000, 90..=100)] {
            let rows =
                build_compacted_static(&mut hashes(0..n), 0.005, 1, 2, STATIC_ROW_BYTES).unwrap();
            assert!(
                parts.contains(&rows.len()),
                "{n} items in {} rows",
                rows.len()
            );
            let parsed: Vec<Compacted> =
                rows.iter().map(|r| Compacted::parse(r).unwrap()).collect();
            let mean = rows.iter().map(Vec::len).sum::<usize>() / rows.len();
            assert!(mean <= STATIC_ROW_BYTES, "{n} items: rows of {mean} bytes");
            for (i, (row, c)) in rows.iter().zip(&parsed).enumerate() {
                assert!(
                    row.len() <= STATIC_ROW_BYTES * 23 / 20,
                    "row {i}: {} bytes",
                    row.len()
                );
                assert_eq!(
                    (c.header.part, c.header.parts),
                    (i as u32, rows.len() as u32)
                );
            }
            assert_eq!(parsed.iter().map(|c| c.header.items).sum::<u64>(), n as u64);
            let probe = |h: u64| parsed[part_of(h, rows.len() as u32) as usize].contains(h);
            assert!(hashes(0..n).into_iter().all(probe));
            let fresh = 200_000;
            let fpr = hashes(10_000_000..10_000_000 + fresh)
                .into_iter()
                .filter(|&h| probe(h))
                .count() as f64
                / fresh as f64;
            assert!(
                (0.0039 * 0.85..=0.0039 * 1.15).contains(&fpr),
                "{n} items: fpr {fpr}"
            );
            let per_item = rows.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
            assert!(per_item < 1.42, "{n} items: {per_item} bytes per item");
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

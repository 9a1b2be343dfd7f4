//! A zero-copy, read-only view over stored bytes: the hot read path. `parse` checks the
//! structure once (O(layers)) so that probing can walk the bytes without re-checking them.

use crate::error::Error;
use crate::family::{ItemGuard, FAMILY_FLAGS};
use crate::hash::{HASH_MURMUR3_X64_128, SEED};
use crate::info::Info;
use crate::layout::{
    Header, LayerHeader, Representation, FLAG_SCALING, FORMAT_VERSION, HEADER_BYTES,
    LAYER_HEADER_BYTES, MAX_LAYERS,
};
use crate::sbbf::{blocks_contain, layer_hash, BLOCK_BYTES};
use crate::shape::{is_valid_error_rate, Shape, MAX_CAPACITY};
use crate::sizing::MAX_BLOCKS;

/// A parsed stored value. Every length in it has been checked against the bytes.
#[derive(Debug, Clone, Copy)]
pub struct BloomView<'a> {
    bytes: &'a [u8],
    header: Header,
}

/// One split-block layer inside a view: its header fields and its blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerView<'a> {
    pub header: LayerHeader,
    pub blocks: &'a [[u8; BLOCK_BYTES]],
}

fn malformed<T>(detail: String) -> Result<T, Error> {
    Err(Error::Malformed(detail))
}

impl<'a> BloomView<'a> {
    /// Structural parse: header fields in range, every length consistent with the bytes, no
    /// trailing bytes. Cost O(layers), allocation-free, safe against any input.
    pub fn parse(bytes: &'a [u8]) -> Result<BloomView<'a>, Error> {
        let header = Header::read(bytes)?;
        check_header(&header)?;
        let body = bytes.get(HEADER_BYTES..).unwrap_or_default();
        match header.representation {
            Representation::Exact => check_exact_body(&header, body)?,
            Representation::SplitBlock => check_split_block_body(&header, body)?,
        }
        Ok(BloomView { bytes, header })
    }

    /// Full validation, for values from outside (text input, binary receive, the bytea
    /// cast). `parse` already checks every header field's range, a fixed exact value's items
    /// against its capacity and the layers' item sum (all O(layers)); this adds the one check
    /// that reads the whole body: exact hashes strictly ascending.
    pub fn parse_validated(bytes: &'a [u8]) -> Result<BloomView<'a>, Error> {
        let view = Self::parse(bytes)?;
        let hashes = view.exact_hashes();
        if let Some(i) = hashes
            .windows(2)
            .position(|w| u64::from_le_bytes(w[0]) >= u64::from_le_bytes(w[1]))
        {
            return malformed(format!(
                "exact hashes must be strictly ascending, but hash {} is not greater than hash {}",
                i + 1,
                i
            ));
        }
        Ok(view)
    }

    pub fn shape(&self) -> Shape {
        Shape {
            capacity: self.header.capacity,
            error_rate: self.header.error_rate,
            scaling: self.header.flags & FLAG_SCALING != 0,
        }
    }

    /// The format version the value was written in (1 or 2).
    pub fn version(&self) -> u8 {
        self.header.version
    }

    /// The family of items the value records (none for format version 1).
    pub fn guard(&self) -> ItemGuard {
        ItemGuard::from_header(self.header.version, self.header.flags)
            .expect("parse checked the family bits")
    }

    pub fn representation(&self) -> Representation {
        self.header.representation
    }

    pub fn seed(&self) -> u32 {
        self.header.seed
    }

    /// The header's item count: distinct items added (exact) or the layers' estimate sum.
    pub fn cardinality(&self) -> u64 {
        self.header.items
    }

    pub fn layer_count(&self) -> u32 {
        self.header.layers
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn info(&self) -> Info {
        crate::info::info_of(self)
    }

    /// Whether the item with hash `h` may be present. Never false for an added item.
    /// Does not allocate; hashes once per layer (a cheap remix), never the item again.
    #[inline]
    pub fn contains_hash(&self, h: u64) -> bool {
        match self.header.representation {
            Representation::Exact => sorted_contains(self.exact_hashes(), h),
            Representation::SplitBlock => self
                .layers()
                .enumerate()
                .any(|(i, layer)| layer.contains(layer_hash(h, i as u32))),
        }
    }

    fn body(&self) -> &'a [u8] {
        self.bytes.get(HEADER_BYTES..).unwrap_or_default()
    }

    /// The hashes an exact value holds, ascending (none for split-block).
    pub fn exact_items(&self) -> impl Iterator<Item = u64> + 'a {
        self.exact_hashes().iter().map(|c| u64::from_le_bytes(*c))
    }

    /// The stored exact hashes as 8-byte little-endian chunks (empty for split-block).
    /// Chunks rather than `&[u64]` because the bytes carry no alignment guarantee.
    pub(crate) fn exact_hashes(&self) -> &'a [[u8; 8]] {
        match self.header.representation {
            Representation::Exact => self.body().as_chunks::<8>().0,
            Representation::SplitBlock => &[],
        }
    }

    /// The split-block layers in order (none for exact).
    pub(crate) fn layers(&self) -> Layers<'a> {
        let rest = match self.header.representation {
            Representation::Exact => &[],
            Representation::SplitBlock => self.body(),
        };
        Layers { rest }
    }
}

impl LayerView<'_> {
    /// Probe with the layer's own hash (see [`layer_hash`]).
    #[inline]
    pub fn contains(&self, layer_h: u64) -> bool {
        blocks_contain(self.blocks, layer_h)
    }
}

/// Membership in ascending little-endian hashes. Item hashes are uniform, so the position
/// of `h` is close to `h / 2^64 * n` (within about sqrt(n)); gallop out from that guess to
/// bracket it, then binary-search the bracket. The loads stay within a few cache lines
/// instead of walking the whole array, and the gallop bounds the work at O(log n) for any
/// bytes, uniform or not.
#[inline]
fn sorted_contains(hashes: &[[u8; 8]], h: u64) -> bool {
    let n = hashes.len();
    let key = |i: usize| hashes.get(i).map_or(u64::MAX, |c| u64::from_le_bytes(*c));
    if n == 0 {
        return false;
    }
    // < n because h < 2^64.
    let guess = ((u128::from(h) * n as u128) >> 64) as usize;
    let (mut low, mut high) = (guess, guess + 1);
    let mut step = 1;
    if key(guess) <= h {
        // Answer in low..high with key(low) <= h: move high up until key(high) > h.
        while high < n && key(high) <= h {
            low = high;
            high = high.saturating_add(step).min(n);
            step *= 2;
        }
    } else {
        // key(guess) > h: the answer, if any, lies below; move low down until key(low) <= h.
        high = guess;
        low = guess;
        while low > 0 && key(low) > h {
            high = low;
            low = low.saturating_sub(step);
            step *= 2;
        }
    }
    hashes.get(low..high.max(low)).is_some_and(|window| {
        window
            .binary_search_by(|c| u64::from_le_bytes(*c).cmp(&h))
            .is_ok()
    })
}

/// Walks the layers of a parsed body. Stops at the first layer that does not fit, which
/// `parse` has already ruled out; so it can never read out of bounds.
#[derive(Debug, Clone)]
pub(crate) struct Layers<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Layers<'a> {
    type Item = LayerView<'a>;

    #[inline]
    fn next(&mut self) -> Option<LayerView<'a>> {
        let (layer, rest) = split_layer(self.rest)?;
        self.rest = rest;
        Some(layer)
    }
}

/// Splits one layer off the front of `body` if its header and all its declared blocks are
/// there. Allocation-free: the probe path walks layers with it.
#[inline]
fn split_layer(body: &[u8]) -> Option<(LayerView<'_>, &[u8])> {
    let (header_bytes, after_header) = body.split_first_chunk::<LAYER_HEADER_BYTES>()?;
    let header = LayerHeader::decode(header_bytes);
    let block_bytes = usize::try_from(header.blocks)
        .ok()
        .and_then(|b| b.checked_mul(BLOCK_BYTES))
        .filter(|&n| n <= after_header.len())?;
    let (blocks, rest) = after_header.split_at(block_bytes);
    Some((
        LayerView {
            header,
            blocks: blocks.as_chunks::<BLOCK_BYTES>().0,
        },
        rest,
    ))
}

/// Why `split_layer` refused `body`, for the error message.
fn layer_split_error(i: u32, body: &[u8]) -> Error {
    match body.split_first_chunk::<LAYER_HEADER_BYTES>() {
        None => Error::Malformed(format!(
            "layer {i}: value ends inside the layer header ({} bytes left)",
            body.len()
        )),
        Some((header_bytes, after)) => Error::Malformed(format!(
            "layer {i}: declares {} blocks but only {} bytes follow its header",
            LayerHeader::decode(header_bytes).blocks,
            after.len()
        )),
    }
}

fn check_header(h: &Header) -> Result<(), Error> {
    if !(1..=FORMAT_VERSION).contains(&h.version) {
        return malformed(format!(
            "unsupported format version {} (this build reads versions 1 to {FORMAT_VERSION})",
            h.version
        ));
    }
    if h.hash_algorithm != HASH_MURMUR3_X64_128 {
        return malformed(format!("unknown hash algorithm code {}", h.hash_algorithm));
    }
    let known_flags = match h.version {
        1 => FLAG_SCALING,
        _ => FLAG_SCALING | FAMILY_FLAGS,
    };
    if h.flags & !known_flags != 0 {
        return malformed(format!("unknown flag bits {:#04x}", h.flags & !known_flags));
    }
    ItemGuard::from_header(h.version, h.flags)?;
    // Callers hash items with SEED before probing; a value under another seed would answer
    // "absent" for its own items, so it is refused rather than read wrongly.
    if h.seed != SEED {
        return malformed(format!(
            "unsupported hash seed {:#010x} (expected {SEED:#010x})",
            h.seed
        ));
    }
    if !(1..=MAX_CAPACITY).contains(&h.capacity) {
        return malformed(format!(
            "capacity {} outside 1..={MAX_CAPACITY}",
            h.capacity
        ));
    }
    if !is_valid_error_rate(h.error_rate) {
        return malformed(format!("error rate {} outside (0, 1)", h.error_rate));
    }
    let scaling = h.flags & FLAG_SCALING != 0;
    match h.representation {
        Representation::Exact if h.layers != 0 => {
            malformed(format!("an exact value has 0 layers, not {}", h.layers))
        }
        Representation::Exact if !scaling && h.items > h.capacity => malformed(format!(
            "a fixed exact value holds at most its capacity of {} items, not {}",
            h.capacity, h.items
        )),
        Representation::SplitBlock if !(1..=MAX_LAYERS).contains(&h.layers) => malformed(format!(
            "a split-block value has 1..={MAX_LAYERS} layers, not {}",
            h.layers
        )),
        Representation::SplitBlock if !scaling && h.layers != 1 => malformed(format!(
            "a fixed split-block value has exactly 1 layer, not {}",
            h.layers
        )),
        _ => Ok(()),
    }
}

fn check_exact_body(h: &Header, body: &[u8]) -> Result<(), Error> {
    let expected = usize::try_from(h.items).ok().and_then(|n| n.checked_mul(8));
    if expected != Some(body.len()) {
        return malformed(format!(
            "an exact value of {} items needs {} body bytes, found {}",
            h.items,
            h.items as u128 * 8,
            body.len()
        ));
    }
    Ok(())
}

fn check_split_block_body(h: &Header, body: &[u8]) -> Result<(), Error> {
    let mut rest = body;
    // Saturating: repeated unions of saturated layers may push an estimate to u64::MAX, and
    // the encoder saturates the same way.
    let mut items_sum = 0u64;
    for i in 0..h.layers {
        let (layer, after) = split_layer(rest).ok_or_else(|| layer_split_error(i, rest))?;
        let lh = layer.header;
        if lh.capacity == 0 {
            return malformed(format!("layer {i}: capacity must be at least 1"));
        }
        if !is_valid_error_rate(lh.error_rate) {
            return malformed(format!(
                "layer {i}: error rate {} outside (0, 1)",
                lh.error_rate
            ));
        }
        if !(1..=MAX_BLOCKS).contains(&lh.blocks) {
            return malformed(format!(
                "layer {i}: block count {} outside 1..={MAX_BLOCKS}",
                lh.blocks
            ));
        }
        items_sum = items_sum.saturating_add(lh.items);
        rest = after;
    }
    if !rest.is_empty() {
        return malformed(format!(
            "{} trailing bytes after the last layer",
            rest.len()
        ));
    }
    if items_sum != h.items {
        return malformed(format!(
            "header counts {} items but the layers count {items_sum}",
            h.items
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hash_i64, Bloom};

    fn exact_bytes(items: &[i64]) -> Vec<u8> {
        let mut bloom = Bloom::new(Shape::new(100, 0.01, false).unwrap()).unwrap();
        for &i in items {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        bloom.to_bytes()
    }

    fn split_bytes() -> Vec<u8> {
        let mut bloom = Bloom::new(Shape::new(100, 0.01, true).unwrap()).unwrap();
        for i in 0..300 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        bloom.to_bytes()
    }

    fn rejected(bytes: &[u8]) -> bool {
        matches!(BloomView::parse(bytes), Err(Error::Malformed(_)))
    }

    #[test]
    fn parses_its_own_output() {
        for bytes in [exact_bytes(&[]), exact_bytes(&[1, 2, 3]), split_bytes()] {
            let view = BloomView::parse_validated(&bytes).unwrap();
            assert_eq!(view.as_bytes(), &bytes[..]);
        }
    }

    #[test]
    fn rejects_header_fields_out_of_range() {
        let good = exact_bytes(&[1, 2]);
        let patch = |offset: usize, value: &[u8]| {
            let mut b = good.clone();
            b[offset..offset + value.len()].copy_from_slice(value);
            b
        };
        assert!(rejected(&patch(0, b"XBLM")));
        assert!(rejected(&patch(4, &[3])), "version");
        assert!(rejected(&patch(4, &[0])), "version 0");
        assert!(rejected(&patch(5, &[2])), "hash algorithm");
        assert!(rejected(&patch(6, &[0])), "representation");
        assert!(rejected(&patch(7, &[0x10])), "unknown flag");
        assert!(rejected(&patch(7, &[0x06])), "two item families");
        let mut v1_with_family = patch(4, &[1]);
        v1_with_family[7] = 0x02;
        assert!(
            rejected(&v1_with_family),
            "a family bit in a version 1 value"
        );
        assert!(rejected(&patch(8, &1u32.to_le_bytes())), "seed");
        assert!(
            rejected(&patch(12, &1u32.to_le_bytes())),
            "exact with layers"
        );
        assert!(rejected(&patch(16, &0u64.to_le_bytes())), "capacity 0");
        assert!(
            rejected(&patch(16, &1_000_000_001u64.to_le_bytes())),
            "capacity too big"
        );
        assert!(
            rejected(&patch(16, &1u64.to_le_bytes())),
            "fixed exact over capacity"
        );
        for p in [0.0, 1.0, f64::NAN, f64::INFINITY, -0.5] {
            assert!(rejected(&patch(24, &p.to_le_bytes())), "error rate {p}");
        }
        assert!(rejected(&patch(32, &3u64.to_le_bytes())), "items vs body");
        assert!(rejected(&patch(32, &u64::MAX.to_le_bytes())), "huge items");
    }

    #[test]
    fn rejects_bad_layers() {
        let good = split_bytes();
        let patch = |offset: usize, value: &[u8]| {
            let mut b = good.clone();
            b[offset..offset + value.len()].copy_from_slice(value);
            b
        };
        assert!(rejected(&patch(12, &0u32.to_le_bytes())), "no layers");
        assert!(
            rejected(&patch(12, &65u32.to_le_bytes())),
            "too many layers"
        );
        assert!(
            rejected(&patch(12, &u32::MAX.to_le_bytes())),
            "huge layer count"
        );
        assert!(
            rejected(&patch(40, &0u64.to_le_bytes())),
            "layer capacity 0"
        );
        assert!(
            rejected(&patch(48, &1.5f64.to_le_bytes())),
            "layer error rate"
        );
        assert!(
            rejected(&patch(56, &0u64.to_le_bytes())),
            "layer items vs header"
        );
        assert!(rejected(&patch(64, &0u64.to_le_bytes())), "no blocks");
        assert!(
            rejected(&patch(64, &u64::MAX.to_le_bytes())),
            "huge block count"
        );
        assert!(
            rejected(&patch(64, &(1u64 << 32).to_le_bytes())),
            "block count past 2^32 - 1"
        );
        let mut fixed = good.clone();
        fixed[7] = 0;
        assert!(rejected(&fixed), "a fixed value with several layers");
        let mut long = good.clone();
        long.push(0);
        assert!(rejected(&long), "trailing byte");
        assert!(rejected(&good[..good.len() - 1]), "short");
    }

    #[test]
    fn validated_parse_requires_ascending_hashes() {
        let mut bytes = exact_bytes(&[1, 2, 3]);
        assert!(BloomView::parse_validated(&bytes).is_ok());
        let second: [u8; 8] = bytes[48..56].try_into().unwrap();
        bytes.copy_within(40..48, 48);
        assert!(BloomView::parse(&bytes).is_ok(), "structure is fine");
        assert!(
            BloomView::parse_validated(&bytes).is_err(),
            "duplicate hash"
        );
        bytes[40..48].copy_from_slice(&second);
        bytes[48..56].copy_from_slice(&u64::from_le_bytes(second).wrapping_sub(1).to_le_bytes());
        assert!(BloomView::parse_validated(&bytes).is_err(), "descending");
    }

    #[test]
    fn sorted_search_finds_exactly_the_members() {
        for n in 0..40u64 {
            let values: Vec<u64> = (0..n).map(|i| 10 * i + 5).collect();
            let chunks: Vec<[u8; 8]> = values.iter().map(|v| v.to_le_bytes()).collect();
            for probe in 0..(10 * n + 20) {
                assert_eq!(
                    sorted_contains(&chunks, probe),
                    values.contains(&probe),
                    "n {n} probe {probe}"
                );
            }
            assert!(!sorted_contains(&chunks, u64::MAX));
        }
        let extremes: Vec<[u8; 8]> = [0u64, u64::MAX].iter().map(|v| v.to_le_bytes()).collect();
        assert!(sorted_contains(&extremes, 0) && sorted_contains(&extremes, u64::MAX));
    }

    fn as_chunks(values: &[u64]) -> Vec<[u8; 8]> {
        values.iter().map(|v| v.to_le_bytes()).collect()
    }

    proptest::proptest! {
        #[test]
        fn sorted_search_matches_a_set(
            // Uniform hashes, and clustered ones (small values, or a high cluster) where the
            // position guess is far off.
            mut values in proptest::collection::vec(
                proptest::prop_oneof![proptest::num::u64::ANY, 0u64..1000, (u64::MAX - 1000)..=u64::MAX],
                0..300,
            ),
            probes in proptest::collection::vec(proptest::num::u64::ANY, 0..50),
        ) {
            values.sort_unstable();
            values.dedup();
            let chunks = as_chunks(&values);
            for &v in &values {
                proptest::prop_assert!(sorted_contains(&chunks, v));
                proptest::prop_assert_eq!(sorted_contains(&chunks, v.wrapping_add(1)), values.contains(&v.wrapping_add(1)));
                proptest::prop_assert_eq!(sorted_contains(&chunks, v.wrapping_sub(1)), values.contains(&v.wrapping_sub(1)));
            }
            for p in probes {
                proptest::prop_assert_eq!(sorted_contains(&chunks, p), values.binary_search(&p).is_ok());
            }
        }
    }

    #[test]
    fn sorted_search_over_uniform_hashes() {
        let mut values: Vec<u64> = (0..20_000).map(hash_i64).collect();
        values.sort_unstable();
        let chunks = as_chunks(&values);
        assert!(values.iter().all(|&v| sorted_contains(&chunks, v)));
        assert!((20_000..40_000)
            .all(|i| sorted_contains(&chunks, hash_i64(i))
                == values.binary_search(&hash_i64(i)).is_ok()));
    }

    #[test]
    fn view_and_owned_filter_agree() {
        for bytes in [exact_bytes(&[5, 6, 7]), split_bytes()] {
            let view = BloomView::parse(&bytes).unwrap();
            let owned = Bloom::from_view(&view);
            for i in -500..500 {
                assert_eq!(
                    view.contains_hash(hash_i64(i)),
                    owned.contains_hash(hash_i64(i)),
                    "{i}"
                );
            }
        }
    }
}

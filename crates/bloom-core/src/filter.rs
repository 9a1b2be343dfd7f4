//! `Bloom`: an owned, always-valid filter for the write paths (add, union, aggregates).
//! Reads go through [`BloomView`] on the stored bytes instead.

use crate::error::Error;
use crate::family::{ItemFamily, ItemGuard};
use crate::hash::{fmix64, HASH_MURMUR3_X64_128, SEED};
use crate::layers::{Admission, LayerStack};
use crate::layout::{Header, Representation, Writer, FLAG_SCALING, HEADER_BYTES};
use crate::shape::{Shape, MAX_LAYER_BYTES, MAX_VALUE_BYTES};
use crate::sizing::{layer_bytes, layer_shape};
use crate::view::BloomView;

#[derive(Debug, Clone)]
pub struct Bloom {
    shape: Shape,
    seed: u32,
    /// Which family of items it holds (written as format version 2), or unrecorded
    /// (a version 1 value, written back as version 1).
    guard: ItemGuard,
    body: Body,
    /// Most hashes the exact form may hold; computed on first need because sizing a layer
    /// costs a binary search and most loaded values are only probed or are split-block.
    exact_limit: Option<u64>,
}

/// Equal when they would encode to the same bytes (the cached limit is not part of the value).
impl PartialEq for Bloom {
    fn eq(&self, other: &Bloom) -> bool {
        self.shape.same_as(&other.shape)
            && self.seed == other.seed
            && self.guard == other.guard
            && self.body == other.body
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Body {
    /// Strictly ascending item hashes.
    Exact(Vec<u64>),
    Layers(LayerStack),
}

impl Bloom {
    /// An empty filter (exact form). Fails with `TooLarge` if its first split-block layer
    /// could never be stored, so a value that cannot grow is refused up front.
    pub fn new(shape: Shape) -> Result<Bloom, Error> {
        let (capacity, error_rate) = layer_shape(&shape, 0);
        let layer = layer_bytes(capacity, error_rate);
        let bytes = HEADER_BYTES as u64 + layer;
        if bytes > MAX_VALUE_BYTES {
            return Err(Error::TooLarge {
                bytes,
                limit: MAX_VALUE_BYTES,
            });
        }
        if layer > MAX_LAYER_BYTES {
            return Err(Error::TooLarge {
                bytes: layer,
                limit: MAX_LAYER_BYTES,
            });
        }
        Ok(Bloom {
            shape,
            seed: SEED,
            guard: ItemGuard::Open,
            body: Body::Exact(Vec::new()),
            exact_limit: None,
        })
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    pub fn guard(&self) -> ItemGuard {
        self.guard
    }

    /// Narrows the guard to what both this value and `other` allow (the guard of a union):
    /// how an aggregate gives the filter it builds from hashes the family of its inputs.
    pub fn merge_guard(&mut self, other: ItemGuard) -> Result<(), Error> {
        self.guard = self.guard.union(other)?;
        Ok(())
    }

    /// Records that items of `family` are added (the first one sets a new value's family);
    /// `FamilyMismatch` if the value holds another family. Call before `insert_hash`.
    pub fn admit(&mut self, family: ItemFamily) -> Result<(), Error> {
        self.guard = self.guard.admit(family)?;
        Ok(())
    }

    pub fn representation(&self) -> Representation {
        match self.body {
            Body::Exact(_) => Representation::Exact,
            Body::Layers(_) => Representation::SplitBlock,
        }
    }

    /// Distinct items added (exact) or the layers' item counts summed.
    pub fn cardinality(&self) -> u64 {
        match &self.body {
            Body::Exact(hashes) => hashes.len() as u64,
            Body::Layers(stack) => stack.items(),
        }
    }

    /// Adds the item with hash `h`; true if it was new (not already reported present).
    /// `Full` when a fixed filter would pass its capacity; `TooLarge` when the value would
    /// pass the storage limit. On error the filter is unchanged.
    pub fn insert_hash(&mut self, h: u64) -> Result<bool, Error> {
        self.insert(h, Admission::EnforceCapacity)
    }

    pub fn contains_hash(&self, h: u64) -> bool {
        match &self.body {
            Body::Exact(hashes) => hashes.binary_search(&h).is_ok(),
            Body::Layers(stack) => stack.contains(h),
        }
    }

    fn insert(&mut self, h: u64, admission: Admission) -> Result<bool, Error> {
        let limit = self.exact_limit_if_exact();
        let shape = self.shape;
        match &mut self.body {
            Body::Layers(stack) => stack.insert(&shape, h, admission),
            Body::Exact(hashes) => {
                let Err(position) = hashes.binary_search(&h) else {
                    return Ok(false);
                };
                let count = hashes.len() as u64 + 1;
                if admission == Admission::EnforceCapacity
                    && !shape.scaling
                    && count > shape.capacity
                {
                    return Err(Error::Full {
                        capacity: shape.capacity,
                    });
                }
                if count > limit {
                    let mut stack = promote(&shape, hashes)?;
                    let added = stack.insert(&shape, h, admission)?;
                    self.body = Body::Layers(stack);
                    return Ok(added);
                }
                let bytes = exact_len(count);
                if bytes > MAX_VALUE_BYTES {
                    return Err(Error::TooLarge {
                        bytes,
                        limit: MAX_VALUE_BYTES,
                    });
                }
                hashes.insert(position, h);
                Ok(true)
            }
        }
    }

    /// Most hashes the exact form holds: while they take no more bytes than the first
    /// split-block layer and stay within capacity (FORMAT.md, "Sizing and scaling").
    /// Only an exact filter needs it (0 otherwise), which spares split-block adds the sizing.
    fn exact_limit_if_exact(&mut self) -> u64 {
        if !matches!(self.body, Body::Exact(_)) {
            return 0;
        }
        *self.exact_limit.get_or_insert_with(|| {
            let (capacity, error_rate) = layer_shape(&self.shape, 0);
            self.shape
                .capacity
                .min(layer_bytes(capacity, error_rate) / 8)
        })
    }

    /// Adds every item of `other`, which must have the same shape (capacity, bit-equal error
    /// rate, scaling) and seed. Never `Full`: a union of fixed filters may hold more than
    /// their capacity, and later adds of new items to it are refused. Split-block layers are
    /// OR-ed index by index; a same-index layer with another block count is a
    /// `ShapeMismatch`. On error, `self` holds at most the union and its own items still.
    pub fn union_with(&mut self, other: &BloomView) -> Result<(), Error> {
        let theirs = other.shape();
        let mismatch = Error::ShapeMismatch {
            left: self.shape,
            right: theirs,
        };
        if !self.shape.same_as(&theirs) || self.seed != other.seed() {
            return Err(mismatch);
        }
        self.guard = self.guard.union(other.guard())?;
        let limit = self.exact_limit_if_exact();
        let shape = self.shape;
        match (&mut self.body, other.representation()) {
            (Body::Exact(mine), Representation::Exact) => {
                let merged = merge_sorted(
                    mine,
                    other.exact_hashes().iter().map(|c| u64::from_le_bytes(*c)),
                );
                let count = merged.len() as u64;
                if count > limit || (!shape.scaling && count > shape.capacity) {
                    self.body = Body::Layers(promote(&shape, &merged)?);
                } else if exact_len(count) > MAX_VALUE_BYTES {
                    return Err(Error::TooLarge {
                        bytes: exact_len(count),
                        limit: MAX_VALUE_BYTES,
                    });
                } else {
                    *mine = merged;
                }
            }
            (Body::Layers(stack), Representation::Exact) => {
                let mut hashes: Vec<u64> = other
                    .exact_hashes()
                    .iter()
                    .map(|c| u64::from_le_bytes(*c))
                    .collect();
                sort_for_insertion(&mut hashes);
                for h in hashes {
                    stack.insert(&shape, h, Admission::AdmitAll)?;
                }
            }
            (Body::Exact(mine), Representation::SplitBlock) => {
                let mut stack = LayerStack::from_views(other.layers());
                let mut hashes = mine.clone();
                sort_for_insertion(&mut hashes);
                for h in hashes {
                    stack.insert(&shape, h, Admission::AdmitAll)?;
                }
                self.body = Body::Layers(stack);
            }
            (Body::Layers(stack), Representation::SplitBlock) => {
                stack.or_with(other.layers(), mismatch)?;
            }
        }
        Ok(())
    }

    /// A filter of `shape` holding every hash, added in [`sort_for_insertion`] order, so the
    /// result depends only on the set of hashes (the aggregates rely on that for parallel
    /// plans). Like a union, it never refuses items for being past a fixed capacity.
    pub fn from_hashes(shape: Shape, mut hashes: Vec<u64>) -> Result<Bloom, Error> {
        sort_for_insertion(&mut hashes);
        let mut bloom = Bloom::new(shape)?;
        for h in hashes {
            bloom.insert(h, Admission::AdmitAll)?;
        }
        Ok(bloom)
    }

    /// An owned copy of a parsed value. Takes the view's shape and seed as they are. A view
    /// from `parse` alone may hold exact hashes out of order or repeated; they are sorted and
    /// de-duplicated here so the owned filter is always valid.
    pub fn from_view(v: &BloomView) -> Bloom {
        let body = match v.representation() {
            Representation::Exact => {
                let mut hashes: Vec<u64> = v
                    .exact_hashes()
                    .iter()
                    .map(|c| u64::from_le_bytes(*c))
                    .collect();
                if !hashes.is_sorted_by(|a, b| a < b) {
                    hashes.sort_unstable();
                    hashes.dedup();
                }
                Body::Exact(hashes)
            }
            Representation::SplitBlock => Body::Layers(LayerStack::from_views(v.layers())),
        };
        Bloom {
            shape: v.shape(),
            seed: v.seed(),
            guard: v.guard(),
            body,
            exact_limit: None,
        }
    }

    /// Parses and fully validates stored bytes into an owned filter.
    pub fn from_bytes(bytes: &[u8]) -> Result<Bloom, Error> {
        BloomView::parse_validated(bytes).map(|v| Bloom::from_view(&v))
    }

    pub fn encoded_len(&self) -> usize {
        let body = match &self.body {
            Body::Exact(hashes) => 8 * hashes.len() as u64,
            Body::Layers(stack) => stack.encoded_len(),
        };
        // An in-memory filter's bytes are addressable, so they fit a usize.
        HEADER_BYTES + body as usize
    }

    /// Writes the value into `out`, which must be exactly `encoded_len()` bytes (the glue
    /// writes straight into a palloc'd varlena). A different length is a caller bug and panics.
    pub fn encode_into(&self, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            self.encoded_len(),
            "encode_into needs exactly encoded_len() bytes"
        );
        let (representation, layers) = match &self.body {
            Body::Exact(_) => (Representation::Exact, 0),
            Body::Layers(stack) => (Representation::SplitBlock, stack.len() as u32),
        };
        let header = Header {
            version: self.guard.version(),
            hash_algorithm: HASH_MURMUR3_X64_128,
            representation,
            flags: if self.shape.scaling { FLAG_SCALING } else { 0 } | self.guard.flags(),
            seed: self.seed,
            layers,
            capacity: self.shape.capacity,
            error_rate: self.shape.error_rate,
            items: self.cardinality(),
        };
        let mut w = Writer::new(out);
        let mut header_bytes = [0u8; HEADER_BYTES];
        header.write(&mut header_bytes);
        w.put(&header_bytes);
        match &self.body {
            Body::Exact(hashes) => {
                for h in hashes {
                    w.put(&h.to_le_bytes());
                }
            }
            Body::Layers(stack) => stack.encode(&mut w),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.encoded_len()];
        self.encode_into(&mut out);
        out
    }
}

/// Sorts hashes into the order a batch of items is added in, and drops repeats.
///
/// Not ascending order: a scaling filter's first layer takes the first `capacity` items, and
/// ascending hashes would all fall into the low end of its blocks (the block index is taken
/// from the hash's top bits), overloading them far past the layer's error rate. The key is a
/// bijective remix with a constant no layer uses, so the order is uncorrelated with every
/// layer's block positions, yet depends only on the set of hashes: a batch built from the
/// same items gives the same bytes whatever order they arrived in.
pub fn sort_for_insertion(hashes: &mut Vec<u64>) {
    hashes.sort_unstable_by_key(|&h| insertion_key(h));
    hashes.dedup();
}

const INSERTION_MIX: u64 = 0xD6E8_FEB8_6659_FD93;

fn insertion_key(h: u64) -> u64 {
    fmix64(h ^ INSERTION_MIX)
}

fn exact_len(count: u64) -> u64 {
    HEADER_BYTES as u64 + 8 * count
}

/// Moves exact hashes into fresh split-block layers through the normal insert path, so
/// the result is the value that adding the items one by one would have built.
fn promote(shape: &Shape, hashes: &[u64]) -> Result<LayerStack, Error> {
    let mut stack = LayerStack::default();
    for &h in hashes {
        stack.insert(shape, h, Admission::AdmitAll)?;
    }
    Ok(stack)
}

/// The sorted, de-duplicated union of two ascending sequences.
fn merge_sorted(a: &[u64], b: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len());
    let mut a = a.iter().copied().peekable();
    let mut b = b.peekable();
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(&x), Some(&y)) if x < y => a.next(),
            (Some(&x), Some(&y)) if y < x => b.next(),
            (Some(_), Some(_)) => {
                b.next();
                a.next()
            }
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => break,
        };
        // Unvalidated input may repeat or misorder hashes; keep the output strictly ascending.
        if let Some(h) = next {
            if out.last().is_none_or(|&last| last < h) {
                out.push(h);
            } else if out.last() != Some(&h) {
                let pos = out.partition_point(|&x| x < h);
                if out.get(pos) != Some(&h) {
                    out.insert(pos, h);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash_i64;
    use crate::layout::{LayerHeader, FORMAT_VERSION, LAYER_HEADER_BYTES};

    fn shape(capacity: i64, p: f64, scaling: bool) -> Shape {
        Shape::new(capacity, p, scaling).unwrap()
    }

    /// A split-block value with the given layer headers and empty blocks, built by hand.
    fn forge_split(shape: Shape, layers: &[(u64, f64, u64, u64)]) -> Vec<u8> {
        let items = layers.iter().map(|l| l.2).sum();
        let header = Header {
            version: FORMAT_VERSION,
            hash_algorithm: HASH_MURMUR3_X64_128,
            representation: Representation::SplitBlock,
            flags: if shape.scaling { FLAG_SCALING } else { 0 },
            seed: SEED,
            layers: layers.len() as u32,
            capacity: shape.capacity,
            error_rate: shape.error_rate,
            items,
        };
        let mut out = vec![0u8; HEADER_BYTES];
        header.write((&mut out[..]).try_into().unwrap());
        for &(capacity, error_rate, items, blocks) in layers {
            let mut lh = [0u8; LAYER_HEADER_BYTES];
            LayerHeader {
                capacity,
                error_rate,
                items,
                blocks,
            }
            .write(&mut lh);
            out.extend_from_slice(&lh);
            out.resize(out.len() + 32 * blocks as usize, 0);
        }
        out
    }

    #[test]
    fn starts_exact_and_counts_new_items_only() {
        let mut bloom = Bloom::new(shape(1000, 0.01, true)).unwrap();
        assert_eq!(bloom.representation(), Representation::Exact);
        assert_eq!(bloom.insert_hash(hash_i64(1)), Ok(true));
        assert_eq!(bloom.insert_hash(hash_i64(1)), Ok(false));
        assert_eq!(bloom.cardinality(), 1);
        assert!(bloom.contains_hash(hash_i64(1)));
        assert!(!bloom.contains_hash(hash_i64(2)));
    }

    #[test]
    fn promotes_when_the_exact_form_outgrows_the_first_layer() {
        let s = shape(100_000, 0.01, true);
        let (c, p) = layer_shape(&s, 0);
        let limit = layer_bytes(c, p) / 8;
        let mut bloom = Bloom::new(s).unwrap();
        for i in 0..limit as i64 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        assert_eq!(bloom.representation(), Representation::Exact);
        assert_eq!(bloom.encoded_len() as u64, 40 + layer_bytes(c, p));
        assert_eq!(bloom.insert_hash(hash_i64(-1)), Ok(true));
        assert_eq!(bloom.representation(), Representation::SplitBlock);
        assert_eq!(bloom.encoded_len() as u64, 40 + layer_bytes(c, p));
        assert!((0..limit as i64).all(|i| bloom.contains_hash(hash_i64(i))));
        assert!(bloom.contains_hash(hash_i64(-1)));
    }

    #[test]
    fn promotes_at_capacity_when_capacity_is_the_tighter_limit() {
        // 10 items at 1% need one 32-byte block, so the exact form holds 8 hashes.
        let mut bloom = Bloom::new(shape(10, 0.01, true)).unwrap();
        for i in 0..8 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        assert_eq!(bloom.representation(), Representation::Exact);
        bloom.insert_hash(hash_i64(8)).unwrap();
        assert_eq!(bloom.representation(), Representation::SplitBlock);
    }

    #[test]
    fn fixed_filter_refuses_new_items_past_capacity() {
        for capacity in [3, 10, 1000] {
            let mut bloom = Bloom::new(shape(capacity, 0.01, false)).unwrap();
            let mut i = 0;
            while bloom.cardinality() < capacity as u64 {
                bloom.insert_hash(hash_i64(i)).unwrap();
                i += 1;
            }
            let before = bloom.to_bytes();
            assert_eq!(
                bloom.insert_hash(hash_i64(0)),
                Ok(false),
                "present item is a no-op"
            );
            let fresh = (1_000_000..)
                .find(|&j| !bloom.contains_hash(hash_i64(j)))
                .unwrap();
            assert_eq!(
                bloom.insert_hash(hash_i64(fresh)),
                Err(Error::Full {
                    capacity: capacity as u64
                })
            );
            assert_eq!(bloom.to_bytes(), before, "a refused add changes nothing");
        }
    }

    #[test]
    fn scaling_filter_adds_layers() {
        let mut bloom = Bloom::new(shape(100, 0.01, true)).unwrap();
        for i in 0..1000 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        let bytes = bloom.to_bytes();
        let view = BloomView::parse(&bytes).unwrap();
        // 100 + 200 + 400 < 1000 <= 100 + 200 + 400 + 800
        assert_eq!(view.layer_count(), 4);
        assert!((0..1000).all(|i| view.contains_hash(hash_i64(i))));
    }

    #[test]
    fn too_large_up_front() {
        match Bloom::new(shape(500_000_000, 0.0001, false)) {
            Err(Error::TooLarge { bytes, limit }) => {
                assert!(bytes > MAX_VALUE_BYTES && limit == MAX_VALUE_BYTES)
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Bloom::new(shape(500_000_000, 0.0001, true)),
            Err(Error::TooLarge { .. })
        ));
        assert!(Bloom::new(shape(100_000_000, 0.01, true)).is_ok());
    }

    #[test]
    fn too_large_when_the_next_layer_would_not_fit() {
        let s = shape(1_000_000_000, 0.5, true);
        let bytes = forge_split(s, &[(1_000_000_000, 0.3, 1_000_000_000, 1)]);
        let mut bloom = Bloom::from_bytes(&bytes).unwrap();
        let fresh = (0..).find(|&j| !bloom.contains_hash(hash_i64(j))).unwrap();
        assert!(matches!(
            bloom.insert_hash(hash_i64(fresh)),
            Err(Error::TooLarge { .. })
        ));
        assert_eq!(bloom.to_bytes(), bytes);
    }

    /// A value of a few hundred bytes must not make one add allocate a huge layer: a forged
    /// value whose one-block first layer claims to hold its 100M-item capacity, and a real
    /// shape whose error rate is so small that its second layer would be hundreds of MB.
    #[test]
    fn a_new_layer_past_the_layer_limit_is_refused_before_allocating() {
        let s = shape(100_000_000, 0.01, true);
        let (capacity, error_rate) = layer_shape(&s, 0);
        let bytes = forge_split(s, &[(capacity, error_rate, capacity, 1)]);
        assert!(bytes.len() < 200);
        let mut bloom = Bloom::from_bytes(&bytes).unwrap();
        let fresh = (0..).find(|&j| !bloom.contains_hash(hash_i64(j))).unwrap();
        match bloom.insert_hash(hash_i64(fresh)) {
            Err(Error::TooLarge { bytes, limit }) => {
                assert_eq!(limit, MAX_LAYER_BYTES);
                assert!(
                    bytes > MAX_LAYER_BYTES && bytes < MAX_VALUE_BYTES,
                    "{bytes}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(bloom.to_bytes(), bytes, "nothing changes on the error");

        // A first layer between the layer limit and the value limit (4 items at an error rate
        // a little under 1e-18: hundreds of MB) is refused when the filter is created, no
        // longer at the fifth add.
        let tiny_rate = (0..100)
            .map(|i| 1e-18 / 10f64.powf(i as f64 / 100.0))
            .find(|&p| {
                let (capacity, error_rate) = layer_shape(&shape(4, p, true), 0);
                layer_bytes(capacity, error_rate) > MAX_LAYER_BYTES
            })
            .unwrap();
        for s in [shape(4, tiny_rate, true), shape(300_000_000, 0.01, true)] {
            let (capacity, error_rate) = layer_shape(&s, 0);
            let layer = layer_bytes(capacity, error_rate);
            assert!(
                layer > MAX_LAYER_BYTES && layer < MAX_VALUE_BYTES,
                "{s:?}: {layer}"
            );
            assert!(
                matches!(Bloom::new(s), Err(Error::TooLarge { bytes, limit }) if limit == MAX_LAYER_BYTES && bytes == layer),
                "{s:?}"
            );
        }
        assert!(Bloom::new(shape(4, 1e-17, true)).is_ok());
    }

    #[test]
    fn too_large_past_layer_64() {
        let s = shape(1, 0.5, true);
        let layers: Vec<_> = (0..64).map(|_| (1, 0.3, 1, 1)).collect();
        let bytes = forge_split(s, &layers);
        let mut bloom = Bloom::from_bytes(&bytes).unwrap();
        let fresh = (0..).find(|&j| !bloom.contains_hash(hash_i64(j))).unwrap();
        assert!(matches!(
            bloom.insert_hash(hash_i64(fresh)),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn union_needs_the_same_shape() {
        let a = Bloom::new(shape(100_000, 0.01, true)).unwrap();
        let b = Bloom::new(shape(5000, 0.01, false)).unwrap();
        let bytes = b.to_bytes();
        let mut a2 = a.clone();
        let err = a2
            .union_with(&BloomView::parse(&bytes).unwrap())
            .unwrap_err();
        assert_eq!(
            err,
            Error::ShapeMismatch {
                left: a.shape(),
                right: b.shape()
            }
        );
        assert_eq!(a2, a);

        // Same capacity and scaling, error rate one ulp apart: still different.
        let c = Bloom::new(shape(100_000, f64::from_bits(0.01f64.to_bits() + 1), true)).unwrap();
        let bytes = c.to_bytes();
        assert!(a2.union_with(&BloomView::parse(&bytes).unwrap()).is_err());
    }

    #[test]
    fn union_with_a_different_block_count_is_a_mismatch() {
        let s = shape(1000, 0.01, true);
        let mut a = Bloom::from_bytes(&forge_split(s, &[(1000, 0.006, 0, 5)])).unwrap();
        let b = forge_split(s, &[(1000, 0.006, 0, 6)]);
        let before = a.clone();
        assert!(matches!(
            a.union_with(&BloomView::parse(&b).unwrap()),
            Err(Error::ShapeMismatch { .. })
        ));
        assert_eq!(a, before);
    }

    #[test]
    fn union_of_full_fixed_filters_is_allowed_and_then_full() {
        let s = shape(10, 0.01, false);
        let mut a = Bloom::new(s).unwrap();
        let mut b = Bloom::new(s).unwrap();
        for i in 0..10 {
            a.insert_hash(hash_i64(i)).unwrap();
            b.insert_hash(hash_i64(100 + i)).unwrap();
        }
        let bytes = b.to_bytes();
        a.union_with(&BloomView::parse(&bytes).unwrap()).unwrap();
        assert!((0..10)
            .chain(100..110)
            .all(|i| a.contains_hash(hash_i64(i))));
        assert!(a.cardinality() > 10);
        let fresh = (1000..).find(|&j| !a.contains_hash(hash_i64(j))).unwrap();
        assert_eq!(
            a.insert_hash(hash_i64(fresh)),
            Err(Error::Full { capacity: 10 })
        );
        // And the result is a valid value.
        assert_eq!(Bloom::from_bytes(&a.to_bytes()), Ok(a));
    }

    #[test]
    fn union_estimates_items_from_the_fill() {
        let s = shape(10_000, 0.01, false);
        let (mut a, mut b) = (Bloom::new(s).unwrap(), Bloom::new(s).unwrap());
        for i in 0..5000 {
            a.insert_hash(hash_i64(i)).unwrap();
            b.insert_hash(hash_i64(i + 2500)).unwrap();
        }
        let bytes = b.to_bytes();
        a.union_with(&BloomView::parse(&bytes).unwrap()).unwrap();
        // 7,500 distinct items; the fill-based estimate lands close.
        let n = a.cardinality();
        assert!((7300..=7700).contains(&n), "{n}");
    }

    #[test]
    fn from_view_repairs_unsorted_exact_hashes() {
        let mut bytes = Bloom::new(shape(100, 0.01, true)).unwrap().to_bytes();
        bytes[32] = 3;
        for h in [9u64, 2, 9] {
            bytes.extend_from_slice(&h.to_le_bytes());
        }
        let view = BloomView::parse(&bytes).unwrap();
        assert!(BloomView::parse_validated(&bytes).is_err());
        let bloom = Bloom::from_view(&view);
        assert_eq!(bloom.cardinality(), 2);
        assert!(bloom.contains_hash(2) && bloom.contains_hash(9));
        assert!(BloomView::parse_validated(&bloom.to_bytes()).is_ok());
    }

    #[test]
    fn from_hashes_depends_only_on_the_set_and_keeps_the_error_rate() {
        let s = shape(500, 0.001, true);
        let hashes: Vec<u64> = (0..2000).map(hash_i64).collect();
        let mut reversed = hashes.clone();
        reversed.reverse();
        reversed.extend_from_slice(&hashes[..100]);
        let a = Bloom::from_hashes(s, hashes.clone()).unwrap();
        assert_eq!(a, Bloom::from_hashes(s, reversed).unwrap());
        // Ascending insertion would overload the first layer's low blocks and report many
        // of the later items as already present; the insertion order keeps that near p.
        let already_present = 2000 - a.cardinality();
        assert!(
            already_present <= 6,
            "{already_present} of 2000 items looked present"
        );
        let fresh_fp = (1_000_000..1_200_000)
            .filter(|&i| a.contains_hash(hash_i64(i)))
            .count();
        assert!(
            fresh_fp as f64 / 200_000.0 <= 0.0011,
            "fpr {}",
            fresh_fp as f64 / 200_000.0
        );
    }

    #[test]
    fn merge_keeps_the_output_strictly_ascending() {
        assert_eq!(
            merge_sorted(&[1, 3, 5], [2, 3, 6].into_iter()),
            vec![1, 2, 3, 5, 6]
        );
        assert_eq!(
            merge_sorted(&[], [4, 2, 2, 9, 1].into_iter()),
            vec![1, 2, 4, 9]
        );
        assert_eq!(merge_sorted(&[7], std::iter::empty()), vec![7]);
    }

    #[test]
    #[should_panic(expected = "encoded_len")]
    fn encode_into_a_wrong_sized_buffer_is_a_caller_bug() {
        let bloom = Bloom::new(shape(10, 0.01, true)).unwrap();
        bloom.encode_into(&mut [0u8; 39]);
    }
}

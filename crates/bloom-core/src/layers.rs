//! The owned split-block layers of a filter: probing, inserting, growing by scaling, and
//! OR-ing with another filter's layers.

use crate::error::Error;
use crate::layout::{LayerHeader, Writer, HEADER_BYTES, LAYER_HEADER_BYTES, MAX_LAYERS};
use crate::sbbf::{
    block_index, block_insert, block_popcount, blocks_contain, layer_hash, BLOCK_BYTES,
};
use crate::shape::{Shape, MAX_LAYER_BYTES, MAX_VALUE_BYTES};
use crate::sizing::{blocks_for, layer_shape};
use crate::view::LayerView;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layer {
    pub capacity: u64,
    pub error_rate: f64,
    pub items: u64,
    pub blocks: Vec<[u8; BLOCK_BYTES]>,
}

/// Whether an insert may be refused because a fixed filter is full. Unions and promotion
/// admit everything: they only re-add items that some filter of this shape already held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    EnforceCapacity,
    AdmitAll,
}

impl Layer {
    fn from_view(v: &LayerView<'_>) -> Layer {
        Layer {
            capacity: v.header.capacity,
            error_rate: v.header.error_rate,
            items: v.header.items,
            blocks: v.blocks.to_vec(),
        }
    }

    fn block_count(&self) -> u64 {
        self.blocks.len() as u64
    }

    fn encoded_len(&self) -> u64 {
        LAYER_HEADER_BYTES as u64 + BLOCK_BYTES as u64 * self.block_count()
    }

    #[inline]
    fn contains(&self, layer_h: u64) -> bool {
        blocks_contain(&self.blocks, layer_h)
    }

    fn insert(&mut self, layer_h: u64) {
        let b = block_index(layer_h, self.block_count());
        if let Some(block) = self.blocks.get_mut(b as usize) {
            block_insert(block, layer_h);
        }
    }

    /// OR in another layer with the same block count and re-estimate the items from the
    /// fill: each item sets one bit in each lane of one block, so a lane position across all
    /// blocks is a plain Bloom array of `32 * B` bits with one hash, whose zero fraction
    /// after `n` items is `(1 - 1/(32B))^n`.
    fn or_with(&mut self, other: &LayerView<'_>) {
        for (mine, theirs) in self.blocks.iter_mut().zip(other.blocks) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a |= b;
            }
        }
        // The count is re-derived from the bits alone, never from the two counts: then a
        // union depends only on the OR-ed bits, so a parallel bloom_union_agg groups its
        // inputs however it likes and still returns the bytes of a serial one.
        let bits = 256.0 * self.block_count() as f64;
        let set: u64 = self
            .blocks
            .iter()
            .map(|blk| u64::from(block_popcount(blk)))
            .sum();
        let zero_fraction = (bits - set as f64) / bits;
        self.items = if zero_fraction > 0.0 {
            // `as` saturates, so even an absurd estimate stays a valid count.
            (zero_fraction.ln() / (-1.0 / (32.0 * self.block_count() as f64)).ln_1p()).round()
                as u64
        } else {
            self.capacity.saturating_mul(32)
        };
    }

    fn encode(&self, w: &mut Writer<'_>) {
        let header = LayerHeader {
            capacity: self.capacity,
            error_rate: self.error_rate,
            items: self.items,
            blocks: self.block_count(),
        };
        let mut bytes = [0u8; LAYER_HEADER_BYTES];
        header.write(&mut bytes);
        w.put(&bytes);
        w.put(self.blocks.as_flattened());
    }
}

/// The layers of a split-block filter, oldest first; new items go to the last one.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct LayerStack {
    layers: Vec<Layer>,
}

impl LayerStack {
    pub fn from_views<'a>(views: impl Iterator<Item = LayerView<'a>>) -> LayerStack {
        LayerStack {
            layers: views.map(|v| Layer::from_view(&v)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Sum of the layers' items (saturating, as the parser checks it).
    pub fn items(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.items))
    }

    /// Encoded bytes of the layers, without the value header.
    pub fn encoded_len(&self) -> u64 {
        self.layers.iter().map(Layer::encoded_len).sum()
    }

    pub fn contains(&self, h: u64) -> bool {
        self.layers
            .iter()
            .enumerate()
            .any(|(i, l)| l.contains(layer_hash(h, i as u32)))
    }

    /// Adds an item; true if it was new. A fixed filter refuses a new item past its capacity
    /// (when `admission` enforces it); a scaling filter opens a new layer once the last one
    /// holds its capacity. Nothing changes when an error is returned.
    pub fn insert(&mut self, shape: &Shape, h: u64, admission: Admission) -> Result<bool, Error> {
        if self.contains(h) {
            return Ok(false);
        }
        if admission == Admission::EnforceCapacity
            && !shape.scaling
            && self.items().saturating_add(1) > shape.capacity
        {
            return Err(Error::Full {
                capacity: shape.capacity,
            });
        }
        let needs_layer = match self.layers.last() {
            None => true,
            Some(last) => shape.scaling && last.items >= last.capacity,
        };
        if needs_layer {
            self.push_layer(shape)?;
        }
        let index = self.layers.len() - 1;
        if let Some(last) = self.layers.last_mut() {
            last.insert(layer_hash(h, index as u32));
            last.items = last.items.saturating_add(1);
        }
        Ok(true)
    }

    /// Appends the next layer of `shape`'s schedule, if the value would still fit.
    fn push_layer(&mut self, shape: &Shape) -> Result<(), Error> {
        let index = self.layers.len() as u32;
        let (capacity, error_rate) = layer_shape(shape, index);
        let blocks = blocks_for(capacity, error_rate);
        let bytes = HEADER_BYTES as u64
            + self.encoded_len()
            + LAYER_HEADER_BYTES as u64
            + BLOCK_BYTES as u64 * blocks;
        let limit = MAX_VALUE_BYTES;
        if index >= MAX_LAYERS || bytes > limit {
            return Err(Error::TooLarge { bytes, limit });
        }
        // Checked before anything is allocated: a small value must not ask for a huge layer.
        let layer = LAYER_HEADER_BYTES as u64 + BLOCK_BYTES as u64 * blocks;
        if layer > MAX_LAYER_BYTES {
            return Err(Error::TooLarge {
                bytes: layer,
                limit: MAX_LAYER_BYTES,
            });
        }
        // `bytes` fits the value limit, so the block count fits in usize.
        let blocks = usize::try_from(blocks).map_err(|_| Error::TooLarge { bytes, limit })?;
        self.layers.push(Layer {
            capacity,
            error_rate,
            items: 0,
            blocks: vec![[0; BLOCK_BYTES]; blocks],
        });
        Ok(())
    }

    /// ORs in another filter's layers: same-index layers must have the same block count
    /// (else `mismatch` is returned and nothing changes); layers past our last are copied.
    pub fn or_with<'a>(
        &mut self,
        other: impl Iterator<Item = LayerView<'a>> + Clone,
        mismatch: Error,
    ) -> Result<(), Error> {
        if self
            .layers
            .iter()
            .zip(other.clone())
            .any(|(mine, theirs)| mine.blocks.len() != theirs.blocks.len())
        {
            return Err(mismatch);
        }
        let mut theirs = other;
        for mine in self.layers.iter_mut() {
            match theirs.next() {
                Some(view) => mine.or_with(&view),
                None => break,
            }
        }
        self.layers.extend(theirs.map(|v| Layer::from_view(&v)));
        Ok(())
    }

    pub fn encode(&self, w: &mut Writer<'_>) {
        for layer in &self.layers {
            layer.encode(w);
        }
    }
}

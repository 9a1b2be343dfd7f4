//! The per-user, per-generation filters of impression tracking, cut into small rows.
//!
//! A tracked user's items of one generation (a time bucket of the window) live in rows of
//! at most [`SEGMENT_BLOCKS`] split-block blocks, so a row stays inline and an impression
//! becomes a HOT update that changes one 32-byte block: PostgreSQL logs only the bytes
//! between the common prefix and suffix of the old and new row. Rows hold no counters for
//! the same reason; a layer is "full" where the segment an item falls into reaches the fill
//! the layer has at its capacity.
//!
//! A generation starts with an exact row (64-bit hashes, newest first, so an add logs only
//! the new 8 bytes) while that is smaller than the first layer; past that its hashes move
//! into split-block layers. Layer `i` holds `first_capacity * 4^i` items at
//! `p * 0.6 * 0.4^i`, so the layers of a generation stay under its error budget `p`.

use crate::error::Error;
use crate::sbbf::{
    block_contains, block_index, block_insert, blocks_fill, layer_hash, BLOCK_BYTES,
};
use crate::sizing::blocks_for;
use std::collections::BTreeMap;

/// Blocks per row: 1,536 bytes, well under the ~2 KB at which PostgreSQL would TOAST a row.
pub const SEGMENT_BLOCKS: u64 = 48;
/// The `layer` value of a generation's exact row.
pub const EXACT_LAYER: i16 = -1;
/// The `layer` value of a user's marker row while `seen_bloom.relayout` moves a table from
/// layout 1 to layout 3: the user's rows are already in layout 3. It holds no items.
pub const MOVED_LAYER: i16 = -3;
/// The `generation` of a marker row: above every generation a read or `expire` cuts off.
pub const MOVED_GENERATION: i32 = i32::MAX;
/// More layers than any realistic load needs (the 16th holds 4^15 times the first).
pub const MAX_LAYERS: usize = 16;

/// How a tracked table's generations size their first layer. Stored rows do not record
/// their sizes, so the choice is recorded per table (`seen_bloom.tracked.layout`) and never
/// changes for a table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FirstLayer {
    /// Layout 1 (tables tracked by 0.1.0 and 0.2.0): the largest first layer whose second
    /// layer still fits one row (144 items at the default budget).
    SecondFitsOneRow,
    /// Layout 2: the first layer fills one row (about 720 items at the default budget), so a
    /// user with a few thousand impressions per window has one row per generation and a read
    /// tests one block per generation; a lighter generation stays an exact row, smaller than
    /// the layer's row while it holds fewer than 192 hashes.
    FillsOneRow,
    /// Since 0.5.0, a table tracked with a capacity: the first layer holds the capacity's
    /// share of one generation (`capacity / generations` items) with [`SIZED_HEADROOM`] in
    /// one row, or, when the share outgrows a row, fills [`SIZED_FIRST_LAYER_ROWS`] rows. At
    /// 0.1% the 600 items of a 3,000-item user's generation outgrew layout 2's first layer
    /// (570 items) and took a second of 4 times the items: 18,416 bytes per user just before
    /// a compaction, against 6,775 after.
    Holds(u64),
}

/// How much more than its share a sized first layer of one row holds, for generations above
/// the mean.
pub const SIZED_HEADROOM: f64 = 1.25;

/// The rows a sized first layer fills when its share outgrows one row: whole rows, since a
/// layer is full where the row an item falls into is, and a short last row fills first (600
/// items in a layer of 48 and 15 blocks started 3.5 rows of a second layer per user, in 48
/// and 2 blocks 0.4). Not more: a generation just past its exact row (192 hashes) spreads
/// over every row of its first layer.
pub const SIZED_FIRST_LAYER_ROWS: u64 = 2;

impl FirstLayer {
    /// Every layout, in number order (layout `n` is `ALL[n - 1]`).
    pub const ALL: [FirstLayer; 2] = [FirstLayer::SecondFitsOneRow, FirstLayer::FillsOneRow];

    /// The first layer of layout `number` (`seen_bloom.tracked.layout`).
    pub fn from_number(number: i32) -> Option<FirstLayer> {
        let index = usize::try_from(number).ok()?.checked_sub(1)?;
        FirstLayer::ALL.get(index).copied()
    }

    /// The layout number of the two fixed sizings (None for a sized first layer, whose number
    /// the tracking glue gives).
    pub fn number(self) -> Option<i32> {
        match self {
            FirstLayer::SecondFitsOneRow => Some(1),
            FirstLayer::FillsOneRow => Some(2),
            FirstLayer::Holds(_) => None,
        }
    }
}

/// How a generation's filter is laid out, fixed when a table is tracked.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationLayout {
    error_rate: f64,
    layers: Vec<LayerLayout>,
    /// The per-user cap (`seen_bloom.track(..., user_cap)`): the most items a generation
    /// takes in, None for no cap.
    cap: Option<u64>,
    /// The last layer that takes items: the one whose layers up to it hold the cap.
    cap_layer: usize,
    /// The fill at which `cap_layer`'s segments are full: at its capacity's fill without
    /// a cap, else at the fill of the cap's remainder past the layers below it.
    cap_fill: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct LayerLayout {
    capacity: u64,
    blocks: u64,
    /// Fraction of bits set when the layer holds its capacity.
    full_fill: f64,
}

impl GenerationLayout {
    /// The layout for a per-generation error budget, its first layer sized by `first`.
    pub fn new(error_rate: f64, first: FirstLayer) -> Result<GenerationLayout, Error> {
        if !(error_rate > 0.0 && error_rate < 1.0) {
            return Err(Error::BadParameter(format!(
                "per-generation error rate must be between 0 and 1, got {error_rate}"
            )));
        }
        // The largest multiple of 16 items whose layer of `scale` times as many items at
        // `error` still fits `rows` rows.
        let fits = |rows: u64, scale: u64, error: f64| {
            let mut capacity = 16;
            while blocks_for(scale * (capacity + 16), error) <= rows * SEGMENT_BLOCKS {
                capacity += 16;
            }
            capacity
        };
        let first_capacity = match first {
            FirstLayer::SecondFitsOneRow => fits(1, 4, error_rate * 0.6 * 0.4),
            FirstLayer::FillsOneRow => fits(1, 1, error_rate * 0.6),
            FirstLayer::Holds(items) => {
                let one_row = fits(1, 1, error_rate * 0.6);
                if items <= one_row {
                    ((items as f64 * SIZED_HEADROOM).ceil() as u64)
                        .next_multiple_of(16)
                        .clamp(16, one_row)
                } else {
                    fits(SIZED_FIRST_LAYER_ROWS, 1, error_rate * 0.6)
                }
            }
        };
        let mut layers = Vec::with_capacity(MAX_LAYERS);
        let (mut capacity, mut p) = (first_capacity, error_rate * 0.6);
        for _ in 0..MAX_LAYERS {
            let blocks = blocks_for(capacity, p);
            let load = capacity as f64 / blocks as f64;
            layers.push(LayerLayout {
                capacity,
                blocks,
                full_fill: 1.0 - (-load / 32.0).exp(),
            });
            capacity *= 4;
            p *= 0.4;
        }
        let last = layers[MAX_LAYERS - 1].full_fill;
        Ok(GenerationLayout {
            error_rate,
            layers,
            cap: None,
            cap_layer: MAX_LAYERS - 1,
            cap_fill: last,
        })
    }

    /// This layout with a per-user cap of `cap` items per generation (None: none). Past the
    /// cap a generation takes no new item (`GenerationRows::insert` counts it in `capped`):
    /// the layers up to the one that reaches the cap fill as usual, and that one only to
    /// the fill of the cap's remainder. Each segment's fill is judged on its own, so the
    /// items taken in are the cap within a few percent, never a layer more.
    pub fn with_cap(mut self, cap: Option<u64>) -> Result<GenerationLayout, Error> {
        let Some(cap) = cap else {
            return Ok(self);
        };
        if cap == 0 {
            return Err(Error::BadParameter("user_cap must be at least 1".into()));
        }
        let mut below = 0u64;
        let mut layer = 0;
        while layer < MAX_LAYERS - 1 && below + self.layers[layer].capacity < cap {
            below += self.layers[layer].capacity;
            layer += 1;
        }
        let remainder = cap.saturating_sub(below).min(self.layers[layer].capacity);
        let load = remainder as f64 / self.layers[layer].blocks as f64;
        self.cap = Some(cap);
        self.cap_layer = layer;
        self.cap_fill = 1.0 - (-load / 32.0).exp();
        Ok(self)
    }

    /// The per-user cap, items per generation (None: no cap).
    pub fn cap(&self) -> Option<u64> {
        self.cap
    }

    /// Whether a stored row shows its generation at the per-user cap: the exact row holding
    /// the cap, a segment of the cap's layer at the cap's fill (the items falling there are
    /// refused), or a row above that layer (grown before a lower cap was set: the generation
    /// takes nothing more). False without a cap.
    pub fn row_at_cap(&self, layer: i16, bits: &[u8]) -> bool {
        if self.cap.is_none() {
            return false;
        }
        if layer == EXACT_LAYER {
            return self.capped_in_exact(bits.len() / 8);
        }
        let Ok(layer) = usize::try_from(layer) else {
            return false;
        };
        layer > self.cap_layer || layer == self.cap_layer && blocks_fill(bits) >= self.cap_fill
    }

    /// The fill at which a segment of `layer` takes no more items (0 above the cap's layer).
    fn room_fill(&self, layer: usize) -> f64 {
        match layer.cmp(&self.cap_layer) {
            std::cmp::Ordering::Less => self.layers[layer].full_fill,
            std::cmp::Ordering::Equal => self.cap_fill,
            std::cmp::Ordering::Greater => 0.0,
        }
    }

    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    pub fn layer_capacity(&self, layer: usize) -> u64 {
        self.layers[layer].capacity
    }

    pub fn layer_blocks(&self, layer: usize) -> u64 {
        self.layers[layer].blocks
    }

    /// Most hashes the exact row holds: while it is no larger than the first layer, nor than
    /// one row (a sized first layer may span two).
    pub fn exact_limit(&self) -> usize {
        (self.layers[0].blocks.min(SEGMENT_BLOCKS) as usize * BLOCK_BYTES / 8)
            .min(self.layers[0].capacity as usize)
    }

    /// Whether the exact row is where the cap stops a generation (a cap no larger than the
    /// exact row's limit: its items never move to the layers).
    fn capped_in_exact(&self, held: usize) -> bool {
        self.cap
            .is_some_and(|cap| cap <= self.exact_limit() as u64 && held as u64 >= cap)
    }

    /// Bytes of segment `segment` of `layer` (the last segment may be shorter).
    pub fn segment_len(&self, layer: usize, segment: u32) -> usize {
        let blocks = self.layers[layer].blocks;
        let start = segment as u64 * SEGMENT_BLOCKS;
        (blocks.saturating_sub(start).min(SEGMENT_BLOCKS) * BLOCK_BYTES as u64) as usize
    }

    /// Where an item lands in `layer`: (segment, byte offset of its block in that segment,
    /// the layer's hash of the item).
    #[inline]
    pub fn locate(&self, h: u64, layer: usize) -> (u32, usize, u64) {
        let lh = layer_hash(h, layer as u32);
        let block = block_index(lh, self.layers[layer].blocks);
        let segment = (block / SEGMENT_BLOCKS) as u32;
        let offset = (block % SEGMENT_BLOCKS) as usize * BLOCK_BYTES;
        (segment, offset, lh)
    }
}

/// The 32-byte blocks of a layer row that an insert changes: (byte offset in the row, the
/// block's new bytes).
pub type ChangedBlocks = Vec<(usize, [u8; BLOCK_BYTES])>;

impl GenerationLayout {
    /// What inserting `hashes` into segment `segment` of `layer`, whose stored bits are
    /// `bits`, changes, when the segment's fill leaves room for all of them (None otherwise,
    /// or when a hash lands elsewhere or `bits` is not that segment's length). Room is judged
    /// as `GenerationRows::insert` judges each item, counting every item before the last as
    /// 8 more bits set, so this never fills a segment the engine would have left: a batch it
    /// refuses goes to the fold that may start the next layer.
    pub fn segment_insert(
        &self,
        layer: usize,
        segment: u32,
        bits: &[u8],
        hashes: &[u64],
    ) -> Option<ChangedBlocks> {
        if layer >= MAX_LAYERS
            || bits.len() != self.segment_len(layer, segment)
            || hashes.is_empty()
        {
            return None;
        }
        let total_bits = (bits.len() * 8) as f64;
        let before_last = 8.0 * (hashes.len() - 1) as f64 / total_bits;
        if blocks_fill(bits) + before_last >= self.room_fill(layer) {
            return None;
        }
        let mut changed: ChangedBlocks = Vec::with_capacity(hashes.len());
        for &h in hashes {
            let (s, offset, lh) = self.locate(h, layer);
            if s != segment {
                return None;
            }
            let at = match changed.iter().position(|&(o, _)| o == offset) {
                Some(i) => i,
                None => {
                    let block = bits[offset..offset + BLOCK_BYTES].try_into().unwrap();
                    changed.push((offset, block));
                    changed.len() - 1
                }
            };
            block_insert(&mut changed[at].1, lh);
        }
        changed.retain(|(offset, block)| block[..] != bits[*offset..*offset + BLOCK_BYTES]);
        Some(changed)
    }
}

/// A stored row, checked against the layout.
pub(crate) enum Row<'a> {
    Exact(&'a [u8]),
    Segment(usize),
}

/// Checks a stored row's key and length: `layer` EXACT_LAYER for the exact row (whole
/// hashes), else a segment of exactly the layout's length. Anything else is a corrupt or
/// foreign table and is refused.
pub(crate) fn check_row<'a>(
    layout: &GenerationLayout,
    layer: i16,
    segment: u32,
    bits: &'a [u8],
) -> Result<Row<'a>, Error> {
    if layer == EXACT_LAYER {
        if !bits.len().is_multiple_of(8) {
            return Err(Error::Malformed(format!(
                "exact row of {} bytes is not whole hashes",
                bits.len()
            )));
        }
        return Ok(Row::Exact(bits));
    }
    let Some(l) = usize::try_from(layer).ok().filter(|&l| l < MAX_LAYERS) else {
        return Err(Error::Malformed(format!(
            "layer {layer} outside 0..{MAX_LAYERS}"
        )));
    };
    let expected = layout.segment_len(l, segment);
    if expected == 0 || bits.len() != expected {
        return Err(Error::Malformed(format!(
            "segment {segment} of layer {l} has {} bytes, expected {expected}",
            bits.len()
        )));
    }
    Ok(Row::Segment(l))
}

/// An exact row's hashes in stored order: newest first.
pub(crate) fn exact_hashes(bits: &[u8]) -> impl DoubleEndedIterator<Item = u64> + '_ {
    bits.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

/// One generation of one user, owned and changed by a batch of impressions.
///
/// A batch need not load the whole generation: new items go to its top layer (or a new
/// layer above it once their segment there is full), so loading the exact row, or the top
/// layer's segments the batch's items fall in, is enough (see [`GenerationRows::needed`]);
/// an impression then reads and writes about one row. An item already in an older layer
/// may get its bits set again in the top one, which costs capacity, never correctness.
#[derive(Debug, Default, Clone)]
pub struct GenerationRows {
    /// The top layer stored (new items go there or above), None while the generation has
    /// only an exact row or nothing.
    pub top: Option<usize>,
    /// The exact row's hashes, oldest first; None when there is no exact row.
    pub exact: Option<Vec<u64>>,
    /// `layers[layer]`: the segments loaded or written, by segment number. Sparse, so a
    /// stored row of a high layer (whose whole layer could be gigabytes) costs its own bytes.
    pub layers: Vec<BTreeMap<u32, Vec<u8>>>,
    /// What changed: (layer, segment) with EXACT_LAYER for the exact row.
    pub dirty: std::collections::BTreeSet<(i16, u32)>,
    /// The exact row was folded into the layers and must be deleted.
    pub exact_deleted: bool,
    /// New items the layout's per-user cap refused (see `GenerationLayout::with_cap`).
    pub capped: u64,
}

impl GenerationRows {
    fn segment(&self, layer: usize, segment: u32) -> Option<&[u8]> {
        self.layers.get(layer)?.get(&segment).map(Vec::as_slice)
    }

    /// Whether the item is (probably) in the loaded exact row or layer segments.
    pub fn contains(&self, layout: &GenerationLayout, h: u64) -> bool {
        self.exact.as_ref().is_some_and(|e| e.contains(&h))
            || (0..self.layers.len()).any(|layer| {
                let (segment, offset, lh) = layout.locate(h, layer);
                self.segment(layer, segment)
                    .and_then(|bits| bits.get(offset..offset + BLOCK_BYTES))
                    .is_some_and(|block| block_contains(block.try_into().unwrap(), lh))
            })
    }
}

impl GenerationRows {
    /// Loads a stored row: `layer` EXACT_LAYER for the exact row, else a segment. Rows whose
    /// length does not match the layout are refused (a corrupt or foreign table).
    pub fn load(
        &mut self,
        layout: &GenerationLayout,
        layer: i16,
        segment: u32,
        bits: &[u8],
    ) -> Result<(), Error> {
        self.load_owned(layout, layer, segment, bits.to_vec())
    }

    /// `load`, keeping `bits` itself for a segment (the fold's copy of the stored row).
    pub fn load_owned(
        &mut self,
        layout: &GenerationLayout,
        layer: i16,
        segment: u32,
        bits: Vec<u8>,
    ) -> Result<(), Error> {
        let l = match check_row(layout, layer, segment, &bits)? {
            Row::Exact(bits) => {
                self.exact
                    .get_or_insert_with(Vec::new)
                    .extend(exact_hashes(bits).rev());
                return Ok(());
            }
            Row::Segment(l) => l,
        };
        self.ensure_layer(l);
        self.layers[l].insert(segment, bits);
        self.top = self.top.max(Some(l));
        Ok(())
    }

    fn ensure_layer(&mut self, layer: usize) {
        if self.layers.len() <= layer {
            self.layers.resize_with(layer + 1, BTreeMap::new);
        }
    }

    /// Adds an item; false if it was (probably) there already, or the per-user cap refused
    /// it (counted in `capped`).
    pub fn insert(&mut self, layout: &GenerationLayout, h: u64) -> Result<bool, Error> {
        if self.contains(layout, h) {
            return Ok(false);
        }
        if self.top.is_none() {
            let exact = self.exact.get_or_insert_with(Vec::new);
            if layout.capped_in_exact(exact.len()) {
                self.capped += 1;
                return Ok(false);
            }
            if exact.len() < layout.exact_limit() {
                exact.push(h);
                self.dirty.insert((EXACT_LAYER, 0));
                return Ok(true);
            }
            // Promote: the exact hashes move into the layers and the exact row goes.
            let hashes = self.exact.take().unwrap_or_default();
            self.exact_deleted = true;
            self.dirty.remove(&(EXACT_LAYER, 0));
            for old in hashes {
                self.insert_into_layers(layout, old)?;
            }
        }
        self.insert_into_layers(layout, h)
    }

    /// The (layer, segment) rows a batch of `hashes` needs loaded, given the generation's top
    /// stored layer (None when it has no layer rows, only perhaps an exact row).
    pub fn needed(
        layout: &GenerationLayout,
        top: Option<usize>,
        hashes: &[u64],
    ) -> Vec<(i16, u32)> {
        let mut keys = Vec::new();
        Self::needed_into(layout, top, hashes, &mut keys);
        keys
    }

    /// `needed`, into `keys` (emptied first): a fold at commit plans each user's rows with
    /// one buffer.
    pub fn needed_into(
        layout: &GenerationLayout,
        top: Option<usize>,
        hashes: &[u64],
        keys: &mut Vec<(i16, u32)>,
    ) {
        keys.clear();
        match top {
            None => keys.push((EXACT_LAYER, 0)),
            Some(top) => keys.extend(
                hashes
                    .iter()
                    .map(|&h| (top as i16, layout.locate(h, top).0)),
            ),
        }
        keys.sort_unstable();
        keys.dedup();
    }

    /// Sets the item's bits in the first layer from the top one up whose segment for it is not
    /// yet full; false when the per-user cap refused it.
    fn insert_into_layers(&mut self, layout: &GenerationLayout, h: u64) -> Result<bool, Error> {
        for layer in self.top.unwrap_or(0)..=layout.cap_layer {
            let (segment, offset, lh) = layout.locate(h, layer);
            // A segment not loaded is empty: only the top layer's are stored.
            let full = self
                .segment(layer, segment)
                .is_some_and(|bits| blocks_fill(bits) >= layout.room_fill(layer));
            if full {
                continue;
            }
            self.ensure_layer(layer);
            let len = layout.segment_len(layer, segment);
            let bits = self.layers[layer]
                .entry(segment)
                .or_insert_with(|| vec![0; len]);
            let block: &mut [u8; BLOCK_BYTES] = (&mut bits[offset..offset + BLOCK_BYTES])
                .try_into()
                .unwrap();
            block_insert(block, lh);
            self.dirty.insert((layer as i16, segment));
            self.top = self.top.max(Some(layer));
            return Ok(true);
        }
        if layout.cap.is_some() {
            self.capped += 1;
            return Ok(false);
        }
        Err(Error::TooLarge {
            limit: crate::shape::MAX_VALUE_BYTES,
            bytes: layout
                .layers
                .iter()
                .map(|l| l.blocks * BLOCK_BYTES as u64)
                .sum(),
        })
    }

    /// The bytes to store for a dirty (layer, segment).
    pub fn row_bytes(&self, layer: i16, segment: u32) -> Vec<u8> {
        if layer == EXACT_LAYER {
            // Newest first: PostgreSQL logs the bytes of an update between the common prefix
            // and suffix of the old and new row (at wal_level replica, on one page), and
            // `bits`' varlena length ends the prefix, so hashes appended at the end made the
            // whole row the change (823 bytes of WAL per impression at 96 hashes on average,
            // bench/wal_phases.py); put first, the stored ones are the suffix.
            let hashes = self.exact.as_deref().unwrap_or_default();
            return hashes.iter().rev().flat_map(|h| h.to_le_bytes()).collect();
        }
        self.segment(layer as usize, segment)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    }

    /// `row_bytes`, taking a segment's bytes out instead of copying them (the fold writes
    /// each dirty row once, then keeps only `top`); the state no longer holds that segment.
    pub fn take_row_bytes(&mut self, layer: i16, segment: u32) -> Vec<u8> {
        if layer == EXACT_LAYER {
            return self.row_bytes(layer, segment);
        }
        self.layers
            .get_mut(layer as usize)
            .and_then(|l| l.remove(&segment))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fold's new exact hashes come first and the stored row is the new row's suffix (what
    /// PostgreSQL leaves out of an update's WAL), in whatever order old rows were stored.
    #[test]
    fn exact_row_keeps_its_stored_bytes_as_suffix() {
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        let mut rows = GenerationRows::default();
        for i in 0..10 {
            rows.insert(&layout, hash_i64(i)).unwrap();
        }
        let stored = rows.row_bytes(EXACT_LAYER, 0);
        assert_eq!(stored[..8], hash_i64(9).to_le_bytes());
        let mut loaded = GenerationRows::default();
        loaded.load(&layout, EXACT_LAYER, 0, &stored).unwrap();
        assert_eq!(loaded.exact, rows.exact);
        for i in 10..13 {
            loaded.insert(&layout, hash_i64(i)).unwrap();
        }
        let written = loaded.row_bytes(EXACT_LAYER, 0);
        assert_eq!(written.len(), stored.len() + 24);
        assert!(written.ends_with(&stored));
        // A row stored oldest first (0.4.0 appended) reads the same set.
        let appended: Vec<u8> = (0..10).flat_map(|i| hash_i64(i).to_le_bytes()).collect();
        let mut old = GenerationRows::default();
        old.load(&layout, EXACT_LAYER, 0, &appended).unwrap();
        assert!((0..10).all(|i| old.contains(&layout, hash_i64(i))));
        assert!(!old.contains(&layout, hash_i64(10)));
    }

    #[test]
    fn segment_insert_sets_the_bits_the_engine_sets() {
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        let mut rows = GenerationRows::default();
        // Past the exact row: layer 0 holds these.
        let first: Vec<u64> = (0..400).map(hash_i64).collect();
        for &h in &first {
            rows.insert(&layout, h).unwrap();
        }
        assert_eq!(rows.top, Some(0));
        let stored = rows.row_bytes(0, 0);
        let more: Vec<u64> = (400..410).map(hash_i64).collect();
        let changed = layout.segment_insert(0, 0, &stored, &more).unwrap();
        let mut by_blocks = stored.clone();
        for (offset, block) in &changed {
            by_blocks[*offset..*offset + BLOCK_BYTES].copy_from_slice(block);
        }
        for &h in &more {
            rows.insert(&layout, h).unwrap();
        }
        assert_eq!(by_blocks, rows.row_bytes(0, 0));
        assert!(!changed.is_empty() && changed.len() <= more.len());
        // Already there: nothing changes.
        assert_eq!(
            layout.segment_insert(0, 0, &by_blocks, &more).unwrap(),
            vec![]
        );
        // Wrong length, wrong segment, wrong layer: refused.
        assert!(layout
            .segment_insert(0, 0, &by_blocks[..64], &more)
            .is_none());
        assert!(layout.segment_insert(0, 1, &by_blocks, &more).is_none());
        assert!(layout.segment_insert(1, 0, &by_blocks, &more).is_none());
    }

    /// Inserts distinct items until `n` were offered; (taken in, capped).
    fn offer(layout: &GenerationLayout, n: i64) -> (GenerationRows, u64) {
        let mut rows = GenerationRows::default();
        let mut taken = vec![];
        for i in 0..n {
            if rows.insert(layout, hash_i64(i)).unwrap() {
                taken.push(hash_i64(i));
            }
        }
        // A capped generation loses nothing it took in.
        assert!(taken.iter().all(|&h| rows.contains(layout, h)));
        (rows, taken.len() as u64)
    }

    #[test]
    fn a_cap_stops_a_generation_near_its_items() {
        for first in [FirstLayer::FillsOneRow, FirstLayer::Holds(600)] {
            for cap in [50u64, 150, 500, 1_000, 3_000, 20_000] {
                let layout = GenerationLayout::new(0.01 / 6.0, first)
                    .unwrap()
                    .with_cap(Some(cap))
                    .unwrap();
                let (rows, taken) = offer(&layout, 5 * cap as i64 + 2_000);
                // Each segment's fill is judged alone: within 10% of the cap (a few items
                // more or fewer of the small caps, whose last layer is one row).
                let slack = (cap / 10).max(8);
                assert!(
                    taken + slack >= cap && taken <= cap + slack,
                    "{first:?} cap {cap}: took {taken}"
                );
                assert_eq!(
                    taken + rows.capped,
                    5 * cap + 2_000 - false_positives(&layout, cap)
                );
                // Never a layer past the cap's.
                assert!(
                    rows.top.unwrap_or(0) <= layout.cap_layer,
                    "{first:?} cap {cap}"
                );
            }
        }
        // No cap: the layers grow past any of those counts.
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        let (rows, taken) = offer(&layout, 20_000);
        assert_eq!(rows.capped, 0);
        assert!(taken > 19_000);
        assert!(GenerationLayout::new(0.01, FirstLayer::FillsOneRow)
            .unwrap()
            .with_cap(Some(0))
            .is_err());
    }

    /// Offered items that `insert` refused as already there (false positives of the state
    /// they met), so that taken + capped + these = offered.
    fn false_positives(layout: &GenerationLayout, cap: u64) -> u64 {
        let mut replay = GenerationRows::default();
        let mut present = 0;
        for i in 0..(5 * cap as i64 + 2_000) {
            let h = hash_i64(i);
            if replay.contains(layout, h) {
                present += 1;
            } else {
                replay.insert(layout, h).unwrap();
            }
        }
        present
    }

    #[test]
    fn rows_at_the_cap_are_told() {
        for cap in [100u64, 2_000] {
            let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow)
                .unwrap()
                .with_cap(Some(cap))
                .unwrap();
            let mut rows = GenerationRows::default();
            let mut i = 0;
            let at_cap = |rows: &GenerationRows| match rows.top {
                None => layout.row_at_cap(EXACT_LAYER, &rows.row_bytes(EXACT_LAYER, 0)),
                Some(top) => (0..layout.layers[top].blocks.div_ceil(SEGMENT_BLOCKS) as u32)
                    .any(|s| layout.row_at_cap(top as i16, &rows.row_bytes(top as i16, s))),
            };
            // A refusal needs a row at the cap: never one the rows did not tell.
            let mut told = 0;
            while rows.capped < 10 {
                let before = at_cap(&rows);
                let capped = rows.capped;
                rows.insert(&layout, hash_i64(i)).unwrap();
                assert!(
                    rows.capped == capped || before,
                    "cap {cap}: refused, not told"
                );
                told += i64::from(before);
                i += 1;
            }
            // Not told long before the cap: within its last tenth.
            let before_told = i - told;
            assert!(
                before_told >= (cap * 9 / 10) as i64,
                "cap {cap}: told after {before_told}"
            );
        }
        let uncapped = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        assert!(!uncapped.row_at_cap(0, &[0xff; 1536]));
        // A generation grown to layer 1 before a cap of 100 was set takes nothing more, and
        // its layer-1 rows say so.
        let (grown, _) = offer(&uncapped, 2_000);
        assert_eq!(grown.top, Some(1));
        let capped = uncapped.clone().with_cap(Some(100)).unwrap();
        let mut rows = grown.clone();
        assert!(!rows.insert(&capped, hash_i64(1_000_000)).unwrap());
        assert_eq!(rows.capped, 1);
        let top_row = grown.layers[1].values().next().unwrap();
        assert!(capped.row_at_cap(1, top_row));
    }

    #[test]
    fn segment_insert_respects_the_cap() {
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow)
            .unwrap()
            .with_cap(Some(400))
            .unwrap();
        let (rows, _) = offer(&layout, 2_000);
        assert!(rows.capped > 0);
        let top = rows.top.unwrap();
        let bits = rows.row_bytes(top as i16, 0);
        let more: Vec<u64> = (10_000..20_000)
            .map(hash_i64)
            .filter(|&h| layout.locate(h, top).0 == 0)
            .take(2)
            .collect();
        assert!(layout.segment_insert(top, 0, &bits, &more).is_none());
    }

    #[test]
    fn segment_insert_leaves_a_full_segment_to_the_engine() {
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        let mut rows = GenerationRows::default();
        let mut i = 0i64;
        // Fill layer 0 until the engine starts layer 1.
        while rows.top != Some(1) {
            rows.insert(&layout, hash_i64(i)).unwrap();
            i += 1;
        }
        let full = rows.row_bytes(0, 0);
        let lands_in_0: Vec<u64> = (i..i + 1000)
            .map(hash_i64)
            .filter(|&h| layout.locate(h, 0).0 == 0)
            .take(3)
            .collect();
        assert!(layout.segment_insert(0, 0, &full, &lands_in_0).is_none());
        // Never accepted where the engine would refuse: a batch accepted just below the
        // fill leaves every item's insert allowed.
        let mut probe = GenerationRows::default();
        let mut j = 0i64;
        loop {
            let bits = probe.row_bytes(0, 0);
            let batch: Vec<u64> = (1_000_000 + j..1_000_000 + j + 20).map(hash_i64).collect();
            if probe.top == Some(0) {
                match layout.segment_insert(0, 0, &bits, &batch) {
                    Some(_) => {
                        let mut copy = probe.clone();
                        for &h in &batch {
                            copy.insert(&layout, h).unwrap();
                        }
                        assert_eq!(copy.top, Some(0), "accepted a batch the engine put above");
                    }
                    None => break,
                }
            }
            probe.insert(&layout, hash_i64(j)).unwrap();
            j += 1;
        }
    }
    use crate::hash::hash_i64;
    use crate::window::WindowView;

    type Pinned = ([(u64, u64); 6], usize);
    /// (items, blocks) of layers 0..6 and the exact row's limit of layout 2.
    const LAYOUT_2_1_PERCENT: Pinned = (
        [
            (720, 48),
            (2880, 228),
            (11520, 1084),
            (46080, 5164),
            (184320, 24616),
            (737280, 117497),
        ],
        192,
    );
    const LAYOUT_2_TENTH_PERCENT: Pinned = (
        [
            (464, 48),
            (1856, 228),
            (7424, 1086),
            (29696, 5186),
            (118784, 24844),
            (475136, 119439),
        ],
        192,
    );
    /// The same of layout 1, as first released.
    const PINNED_1_PERCENT: Pinned = (
        [
            (144, 10),
            (576, 46),
            (2304, 217),
            (9216, 1033),
            (36864, 4924),
            (147456, 23500),
        ],
        40,
    );
    const PINNED_TENTH_PERCENT: Pinned = (
        [
            (96, 10),
            (384, 48),
            (1536, 225),
            (6144, 1073),
            (24576, 5141),
            (98304, 24712),
        ],
        40,
    );

    fn layout(first: FirstLayer) -> GenerationLayout {
        GenerationLayout::new(0.01 / 5.0, first).unwrap()
    }

    /// Feeds a generation's layer rows to a read-path view, as the fetched rows would be.
    fn write_back<'a>(
        rows: &'a GenerationRows,
        view: &mut WindowView<'a>,
        layout: &GenerationLayout,
    ) {
        for (l, segments) in rows.layers.iter().enumerate() {
            for (&s, bits) in segments {
                view.add_row(layout, 0, l as i16, s, bits).unwrap();
            }
        }
    }

    /// Batches folded as the trigger does: only the top layer's needed rows are loaded, the
    /// dirty ones written back, promoted exact rows deleted.
    #[test]
    fn partial_loads_like_the_trigger_keep_every_item() {
        for first in FirstLayer::ALL {
            partial_loads_keep_every_item(&layout(first));
        }
    }

    fn partial_loads_keep_every_item(l: &GenerationLayout) {
        use std::collections::BTreeMap;
        let mut stored: BTreeMap<(i16, u32), Vec<u8>> = BTreeMap::new();
        let items: Vec<u64> = (0..6000).map(hash_i64).collect();
        for batch in items.chunks(20) {
            let top = stored
                .keys()
                .map(|&(layer, _)| layer)
                .max()
                .filter(|&x| x >= 0)
                .map(|x| x as usize);
            let mut rows = GenerationRows {
                top,
                ..GenerationRows::default()
            };
            for key in GenerationRows::needed(l, top, batch) {
                if let Some(bits) = stored.get(&key) {
                    rows.load_owned(l, key.0, key.1, bits.clone()).unwrap();
                }
            }
            for &h in batch {
                rows.insert(l, h).unwrap();
            }
            // As the fold writes them: each dirty row's bytes taken out once.
            for (layer, segment) in std::mem::take(&mut rows.dirty) {
                stored.insert((layer, segment), rows.take_row_bytes(layer, segment));
            }
            if rows.exact_deleted {
                stored.remove(&(EXACT_LAYER, 0));
            }
        }
        assert!(!stored.contains_key(&(EXACT_LAYER, 0)));
        let mut view = WindowView::default();
        for (&(layer, segment), bits) in &stored {
            view.add_row(l, 0, layer, segment, bits).unwrap();
        }
        view.seal(l).unwrap();
        assert!(
            items.iter().all(|&h| view.contains(l, h)),
            "a false negative"
        );
        let fp = (1_000_000..1_200_000)
            .filter(|&i| view.contains(l, hash_i64(i)))
            .count();
        assert!(
            fp as f64 / 200_000.0 <= 1.1 * l.error_rate(),
            "fpr {}",
            fp as f64 / 200_000.0
        );
    }

    /// Tracked rows do not record their layer sizes: they follow from the error budget and the
    /// layout number. This pins both layouts of the default budget (1% over 6 generations)
    /// and of 0.1%, so a change
    /// of the sizing code cannot silently reinterpret stored rows.
    #[test]
    fn layouts_are_pinned() {
        let shapes = |p: f64, first: FirstLayer| {
            let l = GenerationLayout::new(p, first).unwrap();
            let layers: Vec<(u64, u64)> = (0..6)
                .map(|i| (l.layer_capacity(i), l.layer_blocks(i)))
                .collect();
            (layers, l.exact_limit())
        };
        let pinned = |p: Pinned| (p.0.to_vec(), p.1);
        let one = FirstLayer::SecondFitsOneRow;
        assert_eq!(shapes(0.01 / 6.0, one), pinned(PINNED_1_PERCENT));
        assert_eq!(shapes(0.001 / 6.0, one), pinned(PINNED_TENTH_PERCENT));
        let two = FirstLayer::FillsOneRow;
        assert_eq!(shapes(0.01 / 6.0, two), pinned(LAYOUT_2_1_PERCENT));
        assert_eq!(shapes(0.001 / 6.0, two), pinned(LAYOUT_2_TENTH_PERCENT));
    }

    /// A sized first layer holds its share with headroom in one row, or fills two whole rows
    /// when the share outgrows one; its exact row stays within one row.
    #[test]
    fn sized_first_layer_holds_its_share_in_whole_rows() {
        let fills = |p: f64| GenerationLayout::new(p, FirstLayer::FillsOneRow).unwrap();
        for (p, items) in [
            (0.01 / 6.0, 300),
            (0.01 / 6.0, 600),
            (0.01 / 6.0, 1),
            (0.001 / 6.0, 600),
            (0.01 / 6.0, 100_000),
        ] {
            let l = GenerationLayout::new(p, FirstLayer::Holds(items)).unwrap();
            assert!(l.exact_limit() <= SEGMENT_BLOCKS as usize * BLOCK_BYTES / 8);
            let blocks = l.layer_blocks(0);
            if items <= fills(p).layer_capacity(0) {
                assert!(l.layer_capacity(0) >= items, "{items} items at {p}");
                // One row, up to the one layout 2 fills.
                assert!(l.layer_capacity(0) <= fills(p).layer_capacity(0));
                assert!(
                    l.layer_capacity(0) as f64 <= (items as f64 * SIZED_HEADROOM).max(16.0) + 16.0
                );
            } else {
                // Two whole rows (the last at most two blocks short).
                assert!(
                    (2 * SEGMENT_BLOCKS - 2..=2 * SEGMENT_BLOCKS).contains(&blocks),
                    "{blocks} blocks"
                );
            }
        }
        // 600 items at 0.1% fit one layer of two rows where layout 2 takes two layers; at 1%
        // one row, and 300 items a row of 384.
        assert!(fills(0.001 / 6.0).layer_capacity(0) < 600);
        let l = GenerationLayout::new(0.001 / 6.0, FirstLayer::Holds(600)).unwrap();
        assert!(l.layer_capacity(0) > 900 && l.layer_blocks(0) > SEGMENT_BLOCKS);
        let l = GenerationLayout::new(0.01 / 6.0, FirstLayer::Holds(300)).unwrap();
        assert_eq!(l.layer_capacity(0), 384);
    }

    #[test]
    fn layout_1_fits_the_second_layer_in_one_row() {
        let l = layout(FirstLayer::SecondFitsOneRow);
        assert!(l.layer_blocks(1) <= SEGMENT_BLOCKS, "{}", l.layer_blocks(1));
        assert!(l.layer_capacity(0) >= 64);
        assert!(l.exact_limit() >= 16);
    }

    #[test]
    fn layout_2_fills_one_row_with_the_first_layer() {
        let l = layout(FirstLayer::FillsOneRow);
        assert!(l.layer_blocks(0) <= SEGMENT_BLOCKS, "{}", l.layer_blocks(0));
        assert!(
            l.layer_blocks(0) >= SEGMENT_BLOCKS - 2,
            "{}",
            l.layer_blocks(0)
        );
        // As many hashes as the row's bytes: an exact row is never larger than the layer's.
        assert_eq!(l.exact_limit(), SEGMENT_BLOCKS as usize * BLOCK_BYTES / 8);
        assert!(l.layer_capacity(0) > 3 * l.exact_limit() as u64);
    }

    #[test]
    fn layout_numbers_round_trip() {
        for first in FirstLayer::ALL {
            assert_eq!(
                first.number().and_then(FirstLayer::from_number),
                Some(first)
            );
        }
        assert_eq!(FirstLayer::from_number(0), None);
        assert_eq!(FirstLayer::from_number(3), None);
    }

    #[test]
    fn exact_until_the_limit_then_layers_without_false_negatives() {
        for first in FirstLayer::ALL {
            exact_then_layers(&layout(first));
        }
    }

    fn exact_then_layers(l: &GenerationLayout) {
        let mut rows = GenerationRows::default();
        for i in 0..l.exact_limit() as i64 {
            assert!(rows.insert(l, hash_i64(i)).unwrap());
        }
        assert!(rows.layers.is_empty());
        assert_eq!(rows.row_bytes(EXACT_LAYER, 0).len(), 8 * l.exact_limit());
        for i in l.exact_limit() as i64..5000 {
            rows.insert(l, hash_i64(i)).unwrap();
        }
        assert!(rows.exact.is_none() && rows.exact_deleted);
        assert!(rows.layers.len() >= 3);
        assert!((0..5000).all(|i| rows.contains(l, hash_i64(i))));
        let mut view = WindowView::default();
        write_back(&rows, &mut view, l);
        view.seal(l).unwrap();
        assert!((0..5000).all(|i| view.contains(l, hash_i64(i))));
    }

    #[test]
    fn false_positive_rate_of_a_full_generation_stays_under_its_budget() {
        for first in FirstLayer::ALL {
            let l = layout(first);
            full_generation_fpr(&l);
        }
    }

    fn full_generation_fpr(l: &GenerationLayout) {
        let mut rows = GenerationRows::default();
        for i in 0..25_000 {
            rows.insert(l, hash_i64(i)).unwrap();
        }
        let fp = (1_000_000..1_200_000)
            .filter(|&i| rows.contains(l, hash_i64(i)))
            .count();
        let fpr = fp as f64 / 200_000.0;
        assert!(
            fpr <= 1.1 * l.error_rate(),
            "fpr {fpr} budget {}",
            l.error_rate()
        );
    }

    /// A row of a high layer (layer 12 of this layout is ~47 GB in all) costs its own bytes on
    /// the read and the write path, not the layer's: both are sparse by segment.
    #[test]
    fn a_row_of_a_huge_layer_allocates_only_its_segment() {
        let l = layout(FirstLayer::SecondFitsOneRow);
        let layer = 12usize;
        assert!(l.layer_blocks(layer) * BLOCK_BYTES as u64 > 10 << 30);
        let last = (l.layer_blocks(layer).div_ceil(SEGMENT_BLOCKS) - 1) as u32;
        let mut rows = GenerationRows::default();
        let mut bits = vec![0u8; l.segment_len(layer, last)];
        bits.fill(0xff);
        rows.load(&l, layer as i16, last, &bits).unwrap();
        rows.load(&l, layer as i16, 0, &vec![0; l.segment_len(layer, 0)])
            .unwrap();
        assert_eq!(rows.top, Some(layer));
        assert_eq!(rows.layers.iter().map(BTreeMap::len).sum::<usize>(), 2);
        for i in 0..200 {
            rows.insert(&l, hash_i64(i)).unwrap();
            assert!(rows.contains(&l, hash_i64(i)));
        }
        let stored: usize = rows
            .layers
            .iter()
            .flat_map(|m| m.values())
            .map(Vec::len)
            .sum();
        assert!(
            stored < 300 * SEGMENT_BLOCKS as usize * BLOCK_BYTES,
            "{stored} bytes"
        );

        let mut view = WindowView::default();
        view.add_row(&l, 7, layer as i16, last, &bits).unwrap();
        view.add_row(&l, 8, layer as i16, 0, &bits[..0])
            .unwrap_err();
        view.seal(&l).unwrap();
        let table_blocks = view.table_blocks();
        assert_eq!(table_blocks, bits.len() / BLOCK_BYTES);
        // Every item whose block falls in the all-ones last segment is "seen", others not.
        for i in 0..2000 {
            let h = hash_i64(i);
            let (segment, _, _) = l.locate(h, layer);
            assert_eq!(view.contains(&l, h), segment == last, "item {i}");
        }
    }

    #[test]
    fn refuses_rows_that_do_not_fit_the_layout() {
        let l = layout(FirstLayer::FillsOneRow);
        let mut rows = GenerationRows::default();
        assert!(rows.load(&l, EXACT_LAYER, 0, &[1, 2, 3]).is_err());
        assert!(rows.load(&l, 0, 0, &[0; 7]).is_err());
        assert!(rows.load(&l, 99, 0, &[0; 32]).is_err());
        assert!(rows.load(&l, 0, 1000, &[0; 32]).is_err());
        let mut view = WindowView::default();
        assert!(view.add_row(&l, 1, 0, 0, &[0; 5]).is_err());
        assert!(view.add_row(&l, 1, -7, 0, &[0; 32]).is_err());
    }
}

//! The read path of impression tracking: all live generations of one user, built from the
//! fetched filter rows, probed with a whole batch of candidates at once.

use crate::compacted::{part_of, Compacted, COMPACTED_LAYER};
use crate::error::Error;
use crate::exact_set::ExactSet;
use crate::generation::{
    check_row, exact_hashes, GenerationLayout, Row, MOVED_LAYER, SEGMENT_BLOCKS,
};
use crate::sbbf::{block_has_masks, block_index, lane_masks, layer_hash, BLOCK_BYTES, SALTS};
use crate::xor_set::{ByteProbe, PackedProbe, XorSet};

/// All live generations of one user, built from fetched rows.
///
/// Organised by layer index rather than by generation: layer `L` has the same size in every
/// generation, so a candidate's block and bit masks for `L` are computed once, and the
/// generations' copies of that block sit side by side (a few adjacent cache lines) instead
/// of one scattered load per generation.
#[derive(Default)]
pub struct WindowView<'a> {
    /// Every exact hash of every generation, as fetched.
    exact: Vec<u64>,
    /// The same, after `seal`, as a set for one lookup per candidate.
    exact_set: ExactSet,
    /// Rows of each layer as fetched: (generation, segment, bits).
    rows: Vec<Vec<(i32, u32, &'a [u8])>>,
    /// Per layer, after `seal`: the blocks of the segments fetched.
    tables: Vec<LayerTable>,
    /// Compacted filters (seen_bloom.compact), their rows probed in place.
    compacted: Vec<CompactedFilter<'a>>,
}

/// One compacted filter: its rows by part, an item probing only the row of its part.
struct CompactedFilter<'a> {
    /// (oldest, newest generation): the rows of one `compact` share them.
    generations: (i32, i32),
    parts: Vec<Option<Compacted<'a>>>,
}

impl CompactedFilter<'_> {
    #[inline(always)]
    fn contains_with<const FAST: bool>(&self, h: u64) -> bool {
        let part = part_of(h, self.parts.len() as u32) as usize;
        // `seal` refused a filter with a part missing.
        self.parts[part]
            .as_ref()
            .is_some_and(|row| row.contains_with::<FAST>(h))
    }

    fn contains(&self, h: u64) -> bool {
        self.contains_with::<false>(h)
    }

    /// Sets `found[i]` for the candidates it holds, skipping those already found.
    #[allow(unsafe_code)] // dispatches to the BMI2 and AVX2 kernels
    fn mark(&self, hashes: &[u64], found: &mut [bool]) {
        #[cfg(target_arch = "x86_64")]
        if let [Some(row)] = self.parts.as_slice() {
            if let Some(blocks) = row.blocks() {
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has just been seen to support AVX2.
                    unsafe { mark_blocks_avx2(blocks, hashes, found) };
                    return;
                }
            }
        }
        // One xor filter (a light user's), with AVX-512: eight lookups at a time, the slots
        // read by gathers (a 300-item filter at 0.1%: 1.8 us for 1,000 candidates, 4.2 with
        // the scalar probe below; `cargo bench -p bloom-core --bench probe -- after_300`).
        #[cfg(target_arch = "x86_64")]
        if let [Some(row)] = self.parts.as_slice() {
            if let Some(probe) = row.xor().and_then(|x| x.packed_probe()) {
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512dq")
                {
                    // SAFETY: the CPU has just been seen to support AVX-512F and DQ.
                    unsafe { probe.mark_avx512(hashes, found) };
                    return;
                }
            }
        }
        // Xor filters of byte slots in every part (what compact writes past one row at 1%):
        // one loop over the candidates, each part's constants copied out, no dispatch per
        // candidate (8.5 us for 1,000 candidates through `contains_with`; see xor_set).
        if let Some(probes) = self.xor_probes(|x| x.byte_probe()) {
            return mark_by_part(&probes, hashes, found, ByteProbe::contains);
        }
        // The same for packed slots (k = 11 at 0.1%: 4.7 us for 1,000 candidates in a
        // 300-item filter through `XorSet::contains`, 4.2 so).
        if let Some(probes) = self.xor_probes(|x| x.packed_probe()) {
            return mark_by_part(&probes, hashes, found, PackedProbe::contains);
        }
        if let Some(sets) = self.xor_probes(Some) {
            return mark_by_part(&sets, hashes, found, XorSet::contains);
        }
        #[cfg(target_arch = "x86_64")]
        if crate::static_set::fast_probes() {
            // SAFETY: the CPU has just been seen to support BMI2 and POPCNT.
            unsafe { self.mark_fast(hashes, found) };
            return;
        }
        self.mark_with::<false>(hashes, found);
    }

    /// Every part's xor filter as `probe` gives it; None when a part has none (or `probe`
    /// declines one).
    fn xor_probes<'p, P>(&'p self, probe: impl Fn(XorSet<'p>) -> Option<P>) -> Option<Vec<P>> {
        self.parts
            .iter()
            .map(|p| probe(p.as_ref()?.xor()?))
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2,popcnt")]
    #[allow(unsafe_code)] // a BMI2 kernel
    unsafe fn mark_fast(&self, hashes: &[u64], found: &mut [bool]) {
        self.mark_with::<true>(hashes, found);
    }

    #[inline(always)]
    fn mark_with<const FAST: bool>(&self, hashes: &[u64], found: &mut [bool]) {
        for (&h, f) in hashes.iter().zip(found.iter_mut()) {
            if !*f {
                *f = self.contains_with::<FAST>(h);
            }
        }
    }
}

/// Sets `found[i]` where the probe of `hashes[i]`'s part holds it (one probe per part).
#[inline(always)]
fn mark_by_part<P>(
    probes: &[P],
    hashes: &[u64],
    found: &mut [bool],
    contains: impl Fn(&P, u64) -> bool,
) {
    let parts = probes.len() as u32;
    for (&h, f) in hashes.iter().zip(found.iter_mut()) {
        *f |= contains(&probes[part_of(h, parts) as usize], h);
    }
}

/// `CompactedFilter::mark` for a filter of split-block blocks in one row, with AVX2: each
/// candidate's lane masks one vector, its block one load and one test, with no branch on the
/// outcome (the scalar probe took 9.1 us for 1,000 candidates in a 300-item filter, this
/// 2.3: `cargo bench -p bloom-core --bench probe -- compacted_300`).
///
/// # Safety
/// The CPU must support AVX2.
#[allow(unsafe_code)] // a SIMD kernel
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mark_blocks_avx2(blocks: &[[u8; BLOCK_BYTES]], hashes: &[u64], found: &mut [bool]) {
    use std::arch::x86_64::*;
    // SAFETY: SALTS is eight u32s, 32 readable bytes.
    let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr() as *const __m256i) };
    let count = blocks.len() as u64;
    for (&h, f) in hashes.iter().zip(found.iter_mut()) {
        let lh = layer_hash(h, crate::compacted::HASH_INDEX);
        let b = block_index(lh, count) as usize;
        let Some(block) = blocks.get(b) else {
            continue;
        };
        let masks = lane_masks_avx2(lh, salts);
        // SAFETY: a block is 32 readable bytes.
        let block = unsafe { _mm256_loadu_si256(block.as_ptr() as *const __m256i) };
        *f |= _mm256_testc_si256(block, masks) != 0;
    }
}

/// One layer's fetched segments, sparse: only segments some generation stored take room, so
/// the table is as large as the rows fetched, whatever the layer's full size (a forged row of
/// a high layer must not make a read allocate the whole layer).
#[derive(Default)]
struct LayerTable {
    /// (segment, index of its first block in `blocks`, stride), sorted by segment. Block `i`
    /// of the segment has its copies (one per row of the segment, then zero blocks up to the
    /// stride) at `start + i * stride ..`.
    segments: Vec<(u32, usize, usize)>,
    /// `segments[s].0 == s` for every entry: look a segment up by index, not by search.
    dense: bool,
    /// Dense with every segment of the same stride: block `b`'s copies are then at
    /// `b * stride ..`, found without a segment lookup.
    uniform_width: Option<usize>,
    blocks: AlignedBlocks,
}

/// How many block slots `rows` copies of a block take: the copies, then zero blocks up to an
/// even count, so that with a cache-line aligned table every pair of copies is one aligned
/// 64-byte line (a zero block holds no item: each item has a bit in every lane).
fn stride_for(rows: usize) -> usize {
    if rows <= 1 {
        rows
    } else {
        rows.next_multiple_of(2)
    }
}

/// Two blocks, cache-line aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([[u8; BLOCK_BYTES]; 2]);

/// Blocks in cache-line aligned storage: no block straddles two lines (an unaligned 32-byte
/// load that does costs about twice as much, and a heap allocation is only 16-byte aligned).
#[derive(Default)]
struct AlignedBlocks {
    lines: Vec<Line>,
    len: usize,
}

// The SIMD kernels' 64-byte aligned storage, seen as blocks.
#[allow(unsafe_code)]
impl AlignedBlocks {
    fn zeroed(len: usize) -> AlignedBlocks {
        AlignedBlocks {
            lines: vec![Line([[0; BLOCK_BYTES]; 2]); len.div_ceil(2)],
            len,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_ptr(&self) -> *const [u8; BLOCK_BYTES] {
        self.lines.as_ptr() as *const [u8; BLOCK_BYTES]
    }

    fn as_slice(&self) -> &[[u8; BLOCK_BYTES]] {
        // SAFETY: `lines` holds 2 * lines.len() >= len blocks, contiguous (Line is repr(C)).
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [[u8; BLOCK_BYTES]] {
        // SAFETY: as in `as_slice`, borrowed mutably.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.lines.as_mut_ptr() as *mut [u8; BLOCK_BYTES],
                self.len,
            )
        }
    }
}

/// Each candidate's layer hash, block and flag, for the candidates whose block is below
/// `whole` (those whose copies are all in a uniform table).
#[inline(always)]
fn whole_blocks<'f>(
    layer: u32,
    layer_blocks: u64,
    whole: u64,
    hashes: &'f [u64],
    found: &'f mut [bool],
) -> impl Iterator<Item = (u64, u64, &'f mut bool)> {
    hashes.iter().zip(found).filter_map(move |(&h, f)| {
        let lh = layer_hash(h, layer);
        let b = block_index(lh, layer_blocks);
        (b < whole).then_some((lh, b, f))
    })
}

/// `lane_masks` as one vector: `1 << ((lo * salt) >> 27)` in each 32-bit lane, `salts`
/// being SALTS loaded once by the caller.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn lane_masks_avx2(lh: u64, salts: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let lo = _mm256_set1_epi32(lh as u32 as i32);
    _mm256_sllv_epi32(
        _mm256_set1_epi32(1),
        _mm256_srli_epi32(_mm256_mullo_epi32(lo, salts), 27),
    )
}

impl LayerTable {
    /// Where the item's block sits in this layer: its layer hash, the index in `blocks` of
    /// the block's first copy and how many copies (generations) follow; None when no
    /// fetched row holds that block.
    #[inline(always)]
    fn copies(&self, layer: u32, layer_blocks: u64, h: u64) -> Option<(u64, usize, usize)> {
        let lh = layer_hash(h, layer);
        let b = block_index(lh, layer_blocks);
        if let Some(width) = self.uniform_width {
            let first = b as usize * width;
            return (first + width <= self.blocks.len()).then_some((lh, first, width));
        }
        let segment = (b / SEGMENT_BLOCKS) as u32;
        let entry = if self.dense {
            self.segments.get(segment as usize)
        } else {
            self.segments
                .binary_search_by_key(&segment, |&(s, _, _)| s)
                .ok()
                .map(|i| &self.segments[i])
        };
        let &(_, start, width) = entry?;
        let first = start + (b % SEGMENT_BLOCKS) as usize * width;
        (first + width <= self.blocks.len()).then_some((lh, first, width))
    }

    /// Whether any generation's copy of the item's block in this layer holds the item.
    /// Branch-free over the generations: whether a candidate was seen is a coin toss for the
    /// branch predictor, and checking every copy costs less than a mispredicted early exit.
    #[inline(always)]
    fn holds(&self, layer: u32, layer_blocks: u64, h: u64) -> bool {
        let Some((lh, first, width)) = self.copies(layer, layer_blocks, h) else {
            return false;
        };
        let masks = lane_masks(lh);
        let mut hit = false;
        for block in &self.blocks.as_slice()[first..first + width] {
            hit |= block_has_masks(block, &masks);
        }
        hit
    }

    /// `holds` for every hash, with AVX2: a candidate's eight lane masks are one vector and
    /// each copy of its block one load and one test; with AVX-512 (`avx512`) for a uniform
    /// layer of even stride, one load and one test per two copies.
    ///
    /// # Safety
    /// The CPU must support AVX2, and AVX-512F when `avx512` is set.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn mark_avx2(
        &self,
        layer: u32,
        layer_blocks: u64,
        hashes: &[u64],
        found: &mut [bool],
        avx512: bool,
    ) {
        // A uniform layer (the usual case: every generation stored every segment) has one
        // copy count for all blocks; a loop of known length unrolls into straight code.
        macro_rules! uniform {
            ($($w:literal)*) => {
                match self.uniform_width {
                    // SAFETY: AVX2 is supported (this fn's contract); the width is $w.
                    $(Some($w) => return unsafe { self.mark_uniform_avx2::<$w>(layer, layer_blocks, hashes, found) },)*
                    _ => {}
                }
            };
        }
        if avx512 {
            macro_rules! uniform512 {
                ($($w:literal)*) => {
                    match self.uniform_width {
                        // SAFETY: AVX-512F and AVX2 are supported (`avx512`, this fn's
                        // contract); the width is $w.
                        $(Some($w) => return unsafe { self.mark_uniform_avx512::<$w>(layer, layer_blocks, hashes, found) },)*
                        _ => {}
                    }
                };
            }
            uniform512!(2 4 6 8);
        }
        uniform!(1 2 3 4 5 6 7 8);
        // SAFETY: AVX2 is supported (this fn's contract).
        unsafe { self.mark_any_avx2(layer, layer_blocks, hashes, found) }
    }

    /// `mark_avx2` for a uniform layer of `W` copies per block.
    ///
    /// # Safety
    /// The CPU must support AVX2; `self.uniform_width` must be `Some(W)`.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn mark_uniform_avx2<const W: usize>(
        &self,
        layer: u32,
        layer_blocks: u64,
        hashes: &[u64],
        found: &mut [bool],
    ) {
        use std::arch::x86_64::*;
        debug_assert_eq!(self.uniform_width, Some(W));
        // SAFETY: SALTS is eight u32s, 32 readable bytes.
        let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr() as *const __m256i) };
        let blocks = self.blocks.as_ptr();
        // Blocks whose W copies are all in the table (a short last segment has fewer).
        let whole = (self.blocks.len() / W) as u64;
        for (lh, b, f) in whole_blocks(layer, layer_blocks, whole, hashes, found) {
            let masks = lane_masks_avx2(lh, salts);
            // Every copy is tested, without a branch on the outcome: a branch that skips
            // copies (an OR of the copies tested first, say) is mispredicted for a share of
            // fresh candidates, and each miss also stops the next candidates' independent work
            // from overlapping this one's (14.1 us with such a test, 9.5 without, for 1,000
            // candidates new to the predictor: `cargo bench -p bloom-core --bench probe --
            // new_sets`).
            // SAFETY: b < whole, so copies b * W .. b * W + W are in the table.
            let first = unsafe { blocks.add(b as usize * W) };
            let mut hit = 0;
            for k in 0..W {
                // SAFETY: copy k < W of block b is in the table (above).
                let block = unsafe { _mm256_loadu_si256(first.add(k) as *const __m256i) };
                hit |= _mm256_testc_si256(block, masks);
            }
            *f |= hit != 0;
        }
    }

    /// `mark_avx2` for a uniform layer of even stride `S`, with AVX-512: each aligned line
    /// holds two copies of the candidate's block and takes one load and one test, where AVX2
    /// takes two of each.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX2; `self.uniform_width` must be `Some(S)`.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f")]
    unsafe fn mark_uniform_avx512<const S: usize>(
        &self,
        layer: u32,
        layer_blocks: u64,
        hashes: &[u64],
        found: &mut [bool],
    ) {
        use std::arch::x86_64::*;
        const { assert!(S.is_multiple_of(2) && S <= 8) };
        debug_assert_eq!(self.uniform_width, Some(S));
        // SAFETY: SALTS is eight u32s, 32 readable bytes.
        let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr() as *const __m256i) };
        let lines = self.blocks.as_ptr() as *const __m512i;
        let whole = (self.blocks.len() / S) as u64;
        for (lh, b, f) in whole_blocks(layer, layer_blocks, whole, hashes, found) {
            let masks = lane_masks_avx2(lh, salts);
            let masks = _mm512_broadcast_i64x4(masks);
            // Each lane's mask has one bit, so a lane holds it where `mask & lane` is not
            // zero: one test per two copies, straight from memory, gives a bit per lane; a
            // copy holds the item where its byte of `present` is all ones.
            let mut present = 0u64;
            // SAFETY: b < whole, so lines b * S / 2 .. (b + 1) * S / 2 are in the table (S is
            // even, so they start on a line).
            let first = unsafe { lines.add(b as usize * S / 2) };
            for k in 0..S / 2 {
                // SAFETY: line k < S / 2 of block b is in the table and 64-byte aligned
                // (AlignedBlocks).
                let pair = unsafe { _mm512_load_si512(first.add(k)) };
                present |= u64::from(_mm512_test_epi32_mask(masks, pair)) << (16 * k);
            }
            // Some byte of `present` is all ones where some byte of `!present` is zero (the
            // classic zero-byte test, exact for whether any is); bytes past the copies are
            // zero in `present`, so never all ones.
            let missing = !present;
            const LOW: u64 = 0x0101_0101_0101_0101;
            *f |= missing.wrapping_sub(LOW) & !missing & (LOW << 7) != 0;
        }
    }

    /// `mark_avx2` for any layer: each block's copies looked up through `copies`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[allow(unsafe_code)] // a SIMD kernel
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn mark_any_avx2(
        &self,
        layer: u32,
        layer_blocks: u64,
        hashes: &[u64],
        found: &mut [bool],
    ) {
        use std::arch::x86_64::*;
        // SAFETY: SALTS is eight u32s, 32 readable bytes.
        let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr() as *const __m256i) };
        let blocks = self.blocks.as_ptr();
        for (&h, f) in hashes.iter().zip(found.iter_mut()) {
            let Some((lh, first, width)) = self.copies(layer, layer_blocks, h) else {
                continue;
            };
            let masks = lane_masks_avx2(lh, salts);
            let mut hit = 0;
            for k in first..first + width {
                // SAFETY: `copies` checked first + width <= blocks.len().
                let block = unsafe { _mm256_loadu_si256(blocks.add(k) as *const __m256i) };
                // testc: every bit of `masks` is set in `block` (lanes are little-endian u32s).
                hit |= _mm256_testc_si256(block, masks);
            }
            *f |= hit != 0;
        }
    }
}

impl<'a> WindowView<'a> {
    /// Adds a fetched row. Rows may come in any order; malformed rows are refused.
    pub fn add_row(
        &mut self,
        layout: &GenerationLayout,
        generation: i32,
        layer: i16,
        segment: u32,
        bits: &'a [u8],
    ) -> Result<(), Error> {
        if layer == COMPACTED_LAYER {
            let row = Compacted::parse(bits)?;
            let h = row.header;
            let generations = (h.oldest_generation, h.newest_generation);
            let at = self.compacted.iter().position(|f| {
                f.generations == generations
                    && f.parts.len() == h.parts as usize
                    && f.parts[h.part as usize].is_none()
            });
            let filter = match at {
                Some(i) => &mut self.compacted[i],
                None => {
                    self.compacted.push(CompactedFilter {
                        generations,
                        parts: vec![None; h.parts as usize],
                    });
                    self.compacted.last_mut().expect("just pushed")
                }
            };
            filter.parts[h.part as usize] = Some(row);
            return Ok(());
        }
        if layer == MOVED_LAYER {
            // A marker (which layout the user's rows are in) holds no items.
            if !bits.is_empty() {
                return Err(Error::Malformed(format!(
                    "marker row of {} bytes, expected none",
                    bits.len()
                )));
            }
            return Ok(());
        }
        match check_row(layout, layer, segment, bits)? {
            Row::Exact(bits) => self.exact.extend(exact_hashes(bits)),
            Row::Segment(l) => {
                if self.rows.len() <= l {
                    self.rows.resize_with(l + 1, Vec::new);
                }
                self.rows[l].push((generation, segment, bits));
            }
        }
        Ok(())
    }

    /// Call once after the last row, before probing. Refuses a compacted filter with a part
    /// missing (`compact` writes every part in one statement): its items would read unseen.
    pub fn seal(&mut self, _layout: &GenerationLayout) -> Result<(), Error> {
        if let Some(f) = self
            .compacted
            .iter()
            .find(|f| f.parts.iter().any(Option::is_none))
        {
            return Err(Error::Malformed(format!(
                "compacted filter rows of generations {} to {}: {} of {} parts present",
                f.generations.0,
                f.generations.1,
                f.parts.iter().flatten().count(),
                f.parts.len()
            )));
        }
        self.exact_set = ExactSet::build(&self.exact);
        // A group's rows are one segment of one layer, all of its length (`add_row` checked
        // them against the layout): full segments but the layer's last, which takes only
        // its own blocks (a 10-block layer zeroed and held 48 blocks per generation).
        let group_blocks = |group: &[(i32, u32, &[u8])]| group[0].2.len() / BLOCK_BYTES;
        self.tables = self
            .rows
            .iter_mut()
            .map(|rows| {
                rows.sort_unstable_by_key(|&(g, s, _)| (s, g));
                let groups = || rows.chunk_by(|a, b| a.1 == b.1);
                let slots: usize = groups()
                    .map(|g| stride_for(g.len()) * group_blocks(g))
                    .sum();
                let mut table = LayerTable {
                    blocks: AlignedBlocks::zeroed(slots),
                    ..LayerTable::default()
                };
                let blocks = table.blocks.as_mut_slice();
                let mut start = 0;
                for group in groups() {
                    let stride = stride_for(group.len());
                    table.segments.push((group[0].1, start, stride));
                    for (column, &(_, _, bits)) in group.iter().enumerate() {
                        let (row_blocks, _) = bits.as_chunks::<BLOCK_BYTES>();
                        let copies = blocks[start + column..].iter_mut().step_by(stride);
                        for (copy, block) in copies.zip(row_blocks) {
                            *copy = *block;
                        }
                    }
                    start += stride * group_blocks(group);
                }
                table.dense = table
                    .segments
                    .iter()
                    .enumerate()
                    .all(|(i, &(s, _, _))| s as usize == i);
                let width = table.segments.first().map_or(0, |&(_, _, w)| w);
                table.uniform_width = (table.dense
                    && table.segments.iter().all(|&(_, _, w)| w == width))
                .then_some(width);
                table
            })
            .collect();
        Ok(())
    }

    /// Sets `found[i]` when the window (probably) holds `hashes[i]`; never clears it, so a
    /// caller may pass flags already set. The feed's batch probe: layer by layer over all
    /// candidates, so each layer's constants stay in registers, with AVX2 where the CPU has
    /// it (the masks and block tests of a candidate are then a few vector instructions).
    ///
    /// # Panics
    /// If `found` and `hashes` differ in length.
    pub fn contains_each(&self, layout: &GenerationLayout, hashes: &[u64], found: &mut [bool]) {
        self.contains_each_using(layout, hashes, found, true)
    }

    /// `contains_each`, with AVX-512 only if `allow_avx512` (tests compare the kernels).
    #[allow(unsafe_code)] // dispatches to the SIMD kernels
    fn contains_each_using(
        &self,
        layout: &GenerationLayout,
        hashes: &[u64],
        found: &mut [bool],
        allow_avx512: bool,
    ) {
        assert_eq!(hashes.len(), found.len(), "one flag per hash");
        self.exact_set.mark(hashes, found);
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::is_x86_feature_detected!("avx2");
        #[cfg(target_arch = "x86_64")]
        let avx512 = allow_avx512 && avx2 && std::is_x86_feature_detected!("avx512f");
        for (l, table) in self.tables.iter().enumerate() {
            if table.segments.is_empty() {
                continue;
            }
            let layer_blocks = layout.layer_blocks(l);
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has just been seen to support AVX2 (and AVX-512F where
                // `avx512` says so).
                unsafe { table.mark_avx2(l as u32, layer_blocks, hashes, found, avx512) };
                continue;
            }
            for (&h, f) in hashes.iter().zip(found.iter_mut()) {
                *f |= table.holds(l as u32, layer_blocks, h);
            }
        }
        for compacted in &self.compacted {
            compacted.mark(hashes, found);
        }
    }

    /// Blocks held in the sealed tables (tests: a read allocates only what it fetched).
    #[cfg(test)]
    pub(crate) fn table_blocks(&self) -> usize {
        self.tables.iter().map(|t| t.blocks.len()).sum()
    }

    /// Whether the window (probably) holds the item with hash `h`: one probe, portable code.
    #[inline]
    pub fn contains(&self, layout: &GenerationLayout, h: u64) -> bool {
        if self.exact_set.contains(h) || self.compacted.iter().any(|c| c.contains(h)) {
            return true;
        }
        self.tables.iter().enumerate().any(|(l, table)| {
            !table.segments.is_empty() && table.holds(l as u32, layout.layer_blocks(l), h)
        })
    }
}

#[cfg(test)]
#[allow(unsafe_code)] // the SIMD kernels are tested directly
mod tests {
    use super::*;
    use crate::generation::{FirstLayer, GenerationRows, EXACT_LAYER};
    use crate::hash::hash_i64;

    fn layout_of(first: FirstLayer) -> GenerationLayout {
        GenerationLayout::new(0.01 / 5.0, first).unwrap()
    }

    fn layout() -> GenerationLayout {
        layout_of(FirstLayer::FillsOneRow)
    }

    /// The sparse read tables answer like the rows themselves, whichever segments of which
    /// generations were fetched (dense and sparse layers, several generations per segment).
    #[test]
    fn sparse_window_answers_like_its_rows() {
        for first in FirstLayer::ALL {
            sparse_window_of(&layout_of(first));
        }
    }

    /// A compacted row and layered rows answer together: every item of either, and the
    /// batch probe agrees with the single one.
    #[test]
    fn compacted_row_joins_the_layers() {
        // Every stored version: blocks, and a static filter (xor or Elias-Fano) in one row
        // or in parts.
        let mut old: Vec<u64> = (0..50_000).map(hash_i64).collect();
        for compacted in [
            vec![crate::build_compacted_blocks(&mut old, 0.005, 1, 3).unwrap()],
            crate::build_compacted_static(&mut old, 0.005, 1, 3, usize::MAX).unwrap(),
            crate::build_compacted_static(&mut old, 0.005, 1, 3, crate::STATIC_ROW_BYTES).unwrap(),
            // Packed 11-bit slots (a 0.1% table's): one row (the AVX-512 kernel where the
            // CPU has it) and parts.
            crate::build_compacted_static(&mut old, 0.0005, 1, 3, usize::MAX).unwrap(),
            crate::build_compacted_static(&mut old, 0.0005, 1, 3, crate::STATIC_ROW_BYTES).unwrap(),
            crate::build_compacted_elias_fano(&mut old, 0.005, 1, 3, crate::STATIC_ROW_BYTES)
                .unwrap(),
        ] {
            compacted_rows_with_layers(&compacted);
        }
    }

    /// A compacted filter with a part missing is refused, not read as holding less.
    #[test]
    fn compacted_filter_missing_a_part_is_refused() {
        let mut old: Vec<u64> = (0..5_000).map(hash_i64).collect();
        let rows =
            crate::build_compacted_static(&mut old, 0.005, 1, 3, crate::STATIC_ROW_BYTES).unwrap();
        assert!(rows.len() > 2);
        let l = layout();
        let mut view = WindowView::default();
        for (part, bits) in rows.iter().enumerate().skip(1) {
            view.add_row(&l, 3, COMPACTED_LAYER, part as u32, bits)
                .unwrap();
        }
        assert!(matches!(view.seal(&l), Err(Error::Malformed(_))));
    }

    fn compacted_rows_with_layers(rows: &[Vec<u8>]) {
        let l = layout();
        let mut recent = GenerationRows::default();
        for i in 50_000..52_000 {
            recent.insert(&l, hash_i64(i)).unwrap();
        }
        let mut view = WindowView::default();
        // In reverse: rows come in any order.
        for (part, bits) in rows.iter().enumerate().rev() {
            view.add_row(&l, 3, COMPACTED_LAYER, part as u32, bits)
                .unwrap();
        }
        for (layer, segments) in recent.layers.iter().enumerate() {
            for (&s, bits) in segments {
                view.add_row(&l, 3, layer as i16, s, bits).unwrap();
            }
        }
        view.seal(&l).unwrap();
        let probe: Vec<u64> = (0..52_000)
            .chain(9_000_000..9_100_000)
            .map(hash_i64)
            .collect();
        let mut found = vec![false; probe.len()];
        view.contains_each(&l, &probe, &mut found);
        assert!(
            found[..52_000].iter().all(|&f| f),
            "a held item reads unseen"
        );
        for (i, &h) in probe.iter().enumerate() {
            assert_eq!(
                found[i],
                view.contains(&l, h),
                "batch and single probe differ"
            );
        }
        let fpr = found[52_000..].iter().filter(|&&f| f).count() as f64 / 100_000.0;
        assert!(fpr < 0.01, "fpr {fpr}");
        let mut bad = rows[0].to_vec();
        bad[0] = 0;
        assert!(WindowView::default()
            .add_row(&l, 3, COMPACTED_LAYER, 0, &bad)
            .is_err());
    }

    /// A relayout's marker row holds nothing and changes no answer; one with bytes is refused.
    #[test]
    fn marker_row_holds_nothing() {
        let l = layout();
        let mut rows = GenerationRows::default();
        for i in 0..300 {
            rows.insert(&l, hash_i64(i)).unwrap();
        }
        let probe: Vec<u64> = (0..300).chain(7_000_000..7_050_000).map(hash_i64).collect();
        let answers = |marked: bool| {
            let mut view = WindowView::default();
            if marked {
                view.add_row(&l, crate::MOVED_GENERATION, crate::MOVED_LAYER, 0, &[])
                    .unwrap();
            }
            for (layer, segments) in rows.layers.iter().enumerate() {
                for (&s, bits) in segments {
                    view.add_row(&l, 3, layer as i16, s, bits).unwrap();
                }
            }
            view.seal(&l).unwrap();
            let mut found = vec![false; probe.len()];
            view.contains_each(&l, &probe, &mut found);
            found
        };
        let plain = answers(false);
        assert!(plain[..300].iter().all(|&f| f), "a held item reads unseen");
        assert_eq!(answers(true), plain);
        assert!(WindowView::default()
            .add_row(&l, crate::MOVED_GENERATION, crate::MOVED_LAYER, 0, &[0])
            .is_err());
    }

    fn sparse_window_of(l: &GenerationLayout) {
        let generations: Vec<GenerationRows> = (0..4)
            .map(|g| {
                let mut rows = GenerationRows::default();
                for i in 0..(3000 * (g + 1)) {
                    rows.insert(l, hash_i64(g * 1_000_000 + i)).unwrap();
                }
                rows
            })
            .collect();
        for keep in [1u32, 2, 3, 7] {
            // Keep every segment whose number is a multiple of `keep` (1: all of them).
            let mut view = WindowView::default();
            let mut kept: Vec<GenerationRows> = Vec::new();
            for (g, rows) in generations.iter().enumerate() {
                let mut subset = GenerationRows::default();
                for (layer, segments) in rows.layers.iter().enumerate() {
                    for (&s, bits) in segments {
                        if s % keep == 0 {
                            view.add_row(l, g as i32, layer as i16, s, bits).unwrap();
                            subset.load(l, layer as i16, s, bits).unwrap();
                        }
                    }
                }
                kept.push(subset);
            }
            view.seal(l).unwrap();
            for i in (0..15_000).chain(5_000_000..5_020_000) {
                let h = hash_i64(i);
                let expected = kept.iter().any(|rows| rows.contains(l, h));
                assert_eq!(view.contains(l, h), expected, "keep {keep} item {i}");
            }
        }
    }

    /// Every generation count a window can have takes the uniform kernels (AVX-512 for even
    /// strides where the CPU has it, AVX2, portable): all answer as single probes do, over an
    /// aligned table whose padding copies hold nothing.
    #[test]
    fn uniform_kernels_answer_like_single_probes_for_every_width() {
        let l = layout();
        for width in 1..=8i64 {
            let generations: Vec<GenerationRows> = (0..width)
                .map(|g| {
                    let mut rows = GenerationRows::default();
                    for i in 0..600 {
                        rows.insert(&l, hash_i64(g * 1_000_000 + i)).unwrap();
                    }
                    rows
                })
                .collect();
            let mut view = WindowView::default();
            for (g, rows) in generations.iter().enumerate() {
                for (layer, segments) in rows.layers.iter().enumerate() {
                    for (&s, bits) in segments {
                        view.add_row(&l, g as i32, layer as i16, s, bits).unwrap();
                    }
                }
            }
            view.seal(&l).unwrap();
            for table in view.tables.iter().filter(|t| !t.segments.is_empty()) {
                assert_eq!(table.uniform_width, Some(stride_for(width as usize)));
                assert_eq!(table.blocks.as_ptr() as usize % 64, 0, "aligned");
            }
            let hashes: Vec<u64> = (0..width)
                .flat_map(|g| (0..600).map(move |i| hash_i64(g * 1_000_000 + i)))
                .chain((0..20_000).map(|i| hash_i64(9_000_000 + i)))
                .collect();
            let single: Vec<bool> = hashes.iter().map(|&h| view.contains(&l, h)).collect();
            assert!(single[..600 * width as usize].iter().all(|&f| f), "members");
            for allow_avx512 in [false, true] {
                let mut found = vec![false; hashes.len()];
                view.contains_each_using(&l, &hashes, &mut found, allow_avx512);
                assert_eq!(found, single, "width {width}, avx512 {allow_avx512}");
            }
            let fresh_hits = single[600 * width as usize..]
                .iter()
                .filter(|&&f| f)
                .count();
            assert!(
                fresh_hits < 20_000 / 100,
                "width {width}: {fresh_hits} false positives"
            );
        }
    }

    /// The batch probe (vector code where the CPU has it) answers exactly as one probe per
    /// candidate, over exact rows, dense and sparse layers, generations of equal and unequal
    /// sizes (uniform and mixed row counts per segment).
    #[test]
    fn batch_probe_answers_like_single_probes() {
        for first in FirstLayer::ALL {
            batch_probe_of(&layout_of(first));
        }
    }

    fn batch_probe_of(l: &GenerationLayout) {
        let sizes: [&[usize]; 2] = [&[3_000, 3_000, 3_000], &[30, 500, 2_000, 9_000]];
        for (case, sizes) in sizes.iter().enumerate() {
            let generations: Vec<GenerationRows> = sizes
                .iter()
                .enumerate()
                .map(|(g, &n)| {
                    let mut rows = GenerationRows::default();
                    for i in 0..n {
                        rows.insert(l, hash_i64(g as i64 * 1_000_000 + i as i64))
                            .unwrap();
                    }
                    rows
                })
                .collect();
            let exact: Vec<Vec<u8>> = generations
                .iter()
                .map(|rows| rows.row_bytes(EXACT_LAYER, 0))
                .collect();
            let mut view = WindowView::default();
            for (g, rows) in generations.iter().enumerate() {
                if !exact[g].is_empty() {
                    view.add_row(l, g as i32, EXACT_LAYER, 0, &exact[g])
                        .unwrap();
                }
                for (layer, segments) in rows.layers.iter().enumerate() {
                    for (&s, bits) in segments {
                        // The second case leaves holes: sparse layers, unequal row counts.
                        if case == 0 || s % 3 != 1 {
                            view.add_row(l, g as i32, layer as i16, s, bits).unwrap();
                        }
                    }
                }
            }
            view.seal(l).unwrap();
            let uniform = view
                .tables
                .iter()
                .filter(|t| t.uniform_width.is_some())
                .count();
            // Both lookups are exercised: a full layer in every generation is uniform (case 0),
            // holes make a layer sparse or of mixed row counts (case 1).
            assert!(uniform > 0 || case == 1, "a uniform layer");
            assert!(uniform < view.tables.len() || case == 0, "a mixed layer");
            let hashes: Vec<u64> = (0..4)
                .flat_map(|g| (0..9_000).map(move |i| hash_i64(g * 1_000_000 + i)))
                .chain((0..50_000).map(|i| hash_i64(7_000_000 + i)))
                .collect();
            let mut found = vec![false; hashes.len()];
            view.contains_each(l, &hashes, &mut found);
            let single: Vec<bool> = hashes.iter().map(|&h| view.contains(l, h)).collect();
            assert_eq!(found, single, "case {case}");
            assert!(found.iter().any(|&f| f) && found.iter().any(|&f| !f));
            // Flags already set stay set.
            let mut all = vec![true; hashes.len()];
            view.contains_each(l, &hashes, &mut all);
            assert!(all.iter().all(|&f| f));
        }
    }
}

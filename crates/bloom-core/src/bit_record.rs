//! The data of seen_bloom's own WAL record of an in-place write (docs/FORMAT.md, "WAL
//! records of in-place writes"): for each 32-byte block of a page that a write changed, the
//! bits it set, to be ORed in again at replay.
//!
//! A fold sets one bit in each of a block's eight 32-bit words per item (split-block Bloom),
//! so a block's new bits usually fit in eight bit indices: a fragment of 10 bytes where
//! generic WAL's fragment of offset, length and the block's bytes takes 36. A block with
//! two new bits in one word (two items into one block) is logged whole, as a mask of 32
//! bytes to OR in.
//!
//! A fragment starts with a little-endian u16: the block's offset in the page, its high bit
//! set for a mask. Then either the mask's 32 bytes, or one byte per word: the index of the
//! word's one new bit (byte `i / 8` of the word, bit `i % 8`), or [`NO_BIT`].

use crate::sbbf::BLOCK_BYTES;

/// A word's byte where it has no new bit.
pub const NO_BIT: u8 = 0xFF;
/// The offset's flag for a mask fragment.
const MASK: u16 = 0x8000;
const WORDS: usize = BLOCK_BYTES / 4;

/// Appends to `out` the fragment of the block at `offset` (below 32,768) that was `old` and
/// is now `new` (`new` holds every bit of `old`). Nothing when nothing changed.
pub fn push_fragment(
    out: &mut Vec<u8>,
    offset: usize,
    old: &[u8; BLOCK_BYTES],
    new: &[u8; BLOCK_BYTES],
) {
    debug_assert!(offset < MASK as usize, "a page offset fits 15 bits");
    let mut indices = [NO_BIT; WORDS];
    let mut changed = false;
    for (w, index) in indices.iter_mut().enumerate() {
        let word = |b: &[u8; BLOCK_BYTES]| {
            u32::from_le_bytes(b[w * 4..w * 4 + 4].try_into().expect("4 bytes"))
        };
        let set = word(new) & !word(old);
        match set.count_ones() {
            0 => {}
            1 => {
                *index = set.trailing_zeros() as u8;
                changed = true;
            }
            _ => {
                out.extend_from_slice(&(offset as u16 | MASK).to_le_bytes());
                out.extend(new.iter().zip(old).map(|(n, o)| n & !o));
                return;
            }
        }
    }
    if changed {
        out.extend_from_slice(&(offset as u16).to_le_bytes());
        out.extend_from_slice(&indices);
    }
}

/// Why a record's data cannot be replayed.
#[derive(Debug, PartialEq, Eq)]
pub enum BadFragment {
    /// Data ends inside a fragment.
    Truncated,
    /// A block that does not lie within the page.
    OutsidePage(usize),
    /// A bit index beyond its word.
    BadIndex(u8),
}

/// ORs the bits of every fragment of `data` into `page`. Checks the whole of `data` first,
/// so that a malformed record changes nothing.
pub fn apply_fragments(data: &[u8], page: &mut [u8]) -> Result<(), BadFragment> {
    for_each_fragment(data, page.len(), |_, _| {})?;
    for_each_fragment(data, page.len(), |offset, fragment| match fragment {
        Fragment::Mask(mask) => {
            for (b, m) in page[offset..offset + BLOCK_BYTES].iter_mut().zip(mask) {
                *b |= m;
            }
        }
        Fragment::Bits(indices) => {
            for (w, &i) in indices.iter().enumerate() {
                if i != NO_BIT {
                    page[offset + w * 4 + i as usize / 8] |= 1 << (i % 8);
                }
            }
        }
    })
}

/// One fragment, decoded.
pub enum Fragment<'a> {
    Mask(&'a [u8]),
    Bits(&'a [u8]),
}

/// Calls `f` with each fragment of `data` and its block's offset, each checked to lie within
/// a page of `page_len` bytes.
pub fn for_each_fragment<'a>(
    data: &'a [u8],
    page_len: usize,
    mut f: impl FnMut(usize, Fragment<'a>),
) -> Result<(), BadFragment> {
    let mut at = 0;
    while at < data.len() {
        let head = data.get(at..at + 2).ok_or(BadFragment::Truncated)?;
        let head = u16::from_le_bytes([head[0], head[1]]);
        let offset = (head & !MASK) as usize;
        if offset + BLOCK_BYTES > page_len {
            return Err(BadFragment::OutsidePage(offset));
        }
        let len = if head & MASK != 0 { BLOCK_BYTES } else { WORDS };
        let body = data
            .get(at + 2..at + 2 + len)
            .ok_or(BadFragment::Truncated)?;
        if head & MASK != 0 {
            f(offset, Fragment::Mask(body));
        } else {
            if let Some(&i) = body.iter().find(|&&i| i != NO_BIT && i >= 32) {
                return Err(BadFragment::BadIndex(i));
            }
            f(offset, Fragment::Bits(body));
        }
        at += 2 + len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sbbf::block_insert;

    fn block_with(hashes: &[u64]) -> [u8; BLOCK_BYTES] {
        let mut block = [0u8; BLOCK_BYTES];
        for &h in hashes {
            block_insert(&mut block, h);
        }
        block
    }

    /// A fold's change of a block, logged and replayed onto the block as it was, gives the
    /// block as the fold left it; one item is a 10-byte fragment.
    #[test]
    fn replay_gives_the_written_block() {
        let mut page = vec![0u8; 8192];
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for items in [1usize, 2, 3, 8, 40] {
            let old_hashes: Vec<u64> = (0..items).map(|_| next()).collect();
            let new_hashes: Vec<u64> = (0..items).map(|_| next()).collect();
            let old = block_with(&old_hashes);
            let mut new = old;
            for &h in &new_hashes {
                block_insert(&mut new, h);
            }
            let offset = 100 + items * 37;
            page[offset..offset + BLOCK_BYTES].copy_from_slice(&old);
            let mut data = Vec::new();
            push_fragment(&mut data, offset, &old, &new);
            let mut replayed = page.clone();
            apply_fragments(&data, &mut replayed).unwrap();
            assert_eq!(replayed[offset..offset + BLOCK_BYTES], new);
            // Nothing else of the page changed.
            assert_eq!(replayed[..offset], page[..offset]);
            assert_eq!(
                replayed[offset + BLOCK_BYTES..],
                page[offset + BLOCK_BYTES..]
            );
            if items == 1 && old == [0u8; BLOCK_BYTES] {
                assert_eq!(data.len(), 10);
            }
        }
    }

    #[test]
    fn one_item_into_an_empty_block_is_ten_bytes() {
        let new = block_with(&[0x1234_5678_9ABC_DEF0]);
        let mut data = Vec::new();
        push_fragment(&mut data, 4000, &[0u8; BLOCK_BYTES], &new);
        assert_eq!(data.len(), 10);
        let mut page = vec![0u8; 8192];
        apply_fragments(&data, &mut page).unwrap();
        assert_eq!(page[4000..4032], new);
    }

    #[test]
    fn two_bits_in_a_word_log_a_mask() {
        let old = [0u8; BLOCK_BYTES];
        let mut new = old;
        new[5] = 0b1010_0000;
        new[31] = 1;
        let mut data = Vec::new();
        push_fragment(&mut data, 64, &old, &new);
        assert_eq!(data.len(), 2 + BLOCK_BYTES, "offset and mask");
        let mut page = vec![0xF0u8; 8192];
        apply_fragments(&data, &mut page).unwrap();
        assert_eq!(page[64 + 5], 0xF0 | 0b1010_0000);
        assert_eq!(page[64 + 31], 0xF1);
        assert_eq!(page[64], 0xF0);
    }

    #[test]
    fn an_unchanged_block_logs_nothing() {
        let block = block_with(&[1, 2, 3]);
        let mut data = Vec::new();
        push_fragment(&mut data, 64, &block, &block);
        assert!(data.is_empty());
    }

    /// Malformed data is refused whole, before any byte of the page changes.
    #[test]
    fn malformed_data_changes_nothing() {
        let new = block_with(&[42]);
        let mut good = Vec::new();
        push_fragment(&mut good, 64, &[0u8; BLOCK_BYTES], &new);
        let mut page = vec![0u8; 8192];
        let mut truncated = good.clone();
        truncated.extend_from_slice(&good[..5]);
        assert_eq!(
            apply_fragments(&truncated, &mut page),
            Err(BadFragment::Truncated)
        );
        let mut outside = good.clone();
        outside.extend_from_slice(&8170u16.to_le_bytes());
        outside.extend_from_slice(&[NO_BIT; WORDS]);
        assert_eq!(
            apply_fragments(&outside, &mut page),
            Err(BadFragment::OutsidePage(8170))
        );
        let mut bad_index = good.clone();
        bad_index.extend_from_slice(&64u16.to_le_bytes());
        bad_index.extend_from_slice(&[32, NO_BIT, NO_BIT, NO_BIT, NO_BIT, NO_BIT, NO_BIT, NO_BIT]);
        assert_eq!(
            apply_fragments(&bad_index, &mut page),
            Err(BadFragment::BadIndex(32))
        );
        assert!(page.iter().all(|&b| b == 0));
    }
}

//! The feed filter's candidates: each element's hash, computed once per call, and the
//! result array of the unseen ones (`bloom_unseen`, `seen_bloom.unseen`).

use crate::pg::item_array::ItemArray;
use bloom_core::{hash_i64_extend, DistinctHashes};
use pgrx::pg_sys;

/// The feed filter's result: the candidates in order without the seen ones (`seen(i)` for
/// element `i`), without repeats (the first is kept) and without NULLs.
pub fn keep_unseen(
    candidates: &ItemArray,
    hashes: &CandidateHashes,
    seen: impl Fn(usize) -> bool,
) -> pg_sys::Datum {
    keep_unseen_counted(candidates, hashes, seen).0
}

/// `keep_unseen`, and how many candidates the result holds.
pub fn keep_unseen_counted(
    candidates: &ItemArray,
    hashes: &CandidateHashes,
    seen: impl Fn(usize) -> bool,
) -> (pg_sys::Datum, usize) {
    let all = hashes.all();
    // The unseen first, without a branch on the answer: for a feed's candidates whether one
    // was seen is a coin toss for the branch predictor. Each index is written, and the count
    // advances past it only if it is kept.
    let mut kept = vec![0u32; all.len()];
    let mut unseen = 0;
    for i in 0..all.len() {
        kept[unseen] = i as u32;
        unseen += usize::from(!seen(i) & !hashes.is_null(i));
    }
    // Then the first of each repeat (repeats are rare: a well-predicted branch inside).
    let mut already_kept = DistinctHashes::over(all, unseen);
    let mut distinct = 0;
    for j in 0..unseen {
        let i = kept[j];
        kept[distinct] = i;
        distinct += usize::from(already_kept.insert(i as usize));
    }
    if distinct == all.len() {
        // A feed's usual answer: every candidate is new. The array already is the result.
        if let Some(array) = candidates.unchanged() {
            return (array, distinct);
        }
    }
    kept.truncate(distinct);
    (candidates.select(&kept), distinct)
}

/// Elements hashed between two calls of `CandidateHashes::of_with`'s `between`.
const HASH_PIECE: usize = 64;

/// The hash of every element of a candidate array, computed once per call.
pub struct CandidateHashes {
    /// Element `i`'s hash; 0 in place of a NULL.
    hashes: Vec<u64>,
    /// Which elements are NULL; None when the array has none.
    nulls: Option<Vec<bool>>,
}

impl CandidateHashes {
    pub fn of(array: &ItemArray) -> CandidateHashes {
        CandidateHashes::of_with(array, |_| {})
    }

    /// `of`, calling `between(pieces)` after each piece of [`HASH_PIECE`] elements, where
    /// `pieces` is how many pieces the whole array takes.
    pub fn of_with(array: &ItemArray, mut between: impl FnMut(usize)) -> CandidateHashes {
        let pieces = array.len.div_ceil(HASH_PIECE);
        let mut hashes = Vec::with_capacity(array.len);
        // The feed's usual candidates, bigints without NULLs: hashed straight off the
        // array's data, without a datum per element.
        if let Some(values) = array.packed_int8() {
            for piece in values.chunks(HASH_PIECE) {
                hash_i64_extend(piece, &mut hashes);
                between(pieces);
            }
            return CandidateHashes {
                hashes,
                nulls: None,
            };
        }
        let mut nulls = None;
        for (i, item) in array.items().enumerate() {
            match item {
                Some(item) => hashes.push(item.hash()),
                None => {
                    hashes.push(0);
                    nulls.get_or_insert_with(|| vec![false; array.len])[i] = true;
                }
            }
            if (i + 1) % HASH_PIECE == 0 || i + 1 == array.len {
                between(pieces);
            }
        }
        CandidateHashes { hashes, nulls }
    }

    /// Every element's hash, 0 in place of a NULL (see `is_null`).
    pub fn all(&self) -> &[u64] {
        &self.hashes
    }

    #[inline]
    pub fn is_null(&self, i: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n[i])
    }

    /// Element `i`'s hash, None for NULL.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        (!self.is_null(i)).then(|| self.hashes[i])
    }
}

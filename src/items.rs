//! Items: which SQL types a filter accepts and the canonical bytes each is hashed over
//! (docs/FORMAT.md): integers as little-endian i64, text as UTF-8, uuid as its 16 bytes,
//! bytea as is. Every candidate is hashed exactly once.

use crate::errors::{bad_argument, unsupported_type};
use crate::filter_arg::varlena_bytes;
use bloom_core::{hash_bytes, hash_i64, hash_i64_extend, DistinctHashes};
use pgrx::pg_sys;
use std::borrow::Cow;

/// An item type the filter can hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemType {
    Int2,
    Int4,
    Int8,
    /// text, varchar and other varlenas hashed by their bytes (text, bytea).
    Bytes,
    Uuid,
}

/// Item families (bloom_core::ItemFamily): integers of any width hash alike, so do text,
/// varchar and bytea; the read paths refuse a mix of families (42804) instead of answering
/// "nothing seen" for every candidate.
pub use bloom_core::ItemFamily;

impl ItemType {
    pub fn family(self) -> ItemFamily {
        match self {
            ItemType::Int2 | ItemType::Int4 | ItemType::Int8 => ItemFamily::Integer,
            ItemType::Bytes => ItemFamily::Bytes,
            ItemType::Uuid => ItemFamily::Uuid,
        }
    }

    pub fn from_oid(oid: pg_sys::Oid) -> Option<ItemType> {
        match oid {
            pg_sys::INT2OID => Some(ItemType::Int2),
            pg_sys::INT4OID => Some(ItemType::Int4),
            pg_sys::INT8OID => Some(ItemType::Int8),
            pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => Some(ItemType::Bytes),
            pg_sys::UUIDOID => Some(ItemType::Uuid),
            _ => None,
        }
    }

    /// typlen, typbyval and typalign of the built-in types this covers (pg_type's fixed
    /// rows), without a catalog cache lookup on every call.
    pub(crate) fn storage(self) -> (i16, bool, std::ffi::c_char) {
        let (len, byval, align) = match self {
            ItemType::Int2 => (2, true, b's'),
            ItemType::Int4 => (4, true, b'i'),
            ItemType::Int8 => (8, true, b'd'),
            ItemType::Bytes => (-1, false, b'i'),
            ItemType::Uuid => (16, false, b'c'),
        };
        (len, byval, align as std::ffi::c_char)
    }

    /// The item type for `oid`, or a 42804 error naming `function`.
    pub fn require(oid: pg_sys::Oid, function: &str) -> ItemType {
        ItemType::from_oid(oid).unwrap_or_else(|| unsupported_type(function, &type_name(oid)))
    }

    /// The canonical bytes a non-null datum is hashed over (docs/FORMAT.md).
    ///
    /// # Safety
    /// `datum` must be a valid, non-null datum of this type.
    #[inline]
    pub unsafe fn canonical_bytes<'a>(self, datum: pg_sys::Datum) -> Cow<'a, [u8]> {
        unsafe {
            match self {
                ItemType::Int2 | ItemType::Int4 | ItemType::Int8 => {
                    Cow::Owned(self.as_i64(datum).to_le_bytes().to_vec())
                }
                ItemType::Bytes => Cow::Borrowed(varlena_bytes(datum)),
                ItemType::Uuid => {
                    Cow::Borrowed(std::slice::from_raw_parts(datum.cast_mut_ptr::<u8>(), 16))
                }
            }
        }
    }

    #[inline]
    fn as_i64(self, datum: pg_sys::Datum) -> i64 {
        match self {
            ItemType::Int2 => datum.value() as i16 as i64,
            ItemType::Int4 => datum.value() as i32 as i64,
            _ => datum.value() as i64,
        }
    }

    /// The hash of a non-null datum of this type.
    ///
    /// # Safety
    /// `datum` must be a valid, non-null datum of this type.
    #[inline]
    pub unsafe fn hash(self, datum: pg_sys::Datum) -> u64 {
        unsafe {
            match self {
                ItemType::Int2 | ItemType::Int4 | ItemType::Int8 => hash_i64(self.as_i64(datum)),
                _ => hash_bytes(&self.canonical_bytes(datum)),
            }
        }
    }
}

/// The feed filter's result: the candidates in order without the seen ones (`seen(i)` for
/// element `i`), without repeats (the first is kept) and without NULLs.
pub fn keep_unseen(
    candidates: &ItemArray,
    hashes: &CandidateHashes,
    seen: impl Fn(usize) -> bool,
) -> pg_sys::Datum {
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
        if let Some(array) = candidates.as_selected {
            return array;
        }
    }
    kept.truncate(distinct);
    candidates.select(&kept)
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
        unsafe {
            // The feed's usual candidates, bigints without NULLs: hashed straight off the
            // array's data, without a datum per element.
            if let (Elements::Packed { data, stride: 8 }, ItemType::Int8) =
                (&array.elements, array.item_type)
            {
                // SAFETY: a packed array of `len` 8-byte elements starts at `data`.
                let values = std::slice::from_raw_parts(*data as *const [u8; 8], array.len);
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
            for (i, datum) in array.elements().enumerate() {
                match datum {
                    Some(d) => hashes.push(array.item_type.hash(d)),
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

/// The SQL name of a type, for messages.
pub fn type_name(oid: pg_sys::Oid) -> String {
    unsafe {
        let name = pg_sys::format_type_be(oid);
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    }
}

/// A one-dimensional array argument, read in place when its elements are fixed-length and
/// it has no NULLs (the feed's bigint and uuid candidates), else taken apart.
pub struct ItemArray {
    pub element_type: pg_sys::Oid,
    pub item_type: ItemType,
    pub len: usize,
    typlen: i16,
    typbyval: bool,
    typalign: std::ffi::c_char,
    elements: Elements,
    /// The array itself when it is exactly what `select` of all its elements would build (one
    /// dimension from 1, no NULLs, packed): returned as it is when nothing is dropped.
    as_selected: Option<pg_sys::Datum>,
}

enum Elements {
    /// Elements packed `stride` bytes apart from `data`, none NULL.
    Packed { data: *const u8, stride: usize },
    /// From deconstruct_array: element datums and null flags.
    Deconstructed {
        datums: *mut pg_sys::Datum,
        nulls: *mut bool,
    },
}

/// Header bytes of a one-dimensional array without a null bitmap (ARR_OVERHEAD_NONULLS(1)):
/// the 16-byte ArrayType, one dimension and one lower bound, MAXALIGNed.
const ONE_DIM_HEADER: usize = (std::mem::size_of::<pg_sys::ArrayType>() + 8 + 7) & !7;
// `select` writes every header byte itself: the header must have no padding.
const _: () = assert!(ONE_DIM_HEADER == std::mem::size_of::<pg_sys::ArrayType>() + 8);

/// Bytes between consecutive fixed-length elements: the length rounded up to the alignment.
fn element_stride(typlen: i16, typalign: std::ffi::c_char) -> usize {
    let align = match typalign as u8 {
        b'd' => 8,
        b'i' => 4,
        b's' => 2,
        _ => 1,
    };
    (typlen as usize).next_multiple_of(align)
}

impl ItemArray {
    /// Reads an array datum; multi-dimensional arrays are refused (22023) and element types
    /// the filter cannot hash are refused (42804).
    ///
    /// # Safety
    /// `datum` must be a non-null array datum.
    pub unsafe fn from_datum(datum: pg_sys::Datum, function: &str) -> ItemArray {
        unsafe {
            let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            let ndim = (*array).ndim;
            if ndim > 1 {
                bad_argument(format!(
                    "{function} expects a one-dimensional array, got {ndim} dimensions"
                ));
            }
            let element_type = (*array).elemtype;
            let item_type = ItemType::require(element_type, function);
            let (typlen, typbyval, typalign) = item_type.storage();
            let mut array_data = ItemArray {
                element_type,
                item_type,
                len: 0,
                typlen,
                typbyval,
                typalign,
                elements: Elements::Packed {
                    data: std::ptr::null(),
                    stride: 1,
                },
                as_selected: None,
            };
            // dataoffset 0: no null bitmap, the data right after the one-dimension header.
            if typlen > 0 && (*array).dataoffset == 0 {
                if ndim == 1 {
                    let dims = (array as *const u8).add(std::mem::size_of::<pg_sys::ArrayType>())
                        as *const i32;
                    array_data.len = (*dims).max(0) as usize;
                    array_data.elements = Elements::Packed {
                        data: (array as *const u8).add(ONE_DIM_HEADER),
                        stride: element_stride(typlen, typalign),
                    };
                    let lower_bound = *dims.add(1);
                    if lower_bound == 1 && array_data.len > 0 {
                        array_data.as_selected = Some(pg_sys::Datum::from(array));
                    }
                }
                return array_data;
            }
            let mut datums: *mut pg_sys::Datum = std::ptr::null_mut();
            let mut nulls: *mut bool = std::ptr::null_mut();
            let mut len: i32 = 0;
            pg_sys::deconstruct_array(
                array,
                element_type,
                typlen as i32,
                typbyval,
                typalign,
                &mut datums,
                &mut nulls,
                &mut len,
            );
            array_data.len = len as usize;
            array_data.elements = Elements::Deconstructed { datums, nulls };
            array_data
        }
    }

    /// Element `i` (below `len`), None for NULL.
    #[inline]
    fn element(&self, i: usize) -> Option<pg_sys::Datum> {
        unsafe {
            match self.elements {
                Elements::Packed { data, stride } => {
                    let at = data.add(i * stride);
                    Some(if !self.typbyval {
                        pg_sys::Datum::from(at)
                    } else {
                        match self.typlen {
                            2 => pg_sys::Datum::from((at as *const i16).read_unaligned()),
                            4 => pg_sys::Datum::from((at as *const i32).read_unaligned()),
                            _ => pg_sys::Datum::from((at as *const i64).read_unaligned()),
                        }
                    })
                }
                Elements::Deconstructed { datums, nulls } => {
                    if *nulls.add(i) {
                        None
                    } else {
                        Some(*datums.add(i))
                    }
                }
            }
        }
    }

    /// Whether any element is not NULL (a packed array has no NULLs).
    pub fn has_items(&self) -> bool {
        match self.elements {
            Elements::Packed { .. } => self.len > 0,
            Elements::Deconstructed { .. } => self.elements().any(|e| e.is_some()),
        }
    }

    /// The element datums, None for NULL.
    pub fn elements(&self) -> impl Iterator<Item = Option<pg_sys::Datum>> + '_ {
        (0..self.len).map(move |i| self.element(i))
    }

    /// A new one-dimensional array of this element type holding elements `indexes` (none
    /// NULL), in that order. Packed elements are copied as bytes into the new array.
    pub fn select(&self, indexes: &[u32]) -> pg_sys::Datum {
        unsafe {
            if indexes.is_empty() {
                return pg_sys::Datum::from(pg_sys::construct_empty_array(self.element_type));
            }
            if let Elements::Packed { data, stride } = self.elements {
                let total = ONE_DIM_HEADER + indexes.len() * stride;
                // Not zeroed: the header's fields and every element's bytes are written below
                // (the one-dimension header has no padding).
                let array = pg_sys::palloc(total) as *mut pg_sys::ArrayType;
                pgrx::set_varsize_4b(array as *mut pg_sys::varlena, total as i32);
                (*array).ndim = 1;
                (*array).dataoffset = 0;
                (*array).elemtype = self.element_type;
                let dims =
                    (array as *mut u8).add(std::mem::size_of::<pg_sys::ArrayType>()) as *mut i32;
                *dims = indexes.len() as i32;
                *dims.add(1) = 1;
                let out = (array as *mut u8).add(ONE_DIM_HEADER);
                if stride == 8 {
                    // bigint items: a load and a store each, where a copy of a length known
                    // only at run time is a call to memcpy per element.
                    let (from, to) = (data as *const u64, out as *mut u64);
                    for (k, &i) in indexes.iter().enumerate() {
                        to.add(k)
                            .write_unaligned(from.add(i as usize).read_unaligned());
                    }
                } else {
                    for (k, &i) in indexes.iter().enumerate() {
                        std::ptr::copy_nonoverlapping(
                            data.add(i as usize * stride),
                            out.add(k * stride),
                            stride,
                        );
                    }
                }
                return pg_sys::Datum::from(array);
            }
            let datums: Vec<pg_sys::Datum> = indexes
                .iter()
                .map(|&i| {
                    self.element(i as usize)
                        .expect("selected elements are not NULL")
                })
                .collect();
            let array = pg_sys::construct_array(
                datums.as_ptr() as *mut pg_sys::Datum,
                datums.len() as i32,
                self.element_type,
                self.typlen as i32,
                self.typbyval,
                self.typalign,
            );
            pg_sys::Datum::from(array)
        }
    }
}

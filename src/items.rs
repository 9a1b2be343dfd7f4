//! Items: which SQL types a filter accepts and the canonical bytes each is hashed over
//! (docs/FORMAT.md): integers as little-endian i64, text as UTF-8, uuid as its 16 bytes,
//! bytea as is. Every candidate is hashed exactly once.

use crate::errors::{bad_argument, unsupported_type};
use crate::filter_arg::varlena_bytes;
use bloom_core::{hash_bytes, hash_i64, DistinctHashes};
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

impl ItemType {
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
/// element `i`), without repeats (the first is kept) and without NULLs. `hashes[i]` is the
/// hash of element `i` (None for NULL).
pub fn keep_unseen(
    candidates: &ItemArray,
    hashes: &[Option<u64>],
    seen: impl Fn(usize) -> bool,
) -> pg_sys::Datum {
    let mut kept = Vec::with_capacity(candidates.len);
    let mut already_kept = DistinctHashes::with_capacity(candidates.len);
    for (i, candidate) in candidates.elements().enumerate() {
        let (Some(candidate), Some(h)) = (candidate, hashes[i]) else {
            continue;
        };
        if !seen(i) && already_kept.insert(h) {
            kept.push(candidate);
        }
    }
    candidates.build_like(&kept)
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

/// A one-dimensional array argument taken apart: element datums and null flags.
pub struct ItemArray {
    pub element_type: pg_sys::Oid,
    pub item_type: ItemType,
    pub datums: *mut pg_sys::Datum,
    pub nulls: *mut bool,
    pub len: usize,
    typlen: i16,
    typbyval: bool,
    typalign: std::ffi::c_char,
}

impl ItemArray {
    /// Deconstructs an array datum; multi-dimensional arrays are refused (22023) and element
    /// types the filter cannot hash are refused (42804).
    ///
    /// # Safety
    /// `datum` must be a non-null array datum.
    pub unsafe fn from_datum(datum: pg_sys::Datum, function: &str) -> ItemArray {
        unsafe {
            let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            if (*array).ndim > 1 {
                bad_argument(format!(
                    "{function} expects a one-dimensional array, got {} dimensions",
                    (*array).ndim
                ));
            }
            let element_type = (*array).elemtype;
            let item_type = ItemType::require(element_type, function);
            let mut typlen = 0i16;
            let mut typbyval = false;
            let mut typalign: std::ffi::c_char = 0;
            pg_sys::get_typlenbyvalalign(element_type, &mut typlen, &mut typbyval, &mut typalign);
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
            ItemArray {
                element_type,
                item_type,
                datums,
                nulls,
                len: len as usize,
                typlen,
                typbyval,
                typalign,
            }
        }
    }

    /// The element datums and their null flags.
    pub fn elements(&self) -> impl Iterator<Item = Option<pg_sys::Datum>> + '_ {
        (0..self.len).map(move |i| unsafe {
            if *self.nulls.add(i) {
                None
            } else {
                Some(*self.datums.add(i))
            }
        })
    }

    /// A new one-dimensional array of this element type holding `datums`.
    pub fn build_like(&self, datums: &[pg_sys::Datum]) -> pg_sys::Datum {
        unsafe {
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

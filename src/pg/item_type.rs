//! Item types: which SQL types a filter accepts and the canonical bytes each is hashed over
//! (docs/FORMAT.md): integers as little-endian i64, text as UTF-8, uuid as its 16 bytes,
//! bytea as is.

use crate::pg::errors::unsupported_type;
use crate::pg::varlena::varlena_bytes;
use bloom_core::{hash_bytes, hash_i64};
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
        // SAFETY: `datum` is of this type (the contract): a varlena for Bytes, a pointer to
        // 16 bytes for Uuid, a by-value integer otherwise.
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
        // SAFETY: as in `canonical_bytes`, which this calls with the same contract.
        unsafe {
            match self {
                ItemType::Int2 | ItemType::Int4 | ItemType::Int8 => hash_i64(self.as_i64(datum)),
                _ => hash_bytes(&self.canonical_bytes(datum)),
            }
        }
    }
}

/// A non-null datum of a type the filters hash, with that type.
#[derive(Clone, Copy)]
pub struct Item {
    /// The SQL type of the datum.
    pub oid: pg_sys::Oid,
    pub item_type: ItemType,
    datum: pg_sys::Datum,
}

impl Item {
    /// # Safety
    /// `datum` must be a valid, non-null datum of type `oid`, which hashes as `item_type`,
    /// and stay valid while the Item is used.
    pub unsafe fn new(oid: pg_sys::Oid, item_type: ItemType, datum: pg_sys::Datum) -> Item {
        Item {
            oid,
            item_type,
            datum,
        }
    }

    /// The hash the item is stored under.
    #[inline]
    pub fn hash(&self) -> u64 {
        // SAFETY: `datum` is a non-null datum of `item_type` (Item::new's contract).
        unsafe { self.item_type.hash(self.datum) }
    }

    /// The canonical bytes the item is hashed over (docs/FORMAT.md).
    pub fn canonical_bytes(&self) -> Cow<'_, [u8]> {
        // SAFETY: as in `hash`.
        unsafe { self.item_type.canonical_bytes(self.datum) }
    }

    /// Appends the canonical bytes to `out` (no allocation of their own).
    pub fn push_canonical_bytes(&self, out: &mut Vec<u8>) {
        match self.as_i64() {
            Some(v) => out.extend_from_slice(&v.to_le_bytes()),
            None => out.extend_from_slice(&self.canonical_bytes()),
        }
    }

    /// The value of an integer item.
    pub fn as_i64(&self) -> Option<i64> {
        matches!(
            self.item_type,
            ItemType::Int2 | ItemType::Int4 | ItemType::Int8
        )
        .then(|| self.item_type.as_i64(self.datum))
    }

    /// A copy of the datum in the current memory context (a varlena detoasted), for a
    /// caller that keeps it past the source's life.
    pub fn copied_datum(&self) -> pg_sys::Datum {
        let (len, byval, _) = self.item_type.storage();
        // SAFETY: a datum of this type (Item::new's contract).
        unsafe { copy_datum(self.datum, len, byval) }
    }

    /// The datum, for a caller that hands it to PostgreSQL as a value of type `oid`.
    pub fn datum(&self) -> pg_sys::Datum {
        self.datum
    }
}

/// The SQL name of a type, for messages.
pub fn type_name(oid: pg_sys::Oid) -> String {
    // SAFETY: format_type_be returns a palloc'd NUL-terminated name (or "???" for an unknown OID).
    unsafe {
        let name = pg_sys::format_type_be(oid);
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    }
}

/// A copy of `datum` in the current memory context (what datumCopy does).
///
/// # Safety
/// `datum` must be a value of a type of length `len` (-1: varlena), by value if `byval`.
pub unsafe fn copy_datum(datum: pg_sys::Datum, len: i16, byval: bool) -> pg_sys::Datum {
    if byval {
        return datum;
    }
    // SAFETY: the contract: a varlena for len -1, else `len` bytes, copied into palloc'd
    // memory.
    unsafe {
        if len == -1 {
            pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr()))
        } else {
            let copy = pg_sys::palloc(len as usize);
            std::ptr::copy_nonoverlapping(
                datum.cast_mut_ptr::<u8>(),
                copy as *mut u8,
                len as usize,
            );
            pg_sys::Datum::from(copy)
        }
    }
}

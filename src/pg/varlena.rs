//! Varlena values' bytes in and out of PostgreSQL: a `bloom`, `bytea` or `text` read as a
//! byte slice (detoasted once), and new varlenas written from bytes.

use bloom_core::Bloom;
use pgrx::pg_sys;
use pgrx::varlena::{set_varsize_4b, vardata_any, varsize_any_exhdr};

/// The payload of a detoasted (possibly short-header) varlena.
///
/// # Safety
/// `v` must point to a detoasted varlena that outlives `'a`.
pub unsafe fn payload<'a>(v: *const pg_sys::varlena) -> &'a [u8] {
    // SAFETY: a detoasted varlena's header gives the length of the data that follows it.
    unsafe { std::slice::from_raw_parts(vardata_any(v) as *const u8, varsize_any_exhdr(v)) }
}

/// The bytes of a varlena datum, detoasted once; valid for the current memory context's life.
///
/// # Safety
/// `datum` must be a non-null varlena datum valid for `'a`.
pub unsafe fn varlena_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: the contract; pg_detoast_datum_packed returns the datum itself or a palloc'd
    // copy in the current context.
    unsafe { payload(pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr())) }
}

/// A new varlena of `len` payload bytes in the current memory context, filled by `fill`.
fn new_varlena(len: usize, fill: impl FnOnce(&mut [u8])) -> pg_sys::Datum {
    let total = len + pg_sys::VARHDRSZ;
    // SAFETY: palloc returns `total` writable bytes (or raises); the header is set before the
    // payload, which `fill` writes whole through a slice of exactly `len` bytes.
    unsafe {
        let v = pg_sys::palloc(total) as *mut pg_sys::varlena;
        set_varsize_4b(v, total as i32);
        fill(std::slice::from_raw_parts_mut(
            (v as *mut u8).add(pg_sys::VARHDRSZ),
            len,
        ));
        pg_sys::Datum::from(v)
    }
}

/// A new `bloom` varlena holding `filter`'s encoding.
pub fn bloom_datum(filter: &Bloom) -> pg_sys::Datum {
    new_varlena(filter.encoded_len(), |out| filter.encode_into(out))
}

/// A new varlena (of any varlena type: bloom or bytea) holding a copy of `bytes`.
pub fn varlena_datum(bytes: &[u8]) -> pg_sys::Datum {
    new_varlena(bytes.len(), |out| out.copy_from_slice(bytes))
}

/// The first `len` payload bytes (or fewer, when the value is shorter) of a varlena datum:
/// only the TOAST chunks they lie in are read.
///
/// # Safety
/// `datum` must be a non-null varlena datum valid for `'a`.
pub unsafe fn varlena_prefix<'a>(datum: pg_sys::Datum, len: usize) -> &'a [u8] {
    // SAFETY: the contract; pg_detoast_datum_slice returns a detoasted varlena (the datum
    // itself or a palloc'd copy in the current context) of at most `len` payload bytes.
    unsafe {
        payload(pg_sys::pg_detoast_datum_slice(
            datum.cast_mut_ptr(),
            0,
            len as i32,
        ))
    }
}

//! Getting a `bloom` value's bytes in and out of a call.
//!
//! Reading: the value is detoasted once per call. For the per-row form
//! (`WHERE NOT bloom_contains(f.seen, c.id)` over many candidate rows) PostgreSQL hands the
//! function the same TOAST pointer on every row and does not keep the detoasted copy, so
//! [`cached_filter_bytes`] keeps it in the call site's `fn_extra`, keyed on the pointer's
//! toast relation and value id, as PostGIS does for geometries.

use crate::errors::OrRaise;
use bloom_core::{Bloom, BloomView};
use pgrx::pg_sys;
use pgrx::varlena::{
    set_varsize_4b, varatt_is_1b_e, vardata_any, varsize_any_exhdr, vartag_external,
};

/// The payload of a detoasted (possibly short-header) varlena.
unsafe fn payload<'a>(v: *const pg_sys::varlena) -> &'a [u8] {
    unsafe { std::slice::from_raw_parts(vardata_any(v) as *const u8, varsize_any_exhdr(v)) }
}

/// The bytes of a varlena argument, detoasted once; valid for the current call.
///
/// # Safety
/// `datum` must be a non-null varlena datum of the current call.
pub unsafe fn varlena_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    unsafe { payload(pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr())) }
}

/// `fn_extra` of a call site that reads one stored filter many times: the detoasted copy
/// (in `fn_mcxt`) and its parsed view.
struct DetoastCache {
    key: (pg_sys::Oid, pg_sys::Oid),
    detoasted: *mut pg_sys::varlena,
    /// Borrows `detoasted`, which lives as long as this cache.
    view: BloomView<'static>,
}

/// The (toast relation, value id) of an on-disk TOAST pointer, or None for any other datum.
unsafe fn toast_pointer_key(v: *const pg_sys::varlena) -> Option<(pg_sys::Oid, pg_sys::Oid)> {
    unsafe {
        if !varatt_is_1b_e(v) || vartag_external(v) as u32 != pg_sys::vartag_external::VARTAG_ONDISK
        {
            return None;
        }
        // struct varatt_external follows the two header bytes: rawsize, extinfo, valueid, toastrelid.
        let external = (v as *const u8).add(2);
        let value_id = std::ptr::read_unaligned(external.add(8) as *const u32);
        let toast_relid = std::ptr::read_unaligned(external.add(12) as *const u32);
        Some((pg_sys::Oid::from(toast_relid), pg_sys::Oid::from(value_id)))
    }
}

/// A parsed `bloom` argument; a filter stored out of line is fetched and parsed once per call
/// site and kept while the same stored value comes back (a TOAST value id is not reused while
/// a statement can still see the old value).
///
/// # Safety
/// `fcinfo` must be the live call's and `datum` one of its non-null `bloom` arguments.
pub unsafe fn cached_filter_view<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    datum: pg_sys::Datum,
) -> BloomView<'a> {
    unsafe {
        let v = datum.cast_mut_ptr::<pg_sys::varlena>();
        let flinfo = (*fcinfo).flinfo;
        let key = match toast_pointer_key(v) {
            Some(key) if !flinfo.is_null() => key,
            _ => return BloomView::parse(varlena_bytes(datum)).or_raise(),
        };
        let cache = (*flinfo).fn_extra as *mut DetoastCache;
        if !cache.is_null() && (*cache).key == key {
            return (*cache).view;
        }
        let mcxt = (*flinfo).fn_mcxt;
        let old = pg_sys::MemoryContextSwitchTo(mcxt);
        let detoasted = pg_sys::detoast_external_attr(v);
        pg_sys::MemoryContextSwitchTo(old);
        let view: BloomView<'static> = BloomView::parse(payload(detoasted)).or_raise();
        if cache.is_null() {
            let fresh = pg_sys::MemoryContextAlloc(mcxt, std::mem::size_of::<DetoastCache>())
                as *mut DetoastCache;
            fresh.write(DetoastCache {
                key,
                detoasted,
                view,
            });
            (*flinfo).fn_extra = fresh as *mut std::ffi::c_void;
        } else {
            pg_sys::pfree((*cache).detoasted as *mut std::ffi::c_void);
            cache.write(DetoastCache {
                key,
                detoasted,
                view,
            });
        }
        view
    }
}

/// A new `bloom` varlena in the current memory context holding `filter`'s encoding.
pub fn bloom_datum(filter: &Bloom) -> pg_sys::Datum {
    let len = filter.encoded_len();
    unsafe {
        let total = len + pg_sys::VARHDRSZ;
        let v = pg_sys::palloc(total) as *mut pg_sys::varlena;
        set_varsize_4b(v, total as i32);
        let out = std::slice::from_raw_parts_mut((v as *mut u8).add(pg_sys::VARHDRSZ), len);
        filter.encode_into(out);
        pg_sys::Datum::from(v)
    }
}

/// A new varlena (of any varlena type: bloom or bytea) holding a copy of `bytes`.
pub fn varlena_datum(bytes: &[u8]) -> pg_sys::Datum {
    unsafe {
        let total = bytes.len() + pg_sys::VARHDRSZ;
        let v = pg_sys::palloc(total) as *mut pg_sys::varlena;
        set_varsize_4b(v, total as i32);
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            (v as *mut u8).add(pg_sys::VARHDRSZ),
            bytes.len(),
        );
        pg_sys::Datum::from(v)
    }
}

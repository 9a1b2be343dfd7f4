//! The `bloom` type's ways in and out: text (`\x` hex), binary send/recv (the raw bytes) and
//! the validated cast from bytea. Every way in validates the whole value (22P02 otherwise).

use crate::errors::{raise, OrRaise};
use crate::filter_arg::{varlena_bytes, varlena_datum};
use crate::v1::{arg, v1_function};
use bloom_core::{from_text, to_text, BloomView, Error};
use pgrx::pg_sys;

/// Validates untrusted bytes as a whole filter and returns them as a new `bloom` datum.
fn validated_bloom(bytes: &[u8]) -> pg_sys::Datum {
    BloomView::parse_validated(bytes).or_raise();
    varlena_datum(bytes)
}

v1_function!(bloom_in, pg_finfo_bloom_in, |fcinfo| {
    let cstr = std::ffi::CStr::from_ptr(arg(fcinfo, 0).unwrap().cast_mut_ptr());
    let text = match cstr.to_str() {
        Ok(s) => s,
        Err(_) => raise(Error::Malformed("bloom input is not valid UTF-8".into())),
    };
    validated_bloom(&from_text(text).or_raise())
});

v1_function!(bloom_out, pg_finfo_bloom_out, |fcinfo| {
    let bytes = varlena_bytes(arg(fcinfo, 0).unwrap());
    let text = to_text(bytes);
    let out = pg_sys::palloc(text.len() + 1) as *mut u8;
    std::ptr::copy_nonoverlapping(text.as_ptr(), out, text.len());
    *out.add(text.len()) = 0;
    pg_sys::Datum::from(out)
});

v1_function!(bloom_recv, pg_finfo_bloom_recv, |fcinfo| {
    let buf = arg(fcinfo, 0)
        .unwrap()
        .cast_mut_ptr::<pg_sys::StringInfoData>();
    let start = (*buf).cursor as usize;
    let end = (*buf).len as usize;
    let bytes = std::slice::from_raw_parts(((*buf).data as *const u8).add(start), end - start);
    let datum = validated_bloom(bytes);
    (*buf).cursor = (*buf).len;
    datum
});

v1_function!(bloom_send, pg_finfo_bloom_send, |fcinfo| {
    varlena_datum(varlena_bytes(arg(fcinfo, 0).unwrap()))
});

v1_function!(bloom_from_bytea, pg_finfo_bloom_from_bytea, |fcinfo| {
    validated_bloom(varlena_bytes(arg(fcinfo, 0).unwrap()))
});

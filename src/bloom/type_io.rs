//! The `bloom` type's ways in and out: text (`\x` hex), binary send/recv (the raw bytes) and
//! the validated cast from bytea. Every way in validates the whole value (22P02 otherwise).

use crate::pg::errors::{raise, OrRaise};
use crate::pg::v1::v1_function;
use crate::pg::varlena::varlena_datum;
use bloom_core::{from_text, to_text, BloomView, Error};
use pgrx::pg_sys;

/// Validates untrusted bytes as a whole filter and returns them as a new `bloom` datum.
fn validated_bloom(bytes: &[u8]) -> pg_sys::Datum {
    BloomView::parse_validated(bytes).or_raise();
    varlena_datum(bytes)
}

/// A new cstring in the current memory context.
fn cstring_datum(text: &str) -> pg_sys::Datum {
    let c = std::ffi::CString::new(text).expect("hex text has no NUL bytes");
    // SAFETY: pstrdup copies a NUL-terminated string into palloc'd memory.
    pg_sys::Datum::from(unsafe { pg_sys::pstrdup(c.as_ptr()) })
}

v1_function!(bloom_in, pg_finfo_bloom_in, |args| {
    let text = match args.cstring(0).unwrap().to_str() {
        Ok(s) => s,
        Err(_) => raise(Error::Malformed("bloom input is not valid UTF-8".into())),
    };
    validated_bloom(&from_text(text).or_raise())
});

v1_function!(bloom_out, pg_finfo_bloom_out, |args| {
    cstring_datum(&to_text(args.bytes(0).unwrap()))
});

v1_function!(bloom_recv, pg_finfo_bloom_recv, |args| {
    validated_bloom(args.received_bytes(0).unwrap())
});

v1_function!(bloom_send, pg_finfo_bloom_send, |args| {
    varlena_datum(args.bytes(0).unwrap())
});

v1_function!(bloom_from_bytea, pg_finfo_bloom_from_bytea, |args| {
    validated_bloom(args.bytes(0).unwrap())
});

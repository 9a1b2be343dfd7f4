//! The internal functions of `seen_bloom.compact` (sql/tracking.sql): a heavy user's window
//! built into one compacted filter row (bloom_core::build_compacted), the header a stale row
//! is found by, and the row's modelled false-positive rate (`stats`).

use crate::pg::errors::OrRaise;
use crate::pg::v1::v1_function;
use crate::pg::varlena::{varlena_datum, varlena_prefix};
use pgrx::pg_sys;

// seen_bloom._compacted(hashes bigint[], error_rate float8, oldest int, newest int) -> bytea
v1_function!(
    seen_bloom__compacted,
    pg_finfo_seen_bloom__compacted,
    |args| {
        if (0..4).any(|i| args.is_null(i)) {
            return args.return_null();
        }
        let items = args.items(0).unwrap();
        let mut hashes: Vec<u64> = match items.packed_int8() {
            Some(packed) => packed.iter().map(|b| u64::from_ne_bytes(*b)).collect(),
            None => items
                .items()
                .flatten()
                .filter_map(|item| item.as_i64())
                .map(|h| h as u64)
                .collect(),
        };
        let bits = bloom_core::build_compacted(
            &mut hashes,
            args.float8(1).unwrap(),
            args.int4(2).unwrap(),
            args.int4(3).unwrap(),
        )
        .or_raise();
        varlena_datum(&bits)
    }
);

// seen_bloom._compacted_oldest(bits bytea) -> int: the oldest generation a compacted row's
// items came from (its header, read without the rest of the value).
v1_function!(
    seen_bloom__compacted_oldest,
    pg_finfo_seen_bloom__compacted_oldest,
    |args| {
        let Some(datum) = args.passed(0) else {
            return args.return_null();
        };
        // SAFETY: a non-null bytea datum of the call.
        let head = unsafe { varlena_prefix(datum, bloom_core::COMPACTED_HEADER_BYTES) };
        let header = bloom_core::compacted_header(head).or_raise();
        pg_sys::Datum::from(header.oldest_generation)
    }
);

// seen_bloom._compacted_fpr(bits bytea) -> float8: the chance that a compacted row reports an
// item it does not hold (either stored version).
v1_function!(
    seen_bloom__compacted_fpr,
    pg_finfo_seen_bloom__compacted_fpr,
    |args| {
        let Some(bits) = args.bytes(0) else {
            return args.return_null();
        };
        let row = bloom_core::Compacted::parse(bits).or_raise();
        pg_sys::Datum::from(row.false_positive_rate().to_bits())
    }
);

//! The internal functions of `seen_bloom.compact` (sql/tracking.sql): a user's window built
//! into one compacted filter (bloom_core::build_compacted), the header a stale row
//! is found by, and the row's modelled false-positive rate (`stats`).

use crate::pg::errors::OrRaise;
use crate::pg::item_array::bytea_array;
use crate::pg::v1::v1_function;
use crate::pg::varlena::{varlena_datum, varlena_prefix};
use pgrx::pg_sys;

/// The rows of the compacted filter the call's arguments ask for (hashes bigint[], error_rate,
/// oldest, newest), each within `max_row_bytes`; None when an argument is NULL.
fn compacted_rows(args: &crate::pg::args::Args, max_row_bytes: usize) -> Option<Vec<Vec<u8>>> {
    if (0..4).any(|i| args.is_null(i)) {
        return None;
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
    let rows = bloom_core::build_compacted(
        &mut hashes,
        args.float8(1).unwrap(),
        args.int4(2).unwrap(),
        args.int4(3).unwrap(),
        max_row_bytes,
    )
    .or_raise();
    Some(rows)
}

// seen_bloom._compacted_rows(hashes bigint[], error_rate float8, oldest int, newest int)
// -> bytea[]: the rows of a compacted filter, one per part, each within the row size that
// lets five share a page (`compact` writes part i as segment i).
v1_function!(
    seen_bloom__compacted_rows,
    pg_finfo_seen_bloom__compacted_rows,
    |args| {
        match compacted_rows(args, bloom_core::STATIC_ROW_BYTES) {
            Some(rows) => bytea_array(&rows),
            None => args.return_null(),
        }
    }
);

// seen_bloom._compacted(hashes bigint[], error_rate float8, oldest int, newest int) -> bytea:
// the same filter in one row, whatever its length (tests forge rows with it).
v1_function!(
    seen_bloom__compacted,
    pg_finfo_seen_bloom__compacted,
    |args| {
        match compacted_rows(args, usize::MAX) {
            Some(rows) => varlena_datum(&rows[0]),
            None => args.return_null(),
        }
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

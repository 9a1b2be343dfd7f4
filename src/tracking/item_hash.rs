//! `seen_bloom.item_hash(item)`: the 64-bit hash an item is stored under, as a bigint (the
//! SQL folds hash with it).

use crate::pg::v1::v1_function;
use pgrx::pg_sys;

v1_function!(
    seen_bloom_item_hash_int8,
    pg_finfo_seen_bloom_item_hash_int8,
    |args| { pg_sys::Datum::from(args.item(0).unwrap().hash() as i64) }
);
v1_function!(
    seen_bloom_item_hash_bytes,
    pg_finfo_seen_bloom_item_hash_bytes,
    |args| { pg_sys::Datum::from(args.item(0).unwrap().hash() as i64) }
);
v1_function!(
    seen_bloom_item_hash_uuid,
    pg_finfo_seen_bloom_item_hash_uuid,
    |args| { pg_sys::Datum::from(args.item(0).unwrap().hash() as i64) }
);

//! The internal functions `seen_bloom.stats` reads filter rows with: `_layer_blocks`,
//! `_segment_fpr`, `_segment_fill`; and `_at_cap`, which `seen_bloom.health` reads them with.

use crate::pg::v1::v1_function;
use crate::tracking::caches::layout;
use pgrx::pg_sys;

// seen_bloom._layer_blocks(error_rate_per_generation float8, layer int, layout int) -> bigint
// (the form without `layout` is compat's).
v1_function!(
    seen_bloom__layer_blocks,
    pg_finfo_seen_bloom__layer_blocks,
    |args| {
        let layout_number = match args.nargs() {
            3 => args.int4(2).unwrap(),
            _ => 1,
        };
        let layout = layout(args.float8(0).unwrap(), layout_number, None);
        let layer = args
            .int4(1)
            .unwrap()
            .clamp(0, bloom_core::MAX_LAYERS as i32 - 1);
        pg_sys::Datum::from(layout.layer_blocks(layer as usize) as i64)
    }
);

// seen_bloom._segment_fpr(bits bytea) -> float8: the chance a fresh item finds its bits set,
// averaged over the segment's blocks (0 for an exact row, whose false positives are nil).
v1_function!(
    seen_bloom__segment_fpr,
    pg_finfo_seen_bloom__segment_fpr,
    |args| { pg_sys::Datum::from(bloom_core::blocks_fpr(args.bytes(0).unwrap()).to_bits()) }
);

// seen_bloom._segment_fill(bits bytea) -> float8: fraction of bits set.
v1_function!(
    seen_bloom__segment_fill,
    pg_finfo_seen_bloom__segment_fill,
    |args| { pg_sys::Datum::from(bloom_core::blocks_fill(args.bytes(0).unwrap()).to_bits()) }
);

// seen_bloom._at_cap(error_rate_per_generation float8, layout int, user_cap bigint, layer int,
// bits bytea) -> boolean: whether a filter row shows its generation at the per-user cap
// (seen_bloom.health counts the users with one).
v1_function!(seen_bloom__at_cap, pg_finfo_seen_bloom__at_cap, |args| {
    let cap = args.int8(2).unwrap().max(1) as u64;
    let layout = layout(args.float8(0).unwrap(), args.int4(1).unwrap(), Some(cap));
    let layer = args
        .int4(3)
        .unwrap()
        .clamp(i16::MIN.into(), i16::MAX.into()) as i16;
    pg_sys::Datum::from(layout.row_at_cap(layer, args.bytes(4).unwrap()))
});

//! The internal functions `seen_bloom.stats` reads filter rows with: `_layer_blocks`,
//! `_segment_fpr`, `_segment_fill`.

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
        let layout = layout(args.float8(0).unwrap(), layout_number);
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

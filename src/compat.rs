//! What older catalogues need of this library, in one place. A database is served by the
//! installed library before `ALTER EXTENSION seen_bloom UPDATE` runs (and pg_upgrade, pg_dump
//! restores of older versions, replicas), so:
//!
//! - the C symbols that SQL declarations of 0.1.0 to 0.3.0 name are exported under those
//!   names too (0.4.0 named each symbol for its SQL function);
//! - old argument lists: `seen_bloom._fold` and `seen_bloom._layer_blocks` without `layout`
//!   (tables tracked before 0.3.0, whose generated functions call the 5-argument `_fold`) are
//!   layout 1 (see fold::fold_batch and ops::segments, which read the argument count);
//! - `seen_bloom.tracked` without its `layout` column (0.1.0, 0.2.0) is read as layout 1
//!   (see tracking::tracked_config, which reads the column by name).

/// Exports `old` (and its `pg_finfo_` record) as another name of the V1 function `new`.
macro_rules! old_symbol {
    ($old:ident, $old_finfo:ident, $new:path) => {
        $crate::pg::v1::v1_finfo!($old_finfo);

        /// # Safety
        /// Called by fmgr only, with the live call's `fcinfo`.
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub unsafe extern "C-unwind" fn $old(
            fcinfo: ::pgrx::pg_sys::FunctionCallInfo,
        ) -> ::pgrx::pg_sys::Datum {
            // SAFETY: the same contract as `new`'s, passed on.
            unsafe { $new(fcinfo) }
        }
    };
}

old_symbol!(
    tracked_unseen,
    pg_finfo_tracked_unseen,
    crate::read::unseen::seen_bloom_unseen
);
old_symbol!(
    tracked_has_seen,
    pg_finfo_tracked_has_seen,
    crate::read::unseen::seen_bloom_has_seen
);
old_symbol!(
    tracked_fold,
    pg_finfo_tracked_fold,
    crate::fold::fold_batch::seen_bloom__fold
);
old_symbol!(
    tracked_fold_trigger,
    pg_finfo_tracked_fold_trigger,
    crate::fold::fold_trigger::seen_bloom__fold_trigger
);
old_symbol!(
    tracked_lock_users,
    pg_finfo_tracked_lock_users,
    crate::fold::user_locks::seen_bloom__lock_users
);
old_symbol!(
    item_hash_int8,
    pg_finfo_item_hash_int8,
    crate::tracking::item_hash::seen_bloom_item_hash_int8
);
old_symbol!(
    item_hash_bytes,
    pg_finfo_item_hash_bytes,
    crate::tracking::item_hash::seen_bloom_item_hash_bytes
);
old_symbol!(
    item_hash_uuid,
    pg_finfo_item_hash_uuid,
    crate::tracking::item_hash::seen_bloom_item_hash_uuid
);
old_symbol!(
    layer_blocks,
    pg_finfo_layer_blocks,
    crate::ops::segments::seen_bloom__layer_blocks
);
old_symbol!(
    segment_fpr,
    pg_finfo_segment_fpr,
    crate::ops::segments::seen_bloom__segment_fpr
);
old_symbol!(
    segment_fill,
    pg_finfo_segment_fill,
    crate::ops::segments::seen_bloom__segment_fill
);
old_symbol!(
    check_predicate,
    pg_finfo_check_predicate,
    crate::tracking::predicate::seen_bloom__check_predicate
);

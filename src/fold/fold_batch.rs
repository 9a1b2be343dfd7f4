//! The fold: a batch of (user, generation, item hash) written into a filter table, for the
//! tracked table's trigger (see fold_trigger), for backfill and rebuild (`seen_bloom._fold`).
//!
//! Per user of the batch: an advisory lock, so writers of one user take turns (see
//! user_locks); the rows the user's new items fall in, read by primary key; the items folded
//! in by the engine (bloom_core::GenerationRows); the changed rows written back (see
//! filter_writer).

use crate::fold::group::{Group, Groups};
use crate::fold::groups::{check_fold_target, fold_groups};
use crate::pg::item_type::Item;
use crate::pg::v1::v1_function;
use crate::tracking::layout::{is_moving, WriteMode};
use crate::tracking::tracked_config::UserCap;
use pgrx::pg_sys;

/// Folds a batch of impressions, (user, generation, item hash) each, into `filter_table`,
/// whose users are of type `user_type`, tracked at `error_rate_per_generation` in layout
/// `layout_number` (negative: `WriteMode::InPlaceOnly`), capped per user by `cap`. Rows may come in any order and
/// repeat. With `defer` (the tracked table's trigger), layout 3 folds at commit (see
/// commit_fold).
pub fn fold_batch(
    filter_table: pg_sys::Oid,
    error_rate_per_generation: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    cap: Option<UserCap>,
    impressions: impl Iterator<Item = (Item, i32, u64)>,
    defer: bool,
) {
    let fold = |groups| {
        fold_groups(
            filter_table,
            error_rate_per_generation,
            layout_number,
            user_type,
            cap,
            groups,
        )
    };
    if defer
        && WriteMode::of_layout(layout_number) == WriteMode::InPlace
        && !is_moving(layout_number)
    {
        check_fold_target(filter_table, error_rate_per_generation);
        let rest = crate::fold::commit_fold::defer(
            filter_table,
            error_rate_per_generation,
            layout_number,
            user_type,
            cap,
            impressions,
        );
        if let Some(groups) = rest {
            fold(groups);
        }
        return;
    }
    // Group the batch by (generation, user), users compared by their canonical bytes; a
    // group keeps its own copy of the user (the caller's datum may not outlive the loop).
    // Generation first: the rows a backfill inserts then lie together by generation, so the
    // current generation's rows, which every later fold writes, fill few pages (after a
    // checkpoint each page's first write logs it whole: 1,000 users' rows scattered over
    // 1,000 pages added 1.5 KB of WAL per impression in the first batches).
    let mut groups = Groups::new();
    for (user, generation, hash) in impressions {
        let bytes = user.canonical_bytes().into_owned();
        groups
            .entry((generation, bytes.clone()))
            .or_insert_with(|| Group {
                user: user.copied_datum(),
                user_bytes: bytes,
                generation,
                hashes: Vec::new(),
            })
            .hashes
            .push(hash);
    }
    fold(groups);
}

// seen_bloom._fold(filter_table regclass, error_rate_per_generation float8, layout int,
//                  users anyarray, generations int4[], hashes int8[]) -> void
// and the form without `layout` that tables tracked before layout 2 generated (layout 1).
v1_function!(seen_bloom__fold, pg_finfo_seen_bloom__fold, |args| {
    if (0..args.nargs()).any(|i| args.is_null(i)) {
        return pg_sys::Datum::from(0usize);
    }
    let (layout_number, arrays) = match args.nargs() {
        6 => (args.int4(2).unwrap(), 3),
        _ => (1, 2),
    };
    let filter_table = args.regclass(0).unwrap();
    let users = args.items(arrays).unwrap();
    let generations = args.items(arrays + 1).unwrap();
    let hashes = args.items(arrays + 2).unwrap();
    if users.len != generations.len || users.len != hashes.len {
        crate::pg::errors::bad_argument("seen_bloom._fold: arrays of different lengths".into());
    }
    let impressions = users
        .items()
        .zip(generations.items())
        .zip(hashes.items())
        .filter_map(|((user, generation), hash)| {
            Some((user?, generation?.as_i64()? as i32, hash?.as_i64()? as u64))
        });
    fold_batch(
        filter_table,
        args.float8(1).unwrap(),
        layout_number,
        users.element_type,
        crate::tracking::caches::user_cap(filter_table),
        impressions,
        false,
    );
    pg_sys::Datum::from(0usize)
});

//! The fold of a grouped batch under the users' locks: per (user, generation) group, the
//! rows its items fall in read by key, folded by the engine, written back (see group).
//! For the tracked table's trigger, backfill and rebuild (fold_batch) and for what a fold at
//! commit cannot write without a lock (commit_fold).

use crate::fold::group::{fold_group, Group, Groups};
use crate::fold::user_locks::{lock_key, lock_users};
use crate::pg::activity::Counter;
use crate::pg::catalog::qualified_name;
use crate::pg::spi::{plan, Connection};
use crate::storage::filter_writer::FilterWriter;
use crate::tracking::caches::{
    fold_target_checked, layout, remember_generation, take_generation, KnownGeneration,
};
use crate::tracking::layout::{is_moving, user_layout, WriteMode};
use crate::tracking::tracked_config::UserCap;
use bloom_core::{MOVED_GENERATION, MOVED_LAYER};
use pgrx::pg_sys;
use std::collections::BTreeMap;

/// `fold_batch` of a grouped batch, folded now.
pub fn fold_groups(
    filter_table: pg_sys::Oid,
    error_rate_per_generation: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    cap: Option<UserCap>,
    groups: Groups,
) {
    if groups.is_empty() {
        return;
    }
    check_fold_target(filter_table, error_rate_per_generation);
    let mode = WriteMode::of_layout(layout_number);
    let moving = is_moving(layout_number);
    let in_place_room = in_place_room(filter_table, mode, &groups);
    let layout_of = |marked| {
        layout(
            error_rate_per_generation,
            user_layout(layout_number, marked),
            UserCap::items_of(cap),
        )
    };
    let moved_layout = layout_of(true);
    let unmoved_layout = moving.then(|| layout_of(false));
    // While the table moves from layout 1 (see tracking::layout): each user's, once per batch.
    let mut marked: BTreeMap<Vec<u8>, bool> = BTreeMap::new();

    // Writers of the same user take turns (see lock_users); the rows are read after.
    lock_users(
        filter_table,
        groups.keys().map(|(_, bytes)| lock_key(bytes)).collect(),
    );
    let mut rows = FilterWriter::open(filter_table, user_type);
    let mut capped = CappedTally::default();
    for ((_, user_bytes), group) in groups {
        if moving {
            let user_marked = *marked
                .entry(user_bytes)
                .or_insert_with(|| mark_new_user(&mut rows, group.user, mode));
            // Layout 1 wrote row versions only: the publisher's bring them.
            if !user_marked && mode == WriteMode::InPlaceOnly {
                continue;
            }
            let (layout, mode) = match user_marked {
                true => (&*moved_layout, mode),
                false => (unmoved_layout.as_deref().unwrap(), WriteMode::Versions),
            };
            // No hints: what a backend remembers of a generation may be of either layout.
            let (_, refused) = fold_group(&mut rows, layout, mode, in_place_room, &group, None);
            capped.add(refused);
            continue;
        }
        let cache_key = (filter_table, user_bytes, group.generation);
        // Taken out while the group is folded (an error leaves it out: it is only a hint).
        let known = take_generation(&cache_key);
        let top_before = known.as_ref().map(|k| k.top);
        let (mut known, refused) =
            fold_group(&mut rows, &moved_layout, mode, in_place_room, &group, known);
        capped.add(refused);
        // Layout 3 folds at commit only into rows whose place this backend knows (see
        // commit_fold): when a generation is new to it or has a new top layer, all its rows'
        // places are learnt at once, not a segment per fold (a layer of 5 segments made 8%
        // of a 20-row insert run's groups fold under locks).
        if mode == WriteMode::InPlace && top_before != Some(known.top) {
            learn_places(&mut rows, &group, &mut known);
        }
        // Rows this mode did not write may not exist: nothing to remember.
        if mode != WriteMode::InPlaceOnly {
            remember_generation(cache_key, known);
        }
    }
    if let Some(cap) = cap {
        capped.count_for(cap.counted_for);
    }
}

/// What the per-user cap refused in a batch: impressions, and (user, generation) folds that
/// refused any, for `seen_bloom.activity`.
#[derive(Default)]
struct CappedTally {
    impressions: u64,
    folds: u64,
}

impl CappedTally {
    fn add(&mut self, refused: u64) {
        self.impressions += refused;
        self.folds += u64::from(refused > 0);
    }

    fn count_for(&self, table: pg_sys::Oid) {
        if self.impressions > 0 {
            crate::pg::activity::add(table, Counter::ImpressionsCapped, self.impressions);
            crate::pg::activity::add(table, Counter::CappedFolds, self.folds);
        }
    }
}

/// Whether the transaction's memory holds the layer rows this batch may write in place. Past
/// it, they are written as row versions, which a fold at commit (no user lock, see
/// commit_fold) must not meet: those wait, the tag taken before any user lock of this batch.
fn in_place_room(filter_table: pg_sys::Oid, mode: WriteMode, groups: &Groups) -> bool {
    let dirty_bound: usize = groups.values().map(|g| g.hashes.len() + 1).sum();
    let room = mode == WriteMode::InPlaceOnly
        || mode == WriteMode::InPlace
            && crate::storage::in_place::has_room(
                dirty_bound * bloom_core::SEGMENT_BLOCKS as usize * 32,
            );
    if mode == WriteMode::InPlace && !room {
        crate::fold::user_locks::exclude_commit_folds(filter_table, false);
    }
    room
}

/// Adds where every row of the group's generation lies to what is remembered of it.
fn learn_places(rows: &mut FilterWriter, group: &Group, known: &mut KnownGeneration) {
    for (layer, segment, root) in rows.generation_places(group.user, group.generation) {
        if !known
            .tids
            .iter()
            .any(|&(l, s, _)| (l, s) == (layer, segment))
        {
            known.tids.push((layer, segment, root));
        }
    }
}

/// While a table moves from layout 1 (see tracking::layout), whether `user`'s rows are layout 3's:
/// those of a user with a marker row are, and so are those of a user with no row yet, whose
/// marker is written here (a subscriber's `InPlaceOnly` fold leaves it to the publisher's
/// row version). The caller holds the user's lock.
fn mark_new_user(rows: &mut FilterWriter, user: pg_sys::Datum, mode: WriteMode) -> bool {
    if rows.row(user, MOVED_GENERATION, MOVED_LAYER, 0).is_some() {
        return true;
    }
    if rows.has_rows(user) {
        return false;
    }
    if mode != WriteMode::InPlaceOnly {
        rows.insert(user, MOVED_GENERATION, MOVED_LAYER, 0, &[]);
    }
    true
}

/// Refuses a fold into anything but a registered filter table whose owner the current user
/// acts for:
/// the fold writes rows directly (see filter_writer), so the executor's checks are ours. On
/// Citus a filter table's shard counts as registered (a worker keeps no row of its own), and
/// the distributed table itself never does: its relation on a node holds no rows.
pub fn check_fold_target(filter_table: pg_sys::Oid, error_rate_per_generation: f64) {
    fold_target_checked(filter_table, error_rate_per_generation, || {
        let conn = Connection::open();
        let args = [
            pg_sys::Datum::from(filter_table),
            pg_sys::Datum::from(error_rate_per_generation.to_bits()),
        ];
        let registered = |purpose, sql: &'static str| {
            let plan = plan(
                &conn,
                pg_sys::InvalidOid,
                purpose,
                &[pg_sys::OIDOID, pg_sys::FLOAT8OID],
                || sql.into(),
            );
            conn.execute(plan, &args, true).len() == 1
        };
        let mut ok = registered(
            "fold-target",
            "SELECT 1 FROM seen_bloom.tracked
              WHERE filter_table::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                AND error_rate_per_generation OPERATOR(pg_catalog.=) $2",
        );
        // The filter table a retrack fills (seen_bloom.retracking, made by the 0.5.0 update:
        // this library also serves older scripts until ALTER EXTENSION UPDATE).
        if !ok && crate::pg::catalog::relation_exists(c"seen_bloom", c"retracking") {
            ok = registered(
                "fold-target-retrack",
                "SELECT 1 FROM seen_bloom.retracking
                  WHERE filter_table::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                    AND error_rate_per_generation OPERATOR(pg_catalog.=) $2",
            );
        }
        let citus = crate::pg::citus::installed();
        if !ok && citus {
            ok = registered(
                "fold-target-citus",
                "SELECT 1 WHERE seen_bloom._citus_filter_registered($1, $2)",
            );
        }
        drop(conn);
        if !ok || citus && crate::pg::citus::is_distributed(filter_table) {
            crate::pg::errors::bad_argument(format!(
                "seen_bloom._fold: {} is not the filter table of a tracked table with that error rate (on Citus: a shard of one)",
                qualified_name(filter_table)
            ));
        }
    });
    // The fold writes rows directly, past rules, triggers and policies: only as the filter
    // table's owner (the tracked table's, see owner), never with a grant of INSERT.
    crate::pg::owner::require_owner(filter_table);
}

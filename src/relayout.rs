//! A table moving from layout 1 to layout 3 (`seen_bloom.relayout`): its layout number is
//! [`MOVING`] while users are rebuilt in batches. Layout 1 sizes its rows unlike layout 3,
//! and rows do not record their sizes, so each user's layout is told by a marker row
//! (bloom_core's `MOVED_LAYER`): with it, the user's rows are layout 3's; without it,
//! layout 1's, unless the user has no row at all, when its first fold writes the marker
//! and layout 3's rows. The rule is [`user_layout`], used by the folds, the reads and (as
//! `seen_bloom._user_layout`) `stats`.

use crate::v1::v1_function;
use pgrx::pg_sys;

/// The layout number of a table being moved from layout 1 to layout 3.
pub const MOVING: i32 = 13;

/// The layout a user's rows are in, for a table of layout `number` (a fold's negative
/// number counts as its absolute value) and whether the user has a marker row.
pub fn user_layout(number: i32, marked: bool) -> i32 {
    match number.abs() {
        MOVING if marked => 3,
        MOVING => 1,
        n => n,
    }
}

/// Whether a table of layout `number` is being moved (some users in each layout).
pub fn is_moving(number: i32) -> bool {
    number.abs() == MOVING
}

// seen_bloom._user_layout(layout int, marked boolean) -> int
v1_function!(
    seen_bloom__user_layout,
    pg_finfo_seen_bloom__user_layout,
    |args| { pg_sys::Datum::from(user_layout(args.int4(0).unwrap(), args.bool(1).unwrap(),)) }
);

// seen_bloom._wait_for_snapshots() -> void: waits until every transaction of this database
// that holds a snapshot when called has ended (vacuum's excepted), as CREATE INDEX
// CONCURRENTLY waits for older snapshots, without blocking anyone. After a commit that changes
// a table's layout, those are the reads and folds that may still use the layout before it
// (`caches::config` reads invalidations at every call, so a call's configuration is at least
// as new as its statement's snapshot), and the snapshots that may predate the last user moved.
v1_function!(
    seen_bloom__wait_for_snapshots,
    pg_finfo_seen_bloom__wait_for_snapshots,
    |_args| {
        let mut count = 0;
        // SAFETY: GetCurrentVirtualXIDs returns a palloc'd array of `count` ids (our own
        // excluded), each waited for by VirtualXactLock (which returns once it has ended),
        // then freed.
        unsafe {
            let ids = pg_sys::GetCurrentVirtualXIDs(
                pg_sys::InvalidTransactionId,
                true,
                false,
                (pg_sys::PROC_IS_AUTOVACUUM | pg_sys::PROC_IN_VACUUM) as i32,
                &mut count,
            );
            if count > 0 {
                crate::errors::notice_with_hint(
                    format!("seen_bloom: waiting for {count} transactions that hold a snapshot to end"),
                    "A transaction left open (idle in transaction) holds this up until it ends; pg_stat_activity shows it.".into(),
                );
            }
            for i in 0..count.max(0) as usize {
                pg_sys::check_for_interrupts!();
                pg_sys::VirtualXactLock(*ids.add(i), true);
            }
            pg_sys::pfree(ids.cast());
        }
        pg_sys::Datum::from(0usize)
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_users_take_their_marks_layout() {
        assert_eq!(user_layout(MOVING, true), 3);
        assert_eq!(user_layout(MOVING, false), 1);
        assert_eq!(user_layout(-MOVING, true), 3);
        for n in [1, 2, 3] {
            assert_eq!(user_layout(n, true), n);
            assert_eq!(user_layout(n, false), n);
        }
        assert!(is_moving(-MOVING) && !is_moving(3));
    }
}

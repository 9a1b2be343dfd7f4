//! Writers of one user take turns: the fold (trigger, backfill) and rebuild take a
//! transaction-level lock per user of their batch, in a tag space no SQL function reaches, or one table lock for a batch of
//! many users. Folds at commit (see commit_fold) take no user lock: they hold a shared lock
//! of their filter table's commit-fold tag while they write, which whoever replaces users'
//! rows (rebuild, compact, relayout) takes exclusively first.

use crate::pg::advisory::{private_tag, PrivateLock};
use crate::pg::owner::require_owner;
use crate::pg::v1::v1_function;
use bloom_core::hash_bytes;
use pgrx::pg_sys;

/// The lock key of a user's filter rows: writers of one user take turns (the trigger's fold
/// and rebuild alike). Two users may share a key; they then just take turns.
pub fn lock_key(user_bytes: &[u8]) -> i32 {
    hash_bytes(user_bytes) as i32
}

/// Most distinct lock keys a fold or rebuild takes one advisory lock each for. Each lock takes
/// a slot of the shared lock table until commit (max_locks_per_transaction, 64 by default,
/// times the connections), so a statement of 100,000 users failed with 53200; past this a
/// batch locks the whole filter table instead (see lock_users).
pub const MAX_USER_LOCKS: usize = 256;

/// Takes the transaction-level user locks of `keys` on `filter_table`, in sorted order,
/// so that any two lockers wait for each other instead of deadlocking. A batch of more than
/// [`MAX_USER_LOCKS`] keys takes one ShareRowExclusiveLock on the filter table instead: it
/// conflicts with itself and with the RowExclusiveLock that every other fold (and rebuild's
/// DELETE) holds on the table until commit, so writers still take turns, one big batch at a
/// time against everyone, while the lock table holds one entry.
pub fn lock_users(filter_table: pg_sys::Oid, mut keys: Vec<i32>) {
    // Writers only: a read-only transaction (a hot standby's included) gets 25006 here, before
    // any lock a standby could not take.
    // SAFETY: a NUL-terminated static command name.
    unsafe { pg_sys::PreventCommandIfReadOnly(c"seen_bloom fold or rebuild".as_ptr()) };
    keys.sort_unstable();
    keys.dedup();
    if keys.len() > MAX_USER_LOCKS {
        // A table lock must not be a way to stall writers of a table one does not own.
        require_owner(filter_table);
        // SAFETY: locks a relation by OID (raises if it is gone); held until commit.
        unsafe {
            pg_sys::LockRelationOid(
                filter_table,
                pg_sys::ShareRowExclusiveLock as pg_sys::LOCKMODE,
            )
        };
        return;
    }
    for key in keys {
        let tag = private_tag(filter_table, key as u32, PrivateLock::User);
        // SAFETY: a transaction-level lock of a tag built above, waited for (lock_timeout
        // and a cancel end the wait, as for any heavyweight lock).
        unsafe {
            pg_sys::LockAcquire(
                &tag,
                pg_sys::ExclusiveLock as pg_sys::LOCKMODE,
                false,
                false,
            );
        }
    }
}

/// The tag of `filter_table`'s folds at commit.
fn commit_folds_tag(filter_table: pg_sys::Oid) -> pg_sys::LOCKTAG {
    private_tag(filter_table, 0, PrivateLock::CommitFolds)
}

/// Takes the shared lock of `filter_table`'s commit folds until the transaction ends, if no
/// one holds or waits for it exclusively (false then: the caller folds under user locks).
/// Never waits, so a fold at commit never waits for the tag while it holds user locks.
pub fn share_commit_folds(filter_table: pg_sys::Oid) -> bool {
    let tag = commit_folds_tag(filter_table);
    // SAFETY: a transaction-level lock of a tag built above, not waited for.
    let result =
        unsafe { pg_sys::LockAcquire(&tag, pg_sys::ShareLock as pg_sys::LOCKMODE, false, true) };
    result != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
}

/// Waits for the folds at commit of `filter_table` that are writing and keeps new ones from
/// starting (they fold under user locks instead) until the transaction ends, or with
/// `session`, until `allow_commit_folds`. Taken before any user lock, so that no one waits
/// for it while holding a user lock a fold at commit may need.
pub fn exclude_commit_folds(filter_table: pg_sys::Oid, session: bool) {
    let tag = commit_folds_tag(filter_table);
    // SAFETY: a lock of a tag built above, waited for.
    unsafe {
        pg_sys::LockAcquire(
            &tag,
            pg_sys::ExclusiveLock as pg_sys::LOCKMODE,
            session,
            false,
        );
    }
}

/// Releases the session lock `exclude_commit_folds(_, true)` took.
pub fn allow_commit_folds(filter_table: pg_sys::Oid) {
    let tag = commit_folds_tag(filter_table);
    // SAFETY: releases a session lock of a tag built above (false if not held).
    unsafe { pg_sys::LockRelease(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, true) };
}

// seen_bloom._exclude_commit_folds(filter_table regclass, excluded boolean) -> void: with
// true, waits for the folds at commit of the table and makes later ones take user locks until
// called again with false (a session lock: relayout holds it across the commit of a move
// from layout 2, while folds that took layout 2, which write row versions, still run).
v1_function!(
    seen_bloom__exclude_commit_folds,
    pg_finfo_seen_bloom__exclude_commit_folds,
    |args| {
        let (Some(filter_table), Some(excluded)) = (args.regclass(0), args.bool(1)) else {
            return pg_sys::Datum::from(0usize);
        };
        require_owner(filter_table);
        match excluded {
            true => exclude_commit_folds(filter_table, true),
            false => allow_commit_folds(filter_table),
        }
        pg_sys::Datum::from(0usize)
    }
);

// seen_bloom._lock_users(filter_table regclass, users anyarray) -> void: what rebuild, compact
// and relayout take before they replace users' rows, so no fold of those users runs in
// between: folds at commit are excluded first (they take no user lock), then the users locked.
v1_function!(
    seen_bloom__lock_users,
    pg_finfo_seen_bloom__lock_users,
    |args| {
        let (Some(filter_table), Some(users)) = (args.regclass(0), args.items(1)) else {
            return pg_sys::Datum::from(0usize);
        };
        let keys = users
            .items()
            .flatten()
            .map(|u| lock_key(&u.canonical_bytes()))
            .collect();
        // Not a way to slow down the writers of a table one does not own.
        require_owner(filter_table);
        exclude_commit_folds(filter_table, false);
        lock_users(filter_table, keys);
        pg_sys::Datum::from(0usize)
    }
);

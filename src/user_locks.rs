//! Writers of one user take turns: the fold (trigger, backfill) and rebuild take a
//! transaction-level advisory lock per user of their batch, or one table lock for a batch of
//! many users.

use crate::v1::v1_function;
use bloom_core::hash_bytes;
use pgrx::pg_sys;

unsafe extern "C-unwind" {
    /// The C function behind pg_advisory_xact_lock(int4, int4), called without SPI.
    #[link_name = "pg_advisory_xact_lock_int4"]
    fn advisory_xact_lock_int4(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
}

/// The advisory lock key of a user's filter rows: writers of one user take turns (the
/// trigger's fold and rebuild alike). Two users may share a key; they then just take turns.
pub fn lock_key(user_bytes: &[u8]) -> i32 {
    hash_bytes(user_bytes) as i32
}

/// Most distinct lock keys a fold or rebuild takes one advisory lock each for. Each lock takes
/// a slot of the shared lock table until commit (max_locks_per_transaction, 64 by default,
/// times the connections), so a statement of 100,000 users failed with 53200; past this a
/// batch locks the whole filter table instead (see lock_users).
const MAX_USER_LOCKS: usize = 256;

/// Takes the transaction-level advisory locks of `keys` on `filter_table`, in sorted order,
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
        // As LOCK TABLE would ask: seen_bloom._lock_users is executable by everyone, and a
        // table lock must not be a way to stall writers of a table one may not write.
        crate::errors::require_table_privilege(
            filter_table,
            pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE | pg_sys::ACL_TRUNCATE,
        );
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
        // SAFETY: pg_advisory_xact_lock_int4 takes two by-value int4 arguments.
        unsafe {
            pg_sys::DirectFunctionCall2Coll(
                Some(advisory_xact_lock_int4),
                pg_sys::InvalidOid,
                pg_sys::Datum::from(filter_table.to_u32() as i32),
                pg_sys::Datum::from(key),
            );
        }
    }
}

// seen_bloom._lock_users(filter_table regclass, users anyarray) -> void: what rebuild takes
// before it deletes a user's rows, so no fold of those users runs in between.
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
        lock_users(filter_table, keys);
        pg_sys::Datum::from(0usize)
    }
);

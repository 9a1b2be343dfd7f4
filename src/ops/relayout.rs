//! `seen_bloom.relayout`'s wait (`seen_bloom._wait_for_snapshots`): after a commit that changes
//! a table's layout, for the transactions that may still use the layout before it. Which
//! layout a moving table's user is in is tracking::layout's rule.

use crate::pg::advisory::{private_tag, PrivateLock};
use crate::pg::v1::v1_function;
use pgrx::pg_sys;

/// The lock every `seen_bloom._wait_for_snapshots` holds (shared) until its transaction ends.
fn waiting_moves_tag() -> pg_sys::LOCKTAG {
    private_tag(pg_sys::InvalidOid, 0, PrivateLock::WaitingMoves)
}

/// Whether virtual transaction `id` is among the `count` of `ids`.
///
/// # Safety
/// `ids` must point to `count` ids.
unsafe fn listed(
    ids: *const pg_sys::VirtualTransactionId,
    count: i32,
    id: &pg_sys::VirtualTransactionId,
) -> bool {
    // SAFETY: the contract.
    let ids = unsafe { std::slice::from_raw_parts(ids, count.max(0) as usize) };
    ids.iter().any(|other| {
        other.localTransactionId == id.localTransactionId && vxid_backend(other) == vxid_backend(id)
    })
}

/// A virtual transaction id's backend (`backendId` before PostgreSQL 17, `procNumber` since).
fn vxid_backend(id: &pg_sys::VirtualTransactionId) -> i32 {
    #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15", feature = "pg16"))]
    return id.backendId;
    #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15", feature = "pg16")))]
    return id.procNumber;
}

// seen_bloom._wait_for_snapshots() -> void: waits until every transaction of this database
// that holds a snapshot when called has ended (vacuum's excepted), as CREATE INDEX
// CONCURRENTLY waits for older snapshots, without blocking anyone. After a commit that changes
// a table's layout, those are the reads and folds that may still use the layout before it
// (`caches::config` reads invalidations at every call, so a call's configuration is at least
// as new as its statement's snapshot), and the snapshots that may predate the last user moved.
//
// Transactions waiting here themselves are not waited for (CREATE INDEX CONCURRENTLY skips
// its peers likewise): they are other moves, which read nothing with the snapshot they hold
// and take fresh ones after, and two moves waiting for each other would be a deadlock, which
// cancels one. Each holds a shared lock on `waiting_moves_tag` until its transaction ends,
// taken before the list of transactions is read, so of two that start at once, the later
// finds the earlier's lock.
v1_function!(
    seen_bloom__wait_for_snapshots,
    pg_finfo_seen_bloom__wait_for_snapshots,
    |_args| {
        let tag = waiting_moves_tag();
        let (mut count, mut moves) = (0, 0);
        // SAFETY: LockAcquire takes a lock of the tag, held until the transaction ends;
        // GetCurrentVirtualXIDs and GetLockConflicts return arrays of `count` and `moves` ids
        // (our own excluded; the first freed here, the second left to the call's memory
        // context), each waited for by VirtualXactLock, which returns once it has ended.
        unsafe {
            pg_sys::LockAcquire(&tag, pg_sys::ShareLock as pg_sys::LOCKMODE, false, false);
            let ids = pg_sys::GetCurrentVirtualXIDs(
                pg_sys::InvalidTransactionId,
                true,
                false,
                (pg_sys::PROC_IS_AUTOVACUUM | pg_sys::PROC_IN_VACUUM) as i32,
                &mut count,
            );
            let waiting_moves = pg_sys::GetLockConflicts(
                &tag,
                pg_sys::ExclusiveLock as pg_sys::LOCKMODE,
                &mut moves,
            );
            let waited: Vec<pg_sys::VirtualTransactionId> = (0..count.max(0) as usize)
                .map(|i| *ids.add(i))
                .filter(|id| !listed(waiting_moves, moves, id))
                .collect();
            if !waited.is_empty() {
                crate::pg::errors::notice_with_hint(
                    format!(
                        "seen_bloom: waiting for {} transactions that hold a snapshot to end",
                        waited.len()
                    ),
                    "A transaction left open (idle in transaction) holds this up until it ends; pg_stat_activity shows it.".into(),
                );
            }
            for id in waited {
                pg_sys::check_for_interrupts!();
                pg_sys::VirtualXactLock(id, true);
            }
            pg_sys::pfree(ids.cast());
        }
        pg_sys::Datum::from(0usize)
    }
);

//! The maintenance lock of a tracked table: `expire`, `compact` and the background worker
//! (ops::maintenance_worker) hold it while they work on the table, so that the worker never
//! runs beside a manual run (it skips the table until its next round) and two manual runs take
//! turns. A session lock of a private tag (pg::advisory): `compact` commits every 100 users
//! and must keep it across its transactions. A transaction that aborts releases the locks it
//! left held (the procedure that took them is over), see `release_all`.

use crate::pg::advisory::{private_tag, PrivateLock};
use crate::pg::v1::v1_function;
use pgrx::pg_sys;
use std::cell::RefCell;

thread_local! {
    /// The tables whose maintenance lock this session holds, once per acquisition.
    static HELD: RefCell<Vec<pg_sys::Oid>> = const { RefCell::new(Vec::new()) };
}

fn tag(impressions: pg_sys::Oid) -> pg_sys::LOCKTAG {
    private_tag(impressions, 0, PrivateLock::Maintenance)
}

/// Takes `impressions`' maintenance lock for the session: waits for it when `wait` (lock_timeout
/// and a cancel end the wait), else returns false when another session holds it. Only the
/// table's owner may (42501): another role holding it would stall the table's maintenance.
fn lock(impressions: pg_sys::Oid, wait: bool) -> bool {
    crate::pg::owner::require_owner(impressions);
    let tag = tag(impressions);
    // SAFETY: a session-level lock of a tag built above; released by unlock or release_all.
    let result = unsafe {
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, true, !wait)
    };
    if result == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL {
        return false;
    }
    HELD.with(|h| h.borrow_mut().push(impressions));
    true
}

/// Releases one acquisition of `impressions`' maintenance lock, if this session holds one.
fn unlock(impressions: pg_sys::Oid) {
    let held = HELD.with(|h| {
        let mut h = h.borrow_mut();
        match h.iter().rposition(|&o| o == impressions) {
            Some(i) => {
                h.remove(i);
                true
            }
            None => false,
        }
    });
    if held {
        let tag = tag(impressions);
        // SAFETY: releases one count of a session lock this session took in lock().
        unsafe { pg_sys::LockRelease(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, true) };
    }
}

/// At the abort of a top-level transaction: the run that held the locks failed.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_transaction(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT {
        release_all();
    }
}

/// Registers the abort callback (once, from _PG_init).
pub fn register_callback() {
    // SAFETY: a function with the signature PostgreSQL calls it with, once per backend.
    unsafe { pg_sys::RegisterXactCallback(Some(on_transaction), std::ptr::null_mut()) };
}

fn release_all() {
    let held: Vec<pg_sys::Oid> = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    for impressions in held {
        let tag = tag(impressions);
        // SAFETY: as in unlock, once per acquisition recorded.
        unsafe { pg_sys::LockRelease(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, true) };
    }
}

// seen_bloom._maintenance_lock(impressions regclass, wait boolean) -> boolean
v1_function!(
    seen_bloom__maintenance_lock,
    pg_finfo_seen_bloom__maintenance_lock,
    |args| {
        match (args.regclass(0), args.bool(1)) {
            (Some(impressions), Some(wait)) => pg_sys::Datum::from(lock(impressions, wait)),
            _ => args.return_null(),
        }
    }
);

// seen_bloom._maintenance_unlock(impressions regclass) -> void
v1_function!(
    seen_bloom__maintenance_unlock,
    pg_finfo_seen_bloom__maintenance_unlock,
    |args| {
        if let Some(impressions) = args.regclass(0) {
            unlock(impressions);
        }
        pg_sys::Datum::from(0)
    }
);

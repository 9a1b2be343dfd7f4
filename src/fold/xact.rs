//! The transaction callbacks of layout 3's writes: at PRE_COMMIT (PRE_PREPARE) the folds
//! deferred to commit (commit_fold) are made, then the bits held for in-place writes
//! (storage::in_place) are written, still under the users' locks; at any other end both are
//! forgotten, and a subtransaction's end rolls back or passes on what it added to each.

use crate::fold::commit_fold;
use crate::storage::in_place;
use pgrx::pg_sys;
use pgrx::pg_sys::SubTransactionId;

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_transaction(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        // The deferred folds first: those that cannot be made without a user lock hold
        // their bits in in_place too.
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
            commit_fold::fold_deferred();
            in_place::write_held()
        }
        // Commit, abort, prepare (after PRE_PREPARE wrote them) and the parallel events:
        // whatever is left belongs to a transaction that is over.
        _ => {
            commit_fold::forget();
            in_place::forget()
        }
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_subtransaction(
    event: pg_sys::SubXactEvent::Type,
    sub: SubTransactionId,
    parent: SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    let aborted = match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => true,
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => false,
        _ => return,
    };
    commit_fold::end_subtransaction(sub, parent, aborted);
    in_place::end_subtransaction(sub, parent, aborted);
}

/// Registers the transaction callbacks (from _PG_init).
pub fn register_callbacks() {
    // SAFETY: registers functions with the signatures PostgreSQL calls them with, once per
    // backend (from _PG_init).
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_transaction), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subtransaction), std::ptr::null_mut());
    }
}

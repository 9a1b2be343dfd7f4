//! Folds deferred to commit (layout 3): a statement's trigger keeps its batch's item hashes
//! in this backend, and the transaction folds them when it commits, into the layer rows
//! where they lie, without taking the users' locks.
//!
//! Per user of a 20-row statement, the fold it replaces took an advisory lock (about 2.5 us
//! with its release at commit), fetched the row (about 6 us with the engine's insert and the
//! bookkeeping) and wrote it again at commit: tracked inserts ran at 0.64 of plain ones, of
//! which the locks cost 0.1. Here a row is read and written once, under its page's exclusive
//! lock: bits are only ever set, so folds of one row by two backends need no other order
//! than the page lock's. What still needs a user's lock is folded under it, at commit, by the
//! ordinary fold (fold::fold_groups):
//! - a generation this backend has not folded before (where its rows lie is not known);
//! - an exact row, a segment too full for the batch, a row that moved or is being replaced;
//! - every group while someone replaces users' rows (`rebuild`, `compact`, `relayout`): they
//!   take the table's commit-fold tag exclusively (user_locks), and a fold at commit writes
//!   only under the tag's shared lock, so their snapshot sees every impression whose bits
//!   went into rows they replace.
//!
//! Reads of this backend (`unseen`, `has_seen`) first fold what it deferred for the table,
//! under the users' locks, as a statement's fold did before.

use crate::fold::deferred::{user_bytes_in, Pending, State, TableFold};
use crate::fold::group::Groups;
use crate::fold::groups::fold_groups;
use crate::fold::unlocked_fold::fold_without_locks;
use crate::fold::user_locks::MAX_USER_LOCKS;
use crate::pg::item_type::Item;
use crate::pg::owner::as_role;
use crate::tracking::tracked_config::UserCap;
use pgrx::pg_sys;
use pgrx::pg_sys::SubTransactionId;
use pgrx::PgMemoryContexts;
use std::cell::RefCell;

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Bytes a deferred hash counts for, against `seen_bloom.in_place_memory`.
const HASH_BYTES: usize = 16;

/// Defers the fold of a statement's impressions into `filter_table` to the commit. When the
/// transaction may not hold them (see in_place's memory limit) or they are more users than
/// one fold locks, returns them grouped, for the caller to fold now. The caller has checked
/// the target and the privileges, and the table is in layout 3, not moving.
pub fn defer(
    filter_table: pg_sys::Oid,
    error_rate: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    cap: Option<UserCap>,
    impressions: impl Iterator<Item = (Item, i32, u64)>,
) -> Option<Groups> {
    let table = filter_table.to_u32();
    // SAFETY: plain reads of the current subtransaction and user.
    let (sub, role) = unsafe { (pg_sys::GetCurrentSubTransactionId(), pg_sys::GetUserId()) };
    let rest = STATE.with(|s| {
        let mut state = s.borrow_mut();
        let (start, bytes_start) = (state.pending.len(), state.bytes.len());
        for (user, generation, hash) in impressions {
            let user_at = state.bytes.len();
            user.push_canonical_bytes(&mut state.bytes);
            let user_len = (state.bytes.len() - user_at) as u32;
            let user = match user.item_type.storage().1 {
                true => user.datum(),
                // The statement's datum lives in its memory; this copy until the commit.
                false => unsafe {
                    // SAFETY: switches to the transaction's memory for the copy, which
                    // outlives the state (cleared at the transaction's end).
                    PgMemoryContexts::TopTransactionContext.switch_to(|_| user.copied_datum())
                },
            };
            state.pending.push(Pending {
                table,
                generation,
                user_at: user_at as u32,
                user_len,
                user,
                hash,
                sub,
                folded_in: 0,
            });
        }
        let added = state.pending.len() - start;
        let over_memory =
            state.pending.len() * HASH_BYTES > crate::storage::in_place::max_held_bytes();
        let many_users = added > MAX_USER_LOCKS && {
            let mut users: Vec<(i32, &[u8])> = state.pending[start..]
                .iter()
                .map(|p| (p.generation, state.user_bytes(p)))
                .collect();
            users.sort_unstable();
            users.dedup();
            users.len() > MAX_USER_LOCKS
        };
        if over_memory || many_users {
            let groups = state.groups(state.pending[start..].iter());
            state.pending.truncate(start);
            state.bytes.truncate(bytes_start);
            return Some(groups);
        }
        state.tables.insert(
            table,
            TableFold {
                error_rate,
                layout_number,
                user_type,
                role,
                cap,
            },
        );
        None
    });
    if rest.is_none() {
        // Held to the end of the transaction, as a statement's fold holds it: TRUNCATE,
        // DROP and a rewrite of the filter table wait for the commit.
        // SAFETY: locks a relation by OID (raises if it is gone).
        unsafe {
            pg_sys::LockRelationOid(filter_table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE)
        };
    }
    rest
}

/// Folds now, under the users' locks, what this transaction deferred for `filter_table`
/// (before a read of it: the transaction's reads see its own impressions); whether there
/// was any.
///
/// The hashes stay deferred, marked folded in the current subtransaction: its rollback would
/// undo this fold's writes of hashes that outer subtransactions deferred (a batch inserted
/// before a savepoint was lost so once), and the commit then folds them again.
pub fn fold_now(filter_table: pg_sys::Oid) -> bool {
    // SAFETY: a plain read of the current subtransaction's id.
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let table = filter_table.to_u32();
    let found = STATE.with(|s| {
        let mut state = s.borrow_mut();
        let how = *state.tables.get(&table)?;
        let unfolded = |p: &Pending| p.table == table && p.folded_in == 0;
        let groups = state.groups(state.pending.iter().filter(|p| unfolded(p)));
        for p in state.pending.iter_mut().filter(|p| unfolded(p)) {
            p.folded_in = sub;
        }
        (!groups.is_empty()).then_some((how, groups))
    });
    let Some((how, groups)) = found else {
        return false;
    };
    as_role(how.role, || fold_locked(filter_table, how, groups));
    true
}

/// The ordinary fold of deferred groups: under the users' locks, held bits written at commit.
fn fold_locked(filter_table: pg_sys::Oid, how: TableFold, groups: Groups) {
    fold_groups(
        filter_table,
        how.error_rate,
        how.layout_number,
        how.user_type,
        how.cap,
        groups,
    );
}

/// Folds everything deferred (PRE_COMMIT, PRE_PREPARE): in place where this backend knows the
/// rows and the tag allows, the rest under the users' locks.
pub fn fold_deferred() {
    // Taken out whole (an error leaves nothing behind); put back empty, its room kept.
    let mut state = STATE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if state.pending.is_empty() {
        return;
    }
    // Those a read folded already hold their bits (in_place) or rows.
    state.pending.retain(|p| p.folded_in == 0);
    // By table, generation and user: a group's impressions lie together.
    let State { pending, bytes, .. } = &mut state;
    pending.sort_unstable_by(|a, b| {
        (a.table, a.generation, user_bytes_in(bytes, a)).cmp(&(
            b.table,
            b.generation,
            user_bytes_in(bytes, b),
        ))
    });
    // At commit no statement's snapshot is active, and the locked fold may run SQL (its
    // check of the target after an invalidation: "cannot execute SQL without an outer
    // snapshot" under concurrent rebuilds in tracking_concurrency.sh). An error's abort
    // pops it.
    // SAFETY: pushes a copy of a fresh snapshot, popped below.
    let pushed = unsafe {
        let pushed = !pg_sys::ActiveSnapshotSet();
        if pushed {
            pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        }
        pushed
    };
    for (&table, &how) in &state.tables {
        let from = state.pending.partition_point(|p| p.table < table);
        let to = state.pending.partition_point(|p| p.table <= table);
        if from == to {
            continue;
        }
        let filter_table = pg_sys::Oid::from(table);
        as_role(how.role, || {
            let left = fold_without_locks(filter_table, how, &state, &state.pending[from..to]);
            if !left.is_empty() {
                fold_locked(filter_table, how, left);
            }
        });
    }
    if pushed {
        // SAFETY: pops what was pushed above.
        unsafe { pg_sys::PopActiveSnapshot() };
    }
    state.clear();
    STATE.with(|s| *s.borrow_mut() = state);
}

/// A subtransaction ended: an aborted one's hashes go, a committed one's become its parent's.
pub fn end_subtransaction(sub: SubTransactionId, parent: SubTransactionId, aborted: bool) {
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        if aborted {
            state.pending.retain(|p| p.sub != sub);
        }
        for p in state.pending.iter_mut() {
            if p.sub == sub {
                p.sub = parent;
            }
            if p.folded_in == sub {
                p.folded_in = if aborted { 0 } else { parent };
            }
        }
    });
}

/// The transaction ended (or wrote what it deferred): nothing is left to fold.
pub fn forget() {
    STATE.with(|s| s.borrow_mut().clear());
}

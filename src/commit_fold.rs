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

use crate::caches::{layout, with_generation};
use crate::filter_table::{Access, FilterTable};
use crate::filter_writer::{fold_in_place, RowKey};
use crate::fold::{fold_groups, Group, Groups};
use crate::fold_trigger::as_role;
use crate::relayout::user_layout;
use bloom_core::GenerationRows;
use pgrx::pg_sys;
use pgrx::pg_sys::SubTransactionId;
use pgrx::PgMemoryContexts;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// How a filter table's groups fold (its tracked table's configuration at the fold).
#[derive(Clone, Copy)]
struct TableFold {
    error_rate: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    /// The role the statement folded as (the filter table's owner, see fold_trigger): the
    /// commit folds as it too.
    role: pg_sys::Oid,
}

/// A deferred (user, generation): the user (in the transaction's memory), its hashes, each
/// with the subtransaction that folded it.
struct Deferred {
    user: pg_sys::Datum,
    hashes: Vec<(SubTransactionId, u64)>,
    /// How many of the hashes a read already folded (see fold_now), and in which
    /// subtransaction: that fold's writes are undone if it aborts, and the hashes, some
    /// perhaps of an outer subtransaction, are then folded again.
    folded: usize,
    folded_in: SubTransactionId,
}

#[derive(Default)]
struct State {
    tables: BTreeMap<u32, TableFold>,
    /// By (filter table, generation, user's canonical bytes).
    groups: BTreeMap<(u32, i32, Vec<u8>), Deferred>,
    hashes: usize,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Bytes a deferred hash takes (with its subtransaction), against `seen_bloom.in_place_memory`.
const HASH_BYTES: usize = 16;

/// Defers the fold of `groups` into `filter_table` to the commit, if the transaction may hold
/// their hashes (see in_place's memory limit); false leaves them to the caller. The caller
/// has checked the target and the privileges, and the table is in layout 3, not moving.
pub fn defer(
    filter_table: pg_sys::Oid,
    error_rate: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    groups: &mut Groups,
) -> bool {
    let count: usize = groups.values().map(|g| g.hashes.len()).sum();
    let limit = crate::in_place::max_held_bytes();
    if STATE.with(|s| (s.borrow().hashes + count) * HASH_BYTES > limit) {
        return false;
    }
    // Held to the end of the transaction, as a statement's fold holds it: TRUNCATE, DROP and
    // a rewrite of the filter table wait for the commit.
    // SAFETY: locks a relation by OID (raises if it is gone).
    unsafe { pg_sys::LockRelationOid(filter_table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE) };
    // SAFETY: a plain read of the current subtransaction's id; the user type's storage.
    let (sub, user_len, user_byval) = unsafe {
        let (mut len, mut byval) = (0i16, false);
        pg_sys::get_typlenbyval(user_type, &mut len, &mut byval);
        (pg_sys::GetCurrentSubTransactionId(), len, byval)
    };
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        state.hashes += count;
        state.tables.insert(
            filter_table.to_u32(),
            TableFold {
                error_rate,
                layout_number,
                user_type,
                // SAFETY: a plain read of the current user.
                role: unsafe { pg_sys::GetUserId() },
            },
        );
        for ((generation, user_bytes), group) in std::mem::take(groups) {
            let deferred = state
                .groups
                .entry((filter_table.to_u32(), generation, user_bytes))
                .or_insert_with(|| Deferred {
                    folded: 0,
                    folded_in: 0,
                    // The statement's copy lives in its memory; this one until the commit.
                    // SAFETY: a datum of the user type, copied into the transaction's memory,
                    // which outlives the state (cleared at the transaction's end).
                    user: unsafe {
                        PgMemoryContexts::TopTransactionContext.switch_to(|_| {
                            crate::item_type::copy_datum(group.user, user_len, user_byval)
                        })
                    },
                    hashes: Vec::new(),
                });
            deferred
                .hashes
                .extend(group.hashes.iter().map(|&h| (sub, h)));
        }
    });
    true
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
    let found = STATE.with(|s| {
        let mut state = s.borrow_mut();
        let table = filter_table.to_u32();
        let how = *state.tables.get(&table)?;
        let mut groups = TableGroups::new();
        let range = (table, i32::MIN, vec![])..;
        for ((t, generation, user_bytes), d) in state.groups.range_mut(range) {
            if *t != table {
                break;
            }
            if d.folded == d.hashes.len() {
                continue;
            }
            d.folded = d.hashes.len();
            d.folded_in = sub;
            groups.push((
                *generation,
                user_bytes.clone(),
                Deferred {
                    user: d.user,
                    hashes: d.hashes.clone(),
                    folded: 0,
                    folded_in: 0,
                },
            ));
        }
        (!groups.is_empty()).then_some((how, groups))
    });
    let Some((how, groups)) = found else {
        return false;
    };
    as_role(how.role, || fold_locked(filter_table, how, groups));
    true
}

/// A filter table's deferred groups: (generation, user's canonical bytes, what is deferred).
type TableGroups = Vec<(i32, Vec<u8>, Deferred)>;

/// Takes out the deferred groups of every table, by table (those a read folded whole left
/// out).
fn take() -> Vec<(pg_sys::Oid, TableFold, TableGroups)> {
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        if state.groups.is_empty() {
            return vec![];
        }
        let tables: Vec<u32> = state.tables.keys().copied().collect();
        let mut taken = Vec::new();
        for table in tables {
            let how = state.tables.remove(&table).unwrap();
            let mut mine = state.groups.split_off(&(table, i32::MIN, vec![]));
            if let Some(next) = table.checked_add(1) {
                let after = mine.split_off(&(next, i32::MIN, vec![]));
                state.groups.extend(after);
            }
            state.hashes -= mine.values().map(|d| d.hashes.len()).sum::<usize>();
            // Those a read folded already hold their bits (in_place) or rows.
            let groups: Vec<_> = mine
                .into_iter()
                .filter(|(_, d)| d.folded < d.hashes.len())
                .map(|((_, generation, user_bytes), d)| (generation, user_bytes, d))
                .collect();
            taken.push((pg_sys::Oid::from(table), how, groups));
        }
        taken
    })
}

/// The ordinary fold of deferred groups: under the users' locks, held bits written at commit.
fn fold_locked(filter_table: pg_sys::Oid, how: TableFold, groups: TableGroups) {
    let mut batch = Groups::new();
    for (generation, user_bytes, d) in groups {
        batch.insert(
            (generation, user_bytes.clone()),
            Group {
                user: d.user,
                user_bytes,
                generation,
                hashes: d.hashes.into_iter().map(|(_, h)| h).collect(),
            },
        );
    }
    fold_groups(
        filter_table,
        how.error_rate,
        how.layout_number,
        how.user_type,
        batch,
        false,
    );
}

/// Folds everything deferred (PRE_COMMIT, PRE_PREPARE): in place where this backend knows the
/// rows and the tag allows, the rest under the users' locks.
pub fn fold_deferred() {
    let taken = take();
    if taken.is_empty() {
        return;
    }
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
    for (filter_table, how, groups) in taken {
        as_role(how.role, || {
            let left = fold_without_locks(filter_table, how, groups);
            if !left.is_empty() {
                fold_locked(filter_table, how, left);
            }
        });
    }
    if pushed {
        // SAFETY: pops what was pushed above.
        unsafe { pg_sys::PopActiveSnapshot() };
    }
}

/// Folds what it can of `groups` in place without user locks; returns the rest.
fn fold_without_locks(
    filter_table: pg_sys::Oid,
    how: TableFold,
    groups: TableGroups,
) -> TableGroups {
    // A filter table dropped since (untrack in this transaction): nothing to fold into.
    // SAFETY: try_relation_open returns null for a relation that is gone; closed at once,
    // the lock kept (FilterTable::open takes the same).
    unsafe {
        let heap =
            pg_sys::try_relation_open(filter_table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        if heap.is_null() {
            return vec![];
        }
        pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    if !crate::user_locks::share_commit_folds(filter_table) {
        return groups;
    }
    let layout = layout(how.error_rate, user_layout(how.layout_number, true));
    // Our own writes of this transaction (rows a rebuild here deleted) seen as done.
    // SAFETY: a plain call between statements' work.
    unsafe { pg_sys::CommandCounterIncrement() };
    let table = FilterTable::open(filter_table, how.user_type, Access::Write);
    // SAFETY: the heap is open and locked.
    let blocks = unsafe {
        pg_sys::RelationGetNumberOfBlocksInFork(table.heap, pg_sys::ForkNumber::MAIN_FORKNUM)
    };
    let mut left = Vec::new();
    for (generation, user_bytes, d) in groups {
        let hashes: Vec<u64> = d.hashes.iter().map(|&(_, h)| h).collect();
        let cache_key = (filter_table, user_bytes, generation);
        let written = with_generation(&cache_key, |known| {
            let Some(top) = known.top else {
                return false;
            };
            GenerationRows::needed(&layout, Some(top), &hashes)
                .into_iter()
                .all(|(layer, segment)| {
                    let Some(&(_, _, root)) = known
                        .tids
                        .iter()
                        .find(|&&(l, s, _)| (l, s) == (layer, segment))
                    else {
                        return false;
                    };
                    let mine: Vec<u64> = hashes
                        .iter()
                        .copied()
                        .filter(|&h| layout.locate(h, layer as usize).0 == segment)
                        .collect();
                    let key = RowKey {
                        user_kind: table.user_kind,
                        user_bytes: &cache_key.1,
                        generation,
                        layer,
                        segment,
                    };
                    let len = layout.segment_len(layer as usize, segment);
                    // SAFETY: the heap is open and locked ROW EXCLUSIVE, of `blocks` blocks;
                    // the snapshot is registered; we hold the commit-fold tag.
                    unsafe {
                        fold_in_place(
                            table.heap,
                            blocks,
                            root,
                            &key,
                            len,
                            table.snapshot,
                            |bits| layout.segment_insert(layer as usize, segment, bits, &mine),
                        )
                    }
                })
        });
        if written != Some(true) {
            // Rows already written keep their bits: the fold under the lock finds them set,
            // starting from what is remembered and adding the rows it reads.
            let (_, user_bytes, _) = cache_key;
            left.push((generation, user_bytes, d));
        }
    }
    left
}

/// A subtransaction ended: an aborted one's hashes go, a committed one's become its parent's.
pub fn end_subtransaction(sub: SubTransactionId, parent: SubTransactionId, aborted: bool) {
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        let mut dropped = 0;
        state.groups.retain(|_, d| {
            let before = d.hashes.len();
            if aborted {
                d.hashes.retain(|&(s, _)| s != sub);
                if d.folded_in == sub {
                    d.folded = 0;
                }
                d.folded = d.folded.min(d.hashes.len());
            } else {
                for (s, _) in d.hashes.iter_mut().filter(|(s, _)| *s == sub) {
                    *s = parent;
                }
                if d.folded_in == sub {
                    d.folded_in = parent;
                }
            }
            dropped += before - d.hashes.len();
            !d.hashes.is_empty()
        });
        state.hashes -= dropped;
    });
}

/// The transaction ended (or wrote what it deferred): nothing is left to fold.
pub fn forget() {
    STATE.with(|s| *s.borrow_mut() = State::default());
}

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

use crate::fold::group::{Group, Groups};
use crate::fold::groups::fold_groups;
use crate::fold::user_locks::MAX_USER_LOCKS;
use crate::pg::item_type::Item;
use crate::pg::owner::as_role;
use crate::storage::filter_table::{Access, FilterTable};
use crate::storage::heap_prefetch::{prefetch_line_pointer, prefetch_tuple};
use crate::storage::page::block_of;
use crate::storage::unlocked_write::{fold_in_place, pin_recent, RowKey};
use crate::tracking::caches::{layout, with_generation};
use crate::tracking::layout::user_layout;
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
    /// The role the statement folded as (the tracked table's owner, see owner): the
    /// commit folds as it too.
    role: pg_sys::Oid,
}

/// A deferred impression. Kept flat, one per row, and grouped by sorting at commit: the
/// maps of groups this replaced allocated per row and per group (malloc was 5 us of a
/// 20-row statement's 30 us of trigger work).
struct Pending {
    table: u32,
    generation: i32,
    /// The user's canonical bytes: `State::bytes[user_at..user_at + user_len]`.
    user_at: u32,
    user_len: u32,
    /// The user (a by-reference one copied into the transaction's memory).
    user: pg_sys::Datum,
    hash: u64,
    /// The subtransaction that deferred it.
    sub: SubTransactionId,
    /// The subtransaction of the read that folded it already (see fold_now), 0 if none:
    /// that fold's writes are undone if it aborts, and the hash is then folded again.
    folded_in: SubTransactionId,
}

#[derive(Default)]
struct State {
    tables: BTreeMap<u32, TableFold>,
    pending: Vec<Pending>,
    /// The users' canonical bytes, one after the other.
    bytes: Vec<u8>,
}

/// The canonical bytes of `p`'s user, in `bytes` (State::bytes).
fn user_bytes_in<'a>(bytes: &'a [u8], p: &Pending) -> &'a [u8] {
    &bytes[p.user_at as usize..(p.user_at + p.user_len) as usize]
}

impl State {
    fn user_bytes(&self, p: &Pending) -> &[u8] {
        user_bytes_in(&self.bytes, p)
    }

    /// `pending` grouped as the ordinary fold takes them.
    fn groups<'a>(&self, pending: impl Iterator<Item = &'a Pending>) -> Groups {
        let mut groups = Groups::new();
        for p in pending {
            let user_bytes = self.user_bytes(p);
            groups
                .entry((p.generation, user_bytes.to_vec()))
                .or_insert_with(|| Group {
                    user: p.user,
                    user_bytes: user_bytes.to_vec(),
                    generation: p.generation,
                    hashes: Vec::new(),
                })
                .hashes
                .push(p.hash);
        }
        groups
    }

    /// Empties the state, keeping a transaction's usual room (a bulk load's is given back).
    fn clear(&mut self) {
        const KEPT: usize = 1 << 12;
        self.tables.clear();
        self.pending.clear();
        self.pending.shrink_to(KEPT);
        self.bytes.clear();
        self.bytes.shrink_to(KEPT * 8);
    }
}

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

/// One layer row a fold at commit writes: its group (an index in the groups), key, bits'
/// length, where its HOT chain starts, and its share of the group's hashes (a range of the
/// targets' hashes).
struct Target {
    group: usize,
    layer: i16,
    segment: u32,
    len: usize,
    root: pg_sys::ItemPointerData,
    hashes: std::ops::Range<usize>,
}

/// Rows pinned at once: their cache misses overlap (each row's buffer header, line pointer,
/// tuple header and bits were missed in turn: ~1 us of a row's ~2 us), while a bulk
/// insert's commit pins no more than this of shared buffers.
const PINNED_AT_ONCE: usize = 32;

/// Folds what it can of `pending` (one table's, sorted by generation and user) in place
/// without user locks; returns the rest, grouped.
fn fold_without_locks(
    filter_table: pg_sys::Oid,
    how: TableFold,
    state: &State,
    pending: &[Pending],
) -> Groups {
    // A filter table dropped since (untrack in this transaction): nothing to fold into.
    // SAFETY: try_relation_open returns null for a relation that is gone; closed at once,
    // the lock kept (FilterTable::open takes the same).
    unsafe {
        let heap =
            pg_sys::try_relation_open(filter_table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        if heap.is_null() {
            return Groups::new();
        }
        pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    if !crate::fold::user_locks::share_commit_folds(filter_table) {
        return state.groups(pending.iter());
    }
    let layout = layout(how.error_rate, user_layout(how.layout_number, true));
    // The rows of each group, where this backend knows them all (else the group is left).
    let groups: Vec<&[Pending]> = pending
        .chunk_by(|a, b| a.generation == b.generation && state.user_bytes(a) == state.user_bytes(b))
        .collect();
    let mut left = vec![false; groups.len()];
    let (mut targets, mut hashes) = (Vec::with_capacity(groups.len()), Vec::new());
    for (g, group) in groups.iter().enumerate() {
        let (generation, user_bytes) = (group[0].generation, state.user_bytes(&group[0]));
        let (targets_before, hashes_before) = (targets.len(), hashes.len());
        let cache_key = (filter_table, user_bytes.to_vec(), generation);
        let planned = with_generation(&cache_key, |known| {
            let group_hashes: Vec<u64> = group.iter().map(|p| p.hash).collect();
            for (layer, segment) in
                GenerationRows::needed(&layout, known.top?.into(), &group_hashes)
            {
                let &(_, _, root) = known
                    .tids
                    .iter()
                    .find(|&&(l, s, _)| (l, s) == (layer, segment))?;
                let from = hashes.len();
                hashes.extend(
                    group_hashes
                        .iter()
                        .filter(|&&h| layout.locate(h, layer as usize).0 == segment),
                );
                targets.push(Target {
                    group: g,
                    layer,
                    segment,
                    len: layout.segment_len(layer as usize, segment),
                    root,
                    hashes: from..hashes.len(),
                });
            }
            Some(())
        });
        if planned.flatten().is_none() {
            targets.truncate(targets_before);
            hashes.truncate(hashes_before);
            left[g] = true;
        }
    }
    // Our own writes of this transaction (rows a rebuild here deleted) seen as done.
    // SAFETY: a plain call between statements' work.
    unsafe { pg_sys::CommandCounterIncrement() };
    let table = FilterTable::open(filter_table, how.user_type, Access::Write);
    // SAFETY: the heap is open and locked.
    let blocks = unsafe {
        pg_sys::RelationGetNumberOfBlocksInFork(table.heap, pg_sys::ForkNumber::MAIN_FORKNUM)
    };
    targets.retain(|t| {
        let inside = block_of(&t.root) < blocks;
        left[t.group] |= !inside;
        inside
    });
    for window in targets.chunks(PINNED_AT_ONCE) {
        // Pin every page, then ask for each row's line pointer, then each tuple's header
        // and bits: one step for all rows at a time, so their misses overlap.
        // SAFETY: the blocks are the heap's (checked above); the pages stay pinned until
        // released below; prefetches only read inside them.
        let pages: Vec<(pg_sys::Buffer, *const u8)> = window
            .iter()
            .map(|t| unsafe {
                let buffer = pin_recent(table.heap, block_of(&t.root));
                let page = pg_sys::BufferGetPage(buffer) as *const u8;
                prefetch_line_pointer(page, t.root.ip_posid);
                (buffer, page)
            })
            .collect();
        for (t, &(_, page)) in window.iter().zip(&pages) {
            // SAFETY: as above.
            unsafe { prefetch_tuple(page, t.root.ip_posid, t.len) };
        }
        for (t, &(buffer, _)) in window.iter().zip(&pages) {
            if !left[t.group] {
                let group = groups[t.group];
                let key = RowKey {
                    user_kind: table.user_kind,
                    user_bytes: state.user_bytes(&group[0]),
                    generation: group[0].generation,
                    layer: t.layer,
                    segment: t.segment,
                };
                let mine = &hashes[t.hashes.clone()];
                // SAFETY: the heap is open and locked ROW EXCLUSIVE, `buffer` its pinned
                // page of the root's block; the snapshot is registered; we hold the
                // commit-fold tag.
                let written = unsafe {
                    fold_in_place(
                        table.heap,
                        buffer,
                        t.root,
                        &key,
                        t.len,
                        table.snapshot,
                        |bits| layout.segment_insert(t.layer as usize, t.segment, bits, mine),
                    )
                };
                // Rows already written keep their bits: the fold under the lock finds them
                // set, starting from what is remembered and adding the rows it reads.
                left[t.group] |= !written;
            }
            // SAFETY: releases the pin taken above.
            unsafe { pg_sys::ReleaseBuffer(buffer) };
        }
    }
    state.groups(
        groups
            .iter()
            .zip(&left)
            .filter(|(_, &l)| l)
            .flat_map(|(group, _)| group.iter()),
    )
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

//! A fold at commit without the users' locks (see commit_fold): each deferred group whose
//! rows this backend knows, written in place under the pages' locks; the rest is returned
//! for the fold under the users' locks.

use crate::fold::deferred::{Pending, State, TableFold};
use crate::fold::group::Groups;
use crate::storage::filter_table::{Access, FilterTable};
use crate::storage::heap_prefetch::{prefetch_line_pointer, prefetch_tuple};
use crate::storage::overwrite::{pages_per_record, write_pages, PageWrite};
use crate::storage::page::block_of;
use crate::storage::unlocked_write::{change_in_place, pin_recent, RowKey};
use crate::tracking::caches::{layout, with_generation};
use crate::tracking::layout::user_layout;
use crate::tracking::tracked_config::UserCap;
use bloom_core::{GenerationLayout, GenerationRows};
use pgrx::pg_sys;

/// One layer row a fold at commit writes: its group (an index in the groups), key, bits'
/// length, where its HOT chain starts, and its share of the group's hashes (a range of the
/// targets' hashes).
pub struct Target {
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
pub const PINNED_AT_ONCE: usize = 32;

/// Folds what it can of `pending` (one table's, sorted by generation and user) in place
/// without user locks; returns the rest, grouped.
pub fn fold_without_locks(
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
    let layout = layout(
        how.error_rate,
        user_layout(how.layout_number, true),
        UserCap::items_of(how.cap),
    );
    let mut plan = plan_targets(filter_table, &layout, state, pending);
    // Our own writes of this transaction (rows a rebuild here deleted) seen as done.
    // SAFETY: a plain call between statements' work.
    unsafe { pg_sys::CommandCounterIncrement() };
    let table = FilterTable::open(filter_table, how.user_type, Access::Write);
    write_targets(&table, &layout, state, &mut plan);
    state.groups(
        plan.groups
            .iter()
            .zip(&plan.left)
            .filter(|(_, &l)| l)
            .flat_map(|(group, _)| group.iter()),
    )
}

/// What a fold at commit of one table writes without locks: its groups (runs of `pending`),
/// whether each is left to the fold under the users' locks, the rows to write and their
/// hashes.
pub struct Targets<'a> {
    groups: Vec<&'a [Pending]>,
    left: Vec<bool>,
    targets: Vec<Target>,
    hashes: Vec<u64>,
}

/// The rows of each group, where this backend knows them all (else the group is left).
pub fn plan_targets<'a>(
    filter_table: pg_sys::Oid,
    layout: &GenerationLayout,
    state: &State,
    pending: &'a [Pending],
) -> Targets<'a> {
    let groups: Vec<&[Pending]> = pending
        .chunk_by(|a, b| a.generation == b.generation && state.user_bytes(a) == state.user_bytes(b))
        .collect();
    let mut left = vec![false; groups.len()];
    let (mut targets, mut hashes) = (Vec::with_capacity(groups.len()), Vec::new());
    // One key, hash list and row list for every group: no allocation per user.
    let mut cache_key = (filter_table, Vec::new(), 0);
    let (mut group_hashes, mut rows) = (Vec::new(), Vec::new());
    for (g, group) in groups.iter().enumerate() {
        let (generation, user_bytes) = (group[0].generation, state.user_bytes(&group[0]));
        let (targets_before, hashes_before) = (targets.len(), hashes.len());
        cache_key.1.clear();
        cache_key.1.extend_from_slice(user_bytes);
        cache_key.2 = generation;
        let planned = with_generation(&cache_key, |known| {
            group_hashes.clear();
            group_hashes.extend(group.iter().map(|p| p.hash));
            GenerationRows::needed_into(layout, known.top?.into(), &group_hashes, &mut rows);
            for &(layer, segment) in &rows {
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
    Targets {
        groups,
        left,
        targets,
        hashes,
    }
}

/// Writes the planned rows in place, `PINNED_AT_ONCE` at a time; a group any of whose rows
/// could not be written is left.
pub fn write_targets(
    table: &FilterTable,
    layout: &GenerationLayout,
    state: &State,
    plan: &mut Targets,
) {
    // SAFETY: the heap is open and locked.
    let blocks = unsafe {
        pg_sys::RelationGetNumberOfBlocksInFork(table.heap, pg_sys::ForkNumber::MAIN_FORKNUM)
    };
    let Targets {
        groups,
        left,
        targets,
        hashes,
    } = plan;
    targets.retain(|t| {
        let inside = block_of(&t.root) < blocks;
        left[t.group] |= !inside;
        inside
    });
    for window in targets.chunks(PINNED_AT_ONCE) {
        // Pin every page, then ask for each row's line pointer, then each tuple's header
        // and bits: one step for all rows at a time, so their misses overlap.
        let pages: Vec<(pg_sys::Buffer, *const u8)> = window
            .iter()
            .map(|t| {
                // SAFETY: the blocks are the heap's (checked above); the pages stay pinned
                // until released below.
                let (buffer, page) = unsafe {
                    let buffer = pin_recent(table.heap, block_of(&t.root));
                    (buffer, pg_sys::BufferGetPage(buffer) as *const u8)
                };
                prefetch_line_pointer(page, t.root.ip_posid);
                (buffer, page)
            })
            .collect();
        for (t, &(_, page)) in window.iter().zip(&pages) {
            // SAFETY: each page is pinned (above).
            unsafe { prefetch_tuple(page, t.root.ip_posid, t.len) };
        }
        let pinned: Vec<pg_sys::Buffer> = pages.iter().map(|&(buffer, _)| buffer).collect();
        write_window(
            table,
            layout,
            state,
            (groups, left, hashes),
            window,
            &pinned,
        );
        for &(buffer, _) in &pages {
            // SAFETY: releases the pins taken above.
            unsafe { pg_sys::ReleaseBuffer(buffer) };
        }
    }
}

/// Writes one window of targets whose pages are pinned (`pinned[i]`: the page of
/// `window[i]`), marking in `left` each group a row of which could not be written.
fn write_window(
    table: &FilterTable,
    layout: &GenerationLayout,
    state: &State,
    (groups, left, hashes): (&[&[Pending]], &mut [bool], &[u64]),
    window: &[Target],
    pinned: &[pg_sys::Buffer],
) {
    // By block: pages are locked in ascending order, as PostgreSQL's heap locks two (so
    // two backends never wait for each other's pages), and up to a record's pages are
    // written and logged in one record: a record per row cost each its header and the
    // relation's name: 79 B of WAL per impression against 53 for 4 pages a record.
    let mut order: Vec<usize> = (0..window.len()).collect();
    order.sort_unstable_by_key(|&i| (block_of(&window[i].root), window[i].root.ip_posid));
    // SAFETY: the heap is open.
    let most = unsafe { pages_per_record(table.heap) };
    let mut batch: Vec<PageWrite> = Vec::with_capacity(most);
    for i in order {
        let (t, buffer) = (&window[i], pinned[i]);
        if left[t.group] {
            continue;
        }
        // Sorted by block: a page's rows are neighbours, so its write is the batch's last.
        if batch.last().map(|p| p.buffer) != Some(buffer) {
            if batch.len() == most {
                // SAFETY: the batch's pages are pinned and locked by us.
                unsafe { write_and_unlock(table.heap, &mut batch) };
            }
            // SAFETY: a page pinned above, not locked by us (not in the batch).
            unsafe { pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32) };
            batch.push(PageWrite::new(buffer));
        }
        let group = groups[t.group];
        let key = RowKey {
            user_kind: table.user_kind,
            user_bytes: state.user_bytes(&group[0]),
            generation: group[0].generation,
            layer: t.layer,
            segment: t.segment,
        };
        let mine = &hashes[t.hashes.clone()];
        // SAFETY: the heap is open and locked ROW EXCLUSIVE, `buffer` its pinned page of
        // the root's block, locked exclusively above; the snapshot is registered; we
        // hold the commit-fold tag.
        let changed = unsafe {
            change_in_place(
                table.heap,
                buffer,
                t.root,
                &key,
                t.len,
                table.snapshot,
                |bits| layout.segment_insert(t.layer as usize, t.segment, bits, mine),
            )
        };
        match changed {
            // Rows already written keep their bits: the fold under the lock finds them
            // set, starting from what is remembered and adding the rows it reads.
            None => left[t.group] = true,
            Some((at, changed)) => batch.last_mut().expect("locked above").add(at, changed),
        }
    }
    // SAFETY: as above.
    unsafe { write_and_unlock(table.heap, &mut batch) };
}

/// Writes a batch's pieces (one record) and unlocks its pages; empties it.
///
/// # Safety
/// Each page of `batch` must be a page of `heap`, pinned and exclusively locked by us.
unsafe fn write_and_unlock(heap: pg_sys::Relation, batch: &mut Vec<PageWrite>) {
    // SAFETY: the contract.
    unsafe {
        write_pages(heap, batch);
        for page in batch.drain(..) {
            pg_sys::LockBuffer(page.buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
        }
    }
}

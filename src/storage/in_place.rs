//! Layout 3's writes of layer rows: new bits written over the row where it lies, not as a
//! new row version, held in this backend until the transaction commits.
//!
//! At `wal_level = logical` PostgreSQL logs the whole new tuple of every UPDATE, 1.5 KB per
//! fold of a layer row; an overwrite logged as generic WAL costs the bytes that changed
//! (about 80 B per impression at `replica` and `logical` alike as generic WAL, a record per
//! row as here; 20 B where a fold at commit logs the bits it set, a record for up to 32 rows,
//! see overwrite). An overwrite is not undone
//! by a rollback, so it waits for the commit: the fold holds the new bits here, keyed by the
//! row version's place, and writes them at PRE_COMMIT (PRE_PREPARE), still holding the
//! user's lock, so no other writer changed the row since. Folds and reads of this backend
//! see the held bits in place of the stored ones; a rolled-back subtransaction takes its own
//! back. The bits are set (OR) into the stored ones, not written over them: folds at commit
//! (see commit_fold) set bits without the user's lock.

use crate::storage::overwrite::{or_in_place, Overwrite};
use pgrx::pg_sys;
use pgrx::pg_sys::SubTransactionId;
use std::cell::RefCell;
use std::collections::HashMap;

/// A row version's place: filter table, its relfilenode (a TRUNCATE gives it a new one, and
/// the places of the old one then name nothing), block and line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place {
    table: pg_sys::Oid,
    file: u32,
    block: u32,
    line: u16,
}

/// The most bytes of bits held at once (`seen_bloom.in_place_memory`, 64 MB by default). A
/// transaction that would hold more (a bulk load over hundreds of thousands of heavy users)
/// writes its further rows as new row versions, as layout 2 does.
pub fn max_held_bytes() -> usize {
    crate::pg::gucs::IN_PLACE_MEMORY_KB.get().max(0) as usize * 1024
}

/// Bits to write, per row version, oldest first, each with the subtransaction that folded
/// them.
type Held = foldhash::HashMap<Place, Vec<(SubTransactionId, Vec<u8>)>>;

thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Default::default());
}

/// The bytes of bits `HELD` holds in all.
fn held_bytes(held: &Held) -> usize {
    held.values().flatten().map(|(_, bits)| bits.len()).sum()
}

/// Whether `len` more bytes may be held (see max_held_bytes). Under the default limit, counted
/// only past a thousand rows, where a sum costs less than the rows it guards.
pub fn has_room(len: usize) -> bool {
    let limit = max_held_bytes();
    HELD.with(|h| {
        let held = h.borrow();
        let at_least_default = limit >= crate::pg::gucs::IN_PLACE_MEMORY_DEFAULT_KB as usize * 1024;
        (held.len() < 1000 && at_least_default) || held_bytes(&held) + len <= limit
    })
}

/// The place of the row version at `tid` of `heap`.
///
/// # Safety
/// `heap` must be an open relation.
pub unsafe fn place(heap: pg_sys::Relation, tid: &pg_sys::ItemPointerData) -> Place {
    // SAFETY: the contract.
    let (table, file) = unsafe { ((*heap).rd_id, file_number(heap)) };
    Place {
        table,
        file,
        block: crate::storage::page::block_of(tid),
        line: tid.ip_posid,
    }
}

/// The relation's relfilenode.
///
/// # Safety
/// `heap` must be an open relation.
unsafe fn file_number(heap: pg_sys::Relation) -> u32 {
    // SAFETY: the contract.
    #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
    let file = unsafe { (*heap).rd_node.relNode };
    // SAFETY: the contract.
    #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
    let file = unsafe { (*heap).rd_locator.relNumber };
    u32::from(file)
}

/// Holds `bits` to be written over the row version at `place` when the transaction commits.
pub fn hold(place: Place, bits: Vec<u8>) {
    // SAFETY: a plain read of the current subtransaction's id.
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        let versions = held.entry(place).or_default();
        match versions.last_mut() {
            Some((s, b)) if *s == sub => *b = bits,
            _ => versions.push((sub, bits)),
        }
    });
}

/// A copy of the bits held for `place`, if any (the newest).
pub fn held(place: Place) -> Option<Vec<u8>> {
    HELD.with(|h| {
        let held = h.borrow();
        held.get(&place)
            .and_then(|v| v.last())
            .map(|(_, bits)| bits.clone())
    })
}

/// Whether anything is held (the read path skips its lookups otherwise).
pub fn any_held() -> bool {
    HELD.with(|h| !h.borrow().is_empty())
}

/// Writes every held row (PRE_COMMIT). A row that is no longer visible was deleted by this
/// transaction (`rebuild` refolds the user's impressions, `untrack`) or its table emptied or
/// dropped: nothing to write for it.
pub fn write_held() {
    let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    if held.is_empty() {
        return;
    }
    let mut by_table: HashMap<pg_sys::Oid, Vec<(Place, Vec<u8>)>> = HashMap::new();
    for (place, mut versions) in held {
        if let Some((_, bits)) = versions.pop() {
            by_table.entry(place.table).or_default().push((place, bits));
        }
    }
    for (table, mut rows) in by_table {
        rows.sort_unstable_by_key(|(p, _)| (p.block, p.line));
        // SAFETY: try_relation_open returns null for a table dropped since; the lock is the one
        // the fold took (ROW EXCLUSIVE), held to the end of the transaction.
        let heap = unsafe {
            pg_sys::try_relation_open(table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE)
        };
        if heap.is_null() {
            continue;
        }
        // SAFETY: `heap` is open; this transaction's own changes are made visible to the
        // fresh snapshot, registered while it is used.
        unsafe {
            let file = file_number(heap);
            pg_sys::CommandCounterIncrement();
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
            let blocks =
                pg_sys::RelationGetNumberOfBlocksInFork(heap, pg_sys::ForkNumber::MAIN_FORKNUM);
            for (place, bits) in rows.iter().filter(|(p, _)| p.file == file) {
                let mut tid: pg_sys::ItemPointerData = std::mem::zeroed();
                tid.ip_blkid.bi_hi = (place.block >> 16) as u16;
                tid.ip_blkid.bi_lo = place.block as u16;
                tid.ip_posid = place.line;
                if or_in_place(heap, blocks, &tid, bits, snapshot) == Overwrite::NotInline {
                    crate::pg::errors::unusable_filter_table(format!(
                        "seen_bloom: a layer row of {} is not stored inline and cannot be written in place",
                        crate::pg::catalog::qualified_name(table)
                    ));
                }
            }
            pg_sys::UnregisterSnapshot(snapshot);
            pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }
}

/// The transaction ended (or wrote what it held): nothing is left to write.
pub fn forget() {
    HELD.with(|h| h.borrow_mut().clear())
}

/// A subtransaction ended: an aborted one's bits go, a committed one's become its parent's.
pub fn end_subtransaction(sub: SubTransactionId, parent: SubTransactionId, aborted: bool) {
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        held.retain(|_, versions| {
            // A subtransaction's inner ones ended before it, so its versions are the newest.
            if versions.last().is_some_and(|(s, _)| *s == sub) {
                let (_, bits) = versions.pop().unwrap();
                if !aborted {
                    match versions.last_mut() {
                        Some((s, b)) if *s == parent => *b = bits,
                        _ => versions.push((parent, bits)),
                    }
                }
            }
            !versions.is_empty()
        });
    });
}

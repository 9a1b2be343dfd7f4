//! A fold at commit's write of one layer row (see fold::commit_fold): under the page's
//! exclusive lock and no user lock, into the version a snapshot sees, and the buffers such
//! writes last pinned.

use crate::storage::filter_table::{COLUMNS, GENERATION, LAYER, SEGMENT, USER_KEY};
use crate::storage::page::{bits_offset, committed_live, tuple_at};
use pgrx::pg_sys;

/// A filter row's key, to check that a line still holds the row a fold remembered there.
pub struct RowKey<'a> {
    pub user_kind: crate::pg::item_type::ItemType,
    pub user_bytes: &'a [u8],
    pub generation: i32,
    pub layer: i16,
    pub segment: u32,
}

/// A fold at commit of one layer row (see commit_fold), under its page's exclusive lock and
/// no user lock: finds the version of the HOT chain at `root` that `snapshot` sees, and
/// returns where its bits start in the page and what `change` makes of them, when that
/// version is the row `key` (a line may have been reused since the row was remembered
/// there), nobody has updated or deleted it (a writer of row versions copies the bits it
/// read, which would lose ours), and its bits are inline, of `len` bytes. None when any of
/// that fails or `change` declines: the caller then folds under the user's lock. The caller
/// writes them (overwrite::write_pages) before it unlocks the page.
///
/// # Safety
/// `heap` must be an open filter table locked ROW EXCLUSIVE, `buffer` its pinned page of
/// `root`'s block (see pin_recent), locked exclusively, `snapshot` a registered MVCC
/// snapshot; the caller holds the table's commit-fold tag (see fold::user_locks), so nobody
/// replacing the user's rows runs.
pub unsafe fn change_in_place(
    heap: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    root: pg_sys::ItemPointerData,
    key: &RowKey,
    len: usize,
    snapshot: pg_sys::Snapshot,
    change: impl FnOnce(&[u8]) -> Option<bloom_core::ChangedBlocks>,
) -> Option<(usize, bloom_core::ChangedBlocks)> {
    if root.ip_posid == 0 {
        return None;
    }
    // SAFETY: the contract; committed_live and heap_hot_search_buffer leave `tuple` pointing
    // at a tuple of the page, deformed within its length, and bits_offset bounds the bits
    // within it.
    unsafe {
        let page = pg_sys::BufferGetPage(buffer) as *const u8;
        let mut tid = root;
        let mut tuple: pg_sys::HeapTupleData = std::mem::zeroed();
        let mut all_dead = false;
        let found = match committed_live(page, root.ip_posid) {
            Some((offset, length)) => {
                tuple = tuple_at(page, heap, root, offset, length);
                true
            }
            None => pg_sys::heap_hot_search_buffer(
                &mut tid,
                heap,
                buffer,
                snapshot,
                &mut tuple,
                &mut all_dead,
                true,
            ),
        };
        let live = found && (*tuple.t_data).t_infomask as u32 & pg_sys::HEAP_XMAX_INVALID != 0 && {
            let mut values = [pg_sys::Datum::from(0usize); COLUMNS];
            let mut nulls = [true; COLUMNS];
            pg_sys::heap_deform_tuple(
                &mut tuple,
                (*heap).rd_att,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            );
            let at = |attnum: i16| values[attnum as usize - 1];
            !nulls.contains(&true)
                && at(GENERATION).value() as i32 == key.generation
                && at(LAYER).value() as i16 == key.layer
                && at(SEGMENT).value() as i32 as u32 == key.segment
                && key.user_kind.canonical_bytes(at(USER_KEY)).as_ref() == key.user_bytes
        };
        if !live {
            return None;
        }
        let at = bits_offset(page, tid.ip_posid, len)?;
        Some((at, change(std::slice::from_raw_parts(page.add(at), len))?))
    }
}

/// Buffers where folds at commit last found blocks: (relation file, block, buffer), in a slot
/// chosen by block. Only a hint: ReadRecentBuffer checks that the buffer still holds the block.
#[cfg(not(feature = "pg13"))]
const RECENT_SLOTS: usize = 1 << 12;

#[cfg(not(feature = "pg13"))]
thread_local! {
    static RECENT: std::cell::RefCell<Vec<(u32, u32, pg_sys::Buffer)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `block` of `heap`, pinned. Through the buffer it was last found in when that still holds
/// it (PostgreSQL 14 and later), which skips the buffer mapping's lookup: that lookup was
/// 0.28 us of a fold at commit's 2.75 us per row, its shared hash table missing the CPU's
/// caches.
///
/// # Safety
/// `heap` must be an open relation, `block` one of its blocks.
pub unsafe fn pin_recent(heap: pg_sys::Relation, block: u32) -> pg_sys::Buffer {
    #[cfg(not(feature = "pg13"))]
    // SAFETY: the contract; a slot's buffer is one ReadBuffer returned for a relation that
    // is not temporary, so a shared buffer (in range), checked by ReadRecentBuffer.
    unsafe {
        if (*(*heap).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as i8 {
            return pg_sys::ReadBuffer(heap, block);
        }
        #[cfg(any(feature = "pg14", feature = "pg15"))]
        let (file, locator) = ((*heap).rd_node.relNode.to_u32(), (*heap).rd_node);
        #[cfg(not(any(feature = "pg14", feature = "pg15")))]
        let (file, locator) = ((*heap).rd_locator.relNumber.to_u32(), (*heap).rd_locator);
        let slot = (block as usize ^ file as usize) % RECENT_SLOTS;
        let recent = RECENT.with(|r| r.borrow().get(slot).copied());
        if let Some((f, b, buffer)) = recent {
            if (f, b) == (file, block)
                && pg_sys::ReadRecentBuffer(
                    locator,
                    pg_sys::ForkNumber::MAIN_FORKNUM,
                    block,
                    buffer,
                )
            {
                return buffer;
            }
        }
        let buffer = pg_sys::ReadBuffer(heap, block);
        RECENT.with(|r| {
            let mut r = r.borrow_mut();
            if r.is_empty() {
                r.resize(
                    RECENT_SLOTS,
                    (0, 0, pg_sys::InvalidBuffer as pg_sys::Buffer),
                );
            }
            r[slot] = (file, block, buffer);
        });
        buffer
    }
    #[cfg(feature = "pg13")]
    // SAFETY: the contract.
    unsafe {
        pg_sys::ReadBuffer(heap, block)
    }
}

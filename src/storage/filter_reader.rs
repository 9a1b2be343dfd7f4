//! The read path's access to a user's filter rows: one index scan on (user, generation >=
//! oldest live), the rows' pages pinned once each and their bits read in place.

use crate::pg::errors::unusable_filter_table;
use crate::pg::item_type::Item;
use crate::storage::filter_table::{
    Access, FilterTable, BITS, COLUMNS, GENERATION, LAYER, SEGMENT,
};
use crate::storage::heap_prefetch::pin_and_prefetch;
use crate::storage::page::block_of;
use pgrx::pg_sys;

/// A user's rows as read. Each row's bits are read in place, in the shared buffer that holds
/// its tuple, which stays pinned (once per page) until this is dropped: a pinned page's tuples
/// do not move (pruning needs the only pin), and copying a 3,000-item user's 14 KB of rows
/// before the window copies them again into its own layout cost a memcpy and level-1 cache
/// room that the array I/O around the call then missed.
#[derive(Default)]
pub struct UserRows {
    /// (generation, layer, segment, bits) per row, in heap order; `bits` points into a pinned
    /// buffer, into `copied`, or into a value detoasted in the current memory context.
    rows: Vec<(i32, i16, u32, *const u8, usize)>,
    pins: Vec<pg_sys::Buffer>,
    /// Bits read elsewhere (held by this transaction, or fetched through Citus), kept here; a
    /// box's bytes do not move when the vector grows.
    copied: Vec<Box<[u8]>>,
}

impl UserRows {
    /// Rows read elsewhere (fetched through Citus, see read::citus): (generation, layer, segment,
    /// bits) each, kept here.
    pub fn owned(rows: Vec<(i32, i16, u32, Box<[u8]>)>) -> UserRows {
        let mut found = UserRows::default();
        for (generation, layer, segment, bits) in rows {
            found
                .rows
                .push((generation, layer, segment, bits.as_ptr(), bits.len()));
            found.copied.push(bits);
        }
        found
    }

    /// (start, length) of each layered row's bits: what the window copies. A compacted row
    /// is probed where it lies, a line per candidate, and was just written by its detoasting.
    pub fn bit_ranges(&self) -> Vec<(*const u8, usize)> {
        self.rows
            .iter()
            .filter(|&&(_, layer, ..)| layer != bloom_core::COMPACTED_LAYER)
            .map(|&(_, _, _, at, len)| (at, len))
            .collect()
    }

    /// (generation, layer, segment, bits) of each row, in heap order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, i16, u32, &[u8])> {
        self.rows.iter().map(|&(g, l, s, at, len)| {
            // SAFETY: `at` points at `len` bytes in a buffer pinned, or a box kept, by self.
            (g, l, s, unsafe { std::slice::from_raw_parts(at, len) })
        })
    }
}

impl Drop for UserRows {
    fn drop(&mut self) {
        // On an error, the transaction's abort releases the pins (resource owners).
        if std::thread::panicking() {
            return;
        }
        for &buffer in &self.pins {
            // SAFETY: pinned once each by pin_and_prefetch, released once here.
            unsafe { pg_sys::ReleaseBuffer(buffer) };
        }
    }
}

/// A filter table opened for reading, as of the statement's snapshot.
pub struct FilterReader {
    table: FilterTable,
    /// The scan keyed on (user, generation >= oldest).
    scan: pg_sys::IndexScanDesc,
}

impl FilterReader {
    /// Opens `filter_table` for the read path after checking that the current user may
    /// SELECT from it.
    /// SELECT from it. With `latest`, a snapshot taken now (see Access::ReadLatest).
    pub fn open(filter_table: pg_sys::Oid, user_type: pg_sys::Oid, latest: bool) -> FilterReader {
        crate::pg::errors::require_table_privilege(filter_table, pg_sys::ACL_SELECT);
        let access = if latest {
            Access::ReadLatest
        } else {
            Access::Read
        };
        let table = FilterTable::open(filter_table, user_type, access);
        let scan = table.begin_scan(2);
        FilterReader { table, scan }
    }

    /// Every row of `user` from generation `oldest` on, in heap order.
    pub fn user_rows_from(&mut self, user: &Item, oldest: i32) -> UserRows {
        let table = &self.table;
        let mut keys = table.keys(&[user.datum()]);
        table.key(
            &mut keys[1],
            1,
            pg_sys::BTGreaterEqualStrategyNumber,
            pg_sys::F_INT4GE,
            pg_sys::Datum::from(oldest),
        );
        table.rescan(self.scan, &mut keys[..2]);
        // The index entries first, then the heap in TID order: a user's rows share a few
        // pages, each then read (and pinned) once instead of once per visit in key order.
        let mut tids = Vec::with_capacity(16);
        loop {
            // SAFETY: the scan was begun on this table's index and rescanned above.
            let tid = unsafe {
                pg_sys::index_getnext_tid(self.scan, pg_sys::ScanDirection::ForwardScanDirection)
            };
            if tid.is_null() {
                break;
            }
            // SAFETY: a non-null result points to the scan's current heap TID.
            tids.push(unsafe { *tid });
        }
        tids.sort_unstable_by_key(|t| (block_of(t), t.ip_posid));
        // SAFETY: the heap is open and locked; the TIDs come from its index under that lock.
        let pages = unsafe { pin_and_prefetch(table.heap, &tids) };
        let mut found = UserRows::default();
        found.pins = pages.iter().map(|&(_, buffer)| buffer).collect();
        // Page by page: the visible versions' columns read under one share lock of the page,
        // then their bits taken once it is released (a compressed value is decompressed into
        // memory, which is not done under a buffer lock).
        let mut visible = Vec::with_capacity(tids.len());
        // pin_and_prefetch pinned each page once, in the sorted TIDs' order.
        let same_page =
            |a: &pg_sys::ItemPointerData, b: &pg_sys::ItemPointerData| block_of(a) == block_of(b);
        for (&(block, buffer), page_tids) in pages.iter().zip(tids.chunk_by_mut(same_page)) {
            assert_eq!(block, block_of(&page_tids[0]), "one pin per page, in order");
            // SAFETY: `buffer` is pinned (found.pins); share-locked while its tuples are read.
            unsafe { pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32) };
            for tid in page_tids {
                if let Some(columns) = self.read_visible(buffer, tid) {
                    visible.push((columns, *tid));
                }
            }
            // SAFETY: locked just above.
            unsafe { pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32) };
        }
        found.rows.reserve(visible.len());
        let held = crate::storage::in_place::any_held();
        for ((values, isnull), tid) in visible {
            if isnull.contains(&true) {
                unusable_filter_table("seen_bloom: a filter row has a NULL column".into());
            }
            // SAFETY: column BITS is a non-null bytea of a tuple in the pinned page (or
            // detoasted into this memory context).
            let mut bits = unsafe { crate::pg::varlena::varlena_bytes(values[BITS as usize - 1]) };
            // SAFETY: the heap is open.
            let place = held.then(|| unsafe { crate::storage::in_place::place(table.heap, &tid) });
            if let Some(mine) = place.and_then(crate::storage::in_place::held) {
                // Bits this transaction folded, written in place when it commits (in_place).
                found.copied.push(mine.into());
                bits = found.copied.last().unwrap();
            }
            // Otherwise the bits are in the pinned page, or (a value stored out of line or
            // compressed, as a compacted row is) detoasted into memory of the current context,
            // which outlives these rows: not copied again (157 KB for a user of 100,000 items).
            found.rows.push((
                values[GENERATION as usize - 1].value() as i32,
                values[LAYER as usize - 1].value() as i16,
                values[SEGMENT as usize - 1].value() as i32 as u32,
                bits.as_ptr(),
                bits.len(),
            ));
        }
        found
    }

    /// The columns (values, nulls) of the version of the HOT chain at `tid` that our snapshot
    /// sees, read in `buffer`, its page, which the caller keeps pinned (a by-reference column
    /// points into it) and holds share-locked; `tid` becomes that version's. None when no
    /// version is visible.
    ///
    /// Unlike the fold's fetch (filter_writer) it looks the page up by its buffer, not again
    /// by block, and does not try to prune it (that needs a cleanup lock, which the caller's
    /// own pin denies; the folds prune).
    fn read_visible(
        &self,
        buffer: pg_sys::Buffer,
        tid: &mut pg_sys::ItemPointerData,
    ) -> Option<([pg_sys::Datum; COLUMNS], [bool; COLUMNS])> {
        let mut values = [pg_sys::Datum::from(0); COLUMNS];
        let mut isnull = [false; COLUMNS];
        // SAFETY: `buffer` is the pinned, share-locked page of `tid` (the caller's); the
        // tuple found points into it and is deformed into arrays of the table's COLUMNS
        // (checked in FilterTable::open).
        unsafe {
            let mut tuple: pg_sys::HeapTupleData = std::mem::zeroed();
            let visible = pg_sys::heap_hot_search_buffer(
                tid,
                self.table.heap,
                buffer,
                self.table.snapshot,
                &mut tuple,
                std::ptr::null_mut(),
                true,
            );
            if !visible {
                return None;
            }
            pg_sys::heap_deform_tuple(
                &mut tuple,
                (*self.table.heap).rd_att,
                values.as_mut_ptr(),
                isnull.as_mut_ptr(),
            );
        }
        Some((values, isnull))
    }
}

impl Drop for FilterReader {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.table.end_scan(self.scan);
        }
    }
}

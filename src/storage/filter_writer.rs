//! The fold's access to a filter table: rows fetched by key (index scans) or by TID (a HOT
//! chain's start remembered from an earlier fold), and written with
//! `CatalogTupleInsert/Update/Delete`, which update the table's plain indexes the way the
//! executor would. The caller has checked that the table is a registered filter table, that
//! the current user may write it, and holds the per-user advisory locks, so no other writer
//! can touch a row between our read and write.

use crate::pg::errors::unusable_filter_table;
use crate::storage::filter_table::{
    Access, FilterTable, BITS, COLUMNS, GENERATION, LAYER, SEGMENT, USER_KEY,
};
use crate::storage::page::block_of;
use pgrx::pg_sys;

/// A filter row as read: its key below the user and generation, its bits, where it is.
pub struct StoredRow {
    pub layer: i16,
    pub segment: u32,
    pub bits: Vec<u8>,
    /// The version read (what an update or delete replaces).
    pub tid: pg_sys::ItemPointerData,
    /// Where the row's HOT chain starts, as its index entry says: a version found from there
    /// is current while the row stays on its page, whoever updated it since.
    pub root: pg_sys::ItemPointerData,
}

/// A filter table opened for one fold, as of a snapshot taken at open.
pub struct FilterWriter {
    table: FilterTable,
    /// The table's indexes, opened once per fold.
    indexes: pg_sys::CatalogIndexState,
    /// The slot fetches fill.
    slot: *mut pg_sys::TupleTableSlot,
    /// Scans keyed on (user, generation) and on the whole key, begun on first use.
    by_generation: pg_sys::IndexScanDesc,
    by_key: pg_sys::IndexScanDesc,
    /// A scan keyed on the user alone (see fold::groups' mark_new_user), begun on first use.
    by_user: pg_sys::IndexScanDesc,
    /// A scan of index entries keyed on (user, generation) (`generation_places`), begun on
    /// first use.
    places: pg_sys::IndexScanDesc,
    /// Fetches by TID, following HOT chains (`fetch_chain`); begun on first use.
    by_tid: *mut pg_sys::IndexFetchTableData,
    /// Blocks of the table when first needed: a remembered TID past them is stale (VACUUM
    /// may truncate between transactions, never while we hold our lock).
    blocks: Option<u32>,
    wrote: bool,
}

impl FilterWriter {
    /// Opens `filter_table`, whose users are of type `user_type`, for a fold.
    pub fn open(filter_table: pg_sys::Oid, user_type: pg_sys::Oid) -> FilterWriter {
        let table = FilterTable::open(filter_table, user_type, Access::Write);
        // SAFETY: the heap is open and locked ROW EXCLUSIVE for as long as `table`.
        let (indexes, slot) = unsafe {
            (
                pg_sys::CatalogOpenIndexes(table.heap),
                pg_sys::table_slot_create(table.heap, std::ptr::null_mut()),
            )
        };
        FilterWriter {
            table,
            indexes,
            slot,
            by_generation: std::ptr::null_mut(),
            by_key: std::ptr::null_mut(),
            by_user: std::ptr::null_mut(),
            places: std::ptr::null_mut(),
            by_tid: std::ptr::null_mut(),
            blocks: None,
            wrote: false,
        }
    }

    /// Column `attnum` of the row in the slot (filter rows have no NULLs).
    fn column(&self, attnum: i16) -> pg_sys::Datum {
        let mut isnull = false;
        // SAFETY: the slot holds a tuple of the filter table (the callers fill it first);
        // slot_getattr checks attnum against its descriptor.
        let value = unsafe { pg_sys::slot_getattr(self.slot, attnum as i32, &mut isnull) };
        if isnull {
            unusable_filter_table("seen_bloom: a filter row has a NULL column".into());
        }
        value
    }

    /// The place of the row version at `tid` (see in_place).
    pub fn place(&self, tid: &pg_sys::ItemPointerData) -> crate::storage::in_place::Place {
        // SAFETY: the heap is open.
        unsafe { crate::storage::in_place::place(self.table.heap, tid) }
    }

    /// The row in the slot, found from `root`; clears the slot. Its bits are those this
    /// transaction holds for it, if any (see in_place).
    fn slot_row(&self, root: pg_sys::ItemPointerData) -> StoredRow {
        // SAFETY: the slot holds a visible version of a filter row: its bits column is a
        // non-null bytea, copied out (unless this transaction holds newer bits) before the
        // slot is cleared.
        unsafe {
            let tid = (*self.slot).tts_tid;
            let bits = crate::storage::in_place::held(self.place(&tid))
                .unwrap_or_else(|| crate::pg::varlena::varlena_bytes(self.column(BITS)).to_vec());
            let row = StoredRow {
                layer: self.column(LAYER).value() as i16,
                segment: self.column(SEGMENT).value() as i32 as u32,
                bits,
                tid,
                root,
            };
            pg_sys::ExecClearTuple(self.slot);
            row
        }
    }

    /// The current row of `scan` after one step in `direction`, or None at the end.
    fn next(
        &self,
        scan: pg_sys::IndexScanDesc,
        direction: pg_sys::ScanDirection::Type,
    ) -> Option<StoredRow> {
        let root = self.step(scan, direction)?;
        Some(self.slot_row(root))
    }

    /// One step of `scan` in `direction`: the visible version found is left in the slot and
    /// its index entry's TID (the HOT chain's start) returned; None at the end.
    fn step(
        &self,
        scan: pg_sys::IndexScanDesc,
        direction: pg_sys::ScanDirection::Type,
    ) -> Option<pg_sys::ItemPointerData> {
        // index_getnext_slot, keeping the index entry's TID: the heap fetch overwrites it with
        // the version found.
        loop {
            // SAFETY: `scan` is one of ours, rescanned by the caller; a non-null TID points
            // to the scan's current entry; the fetch fills our slot of this table.
            unsafe {
                let tid = pg_sys::index_getnext_tid(scan, direction);
                if tid.is_null() {
                    return None;
                }
                let root = *tid;
                // An MVCC snapshot sees at most one version of a chain: no call_again.
                if pg_sys::index_fetch_heap(scan, self.slot) {
                    return Some(root);
                }
            }
        }
    }

    /// The generation's highest row by (layer, segment): it tells the top layer stored.
    pub fn top_row(&mut self, user: pg_sys::Datum, generation: i32) -> Option<StoredRow> {
        if self.by_generation.is_null() {
            self.by_generation = self.table.begin_scan(2);
        }
        let mut keys = self.table.keys(&[user, pg_sys::Datum::from(generation)]);
        self.table.rescan(self.by_generation, &mut keys[..2]);
        self.next(
            self.by_generation,
            pg_sys::ScanDirection::BackwardScanDirection,
        )
    }

    /// Where the rows of a generation lie, (layer, segment, its HOT chain's start), read from
    /// the primary key's entries alone. Visiting each row cost a heavy user's open generation
    /// (137 rows) a heap fetch per row: a backend's first 10,000-row COPY over 1,000 such
    /// users took 360 ms in layout 3, against 158 ms in layout 2, which learns nothing. An
    /// entry may be stale (its row deleted, or an insert that aborted): a place is only ever
    /// used after it is checked against the row found there (see unlocked_write), and a
    /// failed check sends the group to the fold under its lock, which remembers the place it
    /// finds. A key with two entries (an update's old one, not yet removed) is left out: only
    /// the heap tells which one lives.
    pub fn generation_places(
        &mut self,
        user: pg_sys::Datum,
        generation: i32,
    ) -> Vec<(i16, u32, pg_sys::ItemPointerData)> {
        if self.places.is_null() {
            self.places = self.table.begin_scan(2);
            // SAFETY: our scan, before its first rescan (which sizes the tuple copies).
            unsafe { (*self.places).xs_want_itup = true };
        }
        let mut keys = self.table.keys(&[user, pg_sys::Datum::from(generation)]);
        self.table.rescan(self.places, &mut keys[..2]);
        let mut places = Vec::new();
        loop {
            let mut values = [pg_sys::Datum::from(0usize); 4];
            let mut nulls = [true; 4];
            // SAFETY: our scan, rescanned above, with xs_want_itup: a non-null TID comes
            // with the entry's tuple, of the index's four key columns (see FilterTable).
            let root = unsafe {
                let tid = pg_sys::index_getnext_tid(
                    self.places,
                    pg_sys::ScanDirection::ForwardScanDirection,
                );
                if tid.is_null() {
                    break;
                }
                pg_sys::index_deform_tuple(
                    (*self.places).xs_itup,
                    (*self.places).xs_itupdesc,
                    values.as_mut_ptr(),
                    nulls.as_mut_ptr(),
                );
                *tid
            };
            if nulls[2] || nulls[3] {
                continue;
            }
            places.push((
                values[2].value() as i16,
                values[3].value() as i32 as u32,
                root,
            ));
        }
        // In index order: a key's entries are neighbours.
        places
            .chunk_by(|a, b| (a.0, a.1) == (b.0, b.1))
            .filter(|entries| entries.len() == 1)
            .map(|entries| entries[0])
            .collect()
    }

    /// Whether `user` has any row.
    pub fn has_rows(&mut self, user: pg_sys::Datum) -> bool {
        if self.by_user.is_null() {
            self.by_user = self.table.begin_scan(1);
        }
        let mut keys = self.table.keys(&[user]);
        self.table.rescan(self.by_user, &mut keys[..1]);
        let found = self
            .step(self.by_user, pg_sys::ScanDirection::ForwardScanDirection)
            .is_some();
        // SAFETY: clears our own slot.
        unsafe { pg_sys::ExecClearTuple(self.slot) };
        found
    }

    /// One row by its whole key.
    pub fn row(
        &mut self,
        user: pg_sys::Datum,
        generation: i32,
        layer: i16,
        segment: u32,
    ) -> Option<StoredRow> {
        if self.by_key.is_null() {
            self.by_key = self.table.begin_scan(4);
        }
        let mut keys = self.table.keys(&[
            user,
            pg_sys::Datum::from(generation),
            pg_sys::Datum::from(layer),
            pg_sys::Datum::from(segment as i32),
        ]);
        self.table.rescan(self.by_key, &mut keys);
        self.next(self.by_key, pg_sys::ScanDirection::ForwardScanDirection)
    }

    /// Fetches into the slot the version of the HOT chain starting at `tid` that our snapshot
    /// sees, as an index entry is followed (the page pruned when first reached, so the dead
    /// versions HOT updates leave are reclaimed and the next update stays on the page);
    /// `tid` becomes that version's. False when there is none.
    fn fetch_chain(&mut self, tid: &mut pg_sys::ItemPointerData) -> bool {
        // SAFETY: the heap is open and locked; `tid` is within its blocks (row_at checks);
        // the fetch fills our slot of this table.
        unsafe {
            if self.by_tid.is_null() {
                self.by_tid = pg_sys::table_index_fetch_begin(self.table.heap);
            }
            // An MVCC snapshot sees at most one version of a chain: no call_again.
            let (mut call_again, mut all_dead) = (false, false);
            pg_sys::table_index_fetch_tuple(
                self.by_tid,
                tid,
                self.table.snapshot,
                self.slot,
                &mut call_again,
                &mut all_dead,
            )
        }
    }

    /// The row with this whole key, found from `root` (its HOT chain's start when this
    /// backend last read or wrote it) as an index entry is followed: one heap fetch instead
    /// of an index descent, also after other backends' HOT updates of the row. None when the
    /// chain is gone, ends before a version our snapshot sees (the row moved to another page)
    /// or `root` now holds another row; the caller then looks the key up. A visible version
    /// with the key is the row: the primary key allows one, and the caller holds the user's
    /// lock.
    pub fn row_at(
        &mut self,
        root: pg_sys::ItemPointerData,
        user_bytes: &[u8],
        generation: i32,
        layer: i16,
        segment: u32,
    ) -> Option<StoredRow> {
        let heap = self.table.heap;
        let blocks = *self.blocks.get_or_insert_with(|| {
            // SAFETY: the heap is open and locked.
            unsafe {
                pg_sys::RelationGetNumberOfBlocksInFork(heap, pg_sys::ForkNumber::MAIN_FORKNUM)
            }
        });
        if block_of(&root) >= blocks || root.ip_posid == 0 {
            return None;
        }
        let mut tid = root;
        if !self.fetch_chain(&mut tid) {
            return None;
        }
        let matches = self.column(GENERATION).value() as i32 == generation
            && self.column(LAYER).value() as i16 == layer
            && self.column(SEGMENT).value() as i32 as u32 == segment
            // SAFETY: the slot holds the version found, whose user_key is of the table's
            // user type (checked at open).
            && unsafe {
                self.table
                    .user_kind
                    .canonical_bytes(self.column(USER_KEY))
                    .as_ref()
                    == user_bytes
            };
        if matches {
            Some(self.slot_row(root))
        } else {
            // SAFETY: clears our slot.
            unsafe { pg_sys::ExecClearTuple(self.slot) };
            None
        }
    }

    /// A new filter row tuple.
    fn tuple(
        &self,
        user: pg_sys::Datum,
        generation: i32,
        layer: i16,
        segment: u32,
        bits: &[u8],
    ) -> pg_sys::HeapTuple {
        let mut values = [
            user,
            pg_sys::Datum::from(generation),
            pg_sys::Datum::from(layer),
            pg_sys::Datum::from(segment as i32),
            crate::pg::varlena::varlena_datum(bits),
        ];
        let mut nulls = [false; COLUMNS];
        // SAFETY: the values match the table's COLUMNS columns (checked at open): the user
        // datum is of its user type (the caller's), the rest as built above.
        unsafe {
            pg_sys::heap_form_tuple(
                (*self.table.heap).rd_att,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            )
        }
    }

    /// Replaces the bits of the row version at `tid` (read through this writer), whose HOT
    /// chain starts at `root`; returns where the row's chain starts now: still `root` after a
    /// HOT update, the new version after one that left the page.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        tid: &pg_sys::ItemPointerData,
        root: &pg_sys::ItemPointerData,
        user: pg_sys::Datum,
        generation: i32,
        layer: i16,
        segment: u32,
        bits: &[u8],
    ) -> pg_sys::ItemPointerData {
        self.wrote = true;
        let tuple = self.tuple(user, generation, layer, segment, bits);
        let mut tid = *tid;
        // SAFETY: `tid` is a version this writer read under the user's lock; heap_update
        // leaves the new version's TID and its heap-only flag in the tuple, freed after.
        unsafe {
            pg_sys::CatalogTupleUpdateWithInfo(self.table.heap, &mut tid, tuple, self.indexes);
            let heap_only =
                u32::from((*(*tuple).t_data).t_infomask2) & pg_sys::HEAP_ONLY_TUPLE != 0;
            let new_root = if heap_only { *root } else { (*tuple).t_self };
            pg_sys::heap_freetuple(tuple);
            new_root
        }
    }

    /// Inserts a row; returns where it is (its HOT chain's start).
    pub fn insert(
        &mut self,
        user: pg_sys::Datum,
        generation: i32,
        layer: i16,
        segment: u32,
        bits: &[u8],
    ) -> pg_sys::ItemPointerData {
        self.wrote = true;
        let tuple = self.tuple(user, generation, layer, segment, bits);
        // SAFETY: a tuple of this table, inserted and then freed.
        unsafe {
            pg_sys::CatalogTupleInsertWithInfo(self.table.heap, tuple, self.indexes);
            let tid = (*tuple).t_self;
            pg_sys::heap_freetuple(tuple);
            tid
        }
    }

    /// Deletes the row version at `tid` (read through this writer).
    pub fn delete(&mut self, tid: &pg_sys::ItemPointerData) {
        let mut tid = *tid;
        // SAFETY: `tid` is a version this writer read under the user's lock.
        unsafe { pg_sys::CatalogTupleDelete(self.table.heap, &mut tid) };
        self.wrote = true;
    }
}

impl Drop for FilterWriter {
    fn drop(&mut self) {
        // On an error, the transaction's abort releases all of this (resource owners).
        if std::thread::panicking() {
            return;
        }
        self.table.end_scan(self.by_generation);
        self.table.end_scan(self.by_key);
        self.table.end_scan(self.by_user);
        self.table.end_scan(self.places);
        // SAFETY: each was made in `open` or on first use and is released once here.
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            if !self.by_tid.is_null() {
                pg_sys::table_index_fetch_end(self.by_tid);
            }
            pg_sys::CatalogCloseIndexes(self.indexes);
            if self.wrote {
                // Later statements of this transaction (and the next fold) see these rows.
                pg_sys::CommandCounterIncrement();
            }
        }
    }
}

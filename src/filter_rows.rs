//! The fold's access to a tracked table's filter rows: primary-key index scans and tuple
//! writes straight through the table access layer, without the executor.
//!
//! A batch of impressions touches about one filter row per user. Through SPI each touch
//! cost a share of three statements' start-up, parameter arrays and joins over `unnest`;
//! here it is one index descent to find the row and one (HOT) heap update. The writes go
//! through `CatalogTupleInsert/Update/Delete`, which update the table's plain indexes the
//! way the executor would; the caller has checked that the table is a registered filter
//! table with only its primary key, that the current user may write it, and holds the
//! per-user advisory locks, so no other writer can touch a row between our read and write.

use pgrx::{ereport, pg_sys, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::HashSet;

/// Columns of a filter table (1-based attribute numbers): user_key, generation, layer,
/// segment, bits; the primary key is the first four.
const USER_KEY: i16 = 1;
const GENERATION: i16 = 2;
const LAYER: i16 = 3;
const SEGMENT: i16 = 4;
const BITS: i16 = 5;
const COLUMNS: usize = 5;

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

/// A user's rows as read. Each row's bits are read in place, in the shared buffer that holds
/// its tuple, which stays pinned (once per page) until this is dropped: a pinned page's tuples
/// do not move (pruning needs the only pin), and copying a 3,000-item user's 14 KB of rows
/// before the window copies them again into its own layout cost a memcpy and level-1 cache
/// room that the array I/O around the call then missed.
#[derive(Default)]
pub struct UserRows {
    /// (generation, layer, segment, bits) per row, in heap order; `bits` points into a pinned
    /// buffer or into `copied`.
    rows: Vec<(i32, i16, u32, *const u8, usize)>,
    pins: Vec<pg_sys::Buffer>,
    /// Bits not in a buffer (a value detoasted into memory), kept here; a box's bytes do not
    /// move when the vector grows.
    copied: Vec<Box<[u8]>>,
}

impl UserRows {
    /// (start, length) of each row's bits.
    pub fn bit_ranges(&self) -> Vec<(*const u8, usize)> {
        self.rows
            .iter()
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
            unsafe { pg_sys::ReleaseBuffer(buffer) };
        }
    }
}

/// The heap block a TID points into.
pub(crate) fn block_of(tid: &pg_sys::ItemPointerData) -> u32 {
    (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo)
}

/// An open filter table for one fold or one read: the table and its primary key locked,
/// a snapshot (see `open_as`), and the two index scans, started on first use.
pub struct FilterRows {
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    /// For writing: the table's indexes, opened once per fold.
    indexes: pg_sys::CatalogIndexState,
    snapshot: pg_sys::Snapshot,
    /// For writing: the slot index fetches fill (a read fetches by buffer, `read_visible`).
    slot: *mut pg_sys::TupleTableSlot,
    /// Scans keyed on (user, generation) and on the whole key.
    by_generation: pg_sys::IndexScanDesc,
    by_key: pg_sys::IndexScanDesc,
    user_eq: u32,
    /// The user_key column's type, to compare a row fetched by TID with the user wanted.
    user_kind: crate::items::ItemType,
    /// Blocks of the table when first needed: a remembered TID past them is stale (VACUUM
    /// may truncate between transactions, never while we hold our lock).
    blocks: Option<u32>,
    /// Fetches by TID, following HOT chains (`fetch_chain`); started on first use.
    by_tid: *mut pg_sys::IndexFetchTableData,
    wrote: bool,
}

thread_local! {
    /// (filter table, user type) pairs whose columns were checked since the table's last
    /// relcache invalidation (any DDL on it), so a read or a fold looks their types up once.
    static CHECKED_SHAPES: RefCell<HashSet<(pg_sys::Oid, pg_sys::Oid)>> = RefCell::new(HashSet::new());
}

/// Forgets the shape checks of `relid` (of every table for InvalidOid).
pub fn forget_checked_shape(relid: pg_sys::Oid) {
    CHECKED_SHAPES.with(|c| {
        c.borrow_mut()
            .retain(|&(table, _)| relid != pg_sys::InvalidOid && table != relid)
    });
}

fn refuse(message: String) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        message,
        "Untrack and track the table again to recreate its filter table."
    );
    #[allow(unreachable_code)]
    {
        unreachable!()
    }
}

impl FilterRows {
    /// Opens `filter_table` for a fold: see `open_as`.
    pub fn open(filter_table: pg_sys::Oid, user_type: pg_sys::Oid) -> FilterRows {
        FilterRows::open_as(filter_table, user_type, true)
    }

    /// Opens `filter_table` for the read path, as of the statement's snapshot, after checking
    /// that the current user may SELECT from it.
    pub fn open_for_read(filter_table: pg_sys::Oid, user_type: pg_sys::Oid) -> FilterRows {
        crate::errors::require_table_privilege(filter_table, pg_sys::ACL_SELECT);
        FilterRows::open_as(filter_table, user_type, false)
    }

    /// Opens `filter_table`, whose user_key column has type `user_type`, checking that it
    /// has the filter table's shape and no index but its primary key. A writer locks it
    /// ROW EXCLUSIVE and reads as of a snapshot taken now; a reader locks it ACCESS SHARE
    /// and reads as of the statement's snapshot.
    fn open_as(filter_table: pg_sys::Oid, user_type: pg_sys::Oid, write: bool) -> FilterRows {
        let lock = if write {
            pg_sys::RowExclusiveLock
        } else {
            pg_sys::AccessShareLock
        } as pg_sys::LOCKMODE;
        let user_eq = match user_type {
            pg_sys::INT8OID => pg_sys::F_INT8EQ,
            pg_sys::TEXTOID => pg_sys::F_TEXTEQ,
            pg_sys::UUIDOID => pg_sys::F_UUID_EQ,
            _ => refuse(format!(
                "seen_bloom: unsupported user type {}",
                user_type.to_u32()
            )),
        };
        unsafe {
            let heap = pg_sys::table_open(filter_table, lock);
            let name = || {
                std::ffi::CStr::from_ptr((*(*heap).rd_rel).relname.data.as_ptr())
                    .to_string_lossy()
                    .into_owned()
            };
            let checked = CHECKED_SHAPES.with(|c| c.borrow().contains(&(filter_table, user_type)));
            let desc = (*heap).rd_att;
            let expected = [
                user_type,
                pg_sys::INT4OID,
                pg_sys::INT2OID,
                pg_sys::INT4OID,
                pg_sys::BYTEAOID,
            ];
            // A dropped column's type is InvalidOid.
            // Heap pages are read and written directly (the table is made by track(), with
            // the default table access method).
            let heap_am = (*(*heap).rd_rel).relam == pg_sys::HEAP_TABLE_AM_OID;
            let shape_ok = heap_am
                && (checked
                    || (*desc).natts as usize == COLUMNS
                        && expected.iter().enumerate().all(|(i, &t)| {
                            pg_sys::get_atttype(filter_table, (i + 1) as pg_sys::AttrNumber) == t
                        }));
            if !shape_ok {
                refuse(format!("seen_bloom: {} is not a filter table", name()));
            }
            // Always asked, even for a table whose columns were checked before: `rd_pkindex`
            // is only valid once RelationGetIndexList has run on the current relcache entry,
            // and a rebuilt entry starts without it. Trusting the earlier check instead once
            // read it unset here (a tracking_concurrency run, folds beside rebuilds and
            // autovacuum). On a valid entry the call only copies a one-element list.
            let list = pg_sys::RelationGetIndexList(heap);
            let index_count = if list.is_null() { 0 } else { (*list).length };
            pg_sys::list_free(list);
            let pk = (*heap).rd_pkindex;
            if pk == pg_sys::InvalidOid || index_count != 1 {
                refuse(format!(
                    "seen_bloom: filter table {} must have its primary key and no other index",
                    name()
                ));
            }
            // (`heap` is open and locked: its relcache entry's trigdesc is valid to read.)
            // Rows are written straight into the heap: a row trigger (pg_repack's, an audit
            // trigger) would never see them, and pg_repack would lose them at its swap. The
            // DDL event trigger refuses such triggers; this catches one made around it.
            if write && !(*heap).trigdesc.is_null() {
                refuse(format!(
                    "seen_bloom: filter table {} has triggers, which the fold's direct writes would bypass (drop them; rewrite a filter table with VACUUM FULL or CLUSTER, not pg_repack)",
                    name()
                ));
            }
            let index = pg_sys::index_open(pk, lock);
            if (*(*index).rd_index).indnkeyatts != 4 {
                refuse(format!(
                    "seen_bloom: the primary key of {} is not the filter key",
                    name()
                ));
            }
            if !checked {
                CHECKED_SHAPES.with(|c| c.borrow_mut().insert((filter_table, user_type)));
            }
            let snapshot = pg_sys::RegisterSnapshot(if write {
                pg_sys::GetLatestSnapshot()
            } else if pg_sys::ActiveSnapshotSet() {
                pg_sys::GetActiveSnapshot()
            } else {
                pg_sys::GetTransactionSnapshot()
            });
            FilterRows {
                heap,
                index,
                indexes: if write {
                    pg_sys::CatalogOpenIndexes(heap)
                } else {
                    std::ptr::null_mut()
                },
                snapshot,
                slot: if write {
                    pg_sys::table_slot_create(heap, std::ptr::null_mut())
                } else {
                    std::ptr::null_mut()
                },
                by_generation: std::ptr::null_mut(),
                by_key: std::ptr::null_mut(),
                user_eq,
                user_kind: crate::items::ItemType::require(user_type, "seen_bloom filter table"),
                blocks: None,
                by_tid: std::ptr::null_mut(),
                wrote: false,
            }
        }
    }

    unsafe fn begin_scan(&self, keys: i32) -> pg_sys::IndexScanDesc {
        unsafe {
            #[cfg(not(feature = "pg18"))]
            let scan = pg_sys::index_beginscan(self.heap, self.index, self.snapshot, keys, 0);
            #[cfg(feature = "pg18")]
            let scan = pg_sys::index_beginscan(
                self.heap,
                self.index,
                self.snapshot,
                std::ptr::null_mut(),
                keys,
                0,
            );
            scan
        }
    }

    /// Equality scan keys on the first `values.len()` key columns.
    unsafe fn keys(&self, values: &[pg_sys::Datum]) -> [pg_sys::ScanKeyData; 4] {
        let procs = [
            self.user_eq,
            pg_sys::F_INT4EQ,
            pg_sys::F_INT2EQ,
            pg_sys::F_INT4EQ,
        ];
        let mut keys: [pg_sys::ScanKeyData; 4] = unsafe { std::mem::zeroed() };
        for (i, &value) in values.iter().enumerate() {
            unsafe {
                self.key(
                    &mut keys[i],
                    i,
                    pg_sys::BTEqualStrategyNumber,
                    procs[i],
                    value,
                )
            };
        }
        keys
    }

    /// Scan key on key column `i` (0-based): `column <strategy> value` through `proc`.
    unsafe fn key(
        &self,
        key: &mut pg_sys::ScanKeyData,
        i: usize,
        strategy: u32,
        proc: u32,
        value: pg_sys::Datum,
    ) {
        unsafe {
            pg_sys::ScanKeyInit(
                key,
                (i + 1) as pg_sys::AttrNumber,
                strategy as pg_sys::StrategyNumber,
                pg_sys::Oid::from(proc),
                value,
            );
            key.sk_collation = *(*self.index).rd_indcollation.add(i);
        }
    }

    /// Column `attnum` of the row in the slot (filter rows have no NULLs).
    unsafe fn column(&self, attnum: i16) -> pg_sys::Datum {
        let mut isnull = false;
        let value = unsafe { pg_sys::slot_getattr(self.slot, attnum as i32, &mut isnull) };
        if isnull {
            refuse("seen_bloom: a filter row has a NULL column".into());
        }
        value
    }

    /// The current row of `scan` after one step in `direction`, or None at the end.
    unsafe fn next(
        &self,
        scan: pg_sys::IndexScanDesc,
        direction: pg_sys::ScanDirection::Type,
    ) -> Option<StoredRow> {
        self.require_slot();
        unsafe {
            // index_getnext_slot, keeping the index entry's TID (the HOT chain's start): the
            // heap fetch overwrites it with the version found.
            let root = loop {
                let tid = pg_sys::index_getnext_tid(scan, direction);
                if tid.is_null() {
                    return None;
                }
                let root = *tid;
                // An MVCC snapshot sees at most one version of a chain: no call_again.
                if pg_sys::index_fetch_heap(scan, self.slot) {
                    break root;
                }
            };
            let get = |attnum| self.column(attnum);
            let row = StoredRow {
                layer: get(LAYER).value() as i16,
                segment: get(SEGMENT).value() as i32 as u32,
                bits: crate::filter_arg::varlena_bytes(get(BITS)).to_vec(),
                tid: (*self.slot).tts_tid,
                root,
            };
            pg_sys::ExecClearTuple(self.slot);
            Some(row)
        }
    }

    /// The generation's highest row by (layer, segment): it tells the top layer stored.
    pub fn top_row(&mut self, user: pg_sys::Datum, generation: i32) -> Option<StoredRow> {
        unsafe {
            if self.by_generation.is_null() {
                self.by_generation = self.begin_scan(2);
            }
            let mut keys = self.keys(&[user, pg_sys::Datum::from(generation)]);
            pg_sys::index_rescan(
                self.by_generation,
                keys.as_mut_ptr(),
                2,
                std::ptr::null_mut(),
                0,
            );
            self.next(
                self.by_generation,
                pg_sys::ScanDirection::BackwardScanDirection,
            )
        }
    }

    /// Every row of `user` from generation `oldest` on, in heap order.
    pub fn user_rows_from(&mut self, user: pg_sys::Datum, oldest: i32) -> UserRows {
        let mut found = UserRows::default();
        unsafe {
            if self.by_generation.is_null() {
                self.by_generation = self.begin_scan(2);
            }
            let mut keys = self.keys(&[user]);
            self.key(
                &mut keys[1],
                1,
                pg_sys::BTGreaterEqualStrategyNumber,
                pg_sys::F_INT4GE,
                pg_sys::Datum::from(oldest),
            );
            pg_sys::index_rescan(
                self.by_generation,
                keys.as_mut_ptr(),
                2,
                std::ptr::null_mut(),
                0,
            );
            // The index entries first, then the heap in TID order: a user's rows share a few
            // pages, each then read (and pinned) once instead of once per visit in key order.
            let mut tids = Vec::with_capacity(16);
            loop {
                let tid = pg_sys::index_getnext_tid(
                    self.by_generation,
                    pg_sys::ScanDirection::ForwardScanDirection,
                );
                if tid.is_null() {
                    break;
                }
                tids.push(*tid);
            }
            tids.sort_unstable_by_key(|t| (block_of(t), t.ip_posid));
            let pages = crate::heap_prefetch::pin_and_prefetch(self.heap, &tids);
            found.pins = pages.iter().map(|&(_, buffer)| buffer).collect();
            // Page by page: the visible versions' columns read under one share lock of the
            // page, then their bits taken once it is released (a compressed value is
            // decompressed into memory, which is not done under a buffer lock).
            let mut visible = Vec::with_capacity(tids.len());
            // pin_and_prefetch pinned each page once, in the sorted TIDs' order.
            let same_page = |a: &pg_sys::ItemPointerData, b: &pg_sys::ItemPointerData| {
                block_of(a) == block_of(b)
            };
            for (&(block, buffer), page_tids) in pages.iter().zip(tids.chunk_by_mut(same_page)) {
                assert_eq!(block, block_of(&page_tids[0]), "one pin per page, in order");
                pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32);
                for tid in page_tids {
                    if let Some(columns) = self.read_visible(buffer, tid) {
                        visible.push((buffer, columns));
                    }
                }
                pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
            }
            found.rows.reserve(visible.len());
            for (buffer, (values, isnull)) in visible {
                if isnull.contains(&true) {
                    refuse("seen_bloom: a filter row has a NULL column".into());
                }
                let mut bits = crate::filter_arg::varlena_bytes(values[BITS as usize - 1]);
                let page_start = pg_sys::BufferGetPage(buffer) as *const u8;
                let in_page = bits.as_ptr() >= page_start
                    && bits.as_ptr_range().end <= page_start.add(pg_sys::BLCKSZ as usize);
                if !in_page {
                    // A value stored compressed, decompressed into memory: kept here.
                    found.copied.push(bits.into());
                    bits = found.copied.last().unwrap();
                }
                found.rows.push((
                    values[GENERATION as usize - 1].value() as i32,
                    values[LAYER as usize - 1].value() as i16,
                    values[SEGMENT as usize - 1].value() as i32 as u32,
                    bits.as_ptr(),
                    bits.len(),
                ));
            }
        }
        found
    }

    /// The columns (values, nulls) of the version of the HOT chain at `tid` that our snapshot
    /// sees, read in `buffer`, its page, which the caller keeps pinned (a by-reference column
    /// points into it) and holds share-locked; `tid` becomes that version's. None when no
    /// version is visible.
    ///
    /// The read path's fetch: unlike `fetch_chain` it looks the page up by its buffer, not
    /// again by block, and does not try to prune it (that needs a cleanup lock, which the
    /// caller's own pin denies; the folds prune).
    unsafe fn read_visible(
        &self,
        buffer: pg_sys::Buffer,
        tid: &mut pg_sys::ItemPointerData,
    ) -> Option<([pg_sys::Datum; COLUMNS], [bool; COLUMNS])> {
        let mut values = [pg_sys::Datum::from(0); COLUMNS];
        let mut isnull = [false; COLUMNS];
        unsafe {
            let mut tuple: pg_sys::HeapTupleData = std::mem::zeroed();
            let visible = pg_sys::heap_hot_search_buffer(
                tid,
                self.heap,
                buffer,
                self.snapshot,
                &mut tuple,
                std::ptr::null_mut(),
                true,
            );
            if !visible {
                return None;
            }
            pg_sys::heap_deform_tuple(
                &mut tuple,
                (*self.heap).rd_att,
                values.as_mut_ptr(),
                isnull.as_mut_ptr(),
            );
        }
        Some((values, isnull))
    }

    /// The fold's fetches need the slot; a reader has none.
    fn require_slot(&self) {
        assert!(
            !self.slot.is_null(),
            "filter rows opened for reading are read with user_rows_from"
        );
    }

    /// Fetches into the slot the version of the HOT chain starting at `tid` that our snapshot
    /// sees, as an index entry is followed (the page pruned when first reached, so the dead
    /// versions HOT updates leave are reclaimed and the next update stays on the page);
    /// `tid` becomes that version's. False when there is none.
    unsafe fn fetch_chain(&mut self, tid: &mut pg_sys::ItemPointerData) -> bool {
        self.require_slot();
        unsafe {
            if self.by_tid.is_null() {
                self.by_tid = pg_sys::table_index_fetch_begin(self.heap);
            }
            // An MVCC snapshot sees at most one version of a chain: no call_again.
            let (mut call_again, mut all_dead) = (false, false);
            pg_sys::table_index_fetch_tuple(
                self.by_tid,
                tid,
                self.snapshot,
                self.slot,
                &mut call_again,
                &mut all_dead,
            )
        }
    }

    /// One row by its whole key.
    pub fn row(
        &mut self,
        user: pg_sys::Datum,
        generation: i32,
        layer: i16,
        segment: u32,
    ) -> Option<StoredRow> {
        unsafe {
            if self.by_key.is_null() {
                self.by_key = self.begin_scan(4);
            }
            let mut keys = self.keys(&[
                user,
                pg_sys::Datum::from(generation),
                pg_sys::Datum::from(layer),
                pg_sys::Datum::from(segment as i32),
            ]);
            pg_sys::index_rescan(self.by_key, keys.as_mut_ptr(), 4, std::ptr::null_mut(), 0);
            self.next(self.by_key, pg_sys::ScanDirection::ForwardScanDirection)
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
        unsafe {
            let blocks = *self.blocks.get_or_insert_with(|| {
                pg_sys::RelationGetNumberOfBlocksInFork(self.heap, pg_sys::ForkNumber::MAIN_FORKNUM)
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
                && self
                    .user_kind
                    .canonical_bytes(self.column(USER_KEY))
                    .as_ref()
                    == user_bytes;
            let row = matches.then(|| StoredRow {
                layer,
                segment,
                bits: crate::filter_arg::varlena_bytes(self.column(BITS)).to_vec(),
                tid: (*self.slot).tts_tid,
                root,
            });
            pg_sys::ExecClearTuple(self.slot);
            row
        }
    }

    unsafe fn tuple(
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
            crate::filter_arg::varlena_datum(bits),
        ];
        let mut nulls = [false; COLUMNS];
        unsafe {
            pg_sys::heap_form_tuple((*self.heap).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr())
        }
    }

    /// Replaces the bits of the row version at `tid` (read through this FilterRows), whose
    /// HOT chain starts at `root`; returns where the row's chain starts now: still `root`
    /// after a HOT update, the new version after one that left the page.
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
        unsafe {
            let tuple = self.tuple(user, generation, layer, segment, bits);
            let mut tid = *tid;
            pg_sys::CatalogTupleUpdateWithInfo(self.heap, &mut tid, tuple, self.indexes);
            // heap_update leaves the new version's TID and its heap-only flag in the tuple.
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
        unsafe {
            let tuple = self.tuple(user, generation, layer, segment, bits);
            pg_sys::CatalogTupleInsertWithInfo(self.heap, tuple, self.indexes);
            let tid = (*tuple).t_self;
            pg_sys::heap_freetuple(tuple);
            tid
        }
    }

    pub fn delete(&mut self, tid: &pg_sys::ItemPointerData) {
        let mut tid = *tid;
        unsafe { pg_sys::CatalogTupleDelete(self.heap, &mut tid) };
        self.wrote = true;
    }
}

impl Drop for FilterRows {
    fn drop(&mut self) {
        // On an error, the transaction's abort releases all of this (resource owners).
        if std::thread::panicking() {
            return;
        }
        unsafe {
            for scan in [self.by_generation, self.by_key] {
                if !scan.is_null() {
                    pg_sys::index_endscan(scan);
                }
            }
            if !self.slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            }
            if !self.by_tid.is_null() {
                pg_sys::table_index_fetch_end(self.by_tid);
            }
            if !self.indexes.is_null() {
                pg_sys::CatalogCloseIndexes(self.indexes);
            }
            pg_sys::UnregisterSnapshot(self.snapshot);
            // Locks stay until the end of the transaction, as the executor's would.
            pg_sys::index_close(self.index, pg_sys::NoLock as i32);
            pg_sys::table_close(self.heap, pg_sys::NoLock as i32);
            if self.wrote {
                // Later statements of this transaction (and the next fold) see these rows.
                pg_sys::CommandCounterIncrement();
            }
        }
    }
}

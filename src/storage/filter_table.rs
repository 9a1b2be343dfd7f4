//! A tracked table's filter table, opened for a fold (filter_writer) or a read
//! (filter_reader): the table and its primary key locked, checked to have the filter table's
//! shape, a registered snapshot, and the scan keys both sides build.
//!
//! Both sides read and write the table straight through the table access layer, without
//! the executor: a batch of impressions touches about one filter row per user, and through
//! SPI each touch cost a share of three statements' start-up, parameter arrays and joins
//! over `unnest`; here it is one index descent and one (HOT) heap update.

use crate::pg::errors::unusable_filter_table;
use crate::pg::item_type::ItemType;
use crate::tracking::caches::{remember_shape, shape_checked};
use pgrx::pg_sys;

/// Columns of a filter table (1-based attribute numbers): user_key, generation, layer,
/// segment, bits; the primary key is the first four.
pub const USER_KEY: i16 = 1;
pub const GENERATION: i16 = 2;
pub const LAYER: i16 = 3;
pub const SEGMENT: i16 = 4;
pub const BITS: i16 = 5;
pub const COLUMNS: usize = 5;

/// An open filter table.
pub struct FilterTable {
    pub heap: pg_sys::Relation,
    pub index: pg_sys::Relation,
    pub snapshot: pg_sys::Snapshot,
    /// The equality function of the user_key column's type.
    user_eq: u32,
    /// The user_key column's type, to compare a row fetched by TID with the user wanted.
    pub user_kind: ItemType,
}

/// Whether a filter table is opened to write (a fold) or to read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// ROW EXCLUSIVE, a snapshot taken now; triggers refused (the writes bypass them).
    Write,
    /// ACCESS SHARE, the statement's snapshot.
    Read,
    /// ACCESS SHARE, a snapshot taken now that sees this transaction's writes so far: a read
    /// right after folding what its transaction deferred (see commit_fold), which the
    /// statement's snapshot would not see.
    ReadLatest,
}

/// The relation's name, for messages.
///
/// # Safety
/// `heap` must be an open relation.
unsafe fn name(heap: pg_sys::Relation) -> String {
    // SAFETY: the contract; relname is a NUL-terminated NameData.
    unsafe {
        std::ffi::CStr::from_ptr((*(*heap).rd_rel).relname.data.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// Whether the columns are the filter table's, the user's of `user_type` (a dropped
/// column's type is InvalidOid).
///
/// # Safety
/// `heap` must be the open relation of `filter_table`.
unsafe fn columns_match(
    heap: pg_sys::Relation,
    filter_table: pg_sys::Oid,
    user_type: pg_sys::Oid,
) -> bool {
    let expected = [
        user_type,
        pg_sys::INT4OID,
        pg_sys::INT2OID,
        pg_sys::INT4OID,
        pg_sys::BYTEAOID,
    ];
    // SAFETY: the contract.
    let natts = unsafe { (*(*heap).rd_att).natts } as usize;
    natts == COLUMNS
        && expected
            .iter()
            .enumerate()
            .all(|(i, &t)| crate::pg::catalog::column_type(filter_table, (i + 1) as i16) == t)
}

/// Opens the table's primary key, refusing a table with another index, a key that is not
/// the filter key, or (for `write`) a trigger.
///
/// # Safety
/// `heap` must be an open relation, locked in `lock`.
unsafe fn open_primary_key(
    heap: pg_sys::Relation,
    write: bool,
    lock: pg_sys::LOCKMODE,
) -> pg_sys::Relation {
    // SAFETY: the contract; index_open raises rather than return an invalid relation; the
    // relcache entries' fields (rd_pkindex after RelationGetIndexList, trigdesc, rd_index)
    // are read while both are open and locked.
    unsafe {
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
            unusable_filter_table(format!(
                "seen_bloom: filter table {} must have its primary key and no other index",
                name(heap)
            ));
        }
        // Rows are written straight into the heap: a row trigger (pg_repack's, an audit
        // trigger) would never see them, and pg_repack would lose them at its swap. The
        // DDL event trigger refuses such triggers; this catches one made around it.
        if write && !(*heap).trigdesc.is_null() {
            unusable_filter_table(format!(
                "seen_bloom: filter table {} has triggers, which the fold's direct writes would bypass (drop them; rewrite a filter table with VACUUM FULL or CLUSTER, not pg_repack)",
                name(heap)
            ));
        }
        let index = pg_sys::index_open(pk, lock);
        // The scan keys compare the user with the first key column as the user type, and
        // so on: a key over the same columns in another order would compare a user datum
        // with an int4 column (its owner may rebuild the key so).
        let form = (*index).rd_index;
        if (*form).indnkeyatts != 4
            || (*form).indnatts != 4
            || (*form).indkey.values.as_slice(4) != [1, 2, 3, 4]
        {
            unusable_filter_table(format!(
                "seen_bloom: the primary key of {} is not the filter key",
                name(heap)
            ));
        }
        index
    }
}

impl FilterTable {
    /// Opens `filter_table`, whose user_key column has type `user_type`, checking that it
    /// has the filter table's shape and no index but its primary key.
    pub fn open(filter_table: pg_sys::Oid, user_type: pg_sys::Oid, access: Access) -> FilterTable {
        let write = access == Access::Write;
        let lock = if write {
            pg_sys::RowExclusiveLock
        } else {
            pg_sys::AccessShareLock
        } as pg_sys::LOCKMODE;
        let user_eq = match user_type {
            pg_sys::INT8OID => pg_sys::F_INT8EQ,
            pg_sys::TEXTOID => pg_sys::F_TEXTEQ,
            pg_sys::UUIDOID => pg_sys::F_UUID_EQ,
            _ => unusable_filter_table(format!(
                "seen_bloom: unsupported user type {}",
                user_type.to_u32()
            )),
        };
        // SAFETY: table_open raises rather than return an invalid relation; the relation is
        // open and locked while its relcache entry is read.
        unsafe {
            let heap = pg_sys::table_open(filter_table, lock);
            // Asked once the lock is held: taking it processed the invalidations of a
            // column retyped meanwhile, which clear the remembered shape.
            let checked = shape_checked(filter_table, user_type);
            // Heap pages are read and written directly (track() makes the table with the
            // default table access method).
            let heap_am = (*(*heap).rd_rel).relam == pg_sys::HEAP_TABLE_AM_OID;
            if !heap_am || !checked && !columns_match(heap, filter_table, user_type) {
                unusable_filter_table(format!("seen_bloom: {} is not a filter table", name(heap)));
            }
            let index = open_primary_key(heap, write, lock);
            if !checked {
                remember_shape(filter_table, user_type);
            }
            if access == Access::ReadLatest {
                pg_sys::CommandCounterIncrement();
            }
            let snapshot = pg_sys::RegisterSnapshot(if write || access == Access::ReadLatest {
                pg_sys::GetLatestSnapshot()
            } else if pg_sys::ActiveSnapshotSet() {
                pg_sys::GetActiveSnapshot()
            } else {
                pg_sys::GetTransactionSnapshot()
            });
            FilterTable {
                heap,
                index,
                snapshot,
                user_eq,
                user_kind: ItemType::require(user_type, "seen_bloom filter table"),
            }
        }
    }

    /// A new scan of the primary key with `keys` scan keys.
    pub fn begin_scan(&self, keys: i32) -> pg_sys::IndexScanDesc {
        // SAFETY: the heap and its primary key are open and locked, the snapshot registered,
        // all for as long as self (scans are ended before it drops).
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

    /// Equality scan keys on the first `values.len()` key columns (user, generation, layer,
    /// segment); `values[0]` must be a datum of the user type.
    pub fn keys(&self, values: &[pg_sys::Datum]) -> [pg_sys::ScanKeyData; 4] {
        let procs = [
            self.user_eq,
            pg_sys::F_INT4EQ,
            pg_sys::F_INT2EQ,
            pg_sys::F_INT4EQ,
        ];
        // SAFETY: ScanKeyData is plain data; every key used is initialised by `key`.
        let mut keys: [pg_sys::ScanKeyData; 4] = unsafe { std::mem::zeroed() };
        for (i, &value) in values.iter().enumerate() {
            self.key(
                &mut keys[i],
                i,
                pg_sys::BTEqualStrategyNumber,
                procs[i],
                value,
            );
        }
        keys
    }

    /// Scan key on key column `i` (0-based): `column <strategy> value` through `proc`.
    pub fn key(
        &self,
        key: &mut pg_sys::ScanKeyData,
        i: usize,
        strategy: u32,
        proc: u32,
        value: pg_sys::Datum,
    ) {
        assert!(i < 4);
        // SAFETY: `key` is a ScanKeyData to fill; the index is open and has 4 key columns
        // (checked in `open`), so rd_indcollation has an entry for column i.
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

    /// Restarts `scan` with `keys`.
    pub fn rescan(&self, scan: pg_sys::IndexScanDesc, keys: &mut [pg_sys::ScanKeyData]) {
        // SAFETY: `scan` is a scan of this table's index begun with at least keys.len() keys.
        unsafe {
            pg_sys::index_rescan(
                scan,
                keys.as_mut_ptr(),
                keys.len() as i32,
                std::ptr::null_mut(),
                0,
            )
        };
    }

    /// Ends a scan begun with `begin_scan` (null: none).
    pub fn end_scan(&self, scan: pg_sys::IndexScanDesc) {
        if !scan.is_null() {
            // SAFETY: a scan begun by `begin_scan` and not ended before.
            unsafe { pg_sys::index_endscan(scan) };
        }
    }
}

impl Drop for FilterTable {
    fn drop(&mut self) {
        // On an error, the transaction's abort releases all of this (resource owners).
        if std::thread::panicking() {
            return;
        }
        // SAFETY: opened and registered in `open`, released once here. Locks stay until the
        // end of the transaction, as the executor's would.
        unsafe {
            pg_sys::UnregisterSnapshot(self.snapshot);
            pg_sys::index_close(self.index, pg_sys::NoLock as i32);
            pg_sys::table_close(self.heap, pg_sys::NoLock as i32);
        }
    }
}

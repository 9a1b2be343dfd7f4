//! The fold's access to a filter table: rows fetched by key (index scans) or by TID (a HOT
//! chain's start remembered from an earlier fold), and written with
//! `CatalogTupleInsert/Update/Delete`, which update the table's plain indexes the way the
//! executor would. The caller has checked that the table is a registered filter table, that
//! the current user may write it, and holds the per-user advisory locks, so no other writer
//! can touch a row between our read and write.

use crate::storage::filter_table::{
    refuse, Access, FilterTable, BITS, COLUMNS, GENERATION, LAYER, SEGMENT, USER_KEY,
};
use crate::storage::heap_prefetch::block_of;
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
    /// A scan keyed on the user alone (see fold's mark_new_user), begun on first use.
    by_user: pg_sys::IndexScanDesc,
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
            refuse("seen_bloom: a filter row has a NULL column".into());
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
        // index_getnext_slot, keeping the index entry's TID (the HOT chain's start): the
        // heap fetch overwrites it with the version found.
        let root = loop {
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
                    break root;
                }
            }
        };
        Some(self.slot_row(root))
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

    /// Where every row of a generation lies: (layer, segment, its HOT chain's start).
    pub fn generation_rows(
        &mut self,
        user: pg_sys::Datum,
        generation: i32,
    ) -> Vec<(i16, u32, pg_sys::ItemPointerData)> {
        if self.by_generation.is_null() {
            self.by_generation = self.table.begin_scan(2);
        }
        let mut keys = self.table.keys(&[user, pg_sys::Datum::from(generation)]);
        self.table.rescan(self.by_generation, &mut keys[..2]);
        std::iter::from_fn(|| {
            self.next(
                self.by_generation,
                pg_sys::ScanDirection::ForwardScanDirection,
            )
        })
        .map(|row| (row.layer, row.segment, row.root))
        .collect()
    }

    /// Whether `user` has any row.
    pub fn has_rows(&mut self, user: pg_sys::Datum) -> bool {
        if self.by_user.is_null() {
            self.by_user = self.table.begin_scan(1);
        }
        let mut keys = self.table.keys(&[user]);
        self.table.rescan(self.by_user, &mut keys[..1]);
        self.next(self.by_user, pg_sys::ScanDirection::ForwardScanDirection)
            .is_some()
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

/// What `or_in_place` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Overwrite {
    Written,
    /// The version at the TID is not visible to the snapshot (deleted in this transaction,
    /// or the line now holds another row): nothing to write.
    NotVisible,
    /// Its bits are not stored inline, uncompressed and of that length.
    NotInline,
}

/// Sets `bits` (a layer row's bits as a fold left them) in the bits of the filter row
/// version at `tid` of `heap` where that version lies on its page (OR: bits only ever get
/// set, and a fold at commit, see commit_fold, may have set others since this fold read the
/// row), logged as generic WAL of the blocks that changed: no new version, so no whole new
/// row in the WAL at `wal_level = logical` (layout 3). `blocks` is the relation's length,
/// asked once per table by the caller (it costs a system call).
///
/// # Safety
/// `heap` must be an open filter table locked ROW EXCLUSIVE, `snapshot` a registered or
/// active MVCC snapshot; the caller holds the row's user lock, so no other fold replaces
/// the row.
pub unsafe fn or_in_place(
    heap: pg_sys::Relation,
    blocks: u32,
    tid: &pg_sys::ItemPointerData,
    bits: &[u8],
    snapshot: pg_sys::Snapshot,
) -> Overwrite {
    // SAFETY: the contract; the block is checked against the relation's length before it is
    // read; the page is read and changed only under its exclusive lock, at offsets
    // bits_offset checked within the line pointer's extent.
    unsafe {
        if block_of(tid) >= blocks {
            return Overwrite::NotVisible;
        }
        let buffer = pg_sys::ReadBuffer(heap, block_of(tid));
        pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
        let page = pg_sys::BufferGetPage(buffer) as *const u8;
        let result = match visible_at(page, heap, buffer, tid, snapshot) {
            false => Overwrite::NotVisible,
            true => match bits_offset(page, tid.ip_posid, bits.len()) {
                None => Overwrite::NotInline,
                Some(at) => {
                    let stored = std::slice::from_raw_parts(page.add(at), bits.len());
                    let mut changed = Vec::new();
                    for (i, (new, was)) in bits.chunks(PIECE).zip(stored.chunks(PIECE)).enumerate()
                    {
                        let mut block = [0u8; PIECE];
                        for (b, (n, w)) in block.iter_mut().zip(new.iter().zip(was)) {
                            *b = n | w;
                        }
                        if block[..was.len()] != *was {
                            changed.push((i * PIECE, block));
                        }
                    }
                    write_blocks(heap, buffer, at, &changed);
                    Overwrite::Written
                }
            },
        };
        pg_sys::UnlockReleaseBuffer(buffer);
        result
    }
}

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
/// writes what `change` makes of its bits when that version is the row `key` (a line may
/// have been reused since the row was remembered there), nobody has updated or deleted it
/// (a writer of row versions copies the bits it read, which would lose ours), and its bits
/// are inline, of `len` bytes. False when any of that fails or `change` declines: the caller
/// then folds under the user's lock. The page stays pinned.
///
/// # Safety
/// `heap` must be an open filter table locked ROW EXCLUSIVE, `buffer` its pinned page of
/// `root`'s block (see pin_recent), `snapshot` a registered MVCC snapshot; the caller holds
/// the table's commit-fold tag (see user_locks), so nobody replacing the user's rows runs.
pub unsafe fn fold_in_place(
    heap: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    root: pg_sys::ItemPointerData,
    key: &RowKey,
    len: usize,
    snapshot: pg_sys::Snapshot,
    change: impl FnOnce(&[u8]) -> Option<bloom_core::ChangedBlocks>,
) -> bool {
    if root.ip_posid == 0 {
        return false;
    }
    // SAFETY: the contract; the page is read and changed under its exclusive lock;
    // committed_live and heap_hot_search_buffer leave `tuple` pointing at a tuple of the
    // page, deformed within its length, and bits_offset bounds the bits within it.
    unsafe {
        pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
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
        let written = found
            && (*tuple.t_data).t_infomask as u32 & pg_sys::HEAP_XMAX_INVALID != 0
            && {
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
            }
            && match bits_offset(page, tid.ip_posid, len) {
                None => false,
                Some(at) => match change(std::slice::from_raw_parts(page.add(at), len)) {
                    None => false,
                    Some(changed) => {
                        write_blocks(heap, buffer, at, &changed);
                        true
                    }
                },
            };
        pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
        written
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

/// The (offset, length) of the tuple at line `posid` of `page` when it is a live row nobody
/// can miss: inserted by a transaction known committed (hint bit) and never updated, deleted
/// or locked (no xmax). Such a row is the current version of its HOT chain with no visibility
/// check; heap_hot_search_buffer's checks against the snapshot were 0.24 us of a fold at
/// commit's 2.75 us per row.
///
/// # Safety
/// `page` must be a pinned, locked heap page of BLCKSZ bytes.
unsafe fn committed_live(page: *const u8, posid: u16) -> Option<(usize, usize)> {
    // SAFETY: the contract; normal_tuple bounds the tuple within the page, and a tuple of at
    // least a header's length holds its infomask.
    unsafe {
        let (offset, length) = crate::storage::heap_prefetch::normal_tuple(page, posid)?;
        if length < std::mem::size_of::<pg_sys::HeapTupleHeaderData>() {
            return None;
        }
        let header = page.add(offset) as *const pg_sys::HeapTupleHeaderData;
        let infomask = std::ptr::read_unaligned(std::ptr::addr_of!((*header).t_infomask)) as u32;
        let wanted = pg_sys::HEAP_XMIN_COMMITTED | pg_sys::HEAP_XMAX_INVALID;
        (infomask & wanted == wanted).then_some((offset, length))
    }
}

/// Block-sized pieces of a row's bits: what an in-place write changes and logs.
const PIECE: usize = 32;

/// Writes `changed` (offsets within the bits at byte `at` of `buffer`'s page, and the new
/// bytes there), logged as one generic WAL record of those pieces. GenericXLogFinish finds
/// the changes by comparing the whole page byte by byte: 23% of the backends' CPU in a
/// 20-row insert benchmark. We know which bytes we change, so the record is assembled here
/// in its documented format (fragments of offset, length and data, replayed by generic_redo).
/// Replay also zeroes the page's hole, which is not done here: nothing reads the hole, and
/// consistency checks mask it (zeroing it cost 5% of a fold's added CPU). Where the
/// relation is not WAL-logged,
/// or `wal_level` is minimal, the generic WAL calls do it (they know when to log).
///
/// # Safety
/// `buffer` must be a pinned, exclusively locked page of `heap`; `at + offset + 32` within
/// the bits of a tuple on it for every piece.
unsafe fn write_blocks(
    heap: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    at: usize,
    changed: &[(usize, [u8; PIECE])],
) {
    if changed.is_empty() {
        return;
    }
    // SAFETY: the contract; a pinned page is BLCKSZ bytes.
    unsafe {
        let page = pg_sys::BufferGetPage(buffer) as *mut u8;
        let logged = (*(*heap).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_PERMANENT as i8
            && pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32;
        if !logged {
            let state = pg_sys::GenericXLogStart(heap);
            let copy = pg_sys::GenericXLogRegisterBuffer(state, buffer, 0) as *mut u8;
            for (offset, block) in changed {
                std::ptr::copy_nonoverlapping(block.as_ptr(), copy.add(at + offset), PIECE);
            }
            pg_sys::GenericXLogFinish(state);
            return;
        }
        let mut delta = Vec::with_capacity(changed.len() * (4 + PIECE));
        for (offset, block) in changed {
            delta.extend_from_slice(&((at + offset) as u16).to_ne_bytes());
            delta.extend_from_slice(&(PIECE as u16).to_ne_bytes());
            delta.extend_from_slice(block);
        }
        pg_sys::CritSectionCount += 1;
        for (offset, block) in changed {
            std::ptr::copy_nonoverlapping(block.as_ptr(), page.add(at + offset), PIECE);
        }
        pg_sys::MarkBufferDirty(buffer);
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterBuffer(0, buffer, pg_sys::REGBUF_STANDARD as u8);
        pg_sys::XLogRegisterBufData(0, delta.as_ptr() as *mut _, delta.len() as _);
        let lsn = pg_sys::XLogInsert(pg_sys::RmgrIds::RM_GENERIC_ID as u8, 0);
        // PageSetLSN: pd_lsn is the page's first 8 bytes, the high half first.
        std::ptr::write_unaligned(page as *mut u32, (lsn >> 32) as u32);
        std::ptr::write_unaligned(page.add(4) as *mut u32, lsn as u32);
        pg_sys::CritSectionCount -= 1;
    }
}

/// Whether the tuple at `tid` (a line of `page`, the locked page of `buffer`) is a normal
/// tuple visible to `snapshot`.
///
/// # Safety
/// `page` must be `buffer`'s page of `heap`, pinned and locked.
unsafe fn visible_at(
    page: *const u8,
    heap: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    tid: &pg_sys::ItemPointerData,
    snapshot: pg_sys::Snapshot,
) -> bool {
    // SAFETY: the contract; normal_tuple bounds the tuple within the page.
    unsafe {
        let Some((offset, length)) =
            crate::storage::heap_prefetch::normal_tuple(page, tid.ip_posid)
        else {
            return false;
        };
        let mut tuple = tuple_at(page, heap, *tid, offset, length);
        pg_sys::HeapTupleSatisfiesVisibility(&mut tuple, snapshot, buffer)
    }
}

/// The tuple of `heap` at `tid`, `length` bytes at `offset` of `page` (its page).
///
/// # Safety
/// `page` must be a pinned page of BLCKSZ bytes with the tuple within it.
unsafe fn tuple_at(
    page: *const u8,
    heap: pg_sys::Relation,
    tid: pg_sys::ItemPointerData,
    offset: usize,
    length: usize,
) -> pg_sys::HeapTupleData {
    // SAFETY: the contract; a zeroed HeapTupleData is plain data, filled in below.
    unsafe {
        let mut tuple: pg_sys::HeapTupleData = std::mem::zeroed();
        tuple.t_data = page.add(offset) as *mut pg_sys::HeapTupleHeaderData;
        tuple.t_len = length as u32;
        tuple.t_self = tid;
        tuple.t_tableOid = (*heap).rd_id;
        tuple
    }
}

/// Where in `page` the bits of the tuple at line `posid` start, if that tuple is a normal
/// one whose last column (the bits) is an inline, uncompressed varlena of `len` bytes.
///
/// # Safety
/// `page` must be a pinned, locked heap page of BLCKSZ bytes.
unsafe fn bits_offset(page: *const u8, posid: u16, len: usize) -> Option<usize> {
    // SAFETY: the contract.
    let (offset, length) = unsafe { crate::storage::heap_prefetch::normal_tuple(page, posid) }?;
    // The bits are the last column: the tuple ends with them.
    let start = (offset + length).checked_sub(len + pg_sys::VARHDRSZ)?;
    if start < offset {
        return None;
    }
    let header = page.wrapping_add(start) as *const pg_sys::varlena;
    // SAFETY: the varlena header's 4 bytes lie within the tuple, within the page.
    let plain = unsafe {
        pgrx::varlena::varatt_is_4b_u(header)
            && pgrx::varlena::varsize_4b(header) == len + pg_sys::VARHDRSZ
    };
    plain.then_some(start + pg_sys::VARHDRSZ)
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

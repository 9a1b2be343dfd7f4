//! The WAL record of layout 3's in-place writes (see overwrite): over each heap page it
//! changed, either fragments of offset, length and bytes in generic WAL's format (replayed by
//! generic_redo) or the bits it set (bloom_core::push_fragment, a quarter of the bytes).
//!
//! Logged as generic WAL (RM_GENERIC_ID), they fail `wal_consistency_checking`: generic_mask
//! leaves a heap page's hint bits, which readers set without WAL, so a replayed page differs
//! from the primary's image, and a standby or crash recovery stops with "inconsistent page".
//! On PostgreSQL 15 and later, with the library in `shared_preload_libraries`, the records
//! carry a resource manager of their own, `seen_bloom` (ID `seen_bloom.wal_resource_manager`),
//! and the bits they set: its replay ORs them in, heap_mask masks (what heap records get) and
//! a description shows what pg_walinspect prints. Elsewhere (13 and 14, not preloaded, or the
//! setting at 0) they stay generic, and while consistency checking covers generic records
//! each write is logged as a full page image, which replay copies whole.

use pgrx::{pg_sys, GucFlags, GucRegistry, GucSetting};
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(not(any(feature = "pg13", feature = "pg14")))]
/// Custom resource manager IDs run from 128 to 255; 128 is PostgreSQL's for experiments.
pub const FIRST_CUSTOM_ID: i32 = 128;
/// Not in PostgreSQL's list of registered IDs when chosen; a server where another preloaded
/// library takes it sets `seen_bloom.wal_resource_manager` to a free one.
pub const DEFAULT_ID: i32 = 171;
pub static RESOURCE_MANAGER: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_ID);
/// The ID registered in the postmaster (inherited by every backend); 0 while none.
static REGISTERED: AtomicU8 = AtomicU8::new(0);

/// From _PG_init: the setting, and the resource manager when the library is preloaded.
pub fn init() {
    GucRegistry::define_int_guc(
        c"seen_bloom.wal_resource_manager",
        c"ID of seen_bloom's WAL resource manager (PostgreSQL 15 and later, preloaded); 0: generic WAL.",
        c"Every server that replays this WAL must preload seen_bloom with the same ID.",
        &RESOURCE_MANAGER,
        0,
        255,
        crate::pg::gucs::server_start_context(),
        GucFlags::default(),
    );
    #[cfg(not(any(feature = "pg13", feature = "pg14")))]
    register();
}

#[cfg(not(any(feature = "pg13", feature = "pg14")))]
fn register() {
    if !crate::pg::gucs::preloading() {
        return;
    }
    let id = RESOURCE_MANAGER.get();
    if id == 0 {
        return;
    }
    if id < FIRST_CUSTOM_ID {
        pgrx::ereport!(
            ERROR,
            pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("seen_bloom.wal_resource_manager is {id}: it must be 0 or between {FIRST_CUSTOM_ID} and 255")
        );
    }
    // Leaked: the table lives as long as the server, whether RegisterCustomRmgr copies it or not.
    let rmgr = Box::leak(Box::new(pg_sys::RmgrData {
        rm_name: c"seen_bloom".as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(describe),
        rm_identify: Some(identify),
        rm_startup: None,
        rm_cleanup: None,
        rm_mask: Some(heap_mask),
        rm_decode: None,
    }));
    // SAFETY: called while shared_preload_libraries loads, as RegisterCustomRmgr requires; it
    // raises an error (and the server does not start) when another library holds the ID.
    unsafe { pg_sys::RegisterCustomRmgr(id as u8, rmgr) };
    REGISTERED.store(id as u8, Ordering::Relaxed);
}

// pgrx wraps the functions it binds in Rust ones; a table of callbacks needs the C symbols.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
unsafe extern "C-unwind" {
    /// generic_xlog.c's replay of fragments (generic WAL's own redo).
    fn generic_redo(record: *mut pg_sys::XLogReaderState);
    /// heapam.c's mask for wal_consistency_checking: page LSN and checksum, hint bits of the
    /// page and of each tuple, unused space.
    fn heap_mask(pagedata: *mut std::ffi::c_char, blkno: pg_sys::BlockNumber);
}

/// The record's info: generic WAL's fragments (written by no release; replayed all the same).
pub const INFO_GENERIC_FRAGMENTS: u8 = 0x00;
/// The record's info: the bits each page's write set (bloom_core::push_fragment).
pub const INFO_BITS: u8 = 0x10;

/// Pages one record of this library's resource manager logs at most (XLR_MAX_BLOCK_ID + 1
/// is 33): a fold at commit of a 20-row statement is one record, not one per 4 pages.
pub const PAGES_PER_OWN_RECORD: usize = 32;

/// A record's kind: its info without the bits PostgreSQL keeps for itself.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
fn kind(info: u8) -> u8 {
    info & !(pg_sys::XLR_INFO_MASK as u8)
}

/// The block IDs a decoded record references.
///
/// # Safety
/// `record` must be a decoded record, read while it lives.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
unsafe fn blocks_in_use(record: *mut pg_sys::XLogReaderState) -> impl Iterator<Item = u8> {
    // SAFETY: the contract; the blocks array holds max_block_id + 1 entries.
    unsafe {
        let decoded = (*record).record;
        (0..=(*decoded).max_block_id)
            .filter(move |&block| (*(*decoded).blocks.as_ptr().add(block as usize)).in_use)
            .map(|block| block as u8)
    }
}

/// The data a decoded record carries for `block`, empty when none (a page image only).
///
/// # Safety
/// `record` must be a decoded record referencing `block`; the slice lives as long as it.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
unsafe fn block_data<'a>(record: *mut pg_sys::XLogReaderState, block: u8) -> &'a [u8] {
    let mut len: pg_sys::Size = 0;
    // SAFETY: the contract; PostgreSQL returns null or `len` bytes of the decoded record.
    unsafe {
        let data = pg_sys::XLogRecGetBlockData(record, block, &mut len) as *const u8;
        match data.is_null() {
            true => &[],
            false => std::slice::from_raw_parts(data, len),
        }
    }
}

/// The two kinds of record, both an OR of bits into filter rows where they lie.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    match kind(info) {
        INFO_BITS => c"IN_PLACE_OR_BITS".as_ptr(),
        _ => c"IN_PLACE_OR".as_ptr(),
    }
}

/// Replays a record: the bits of each page that needs them ORed in, its LSN set. Pages are
/// replayed one at a time: each holds other rows' bits, which no reader needs to see change
/// together.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL passes a decoded record of this resource manager; each block is
    // read for redo, and changed only when it needs it, under the exclusive lock
    // XLogReadBufferForRedo leaves it in; a page is BLCKSZ bytes; the data checked whole
    // before any byte of the page changes (apply_fragments).
    unsafe {
        if kind((*(*record).record).header.xl_info) != INFO_BITS {
            return generic_redo(record);
        }
        let lsn = (*record).EndRecPtr;
        for block in blocks_in_use(record) {
            let mut buffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
            if pg_sys::XLogReadBufferForRedo(record, block, &mut buffer)
                == pg_sys::XLogRedoAction::BLK_NEEDS_REDO
            {
                let page = pg_sys::BufferGetPage(buffer) as *mut u8;
                let data = block_data(record, block);
                let page_bytes = std::slice::from_raw_parts_mut(page, pg_sys::BLCKSZ as usize);
                if let Err(e) = bloom_core::apply_fragments(data, page_bytes) {
                    pgrx::ereport!(
                        PANIC,
                        pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                        format!("seen_bloom: a WAL record's bits for block {block} cannot be replayed: {e:?}")
                    );
                }
                set_page_lsn(page, lsn);
                pg_sys::MarkBufferDirty(buffer);
            }
            if buffer != pg_sys::InvalidBuffer as pg_sys::Buffer {
                pg_sys::UnlockReleaseBuffer(buffer);
            }
        }
    }
}

/// PageSetLSN: pd_lsn is the page's first 8 bytes, the high half first.
///
/// # Safety
/// `page` must be a page, exclusively locked.
pub unsafe fn set_page_lsn(page: *mut u8, lsn: pg_sys::XLogRecPtr) {
    // SAFETY: the contract.
    unsafe {
        std::ptr::write_unaligned(page as *mut u32, (lsn >> 32) as u32);
        std::ptr::write_unaligned(page.add(4) as *mut u32, lsn as u32);
    }
}

/// How many pages, fragments and bytes (generic fragments) or masks and bits (bits) the
/// record sets.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    let (mut pages, mut images, mut fragments, mut set) = (0usize, 0usize, 0usize, 0usize);
    let mut masks = 0usize;
    // SAFETY: PostgreSQL passes a decoded record of this resource manager, each of whose
    // blocks holds fragments of its kind, or none when it carries the page's image.
    let bits = unsafe {
        let bits = kind((*(*record).record).header.xl_info) == INFO_BITS;
        for block in blocks_in_use(record) {
            pages += 1;
            let data = block_data(record, block);
            // A page's first change after a checkpoint carries its image: replay restores it.
            if data.is_empty() {
                images += 1;
                continue;
            }
            if bits {
                // (A malformed record describes the fragments before the bad one.)
                let _ = bloom_core::for_each_fragment(data, pg_sys::BLCKSZ as usize, |_, f| {
                    fragments += 1;
                    set += match f {
                        bloom_core::Fragment::Mask(mask) => {
                            masks += 1;
                            mask.iter().map(|b| b.count_ones() as usize).sum()
                        }
                        bloom_core::Fragment::Bits(indices) => {
                            indices.iter().filter(|&&i| i != bloom_core::NO_BIT).count()
                        }
                    };
                });
                continue;
            }
            let mut at = 0usize;
            while at + 4 <= data.len() {
                let length = u16::from_ne_bytes([data[at + 2], data[at + 3]]) as usize;
                fragments += 1;
                set += length;
                at += 4 + length;
            }
        }
        bits
    };
    let set = match bits {
        true => format!("masks {masks}, bits {set}"),
        false => format!("bytes {set}"),
    };
    let text = std::ffi::CString::new(format!(
        "pages {pages}, page images {images}, fragments {fragments}, {set}"
    ))
    .expect("no NUL in a formatted number");
    // SAFETY: PostgreSQL's buffer for the description.
    unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
}

/// The resource manager of the records written by log_pages.
pub fn resource_manager() -> u8 {
    match REGISTERED.load(Ordering::Relaxed) {
        0 => pg_sys::RmgrIds::RM_GENERIC_ID as u8,
        id => id,
    }
}

/// Whether an in-place write must be logged as a generic full page image: generic records are
/// written (nothing registered, or the relation's WAL is left to the generic calls) and
/// `wal_consistency_checking` covers them.
pub fn generic_full_images() -> bool {
    // SAFETY: PostgreSQL's array of RM_MAX_ID + 1 flags, allocated once its GUC is assigned.
    unsafe {
        let checking = pg_sys::wal_consistency_checking;
        !checking.is_null() && *checking.add(pg_sys::RmgrIds::RM_GENERIC_ID as usize)
    }
}

/// Logs the fragments of each page (of the kind `info` says), which the caller changed
/// already, inside its critical section, as one record with a block of each; returns the
/// record's end.
///
/// # Safety
/// Every buffer must be pinned, exclusively locked and marked dirty, of one WAL-logged
/// relation, in a critical section, at most `PAGES_PER_RECORD` of them for generic fragments
/// and [`PAGES_PER_OWN_RECORD`] for bits (with record space ensured for them, see
/// ensure_record_space), with their fragments describing the pages as they now are.
pub unsafe fn log_pages(pages: &[(pg_sys::Buffer, &[u8])], info: u8) -> pg_sys::XLogRecPtr {
    // SAFETY: the contract; XLogRegisterBufData copies nothing before XLogInsert, which
    // reads the fragments while they live. Blocks of one relation after the first are
    // logged without its name (BKPBLOCK_SAME_REL): 12 bytes less each.
    unsafe {
        pg_sys::XLogBeginInsert();
        for (id, &(buffer, fragments)) in pages.iter().enumerate() {
            pg_sys::XLogRegisterBuffer(id as u8, buffer, pg_sys::REGBUF_STANDARD as u8);
            pg_sys::XLogRegisterBufData(
                id as u8,
                fragments.as_ptr() as *mut _,
                fragments.len() as _,
            );
        }
        pg_sys::XLogInsert(resource_manager(), info)
    }
}

/// Makes room for a record of `pages` blocks, each with one piece of data (the default is
/// 5; past it XLogRegisterBuffer raises). Outside a critical section: it may allocate.
pub fn ensure_record_space(pages: usize) {
    const NORMAL_PAGES: usize = pg_sys::XLR_NORMAL_MAX_BLOCK_ID as usize + 1;
    if pages > NORMAL_PAGES {
        // SAFETY: a plain call outside a critical section, within XLR_MAX_BLOCK_ID.
        unsafe {
            pg_sys::XLogEnsureRecordSpace(
                pages.min(PAGES_PER_OWN_RECORD) as i32 - 1,
                pg_sys::XLR_NORMAL_RDATAS.max(pages as u32 + 1) as i32,
            )
        };
    }
}

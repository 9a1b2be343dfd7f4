//! The WAL record of layout 3's in-place writes (see overwrite): fragments of offset, length
//! and bytes over one heap page, in generic WAL's format, so that generic_redo replays them.
//!
//! Logged as generic WAL (RM_GENERIC_ID), they fail `wal_consistency_checking`: generic_mask
//! leaves a heap page's hint bits, which readers set without WAL, so a replayed page differs
//! from the primary's image, and a standby or crash recovery stops with "inconsistent page".
//! On PostgreSQL 15 and later, with the library in `shared_preload_libraries`, the records
//! carry a resource manager of their own, `seen_bloom` (ID `seen_bloom.wal_resource_manager`):
//! generic_redo's replay, heap_mask's mask (what heap records get) and a description that
//! pg_walinspect shows. Elsewhere (13 and 14, not preloaded, or the setting at 0) they stay
//! generic, and while consistency checking covers generic records each write is logged as a
//! full page image, which replay copies whole.

use pgrx::{pg_guard, pg_sys, GucFlags, GucRegistry, GucSetting};
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
        rm_redo: Some(generic_redo),
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

/// The one kind of record: an OR of bits into a filter row where it lies.
#[pg_guard]
unsafe extern "C-unwind" fn identify(_info: u8) -> *const std::ffi::c_char {
    c"IN_PLACE_OR".as_ptr()
}

/// How many pages, fragments and bytes the record sets.
#[cfg(not(any(feature = "pg13", feature = "pg14")))]
#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    let (mut pages, mut images, mut fragments, mut bytes) = (0usize, 0usize, 0usize, 0usize);
    // SAFETY: PostgreSQL passes a decoded record of this resource manager, each of whose
    // blocks holds fragments (4-byte header each, then its bytes), or none when it carries
    // the page's image; headers are read unaligned.
    unsafe {
        let decoded = (*record).record;
        for block in 0..=(*decoded).max_block_id {
            if !(*(*decoded).blocks.as_ptr().add(block as usize)).in_use {
                continue;
            }
            pages += 1;
            let mut len: pg_sys::Size = 0;
            let data = pg_sys::XLogRecGetBlockData(record, block as u8, &mut len) as *const u8;
            // A page's first change after a checkpoint carries its image: replay restores it.
            if data.is_null() || len == 0 {
                images += 1;
                continue;
            }
            let mut at = 0usize;
            while at + 4 <= len {
                let length = std::ptr::read_unaligned(data.add(at + 2) as *const u16) as usize;
                fragments += 1;
                bytes += length;
                at += 4 + length;
            }
        }
        let text = std::ffi::CString::new(format!(
            "pages {pages}, page images {images}, fragments {fragments}, bytes {bytes}"
        ))
        .expect("no NUL in a formatted number");
        pg_sys::appendStringInfoString(buf, text.as_ptr());
    }
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

/// Logs the fragments (offset, length, bytes; generic WAL's format) of each page, which the
/// caller changed already, inside its critical section, as one record with a block of each;
/// returns the record's end.
///
/// # Safety
/// Every buffer must be pinned, exclusively locked and marked dirty, of one WAL-logged
/// relation, in a critical section, at most `PAGES_PER_RECORD` of them, with their fragments
/// describing the pages as they now are.
pub unsafe fn log_pages(pages: &[(pg_sys::Buffer, &[u8])]) -> pg_sys::XLogRecPtr {
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
        pg_sys::XLogInsert(resource_manager(), 0)
    }
}

//! Layout 3's write of a layer row's bits over the row where it lies (see in_place), and the
//! WAL record that logs it.

use crate::storage::page::{bits_offset, block_of, visible_at};
use crate::storage::wal_record;
use pgrx::pg_sys;

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
                    let mut page = PageWrite::new(buffer);
                    page.add(at, changed);
                    write_pages(heap, &[page]);
                    Overwrite::Written
                }
            },
        };
        pg_sys::UnlockReleaseBuffer(buffer);
        result
    }
}

/// Block-sized pieces of a row's bits: what an in-place write changes and logs.
pub const PIECE: usize = 32;

/// One page's share of a write: its buffer and the pieces to set there (offsets in the page
/// and the new bytes).
pub struct PageWrite {
    pub buffer: pg_sys::Buffer,
    pieces: Vec<(usize, [u8; PIECE])>,
}

impl PageWrite {
    pub fn new(buffer: pg_sys::Buffer) -> PageWrite {
        PageWrite {
            buffer,
            pieces: Vec::new(),
        }
    }

    /// Adds the pieces of a row whose bits start at byte `at` of the page (`changed`: offsets
    /// within the bits).
    pub fn add(&mut self, at: usize, changed: impl IntoIterator<Item = (usize, [u8; PIECE])>) {
        self.pieces.extend(
            changed
                .into_iter()
                .map(|(offset, block)| (at + offset, block)),
        );
    }
}

/// Pages one record logs at most: generic WAL's limit (MAX_GENERIC_XLOG_PAGES), which
/// `generic_redo` replays, in this library's records as in generic ones, on any version.
pub const PAGES_PER_RECORD: usize = 4;

/// Writes `pages` (at most [`PAGES_PER_RECORD`], distinct), logged as one record of their
/// pieces (see wal_record). GenericXLogFinish finds the changes by comparing each whole page
/// byte by byte: 23% of the backends' CPU in a 20-row insert benchmark. We know which bytes
/// we change, so the record is assembled here in generic WAL's documented format (fragments
/// of offset, length and data). Replay also zeroes the page's hole, which is not done here:
/// nothing reads the hole, and consistency checks mask it (zeroing it cost 5% of a fold's
/// added CPU). Where the relation is not WAL-logged, or `wal_level` is minimal, the generic
/// WAL calls do it (they know when to log), and they log full page images where consistency
/// checking would reject a generic record (see wal_record).
///
/// # Safety
/// Each buffer must be a pinned, exclusively locked page of `heap`, each piece's 32 bytes
/// within the bits of a tuple on it.
pub unsafe fn write_pages(heap: pg_sys::Relation, pages: &[PageWrite]) {
    let pages: Vec<&PageWrite> = pages.iter().filter(|p| !p.pieces.is_empty()).collect();
    if pages.is_empty() {
        return;
    }
    assert!(
        pages.len() <= PAGES_PER_RECORD,
        "at most {PAGES_PER_RECORD} pages a record"
    );
    // SAFETY: the contract; a pinned page is BLCKSZ bytes.
    unsafe {
        let logged = (*(*heap).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_PERMANENT as i8
            && pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32;
        let full_images = wal_record::generic_full_images();
        let generic = wal_record::resource_manager() == pg_sys::RmgrIds::RM_GENERIC_ID as u8;
        if !logged || (generic && full_images) {
            let state = pg_sys::GenericXLogStart(heap);
            let flags = if full_images {
                pg_sys::GENERIC_XLOG_FULL_IMAGE as i32
            } else {
                0
            };
            for page in &pages {
                let copy = pg_sys::GenericXLogRegisterBuffer(state, page.buffer, flags) as *mut u8;
                for (offset, block) in &page.pieces {
                    std::ptr::copy_nonoverlapping(block.as_ptr(), copy.add(*offset), PIECE);
                }
            }
            pg_sys::GenericXLogFinish(state);
            return;
        }
        let fragments: Vec<Vec<u8>> = pages
            .iter()
            .map(|page| {
                let mut fragments = Vec::with_capacity(page.pieces.len() * (4 + PIECE));
                for (offset, block) in &page.pieces {
                    fragments.extend_from_slice(&(*offset as u16).to_ne_bytes());
                    fragments.extend_from_slice(&(PIECE as u16).to_ne_bytes());
                    fragments.extend_from_slice(block);
                }
                fragments
            })
            .collect();
        let logged: Vec<(pg_sys::Buffer, &[u8])> = pages
            .iter()
            .zip(&fragments)
            .map(|(page, fragments)| (page.buffer, fragments.as_slice()))
            .collect();
        // Nothing is allocated from here to the record's end.
        pg_sys::CritSectionCount += 1;
        for page in &pages {
            let at = pg_sys::BufferGetPage(page.buffer) as *mut u8;
            for (offset, block) in &page.pieces {
                std::ptr::copy_nonoverlapping(block.as_ptr(), at.add(*offset), PIECE);
            }
            pg_sys::MarkBufferDirty(page.buffer);
        }
        let lsn = wal_record::log_pages(&logged);
        for page in &pages {
            // PageSetLSN: pd_lsn is the page's first 8 bytes, the high half first.
            let at = pg_sys::BufferGetPage(page.buffer) as *mut u8;
            std::ptr::write_unaligned(at as *mut u32, (lsn >> 32) as u32);
            std::ptr::write_unaligned(at.add(4) as *mut u32, lsn as u32);
        }
        pg_sys::CritSectionCount -= 1;
    }
}

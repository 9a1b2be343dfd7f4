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

/// Pages a generic record logs at most (MAX_GENERIC_XLOG_PAGES), which `generic_redo`
/// replays.
pub const PAGES_PER_RECORD: usize = 4;

/// How `heap`'s in-place writes are logged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Logging {
    /// Through the generic WAL calls: where the relation may not need WAL (they know when to
    /// log), and as full page images where consistency checking covers generic records.
    GenericCalls,
    /// Generic WAL's fragments, assembled here (no resource manager of this library).
    GenericFragments,
    /// This library's record of the bits set (see wal_record).
    OwnBits,
}

/// How `heap`'s in-place writes are logged.
///
/// # Safety
/// `heap` must be an open relation.
unsafe fn logging(heap: pg_sys::Relation) -> Logging {
    // SAFETY: the contract.
    let logged = unsafe { (*(*heap).rd_rel).relpersistence } == pg_sys::RELPERSISTENCE_PERMANENT as i8
        // SAFETY: a plain read of the setting.
        && unsafe { pg_sys::wal_level } >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32;
    let own = wal_record::resource_manager() != pg_sys::RmgrIds::RM_GENERIC_ID as u8;
    match (logged, own) {
        (true, true) => Logging::OwnBits,
        (true, false) if !wal_record::generic_full_images() => Logging::GenericFragments,
        _ => Logging::GenericCalls,
    }
}

impl Logging {
    /// The most pages one record takes.
    fn most_pages(self) -> usize {
        match self {
            Logging::OwnBits => wal_record::PAGES_PER_OWN_RECORD,
            _ => PAGES_PER_RECORD,
        }
    }
}

/// The most pages one write_pages call on `heap` may take: one record's.
///
/// # Safety
/// `heap` must be an open relation.
pub unsafe fn pages_per_record(heap: pg_sys::Relation) -> usize {
    // SAFETY: the contract.
    unsafe { logging(heap) }.most_pages()
}

/// Writes `pages` (at most [`pages_per_record`], distinct), logged as one record. On 15 and
/// later, preloaded, that is this library's record of the bits set (see wal_record): 10 bytes
/// an item where generic WAL's fragments take 36. GenericXLogFinish finds the changes by
/// comparing each whole page byte by byte (23% of the backends' CPU in a 20-row insert
/// benchmark); we know which bytes we change, so where this library has no resource manager
/// the record is assembled here in generic WAL's documented format (fragments of offset,
/// length and data). Replay also zeroes the page's hole, which is not done here: nothing reads
/// the hole, and consistency checks mask it (zeroing it cost 5% of a fold's added CPU). Where
/// the relation is not WAL-logged, or `wal_level` is minimal, the generic WAL calls do it
/// (they know when to log), and they log full page images where consistency checking would
/// reject a generic record (see wal_record).
///
/// # Safety
/// Each buffer must be a pinned, exclusively locked page of `heap`, each piece's 32 bytes
/// within the bits of a tuple on it.
pub unsafe fn write_pages(heap: pg_sys::Relation, pages: &[PageWrite]) {
    let pages: Vec<&PageWrite> = pages.iter().filter(|p| !p.pieces.is_empty()).collect();
    if pages.is_empty() {
        return;
    }
    // SAFETY: the contract.
    let logging = unsafe { logging(heap) };
    let most = logging.most_pages();
    assert!(pages.len() <= most, "at most {most} pages a record");
    // SAFETY: the contract; a pinned page is BLCKSZ bytes, each piece within it.
    unsafe {
        if logging == Logging::GenericCalls {
            let state = pg_sys::GenericXLogStart(heap);
            let flags = if wal_record::generic_full_images() {
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
        // Each page's fragments, one after the other in `data`; `ends[i]` ends page i's.
        let mut data =
            Vec::with_capacity(pages.iter().map(|p| p.pieces.len()).sum::<usize>() * (4 + PIECE));
        let mut ends = Vec::with_capacity(pages.len());
        for page in &pages {
            let at = pg_sys::BufferGetPage(page.buffer) as *const u8;
            for (offset, block) in &page.pieces {
                match logging {
                    Logging::OwnBits => {
                        let old = &*(at.add(*offset) as *const [u8; PIECE]);
                        bloom_core::push_fragment(&mut data, *offset, old, block);
                    }
                    _ => {
                        data.extend_from_slice(&(*offset as u16).to_ne_bytes());
                        data.extend_from_slice(&(PIECE as u16).to_ne_bytes());
                        data.extend_from_slice(block);
                    }
                }
            }
            ends.push(data.len());
        }
        let logged: Vec<(pg_sys::Buffer, &[u8])> = pages
            .iter()
            .zip(&ends)
            .scan(0, |start, (page, &end)| {
                let fragments = &data[*start..end];
                *start = end;
                Some((page.buffer, fragments))
            })
            .collect();
        let info = match logging {
            Logging::OwnBits => wal_record::INFO_BITS,
            _ => wal_record::INFO_GENERIC_FRAGMENTS,
        };
        wal_record::ensure_record_space(pages.len());
        // Nothing is allocated from here to the record's end.
        pg_sys::CritSectionCount += 1;
        for page in &pages {
            let at = pg_sys::BufferGetPage(page.buffer) as *mut u8;
            for (offset, block) in &page.pieces {
                std::ptr::copy_nonoverlapping(block.as_ptr(), at.add(*offset), PIECE);
            }
            pg_sys::MarkBufferDirty(page.buffer);
        }
        let lsn = wal_record::log_pages(&logged, info);
        for page in &pages {
            wal_record::set_page_lsn(pg_sys::BufferGetPage(page.buffer) as *mut u8, lsn);
        }
        pg_sys::CritSectionCount -= 1;
    }
}

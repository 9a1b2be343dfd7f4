//! Reading a heap page's raw bytes: line pointers, tuples, a filter row's bits. The typed
//! accessors every page-level read and write of the library goes through (the prefetches,
//! the in-place writes); each bounds what it returns within the page.

use pgrx::pg_sys;

/// The heap block a TID points into.
pub fn block_of(tid: &pg_sys::ItemPointerData) -> u32 {
    (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo)
}

/// Bytes before a page's line pointer array (PageHeaderData).
const PAGE_HEADER: usize = 24;

pub const LP_NORMAL: u32 = 1;

pub const LP_REDIRECT: u32 = 2;

/// The line pointer of item `posid` (1-based) of a heap page, if the page has one. Read
/// volatile: the prefetches read pages they hold no content lock on.
///
/// # Safety
/// `page` must be a pinned shared buffer's page.
pub unsafe fn line_pointer(page: *const u8, posid: u16) -> Option<*const u32> {
    // pd_lower: the end of the line pointer array.
    // SAFETY: a pinned page is BLCKSZ readable bytes; pd_lower is at byte 12.
    let lower = unsafe { std::ptr::read_volatile(page.add(12) as *const u16) } as usize;
    let count = lower
        .min(pg_sys::BLCKSZ as usize)
        .saturating_sub(PAGE_HEADER)
        / 4;
    (posid >= 1 && usize::from(posid) <= count)
        .then(|| line_pointer_address(page, posid) as *const u32)
}

/// Where the line pointer of item `posid` (1-based) of a page would be, within the page
/// whatever `posid` (a prefetch address: the page is not read).
pub fn line_pointer_address(page: *const u8, posid: u16) -> *const u8 {
    let last = (pg_sys::BLCKSZ as usize - PAGE_HEADER) / 4 - 1;
    let line = usize::from(posid).saturating_sub(1).min(last);
    page.wrapping_add(PAGE_HEADER + 4 * line)
}

/// The (offset, length) of the normal tuple at line `posid` of a heap page, within the page.
///
/// # Safety
/// `page` must be a pinned shared buffer's page.
pub unsafe fn normal_tuple(page: *const u8, posid: u16) -> Option<(usize, usize)> {
    // SAFETY: the contract; line_pointer points within the page.
    let line = unsafe { std::ptr::read_volatile(line_pointer(page, posid)?) };
    let (offset, flags, length) = (
        (line & 0x7fff) as usize,
        (line >> 15) & 3,
        (line >> 17) as usize,
    );
    (flags == LP_NORMAL && offset >= PAGE_HEADER && offset + length <= pg_sys::BLCKSZ as usize)
        .then_some((offset, length))
}

/// The (offset, length) of the tuple at line `posid` of `page` when it is a live row nobody
/// can miss: inserted by a transaction known committed (hint bit) and never updated, deleted
/// or locked (no xmax). Such a row is the current version of its HOT chain with no visibility
/// check; heap_hot_search_buffer's checks against the snapshot were 0.24 us of a fold at
/// commit's 2.75 us per row.
///
/// # Safety
/// `page` must be a pinned, locked heap page of BLCKSZ bytes.
pub unsafe fn committed_live(page: *const u8, posid: u16) -> Option<(usize, usize)> {
    // SAFETY: the contract; normal_tuple bounds the tuple within the page, and a tuple of at
    // least a header's length holds its infomask.
    unsafe {
        let (offset, length) = normal_tuple(page, posid)?;
        if length < std::mem::size_of::<pg_sys::HeapTupleHeaderData>() {
            return None;
        }
        let header = page.add(offset) as *const pg_sys::HeapTupleHeaderData;
        let infomask = std::ptr::read_unaligned(std::ptr::addr_of!((*header).t_infomask)) as u32;
        let wanted = pg_sys::HEAP_XMIN_COMMITTED | pg_sys::HEAP_XMAX_INVALID;
        (infomask & wanted == wanted).then_some((offset, length))
    }
}

/// Whether the tuple at `tid` (a line of `page`, the locked page of `buffer`) is a normal
/// tuple visible to `snapshot`.
///
/// # Safety
/// `page` must be `buffer`'s page of `heap`, pinned and locked.
pub unsafe fn visible_at(
    page: *const u8,
    heap: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    tid: &pg_sys::ItemPointerData,
    snapshot: pg_sys::Snapshot,
) -> bool {
    // SAFETY: the contract; normal_tuple bounds the tuple within the page.
    unsafe {
        let Some((offset, length)) = normal_tuple(page, tid.ip_posid) else {
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
pub unsafe fn tuple_at(
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
pub unsafe fn bits_offset(page: *const u8, posid: u16, len: usize) -> Option<usize> {
    // SAFETY: the contract.
    let (offset, length) = unsafe { normal_tuple(page, posid) }?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item number, the invalid 0 and numbers past any page's lines included, gives
    /// an address of a whole line pointer inside the page, and a real item's is its own.
    #[test]
    fn line_pointer_address_stays_in_the_page() {
        let page = vec![0u8; pg_sys::BLCKSZ as usize];
        let start = page.as_ptr() as usize;
        for posid in 0..=u16::MAX {
            let at = line_pointer_address(page.as_ptr(), posid) as usize;
            assert!(
                at >= start + PAGE_HEADER && at + 4 <= start + page.len(),
                "{posid}"
            );
        }
        for posid in [1u16, 2, 291] {
            let at = line_pointer_address(page.as_ptr(), posid) as usize;
            assert_eq!(at, start + PAGE_HEADER + 4 * (usize::from(posid) - 1));
        }
    }
}

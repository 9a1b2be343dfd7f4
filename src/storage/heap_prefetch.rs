//! Overlapping the cache misses of a batch of heap fetches.
//!
//! A read of one user's window fetches about a dozen filter rows from a few heap pages that
//! calls for other users have long pushed out of the CPU caches. Fetching a row follows a
//! chain of addresses, each known only once the previous line has arrived: the page's line
//! pointer, the HOT redirect it holds, the tuple header, then the tuple's bits. One row after
//! another that is a dozen misses waited for in turn (10-17 us of a 3,000-item user's read
//! on the bench machine). Walking the same chains here first, one step for all rows at a
//! time and with prefetches, lets the misses of all rows overlap; the fetches that follow
//! find their lines in cache (pinning, prefetching and fetching the rows of a 3,000-item
//! user then took about 5 us in all).
//!
//! Only prefetch addresses are derived from what is read here without the page's content
//! lock; the fetches themselves still go through the table access layer, under the lock,
//! with visibility checks. A pinned page's tuples do not move (compaction needs the only
//! pin), and every read stays inside the pinned page.

use crate::storage::page::{
    block_of, line_pointer, line_pointer_address, normal_tuple, LP_NORMAL, LP_REDIRECT,
};
use pgrx::pg_sys;

const CACHE_LINE: usize = 64;
/// Lines prefetched from the start of each tuple.
const TUPLE_LINES: usize = 2;

/// The start of the cache line holding address `at`.
fn line_start(at: usize) -> usize {
    at & !(CACHE_LINE - 1)
}

#[inline(always)]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Prefetches the cache lines of `len` bytes at `start` (a hint: any address is harmless).
pub fn prefetch_range(start: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let mut line = line_start(start as usize);
    while line < start as usize + len {
        prefetch(line as *const u8);
        line += CACHE_LINE;
    }
}

/// Prefetches the header of a pinned page and the line pointer of its item `posid`, without
/// reading the page: a read of the header to bound the line (`line_pointer`) waited for that
/// line's miss, page after page, and was a third of a fold at commit's own time.
pub fn prefetch_line_pointer(page: *const u8, posid: u16) {
    prefetch(page);
    prefetch(line_pointer_address(page, posid));
}

/// Prefetches the header of the tuple at line `posid` of a pinned page and its last `tail`
/// bytes, if the line holds a normal tuple (read without the content lock: only prefetch
/// addresses come of it, all inside the page).
///
/// # Safety
/// `page` must be a pinned shared buffer's page.
pub unsafe fn prefetch_tuple(page: *const u8, posid: u16, tail: usize) {
    // SAFETY: the contract; normal_tuple bounds the tuple within the page.
    let Some((offset, length)) = (unsafe { normal_tuple(page, posid) }) else {
        return;
    };
    let start = page as usize + offset;
    prefetch_range(start as *const u8, CACHE_LINE.min(length));
    let tail = tail.min(length);
    prefetch_range((start + length - tail) as *const u8, tail);
}

/// A pinned page, seen as bytes.
struct PinnedPage {
    block: u32,
    page: *const u8,
}

impl PinnedPage {
    /// The line pointer of item `posid` (1-based), if the page has one.
    ///
    /// # Safety
    /// `page` must be a pinned shared buffer's page.
    unsafe fn line_pointer(&self, posid: u16) -> Option<*const u32> {
        // SAFETY: the contract.
        unsafe { line_pointer(self.page, posid) }
    }
}

/// Pins the heap page of each of `tids` (sorted by block) once and prefetches the lines that
/// fetching those TIDs will read. Returns (block, pinned buffer) per page, in block order,
/// for the caller to read and release.
///
/// # Safety
/// `heap` must be open and locked; the TIDs must point into it (from its index, under the
/// same lock).
pub unsafe fn pin_and_prefetch(
    heap: pg_sys::Relation,
    tids: &[pg_sys::ItemPointerData],
) -> Vec<(u32, pg_sys::Buffer)> {
    let mut pins = Vec::with_capacity(4);
    let mut pages: Vec<PinnedPage> = Vec::with_capacity(4);
    for tid in tids {
        let block = block_of(tid);
        if pages.last().is_some_and(|p| p.block == block) {
            continue;
        }
        // SAFETY: `heap` is open and locked (the contract); the block comes from one of its
        // TIDs; ReadBuffer pins it (released by the caller) and raises on a bad block.
        unsafe {
            let buffer = pg_sys::ReadBuffer(heap, block);
            pins.push((block, buffer));
            let page = pg_sys::BufferGetPage(buffer) as *const u8;
            prefetch(page);
            pages.push(PinnedPage { block, page });
        }
    }
    // Each TID's page (tids are sorted, so the pages advance with them).
    let mut page_of = Vec::with_capacity(tids.len());
    let mut p = 0;
    for tid in tids {
        while pages[p].block != block_of(tid) {
            p += 1;
        }
        page_of.push(p);
    }
    // Round 1: the line pointers the index entries name.
    let mut items = Vec::with_capacity(tids.len());
    for (tid, &p) in tids.iter().zip(&page_of) {
        // SAFETY: pages[p] is a pinned page.
        if let Some(lp) = unsafe { pages[p].line_pointer(tid.ip_posid) } {
            prefetch(lp as *const u8);
            items.push((p, lp));
        }
    }
    // Round 2: where a line pointer redirects (a HOT chain pruned to its newest version),
    // the line pointer it redirects to.
    for (p, lp) in items.iter_mut() {
        // SAFETY: `lp` is inside a pinned page (line_pointer); read without the content lock,
        // only to derive a prefetch address.
        let value = unsafe { std::ptr::read_volatile(*lp) };
        if (value >> 15) & 3 == LP_REDIRECT {
            // SAFETY: pages[*p] is a pinned page.
            if let Some(target) = unsafe { pages[*p].line_pointer((value & 0x7fff) as u16) } {
                prefetch(target as *const u8);
                *lp = target;
            }
        }
    }
    // Round 3: each tuple's first lines, its header and the start of its columns. The rest
    // of the bits is read in order by the window's copy, which the hardware prefetcher
    // follows. Prefetching every line here made this step 1-2 us longer for 12 rows (the
    // prefetches wait for free line-fill buffers) and the copy only about 1 us shorter.
    for &(p, lp) in &items {
        // SAFETY: as in round 2.
        let value = unsafe { std::ptr::read_volatile(lp) };
        if (value >> 15) & 3 != LP_NORMAL {
            continue;
        }
        let (offset, len) = ((value & 0x7fff) as usize, (value >> 17) as usize);
        let len = len.min((pg_sys::BLCKSZ as usize).saturating_sub(offset));
        prefetch_range(
            pages[p].page.wrapping_add(offset),
            len.min(TUPLE_LINES * CACHE_LINE),
        );
    }
    pins
}

/// Prefetches the lines of a list of byte ranges a few at a time, for a caller that has other
/// work to overlap with their misses.
///
/// After `user_rows_from`, a read's rows sit in pinned pages, with only each row's first lines
/// fetched; the window then copies the rest (about 10 KB for a 3,000-item user), and in that
/// copy every line missed the caches in turn (about 2 us). Hashing the candidates costs as
/// much and touches no memory of the rows' pages, so the read hashes them in pieces and
/// prefetches a share of the rows' lines between pieces.
pub struct LinePrefetcher<'a> {
    ranges: &'a [(*const u8, usize)],
    /// The next line: an index in `ranges` and an address in that range.
    range: usize,
    next: usize,
}

impl<'a> LinePrefetcher<'a> {
    /// Over `ranges` of (start, length), which must stay readable while this is used.
    pub fn over(ranges: &'a [(*const u8, usize)]) -> LinePrefetcher<'a> {
        LinePrefetcher {
            ranges,
            range: 0,
            next: ranges.first().map_or(0, |&(at, _)| line_start(at as usize)),
        }
    }

    /// Lines in all the ranges (a range's first and last lines counted whole).
    pub fn lines(&self) -> usize {
        self.ranges
            .iter()
            .filter(|&&(_, len)| len > 0)
            .map(|&(at, len)| {
                let first = at as usize / CACHE_LINE;
                let last = (at as usize + len - 1) / CACHE_LINE;
                last - first + 1
            })
            .sum()
    }

    /// Prefetches the next `count` lines (fewer at the end); returns how many it did.
    pub fn issue(&mut self, count: usize) -> usize {
        let mut issued = 0;
        while issued < count && self.range < self.ranges.len() {
            let (at, len) = self.ranges[self.range];
            let end = at as usize + len;
            // An empty range has no line, though its start rounded down is before its end.
            if len == 0 || self.next >= end {
                self.range += 1;
                if let Some(&(at, _)) = self.ranges.get(self.range) {
                    self.next = line_start(at as usize);
                }
                continue;
            }
            prefetch(self.next as *const u8);
            self.next += CACHE_LINE;
            issued += 1;
        }
        issued
    }
}

#[cfg(test)]
mod tests {
    use super::LinePrefetcher;

    #[test]
    fn line_prefetcher_issues_every_line_once() {
        let buffer = vec![0u8; 4096];
        let base = buffer.as_ptr();
        // Unaligned starts, an empty range, a range inside one line.
        // SAFETY: every range lies inside `buffer`.
        let ranges = unsafe {
            [
                (base.add(10), 200),
                (base.add(1000), 0),
                (base.add(1030), 20),
                (base.add(2000), 1500),
            ]
        };
        let mut lines = LinePrefetcher::over(&ranges);
        let expected: usize = ranges
            .iter()
            .filter(|r| r.1 > 0)
            .map(|&(at, len)| (at as usize + len - 1) / 64 - at as usize / 64 + 1)
            .sum();
        assert_eq!(lines.lines(), expected);
        let mut issued = 0;
        loop {
            let now = lines.issue(3);
            assert!(now <= 3);
            issued += now;
            if now < 3 {
                break;
            }
        }
        assert_eq!(issued, expected);
        assert_eq!(lines.issue(3), 0, "nothing left");
        assert_eq!(LinePrefetcher::over(&[]).issue(5), 0);
    }
}

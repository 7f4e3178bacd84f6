//! EXPERIMENT, off by default: a bump allocator over one large anonymous
//! mapping, with transparent huge pages requested (`madvise(MADV_HUGEPAGE)`)
//! when the `bump-alloc-huge` feature is on. It never frees memory, so it
//! only suits short benchmark runs. It exists to measure how much TLB
//! misses cost epochdb (issue #3): build with `--features bump-alloc` and
//! with `--features bump-alloc-huge` and compare. The real fix is an
//! engine-side arena for records and index nodes.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Address space reserved up front (not memory: pages are touched lazily).
const RESERVE: usize = 64 << 30;
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
const MADV_HUGEPAGE: i32 = 14;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut u8;
    fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
}

pub struct Bump {
    next: AtomicUsize,
    end: AtomicUsize,
}

impl Bump {
    pub const fn new() -> Bump {
        Bump { next: AtomicUsize::new(0), end: AtomicUsize::new(0) }
    }

    /// Maps the arena once; losers of the race unmap nothing (the winner's
    /// mapping is used, the loser's address space is simply left unused).
    fn arena(&self) -> usize {
        let next = self.next.load(Ordering::Acquire);
        if next != 0 {
            return next;
        }
        // SAFETY: an anonymous private mapping with no fixed address; the
        // arguments are valid constants.
        let base =
            unsafe { mmap(std::ptr::null_mut(), RESERVE, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0) };
        if base as isize == -1 {
            std::process::abort();
        }
        if cfg!(feature = "bump-alloc-huge") {
            // SAFETY: advice on a mapping we own; failure only loses the hint.
            unsafe { madvise(base, RESERVE, MADV_HUGEPAGE) };
        }
        match self.next.compare_exchange(0, base as usize, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                self.end.store(base as usize + RESERVE, Ordering::Release);
                base as usize
            }
            Err(winner) => winner,
        }
    }
}

// SAFETY: every returned block is inside the mapping, aligned as asked,
// and handed out once (the bump pointer only grows, by compare-exchange).
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.arena();
        let align = layout.align().max(8);
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            let start = (current + align - 1) & !(align - 1);
            let end = start + layout.size();
            let limit = self.end.load(Ordering::Acquire);
            if limit != 0 && end > limit {
                return std::ptr::null_mut();
            }
            match self.next.compare_exchange_weak(current, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return start as *mut u8,
                Err(seen) => current = seen,
            }
        }
    }

    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
}

//! The engine's allocator for records and index nodes: per-thread size
//! classes carved from 2 MiB chunks that ask the kernel for huge pages.
//!
//! Why: a lookup's time is mostly cache and TLB misses on the nodes and
//! the record it visits (profiles put TLB misses at 18-35%).
//! With 4 KiB pages every node on the path is a TLB miss of its own; with
//! 2 MiB pages a few hundred entries cover the whole working set. Exact
//! size classes also drop the global allocator's per-block header and the
//! padding of 64-byte aligned nodes (a 512-byte leaf; a 40-byte TPC-C
//! order line, for which glibc would take a 48-byte chunk).
//!
//! - Small blocks (at most [`MAX_SMALL`] bytes, alignment at most 64) come
//!   from one of 128 classes of 8-byte steps (a record is a whole number
//!   of words, so a finer step would save nothing and a coarser one would
//!   pad most records; a TPC-C order line is 40 bytes). Each class bumps
//!   through a 64 KiB *run* of a chunk, so a block of a size that is a
//!   multiple of its alignment is aligned. Larger or more aligned blocks go to the
//!   global allocator.
//! - Frees go to the freeing thread's list of the class (the epoch GC
//!   frees on the worker that retired the object, so blocks may move
//!   between threads). A list that grows past [`LIST_LIMIT`] blocks, and
//!   every list of a thread that exits, is handed to a shared pool that
//!   threads take whole lists from before carving new runs.
//! - Chunks are 2 MiB-aligned anonymous mappings (from the global
//!   allocator off Linux or under Miri), never given back: freed blocks
//!   are reused, by this database or the next one the process opens. The
//!   engine does not depend on which global allocator the program uses.
//! - Huge pages: each chunk is `madvise(MADV_HUGEPAGE)`d, which works with
//!   THP set to `always` or `madvise`. Where the kernel has none (THP
//!   `never`, or no free huge page), the hint is ignored and the chunk is
//!   backed by 4 KiB pages; nothing else changes.
//!
//! - `EPOCHDB_ARENA=off` in the environment turns the arena off for the
//!   process (every block from the global allocator), for valgrind.
//! - [`bytes_in_use`]: the bytes of blocks handed out and not freed (small
//!   and large, arena on or off). Each thread adds what it allocates and
//!   subtracts what it frees to a counter on a cache line of its own (the
//!   freed block may be another thread's: only the sum means anything). A
//!   thread that exits leaves its counter, value and all, to the next new
//!   thread. Chunks are never given back, so the process's resident size
//!   does not fall when blocks are freed; this does (`serve --maxmemory`).
//!
//! Invariants: a block is freed with the layout it was allocated with
//! (its class is computed from the layout's size both times); the sum of
//! the counters is the bytes of the blocks live now, each counted at its
//! class's size (a large block at its layout's).

use std::alloc::{handle_alloc_error, Layout};
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Blocks above this size go to the global allocator.
pub const MAX_SMALL: usize = 1024;
const GRAIN: usize = 8;
const CLASSES: usize = MAX_SMALL / GRAIN;
/// The largest alignment a small block honours (nodes are 64-aligned).
const MAX_ALIGN: usize = 64;
const CHUNK: usize = 2 << 20;
const RUN: usize = 64 << 10;
/// Blocks a thread keeps free in one class before sharing them.
pub const LIST_LIMIT: usize = 4096;

/// A free block's first word: the next free block of its list.
struct Free {
    next: *mut Free,
}

/// A singly linked list of free blocks of one class.
#[derive(Clone, Copy)]
struct List {
    head: *mut Free,
    tail: *mut Free,
    len: usize,
}

const EMPTY: List = List { head: ptr::null_mut(), tail: ptr::null_mut(), len: 0 };

impl List {
    /// # Safety
    /// `block` is a free block of this list's class, in no list.
    unsafe fn push(&mut self, block: *mut u8) {
        let f = block as *mut Free;
        // SAFETY: a free block is ours, at least 16 bytes and 8-aligned.
        unsafe { f.write(Free { next: self.head }) };
        if self.head.is_null() {
            self.tail = f;
        }
        self.head = f;
        self.len += 1;
    }

    fn pop(&mut self) -> Option<NonNull<u8>> {
        let f = NonNull::new(self.head)?;
        // SAFETY: blocks in a list are free and hold their link.
        self.head = unsafe { f.as_ref().next };
        self.len -= 1;
        Some(f.cast())
    }
}

/// A class's bump region: blocks `next..end` were never handed out.
#[derive(Clone, Copy)]
struct Run {
    next: usize,
    end: usize,
}

/// What threads share: the chunk being carved into runs and whole lists
/// given up by threads.
struct Shared {
    chunk: Run,
    pools: [Vec<List>; CLASSES],
}

// SAFETY: the raw pointers in the lists are to free blocks nobody else
// holds; the mutex serializes access to them.
unsafe impl Send for Shared {}

static SHARED: Mutex<Shared> =
    Mutex::new(Shared { chunk: Run { next: 0, end: 0 }, pools: [const { Vec::new() }; CLASSES] });

fn shared() -> std::sync::MutexGuard<'static, Shared> {
    // A panic while holding the lock leaves whole lists and a valid run:
    // the state is consistent, so go on.
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// A new run of `RUN` bytes, 64-aligned.
    fn carve(&mut self) -> Run {
        if self.chunk.end - self.chunk.next < RUN {
            let base = ahead::take().unwrap_or_else(new_chunk);
            self.chunk = Run { next: base as usize, end: base as usize + CHUNK };
        }
        let run = Run { next: self.chunk.next, end: self.chunk.next + RUN };
        self.chunk.next += RUN;
        run
    }
}

/// A 2 MiB-aligned chunk that asks for huge pages. From mmap rather than
/// the global allocator, which may already have touched (and so backed
/// with small pages) the memory it returns; the kernel only gives a huge
/// page to a fault in an aligned 2 MiB range of an advised mapping.
#[cfg(all(target_os = "linux", not(miri)))]
fn new_chunk() -> *mut u8 {
    let len = 2 * CHUNK;
    // SAFETY: an anonymous private mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        handle_alloc_error(Layout::from_size_align(CHUNK, CHUNK).unwrap_or_else(|_| unreachable!("chunk layout")));
    }
    let start = p as usize;
    let base = start.next_multiple_of(CHUNK);
    // SAFETY: the parts before and after the aligned chunk are ours and
    // unused; unmapping them cannot fail for a valid range. madvise only
    // changes how the kernel backs the chunk; without THP it is ignored.
    unsafe {
        if base > start {
            libc::munmap(p, base - start);
        }
        if start + len > base + CHUNK {
            libc::munmap((base + CHUNK) as *mut libc::c_void, start + len - base - CHUNK);
        }
        libc::madvise(base as *mut libc::c_void, CHUNK, libc::MADV_HUGEPAGE);
    }
    base as *mut u8
}

/// Chunks faulted in ahead of need by a background thread.
///
/// Why: the first touch of a chunk's memory is a page fault in which the
/// kernel zeroes it (a 2 MiB huge page at a time), and a worker that grows
/// the database took those faults inline: 11.7% of a 1-thread TPC-C
/// worker's time in `perf` (`clear_page_erms` under `insert_placeholder`).
/// A thread that keeps [`AHEAD`] chunks faulted in does the same work off
/// the workers' path, on a core they leave idle; on a busy machine it is
/// the same work elsewhere. A chunk it has not readied yet is mapped
/// inline as before, so growth never waits on it.
#[cfg(all(target_os = "linux", not(miri)))]
mod ahead {
    use std::sync::{Mutex, OnceLock};
    use std::thread::Thread;

    /// Chunks kept faulted in: at most 8 MiB of memory not yet used.
    pub const AHEAD: usize = 4;

    /// Ready chunks' addresses (as `usize`: a chunk is owned by whoever
    /// pops it).
    static READY: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();

    fn ready() -> std::sync::MutexGuard<'static, Vec<usize>> {
        READY.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A faulted-in chunk if one is ready; wakes the thread to make more.
    pub fn take() -> Option<*mut u8> {
        let chunk = ready().pop();
        let thread = THREAD.get_or_init(|| {
            let t = std::thread::Builder::new().name("epochdb-prefault".into()).spawn(run);
            // Without the thread, chunks are faulted in where they are used.
            t.ok().map(|h| h.thread().clone())
        });
        if let Some(t) = thread {
            t.unpark();
        }
        chunk.map(|c| c as *mut u8)
    }

    fn run() {
        loop {
            while ready().len() < AHEAD {
                let chunk = super::new_chunk();
                // One write per 4 KiB page faults it in (the whole huge
                // page at the first, if the kernel gave one).
                for page in (0..super::CHUNK).step_by(4096) {
                    // SAFETY: inside the chunk, which nobody else holds yet.
                    unsafe { chunk.add(page).write_volatile(0) };
                }
                ready().push(chunk as usize);
            }
            std::thread::park();
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod ahead {
    /// No thread here: every chunk is made where it is needed.
    pub fn take() -> Option<*mut u8> {
        None
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn new_chunk() -> *mut u8 {
    let layout = Layout::from_size_align(CHUNK, CHUNK).unwrap_or_else(|_| unreachable!("chunk layout"));
    // SAFETY: non-zero size.
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        handle_alloc_error(layout);
    }
    base
}

/// Bytes a thread allocated minus bytes it freed ([`bytes_in_use`]).
#[repr(align(64))]
struct Counter(AtomicI64);

/// Every counter ever handed to a thread, and those whose thread exited.
static COUNTERS: Mutex<(Vec<&'static Counter>, Vec<&'static Counter>)> = Mutex::new((Vec::new(), Vec::new()));
/// What threads count while their own locals are torn down.
static ORPHANED: Counter = Counter(AtomicI64::new(0));

fn counters() -> std::sync::MutexGuard<'static, (Vec<&'static Counter>, Vec<&'static Counter>)> {
    COUNTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of records and index nodes live now (see the module notes).
pub fn bytes_in_use() -> u64 {
    let all = counters().0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum::<i64>();
    (all + ORPHANED.0.load(Ordering::Relaxed)).max(0) as u64
}

/// One thread's free lists and runs.
struct Local {
    lists: [List; CLASSES],
    runs: [Run; CLASSES],
    /// Taken at the first block; given back when the thread exits.
    counter: Option<&'static Counter>,
}

impl Local {
    const NEW: Local = Local { lists: [EMPTY; CLASSES], runs: [Run { next: 0, end: 0 }; CLASSES], counter: None };

    /// Adds `bytes` (negative: freed) to this thread's counter. Only this
    /// thread writes it, so a load and a store do; readers sum them.
    #[inline]
    fn count(&mut self, bytes: i64) {
        let c = *self.counter.get_or_insert_with(|| {
            let mut all = counters();
            all.1.pop().unwrap_or_else(|| {
                let c: &'static Counter = Box::leak(Box::new(Counter(AtomicI64::new(0))));
                all.0.push(c);
                c
            })
        });
        c.0.store(c.0.load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
    }

    fn alloc(&mut self, class: usize) -> NonNull<u8> {
        if let Some(b) = self.lists[class].pop() {
            return b;
        }
        let size = (class + 1) * GRAIN;
        let run = &mut self.runs[class];
        if run.end - run.next < size {
            let mut s = shared();
            if let Some(list) = s.pools[class].pop() {
                drop(s);
                self.lists[class] = list;
                return self.lists[class].pop().unwrap_or_else(|| unreachable!("pooled lists are not empty"));
            }
            *run = s.carve();
        }
        let b = run.next;
        run.next += size;
        // SAFETY: runs lie inside chunks, which are never null.
        unsafe { NonNull::new_unchecked(b as *mut u8) }
    }

    /// # Safety
    /// As [`free`].
    unsafe fn free(&mut self, block: *mut u8, class: usize) {
        let list = &mut self.lists[class];
        if list.len >= LIST_LIMIT {
            shared().pools[class].push(std::mem::replace(list, EMPTY));
        }
        // SAFETY: per the contract.
        unsafe { list.push(block) };
    }
}

impl Drop for Local {
    /// The thread is exiting: its free blocks, and what its runs had not
    /// handed out yet, go to the pool.
    fn drop(&mut self) {
        if let Some(c) = self.counter.take() {
            counters().1.push(c);
        }
        let mut s = shared();
        for class in 0..CLASSES {
            let size = (class + 1) * GRAIN;
            let run = &mut self.runs[class];
            while run.end - run.next >= size {
                // SAFETY: never handed out: free, of this class.
                unsafe { self.lists[class].push(run.next as *mut u8) };
                run.next += size;
            }
            if self.lists[class].len > 0 {
                s.pools[class].push(std::mem::replace(&mut self.lists[class], EMPTY));
            }
        }
    }
}

thread_local! {
    static LOCAL: UnsafeCell<Local> = const { UnsafeCell::new(Local::NEW) };
}

/// Whether small blocks use the arena, decided once per process:
/// `EPOCHDB_ARENA=off` sends every block to the global allocator, for
/// memory checkers (valgrind sees a use after free only in blocks of the
/// allocator it replaces).
fn enabled() -> bool {
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var_os("EPOCHDB_ARENA").is_none_or(|v| v != "off");
            STATE.store(if on { 1 } else { 2 }, Ordering::Relaxed);
            on
        }
    }
}

/// The class of a small layout, or `None` for the global allocator.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_SMALL && layout.align() <= MAX_ALIGN && enabled())
        .then(|| layout.size().max(1).div_ceil(GRAIN) - 1)
}

/// Allocates a block for `layout` (never null; aborts on out-of-memory as
/// the global allocator does).
#[inline]
pub fn alloc(layout: Layout) -> NonNull<u8> {
    let Some(class) = class_of(layout) else {
        count_large(layout.size() as i64);
        // SAFETY: callers allocate non-zero sizes (records and nodes).
        let p = unsafe { std::alloc::alloc(layout) };
        return NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout));
    };
    let bytes = ((class + 1) * GRAIN) as i64;
    // SAFETY: the cell is this thread's own and no reference to it
    // outlives the call (`alloc` does not reenter this module).
    let block = LOCAL.try_with(|l| unsafe {
        let l = &mut *l.get();
        l.count(bytes);
        l.alloc(class)
    });
    block.unwrap_or_else(|_| {
        // This thread's locals are being torn down: use a run of its own
        // once, from the pool, counted apart.
        ORPHANED.0.fetch_add(bytes, Ordering::Relaxed);
        let mut scratch = Local::NEW;
        scratch.alloc(class)
    })
}

/// Counts a block of the global allocator's.
fn count_large(bytes: i64) {
    // SAFETY: as in `alloc`.
    if LOCAL.try_with(|l| unsafe { (*l.get()).count(bytes) }).is_err() {
        ORPHANED.0.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Frees a block.
///
/// # Safety
/// `block` came from [`alloc`] with this `layout`, is freed once, and
/// nobody uses it afterwards.
#[inline]
pub unsafe fn free(block: NonNull<u8>, layout: Layout) {
    let Some(class) = class_of(layout) else {
        count_large(-(layout.size() as i64));
        // SAFETY: per the contract, from `std::alloc::alloc(layout)`.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        return;
    };
    let bytes = ((class + 1) * GRAIN) as i64;
    // SAFETY: as in `alloc`; the contract makes the block free.
    let done = LOCAL.try_with(|l| unsafe {
        let l = &mut *l.get();
        l.count(-bytes);
        l.free(block.as_ptr(), class)
    });
    if done.is_err() {
        ORPHANED.0.fetch_sub(bytes, Ordering::Relaxed);
        let mut list = EMPTY;
        // SAFETY: per the contract.
        unsafe { list.push(block.as_ptr()) };
        shared().pools[class].push(list);
    }
}

/// Moves `value` into a new block. For index nodes, which hold only
/// atomics: no drop glue runs when they are freed.
pub fn boxed<T>(value: T) -> *mut T {
    const { assert!(!std::mem::needs_drop::<T>()) };
    let p = alloc(Layout::new::<T>()).cast::<T>().as_ptr();
    // SAFETY: a fresh block of `T`'s size and alignment.
    unsafe { p.write(value) };
    p
}

/// Frees a block from [`boxed`].
///
/// # Safety
/// As [`free`]: `p` came from `boxed::<T>`, once, and is unreachable.
pub unsafe fn free_boxed<T>(p: *mut T) {
    // SAFETY: per the contract; `T` has no drop glue.
    unsafe { free(NonNull::new_unchecked(p).cast(), Layout::new::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_distinct_and_reused() {
        if !enabled() {
            return; // EPOCHDB_ARENA=off: nothing of ours to test
        }
        let layouts =
            [(136, 8), (48, 16), (256, 64)].map(|(size, align)| Layout::from_size_align(size, align).expect("layout"));
        for layout in layouts {
            let blocks: Vec<_> = (0..1000).map(|_| alloc(layout)).collect();
            for (i, b) in blocks.iter().enumerate() {
                assert_eq!(b.as_ptr() as usize % layout.align(), 0);
                // SAFETY: a fresh block of `layout.size()` bytes.
                unsafe { ptr::write_bytes(b.as_ptr(), i as u8, layout.size()) };
            }
            let mut addrs: Vec<_> = blocks.iter().map(|b| b.as_ptr() as usize).collect();
            addrs.sort_unstable();
            assert!(addrs.windows(2).all(|w| w[1] - w[0] >= layout.size()), "blocks overlap");
            for (i, b) in blocks.iter().enumerate() {
                // SAFETY: written above, still ours.
                assert!(unsafe { std::slice::from_raw_parts(b.as_ptr(), layout.size()) }.iter().all(|&x| x == i as u8));
            }
            let last = *blocks.last().expect("blocks");
            for b in blocks {
                // SAFETY: allocated above with `layout`, freed once.
                unsafe { free(b, layout) };
            }
            // The last block freed is the first handed out again.
            let again = alloc(layout);
            assert_eq!(again, last);
            // SAFETY: as above.
            unsafe { free(again, layout) };
        }
    }

    /// This thread's count ([`bytes_in_use`] sums them; other tests
    /// allocate in parallel, so only a thread's own is exact here). Its
    /// counter is taken first if it has none yet: one taken over from an
    /// exited thread comes with that thread's count, which a difference
    /// across the first block would include.
    fn counted_here() -> i64 {
        LOCAL.with(|l| {
            // SAFETY: this thread's own cell, used between calls.
            let local = unsafe { &mut *l.get() };
            local.count(0);
            local.counter.map_or(0, |c| c.0.load(Ordering::Relaxed))
        })
    }

    #[test]
    fn blocks_are_counted_at_their_class_size_until_freed() {
        let small = Layout::from_size_align(41, 8).expect("layout"); // the 48-byte class
        let large = Layout::from_size_align(MAX_SMALL + 100, 8).expect("layout");
        let before = counted_here();
        let a = alloc(small);
        let b = alloc(large);
        let want = if enabled() { 48 } else { 41 };
        assert_eq!(counted_here() - before, want + MAX_SMALL as i64 + 100);
        assert!(bytes_in_use() > 0);
        // Freed on another thread: this one's count stays, that one's falls.
        let (pa, pb) = (a.as_ptr() as usize, b.as_ptr() as usize);
        let there = std::thread::spawn(move || {
            let before = counted_here();
            // SAFETY: allocated above with these layouts, freed once.
            unsafe {
                free(NonNull::new(pa as *mut u8).expect("non-null"), small);
                free(NonNull::new(pb as *mut u8).expect("non-null"), large);
            }
            counted_here() - before
        })
        .join()
        .expect("the freeing thread");
        assert_eq!(there, -(want + MAX_SMALL as i64 + 100));
    }

    #[test]
    fn large_and_overaligned_blocks_use_the_global_allocator() {
        for layout in [
            Layout::from_size_align(MAX_SMALL + 1, 8).expect("layout"),
            Layout::from_size_align(64, 128).expect("layout"),
        ] {
            assert_eq!(class_of(layout), None);
            let b = alloc(layout);
            assert_eq!(b.as_ptr() as usize % layout.align(), 0);
            // SAFETY: allocated above with `layout`.
            unsafe { free(b, layout) };
        }
        if enabled() {
            assert_eq!(class_of(Layout::from_size_align(1, 1).expect("layout")), Some(0));
            assert_eq!(class_of(Layout::from_size_align(MAX_SMALL, 8).expect("layout")), Some(CLASSES - 1));
        }
    }

    /// Blocks allocated on one thread and freed on others, past the list
    /// limit, and threads exiting with free blocks: every block is handed
    /// out to one owner at a time.
    #[test]
    fn blocks_move_between_threads_without_being_shared() {
        if !enabled() {
            return; // EPOCHDB_ARENA=off: nothing of ours to test
        }
        let layout = Layout::from_size_align(48, 8).expect("layout");
        let n = if cfg!(miri) { 200 } else { 3 * LIST_LIMIT };
        for _ in 0..3 {
            let blocks: Vec<usize> = (0..n).map(|_| alloc(layout).as_ptr() as usize).collect();
            let (a, b) = blocks.split_at(n / 2);
            std::thread::scope(|s| {
                for half in [a, b] {
                    s.spawn(move || {
                        for &p in half {
                            // SAFETY: allocated above, freed once here.
                            unsafe { free(NonNull::new(p as *mut u8).expect("non-null"), layout) };
                        }
                        // Reuse some on this thread, then exit holding them free.
                        let mine: Vec<_> = (0..half.len() / 2).map(|_| alloc(layout)).collect();
                        for p in mine {
                            // SAFETY: as above.
                            unsafe { free(p, layout) };
                        }
                    });
                }
            });
            let again: Vec<usize> = (0..n).map(|_| alloc(layout).as_ptr() as usize).collect();
            let mut sorted = again.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), n, "a block was handed out twice");
            for p in again {
                // SAFETY: as above.
                unsafe { free(NonNull::new(p as *mut u8).expect("non-null"), layout) };
            }
        }
    }
}

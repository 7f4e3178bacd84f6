//! Sort-merge replay: the log phase of recovery as a sort and a merge
//! with the base checkpoint, instead of one tree lookup per log entry.
//!
//! Why: the base checkpoint is packed into sorted runs and its trees built
//! bottom up (`index::load`), but each of the log's entries then descended
//! the tree: on a 2-warehouse TPC-C directory, `Tree::lookup_batch`, the
//! leaf search and the inserts were about half of a recovery's CPU time
//! with the memory already touched . Here the log's
//! workers only gather each entry (its key's first bytes, TID and where
//! its bytes lie), and once every log block is read, each table's entries
//! are sorted and merged with the checkpoint's rows, key by key, into
//! sorted runs, from which its tree is built like the checkpoint's was.
//!
//! - The log files are mapped read-only ([`Mapped`]), so a gathered entry
//!   points into the page cache instead of a copy of the log: the reader
//!   checks each block's CRC on the mapped bytes and filters blocks as
//!   before, and the workers decode them there (the base checkpoint's
//!   files are mapped too, for its phase only, so that no block is copied
//!   out of the page cache).
//! - Entries are gathered per table in chunks of [`CHUNK`], which are
//!   sorted on their own, `n` threads at a time. Each table is then cut
//!   into key ranges ([`Part`]), each merged by one thread: a k-way merge
//!   of its slices of the chunks (a heap, [`Head`]) with its checkpoint
//!   rows, into one run, packed into leaves as it grows: by that thread,
//!   while the rows are in its cache (a flat run left every leaf to the
//!   table's build, one thread reading every row's key again: value
//!   recovery with 2 threads took about 8% longer). The
//!   parts let one big table (YCSB's) use every thread.
//! - Per key the entry with the largest TID wins, as `install` decides
//!   (checkpoint rows are older than every log entry replayed). A delete
//!   that wins leaves no row, so no tombstone. A key with deltas among its
//!   entries gets what `install` would give it: all of them folded onto
//!   its checkpoint row column by column ([`fold`], `columns::merge`,
//!   which does not depend on the order), or, when none is a delete and
//!   its deltas are all of fixed columns at fixed places, the newest
//!   whole row (that one, or a value entry newer) with the newer deltas
//!   patched into it in place ([`patch_whole`]).
//! - The merge reads entries in key order, which is random in the mapped
//!   log: it prefetches each chunk's entries [`AHEAD`] of its head.
//! - What the merge cannot decide goes through `install` after the tree
//!   is built, as replay by lookup would have done it (so its reports are
//!   the same): a folded row that would miss a column, a delta that does
//!   not fit the schema, and every entry and row of a table whose
//!   checkpoint runs overlap or whose tree already holds rows.
//!
//! Used when no incremental checkpoint is on the chain (its rows are
//! installed into built trees before the log).

use crate::durability::log::{self, Columns, Entry, Write};
use crate::durability::recovery::columns;
use crate::durability::recovery::{in_queue, install, install_rows, word_of, Ctx, Leftovers, Scratch};
use crate::error::{Error, Result};
use crate::index::{prefetch, slice_at, SortedRun};
use crate::record::Record;
use crate::tid::{Tid, LATEST_BIT};
use std::cmp::Ordering as Cmp;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Mutex;

/// A file mapped read-only, for as long as entries point into it.
pub(in crate::durability) struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: a read-only mapping nobody writes through; its bytes may be
// read from any thread.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `path` whole; `None` for an empty file or if mapping fails
    /// (the caller replays entry by entry instead).
    pub(in crate::durability) fn open(path: &Path) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&l| l > 0)?;
        // SAFETY: a new private read-only mapping of an open file; no
        // existing memory is affected. The file stays mapped after `file`
        // is closed.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let mapped = Mapped { ptr, len };
        // Entries pointing into it keep 48 bits of address (`Gathered`).
        (ptr as usize).checked_add(len).is_some_and(|end| end <= ADDRESS_LIMIT).then_some(mapped)
    }

    /// The file's bytes.
    pub(in crate::durability) fn bytes(&self) -> &[u8] {
        // SAFETY: the whole mapping, which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// Lets the kernel drop the pages wholly inside bytes `at..at + len`
    /// from this mapping (they stay in the page cache), so that bytes
    /// nothing will read again stop counting in the resident size.
    /// Nothing may point into them.
    pub(in crate::durability) fn release(&self, at: u64, len: usize) {
        const PAGE: usize = 4096;
        let Ok(at) = usize::try_from(at) else { return };
        let (lo, hi) = (at.next_multiple_of(PAGE), at.saturating_add(len).min(self.len) / PAGE * PAGE);
        if lo < hi {
            // SAFETY: inside our own read-only file mapping, which is only
            // read; a later read faults the page in again from the file.
            unsafe { libc::madvise((self.ptr as *mut u8).add(lo) as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
        }
    }

    /// Bytes `at..at + len` of the file, if it is that long.
    pub(in crate::durability) fn get(&self, at: u64, len: usize) -> Option<&[u8]> {
        let at = usize::try_from(at).ok()?;
        self.bytes().get(at..at.checked_add(len)?)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; entries pointing into it
        // are gone by now (`Gathered`'s contract).
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A log entry gathered for the merge: 24 bytes, where the entry it
/// stands for is 56 (and a 2-warehouse TPC-C log has 16M of them: the
/// gathered entries are most of the memory recovery needs besides the
/// rows, and on a virtual machine every new page of it is costly).
#[derive(Clone, Copy)]
pub(in crate::durability) struct Gathered {
    /// The key's first 8 bytes, big-endian, zero padded: most comparisons
    /// end here.
    slice: u64,
    tid: u64,
    /// Where the key lies in a mapped log file (bits 0-47; the write's
    /// bytes follow it), the key's length (bits 48-58), the write's kind
    /// (bits 59-60) and whether the entry's record has varint lengths
    /// (bit 61; a delta's column headers are varints exactly when they
    /// are). The write's length is read back from the entry's header
    /// (`log::write_len_before`) when the write is.
    at: u64,
}

const _: () = assert!(std::mem::size_of::<Gathered>() == 24);

/// Addresses below this fit a [`Gathered`]: a mapping that ends above it
/// is refused ([`Mapped::open`]), and its file replayed entry by entry.
const ADDRESS_LIMIT: usize = 1 << 48;
const KEY_LEN_SHIFT: u32 = 48;
const KIND_SHIFT: u32 = 59;
const VARINT_BIT: u64 = 1 << 61;
const _: () = assert!(crate::MAX_KEY_LEN < 1 << (KIND_SHIFT - KEY_LEN_SHIFT));

const VALUE: u8 = 0;
const DELETE: u8 = 1;
const DELTA: u8 = 2;

// SAFETY: points into a `Mapped`, which may be read from any thread.
unsafe impl Send for Gathered {}

impl Gathered {
    /// `e`, decoded from a mapped file.
    pub(in crate::durability) fn of(e: &Entry<'_>) -> Gathered {
        let (kind, bytes) = match e.write {
            Write::Value(v) => (VALUE, v),
            Write::Delete => (DELETE, &[][..]),
            Write::Delta(c) => (DELTA, c.payload()),
        };
        debug_assert!(!matches!(e.write, Write::Delta(c) if c.varint() != e.varint));
        debug_assert!(bytes.is_empty() || std::ptr::eq(bytes.as_ptr(), e.key.as_ptr_range().end));
        // Exposed, so that `key_ptr` may make a pointer of it again.
        let addr = e.key.as_ptr().expose_provenance();
        debug_assert!(addr < ADDRESS_LIMIT, "mappings end below ADDRESS_LIMIT");
        let g = Gathered {
            slice: slice_at(e.key, 0),
            tid: e.tid.raw(),
            at: addr as u64
                | (e.key.len() as u64) << KEY_LEN_SHIFT
                | (kind as u64) << KIND_SHIFT
                | if e.varint { VARINT_BIT } else { 0 },
        };
        debug_assert_eq!(
            // SAFETY: `e` was just decoded from a live payload.
            unsafe { log::write_len_before(g.key_ptr(), e.varint) },
            bytes.len()
        );
        g
    }

    fn key_ptr(&self) -> *const u8 {
        std::ptr::with_exposed_provenance((self.at & (ADDRESS_LIMIT as u64 - 1)) as usize)
    }

    fn key_len(&self) -> usize {
        (self.at >> KEY_LEN_SHIFT) as usize & ((1 << (KIND_SHIFT - KEY_LEN_SHIFT)) - 1)
    }

    fn kind(&self) -> u8 {
        (self.at >> KIND_SHIFT) as u8 & 3
    }

    /// # Safety
    /// The mapping it was gathered from is alive.
    unsafe fn key<'a>(&self) -> &'a [u8] {
        // SAFETY: per the contract; `of` took these from a slice of it.
        unsafe { std::slice::from_raw_parts(self.key_ptr(), self.key_len()) }
    }

    /// # Safety
    /// As for [`Gathered::key`].
    unsafe fn write<'a>(&self) -> Write<'a> {
        let varint = self.at & VARINT_BIT != 0;
        // SAFETY: per the contract: the entry's header ends at the key,
        // and the write's bytes follow it.
        let bytes = unsafe {
            let len = log::write_len_before(self.key_ptr(), varint);
            std::slice::from_raw_parts(self.key_ptr().add(self.key_len()), len)
        };
        match self.kind() {
            VALUE => Write::Value(bytes),
            DELETE => Write::Delete,
            _ => Write::Delta(Columns::checked(bytes, varint)),
        }
    }

    fn tid(&self) -> Tid {
        Tid::from_raw(self.tid)
    }

    /// Starts loading the key and the first bytes of the write into the
    /// cache (a prefetch never faults, so the mapping need not be alive).
    fn prefetch(&self) {
        prefetch(self.key_ptr(), 64);
    }
}

/// Key order: by the first 8 bytes, and past them (only then touching
/// the mapped key) by the rest.
///
/// # Safety
/// As for [`Gathered::key`].
unsafe fn cmp_keys(a: &Gathered, b: &Gathered) -> Cmp {
    // SAFETY: per the contract.
    unsafe { cmp_split(a.slice, a.key_len(), || a.key(), b) }
}

/// `rec`'s key against `g`'s.
///
/// # Safety
/// As for [`Gathered::key`]; `rec` is live.
unsafe fn cmp_record(rec: NonNull<Record>, g: &Gathered) -> Cmp {
    // SAFETY: per the contract.
    unsafe { cmp_key(rec.as_ref().key(), g) }
}

/// `key` against `g`'s key.
///
/// # Safety
/// As for [`Gathered::key`].
unsafe fn cmp_key(key: &[u8], g: &Gathered) -> Cmp {
    // SAFETY: per the contract.
    unsafe { cmp_split(slice_at(key, 0), key.len(), || key, g) }
}

/// A key given as its first 8 bytes `slice`, its length and (read only
/// if those do not decide) its bytes, against `g`'s key.
///
/// # Safety
/// As for [`Gathered::key`].
unsafe fn cmp_split<'k>(slice: u64, len: usize, key: impl FnOnce() -> &'k [u8], g: &Gathered) -> Cmp {
    slice.cmp(&g.slice).then_with(|| {
        if len <= 8 || g.key_len() <= 8 {
            len.cmp(&g.key_len())
        } else {
            // SAFETY: per the contract.
            cmp_tails(key(), unsafe { g.key() })
        }
    })
}

/// Two keys longer than 8 bytes whose first 8 are equal, compared 8 bytes
/// at a time (TPC-C's HISTORY keys share them by the thousand: a call to
/// `memcmp` per comparison was 5% of a recovery). Zero padding cannot
/// confuse them: with equal padded slices, the shorter key is a prefix of
/// the other, so it comes first.
fn cmp_tails(a: &[u8], b: &[u8]) -> Cmp {
    let mut at = 8;
    while at < a.len() && at < b.len() {
        match slice_at(a, at).cmp(&slice_at(b, at)) {
            Cmp::Equal => at += 8,
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

/// Entries a chunk holds (32 MiB): a table's entries are gathered in
/// chunks, not one vector, so that growing never copies them, and each
/// chunk is sorted on its own before the merge. Debug builds take small
/// chunks, so that the tests merge many.
const CHUNK: usize = if cfg!(debug_assertions) { 1 << 8 } else { 1 << 20 };

/// Adds `g` to a table's `chunks` (never empty: the last is being filled).
pub(in crate::durability) fn push(chunks: &mut Vec<Vec<Gathered>>, g: Gathered) {
    let last = chunks.last_mut().expect("a chunk being filled");
    if last.capacity() == 0 {
        last.reserve_exact(CHUNK);
    }
    last.push(g);
    if last.len() == CHUNK {
        chunks.push(Vec::new());
    }
}

/// A key range of one table, for one thread to merge: the part of each of
/// the table's sorted chunks in it, and its checkpoint rows in it (owned).
struct Part<'c> {
    table: u32,
    chunks: Vec<&'c [Gathered]>,
    rows: Vec<NonNull<Record>>,
}

impl Part<'_> {
    fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum::<usize>() + self.rows.len()
    }
}

// SAFETY: the rows are records only this part holds; the chunks point
// into mappings any thread may read.
unsafe impl Send for Part<'_> {}

impl Drop for Part<'_> {
    fn drop(&mut self) {
        for r in self.rows.drain(..) {
            // SAFETY: ours, never linked (`merge_part` takes the rows it
            // merges out first).
            unsafe { Record::free(r) };
        }
    }
}

/// A table's rows (owned) and entries to install one by one.
struct Unmerged {
    table: u32,
    rows: Vec<NonNull<Record>>,
    entries: Vec<Gathered>,
}

// SAFETY: the rows are records only this holds.
unsafe impl Send for Unmerged {}

/// Keys a part holds at least, when a table is split into parts (debug
/// builds split small tables too, so that the tests merge parts).
const PART_MIN: usize = if cfg!(debug_assertions) { 1 << 6 } else { 1 << 16 };

/// Merges each table's gathered entries with its checkpoint runs and
/// builds its tree: the chunks are sorted `threads` at a time, each table
/// is cut into key ranges ([`Part`]) merged `threads` at a time (largest
/// first), and each tree is built from its parts' runs.
///
/// # Safety
/// The mappings the entries point into outlive this call.
pub(in crate::durability) unsafe fn merge(ctx: &Ctx<'_>, threads: usize, left: &mut Leftovers) -> Result<()> {
    let started = std::time::Instant::now();
    let tables = ctx.tables.len();
    let mut chunks: Vec<Vec<Vec<Gathered>>> = (0..tables).map(|_| Vec::new()).collect();
    for (t, c) in std::mem::take(&mut left.gathered).into_iter().enumerate() {
        chunks[t].extend(c.into_iter().filter(|c| !c.is_empty()));
    }
    let mut runs: Vec<Vec<SortedRun>> = (0..tables).map(|_| Vec::new()).collect();
    for (t, run) in std::mem::take(&mut left.runs) {
        runs[t as usize].push(run);
    }
    let entries: usize = chunks.iter().flatten().map(Vec::len).sum();
    in_queue(threads, chunks.iter_mut().flatten().collect(), left, |c, _| {
        // SAFETY: per our contract.
        c.sort_unstable_by(|a, b| unsafe { cmp_keys(a, b) });
        true
    });
    let sorted = started.elapsed().as_secs_f64();
    // Each table's parts; a table whose checkpoint runs overlap, or whose
    // tree already holds rows, is installed entry by entry instead.
    let mut parts: Vec<Part<'_>> = Vec::new();
    let mut whole: Vec<(u32, Vec<NonNull<Record>>)> = Vec::new();
    for (t, mut runs) in runs.into_iter().enumerate() {
        let table = t as u32;
        runs.sort_unstable_by(|a, b| a.first_key().cmp(b.first_key()));
        let disjoint = runs.windows(2).all(|w| w[0].last_key() < w[1].first_key());
        let mut rows = Vec::with_capacity(runs.iter().map(|r| r.len() as usize).sum());
        for run in runs {
            run.append_records(&mut rows);
        }
        if !(disjoint && ctx.tables[t].tree.is_empty()) {
            whole.push((table, rows));
            continue;
        }
        // SAFETY: per our contract; the rows are live.
        parts.extend(unsafe { split(table, &chunks[t], rows, threads) });
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let built = Mutex::new((0..tables).map(|_| Vec::new()).collect::<Vec<Vec<SortedRun>>>());
    let slow = Mutex::new((0..tables).map(|_| Vec::new()).collect::<Vec<Vec<Gathered>>>());
    let failure = Mutex::new(None);
    // Largest first; after a failure the parts left are dropped, which
    // frees their rows.
    in_queue(threads, parts, left, |part, _| {
        let table = part.table;
        let mut set_aside = Vec::new();
        // SAFETY: per our contract.
        match unsafe { merge_part(ctx, part, &mut set_aside, &mut Folding::default()) } {
            Ok(run) => {
                log::lock(&built)[table as usize].push(run);
                log::lock(&slow)[table as usize].extend(set_aside);
                true
            }
            Err(what) => {
                let name = &ctx.tables[table as usize].name;
                let what = format!("the log, table {name:?}: {what}");
                log::lock(&failure).get_or_insert(Error::Corrupt { what, salvage: None });
                false
            }
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        for (_, rows) in whole {
            for r in rows {
                // SAFETY: never installed: ours.
                unsafe { Record::free(r) };
            }
        }
        return Err(e);
    }
    let built = built.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut slow = slow.into_inner().unwrap_or_else(|e| e.into_inner());
    // What could not be merged, installed entry by entry after the build,
    // a table per thread: copied out now, so that the chunks are freed
    // before the trees' nodes are allocated. The kernel hands out the
    // pages freed last first, and on a virtual machine whose host takes
    // free memory back those cost far less than others.
    let unmerged: Vec<Unmerged> = whole
        .into_iter()
        .map(|(t, rows)| Unmerged { table: t, rows, entries: chunks[t as usize].iter().flatten().copied().collect() })
        .chain(slow.iter_mut().enumerate().filter(|s| !s.1.is_empty()).map(|(t, s)| Unmerged {
            table: t as u32,
            rows: Vec::new(),
            entries: std::mem::take(s),
        }))
        .collect();
    drop(chunks);
    for (t, runs) in built.into_iter().enumerate() {
        let n: u64 = runs.iter().map(SortedRun::len).sum();
        if let Err(runs) = ctx.tables[t].tree.load(runs, &mut left.retired) {
            drop(runs); // frees their records: only a bug gets here
            for r in unmerged.into_iter().flat_map(|u| u.rows) {
                // SAFETY: never installed: ours.
                unsafe { Record::free(r) };
            }
            let name = &ctx.tables[t].name;
            return Err(Error::Corrupt {
                what: format!("the log, table {name:?}: merged runs that overlap"),
                salvage: None,
            });
        }
        left.created += n;
    }
    let failure = Mutex::new(None);
    in_queue(threads, unmerged, left, |Unmerged { table, rows, entries }, left| {
        // SAFETY: the rows are ours; entries per our contract.
        if let Err(what) = unsafe { install_all(ctx, table, rows, entries.into_iter(), left) } {
            let name = &ctx.tables[table as usize].name;
            let what = format!("the log, table {name:?}: {what}");
            log::lock(&failure).get_or_insert(Error::Corrupt { what, salvage: None });
        }
        true
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    ::log::debug!(
        "recovery: merged {entries} log entries into {tables} tables in {:.3} s ({sorted:.3} s sorting)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Cuts a table's sorted `chunks` and `rows` into about `threads * 2` key
/// ranges of at least [`PART_MIN`] keys, at keys taken evenly from the
/// largest chunk (or the rows, if more): each part holds the entries and
/// rows from its split key up to the next one.
///
/// # Safety
/// As for [`merge`]; the rows are live.
unsafe fn split(table: u32, chunks: &[Vec<Gathered>], mut rows: Vec<NonNull<Record>>, threads: usize) -> Vec<Part<'_>> {
    let n = chunks.iter().map(Vec::len).sum::<usize>() + rows.len();
    let want = (n / PART_MIN).clamp(1, threads.max(1) * 2);
    let largest = chunks.iter().max_by_key(|c| c.len()).map_or(&[][..], |c| c.as_slice());
    let mut keys: Vec<Vec<u8>> = (1..want)
        .map(|i| {
            if rows.len() > largest.len() {
                // SAFETY: live rows.
                unsafe { rows[i * rows.len() / want].as_ref() }.key().to_vec()
            } else {
                // SAFETY: per our contract.
                unsafe { largest[i * largest.len() / want].key() }.to_vec()
            }
        })
        .collect();
    keys.dedup();
    let mut parts = Vec::with_capacity(keys.len() + 1);
    let mut rest: Vec<&[Gathered]> = chunks.iter().map(|c| c.as_slice()).collect();
    // From the last split key down: each part takes what lies at or above it.
    for key in keys.iter().rev() {
        let mut mine = Vec::with_capacity(rest.len());
        for c in &mut rest {
            // SAFETY: per our contract.
            let at = c.partition_point(|g| unsafe { cmp_key(key, g) } == Cmp::Greater);
            mine.push(&c[at..]);
            *c = &c[..at];
        }
        // SAFETY: live rows.
        let at = rows.partition_point(|r| unsafe { r.as_ref() }.key() < key.as_slice());
        parts.push(Part { table, chunks: mine, rows: rows.split_off(at) });
    }
    parts.push(Part { table, chunks: rest, rows });
    parts
}

/// How far ahead in a chunk the merge prefetches entries' bytes: they lie
/// in the mapped log in the order it was written, not in key order, so
/// each is a cache miss (in a delta log's profile, the first byte read of
/// an entry took 15% of the time), and a chunk's head moves only when its
/// entries are the least of all the chunks'.
const AHEAD: usize = 2;

/// A sorted chunk's next entry and the rest of it, in a heap whose top is
/// the smallest next key (so the k-way merge costs about log2 k
/// comparisons per entry, not k).
struct Head<'c> {
    next: Gathered,
    rest: std::slice::Iter<'c, Gathered>,
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Cmp {
        // SAFETY: heads exist only inside `merge_part`, whose callers keep
        // the mappings alive. Reversed: `BinaryHeap` keeps the largest on top.
        unsafe { cmp_keys(&other.next, &self.next) }
    }
}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Cmp> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Cmp::Equal
    }
}

impl Eq for Head<'_> {}

/// One part: its entries and rows merged in key order into a run; what
/// cannot be merged goes to `slow`, for `install`.
///
/// # Safety
/// As for [`merge`].
unsafe fn merge_part(
    ctx: &Ctx<'_>,
    mut part: Part<'_>,
    slow: &mut Vec<Gathered>,
    folding: &mut Folding,
) -> Result<SortedRun, String> {
    let mut run = SortedRun::default();
    let (table, chunks) = (part.table, std::mem::take(&mut part.chunks));
    let mut rows = std::mem::take(&mut part.rows).into_iter().peekable();
    let mut heads: BinaryHeap<Head<'_>> = chunks
        .into_iter()
        .filter_map(|c| c.split_first().map(|(next, rest)| Head { next: *next, rest: rest.iter() }))
        .collect();
    let mut group: Vec<Gathered> = Vec::new();
    let push = |run: &mut SortedRun, rec: NonNull<Record>| {
        run.push(rec).map_err(|rec| {
            // SAFETY: ours, never linked.
            unsafe { Record::free(rec) };
            "keys out of order in the merge".to_string()
        })
    };
    let result = (|| {
        loop {
            // The smallest key among the chunks' next entries, and all of
            // its entries.
            group.clear();
            let Some(least) = heads.peek().map(|h| h.next) else { break };
            while let Some(mut h) = heads.peek_mut() {
                // SAFETY: per our contract.
                if unsafe { cmp_keys(&h.next, &least) } != Cmp::Equal {
                    break;
                }
                group.push(h.next);
                match h.rest.next() {
                    Some(next) => {
                        h.next = *next; // sifted down when `h` drops
                        if let Some(ahead) = h.rest.as_slice().get(AHEAD) {
                            ahead.prefetch();
                        }
                    }
                    None => drop(PeekMut::pop(h)),
                }
            }
            // Checkpoint rows before it, and its own.
            // SAFETY: rows are live; entries per our contract.
            while let Some(r) = rows.next_if(|&r| unsafe { cmp_record(r, &least) } == Cmp::Less) {
                push(&mut run, r)?;
            }
            // SAFETY: as above.
            let row = rows.next_if(|&r| unsafe { cmp_record(r, &least) } == Cmp::Equal);
            if group.iter().any(|g| g.kind() == DELTA) {
                // SAFETY: the row is ours; entries per our contract.
                match unsafe { fold(ctx, table, row, &group, folding) } {
                    Some(Some(rec)) => push(&mut run, rec)?,
                    Some(None) => {} // deleted
                    None => {
                        if let Some(r) = row {
                            push(&mut run, r)?;
                        }
                        slow.extend_from_slice(&group);
                    }
                }
                continue;
            }
            let newest = group.iter().max_by_key(|g| g.tid).expect("a group has an entry");
            // SAFETY: a row is ours alone until the tree takes it.
            let row_tid = row.map(|r| Tid::of_word(unsafe { r.as_ref() }.tid.load()).raw());
            if row_tid.is_some_and(|t| t >= newest.tid) {
                push(&mut run, row.expect("checked"))?;
                continue;
            }
            if let Some(r) = row {
                // SAFETY: ours, never linked: replaced by a newer entry.
                unsafe { Record::free(r) };
            }
            // SAFETY: per our contract.
            match unsafe { newest.write() } {
                Write::Value(v) => {
                    // SAFETY: per our contract.
                    let key = unsafe { newest.key() };
                    push(&mut run, Record::alloc(key, v, 0, newest.tid().raw() | LATEST_BIT))?;
                }
                Write::Delete => {} // the row is gone: nothing to keep
                Write::Delta(_) => unreachable!("groups with deltas are folded or set aside"),
            }
        }
        for r in rows.by_ref() {
            push(&mut run, r)?;
        }
        Ok(())
    })();
    for r in rows {
        // SAFETY: not merged after a failure: still ours.
        unsafe { Record::free(r) };
    }
    result.map(|()| run)
}

/// Buffers [`fold`] reuses.
#[derive(Default)]
struct Folding {
    row: Vec<u8>,
    out: Vec<u8>,
    versions: Vec<u64>,
    scratch: columns::MergeScratch,
}

/// A key's entries, some of them deltas, folded onto its checkpoint row
/// `row` (ours) with per-column versions, as `install` merges them
/// (`columns.rs`): `Some(Some(record))` for the row that results (`row`
/// freed), `Some(None)` if it ends deleted (`row` freed), `None` (nothing
/// done) when the table has no schema, an entry does not fit it, or the
/// row would miss a column: `install` then decides, and reports.
///
/// # Safety
/// As for [`merge`]; `row` is ours.
unsafe fn fold(
    ctx: &Ctx<'_>,
    table: u32,
    row: Option<NonNull<Record>>,
    group: &[Gathered],
    f: &mut Folding,
) -> Option<Option<NonNull<Record>>> {
    let schema = ctx.schema(table)?;
    // SAFETY: per our contract.
    if let Some(rec) = unsafe { patch_whole(schema, row, group, &mut f.versions) } {
        return Some(Some(rec));
    }
    let n = schema.columns().len();
    f.versions.clear();
    f.versions.resize(n + 1, 0);
    f.row.clear();
    if let Some(r) = row {
        // SAFETY: ours, live.
        let r = unsafe { r.as_ref() };
        f.versions[1..].fill(Tid::of_word(r.tid.load()).raw());
        r.copy_value(&mut f.row);
    }
    for g in group {
        // SAFETY: per our contract.
        let write = unsafe { g.write() };
        columns::merge(schema, &f.row, &mut f.versions, g.tid, write, &mut f.scratch, &mut f.out).ok()?;
        std::mem::swap(&mut f.row, &mut f.out);
    }
    let live = columns::is_live(&f.versions);
    if live && !columns::complete(&f.versions) {
        return None;
    }
    if let Some(r) = row {
        // SAFETY: ours, never linked: replaced.
        unsafe { Record::free(r) };
    }
    if !live {
        return Some(None);
    }
    let word = word_of(&f.versions);
    // SAFETY: per our contract.
    Some(Some(Record::alloc(unsafe { group[0].key() }, &f.row, 0, word)))
}

/// [`fold`]'s fast way, for a group of values and deltas (no delete)
/// whose deltas are all of fixed columns at fixed places (most of
/// TPC-C's): the newest whole row (`row`, or a value entry newer than it)
/// with the deltas newer than it patched into it in place, with no copy
/// of the row per entry. What `columns::merge` would give: a whole row
/// writes every column, so older entries lose on every column. `None`,
/// with nothing done, where it does not apply (including an entry that
/// does not fit the schema, which the slow way reports).
///
/// # Safety
/// As for [`merge`]; `row` is ours.
unsafe fn patch_whole(
    schema: &crate::catalog::Schema,
    row: Option<NonNull<Record>>,
    group: &[Gathered],
    versions: &mut Vec<u64>,
) -> Option<NonNull<Record>> {
    // SAFETY: ours, live.
    let row_tid = row.map(|r| Tid::of_word(unsafe { r.as_ref() }.tid.load()).raw());
    let value = group.iter().filter(|g| g.kind() == VALUE).max_by_key(|g| g.tid);
    // The base, and its length: a value entry newer than the row, else the row.
    let (base_tid, base_value, len) = match value {
        Some(v) if row_tid.is_none_or(|t| v.tid > t) => {
            // SAFETY: per our contract.
            let Write::Value(bytes) = (unsafe { v.write() }) else { unreachable!("a value entry") };
            (v.tid, Some(bytes), bytes.len())
        }
        // SAFETY: ours, live.
        _ => (row_tid?, None, unsafe { row?.as_ref() }.value_len()),
    };
    let fits = |g: &Gathered| {
        // SAFETY: per our contract.
        match unsafe { g.write() } {
            Write::Value(v) => schema.validate(v).is_ok(),
            Write::Delta(d) => columns::patchable(schema, len, d),
            Write::Delete => false,
        }
    };
    if !group.iter().all(fits) {
        return None;
    }
    let rec = match base_value {
        Some(v) => {
            if let Some(r) = row {
                // SAFETY: ours, never linked: older than the value.
                unsafe { Record::free(r) };
            }
            // SAFETY: per our contract.
            Record::alloc(unsafe { group[0].key() }, v, 0, base_tid | LATEST_BIT)
        }
        None => row.expect("the base"),
    };
    versions.clear();
    versions.resize(schema.columns().len() + 1, base_tid);
    versions[0] = 0;
    // SAFETY: ours alone (the row, or just allocated), live.
    let r = unsafe { rec.as_ref() };
    r.tid.lock(); // ours alone, but writes to a record go under its lock
    for g in group {
        // SAFETY: per our contract.
        if let Write::Delta(d) = unsafe { g.write() } {
            columns::patch_unchecked(schema, r, versions, g.tid, d);
        }
    }
    r.tid.unlock_to(word_of(versions));
    Some(rec)
}

/// Installs `rows` (records of the checkpoint, ours, freed here) and then
/// `entries` one by one, each after a lookup: what replay does without
/// the merge.
///
/// # Safety
/// As for [`merge`].
unsafe fn install_all(
    ctx: &Ctx<'_>,
    table: u32,
    rows: Vec<NonNull<Record>>,
    entries: impl Iterator<Item = Gathered>,
    left: &mut Leftovers,
) -> Result<(), String> {
    let target = ctx.target(table);
    let mut scratch = Scratch::default();
    // SAFETY: the rows are ours, per our contract.
    unsafe { install_rows(&target, rows, &mut scratch, left) }?;
    for g in entries {
        // SAFETY: per our contract.
        let (key, write) = unsafe { (g.key(), g.write()) };
        install(&target, key, g.tid(), write, target.tree.lookup(key), &mut scratch, left)?;
    }
    Ok(())
}

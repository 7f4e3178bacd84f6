//! Sort-merge replay: the log phase of recovery as a sort and a merge
//! with the base checkpoint, instead of one tree lookup per log entry.
//!
//! Why: the base checkpoint is packed into sorted runs and its trees built
//! bottom up (`index::load`), but each of the log's entries then descended
//! the tree: on a 2-warehouse TPC-C directory, `Tree::lookup_batch`, the
//! leaf search and the inserts were about half of a recovery's CPU time
//! with the memory already touched (README, "Recovery"). Here the log's
//! workers only gather each entry (its key's first bytes, TID and where
//! its bytes lie), and once every log block is read, each table's entries
//! are sorted and merged with the checkpoint's rows, key by key, into one
//! sorted run, from which its tree is built like the checkpoint's was.
//!
//! - The log files are mapped read-only ([`Mapped`]), so a gathered entry
//!   points into the page cache instead of a copy of the log: the blocks
//!   are still read, checked and filtered by the reader as before, and
//!   decoded from the mapping at the same offsets.
//! - Per key the entry with the largest TID wins, as `install` decides
//!   (checkpoint rows are older than every log entry replayed). A delete
//!   that wins leaves no row, so no tombstone.
//! - A key with a delta among its entries is not merged: its checkpoint
//!   row goes into the run as it is, and after the tree is built its
//!   entries go through `install`, version vectors and all. So is every
//!   entry of a table whose checkpoint rows could not be loaded as runs
//!   (overlapping runs, or rows installed one by one). `install` does not
//!   depend on the order, so the result is what replaying every entry
//!   would give.
//!
//! Used when no incremental checkpoint is on the chain (its rows are
//! installed into built trees before the log).

use super::columns;
use super::log::{Columns, Entry, Write};
use super::recovery::{Ctx, Leftovers, Scratch};
use crate::error::{Error, Result};
use crate::index::{slice_at, SortedRun};
use crate::record::Record;
use crate::tid::{Tid, LATEST_BIT};
use std::cmp::Ordering as Cmp;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A file mapped read-only, for as long as entries point into it.
pub(super) struct Mapped {
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
    pub(super) fn open(path: &Path) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&l| l > 0)?;
        // SAFETY: a new private read-only mapping of an open file; no
        // existing memory is affected. The file stays mapped after `file`
        // is closed.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }

    /// Bytes `at..at + len` of the file, if it is that long.
    pub(super) fn get(&self, at: u64, len: usize) -> Option<&[u8]> {
        let at = usize::try_from(at).ok()?;
        (at.checked_add(len)? <= self.len)
            // SAFETY: inside the mapping, which lives as long as `self`.
            .then(|| unsafe { std::slice::from_raw_parts((self.ptr as *const u8).add(at), len) })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; entries pointing into it
        // are gone by now (`Gathered`'s contract).
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A log entry gathered for the merge: 32 bytes, where the entry it
/// stands for is 56 (and a 2-warehouse TPC-C log has 16M of them).
#[derive(Clone, Copy)]
pub(super) struct Gathered {
    /// The key's first 8 bytes, big-endian, zero padded: most comparisons
    /// end here.
    slice: u64,
    tid: u64,
    /// The key, in a mapped log file, followed by the write's bytes.
    key: *const u8,
    /// The write's bytes.
    len: u32,
    key_len: u16,
    kind: u8,
}

const VALUE: u8 = 0;
const DELETE: u8 = 1;
const DELTA: u8 = 2;
const DELTA_VARINT: u8 = 3;

// SAFETY: points into a `Mapped`, which may be read from any thread.
unsafe impl Send for Gathered {}

impl Gathered {
    /// `e`, decoded from a mapped file.
    pub(super) fn of(e: &Entry<'_>) -> Gathered {
        let (kind, bytes) = match e.write {
            Write::Value(v) => (VALUE, v),
            Write::Delete => (DELETE, &[][..]),
            Write::Delta(c) => (if c.varint() { DELTA_VARINT } else { DELTA }, c.payload()),
        };
        debug_assert!(bytes.is_empty() || std::ptr::eq(bytes.as_ptr(), e.key.as_ptr_range().end));
        Gathered {
            slice: slice_at(e.key, 0),
            tid: e.tid.raw(),
            key: e.key.as_ptr(),
            len: bytes.len() as u32,
            key_len: e.key.len() as u16,
            kind,
        }
    }

    /// # Safety
    /// The mapping it was gathered from is alive.
    unsafe fn key<'a>(&self) -> &'a [u8] {
        // SAFETY: per the contract; `of` took these from a slice of it.
        unsafe { std::slice::from_raw_parts(self.key, self.key_len as usize) }
    }

    /// # Safety
    /// As for [`Gathered::key`].
    unsafe fn write<'a>(&self) -> Write<'a> {
        // SAFETY: per the contract: the write's bytes follow the key.
        let bytes = unsafe { std::slice::from_raw_parts(self.key.add(self.key_len as usize), self.len as usize) };
        match self.kind {
            VALUE => Write::Value(bytes),
            DELETE => Write::Delete,
            k => Write::Delta(Columns::checked(bytes, k == DELTA_VARINT)),
        }
    }

    fn tid(&self) -> Tid {
        Tid::from_raw(self.tid)
    }
}

/// Key order: by the first 8 bytes, and past them (only then touching
/// the mapped key) by the rest.
///
/// # Safety
/// As for [`Gathered::key`].
unsafe fn cmp_keys(a: &Gathered, b: &Gathered) -> Cmp {
    a.slice.cmp(&b.slice).then_with(|| {
        if a.key_len <= 8 || b.key_len <= 8 {
            a.key_len.cmp(&b.key_len)
        } else {
            // SAFETY: per the contract.
            unsafe { cmp_tails(a.key(), b.key()) }
        }
    })
}

/// `rec`'s key against `g`'s.
///
/// # Safety
/// As for [`Gathered::key`]; `rec` is live.
unsafe fn cmp_record(rec: NonNull<Record>, g: &Gathered) -> Cmp {
    // SAFETY: per the contract.
    let key = unsafe { rec.as_ref() }.key();
    slice_at(key, 0).cmp(&g.slice).then_with(|| {
        if key.len() <= 8 || g.key_len <= 8 {
            key.len().cmp(&(g.key_len as usize))
        } else {
            // SAFETY: per the contract.
            cmp_tails(key, unsafe { g.key() })
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
pub(super) fn push(chunks: &mut Vec<Vec<Gathered>>, g: Gathered) {
    let last = chunks.last_mut().expect("a chunk being filled");
    if last.capacity() == 0 {
        last.reserve_exact(CHUNK);
    }
    last.push(g);
    if last.len() == CHUNK {
        chunks.push(Vec::new());
    }
}

/// One table's work: its gathered entries (sorted chunks) and the
/// checkpoint's runs of it.
struct Task {
    table: u32,
    gathered: Vec<Vec<Gathered>>,
    runs: Vec<SortedRun>,
}

impl Task {
    fn entries(&self) -> usize {
        self.gathered.iter().map(Vec::len).sum()
    }
}

/// Merges each table's gathered entries with its checkpoint runs and
/// builds its tree, `threads` tables at a time (largest first).
///
/// # Safety
/// The mappings the entries point into outlive this call.
pub(super) unsafe fn merge(ctx: &Ctx<'_>, threads: usize, left: &mut Leftovers) -> Result<()> {
    let mut tasks: Vec<Task> =
        (0..ctx.tables.len() as u32).map(|table| Task { table, gathered: Vec::new(), runs: Vec::new() }).collect();
    for (t, chunks) in std::mem::take(&mut left.gathered).into_iter().enumerate() {
        tasks[t].gathered.extend(chunks.into_iter().filter(|c| !c.is_empty()));
    }
    for (t, run) in std::mem::take(&mut left.runs) {
        tasks[t as usize].runs.push(run);
    }
    tasks.sort_by_key(|t| std::cmp::Reverse(t.entries() + t.runs.iter().map(|r| r.len() as usize).sum::<usize>()));
    let tasks: Vec<Mutex<Option<Task>>> = tasks.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let next = AtomicUsize::new(0);
    let out = Mutex::new((Leftovers::default(), None));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut left = Leftovers::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(task) = tasks.get(i).and_then(|t| super::log::lock(t).take()) else { break };
                    let name = &ctx.tables[task.table as usize].name;
                    // SAFETY: per our contract.
                    if let Err(what) = unsafe { merge_table(ctx, task, &mut left) } {
                        super::log::lock(&out).1.get_or_insert(Error::Corrupt {
                            what: format!("the log, table {name:?}: {what}"),
                            salvage: None,
                        });
                        break;
                    }
                }
                super::log::lock(&out).0.absorb(left);
            });
        }
    });
    let (l, err) = out.into_inner().unwrap_or_else(|e| e.into_inner());
    left.absorb(l);
    err.map_or(Ok(()), Err)
}

/// One table: sort, merge, build; then `install` what was set aside.
///
/// # Safety
/// As for [`merge`].
unsafe fn merge_table(ctx: &Ctx<'_>, task: Task, left: &mut Leftovers) -> Result<(), String> {
    let Task { table, mut gathered, runs } = task;
    let tree = &ctx.tables[table as usize].tree;
    for g in &mut gathered {
        // SAFETY: per our contract.
        g.sort_unstable_by(|a, b| unsafe { cmp_keys(a, b) });
    }
    // The checkpoint's rows in key order, if its runs are disjoint and the
    // tree is still empty; otherwise every row and entry is installed.
    let mut runs = runs;
    runs.sort_unstable_by(|a, b| a.first_key().cmp(b.first_key()));
    let disjoint = runs.windows(2).all(|w| w[0].last_key() < w[1].first_key());
    let empty = tree.is_empty();
    let rows: Vec<NonNull<Record>> = runs.into_iter().flat_map(SortedRun::into_records).collect();
    let mut slow: Vec<Gathered> = Vec::new();
    if !(disjoint && empty) {
        // SAFETY: the rows are ours; entries per our contract.
        return unsafe { install_all(ctx, table, rows, gathered.into_iter().flatten(), left) };
    }
    let mut run = SortedRun::flat();
    let mut rows = rows.into_iter().peekable();
    let mut heads: Vec<std::iter::Peekable<std::vec::IntoIter<Gathered>>> =
        gathered.into_iter().map(|g| g.into_iter().peekable()).collect();
    let mut group: Vec<Gathered> = Vec::new();
    let mut folding = Folding::default();
    let push = |run: &mut SortedRun, rec: NonNull<Record>| {
        run.push(rec).map_err(|rec| {
            // SAFETY: ours, never linked.
            unsafe { Record::free(rec) };
            "keys out of order in the merge".to_string()
        })
    };
    loop {
        // The smallest key among the threads' next entries, and all of its
        // entries.
        group.clear();
        let mut least: Option<Gathered> = None;
        for h in &mut heads {
            if let Some(g) = h.peek() {
                // SAFETY: per our contract.
                if least.is_none_or(|l| unsafe { cmp_keys(g, &l) } == Cmp::Less) {
                    least = Some(*g);
                }
            }
        }
        let Some(least) = least else { break };
        for h in &mut heads {
            // SAFETY: per our contract.
            while let Some(g) = h.next_if(|g| unsafe { cmp_keys(g, &least) } == Cmp::Equal) {
                group.push(g);
            }
        }
        // Checkpoint rows before it, and its own.
        // SAFETY: rows are live; entries per our contract.
        while let Some(r) = rows.next_if(|&r| unsafe { cmp_record(r, &least) } == Cmp::Less) {
            push(&mut run, r)?;
        }
        // SAFETY: as above.
        let row = rows.next_if(|&r| unsafe { cmp_record(r, &least) } == Cmp::Equal);
        if group.iter().any(|g| g.kind >= DELTA) {
            // SAFETY: the row is ours; entries per our contract.
            match unsafe { fold(ctx, table, row, &group, &mut folding) } {
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
                push(&mut run, Record::alloc(key, v, 0, newest.tid().raw() | LATEST_BIT, std::ptr::null_mut()))?;
            }
            Write::Delete => {} // the row is gone: nothing to keep
            Write::Delta(_) => unreachable!("groups with deltas are set aside"),
        }
    }
    for r in rows {
        push(&mut run, r)?;
    }
    let n = run.len();
    tree.load(vec![run], &mut left.retired).map_err(|_| "the merged run did not load".to_string())?;
    left.created += n;
    // SAFETY: per our contract.
    unsafe { install_all(ctx, table, Vec::new(), slow.into_iter(), left) }
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
    let n = schema.columns().len();
    f.versions.clear();
    f.versions.resize(n + 1, 0);
    f.row.clear();
    if let Some(r) = row {
        // SAFETY: ours, live.
        let r = unsafe { r.as_ref() };
        r.copy_value(&mut f.row);
        let tid = Tid::of_word(r.tid.load()).raw();
        f.versions[1..].fill(tid);
    }
    for g in group {
        // SAFETY: per our contract.
        let write = unsafe { g.write() };
        columns::merge(schema, &f.row, &mut f.versions, g.tid, write, &mut f.scratch, &mut f.out).ok()?;
        std::mem::swap(&mut f.row, &mut f.out);
    }
    let live = columns::is_live(&f.versions);
    if live && f.versions[1..].iter().any(|&c| c <= f.versions[0]) {
        return None;
    }
    if let Some(r) = row {
        // SAFETY: ours, never linked: replaced.
        unsafe { Record::free(r) };
    }
    if !live {
        return Some(None);
    }
    let word = Tid::from_raw(columns::newest(&f.versions)).raw() | LATEST_BIT;
    // SAFETY: per our contract.
    Some(Some(Record::alloc(unsafe { group[0].key() }, &f.row, 0, word, std::ptr::null_mut())))
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
    let (mut scratch, mut value) = (Scratch::default(), Vec::new());
    let mut rows = rows.into_iter();
    let result = (|| {
        for rec in rows.by_ref() {
            // SAFETY: a record the run owned, now ours alone; freed here.
            let (key, tid) = unsafe {
                let r = rec.as_ref();
                r.copy_value(&mut value);
                let kt = (r.key().to_vec(), Tid::of_word(r.tid.load()));
                Record::free(rec);
                kt
            };
            super::recovery::install(
                &target,
                &key,
                tid,
                Write::Value(&value),
                target.tree.lookup(&key),
                &mut scratch,
                left,
            )?;
        }
        for g in entries {
            // SAFETY: per our contract.
            let (key, write) = unsafe { (g.key(), g.write()) };
            super::recovery::install(&target, key, g.tid(), write, target.tree.lookup(key), &mut scratch, left)?;
        }
        Ok(())
    })();
    for rec in rows {
        // SAFETY: not installed after a failure: still ours.
        unsafe { Record::free(rec) };
    }
    result
}

//! Read/write transactions (Silo §4.4–§4.7).
//!
//! A transaction runs against the live index: reads copy a stable version
//! and remember `(record, TID word)` in the read set; lookups that miss and
//! scans remember `(leaf, version)` in the node set; writes are buffered in
//! the write set. Inserts put an absent placeholder record into the index
//! right away, so that Phase 1 of the commit has something to lock. Nothing
//! is visible to others until [`Txn::commit`] (in `commit.rs`).
//!
//! A transaction that has already lost (its own insert met a conflicting
//! leaf change) is *doomed*: every later call returns the abort.
//!
//! On a hot standby a transaction reads at the read view instead, like a
//! snapshot transaction: replay installs one record at a time, so the
//! live index may hold half of an epoch, or epochs the primary has not
//! released, and validation would not notice (replay takes no write-set
//! locks). Its writes are refused with [`Error::ReadOnly`].

pub(crate) mod commit;
mod context;
pub(crate) mod delta;
mod range;
pub(crate) mod sets;
mod snapshot;
mod view;

use crate::catalog::{index_entry_key, index_entry_primary, index_prefix, Extractor, IndexId, TableId};
use crate::error::{AbortReason, Error, Result};
use crate::options::MAX_KEY_LEN;
use crate::record::Record;
use crate::tid::{is_absent, is_latest, Tid, ABSENT_BIT, LATEST_BIT};
use sets::{NodeEntry, ReadEntry, WriteKind};
use snapshot::{read_at, scan_at};
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;

pub use commit::CommitInfo;
pub use context::WorkerStats;
pub(crate) use context::{Context, Shared};
pub use range::Range;
pub use snapshot::SnapshotTxn;
pub use view::Freshness;
pub(crate) use view::ReadView;

/// Keys longer than `MAX_KEY_LEN` are a typed error everywhere.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge { len: key.len(), max: MAX_KEY_LEN });
    }
    Ok(())
}

/// The TID word of an insert placeholder: absent, latest, TID 0.
pub(crate) const PLACEHOLDER_WORD: u64 = ABSENT_BIT | LATEST_BIT;

/// The visitor of the scan core: key, value (`None` for a deleted record),
/// and the version read (as in [`Txn::get_versioned`]).
type ScanVisitor<'a> = dyn FnMut(&[u8], Option<&[u8]>, Option<Tid>) -> bool + 'a;

/// A read/write transaction. Dropping it without committing aborts it.
pub struct Txn<'w> {
    pub(crate) w: &'w mut Context,
    /// `e_w` when the transaction began.
    epoch: u64,
    doomed: Option<AbortReason>,
    finished: bool,
    /// On a standby: reads see the versions of epochs `< se` (the read
    /// view plus one) and nothing is registered; writes are refused.
    snapshot: Option<u64>,
}

/// What a read found.
enum Observed {
    /// No record for the key; the leaf went into the node set.
    Missing,
    /// This transaction's own write (index into the write set).
    Own(usize),
    /// A committed (or placeholder) version, value in `scratch` if present.
    Committed(u64),
}

impl<'w> Txn<'w> {
    pub(crate) fn new(w: &'w mut Context, epoch: u64) -> Txn<'w> {
        debug_assert!(w.sets.read.is_empty() && w.sets.write.is_empty() && w.sets.nodes.is_empty());
        Txn { w, epoch, doomed: None, finished: false, snapshot: None }
    }

    /// A transaction of a standby, reading at snapshot epoch `se` (its
    /// epoch, the serialization point, is the read view `se - 1`).
    pub(crate) fn at_view(w: &'w mut Context, se: u64) -> Txn<'w> {
        let mut txn = Txn::new(w, se - 1);
        txn.snapshot = Some(se);
        txn
    }

    /// The worker's local epoch `e_w` for this transaction.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn check(&self, key: &[u8]) -> Result<()> {
        if let Some(r) = self.doomed {
            return Err(Error::Aborted(r));
        }
        check_key(key)
    }

    /// [`Txn::check`] for a write, which a standby refuses.
    fn check_write(&self, key: &[u8]) -> Result<()> {
        if self.snapshot.is_some() {
            return Err(Error::ReadOnly);
        }
        self.check(key)
    }

    fn check_value(&mut self, ti: usize, value: &[u8]) -> Result<()> {
        let max = self.w.shared.options.max_value_len;
        if value.len() > max {
            return Err(Error::ValueTooLarge { len: value.len(), max });
        }
        if let Some(s) = self.w.tables[ti].schema() {
            s.validate(value)?;
        }
        Ok(())
    }

    fn doom(&mut self, reason: AbortReason) -> Error {
        self.doomed = Some(reason);
        Error::Aborted(reason)
    }

    /// Finds the current version of `key` and registers what was observed.
    fn observe(&mut self, ti: usize, key: &[u8]) -> Observed {
        let Context { tables, sets, scratch, .. } = &mut *self.w;
        let tree = &tables[ti].tree;
        if let Some(se) = self.snapshot {
            let rec = tree.lookup(key).record;
            return rec.and_then(|rec| read_at(rec, se, scratch)).map_or(Observed::Missing, Observed::Committed);
        }
        // A record the prefetch found is as good as a lookup's: the checks
        // below find it superseded or unhooked if it is.
        let mut ahead = sets.take_ahead(ti as u32, key);
        loop {
            let rec = match ahead.take() {
                Some(rec) => rec,
                None => {
                    let found = tree.lookup(key);
                    let Some(rec) = found.record else {
                        sets.nodes.push(NodeEntry { leaf: found.leaf, version: found.version });
                        return Observed::Missing;
                    };
                    rec
                }
            };
            if let Some(i) = sets.find_write(rec) {
                return Observed::Own(i);
            }
            // SAFETY: found in the index within our epoch: live.
            let word = unsafe { rec.as_ref() }.stable_read(scratch);
            if !is_latest(word) {
                continue; // superseded or unhooked just now: look again
            }
            sets.read.push(ReadEntry { rec, word, table: ti as u32 });
            return Observed::Committed(word);
        }
    }

    /// The value of `key`, or `None`. The slice is valid until the next call
    /// on this transaction.
    pub fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<&[u8]>> {
        self.get_versioned(table, key).map(|(v, _)| v)
    }

    /// Announces that this transaction is about to read `keys` (each in its
    /// table), so that their lookups' cache misses overlap: the index
    /// looks all of them up at once, one level per round, prefetching each
    /// node and record, and a read that follows starts from the record
    /// found (or, for a key not found, looks again, in the cache). Worth
    /// it for independent reads known up front (TPC-C's items and stock
    /// of a new order, Redis's MGET); a hint that records nothing in the
    /// read set and never changes a result.
    pub fn prefetch(&mut self, keys: &[(TableId, &[u8])]) -> Result<()> {
        self.w.prefetch(keys)
    }

    /// Like [`Txn::get`], also returning the version read: `None` when the
    /// transaction read its own write, `Some(Tid::ZERO)` when no committed
    /// version exists, otherwise the TID of the version (present or
    /// deleted). For tests and tools that check histories.
    pub fn get_versioned(&mut self, table: TableId, key: &[u8]) -> Result<(Option<&[u8]>, Option<Tid>)> {
        self.check(key)?;
        let ti = self.w.table_index(table)?;
        Ok(match self.observe(ti, key) {
            Observed::Missing => (None, Some(Tid::ZERO)),
            Observed::Own(i) => {
                let w = self.w.sets.write[i];
                match w.kind {
                    WriteKind::Put => (Some(self.w.sets.value(&w)), None),
                    WriteKind::Delete => (None, None),
                }
            }
            Observed::Committed(word) => {
                let value = if is_absent(word) { None } else { Some(&self.w.scratch[..]) };
                (value, Some(Tid::of_word(word)))
            }
        })
    }

    /// Adds an absent placeholder for `key` to the index. Returns it, or
    /// `None` if another record appeared first (look again).
    fn insert_placeholder(&mut self, ti: usize, key: &[u8], capacity: usize) -> Result<Option<NonNull<Record>>> {
        let rec = Record::alloc(key, &[], capacity, PLACEHOLDER_WORD);
        let outcome = self.w.tables[ti].tree.insert_if_absent(key, rec);
        if let crate::index::Insert::Existing(_) = outcome {
            // SAFETY: never published.
            unsafe { Record::free(rec) };
            return Ok(None);
        }
        let sets = &mut self.w.sets;
        sets.read.push(ReadEntry { rec, word: PLACEHOLDER_WORD, table: ti as u32 });
        sets.write(ti as u32, rec, WriteKind::Put, &[], true);
        if let Err(reason) = sets.after_own_insert(&outcome) {
            return Err(self.doom(reason));
        }
        Ok(Some(rec))
    }

    /// Writes `key = value`, inserting the key if it is missing (upsert).
    pub fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_write(key)?;
        let ti = self.w.table_index(table)?;
        self.check_value(ti, value)?;
        loop {
            let found = match self.w.sets.recently_read(ti as u32, key) {
                Some(rec) => Some(rec),
                None => self.w.tables[ti].tree.lookup(key).record,
            };
            let rec = match found {
                Some(rec) => rec,
                None => match self.insert_placeholder(ti, key, value.len())? {
                    Some(rec) => rec,
                    None => continue,
                },
            };
            self.w.sets.write(ti as u32, rec, WriteKind::Put, value, false);
            return Ok(());
        }
    }

    /// Inserts `key = value`; [`Error::KeyExists`] if the key is present
    /// (the transaction stays usable and has observed the key).
    pub fn insert(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_write(key)?;
        let ti = self.w.table_index(table)?;
        self.check_value(ti, value)?;
        loop {
            // Inserts are mostly of new keys, so try the placeholder first:
            // one descent finds the key's place and fills it. A present key
            // is then observed like a read. The placeholder in the read set
            // stands for the observed absence: nobody else can commit into
            // it unnoticed, so no node-set entry is needed.
            let rec = match self.insert_placeholder(ti, key, value.len())? {
                Some(rec) => rec,
                None => match self.observe(ti, key) {
                    Observed::Missing => continue, // removed in between
                    Observed::Own(i) => {
                        if self.w.sets.write[i].kind == WriteKind::Put {
                            return Err(Error::KeyExists);
                        }
                        self.w.sets.write[i].rec
                    }
                    Observed::Committed(word) if !is_absent(word) => return Err(Error::KeyExists),
                    Observed::Committed(_) => {
                        self.w.sets.read.last().map(|r| r.rec).unwrap_or_else(|| unreachable!("observe pushed it"))
                    }
                },
            };
            self.w.sets.write(ti as u32, rec, WriteKind::Put, value, false);
            return Ok(());
        }
    }

    /// Deletes `key`. Returns whether it was present.
    pub fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool> {
        self.check_write(key)?;
        let ti = self.w.table_index(table)?;
        let rec = match self.observe(ti, key) {
            Observed::Missing => return Ok(false),
            Observed::Own(i) => {
                let w = self.w.sets.write[i];
                if w.kind == WriteKind::Delete {
                    return Ok(false);
                }
                w.rec
            }
            Observed::Committed(word) if is_absent(word) => return Ok(false),
            Observed::Committed(_) => self.w.sets.read.last().map(|r| r.rec).unwrap_or_else(|| unreachable!()),
        };
        self.w.sets.write(ti as u32, rec, WriteKind::Delete, &[], false);
        Ok(true)
    }

    /// Visits up to `limit` rows with keys in `range`, in key order, until
    /// `visit(key, value)` returns false. Phantom-safe: the transaction
    /// aborts at commit if a key is inserted into or removed from the
    /// scanned range. Returns the number of rows visited.
    ///
    /// `range` is any `RangeBounds<[u8]>`, e.g. `..` or
    /// `(Bound::Included(&b"a"[..]), Bound::Excluded(&b"b"[..]))`.
    pub fn scan(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        limit: usize,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        self.scan_dir(table, range, false, limit, visit)
    }

    /// [`Txn::scan`] in descending key order.
    pub fn scan_rev(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        limit: usize,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        self.scan_dir(table, range, true, limit, visit)
    }

    /// [`Txn::scan`] (`reverse = false`) or [`Txn::scan_rev`] (`true`).
    pub fn scan_dir(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        reverse: bool,
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        self.scan_inner(table, bounds(&range), reverse, limit, &mut |k, v, _| v.is_none_or(|v| visit(k, v)))
    }

    /// Like [`Txn::scan`], but also visits deleted (absent) records with a
    /// `None` value, and passes the version read (as in
    /// [`Txn::get_versioned`]). Only present rows count toward `limit`.
    pub fn scan_versioned(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        reverse: bool,
        limit: usize,
        mut visit: impl FnMut(&[u8], Option<&[u8]>, Option<Tid>) -> bool,
    ) -> Result<usize> {
        self.scan_inner(table, bounds(&range), reverse, limit, &mut visit)
    }

    fn scan_inner(
        &mut self,
        table: TableId,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
        limit: usize,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<usize> {
        self.check(&[])?;
        let ti = self.w.table_index(table)?;
        let Context { tables, sets, scratch, .. } = &mut *self.w;
        let tree = &tables[ti].tree;
        if let Some(se) = self.snapshot {
            let range = (lower, upper);
            return Ok(scan_at(tree, se, scratch, range, reverse, limit, |k, v, w| {
                visit(k, Some(v), Some(Tid::of_word(w)))
            }));
        }
        let (nodes, read, writes) = sets.for_scan();
        let mut visible = 0usize;
        if limit == 0 {
            return Ok(0);
        }
        tree.scan(
            lower,
            upper,
            reverse,
            |leaf, version| nodes.push(NodeEntry { leaf, version }),
            |key, mut rec| {
                let (value, version) = loop {
                    if let Some((kind, v)) = writes.find(rec) {
                        break ((kind == WriteKind::Put).then_some(v), None);
                    }
                    // SAFETY: reached from a validated leaf in our epoch.
                    let word = unsafe { rec.as_ref() }.stable_read(scratch);
                    if !is_latest(word) {
                        // Grown into a new record (same key), or unhooked (the
                        // leaf version changed, so commit will fail anyway).
                        match tree.lookup(key).record {
                            Some(r) => {
                                rec = r;
                                continue;
                            }
                            None => return true,
                        }
                    }
                    read.push(ReadEntry { rec, word, table: ti as u32 });
                    let v = (!is_absent(word)).then_some(&scratch[..]);
                    break (v, Some(Tid::of_word(word)));
                };
                if value.is_some() {
                    visible += 1;
                }
                visit(key, value, version) && visible < limit
            },
        );
        Ok(visible)
    }

    /// Writes a row and keeps every secondary index of its table in step:
    /// reads the old row, moves index entries whose secondary key changed.
    pub fn put_indexed(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let old = self.get(table, key)?.map(<[u8]>::to_vec);
        self.maintain_indexes(table, key, old.as_deref(), Some(value))?;
        self.put(table, key, value)
    }

    /// Inserts a row and its secondary index entries.
    pub fn insert_indexed(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.insert(table, key, value)?;
        self.maintain_indexes(table, key, None, Some(value))
    }

    /// Deletes a row and its secondary index entries. Returns whether the
    /// row was present.
    pub fn delete_indexed(&mut self, table: TableId, key: &[u8]) -> Result<bool> {
        let Some(old) = self.get(table, key)?.map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        self.maintain_indexes(table, key, Some(&old), None)?;
        self.delete(table, key)
    }

    fn maintain_indexes(&mut self, table: TableId, key: &[u8], old: Option<&[u8]>, new: Option<&[u8]>) -> Result<()> {
        let ti = self.w.table_index(table)?;
        let indexes: Vec<(TableId, Extractor)> =
            self.w.tables[ti].indexes()?.iter().map(|i| (i.entries, i.extract.clone())).collect();
        let (mut old_sec, mut new_sec, mut entry) = (Vec::new(), Vec::new(), Vec::new());
        for (entries, extract) in indexes {
            old_sec.clear();
            new_sec.clear();
            if let Some(o) = old {
                extract(key, o, &mut old_sec);
            }
            if let Some(n) = new {
                extract(key, n, &mut new_sec);
            }
            if old.is_some() && new.is_some() && old_sec == new_sec {
                continue;
            }
            if old.is_some() {
                entry.clear();
                index_entry_key(&old_sec, key, &mut entry);
                self.delete(entries, &entry)?;
            }
            if new.is_some() {
                entry.clear();
                index_entry_key(&new_sec, key, &mut entry);
                self.put(entries, &entry, &[])?;
            }
        }
        Ok(())
    }

    /// Visits the primary keys of rows whose secondary key in `index` is
    /// `secondary`, in primary-key order (or reverse), up to `limit`.
    pub fn index_scan(
        &mut self,
        index: IndexId,
        secondary: &[u8],
        reverse: bool,
        limit: usize,
        mut visit: impl FnMut(&[u8]) -> bool,
    ) -> Result<usize> {
        let mut lo = Vec::with_capacity(secondary.len() + 2);
        index_prefix(secondary, &mut lo);
        let mut hi = lo.clone();
        if let Some(last) = hi.last_mut() {
            *last += 1; // the terminator 0x00 0x01 becomes 0x00 0x02
        }
        let range = (Bound::Included(&lo[..]), Bound::Excluded(&hi[..]));
        self.scan_inner(index.entries, range, reverse, limit, &mut |k, v, _| match (v, index_entry_primary(k)) {
            (Some(_), Some(pk)) => visit(pk),
            _ => true,
        })
    }

    /// Aborts the transaction, undoing its inserts.
    pub fn abort(mut self) {
        self.finish_abort(None);
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.finish_abort(None);
        }
    }
}

fn bounds(range: &impl RangeBounds<[u8]>) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (range.start_bound(), range.end_bound())
}

//! Read-only snapshot transactions (Silo §4.9).
//!
//! A snapshot transaction reads, for every key, the newest version whose
//! epoch is `< se_w` (the worker's snapshot epoch), following the chain of
//! old versions that writers keep across snapshot-epoch boundaries. It
//! registers nothing and never aborts: every transaction of an epoch
//! `< se_w` finished before `SE` reached `se_w`, because `SE` trails `E` by
//! at least `k >= 2` epochs and a committer's epoch is at least `E - 1`.
//!
//! Silo §4.9 says "epoch `<= se_w`", but its overwrite rule (a writer in
//! epoch `e` overwrites in place when `snap(old) == snap(e)`) would then
//! destroy a version written exactly at epoch `se_w` (a multiple of `k`)
//! when a write lands in `(se_w, se_w + k)`. With `<`, a snapshot's state is
//! the state at the *start* of epoch `se_w`, and the version it needs always
//! has `snap(epoch) < se_w`, so it is the one writers keep.

use super::{check_key, Context};
use crate::catalog::TableId;
use crate::error::Result;
use crate::index::Tree;
use crate::record::Record;
use crate::tid::{is_absent, Tid};
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;

/// A read-only transaction at a recent snapshot (Silo §4.9): it reads the versions committed as of the snapshot epoch, never aborts and never blocks writers. Made by [`Worker::snapshot`](crate::Worker::snapshot).
pub struct SnapshotTxn<'w> {
    w: &'w mut Context,
    se: u64,
}

/// Reads the version of `rec` visible at snapshot epoch `se` into `out`.
/// Returns that version's TID word (absent if the key was deleted then),
/// or `None` if the key was created after `se`.
pub(crate) fn read_at(rec: NonNull<Record>, se: u64, out: &mut Vec<u8>) -> Option<u64> {
    let mut r = rec;
    loop {
        // SAFETY: `r` is in an index or an old version kept for snapshots at
        // least as old as `se`; both outlive our epoch (see gc.rs).
        let rr = unsafe { r.as_ref() };
        let mut prev = std::ptr::null_mut();
        let word = rr.tid.stable_read(|word| {
            if Tid::of_word(word).epoch() < se {
                rr.copy_value(out);
            } else {
                prev = rr.prev();
            }
        });
        if Tid::of_word(word).epoch() < se {
            return Some(word);
        }
        r = NonNull::new(prev)?; // none: created after the snapshot
    }
}

/// Visits up to `limit` keys of `tree` in `(lower, upper)` that have a
/// present version at `se`, with that value (in `scratch`) and its TID
/// word, while `visit` returns true. Returns the number visited.
pub(crate) fn scan_at(
    tree: &Tree,
    se: u64,
    scratch: &mut Vec<u8>,
    (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
    reverse: bool,
    limit: usize,
    mut visit: impl FnMut(&[u8], &[u8], u64) -> bool,
) -> usize {
    let mut n = 0;
    if limit == 0 {
        return 0;
    }
    tree.scan(
        lower,
        upper,
        reverse,
        |_, _| {},
        |key, rec| match read_at(rec, se, scratch) {
            Some(word) if !is_absent(word) => {
                n += 1;
                visit(key, scratch, word) && n < limit
            }
            _ => true,
        },
    );
    n
}

impl<'w> SnapshotTxn<'w> {
    pub(crate) fn new(w: &'w mut Context, se: u64) -> SnapshotTxn<'w> {
        SnapshotTxn { w, se }
    }

    /// The snapshot epoch this transaction reads at.
    pub fn snapshot_epoch(&self) -> u64 {
        self.se
    }

    /// [`Txn::prefetch`](crate::Txn::prefetch): warms the cache for reads
    /// of `keys` that follow.
    pub fn prefetch(&mut self, keys: &[(TableId, &[u8])]) -> Result<()> {
        self.w.prefetch(keys)
    }

    /// The value of `key` at the snapshot. Valid until the next call.
    pub fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<&[u8]>> {
        check_key(key)?;
        let ti = self.w.table_index(table)?;
        let Context { tables, scratch, .. } = &mut *self.w;
        let rec = tables[ti].tree.lookup(key).record;
        Ok(match rec.and_then(|rec| read_at(rec, self.se, scratch)) {
            Some(word) if !is_absent(word) => Some(&scratch[..]),
            _ => None,
        })
    }

    /// Visits up to `limit` rows of the snapshot with keys in `range`.
    pub fn scan(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        limit: usize,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        self.scan_dir(table, range, false, limit, visit)
    }

    /// [`SnapshotTxn::scan`] in descending key order.
    pub fn scan_rev(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        limit: usize,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        self.scan_dir(table, range, true, limit, visit)
    }

    /// [`SnapshotTxn::scan`] (`reverse = false`) or
    /// [`SnapshotTxn::scan_rev`] (`true`).
    pub fn scan_dir(
        &mut self,
        table: TableId,
        range: impl RangeBounds<[u8]>,
        reverse: bool,
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        let ti = self.w.table_index(table)?;
        let Context { tables, scratch, .. } = &mut *self.w;
        let bounds = (range.start_bound(), range.end_bound());
        Ok(scan_at(&tables[ti].tree, self.se, scratch, bounds, reverse, limit, |k, v, _| visit(k, v)))
    }

    /// Ends the snapshot transaction (dropping it does the same).
    pub fn finish(self) {}
}

impl Drop for SnapshotTxn<'_> {
    fn drop(&mut self) {
        self.w.leave();
    }
}

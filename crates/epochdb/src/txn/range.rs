//! [`Txn::range`]: a range scan as an iterator. It fetches rows in batches
//! through the same scan as [`Txn::scan`], each batch starting just after
//! the last key of the one before, so the leaves the batches visit cover
//! the whole range read and phantom protection is the same as one scan's.

use super::Txn;
use crate::catalog::TableId;
use crate::error::Result;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

/// The first batch is small (a short range costs little more than a
/// `get`); later ones double up to this.
const MAX_BATCH: usize = 1024;

/// The rows of a range, in key order, as owned `(key, value)` pairs; made
/// by [`Txn::range`].
pub struct Range<'t, 'w> {
    txn: &'t mut Txn<'w>,
    table: TableId,
    /// Where the next batch starts.
    from: Bound<Vec<u8>>,
    to: Bound<Vec<u8>>,
    rows: VecDeque<(Vec<u8>, Vec<u8>)>,
    batch: usize,
    done: bool,
}

fn owned(b: Bound<&&[u8]>) -> Bound<Vec<u8>> {
    b.map(|k| k.to_vec())
}

impl<'w> Txn<'w> {
    /// The rows with keys in `range`, in key order, as an iterator of
    /// `Result<(key, value)>`: an alternative to [`Txn::scan`] for code
    /// that wants `for`, `map`, `take` and `collect`. Phantom-safe like
    /// `scan`: the transaction aborts at commit if a key is inserted into
    /// or removed from the part of the range the iterator read.
    ///
    /// It reads ahead in batches (16 rows, doubling to 1024), so it may
    /// read (and validate at commit) a few rows past the last one taken.
    /// Each row is copied out; [`Txn::scan`] avoids the copies.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| {
    ///     for k in [b"a", b"b", b"c", b"d"] {
    ///         txn.put(t, k, b"v")?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let keys = w.run(|txn| {
    ///     txn.range(t, &b"b"[..]..&b"d"[..]).map(|row| row.map(|(k, _)| k)).collect::<epochdb::Result<Vec<_>>>()
    /// })?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn range<'t, 'k>(&'t mut self, table: TableId, range: impl RangeBounds<&'k [u8]>) -> Range<'t, 'w> {
        let (from, to) = (owned(range.start_bound()), owned(range.end_bound()));
        Range { txn: self, table, from, to, rows: VecDeque::new(), batch: 16, done: false }
    }
}

impl Range<'_, '_> {
    /// Reads the next batch into `rows`.
    fn fill(&mut self) -> Result<()> {
        let rows = &mut self.rows;
        let bounds = (self.from.as_ref().map(Vec::as_slice), self.to.as_ref().map(Vec::as_slice));
        let n = self.txn.scan_inner(self.table, bounds, false, self.batch, &mut |k, v, _| {
            if let Some(v) = v {
                rows.push_back((k.to_vec(), v.to_vec()));
            }
            true
        })?;
        if n < self.batch {
            self.done = true;
        }
        if let Some((k, _)) = self.rows.back() {
            self.from = Bound::Excluded(k.clone());
        }
        self.batch = (self.batch * 2).min(MAX_BATCH);
        Ok(())
    }
}

impl Iterator for Range<'_, '_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rows.is_empty() && !self.done {
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.rows.pop_front().map(Ok)
    }
}

//! [`Worker`]: a thread's handle for running transactions, on its own
//! transaction context.

use super::seams::Persistence;
use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::txn::{CommitInfo, Context, Freshness, SnapshotTxn, Txn, WorkerStats};
use std::marker::PhantomData;

/// A thread's handle for running transactions. `Send` but not `Sync`: one
/// thread uses it at a time.
pub struct Worker {
    pub(super) ctx: Context,
    pub(super) _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("stats", &self.ctx.stats).finish()
    }
}

impl Worker {
    /// Begins a read/write transaction.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let mut txn = w.begin()?;
    /// txn.put(t, b"k", b"v")?;
    /// txn.commit()?;
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    ///
    /// On a hot standby the transaction reads at the read view (as
    /// [`Worker::snapshot`] does), and its writes are [`Error::ReadOnly`].
    pub fn begin(&mut self) -> Result<Txn<'_>> {
        if self.ctx.shared.standby_view().is_some() {
            let se = self.ctx.enter_fresh(Freshness::Any)?;
            return Ok(Txn::at_view(&mut self.ctx, se));
        }
        let (epoch, _) = self.ctx.enter()?;
        Ok(Txn::new(&mut self.ctx, epoch))
    }

    /// Begins a read-only snapshot transaction (Silo §4.9): it reads the
    /// state as of the snapshot epoch and never aborts.
    ///
    /// Committers keep the old versions snapshots read only while
    /// snapshots are in use: the first snapshot after none began for 10
    /// snapshot epochs (about 10 s with the default options) waits until
    /// the snapshot epoch reaches the point from which they all keep them
    /// (1-2 snapshot epochs, about 1-2 s). After a recovery they keep them
    /// from the start, so a snapshot right after opening does not wait.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let mut snap = w.snapshot()?;
    /// assert_eq!(snap.get(t, b"k")?, None);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn snapshot(&mut self) -> Result<SnapshotTxn<'_>> {
        self.snapshot_fresh(Freshness::Any)
    }

    /// Begins a snapshot transaction whose state is at least as fresh as
    /// `freshness` asks, or returns [`Error::Stale`]. On a hot standby
    /// (see [`crate::Backup::database`]) the snapshot is the read view:
    /// everything replayed and released by the primary, never more. Use
    /// [`Freshness::AtLeast`] with a commit's epoch from the primary to
    /// read your own writes there.
    ///
    /// ```
    /// # use epochdb::{Database, Freshness, Options, TableOptions};
    /// # use std::time::Duration;
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// let wait = Duration::from_secs(5);
    /// let mut snap = w.snapshot_fresh(Freshness::AtLeast { epoch: info.epoch, wait })?;
    /// assert_eq!(snap.get(t, b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn snapshot_fresh(&mut self, freshness: Freshness) -> Result<SnapshotTxn<'_>> {
        let se = self.ctx.enter_fresh(freshness)?;
        self.ctx.stats.snapshots += 1;
        Ok(SnapshotTxn::new(&mut self.ctx, se))
    }

    /// Runs `f` in a transaction and commits it, retrying aborts with
    /// bounded, randomized backoff, up to `Options::max_retries` times.
    /// An error returned by `f` aborts the transaction and is returned.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let n = w.run(|txn| {
    ///     txn.put(t, b"k", b"v")?;
    ///     Ok(txn.get(t, b"k")?.map_or(0, <[u8]>::len))
    /// })?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run<T>(&mut self, f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.run_with_info(f).map(|(v, _)| v)
    }

    /// Like [`Worker::run`], also returning the commit's TID and epoch.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// assert!(info.tid.is_some_and(|tid| tid.epoch() == info.epoch));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run_with_info<T>(&mut self, mut f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<(T, CommitInfo)> {
        let mut attempt: u32 = 0;
        loop {
            let mut txn = self.begin()?;
            let outcome = match f(&mut txn) {
                Ok(v) => txn.commit().map(|info| (v, info)),
                Err(e) => {
                    txn.abort();
                    Err(e)
                }
            };
            match outcome {
                Err(Error::Aborted(_)) if attempt < self.ctx.shared.options.max_retries => {
                    attempt += 1;
                    self.ctx.backoff(attempt);
                }
                other => return other,
            }
        }
    }

    /// Like [`Worker::run`], then waits until the transaction is durable:
    /// its results may be released to the outside world.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-rundurable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// w.run_durable(|txn| txn.put(t, b"order", b"paid"))?;
    /// // Only now tell the customer: a crash cannot lose the order.
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run_durable<T>(&mut self, f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        let (v, info) = self.run_with_info(f)?;
        self.wait_durable(info.release_epoch)?;
        Ok(v)
    }

    /// Blocks until transactions of `epoch` are durable; see
    /// [`Database::wait_durable`](crate::Database::wait_durable).
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-wwait-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// w.wait_durable(info.epoch)?;
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn wait_durable(&self, epoch: u64) -> Result<()> {
        self.ctx.shared.store.wait_durable(epoch)
    }

    /// This worker's counters.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// assert_eq!(w.stats().commits, 1);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn stats(&self) -> &WorkerStats {
        &self.ctx.stats
    }

    /// Reads `key` without a transaction: no read set, no validation, just
    /// the index lookup and a stable read (Silo §5.2's "Key-Value"
    /// baseline, for benchmarks). Copies the value into `out`; returns
    /// whether the key is present.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.kv_put(t, b"k", b"v")?;
    /// let mut out = Vec::new();
    /// assert!(w.kv_get(t, b"k", &mut out)?);
    /// assert_eq!(out, b"v");
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn kv_get(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.ctx.kv_get(table, key, out)
    }

    /// Writes `key = value` without a transaction: the record is locked,
    /// overwritten in place and unlocked with a new TID. A missing key, or a
    /// value that does not fit the record, takes the transactional path.
    /// Not serializable with concurrent transactions on the same keys; for
    /// the benchmark's `kv` variant.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.kv_put(t, b"k", b"v1")?;
    /// w.kv_put(t, b"k", b"v2")?;
    /// assert_eq!(w.run(|txn| Ok(txn.get(t, b"k")?.map(<[u8]>::to_vec)))?, Some(b"v2".to_vec()));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn kv_put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        if !self.ctx.kv_put_in_place(table, key, value)? {
            self.run(|txn| txn.put(table, key, value))?;
        }
        Ok(())
    }

    /// Garbage waiting for its epoch (for tests and monitoring).
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// w.run(|txn| txn.delete(t, b"k").map(drop))?;
    /// let _waiting = w.pending_garbage();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn pending_garbage(&self) -> usize {
        self.ctx.garbage.len()
    }

    /// Runs garbage collection now, outside any transaction.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// w.collect_garbage()?;
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn collect_garbage(&mut self) -> Result<()> {
        self.ctx.enter()?;
        self.ctx.leave();
        Ok(())
    }
}

//! The database handle and per-thread workers.
//!
//! A [`Database`] owns the catalog and the epoch advancer. Each thread that
//! runs transactions takes a [`Worker`]: its epoch slot, TID generator,
//! transaction buffers and garbage lists. Workers collect garbage between
//! transactions (Silo §4.8), so no helper thread frees memory.

use crate::catalog::{IndexId, IndexInfo, Table, TableId, TableOptions};
use crate::epoch::{Advancer, EpochSlot, Epochs};
use crate::error::{AbortReason, Error, Result};
use crate::gc::{self, Cleanup, Garbage, Retired};
use crate::index::Tree;
use crate::options::Options;
use crate::options::MAX_KEY_LEN;
use crate::snapshot::SnapshotTxn;
use crate::sync::{AtomicU64, Ordering};
use crate::tid::{self, Tid, TidGenerator, TidSource};
use crate::txn::sets::Sets;
use crate::txn::{CommitInfo, Txn};
use std::marker::PhantomData;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct Padded<T>(pub T);

/// State shared by the database handle and its workers.
pub(crate) struct Shared {
    pub options: Options,
    pub epochs: Arc<Epochs>,
    tables: RwLock<Vec<Arc<Table>>>,
    /// The shared TID counter of `TidSource::GlobalCounter`.
    pub global_tid: Padded<AtomicU64>,
    orphans: Mutex<Garbage>,
    has_orphans: AtomicBool,
    closed: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let orphans = self.orphans.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the last reference is gone: no worker or reader remains.
        // Records in the lists are not in any index (the indexes free theirs
        // when the tables drop right after this).
        unsafe { orphans.free_all() };
    }
}

/// Stops the advancer when the last `Database` clone is dropped.
struct Handle {
    shared: Arc<Shared>,
    _advancer: Advancer,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// An embedded epochdb database. Cheap to clone; the epoch advancer stops
/// when the last clone is dropped, after which workers return
/// [`Error::Closed`].
#[derive(Clone)]
pub struct Database {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("epoch", &self.epoch()).finish()
    }
}

impl Database {
    /// Opens an in-memory database.
    pub fn open(options: Options) -> Result<Database> {
        options.validate()?;
        let epochs = Arc::new(Epochs::new(options.snapshot_epochs));
        let advancer = Advancer::start(epochs.clone(), options.epoch_interval)?;
        let shared = Arc::new(Shared {
            options,
            epochs,
            tables: RwLock::new(Vec::new()),
            global_tid: Padded::default(),
            orphans: Mutex::new(Garbage::default()),
            has_orphans: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        Ok(Database { handle: Arc::new(Handle { shared, _advancer: advancer }) })
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Creates a table (and the tables of its secondary indexes, named
    /// `table.index`).
    pub fn create_table(&self, name: &str, options: TableOptions) -> Result<TableId> {
        let mut tables = self.shared().tables.write().unwrap_or_else(|e| e.into_inner());
        let taken = |n: &str| tables.iter().any(|t| t.name == n);
        if taken(name) {
            return Err(Error::TableExists(name.into()));
        }
        let index_names: Vec<String> = options.indexes.iter().map(|(i, _)| format!("{name}.{i}")).collect();
        if let Some(n) = index_names.iter().find(|n| taken(n)) {
            return Err(Error::TableExists(n.clone()));
        }
        let id = TableId(tables.len() as u32);
        let indexes: Vec<IndexInfo> = (options.indexes.into_iter().enumerate())
            .map(|(i, (name, extract))| IndexInfo { name, entries: TableId(id.0 + 1 + i as u32), extract })
            .collect();
        let index_tables: Vec<Arc<Table>> = (indexes.iter().zip(index_names))
            .map(|(i, name)| {
                Arc::new(Table { id: i.entries, name, tree: Tree::new(), schema: None, indexes: Vec::new() })
            })
            .collect();
        tables.push(Arc::new(Table { id, name: name.into(), tree: Tree::new(), schema: options.schema, indexes }));
        tables.extend(index_tables);
        Ok(id)
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Result<TableId> {
        let tables = self.shared().tables.read().unwrap_or_else(|e| e.into_inner());
        tables.iter().find(|t| t.name == name).map(|t| t.id).ok_or_else(|| Error::NoSuchTable(name.into()))
    }

    /// The secondary index `index` of `table`.
    pub fn index(&self, table: TableId, index: &str) -> Result<IndexId> {
        let tables = self.shared().tables.read().unwrap_or_else(|e| e.into_inner());
        let t = tables.get(table.0 as usize).ok_or(Error::UnknownTable(table))?;
        t.indexes
            .iter()
            .find(|i| i.name == index)
            .map(|i| IndexId { table, entries: i.entries })
            .ok_or_else(|| Error::NoSuchIndex { table: t.name.clone(), index: index.into() })
    }

    /// The schema of `table`, if it has one.
    pub fn schema(&self, table: TableId) -> Result<Option<crate::Schema>> {
        let tables = self.shared().tables.read().unwrap_or_else(|e| e.into_inner());
        Ok(tables.get(table.0 as usize).ok_or(Error::UnknownTable(table))?.schema.clone())
    }

    /// A handle for running transactions on this thread.
    pub fn worker(&self) -> Result<Worker> {
        let shared = self.shared().clone();
        let slot = shared.epochs.register();
        let global = shared.options.tid_source == TidSource::GlobalCounter;
        Ok(Worker {
            slot,
            tables: Vec::new(),
            tidgen: TidGenerator::default(),
            global_tid: global,
            garbage: Garbage::default(),
            retired: Vec::new(),
            cleanups: Vec::new(),
            sets: Sets::default(),
            scratch: Vec::new(),
            stats: WorkerStats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (Arc::as_ptr(&shared) as u64),
            shared,
            _not_sync: PhantomData,
        })
    }

    /// The global epoch `E`.
    pub fn epoch(&self) -> u64 {
        self.shared().epochs.current()
    }

    /// The snapshot epoch `SE` that new snapshot transactions read at.
    pub fn snapshot_epoch(&self) -> u64 {
        self.shared().epochs.snapshot()
    }

    pub fn options(&self) -> &Options {
        &self.shared().options
    }
}

/// Keys longer than `MAX_KEY_LEN` are a typed error everywhere.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge { len: key.len(), max: MAX_KEY_LEN });
    }
    Ok(())
}

/// Counters kept by each worker.
#[derive(Debug, Default, Clone)]
pub struct WorkerStats {
    pub commits: u64,
    pub aborts: [u64; 4],
    pub snapshots: u64,
    /// Objects freed by this worker's garbage collection.
    pub freed: u64,
}

impl WorkerStats {
    pub fn aborts_for(&self, reason: AbortReason) -> u64 {
        self.aborts[reason.index()]
    }

    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// A thread's handle for running transactions. `Send` but not `Sync`: one
/// thread uses it at a time.
pub struct Worker {
    pub(crate) shared: Arc<Shared>,
    slot: Arc<EpochSlot>,
    /// This worker's copy of the catalog; refreshed when it meets a newer id.
    pub(crate) tables: Vec<Arc<Table>>,
    pub(crate) tidgen: TidGenerator,
    pub(crate) global_tid: bool,
    pub(crate) garbage: Garbage,
    pub(crate) retired: Vec<Retired>,
    cleanups: Vec<Cleanup>,
    pub(crate) sets: Sets,
    /// Where reads copy values to; returned slices borrow it.
    pub(crate) scratch: Vec<u8>,
    pub(crate) stats: WorkerStats,
    rng: u64,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: the raw pointers a worker holds (sets, garbage) are owned by it or
// protected by its epoch slot, which it clears between transactions; no
// transaction can be in flight while the worker moves, because a `Txn`
// borrows the worker mutably.
unsafe impl Send for Worker {}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("stats", &self.stats).finish()
    }
}

impl Worker {
    /// Begins a read/write transaction.
    pub fn begin(&mut self) -> Result<Txn<'_>> {
        let (epoch, _) = self.enter()?;
        Ok(Txn::new(self, epoch))
    }

    /// Begins a read-only snapshot transaction (Silo §4.9): it reads the
    /// state as of the snapshot epoch and never aborts.
    pub fn snapshot(&mut self) -> Result<SnapshotTxn<'_>> {
        // Read at exactly the `se_w` that reclamation sees.
        let (_, se) = self.enter()?;
        self.stats.snapshots += 1;
        Ok(SnapshotTxn::new(self, se))
    }

    /// Runs `f` in a transaction and commits it, retrying aborts with
    /// bounded, randomized backoff, up to `Options::max_retries` times.
    /// An error returned by `f` aborts the transaction and is returned.
    pub fn run<T>(&mut self, f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.run_with_info(f).map(|(v, _)| v)
    }

    /// Like [`Worker::run`], also returning the commit's TID and epoch.
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
                Err(Error::Aborted(_)) if attempt < self.shared.options.max_retries => {
                    attempt += 1;
                    self.backoff(attempt);
                }
                other => return other,
            }
        }
    }

    /// Waits a random time that grows with `attempt`, capped.
    fn backoff(&mut self, attempt: u32) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let cap = 1u64 << attempt.min(10);
        for _ in 0..(self.rng % cap) {
            std::hint::spin_loop();
        }
        if attempt > 10 {
            std::thread::yield_now();
        }
    }

    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    pub(crate) fn table_index(&mut self, id: TableId) -> Result<usize> {
        let i = id.0 as usize;
        if i >= self.tables.len() {
            let tables = self.shared.tables.read().unwrap_or_else(|e| e.into_inner());
            self.tables = tables.clone();
        }
        if i < self.tables.len() {
            Ok(i)
        } else {
            Err(Error::UnknownTable(id))
        }
    }

    /// Marks this worker active; returns `(e_w, se_w)`.
    fn enter(&mut self) -> Result<(u64, u64)> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(self.shared.epochs.enter(&self.slot))
    }

    /// Ends a transaction: retires what it unlinked, collects garbage while
    /// still protected by its epoch, then goes quiescent.
    pub(crate) fn leave(&mut self) {
        let snapshot_bound = self.shared.epochs.snapshot_bound();
        self.garbage.due_cleanups(snapshot_bound, &mut self.cleanups);
        let mut cleanups = std::mem::take(&mut self.cleanups);
        for c in cleanups.drain(..) {
            // Adopted orphans may name tables this worker has not seen yet.
            let Ok(t) = self.table_index(TableId(c.table)) else {
                continue;
            };
            if let Some(rec) = gc::unhook(&self.tables[t].tree, &c, &mut self.retired) {
                self.retired.push(Retired::Record(rec));
            }
        }
        self.cleanups = cleanups;
        let epochs = &self.shared.epochs;
        if !self.retired.is_empty() {
            let e = epochs.current();
            self.garbage.retire_all(e, &mut self.retired);
        }
        if self.shared.has_orphans.load(Ordering::Relaxed) {
            if let Ok(mut o) = self.shared.orphans.try_lock() {
                o.merge_into(&mut self.garbage);
                self.shared.has_orphans.store(false, Ordering::Relaxed);
            }
        }
        // SAFETY: the bounds come from the epoch advancer.
        self.stats.freed += unsafe { self.garbage.collect(epochs.tree_bound(), snapshot_bound) } as u64;
        epochs.exit(&self.slot);
    }

    /// Reads `key` without a transaction: no read set, no validation, just
    /// the index lookup and a stable read (Silo §5.2's "Key-Value"
    /// baseline, for benchmarks). Copies the value into `out`; returns
    /// whether the key is present.
    pub fn kv_get(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        check_key(key)?;
        let t = self.table_index(table)?;
        self.enter()?;
        let present = match self.tables[t].tree.lookup(key).record {
            // SAFETY: found in the index within our epoch: live.
            Some(rec) => !tid::is_absent(unsafe { rec.as_ref() }.stable_read(out)),
            None => false,
        };
        self.leave();
        Ok(present)
    }

    /// Writes `key = value` without a transaction: the record is locked,
    /// overwritten in place and unlocked with a new TID. A missing key, or a
    /// value that does not fit the record, takes the transactional path.
    /// Not serializable with concurrent transactions on the same keys; for
    /// the benchmark's `kv` variant.
    pub fn kv_put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        let t = self.table_index(table)?;
        if value.len() > self.shared.options.max_value_len {
            return Err(Error::ValueTooLarge { len: value.len(), max: self.shared.options.max_value_len });
        }
        self.enter()?;
        let done = match self.tables[t].tree.lookup(key).record {
            Some(rec) => {
                // SAFETY: found in the index within our epoch: live.
                let r = unsafe { rec.as_ref() };
                let word = r.tid.lock();
                if tid::is_latest(word) && !tid::is_absent(word) && value.len() <= r.capacity() {
                    // As in Phase 1 of a commit: read E after taking the lock,
                    // so the new TID's epoch is at least the old one's.
                    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                    let epoch = self.shared.epochs.current();
                    let new = self.tidgen.generate(Tid::of_word(word), epoch, None);
                    r.write_value(value);
                    r.tid.unlock_to(new.raw() | tid::LATEST_BIT);
                    true
                } else {
                    r.tid.unlock_to(word);
                    false
                }
            }
            None => false,
        };
        self.leave();
        if !done {
            self.run(|txn| txn.put(table, key, value))?;
        }
        Ok(())
    }

    /// Garbage waiting for its epoch (for tests and monitoring).
    pub fn pending_garbage(&self) -> usize {
        self.garbage.len()
    }

    /// Runs garbage collection now, outside any transaction.
    pub fn collect_garbage(&mut self) -> Result<()> {
        self.enter()?;
        self.leave();
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.epochs.unregister(&self.slot);
        if !self.garbage.is_empty() {
            let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
            self.garbage.merge_into(&mut o);
            self.shared.has_orphans.store(true, Ordering::Relaxed);
        }
    }
}

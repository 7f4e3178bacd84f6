//! The engine trait every workload is written against, and its epochdb
//! implementation.
//!
//! The trait is object-safe so that one driver runs any engine: epochdb's
//! variants here, and later the durable engine, replication backups and the
//! NVM testbed engines. A workload's transaction is a closure over
//! [`Txn`]; the engine's [`Worker`] runs it to commit, retrying aborts.

use epochdb::{Database, Error, Options, TidSource};
use std::fmt;
use std::ops::Bound;

/// A table handle, as the engine numbered it.
pub type Table = u32;

/// Why a workload transaction did not commit.
#[derive(Debug)]
pub enum TxnError {
    /// A concurrency-control abort; the worker retries.
    Abort,
    /// The transaction asked to roll back (TPC-C's invalid item); counted,
    /// not retried.
    Rollback,
    /// Anything else: the run stops.
    Fatal(String),
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::Abort => write!(f, "aborted"),
            TxnError::Rollback => write!(f, "rolled back"),
            TxnError::Fatal(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for TxnError {}

impl From<Error> for TxnError {
    fn from(e: Error) -> TxnError {
        match e {
            Error::Aborted(_) => TxnError::Abort,
            other => TxnError::Fatal(other.to_string()),
        }
    }
}

pub type TxnResult<T = ()> = Result<T, TxnError>;

/// The operations a workload transaction performs.
pub trait Txn {
    /// Copies the value of `key` into `out`; false if absent.
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> TxnResult<bool>;
    /// Writes `key = value` (upsert).
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult;
    /// Inserts a new key; a present key is a fatal workload error.
    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult;
    /// Deletes `key`; false if it was absent.
    fn delete(&mut self, table: Table, key: &[u8]) -> TxnResult<bool>;
    /// Says that `keys` (each in its table) are about to be read, so an
    /// engine that can may overlap their lookups. A hint: no effect on
    /// results; engines without it ignore it.
    fn prefetch(&mut self, keys: &[(Table, &[u8])]) -> TxnResult {
        let _ = keys;
        Ok(())
    }
    /// Visits up to `limit` rows with keys in `[lo, hi)` (`hi = None`:
    /// unbounded), ascending or descending, until `visit` returns false.
    fn scan(
        &mut self,
        table: Table,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxnResult;
}

/// What a transaction promises about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnKind {
    ReadWrite,
    /// Read-only; an engine may run it on a snapshot.
    ReadOnly,
}

/// One thread's handle on an engine.
pub trait Worker {
    /// Runs `body` as one transaction until it commits, retrying aborts.
    /// Returns how many attempts aborted before the commit.
    fn run(&mut self, kind: TxnKind, body: &mut dyn FnMut(&mut dyn Txn) -> TxnResult) -> TxnResult<u32>;

    /// The epoch of the last transaction `run` committed (an upper bound
    /// is fine), for engines that log by epoch; 0 otherwise.
    fn last_commit_epoch(&self) -> u64 {
        0
    }
}

/// A column of a table whose values are rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column<'a> {
    pub name: &'a str,
    /// Its bytes; with `var`, the most it holds.
    pub size: usize,
    /// Variable-length: a 2-byte length, then that many bytes.
    pub var: bool,
}

impl Column<'_> {
    pub fn fixed(name: &str, size: usize) -> Column<'_> {
        Column { name, size, var: false }
    }
}

/// The engine's schema of a table with these columns.
pub fn schema_of(table: &str, columns: &[Column<'_>]) -> TxnResult<epochdb::Schema> {
    let column = |c: &Column<'_>| {
        let size = u16::try_from(c.size).map_err(|_| TxnError::Fatal(format!("{table}: a column over 64 KiB")))?;
        Ok(if c.var { epochdb::Column::var(c.name, size) } else { epochdb::Column::fixed(c.name, size) })
    };
    Ok(epochdb::Schema::new(columns.iter().map(column).collect::<TxnResult<_>>()?)?)
}

pub trait Engine: Sync {
    /// The name reported in results (`memsilo`, `kv`, ...).
    fn name(&self) -> &str;
    /// Creates (or on a recovered database, opens) a table. `columns` are
    /// its columns, if its values are rows.
    fn create_table(&self, name: &str, columns: &[Column<'_>]) -> TxnResult<Table>;
    fn worker(&self) -> TxnResult<Box<dyn Worker + '_>>;

    /// With durability on, the persistent epoch: transactions of epochs up
    /// to it are durable. `None` for an engine without durability.
    fn durable_epoch(&self) -> Option<u64> {
        None
    }

    /// Bytes of log written so far (the NVM testbed's engines count every
    /// byte they make durable: persisted cache lines and file writes).
    fn log_bytes(&self) -> u64 {
        0
    }

    /// Whether a checkpoint is being written now.
    fn checkpointing(&self) -> bool {
        false
    }
}

/// epochdb's benchmark variants (Silo §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Full transactions, decentralized TIDs.
    MemSilo,
    /// The bare index: single-key gets and puts, no transaction tracking.
    Kv,
    /// Full transactions with TIDs drawn from one shared counter.
    GlobalTid,
}

impl Variant {
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "memsilo" => Some(Variant::MemSilo),
            "kv" => Some(Variant::Kv),
            "global-tid" => Some(Variant::GlobalTid),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::MemSilo => "memsilo",
            Variant::Kv => "kv",
            Variant::GlobalTid => "global-tid",
        }
    }
}

/// epochdb behind the engine trait.
pub struct EpochDb {
    db: Database,
    variant: Variant,
    /// Run read-only transactions as snapshot transactions.
    pub snapshot_reads: bool,
}

impl EpochDb {
    pub fn open(variant: Variant, options: Options) -> TxnResult<EpochDb> {
        EpochDb::open_with_progress(variant, options, &|_| {})
    }

    /// [`EpochDb::open`], reporting recovery's progress.
    pub fn open_with_progress(
        variant: Variant,
        mut options: Options,
        progress: &(dyn Fn(epochdb::Progress) + Sync),
    ) -> TxnResult<EpochDb> {
        if variant == Variant::GlobalTid {
            options.tid_source = TidSource::GlobalCounter;
        }
        Ok(EpochDb { db: Database::open_with_progress(options, progress)?, variant, snapshot_reads: false })
    }

    /// The engine over a database opened elsewhere (a promoted backup, a
    /// standby).
    pub fn from_database(variant: Variant, db: Database) -> EpochDb {
        EpochDb { db, variant, snapshot_reads: false }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Waits until snapshot transactions see everything committed so far
    /// (snapshots trail the global epoch by `k` epochs, about a second by
    /// default), and begins one, so that writers keep old versions for
    /// snapshots from here on and the run's first snapshot transactions
    /// do not wait for that (`Worker::snapshot`). Run after loading,
    /// before snapshot reads.
    pub fn wait_for_snapshot_of_now(&self) -> TxnResult {
        self.db.wait_for_snapshot(self.db.epoch())?;
        let mut w = self.db.worker()?;
        w.snapshot()?;
        Ok(())
    }
}

impl Engine for EpochDb {
    fn name(&self) -> &str {
        self.variant.name()
    }

    fn create_table(&self, name: &str, columns: &[Column<'_>]) -> TxnResult<Table> {
        let mut options = epochdb::TableOptions::new();
        if !columns.is_empty() {
            options = options.schema(schema_of(name, columns)?);
        }
        Ok(self.db.create_table(name, options)?.index())
    }

    fn worker(&self) -> TxnResult<Box<dyn Worker + '_>> {
        let w = self.db.worker()?;
        Ok(match self.variant {
            Variant::Kv => Box::new(KvWorker(w, &self.db)),
            _ => Box::new(TxnWorker { w, db: &self.db, snapshot_reads: self.snapshot_reads, epoch: 0 }),
        })
    }

    fn durable_epoch(&self) -> Option<u64> {
        (self.db.options().durability != epochdb::Durability::Off).then(|| self.db.durable_epoch())
    }

    fn log_bytes(&self) -> u64 {
        self.db.log_bytes()
    }

    fn checkpointing(&self) -> bool {
        self.db.checkpoint_stats().in_progress
    }
}

struct TxnWorker<'d> {
    w: epochdb::Worker,
    db: &'d Database,
    snapshot_reads: bool,
    epoch: u64,
}

impl Worker for TxnWorker<'_> {
    fn run(&mut self, kind: TxnKind, body: &mut dyn FnMut(&mut dyn Txn) -> TxnResult) -> TxnResult<u32> {
        if kind == TxnKind::ReadOnly && self.snapshot_reads {
            let mut snap = SnapTxn(self.w.snapshot()?, self.db);
            // It reads only epochs below SE, which trails E by k epochs.
            self.epoch = 0;
            body(&mut snap)?;
            return Ok(0);
        }
        let mut aborts = 0;
        loop {
            let mut txn = self.w.begin()?;
            let outcome = match body(&mut DbTxn(&mut txn, self.db)) {
                Ok(()) => txn.commit().map(|info| self.epoch = info.release_epoch).map_err(TxnError::from),
                Err(e) => {
                    txn.abort();
                    Err(e)
                }
            };
            match outcome {
                Err(TxnError::Abort) => aborts += 1,
                other => return other.map(|()| aborts),
            }
        }
    }

    fn last_commit_epoch(&self) -> u64 {
        self.epoch
    }
}

/// Copies a value read into the caller's buffer; false if there was none.
fn copy_out(value: Option<&[u8]>, out: &mut Vec<u8>) -> bool {
    out.clear();
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
    value.is_some()
}

fn bounds<'a>(lo: &'a [u8], hi: Option<&'a [u8]>) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    (Bound::Included(lo), hi.map_or(Bound::Unbounded, Bound::Excluded))
}

/// A transaction, and its database (which turns table numbers into handles).
struct DbTxn<'t, 'w>(&'t mut epochdb::Txn<'w>, &'t Database);

impl Txn for DbTxn<'_, '_> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> TxnResult<bool> {
        Ok(copy_out(self.0.get(self.1.table_handle(table), key)?, out))
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        Ok(self.0.put(self.1.table_handle(table), key, value)?)
    }

    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        Ok(self.0.insert(self.1.table_handle(table), key, value)?)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> TxnResult<bool> {
        Ok(self.0.delete(self.1.table_handle(table), key)?)
    }

    fn prefetch(&mut self, keys: &[(Table, &[u8])]) -> TxnResult {
        Ok(self.0.prefetch(&handles(self.1, keys))?)
    }

    fn scan(
        &mut self,
        table: Table,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxnResult {
        self.0.scan_dir(self.1.table_handle(table), bounds(lo, hi), reverse, limit, visit)?;
        Ok(())
    }
}

/// `keys` with the workload's table numbers turned into the database's.
fn handles<'k>(db: &Database, keys: &[(Table, &'k [u8])]) -> Vec<(epochdb::TableId, &'k [u8])> {
    keys.iter().map(|&(t, k)| (db.table_handle(t), k)).collect()
}

struct SnapTxn<'w>(epochdb::SnapshotTxn<'w>, &'w Database);

fn read_only<T>() -> TxnResult<T> {
    Err(TxnError::Fatal("a read-only transaction tried to write".into()))
}

impl Txn for SnapTxn<'_> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> TxnResult<bool> {
        Ok(copy_out(self.0.get(self.1.table_handle(table), key)?, out))
    }

    fn put(&mut self, _: Table, _: &[u8], _: &[u8]) -> TxnResult {
        read_only()
    }

    fn insert(&mut self, _: Table, _: &[u8], _: &[u8]) -> TxnResult {
        read_only()
    }

    fn delete(&mut self, _: Table, _: &[u8]) -> TxnResult<bool> {
        read_only()
    }

    fn prefetch(&mut self, keys: &[(Table, &[u8])]) -> TxnResult {
        Ok(self.0.prefetch(&handles(self.1, keys))?)
    }

    fn scan(
        &mut self,
        table: Table,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxnResult {
        self.0.scan_dir(self.1.table_handle(table), bounds(lo, hi), reverse, limit, visit)?;
        Ok(())
    }
}

/// The `kv` variant: every operation goes straight to the index.
struct KvWorker<'d>(epochdb::Worker, &'d Database);

impl Worker for KvWorker<'_> {
    fn run(&mut self, _: TxnKind, body: &mut dyn FnMut(&mut dyn Txn) -> TxnResult) -> TxnResult<u32> {
        body(self)?;
        Ok(0)
    }

    /// `kv_put` does not report its epoch; `E` now bounds it from above.
    fn last_commit_epoch(&self) -> u64 {
        self.1.epoch()
    }
}

impl Txn for KvWorker<'_> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> TxnResult<bool> {
        Ok(self.0.kv_get(self.1.table_handle(table), key, out)?)
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        Ok(self.0.kv_put(self.1.table_handle(table), key, value)?)
    }

    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        Ok(self.0.kv_put(self.1.table_handle(table), key, value)?)
    }

    fn delete(&mut self, _: Table, _: &[u8]) -> TxnResult<bool> {
        Err(TxnError::Fatal("the kv variant has only gets and puts".into()))
    }

    fn scan(
        &mut self,
        _: Table,
        _: &[u8],
        _: Option<&[u8]>,
        _: usize,
        _: bool,
        _: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxnResult {
        Err(TxnError::Fatal("the kv variant has only gets and puts".into()))
    }
}

//! One partition of the testbed behind the workloads' engine trait.
//!
//! As in the study (§3), the database is partitioned and each partition
//! runs its transactions one at a time, with no other concurrency
//! control: that is serializable by construction. The benchmark gives
//! each thread its own partition (YCSB: a key range, TPC-C: one
//! warehouse), so every transaction is single-partition and the lock below
//! is never contended; it only makes "one at a time" a fact the compiler
//! checks.
//!
//! Transaction numbers stand in for epochs: `last_commit_epoch` is the
//! partition's commit count after the transaction, `durable_epoch` the
//! count of durable ones, so the driver measures latency to durability
//! for engines that commit in groups.

use crate::pmem::Stats;
use crate::store::{Footprint, Store};
use epochdb_workloads::engine::{Column, Engine, Table, Txn, TxnError, TxnKind, TxnResult, Worker};
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};

pub struct Partition {
    store: Mutex<Box<dyn Store>>,
    name: &'static str,
    stats: Arc<Stats>,
}

fn fatal(e: io::Error) -> TxnError {
    TxnError::Fatal(e.to_string())
}

impl Partition {
    pub fn new(store: Box<dyn Store>) -> Partition {
        Partition { name: store.name(), stats: store.stats(), store: Mutex::new(store) }
    }

    /// The store, for the executor's turn. A poisoned lock means an executor
    /// panicked mid-transaction; its undo state is gone, so stop.
    pub fn lock(&self) -> TxnResult<MutexGuard<'_, Box<dyn Store>>> {
        self.store.lock().map_err(|_| TxnError::Fatal("a partition's executor panicked".into()))
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn footprint(&self) -> TxnResult<Footprint> {
        Ok(self.lock()?.footprint())
    }

    /// Makes every committed transaction durable (ends a group early).
    pub fn flush(&self) -> TxnResult<()> {
        self.lock()?.flush().map_err(fatal)
    }

    pub fn committed(&self) -> TxnResult<u64> {
        Ok(self.lock()?.committed())
    }
}

impl Engine for Partition {
    fn name(&self) -> &str {
        self.name
    }

    fn create_table(&self, name: &str, columns: &[Column<'_>]) -> TxnResult<Table> {
        if let Some(c) = columns.iter().find(|c| c.var) {
            return Err(TxnError::Fatal(format!("{name}: column {:?} is variable-length; NVM rows are fixed", c.name)));
        }
        let sizes = columns.iter().map(|c| u16::try_from(c.size)).collect::<Result<Vec<_>, _>>();
        let sizes = sizes.map_err(|_| TxnError::Fatal(format!("{name}: a column over 64 KiB")))?;
        self.lock()?.create_table(name, &sizes).map_err(fatal)
    }

    fn worker(&self) -> TxnResult<Box<dyn Worker + '_>> {
        Ok(Box::new(Executor { partition: self, committed: 0, scratch: Vec::new() }))
    }

    fn durable_epoch(&self) -> Option<u64> {
        self.lock().ok().map(|s| s.durable())
    }

    fn log_bytes(&self) -> u64 {
        self.stats.nvm_bytes()
    }
}

/// A thread's turn at a partition.
struct Executor<'p> {
    partition: &'p Partition,
    committed: u64,
    /// Where `insert` reads a row to learn the key is absent.
    scratch: Vec<u8>,
}

impl Worker for Executor<'_> {
    fn run(&mut self, _: TxnKind, body: &mut dyn FnMut(&mut dyn Txn) -> TxnResult) -> TxnResult<u32> {
        let mut store = self.partition.lock()?;
        let outcome = body(&mut StoreTxn(&mut **store, &mut self.scratch));
        match outcome {
            Ok(()) => {
                store.commit().map_err(fatal)?;
                self.committed = store.committed();
                Ok(0)
            }
            Err(e) => {
                store.abort().map_err(fatal)?;
                Err(e)
            }
        }
    }

    fn last_commit_epoch(&self) -> u64 {
        self.committed
    }
}

struct StoreTxn<'s>(&'s mut dyn Store, &'s mut Vec<u8>);

impl Txn for StoreTxn<'_> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> TxnResult<bool> {
        self.0.get(table, key, out).map_err(fatal)
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        self.0.put(table, key, value).map_err(fatal)
    }

    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> TxnResult {
        if self.0.get(table, key, self.1).map_err(fatal)? {
            return Err(TxnError::Fatal(format!("table {table}: insert of a present key {key:?}")));
        }
        self.put(table, key, value)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> TxnResult<bool> {
        self.0.delete(table, key).map_err(fatal)
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
        let mut left = limit;
        if left == 0 {
            return Ok(());
        }
        self.0
            .scan(table, lo, hi, reverse, &mut |k, v| {
                left -= 1;
                visit(k, v) && left > 0
            })
            .map_err(fatal)
    }
}

/// Statistics persisted so far, summed over partitions.
pub fn nvm_lines(parts: &[Partition]) -> u64 {
    parts.iter().map(|p| p.stats.persisted_lines.load(Relaxed)).sum()
}

//! What the TPC-C crash and failover tests share: a child's client loop
//! that acknowledges what became durable, and the newest epoch of a
//! table. Included by path, beside `child.rs` (as `crate::child`).
#![allow(dead_code)]

use epochdb::{Database, TableId};
use epochdb_workloads::driver::Terminal;
use epochdb_workloads::engine::{Engine, EpochDb, TxnError};
use epochdb_workloads::tpcc::Tpcc;
use std::path::Path;

/// Runs the mix on one of `threads` threads forever, and appends every
/// new order and delivery to `dir/acks.<run>.<thread>` once the engine
/// reports its epoch durable (released). The client's number makes its
/// HISTORY keys unique across runs and keeps its home warehouse
/// `thread + 1`.
pub fn run_forever(engine: &EpochDb, tpcc: &Tpcc, dir: &Path, run: usize, thread: usize, threads: usize) {
    let mut acks = epochdb_testkit::child::Acks::open(dir, &format!("{run}.{thread}"));
    let mut worker = engine.worker().expect("worker");
    let mut client = tpcc.client(run * threads + thread, (run * 100 + thread) as u64);
    loop {
        match client.run_one(&mut *worker) {
            Ok(_) | Err(TxnError::Rollback) => {} // TPC-C's 1% deliberate rollbacks
            Err(e) => panic!("transaction: {e}"),
        }
        let epoch = worker.last_commit_epoch();
        if let Some((w, d, o)) = client.last.new_order {
            acks.push(epoch, format!("o {w} {d} {o}"));
        }
        for &(w, d, o) in &client.last.delivered {
            acks.push(epoch, format!("d {w} {d} {o}"));
        }
        acks.flush(engine.durable_epoch().expect("durable engine"));
    }
}

/// The largest epoch of a row of `table` (0 if empty).
pub fn max_epoch(db: &Database, table: TableId) -> epochdb::Result<u64> {
    db.worker()?.run(|txn| {
        let mut max = 0;
        txn.scan_versioned(table, .., false, usize::MAX, |_, _, tid| {
            max = tid.map_or(max, |t| max.max(t.epoch()));
            true
        })?;
        Ok(max)
    })
}

//! Systematic fault injection: a short durable run (logging,
//! checkpoints, log rotation, removal of old files) with the k-th file
//! operation of one kind failed, for every k up to that kind's count in a
//! clean run and every kind: an error on a write, on an fsync, on a
//! create/rename/truncate/remove; a short write; a full disk from then on.
//! Then the directory is reopened without faults. Every outcome must be
//! one of the defined ones:
//! - the open fails with a typed error;
//! - every transaction is acknowledged;
//! - the database enters its failed state: the transaction that met it and
//!   every later one return an error, none is acknowledged.
//!
//! and the reopened database must hold exactly the state after some
//! prefix of the transactions that includes every acknowledged one.

mod common;

use common::durable_options;
use epochdb::{Database, Durability, Error, Fault, Faults, Options, TableOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transactions per run.
const TXNS: u64 = 12;

/// How many transactions a run may go on for while its fault waits: a
/// clean run's count of operations depends on timing, and a busier run
/// may reach the same operation later.
const MAX_TXNS: u64 = 4 * TXNS;

fn options(dir: &Path, faults: Option<Arc<Faults>>) -> Options {
    let mut options =
        Options { epoch_interval: Duration::from_millis(3), ..durable_options(dir, Durability::LogAndCheckpoint) };
    options.checkpoint.interval = Duration::from_millis(10);
    options.log.rotate_epochs = 4;
    options.testing.faults = faults;
    options
}

/// The table after the first `n` transactions: transaction `i` puts key
/// `i`, and every third one also deletes key `i - 2`.
fn model(n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 0..n {
        m.insert(i.to_be_bytes().to_vec(), format!("value {i}").into_bytes());
        if i % 3 == 2 {
            m.remove((i - 2).to_be_bytes().as_slice());
        }
    }
    m
}

/// What a run did: transactions acknowledged and attempted, and the
/// error that ended it.
struct Outcome {
    acked: u64,
    attempted: u64,
    error: Option<Error>,
}

/// One durable run with `faults` in place: `TXNS` transactions, and more
/// up to `MAX_TXNS` while `until_fired` and the fault has not fired.
fn run(dir: &Path, faults: Arc<Faults>, until_fired: bool) -> Outcome {
    let mut out = Outcome { acked: 0, attempted: 0, error: None };
    let db = match Database::open(options(dir, Some(faults.clone()))) {
        Ok(db) => db,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let t = match db.create_table("t", TableOptions::new()) {
        Ok(t) => t,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let mut w = db.worker().expect("worker");
    for i in 0..MAX_TXNS {
        if i >= TXNS && (!until_fired || faults.fired()) {
            break;
        }
        out.attempted = i + 1;
        let r = w.run_durable(|txn| {
            txn.put(t, &i.to_be_bytes(), format!("value {i}").as_bytes())?;
            if i % 3 == 2 {
                txn.delete(t, &(i - 2).to_be_bytes())?;
            }
            Ok(())
        });
        match r {
            Ok(()) if out.error.is_none() => out.acked = i + 1,
            Ok(()) => panic!("transaction {i} was acknowledged after the failure {:?}", out.error),
            Err(e) => {
                assert!(matches!(e, Error::Durability(_)), "transaction {i}: not the failed state: {e}");
                out.error.get_or_insert(e);
            }
        }
    }
    out
}

/// Runs with `fault` at the `nth` operation of its kind and checks the
/// outcome and the reopened state. Returns whether the fault fired.
fn check(fault: Fault, nth: u64) -> bool {
    let dir = common::temp_dir(&format!("fault-{fault:?}-{nth}"));
    let faults = Faults::new();
    faults.inject(fault, nth);
    let started = Instant::now();
    let out = run(&dir, faults.clone(), true);
    assert!(started.elapsed() < Duration::from_secs(30), "{fault:?} #{nth}: the run hung");
    if !faults.fired() {
        assert!(
            out.error.is_none() && out.acked == out.attempted,
            "{fault:?} #{nth} did not fire, yet: {:?}",
            out.error
        );
    }
    let what = format!("{fault:?} #{nth} ({} of {} acknowledged, {:?})", out.acked, out.attempted, out.error);
    let db = Database::open(options(&dir, None)).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let got = match db.table("t") {
        Ok(t) => common::contents(&db, t),
        Err(_) => BTreeMap::new(), // the table's creation never became durable
    };
    let prefix = (out.acked..=out.attempted).find(|&n| got == model(n));
    assert!(
        prefix.is_some(),
        "{what}: the reopened table ({} rows) is no prefix that keeps every acknowledgement",
        got.len()
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    faults.fired()
}

#[test]
fn every_failed_file_operation_leads_to_a_defined_outcome_and_loses_nothing_acknowledged() {
    // How many operations of each kind a clean run makes.
    let counts: Vec<(Fault, u64)> = Fault::ALL
        .iter()
        .map(|&f| {
            let dir = common::temp_dir(&format!("fault-count-{f:?}"));
            let faults = Faults::new();
            let out = run(&dir, faults.clone(), false);
            assert!(out.error.is_none() && out.acked == TXNS, "a clean run: {:?}", out.error);
            let _ = std::fs::remove_dir_all(&dir);
            (f, faults.count_for(f))
        })
        .collect();
    let jobs: Vec<(Fault, u64)> = counts.iter().flat_map(|&(f, n)| (1..=n).map(move |k| (f, k))).collect();
    let next = AtomicUsize::new(0);
    let fired = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while let Some(&(fault, k)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if check(fault, k) {
                        fired.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let fired = fired.load(Ordering::Relaxed);
    eprintln!(
        "fault injection: {counts:?} operations in a clean run; {} runs, {fired} with the fault fired",
        jobs.len()
    );
    // A run goes on while its fault waits, so nearly all must fire.
    assert!(fired * 10 >= jobs.len() * 9, "only {fired} of {} faults fired", jobs.len());
}

//! TPC-C under kill -9. A child process (this test binary,
//! re-run with an environment variable) runs the standard TPC-C mix on two
//! threads with logging and frequent checkpoints on, and appends to a side
//! file every new order and every delivery it saw become durable. The
//! parent kills it with SIGKILL at a random moment, recovers the directory
//! and checks: consistency conditions 1–4 of clause 3.3.2 hold, every
//! acknowledged order is present, every acknowledged delivery's NEW-ORDER
//! row is gone and its order carries a carrier, and no row carries an epoch
//! above the recovered pepoch. The next child goes on from the recovered
//! directory.

use epochdb::{Durability, Options, TableId};
use epochdb_workloads::engine::{Engine, EpochDb, TxnKind, Variant};
use epochdb_workloads::keygen::Rng;
use epochdb_workloads::tpcc::Tpcc;
use epochdb_workloads::tpcc_rows::{order_key, Order, Schema};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "common/tpcc_child.rs"]
mod tpcc_child;

use epochdb_testkit::child;

const WAREHOUSES: u32 = 2;
const THREADS: usize = 2;
/// Silo's rows: variable-length strings, so rows change size under delta
/// logging and recovery (the failover test runs the specification's).
const SCHEMA: Schema = Schema::Silo;
const CHILD_DIR: &str = "EPOCHDB_TPCC_CRASH_DIR";
const CHILD_RUN: &str = "EPOCHDB_TPCC_CRASH_RUN";
/// `log` or `delta`: value or delta logging, with checkpoints.
const CHILD_MODE: &str = "EPOCHDB_TPCC_CRASH_MODE";

fn durability(mode: &str) -> Durability {
    if mode == "delta" {
        Durability::DeltaAndCheckpoint
    } else {
        Durability::LogAndCheckpoint
    }
}
/// Written once the loaded database is durable; a child that finds it
/// recovers instead of loading.
const LOADED: &str = "loaded";
const TABLES: [&str; 12] = [
    "warehouse",
    "district",
    "customer",
    "customer_name_idx",
    "history",
    "new_order",
    "oorder",
    "oorder_c_id_idx",
    "order_line",
    "item",
    "stock",
    "stock_data",
];

fn options(dir: &Path, durability: Durability) -> Options {
    Options {
        epoch_interval: Duration::from_millis(2),
        snapshot_epochs: 4,
        durability,
        data_dir: Some(dir.into()),
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_millis(100), ..Default::default() },
        log: epochdb::LogOptions { rotate_epochs: 16, ..Default::default() },
        ..Options::default()
    }
}

fn temp_dir(mode: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("epochdb-test-tpcc-crash-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The child's work; a no-op unless the parent started this process.
#[test]
fn child_process_entry_point() {
    let (Ok(dir), Ok(run)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_RUN)) else { return };
    let (dir, run) = (Path::new(&dir), run.parse::<usize>().expect("run"));
    let mode = durability(&std::env::var(CHILD_MODE).unwrap_or_default());
    let engine = EpochDb::open(Variant::MemSilo, options(dir, mode)).expect("child open");
    let tpcc = if dir.join(LOADED).exists() {
        Tpcc::attach(&engine, WAREHOUSES, SCHEMA).expect("attach")
    } else {
        let tpcc = Tpcc::load(&engine, WAREHOUSES, THREADS, SCHEMA).expect("load");
        let db = engine.database();
        db.worker().expect("worker").wait_durable(db.epoch()).expect("load durable");
        std::fs::write(dir.join(LOADED), b"").expect("marker");
        tpcc
    };
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (engine, tpcc) = (&engine, &tpcc);
            s.spawn(move || tpcc_child::run_forever(engine, tpcc, dir, run, thread, THREADS));
        }
    });
}

/// Acknowledged orders and deliveries, from complete lines of the side files.
fn read_acks(dir: &Path) -> (Vec<[u32; 3]>, Vec<[u32; 3]>) {
    let (mut orders, mut deliveries) = (Vec::new(), Vec::new());
    for line in child::ack_lines(dir) {
        let mut parts = line.split_whitespace();
        let kind = parts.next().expect("kind");
        let ids: Vec<u32> = parts.map(|p| p.parse().expect("id")).collect();
        let ids = [ids[0], ids[1], ids[2]];
        if kind == "o" {
            orders.push(ids);
        } else {
            deliveries.push(ids);
        }
    }
    (orders, deliveries)
}

/// Recovers `dir` and checks the invariants; returns how many
/// acknowledgements it checked.
fn check(dir: &Path, mode: Durability) -> usize {
    let engine = EpochDb::open(Variant::MemSilo, options(dir, mode)).expect("recover");
    let db = engine.database();
    let pepoch = db.recovery_report().expect("report").pepoch;
    if !dir.join(LOADED).exists() {
        return 0; // killed while loading: nothing was acknowledged
    }
    let tpcc = Tpcc::attach(&engine, WAREHOUSES, SCHEMA).expect("attach");
    let mut worker = engine.worker().expect("worker");
    let failures = tpcc.check(&mut *worker).expect("consistency check");
    assert!(failures.is_empty(), "TPC-C consistency after recovery: {failures:?}");

    let (orders, deliveries) = read_acks(dir);
    let t = tpcc.tables;
    let mut buf = Vec::new();
    worker
        .run(TxnKind::ReadWrite, &mut |txn| {
            for [w, d, o] in &orders {
                assert!(txn.get(t.order, &order_key(*w, *d, *o), &mut buf)?, "acknowledged order {w}/{d}/{o} lost");
            }
            for [w, d, o] in &deliveries {
                let k = order_key(*w, *d, *o);
                assert!(!txn.get(t.new_order, &k, &mut buf)?, "acknowledged delivery {w}/{d}/{o} undone");
                assert!(txn.get(t.order, &k, &mut buf)?, "delivered order {w}/{d}/{o} lost");
                let order = Order::decode_as(SCHEMA, &buf)?;
                assert_ne!(order.carrier_id, 0, "acknowledged delivery {w}/{d}/{o} lost its carrier");
            }
            Ok(())
        })
        .expect("acknowledgements");

    for name in TABLES {
        let table: TableId = db.table(name).expect("table");
        let max_epoch = tpcc_child::max_epoch(db, table).expect("scan");
        assert!(max_epoch <= pepoch, "{name}: a row from epoch {max_epoch} > pepoch {pepoch}");
    }
    orders.len() + deliveries.len()
}

#[test]
fn kill_9_during_tpcc_keeps_it_consistent_and_loses_nothing_acknowledged() {
    kill_9_loop("log");
}

#[test]
fn kill_9_during_tpcc_with_delta_logging_keeps_it_consistent_and_loses_nothing_acknowledged() {
    kill_9_loop("delta");
}

fn kill_9_loop(mode: &str) {
    let dir = temp_dir(mode);
    let mut rng = Rng::new(0x7CC);
    child::kill_and_check(
        &format!("tpcc {mode}"),
        6,
        |run| {
            let env =
                [(CHILD_DIR, dir.display().to_string()), (CHILD_RUN, run.to_string()), (CHILD_MODE, mode.to_string())];
            let mut child = child::spawn("child_process_entry_point", &env);
            // The first child loads; each child's life is counted from
            // there (a later one spends its first part recovering).
            let started = Instant::now();
            while !dir.join(LOADED).exists() {
                assert!(started.elapsed() < Duration::from_secs(120), "the first child did not load");
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("child {run} exited while loading: {status}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            child
        },
        || Duration::from_millis(300 + rng.below(1200)),
        |_| check(&dir, durability(mode)),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! Failover under kill -9. A child process (this test binary,
//! re-run with an environment variable) is a replication primary running
//! the TPC-C mix on two threads; this process runs its backup. The child
//! appends to side files every new order and delivery it saw released.
//! The parent kills the child with SIGKILL at a random moment, promotes
//! the backup in place (`Backup::promote`) and checks the promoted
//! database: TPC-C consistency conditions 1–4 hold, no row is from an
//! epoch the backup had not persisted, and under `sync` every
//! acknowledged order and delivery of every term so far is there. Under
//! `async` it reports how many were lost instead (the loss window).
//!
//! Each term's backup becomes the next term's primary: the next child
//! opens the promoted directory, and a new backup bootstraps from it (its
//! checkpoint and logs), so the loop also covers recovering a promoted
//! directory and bootstrapping under load.

use epochdb::{Backup, BackupOptions, Durability, Options, PrimaryOptions, Safety};
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
const CHILD_DIR: &str = "EPOCHDB_FAILOVER_DIR";
const CHILD_ROOT: &str = "EPOCHDB_FAILOVER_ROOT";
const CHILD_RUN: &str = "EPOCHDB_FAILOVER_RUN";
const CHILD_SAFETY: &str = "EPOCHDB_FAILOVER_SAFETY";
/// In the root: written once the first term's load is released.
const LOADED: &str = "loaded";

fn options(dir: &Path) -> Options {
    Options {
        epoch_interval: Duration::from_millis(2),
        snapshot_epochs: 4,
        durability: Durability::LogAndCheckpoint,
        data_dir: Some(dir.into()),
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_millis(200), ..Default::default() },
        log: epochdb::LogOptions { rotate_epochs: 16, ..Default::default() },
        ..Options::default()
    }
}

fn safety(name: &str) -> Safety {
    if name == "sync" {
        Safety::Sync
    } else {
        Safety::Async
    }
}

/// The child's work: a primary; a no-op unless the parent started it.
#[test]
fn child_process_entry_point() {
    let (Ok(dir), Ok(root), Ok(run)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_ROOT), std::env::var(CHILD_RUN))
    else {
        return;
    };
    let (dir, root, run) = (Path::new(&dir), Path::new(&root), run.parse::<usize>().expect("run"));
    let primary = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        safety: safety(&std::env::var(CHILD_SAFETY).unwrap_or_default()),
        // Long enough that the backup never leaves the in-sync set on this
        // busy machine: the test is of failover, not of that fallback.
        ack_timeout: Duration::from_secs(30),
        ..PrimaryOptions::default()
    };
    let options = Options { primary: Some(primary), ..options(dir) };
    let engine = EpochDb::open(Variant::MemSilo, options).expect("child open");
    let db = engine.database();
    let listen = db.replication_status().expect("a primary").listen;
    let tmp = root.join(format!("addr.{run}.tmp"));
    std::fs::write(&tmp, listen.to_string()).expect("address file");
    std::fs::rename(&tmp, root.join(format!("addr.{run}"))).expect("address file");
    let in_sync = || db.replication_status().is_some_and(|s| s.backups.iter().any(|b| b.in_sync));
    let tpcc = if root.join(LOADED).exists() {
        Tpcc::attach(&engine, WAREHOUSES, Schema::Spec).expect("attach")
    } else {
        let tpcc = Tpcc::load(&engine, WAREHOUSES, THREADS, Schema::Spec).expect("load");
        while !in_sync() {
            std::thread::sleep(Duration::from_millis(5));
        }
        db.worker().expect("worker").wait_durable(db.epoch()).expect("load released");
        std::fs::write(root.join(LOADED), b"").expect("marker");
        tpcc
    };
    while !in_sync() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(root.join(format!("ready.{run}")), b"").expect("marker");
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (engine, tpcc) = (&engine, &tpcc);
            s.spawn(move || tpcc_child::run_forever(engine, tpcc, root, run, thread, THREADS));
        }
    });
}

/// Waits for `path` while `child` lives.
fn wait_for(path: &Path, child: &mut std::process::Child, what: &str) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(180), "the child did not get {what}");
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the child exited before {what}: {status}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Checks the promoted database; returns the acknowledgements checked and
/// how many of them it lacks (0 is asserted under `sync`).
fn check(engine: &EpochDb, persisted: u64, root: &Path, sync: bool) -> (usize, usize) {
    let tpcc = Tpcc::attach(engine, WAREHOUSES, Schema::Spec).expect("attach");
    let mut worker = engine.worker().expect("worker");
    let failures = tpcc.check(&mut *worker).expect("consistency check");
    assert!(failures.is_empty(), "TPC-C consistency after failover: {failures:?}");
    let t = tpcc.tables;
    let (mut checked, mut lost) = (0, 0);
    let mut buf = Vec::new();
    worker
        .run(TxnKind::ReadWrite, &mut |txn| {
            (checked, lost) = (0, 0);
            for line in child::ack_lines(root) {
                let mut parts = line.split_whitespace();
                let kind = parts.next().expect("kind");
                let ids: Vec<u32> = parts.map(|p| p.parse().expect("id")).collect();
                let k = order_key(ids[0], ids[1], ids[2]);
                let present = if kind == "o" {
                    txn.get(t.order, &k, &mut buf)?
                } else {
                    !txn.get(t.new_order, &k, &mut buf)?
                        && txn.get(t.order, &k, &mut buf)?
                        && Order::decode_as(Schema::Spec, &buf)?.carrier_id != 0
                };
                assert!(present || !sync, "acknowledged {line} lost in the failover");
                checked += 1;
                lost += usize::from(!present);
            }
            Ok(())
        })
        .expect("acknowledgements");
    no_row_above(engine.database(), persisted);
    (checked, lost)
}

/// Asserts that no row of `db` is from an epoch above `persisted`.
fn no_row_above(db: &epochdb::Database, persisted: u64) {
    for index in 0.. {
        match tpcc_child::max_epoch(db, db.table_handle(index)) {
            Err(epochdb::Error::UnknownTable(_)) => break, // every table done
            max_epoch => {
                let max_epoch = max_epoch.expect("scan");
                assert!(
                    max_epoch <= persisted,
                    "table {index}: a row from epoch {max_epoch} > the persisted {persisted}"
                );
            }
        }
    }
}

#[test]
fn kill_9_of_a_sync_primary_then_promoting_its_backup_loses_nothing_acknowledged() {
    failover_loop("sync", 4);
}

#[test]
fn kill_9_of_an_async_primary_then_promoting_its_backup_reports_the_loss_window() {
    failover_loop("async", 2);
}

fn failover_loop(mode: &str, default_runs: u64) {
    let runs = std::env::var("EPOCHDB_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(default_runs);
    let root = std::env::temp_dir().join(format!("epochdb-test-failover-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let node = |n: u64| -> PathBuf { root.join(format!("node-{n}")) };
    let mut rng = Rng::new(0xFA11);
    let (mut checked, mut lost) = (0, 0);
    let began = Instant::now();
    for run in 1..=runs {
        let (pdir, bdir) = (node(run - 1), node(run));
        let env = [
            (CHILD_DIR, pdir.display().to_string()),
            (CHILD_ROOT, root.display().to_string()),
            (CHILD_RUN, run.to_string()),
            (CHILD_SAFETY, mode.to_string()),
        ];
        let mut primary = child::spawn("child_process_entry_point", &env);
        wait_for(&root.join(format!("addr.{run}")), &mut primary, "its address");
        let addr = std::fs::read_to_string(root.join(format!("addr.{run}"))).expect("address");
        let backup = Backup::start(BackupOptions { database: options(&bdir), ..BackupOptions::new(&bdir, addr) })
            .expect("start the backup");
        wait_for(&root.join(format!("ready.{run}")), &mut primary, "ready");
        let life = Duration::from_millis(300 + rng.below(1200));
        child::kill_after(primary, life, &format!("primary {run}"));

        let started = Instant::now();
        // The backup may still persist blocks that were in flight when the
        // primary died, until it reads the end of the connection: the
        // epoch the promotion kept is at least this one, and is the one
        // to check against.
        let sampled = backup.persisted_epoch();
        let view = backup.read_view();
        let db = backup.promote().expect("promote the backup");
        let promoted_in = started.elapsed();
        let persisted = db.promotion_kept().expect("a promotion is recorded");
        assert!(persisted >= sampled, "the promotion kept epochs <= {persisted}, but {sampled} were persisted");
        // A commit of the new term's first epoch would now be released.
        db.wait_durable(db.epoch()).expect("the new primary releases");
        let releasing_in = started.elapsed();
        let engine = EpochDb::from_database(Variant::MemSilo, db);
        (checked, lost) = check(&engine, persisted, &root, mode == "sync");
        eprintln!(
            "run {run}: primary killed after {life:?}; backup (read view {view}) promoted at epoch {persisted} in \
             {promoted_in:?}, releasing in {releasing_in:?}; {lost} of {checked} acknowledgements lost"
        );
        drop(engine);
        // Its directory recovers the same: what it received above
        // `persisted` is void.
        let reopened = epochdb::Database::open(options(&bdir)).expect("recover the promoted directory");
        no_row_above(&reopened, persisted);
        drop(reopened);
        std::fs::remove_dir_all(&pdir).expect("remove the old primary's directory");
    }
    eprintln!(
        "failover campaign {mode}: {runs} kills, {checked} acknowledgements checked, {lost} lost, {:.1} s",
        began.elapsed().as_secs_f64()
    );
    assert!(checked > 100, "the primaries acknowledged too little to mean anything: {checked}");
    let _ = std::fs::remove_dir_all(&root);
}

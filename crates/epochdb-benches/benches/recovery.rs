//! Recovery on its own, from the page cache:
//! - opening a data directory whose state is one checkpoint of 500k rows
//!   (100-byte values) and almost no log after it: mostly the checkpoint
//!   load, which builds each table's tree from sorted runs
//!   (`index/load.rs`);
//! - replaying a log of 100k inserts and 1M one-column updates, written
//!   with value logging and with delta logging (Gawain), opened read-only
//!   so that every iteration replays the same files. Throughput is in log
//!   bytes, the measure of "delta recovery no slower per GB
//!   than value recovery"; the time is the per-entry cost of decoding,
//!   sorting and merging (`durability/recovery/merge.rs`), which a delta log has
//!   more of per byte.
//!
//! `cargo bench -p epochdb-benches --bench recovery`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use epochdb::{CheckpointOptions, Column, Database, Durability, Options, Schema, TableOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ROWS: u64 = 500_000;
/// Rows of the logged table, and the updates after their inserts.
const LOGGED_ROWS: u64 = 100_000;
const UPDATES: u64 = 1_000_000;

fn options(dir: &Path, durability: Durability, checkpoint_interval: Duration) -> Options {
    let checkpoint = CheckpointOptions { interval: checkpoint_interval, ..Default::default() };
    Options { durability, data_dir: Some(dir.to_path_buf()), checkpoint, ..Options::default() }
}

/// A new directory for one of the bench's databases: created here (it
/// fails if the path exists), so removing it afterwards deletes only what
/// the bench wrote.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("epochdb-bench-{name}-{}", std::process::id()));
    std::fs::create_dir(&dir).expect("a new directory for the bench's database");
    dir
}

/// Loads the rows, then waits for a checkpoint that began after the load.
fn prepare_checkpoint(dir: &Path) {
    let db = Database::open(options(dir, Durability::LogAndCheckpoint, Duration::from_millis(200))).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        w.run(|txn| chunk.iter().try_for_each(|&i| txn.insert(t, &i.to_be_bytes(), &[7u8; 100]))).expect("load");
    }
    let after = db.checkpoint_stats().installed + 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.checkpoint_stats().installed <= after {
        assert!(Instant::now() < deadline, "no checkpoint within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A 100-byte row of four 8-byte counters and padding; updates change
/// the first counter only, so a delta log holds one 8-byte column each.
fn logged_table() -> TableOptions {
    let mut columns: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| Column::fixed(n, 8)).collect();
    columns.push(Column::fixed("pad", 68));
    TableOptions::new().schema(Schema::new(columns).expect("schema"))
}

fn row(a: u64, key: u64) -> [u8; 100] {
    let mut r = [7u8; 100];
    r[..8].copy_from_slice(&a.to_le_bytes());
    r[8..16].copy_from_slice(&key.to_le_bytes());
    r
}

/// Inserts the rows, then updates them in transactions of 10, with
/// `durability` and no checkpoint: the whole state is in the log.
fn prepare_log(dir: &Path, durability: Durability) {
    let db = Database::open(options(dir, durability, Duration::from_secs(86_400))).expect("open");
    let t = db.create_table("t", logged_table()).expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..LOGGED_ROWS).collect::<Vec<_>>().chunks(1000) {
        w.run(|txn| chunk.iter().try_for_each(|&k| txn.insert(t, &k.to_be_bytes(), &row(0, k)))).expect("load");
    }
    // Keys in a scattered order (a multiplier coprime with the row count).
    for n in (0..UPDATES).collect::<Vec<_>>().chunks(10) {
        w.run(|txn| {
            n.iter().try_for_each(|&i| {
                let k = i * 7_919 % LOGGED_ROWS;
                txn.put(t, &k.to_be_bytes(), &row(i + 1, k))
            })
        })
        .expect("update");
    }
}

fn recovery(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery");
    g.sample_size(10);

    let dir = fresh_dir("recovery");
    prepare_checkpoint(&dir);
    g.throughput(Throughput::Elements(ROWS));
    // No checkpoint starts while the bench reopens it (a day's interval).
    let o = options(&dir, Durability::LogAndCheckpoint, Duration::from_secs(86_400));
    g.bench_function("open a 500k-row checkpoint", |b| {
        b.iter(|| {
            let db = Database::open(o.clone()).expect("recover");
            assert_eq!(db.recovery_report().map(|r| r.records), Some(ROWS));
        })
    });
    std::fs::remove_dir_all(&dir).expect("remove the bench's data directory");

    for (name, durability) in [("value", Durability::Log), ("delta", Durability::Delta)] {
        let dir = fresh_dir(&format!("replay-{name}"));
        prepare_log(&dir, durability);
        let o = Options { read_only: true, ..options(&dir, durability, Duration::from_secs(86_400)) };
        // Throughput in log bytes: the measure is time per GB
        // (a delta log packs more entries into a byte).
        let db = Database::open(o.clone()).expect("recover");
        let report = db.recovery_report().expect("a recovery report");
        g.throughput(Throughput::Bytes(report.log_bytes + report.checkpoint_bytes));
        drop(db);
        g.bench_function(format!("replay a {name} log (100k inserts, 1M one-column updates)"), |b| {
            b.iter(|| {
                let db = Database::open(o.clone()).expect("recover");
                assert_eq!(db.recovery_report().map(|r| r.records), Some(LOGGED_ROWS));
            })
        });
        std::fs::remove_dir_all(&dir).expect("remove the bench's data directory");
    }
    g.finish();
}

criterion_group!(benches, recovery);
criterion_main!(benches);

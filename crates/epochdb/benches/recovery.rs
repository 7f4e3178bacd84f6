//! Recovery on its own: opening a data directory whose state is one
//! checkpoint of 500k rows (100-byte values) and almost no log after it,
//! from the page cache. Most of it is the checkpoint load, which builds
//! each table's tree from sorted runs (`index/load.rs`).
//! `cargo bench -p epochdb --bench recovery`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use epochdb::{Database, Durability, Options, TableOptions};
use std::path::Path;
use std::time::{Duration, Instant};

const ROWS: u64 = 500_000;

fn options(dir: &Path, checkpoint_interval: Duration) -> Options {
    Options {
        durability: Durability::LogAndCheckpoint,
        data_dir: Some(dir.to_path_buf()),
        checkpoint_interval,
        ..Options::default()
    }
}

/// Loads the rows, then waits for a checkpoint that began after the load.
fn prepare(dir: &Path) {
    let db = Database::open(options(dir, Duration::from_millis(200))).expect("open");
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

fn recovery(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("epochdb-bench-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    prepare(&dir);
    let mut g = c.benchmark_group("recovery");
    g.throughput(Throughput::Elements(ROWS));
    g.sample_size(20);
    // No checkpoint starts while the bench reopens it (a day's interval).
    let o = options(&dir, Duration::from_secs(86_400));
    g.bench_function("open a 500k-row checkpoint", |b| {
        b.iter(|| {
            let db = Database::open(o.clone()).expect("recover");
            assert_eq!(db.recovery_report().map(|r| r.records), Some(ROWS));
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, recovery);
criterion_main!(benches);

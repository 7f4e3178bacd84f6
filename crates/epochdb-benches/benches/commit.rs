//! The commit path: read-only, read-modify-write, and ten-key
//! read-modify-write transactions on a loaded table, and one transaction
//! that updates 40 000 keys (each write looks for an earlier write of
//! its row) or inserts 40 000 it first found missing (each insert updates
//! the node-set entries of its leaf): these show whether that work stays
//! constant in the sets' sizes. Then the ten-key read-modify-write again
//! with value logging: the worker's share of logging (encoding the
//! record into its log buffer) on top of the same commit.
//! `cargo bench -p epochdb-benches --bench commit`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use epochdb::{Database, Durability, Options, TableId, TableOptions, Worker};
use std::hint::black_box;

const KEYS: u64 = 100_000;

/// A database with `KEYS` rows of 100 bytes, its table and a worker.
fn loaded(options: Options) -> (Database, TableId, Worker) {
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        w.run(|txn| chunk.iter().try_for_each(|&i| txn.insert(t, &i.to_be_bytes(), &[7u8; 100]))).expect("load");
    }
    (db, t, w)
}

/// Random keys of the loaded table (xorshift).
fn keys() -> impl FnMut() -> [u8; 8] {
    let mut x = 88172645463325252u64;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % KEYS).to_be_bytes()
    }
}

/// Ten read-modify-writes of random keys in one transaction.
fn rmw10(w: &mut Worker, t: TableId, next: &mut impl FnMut() -> [u8; 8]) {
    w.run(|txn| {
        for _ in 0..10 {
            let k = next();
            let mut v = txn.get(t, &k)?.map(<[u8]>::to_vec).unwrap_or_default();
            v[0] = v[0].wrapping_add(1);
            txn.put(t, &k, &v)?;
        }
        Ok(())
    })
    .expect("txn")
}

fn commit(c: &mut Criterion) {
    let (_db, t, mut w) = loaded(Options::default());
    let mut next = keys();
    let mut g = c.benchmark_group("commit");
    g.throughput(Throughput::Elements(1));
    g.bench_function("read-only (1 get)", |b| {
        b.iter(|| w.run(|txn| Ok(black_box(txn.get(t, &next())?.is_some()))).expect("txn"))
    });
    g.bench_function("read-modify-write (1 key)", |b| {
        b.iter(|| {
            w.run(|txn| {
                let k = next();
                let mut v = txn.get(t, &k)?.map(<[u8]>::to_vec).unwrap_or_default();
                v[0] = v[0].wrapping_add(1);
                txn.put(t, &k, &v)
            })
            .expect("txn")
        })
    });
    g.bench_function("read-modify-write (10 keys)", |b| b.iter(|| rmw10(&mut w, t, &mut next)));
    g.finish();
    let mut g = c.benchmark_group("large transaction");
    g.sample_size(10);
    g.throughput(Throughput::Elements(40_000));
    g.bench_function("40 000 updates", |b| {
        b.iter(|| w.run(|txn| (0..40_000u64).try_for_each(|i| txn.put(t, &i.to_be_bytes(), &[8u8; 100]))).expect("txn"))
    });
    // Keys above the loaded ones, new in every iteration: each lookup
    // misses (a node-set entry), and each insert updates its leaf's.
    let mut next_new = KEYS;
    g.bench_function("40 000 inserts after failed gets", |b| {
        b.iter(|| {
            let from = next_new;
            next_new += 40_000;
            w.run(|txn| {
                (from..from + 40_000).try_for_each(|i| match txn.get(t, &i.to_be_bytes())? {
                    Some(_) => Ok(()),
                    None => txn.put(t, &i.to_be_bytes(), &[9u8; 100]),
                })
            })
            .expect("txn")
        })
    });
    g.finish();
}

/// The same ten-key transaction with value logging, the log in a
/// temporary directory. The worker only encodes its record into a log
/// buffer; the logger thread writes and syncs on its own.
fn logged(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("epochdb-bench-commit-{}", std::process::id()));
    // A directory of its own, new, so the removal below deletes only what
    // this database wrote.
    std::fs::create_dir(&dir).expect("a new directory for the bench's database");
    let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    let (db, t, mut w) = loaded(options);
    let mut next = keys();
    let mut g = c.benchmark_group("commit with value logging");
    g.throughput(Throughput::Elements(1));
    g.bench_function("read-modify-write (10 keys)", |b| b.iter(|| rmw10(&mut w, t, &mut next)));
    g.finish();
    drop(w);
    drop(db);
    std::fs::remove_dir_all(&dir).expect("remove the bench's data directory");
}

criterion_group!(benches, commit, logged);
criterion_main!(benches);

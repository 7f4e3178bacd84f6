//! The commit path: read-only, read-modify-write, and ten-key
//! read-modify-write transactions on a loaded table, and one transaction
//! that updates 40 000 keys (each write looks for an earlier write of
//! its row) or inserts 40 000 it first found missing (each insert updates
//! the node-set entries of its leaf): these show whether that work stays
//! constant in the sets' sizes.
//! `cargo bench -p epochdb --bench commit`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use epochdb::{Database, Options, TableOptions};
use std::hint::black_box;

const KEYS: u64 = 100_000;

fn commit(c: &mut Criterion) {
    let db = Database::open(Options::default()).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        w.run(|txn| chunk.iter().try_for_each(|&i| txn.insert(t, &i.to_be_bytes(), &[7u8; 100]))).expect("load");
    }
    let mut x = 88172645463325252u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % KEYS).to_be_bytes()
    };
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
    g.bench_function("read-modify-write (10 keys)", |b| {
        b.iter(|| {
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
        })
    });
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

criterion_group!(benches, commit);
criterion_main!(benches);

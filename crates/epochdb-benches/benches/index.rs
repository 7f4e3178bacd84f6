//! The index on its own: point lookups, inserts and short scans, through
//! the non-transactional `kv_*` calls (no read or write sets), and reads
//! in transactions: 16 gets with and without `Txn::prefetch`, a
//! read-only scan. `cargo bench -p epochdb-benches --bench index`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use epochdb::{Database, Options, TableId, TableOptions, Worker};
use std::hint::black_box;

const KEYS: u64 = 1_000_000;

fn loaded() -> (Database, TableId, Worker) {
    let db = Database::open(Options::default()).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        w.run(|txn| chunk.iter().try_for_each(|&i| txn.insert(t, &i.to_be_bytes(), &[7u8; 100]))).expect("load");
    }
    (db, t, w)
}

/// A cheap, reproducible key sequence.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn index(c: &mut Criterion) {
    let (_db, t, mut w) = loaded();
    let mut g = c.benchmark_group("index");
    g.throughput(Throughput::Elements(1));
    let mut x = 88172645463325252u64;
    let mut out = Vec::new();
    g.bench_function("get (1M keys, uniform)", |b| {
        b.iter(|| black_box(w.kv_get(t, &(next(&mut x) % KEYS).to_be_bytes(), &mut out).expect("get")))
    });
    let mut fresh = KEYS;
    g.bench_function("insert (ascending new keys)", |b| {
        b.iter(|| {
            fresh += 1;
            w.kv_put(t, &fresh.to_be_bytes(), &[1u8; 100]).expect("put")
        })
    });
    // 16 independent reads in one transaction, one lookup after another
    // or announced first (`Txn::prefetch`: their descents overlap, and
    // each read starts from the record found).
    g.throughput(Throughput::Elements(16));
    for prefetch in [false, true] {
        let name = if prefetch { "16 gets after Txn::prefetch" } else { "16 gets" };
        g.bench_function(name, |b| {
            b.iter_batched(
                || std::array::from_fn::<_, 16, _>(|_| (next(&mut x) % KEYS).to_be_bytes()),
                |keys| {
                    w.run(|txn| {
                        if prefetch {
                            let ahead: Vec<(TableId, &[u8])> = keys.iter().map(|k| (t, &k[..])).collect();
                            txn.prefetch(&ahead)?;
                        }
                        keys.iter().try_for_each(|k| {
                            txn.get(t, k).map(|v| {
                                black_box(v);
                            })
                        })
                    })
                    .expect("gets")
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.throughput(Throughput::Elements(100));
    g.bench_function("scan 100 keys (read-only transaction)", |b| {
        b.iter_batched(
            || (next(&mut x) % (KEYS - 200)).to_be_bytes(),
            |start| {
                w.run(|txn| {
                    txn.scan(t, (std::ops::Bound::Included(&start[..]), std::ops::Bound::Unbounded), 100, |_, v| {
                        black_box(v);
                        true
                    })
                })
                .expect("scan")
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, index);
criterion_main!(benches);

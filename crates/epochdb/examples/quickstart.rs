//! Embeds epochdb, loads a table, and runs a YCSB-like mix (80% reads, 20%
//! read-modify-writes of 100-byte values, uniform keys) on every core for a
//! few seconds, printing committed transactions per second.
//!
//! `cargo run --release -p epochdb --example quickstart -- [threads] [seconds] [keys]`
//!
//! The full benchmark driver (YCSB, TPC-C, JSON reports) is `epochdb bench`.

use epochdb::{Database, Options, TableOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn main() -> epochdb::Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().expect("numeric argument"));
    let threads = args.next().unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64));
    let seconds = args.next().unwrap_or(5);
    let keys = args.next().unwrap_or(1_000_000);

    let db = Database::open(Options::default())?;
    let table = db.create_table("usertable", TableOptions::new())?;
    let key = |i: u64| i.to_be_bytes();

    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                let mut w = db.worker().expect("worker");
                let value = [b'x'; 100];
                for chunk in (t..keys).step_by(threads as usize).collect::<Vec<_>>().chunks(1000) {
                    w.run(|txn| chunk.iter().try_for_each(|&i| txn.insert(table, &key(i), &value))).expect("load");
                }
            });
        }
    });
    println!("loaded {keys} keys with {threads} threads in {:.2?}", started.elapsed());

    let stop = AtomicBool::new(false);
    let committed: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, stop) = (&db, &stop);
                s.spawn(move || {
                    let mut w = db.worker().expect("worker");
                    let mut rng = 0x2545_F491_4F6C_DD1D ^ (t + 1);
                    let mut value = [0u8; 100];
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let k = key(rng % keys);
                        let rmw = rng % 5 == 0;
                        w.run(|txn| {
                            let v = txn.get(table, &k)?.map(|v| v[0]).unwrap_or(0);
                            if rmw {
                                value[0] = v.wrapping_add(1);
                                txn.put(table, &k, &value)?;
                            }
                            Ok(())
                        })
                        .expect("transaction");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    println!(
        "{committed} transactions in {seconds} s on {threads} threads: {:.0} txn/s",
        committed as f64 / seconds as f64
    );
    Ok(())
}

//! Transfers between accounts on every core, each a serializable
//! transaction; the total never changes. `cargo run --example bank_transfer`.

use epochdb::{Database, Options, TableOptions};

const ACCOUNTS: u64 = 100;
const START: u64 = 1_000;

fn balance(v: Option<&[u8]>) -> u64 {
    v.and_then(|v| v.try_into().ok()).map_or(0, u64::from_le_bytes)
}

fn main() -> epochdb::Result<()> {
    let db = Database::open(Options::default())?;
    let accounts = db.create_table("accounts", TableOptions::new())?;
    let mut w = db.worker()?;
    w.run(|txn| (0..ACCOUNTS).try_for_each(|a| txn.insert(accounts, &a.to_be_bytes(), &START.to_le_bytes())))?;

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let db = &db;
            s.spawn(move || -> epochdb::Result<()> {
                let mut w = db.worker()?; // one worker per thread
                let mut x = t + 1;
                for _ in 0..20_000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let (from, to, amount) = ((x >> 33) % ACCOUNTS, (x >> 17) % ACCOUNTS, x % 10);
                    // `run` retries the closure until it commits.
                    w.run(|txn| {
                        let a = balance(txn.get(accounts, &from.to_be_bytes())?);
                        if a < amount || from == to {
                            return Ok(());
                        }
                        let b = balance(txn.get(accounts, &to.to_be_bytes())?);
                        txn.put(accounts, &from.to_be_bytes(), &(a - amount).to_le_bytes())?;
                        txn.put(accounts, &to.to_be_bytes(), &(b + amount).to_le_bytes())
                    })?;
                }
                Ok(())
            });
        }
    });

    let total = w.run(|txn| {
        let mut total = 0;
        for row in txn.range(accounts, ..) {
            total += balance(Some(&row?.1));
        }
        Ok(total)
    })?;
    println!("{threads} threads moved money between {ACCOUNTS} accounts; total {total}");
    assert_eq!(total, ACCOUNTS * START, "serializable transfers keep the total");
    let stats = w.stats();
    println!("this worker: {} commits, {} aborts", stats.commits, stats.total_aborts());
    Ok(())
}

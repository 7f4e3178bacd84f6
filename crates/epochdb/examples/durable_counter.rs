//! A counter that survives restarts: each run opens the data directory,
//! recovers, adds one, and waits until the increment is durable before
//! saying so. Run it twice: `cargo run --example durable_counter -- DIR`.

use epochdb::{Database, Durability, Options, TableOptions};

fn main() -> epochdb::Result<()> {
    let dir = std::env::args().nth(1).map_or_else(|| std::env::temp_dir().join("epochdb-counter"), Into::into);
    let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    let db = Database::open(options)?;
    if let Some(r) = db.recovery_report() {
        println!("recovered {} records to epoch {} in {:.3} s", r.records, r.pepoch, r.seconds);
    }
    // Opening a table that exists (recovered) returns it.
    let counters = db.create_table("counters", TableOptions::new())?;
    let mut w = db.worker()?;
    // `run_durable` returns once the transaction's epoch is on disk: a
    // kill -9 after this line cannot lose the increment.
    let n = w.run_durable(|txn| {
        let n = txn.get(counters, b"runs")?.and_then(|v| v.try_into().ok()).map_or(0, u64::from_le_bytes) + 1;
        txn.put(counters, b"runs", &n.to_le_bytes())?;
        Ok(n)
    })?;
    println!("run {n} of the counter in {} (durable)", dir.display());
    Ok(())
}

//! A long report over consistent data while writers keep going: a snapshot
//! transaction reads the database as of a recent epoch, never aborts and
//! never blocks them. `cargo run --example snapshot_report`.

use epochdb::{Database, Options, TableOptions};
use std::sync::atomic::{AtomicBool, Ordering};

fn main() -> epochdb::Result<()> {
    let db = Database::open(Options::default())?;
    let stock = db.create_table("stock", TableOptions::new())?;
    let mut w = db.worker()?;
    // Every item starts at 100; the writer moves units between items, so
    // the total is always 100 per item.
    let items = 1_000u32;
    let start =
        w.run_with_info(|txn| (0..items).try_for_each(|i| txn.insert(stock, &i.to_be_bytes(), &100u64.to_le_bytes())))?;
    // Snapshots see what committed a few epochs ago: wait until they see the load.
    db.wait_for_snapshot(start.1.epoch)?;

    let stop = AtomicBool::new(false);
    let reports = std::thread::scope(|s| -> epochdb::Result<u32> {
        let writer = s.spawn(|| -> epochdb::Result<()> {
            let mut w = db.worker()?;
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let (a, b) = (i % items, (i * 7 + 1) % items);
                i = i.wrapping_add(1);
                w.run(|txn| {
                    let get = |v: Option<&[u8]>| v.and_then(|v| v.try_into().ok()).map_or(0, u64::from_le_bytes);
                    let x = get(txn.get(stock, &a.to_be_bytes())?);
                    if x == 0 || a == b {
                        return Ok(());
                    }
                    let y = get(txn.get(stock, &b.to_be_bytes())?);
                    txn.put(stock, &a.to_be_bytes(), &(x - 1).to_le_bytes())?;
                    txn.put(stock, &b.to_be_bytes(), &(y + 1).to_le_bytes())
                })?;
            }
            Ok(())
        });
        let mut reports = 0;
        for _ in 0..15 {
            let mut snap = w.snapshot()?;
            let (mut total, mut rows) = (0u64, 0u32);
            snap.scan(stock, .., usize::MAX, |_, v| {
                total += u64::from_le_bytes(v.try_into().unwrap_or_default());
                rows += 1;
                true
            })?;
            println!("snapshot at epoch {}: {rows} items, {total} units", snap.snapshot_epoch());
            assert_eq!(total, 100 * u64::from(items), "a snapshot is consistent");
            reports += 1;
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap_or(Ok(()))?;
        Ok(reports)
    })?;
    println!("{reports} consistent reports while the writer ran");
    Ok(())
}

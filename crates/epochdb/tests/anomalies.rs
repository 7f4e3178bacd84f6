//! Anomalies that weaker isolation levels let through, each run
//! concurrently many times; serializability must never show them.

mod common;

use common::{fast_db, u64_of, Rng};
use epochdb::{Error, TableId, TableOptions, Worker};
use std::ops::Bound::{Excluded, Included};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

/// Write skew (Berenson et al.): two doctors on call; each may go off call
/// if the other is on call. Under snapshot isolation both can leave. Both
/// transactions read, then meet at a barrier, then write and commit, so
/// they always overlap.
fn doctors(by_scan: bool) {
    let db = fast_db();
    let t = db.create_table("doctors", TableOptions::new()).expect("table");
    let barrier = Barrier::new(2);
    let names: [&[u8]; 2] = [b"doc/alice", b"doc/bob"];
    let on_call = |w: &mut Worker| {
        w.run(|txn| {
            let mut n = 0;
            txn.scan(t, (Included(&b"doc/"[..]), Excluded(&b"doc0"[..])), usize::MAX, |_, v| {
                n += (v == b"on") as u32;
                true
            })?;
            Ok(n)
        })
        .expect("count")
    };
    let mut admin = db.worker().expect("worker");
    for round in 0..300 {
        admin.run(|txn| names.iter().try_for_each(|n| txn.put(t, n, b"on"))).expect("reset");
        std::thread::scope(|s| {
            for me in 0..2 {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    let mut w = db.worker().expect("worker");
                    let mut first = true;
                    w.run(|txn| {
                        let count = if by_scan {
                            let mut n = 0;
                            txn.scan(t, (Included(&b"doc/"[..]), Excluded(&b"doc0"[..])), usize::MAX, |_, v| {
                                n += (v == b"on") as u32;
                                true
                            })?;
                            n
                        } else {
                            let mut n = 0;
                            for name in names {
                                n += (txn.get(t, name)? == Some(&b"on"[..])) as u32;
                            }
                            n
                        };
                        if std::mem::take(&mut first) {
                            barrier.wait();
                        }
                        if count >= 2 {
                            txn.put(t, names[me], b"off")?;
                        }
                        Ok(())
                    })
                    .expect("doctor");
                });
            }
        });
        assert!(on_call(&mut admin) >= 1, "round {round}: nobody is on call (write skew)");
    }
}

#[test]
fn write_skew_on_two_doctors() {
    doctors(false);
}

#[test]
fn write_skew_on_two_doctors_found_by_a_scan() {
    doctors(true);
}

/// The read-only transaction anomaly (Fekete, O'Neil, O'Neil 2004): a
/// receipt transaction reads the current batch and adds a receipt to it; a
/// closer moves to the next batch; a report reads the current batch x and
/// totals batch x - 1. Under snapshot isolation a report can total a closed
/// batch that later changes. Here every report must equal the batch's final
/// total, for serializable and for snapshot reports alike.
#[test]
fn read_only_transaction_anomaly() {
    let db = fast_db();
    let control = db.create_table("control", TableOptions::new()).expect("table");
    let receipts = db.create_table("receipts", TableOptions::new()).expect("table");
    let mut admin = db.worker().expect("worker");
    admin.run(|txn| txn.put(control, b"batch", &1u64.to_le_bytes())).expect("init");
    let stop = AtomicBool::new(false);
    let reports: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
    let next_id = AtomicU64::new(0);

    fn batch_range(b: u64) -> (Vec<u8>, Vec<u8>) {
        (format!("{b:08}/").into_bytes(), format!("{b:08}0").into_bytes())
    }
    /// A report as a snapshot transaction: (batch x - 1, its total).
    fn snapshot_report(w: &mut Worker, control: TableId, receipts: TableId) -> Option<(u64, u64)> {
        let mut snap = w.snapshot().expect("snapshot");
        let x = snap.get(control, b"batch").expect("get").map(u64_of)?;
        let (lo, hi) = batch_range(x - 1);
        let mut sum = 0;
        snap.scan(receipts, (Included(&lo[..]), Excluded(&hi[..])), usize::MAX, |_, v| {
            sum += u64_of(v);
            true
        })
        .expect("scan");
        Some((x - 1, sum))
    }

    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop, next_id) = (&db, &stop, &next_id);
            s.spawn(move || {
                let mut w = db.worker().expect("worker");
                let mut rng = Rng(5 + th);
                while !stop.load(Ordering::Relaxed) {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    let amount = 1 + rng.below(100);
                    w.run(|txn| {
                        let x = u64_of(txn.get(control, b"batch")?.ok_or(Error::user("no batch"))?);
                        txn.insert(receipts, format!("{x:08}/{id:012}").as_bytes(), &amount.to_le_bytes())
                    })
                    .expect("receipt");
                }
            });
        }
        let (db_c, stop_c) = (&db, &stop);
        s.spawn(move || {
            let mut w = db_c.worker().expect("worker");
            for _ in 0..200 {
                w.run(|txn| {
                    let x = u64_of(txn.get(control, b"batch")?.ok_or(Error::user("no batch"))?);
                    txn.put(control, b"batch", &(x + 1).to_le_bytes())
                })
                .expect("close");
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            stop_c.store(true, Ordering::Relaxed);
        });
        let (db_r, stop_r, reports_r) = (&db, &stop, &reports);
        s.spawn(move || {
            let mut w = db_r.worker().expect("worker");
            let mut mine = Vec::new();
            let mut snapshot = false;
            while !stop_r.load(Ordering::Relaxed) {
                snapshot = !snapshot;
                let report = if snapshot {
                    // Before the first snapshot epoch the snapshot is empty.
                    let Some(r) = snapshot_report(&mut w, control, receipts) else { continue };
                    r
                } else {
                    read_report(&mut w, control, receipts)
                };
                mine.push(report);
            }
            reports_r.lock().expect("reports").extend(mine);
        });
    });

    fn read_report(w: &mut Worker, control: TableId, receipts: TableId) -> (u64, u64) {
        w.run(|txn| {
            let x = u64_of(txn.get(control, b"batch")?.ok_or(Error::user("no batch"))?);
            let (lo, hi) = batch_range(x - 1);
            let mut sum = 0;
            txn.scan(receipts, (Included(&lo[..]), Excluded(&hi[..])), usize::MAX, |_, v| {
                sum += u64_of(v);
                true
            })?;
            Ok((x - 1, sum))
        })
        .expect("report")
    }

    let reports = reports.into_inner().expect("reports");
    assert!(reports.len() > 10, "too few reports: {}", reports.len());
    for (batch, reported) in reports {
        if batch == 0 {
            continue;
        }
        let (_, final_total) = {
            let (lo, hi) = batch_range(batch);
            let sum = admin
                .run(|txn| {
                    let mut sum = 0;
                    txn.scan(receipts, (Included(&lo[..]), Excluded(&hi[..])), usize::MAX, |_, v| {
                        sum += u64_of(v);
                        true
                    })?;
                    Ok(sum)
                })
                .expect("final");
            (batch, sum)
        };
        assert_eq!(reported, final_total, "batch {batch} changed after it was reported");
    }
}

//! The bank invariant: money moves between accounts, accounts are opened
//! (split off) and closed (merged away), and every auditor, serializable or
//! snapshot, always counts the same total.

mod common;

use common::{fast_db, u64_of, wait_for_snapshot, Rng};
use epochdb::{Error, TableOptions};
use std::sync::atomic::{AtomicBool, Ordering};

const ACCOUNTS: u64 = 64;
const START: u64 = 1000;
const TOTAL: u64 = ACCOUNTS * START;

fn account(i: u64) -> Vec<u8> {
    format!("acct{i:06}").into_bytes()
}

#[test]
fn transfers_opens_and_closes_keep_the_total() {
    let db = fast_db();
    let t = db.create_table("accounts", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let (_, load) = w
        .run_with_info(|txn| {
            for i in 0..ACCOUNTS {
                txn.insert(t, &account(i), &START.to_le_bytes())?;
            }
            Ok(())
        })
        .expect("load");
    wait_for_snapshot(&db, load.epoch);
    let stop = AtomicBool::new(false);
    let (audits, snapshot_audits) = std::thread::scope(|s| {
        let tellers: Vec<_> = (0..3u64)
            .map(|th| {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.worker().expect("worker");
                    let mut rng = Rng(77 + th);
                    for n in 0..60_000u64 {
                        let a = rng.below(ACCOUNTS * 2);
                        let b = rng.below(ACCOUNTS * 2);
                        let op = rng.below(10);
                        w.run(|txn| {
                            let Some(va) = txn.get(t, &account(a))?.map(u64_of) else {
                                return Ok(());
                            };
                            match op {
                                // Close a: its money goes to b.
                                0 if a != b => {
                                    let Some(vb) = txn.get(t, &account(b))?.map(u64_of) else {
                                        return Ok(());
                                    };
                                    txn.delete(t, &account(a))?;
                                    txn.put(t, &account(b), &(va + vb).to_le_bytes())
                                }
                                // Open b with half of a.
                                1 => match txn.insert(t, &account(b), &(va / 2).to_le_bytes()) {
                                    Ok(()) => txn.put(t, &account(a), &(va - va / 2).to_le_bytes()),
                                    Err(Error::KeyExists) => Ok(()),
                                    Err(e) => Err(e),
                                },
                                // Transfer from a to b.
                                _ if a != b => {
                                    let Some(vb) = txn.get(t, &account(b))?.map(u64_of) else {
                                        return Ok(());
                                    };
                                    let amount = (n % 7).min(va);
                                    txn.put(t, &account(a), &(va - amount).to_le_bytes())?;
                                    txn.put(t, &account(b), &(vb + amount).to_le_bytes())
                                }
                                _ => Ok(()),
                            }
                        })
                        .expect("teller");
                    }
                })
            })
            .collect();
        let auditor = s.spawn(|| {
            let mut w = db.worker().expect("worker");
            let mut audits = 0;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(audit(&mut w, t), TOTAL, "a serializable audit saw money appear or vanish");
                audits += 1;
            }
            audits
        });
        let snapshot_auditor = s.spawn(|| {
            let mut w = db.worker().expect("worker");
            let mut audits = 0;
            while !stop.load(Ordering::Relaxed) {
                let mut snap = w.snapshot().expect("snapshot");
                let mut sum = 0;
                let reverse = audits % 2 == 1;
                let visit = |_: &[u8], v: &[u8]| {
                    sum += u64_of(v);
                    true
                };
                if reverse {
                    snap.scan_rev(t, .., usize::MAX, visit).expect("scan");
                } else {
                    snap.scan(t, .., usize::MAX, visit).expect("scan");
                }
                assert_eq!(sum, TOTAL, "snapshot at epoch {} is inconsistent", snap.snapshot_epoch());
                audits += 1;
            }
            audits
        });
        for teller in tellers {
            teller.join().expect("teller");
        }
        stop.store(true, Ordering::Relaxed);
        (auditor.join().expect("auditor"), snapshot_auditor.join().expect("snapshot auditor"))
    });
    // Printed so the figure in notes can be rerun: `-- --nocapture`.
    eprintln!("serializable audits {audits}, snapshot audits {snapshot_audits}");
    assert!(audits > 0 && snapshot_audits > 0);
    assert_eq!(audit(&mut w, t), TOTAL);
}

/// The total of all balances, read by a serializable transaction.
fn audit(w: &mut epochdb::Worker, t: epochdb::TableId) -> u64 {
    w.run(|txn| {
        let mut sum = 0;
        txn.scan(t, .., usize::MAX, |_, v| {
            sum += u64_of(v);
            true
        })?;
        Ok(sum)
    })
    .expect("audit")
}

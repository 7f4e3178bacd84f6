//! Committers keep overwritten versions only while snapshot transactions
//! run (`epoch::Keeping`). Snapshots that begin after a quiet stretch, while
//! transfers keep overwriting every account, still count the same total.

mod common;

use common::{fast_db, u64_of, Rng};
use epochdb::TableOptions;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 64;
const START: u64 = 1_000;
const TOTAL: u64 = ACCOUNTS * START;

#[test]
fn snapshots_after_quiet_stretches_stay_consistent() {
    // 1 ms epochs, k = 4: keeping stops 40 epochs after the last snapshot.
    let db = fast_db();
    let t = db.create_table("accounts", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| (0..ACCOUNTS).try_for_each(|i| txn.insert(t, &i.to_be_bytes(), &START.to_le_bytes()))).expect("load");
    let stop = AtomicBool::new(false);
    let audits = std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.worker().expect("worker");
                let mut rng = Rng(11 + th);
                while !stop.load(Ordering::Relaxed) {
                    let (from, to) = (rng.next() % ACCOUNTS, rng.next() % ACCOUNTS);
                    let amount = rng.next() % 10;
                    w.run(|txn| {
                        let a = u64_of(txn.get(t, &from.to_be_bytes())?.expect("account"));
                        txn.put(t, &from.to_be_bytes(), &(a - amount.min(a)).to_le_bytes())?;
                        let b = u64_of(txn.get(t, &to.to_be_bytes())?.expect("account"));
                        txn.put(t, &to.to_be_bytes(), &(b + amount.min(a)).to_le_bytes())
                    })
                    .expect("transfer");
                }
            });
        }
        let mut w = db.worker().expect("worker");
        let mut audits = 0;
        let mut wrong = None;
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until && wrong.is_none() {
            let mut snap = w.snapshot().expect("snapshot");
            if audits % 4 == 1 {
                // Held past a quiet stretch: keeping must stay on for it.
                std::thread::sleep(Duration::from_millis(60));
            }
            let mut sum = 0;
            snap.scan(t, .., usize::MAX, |_, v| {
                sum += u64_of(v);
                true
            })
            .expect("scan");
            if sum != TOTAL {
                wrong = Some((snap.snapshot_epoch(), sum));
            }
            drop(snap);
            audits += 1;
            // Every other audit after a quiet stretch: keeping off, then on
            // again while every account is being overwritten.
            if audits % 2 == 0 {
                std::thread::sleep(Duration::from_millis(60));
            }
        }
        // Stopped before asserting: a panic here would wait for the tellers.
        stop.store(true, Ordering::Relaxed);
        (audits, wrong)
    });
    assert_eq!(audits.1, None, "a snapshot (epoch, total) was inconsistent");
    assert!(audits.0 >= 10, "only {} audits", audits.0);
}

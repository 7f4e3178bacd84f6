//! Regression tests for issue #17's library defects, each named by what a
//! user lost: a truncated log accepted below pepoch (#4), snapshots blind
//! after a reopen (#5), and another set of log directories opening the
//! wrong database (#6).

mod common;

use common::{contents, durable_options, temp_dir};
use epochdb::{Database, Durability, Options, TableOptions};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes `n` rows `k0000..` durably (one transaction each) and returns them.
fn write_rows(db: &Database, from: u32, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let mut model = BTreeMap::new();
    for i in from..from + n {
        let (k, v) = (format!("k{i:04}").into_bytes(), format!("value {i}").repeat(20).into_bytes());
        w.run_durable(|txn| txn.put(t, &k, &v)).expect("put");
        model.insert(k, v);
    }
    model
}

/// Offsets of the blocks of a log file (each starts at a multiple of 4096).
fn block_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 4096;
    let mut v = Vec::new();
    while at + 32 <= bytes.len() && &bytes[at..at + 4] == b"EBLK" {
        v.push(at);
        at += 32 + u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
        at = at.next_multiple_of(4096);
    }
    v
}

/// #4: a crash cannot tear a block at or below pepoch, so a cut-short
/// block there is corruption, not a torn tail to drop silently.
#[test]
fn a_truncated_block_below_pepoch_is_corruption_not_a_torn_tail() {
    let dir = temp_dir("safety-truncated");
    let options = || Options { log_rotate_epochs: u64::MAX / 2, ..durable_options(&dir, Durability::Log) };
    let model = {
        let db = Database::open(options()).expect("open");
        write_rows(&db, 0, 200)
    };
    // A clean close made every block durable: the last one is below pepoch.
    let log = dir.join("log/data.log");
    let mut bytes = std::fs::read(&log).expect("read");
    let last = *block_offsets(&bytes).last().expect("a block");
    bytes.truncate(last + 40);
    std::fs::write(&log, &bytes).expect("truncate");
    match Database::open(options()) {
        Ok(db) => {
            let got = contents(&db, db.table("t").expect("t"));
            panic!("opened with {} of {} rows: {:?}", got.len(), model.len(), db.recovery_report());
        }
        Err(e) => assert!(e.to_string().contains("corrupt"), "{e}"),
    }
}

/// #5: recovered records keep their logged TIDs, so the first snapshot
/// epoch after open must lie above every recovered epoch.
#[test]
fn a_snapshot_right_after_reopening_sees_everything() {
    let dir = temp_dir("safety-snapshot");
    let options = || Options { snapshot_epochs: 25, ..durable_options(&dir, Durability::Log) };
    let mut model = BTreeMap::new();
    for round in 0..5u32 {
        let db = Database::open(options()).expect("open");
        model.extend(write_rows(&db, round * 20, 20));
        drop(db);
        let db = Database::open(options()).expect("reopen");
        let t = db.table("t").expect("t");
        let mut w = db.worker().expect("worker");
        let mut snap = w.snapshot().expect("snapshot");
        let mut seen = 0;
        snap.scan(t, .., usize::MAX, |_, _| {
            seen += 1;
            true
        })
        .expect("scan");
        assert_eq!(seen, model.len(), "round {round}: the snapshot saw {seen} of {} rows", model.len());
    }
}

/// #6: a database written with two log directories, reopened with the
/// default ones, must not open empty (and lose what is written next).
#[test]
fn reopening_with_other_log_directories_does_not_open_another_database() {
    let dir = temp_dir("safety-logdirs");
    let logs = [dir.join("disk-a"), dir.join("disk-b")];
    let data = dir.join("data");
    let two = || Options { log_dirs: logs.to_vec(), ..durable_options(&data, Durability::Log) };
    let model = {
        let db = Database::open(two()).expect("open");
        write_rows(&db, 0, 100)
    };
    // The default log directories: the manifest says where the log is.
    match Database::open(durable_options(&data, Durability::Log)) {
        Ok(db) => {
            let got = contents(&db, db.table("t").expect("the table is there"));
            assert!(got == model, "the default log directories opened {} of {} rows", got.len(), model.len());
        }
        Err(e) => assert!(e.to_string().contains("disk-a"), "{e}"),
    }
    check_rows(&data, two(), &model);
}

/// Reopens with `options` and compares table `t` with `model`.
fn check_rows(_dir: &Path, options: Options, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Database::open(options).expect("reopen");
    let got = contents(&db, db.table("t").expect("t"));
    assert!(&got == model, "reopened with {} of {} rows", got.len(), model.len());
}

//! A data directory an older build wrote still opens: `fixtures/v5-delta`
//! is format version 5 (log records of fixed-width fields), written by
//! b01a888's `epochdb bench ycsb --keys 50 --columns 4 --duration 0.001
//! --threads 1 --durability delta` (50 inserted rows of four 100-byte
//! columns, then 41 delta updates of one column), its log file cut after
//! the last block. The expected rows' hash was computed apart from
//! epochdb, by applying the log's records in a script.

mod common;

use epochdb::{Database, Durability, Options};
use std::path::Path;

/// FNV-1a over every key and value in key order.
fn hash_rows(db: &Database) -> (usize, u64) {
    let table = db.table("usertable").expect("the YCSB table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| {
        let (mut rows, mut h) = (0, 0xcbf2_9ce4_8422_2325u64);
        txn.scan(table, .., usize::MAX, |k, v| {
            assert_eq!(v.len(), 400, "a row of four 100-byte columns");
            for &b in k.iter().chain(v) {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
            rows += 1;
            true
        })?;
        Ok((rows, h))
    })
    .expect("scan")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for e in std::fs::read_dir(from).expect("fixture") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

#[test]
fn a_version_5_directory_recovers_and_takes_new_writes() {
    let dir = common::temp_dir("v5");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v5-delta"), &dir);
    let options = || Options { durability: Durability::Delta, data_dir: Some(dir.clone()), ..Options::default() };
    const WANT: (usize, u64) = (50, 0xcf69_3fef_2c1f_cd26);

    let db = Database::open(options()).expect("open a version-5 directory");
    assert_eq!(hash_rows(&db), WANT, "the rows the old log's values and deltas make");
    // New writes go to a log of varint records beside the old one.
    let table = db.table("usertable").expect("table");
    let mut w = db.worker().expect("worker");
    let mut row = vec![0u8; 400];
    w.run_durable(|txn| {
        let key = 0u64.to_be_bytes();
        row.copy_from_slice(txn.get(table, &key)?.expect("row 0"));
        row[100..200].fill(7); // one column: a delta
        txn.put(table, &key, &row)?;
        txn.put(table, b"new", &[9; 400])
    })
    .expect("write");
    drop(w);
    let after = hash_rows(&db);
    drop(db);

    let db = Database::open(options()).expect("reopen: old and new records");
    assert_eq!(hash_rows(&db), after);
    assert_eq!(after.0, 51);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

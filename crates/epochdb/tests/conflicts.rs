//! Each abort reason, produced deterministically with two workers on one
//! thread, and the one-shot conflicts Silo's protocol must catch.

mod common;

use common::fast_db;
use epochdb::{AbortReason, Error, TableOptions};
use std::ops::Bound::{Excluded, Included};

fn aborted(r: epochdb::Result<epochdb::CommitInfo>) -> AbortReason {
    match r {
        Err(Error::Aborted(reason)) => reason,
        other => panic!("expected an abort, got {other:?}"),
    }
}

#[test]
fn a_changed_read_fails_read_validation() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut a, mut b) = (db.worker().expect("w"), db.worker().expect("w"));
    a.run(|txn| txn.put(t, b"x", b"0")).expect("load");
    let mut t1 = a.begin().expect("begin");
    assert_eq!(t1.get(t, b"x").expect("get"), Some(&b"0"[..]));
    t1.put(t, b"y", b"1").expect("put");
    b.run(|txn| txn.put(t, b"x", b"2")).expect("concurrent write");
    assert_eq!(aborted(t1.commit()), AbortReason::ReadValidation);
    assert_eq!(a.stats().aborts_for(AbortReason::ReadValidation), 1);
}

#[test]
fn an_insert_into_a_scanned_range_fails_node_validation() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut a, mut b) = (db.worker().expect("w"), db.worker().expect("w"));
    a.run(|txn| txn.put(t, b"a", b"").and_then(|_| txn.put(t, b"z", b""))).expect("load");
    let mut t1 = a.begin().expect("begin");
    let n = t1.scan(t, (Included(&b"b"[..]), Excluded(&b"y"[..])), usize::MAX, |_, _| true).expect("scan");
    assert_eq!(n, 0);
    t1.put(t, b"z", b"saw none").expect("put");
    b.run(|txn| txn.insert(t, b"m", b"phantom")).expect("insert");
    assert_eq!(aborted(t1.commit()), AbortReason::NodeValidation);
}

#[test]
fn a_failed_lookup_is_protected_against_a_later_insert() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut a, mut b) = (db.worker().expect("w"), db.worker().expect("w"));
    let mut t1 = a.begin().expect("begin");
    assert_eq!(t1.get(t, b"k").expect("get"), None);
    t1.put(t, b"other", b"1").expect("put");
    b.run(|txn| txn.insert(t, b"k", b"now here")).expect("insert");
    assert_eq!(aborted(t1.commit()), AbortReason::NodeValidation);
}

#[test]
fn own_inserts_do_not_abort_own_scans() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut a = db.worker().expect("w");
    // Enough inserts into the scanned range to split its leaf several times.
    let mut t1 = a.begin().expect("begin");
    assert_eq!(t1.scan(t, .., usize::MAX, |_, _| true).expect("scan"), 0);
    for i in 0..100u32 {
        t1.insert(t, format!("k{i:03}").as_bytes(), b"v").expect("insert");
    }
    assert_eq!(t1.scan(t, .., usize::MAX, |_, _| true).expect("scan"), 100);
    t1.commit().expect("own inserts keep the node set valid");
}

#[test]
fn an_insert_after_someone_else_changed_the_leaf_is_an_insert_conflict() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut a, mut b) = (db.worker().expect("w"), db.worker().expect("w"));
    let mut t1 = a.begin().expect("begin");
    assert_eq!(t1.get(t, b"k1").expect("get"), None);
    b.run(|txn| txn.insert(t, b"k2", b"x")).expect("insert");
    let e = t1.insert(t, b"k3", b"y").expect_err("doomed");
    assert!(matches!(e, Error::Aborted(AbortReason::InsertConflict)));
    // A doomed transaction keeps failing, then aborts.
    assert!(matches!(t1.get(t, b"k1"), Err(Error::Aborted(AbortReason::InsertConflict))));
    assert_eq!(aborted(t1.commit()), AbortReason::InsertConflict);
    // Its placeholder is gone.
    assert_eq!(a.run(|txn| txn.scan(t, .., usize::MAX, |_, _| true)).expect("scan"), 1);
}

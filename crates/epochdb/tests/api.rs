//! The embedded API: operations, read-your-writes, scans, secondary indexes,
//! snapshots, and a typed error for every misuse.

mod common;

use common::{fast_db, wait_for_snapshot};
use epochdb::{Column, Database, Error, Options, Schema, TableId, TableOptions, MAX_KEY_LEN};
use std::ops::Bound::{Excluded, Included, Unbounded};

fn keys_in(worker: &mut epochdb::Worker, t: TableId, reverse: bool, limit: usize) -> Vec<Vec<u8>> {
    worker
        .run(|txn| {
            let mut out = Vec::new();
            let visit = |k: &[u8], _: &[u8]| {
                out.push(k.to_vec());
                true
            };
            if reverse {
                txn.scan_rev(t, .., limit, visit)?;
            } else {
                txn.scan(t, .., limit, visit)?;
            }
            Ok(out)
        })
        .expect("scan")
}

#[test]
fn put_get_insert_delete_and_read_your_writes() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| {
        assert_eq!(txn.get(t, b"a")?, None);
        txn.put(t, b"a", b"1")?;
        assert_eq!(txn.get(t, b"a")?, Some(&b"1"[..]));
        txn.put(t, b"a", b"22")?;
        assert_eq!(txn.get(t, b"a")?, Some(&b"22"[..]));
        assert!(matches!(txn.insert(t, b"a", b"x"), Err(Error::KeyExists)));
        txn.insert(t, b"b", b"2")?;
        assert!(txn.delete(t, b"b")?);
        assert_eq!(txn.get(t, b"b")?, None);
        assert!(!txn.delete(t, b"b")?);
        Ok(())
    })
    .expect("txn");
    w.run(|txn| {
        assert_eq!(txn.get(t, b"a")?, Some(&b"22"[..]));
        assert_eq!(txn.get(t, b"b")?, None);
        // A deleted key can be inserted again.
        txn.insert(t, b"b", b"3")?;
        assert!(matches!(txn.insert(t, b"a", b"x"), Err(Error::KeyExists)));
        Ok(())
    })
    .expect("txn");
    assert_eq!(w.run(|txn| Ok(txn.get(t, b"b")?.map(<[u8]>::to_vec))).expect("get"), Some(b"3".to_vec()));
}

/// `prefetch` changes no result: present, missing and own keys read the
/// same after it, in a transaction and in a snapshot.
#[test]
fn prefetch_is_only_a_hint() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let u = db.create_table("u", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let keys: Vec<Vec<u8>> = (0..500u32).map(|i| format!("key-{i:05}").into_bytes()).collect();
    let (_, loaded) = w
        .run_with_info(|txn| {
            for k in keys.iter().step_by(2) {
                txn.put(t, k, k)?;
            }
            txn.put(u, b"only-in-u", b"u")
        })
        .expect("load");
    w.run(|txn| {
        txn.put(t, b"key-00001", b"mine")?;
        txn.delete(t, b"key-00002")?;
        let ahead: Vec<(TableId, &[u8])> = keys.iter().map(|k| (t, &k[..])).chain([(u, &b"only-in-u"[..])]).collect();
        txn.prefetch(&ahead)?;
        assert_eq!(txn.get(t, b"key-00001")?, Some(&b"mine"[..]));
        assert_eq!(txn.get(t, b"key-00002")?, None);
        for (i, k) in keys.iter().enumerate().skip(3) {
            assert_eq!(txn.get(t, k)?.map(<[u8]>::to_vec), (i % 2 == 0).then(|| k.clone()), "{i}");
        }
        assert_eq!(txn.get(u, b"only-in-u")?, Some(&b"u"[..]));
        Ok(())
    })
    .expect("reads");
    wait_for_snapshot(&db, loaded.epoch);
    let mut snap = w.snapshot().expect("snapshot");
    snap.prefetch(&[(t, b"key-00004"), (t, b"key-00005")]).expect("prefetch");
    assert_eq!(snap.get(t, b"key-00004").expect("get"), Some(&b"key-00004"[..]));
    assert_eq!(snap.get(t, b"key-00005").expect("get"), None);
}

/// A read after `prefetch` starts from the record the prefetch found; one
/// replaced (a value that outgrew it), deleted or updated by a commit in
/// between is read as it is now, in any order, and the transaction still
/// validates what it read.
#[test]
fn prefetched_records_changed_before_the_read() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut w, mut other) = (db.worker().expect("worker"), db.worker().expect("worker"));
    w.run(|txn| {
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            txn.put(t, k, b"old")?;
        }
        Ok(())
    })
    .expect("load");
    let big = vec![7u8; 4096];
    let mut txn = w.begin().expect("begin");
    txn.prefetch(&[(t, b"a"), (t, b"b"), (t, b"c"), (t, b"c"), (t, b"d"), (t, b"missing")]).expect("prefetch");
    other
        .run(|o| {
            o.put(t, b"a", &big)?; // outgrows its record: a new one replaces it
            o.delete(t, b"b")?;
            o.put(t, b"c", b"new")?;
            o.insert(t, b"missing", b"here")
        })
        .expect("changes");
    assert_eq!(txn.get(t, b"c").expect("get"), Some(&b"new"[..]));
    assert_eq!(txn.get(t, b"a").expect("get"), Some(&big[..]));
    assert_eq!(txn.get(t, b"b").expect("get"), None);
    assert_eq!(txn.get(t, b"c").expect("get"), Some(&b"new"[..]));
    assert_eq!(txn.get(t, b"missing").expect("get"), Some(&b"here"[..]));
    assert_eq!(txn.get(t, b"d").expect("get"), Some(&b"old"[..]));
    txn.put(t, b"e", b"after").expect("put");
    txn.commit().expect("nothing read changed since it was read");
    // Read, then changed by another commit: the read set catches it.
    let mut txn = w.begin().expect("begin");
    txn.prefetch(&[(t, b"d")]).expect("prefetch");
    assert_eq!(txn.get(t, b"d").expect("get"), Some(&b"old"[..]));
    other.run(|o| o.put(t, b"d", b"newer")).expect("change");
    txn.put(t, b"e", b"again").expect("put");
    assert!(matches!(txn.commit(), Err(Error::Aborted(_))));
}

#[test]
fn values_grow_past_their_allocation() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for len in [1usize, 7, 8, 9, 100, 5000, 3, 70_000, 0] {
        let v = vec![len as u8; len];
        w.run(|txn| txn.put(t, b"k", &v)).expect("put");
        let got = w.run(|txn| Ok(txn.get(t, b"k")?.map(<[u8]>::to_vec))).expect("get");
        assert_eq!(got, Some(v));
    }
}

/// A transaction of thousands of writes (past the size from which the
/// write set and the node set are indexed) writes each key once, reads
/// its own writes back and commits them, rewrites, deletes and inserts of
/// keys it found missing included.
#[test]
fn a_large_transaction_reads_and_rewrites_its_own_writes() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let key = |i: u32| i.to_be_bytes();
    let n = 3_000;
    // What the big transaction leaves: rewritten, deleted, or inserted.
    let want = |i: u32| match i {
        _ if i >= n => Some(b"new".to_vec()),
        _ if i.is_multiple_of(3) => None,
        _ => Some(i.to_le_bytes().to_vec()),
    };
    w.run(|txn| (0..n).try_for_each(|i| txn.put(t, &key(i), b"old"))).expect("load");
    w.run(|txn| {
        for i in 0..n {
            txn.put(t, &key(i), b"first")?;
        }
        for i in (0..n).rev() {
            assert_eq!(txn.get(t, &key(i))?, Some(&b"first"[..]), "key {i}");
            if i.is_multiple_of(3) {
                txn.delete(t, &key(i))?;
            } else {
                txn.put(t, &key(i), &i.to_le_bytes())?;
            }
        }
        // New keys, each first looked up (a node-set entry per miss), so
        // each insert moves its leaf's entries in a large node set.
        for i in n..n + 2_000 {
            assert_eq!(txn.get(t, &key(i))?, None);
            txn.put(t, &key(i), b"new")?;
        }
        // A scan sees the transaction's own writes, found among thousands.
        let mut seen = 0;
        txn.scan(t, .., usize::MAX, |k, v| {
            let i = u32::from_be_bytes(k.try_into().expect("4-byte key"));
            assert_eq!(v, want(i).expect("deleted keys are not visited"), "key {i}");
            seen += 1;
            true
        })?;
        assert_eq!(seen, n + 2_000 - n.div_ceil(3));
        Ok(())
    })
    .expect("large transaction");
    w.run(|txn| {
        for i in 0..n + 2_000 {
            assert_eq!(txn.get(t, &key(i))?.map(<[u8]>::to_vec), want(i), "key {i}");
        }
        Ok(())
    })
    .expect("read back");
}

#[test]
fn scans_in_both_directions_with_limits_and_own_writes() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| {
        for i in 0..500u32 {
            txn.put(t, format!("k{i:04}").as_bytes(), &i.to_le_bytes())?;
        }
        Ok(())
    })
    .expect("load");
    let all = keys_in(&mut w, t, false, usize::MAX);
    assert_eq!(all.len(), 500);
    assert!(all.windows(2).all(|p| p[0] < p[1]));
    let mut rev = keys_in(&mut w, t, true, usize::MAX);
    rev.reverse();
    assert_eq!(rev, all);
    assert_eq!(keys_in(&mut w, t, false, 3), all[..3].to_vec());
    assert_eq!(keys_in(&mut w, t, true, 2), vec![all[499].clone(), all[498].clone()]);
    // Bounds, plus this transaction's own uncommitted insert and delete.
    let got = w
        .run(|txn| {
            txn.insert(t, b"k0100x", b"new")?;
            txn.delete(t, b"k0101")?;
            let mut out = Vec::new();
            txn.scan(t, (Included(&b"k0100"[..]), Excluded(&b"k0103"[..])), usize::MAX, |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })?;
            Ok(out)
        })
        .expect("scan");
    let keys: Vec<&[u8]> = got.iter().map(|(k, _)| &k[..]).collect();
    assert_eq!(keys, vec![&b"k0100"[..], b"k0100x", b"k0102"]);
    assert_eq!(got[1].1, b"new");
    let n = w.run(|txn| txn.scan(t, (Excluded(&b"k0498"[..]), Unbounded), 10, |_, _| true)).expect("scan");
    assert_eq!(n, 1);
}

#[test]
fn an_aborted_transaction_leaves_nothing_behind() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let mut txn = w.begin().expect("begin");
    txn.insert(t, b"ghost", b"boo").expect("insert");
    txn.put(t, b"other", b"x").expect("put");
    txn.abort();
    assert_eq!(keys_in(&mut w, t, false, usize::MAX), Vec::<Vec<u8>>::new());
    // Dropping an open transaction aborts it too.
    {
        let mut txn = w.begin().expect("begin");
        txn.insert(t, b"ghost", b"boo").expect("insert");
    }
    assert_eq!(keys_in(&mut w, t, false, usize::MAX), Vec::<Vec<u8>>::new());
    // An error from the closure aborts and is returned, not retried.
    let r: epochdb::Result<()> = w.run(|txn| {
        txn.insert(t, b"ghost", b"boo")?;
        Err(Error::user("changed my mind"))
    });
    assert!(matches!(r, Err(Error::User(_))));
    assert_eq!(keys_in(&mut w, t, false, usize::MAX), Vec::<Vec<u8>>::new());
}

#[test]
fn every_misuse_is_a_typed_error() {
    let db = Database::open(Options { max_value_len: 100, ..Options::default() }).expect("open");
    let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("name", 8)]).expect("schema");
    let t = db.create_table("t", TableOptions::new().schema(schema.clone())).expect("table");
    assert!(matches!(db.create_table("t", TableOptions::new()), Err(Error::TableExists(_))));
    assert!(matches!(db.table("nope"), Err(Error::NoSuchTable(_))));
    assert!(matches!(db.index(t, "nope"), Err(Error::NoSuchIndex { .. })));
    assert_eq!(db.table("t").expect("by name"), t);
    let mut w = db.worker().expect("worker");
    let long_key = vec![0u8; MAX_KEY_LEN + 1];
    let row = schema.encode(&[b"0001", b"ann"]).expect("row");
    w.run(|txn| {
        assert!(matches!(txn.get(t, &long_key), Err(Error::KeyTooLarge { .. })));
        assert!(matches!(txn.put(t, &long_key, &row), Err(Error::KeyTooLarge { .. })));
        assert!(matches!(txn.put(t, b"k", &[0; 101]), Err(Error::ValueTooLarge { .. })));
        assert!(matches!(txn.put(t, b"k", b"not a row"), Err(Error::Schema(_))));
        assert!(matches!(txn.get(db.table_handle(99), b"k"), Err(Error::UnknownTable(_))));
        assert!(matches!(txn.scan(db.table_handle(99), .., 1, |_, _| true), Err(Error::UnknownTable(_))));
        assert!(matches!(txn.prefetch(&[(t, b"k"), (db.table_handle(99), b"k")]), Err(Error::UnknownTable(_))));
        txn.put(t, b"k", &row)?;
        // Keys of exactly the limit work.
        txn.get(t, &long_key[..MAX_KEY_LEN])?;
        Ok(())
    })
    .expect("txn");
    assert!(matches!(
        Database::open(Options { snapshot_epochs: 1, ..Options::default() }),
        Err(Error::InvalidOptions(_))
    ));
    assert!(matches!(
        Database::open(Options { epoch_interval: std::time::Duration::ZERO, ..Options::default() }),
        Err(Error::InvalidOptions(_))
    ));
    drop(db);
    assert!(matches!(w.begin(), Err(Error::Closed)));
    assert!(matches!(w.run(|_| Ok(())), Err(Error::Closed)));
}

#[test]
fn secondary_indexes_follow_their_rows() {
    let db = fast_db();
    // Customers keyed by id; value = last name; index by last name.
    let opts = TableOptions::new().index("by_last", |_pk, v, out| out.extend_from_slice(v));
    let c = db.create_table("customer", opts).expect("table");
    let by_last = db.index(c, "by_last").expect("index");
    let mut w = db.worker().expect("worker");
    w.run(|txn| {
        txn.insert_indexed(c, b"id1", b"smith")?;
        txn.insert_indexed(c, b"id2", b"jones")?;
        txn.insert_indexed(c, b"id3", b"smith")?;
        txn.insert_indexed(c, b"id4", b"smith\0x")?;
        Ok(())
    })
    .expect("load");
    let lookup = |w: &mut epochdb::Worker, name: &[u8]| {
        w.run(|txn| {
            let mut ids = Vec::new();
            txn.index_scan(by_last, name, false, usize::MAX, |pk| {
                ids.push(pk.to_vec());
                true
            })?;
            Ok(ids)
        })
        .expect("lookup")
    };
    assert_eq!(lookup(&mut w, b"smith"), vec![b"id1".to_vec(), b"id3".to_vec()]);
    w.run(|txn| {
        txn.put_indexed(c, b"id1", b"jones")?;
        txn.delete_indexed(c, b"id3")?;
        Ok(())
    })
    .expect("update");
    assert_eq!(lookup(&mut w, b"smith"), Vec::<Vec<u8>>::new());
    assert_eq!(lookup(&mut w, b"jones"), vec![b"id1".to_vec(), b"id2".to_vec()]);
    assert_eq!(lookup(&mut w, b"smith\0x"), vec![b"id4".to_vec()]);
}

#[test]
fn snapshots_read_the_past_and_never_abort() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (mut w, mut w2) = (db.worker().expect("worker"), db.worker().expect("worker"));
    // Before anything is old enough, a snapshot is empty.
    assert_eq!(w.snapshot().expect("snapshot").get(t, b"k").expect("get"), None);
    let (_, first) = w
        .run_with_info(|txn| txn.put(t, b"k", b"v1").and(txn.put(t, b"gone", b"g")).and(txn.put(t, b"s", b"s")))
        .expect("put");
    wait_for_snapshot(&db, first.epoch);
    for round in 0..20u32 {
        // Hold a snapshot open while another worker overwrites (in place and
        // by growing), deletes and inserts; then read through it. The first
        // overwrite of a record that must keep its version for snapshots
        // replaces it by one with a link (`Record::fits`); later ones are
        // in place.
        let mut snap = w.snapshot().expect("snapshot");
        let before = snap.get(t, b"k").expect("get").map(<[u8]>::to_vec);
        let before_s = snap.get(t, b"s").expect("get").map(<[u8]>::to_vec);
        let mut before_keys = Vec::new();
        snap.scan(t, .., usize::MAX, |k, _| {
            before_keys.push(k.to_vec());
            true
        })
        .expect("scan");
        let grown = vec![round as u8; 40 * (round as usize + 1)];
        w2.run(|txn| txn.put(t, b"k", &grown)).expect("overwrite");
        w2.run(|txn| txn.put(t, format!("new{round:02}").as_bytes(), b"n")).expect("insert");
        w2.run(|txn| txn.delete(t, b"gone").map(|_| ())).expect("delete");
        w2.run(|txn| txn.put(t, b"s", format!("s{round}").as_bytes())).expect("same size");
        assert_eq!(snap.get(t, b"k").expect("get").map(<[u8]>::to_vec), before);
        assert_eq!(snap.get(t, b"s").expect("get").map(<[u8]>::to_vec), before_s, "round {round}");
        let mut keys = Vec::new();
        snap.scan(t, .., usize::MAX, |k, _| {
            keys.push(k.to_vec());
            true
        })
        .expect("scan");
        assert_eq!(keys, before_keys, "round {round}");
        drop(snap);
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    let (_, last) = w2.run_with_info(|txn| txn.put(t, b"z", b"z")).expect("put");
    wait_for_snapshot(&db, last.epoch);
    let mut snap = w.snapshot().expect("snapshot");
    assert_eq!(snap.get(t, b"gone").expect("get"), None);
    assert_eq!(snap.get(t, b"k").expect("get"), Some(&[19u8; 800][..]));
    assert_eq!(snap.get(t, b"s").expect("get"), Some(&b"s19"[..]));
    let n = snap.scan(t, .., usize::MAX, |_, _| true).expect("scan");
    assert_eq!(n, 23); // k, new00..new19, s, z
}

#[test]
fn commit_reports_tids_and_epochs_in_order() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let mut last = None;
    for i in 0..2000u32 {
        let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", &i.to_le_bytes())).expect("put");
        let tid = info.tid.expect("a writer has a TID");
        assert_eq!(tid.epoch(), info.epoch);
        assert!(Some(tid) > last);
        last = Some(tid);
    }
    let (_, ro) = w.run_with_info(|txn| txn.get(t, b"k").map(|_| ())).expect("read");
    assert_eq!(ro.tid, None);
    assert!(w.stats().commits >= 2001);
}

#[test]
fn the_global_tid_counter_mode_commits_correctly() {
    let options = epochdb::Options { tid_source: epochdb::TidSource::GlobalCounter, ..epochdb::Options::default() };
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let tids = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut w = db.worker().expect("worker");
                let mut mine = Vec::new();
                for _ in 0..5000 {
                    let (_, info) = w
                        .run_with_info(|txn| {
                            let n = txn.get(t, b"n")?.map_or(0, common::u64_of);
                            txn.put(t, b"n", &(n + 1).to_le_bytes())
                        })
                        .expect("increment");
                    mine.push(info.tid.expect("tid"));
                }
                assert!(mine.windows(2).all(|p| p[0] < p[1]), "one worker's TIDs increase");
                tids.lock().expect("tids").extend(mine);
            });
        }
    });
    let mut tids = tids.into_inner().expect("tids");
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), 10_000, "TIDs are unique");
    let mut w = db.worker().expect("worker");
    assert_eq!(w.run(|txn| Ok(txn.get(t, b"n")?.map(common::u64_of))).expect("read"), Some(10_000));
}

#[test]
fn key_value_calls_read_and_write_without_transactions() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let mut out = Vec::new();
    assert!(!w.kv_get(t, b"k", &mut out).expect("get"));
    w.kv_put(t, b"k", b"first").expect("insert path");
    w.kv_put(t, b"k", b"2nd").expect("in place");
    assert!(w.kv_get(t, b"k", &mut out).expect("get"));
    assert_eq!(out, b"2nd");
    w.kv_put(t, b"k", &[9; 500]).expect("grow path");
    assert!(w.kv_get(t, b"k", &mut out).expect("get"));
    assert_eq!(out, vec![9; 500]);
    assert_eq!(w.run(|txn| Ok(txn.get(t, b"k")?.map(<[u8]>::to_vec))).expect("txn"), Some(vec![9; 500]));
    assert!(matches!(w.kv_get(t, &[0; MAX_KEY_LEN + 1], &mut out), Err(Error::KeyTooLarge { .. })));
}

/// Regression: `kv_put` once took its TID epoch from `e_w` instead of
/// reading `E` after locking, so a record written by another thread in the
/// next epoch tripped the TID generator's assertion while the lock was held
/// (and the other thread then spun on that lock forever). A watchdog turns a
/// hang into a failure.
#[test]
fn kv_puts_from_two_threads_across_epoch_changes() {
    let db = fast_db();
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for th in 0..2u8 {
        let (db, done) = (db.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut w = db.worker().expect("worker");
            let mut out = Vec::new();
            for i in 0..100_000u32 {
                let k = [(i % 4) as u8];
                w.kv_put(t, &k, &[th; 16]).expect("put");
                w.kv_get(t, &k, &mut out).expect("get");
            }
            let _ = done.send(());
        });
    }
    for _ in 0..2 {
        done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("a kv worker died or hung");
    }
}

/// A deleted record no snapshot can need (inserted and deleted in one
/// snapshot epoch) leaves the index once its epoch is over, not after a
/// snapshot epoch: here snapshots never advance, so only that path can
/// remove it. A key inserted again afterwards finds no record, and its
/// TID must still order after the delete's (log replay keeps the larger).
#[test]
fn a_tombstone_no_snapshot_needs_leaves_after_its_epoch_and_orders_before_a_reinsert() {
    let options =
        Options { epoch_interval: std::time::Duration::from_millis(1), snapshot_epochs: 1 << 40, ..Options::default() };
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| txn.insert(t, b"k", b"v")).expect("insert");
    let (_, deleted) = w.run_with_info(|txn| txn.delete(t, b"k")).expect("delete");
    let records = |w: &mut epochdb::Worker| {
        w.run(|txn| {
            let mut n = 0;
            txn.scan_versioned(t, .., false, usize::MAX, |_, _, _| {
                n += 1;
                true
            })?;
            Ok(n)
        })
        .expect("scan")
    };
    while db.epoch() <= deleted.epoch {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    w.collect_garbage().expect("gc");
    assert_eq!(records(&mut w), 0, "the tombstone is still in the index");
    let mut other = db.worker().expect("worker");
    let (_, inserted) = other.run_with_info(|txn| txn.insert(t, b"k", b"again")).expect("insert again");
    assert!(inserted.tid > deleted.tid, "{inserted:?} must order after {deleted:?}");
    assert!(inserted.epoch > deleted.epoch);
}

/// Within the delete's own epoch the tombstone stays, so a re-insert finds
/// it and orders after the delete (unhooking it at once would let another
/// worker's insert take a smaller TID in the same epoch).
#[test]
fn a_tombstone_stays_through_its_own_epoch() {
    let options = Options { epoch_interval: std::time::Duration::from_secs(3600), ..Options::default() };
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for i in 0..20u8 {
        w.run(|txn| txn.put(t, &[i], b"v")).expect("advance this worker's TIDs");
    }
    w.run(|txn| txn.insert(t, b"k", b"v")).expect("insert");
    let (_, deleted) = w.run_with_info(|txn| txn.delete(t, b"k")).expect("delete");
    w.collect_garbage().expect("gc");
    let mut other = db.worker().expect("a worker whose TIDs start low");
    let (_, inserted) = other.run_with_info(|txn| txn.insert(t, b"k", b"again")).expect("insert again");
    assert_eq!(inserted.epoch, deleted.epoch, "the epoch did not move");
    assert!(inserted.tid > deleted.tid, "{inserted:?} must order after {deleted:?}");
}

/// #21: `Txn::range` yields what `Txn::scan` visits, for every kind of
/// bound, across its read-ahead batches, with the transaction's own
/// writes; and it is phantom-safe like a scan.
#[test]
fn range_iterates_what_scan_visits_and_detects_phantoms() {
    let db = Database::open(Options::default()).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let key = |i: u32| (i * 3).to_be_bytes().to_vec();
    w.run(|txn| (0..3000).try_for_each(|i| txn.insert(t, &key(i), &i.to_le_bytes()))).expect("load");
    let (lo, hi) = (key(100), key(2500));
    type Bounds<'a> = (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>);
    let bounds: Vec<Bounds<'_>> = vec![
        (Unbounded, Unbounded),
        (Included(&lo[..]), Excluded(&hi[..])),
        (Excluded(&lo[..]), Included(&hi[..])),
        (Included(&hi[..]), Unbounded),
        (Unbounded, Excluded(&lo[..])),
        (Included(&hi[..]), Excluded(&lo[..])),
    ];
    let last = bounds.len() - 1;
    for (i, b) in bounds.into_iter().enumerate() {
        let mut txn = w.begin().expect("begin");
        // Own writes show through both: a delete and an update in range.
        txn.delete(t, &key(101)).expect("delete");
        txn.put(t, &key(102), b"own").expect("put");
        let ranged = txn.range(t, b).collect::<epochdb::Result<Vec<_>>>().expect("range");
        let mut scanned = Vec::new();
        txn.scan(t, b, usize::MAX, |k, v| {
            scanned.push((k.to_vec(), v.to_vec()));
            true
        })
        .expect("scan");
        txn.abort();
        assert_eq!(ranged, scanned, "{b:?}");
        // Only the last range (start above end) is empty.
        assert_eq!(ranged.is_empty(), i == last, "{b:?}");
    }
    // A short take reads only the first batch.
    let first = w.run(|txn| txn.range(t, ..).take(3).map(|r| r.map(|(k, _)| k)).collect::<epochdb::Result<Vec<_>>>());
    assert_eq!(first.expect("take"), [key(0), key(1), key(2)]);

    // Phantom: another worker inserts into the range read; the commit aborts.
    let mut other = db.worker().expect("worker");
    let mut txn = w.begin().expect("begin");
    let n = txn.range(t, &key(10)[..]..&key(20)[..]).count();
    assert_eq!(n, 10);
    other.run(|o| o.insert(t, &(31u32).to_be_bytes(), b"phantom")).expect("insert");
    let e = txn.commit().expect_err("a phantom in the range read must abort the commit");
    assert!(e.is_abort(), "{e}");
}

//! Logging, checkpoints and recovery within one process: clean reopen,
//! deletes, secondary indexes, checkpoints that delete old logs, the lock
//! file, and fault injection (failed fsync, full disk, torn and corrupted
//! blocks). Crash tests with a killed child process are in `crash.rs`.
//! Each test runs with value logging and with delta logging (Gawain); its
//! table has a column schema, and updates change some columns, so the
//! delta runs log and recover deltas.

mod common;

use common::{contents, durable_options, one_log_file, salvaging, temp_dir};
use epochdb::{Column, Database, Durability, Error, Fault, Faults, Options, Schema, TableId, TableOptions};
use epochdb_testkit::files::{block_epochs, block_len, block_offsets};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Asserts two states are equal, naming the first differing keys.
fn assert_same(got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    let diff: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .take(5)
        .map(|k| {
            let show = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned());
            format!("{}: got {:?}, want {:?}", String::from_utf8_lossy(k), show(got.get(k)), show(want.get(k)))
        })
        .collect();
    assert!(diff.is_empty(), "{what}: {} vs {} keys; first differences: {diff:#?}", got.len(), want.len());
}

/// The logging modes every test runs in.
const LOGGING: [Durability; 2] = [Durability::Log, Durability::Delta];

/// Rows of the test tables: a fixed id, a variable text, a fixed counter.
fn schema() -> Schema {
    Schema::new(vec![Column::fixed("id", 8), Column::var("text", 400), Column::fixed("n", 4)]).expect("schema")
}

fn row(id: u64, text: &str, n: u32) -> Vec<u8> {
    schema().encode(&[&id.to_le_bytes(), text.as_bytes(), &n.to_le_bytes()]).expect("row")
}

/// The table `name`, with the row schema.
fn table(db: &Database, name: &str) -> TableId {
    db.create_table(name, TableOptions::new().schema(schema())).expect("table")
}

/// Applies `n` writes (puts, growing puts, deletes) and returns the model.
/// A key's successive puts change its counter every time and its text
/// (growing or shrinking it) every third time.
fn churn(db: &Database, t: TableId, n: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut w = db.worker().expect("worker");
    for i in 0..n {
        let id = i % 97;
        let key = format!("k{id:04}").into_bytes();
        let visit = i / 97;
        let value = row(id, &format!("v{}-{}", visit / 3, "x".repeat((visit / 3 % 13) as usize * 10)), visit as u32);
        if i % 7 == 3 {
            w.run(|txn| txn.delete(t, &key)).expect("delete");
            model.remove(&key);
        } else {
            w.run(|txn| txn.put(t, &key, &value)).expect("put");
            model.insert(key, value);
        }
    }
    let last = row(0, "last", 1);
    let info = w.run_with_info(|txn| txn.put(t, b"last", &last)).expect("put").1;
    model.insert(b"last".to_vec(), last);
    w.wait_durable(info.epoch).expect("durable");
}

#[test]
fn a_clean_reopen_recovers_everything_including_deletes() {
    let modes = [Durability::Log, Durability::LogAndCheckpoint, Durability::Delta, Durability::DeltaAndCheckpoint];
    for durability in modes {
        let dir = temp_dir(&format!("reopen-{durability:?}"));
        let mut model = BTreeMap::new();
        {
            let db = Database::open(durable_options(&dir, durability)).expect("open");
            let t = table(&db, "t");
            churn(&db, t, 2000, &mut model);
        }
        for round in 0..3 {
            // 1, 2 and 3 recovery threads: the reader alone, then with workers.
            let mut options = durable_options(&dir, durability);
            options.recovery.threads = round + 1;
            let db = Database::open(options).expect("reopen");
            let report = db.recovery_report().expect("report").clone();
            assert!(report.dropped.is_empty(), "{report:?}");
            let t = table(&db, "t");
            assert_same(&contents(&db, t), &model, &format!("{durability:?} round {round}"));
            assert!(db.epoch() > report.pepoch, "new epochs start above the recovered ones");
            churn(&db, t, 300, &mut model);
        }
    }
}

#[test]
fn secondary_indexes_are_logged_and_recovered() {
    for mode in LOGGING {
        secondary_indexes(mode);
    }
}

fn secondary_indexes(mode: Durability) {
    let dir = temp_dir(&format!("indexes-{mode:?}"));
    let by_len = || TableOptions::new().index("by_len", |_k, v, out| out.push(v.len() as u8));
    {
        let db = Database::open(durable_options(&dir, mode)).expect("open");
        let t = db.create_table("t", by_len()).expect("table");
        let mut w = db.worker().expect("worker");
        for (k, v) in [("a", "xx"), ("b", "yyy"), ("c", "zz")] {
            w.run_durable(|txn| txn.insert_indexed(t, k.as_bytes(), v.as_bytes())).expect("insert");
        }
        w.run_durable(|txn| txn.delete_indexed(t, b"c")).expect("delete");
    }
    let db = Database::open(durable_options(&dir, mode)).expect("reopen");
    let t = db.table("t").expect("table");
    let mut w = db.worker().expect("worker");
    let e = w.run(|txn| txn.put_indexed(t, b"d", b"q")).expect_err("extractors are not on disk");
    assert!(matches!(e, Error::TableNotOpened(_)), "{e}");
    let e = db.create_table("t", TableOptions::new()).expect_err("index names must match");
    assert!(matches!(e, Error::Schema(_)), "{e}");
    assert_eq!(db.create_table("t", by_len()).expect("reopen table"), t);
    let idx = db.index(t, "by_len").expect("index");
    let rows = w
        .run(|txn| {
            let mut rows = Vec::new();
            txn.index_scan(idx, &[2], false, usize::MAX, |pk| {
                rows.push(pk.to_vec());
                true
            })?;
            Ok(rows)
        })
        .expect("index scan");
    assert_eq!(rows, vec![b"a".to_vec()]);
}

fn log_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("log"))
        .expect("log dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn checkpoints_install_and_retire_old_logs() {
    for mode in [Durability::LogAndCheckpoint, Durability::DeltaAndCheckpoint] {
        checkpoints(mode);
    }
}

fn checkpoints(mode: Durability) {
    let dir = temp_dir(&format!("checkpoint-{mode:?}"));
    let mut model = BTreeMap::new();
    let opts = || {
        let mut o = durable_options(&dir, mode);
        o.log.rotate_epochs = 5;
        o
    };
    {
        let db = Database::open(opts()).expect("open");
        let t = table(&db, "t");
        let mut w = db.worker().expect("worker");
        for i in 0..500u32 {
            let key = format!("stable{i:04}").into_bytes();
            let value = row(i.into(), "s", 0);
            w.run(|txn| txn.put(t, &key, &value)).expect("put");
            model.insert(key, value);
        }
        // Churn until three checkpoints are in and (value logging) one of
        // them met rows newer than its e_l (whether a scan meets one is up
        // to timing). Delta logging never skips: the log may hold only
        // some columns of such a row.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        // With delta logging, checkpoints after the first are incremental
        // (Gawain): only rows changed since the previous one, and
        // tombstones of the rows deleted since.
        let (mut skipped, mut chained) = (false, false);
        while db.checkpoint_stats().installed < 3 || !(skipped || mode.delta()) || (mode.delta() && !chained) {
            churn(&db, t, 200, &mut model);
            let s = db.checkpoint_stats();
            skipped |= s.skipped_bytes > 0;
            chained |= s.incremental && s.chain > 1;
            assert!(
                std::time::Instant::now() < deadline,
                "too few checkpoints, or none skipped (chained) a row: {s:?}"
            );
        }
        let s = db.checkpoint_stats();
        assert!(s.records >= 500 || s.incremental, "stable rows in: {s:?}");
        assert!(!(mode.delta() && skipped), "a delta-mode checkpoint skipped rows: {s:?}");
        // Old log files holding only epochs below e_l are gone.
        for name in log_files(&dir) {
            if let Some(e) = name.strip_prefix("old_data.") {
                let hi: u64 = e.split('.').next().and_then(|e| e.parse().ok()).expect("epoch");
                assert!(hi >= s.epoch, "{name} kept after the checkpoint at {}", s.epoch);
            }
        }
        churn(&db, t, 100, &mut model);
    }
    // Obsolete logs are freed a step at a time; a crash halfway leaves a
    // stub below e_l, which recovery must not read and inspect reports.
    std::fs::write(dir.join("log/old_data.1"), b"EPOCHLOG\x03").expect("stub");
    let i = epochdb::inspect(&dir, &[]).expect("inspect");
    let stub = i.logs.iter().find(|l| l.path.ends_with("old_data.1")).expect("listed");
    assert!(stub.obsolete && stub.damage.is_none(), "{stub:?}");
    let db = Database::open(opts()).expect("reopen");
    let r = db.recovery_report().expect("report");
    assert!(r.checkpoint_epoch.is_some() && r.checkpoint_bytes > 0, "{r:?}");
    assert_same(&contents(&db, db.table("t").expect("t")), &model, &format!("{mode:?} after checkpoints"));
}

/// With hour-long epochs nothing would become durable without
/// `hasten_durable`; with it, each of a lone client's writes is durable
/// after about one sync, survives a reopen, and rotation still waits.
#[test]
fn hastened_epochs_make_a_lone_write_durable_without_a_tick() {
    let dir = temp_dir("hasten");
    let mut options =
        Options { epoch_interval: std::time::Duration::from_secs(3600), ..durable_options(&dir, Durability::Log) };
    options.log.rotate_epochs = 2;
    let db = Database::open(options.clone()).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for i in 0..20u32 {
        let (_, info) = w.run_with_info(|txn| txn.put(t, &i.to_be_bytes(), b"v")).expect("commit");
        db.hasten_durable(info.epoch);
        db.wait_durable(info.epoch).expect("durable");
        assert!(db.durable_epoch() >= info.epoch);
    }
    // 20 hastened epochs span far more than 2, but not 2 hours.
    assert_eq!(log_files(&dir), vec!["data.log".to_string()]);
    drop(w);
    drop(db);
    let db = Database::open(options).expect("reopen");
    let t = db.table("t").expect("table");
    assert_eq!(contents(&db, t).len(), 20);
}

#[test]
fn a_read_only_transaction_is_released_once_what_it_read_is_durable() {
    let dir = temp_dir("release-epoch");
    let db = Database::open(durable_options(&dir, Durability::Log)).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    let read = |w: &mut epochdb::Worker, key: &[u8]| {
        let (tid, info) = w.run_with_info(|txn| Ok(txn.get_versioned(t, key)?.1)).expect("read");
        assert!(info.tid.is_none() && info.release_epoch <= info.epoch);
        (tid.expect("a committed version or none"), info)
    };
    // A write is released at its own epoch, and so is a read of it.
    let (_, wrote) = w.run_with_info(|txn| txn.put(t, b"a", b"1")).expect("put");
    assert_eq!(wrote.release_epoch, wrote.epoch);
    let (_, info) = read(&mut w, b"a");
    assert_eq!(info.release_epoch, wrote.epoch, "a read waits for the write it saw");
    w.wait_durable(wrote.epoch).expect("durable");
    // A read of an old version, or of a key never written, needs no later
    // epoch than that (an absence: the epoch before its own).
    let (_, info) = read(&mut w, b"a");
    assert!(info.release_epoch == wrote.epoch && info.epoch > wrote.epoch, "{info:?}");
    let (tid, info) = read(&mut w, b"never");
    assert_eq!((tid, info.release_epoch), (epochdb::Tid::ZERO, info.epoch - 1));
    // A key absent because of a delete: its release covers the delete,
    // whether the reader finds the tombstone or, once it is unhooked, no
    // record at all.
    let (_, deleted) = w.run_with_info(|txn| txn.delete(t, b"a")).expect("delete");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (tid, info) = read(&mut w, b"a");
        assert!(info.release_epoch >= deleted.epoch, "an absence released before its delete: {info:?} {deleted:?}");
        if tid == epochdb::Tid::ZERO {
            break; // unhooked
        }
        assert_eq!((tid.epoch(), info.release_epoch), (deleted.epoch, deleted.epoch), "the tombstone");
        assert!(std::time::Instant::now() < deadline, "the tombstone was never unhooked");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Another transaction's uncommitted insert: an absence too.
    let mut inserter = db.worker().expect("worker");
    let mut txn = inserter.begin().expect("begin");
    txn.insert(t, b"b", b"2").expect("insert");
    let (tid, info) = read(&mut w, b"b");
    assert_eq!((tid, info.release_epoch), (epochdb::Tid::ZERO, info.epoch - 1));
    txn.abort();
}

#[test]
fn a_data_directory_opens_once() {
    let dir = temp_dir("lock");
    let db = Database::open(durable_options(&dir, Durability::Log)).expect("open");
    let e = Database::open(durable_options(&dir, Durability::Log)).expect_err("second open");
    assert!(matches!(e, Error::Locked(_)), "{e}");
    drop(db);
    Database::open(durable_options(&dir, Durability::Log)).expect("open after close");
}

#[test]
fn a_failed_fsync_fails_the_database_for_good() {
    for mode in LOGGING {
        failed_fsync(mode);
    }
}

fn failed_fsync(mode: Durability) {
    let dir = temp_dir(&format!("fsync-{mode:?}"));
    let faults = Faults::new();
    let mut options = durable_options(&dir, mode);
    options.testing.faults = Some(faults.clone());
    let db = Database::open(options).expect("open");
    let t = table(&db, "t");
    let mut w = db.worker().expect("worker");
    w.run_durable(|txn| txn.put(t, b"before", &row(1, "one", 1))).expect("durable");
    w.run_durable(|txn| txn.put(t, b"before", &row(1, "one", 2))).expect("durable before the fault");
    faults.fail_syncs_after(0);
    let e = w.run_durable(|txn| txn.put(t, b"after", &row(2, "", 0))).expect_err("cannot become durable");
    assert!(matches!(e, Error::Durability(_)), "{e}");
    let e = w.run(|txn| txn.put(t, b"later", &row(3, "", 0))).expect_err("failed state");
    assert!(matches!(e, Error::Durability(_)), "{e}");
    assert!(db.is_durable(db.epoch()).is_err());
    drop(w);
    drop(db);
    let db = Database::open(durable_options(&dir, mode)).expect("recover");
    let got = contents(&db, db.table("t").expect("t"));
    assert_eq!(got.get(&b"before"[..]), Some(&row(1, "one", 2)));
    assert!(!got.contains_key(&b"later"[..]));
}

#[test]
fn a_full_disk_is_a_clear_error_and_recovery_still_works() {
    for mode in LOGGING {
        full_disk(mode);
    }
}

fn full_disk(mode: Durability) {
    let dir = temp_dir(&format!("enospc-{mode:?}"));
    let faults = Faults::new();
    let mut opts = durable_options(&dir, mode);
    opts.testing.faults = Some(faults.clone());
    let db = Database::open(opts).expect("open");
    let t = table(&db, "t");
    let mut w = db.worker().expect("worker");
    w.run_durable(|txn| txn.put(t, b"k0", &row(0, "v", 0))).expect("durable");
    faults.disk_space(0);
    let mut err = None;
    for i in 0..20000 {
        // Updates of a few wide rows: every one logs a 400-byte column.
        let big = row(i % 10, &char::from(b'a' + (i % 26) as u8).to_string().repeat(400), 0);
        if let Err(e) = w.run_durable(|txn| txn.put(t, format!("k{}", i % 10 + 1).as_bytes(), &big)) {
            err = Some(e);
            break;
        }
    }
    let e = err.expect("the disk fills");
    assert!(e.to_string().contains("No space left") || e.to_string().contains("space"), "{e}");
    drop(w);
    drop(db);
    let db = Database::open(durable_options(&dir, mode)).expect("recover");
    let got = contents(&db, db.table("t").expect("t"));
    assert_eq!(got.get(&b"k0"[..]), Some(&row(0, "v", 0)));
}

/// Writes a log with several blocks, all in `data.log` (see
/// [`one_log_file`]), and returns its path.
fn crashed_log(dir: &Path, mode: Durability) -> std::path::PathBuf {
    let db = Database::open(one_log_file(dir, mode)).expect("open");
    let t = table(&db, "t");
    let mut w = db.worker().expect("worker");
    // 50 rows, each inserted and then updated three times (deltas).
    for i in 0..200u32 {
        let value = row((i % 50).into(), &"y".repeat(280), i / 50);
        w.run_durable(|txn| txn.put(t, &(i % 50).to_be_bytes(), &value)).expect("put");
    }
    // Let the lock go with a clean close, but the file layout is as after
    // a crash: everything is in data.log.
    drop(w);
    drop(db);
    dir.join("log").join("data.log")
}

#[test]
fn a_torn_tail_above_pepoch_is_dropped_and_reported() {
    for mode in LOGGING {
        torn_tail(mode);
    }
}

/// A crash before the last block's sync: the pepoch file still says an
/// epoch below that block's, and the block's write (and its flush's seal
/// marker after it) was cut short. That is a torn tail, dropped and
/// reported. (A cut-short block at or below pepoch is corruption:
/// `data_safety.rs`.)
fn torn_tail(mode: Durability) {
    let dir = temp_dir(&format!("torn-{mode:?}"));
    let log = crashed_log(&dir, mode);
    let mut bytes = std::fs::read(&log).expect("read");
    let blocks = block_offsets(&bytes);
    assert!(blocks.len() > 3, "{blocks:?}");
    let last = *blocks.iter().rev().find(|&&b| block_len(&bytes, b) > 0).expect("a data block");
    let (lo, _) = block_epochs(&bytes, last);
    common::write_pepoch(&dir, lo - 1);
    bytes.truncate(last + 40); // the last block's write was cut short
    std::fs::write(&log, &bytes).expect("write");
    let db = Database::open(one_log_file(&dir, mode)).expect("a torn tail is not an error");
    let r = db.recovery_report().expect("report");
    assert_eq!(r.dropped.len(), 1, "{r:?}");
    assert!(r.dropped[0].contains("torn tail") && r.dropped[0].contains("data.log"), "{r:?}");
    assert!(r.records > 0 && r.pepoch == lo - 1 && r.consistent);
}

/// The seal markers of `data.log`: (offset, epoch).
fn seal_markers(bytes: &[u8]) -> Vec<(usize, u64)> {
    let blocks = block_offsets(bytes);
    blocks.into_iter().filter(|&b| block_len(bytes, b) == 0).map(|b| (b, block_epochs(bytes, b).1)).collect()
}

#[test]
fn a_single_loggers_seal_markers_record_pepoch_beyond_the_pepoch_file() {
    for mode in LOGGING {
        let dir = temp_dir(&format!("markers-{mode:?}"));
        let log = crashed_log(&dir, mode);
        let bytes = std::fs::read(&log).expect("read");
        let markers = seal_markers(&bytes);
        assert!(markers.len() > 3, "a marker per flush that wrote: {markers:?}");
        let &(_, sealed) = markers.last().expect("a marker");
        // The crash came before the pepoch file was ever written again:
        // every acknowledged write is recovered all the same.
        common::write_pepoch(&dir, 0);
        let db = Database::open(one_log_file(&dir, mode)).expect("open");
        let r = db.recovery_report().expect("report");
        assert!(r.pepoch == sealed && r.recorded_pepoch == Some(sealed) && r.dropped.is_empty(), "{r:?}");
        assert_eq!(contents(&db, db.table("t").expect("t")).len(), 50);
        drop(db);
        // A clean close leaves the pepoch file current.
        let closed = epochdb::inspect(&dir, &[]).expect("inspect");
        assert!(closed.pepoch.is_some_and(|p| p >= sealed), "{closed:?}");
    }
}

/// A worker's block may hold an epoch above its flush's bound (another
/// worker, still in an older epoch, holds the bound back). The flush that
/// later publishes that epoch writes no block of its own, yet must still
/// write a seal marker: a copy of the directory taken as soon as the
/// commit is durable (a crash, without the pepoch file the close writes)
/// recovers it. A marker written only by flushes that wrote a block (a
/// mutation) loses it.
#[test]
fn a_block_above_its_flushs_bound_is_sealed_before_its_epoch_is_published() {
    for mode in LOGGING {
        let dir = temp_dir(&format!("late-seal-{mode:?}"));
        let db = Database::open(one_log_file(&dir, mode)).expect("open");
        let t = table(&db, "t");
        let (mut old, mut new) = (db.worker().expect("worker"), db.worker().expect("worker"));
        let mut held = old.begin().expect("begin");
        held.get(t, b"nothing").expect("get"); // the logger's bound stays at its epoch
        let entered = held.epoch(); // not E read now, which may be one past it already
        while db.epoch() <= entered {
            std::thread::sleep(Duration::from_millis(1));
        }
        // E is now one past the held transaction's epoch, and stays there.
        let value = row(7, "late", 1);
        let ((), info) = new.run_with_info(|txn| txn.put(t, b"late", &value)).expect("put");
        assert!(info.epoch > entered);
        // A hastened flush writes the block, with a marker below its
        // epoch (the held transaction bounds it), while E cannot move.
        db.hasten_durable(info.epoch);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!db.is_durable(info.epoch).expect("not failed"));
        drop(held);
        new.wait_durable(info.epoch).expect("durable");
        let copy = temp_dir(&format!("late-seal-copy-{mode:?}"));
        for f in ["manifest", "pepoch", "log/data.log"] {
            std::fs::create_dir_all(copy.join("log")).expect("mkdir");
            std::fs::copy(dir.join(f), copy.join(f)).expect("copy");
        }
        let recovered = Database::open(one_log_file(&copy, mode)).expect("open the copy");
        let got = contents(&recovered, recovered.table("t").expect("t"));
        assert_eq!(got.get(b"late".as_slice()), Some(&value), "{:?}", recovered.recovery_report());
    }
}

/// Small durable commits, one sync each, fill several steps of a log
/// file: after the first (reserved with fallocate), a helper thread writes
/// each step's zeros ahead of the logger, so no further fallocate happens.
/// A copy of the directory taken while it runs (a crash) recovers every
/// commit. A helper that wrote zeros over the logger's part (a mutation)
/// loses commits here.
#[test]
fn zeros_written_ahead_of_the_log_never_cover_its_blocks() {
    let dir = temp_dir("zero-ahead");
    let faults = Faults::new();
    let mut options = one_log_file(&dir, Durability::Log);
    options.testing.faults = Some(faults.clone());
    let db = Database::open(options).expect("open");
    let t = table(&db, "t");
    let mut w = db.worker().expect("worker");
    let allocations = || faults.count_for(Fault::DiskFull) - faults.count_for(Fault::WriteError);
    let before = allocations();
    let log = dir.join("log/data.log");
    let mut n = 0u32;
    // 1 MiB reserved, then steps of 4 MiB: past 5 MiB, one step was zeros.
    while std::fs::metadata(&log).expect("stat").len() <= 9 << 20 {
        let value = row(n.into(), "z", n);
        w.run_durable(|txn| txn.put(t, &n.to_be_bytes(), &value)).expect("put");
        n += 1;
    }
    assert_eq!(allocations(), before, "the log grew by zeros written ahead, not by fallocate ({n} commits)");
    let copy = temp_dir("zero-ahead-copy");
    for f in ["manifest", "pepoch", "log/data.log"] {
        std::fs::create_dir_all(copy.join("log")).expect("mkdir");
        std::fs::copy(dir.join(f), copy.join(f)).expect("copy");
    }
    let recovered = Database::open(one_log_file(&copy, Durability::Log)).expect("open the copy");
    let r = recovered.recovery_report().expect("report");
    assert!(r.dropped.is_empty(), "{r:?}");
    assert_eq!(contents(&recovered, recovered.table("t").expect("t")).len(), n as usize);
}

#[test]
fn a_seal_marker_whose_flush_was_torn_is_not_trusted() {
    for mode in LOGGING {
        let dir = temp_dir(&format!("torn-marker-{mode:?}"));
        let log = crashed_log(&dir, mode);
        let mut bytes = std::fs::read(&log).expect("read");
        let markers = seal_markers(&bytes);
        let blocks = block_offsets(&bytes);
        // A block of the last flush that wrote one (a flush may seal an
        // epoch with a marker alone), written before its marker, never
        // reached the disk whole; the marker did.
        let (before, last, last_at, torn) = (markers.windows(2).rev())
            .find_map(|m| {
                let ((before_at, before), (last_at, last)) = (m[0], m[1]);
                blocks.iter().find(|&&b| b > before_at && b < last_at).map(|&b| (before, last, last_at, b))
            })
            .unwrap_or_else(|| panic!("no flush with a block between its markers: {markers:?}"));
        bytes[torn + 40] ^= 0xff;
        // The crash came right after that flush: the flushes of markers
        // alone that may follow it (the close seals the last epochs) never
        // happened. One would prove the torn flush synced, and make the
        // damage corruption below a seal, not a torn tail.
        bytes[last_at + 32..].fill(0);
        std::fs::write(&log, &bytes).expect("write");
        common::write_pepoch(&dir, 0);
        let db = Database::open(one_log_file(&dir, mode)).expect("a torn flush is not an error");
        let r = db.recovery_report().expect("report");
        assert!(r.pepoch == before && before < last, "recovered to the marker before: {r:?}");
        assert!(r.dropped.len() == 1 && r.dropped[0].contains("torn tail"), "{r:?}");
    }
}

#[test]
fn corruption_in_the_middle_stops_recovery_unless_salvaging() {
    for mode in LOGGING {
        bit_flip(mode);
    }
}

fn bit_flip(mode: Durability) {
    let dir = temp_dir(&format!("bitflip-{mode:?}"));
    let log = crashed_log(&dir, mode);
    let mut bytes = std::fs::read(&log).expect("read");
    // A block with a payload (a seal marker has none to flip).
    let blocks: Vec<usize> = block_offsets(&bytes).into_iter().filter(|&b| block_len(&bytes, b) > 0).collect();
    assert!(blocks.len() > 3, "{blocks:?}");
    let victim = blocks[blocks.len() / 2];
    bytes[victim + 40] ^= 0x10;
    std::fs::write(&log, &bytes).expect("write");
    let e = Database::open(one_log_file(&dir, mode)).expect_err("corruption");
    let msg = e.to_string();
    assert!(matches!(e, Error::Corrupt { .. }), "{msg}");
    assert!(msg.contains("data.log") && msg.contains(&format!("offset {victim}")), "{msg}");
    let (lo, _) = block_epochs(&bytes, victim);
    assert!(msg.contains(&format!("recover to epoch {}", lo - 1)), "the error says what salvage gives up: {msg}");
    let db = Database::open(salvaging(one_log_file(&dir, mode))).expect("salvage");
    let r = db.recovery_report().expect("report");
    assert!(r.dropped[0].contains(&format!("offset {victim}")), "{r:?}");
    assert!(r.records > 0 && r.consistent, "{r:?}");
    // The state is cut back to before the damaged block's epochs.
    assert_eq!(r.pepoch, lo - 1, "{r:?}");
    assert!(r.recorded_pepoch.is_some_and(|p| p > r.pepoch), "{r:?}");
}

#[test]
fn a_corrupt_manifest_or_pepoch_names_the_file() {
    let dir = temp_dir("manifest");
    crashed_log(&dir, Durability::Log);
    let pepoch = dir.join("pepoch");
    let mut bytes = std::fs::read(&pepoch).expect("read");
    bytes[512] ^= 1;
    bytes[1024] ^= 1;
    std::fs::write(&pepoch, &bytes).expect("write");
    let e = Database::open(durable_options(&dir, Durability::Log)).expect_err("corrupt pepoch");
    assert!(e.to_string().contains("pepoch"), "{e}");
    let manifest = dir.join("manifest");
    let mut bytes = std::fs::read(&manifest).expect("read");
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&manifest, &bytes).expect("write");
    let e = Database::open(durable_options(&dir, Durability::Log)).expect_err("corrupt manifest");
    assert!(e.to_string().contains("manifest"), "{e}");
}

#[test]
fn durability_calls_on_an_in_memory_database_are_errors() {
    let db = Database::open(Options::default()).expect("open");
    assert!(matches!(db.wait_durable(1), Err(Error::NotDurable)));
    let e = Database::open(Options { durability: Durability::Log, ..Options::default() }).expect_err("no dir");
    assert!(matches!(e, Error::InvalidOptions(_)), "{e}");
}

/// A key from a small pool, so that keys repeat: short ones, ones that end
/// in zero bytes (zero padding must not make two keys one), and long ones
/// that share their first 8 bytes (the merge compares those first).
fn pool_key(rng: &mut common::Rng) -> Vec<u8> {
    let i = rng.below(150);
    match i % 3 {
        0 => format!("k{i}").into_bytes(),
        1 => {
            let mut k = vec![b'z', (i / 3) as u8];
            k.resize(2 + (i as usize / 3) % 9, 0);
            k
        }
        _ => format!("shared__{:0w$}", i, w = 1 + (i as usize % 13)).into_bytes(),
    }
}

/// Recovery by sort and merge (`LogReplay::Merge`, the default) recovers
/// exactly what recovery by lookup does: a full checkpoint, then a log of
/// inserts, overwrites, deletes, re-inserts and (with delta logging)
/// updates of some columns, keys repeating many times across files, with
/// 2 recovery threads. In debug builds the merge gathers entries in small
/// chunks, so many sorted chunks are merged.
#[test]
fn merge_replay_recovers_what_lookup_replay_does() {
    for durability in [Durability::LogAndCheckpoint, Durability::DeltaAndCheckpoint] {
        let dir = temp_dir(&format!("merge-replay-{durability:?}"));
        let mut options = durable_options(&dir, durability);
        options.checkpoint.interval = Duration::from_secs(3600);
        options.recovery.threads = 2;
        let s = schema();
        let random_row =
            |rng: &mut common::Rng| row(rng.next(), &"t".repeat(rng.below(40) as usize), rng.next() as u32);
        {
            let db = Database::open(options.clone()).expect("open");
            let rows = db.create_table("rows", TableOptions::new().schema(schema())).expect("table");
            let plain = db.create_table("plain", TableOptions::new()).expect("table");
            let mut w = db.worker().expect("worker");
            let mut rng = common::Rng(0x05EE_D0F3_E26E);
            for i in 0..4000 {
                if i == 1500 {
                    db.request_checkpoint().expect("checkpoint");
                    while db.checkpoint_stats().installed == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                let mut ops: Vec<(bool, Vec<u8>, u64, Vec<u8>)> = (0..1 + rng.below(4))
                    .map(|_| (rng.below(2) == 0, pool_key(&mut rng), rng.below(10), random_row(&mut rng)))
                    .collect();
                // Rows the log only updates a few columns of, so that the
                // merge must fold deltas onto checkpoint rows.
                let only_deltas = format!("only-deltas-{}", rng.below(20)).into_bytes();
                ops.push((true, only_deltas, if i < 1500 { 9 } else { 1 + rng.below(4) }, random_row(&mut rng)));
                // Rows the log only updates the first column of (a fixed
                // column at a fixed place): the merge patches them in place.
                // Written whole only in epochs well before the checkpoint's,
                // so no whole write of them is in the log.
                let first_only = format!("first-only-{}", rng.below(20)).into_bytes();
                match i {
                    ..1000 => ops.push((true, first_only, 9, random_row(&mut rng))),
                    1000 => std::thread::sleep(Duration::from_millis(300)),
                    1500.. => ops.push((true, first_only, 1, random_row(&mut rng))),
                    _ => {}
                }
                // Rows never deleted, written whole now and then and
                // otherwise updated in their first column: the merge
                // patches the deltas newer than the newest whole write into
                // it in place. Half of them are new since the checkpoint.
                let patched = format!("patched-{}", rng.below(if i < 1500 { 10 } else { 20 })).into_bytes();
                ops.push((true, patched, if rng.below(3) == 0 { 9 } else { 1 }, random_row(&mut rng)));
                w.run(|txn| {
                    for (in_rows, key, what, value) in &ops {
                        let t = if *in_rows { rows } else { plain };
                        match (what, txn.get(t, key)?) {
                            (0, _) => {
                                txn.delete(t, key)?;
                            }
                            // An update of some columns of the row there:
                            // the first, or the first and the last.
                            (1..=4, Some(old)) if *in_rows => {
                                let mut cols: Vec<Vec<u8>> = (0..s.columns().len())
                                    .map(|c| s.column(old, c).expect("column").to_vec())
                                    .collect();
                                let new: Vec<Vec<u8>> = (0..s.columns().len())
                                    .map(|c| s.column(value, c).expect("column").to_vec())
                                    .collect();
                                cols[0] = new[0].clone();
                                if *what > 2 {
                                    let last = cols.len() - 1;
                                    cols[last] = new[last].clone();
                                }
                                let updated = s.encode(&cols.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
                                txn.put(t, key, &updated)?;
                            }
                            _ => txn.put(t, key, value)?,
                        }
                    }
                    Ok(())
                })
                .expect("transaction");
            }
            assert_eq!(db.checkpoint_stats().chain, 1, "one full checkpoint, which the merge builds on");
        }
        let mut got = Vec::new();
        for log_replay in [epochdb::LogReplay::Merge, epochdb::LogReplay::Lookup] {
            let mut reopen = Options { read_only: true, ..options.clone() };
            reopen.recovery.log_replay = log_replay;
            let db = Database::open(reopen).expect("reopen");
            let report = db.recovery_report().expect("recovered").clone();
            assert!(report.log_bytes > 0 && report.checkpoint_bytes > 0);
            let tables: Vec<_> = ["rows", "plain"].iter().map(|n| db.table(n).expect("table")).collect();
            got.push((report.records, tables.iter().map(|&t| contents(&db, t)).collect::<Vec<_>>()));
        }
        assert_eq!(got[0].0, got[1].0, "{durability:?}: records");
        assert!(got[1].1.iter().all(|t| t.len() > 20), "{durability:?}: a state worth comparing");
        for (m, l) in got[0].1.iter().zip(&got[1].1) {
            assert_same(m, l, &format!("{durability:?}: merge against lookup"));
        }
    }
}

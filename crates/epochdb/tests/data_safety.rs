//! Regression tests for library defects, each named by what a
//! user lost: a truncated log accepted below pepoch, snapshots blind
//! after a reopen, and another set of log directories opening the
//! wrong database.

mod common;

use common::{contents, durable_options, one_log_file, salvaging, temp_dir};
use epochdb::{Database, Durability, Error, Faults, Options, TableOptions};
use epochdb_testkit::files::{self, block_len, block_offsets};
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

/// The offsets of a log's blocks other than seal markers.
fn data_blocks(bytes: &[u8]) -> Vec<usize> {
    block_offsets(bytes).into_iter().filter(|&b| block_len(bytes, b) > 0).collect()
}

/// #4: a crash cannot tear a block at or below pepoch, so a cut-short
/// block there is corruption, not a torn tail to drop silently.
#[test]
fn a_truncated_block_below_pepoch_is_corruption_not_a_torn_tail() {
    let dir = temp_dir("safety-truncated");
    let options = || one_log_file(&dir, Durability::Log);
    let model = {
        let db = Database::open(options()).expect("open");
        write_rows(&db, 0, 200)
    };
    // A clean close made every block durable: the last one is below pepoch.
    let log = dir.join("log/data.log");
    let mut bytes = std::fs::read(&log).expect("read");
    let last = *data_blocks(&bytes).last().expect("a block");
    bytes.truncate(last + 40);
    std::fs::write(&log, &bytes).expect("truncate");
    match Database::open(options()) {
        Ok(db) => {
            let got = contents(&db, db.table("t").expect("t"));
            panic!("opened with {} of {} rows: {:?}", got.len(), model.len(), db.recovery_report());
        }
        Err(e) => assert!(e.to_string().contains("corrupt"), "{e}"),
    }
    // Salvage recovers to the epoch before the damaged block, says so, and
    // the state is that epoch's: every row written before it.
    let lo = u64::from_le_bytes(bytes[last + 8..last + 16].try_into().expect("8"));
    let db = Database::open(salvaging(options())).expect("salvage");
    let r = db.recovery_report().expect("report").clone();
    assert_eq!(r.pepoch, lo - 1, "{r:?}");
    assert!(r.recorded_pepoch.is_some_and(|p| p >= lo) && r.consistent, "{r:?}");
    assert!(r.dropped.iter().any(|d| d.contains(&format!("recovered to epoch {}", lo - 1))), "{r:?}");
    let got = contents(&db, db.table("t").expect("t"));
    assert!(got.len() < model.len() && got.iter().all(|(k, v)| model.get(k) == Some(v)), "{r:?}");
    drop(db);
    // The salvaged state is the database now: the damaged block's epochs
    // are void, so it opens without salvage.
    let db = Database::open(options()).expect("reopen after salvage");
    assert_eq!(contents(&db, db.table("t").expect("t")), got);
}

/// A bit flip in the epochs of a durable block's header must not make it
/// look like a torn block above pepoch: headers carry their own checksum.
#[test]
fn a_flipped_header_epoch_is_corruption_not_a_torn_tail() {
    let dir = temp_dir("safety-header-flip");
    let options = || one_log_file(&dir, Durability::Log);
    drop(write_rows(&Database::open(options()).expect("open"), 0, 100));
    let log = dir.join("log/data.log");
    let mut bytes = std::fs::read(&log).expect("read");
    let last = *block_offsets(&bytes).last().expect("a block");
    bytes[last + 8 + 3] ^= 0x40; // lo becomes far above pepoch
    std::fs::write(&log, &bytes).expect("flip");
    let e = Database::open(options()).expect_err("corruption");
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("header checksum"), "{e}");
}

/// Damage in a block whose intact header is above pepoch loses nothing:
/// recovery drops it, and `inspect` (which predicts recovery) agrees,
/// even with valid blocks after it.
#[test]
fn damage_above_pepoch_is_dropped_and_inspect_agrees() {
    let dir = temp_dir("safety-above");
    let options = || one_log_file(&dir, Durability::Log);
    drop(write_rows(&Database::open(options()).expect("open"), 0, 200));
    let log = dir.join("log/data.log");
    let mut bytes = std::fs::read(&log).expect("read");
    let blocks = data_blocks(&bytes);
    let victim = blocks[blocks.len() - 3];
    let (lo, _) = files::block_epochs(&bytes, victim);
    common::write_pepoch(&dir, lo - 1); // as if the crash came before its sync
    bytes[victim + 40] ^= 1; // its payload: the header stays intact
                             // Nor did the seal markers of later flushes reach the disk (the blocks
                             // after it stand for blocks a logger wrote ahead of its flush).
    let markers: Vec<usize> = block_offsets(&bytes).into_iter().filter(|&b| block_len(&bytes, b) == 0).collect();
    for at in markers.into_iter().filter(|&b| b > victim) {
        bytes[at..at + 32].fill(0);
    }
    std::fs::write(&log, &bytes).expect("flip");
    let i = epochdb::inspect(&dir, &[]).expect("inspect");
    assert!(i.problems.is_empty(), "{:?}", i.problems);
    let db = Database::open(options()).expect("recovery drops it");
    let r = db.recovery_report().expect("report");
    assert!(r.pepoch == lo - 1 && r.consistent && !r.dropped.is_empty(), "{r:?}");
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
    let two = || {
        let mut o = durable_options(&data, Durability::Log);
        o.log.dirs = logs.to_vec();
        o
    };
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
    // Naming other directories is an error that names both.
    let mut other = durable_options(&data, Durability::Log);
    other.log.dirs = vec![dir.join("disk-c")];
    let e = Database::open(other).expect_err("other log directories");
    assert!(matches!(e, Error::DirectoryMismatch { kind: "log", .. }), "{e}");
    assert!(e.to_string().contains("disk-a") && e.to_string().contains("disk-c"), "{e}");
    check_rows(&data, durable_options(&data, Durability::Log), &model);
}

/// Reopens with `options` and compares table `t` with `model`.
fn check_rows(_dir: &Path, options: Options, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Database::open(options).expect("reopen");
    let got = contents(&db, db.table("t").expect("t"));
    assert!(&got == model, "reopened with {} of {} rows", got.len(), model.len());
}

/// A truncated pepoch file: refused (the error says what salvage would
/// do), and salvage falls back to the epoch the logs reach, and says so.
#[test]
fn a_truncated_pepoch_file_is_salvaged_from_the_logs_own_epochs() {
    let dir = temp_dir("safety-pepoch");
    let model = {
        let db = Database::open(durable_options(&dir, Durability::Log)).expect("open");
        write_rows(&db, 0, 50)
    };
    std::fs::write(dir.join("pepoch"), b"EPOCHPEP").expect("truncate");
    let e = Database::open(durable_options(&dir, Durability::Log)).expect_err("unreadable pepoch");
    let msg = e.to_string();
    assert!(matches!(e, Error::Corrupt { salvage: Some(_), .. }) && msg.contains("pepoch"), "{msg}");
    assert!(msg.contains("salvage would take the epoch the logs reach"), "{msg}");
    let db = Database::open(salvaging(durable_options(&dir, Durability::Log))).expect("salvage");
    let r = db.recovery_report().expect("report").clone();
    assert!(r.recorded_pepoch.is_none() && r.dropped.iter().any(|d| d.contains("from the logs")), "{r:?}");
    // Every row but those of the log's last epoch (a guess can only be
    // that safe) is back.
    let got = contents(&db, db.table("t").expect("t"));
    assert!(got.len() + 1 >= model.len() && got.iter().all(|(k, v)| model.get(k) == Some(v)), "{r:?}");
    drop(db);
    // The salvaged state is the database now: it opens without salvage.
    let db = Database::open(durable_options(&dir, Durability::Log)).expect("reopen after salvage");
    assert_eq!(contents(&db, db.table("t").expect("t")).len(), got.len());
}

/// Salvage is offered only where it helps: not for a corrupt manifest.
#[test]
fn a_corrupt_manifest_offers_no_salvage() {
    let dir = temp_dir("safety-manifest");
    drop(Database::open(durable_options(&dir, Durability::Log)).expect("open"));
    let mut bytes = std::fs::read(dir.join("manifest")).expect("read");
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(dir.join("manifest"), &bytes).expect("write");
    let e = Database::open(durable_options(&dir, Durability::Log)).expect_err("corrupt");
    assert!(matches!(e, Error::Corrupt { salvage: None, .. }), "{e}");
    assert!(e.to_string().contains("manifest") && !e.to_string().contains("salvage"), "{e}");
}

/// Errors name the path and the operation that failed.
#[test]
fn io_errors_name_their_path_and_operation() {
    let dir = temp_dir("safety-io");
    let file = dir.join("afile");
    std::fs::write(&file, b"not a directory").expect("file");
    let e = Database::open(durable_options(&file, Durability::Log)).expect_err("a file");
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().contains("open data directory") && e.to_string().contains("afile"), "{e}");
}

/// A disk too full for the log's preallocation fails the open, and leaves
/// no `data.log.new` behind.
#[test]
fn an_open_on_a_full_disk_leaves_nothing_half_made() {
    let dir = temp_dir("safety-full-open");
    let faults = Faults::new();
    faults.disk_space(1 << 20); // the pepoch file and manifest fit; 32 MiB of log does not
    let mut options = durable_options(&dir, Durability::Log);
    options.testing.faults = Some(faults);
    let e = Database::open(options).expect_err("no room for the log");
    assert!(e.to_string().contains("fallocate") && e.to_string().contains("data.log.new"), "{e}");
    assert!(!dir.join("log/data.log.new").exists(), "left behind");
    Database::open(durable_options(&dir, Durability::Log)).expect("opens once there is room");
}

/// A table handle of one database is an error on another, not a silent
/// access to the table that happens to have its number.
#[test]
fn a_table_handle_from_another_database_is_refused() {
    let (a, b) = (Database::open(Options::default()).expect("a"), Database::open(Options::default()).expect("b"));
    let ta = a.create_table("t", TableOptions::new()).expect("t in a");
    let tb = b.create_table("t", TableOptions::new()).expect("t in b");
    let mut w = b.worker().expect("worker");
    w.run(|txn| txn.put(tb, b"k", b"b's")).expect("put");
    let e = w.run(|txn| txn.get(ta, b"k").map(|v| v.map(<[u8]>::to_vec))).expect_err("foreign handle");
    assert!(matches!(e, Error::ForeignTable(_)), "{e}");
    assert!(matches!(b.schema(ta), Err(Error::ForeignTable(_))));
    assert!(matches!(w.snapshot().expect("snapshot").get(ta, b"k"), Err(Error::ForeignTable(_))));
}

/// A read-only open recovers, reads, and refuses every write; it runs
/// beside other readers, not beside a writer.
#[test]
fn a_read_only_open_writes_nothing() {
    let dir = temp_dir("safety-read-only");
    let model = {
        let db = Database::open(durable_options(&dir, Durability::LogAndCheckpoint)).expect("open");
        write_rows(&db, 0, 30)
    };
    let listing = || files::snapshot_of(&dir);
    let before = listing();
    let read_only = || Options { read_only: true, ..durable_options(&dir, Durability::LogAndCheckpoint) };
    let db = Database::open(read_only()).expect("read-only open");
    let other = Database::open(read_only()).expect("two readers");
    assert!(matches!(Database::open(durable_options(&dir, Durability::Log)), Err(Error::Locked(_))));
    let t = db.table("t").expect("t");
    assert_eq!(contents(&db, t), model);
    let mut w = db.worker().expect("worker");
    assert!(matches!(w.run(|txn| txn.put(t, b"new", b"v")), Err(Error::ReadOnly)));
    assert!(matches!(db.create_table("u", TableOptions::new()), Err(Error::ReadOnly)));
    drop((w, db, other));
    assert!(before == listing(), "a read-only open changed the directory");
    let e = Database::open(Options { read_only: true, ..durable_options(&dir.join("none"), Durability::Log) });
    assert!(matches!(e, Err(Error::NotADatabase(_))), "{e:?}");
}

/// `set_aside` (a deposed primary's directory, kept): it moves the whole
/// database, which opens there with every row; never while the database
/// is open (`Locked`), never a directory holding a file epochdb did not
/// write (`ForeignFile`), and never onto something that exists.
#[test]
fn a_database_is_set_aside_whole_and_only_when_it_is_closed_and_ours() {
    let base = temp_dir("set-aside");
    let (dir, aside) = (base.join("data"), base.join("data.deposed"));
    let options = durable_options(&dir, Durability::LogAndCheckpoint);
    let db = Database::open(options.clone()).expect("open");
    let model = write_rows(&db, 0, 50);
    assert!(matches!(epochdb::set_aside(&options, &aside), Err(Error::Locked { .. })), "moved while open");
    assert!(dir.is_dir() && !aside.exists());
    // While it is open, a file the plan cannot place (as a checkpoint half
    // written can be, for a moment) still answers that it is open.
    std::fs::write(dir.join("stray.txt"), b"mid-write").expect("a stray file");
    let e = epochdb::set_aside(&options, &aside);
    assert!(matches!(e, Err(Error::Locked { .. })), "{e:?}");
    assert!(matches!(epochdb::destroy(&options), Err(Error::Locked { .. })));
    std::fs::remove_file(dir.join("stray.txt")).expect("remove the stray file");
    drop(db);
    std::fs::write(dir.join("notes.txt"), b"mine").expect("a file of someone else's");
    assert!(matches!(epochdb::set_aside(&options, &aside), Err(Error::ForeignFile { .. })));
    assert!(dir.is_dir() && !aside.exists());
    std::fs::remove_file(dir.join("notes.txt")).expect("remove it");
    std::fs::create_dir_all(&aside).expect("in the way");
    assert!(epochdb::set_aside(&options, &aside).is_err(), "moved onto an existing directory");
    std::fs::remove_dir(&aside).expect("clear the way");
    assert!(epochdb::set_aside(&options, &aside).expect("set aside"));
    assert!(!dir.exists());
    check_rows(&aside, Options { data_dir: Some(aside.clone()), ..options.clone() }, &model);
    assert!(!epochdb::set_aside(&options, &aside).expect("nothing there"), "a missing directory is nothing to move");
    let _ = std::fs::remove_dir_all(&base);
}

/// `skip_freeing_at_close` leaves only memory behind: the close still
/// makes every commit durable (writes not waited for included) and
/// releases the directory, so a reopen in the same process finds them.
#[test]
fn a_close_that_skips_freeing_still_flushes_and_unlocks() {
    let dir = temp_dir("safety-skip-freeing");
    let options = || durable_options(&dir, Durability::Log);
    let mut model = BTreeMap::new();
    {
        let db = Database::open(options()).expect("open");
        let t = db.create_table("t", TableOptions::new()).expect("table");
        let mut w = db.worker().expect("worker");
        for i in 0..500u32 {
            let (k, v) = (format!("k{i:04}").into_bytes(), format!("value {i}").into_bytes());
            w.run(|txn| txn.put(t, &k, &v)).expect("put"); // not waited for
            model.insert(k, v);
        }
        db.skip_freeing_at_close();
    }
    check_rows(&dir, options(), &model);
}

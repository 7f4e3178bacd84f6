//! Replication: a primary ships its log to a backup, which
//! persists it in a data directory of its own; `Sync` releases a commit
//! only once the in-sync backups have it.

use epochdb::{Backup, BackupOptions, Database, Durability, Options, PrimaryOptions, Safety, TableOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("epochdb-repl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn primary(data: &Path, safety: Safety, ack_timeout: Duration) -> Database {
    primary_logging(data, safety, ack_timeout, Durability::Log)
}

fn primary_logging(data: &Path, safety: Safety, ack_timeout: Duration, durability: Durability) -> Database {
    let p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        safety,
        ack_timeout,
        ..PrimaryOptions::default()
    };
    let options = Options {
        durability,
        data_dir: Some(data.to_path_buf()),
        epoch_interval: Duration::from_millis(5),
        log: epochdb::LogOptions { dirs: vec![data.join("log-a"), data.join("log-b")], ..Default::default() }, // two streams
        primary: Some(p),
        ..Options::default()
    };
    Database::open(options).expect("open the primary")
}

fn addr(db: &Database) -> String {
    db.replication_status().expect("a primary").listen.to_string()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for a checkpoint begun after everything written so far (an idle
/// database takes none of its own accord).
fn checkpoint_after_writes(db: &Database) {
    let (after, installed) = (db.epoch(), db.checkpoint_stats().installed);
    db.request_checkpoint().expect("request a checkpoint");
    wait_until("a checkpoint begun after the writes", || {
        let s = db.checkpoint_stats();
        s.installed > installed && s.epoch >= after
    });
}

/// Promotion by hand: the backup's directory opened as a database.
fn promote(bdir: &Path) -> epochdb::Result<Database> {
    let options = Options { durability: Durability::Log, data_dir: Some(bdir.to_path_buf()), ..Options::default() };
    Database::open(Options { read_only: true, ..options })
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Every row of `t`, read in one transaction.
fn rows(w: &mut epochdb::Worker, t: epochdb::TableId) -> Rows {
    let mut out = Vec::new();
    w.run(|txn| {
        out.clear();
        txn.scan(t, .., usize::MAX, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .map(|_| ())
    })
    .expect("scan");
    out
}

/// Every row of `t` in a snapshot.
fn snapshot_rows(snap: &mut epochdb::SnapshotTxn<'_>, t: epochdb::TableId) -> Rows {
    let mut out = Vec::new();
    snap.scan(t, .., usize::MAX, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    out
}

/// Every row of `table` on `backup`'s standby once its read view covers
/// `epoch` (waiting up to a minute).
fn standby_rows(backup: &Backup, table: &str, epoch: u64) -> Rows {
    let standby = backup.database();
    let mut sw = standby.worker().expect("worker");
    let fresh = epochdb::Freshness::AtLeast { epoch, wait: Duration::from_secs(60) };
    let mut snap = sw.snapshot_fresh(fresh).unwrap_or_else(|e| panic!("{e}: {:?}", backup.status()));
    snapshot_rows(&mut snap, standby.table(table).expect("table"))
}

/// A backup of `db` in `dir` that, once promoted, takes backups of its own.
fn promotable(dir: &Path, db: &Database) -> BackupOptions {
    let mut o = BackupOptions::new(dir, addr(db));
    o.database.epoch_interval = Duration::from_millis(5);
    o.database.primary = Some(PrimaryOptions { listen: "127.0.0.1:0".parse().expect("parse"), ..Default::default() });
    o
}

fn in_sync(db: &Database, n: usize) -> bool {
    db.replication_status().expect("replication status").backups.iter().filter(|b| b.in_sync).count() == n
}

/// Every write `run_durable` acknowledged under `Sync` is in the backup's
/// directory, which opens as a database (a promotion by hand); released
/// never passes what the in-sync backup acknowledged.
#[test]
fn a_sync_backup_has_every_acknowledged_commit() {
    let (pdir, bdir) = (dir("sync-p"), dir("sync-b"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    // A table created before the backup connects, and one after.
    let early = db.create_table("early", TableOptions::new()).expect("create table");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    wait_until("the backup is in sync", || in_sync(&db, 1));
    let late = db.create_table("late", TableOptions::new()).expect("create table");
    let acked: Vec<Vec<u64>> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let mut worker = db.worker().expect("worker");
                    let mut acked = Vec::new();
                    for i in 0..300u64 {
                        let key = (w * 1_000_000 + i).to_be_bytes();
                        let t = if i % 2 == 0 { early } else { late };
                        worker.run_durable(|txn| txn.put(t, &key, &i.to_le_bytes())).expect("a durable put");
                        acked.push(w * 1_000_000 + i);
                    }
                    acked
                })
            })
            .collect();
        let mut checks = 0;
        while writers.iter().any(|w| !w.is_finished()) {
            let st = db.replication_status().expect("replication status");
            for b in st.backups.iter().filter(|b| b.in_sync) {
                // `replication_status` reads the released epoch before the
                // acknowledgements, which only grow.
                assert!(st.released <= b.acked, "released {} past the backup's {}", st.released, b.acked);
                checks += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(checks > 0);
        writers.into_iter().map(|w| w.join().expect("join")).collect()
    });
    assert!(backup.persisted_epoch() >= db.durable_epoch());
    backup.stop().expect("stop");
    // Promote by hand: the backup's directory is a database.
    let promoted = promote(&bdir).expect("open the backup's directory");
    let mut w = promoted.worker().expect("worker");
    let (e2, l2) = (promoted.table("early").expect("table"), promoted.table("late").expect("table"));
    for k in acked.iter().flatten() {
        let t = if k % 2 == 0 { e2 } else { l2 };
        let got = w.run(|txn| Ok(txn.get(t, &k.to_be_bytes())?.map(<[u8]>::to_vec))).expect("replication test step");
        assert_eq!(got, Some((k % 1_000_000).to_le_bytes().to_vec()), "key {k}");
    }
    drop((w, promoted, db));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A frame of `body` (FORMAT.md, "Replication stream").
fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f.extend_from_slice(&epochdb::crc32c::checksum(body).to_le_bytes());
    f
}

/// A backup written from FORMAT.md alone: connects, answers the
/// challenge (4 + 1 + 8 + 2 + 32 + 4 bytes) with a hello that says it
/// persisted `pepoch` in term 0, with the proof for the empty secret, and
/// returns the socket, where the welcome comes next.
fn fake_backup(addr: &str, pepoch: u64) -> std::net::TcpStream {
    let mut sock = std::net::TcpStream::connect(addr).expect("connect");
    let mut challenge = [0u8; 51];
    sock.read_exact(&mut challenge).expect("read the challenge");
    assert_eq!(challenge[4], 9, "a challenge");
    let primary_nonce = &challenge[15..47];
    let nonce = [7u8; 32];
    let proof = {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"").expect("any key length");
        mac.update(b"epochdb backup\0");
        mac.update(primary_nonce);
        mac.update(&nonce);
        mac.finalize().into_bytes()
    };
    let mut body = vec![1u8];
    body.extend_from_slice(b"EPOCHREP");
    body.extend_from_slice(&6u16.to_le_bytes()); // the stream version (FORMAT.md)
    body.extend_from_slice(&pepoch.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes()); // term
    body.extend_from_slice(&0u64.to_le_bytes()); // its first epoch
    body.extend_from_slice(&0u64.to_le_bytes()); // its id
    body.extend_from_slice(&pepoch.to_le_bytes()); // the top of its log
    body.extend_from_slice(&nonce);
    body.extend_from_slice(&proof);
    body.extend_from_slice(&0u64.to_le_bytes()); // no control-plane node id
    sock.write_all(&frame(&body)).expect("send the hello");
    sock
}

/// A fake backup that acknowledges until it is in sync and then goes
/// silent holds `Sync` releases back, until the ack timeout drops it; then
/// the primary goes on.
#[test]
fn a_silent_backup_holds_sync_release_for_the_ack_timeout_only() {
    let pdir = dir("silent");
    let timeout = Duration::from_millis(600);
    let db = primary(&pdir, Safety::Sync, timeout);
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut sock = fake_backup(&addr(&db), 0);
    let mut first = [0u8; 5];
    sock.read_exact(&mut first).expect("read exact");
    assert_eq!(first[4], 2, "a welcome");
    // Acknowledgements of everything released so far, until it counts as
    // in sync: release moves on every epoch, so on a loaded machine one
    // can arrive after the next release and join nothing.
    wait_until("the fake backup is in sync", || {
        let mut ack = vec![7u8];
        ack.extend_from_slice(&db.durable_epoch().to_le_bytes());
        sock.write_all(&frame(&ack)).expect("write all");
        in_sync(&db, 1)
    });
    let mut w = db.worker().expect("worker");
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v")).expect("run with info");
    let start = Instant::now();
    std::thread::sleep(timeout / 3);
    assert!(!db.is_durable(info.epoch).expect("is durable"), "released past a backup that never acknowledged it");
    w.wait_durable(info.epoch).expect("wait durable");
    let waited = start.elapsed();
    assert!(waited >= timeout / 3, "{waited:?}");
    assert!(waited < timeout * 4, "the primary stalled {waited:?} for a silent backup");
    assert!(db.replication_status().expect("replication status").backups.is_empty(), "the silent backup was dropped");
    drop((w, db, sock));
    std::fs::remove_dir_all(pdir).ok();
}

/// `VerySafe` releases nothing until its backup is in sync.
#[test]
fn very_safe_waits_for_its_backup() {
    let (pdir, bdir) = (dir("vs-p"), dir("vs-b"));
    let db = primary(&pdir, Safety::VerySafe, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut w = db.worker().expect("worker");
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v")).expect("run with info");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!db.is_durable(info.epoch).expect("is durable"));
    assert!(db.replication_status().expect("replication status").local >= info.epoch, "durable here, not released");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    w.wait_durable(info.epoch).expect("wait durable");
    assert!(backup.persisted_epoch() >= info.epoch);
    backup.stop().expect("stop");
    drop((w, db));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A backup that restarts resumes from the primary's backlog and misses
/// nothing; a backup of another database is refused, not damaged.
#[test]
fn a_restarted_backup_resumes_and_a_foreign_one_is_refused() {
    let (pdir, bdir, odir) = (dir("resume-p"), dir("resume-b"), dir("resume-o"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut w = db.worker().expect("worker");
    let mut backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    for round in 0..3u64 {
        wait_until("the backup is in sync", || in_sync(&db, 1));
        for i in 0..50u64 {
            w.run_durable(|txn| txn.put(t, &(round * 100 + i).to_be_bytes(), b"x")).expect("replication test step");
        }
        backup.stop().expect("stop");
        // Writes while it is away (released at the local pepoch meanwhile).
        w.run_durable(|txn| txn.put(t, &(round * 100 + 99).to_be_bytes(), b"away")).expect("replication test step");
        backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    }
    wait_until("the backup is in sync", || in_sync(&db, 1));
    let top = db.durable_epoch();
    wait_until("the backup has caught up", || backup.persisted_epoch() >= top);
    backup.stop().expect("stop");
    // Another database's directory: refused with a typed error.
    {
        let other =
            Database::open(Options { durability: Durability::Log, data_dir: Some(odir.clone()), ..Options::default() })
                .expect("replication test step");
        other.create_table("something-else", TableOptions::new()).expect("create table");
    }
    let foreign = Backup::start(BackupOptions::new(&odir, addr(&db))).expect("replication test step");
    wait_until("the foreign backup stops", || foreign.is_finished());
    assert!(foreign.stop().is_err());
    drop((w, db));
    let promoted = promote(&bdir).expect("replication test step");
    let t = promoted.table("t").expect("table");
    let mut w = promoted.worker().expect("worker");
    let n = w.run(|txn| txn.scan(t, .., usize::MAX, |_, _| true)).expect("run");
    assert_eq!(n, 3 * 51);
    drop((w, promoted));
    for d in [pdir, bdir, odir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A replication primary reopened begins a new term above everything it
/// had (it may have shipped epochs its restart no longer has), keeping its
/// pepoch; a backup of the old term that has nothing beyond it follows.
#[test]
fn a_restarted_primary_begins_a_new_term_and_its_backup_follows() {
    let (pdir, bdir) = (dir("restart-p"), dir("restart-b"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    wait_until("the backup is in sync", || in_sync(&db, 1));
    let mut w = db.worker().expect("worker");
    for i in 0..20u64 {
        w.run_durable(|txn| txn.put(t, &i.to_be_bytes(), b"old")).expect("put");
    }
    let before = db.durable_epoch();
    wait_until("the backup has caught up", || backup.persisted_epoch() >= before);
    assert_eq!(db.term().0, 0, "no promotion yet");
    backup.stop().expect("stop");
    drop((w, db));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    let (term, first) = db.term();
    let kept = db.promotion_kept().expect("a new term");
    assert_eq!(term, 1);
    assert!(kept >= before && first > kept, "term 1 from {first}, kept {kept}, released before {before}");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    wait_until("the backup is in sync again", || in_sync(&db, 1));
    let t = db.table("t").expect("table");
    let mut w = db.worker().expect("worker");
    for i in 20..40u64 {
        w.run_durable(|txn| txn.put(t, &i.to_be_bytes(), b"new")).expect("put");
    }
    let top = db.durable_epoch();
    assert!(top >= first);
    wait_until("the backup has the new term", || backup.persisted_epoch() >= top);
    backup.stop().expect("stop");
    drop((w, db));
    let promoted = promote(&bdir).expect("open the backup");
    let t = promoted.table("t").expect("table");
    let mut w = promoted.worker().expect("worker");
    assert_eq!(rows(&mut w, t).len(), 40);
    drop((w, promoted));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// The backup is a hot standby. Its snapshots never show part of an epoch
/// (a bank's total and a churned table's row count stay constant while
/// transfers, growing values, inserts and deletes run on the primary),
/// never an epoch the primary has not released, and never go back; a read
/// can ask for a write's epoch to see it. Writes are refused, and a
/// standby cut off from its primary answers a bounded read with `Stale`.
/// Reads come both back to back and after pauses (after which replay has
/// stopped keeping old versions for them).
#[test]
fn a_hot_standby_serves_consistent_released_snapshots() {
    use epochdb::{Error, Freshness};
    const ACCOUNTS: u64 = 100;
    const CHURN: u64 = 50;
    let (pdir, bdir) = (dir("standby-p"), dir("standby-b"));
    let db = primary(&pdir, Safety::Async, Duration::from_secs(5));
    let bank = db.create_table("bank", TableOptions::new()).expect("create table");
    let churn = db.create_table("churn", TableOptions::new()).expect("create table");
    // A balance, padded to a length that changes with it: updates both
    // overwrite in place and outgrow their record.
    let encode = |b: u64| format!("{b}:{}", "x".repeat((b % 29) as usize)).into_bytes();
    let decode = |v: &[u8]| -> u64 {
        let s = std::str::from_utf8(v).expect("utf-8");
        s.split(':').next().expect("balance").parse().expect("a number")
    };
    let mut w = db.worker().expect("worker");
    let ((), loaded) = w
        .run_with_info(|txn| {
            for a in 0..ACCOUNTS {
                txn.put(bank, &a.to_be_bytes(), &encode(1000))?;
            }
            for k in 0..CHURN {
                txn.put(churn, &k.to_be_bytes(), b"row")?;
            }
            Ok(())
        })
        .expect("load");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    // A first read view may come before the load's epoch (an empty bank,
    // consistent, but not what the checks below compare with).
    wait_until("the standby's read view shows the load", || backup.read_view() >= loaded.epoch);
    let standby = backup.database().clone();
    let (sbank, schurn) = (standby.table("bank").expect("table"), standby.table("churn").expect("table"));
    let done = std::sync::atomic::AtomicBool::new(false);
    let checks = std::thread::scope(|s| {
        let mut writers = Vec::new();
        for t in 0..2u64 {
            let (db, encode, decode) = (&db, &encode, &decode);
            writers.push(s.spawn(move || {
                let mut w = db.worker().expect("worker");
                for i in 0..1500u64 {
                    let (from, to) = ((i * 7 + t) % ACCOUNTS, (i * 13 + 5 + t) % ACCOUNTS);
                    w.run(|txn| {
                        let a = decode(txn.get(bank, &from.to_be_bytes())?.expect("account"));
                        let b = decode(txn.get(bank, &to.to_be_bytes())?.expect("account"));
                        if from != to && a > 0 {
                            let amount = 1 + i % a.min(40);
                            txn.put(bank, &from.to_be_bytes(), &encode(a - amount))?;
                            txn.put(bank, &to.to_be_bytes(), &encode(b + amount))?;
                        }
                        // Move one churn row to a new key: the count stays.
                        let mut victim = None;
                        txn.scan(churn, .., 1, |k, _| {
                            victim = Some(k.to_vec());
                            false
                        })?;
                        if let Some(k) = victim {
                            txn.delete(churn, &k)?;
                            txn.put(churn, &(1_000_000_000 + t * 1_000_000 + i).to_be_bytes(), b"moved")?;
                        }
                        Ok(())
                    })
                    .expect("transfer");
                }
            }));
        }
        let reader = s.spawn(|| {
            let mut w = standby.worker().expect("standby worker");
            let (mut checks, mut last_view) = (0u64, 0u64);
            while !done.load(std::sync::atomic::Ordering::Acquire) || checks < 10 {
                if checks % 4 == 3 {
                    // A pause longer than the standby's quiet stretch (25
                    // epochs of 5 ms): replay stops keeping old versions,
                    // and the next read begins after bare batches. (One
                    // that arrives during a bare batch is the unit test
                    // `bare_batches_only_without_reads_and_reads_wait_them_out`'s.)
                    std::thread::sleep(Duration::from_millis(150));
                }
                let view = backup.read_view();
                assert!(view >= last_view, "the read view went back from {last_view} to {view}");
                // Read the primary's released epoch after the view: it only grows.
                assert!(view <= db.durable_epoch(), "view {view} shows epochs the primary has not released");
                last_view = view;
                let (mut total, mut accounts, mut rows) = (0, 0, 0);
                if checks % 2 == 0 {
                    // In two halves, with epochs replayed in between: the
                    // second half reads versions kept for the snapshot.
                    use std::ops::Bound::{Excluded, Included, Unbounded};
                    let mut snap = w.snapshot().expect("snapshot");
                    let mid = (ACCOUNTS / 2).to_be_bytes();
                    for half in [(Unbounded, Excluded(&mid[..])), (Included(&mid[..]), Unbounded)] {
                        snap.scan(sbank, half, usize::MAX, |_, v| {
                            total += decode(v);
                            accounts += 1;
                            true
                        })
                        .expect("scan");
                        if matches!(half.0, Unbounded) {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    snap.scan(schurn, .., usize::MAX, |_, _| {
                        rows += 1;
                        true
                    })
                    .expect("scan");
                } else {
                    // An ordinary transaction on the standby reads at the
                    // view too: by key, and by scan.
                    let ((), info) = w
                        .run_with_info(|txn| {
                            (total, accounts, rows) = (0, 0, 0);
                            for a in 0..ACCOUNTS {
                                if let Some(v) = txn.get(sbank, &a.to_be_bytes())? {
                                    total += decode(v);
                                    accounts += 1;
                                }
                            }
                            txn.scan(schurn, .., usize::MAX, |_, _| {
                                rows += 1;
                                true
                            })?;
                            Ok(())
                        })
                        .expect("a read transaction on the standby");
                    assert!(info.tid.is_none() && info.epoch >= view && info.epoch <= db.durable_epoch());
                }
                assert_eq!((accounts, total), (ACCOUNTS, ACCOUNTS * 1000), "a read saw part of an epoch");
                assert_eq!(rows, CHURN, "a read saw a delete without its insert");
                checks += 1;
            }
            checks
        });
        writers.into_iter().for_each(|t| t.join().expect("writer"));
        done.store(true, std::sync::atomic::Ordering::Release);
        reader.join().expect("reader")
    });
    assert!(checks >= 10);
    eprintln!("{checks} consistent snapshots on the standby");
    // Read your writes: a commit's epoch, asked of the standby.
    let ((), info) = w.run_with_info(|txn| txn.put(bank, b"marker", b"m")).expect("put");
    let mut sw = standby.worker().expect("standby worker");
    let fresh = Freshness::AtLeast { epoch: info.epoch, wait: Duration::from_secs(20) };
    let mut snap = sw.snapshot_fresh(fresh).expect("a fresh snapshot");
    assert_eq!(snap.get(sbank, b"marker").expect("get"), Some(&b"m"[..]));
    drop(snap);
    let too_new = Freshness::AtLeast { epoch: info.epoch + 1_000_000, wait: Duration::from_millis(50) };
    assert!(matches!(sw.snapshot_fresh(too_new), Err(Error::Stale { .. })));
    assert!(matches!(sw.run(|txn| txn.put(sbank, b"x", b"y")), Err(Error::ReadOnly)));
    assert!(sw.snapshot_fresh(Freshness::Within(Duration::from_secs(5))).is_ok());
    // Cut off from its primary, the standby's view ages.
    drop((w, db));
    std::thread::sleep(Duration::from_millis(300));
    assert!(matches!(sw.snapshot_fresh(Freshness::Within(Duration::from_millis(200))), Err(Error::Stale { .. })));
    let st = backup.status();
    assert!(!st.connected && st.replay_error.is_none() && st.view > 0, "{st:?}");
    drop((sw, standby));
    backup.stop().expect("stop");
    // Restarted without its primary, it has no view to show yet.
    let again = Backup::start(BackupOptions::new(&bdir, "127.0.0.1:1")).expect("restart the backup");
    let mut w = again.database().worker().expect("worker");
    assert!(matches!(w.snapshot(), Err(Error::Stale { view: 0, .. })));
    assert!(matches!(w.begin(), Err(Error::Stale { view: 0, .. })), "a transaction must not see an empty database");
    drop(w);
    again.stop().expect("stop");
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A primary that logs deltas (Gawain): the standby merges each delta into
/// the row as of the entry before it (deltas of the fixed column written
/// into the record in place) and ends with the primary's rows.
#[test]
fn a_standby_of_a_delta_logging_primary_merges_columns() {
    use epochdb::{Column, Freshness, Schema};
    let schema = || {
        let columns = vec![Column::fixed("a", 8), Column::var("b", 24), Column::var("c", 64)];
        Schema::new(columns).expect("schema")
    };
    let (pdir, bdir) = (dir("delta-p"), dir("delta-b"));
    let db = primary_logging(&pdir, Safety::Async, Duration::from_secs(5), Durability::Delta);
    let t = db.create_table("rows", TableOptions::new().schema(schema())).expect("create table");
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    let row = |i: u64, c: &[u8]| schema().encode(&[&i.to_le_bytes(), format!("b{i}").as_bytes(), c]).expect("row");
    let last = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let mut worker = db.worker().expect("worker");
                    let mut last = 0;
                    for i in 0..600u64 {
                        let key = ((i * 7 + w) % 20).to_be_bytes();
                        let (_, info) = worker
                            .run_with_info(|txn| {
                                let s = schema();
                                let new = match txn.get(t, &key)?.map(<[u8]>::to_vec) {
                                    // Change one column: a delta of it alone.
                                    Some(old) if i % 3 == 0 => {
                                        let (a, c) = (s.column(&old, 0)?.to_vec(), s.column(&old, 2)?.to_vec());
                                        s.encode(&[&a, format!("w{w}i{i}").as_bytes(), &c])?
                                    }
                                    // Change the fixed column: a delta the
                                    // standby writes into the record in place.
                                    Some(old) if i % 3 == 1 => {
                                        let (b, c) = (s.column(&old, 1)?.to_vec(), s.column(&old, 2)?.to_vec());
                                        s.encode(&[&(i * 10 + w).to_le_bytes(), &b, &c])?
                                    }
                                    Some(old) => {
                                        let (a, b) = (s.column(&old, 0)?.to_vec(), s.column(&old, 1)?.to_vec());
                                        s.encode(&[&a, &b, &vec![b'c'; (i % 64) as usize]])?
                                    }
                                    None => row(i, b"new"),
                                };
                                txn.put(t, &key, &new)
                            })
                            .expect("update");
                        last = last.max(info.epoch);
                    }
                    last
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().expect("writer")).max().unwrap_or(0)
    });
    let mut w = db.worker().expect("worker");
    let primary_rows = rows(&mut w, t);
    let standby = backup.database();
    let mut sw = standby.worker().expect("worker");
    let fresh = Freshness::AtLeast { epoch: last, wait: Duration::from_secs(20) };
    let mut snap = sw.snapshot_fresh(fresh).expect("a fresh snapshot");
    let st = standby.table("rows").expect("table");
    let standby_rows = snapshot_rows(&mut snap, st);
    drop(snap);
    assert_eq!(standby_rows.len(), 20);
    assert_eq!(standby_rows, primary_rows);
    assert!(backup.status().replay_error.is_none());
    drop((sw, w, db));
    backup.stop().expect("stop");
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// Parallel replay: a backup with three replay threads
/// bootstraps a delta-logging primary's history in one large batch, then
/// follows epochs of over 64 KiB of updates, deltas, deletes and
/// re-inserts of the same keys; each key's entries stay in TID order, so
/// the standby ends with the primary's rows.
#[test]
fn parallel_replay_keeps_each_keys_order() {
    use epochdb::{Column, Schema};
    let schema = || {
        let columns = vec![Column::fixed("n", 8), Column::var("tag", 32), Column::var("pad", 256)];
        Schema::new(columns).expect("schema")
    };
    let (pdir, bdir) = (dir("parallel-p"), dir("parallel-b"));
    let db = primary_logging(&pdir, Safety::Async, Duration::from_secs(5), Durability::Delta);
    let t = db.create_table("rows", TableOptions::new().schema(schema())).expect("create table");
    const KEYS: u64 = 2000;
    // Round `r` of updates: every key changes, by a delta of one column
    // (tag) or of another (pad), or is deleted and comes back next round.
    let round = |w: &mut epochdb::Worker, r: u64| -> u64 {
        let mut last = 0;
        for chunk in 0..KEYS / 200 {
            let (_, info) = w
                .run_with_info(|txn| {
                    let s = schema();
                    for k in chunk * 200..(chunk + 1) * 200 {
                        let key = k.to_be_bytes();
                        match (txn.get(t, &key)?.map(<[u8]>::to_vec), (k + r) % 5) {
                            (Some(_), 0) => {
                                txn.delete(t, &key)?;
                            }
                            (Some(old), 1 | 2) => {
                                let (n, pad) = (s.column(&old, 0)?.to_vec(), s.column(&old, 2)?.to_vec());
                                txn.put(t, &key, &s.encode(&[&n, format!("r{r}k{k}").as_bytes(), &pad])?)?;
                            }
                            (Some(old), _) => {
                                let (n, tag) = (s.column(&old, 0)?.to_vec(), s.column(&old, 1)?.to_vec());
                                let pad = vec![b'a' + (r % 26) as u8; 100 + (k % 150) as usize];
                                txn.put(t, &key, &s.encode(&[&n, &tag, &pad])?)?;
                            }
                            (None, _) => {
                                let row = s.encode(&[&k.to_le_bytes(), b"new", &[b'p'; 200]])?;
                                txn.put(t, &key, &row)?;
                            }
                        }
                    }
                    Ok(())
                })
                .expect("round");
            last = info.epoch;
        }
        last
    };
    let mut w = db.worker().expect("worker");
    for r in 0..6 {
        round(&mut w, r);
    }
    let mut opts = BackupOptions::new(&bdir, addr(&db));
    opts.database.recovery.threads = 3;
    // 64 KiB for replay: the history it receives before its first seal
    // stays in its log and is read back (deltas too, in a second pass).
    opts.replay_memory = 64 << 10;
    let backup = Backup::start(opts).expect("start the backup");
    let mut last = 0;
    for r in 6..12 {
        last = round(&mut w, r);
    }
    let want = rows(&mut w, t);
    let got = standby_rows(&backup, "rows", last);
    assert!(got == want, "the standby has {} rows, the primary {}", got.len(), want.len());
    let st = backup.status();
    assert!(st.replay_error.is_none(), "{st:?}");
    assert!(st.peak_pending_bytes <= 64 << 10 && st.log_replayed_bytes > 1 << 20, "{st:?}");
    drop((w, db));
    backup.stop().expect("stop");
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A backup checkpoints its standby's memory: the log files
/// below its checkpoint go, and its directory, restarted as a backup and
/// opened as a database, has the primary's rows.
#[test]
fn a_backup_checkpoints_and_drops_its_old_logs() {
    let (pdir, bdir) = (dir("bckpt-p"), dir("bckpt-b"));
    let db = primary(&pdir, Safety::Async, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut opts = BackupOptions::new(&bdir, addr(&db));
    opts.database.checkpoint.interval = Duration::from_millis(30);
    opts.database.log.rotate_epochs = 4;
    // The standby's own epochs tick faster than the primary's (5 ms): a
    // checkpoint that took its `e_l` from them, not from the read view,
    // would delete log files its restart needs.
    opts.database.epoch_interval = Duration::from_millis(1);
    let backup = Backup::start(opts.clone()).expect("start the backup");
    let standby = backup.database().clone();
    let mut w = db.worker().expect("worker");
    let mut last = 0;
    let mut i = 0u64;
    // Rows come, change and go while the backup checkpoints, until it has
    // installed three checkpoints.
    while standby.checkpoint_stats().installed < 3 {
        assert!(i < 2_000_000, "no backup checkpoints: {:?}", standby.checkpoint_stats());
        let (_, info) = w
            .run_with_info(|txn| {
                txn.put(t, &(i % 5000).to_be_bytes(), &[i as u8; 300])?;
                if i.is_multiple_of(7) {
                    txn.delete(t, &((i * 13) % 5000).to_be_bytes())?;
                }
                Ok(())
            })
            .expect("write");
        last = info.epoch;
        i += 1;
    }
    let e_l = standby.checkpoint_stats().epoch;
    assert!(e_l > 1, "{:?}", standby.checkpoint_stats());
    let want = rows(&mut w, t);
    wait_until("the backup persisted the last write", || backup.persisted_epoch() >= last);
    let old: Vec<u64> = std::fs::read_dir(bdir.join("log"))
        .expect("the backup's log directory")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("old_data.")?.parse().ok())
        .collect();
    assert!(old.iter().all(|&hi| hi >= e_l), "log files below the checkpoint at {e_l} remain: {old:?}");
    drop(standby);
    backup.stop().expect("stop");
    // Restarted, the backup recovers from its checkpoint and goes on.
    let again = Backup::start(opts).expect("restart the backup");
    let got = standby_rows(&again, "t", last);
    assert!(got == want, "the restarted standby has {} rows, the primary {}", got.len(), want.len());
    drop((w, db));
    again.stop().expect("stop");
    let promoted = promote(&bdir).expect("open the backup's directory");
    let mut pw = promoted.worker().expect("worker");
    let recovered = rows(&mut pw, promoted.table("t").expect("table"));
    assert!(recovered == want, "the backup's directory has {} rows, the primary {}", recovered.len(), want.len());
    drop((pw, promoted));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// Backups prove they hold the primary's secret, and the primary proves it
/// to them; a wrong or missing secret is refused and stops the backup. A
/// primary listening beyond loopback without a secret does not open.
#[test]
fn replication_needs_the_shared_secret() {
    use epochdb::Error;
    let (pdir, bdir) = (dir("secret-p"), dir("secret-b"));
    let mut p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        secret: Some("open sesame".into()),
        ..PrimaryOptions::default()
    };
    let options = |p: &PrimaryOptions| Options {
        durability: Durability::Log,
        data_dir: Some(pdir.clone()),
        epoch_interval: Duration::from_millis(5),
        primary: Some(p.clone()),
        ..Options::default()
    };
    let db = Database::open(options(&p)).expect("open the primary");
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    for wrong in [None, Some("guess".to_string())] {
        let opts = BackupOptions { secret: wrong, ..BackupOptions::new(&bdir, addr(&db)) };
        let backup = Backup::start(opts).expect("start the backup");
        wait_until("the backup is refused", || backup.is_finished());
        let e = backup.stop().expect_err("refused");
        assert!(e.to_string().contains("authentication failed"), "{e}");
    }
    let opts = BackupOptions { secret: Some("open sesame".into()), ..BackupOptions::new(&bdir, addr(&db)) };
    let backup = Backup::start(opts).expect("start the backup");
    let mut w = db.worker().expect("worker");
    let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v")).expect("put");
    wait_until("the backup has the write", || backup.persisted_epoch() >= info.epoch);
    backup.stop().expect("stop");
    drop((w, db));
    // Beyond loopback, a secret is required.
    p.listen = "0.0.0.0:0".parse().expect("parse");
    p.secret = None;
    assert!(matches!(Database::open(options(&p)), Err(Error::InvalidOptions(_))));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A backup new to a primary whose backlog no longer holds its history
/// catches up from the primary's installed checkpoint and log files while
/// writes go on, and ends with the primary's rows (deleted ones stay
/// deleted), in memory and in its directory.
#[test]
fn a_new_backup_bootstraps_from_the_checkpoint_and_logs() {
    use epochdb::Freshness;
    let (pdir, bdir) = (dir("boot-p"), dir("boot-b"));
    let p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        backlog_bytes: 1 << 20,
        ..PrimaryOptions::default()
    };
    let db = Database::open(Options {
        durability: Durability::LogAndCheckpoint,
        data_dir: Some(pdir.clone()),
        epoch_interval: Duration::from_millis(5),
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_millis(50), ..Default::default() },
        log: epochdb::LogOptions {
            dirs: vec![pdir.join("log-a"), pdir.join("log-b")],
            rotate_epochs: 2, // so the checkpoint's e_l leaves old logs to delete
            ..Default::default()
        },
        primary: Some(p),
        ..Options::default()
    })
    .expect("open the primary");
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut w = db.worker().expect("worker");
    // Several MiB of history, some of it deleted, all before any backup.
    for i in 0..6000u64 {
        w.run(|txn| txn.put(t, &i.to_be_bytes(), &[i as u8; 600])).expect("put");
    }
    for i in (0..6000u64).step_by(3) {
        w.run(|txn| txn.delete(t, &i.to_be_bytes()).map(|_| ())).expect("delete");
    }
    // A checkpoint begun after the load, so the load's logs are deleted.
    checkpoint_after_writes(&db);
    let backup = Backup::start(BackupOptions::new(&bdir, addr(&db))).expect("start the backup");
    let last = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut w = db.worker().expect("worker");
            let mut last = 0;
            for i in 6000..7000u64 {
                let (_, info) = w.run_with_info(|txn| txn.put(t, &i.to_be_bytes(), b"late")).expect("put");
                last = info.epoch;
            }
            last
        });
        writer.join().expect("writer")
    });
    let want = rows(&mut w, t);
    assert_eq!(want.len(), 4000 + 1000);
    let standby = backup.database();
    let mut sw = standby.worker().expect("worker");
    let fresh = Freshness::AtLeast { epoch: last, wait: Duration::from_secs(60) };
    let mut snap = sw.snapshot_fresh(fresh).unwrap_or_else(|e| panic!("{e}: {:?}", backup.status()));
    let st = standby.table("t").expect("table");
    let got = snapshot_rows(&mut snap, st);
    drop(snap);
    assert!(got == want, "the standby has {} rows, the primary {}", got.len(), want.len());
    wait_until("the backup persisted the last write", || backup.persisted_epoch() >= last);
    drop((sw, w, db));
    backup.stop().expect("stop");
    let promoted = promote(&bdir).expect("open the backup's directory");
    let mut pw = promoted.worker().expect("worker");
    let pt = promoted.table("t").expect("table");
    let recovered = rows(&mut pw, pt);
    assert!(recovered == want, "the backup's directory has {} rows, the primary {}", recovered.len(), want.len());
    drop((pw, promoted));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// Old log files a connected backup still needs survive the checkpoints
/// that would delete them (up to `retain_bytes`), and go once it leaves.
#[test]
fn log_files_a_connected_backup_needs_are_kept() {
    let pdir = dir("retain-p");
    let p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        // Room for the 1.5 MB written while the backup catches up from
        // files: with 1 MiB, a sender slowed by a loaded machine dropped
        // the backup for overrunning its backlog (1 run in 4 beside the
        // durability tests), and then nothing was held.
        backlog_bytes: 8 << 20,
        ack_timeout: Duration::from_secs(600),
        ..PrimaryOptions::default()
    };
    let db = Database::open(Options {
        durability: Durability::LogAndCheckpoint,
        data_dir: Some(pdir.clone()),
        epoch_interval: Duration::from_millis(5),
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_millis(20), ..Default::default() },
        log: epochdb::LogOptions { rotate_epochs: 2, ..Default::default() },
        primary: Some(p),
        ..Options::default()
    })
    .expect("open the primary");
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut w = db.worker().expect("worker");
    let mut write = |from: u64| {
        for i in from..from + 3000 {
            w.run(|txn| txn.put(t, &i.to_be_bytes(), &[1; 500])).expect("put");
        }
    };
    write(0);
    // A backup that says it has epoch 1, takes everything the primary
    // sends and never acknowledges more: it needs every file above epoch 1.
    let sock = fake_backup(&addr(&db), 1);
    let mut drain = sock.try_clone().expect("clone");
    let reader = std::thread::spawn(move || std::io::copy(&mut drain, &mut std::io::sink()));
    let old_files = |pdir: &Path| -> Vec<u64> {
        let names = std::fs::read_dir(pdir.join("log")).expect("log dir");
        let mut his: Vec<u64> = names
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("old_data.")?.split('.').next()?.parse().ok())
            .collect();
        his.sort_unstable();
        his
    };
    write(3000);
    checkpoint_after_writes(&db);
    let held = old_files(&pdir);
    assert!(held.iter().any(|&hi| hi > 1 && hi < 10), "the files the backup needs were deleted: {held:?}");
    // Once it leaves, the next checkpoint deletes them.
    sock.shutdown(std::net::Shutdown::Both).expect("shutdown");
    let _ = reader.join();
    wait_until("the backup is gone", || db.replication_status().expect("status").backups.is_empty());
    write(6000);
    checkpoint_after_writes(&db);
    let left = old_files(&pdir);
    assert!(!left.iter().any(|&hi| hi < 10), "files no backup needs were kept: {left:?}");
    drop((w, db));
    std::fs::remove_dir_all(pdir).ok();
}

/// A backup promoted in place (`Backup::promote`) after its `Sync`
/// primary is gone has every acknowledged commit, takes writes through
/// the workers it already had, ships them to a backup of its own, and its
/// directory recovers the old term and the new one.
#[test]
fn a_promoted_backup_keeps_every_acknowledged_commit_and_takes_writes() {
    use epochdb::Freshness;
    let (pdir, bdir, cdir) = (dir("promote-p"), dir("promote-b"), dir("promote-c"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut opts = promotable(&bdir, &db);
    opts.database.checkpoint.interval = Duration::from_millis(100);
    let backup = Backup::start(opts).expect("start the backup");
    wait_until("the backup is in sync", || in_sync(&db, 1));
    // A reader's worker on the standby, from before the promotion.
    let mut bw = backup.database().worker().expect("worker");
    let mut w = db.worker().expect("worker");
    let mut last = 0;
    for i in 0..400u64 {
        let ((), info) = w.run_with_info(|txn| txn.put(t, &i.to_be_bytes(), b"old term")).expect("put");
        last = info.epoch;
    }
    w.wait_durable(last).expect("released");
    let acked = rows(&mut w, t);
    // Commits after the last acknowledged one, that may or may not survive.
    for i in 400..450u64 {
        w.run(|txn| txn.put(t, &i.to_be_bytes(), b"old term")).expect("put");
    }
    // The backup is promoted while the old primary still runs (nothing
    // fences it yet), which goes on logging epochs the backup never had.
    let promoted = backup.promote().expect("promote");
    for i in 450..500u64 {
        w.run(|txn| txn.put(t, &i.to_be_bytes(), b"old term")).expect("put");
    }
    let deposed_epoch = db.epoch();
    w.wait_durable(deposed_epoch).expect("the deposed primary's own log");
    drop((w, db));

    assert!(!promoted.is_read_only());
    let bt = promoted.table("t").expect("table");
    let have = rows(&mut bw, bt);
    for row in &acked {
        assert!(have.contains(row), "acknowledged key {:02x?} lost", row.0);
    }
    // The old worker writes, and the new primary releases on its own.
    let ((), info) = bw.run_with_info(|txn| txn.put(bt, b"new", b"new term")).expect("a write on the promoted");
    assert!(info.epoch > last);
    bw.wait_durable(info.epoch).expect("durable on the promoted");
    let after = rows(&mut bw, bt);

    // A backup of the new primary gets the old term and the new.
    let backup2 = Backup::start(BackupOptions::new(&cdir, addr(&promoted))).expect("start a backup of the promoted");
    let standby = backup2.database();
    let mut cw = standby.worker().expect("worker");
    let fresh = Freshness::AtLeast { epoch: info.epoch, wait: Duration::from_secs(30) };
    let mut snap = cw.snapshot_fresh(fresh).unwrap_or_else(|e| panic!("{e}: {:?}", backup2.status()));
    let got = snapshot_rows(&mut snap, standby.table("t").expect("table"));
    drop(snap);
    assert!(got == after, "the new backup has {} rows, the new primary {}", got.len(), after.len());
    // A backup of the new term restarts and resumes.
    drop((cw, backup2));
    let backup2 = Backup::start(BackupOptions::new(&cdir, addr(&promoted))).expect("restart the backup");
    wait_until("the restarted backup is in sync", || in_sync(&promoted, 1));
    // The deposed primary cannot follow the new one: its log has epochs
    // the promotion did not keep.
    let deposed = Backup::start(BackupOptions::new(&pdir, addr(&promoted))).expect("start the deposed primary");
    wait_until("the deposed primary is refused", || deposed.is_finished());
    let e = deposed.error().expect("an error");
    assert!(e.contains("diverged") && e.contains("move its directory aside"), "{e}");
    drop((deposed, backup2, bw, promoted));

    // The promoted directory recovers both terms, and nothing else.
    let reopened = promote(&bdir).expect("open the promoted directory");
    let mut rw = reopened.worker().expect("worker");
    let recovered = rows(&mut rw, reopened.table("t").expect("table"));
    assert!(recovered == after, "recovered {} rows, had {}", recovered.len(), after.len());
    drop((rw, reopened));
    for d in [pdir, bdir, cdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A control plane's in-sync set, held by the test: committed when it says.
#[derive(Default)]
struct Members {
    committed: std::sync::Mutex<Vec<u64>>,
    proposed: std::sync::Mutex<Vec<Vec<u64>>>,
    subscribers: std::sync::Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl epochdb::Membership for Members {
    fn committed(&self) -> Vec<u64> {
        self.committed.lock().expect("lock").clone()
    }
    fn propose(&self, nodes: Vec<u64>) {
        self.proposed.lock().expect("lock").push(nodes);
    }
    fn subscribe(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.subscribers.lock().expect("lock").push(f);
    }
}

impl Members {
    fn commit(&self, nodes: Vec<u64>) {
        *self.committed.lock().expect("lock") = nodes;
        self.subscribers.lock().expect("lock").iter().for_each(|f| f());
    }
    fn last_proposed(&self) -> Option<Vec<u64>> {
        self.proposed.lock().expect("lock").last().cloned()
    }
}

/// Fencing: nothing is released while the lease has lapsed, and a backup
/// of the committed in-sync set holds release after it is gone until a set
/// without it is committed (else it could be promoted without commits that
/// were released).
#[test]
fn release_waits_for_the_lease_and_for_the_committed_in_sync_set() {
    let (pdir, bdir) = (dir("fence-p"), dir("fence-b"));
    let members = std::sync::Arc::new(Members::default());
    let lease = std::sync::Arc::new(epochdb::Lease::expired());
    let p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        safety: Safety::Sync,
        ack_timeout: Duration::from_millis(500),
        membership: Some(members.clone()),
        ..PrimaryOptions::default()
    };
    let options = Options {
        durability: Durability::Log,
        data_dir: Some(pdir.clone()),
        epoch_interval: Duration::from_millis(5),
        primary: Some(p),
        lease: Some(lease.clone()),
        ..Options::default()
    };
    let db = Database::open(options.clone()).expect("open the primary");
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut w = db.worker().expect("worker");
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"a", b"1")).expect("commit");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!db.is_durable(info.epoch).expect("is durable"), "released without a lease");
    lease.renew(Instant::now() + Duration::from_secs(3600));
    w.wait_durable(info.epoch).expect("released once leased");

    // Backup 7 joins; the primary asks for it in the set, which commits.
    let backup = Backup::start(BackupOptions { node: 7, ..BackupOptions::new(&bdir, addr(&db)) }).expect("backup");
    wait_until("the backup is in sync", || in_sync(&db, 1));
    wait_until("{7} proposed", || members.last_proposed() == Some(vec![7]));
    members.commit(vec![7]);
    let status = db.replication_status().expect("status");
    assert_eq!(status.backups[0].node, 7, "the hello names the node");
    // It goes away: release holds, past the ack timeout, until {} commits.
    backup.stop().expect("stop the backup");
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"b", b"2")).expect("commit");
    wait_until("{} proposed", || members.last_proposed() == Some(vec![]));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!db.is_durable(info.epoch).expect("is durable"), "released without backup 7, which may be promoted");
    members.commit(vec![]);
    w.wait_durable(info.epoch).expect("released once the set without it is committed");

    // The lease lapses: nothing more is released, however durable here.
    lease.revoke();
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"c", b"3")).expect("commit");
    wait_until("durable here", || db.replication_status().expect("status").local >= info.epoch);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!db.is_durable(info.epoch).expect("is durable"), "a fenced primary released a commit");
    lease.renew(Instant::now() + Duration::from_secs(3600));
    w.wait_durable(info.epoch).expect("released under the renewed lease");

    // Reopened while backup 7 is in the committed set: what it recovered
    // counts as released only once release may go on without 7 (before
    // the crash it waited for 7 too).
    members.commit(vec![7]);
    let (_, info) = w.run_with_info(|txn| txn.put(t, b"d", b"4")).expect("commit");
    wait_until("durable here", || db.replication_status().expect("status").local >= info.epoch);
    drop((w, db));
    let db = Database::open(options).expect("reopen the primary");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!db.is_durable(info.epoch).expect("is durable"), "recovered epochs released without backup 7");
    members.commit(vec![]);
    let w = db.worker().expect("worker");
    w.wait_durable(info.epoch).expect("released once the set without 7 is committed");
    drop((w, db));
    for d in [pdir, bdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// Two backups of one primary; the primary dies, one backup is promoted,
/// and the other follows it in place (no restart): it keeps everything
/// acknowledged, drops the old term's epochs the promotion made void, and
/// goes on with the new term. Its directory then recovers exactly the new
/// primary's rows.
#[test]
fn a_backup_follows_a_sibling_promoted_in_place() {
    let (pdir, bdir, cdir) = (dir("follow-p"), dir("follow-b"), dir("follow-c"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(5));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let backup_of =
        |d: &Path, node: u64| Backup::start(BackupOptions { node, ..promotable(d, &db) }).expect("start a backup");
    let (b, c) = (backup_of(&bdir, 2), backup_of(&cdir, 3));
    wait_until("both backups are in sync", || in_sync(&db, 2));
    let mut w = db.worker().expect("worker");
    let mut last = 0;
    for i in 0..300u64 {
        let ((), info) = w.run_with_info(|txn| txn.put(t, &i.to_be_bytes(), b"term 0")).expect("put");
        last = info.epoch;
    }
    w.wait_durable(last).expect("released");
    let acked = rows(&mut w, t);
    // Unacknowledged commits, then the primary dies.
    for i in 300..350u64 {
        w.run(|txn| txn.put(t, &i.to_be_bytes(), b"term 0")).expect("put");
    }
    drop((w, db));
    // Promote the backup that persisted more, as an operator would: one
    // that persisted epochs the promotion made void is refused as
    // diverged when it follows (the next test). Either may be ahead when
    // the primary stops.
    wait_until("both backups lost the primary", || !b.is_connected() && !c.is_connected());
    let (b, c, bdir, cdir) = match b.persisted_epoch() > c.persisted_epoch() {
        true => (c, b, cdir, bdir),
        false => (b, c, bdir, cdir),
    };

    let promoted = c.promote().expect("promote the backup ahead");
    let pt = promoted.table("t").expect("table");
    b.follow(addr(&promoted));
    assert_eq!(b.primary(), addr(&promoted));
    let mut pw = promoted.worker().expect("worker");
    let ((), info) = pw.run_with_info(|txn| txn.put(pt, b"new", b"term 1")).expect("a write on the promoted");
    pw.wait_durable(info.epoch).expect("durable on the promoted");
    let after = rows(&mut pw, pt);
    for row in &acked {
        assert!(after.contains(row), "acknowledged key {:02x?} lost by the promotion", row.0);
    }
    let got = standby_rows(&b, "t", info.epoch);
    assert!(got == after, "the follower has {} rows, the new primary {}", got.len(), after.len());
    wait_until("the follower is in sync with the new primary", || in_sync(&promoted, 1));
    assert!(b.diverged().is_none() && !b.is_finished());
    drop((b, pw, promoted));

    let reopened = promote(&bdir).expect("open the follower's directory");
    let mut rw = reopened.worker().expect("worker");
    let recovered = rows(&mut rw, reopened.table("t").expect("table"));
    assert!(recovered == after, "the follower's directory recovers {} rows, had {}", recovered.len(), after.len());
    drop((rw, reopened));
    for d in [pdir, bdir, cdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A backup that persisted epochs its promoted sibling did not keep
/// (their primary still runs and ships to it) leaves the old primary's
/// live stream when told to follow, and the new primary refuses it as
/// diverged: it must set its directory aside.
#[test]
fn a_backup_ahead_of_its_promoted_sibling_is_refused_when_it_follows() {
    let (pdir, bdir, cdir) = (dir("ahead-p"), dir("ahead-b"), dir("ahead-c"));
    let db = primary(&pdir, Safety::Sync, Duration::from_secs(1));
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let b = Backup::start(promotable(&bdir, &db)).expect("start b");
    let c = Backup::start(promotable(&cdir, &db)).expect("start c");
    wait_until("both backups are in sync", || in_sync(&db, 2));
    let mut w = db.worker().expect("worker");
    for i in 0..50u64 {
        w.run(|txn| txn.put(t, &i.to_be_bytes(), b"x")).expect("put");
    }
    let promoted = c.promote().expect("promote c");
    let kept = promoted.promotion_kept().expect("a promoted database");
    // The old primary goes on sealing epochs, which b persists.
    wait_until("b persisted past what c kept", || b.persisted_epoch() > kept);
    b.follow(addr(&promoted));
    wait_until("b is refused by the new primary", || b.diverged().is_some());
    let why = b.diverged().expect("refused");
    assert!(why.contains("did not keep"), "{why}");
    drop((w, b, promoted, db));
    for d in [pdir, bdir, cdir] {
        std::fs::remove_dir_all(d).ok();
    }
}

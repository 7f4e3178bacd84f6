//! Replication (issue #18): a primary ships its log to a backup, which
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
    let p = PrimaryOptions {
        listen: "127.0.0.1:0".parse().expect("parse"),
        safety,
        ack_timeout,
        ..PrimaryOptions::default()
    };
    let options = Options {
        durability: Durability::Log,
        data_dir: Some(data.to_path_buf()),
        epoch_interval: Duration::from_millis(5),
        log_dirs: vec![data.join("log-a"), data.join("log-b")], // two streams
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
    let promoted = Database::open(Options {
        durability: Durability::Log,
        data_dir: Some(bdir.clone()),
        read_only: true,
        ..Options::default()
    })
    .expect("open the backup's directory");
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

/// A fake backup that acknowledges once and then goes silent holds `Sync`
/// releases back, until the ack timeout drops it; then the primary goes on.
#[test]
fn a_silent_backup_holds_sync_release_for_the_ack_timeout_only() {
    let pdir = dir("silent");
    let timeout = Duration::from_millis(600);
    let db = primary(&pdir, Safety::Sync, timeout);
    let t = db.create_table("t", TableOptions::new()).expect("create table");
    let mut sock = std::net::TcpStream::connect(addr(&db)).expect("replication test step");
    // Hello, version 1, pepoch 0 (FORMAT.md, "Replication stream").
    let mut body = vec![1u8];
    body.extend_from_slice(b"EPOCHREP");
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    let frame = |body: &[u8]| {
        let mut f = (body.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(body);
        f.extend_from_slice(&epochdb::crc32c::checksum(body).to_le_bytes());
        f
    };
    sock.write_all(&frame(&body)).expect("write all");
    let mut first = [0u8; 5];
    sock.read_exact(&mut first).expect("read exact");
    assert_eq!(first[4], 2, "a welcome");
    // One acknowledgement, of everything released so far: in sync.
    let mut ack = vec![7u8];
    ack.extend_from_slice(&db.durable_epoch().to_le_bytes());
    sock.write_all(&frame(&ack)).expect("write all");
    wait_until("the fake backup is in sync", || in_sync(&db, 1));
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
    let promoted = Database::open(Options {
        durability: Durability::Log,
        data_dir: Some(bdir.clone()),
        read_only: true,
        ..Options::default()
    })
    .expect("replication test step");
    let t = promoted.table("t").expect("table");
    let mut w = promoted.worker().expect("worker");
    let n = w.run(|txn| txn.scan(t, .., usize::MAX, |_, _| true)).expect("run");
    assert_eq!(n, 3 * 51);
    drop((w, promoted));
    for d in [pdir, bdir, odir] {
        std::fs::remove_dir_all(d).ok();
    }
}

//! Crash tests: a child process (this test binary, re-run with an
//! environment variable) runs bank transfers with logging on, and appends
//! to a side file the id of every transaction it saw become durable. The
//! parent kills it with SIGKILL at a random moment — often during a
//! checkpoint or a log rotation, which happen every few milliseconds here
//! — recovers, and checks:
//! - the bank's total is intact, every acknowledged transfer is present,
//!   every acknowledged delete is absent, and no record carries an epoch
//!   above the recovered pepoch;
//! - a snapshot taken right after recovery sees exactly what a read/write
//!   transaction sees (it used to see a partial or empty database).
//!
//! Then the next child continues on the recovered directory, which every
//! third run is first moved (renamed, or copied with `cp -a` and the
//! original removed): a data directory must open wherever it is. Every
//! `CHAIN` runs a fresh directory starts, so that long campaigns
//! (`scripts/crash-campaign.sh`, 1,000 kills) check bounded states. It
//! runs in all four durability modes; an account is a row of balance,
//! transfer count and owner, so a transfer changes two of its three
//! columns, and delta logging logs only those.

mod common;

use common::{durable_options, temp_dir, u64_of, Rng};
use epochdb::{Column, Database, Durability, Options, Schema, TableId, TableOptions};
use epochdb_testkit::child;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

const ACCOUNTS: u64 = 64;
const INITIAL: u64 = 1000;
const CHILD_DIR: &str = "EPOCHDB_CRASH_CHILD_DIR";
const CHILD_RUN: &str = "EPOCHDB_CRASH_CHILD_RUN";
const CHILD_MODE: &str = "EPOCHDB_CRASH_CHILD_MODE";
/// Runs on one data directory before a fresh one starts.
const CHAIN: u64 = 25;

/// The durability mode a test names.
fn mode_of(name: &str) -> Durability {
    match name {
        "log" => Durability::Log,
        "log+checkpoint" => Durability::LogAndCheckpoint,
        "delta" => Durability::Delta,
        _ => Durability::DeltaAndCheckpoint,
    }
}

fn options(dir: &Path, mode: Durability) -> Options {
    let mut o = durable_options(dir, mode);
    o.checkpoint.interval = Duration::from_millis(30);
    o.log.rotate_epochs = 8;
    o
}

/// `accounts`, `journal` (one row per transfer) and `gone` (the ids of
/// journal rows deleted, written in the deleting transaction).
fn tables(db: &Database) -> [TableId; 3] {
    let account =
        Schema::new(vec![Column::fixed("balance", 8), Column::fixed("transfers", 8), Column::var("owner", 16)]);
    let accounts = TableOptions::new().schema(account.expect("schema"));
    [("accounts", accounts), ("journal", TableOptions::new()), ("gone", TableOptions::new())]
        .map(|(n, o)| db.create_table(n, o).expect("table"))
}

/// An account row.
fn account(balance: u64, transfers: u64, id: u64) -> Vec<u8> {
    let owner = format!("owner {id}");
    [&balance.to_le_bytes()[..], &transfers.to_le_bytes(), &(owner.len() as u16).to_le_bytes(), owner.as_bytes()]
        .concat()
}

/// Balance and transfer count of an account row.
fn balance(row: &[u8]) -> (u64, u64) {
    (u64_of(&row[..8]), u64_of(&row[8..16]))
}

/// The child's work; a no-op unless the parent started this process.
#[test]
fn child_process_entry_point() {
    let (Ok(dir), Ok(run)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_RUN)) else { return };
    let dir = Path::new(&dir);
    let run: u64 = run.parse().expect("run");
    let mode = mode_of(&std::env::var(CHILD_MODE).expect("mode"));
    let db = Database::open(options(dir, mode)).expect("child open");
    let [accounts, journal, gone] = tables(&db);
    let mut w = db.worker().expect("worker");
    w.run_durable(|txn| {
        if txn.get(accounts, &0u64.to_be_bytes())?.is_none() {
            for a in 0..ACCOUNTS {
                txn.put(accounts, &a.to_be_bytes(), &account(INITIAL, 0, a))?;
            }
        }
        Ok(())
    })
    .expect("init");
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let db = db.clone();
            s.spawn(move || transfer_forever(&db, dir, run, thread, [accounts, journal, gone]));
        }
    });
}

fn transfer_forever(db: &Database, dir: &Path, run: u64, thread: u64, [accounts, journal, gone]: [TableId; 3]) {
    let mut acks = child::Acks::open(dir, &format!("{run}.{thread}"));
    let mut w = db.worker().expect("worker");
    let mut rng = Rng(run * 1000 + thread + 1);
    for seq in 0u64.. {
        let id = (run << 40) | (thread << 32) | seq;
        let (from, to, amount) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS), rng.below(50));
        let (_, info) = w
            .run_with_info(|txn| {
                let (a, n) = balance(txn.get(accounts, &from.to_be_bytes())?.expect("account"));
                txn.put(accounts, &from.to_be_bytes(), &account(a - amount.min(a), n + 1, from))?;
                let (b, m) = balance(txn.get(accounts, &to.to_be_bytes())?.expect("account"));
                txn.put(accounts, &to.to_be_bytes(), &account(b + amount.min(a), m + 1, to))?;
                txn.put(journal, &id.to_be_bytes(), &[7; 40])?;
                if seq >= 3 && seq % 3 == 0 {
                    txn.delete(journal, &(id - 3).to_be_bytes())?;
                    txn.put(gone, &(id - 3).to_be_bytes(), b"")?;
                }
                Ok(())
            })
            .expect("transfer");
        acks.push(info.epoch, format!("+{id}"));
        if seq >= 3 && seq % 3 == 0 {
            acks.push(info.epoch, format!("-{}", id - 3));
        }
        // Throttled, so the state the parent verifies stays small.
        std::thread::sleep(Duration::from_micros(20));
        acks.flush(db.durable_epoch());
    }
}

/// Acknowledged inserts and deletes, from complete lines of the side files.
fn read_acks(dir: &Path) -> (HashSet<u64>, HashSet<u64>) {
    let (mut added, mut deleted) = (HashSet::new(), HashSet::new());
    for line in child::ack_lines(dir) {
        let (sign, id) = line.split_at(1);
        let id: u64 = id.parse().expect("id");
        if sign == "+" {
            added.insert(id)
        } else {
            deleted.insert(id)
        };
    }
    (added, deleted)
}

/// Every row of the three tables, read by `read` (a transaction or a snapshot).
type State = [BTreeMap<Vec<u8>, Vec<u8>>; 3];

/// Recovers `dir` and checks the invariants; returns how many acks it checked.
fn check(dir: &Path, mode: Durability) -> usize {
    let db = Database::open(options(dir, mode)).expect("recover");
    let pepoch = db.recovery_report().expect("report").pepoch;
    let [accounts, journal, gone] = tables(&db);
    let (added, deleted) = read_acks(dir);
    let mut w = db.worker().expect("worker");
    // First, before anything commits: a snapshot sees the recovered state.
    let mut snap = w.snapshot().expect("snapshot");
    let mut seen: State = Default::default();
    for (t, rows) in [accounts, journal, gone].into_iter().zip(&mut seen) {
        snap.scan(t, .., usize::MAX, |k, v| {
            rows.insert(k.to_vec(), v.to_vec());
            true
        })
        .expect("snapshot scan");
    }
    drop(snap);
    let now: State = w
        .run(|txn| {
            let mut now: State = Default::default();
            for (t, rows) in [accounts, journal, gone].into_iter().zip(&mut now) {
                txn.scan(t, .., usize::MAX, |k, v| {
                    rows.insert(k.to_vec(), v.to_vec());
                    true
                })?;
            }
            Ok(now)
        })
        .expect("scan");
    let sizes = |s: &State| s.iter().map(BTreeMap::len).collect::<Vec<_>>();
    assert!(
        seen == now,
        "a snapshot right after recovery saw {:?} rows, a transaction {:?}",
        sizes(&seen),
        sizes(&now)
    );
    w.run(|txn| {
        let mut total = 0;
        let mut n = 0;
        let mut max_epoch = 0;
        for a in 0..ACCOUNTS {
            let (v, tid) = txn.get_versioned(accounts, &a.to_be_bytes())?;
            if let Some(v) = v {
                assert_eq!(v[16..], account(0, 0, a)[16..], "account {a}: owner column");
                total += balance(v).0;
                n += 1;
                max_epoch = max_epoch.max(tid.map_or(0, |t| t.epoch()));
            }
        }
        assert!(n == 0 || (n == ACCOUNTS && total == ACCOUNTS * INITIAL), "bank: {n} accounts, total {total}");
        assert!(max_epoch <= pepoch, "a record from epoch {max_epoch} > pepoch {pepoch}");
        // A journal row leaves only together with its `gone` witness; a
        // delete may be durable without its acknowledgement, not the reverse.
        for id in &added {
            let present = txn.get(journal, &id.to_be_bytes())?.is_some();
            let deleted = txn.get(gone, &id.to_be_bytes())?.is_some();
            assert!(present != deleted, "acknowledged transfer {id:#x}: in journal {present}, deleted {deleted}");
        }
        for id in &deleted {
            assert!(txn.get(journal, &id.to_be_bytes())?.is_none(), "acknowledged delete of {id:#x} undone");
            assert!(txn.get(gone, &id.to_be_bytes())?.is_some(), "acknowledged delete of {id:#x} lost its witness");
        }
        Ok(())
    })
    .expect("check");
    added.len() + deleted.len()
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged_with_value_logging() {
    kill_9_loop("log");
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged_with_value_logging_and_checkpoints() {
    kill_9_loop("log+checkpoint");
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged_with_delta_logging() {
    kill_9_loop("delta");
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged_with_delta_logging_and_checkpoints() {
    kill_9_loop("delta+checkpoint");
}

/// Moves the data directory `dir` to a new place under `base`: renamed, or
/// (`copy`) copied with `cp -a` and the original removed.
fn relocate(dir: &Path, base: &Path, run: u64, copy: bool) -> PathBuf {
    let to = base.join(format!("db-{run}"));
    if copy {
        let cp = std::process::Command::new("cp").arg("-a").arg(dir).arg(&to).status().expect("cp");
        assert!(cp.success(), "cp -a");
        std::fs::remove_dir_all(dir).expect("remove the original");
    } else {
        std::fs::rename(dir, &to).expect("rename");
    }
    to
}

fn kill_9_loop(mode: &str) {
    let base = temp_dir(&format!("crash-{}", mode.replace('+', "-")));
    let durability = mode_of(mode);
    let dir = RefCell::new(base.join("db-0"));
    let moves = std::cell::Cell::new([0u64; 2]); // renamed, copied
    let mut rng = Rng(0x5EED);
    child::kill_and_check(
        &format!("bank {mode}"),
        6,
        |run| {
            let env = [
                (CHILD_DIR, dir.borrow().display().to_string()),
                (CHILD_RUN, run.to_string()),
                (CHILD_MODE, mode.to_string()),
            ];
            child::spawn("child_process_entry_point", &env)
        },
        || Duration::from_millis(150 + rng.below(500)),
        |run| {
            let checked = check(&dir.borrow(), durability);
            let next = match run {
                r if r % CHAIN == 0 => {
                    let _ = std::fs::remove_dir_all(&*dir.borrow());
                    base.join(format!("db-{r}"))
                }
                r if r % 3 == 0 => {
                    let mut m = moves.get();
                    m[(r % 2 == 0) as usize] += 1;
                    moves.set(m);
                    relocate(&dir.borrow(), &base, r, r % 2 == 0)
                }
                _ => dir.borrow().clone(),
            };
            *dir.borrow_mut() = next;
            checked
        },
    );
    let [renamed, copied] = moves.get();
    eprintln!("crash campaign bank {mode}: relocations: {renamed} renamed, {copied} copied");
    let _ = std::fs::remove_dir_all(&base);
}

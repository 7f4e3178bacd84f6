//! Delta logging against a model (Gawain §3). A child process runs a fixed
//! sequence of transactions that update different columns of the same few
//! rows (and insert and delete rows), each durable before the next, with
//! a checkpoint every 20 ms and a new log file every 8 epochs, so a row's
//! columns end up written by different transactions in different
//! checkpoints and log files. It acknowledges each transaction in a side
//! file. The parent kills it with SIGKILL at random moments, recovers, and
//! requires the table to equal exactly the model after the acknowledged
//! prefix of the sequence (or one transaction more: the one in flight may
//! be durable without its acknowledgement). The next child goes on from
//! there.

mod common;

use common::{contents, durable_options, temp_dir, Rng};
use epochdb::{Column, Database, Durability, Options, Schema, TableId, TableOptions};
use epochdb_testkit::child;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const ROWS: u64 = 12;
const CHILD_DIR: &str = "EPOCHDB_COLUMNS_CHILD_DIR";
const CHILD_RUN: &str = "EPOCHDB_COLUMNS_CHILD_RUN";
const CHILD_START: &str = "EPOCHDB_COLUMNS_CHILD_START";

type State = BTreeMap<Vec<u8>, Vec<u8>>;
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn schema() -> Schema {
    let columns = vec![Column::fixed("a", 8), Column::var("b", 24), Column::fixed("c", 8), Column::var("d", 64)];
    Schema::new(columns).expect("schema")
}

fn options(dir: &Path) -> Options {
    let mut options = durable_options(dir, Durability::DeltaAndCheckpoint);
    options.checkpoint.interval = Duration::from_millis(20);
    options.log.rotate_epochs = 8;
    options
}

fn table(db: &Database) -> TableId {
    db.create_table("rows", TableOptions::new().schema(schema())).expect("table")
}

/// Column `c` as transaction `i` writes it (the variable ones change length).
fn column(c: usize, i: u64) -> Vec<u8> {
    match c {
        0 => i.to_le_bytes().to_vec(),
        1 => format!("b{i}").repeat((i % 3 + 1) as usize).into_bytes(),
        2 => (i * 3).to_le_bytes().to_vec(),
        _ => vec![b'd'; (i % 64) as usize],
    }
}

fn encode(cols: &[Vec<u8>]) -> Vec<u8> {
    schema().encode(&cols.iter().map(Vec::as_slice).collect::<Vec<_>>()).expect("row")
}

/// Transaction `i`'s writes, given the rows it reads: one to three rows,
/// each inserted whole if absent, else deleted (1 in 12) or updated in a
/// random nonempty subset of its columns.
fn plan(i: u64, mut read: impl FnMut(&[u8]) -> Option<Vec<u8>>) -> Writes {
    let s = schema();
    let mut rng = Rng(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut writes: Writes = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let key = format!("row{}", rng.below(ROWS)).into_bytes();
        let current = match writes.iter().rev().find(|w| w.0 == key) {
            Some(w) => w.1.clone(),
            None => read(&key),
        };
        let new = match current {
            None => Some(encode(&(0..4).map(|c| column(c, i)).collect::<Vec<_>>())),
            Some(_) if rng.below(12) == 0 => None,
            Some(row) => {
                let mask = 1 + rng.below(15);
                let cols: Vec<Vec<u8>> = (0..4)
                    .map(
                        |c| if mask >> c & 1 == 1 { column(c, i) } else { s.column(&row, c).expect("column").to_vec() },
                    )
                    .collect();
                Some(encode(&cols))
            }
        };
        writes.push((key, new));
    }
    writes
}

/// The table after transactions `0..n`.
fn model(n: u64) -> State {
    let mut m = State::new();
    for i in 0..n {
        for (k, v) in plan(i, |k| m.get(k).cloned()) {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
    }
    m
}

/// The child's work; a no-op unless the parent started this process.
#[test]
fn child_process_entry_point() {
    let (Ok(dir), Ok(run), Ok(start)) =
        (std::env::var(CHILD_DIR), std::env::var(CHILD_RUN), std::env::var(CHILD_START))
    else {
        return;
    };
    let dir = Path::new(&dir);
    let start: u64 = start.parse().expect("start");
    let db = Database::open(options(dir)).expect("child open");
    let t = table(&db);
    let mut w = db.worker().expect("worker");
    let mut acks = child::Acks::open(dir, &run);
    for i in start.. {
        w.run_durable(|txn| {
            let mut failed = None;
            let writes = plan(i, |k| match txn.get(t, k) {
                Ok(v) => v.map(<[u8]>::to_vec),
                Err(e) => {
                    failed.get_or_insert(e);
                    None
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
            for (k, v) in writes {
                match v {
                    Some(v) => txn.put(t, &k, &v)?,
                    None => _ = txn.delete(t, &k)?,
                }
            }
            Ok(())
        })
        .expect("transaction");
        acks.write_now(&i.to_string()); // `run_durable` waited for durability
    }
}

#[test]
fn column_updates_across_checkpoints_and_crashes_recover_exactly_the_model() {
    let dir = temp_dir("columns");
    let next = Cell::new(0u64); // the first transaction the next child runs
    let mut rng = Rng(0xC01);
    child::kill_and_check(
        "columns",
        10,
        |run| {
            let env = [
                (CHILD_DIR, dir.display().to_string()),
                (CHILD_RUN, run.to_string()),
                (CHILD_START, next.get().to_string()),
            ];
            child::spawn("child_process_entry_point", &env)
        },
        || Duration::from_millis(150 + rng.below(400)),
        |_| {
            let acked = child::ack_lines(&dir).iter().map(|l| l.parse::<u64>().expect("ack") + 1).max().unwrap_or(0);
            let acked = acked.max(next.get());
            let db = Database::open(options(&dir)).expect("recover");
            let r = db.recovery_report().expect("report");
            assert!(r.dropped.iter().all(|d| d.contains("torn tail")), "{r:?}");
            let got = contents(&db, table(&db));
            if got == model(acked) {
                next.set(acked);
            } else {
                assert_eq!(got, model(acked + 1), "neither the acknowledged {acked} transactions nor one more");
                next.set(acked + 1);
            }
            acked as usize
        },
    );
}

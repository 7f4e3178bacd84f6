//! `epochdb bench churn`: range scans under insert/delete churn (issue
//! #17). One thread runs a queue: it inserts a new key at the head and
//! deletes the oldest at the tail, one transaction each. Another runs
//! read/write transactions that scan the first `--scan` live rows from the
//! start of the table (as a queue's consumer does, e.g. TPC-C's delivery)
//! and write one row. Deleted records a scan meets are tombstones until
//! garbage collection unhooks them; the report counts the records each
//! scan visited, to show how many it waded through.

use crate::args::{epoch_ms, failed, run_secs, CliResult};
use crate::say;
use clap::Args;
use epochdb::{Database, Options, TableOptions};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `epochdb bench churn`.
#[derive(Debug, Args)]
pub struct ChurnArgs {
    /// Measured seconds
    #[arg(long, value_name = "S", default_value = "10", value_parser = run_secs, allow_negative_numbers = true)]
    duration: f64,
    /// Epoch length in milliseconds
    #[arg(long, value_name = "MS", default_value = "40", value_parser = epoch_ms, allow_negative_numbers = true)]
    epoch_ms: f64,
    /// Snapshot epochs: a snapshot is taken every K epochs
    #[arg(long, value_name = "K", default_value_t = 25, value_parser = clap::value_parser!(u64).range(2..=1 << 20))]
    snapshot_epochs: u64,
    /// Live rows in the queue
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    rows: u64,
    /// Rows each scan reads from the head of the queue
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    scan: u32,
    /// Keep deleted records until snapshots no longer need them, as Silo does (for comparison)
    #[arg(long)]
    keep_tombstones: bool,
}

pub fn bench(a: ChurnArgs) -> CliResult<ExitCode> {
    let duration = Duration::from_secs_f64(a.duration);
    let (epoch_ms, k, live, scan, keep_tombstones) =
        (a.epoch_ms, a.snapshot_epochs, a.rows, a.scan as usize, a.keep_tombstones);
    let options = Options {
        epoch_interval: Duration::from_secs_f64(epoch_ms / 1e3),
        snapshot_epochs: k,
        testing: epochdb::TestingOptions { keep_tombstones, ..Default::default() },
        ..Options::default()
    };
    let db = Database::open(options).map_err(failed)?;
    let queue = db.create_table("queue", TableOptions::new()).map_err(failed)?;
    let side = db.create_table("scanned", TableOptions::new()).map_err(failed)?;
    let mut w = db.worker().map_err(failed)?;
    for i in 0..live {
        w.run(|txn| txn.insert(queue, &i.to_be_bytes(), b"v")).map_err(failed)?;
    }
    let (head, tail) = (AtomicU64::new(live), AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    let (scans, aborts, churned, visited) =
        (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let outcome: Result<(), epochdb::Error> = std::thread::scope(|s| {
        let churn = s.spawn(|| -> epochdb::Result<()> {
            let mut w = db.worker()?;
            while !stop.load(Ordering::Relaxed) {
                let h = head.fetch_add(1, Ordering::Relaxed);
                w.run(|txn| txn.insert(queue, &h.to_be_bytes(), b"v"))?;
                let t = tail.fetch_add(1, Ordering::Relaxed);
                w.run(|txn| txn.delete(queue, &t.to_be_bytes()))?;
                churned.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        let scanner = s.spawn(|| -> epochdb::Result<()> {
            let mut w = db.worker()?;
            while !stop.load(Ordering::Relaxed) {
                let mut txn = w.begin()?;
                let mut seen = 0u64;
                let scanned = txn.scan_versioned(queue, .., false, scan, |_, _, _| {
                    seen += 1;
                    true
                });
                visited.fetch_add(seen, Ordering::Relaxed);
                let committed = match scanned {
                    Ok(rows) => txn.put(side, b"rows", &(rows as u64).to_le_bytes()).and_then(|()| txn.commit()),
                    Err(e) => Err(e),
                };
                match committed {
                    Ok(_) => scans.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.is_abort() => aborts.fetch_add(1, Ordering::Relaxed),
                    Err(e) => return Err(e),
                };
            }
            Ok(())
        });
        let start = Instant::now();
        while start.elapsed() < duration && !churn.is_finished() && !scanner.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        let (c, s) = (churn.join(), scanner.join());
        c.unwrap_or(Ok(())).and(s.unwrap_or(Ok(())))
    });
    outcome.map_err(failed)?;
    let (s, ab) = (scans.load(Ordering::Relaxed), aborts.load(Ordering::Relaxed));
    let secs = duration.as_secs_f64();
    say!(
        "churn, k = {k}, {epoch_ms} ms epochs{}: {:.0} scans/s committed, {:.0} aborted/s, {:.0} insert+delete pairs/s, {:.0} records visited per scan",
        if keep_tombstones { ", tombstones kept for snapshots" } else { "" },
        s as f64 / secs,
        ab as f64 / secs,
        churned.load(Ordering::Relaxed) as f64 / secs,
        visited.load(Ordering::Relaxed) as f64 / (s + ab).max(1) as f64
    );
    Ok(ExitCode::SUCCESS)
}

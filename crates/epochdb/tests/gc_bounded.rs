//! Memory stays bounded under a long update/insert/delete-heavy run with
//! snapshot readers: deleted records are unhooked and freed, superseded and
//! snapshot versions are freed, emptied index nodes are freed.
//!
//! A counting global allocator measures live heap bytes. The working set is
//! a sliding window of keys (insert at the head, delete at the tail, update
//! in between, with values that grow and shrink), so without reclamation
//! the heap would grow by every record ever written.

mod common;

use common::Rng;
use epochdb::{Database, Options, TableOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const WINDOW: u64 = 5_000;
const THREADS: u64 = 2;

fn key(i: u64) -> [u8; 12] {
    let mut k = *b"key-00000000";
    k[4..].copy_from_slice(&i.to_be_bytes());
    k
}

/// Runs `rounds` transactions per thread; thread `t` owns keys `i` with
/// `i % THREADS == t`, so the window slides without conflicts.
fn churn(db: &Database, t: epochdb::TableId, start: u64, rounds: u64) {
    std::thread::scope(|s| {
        for th in 0..THREADS {
            s.spawn(move || {
                let mut w = db.worker().expect("worker");
                let mut rng = Rng(th + 3);
                for r in start..start + rounds {
                    let head = r * THREADS + th;
                    let len = 16 + rng.below(200) as usize;
                    w.run(|txn| {
                        txn.insert(t, &key(head + WINDOW), &vec![1u8; len])?;
                        txn.delete(t, &key(head))?;
                        let mid = head + THREADS * (1 + rng.below(WINDOW / THREADS - 1));
                        txn.put(t, &key(mid), &vec![2u8; len])
                    })
                    .expect("churn");
                    if r % 64 == 0 {
                        let mut snap = w.snapshot().expect("snapshot");
                        snap.scan(t, .., 50, |_, _| true).expect("scan");
                    }
                }
            });
        }
    });
}

#[test]
fn memory_stays_bounded_under_churn() {
    let options = Options { epoch_interval: Duration::from_millis(1), snapshot_epochs: 2, ..Options::default() };
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    w.run(|txn| (0..WINDOW).try_for_each(|i| txn.insert(t, &key(i), &[0u8; 100]))).expect("load");
    const ROUND: u64 = 20_000;
    churn(&db, t, 0, ROUND);
    // Let reclamation catch up, then measure.
    let settle = |w: &mut epochdb::Worker| {
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(2));
            w.collect_garbage().expect("gc");
        }
    };
    settle(&mut w);
    let warm = LIVE_BYTES.load(Ordering::Relaxed);
    let mut samples = Vec::new();
    for phase in 1..=5 {
        churn(&db, t, phase * ROUND, ROUND);
        settle(&mut w);
        samples.push(LIVE_BYTES.load(Ordering::Relaxed));
    }
    // Each phase writes 2 x 20,000 new records of up to 216 B plus updates
    // (~20 MB if never freed); the live set is ~5,000 records (~1.5 MB).
    let last = *samples.last().expect("samples");
    let growth = last - warm;
    eprintln!("live bytes after warm-up {warm}, then {samples:?}");
    assert!(growth < 2_000_000, "heap grew by {growth} bytes over 5 phases: {warm} -> {samples:?}");
    // And the table holds exactly the window.
    let n = w.run(|txn| txn.scan(t, .., usize::MAX, |_, _| true)).expect("count");
    assert_eq!(n as u64, WINDOW);
}

//! Model checking of the TID-word protocol with loom: the same `tid.rs`
//! the engine uses, compiled against loom's atomics.
//!
//! 1. Seqlock: a reader using `stable_read` never returns a torn version.
//! 2. Silo's Figure 3: two transactions that each read one record and write
//!    the other, committing with lock / fence / validate / install, never
//!    both commit with stale reads (x = y = 1 is impossible).

#[path = "common/loom_sync.rs"]
mod sync;

#[allow(dead_code)]
#[path = "../src/tid.rs"]
mod tid;

use loom::sync::Arc;
use sync::{AtomicU64, Ordering};
use tid::{is_locked, Tid, TidWord, LATEST_BIT, LOCK_BIT};

struct Rec {
    tid: TidWord,
    a: AtomicU64,
    b: AtomicU64,
}

impl Rec {
    fn new() -> Rec {
        Rec { tid: TidWord::new(Tid::new(1, 1).raw() | LATEST_BIT), a: AtomicU64::new(0), b: AtomicU64::new(0) }
    }

    /// Phase 3 for one record: data, then TID + unlock in one store.
    fn install(&self, value: u64, tid: Tid) {
        self.a.store(value, Ordering::Relaxed);
        self.b.store(value, Ordering::Relaxed);
        self.tid.unlock_to(tid.raw() | LATEST_BIT);
    }

    fn read(&self) -> (u64, u64) {
        let (mut a, mut b) = (0, 0);
        let word = self.tid.stable_read(|_| {
            a = self.a.load(Ordering::Relaxed);
            b = self.b.load(Ordering::Relaxed);
        });
        assert!(!is_locked(word));
        assert_eq!(a, b, "torn read");
        (word, a)
    }
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b
}

#[test]
fn stable_reads_are_never_torn() {
    builder().check(|| {
        let r = Arc::new(Rec::new());
        let writer = {
            let r = r.clone();
            loom::thread::spawn(move || {
                r.tid.lock();
                r.install(7, Tid::new(1, 2));
            })
        };
        let (word, value) = r.read();
        // The value belongs to the TID read with it.
        match Tid::of_word(word).sequence() {
            1 => assert_eq!(value, 0),
            2 => assert_eq!(value, 7),
            s => panic!("unexpected sequence {s}"),
        }
        writer.join().expect("writer");
    });
}

/// One side of Figure 3: read `from`, then commit a write of `from + 1`
/// to `to`. Returns whether it committed.
fn transfer(from: &Rec, to: &Rec, epoch: &AtomicU64) -> bool {
    let (read_word, value) = from.read();
    // Phase 1
    let locked = to.tid.lock();
    sync::fence(Ordering::SeqCst);
    let e = epoch.load(Ordering::SeqCst);
    // Phase 2
    let now = from.tid.load();
    if now & !LOCK_BIT != read_word || is_locked(now) {
        to.tid.unlock_to(locked);
        return false;
    }
    let tid = Tid::new(e, Tid::of_word(read_word).max(Tid::of_word(locked)).sequence() + 1);
    // Phase 3
    to.install(value + 1, tid);
    true
}

#[test]
fn figure_3_never_commits_both_stale_reads() {
    builder().check(|| {
        let x = Arc::new(Rec::new());
        let y = Arc::new(Rec::new());
        let epoch = Arc::new(AtomicU64::new(1));
        let t1 = {
            let (x, y, e) = (x.clone(), y.clone(), epoch.clone());
            loom::thread::spawn(move || transfer(&x, &y, &e))
        };
        let c2 = transfer(&y, &x, &epoch);
        let c1 = t1.join().expect("t1");
        let (vx, vy) = (x.read().1, y.read().1);
        assert!(!(vx == 1 && vy == 1), "both committed stale reads: x = y = 1");
        if c1 && c2 {
            assert!((vx, vy) == (2, 1) || (vx, vy) == (1, 2), "not serial: x={vx} y={vy}");
        }
    });
}

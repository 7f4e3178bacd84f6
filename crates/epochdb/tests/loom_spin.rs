//! Model checking, with loom, of the spin lock on a worker's current log
//! buffer (`spin.rs`): the same file the engine uses, compiled against
//! loom's atomics.
//!
//! Two threads, as a worker and its logger (the only two that ever take a
//! slot's lock), each take the lock twice and update the value as a read,
//! then a write, of two relaxed words (as an append reads a buffer's
//! length and writes past it), in every interleaving loom explores. (With
//! a third, loom's search of the spinning hit its branch limit: 20 000
//! branches, 6 minutes.) Checked: no holder sees the two words disagree,
//! and no update is lost. A lock that admitted two holders, or whose
//! release did not order a holder's writes before the next holder's
//! reads, would fail one of them.

#[path = "common/loom_sync.rs"]
mod sync;

#[allow(dead_code)]
#[path = "../src/spin.rs"]
mod spin;

use loom::sync::Arc;
use spin::SpinLock;
use sync::AtomicU64;
use sync::Ordering::Relaxed;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b
}

/// One holder's update: both words from `n` to `n + 1`.
fn bump(lock: &SpinLock<(AtomicU64, AtomicU64)>) {
    let g = lock.lock();
    let (len, last) = &*g;
    let n = len.load(Relaxed);
    assert_eq!(last.load(Relaxed), n, "a holder saw another's half-done update");
    len.store(n + 1, Relaxed);
    last.store(n + 1, Relaxed);
}

#[test]
fn holders_exclude_each_other_and_see_all_earlier_updates() {
    builder().check(|| {
        let lock = Arc::new(SpinLock::new((AtomicU64::new(0), AtomicU64::new(0))));
        let logger = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                bump(&lock);
                bump(&lock);
            })
        };
        bump(&lock);
        bump(&lock);
        logger.join().expect("a holder panicked");
        let (len, last) = &*lock.lock();
        assert_eq!((len.load(Relaxed), last.load(Relaxed)), (4, 4), "an update was lost");
    });
}

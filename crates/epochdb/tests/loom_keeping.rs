//! Model checking, with loom, of when committers keep old versions for
//! snapshots (`epoch.rs`, `Keeping`): the same `epoch.rs` the engine uses,
//! compiled against loom's atomics.
//!
//! A snapshot turning keeping on, a committer reading its epoch and whether
//! to keep, and the advancer ticking (and turning keeping off once quiet)
//! run in every interleaving. Checked: a committer that does not keep has an
//! epoch below the first snapshot epoch the snapshot may read at, and
//! keeping stays on while that snapshot is under way.

#[path = "common/loom_sync.rs"]
mod sync;

#[allow(dead_code)]
#[path = "../src/epoch.rs"]
mod epoch;

use epoch::{Epochs, QUIET_SNAPSHOT_EPOCHS};
use loom::sync::Arc;

const K: u64 = 2;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b
}

/// Epochs with keeping on, one tick short of quiet, no snapshot under way.
fn one_tick_from_quiet() -> Epochs {
    let ep = Epochs::starting_at(K, 1);
    ep.snapshot_begins();
    ep.snapshot_ends();
    while ep.current() + 1 < QUIET_SNAPSHOT_EPOCHS * K + 1 {
        assert!(ep.tick());
    }
    assert!(ep.committers_keep());
    ep
}

/// The committer's side of `commit.rs`: its epoch, then whether it keeps,
/// two SeqCst loads. Loom treats SeqCst accesses as AcqRel, so the model
/// puts between them the fence that their single total order implies (the
/// engine's commit has no fence there; `Keeping`'s docs give the
/// argument in terms of that order).
fn commit(ep: &Epochs) -> (u64, bool) {
    let e = ep.current();
    loom::sync::atomic::fence(loom::sync::atomic::Ordering::SeqCst);
    (e, ep.committers_keep())
}

fn check(start: fn() -> Epochs) {
    builder().check(move || {
        let ep = Arc::new(start());
        let advancer = {
            let ep = ep.clone();
            loom::thread::spawn(move || {
                ep.tick();
            })
        };
        let committer = {
            let ep = ep.clone();
            loom::thread::spawn(move || commit(&ep))
        };
        let kf = ep.snapshot_begins();
        let (e, keep) = committer.join().expect("committer");
        advancer.join().expect("advancer");
        assert!(keep || e < kf, "a committer of epoch {e} did not keep, and the snapshot may read at {kf}");
        assert!(ep.committers_keep(), "keeping went off under a snapshot");
        ep.snapshot_ends();
    });
}

#[test]
fn a_snapshot_turning_keeping_on_sees_every_committer_that_did_not_keep() {
    check(|| Epochs::starting_at(K, 1));
}

#[test]
fn a_snapshot_beginning_as_the_advancer_turns_keeping_off_keeps_it_on() {
    check(one_tick_from_quiet);
}

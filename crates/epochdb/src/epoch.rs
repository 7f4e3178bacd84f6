//! Epochs (Silo §4.1, §4.8, §4.9).
//!
//! One advancer thread bumps the global epoch `E` every `epoch_interval`.
//! Each worker has a slot with its local epoch `e_w` and snapshot epoch
//! `se_w`, set when it enters a transaction and cleared (quiescent) when it
//! leaves, so an idle worker never holds the system back.
//!
//! Invariants:
//! - `E` only grows, and `E - e_w <= 1` for every active worker: the advancer
//!   bumps `E` only when every active `e_w >= E`.
//! - `SE = snap(E - k)`, with `snap(e) = k * floor(e / k)` (after a
//!   recovery, `SE` starts at the first epoch, a multiple of `k` above every
//!   recovered one, and keeps that value until `snap(E - k)` passes it); a
//!   worker's `se_w` is the `SE` it saw when its transaction began.
//! - Reclamation bounds: an object unlinked from the index and stamped with
//!   the `E` read *after* unlinking, `r`, may be freed once
//!   `r < tree_bound`, where `tree_bound = min(E, active e_w)` as computed by
//!   the advancer (reading `E` before the slots). A snapshot version stamped
//!   `snap(e)` may be freed once `snap(e) < snapshot_bound =
//!   min(SE, active se_w)`.
//!
//! Why `tree_bound` is safe: a worker whose `e_w > r` loaded `E > r` after
//! `E` moved past `r`, which was after the unlink, so it cannot hold a
//! pointer to the object. Entering uses a store-then-recheck loop (SeqCst) so
//! that the advancer either sees the new `e_w` or the worker sees the newer
//! `E`.

use crate::sync::{fence, AtomicU64, Ordering};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// `e_w` / `se_w` of a worker that is not inside a transaction.
const QUIESCENT: u64 = u64::MAX;

/// A worker's epoch slot, on its own cache line.
#[repr(align(128))]
#[derive(Debug)]
pub struct EpochSlot {
    e_w: AtomicU64,
    se_w: AtomicU64,
}

impl EpochSlot {
    pub(crate) fn new() -> EpochSlot {
        EpochSlot { e_w: AtomicU64::new(QUIESCENT), se_w: AtomicU64::new(QUIESCENT) }
    }

    /// `e_w` if the worker is inside a transaction: a lower bound on the
    /// epoch of anything it commits from now on.
    pub fn active_epoch(&self) -> Option<u64> {
        let e = self.e_w.load(Ordering::SeqCst);
        (e != QUIESCENT).then_some(e)
    }
}

#[repr(align(128))]
#[derive(Debug)]
struct Padded<T>(T);

#[derive(Debug)]
pub struct Epochs {
    global: Padded<AtomicU64>,
    snapshot: Padded<AtomicU64>,
    tree_bound: AtomicU64,
    snapshot_bound: AtomicU64,
    k: u64,
    /// On a hot standby `SE` follows the replayed, released view
    /// ([`Epochs::drive_snapshot`]), not `E`, which there only paces
    /// reclamation (until [`Epochs::promote`]).
    driven: AtomicBool,
    slots: Mutex<Vec<Arc<EpochSlot>>>,
    keeping: Keeping,
}

/// Whether committers keep the versions they overwrite for snapshot
/// transactions (Silo §4.9), and from which snapshot epoch on. Silo always
/// keeps them; a database whose snapshots are idle then holds a second
/// copy of every row written in the last snapshot epoch or two (57 of 374
/// MB in a 10 s one-thread TPC-C run here, 53 of 674 MB in YCSB). So they
/// are kept only while snapshot transactions run, and for
/// [`QUIET_SNAPSHOT_EPOCHS`] after the last one began; the first snapshot
/// after a quiet stretch waits until `SE` reaches the epoch from which every
/// committer keeps (one to two snapshot epochs, about 1-2 s by default).
///
/// `state` is [`OFF`], [`PENDING`] (a snapshot is turning keeping on),
/// `kf` (on: committers of every epoch `>= kf` keep; `kf` is a multiple
/// of `k`, 0 on a standby and after its promotion) or `DRAINING | kf` (the
/// advancer is turning it off; committers still keep). Committers keep
/// unless they read [`OFF`] (SeqCst, after reading their epoch).
///
/// Why a snapshot at `se >= kf` finds every version it needs: the
/// snapshot that turned keeping on read `E` after its CAS from [`OFF`],
/// and a committer that read [`OFF`] read its epoch before that CAS (both
/// SeqCst), so its epoch is `<= E < kf`: only versions no snapshot at `se`
/// reads past were overwritten without a copy. Keeping stays on while a
/// snapshot runs: the advancer moves `kf` to `DRAINING | kf` before it
/// counts `readers`, and a snapshot counts itself before it reads `state`,
/// so either the advancer sees it and puts `kf` back, or it sees
/// `DRAINING` (or [`OFF`]) and waits, or turns keeping on anew.
#[derive(Debug)]
struct Keeping {
    state: AtomicU64,
    /// Snapshot transactions under way.
    readers: AtomicU64,
    /// `E` when the last snapshot transaction began.
    last_read: AtomicU64,
}

const OFF: u64 = u64::MAX - 1;
const PENDING: u64 = u64::MAX;
const DRAINING: u64 = 1 << 63;

/// Snapshot epochs (of `k` epochs) without a snapshot beginning before
/// committers stop keeping overwritten versions.
pub const QUIET_SNAPSHOT_EPOCHS: u64 = 10;

impl Epochs {
    /// Epochs that start at `first`: 1 for a new database (so that TID 0
    /// means "never committed"); after recovery, above every epoch in the
    /// logs, so new TIDs exceed every recovered one. There `first` is
    /// rounded up to a multiple of `k` and the snapshot epoch starts at it:
    /// recovered records keep their logged TIDs, and a snapshot at `SE`
    /// reads epochs below `SE`, so the first snapshot sees everything
    /// recovered (and nothing newer, which starts at `first`).
    pub fn starting_at(k: u64, first: u64) -> Epochs {
        assert!(k >= 2, "snapshot epochs must trail by at least two epochs");
        let first = if first > 1 { boundary(k, first) } else { 1 };
        Epochs {
            global: Padded(AtomicU64::new(first)),
            snapshot: Padded(AtomicU64::new(if first > 1 { first } else { 0 })),
            tree_bound: AtomicU64::new(0),
            snapshot_bound: AtomicU64::new(0),
            k,
            driven: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
            // After a recovery committers keep from the first epoch, so a
            // snapshot right after opening reads the recovered state at
            // once; quiet, they stop as on a new database.
            keeping: Keeping {
                state: AtomicU64::new(if first > 1 { first } else { OFF }),
                readers: AtomicU64::new(0),
                last_read: AtomicU64::new(first),
            },
        }
    }

    /// Epochs of a hot standby: `E` starts at `first` (above every epoch
    /// on disk) and paces reclamation; `SE` starts at 1 (nothing visible)
    /// and moves only by [`Epochs::drive_snapshot`].
    pub fn standby(k: u64, first: u64) -> Epochs {
        let mut e = Epochs::starting_at(k, first);
        e.snapshot = Padded(AtomicU64::new(1));
        e.driven = AtomicBool::new(true);
        // Replay keeps versions by its own rule; if this standby is promoted,
        // its committers keep from the start, for reads already under way.
        e.keeping.state = AtomicU64::new(0);
        e
    }

    /// On a standby: snapshots now read every epoch `< se` (never lowers).
    pub fn drive_snapshot(&self, se: u64) {
        debug_assert!(self.driven.load(Ordering::Relaxed));
        self.snapshot.0.fetch_max(se, Ordering::SeqCst);
    }

    /// The first epoch boundary (multiple of `k`) at or above `e`.
    pub fn boundary_at_or_above(&self, e: u64) -> u64 {
        boundary(self.k, e)
    }

    /// A standby becomes a primary: `E` jumps to at least `first` (above
    /// every epoch it received, so new TIDs exceed them all), and from the
    /// next tick `SE` follows `E` as on any primary.
    pub fn promote(&self, first: u64) {
        self.global.0.fetch_max(first, Ordering::SeqCst);
        self.driven.store(false, Ordering::SeqCst);
    }

    /// The global epoch `E`.
    #[inline]
    pub fn current(&self) -> u64 {
        self.global.0.load(Ordering::SeqCst)
    }

    /// The global snapshot epoch `SE`.
    #[inline]
    pub fn snapshot(&self) -> u64 {
        self.snapshot.0.load(Ordering::SeqCst)
    }

    /// `snap(e)`: the snapshot epoch boundary at or below `e`.
    #[inline]
    pub fn snap(&self, e: u64) -> u64 {
        e / self.k * self.k
    }

    #[inline]
    pub fn tree_bound(&self) -> u64 {
        self.tree_bound.load(Ordering::Acquire)
    }

    #[inline]
    pub fn snapshot_bound(&self) -> u64 {
        self.snapshot_bound.load(Ordering::Acquire)
    }

    /// Whether a committer whose epoch was just read keeps the versions it
    /// overwrites across a snapshot-epoch boundary (see [`Keeping`]).
    #[inline]
    pub fn committers_keep(&self) -> bool {
        self.keeping.state.load(Ordering::SeqCst) != OFF
    }

    /// A snapshot transaction begins: counts it, turns keeping on if it
    /// is off, and returns the first snapshot epoch it may read at (`SE`
    /// must reach it first). Pair with [`Epochs::snapshot_ends`].
    pub fn snapshot_begins(&self) -> u64 {
        let kp = &self.keeping;
        kp.readers.fetch_add(1, Ordering::SeqCst);
        kp.last_read.fetch_max(self.current(), Ordering::Relaxed);
        // The fences here and in `stop_keeping_if_quiet` add nothing to
        // SeqCst accesses but let loom, which treats those as AcqRel,
        // check the protocol (tests/loom_keeping.rs); this path is rare.
        fence(Ordering::SeqCst);
        loop {
            match kp.state.load(Ordering::SeqCst) {
                OFF => {
                    if kp.state.compare_exchange(OFF, PENDING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                        fence(Ordering::SeqCst);
                        let kf = self.boundary_at_or_above(self.current() + 1);
                        kp.state.store(kf, Ordering::SeqCst);
                        return kf;
                    }
                }
                // Another snapshot is turning keeping on, or the advancer
                // is deciding whether to turn it off: both take a moment.
                s if s == PENDING || s & DRAINING != 0 => crate::sync::yield_now(),
                kf => return kf,
            }
        }
    }

    pub fn snapshot_ends(&self) {
        self.keeping.readers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Turns keeping off after [`QUIET_SNAPSHOT_EPOCHS`] without a snapshot
    /// beginning, if none is under way (the advancer, each tick).
    fn stop_keeping_if_quiet(&self, e: u64) {
        let kp = &self.keeping;
        let kf = kp.state.load(Ordering::SeqCst);
        let quiet = e.saturating_sub(kp.last_read.load(Ordering::Relaxed)) >= QUIET_SNAPSHOT_EPOCHS * self.k;
        if kf == OFF || kf == PENDING || kf & DRAINING != 0 || !quiet || self.driven.load(Ordering::Relaxed) {
            return;
        }
        if kp.readers.load(Ordering::SeqCst) != 0 {
            return;
        }
        // Only the caller whose CAS succeeds leaves DRAINING.
        if kp.state.compare_exchange(kf, kf | DRAINING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return;
        }
        fence(Ordering::SeqCst);
        let next = if kp.readers.load(Ordering::SeqCst) == 0 { OFF } else { kf };
        kp.state.store(next, Ordering::SeqCst);
    }

    pub fn register(&self) -> Arc<EpochSlot> {
        let slot = Arc::new(EpochSlot::new());
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).push(slot.clone());
        slot
    }

    pub fn unregister(&self, slot: &Arc<EpochSlot>) {
        slot.e_w.store(QUIESCENT, Ordering::SeqCst);
        slot.se_w.store(QUIESCENT, Ordering::SeqCst);
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).retain(|s| !Arc::ptr_eq(s, slot));
    }

    /// Marks the worker active: `e_w = E`, `se_w = SE`. Returns `(e_w, se_w)`.
    #[inline]
    pub fn enter(&self, slot: &EpochSlot) -> (u64, u64) {
        (publish(&slot.e_w, &self.global.0), publish(&slot.se_w, &self.snapshot.0))
    }

    /// Marks the worker quiescent.
    #[inline]
    pub fn exit(&self, slot: &EpochSlot) {
        slot.e_w.store(QUIESCENT, Ordering::Release);
        slot.se_w.store(QUIESCENT, Ordering::Release);
    }

    /// One step of the advancer: publish reclamation bounds, then bump `E`
    /// unless an active worker is still in an older epoch. Returns whether
    /// `E` advanced. Safe to call from several threads at once (the
    /// advancer, and a logger hastening an epoch a client waits on): `E`
    /// moves by compare-and-swap from the value the slots were checked
    /// against, so it never moves twice for one check, nor backwards.
    pub fn tick(&self) -> bool {
        let e = self.current();
        let se = self.snapshot();
        let (mut min_e, mut min_se) = (e, se);
        {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            for s in slots.iter() {
                min_e = min_e.min(s.e_w.load(Ordering::SeqCst));
                min_se = min_se.min(s.se_w.load(Ordering::SeqCst));
            }
        }
        self.tree_bound.fetch_max(min_e, Ordering::AcqRel);
        self.snapshot_bound.fetch_max(min_se, Ordering::AcqRel);
        if min_e < e {
            return false; // someone still runs in e - 1: E - e_w <= 1
        }
        if self.global.0.compare_exchange(e, e + 1, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return true; // another caller advanced it past e
        }
        if !self.driven.load(Ordering::Relaxed) {
            let se_new = self.snap((e + 1).saturating_sub(self.k));
            self.snapshot.0.fetch_max(se_new, Ordering::SeqCst);
        }
        self.stop_keeping_if_quiet(e + 1);
        true
    }
}

/// The first multiple of `k` at or above `e`.
pub(crate) fn boundary(k: u64, e: u64) -> u64 {
    e.div_ceil(k) * k
}

/// Copies `source` into a worker's `slot` and re-reads it until stable, so
/// that a concurrent advancer either sees the slot or the worker sees the
/// newer value (both SeqCst). Returns the value published.
#[inline]
fn publish(slot: &AtomicU64, source: &AtomicU64) -> u64 {
    let mut v = source.load(Ordering::SeqCst);
    loop {
        slot.store(v, Ordering::SeqCst);
        let again = source.load(Ordering::SeqCst);
        if again == v {
            return v;
        }
        v = again;
    }
}

/// The thread that advances epochs; stopped and joined on drop.
#[derive(Debug)]
pub struct Advancer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Advancer {
    pub fn start(epochs: Arc<Epochs>, interval: Duration) -> std::io::Result<Advancer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("epochdb-epoch".into()).spawn(move || {
            while !flag.load(Ordering::Acquire) {
                std::thread::park_timeout(interval);
                if flag.load(Ordering::Acquire) {
                    break;
                }
                epochs.tick();
            }
        })?;
        Ok(Advancer { stop, thread: Some(thread) })
    }
}

impl Drop for Advancer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_waits_for_lagging_workers() {
        if crate::sync::MODEL_CHECKED {
            return; // loom's atomics work only inside a model
        }
        let ep = Epochs::starting_at(4, 1);
        let slot = ep.register();
        assert!(ep.tick());
        assert_eq!(ep.current(), 2);
        let (e, _) = ep.enter(&slot);
        assert_eq!(e, 2);
        assert!(ep.tick()); // e_w == E: may advance once
        assert_eq!(ep.current(), 3);
        assert!(!ep.tick()); // E - e_w would become 2
        assert_eq!(ep.current(), 3);
        assert_eq!(ep.tree_bound(), 2);
        ep.exit(&slot);
        assert!(ep.tick());
        assert_eq!(ep.current(), 4);
        ep.unregister(&slot);
    }

    #[test]
    fn after_recovery_the_snapshot_epoch_starts_above_every_recovered_epoch() {
        if crate::sync::MODEL_CHECKED {
            return; // loom's atomics work only inside a model
        }
        let ep = Epochs::starting_at(25, 177);
        assert_eq!((ep.current(), ep.snapshot()), (200, 200));
        for _ in 0..30 {
            ep.tick();
        }
        assert_eq!(ep.snapshot(), 200, "snap(E - k) = 200 has not passed it yet");
    }

    #[test]
    fn snapshot_epoch_trails_by_k() {
        if crate::sync::MODEL_CHECKED {
            return; // loom's atomics work only inside a model
        }
        let ep = Epochs::starting_at(4, 1);
        for _ in 0..20 {
            ep.tick();
        }
        let e = ep.current();
        assert_eq!(e, 21);
        assert_eq!(ep.snapshot(), ep.snap(e - 4));
        assert_eq!(ep.snapshot() % 4, 0);
    }

    #[test]
    fn committers_keep_versions_only_while_snapshots_are_used() {
        if crate::sync::MODEL_CHECKED {
            return; // loom's atomics work only inside a model
        }
        let ep = Epochs::starting_at(4, 1);
        let ticks = |n: u64| (0..n).for_each(|_| assert!(ep.tick()));
        ticks(10);
        assert!(!ep.committers_keep(), "no snapshot has begun");
        let kf = ep.snapshot_begins();
        assert!(ep.committers_keep());
        assert_eq!((kf, ep.current()), (12, 11), "the first boundary above E");
        assert_eq!(ep.snapshot_begins(), kf, "a second snapshot reuses it");
        ep.snapshot_ends();
        // A snapshot under way keeps them however long it runs.
        ticks(QUIET_SNAPSHOT_EPOCHS * 4 + 8);
        assert!(ep.committers_keep());
        ep.snapshot_ends();
        ticks(1);
        assert!(!ep.committers_keep(), "quiet and none under way");
        assert_eq!(ep.snapshot_begins(), ep.boundary_at_or_above(ep.current() + 1));
        ep.snapshot_ends();
        // After a recovery, and on a standby, committers keep from the
        // start, and the first snapshot does not wait.
        let recovered = Epochs::starting_at(4, 101);
        assert!(recovered.committers_keep());
        assert_eq!(recovered.snapshot_begins(), recovered.snapshot());
        let standby = Epochs::standby(4, 100);
        assert!(standby.committers_keep());
        assert_eq!(standby.snapshot_begins(), 0);
    }
}

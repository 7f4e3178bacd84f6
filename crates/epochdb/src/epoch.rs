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

use crate::sync::{AtomicU64, Ordering};
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
    fn new() -> EpochSlot {
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
}

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
        }
    }

    /// Epochs of a hot standby: `E` starts at `first` (above every epoch
    /// on disk) and paces reclamation; `SE` starts at 1 (nothing visible)
    /// and moves only by [`Epochs::drive_snapshot`].
    pub fn standby(k: u64, first: u64) -> Epochs {
        let mut e = Epochs::starting_at(k, first);
        e.snapshot = Padded(AtomicU64::new(1));
        e.driven = AtomicBool::new(true);
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
        let ep = Epochs::starting_at(25, 177);
        assert_eq!((ep.current(), ep.snapshot()), (200, 200));
        for _ in 0..30 {
            ep.tick();
        }
        assert_eq!(ep.snapshot(), 200, "snap(E - k) = 200 has not passed it yet");
    }

    #[test]
    fn snapshot_epoch_trails_by_k() {
        let ep = Epochs::starting_at(4, 1);
        for _ in 0..20 {
            ep.tick();
        }
        let e = ep.current();
        assert_eq!(e, 21);
        assert_eq!(ep.snapshot(), ep.snap(e - 4));
        assert_eq!(ep.snapshot() % 4, 0);
    }
}

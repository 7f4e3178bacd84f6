//! Epoch-based garbage collection (Silo §4.8, §4.9).
//!
//! Each worker keeps three FIFO lists, filled in epoch order and drained
//! between transactions:
//! - `tree`: records and index nodes unlinked from an index, stamped with the
//!   `E` read after unlinking; freed once the stamp is below the tree bound.
//! - `snapshot`: old record versions kept for snapshot transactions, stamped
//!   `snap(e)` of the transaction that superseded them; freed once below the
//!   snapshot bound (and the tree bound, for versions that were themselves
//!   reachable from an index).
//! - `cleanup`: keys whose record was deleted at `snap(e)`; once no snapshot
//!   can need the absent record, it is unhooked from the index (if it is still
//!   the same absent version) and moves to the `tree` list. A delete whose
//!   record no snapshot can ever need (see `txn/commit.rs`) is due as soon
//!   as `E` has passed the delete's epoch (about one epoch, not a snapshot
//!   epoch of about a second), so scans do not wade through tombstones.
//!   Not sooner: a transaction that inserts the key again without finding
//!   the absent record must get a larger TID than the delete's (log replay
//!   keeps the largest), and it does only by committing in a later epoch.
//!
//! Invariant: every object in a list is owned by that list alone; the index
//! no longer reaches it (or, for cleanup entries, the list owns only the key).

use crate::arena;
use crate::index::{Leaf, Tree};
use crate::record::Record;
use std::collections::VecDeque;
use std::ptr::NonNull;

/// An object waiting for its reclamation epoch.
#[derive(Debug)]
pub enum Retired {
    Record(NonNull<Record>),
    Leaf(*mut Leaf),
    Inner(*mut crate::index::InnerNode),
    Key(*mut Box<[u8]>),
}

// SAFETY: a retired object is owned by whoever holds the `Retired`;
// handing it to another thread hands over that ownership.
unsafe impl Send for Retired {}

impl Retired {
    /// # Safety
    /// The object is unreachable by every thread and freed only here.
    pub unsafe fn free(self) {
        // SAFETY: per the contract; each pointer came from the allocation
        // function its variant names.
        unsafe {
            match self {
                Retired::Record(r) => Record::free(r),
                Retired::Leaf(l) => arena::free_boxed(l),
                Retired::Inner(i) => arena::free_boxed(i),
                Retired::Key(k) => drop(Box::from_raw(k)),
            }
        }
    }
}

/// A deleted key to unhook once snapshots no longer need its absent record.
#[derive(Debug)]
pub struct Cleanup {
    pub snap_epoch: u64,
    pub table: u32,
    pub key: Box<[u8]>,
    /// The absent record's TID word when the delete committed.
    pub word: u64,
}

#[derive(Debug, Default)]
pub struct Garbage {
    tree: VecDeque<(u64, Retired)>,
    snapshot: VecDeque<(u64, u64, Retired)>,
    cleanup: VecDeque<Cleanup>,
    /// Deleted keys no snapshot needs, with their delete's epoch: due once
    /// `E` is past it.
    unneeded: VecDeque<(u64, Cleanup)>,
}

// SAFETY: the lists own their objects exclusively; moving them to another
// thread (e.g. a dropped worker's orphans) moves that ownership.
unsafe impl Send for Garbage {}

impl Garbage {
    pub fn retire(&mut self, epoch: u64, obj: Retired) {
        debug_assert!(self.tree.back().is_none_or(|b| b.0 <= epoch));
        self.tree.push_back((epoch, obj));
    }

    pub fn retire_all(&mut self, epoch: u64, objs: &mut Vec<Retired>) {
        for o in objs.drain(..) {
            self.retire(epoch, o);
        }
    }

    /// An old version for snapshots, superseded at snapshot epoch
    /// `snap_epoch`; `tree_epoch` is 0 unless it was itself in an index.
    pub fn retire_version(&mut self, snap_epoch: u64, tree_epoch: u64, obj: Retired) {
        self.snapshot.push_back((snap_epoch, tree_epoch, obj));
    }

    pub fn defer_cleanup(&mut self, c: Cleanup) {
        self.cleanup.push_back(c);
    }

    /// A key deleted in `epoch` whose record no snapshot can need.
    pub fn cleanup_after(&mut self, epoch: u64, c: Cleanup) {
        debug_assert!(self.unneeded.back().is_none_or(|b| b.0 <= epoch));
        self.unneeded.push_back((epoch, c));
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty() && self.snapshot.is_empty() && self.cleanup.is_empty() && self.unneeded.is_empty()
    }

    pub fn len(&self) -> usize {
        self.tree.len() + self.snapshot.len() + self.cleanup.len() + self.unneeded.len()
    }

    /// Frees what the bounds allow. Returns the number of objects freed.
    ///
    /// # Safety
    /// The bounds come from [`crate::epoch::Epochs`] (see its invariants).
    pub unsafe fn collect(&mut self, tree_bound: u64, snapshot_bound: u64) -> usize {
        let mut freed = 0;
        while self.tree.front().is_some_and(|(e, _)| *e < tree_bound) {
            let Some((_, obj)) = self.tree.pop_front() else {
                break;
            };
            // SAFETY: stamped after unlinking and below the tree bound.
            unsafe { obj.free() };
            freed += 1;
        }
        while self.snapshot.front().is_some_and(|(s, t, _)| *s < snapshot_bound && *t < tree_bound) {
            let Some((_, _, obj)) = self.snapshot.pop_front() else {
                break;
            };
            // SAFETY: no snapshot reader can reach it, nor any index reader.
            unsafe { obj.free() };
            freed += 1;
        }
        freed
    }

    /// Pops the cleanup entries that are due: those snapshots no longer
    /// need, and those no snapshot needs of epochs before `epoch` (`E`).
    pub fn due_cleanups(&mut self, snapshot_bound: u64, epoch: u64, out: &mut Vec<Cleanup>) {
        while self.unneeded.front().is_some_and(|(e, _)| *e < epoch) {
            if let Some((_, c)) = self.unneeded.pop_front() {
                out.push(c);
            }
        }
        while self.cleanup.front().is_some_and(|c| c.snap_epoch < snapshot_bound) {
            if let Some(c) = self.cleanup.pop_front() {
                out.push(c);
            }
        }
    }

    /// Moves everything into `other` (a dropped worker's lists are adopted).
    pub fn merge_into(&mut self, other: &mut Garbage) {
        other.tree.extend(self.tree.drain(..));
        other.snapshot.extend(self.snapshot.drain(..));
        other.cleanup.extend(self.cleanup.drain(..));
        other.unneeded.extend(self.unneeded.drain(..));
        // Keep FIFO order by epoch after a merge.
        other.tree.make_contiguous().sort_by_key(|e| e.0);
        other.snapshot.make_contiguous().sort_by_key(|e| e.0);
        other.cleanup.make_contiguous().sort_by_key(|c| c.snap_epoch);
        other.unneeded.make_contiguous().sort_by_key(|c| c.0);
    }

    /// Frees everything, ignoring epochs.
    ///
    /// # Safety
    /// No thread can reach any of the objects (the database is gone).
    pub unsafe fn free_all(&mut self) {
        for (_, obj) in self.tree.drain(..) {
            // SAFETY: per the contract.
            unsafe { obj.free() };
        }
        for (_, _, obj) in self.snapshot.drain(..) {
            // SAFETY: per the contract.
            unsafe { obj.free() };
        }
        self.cleanup.clear();
        self.unneeded.clear();
    }
}

/// Unhooks a deleted record if it is still the absent version `c.word`
/// (Silo §4.9): lock it, check, remove from the index, mark not-latest.
/// Returns the unhooked record and the index nodes that became garbage.
pub fn unhook(tree: &Tree, c: &Cleanup, retired: &mut Vec<Retired>) -> Option<NonNull<Record>> {
    use crate::tid::LATEST_BIT;
    let rec = tree.lookup(&c.key).record?;
    // SAFETY: found in the index inside our epoch: live.
    let r = unsafe { rec.as_ref() };
    let word = r.tid.lock();
    if word != c.word {
        r.tid.unlock_to(word); // re-inserted or deleted again since
        return None;
    }
    let removed = tree.remove_if(&c.key, rec, retired);
    debug_assert!(removed, "a latest record is in its index");
    r.tid.unlock_to(word & !LATEST_BIT);
    Some(rec)
}

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

use crate::index::{Retired, Tree};
use crate::record::Record;
use std::collections::VecDeque;
use std::ptr::NonNull;

/// A deleted key to unhook once snapshots no longer need its absent record.
#[derive(Debug)]
pub struct Cleanup {
    pub snap_epoch: u64,
    pub table: u32,
    pub key: Box<[u8]>,
    /// The absent record's TID word when the delete committed.
    pub word: u64,
}

/// A superseded record version kept for snapshots: its snapshot epoch,
/// the `E` stamp it needs too if it was itself in an index (else 0), and
/// the record. 16 bytes, not the 32 of `(u64, u64, Retired)`: TPC-C keeps
/// several of these per transaction for about a second (Silo §4.9), half
/// a million on one thread, so the list was 17 MB of a run's peak memory.
/// Epochs fit in 32 bits (`tid::MAX_EPOCH`).
#[derive(Debug)]
struct OldVersion {
    snap_epoch: u32,
    tree_epoch: u32,
    record: NonNull<Record>,
}

const _: () = assert!(std::mem::size_of::<OldVersion>() == 16);
const _: () = assert!(crate::tid::MAX_EPOCH <= u32::MAX as u64);

#[derive(Debug, Default)]
pub struct Garbage {
    tree: VecDeque<(u64, Retired)>,
    snapshot: VecDeque<OldVersion>,
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
    pub fn retire_version(&mut self, snap_epoch: u64, tree_epoch: u64, record: NonNull<Record>) {
        // Lossless: epochs are at most `tid::MAX_EPOCH` (asserted above).
        let (snap_epoch, tree_epoch) = (snap_epoch as u32, tree_epoch as u32);
        self.snapshot.push_back(OldVersion { snap_epoch, tree_epoch, record });
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
        while self
            .snapshot
            .front()
            .is_some_and(|v| u64::from(v.snap_epoch) < snapshot_bound && u64::from(v.tree_epoch) < tree_bound)
        {
            let Some(v) = self.snapshot.pop_front() else {
                break;
            };
            // SAFETY: no snapshot reader can reach it, nor any index reader.
            unsafe { Record::free(v.record) };
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
        merge(&mut self.tree, &mut other.tree, |e| e.0);
        merge(&mut self.snapshot, &mut other.snapshot, |v| u64::from(v.snap_epoch));
        merge(&mut self.cleanup, &mut other.cleanup, |c| c.snap_epoch);
        merge(&mut self.unneeded, &mut other.unneeded, |c| c.0);
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
        for v in self.snapshot.drain(..) {
            // SAFETY: per the contract.
            unsafe { Record::free(v.record) };
        }
        self.cleanup.clear();
        self.unneeded.clear();
    }
}

/// Moves `from` into `into`, keeping `into` in FIFO order by `epoch`.
/// Into an empty list (the usual case: workers exit one by one when the
/// database shuts down, at its largest) the lists are swapped: copying and
/// sorting them added half again to the garbage's memory at that peak.
fn merge<T>(from: &mut VecDeque<T>, into: &mut VecDeque<T>, epoch: impl FnMut(&T) -> u64) {
    if into.is_empty() {
        std::mem::swap(from, into);
        return;
    }
    into.extend(from.drain(..));
    into.make_contiguous().sort_by_key(epoch);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> NonNull<Record> {
        Record::alloc(b"k", b"v", 0, 0)
    }

    /// A worker's lists handed to an empty list move whole; handed to a
    /// list that has entries, they are merged in epoch order, so
    /// `collect` frees exactly what each bound allows.
    #[test]
    fn merged_lists_stay_in_epoch_order() {
        let (mut a, mut b, mut orphans) = (Garbage::default(), Garbage::default(), Garbage::default());
        for e in [2, 4, 6] {
            a.retire(e, Retired::Record(record()));
            a.retire_version(e, 0, record());
        }
        for e in [1, 3, 5] {
            b.retire(e, Retired::Record(record()));
            b.retire_version(e, 0, record());
        }
        a.merge_into(&mut orphans);
        assert!(a.is_empty());
        assert_eq!(orphans.len(), 6);
        b.merge_into(&mut orphans);
        assert!(b.is_empty());
        assert_eq!(orphans.len(), 12);
        // SAFETY: nothing else can reach these records.
        unsafe {
            // Tree entries of epochs 1..=3, versions of snapshot epochs 1..=2.
            assert_eq!(orphans.collect(4, 3), 3 + 2);
            assert_eq!(orphans.collect(6, 6), 2 + 3);
            assert_eq!(orphans.collect(7, 7), 2);
        }
        assert!(orphans.is_empty());
    }
}

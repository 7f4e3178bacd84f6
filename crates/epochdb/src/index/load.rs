//! Bulk loading: a tree built bottom up from runs of records in key order.
//!
//! A checkpoint file holds one table's rows in blocks, each block a run of
//! keys in ascending order, and the blocks of all files cover disjoint key
//! ranges (each checkpointer walks its own subrange, `checkpoint.rs`).
//! Inserting them one by one descends the tree for every row; that was
//! about 70% of a checkpoint load. Instead each recovery thread packs the
//! rows of its blocks straight into full leaves ([`SortedRun`]), and once every
//! block is read, [`Tree::load`] orders a table's runs and builds the
//! inner levels over their leaves.
//!
//! Invariants of what is built: every leaf holds 1..=`LEAF_WIDTH` keys and
//! every inner node 2..=`INNER_WIDTH` children (one separator short of
//! full, so that the first insert through it does not split it at once);
//! all leaves are at the same depth; a separator is the first key of the
//! child to its right, as a leaf split makes it.

use super::node::{new_sep_key, Inner, Leaf, NodeHeader, SepKey, INNER_WIDTH, LEAF_WIDTH};
use super::Retired;
use super::Tree;
use crate::arena;
use crate::record::Record;
use crate::sync::Ordering;
use std::ptr::NonNull;

/// Children per built inner node, at most.
const FANOUT: usize = INNER_WIDTH;

/// Records in strictly ascending key order, packed into full leaves as
/// they come. Owns its records and nodes until [`Tree::load`] takes them;
/// dropping it frees them.
#[derive(Default)]
pub struct SortedRun {
    /// Full leaves, each with a separator: its first key.
    leaves: Vec<(*mut Leaf, *mut SepKey)>,
    /// The records of the leaf being filled.
    pending: Vec<*mut Record>,
    first: Option<NonNull<Record>>,
    last: Option<NonNull<Record>>,
    len: u64,
    /// Leaves are packed only when the tree takes the run ([`SortedRun::flat`]).
    flat: bool,
}

// SAFETY: a run owns its records, leaves and separators exclusively
// (nothing else points at them until a tree takes them over), so moving
// it to another thread moves that ownership.
unsafe impl Send for SortedRun {}

impl SortedRun {
    /// A run that keeps its records unpacked until [`Tree::load`] takes
    /// it: for one whose records will likely be taken back
    /// ([`SortedRun::into_records`]), which then builds no leaves.
    pub fn flat() -> SortedRun {
        let mut run = SortedRun::default();
        run.flat = true;
        run
    }

    /// Appends `rec` (owned by the caller until then) if its key is above
    /// every key in the run; otherwise gives it back.
    pub fn push(&mut self, rec: NonNull<Record>) -> Result<(), NonNull<Record>> {
        if let Some(last) = self.last {
            // SAFETY: records the run owns, and the caller's, are live.
            if unsafe { last.as_ref() }.key() >= unsafe { rec.as_ref() }.key() {
                return Err(rec);
            }
        }
        self.first.get_or_insert(rec);
        self.last = Some(rec);
        self.len += 1;
        self.pending.push(rec.as_ptr());
        if self.pending.len() == LEAF_WIDTH && !self.flat {
            self.seal();
        }
        Ok(())
    }

    /// Records in the run.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run's smallest key (empty for an empty run).
    pub fn first_key(&self) -> &[u8] {
        // SAFETY: the run's records live as long as it holds them.
        self.first.map_or(&[], |r| unsafe { &*r.as_ptr() }.key())
    }

    /// The run's largest key (empty for an empty run).
    pub fn last_key(&self) -> &[u8] {
        // SAFETY: as above.
        self.last.map_or(&[], |r| unsafe { &*r.as_ptr() }.key())
    }

    /// Packs the pending records into leaves of their own (full ones but
    /// the last).
    fn seal(&mut self) {
        for group in self.pending.chunks(LEAF_WIDTH) {
            let leaf = Leaf::new_boxed();
            // SAFETY: a fresh leaf, ours; the records are live and ascending.
            unsafe { &*leaf }.fill(group);
            // SAFETY: live, as above.
            let sep = new_sep_key(unsafe { &*group[0] }.key());
            self.leaves.push((leaf, sep));
        }
        self.pending.clear();
    }

    /// Gives up the run's records (in key order), freeing its nodes: for a
    /// caller that inserts them one by one after all.
    pub fn into_records(mut self) -> Vec<NonNull<Record>> {
        self.take_records()
    }

    /// Like [`SortedRun::into_records`], appending them to `out`.
    pub fn append_records(mut self, out: &mut Vec<NonNull<Record>>) {
        self.take_records_into(out);
    }

    fn take_records(&mut self) -> Vec<NonNull<Record>> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.take_records_into(&mut out);
        out
    }

    fn take_records_into(&mut self, out: &mut Vec<NonNull<Record>>) {
        out.reserve(self.len as usize);
        for (leaf, sep) in self.leaves.drain(..) {
            // SAFETY: the run's own leaf and separator, freed once here.
            unsafe {
                let l = &*leaf;
                out.extend((0..l.count()).filter_map(|i| NonNull::new(l.entry(i))));
                arena::free_boxed(leaf);
                drop(Box::from_raw(sep));
            }
        }
        out.extend(self.pending.drain(..).filter_map(NonNull::new));
        (self.first, self.last, self.len) = (None, None, 0);
    }
}

impl Drop for SortedRun {
    fn drop(&mut self) {
        for rec in self.take_records() {
            // SAFETY: the run owned it; nothing else points at it.
            unsafe { Record::free(rec) };
        }
    }
}

impl Tree {
    /// Whether the tree holds no key. Only meaningful while no other thread
    /// writes it (recovery, between its phases).
    pub fn is_empty(&self) -> bool {
        let root = self.root.load(Ordering::Acquire);
        // SAFETY: the root is live; `is_leaf` never changes.
        unsafe { (*root).is_leaf && (*(root as *const Leaf)).count() == 0 }
    }

    /// Makes this empty tree hold the records of `runs`, which must be
    /// disjoint: after sorting them by first key, each run's last key lies
    /// below the next run's first. Returns how many records it loaded, or
    /// gives the runs back untouched if they overlap or the tree is not
    /// empty. The old (empty) root goes to `retired`. Concurrent readers
    /// are safe, but a concurrent insert could be lost: call it while no
    /// other thread writes the tree (recovery, between its phases).
    pub fn load(&self, mut runs: Vec<SortedRun>, retired: &mut Vec<Retired>) -> Result<u64, Vec<SortedRun>> {
        runs.retain(|r| !r.is_empty());
        runs.sort_unstable_by(|a, b| a.first_key().cmp(b.first_key()));
        if runs.windows(2).any(|w| w[0].last_key() >= w[1].first_key()) {
            return Err(runs);
        }
        let old = self.root.load(Ordering::Acquire);
        // SAFETY: the root is live; we are its only writer (see above).
        let old_hdr = unsafe { &*old };
        let Ok(v) = old_hdr.version.read_begin() else { return Err(runs) };
        // SAFETY: checked to be a leaf first.
        if !old_hdr.is_leaf || unsafe { &*(old as *const Leaf) }.count() != 0 || !old_hdr.version.try_upgrade(v) {
            return Err(runs);
        }
        let mut count = 0;
        let mut level: Vec<(*mut NodeHeader, *mut SepKey)> = Vec::new();
        for mut run in runs {
            run.seal();
            count += run.len();
            level.extend(run.leaves.drain(..).map(|(l, s)| (l as *mut NodeHeader, s)));
            // Its records are the tree's now: the run drops empty.
        }
        if level.is_empty() {
            old_hdr.version.unlock_unmodified();
            return Ok(0);
        }
        // Nothing lies left of the first node: it needs no separator.
        // SAFETY: made by `new_sep_key`, owned by the run until now.
        drop(unsafe { Box::from_raw(std::mem::replace(&mut level[0].1, std::ptr::null_mut())) });
        while level.len() > 1 {
            // As few nodes as fit, sharing the children evenly: each gets
            // at least 2 (a level of n > 1 children gets ceil(n / FANOUT)).
            let nodes = level.len().div_ceil(FANOUT);
            let (each, extra) = (level.len() / nodes, level.len() % nodes);
            let mut children = level.into_iter();
            level = (0..nodes)
                .map(|i| {
                    let group: Vec<_> = children.by_ref().take(each + usize::from(i < extra)).collect();
                    let n = Inner::new_boxed();
                    let keys: Vec<*mut SepKey> = group[1..].iter().map(|c| c.1).collect();
                    let kids: Vec<*mut NodeHeader> = group.iter().map(|c| c.0).collect();
                    // SAFETY: a fresh node, ours; the separators are live.
                    unsafe { &*n }.fill(&keys, &kids);
                    (n as *mut NodeHeader, group[0].1)
                })
                .collect();
        }
        self.root.store(level[0].0, Ordering::Release);
        // Readers holding the old root restart and find the new one.
        old_hdr.version.unlock_obsolete();
        retired.push(Retired::Leaf(old as *mut Leaf));
        Ok(count)
    }
}

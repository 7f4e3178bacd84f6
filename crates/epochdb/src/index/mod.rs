//! The ordered concurrent index: a Masstree-inspired B+-tree on byte-string
//! keys (Silo §3, §4.6).
//!
//! - Lookups and scans write no shared memory: they descend with optimistic
//!   reads of node versions (`node_version.rs`) and restart if a version
//!   changed under them.
//! - Writers lock only the nodes they change, top-down, with try-locks that
//!   restart instead of waiting, so there is no deadlock. Inserts split full
//!   inner nodes on the way down, so a leaf split finds room in its parent.
//! - Every key insertion or removal, split or node removal bumps the version
//!   of each leaf involved; transactions keep `(leaf, version)` pairs in their
//!   node set to detect phantoms.
//! - A leaf that becomes empty is cut out of the tree together with any
//!   chain of single-child inner nodes above it; removed nodes and keys are
//!   handed to the caller's garbage list, never freed in place.
//!
//! Memory safety rests on epochs: every caller is inside an epoch
//! ([`crate::epoch`]) while it holds node or record pointers, and everything
//! this module unlinks is freed only after all such callers have left.

mod load;
mod node;
mod node_version;
mod retired;

pub use load::SortedRun;
pub use node::{prefetch, slice_at, Leaf, LEAF_WIDTH};
pub use node_version::Restart;
pub use retired::Retired;

use crate::arena;
use crate::record::Record;
use crate::sync::{AtomicPtr, Ordering};
use node::{new_sep_key, Inner, NodeHeader, SepKey, Target, INNER_WIDTH};
use std::ops::Bound;
use std::ptr::NonNull;

/// Deep enough for 8^24 keys; a descent past it is a corrupted tree.
const MAX_DEPTH: usize = 24;

/// Bytes a descent prefetches of a child before reading it: all of it,
/// whichever kind it turns out to be, so the larger kind's size. A leaf's
/// record pointers, read last, lie in its last lines (prefetching less
/// than a leaf left half of them to a miss of their own, after the
/// slices' search). An inner node is the larger (768 bytes to a leaf's
/// 512): a leaf's prefetch also asks for the four lines after it, which
/// costs bandwidth, not a wait.
const NODE_BYTES: usize = {
    let (inner, leaf) = (std::mem::size_of::<Inner>(), std::mem::size_of::<Leaf>());
    if inner > leaf {
        inner
    } else {
        leaf
    }
};

pub struct Tree {
    root: AtomicPtr<NodeHeader>,
}

// SAFETY: all shared state is reached through atomics; nodes and records are
// freed only by epoch reclamation (see the module docs).
unsafe impl Send for Tree {}
// SAFETY: as above.
unsafe impl Sync for Tree {}

/// The result of a lookup: the record, if the key is present, and the leaf
/// that holds (or would hold) the key with the version that was read.
#[derive(Debug, Clone, Copy)]
pub struct Lookup {
    pub record: Option<NonNull<Record>>,
    pub leaf: *const Leaf,
    pub version: u64,
}

impl Lookup {
    /// A placeholder, before a lookup fills it in.
    const NOTHING: Lookup = Lookup { record: None, leaf: std::ptr::null(), version: 0 };
}

/// What an insert-if-absent did.
#[derive(Debug, Clone, Copy)]
pub enum Insert {
    /// The key was already present; nothing changed.
    Existing(#[cfg_attr(not(test), allow(dead_code))] NonNull<Record>),
    /// The record was added to `leaf`, whose version went from `old_version`
    /// to `new_version`; if the leaf split, `sibling` is the new right leaf
    /// and its version.
    Inserted { leaf: *const Leaf, old_version: u64, new_version: u64, sibling: Option<(*const Leaf, u64)> },
}

#[derive(Clone, Copy)]
struct Step {
    node: *const Inner,
    version: u64,
    index: usize,
    count: usize,
}

const NO_STEP: Step = Step { node: std::ptr::null(), version: 0, index: 0, count: 0 };

/// The inner nodes visited on the way to a leaf.
struct Path {
    steps: [Step; MAX_DEPTH],
    len: usize,
}

impl Path {
    fn new() -> Path {
        Path { steps: [NO_STEP; MAX_DEPTH], len: 0 }
    }
}

/// A leaf reached by a descent, with the fences of its key range
/// (`lo <= key < hi`, null = unbounded) taken from its ancestors.
struct Descent<'t> {
    leaf: &'t Leaf,
    version: u64,
    lo: *mut SepKey,
    hi: *mut SepKey,
}

/// # Safety
/// `n` is a live leaf (reachable within the caller's epoch).
#[inline]
unsafe fn leaf<'a>(n: *const NodeHeader) -> &'a Leaf {
    // SAFETY: per the contract, and `Leaf` starts with `NodeHeader` (repr C).
    unsafe { &*(n as *const Leaf) }
}

/// # Safety
/// `n` is a live inner node (reachable within the caller's epoch).
#[inline]
unsafe fn inner<'a>(n: *const NodeHeader) -> &'a Inner {
    // SAFETY: per the contract, and `Inner` starts with `NodeHeader` (repr C).
    unsafe { &*(n as *const Inner) }
}

/// Descents [`Tree::lookup_batch`] keeps in flight at once: enough to
/// cover a memory latency. Callers that install or read keys in windows
/// (replay) use windows of this size.
pub const PREFETCH_BATCH: usize = 16;

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    pub fn new() -> Tree {
        Tree { root: AtomicPtr::new(Leaf::new_boxed() as *mut NodeHeader) }
    }

    fn root_begin(&self) -> Result<(*const NodeHeader, u64), Restart> {
        let root = self.root.load(Ordering::Acquire);
        // SAFETY: the root is live while we are in an epoch.
        let v = unsafe { &*root }.version.read_begin()?;
        // A root split installs the new root before unlocking the old one.
        if self.root.load(Ordering::Acquire) != root {
            return Err(Restart);
        }
        Ok((root, v))
    }

    /// Optimistic descent to the leaf for `target`, recording the inner
    /// nodes in `path` if given.
    fn descend(&self, target: Target<'_>, mut path: Option<&mut Path>) -> Result<Descent<'_>, Restart> {
        let (mut node, mut v) = self.root_begin()?;
        let (mut lo, mut hi) = (std::ptr::null_mut(), std::ptr::null_mut());
        if let Some(p) = path.as_deref_mut() {
            p.len = 0;
        }
        loop {
            // SAFETY: `node` was read from the root or a validated parent
            // within our epoch, so it is live; `is_leaf` never changes.
            if unsafe { &*node }.is_leaf {
                // SAFETY: as above.
                let leaf = unsafe { leaf(node) };
                return Ok(Descent { leaf, version: v, lo, hi });
            }
            // SAFETY: as above.
            let n = unsafe { inner(node) };
            let count = n.count();
            let index = n.child_index(target)?;
            if index > 0 {
                lo = n.keys[index - 1].load(Ordering::Acquire);
            }
            if index < count {
                hi = n.keys[index].load(Ordering::Acquire);
            }
            let child = n.child(index)?;
            prefetch(child, NODE_BYTES);
            // SAFETY: a non-null child of a live node is live in our epoch.
            let cv = unsafe { &*child }.version.read_begin()?;
            if !n.hdr.version.validate(v) {
                return Err(Restart);
            }
            if let Some(p) = path.as_deref_mut() {
                assert!(p.len < MAX_DEPTH, "index deeper than {MAX_DEPTH}: corrupted tree");
                p.steps[p.len] = Step { node: n, version: v, index, count };
                p.len += 1;
            }
            node = child;
            v = cv;
        }
    }

    /// Finds `key`. Writes no shared memory.
    pub fn lookup(&self, key: &[u8]) -> Lookup {
        loop {
            if let Ok(found) = self.try_lookup(key) {
                return found;
            }
        }
    }

    /// [`Tree::lookup`]s of `targets`, into `out` in their order, with
    /// their cache misses overlapped: a lookup alone cannot overlap them,
    /// as each node's address comes from the one before, so each round
    /// takes every unfinished descent one level down, and a node is
    /// prefetched a round before it is read. Each descent is validated as
    /// a lookup's is (a child's version is read before its parent's is
    /// checked), and one that meets a change starts again at its root.
    /// Writes no shared memory; caller is inside an epoch.
    pub fn lookup_batch<'a>(targets: impl IntoIterator<Item = (&'a Tree, &'a [u8])>, out: &mut Vec<Lookup>) {
        out.clear();
        let mut targets = targets.into_iter().peekable();
        while targets.peek().is_some() {
            let mut chunk: [Option<(&Tree, &[u8])>; PREFETCH_BATCH] = [None; PREFETCH_BATCH];
            // Where each descent goes next, and the parent that pointed
            // there with the version it was read at (`None`: the node was
            // read from the root pointer); null once it has reached its leaf.
            let mut at = [(std::ptr::null::<NodeHeader>(), None); PREFETCH_BATCH];
            let from_root = |tree: &Tree| {
                let root = tree.root.load(Ordering::Acquire);
                prefetch(root, NODE_BYTES);
                (root as *const NodeHeader, None)
            };
            let start = out.len();
            let mut going = 0;
            for (target, slot) in targets.by_ref().take(PREFETCH_BATCH).zip(&mut chunk) {
                at[going] = from_root(target.0);
                *slot = Some(target);
                out.push(Lookup::NOTHING);
                going += 1;
            }
            while going > 0 {
                for (i, &(tree, key)) in chunk.iter().map_while(|t| t.as_ref()).enumerate() {
                    let (node, parent) = at[i];
                    if node.is_null() {
                        continue;
                    }
                    // SAFETY: `node` is a root or a child of a node read in
                    // our epoch, so live; `parent` was read the same way.
                    match unsafe { tree.lookup_step(node, parent, key) } {
                        Ok(Ok(found)) => {
                            out[start + i] = found;
                            at[i].0 = std::ptr::null();
                            going -= 1;
                        }
                        Ok(Err(down)) => at[i] = down,
                        Err(Restart) => at[i] = from_root(tree),
                    }
                }
            }
        }
    }

    /// One level of [`Tree::lookup_batch`]'s descent toward `key`: at a
    /// leaf, the lookup; at an inner node, the child to visit next (now
    /// prefetched) with this node and its version.
    ///
    /// # Safety
    /// `node` and `parent` are live (reached within the caller's epoch).
    #[allow(clippy::type_complexity)]
    unsafe fn lookup_step(
        &self,
        node: *const NodeHeader,
        parent: Option<(*const Inner, u64)>,
        key: &[u8],
    ) -> Result<Result<Lookup, (*const NodeHeader, Option<(*const Inner, u64)>)>, Restart> {
        // SAFETY: per the contract.
        let v = unsafe { &*node }.version.read_begin()?;
        let linked = match parent {
            // SAFETY: per the contract.
            Some((p, pv)) => unsafe { &*p }.hdr.version.validate(pv),
            None => std::ptr::eq(self.root.load(Ordering::Acquire), node),
        };
        if !linked {
            return Err(Restart);
        }
        // SAFETY: per the contract; `is_leaf` never changes.
        if unsafe { &*node }.is_leaf {
            // SAFETY: as above.
            let l = unsafe { leaf(node) };
            let (pos, found) = l.search_to_read(key)?;
            let record = if found { Some(NonNull::new(l.entry(pos)).ok_or(Restart)?) } else { None };
            if !l.hdr.version.validate(v) {
                return Err(Restart);
            }
            return Ok(Ok(Lookup { record, leaf: l, version: v }));
        }
        // SAFETY: as above.
        let n = unsafe { inner(node) };
        let child = n.child(n.child_index(Target::Key(key))?)?;
        prefetch(child, NODE_BYTES);
        Ok(Err((child, Some((n, v)))))
    }

    fn try_lookup(&self, key: &[u8]) -> Result<Lookup, Restart> {
        let d = self.descend(Target::Key(key), None)?;
        let (i, found) = d.leaf.search_to_read(key)?;
        let record = if found { Some(NonNull::new(d.leaf.entry(i)).ok_or(Restart)?) } else { None };
        if !d.leaf.hdr.version.validate(d.version) {
            return Err(Restart);
        }
        Ok(Lookup { record, leaf: d.leaf, version: d.version })
    }

    /// Maps `key` to `rec` in the leaf where `miss`, a lookup of `key` that
    /// found nothing, would have found it, if that leaf is still at
    /// `miss.version` and has room: an insert without a second descent. A
    /// caller that has since inserted into the leaf itself may pass the
    /// version its insert left (the leaf's range is the same), so the
    /// key's place is searched again under the lock: `Existing` if the key
    /// is there now. `None` if neither (nothing changed; use
    /// [`Tree::insert_if_absent`]). Caller is still in the epoch of the
    /// lookup, so the leaf is live.
    pub fn insert_after_miss(&self, miss: &Lookup, key: &[u8], rec: NonNull<Record>) -> Option<Insert> {
        debug_assert!(miss.record.is_none());
        // SAFETY: reached by the lookup within the caller's epoch.
        let l = unsafe { &*miss.leaf };
        // The same version: the same key range, so `key` belongs here.
        if !l.hdr.version.try_upgrade(miss.version) {
            return None;
        }
        match l.search(key) {
            Ok((pos, false)) if l.count() < LEAF_WIDTH => {
                l.insert_at(pos, key, rec.as_ptr());
                let new_version = l.hdr.version.next_after_modify();
                l.hdr.version.unlock_modified();
                Some(Insert::Inserted { leaf: l, old_version: miss.version, new_version, sibling: None })
            }
            Ok((pos, true)) => {
                let existing = NonNull::new(l.entry(pos));
                l.hdr.version.unlock_unmodified();
                existing.map(Insert::Existing)
            }
            _ => {
                l.hdr.version.unlock_unmodified();
                None
            }
        }
    }

    /// Maps `key` to `rec` unless the key is present.
    pub fn insert_if_absent(&self, key: &[u8], rec: NonNull<Record>) -> Insert {
        debug_assert_eq!(
            // SAFETY: the caller passes a live record.
            unsafe { rec.as_ref() }.key(),
            key
        );
        loop {
            if let Ok(done) = self.try_insert(key, rec) {
                return done;
            }
        }
    }

    fn try_insert(&self, key: &[u8], rec: NonNull<Record>) -> Result<Insert, Restart> {
        let (mut node, mut v) = self.root_begin()?;
        let mut parent: Option<(&Inner, u64, usize)> = None;
        loop {
            // SAFETY: live within our epoch (see `descend`).
            if !unsafe { &*node }.is_leaf {
                // SAFETY: as above.
                let n = unsafe { inner(node) };
                let index = n.child_index(Target::Key(key))?;
                if n.count() == INNER_WIDTH {
                    // Split on the way down so that a leaf split below always
                    // finds room; then start over. (`index` is checked by
                    // the split's lock at version `v`.)
                    self.split_inner(n, v, parent, index)?;
                    return Err(Restart);
                }
                let child = n.child(index)?;
                // SAFETY: a non-null child of a live node is live.
                let cv = unsafe { &*child }.version.read_begin()?;
                if !n.hdr.version.validate(v) {
                    return Err(Restart);
                }
                parent = Some((n, v, index));
                node = child;
                v = cv;
                continue;
            }
            // SAFETY: as above.
            let l = unsafe { leaf(node) };
            let (pos, found) = l.search(key)?;
            if found {
                let existing = NonNull::new(l.entry(pos)).ok_or(Restart)?;
                if !l.hdr.version.validate(v) {
                    return Err(Restart);
                }
                return Ok(Insert::Existing(existing));
            }
            let n = l.count();
            if n == LEAF_WIDTH {
                return self.split_leaf(l, v, parent, pos, rec);
            }
            // An unchanged version means `pos` is still right.
            if !l.hdr.version.try_upgrade(v) {
                return Err(Restart);
            }
            l.insert_at(pos, key, rec.as_ptr());
            let new_version = l.hdr.version.next_after_modify();
            l.hdr.version.unlock_modified();
            return Ok(Insert::Inserted { leaf: l, old_version: v, new_version, sibling: None });
        }
    }

    /// Locks `parent` (or claims the root) and then `node`, both at the
    /// versions the descent read. On failure nothing stays locked.
    fn lock_for_split(&self, node: &NodeHeader, v: u64, parent: Option<(&Inner, u64, usize)>) -> Result<(), Restart> {
        if let Some((p, pv, _)) = parent {
            if !p.hdr.version.try_upgrade(pv) {
                return Err(Restart);
            }
        }
        if !node.version.try_upgrade(v) {
            if let Some((p, _, _)) = parent {
                p.hdr.version.unlock_unmodified();
            }
            return Err(Restart);
        }
        debug_assert!(parent.is_some() || std::ptr::eq(self.root.load(Ordering::Relaxed), node));
        Ok(())
    }

    /// Hangs `right` (separated by `sep`) to the right of the node that the
    /// descent reached through `parent`, or grows a new root above `left`.
    /// The caller holds the locks taken by `lock_for_split`.
    fn link_right(
        &self,
        left: *const NodeHeader,
        sep: *mut SepKey,
        right: *const NodeHeader,
        parent: Option<(&Inner, u64, usize)>,
    ) {
        match parent {
            Some((p, _, index)) => {
                debug_assert!(p.count() < INNER_WIDTH, "parents are split on the way down");
                p.insert_at(index, sep, right as *mut NodeHeader);
                p.hdr.version.unlock_modified();
            }
            None => {
                let root = Inner::new_boxed();
                // SAFETY: fresh allocation, not yet shared.
                unsafe { &*root }.fill(&[sep], &[left as *mut NodeHeader, right as *mut NodeHeader]);
                self.root.store(root as *mut NodeHeader, Ordering::Release);
            }
        }
    }

    fn split_leaf(
        &self,
        l: &Leaf,
        v: u64,
        parent: Option<(&Inner, u64, usize)>,
        pos: usize,
        rec: NonNull<Record>,
    ) -> Result<Insert, Restart> {
        self.lock_for_split(&l.hdr, v, parent)?;
        let mut entries = [std::ptr::null_mut::<Record>(); LEAF_WIDTH + 1];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = match i.cmp(&pos) {
                std::cmp::Ordering::Less => l.entry(i),
                std::cmp::Ordering::Equal => rec.as_ptr(),
                std::cmp::Ordering::Greater => l.entry(i - 1),
            };
        }
        // Ascending inserts (TPC-C's orders and order lines in each
        // district, a checkpoint being loaded): when this key goes right
        // after the last one inserted, split just after it, so the left
        // leaf goes on filling and stays full, and keys after it (the next
        // district's) move right. Halving would leave every leaf of such a
        // run half empty for good. Masstree gets much the same from its
        // layers (keys sharing 8-byte prefixes get a B-tree of their own,
        // appended at its right end).
        let sequential = l.hdr.follows_last_insert(pos);
        let mid = if sequential { (pos + 1).min(LEAF_WIDTH) } else { entries.len() / 2 };
        let right = Leaf::new_boxed();
        // SAFETY: fresh allocation, published only by `link_right`.
        let r = unsafe { &*right };
        r.fill(&entries[mid..]);
        l.fill(&entries[..mid]);
        match pos.checked_sub(mid) {
            None => l.hdr.note_insert(pos),
            Some(at) => r.hdr.note_insert(at),
        }
        // SAFETY: entries come from a locked leaf or the caller; all live.
        let sep = new_sep_key(unsafe { &*entries[mid] }.key());
        let new_version = l.hdr.version.next_after_modify();
        self.link_right(&l.hdr, sep, &r.hdr, parent);
        l.hdr.version.unlock_modified();
        Ok(Insert::Inserted { leaf: l, old_version: v, new_version, sibling: Some((right, r.hdr.version.load())) })
    }

    /// Splits a full inner node on the way to its child `index`.
    fn split_inner(
        &self,
        n: &Inner,
        v: u64,
        parent: Option<(&Inner, u64, usize)>,
        index: usize,
    ) -> Result<(), Restart> {
        self.lock_for_split(&n.hdr, v, parent)?;
        let keys: [*mut SepKey; INNER_WIDTH] = std::array::from_fn(|i| n.keys[i].load(Ordering::Relaxed));
        let children: [*mut NodeHeader; INNER_WIDTH + 1] =
            std::array::from_fn(|i| n.children[i].load(Ordering::Relaxed));
        // Ascending inserts (see `split_leaf`): leaves split off child
        // `index - 1` put their separators at `index - 1`, `index`, ...; the
        // child `index` ends the left node, which goes on filling (each
        // side keeps at least one separator).
        let sequential = n.hdr.follows_last_insert(index);
        let mid = if sequential { index.clamp(1, INNER_WIDTH - 2) } else { INNER_WIDTH / 2 };
        let right = Inner::new_boxed();
        // SAFETY: fresh allocation, published only by `link_right`.
        let r = unsafe { &*right };
        r.fill(&keys[mid + 1..], &children[mid + 1..]);
        n.fill(&keys[..mid], &children[..=mid]);
        // The run goes on from the separator before child `index`.
        if sequential && index <= mid {
            n.hdr.note_insert(index - 1);
        } else if sequential && index > mid + 1 {
            r.hdr.note_insert(index - mid - 2);
        }
        self.link_right(&n.hdr, keys[mid], &r.hdr, parent);
        n.hdr.version.unlock_modified();
        Ok(())
    }

    /// Finds the entry of `key` if it maps to `rec`, and locks its leaf.
    /// Returns `None` (nothing locked) if `key` does not map to `rec`.
    fn lock_entry(&self, key: &[u8], rec: NonNull<Record>) -> Option<(&Leaf, usize)> {
        loop {
            let Ok(d) = self.descend(Target::Key(key), None) else { continue };
            let Ok((i, found)) = d.leaf.search(key) else { continue };
            if !found || d.leaf.entry(i) != rec.as_ptr() {
                if d.leaf.hdr.version.validate(d.version) {
                    return None;
                }
                continue;
            }
            if d.leaf.hdr.version.try_upgrade(d.version) {
                return Some((d.leaf, i));
            }
        }
    }

    /// Points `key` at `new` if it maps to `old`. Used when a record is
    /// reallocated to grow; does not bump the leaf version (the key set is
    /// the same, and `old` is marked not-latest by the caller).
    pub fn replace(&self, key: &[u8], old: NonNull<Record>, new: NonNull<Record>) -> bool {
        let Some((leaf, i)) = self.lock_entry(key, old) else { return false };
        leaf.records[i].store(new.as_ptr(), Ordering::Release);
        leaf.hdr.version.unlock_unmodified();
        true
    }

    /// Removes `key` if it maps to `rec`. The record itself is not freed.
    /// Nodes that become unreachable are pushed to `retired`.
    pub fn remove_if(&self, key: &[u8], rec: NonNull<Record>, retired: &mut Vec<Retired>) -> bool {
        let Some((leaf, i)) = self.lock_entry(key, rec) else { return false };
        let n = leaf.count();
        leaf.remove_at(i);
        leaf.hdr.version.unlock_modified();
        if n == 1 {
            self.remove_empty_leaf(key, retired);
        }
        true
    }

    /// Cuts the (empty) leaf for `key` out of the tree, with the chain of
    /// single-child inner nodes above it, below the lowest ancestor that has
    /// another child. Gives up after a few contended attempts: the leaf then
    /// stays, empty but reachable, and is reused by later inserts.
    fn remove_empty_leaf(&self, key: &[u8], retired: &mut Vec<Retired>) {
        let mut path = Path::new();
        for _attempt in 0..8 {
            let Ok(d) = self.descend(Target::Key(key), Some(&mut path)) else {
                continue;
            };
            if d.leaf.count() != 0 || !d.leaf.hdr.version.validate(d.version) {
                return;
            }
            let Some(anchor) = (0..path.len).rev().find(|&i| path.steps[i].count > 0) else {
                return; // a single chain from the root: keep it
            };
            // Lock top-down: the anchor, the chain below it, the leaf.
            let mut locked = 0;
            for s in &path.steps[anchor..path.len] {
                // SAFETY: nodes on the path are live in our epoch.
                if !unsafe { &*s.node }.hdr.version.try_upgrade(s.version) {
                    break;
                }
                locked += 1;
            }
            let all = locked == path.len - anchor && d.leaf.hdr.version.try_upgrade(d.version);
            if !all {
                for s in &path.steps[anchor..anchor + locked] {
                    // SAFETY: as above; we hold this lock.
                    unsafe { &*s.node }.hdr.version.unlock_unmodified();
                }
                continue;
            }
            let step = path.steps[anchor];
            // SAFETY: locked and live.
            let a = unsafe { &*step.node };
            // Drop the child and the separator on its left (or, for the
            // first child, on its right): a neighbour absorbs its range.
            // Removing a separator keeps the node's head valid.
            retired.push(Retired::Key(a.remove_at(step.index, step.index.saturating_sub(1))));
            a.hdr.version.unlock_modified();
            for s in &path.steps[anchor + 1..path.len] {
                // SAFETY: locked, live, and now unreachable.
                unsafe { &*s.node }.hdr.version.unlock_obsolete();
                retired.push(Retired::Inner(s.node as *mut Inner));
            }
            d.leaf.hdr.version.unlock_obsolete();
            retired.push(Retired::Leaf(d.leaf as *const Leaf as *mut Leaf));
            return;
        }
    }

    /// Visits the entries with keys in `(lower, upper)` in key order (or
    /// reverse), calling `on_leaf(leaf, version)` for every leaf whose
    /// entries were visited (for the node set) and `visit(key, record)` for
    /// each entry until it returns false. Writes no shared memory.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        on_leaf: impl FnMut(*const Leaf, u64),
        visit: impl FnMut(&[u8], NonNull<Record>) -> bool,
    ) {
        self.scan_leaves(lower, upper, reverse, false, on_leaf, visit)
    }

    /// [`Tree::scan`] forward, for scans that read most of a range once (a
    /// checkpoint): it reads each next leaf before visiting the current
    /// one, so the misses on the next leaf's records overlap the work on
    /// this one's. A scan stopped early has read one leaf for nothing.
    /// (Fetching the records with a non-temporal hint, to spare the
    /// workers' cache, was measured no better.)
    pub fn scan_ahead(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        visit: impl FnMut(&[u8], NonNull<Record>) -> bool,
    ) {
        self.scan_leaves(lower, upper, false, true, |_, _| {}, visit)
    }

    fn scan_leaves(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        ahead: bool,
        mut on_leaf: impl FnMut(*const Leaf, u64),
        mut visit: impl FnMut(&[u8], NonNull<Record>) -> bool,
    ) {
        let (behind, end) = if reverse { (upper, lower) } else { (lower, upper) };
        // The cursor: where the next leaf starts (forward) or ends (reverse).
        let mut cursor: Vec<u8> = Vec::new();
        let mut cursor_bound = bound_kind(behind, &mut cursor);
        let mut snap = self.read_leaf(cursor_bound, &cursor, reverse);
        let mut next = ahead.then(LeafSnap::default);
        loop {
            on_leaf(snap.leaf, snap.version);
            // The leaf after this one, if the scan reaches it.
            let more = snap.has_next && passes_end(&snap.fence, end, reverse);
            if let Some(n) = next.as_mut().filter(|_| more) {
                *n = self.read_leaf(BoundKind::Included, &snap.fence, reverse);
            }
            for i in 0..snap.n {
                let rp = snap.entries[if reverse { snap.n - 1 - i } else { i }];
                // SAFETY: read from a validated leaf: live in our epoch.
                let rec = unsafe { NonNull::new_unchecked(rp) };
                // SAFETY: as above.
                let key = unsafe { rec.as_ref() }.key();
                let cursor_b = bound_of(cursor_bound, &cursor);
                if !passes_start(key, cursor_b, reverse) || !passes_start(key, behind, reverse) {
                    continue;
                }
                if !passes_end(key, end, reverse) || !visit(key, rec) {
                    return;
                }
            }
            if !more {
                return;
            }
            std::mem::swap(&mut cursor, &mut snap.fence);
            cursor_bound = if reverse { BoundKind::Excluded } else { BoundKind::Included };
            match next.as_mut() {
                Some(n) => std::mem::swap(&mut snap, n),
                None => snap = self.read_leaf(cursor_bound, &cursor, reverse),
            }
        }
    }

    /// A validated copy of the leaf holding `key` (bounded as `kind`), or
    /// the first (last) leaf if unbounded; starts the misses on its records.
    fn read_leaf(&self, kind: BoundKind, key: &[u8], reverse: bool) -> LeafSnap {
        let mut s = LeafSnap::default();
        loop {
            let target = match (kind, reverse) {
                (BoundKind::Unbounded, false) => Target::First,
                (BoundKind::Unbounded, true) => Target::Last,
                (BoundKind::Excluded, true) => Target::Below(key),
                _ => Target::Key(key),
            };
            let Ok(d) = self.descend(target, None) else {
                continue;
            };
            s.n = d.leaf.count();
            for (i, e) in s.entries.iter_mut().enumerate().take(s.n) {
                *e = d.leaf.entry(i);
            }
            let next = if reverse { d.lo } else { d.hi };
            s.fence.clear();
            // SAFETY: fences come from validated ancestors; separator keys
            // are freed only by epoch reclamation.
            if let Some(k) = unsafe { next.as_ref() } {
                s.fence.extend_from_slice(k);
            }
            s.has_next = !next.is_null();
            if !d.leaf.hdr.version.validate(d.version) || s.entries[..s.n].iter().any(|e| e.is_null()) {
                continue;
            }
            (s.leaf, s.version) = (d.leaf, d.version);
            // A scan touches every record of the leaf: start all their
            // misses (header, key and the first value bytes) at once.
            for &rp in &s.entries[..s.n] {
                prefetch(rp, 128);
            }
            return s;
        }
    }

    /// The root's separator keys: split points that divide the tree into
    /// parts of similar size (for parallel checkpointing). Call within an
    /// epoch.
    pub fn root_keys(&self) -> Vec<Vec<u8>> {
        'retry: loop {
            let Ok((root, v)) = self.root_begin() else { continue };
            // SAFETY: the root is live within the caller's epoch.
            if unsafe { &*root }.is_leaf {
                return Vec::new();
            }
            // SAFETY: an inner node, checked just above.
            let n = unsafe { inner(root) };
            let mut keys = Vec::with_capacity(n.count());
            for i in 0..n.count().min(INNER_WIDTH) {
                let Ok(k) = n.key(i) else { continue 'retry };
                keys.push(k.to_vec());
            }
            if n.hdr.version.validate(v) {
                return keys;
            }
        }
    }

    /// Counts `(leaves, inner nodes)`. For tests; call with no writers.
    #[cfg(test)]
    pub fn node_counts(&self) -> (usize, usize) {
        fn walk(n: *const NodeHeader, acc: &mut (usize, usize)) {
            // SAFETY: the caller guarantees no concurrent writers.
            if unsafe { &*n }.is_leaf {
                acc.0 += 1;
                return;
            }
            // SAFETY: as above.
            let i = unsafe { inner(n) };
            acc.1 += 1;
            for c in 0..=i.count() {
                walk(i.children[c].load(Ordering::Acquire), acc);
            }
        }
        let mut acc = (0, 0);
        walk(self.root.load(Ordering::Acquire), &mut acc);
        acc
    }
}

/// What a scan keeps of a leaf: its entries as validated at `version`,
/// and the fence key where the next leaf starts (ends, in reverse).
struct LeafSnap {
    leaf: *const Leaf,
    version: u64,
    entries: [*mut Record; LEAF_WIDTH],
    n: usize,
    fence: Vec<u8>,
    has_next: bool,
}

impl Default for LeafSnap {
    fn default() -> Self {
        LeafSnap {
            leaf: std::ptr::null(),
            version: 0,
            entries: [std::ptr::null_mut(); LEAF_WIDTH],
            n: 0,
            fence: Vec::new(),
            has_next: false,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BoundKind {
    Included,
    Excluded,
    Unbounded,
}

fn bound_kind(b: Bound<&[u8]>, into: &mut Vec<u8>) -> BoundKind {
    match b {
        Bound::Included(k) => {
            into.extend_from_slice(k);
            BoundKind::Included
        }
        Bound::Excluded(k) => {
            into.extend_from_slice(k);
            BoundKind::Excluded
        }
        Bound::Unbounded => BoundKind::Unbounded,
    }
}

fn bound_of(kind: BoundKind, key: &[u8]) -> Bound<&[u8]> {
    match kind {
        BoundKind::Included => Bound::Included(key),
        BoundKind::Excluded => Bound::Excluded(key),
        BoundKind::Unbounded => Bound::Unbounded,
    }
}

/// Is `key` on the far side of the bound the scan starts from?
#[inline]
fn passes_start(key: &[u8], b: Bound<&[u8]>, reverse: bool) -> bool {
    match (b, reverse) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(s), false) => key >= s,
        (Bound::Excluded(s), false) => key > s,
        (Bound::Included(s), true) => key <= s,
        (Bound::Excluded(s), true) => key < s,
    }
}

/// Is `key` before the bound the scan ends at?
#[inline]
fn passes_end(key: &[u8], b: Bound<&[u8]>, reverse: bool) -> bool {
    match (b, reverse) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(e), false) => key <= e,
        (Bound::Excluded(e), false) => key < e,
        (Bound::Included(e), true) => key >= e,
        (Bound::Excluded(e), true) => key > e,
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        fn free(n: *mut NodeHeader) {
            // SAFETY: `&mut Tree`: no other thread can reach these nodes,
            // and each reachable node, key and record is owned by the tree
            // exactly once.
            unsafe {
                if (*n).is_leaf {
                    let l = n as *mut Leaf;
                    for i in 0..(*l).count() {
                        if let Some(r) = NonNull::new((*l).entry(i)) {
                            Record::free(r);
                        }
                    }
                    arena::free_boxed(l);
                } else {
                    let i = n as *mut Inner;
                    for k in 0..(*i).count() {
                        drop(Box::from_raw((*i).keys[k].load(Ordering::Relaxed)));
                    }
                    for c in 0..=(*i).count() {
                        free((*i).children[c].load(Ordering::Relaxed));
                    }
                    arena::free_boxed(i);
                }
            }
        }
        free(self.root.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests;

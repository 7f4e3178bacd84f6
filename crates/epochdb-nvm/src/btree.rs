//! A B+tree stored in a [`Heap`]: the index of every engine here, durable
//! (NVM-InP, NVM-Log) or not (InP, Log), depending only on whether the
//! heap's region is persistent (persisting a volatile region is free).
//!
//! Changes are crash-atomic without a log, as in the NVM study's modified
//! STX B+tree (§4.1):
//!
//! - A leaf's entries are unsorted; a bitmap word says which are valid.
//!   Inserting writes the entry into a free position and persists it, then
//!   sets its bit with one 8-byte store and persists that. Removing clears
//!   the bit. Changing a value is one 8-byte store. Every change therefore
//!   appears whole or not at all.
//! - A split never modifies a published node. It builds the new leaves and
//!   copies of every inner node on the path, persists them, and then swings
//!   the root word with one store. To leave no memory leaked, it first
//!   persists a *split record* listing the new and the replaced nodes;
//!   [`recover_split`] finishes or rolls back a split a crash interrupted.
//!
//! Node layout (1 KiB, 16 cache lines; FORMAT.md "NVM B+tree"): line 0 is
//! the header (word 0: 1 for a leaf, else the inner entry count; word 1:
//! the leaf bitmap), lines 1..16 are 15 entries of one line each (key
//! length byte, key of up to [`MAX_KEY`] bytes, 8-byte value at byte 56).
//! Inner entries are sorted and entry 0's key is not used: child i holds
//! the keys from key i up to key i + 1. Leaves have no sibling links, so
//! no split touches a neighbour; scans walk down from the root. Emptied
//! leaves stay (no merging), as in many in-memory B+trees.

use crate::pmem::{Component, Heap, LINE};
use std::cmp::Ordering;
use std::io;

/// The longest key a tree holds.
pub const MAX_KEY: usize = 55;
const NODE: usize = 16 * LINE;
const FANOUT: usize = 15;
const VALUE: u64 = 56;
const LEAF: u64 = 1;
/// Split-record layout: state, the root word's address, the new root,
/// counts, then node lists. All trees of a heap share one record: splits
/// happen one at a time (one executor per partition).
const MAX_NEW: usize = 24;
const MAX_OLD: usize = 12;
const LISTS: u64 = 40;
/// Bytes of a split record (caller-provided, 8-aligned).
pub const SPLIT_RECORD: usize = LISTS as usize + 8 * (MAX_NEW + MAX_OLD);

fn entry(node: u64, i: usize) -> u64 {
    node + ((i + 1) * LINE) as u64
}

/// A tree whose root pointer lives at `root_at` and whose split record at
/// `split_at`, both inside the engine's root object.
#[derive(Debug, Clone, Copy)]
pub struct BTree {
    root_at: u64,
    split_at: u64,
}

pub fn key_too_long(key: &[u8]) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("a {}-byte key is over the {MAX_KEY}-byte limit", key.len()))
}

impl BTree {
    /// Creates an empty tree (one empty leaf). The leaf stays in the
    /// allocated state: the caller marks it persisted once the tree is
    /// reachable.
    pub fn create(heap: &mut Heap, root_at: u64, split_at: u64) -> io::Result<BTree> {
        let leaf = new_node(heap, LEAF)?;
        heap.persist(leaf, LINE);
        heap.set_u64(root_at, leaf);
        heap.persist(root_at, 8);
        Ok(BTree { root_at, split_at })
    }

    /// A tree holding `entries` (sorted, distinct keys), built bottom-up
    /// with full nodes, each persisted once, for a tree nothing reaches
    /// until its caller installs it (NVM-Log's merges). The nodes stay in
    /// the allocated state; the caller marks them persisted (see
    /// [`BTree::nodes`]) once the tree is reachable.
    pub fn bulk_load(heap: &mut Heap, root_at: u64, split_at: u64, entries: &[(Vec<u8>, u64)]) -> io::Result<BTree> {
        if let Some((k, _)) = entries.iter().find(|(k, _)| k.len() > MAX_KEY) {
            return Err(key_too_long(k));
        }
        let mut new = Vec::new();
        let mut level: Vec<(Vec<u8>, u64)> = Vec::new();
        for chunk in entries.chunks(FANOUT) {
            level.push((chunk[0].0.clone(), build(heap, LEAF, chunk, &mut new)?));
        }
        if level.is_empty() {
            level.push((Vec::new(), build(heap, LEAF, &[], &mut new)?));
        }
        while level.len() > 1 {
            // Evenly filled, so no inner node has one entry (its header
            // would read as a leaf's).
            let groups = level.len().div_ceil(FANOUT);
            let mut up = Vec::new();
            let mut rest = &level[..];
            for g in 0..groups {
                let (chunk, tail) = rest.split_at(rest.len() / (groups - g));
                up.push((chunk[0].0.clone(), build(heap, chunk.len() as u64, chunk, &mut new)?));
                rest = tail;
            }
            level = up;
        }
        heap.set_u64(root_at, level[0].1);
        heap.persist(root_at, 8);
        Ok(BTree { root_at, split_at })
    }

    /// A tree created earlier (after a restart, call [`recover_split`]
    /// first).
    pub fn open(root_at: u64, split_at: u64) -> BTree {
        BTree { root_at, split_at }
    }

    pub fn root(&self, heap: &Heap) -> u64 {
        heap.u64(self.root_at)
    }

    /// The value of `key`.
    pub fn get(&self, heap: &mut Heap, key: &[u8]) -> Option<u64> {
        let leaf = self.descend(heap, key, &mut Vec::new());
        find(heap, leaf, key).map(|i| heap.u64(entry(leaf, i) + VALUE))
    }

    /// Sets the value of an existing `key` (one atomic store); false if
    /// absent.
    pub fn set(&self, heap: &mut Heap, key: &[u8], value: u64) -> bool {
        let leaf = self.descend(heap, key, &mut Vec::new());
        match find(heap, leaf, key) {
            Some(i) => {
                heap.set_u64(entry(leaf, i) + VALUE, value);
                heap.persist(entry(leaf, i) + VALUE, 8);
                true
            }
            None => false,
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, heap: &mut Heap, key: &[u8]) -> Option<u64> {
        let leaf = self.descend(heap, key, &mut Vec::new());
        let i = find(heap, leaf, key)?;
        let value = heap.u64(entry(leaf, i) + VALUE);
        let bits = heap.u64(leaf + 8) & !(1 << i);
        heap.set_u64(leaf + 8, bits);
        heap.persist(leaf + 8, 8);
        Some(value)
    }

    /// Inserts a new `key` (the caller knows it is absent).
    pub fn insert(&self, heap: &mut Heap, key: &[u8], value: u64) -> io::Result<()> {
        if key.len() > MAX_KEY {
            return Err(key_too_long(key));
        }
        let mut path = Vec::new();
        let leaf = self.descend(heap, key, &mut path);
        debug_assert!(find(heap, leaf, key).is_none(), "BTree::insert of a present key");
        let bits = heap.u64(leaf + 8);
        if bits.count_ones() < FANOUT as u32 {
            let i = (!bits).trailing_zeros() as usize;
            write_entry(heap, entry(leaf, i), key, value);
            heap.persist(entry(leaf, i), LINE);
            heap.set_u64(leaf + 8, bits | 1 << i);
            heap.persist(leaf + 8, 8);
            return Ok(());
        }
        self.split(heap, leaf, path, key, value)
    }

    /// Splits the full `leaf` while adding `key`, copying the path.
    fn split(&self, heap: &mut Heap, leaf: u64, path: Vec<(u64, usize)>, key: &[u8], value: u64) -> io::Result<()> {
        let mut entries = leaf_entries(heap, leaf);
        entries.push((key.to_vec(), value));
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (mut new, mut old) = (Vec::new(), vec![leaf]);
        let mid = entries.len() / 2;
        let left = build(heap, LEAF, &entries[..mid], &mut new)?;
        let right = build(heap, LEAF, &entries[mid..], &mut new)?;
        // What replaces the child at each level: (node) or (left, sep, right).
        let mut replace = (left, Some((entries[mid].0.clone(), right)));
        for &(node, at) in path.iter().rev() {
            old.push(node);
            let mut inner = inner_entries(heap, node);
            inner[at].1 = replace.0;
            if let Some((sep, right)) = replace.1.take() {
                inner.insert(at + 1, (sep, right));
            }
            replace = if inner.len() <= FANOUT {
                (build(heap, inner.len() as u64, &inner, &mut new)?, None)
            } else {
                let mid = inner.len() / 2;
                let l = build(heap, mid as u64, &inner[..mid], &mut new)?;
                let r = build(heap, (inner.len() - mid) as u64, &inner[mid..], &mut new)?;
                (l, Some((inner[mid].0.clone(), r)))
            };
        }
        let root = match replace {
            (node, None) => node,
            (l, Some((sep, r))) => build(heap, 2, &[(Vec::new(), l), (sep, r)], &mut new)?,
        };
        assert!(new.len() <= MAX_NEW && old.len() <= MAX_OLD, "B+tree deeper than a split record holds");
        // The split record, then the switch, then the slot states.
        let rec = self.split_at;
        heap.set_u64(rec + 8, self.root_at);
        heap.set_u64(rec + 16, root);
        heap.set_u64(rec + 24, new.len() as u64);
        heap.set_u64(rec + 32, old.len() as u64);
        for (i, &n) in new.iter().enumerate() {
            heap.set_u64(rec + LISTS + 8 * i as u64, n);
        }
        for (i, &o) in old.iter().enumerate() {
            heap.set_u64(rec + LISTS + 8 * (MAX_NEW + i) as u64, o);
        }
        heap.persist(rec + 8, SPLIT_RECORD - 8);
        heap.set_u64(rec, 1);
        heap.persist(rec, 8);
        heap.set_u64(self.root_at, root);
        heap.persist(self.root_at, 8);
        for n in new {
            heap.persisted(n);
        }
        for o in old {
            heap.free(o);
        }
        heap.set_u64(rec, 0);
        heap.persist(rec, 8);
        Ok(())
    }

    /// Walks to the leaf for `key`, recording (inner node, child index).
    fn descend(&self, heap: &mut Heap, key: &[u8], path: &mut Vec<(u64, usize)>) -> u64 {
        let mut node = heap.u64(self.root_at);
        loop {
            heap.touch(node, NODE);
            let n = heap.u64(node);
            if n == LEAF {
                return node;
            }
            let at = child_index(heap, node, n as usize, key);
            path.push((node, at));
            node = heap.u64(entry(node, at) + VALUE);
        }
    }

    /// Visits entries with keys in `[lo, hi)` in order (descending with
    /// `reverse`) until `visit` returns false.
    pub fn scan(
        &self,
        heap: &mut Heap,
        lo: &[u8],
        hi: Option<&[u8]>,
        reverse: bool,
        visit: &mut dyn FnMut(&mut Heap, &[u8], u64) -> bool,
    ) {
        let root = heap.u64(self.root_at);
        scan_node(heap, root, lo, hi, reverse, visit);
    }

    /// Every node reachable from the root (tests check for leaks with it).
    pub fn nodes(&self, heap: &Heap) -> Vec<u64> {
        let mut out = Vec::new();
        let mut stack = vec![heap.u64(self.root_at)];
        while let Some(n) = stack.pop() {
            out.push(n);
            let count = heap.u64(n);
            if count != LEAF {
                stack.extend((0..count as usize).map(|i| heap.u64(entry(n, i) + VALUE)));
            }
        }
        out
    }
}

/// After a restart: finishes the split a crash interrupted if its root
/// switch happened (marks the new nodes persisted, frees the replaced ones),
/// else frees the new nodes.
pub fn recover_split(heap: &mut Heap, split_at: u64) {
    use crate::pmem::SlotState::Unallocated;
    if heap.u64(split_at) != 1 {
        return;
    }
    let (root_at, root) = (heap.u64(split_at + 8), heap.u64(split_at + 16));
    let switched = heap.u64(root_at) == root;
    let (n, o) = (heap.u64(split_at + 24) as usize, heap.u64(split_at + 32) as usize);
    let word = |heap: &Heap, i: usize| heap.u64(split_at + LISTS + 8 * i as u64);
    for i in 0..n.min(MAX_NEW) {
        let node = word(heap, i);
        if switched {
            heap.persisted(node);
        } else if heap.state(node) != Unallocated {
            heap.free(node);
        }
    }
    for i in 0..o.min(MAX_OLD) {
        let node = word(heap, MAX_NEW + i);
        if switched && heap.state(node) != Unallocated {
            heap.free(node);
        }
    }
    heap.set_u64(split_at, 0);
    heap.persist(split_at, 8);
}

fn new_node(heap: &mut Heap, header: u64) -> io::Result<u64> {
    let n = heap.alloc(NODE, Component::Index)?;
    heap.set_u64(n, header);
    heap.set_u64(n + 8, 0);
    Ok(n)
}

/// A new node holding `entries` (a leaf when `header` is [`LEAF`]),
/// persisted, recorded in `new`.
fn build(heap: &mut Heap, header: u64, entries: &[(Vec<u8>, u64)], new: &mut Vec<u64>) -> io::Result<u64> {
    let n = new_node(heap, header)?;
    for (i, (k, v)) in entries.iter().enumerate() {
        write_entry(heap, entry(n, i), k, *v);
    }
    if header == LEAF {
        heap.set_u64(n + 8, (1u64 << entries.len()) - 1);
    }
    heap.persist(n, LINE * (entries.len() + 1));
    new.push(n);
    Ok(n)
}

fn write_entry(heap: &mut Heap, at: u64, key: &[u8], value: u64) {
    let e = heap.bytes_mut(at, LINE);
    e[0] = key.len() as u8;
    e[1..1 + key.len()].copy_from_slice(key);
    e[VALUE as usize..].copy_from_slice(&value.to_le_bytes());
}

fn key_of(heap: &Heap, at: u64) -> &[u8] {
    let len = heap.bytes(at, 1)[0] as usize;
    heap.bytes(at + 1, len.min(MAX_KEY))
}

fn find(heap: &Heap, leaf: u64, key: &[u8]) -> Option<usize> {
    let mut bits = heap.u64(leaf + 8);
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if key_of(heap, entry(leaf, i)) == key {
            return Some(i);
        }
    }
    None
}

/// The child of an inner node with `n` entries that covers `key`.
fn child_index(heap: &Heap, node: u64, n: usize, key: &[u8]) -> usize {
    // The last entry whose key is <= `key` (entry 0 covers everything below).
    let (mut lo, mut hi) = (1, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if key_of(heap, entry(node, mid)) <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo - 1
}

fn leaf_entries(heap: &Heap, leaf: u64) -> Vec<(Vec<u8>, u64)> {
    let mut bits = heap.u64(leaf + 8);
    let mut out = Vec::with_capacity(FANOUT + 1);
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        out.push((key_of(heap, entry(leaf, i)).to_vec(), heap.u64(entry(leaf, i) + VALUE)));
    }
    out
}

fn inner_entries(heap: &Heap, node: u64) -> Vec<(Vec<u8>, u64)> {
    let n = heap.u64(node) as usize;
    (0..n).map(|i| (key_of(heap, entry(node, i)).to_vec(), heap.u64(entry(node, i) + VALUE))).collect()
}

fn in_range(k: &[u8], lo: &[u8], hi: Option<&[u8]>) -> bool {
    k >= lo && hi.is_none_or(|h| k < h)
}

fn scan_node(
    heap: &mut Heap,
    node: u64,
    lo: &[u8],
    hi: Option<&[u8]>,
    reverse: bool,
    visit: &mut dyn FnMut(&mut Heap, &[u8], u64) -> bool,
) -> bool {
    heap.touch(node, NODE);
    let n = heap.u64(node);
    if n == LEAF {
        let mut entries = leaf_entries(heap, node);
        entries.retain(|(k, _)| in_range(k, lo, hi));
        entries.sort_unstable_by(|a, b| if reverse { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
        return entries.iter().all(|(k, v)| visit(heap, k, *v));
    }
    let n = n as usize;
    let first = child_index(heap, node, n, lo);
    let last = match hi {
        // A child whose first key is >= hi holds nothing in range.
        Some(h) => {
            let c = child_index(heap, node, n, h);
            if c > first && key_of(heap, entry(node, c)).cmp(h) != Ordering::Less {
                c - 1
            } else {
                c
            }
        }
        None => n - 1,
    };
    let children: Vec<u64> = (first..=last).map(|i| heap.u64(entry(node, i) + VALUE)).collect();
    let mut go = |c: &u64| scan_node(heap, *c, lo, hi, reverse, visit);
    if reverse {
        children.iter().rev().all(&mut go)
    } else {
        children.iter().all(&mut go)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::{Evict, Latency, Medium, Pmem, ROOT};
    use std::collections::BTreeMap;

    fn key(i: u32) -> Vec<u8> {
        // Variable lengths, to exercise comparisons of unequal keys.
        let mut k = format!("k{:07}", (i * 7919) % 100_003).into_bytes();
        k.resize(9 + (i % 5) as usize, b'x');
        k
    }

    #[test]
    fn matches_a_btreemap_through_inserts_removes_and_scans() {
        let (mut pm, _) = Pmem::open(Medium::Simulated, 64 << 20, Latency::default()).expect("pmem");
        let heap = &mut pm.heap;
        let t = BTree::create(heap, ROOT, ROOT + 64).expect("tree");
        heap.persisted(t.root(heap));
        let mut model = BTreeMap::new();
        for i in 0..5000u32 {
            let k = key(i);
            if model.contains_key(&k) {
                continue;
            }
            t.insert(heap, &k, i as u64).expect("insert");
            model.insert(k, i as u64);
        }
        for i in (0..5000u32).step_by(3) {
            assert_eq!(t.remove(heap, &key(i)), model.remove(&key(i)));
        }
        for i in (1..5000u32).step_by(7) {
            let k = key(i);
            assert_eq!(t.set(heap, &k, 7), model.contains_key(&k));
            if let Some(v) = model.get_mut(&k) {
                *v = 7;
            }
        }
        for (k, v) in &model {
            assert_eq!(t.get(heap, k), Some(*v));
        }
        for (lo, hi, rev) in [(&b"k001"[..], Some(&b"k004"[..]), false), (b"k05", None, true), (b"", None, false)] {
            let mut got = Vec::new();
            t.scan(heap, lo, hi, rev, &mut |_, k, v| {
                got.push((k.to_vec(), v));
                got.len() < 700
            });
            let range = model.range(lo.to_vec()..).take_while(|(k, _)| hi.is_none_or(|h| k.as_slice() < h));
            let mut want: Vec<_> = range.map(|(k, v)| (k.clone(), *v)).collect();
            if rev {
                // Descending from the top of the range.
                want.reverse();
            }
            want.truncate(700);
            assert_eq!(got, want, "scan {lo:?}..{hi:?} reverse {rev}");
        }
    }

    /// Crashes at every persist of a run of inserts: every recovered tree
    /// holds a prefix of the inserts (the last one possibly in or out), and
    /// exactly its nodes are persisted.
    /// Every size up to a few levels, including those whose last group
    /// of children would hold one entry (16 leaves, 226 leaves, ...).
    #[test]
    fn bulk_load_finds_every_key_and_scans_in_order() {
        let (mut pm, _) = Pmem::open(Medium::Simulated, 64 << 20, Latency::default()).expect("pmem");
        let heap = &mut pm.heap;
        for n in (0..400u32).chain([15 * 226, 15 * 226 + 1]) {
            let entries: Vec<(Vec<u8>, u64)> = (0..n).map(|i| (key(i * 2), i as u64)).collect();
            let mut sorted = entries.clone();
            sorted.sort();
            let t = BTree::bulk_load(heap, ROOT, ROOT + 64, &sorted).expect("bulk");
            for (i, (k, v)) in sorted.iter().enumerate() {
                assert_eq!(t.get(heap, k), Some(*v), "n {n}, entry {i}");
                assert_eq!(t.get(heap, &key(i as u32 * 2 + 1)), None);
            }
            let mut got = Vec::new();
            t.scan(heap, b"", None, false, &mut |_, k, v| {
                got.push((k.to_vec(), v));
                true
            });
            assert_eq!(got, sorted, "n {n}");
            for node in t.nodes(heap) {
                heap.free(node);
            }
        }
    }

    #[test]
    fn every_crash_point_leaves_a_prefix_and_no_leak() {
        let n = 200u32;
        let (mut pm, _) = Pmem::open(Medium::Simulated, 16 << 20, Latency::default()).expect("pmem");
        let t = BTree::create(&mut pm.heap, ROOT, ROOT + 64).expect("tree");
        let base = pm.clock.events();
        for i in 0..n {
            t.insert(&mut pm.heap, &key(i), i as u64).expect("insert");
        }
        let total = pm.clock.events() - base;
        for cut in (0..total).step_by(3) {
            let (mut pm, _) = Pmem::open(Medium::Simulated, 16 << 20, Latency::default()).expect("pmem");
            let t = BTree::create(&mut pm.heap, ROOT, ROOT + 64).expect("tree");
            let root = t.root(&pm.heap);
            pm.heap.persisted(root);
            pm.clock.cut_after(cut);
            for i in 0..n {
                t.insert(&mut pm.heap, &key(i), i as u64).expect("insert");
            }
            let evict = Evict::Random { seed: cut, percent: 30 };
            let mut after = pm.crash(if cut % 2 == 0 { Evict::Nothing } else { evict }).expect("crash");
            recover_split(&mut after.heap, ROOT + 64);
            let t = BTree::open(ROOT, ROOT + 64);
            let present: Vec<bool> = (0..n).map(|i| t.get(&mut after.heap, &key(i)) == Some(i as u64)).collect();
            let k = present.iter().take_while(|p| **p).count();
            assert!(present[k..].iter().filter(|p| **p).count() <= 1, "cut {cut}: not a prefix: {present:?}");
            after.heap.reclaim_all();
            let mut live: Vec<u64> = after.heap.live().into_iter().map(|(o, _)| o).collect();
            let mut reach = t.nodes(&after.heap);
            live.sort_unstable();
            reach.sort_unstable();
            assert_eq!(live, reach, "cut {cut}: persisted slots != reachable nodes");
        }
    }
}

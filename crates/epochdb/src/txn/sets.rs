//! The read set, write set and node set of a transaction (Silo §4.4, §4.6).
//!
//! Buffers live in the worker and are reused, so a transaction allocates
//! nothing once they have grown to its size.
//!
//! Invariants:
//! - Every read-set word has the lock bit clear and the latest bit set: it
//!   is a committed (or placeholder) version that was current when read.
//! - The write set holds at most one entry per record; at commit it is
//!   sorted by record address, the global lock order. Every record in it
//!   has its bit set in the filter (a set bit proves nothing; a clear one
//!   proves absence). Once it holds [`INDEXED_FROM`] entries, and until it
//!   is sorted or cleared, `index` holds the position of every entry.
//! - Once the node set holds [`INDEXED_FROM`] entries, its `index` holds
//!   the position of every entry (a leaf may have several).
//! - Node-set versions are the versions the transaction observed, updated
//!   only by the transaction's own inserts (Silo §4.6).

use crate::error::AbortReason;
use crate::index::{Insert, Leaf};
use crate::record::Record;
use std::ptr::NonNull;

#[derive(Debug, Clone, Copy)]
pub struct ReadEntry {
    pub rec: NonNull<Record>,
    pub word: u64,
    pub table: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Put,
    Delete,
}

#[derive(Debug, Clone, Copy)]
pub struct WriteEntry {
    pub rec: NonNull<Record>,
    pub table: u32,
    pub kind: WriteKind,
    /// The new value: `arena[value_at..value_at + value_len]`.
    pub value_at: u32,
    pub value_len: u32,
    /// This transaction inserted the record as a placeholder.
    pub inserted: bool,
    /// The TID word found when Phase 1 locked the record.
    pub locked_word: u64,
}

impl WriteEntry {
    /// The new value, in the write set's `arena`.
    #[inline]
    fn value_in<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        &arena[self.value_at as usize..(self.value_at + self.value_len) as usize]
    }
}

#[derive(Debug, Clone, Copy)]
pub struct NodeEntry {
    pub leaf: *const Leaf,
    pub version: u64,
}

#[derive(Debug, Default)]
pub struct Sets {
    pub read: Vec<ReadEntry>,
    pub write: Vec<WriteEntry>,
    pub nodes: NodeSet,
    pub arena: Vec<u8>,
    /// One bit per write-set record (`filter_bit`): a clear bit means the
    /// record is not in the write set, without a scan. Every read looks
    /// for its record among the writes, and a NEW-ORDER's ~23 writes made
    /// that scan a few percent of TPC-C.
    filter: u64,
    /// For a large write set, where the filter is all ones, each entry's
    /// position by its record. Empty while the write set is small, and
    /// after the commit sorts it. Without it a transaction of n updates
    /// takes time in n^2 (`cargo bench --bench commit`: 40 000 updates
    /// in one transaction, 527 ms without the table, 10.5 ms with it).
    index: Positions,
    /// Records `Txn::prefetch` found, with their tables, for the reads
    /// that follow (each taken once): such a read starts from the record
    /// instead of descending the index again. Only until the transaction
    /// ends (`Context::leave`), while its epoch keeps them live.
    pub ahead: Vec<Ahead>,
    /// The first entry of `ahead` not taken.
    ahead_from: usize,
}

/// The table of an [`Ahead`] entry a read has taken.
const TAKEN: u32 = u32::MAX;

/// Reads [`Sets::recently_read`] looks back over: enough for the rows of
/// one short scan written back after it (a TPC-C order's 5-15 lines).
const RECENT: usize = 16;

/// Write-set entries from which [`Sets::find_write`] looks a record up in
/// `Sets::index` instead of scanning: with 64 filter bits, past a few
/// dozen writes most bits are set and the filter rules little out.
const INDEXED_FROM: usize = 32;

/// The positions of a set's entries by an address (a record's, a leaf's),
/// for a set grown past [`INDEXED_FROM`] entries: an open-addressing table
/// of 1 + a position (0: an empty slot), at most half full. Entries with
/// the same address each have a slot.
#[derive(Debug, Default)]
struct Positions {
    slots: Vec<u32>,
}

impl Positions {
    fn clear(&mut self) {
        self.slots.clear();
    }

    fn is_built(&self) -> bool {
        !self.slots.is_empty()
    }

    /// After the set's entry `n - 1` was added (`addr(i)`: entry `i`'s
    /// address): builds the table when the set reaches [`INDEXED_FROM`]
    /// entries, doubles it when it would be over half full, or adds the
    /// new entry.
    fn added(&mut self, n: usize, addr: impl Fn(usize) -> usize) {
        if n < INDEXED_FROM {
            return;
        }
        if n * 2 > self.slots.len() {
            self.slots.clear();
            self.slots.resize((n * 4).next_power_of_two(), 0);
            (0..n).for_each(|at| self.put(at, addr(at)));
        } else {
            self.put(n - 1, addr(n - 1));
        }
    }

    fn put(&mut self, at: usize, addr: usize) {
        let mask = self.slots.len() - 1;
        let mut slot = Self::first_slot(addr, mask);
        while self.slots[slot] != 0 {
            slot = (slot + 1) & mask;
        }
        self.slots[slot] = at as u32 + 1;
    }

    /// Every position with the address `addr`, and some others: the
    /// caller checks each.
    fn candidates(&self, addr: usize) -> impl Iterator<Item = usize> + '_ {
        let mask = self.slots.len() - 1;
        let mut slot = Self::first_slot(addr, mask);
        std::iter::from_fn(move || {
            let at = self.slots[slot].checked_sub(1)? as usize;
            slot = (slot + 1) & mask;
            Some(at)
        })
    }

    /// Multiplicative hashing: the product's top bits mix every bit of
    /// the address.
    #[inline]
    fn first_slot(addr: usize, mask: usize) -> usize {
        ((addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
    }
}

/// [`Sets::find_write`], on the write set's parts.
#[inline]
fn find_in(write: &[WriteEntry], filter: u64, index: &Positions, rec: NonNull<Record>) -> Option<usize> {
    if filter & filter_bit(rec) == 0 {
        return None;
    }
    if !index.is_built() {
        return write.iter().rposition(|w| w.rec == rec);
    }
    index.candidates(rec.as_ptr() as usize).find(|&at| write[at].rec == rec)
}

/// The write set as a scan reads it ([`Sets::for_scan`]).
pub struct Writes<'a> {
    write: &'a [WriteEntry],
    arena: &'a [u8],
    filter: u64,
    index: &'a Positions,
}

impl<'a> Writes<'a> {
    /// This transaction's write of `rec`, if any: its kind and value.
    #[inline]
    pub fn find(&self, rec: NonNull<Record>) -> Option<(WriteKind, &'a [u8])> {
        let w = &self.write[find_in(self.write, self.filter, self.index, rec)?];
        Some((w.kind, w.value_in(self.arena)))
    }
}

/// The node set (Silo §4.6): the leaves whose absence of a key, or whose
/// range, the transaction observed, at the versions it observed.
#[derive(Debug, Default)]
pub struct NodeSet {
    entries: Vec<NodeEntry>,
    /// Each entry's position by its leaf, once there are many: a
    /// transaction's own insert updates every entry of its leaf, and a
    /// scan of them all made n inserts after n failed lookups time in n^2.
    index: Positions,
}

impl NodeSet {
    pub fn push(&mut self, entry: NodeEntry) {
        self.entries.push(entry);
        let entries = &self.entries;
        self.index.added(entries.len(), |at| entries[at].leaf as usize);
    }

    pub fn iter(&self) -> std::slice::Iter<'_, NodeEntry> {
        self.entries.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.index.clear();
    }

    /// Calls `f` on every entry of `leaf`, until it returns an error.
    fn for_leaf<E>(&mut self, leaf: *const Leaf, mut f: impl FnMut(&mut NodeEntry) -> Result<(), E>) -> Result<(), E> {
        if !self.index.is_built() {
            return self.entries.iter_mut().filter(|n| n.leaf == leaf).try_for_each(f);
        }
        for at in self.index.candidates(leaf as usize) {
            let n = &mut self.entries[at];
            if n.leaf == leaf {
                f(n)?;
            }
        }
        Ok(())
    }
}

/// A record `Txn::prefetch` found: its table, its key's length and first
/// 8 bytes (so that matching a read rarely reads the record's key).
#[derive(Debug, Clone, Copy)]
pub struct Ahead {
    table: u32,
    len: u32,
    head: u64,
    rec: NonNull<Record>,
}

impl Ahead {
    pub fn new(table: u32, key: &[u8], rec: NonNull<Record>) -> Ahead {
        Ahead { table, len: key.len() as u32, head: head8(key), rec }
    }
}

/// A key's first 8 bytes, zero-padded.
#[inline]
fn head8(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_ne_bytes(b)
}

/// A record's bit in [`Sets::filter`]. Records are at least 8-aligned
/// and 24 bytes apart, so bits 3.. vary between them.
#[inline]
fn filter_bit(rec: NonNull<Record>) -> u64 {
    let a = rec.as_ptr() as usize;
    1 << (((a >> 3) ^ (a >> 9)) & 63)
}

impl Sets {
    pub fn clear(&mut self) {
        self.read.clear();
        self.write.clear();
        self.nodes.clear();
        self.arena.clear();
        self.filter = 0;
        self.index.clear();
    }

    /// The write-set entry for `rec`, if any, before the commit sorts the
    /// write set: skipped when the filter rules `rec` out, a scan of a
    /// small write set, a lookup in `index` in a large one.
    #[inline]
    pub fn find_write(&self, rec: NonNull<Record>) -> Option<usize> {
        find_in(&self.write, self.filter, &self.index, rec)
    }

    /// What a scan adds to (the node set, the read set) and looks up (the
    /// writes), borrowed at once.
    pub fn for_scan(&mut self) -> (&mut NodeSet, &mut Vec<ReadEntry>, Writes<'_>) {
        let writes = Writes { write: &self.write, arena: &self.arena, filter: self.filter, index: &self.index };
        (&mut self.nodes, &mut self.read, writes)
    }

    /// Sorts the write set by record address, the lock order of Phase 1;
    /// the positions `index` holds are then stale, so it goes.
    pub fn sort_writes(&mut self) {
        self.write.sort_unstable_by_key(|w| w.rec.as_ptr() as usize);
        self.index.clear();
    }

    /// Is `rec` in the write set? Only after the commit sorted it.
    #[inline]
    pub fn in_sorted_write_set(&self, rec: NonNull<Record>) -> bool {
        self.write.binary_search_by_key(&(rec.as_ptr() as usize), |w| w.rec.as_ptr() as usize).is_ok()
    }

    /// A record this transaction read recently for `key` in `table`: lets a
    /// read-modify-write skip its second index descent. Only the last
    /// [`RECENT`] reads are checked, so the cost stays constant.
    #[inline]
    pub fn recently_read(&self, table: u32, key: &[u8]) -> Option<NonNull<Record>> {
        self.read.iter().rev().take(RECENT).find_map(|r| {
            // SAFETY: read-set records stay live until the transaction ends.
            (r.table == table && unsafe { r.rec.as_ref() }.key() == key).then_some(r.rec)
        })
    }

    /// The record `Txn::prefetch` found for `key` in `table`, if any; the
    /// read takes it. Perhaps no longer the key's latest record: the
    /// reader checks, as after any lookup.
    #[inline]
    pub fn take_ahead(&mut self, table: u32, key: &[u8]) -> Option<NonNull<Record>> {
        if self.ahead_from == self.ahead.len() {
            return None;
        }
        let (len, head) = (key.len() as u32, head8(key));
        // Reads mostly come in the order of their prefetch: the search
        // starts at the first entry not taken, and taken entries are
        // marked, not removed (a STOCK-LEVEL prefetches ~200).
        let from = self.ahead_from;
        let i = from
            + self.ahead[from..].iter().position(|a| {
                a.table == table
                    && a.len == len
                    && a.head == head
                    && (len <= 8 || {
                        // SAFETY: found within the transaction's epoch, still under way.
                        unsafe { a.rec.as_ref() }.key() == key
                    })
            })?;
        let taken = std::mem::replace(&mut self.ahead[i].table, TAKEN);
        debug_assert_ne!(taken, TAKEN);
        while self.ahead.get(self.ahead_from).is_some_and(|a| a.table == TAKEN) {
            self.ahead_from += 1;
        }
        Some(self.ahead[i].rec)
    }

    /// Forgets what `Txn::prefetch` found (the transaction's epoch ends).
    pub fn clear_ahead(&mut self) {
        self.ahead.clear();
        self.ahead_from = 0;
    }

    /// Records a write of `value` (or a delete) to `rec`, replacing an
    /// earlier write to the same record.
    pub fn write(&mut self, table: u32, rec: NonNull<Record>, kind: WriteKind, value: &[u8], inserted: bool) {
        let value_at = self.arena.len() as u32;
        if kind == WriteKind::Put {
            self.arena.extend_from_slice(value);
        }
        let value_len = if kind == WriteKind::Put { value.len() as u32 } else { 0 };
        // A placeholder this transaction just inserted is in no entry yet.
        let found = if inserted { None } else { self.find_write(rec) };
        match found {
            Some(i) => {
                let w = &mut self.write[i];
                w.kind = kind;
                w.value_at = value_at;
                w.value_len = value_len;
            }
            None => {
                self.filter |= filter_bit(rec);
                self.write.push(WriteEntry { rec, table, kind, value_at, value_len, inserted, locked_word: 0 });
                let write = &self.write;
                self.index.added(write.len(), |at| write[at].rec.as_ptr() as usize);
            }
        }
    }

    #[inline]
    pub fn value(&self, w: &WriteEntry) -> &[u8] {
        w.value_in(&self.arena)
    }

    /// Silo §4.6: after this transaction's own insert changed `leaf`, a
    /// node-set entry at the old version moves to the new one (and the new
    /// sibling of a split joins the set); an entry at any other version means
    /// someone else changed the leaf, so the transaction must abort.
    pub fn after_own_insert(&mut self, ins: &Insert) -> Result<(), AbortReason> {
        let Insert::Inserted { leaf, old_version, new_version, sibling } = *ins else {
            return Ok(());
        };
        let mut tracked = false;
        self.nodes.for_leaf(leaf, |n| {
            if n.version != old_version {
                return Err(AbortReason::InsertConflict);
            }
            n.version = new_version;
            tracked = true;
            Ok(())
        })?;
        if let (true, Some((leaf, version))) = (tracked, sibling) {
            self.nodes.push(NodeEntry { leaf, version });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize) -> NonNull<Record> {
        // Only compared, never dereferenced.
        NonNull::new((0x1000 + 24 * i) as *mut Record).expect("non-null")
    }

    /// Every written record is found (more records than filter bits, so
    /// bits are shared), records never written are not, a rewrite replaces
    /// its entry, and `clear` forgets everything.
    #[test]
    fn the_filter_never_hides_a_write() {
        let mut s = Sets::default();
        for i in (0..200).step_by(2) {
            s.write(0, rec(i), WriteKind::Put, b"v", i % 4 == 0);
        }
        for i in 0..200 {
            assert_eq!(s.find_write(rec(i)).is_some(), i % 2 == 0, "record {i}");
        }
        s.write(0, rec(10), WriteKind::Delete, &[], false);
        assert_eq!(s.write.len(), 100);
        assert_eq!(s.write[s.find_write(rec(10)).expect("written")].kind, WriteKind::Delete);
        s.clear();
        assert!((0..200).all(|i| s.find_write(rec(i)).is_none()));
    }

    /// An own insert moves every node-set entry of its leaf, and only
    /// those, whether the set is scanned or indexed; an entry of the leaf
    /// at another version is an insert conflict; a split's sibling joins.
    #[test]
    fn an_own_insert_moves_every_entry_of_its_leaf() {
        let leaf = |i: usize| (0x10_0000 + 512 * i) as *const Leaf;
        for leaves in [4, 300] {
            let mut s = Sets::default();
            // Each leaf observed twice, at version 10 + its number.
            for _ in 0..2 {
                for i in 0..leaves {
                    s.nodes.push(NodeEntry { leaf: leaf(i), version: 10 + i as u64 });
                }
            }
            assert_eq!(s.nodes.index.is_built(), leaves >= INDEXED_FROM);
            let ins = |i: usize, old: u64, sibling| Insert::Inserted {
                leaf: leaf(i),
                old_version: old,
                new_version: 99,
                sibling,
            };
            s.after_own_insert(&ins(2, 12, Some((leaf(leaves + 1), 7)))).expect("at the versions observed");
            for n in s.nodes.iter() {
                let want = match n.leaf {
                    l if l == leaf(2) => 99,
                    l if l == leaf(leaves + 1) => 7,
                    l => 10 + (l as usize - 0x10_0000) as u64 / 512,
                };
                assert_eq!(n.version, want, "leaves {leaves}");
            }
            assert_eq!(s.nodes.iter().filter(|n| n.leaf == leaf(2)).count(), 2);
            assert_eq!(s.nodes.iter().filter(|n| n.leaf == leaf(leaves + 1)).count(), 1, "the sibling joined");
            assert_eq!(s.after_own_insert(&ins(3, 12, None)), Err(AbortReason::InsertConflict), "leaf 3 was at 13");
            // A leaf nobody observed: nothing moves, no sibling joins.
            let before = s.nodes.iter().count();
            s.after_own_insert(&ins(leaves + 5, 0, Some((leaf(leaves + 6), 1)))).expect("untracked");
            assert_eq!(s.nodes.iter().count(), before);
            s.clear();
            assert!(s.nodes.is_empty() && !s.nodes.index.is_built());
        }
    }

    /// A write set past `INDEXED_FROM` entries is looked up through its
    /// index, which is rebuilt as it grows, forgets nothing, finds nothing
    /// never written, and is dropped when the commit sorts the entries.
    #[test]
    fn a_large_write_set_finds_every_write_through_its_index() {
        let mut s = Sets::default();
        for round in 0..2 {
            // Records in an order unlike their addresses, as a workload
            // writes them.
            let order: Vec<usize> = (0..5_000).map(|i| (i * 7919) % 5_000).collect();
            for (n, &i) in order.iter().enumerate() {
                s.write(0, rec(2 * i), WriteKind::Put, b"v", false);
                if n % 97 == 0 {
                    // Every write so far is found, at its own entry.
                    for &j in &order[..=n] {
                        let at = s.find_write(rec(2 * j)).expect("written");
                        assert_eq!(s.write[at].rec, rec(2 * j));
                    }
                }
            }
            assert!(s.index.is_built(), "round {round}: indexed");
            assert!((0..5_000).all(|i| s.find_write(rec(2 * i + 1)).is_none()));
            s.write(0, rec(20), WriteKind::Delete, &[], false);
            assert_eq!(s.write.len(), 5_000, "a rewrite replaces its entry");
            assert_eq!(s.write[s.find_write(rec(20)).expect("written")].kind, WriteKind::Delete);
            s.sort_writes();
            assert!(!s.index.is_built());
            assert!(s.write.windows(2).all(|w| w[0].rec < w[1].rec));
            s.clear();
            assert!((0..10_000).all(|i| s.find_write(rec(i)).is_none()));
        }
    }
}

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
//!   proves absence).
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

#[derive(Debug, Clone, Copy)]
pub struct NodeEntry {
    pub leaf: *const Leaf,
    pub version: u64,
}

#[derive(Debug, Default)]
pub struct Sets {
    pub read: Vec<ReadEntry>,
    pub write: Vec<WriteEntry>,
    pub nodes: Vec<NodeEntry>,
    pub arena: Vec<u8>,
    /// One bit per write-set record (`filter_bit`): a clear bit means the
    /// record is not in the write set, without a scan. Every read looks
    /// for its record among the writes, and a NEW-ORDER's ~23 writes made
    /// that scan a few percent of TPC-C.
    filter: u64,
    /// Records `Txn::prefetch` found, with their tables, for the reads
    /// that follow (each taken once): such a read starts from the record
    /// instead of descending the index again. Only until the transaction
    /// ends (`Worker::leave`), while its epoch keeps them live.
    pub ahead: Vec<Ahead>,
    /// The first entry of `ahead` not taken.
    ahead_from: usize,
}

/// The table of an [`Ahead`] entry a read has taken.
const TAKEN: u32 = u32::MAX;

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
    }

    /// The write-set entry for `rec`, if any (before commit: linear, the
    /// write set of a one-shot transaction is small, and skipped when the
    /// filter rules `rec` out).
    #[inline]
    pub fn find_write(&self, rec: NonNull<Record>) -> Option<usize> {
        if self.filter & filter_bit(rec) == 0 {
            return None;
        }
        self.write.iter().rposition(|w| w.rec == rec)
    }

    /// Is `rec` in the write set? Only after the commit sorted it.
    #[inline]
    pub fn in_sorted_write_set(&self, rec: NonNull<Record>) -> bool {
        self.write.binary_search_by_key(&(rec.as_ptr() as usize), |w| w.rec.as_ptr() as usize).is_ok()
    }

    /// A record this transaction read recently for `key` in `table`: lets a
    /// read-modify-write skip its second index descent. Only the last few
    /// reads are checked, so the cost stays constant.
    #[inline]
    pub fn recently_read(&self, table: u32, key: &[u8]) -> Option<NonNull<Record>> {
        self.read.iter().rev().take(4).find_map(|r| {
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
            }
        }
    }

    #[inline]
    pub fn value(&self, w: &WriteEntry) -> &[u8] {
        &self.arena[w.value_at as usize..(w.value_at + w.value_len) as usize]
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
        for n in self.nodes.iter_mut().filter(|n| n.leaf == leaf) {
            if n.version != old_version {
                return Err(AbortReason::InsertConflict);
            }
            n.version = new_version;
            tracked = true;
        }
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
}

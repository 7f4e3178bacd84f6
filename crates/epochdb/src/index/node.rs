//! Tree node layouts and key comparison (Silo §3, Masstree §4.1).
//!
//! Keys are compared as 8-byte big-endian *slices*, as in Masstree, but
//! where Masstree stacks trie layers this tree truncates prefixes per node:
//! every key in a node shares its first `skip` bytes (`skip <= 16`), which
//! the node header holds once as its *head*, and each entry keeps the slice
//! of the 8 bytes after them. Composite keys whose first bytes rarely
//! differ (TPC-C's `(w, d, o, ol)`, Redis keys such as `counter:000000123456`
//! behind a one-byte tag) therefore still compare by one integer per
//! entry; only equal slices fall back to the full key, which lives in the
//! record (leaves) or in an owned separator (inner nodes), and costs a
//! cache miss. (A head of at most 8 bytes left every Redis key of a leaf
//! with the same slice.) Not even those when every key of the node has one
//! length and ends within its slice, as in YCSB's table and every TPC-C
//! table but the customer-name index (37-byte keys): the header records
//! that length, and equal slices then mean equal keys.
//! Found that way, a lookup's only record miss is the read of its value.
//!
//! A leaf is eight cache lines: a 32-byte header, 30 slices and 30 record
//! pointers. An inner node is twelve: 30 separators (slice + pointer to
//! an owned copy of the key) and 31 children. Both are wide because a
//! lookup's descent is a chain of dependent loads, one per level, and
//! below the top levels each is a cache miss: twice the entries per leaf
//! halve the leaf parents, so more of them stay cached (measured against
//! 14-entry leaves: 1-thread YCSB 1.06-1.08x, TPC-C level, less memory;
//! 22 entries fell between), and 30 separators instead of 14 take a
//! level off a 4M-key tree (by estimate, with full nodes: inner levels of
//! 5, 139 and 4 300 nodes below the root instead of 3, 40, 593 and
//! 8 900): 1-thread YCSB 1.05-1.20x in five interleaved A/Bs, TPC-C
//! 1.12x on 1 thread and 1.04x on 2. 62 separators (24 lines) gained nothing more.
//!
//! Invariants:
//! - Entries `0..count` are sorted by key, strictly; slots at `count..` are
//!   null, so an optimistic reader that sees a stale count never follows a
//!   pointer to freed memory.
//! - Every key in a node is at least `skip` bytes long and starts with the
//!   head's first `skip` bytes; the head's other bytes are zero. A writer
//!   that adds a key the head does not cover narrows the head and rewrites
//!   the slices before it unlocks (`admit`), so the change is one version
//!   bump for readers.
//! - If `key_len` is not `MIXED_LENGTHS`, every key in the node is that
//!   long: an insert of another length marks the node mixed, under the
//!   same lock and version bump (`admit`), and a rewrite recomputes it
//!   (`reframe`). A removal keeps it, as the rest still share it.
//! - In an inner node, every key in `children[i]` is `>= keys[i-1]` and
//!   `< keys[i]`.

use super::node_version::{NodeVersion, Restart};
use crate::arena;
use crate::record::Record;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::cmp::Ordering as Cmp;

pub const LEAF_WIDTH: usize = 30;
/// Cache lines of a record a lookup prefetches: a YCSB row (16-byte header,
/// 8-byte key, 104-byte value: 128 bytes) spans two, or three when it does
/// not start on a line.
const RECORD_LINES: usize = 3;
pub const INNER_WIDTH: usize = 30;

/// A separator key owned by an inner node.
pub type SepKey = Box<[u8]>;

#[repr(C)]
#[derive(Debug)]
pub struct NodeHeader {
    pub version: NodeVersion,
    pub count: AtomicU32,
    pub is_leaf: bool,
    /// Bytes every key in the node shares (0..=16).
    skip: AtomicU8,
    /// 1 + the position of the last insert (a leaf's entry, an inner
    /// node's separator); 0 if unknown. Splits read it to tell ascending
    /// inserts (see `Tree::split_leaf`). Written under the node's lock.
    last: AtomicU8,
    /// The length every key in the node has, or [`MIXED_LENGTHS`]. When
    /// the keys are no longer than `skip + 8` bytes, equal lengths make a
    /// key's slice the whole rest of it, so a search decides a tie without
    /// reading the entry's key: a leaf's from its record, a cache miss that
    /// would stall a batch of lookups at each leaf (`Tree::lookup_batch`).
    /// Written under the node's lock, read optimistically.
    key_len: AtomicU8,
    /// Those bytes, big-endian, zero padded: the first 8, then the next 8.
    /// Read optimistically like everything else here (the version says
    /// whether the two halves belong together).
    head: [AtomicU64; 2],
}

#[repr(C, align(64))]
#[derive(Debug)]
pub struct Leaf {
    pub hdr: NodeHeader,
    pub slices: [AtomicU64; LEAF_WIDTH],
    pub records: [AtomicPtr<Record>; LEAF_WIDTH],
}

#[repr(C, align(64))]
#[derive(Debug)]
pub struct Inner {
    pub hdr: NodeHeader,
    pub slices: [AtomicU64; INNER_WIDTH],
    pub keys: [AtomicPtr<SepKey>; INNER_WIDTH],
    pub children: [AtomicPtr<NodeHeader>; INNER_WIDTH + 1],
}

const _: () = assert!(std::mem::size_of::<NodeHeader>() == 32);
const _: () = assert!(std::mem::size_of::<Leaf>() == 512, "a leaf is eight cache lines");
const _: () = assert!(std::mem::size_of::<Inner>() == 768, "an inner node is twelve cache lines");

/// [`NodeHeader::key_len`] of a node whose keys differ in length (or are
/// longer than 254 bytes, or that is empty).
const MIXED_LENGTHS: u8 = u8::MAX;

/// A key's length as [`NodeHeader::key_len`] codes it.
#[inline]
fn length_code(key: &[u8]) -> u8 {
    u8::try_from(key.len()).unwrap_or(MIXED_LENGTHS)
}

/// Where a key falls relative to a node's head.
enum Place {
    /// Below every key in the node.
    Below,
    /// Shares the head: its slice after the head, and the head's length.
    Within(u64, usize),
    /// Above every key in the node.
    Above,
}

/// Bytes `at..at + 8` of `key` as a big-endian integer, zero padded.
#[inline]
pub fn slice_at(key: &[u8], at: usize) -> u64 {
    // Whole slices take one load; only a key's tail takes the padded copy
    // (a call to memcpy, as its length is not known here).
    if let Some(b) = key.get(at..at + 8) {
        return u64::from_be_bytes(b.try_into().expect("8 bytes"));
    }
    let len = key.len();
    if at >= len {
        return 0;
    }
    if len >= 8 {
        // The last 8 bytes, shifted so that byte `at` comes first.
        let last = u64::from_be_bytes(key[len - 8..].try_into().expect("8 bytes"));
        return last << (8 * (at + 8 - len));
    }
    short_slice(&key[at..])
}

/// `b`, shorter than 8 bytes, as the top bytes of a big-endian integer,
/// zero padded. Two overlapping loads (or three bytes) instead of a padded
/// copy, which is a call to memcpy: TPC-C's 4-byte keys (warehouse, item)
/// took that call at every node.
#[inline]
fn short_slice(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n < 8);
    if n >= 4 {
        // Bytes 0..4 and n-4..n; where they overlap they agree.
        let hi = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let lo = u32::from_be_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]) as u64;
        (hi << 32) | (lo << (8 * (8 - n)))
    } else if n > 0 {
        // Bytes 0, n/2 and n-1 cover a key of 1 to 3 bytes.
        let at = |i: usize| (b[i] as u64) << (56 - 8 * i);
        at(0) | at(n / 2) | at(n - 1)
    } else {
        0
    }
}

/// Most bytes a head holds.
const MAX_SKIP: usize = 16;

/// Bytes `0..16` of `key` as a big-endian integer, zero padded.
#[inline]
fn prefix16(key: &[u8]) -> u128 {
    if let Some(b) = key.get(..16) {
        return u128::from_be_bytes(b.try_into().expect("16 bytes"));
    }
    if key.len() >= 8 {
        return ((slice_at(key, 0) as u128) << 64) | slice_at(key, 8) as u128;
    }
    (short_slice(key) as u128) << 64
}

/// The top `skip` bytes of a 16-byte word.
#[inline]
fn head_mask(skip: usize) -> u128 {
    (!0u128).checked_shl(128 - 8 * skip as u32).unwrap_or(0)
}

impl NodeHeader {
    fn new(is_leaf: bool) -> NodeHeader {
        NodeHeader {
            version: NodeVersion::default(),
            count: AtomicU32::new(0),
            is_leaf,
            skip: AtomicU8::new(0),
            last: AtomicU8::new(0),
            key_len: AtomicU8::new(MIXED_LENGTHS),
            head: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Records an insert at `pos` (caller holds the lock or owns the node).
    pub fn note_insert(&self, pos: usize) {
        self.last.store(pos as u8 + 1, Ordering::Relaxed);
    }

    /// Whether the last insert went at `pos - 1`: one at `pos` continues an
    /// ascending run (caller holds the lock).
    pub fn follows_last_insert(&self, pos: usize) -> bool {
        pos > 0 && self.last.load(Ordering::Relaxed) as usize == pos
    }

    /// Keeps `last` pointing at the same entry when entry `pos` is removed.
    fn note_remove(&self, pos: usize) {
        let last = self.last.load(Ordering::Relaxed) as usize;
        if pos + 1 < last {
            self.last.store(last as u8 - 1, Ordering::Relaxed);
        } else if pos + 1 == last {
            self.last.store(0, Ordering::Relaxed);
        }
    }

    /// `(skip, head)`. Optimistic: the caller validates the version.
    #[inline]
    fn frame(&self) -> (usize, u128) {
        let skip = (self.skip.load(Ordering::Relaxed) as usize).min(MAX_SKIP);
        let hi = self.head[0].load(Ordering::Relaxed) as u128;
        // The second half only when the head reaches into it.
        let lo = if skip > 8 { self.head[1].load(Ordering::Relaxed) as u128 } else { 0 };
        (skip, (hi << 64) | lo)
    }

    fn set_frame(&self, skip: usize, head: u128) {
        self.skip.store(skip as u8, Ordering::Relaxed);
        self.head[0].store((head >> 64) as u64, Ordering::Relaxed);
        self.head[1].store(head as u64, Ordering::Relaxed);
    }

    #[inline]
    fn place(&self, key: &[u8]) -> Place {
        let (skip, head) = self.frame();
        if skip == 0 {
            return Place::Within(slice_at(key, 0), 0);
        }
        let h = prefix16(key) & head_mask(skip);
        if key.len() < skip {
            // A proper prefix of the head sorts before every key here.
            return if h <= head { Place::Below } else { Place::Above };
        }
        match h.cmp(&head) {
            Cmp::Less => Place::Below,
            Cmp::Greater => Place::Above,
            Cmp::Equal => Place::Within(slice_at(key, skip), skip),
        }
    }

    /// Sets the frame of a node whose `count` entries are being rewritten
    /// from `keys` (caller holds the lock or owns the node), and forgets
    /// its last insert; returns their slices through `slices`. The frame
    /// is the common prefix of the first and last key: every key between
    /// them shares it.
    fn reframe<'k>(&self, slices: &[AtomicU64], keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone) {
        let (first, last) = (keys.clone().next(), keys.clone().last());
        let skip = match (first, last) {
            (Some(a), Some(b)) => a.iter().zip(b).take(MAX_SKIP).take_while(|(x, y)| x == y).count(),
            _ => 0,
        };
        self.set_frame(skip, first.map_or(0, |k| prefix16(k) & head_mask(skip)));
        self.last.store(0, Ordering::Relaxed); // the entries move
        let mut len = first.map_or(MIXED_LENGTHS, length_code);
        for (s, k) in slices.iter().zip(keys) {
            s.store(slice_at(k, skip), Ordering::Relaxed);
            if length_code(k) != len {
                len = MIXED_LENGTHS;
            }
        }
        self.key_len.store(len, Ordering::Relaxed);
    }

    /// Makes the frame cover `key`, which is about to be added to a node
    /// with `count` entries (caller holds the lock), and returns its slice.
    /// Narrowing the head moves the dropped head bytes into the front of
    /// every slice, so no key is read.
    fn admit(&self, slices: &[AtomicU64], count: usize, key: &[u8]) -> u64 {
        if count == 0 {
            let skip = key.len().min(MAX_SKIP);
            self.set_frame(skip, prefix16(key) & head_mask(skip));
            self.key_len.store(length_code(key), Ordering::Relaxed);
            return slice_at(key, skip);
        }
        if self.key_len.load(Ordering::Relaxed) != length_code(key) {
            self.key_len.store(MIXED_LENGTHS, Ordering::Relaxed);
        }
        let (skip, head) = self.frame();
        let same = ((prefix16(key) ^ head).leading_zeros() / 8) as usize;
        let keep = same.min(skip).min(key.len());
        if keep < skip {
            // An entry's bytes from `keep` on: the head's (its bytes past
            // `skip` are zero), then its old slice at `skip`.
            let mut bytes = [0u8; MAX_SKIP + 8];
            bytes[..MAX_SKIP].copy_from_slice(&head.to_be_bytes());
            for s in &slices[..count] {
                bytes[skip..skip + 8].copy_from_slice(&s.load(Ordering::Relaxed).to_be_bytes());
                let moved = u64::from_be_bytes(bytes[keep..keep + 8].try_into().expect("8 bytes"));
                s.store(moved, Ordering::Relaxed);
            }
            self.set_frame(keep, head & head_mask(keep));
        }
        slice_at(key, keep)
    }

    /// Search of `key` among `count` slices; `full(i)` gives entry
    /// `i`'s whole key when slices tie. Returns the first position whose
    /// key is `>= key`, and whether it equals `key`.
    #[inline]
    fn search<'a>(
        &self,
        slices: &[AtomicU64],
        count: usize,
        key: &[u8],
        full: impl Fn(usize) -> Result<&'a [u8], Restart>,
    ) -> Result<(usize, bool), Restart> {
        let (ks, skip) = match self.place(key) {
            Place::Below => return Ok((0, false)),
            Place::Above => return Ok((count, false)),
            Place::Within(s, skip) => (s, skip),
        };
        // Count the slices below and at the key's rather than bisect: at
        // most 14 compares of each kind and no branch to mispredict, where
        // a binary search's four unpredictable branches cost more.
        let (mut lo, mut hi) = (0, 0);
        for s in &slices[..count] {
            let s = s.load(Ordering::Relaxed);
            lo += (s < ks) as usize;
            hi += (s <= ks) as usize;
        }
        if lo == hi {
            return Ok((lo, false));
        }
        // Entries `lo..hi` tie with the key's slice. If every entry has the
        // same length, at most `skip + 8` bytes, its slice is the rest of
        // it, so at most one ties, and it is a prefix of the key, equal to
        // it, or the key a prefix of it (the slices are zero padded), as
        // the lengths say.
        let len = self.key_len.load(Ordering::Relaxed);
        if len != MIXED_LENGTHS && len as usize <= skip + 8 {
            return Ok(match key.len().cmp(&(len as usize)) {
                Cmp::Less => (lo, false),
                Cmp::Equal => (lo, true),
                Cmp::Greater => (hi, false),
            });
        }
        // Otherwise bisect them by the whole key, which costs a cache miss
        // each.
        while lo < hi {
            let mid = (lo + hi) / 2;
            match full(mid)?.cmp(key) {
                Cmp::Less => lo = mid + 1,
                Cmp::Greater => hi = mid,
                Cmp::Equal => return Ok((mid, true)),
            }
        }
        Ok((lo, false))
    }
}

impl Leaf {
    pub fn new_boxed() -> *mut Leaf {
        arena::boxed(Leaf { hdr: NodeHeader::new(true), slices: Default::default(), records: Default::default() })
    }

    #[inline]
    pub fn count(&self) -> usize {
        (self.hdr.count.load(Ordering::Relaxed) as usize).min(LEAF_WIDTH)
    }

    #[inline]
    pub fn record(&self, i: usize) -> Result<&Record, Restart> {
        let p = self.records[i].load(Ordering::Acquire);
        // SAFETY: non-null record pointers in a reachable leaf point to live
        // records: a record is freed only after it was removed from the leaf
        // and every thread that could have read the pointer left its epoch.
        unsafe { p.as_ref() }.ok_or(Restart)
    }

    /// Position of the first entry `>= key`, and whether it equals `key`.
    /// Optimistic: the caller validates the version afterwards.
    #[inline]
    pub fn search(&self, key: &[u8]) -> Result<(usize, bool), Restart> {
        self.hdr.search(&self.slices, self.count(), key, |i| self.record(i).map(Record::key))
    }

    /// [`Leaf::search`] for a lookup that goes on to read the record's
    /// value: the record found, and each record compared, is prefetched
    /// whole (its first `RECORD_LINES` lines), so the value's lines arrive
    /// with the header's instead of after it.
    #[inline]
    pub fn search_to_read(&self, key: &[u8]) -> Result<(usize, bool), Restart> {
        let (pos, found) = self.hdr.search(&self.slices, self.count(), key, |i| {
            let r = self.record(i)?;
            prefetch(r, RECORD_LINES * 64);
            Ok(r.key())
        })?;
        if found {
            // Found by its slice and length alone, the record is not on its
            // way yet. (A torn read's null or stale pointer is harmless: a
            // prefetch never faults.)
            prefetch(self.entry(pos), RECORD_LINES * 64);
        }
        Ok((pos, found))
    }

    /// Inserts `rec` (whose key is `key`) at `pos`, shifting the entries
    /// after it (caller holds the lock; the leaf has room).
    pub fn insert_at(&self, pos: usize, key: &[u8], rec: *mut Record) {
        let n = self.count();
        debug_assert!(n < LEAF_WIDTH && pos <= n);
        let slice = self.hdr.admit(&self.slices, n, key);
        for i in (pos..n).rev() {
            self.move_entry(i, i + 1);
        }
        self.set(pos, slice, rec);
        self.hdr.count.store(n as u32 + 1, Ordering::Release);
        self.hdr.note_insert(pos);
    }

    /// Removes entry `pos` (caller holds the lock).
    pub fn remove_at(&self, pos: usize) {
        let n = self.count();
        for j in pos + 1..n {
            self.move_entry(j, j - 1);
        }
        self.set(n - 1, 0, std::ptr::null_mut());
        self.hdr.count.store(n as u32 - 1, Ordering::Release);
        self.hdr.note_remove(pos);
    }

    /// Makes the leaf hold exactly `records`, in order (caller holds the
    /// lock or owns the leaf). The records are live.
    pub fn fill(&self, records: &[*mut Record]) {
        // SAFETY: the caller passes live records.
        let keys = records.iter().map(|&r| unsafe { &*r }.key());
        self.hdr.reframe(&self.slices, keys);
        for (i, &r) in records.iter().enumerate() {
            self.records[i].store(r, Ordering::Release);
        }
        for i in records.len()..LEAF_WIDTH {
            self.set(i, 0, std::ptr::null_mut());
        }
        self.hdr.count.store(records.len() as u32, Ordering::Release);
    }

    #[inline]
    fn move_entry(&self, from: usize, to: usize) {
        let (s, r) = (self.slices[from].load(Ordering::Relaxed), self.records[from].load(Ordering::Relaxed));
        self.set(to, s, r);
    }

    #[inline]
    fn set(&self, i: usize, slice: u64, rec: *mut Record) {
        self.slices[i].store(slice, Ordering::Relaxed);
        self.records[i].store(rec, Ordering::Release);
    }

    #[inline]
    pub fn entry(&self, i: usize) -> *mut Record {
        self.records[i].load(Ordering::Acquire)
    }
}

/// How a descent chooses among an inner node's children.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// The child whose range contains the key.
    Key(&'a [u8]),
    /// The child whose range contains the keys just below the key.
    Below(&'a [u8]),
    First,
    Last,
}

impl Inner {
    pub fn new_boxed() -> *mut Inner {
        arena::boxed(Inner {
            hdr: NodeHeader::new(false),
            slices: std::array::from_fn(|_| AtomicU64::new(0)),
            keys: std::array::from_fn(|_| AtomicPtr::default()),
            children: std::array::from_fn(|_| AtomicPtr::default()),
        })
    }

    #[inline]
    pub fn count(&self) -> usize {
        (self.hdr.count.load(Ordering::Relaxed) as usize).min(INNER_WIDTH)
    }

    #[inline]
    pub fn key(&self, i: usize) -> Result<&[u8], Restart> {
        let p = self.keys[i].load(Ordering::Acquire);
        // SAFETY: separator keys are freed only through epoch reclamation
        // after their removal from the node, and slots past `count` are null.
        unsafe { p.as_ref() }.map(|k| &k[..]).ok_or(Restart)
    }

    #[inline]
    pub fn child(&self, i: usize) -> Result<*mut NodeHeader, Restart> {
        let p = self.children[i].load(Ordering::Acquire);
        if p.is_null() {
            Err(Restart)
        } else {
            Ok(p)
        }
    }

    /// Index of the child to descend into for `target`.
    #[inline]
    pub fn child_index(&self, target: Target<'_>) -> Result<usize, Restart> {
        let n = self.count();
        let (key, strict) = match target {
            Target::First => return Ok(0),
            Target::Last => return Ok(n),
            Target::Key(k) => (k, false),
            Target::Below(k) => (k, true),
        };
        // The first separator that sends `key` left: `sep > key`, or
        // `sep >= key` when looking below the key.
        let (i, equal) = self.hdr.search(&self.slices, n, key, |i| self.key(i))?;
        Ok(if equal && !strict { i + 1 } else { i })
    }

    /// Adds separator `sep` at `index` with `right` as the child after it
    /// (caller holds the lock; the node has room).
    pub fn insert_at(&self, index: usize, sep: *mut SepKey, right: *mut NodeHeader) {
        let n = self.count();
        debug_assert!(n < INNER_WIDTH && index <= n);
        // SAFETY: `sep` is owned by the caller and live.
        let slice = self.hdr.admit(&self.slices, n, unsafe { &*sep });
        for i in (index..n).rev() {
            self.move_key(i, i + 1);
        }
        for i in (index + 1..=n).rev() {
            self.children[i + 1].store(self.children[i].load(Ordering::Relaxed), Ordering::Release);
        }
        self.set_key(index, slice, sep);
        self.children[index + 1].store(right, Ordering::Release);
        self.hdr.count.store(n as u32 + 1, Ordering::Release);
        self.hdr.note_insert(index);
    }

    /// Removes child `index` and the separator `key_index` next to it
    /// (caller holds the lock); returns the separator.
    pub fn remove_at(&self, index: usize, key_index: usize) -> *mut SepKey {
        let n = self.count();
        let gone = self.keys[key_index].load(Ordering::Relaxed);
        for i in key_index + 1..n {
            self.move_key(i, i - 1);
        }
        self.set_key(n - 1, 0, std::ptr::null_mut());
        for i in index + 1..=n {
            self.children[i - 1].store(self.children[i].load(Ordering::Relaxed), Ordering::Release);
        }
        self.children[n].store(std::ptr::null_mut(), Ordering::Release);
        self.hdr.count.store(n as u32 - 1, Ordering::Release);
        self.hdr.note_remove(key_index);
        gone
    }

    /// Makes the node hold exactly `keys` and `children` (one more), in
    /// order (caller holds the lock or owns the node). The keys are live.
    pub fn fill(&self, keys: &[*mut SepKey], children: &[*mut NodeHeader]) {
        debug_assert_eq!(keys.len() + 1, children.len());
        // SAFETY: the caller passes live separators.
        let bytes = keys.iter().map(|&k| &unsafe { &*k }[..]);
        self.hdr.reframe(&self.slices, bytes);
        for (i, &k) in keys.iter().enumerate() {
            self.keys[i].store(k, Ordering::Release);
        }
        for i in keys.len()..INNER_WIDTH {
            self.set_key(i, 0, std::ptr::null_mut());
        }
        for (i, slot) in self.children.iter().enumerate() {
            slot.store(children.get(i).copied().unwrap_or(std::ptr::null_mut()), Ordering::Release);
        }
        self.hdr.count.store(keys.len() as u32, Ordering::Release);
    }

    #[inline]
    fn move_key(&self, from: usize, to: usize) {
        self.set_key(to, self.slices[from].load(Ordering::Relaxed), self.keys[from].load(Ordering::Relaxed));
    }

    #[inline]
    fn set_key(&self, i: usize, slice: u64, key: *mut SepKey) {
        self.slices[i].store(slice, Ordering::Relaxed);
        self.keys[i].store(key, Ordering::Release);
    }
}

/// Asks the CPU to start loading the first `bytes` of an object (a node in
/// a descent, records in a scan), so that the misses overlap instead of
/// coming one after another (Masstree §4.4).
#[inline(always)]
pub fn prefetch<T>(object: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..bytes).step_by(64) {
        // SAFETY: prefetching never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((object as *const i8).add(line))
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (object, bytes);
}

/// Moves a separator key to the heap for an inner node.
pub fn new_sep_key(key: &[u8]) -> *mut SepKey {
    Box::into_raw(Box::new(key.to_vec().into_boxed_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Narrowing the head by `admit` gives every entry the slice it would
    /// have had under the narrower head from the start.
    #[test]
    fn admit_narrows_the_head_without_reading_keys() {
        // Heads of 8 and of 16 bytes, narrowed by less or more than a slice.
        let short: [&[u8]; 4] = [b"abcdefgh-1", b"abcdefgh-2", b"abcdefgh", b"abcdefghijklmnopq"];
        let long: [&[u8]; 4] =
            [b"kcounter:00000065", b"kcounter:000000651", b"kcounter:0000006512", b"kcounter:00000065zzzzzzzz"];
        let newcomers = [
            &b"abcdefgz"[..],
            b"abc",
            b"ab",
            b"",
            b"abcdefgh\0",
            b"zzz",
            b"abcdefgh-3",
            b"kcounter:000000",
            b"kcounter:00000064",
            b"kcounter:00000065",
            b"kcounter:0000006",
            b"kc",
        ];
        for (keys, skip0) in [(short, 8), (long, 16)] {
            for newcomer in newcomers {
                check_admit(&keys, skip0, newcomer);
            }
        }
    }

    fn check_admit(keys: &[&[u8]; 4], skip0: usize, newcomer: &[u8]) {
        let hdr = NodeHeader::new(true);
        let slices: [AtomicU64; 5] = Default::default();
        let mut sorted: Vec<&[u8]> = keys.to_vec();
        sorted.sort();
        hdr.reframe(&slices[..4], sorted.iter().copied());
        assert_eq!(hdr.frame().0, skip0);
        let s = hdr.admit(&slices, 4, newcomer);
        let (skip, head) = hdr.frame();
        assert!(newcomer.len() >= skip && prefix16(newcomer) & head_mask(skip) == head);
        assert_eq!(s, slice_at(newcomer, skip));
        for (i, k) in sorted.iter().enumerate() {
            assert_eq!(slices[i].load(Ordering::Relaxed), slice_at(k, skip), "{newcomer:?} {k:?}");
            assert_eq!(prefix16(k) & head_mask(skip), head);
        }
    }

    /// The one-load paths of `slice_at` and `prefix16` give the bytes a
    /// padded copy gives, for every length and offset.
    #[test]
    fn slices_are_zero_padded_big_endian_bytes() {
        let bytes: Vec<u8> = (1..=24).collect();
        let padded = |k: &[u8], at: usize, n: usize| -> u128 {
            (0..n).fold(0u128, |acc, i| (acc << 8) | *k.get(at + i).unwrap_or(&0) as u128)
        };
        for len in 0..=bytes.len() {
            let k = &bytes[..len];
            for at in 0..=len + 9 {
                assert_eq!(slice_at(k, at) as u128, padded(k, at, 8), "len {len} at {at}");
            }
            assert_eq!(prefix16(k), padded(k, 0, 16), "len {len}");
        }
    }

    /// `search` places keys outside the head before or after every entry,
    /// and finds keys inside it, whatever their length.
    #[test]
    fn search_agrees_with_byte_order() {
        let mut keys: Vec<Vec<u8>> = [&b"key/0001x"[..], b"key/0001y", b"key/0002", b"key/0002\0", b"key/00020"]
            .iter()
            .map(|k| k.to_vec())
            .collect();
        keys.sort();
        let hdr = NodeHeader::new(true);
        let slices: [AtomicU64; 5] = Default::default();
        hdr.reframe(&slices, keys.iter().map(|k| &k[..]));
        assert_eq!(hdr.frame().0, 7);
        // And with a head past 8 bytes.
        let mut long: Vec<Vec<u8>> = keys.iter().map(|k| [&b"kcounter:0000000"[..], k].concat()).collect();
        long.sort();
        let (lhdr, lslices): (_, [AtomicU64; 5]) = (NodeHeader::new(true), Default::default());
        lhdr.reframe(&lslices, long.iter().map(|k| &k[..]));
        assert_eq!(lhdr.frame().0, 16, "capped at 16");
        for p in [&b""[..], b"kcounter", b"kcounter:0000000key/0001x", b"kcounter:0000000kez", b"kcounter:0000001"] {
            let got = lhdr.search(&lslices, long.len(), p, |i| Ok(&long[i][..])).expect("no restart");
            let want = match long.binary_search_by(|k| k[..].cmp(p)) {
                Ok(i) => (i, true),
                Err(i) => (i, false),
            };
            assert_eq!(got, want, "{p:?}");
        }
        let probes: [&[u8]; 9] =
            [b"", b"key", b"key/000", b"key/0001", b"key/0001x", b"key/0002\0", b"key/0003", b"kez", b"a"];
        for p in probes {
            let got = hdr.search(&slices, keys.len(), p, |i| Ok(&keys[i][..])).expect("no restart");
            let want = match keys.binary_search_by(|k| k[..].cmp(p)) {
                Ok(i) => (i, true),
                Err(i) => (i, false),
            };
            assert_eq!(got, want, "{p:?}");
        }
    }

    /// A node whose keys all have one length, at most `skip + 8` bytes,
    /// settles ties by the lengths alone; a key of another length, or keys
    /// past the slice, bring back the whole-key compare.
    #[test]
    fn equal_lengths_settle_ties_without_reading_keys() {
        let search = |keys: &[Vec<u8>], hdr: &NodeHeader, slices: &[AtomicU64], p: &[u8], read: bool| {
            let reads = std::cell::Cell::new(0);
            let got = hdr
                .search(slices, keys.len(), p, |i| {
                    reads.set(reads.get() + 1);
                    Ok(&keys[i][..])
                })
                .expect("no restart");
            let want = match keys.binary_search_by(|k| k[..].cmp(p)) {
                Ok(i) => (i, true),
                Err(i) => (i, false),
            };
            assert_eq!(got, want, "{p:?}");
            if !read {
                assert_eq!(reads.get(), 0, "{p:?} read a key");
            }
        };
        // Warehouse 7, districts 1-9, 4-byte order ids: a TPC-C-like key.
        let mut keys: Vec<Vec<u8>> =
            (1..=9u8).map(|d| [&7u32.to_be_bytes()[..], &[d], &[0, 0, 1, d]].concat()).collect();
        let probes: Vec<Vec<u8>> = vec![
            keys[3].clone(),
            keys[3][..8].to_vec(),
            [&keys[3][..], &[0]].concat(),
            [&keys[3][..], &[1, 2, 3]].concat(),
            vec![0, 0, 0, 7, 5],
            vec![0, 0, 0, 7, 5, 0, 0],
            vec![0, 0, 0, 7, 5, 0, 0, 1, 5, 0],
        ];
        let hdr = NodeHeader::new(true);
        let slices: [AtomicU64; 12] = Default::default();
        hdr.reframe(&slices[..keys.len()], keys.iter().map(|k| &k[..]));
        assert_eq!(hdr.frame().0, 4);
        for p in &probes {
            search(&keys, &hdr, &slices, p, false);
        }
        // A 10-byte key joins: lengths differ, so ties read keys again.
        let newcomer = vec![0, 0, 0, 7, 5, 0, 0, 1, 5, 9];
        let at = keys.partition_point(|k| *k < newcomer);
        let s = hdr.admit(&slices, keys.len(), &newcomer);
        for i in (at..keys.len()).rev() {
            slices[i + 1].store(slices[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        slices[at].store(s, Ordering::Relaxed);
        keys.insert(at, newcomer);
        assert_eq!(hdr.key_len.load(Ordering::Relaxed), MIXED_LENGTHS);
        for p in &probes {
            search(&keys, &hdr, &slices, p, true);
        }
        // Equal lengths longer than `skip + 8`: the slice is not the whole
        // rest of a key.
        let long: Vec<Vec<u8>> = (0..5u8).map(|i| [&b"ab"[..], &[i], &[9; 10], &[i]].concat()).collect();
        let (lhdr, lslices): (_, [AtomicU64; 5]) = (NodeHeader::new(true), Default::default());
        lhdr.reframe(&lslices, long.iter().map(|k| &k[..]));
        for p in [&long[2][..], &[&long[2][..13], &[7]].concat()] {
            search(&long, &lhdr, &lslices, p, true);
        }
    }
}

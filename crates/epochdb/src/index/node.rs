//! Tree node layouts and key comparison (Silo §3, Masstree §4.1).
//!
//! Leaves are exactly four cache lines: a 16-byte header, 15 key prefixes
//! and 15 record pointers. The full key of a leaf entry lives in its record,
//! so a leaf never owns key bytes. Inner nodes hold 15 separators (prefix +
//! pointer to an owned copy of the key) and 16 children.
//!
//! Keys compare by their first 8 bytes as a big-endian `u64` (zero padded);
//! only when those are equal do we touch the full key.
//!
//! Invariants:
//! - Entries `0..count` are sorted by key, strictly; slots at `count..` are
//!   null, so an optimistic reader that sees a stale count never follows a
//!   pointer to freed memory.
//! - In an inner node, every key in `children[i]` is `>= keys[i-1]` and
//!   `< keys[i]`.

use super::node_version::{NodeVersion, Restart};
use crate::record::Record;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::cmp::Ordering as Cmp;

pub const LEAF_WIDTH: usize = 15;
pub const INNER_WIDTH: usize = 15;

/// A separator key owned by an inner node.
pub type SepKey = Box<[u8]>;

#[repr(C)]
#[derive(Debug)]
pub struct NodeHeader {
    pub version: NodeVersion,
    pub count: AtomicU32,
    pub is_leaf: bool,
}

#[repr(C)]
#[derive(Debug)]
pub struct Leaf {
    pub hdr: NodeHeader,
    pub prefixes: [AtomicU64; LEAF_WIDTH],
    pub records: [AtomicPtr<Record>; LEAF_WIDTH],
}

#[repr(C)]
#[derive(Debug)]
pub struct Inner {
    pub hdr: NodeHeader,
    pub prefixes: [AtomicU64; INNER_WIDTH],
    pub keys: [AtomicPtr<SepKey>; INNER_WIDTH],
    pub children: [AtomicPtr<NodeHeader>; INNER_WIDTH + 1],
}

const _: () = assert!(std::mem::size_of::<Leaf>() == 256, "a leaf is four cache lines");
const _: () = assert!(std::mem::size_of::<Inner>() <= 384);

impl Leaf {
    pub fn new_boxed() -> *mut Leaf {
        Box::into_raw(Box::new(Leaf {
            hdr: NodeHeader { version: NodeVersion::default(), count: AtomicU32::new(0), is_leaf: true },
            prefixes: Default::default(),
            records: Default::default(),
        }))
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
    pub fn search(&self, key: &[u8], kp: u64) -> Result<(usize, bool), Restart> {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let p = self.prefixes[mid].load(Ordering::Relaxed);
            let c = if p != kp { p.cmp(&kp) } else { self.record(mid)?.key().cmp(key) };
            match c {
                Cmp::Less => lo = mid + 1,
                Cmp::Greater => hi = mid,
                Cmp::Equal => return Ok((mid, true)),
            }
        }
        Ok((lo, false))
    }

    /// Writes entry `i` (caller holds the lock).
    #[inline]
    pub fn set(&self, i: usize, prefix: u64, rec: *mut Record) {
        self.prefixes[i].store(prefix, Ordering::Relaxed);
        self.records[i].store(rec, Ordering::Release);
    }

    #[inline]
    pub fn entry(&self, i: usize) -> (u64, *mut Record) {
        (self.prefixes[i].load(Ordering::Relaxed), self.records[i].load(Ordering::Acquire))
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
        Box::into_raw(Box::new(Inner {
            hdr: NodeHeader { version: NodeVersion::default(), count: AtomicU32::new(0), is_leaf: false },
            prefixes: Default::default(),
            keys: Default::default(),
            children: Default::default(),
        }))
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
        let kp = prefix(key);
        // First separator that sends `key` left: `sep > key` (or `>=` when
        // looking below the key).
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let p = self.prefixes[mid].load(Ordering::Relaxed);
            let c = if p != kp { p.cmp(&kp) } else { self.key(mid)?.cmp(key) };
            let goes_left = match c {
                Cmp::Greater => true,
                Cmp::Equal => strict,
                Cmp::Less => false,
            };
            if goes_left {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// Writes separator `i` (caller holds the lock).
    #[inline]
    pub fn set_key(&self, i: usize, prefix: u64, key: *mut SepKey) {
        self.prefixes[i].store(prefix, Ordering::Relaxed);
        self.keys[i].store(key, Ordering::Release);
    }
}

/// Asks the CPU to start loading a node's cache lines, so that the misses
/// of a descent overlap instead of coming one after another (Masstree §4.4).
#[inline(always)]
pub fn prefetch(node: *const NodeHeader, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..bytes).step_by(64) {
        // SAFETY: prefetching never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((node as *const i8).add(line)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (node, bytes);
}

/// The first 8 bytes of `key` as a big-endian integer, zero padded.
#[inline]
pub fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// Moves a separator key to the heap for an inner node.
pub fn new_sep_key(key: &[u8]) -> *mut SepKey {
    Box::into_raw(Box::new(key.to_vec().into_boxed_slice()))
}

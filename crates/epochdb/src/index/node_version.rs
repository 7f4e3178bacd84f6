//! Node version words (Silo §4.6, Masstree's `nodeversion`).
//!
//! ```text
//!  63                                 2      1        0
//! +------------------------------------+----------+------+
//! |          change counter            | obsolete | lock |
//! +------------------------------------+----------+------+
//! ```
//!
//! Invariants:
//! - Readers never write a node: they read the version (waiting while it is
//!   locked), read the fields, and validate that the version is unchanged.
//! - Writers change a node's fields only while holding its lock, and bump the
//!   counter when they release it if anything a reader could observe
//!   changed: a key inserted or removed, a split, a removal from the tree.
//!   Replacing the record pointer of an existing key does not bump it (the
//!   pointer is one atomic, and the old record's TID word says it is stale).
//! - The version of a leaf is what a transaction's node set remembers:
//!   unchanged version = the same keys in the same key range.
//! - An obsolete node is unreachable from the root; it is never unlocked
//!   back to a live state.

use crate::sync::{fence, AtomicU64, Ordering};
use crate::tid::backoff;

const LOCKED: u64 = 1;
const OBSOLETE: u64 = 1 << 1;
const STEP: u64 = 1 << 2;

/// Returned by optimistic readers and lock upgrades: start over from the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart;

#[derive(Debug, Default)]
pub struct NodeVersion(AtomicU64);

impl NodeVersion {
    /// Begins an optimistic read: waits while the node is locked; fails if
    /// the node has been removed from the tree.
    #[inline]
    pub fn read_begin(&self) -> Result<u64, Restart> {
        let mut spins = 0;
        loop {
            let v = self.0.load(Ordering::Acquire);
            if v & OBSOLETE != 0 {
                return Err(Restart);
            }
            if v & LOCKED == 0 {
                return Ok(v);
            }
            backoff(&mut spins);
        }
    }

    /// Ends an optimistic read: true if nothing changed since `v`.
    #[inline]
    pub fn validate(&self, v: u64) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == v
    }

    /// The version as it is now (for node-set validation at commit).
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Turns an optimistic read at version `v` into the write lock, if
    /// nothing changed since `v`.
    #[inline]
    pub fn try_upgrade(&self, v: u64) -> bool {
        debug_assert_eq!(v & (LOCKED | OBSOLETE), 0);
        if self.0.compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // The lock must be visible before the stores that follow it.
            fence(Ordering::Release);
            true
        } else {
            false
        }
    }

    /// Releases the lock after changing what readers can observe.
    #[inline]
    pub fn unlock_modified(&self) {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCKED != 0);
        self.0.store((v & !LOCKED).wrapping_add(STEP) & !OBSOLETE, Ordering::Release);
    }

    /// Releases the lock without a visible change.
    #[inline]
    pub fn unlock_unmodified(&self) {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCKED != 0);
        self.0.store(v & !LOCKED, Ordering::Release);
    }

    /// Releases the lock of a node just removed from the tree.
    #[inline]
    pub fn unlock_obsolete(&self) {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCKED != 0);
        self.0.store(((v & !LOCKED).wrapping_add(STEP)) | OBSOLETE, Ordering::Release);
    }

    /// The version a locked node will have after `unlock_modified`.
    #[inline]
    pub fn next_after_modify(&self) -> u64 {
        let v = self.0.load(Ordering::Relaxed);
        (v & !LOCKED).wrapping_add(STEP) & !OBSOLETE
    }
}

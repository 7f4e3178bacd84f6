//! Faults to inject into a data directory's real files, for tests: fail
//! the n-th write, sync or other operation, cut the n-th write short, or
//! fill the disk from the n-th allocation on (`Options::faults`; the
//! file-system seam, `durability/fsio.rs`, consults them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The kinds of operation [`Faults`] counts and fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// A write of bytes into a file.
    Write,
    /// `fdatasync` of a file or a directory.
    Sync,
    /// Preallocation (`fallocate`).
    Allocate,
    /// Create, open for writing, truncate, rename, remove, make directory.
    Meta,
}

impl Op {
    const ALL: [Op; 4] = [Op::Write, Op::Sync, Op::Allocate, Op::Meta];

    fn index(self) -> usize {
        self as usize
    }
}

/// A fault to inject, at the n-th operation of its kind (counting from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The n-th write fails with EIO and writes nothing.
    WriteError,
    /// The n-th sync fails with EIO.
    SyncError,
    /// The n-th write puts down only part of its bytes, then fails with EIO.
    ShortWrite,
    /// From the n-th write or preallocation on, the disk is full: a write
    /// puts down what fits (nothing), then fails with ENOSPC.
    DiskFull,
    /// The n-th create, truncate, rename, remove or mkdir fails with EIO.
    MetaError,
}

impl Fault {
    /// Every fault, for tests that try them all.
    pub const ALL: [Fault; 5] =
        [Fault::WriteError, Fault::SyncError, Fault::ShortWrite, Fault::DiskFull, Fault::MetaError];

    /// The operations whose count triggers this fault.
    fn counts(self, op: Op) -> bool {
        match self {
            Fault::WriteError | Fault::ShortWrite => op == Op::Write,
            Fault::SyncError => op == Op::Sync,
            Fault::DiskFull => matches!(op, Op::Write | Op::Allocate),
            Fault::MetaError => op == Op::Meta,
        }
    }
}

/// Faults to inject into the data directory's I/O, for tests. Shared by
/// every file the database writes.
#[derive(Debug)]
pub struct Faults {
    pub(crate) syncs_left: AtomicU64,
    space_left: AtomicU64,
    /// Operations so far, by [`Op`].
    counts: [AtomicU64; 4],
    /// The planned fault and the count of its kind at which it fires.
    plan: Mutex<Option<(Fault, u64)>>,
    /// How many planned faults fired.
    fired: AtomicU64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            syncs_left: AtomicU64::new(u64::MAX),
            space_left: AtomicU64::new(u64::MAX),
            counts: Default::default(),
            plan: Mutex::new(None),
            fired: AtomicU64::new(0),
        }
    }
}

impl Faults {
    /// No faults armed yet.
    pub fn new() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    /// The next `n` syncs succeed; every later one fails with EIO.
    pub fn fail_syncs_after(&self, n: u64) {
        self.syncs_left.store(n, Ordering::SeqCst);
    }

    /// Only `bytes` more bytes fit on the disk; then writes fail with ENOSPC
    /// (after writing what fits, as a real full disk does).
    pub fn disk_space(&self, bytes: u64) {
        self.space_left.store(bytes, Ordering::SeqCst);
    }

    /// Injects `fault` at the `nth` operation of its kind, counted from
    /// now (1 is the next one).
    pub fn inject(&self, fault: Fault, nth: u64) {
        let base = Op::ALL.iter().filter(|&&op| fault.counts(op)).map(|&op| self.count(op)).sum::<u64>();
        *self.plan.lock().unwrap_or_else(|e| e.into_inner()) = Some((fault, base + nth));
    }

    /// Operations of kind `op` so far.
    pub fn count(&self, op: Op) -> u64 {
        self.counts[op.index()].load(Ordering::SeqCst)
    }

    /// Operations that a fault of this kind counts, so far.
    pub fn count_for(&self, fault: Fault) -> u64 {
        Op::ALL.iter().filter(|&&op| fault.counts(op)).map(|&op| self.count(op)).sum()
    }

    /// Whether the planned fault fired.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst) > 0
    }

    /// Counts one operation; returns the fault that hits it, if any.
    pub(crate) fn hit(&self, op: Op) -> Option<Fault> {
        self.counts[op.index()].fetch_add(1, Ordering::SeqCst);
        let plan = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        let (fault, at) = (*plan)?;
        if !fault.counts(op) {
            return None;
        }
        let n = self.count_for(fault);
        let hit = if fault == Fault::DiskFull { n >= at } else { n == at };
        if hit {
            self.fired.fetch_add(1, Ordering::SeqCst);
        }
        hit.then_some(fault)
    }

    /// Takes `want` bytes of space; returns how many fit.
    pub(crate) fn take_space(&self, want: u64) -> u64 {
        let mut left = self.space_left.load(Ordering::SeqCst);
        loop {
            let got = want.min(left);
            match self.space_left.compare_exchange(left, left - got, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return got,
                Err(now) => left = now,
            }
        }
    }
}

//! epochdb: a multicore in-memory transactional database built on Silo's
//! serializable optimistic concurrency control with epochs (Tu et al.,
//! SOSP 2013).
//!
//! ```
//! use epochdb::{Database, Options, TableOptions};
//!
//! let db = Database::open(Options::default())?;
//! let accounts = db.create_table("accounts", TableOptions::new())?;
//! let mut worker = db.worker()?; // one per thread
//! worker.run(|txn| {
//!     txn.put(accounts, b"alice", b"100")?;
//!     txn.put(accounts, b"bob", b"50")
//! })?;
//! let alice = worker.run(|txn| Ok(txn.get(accounts, b"alice")?.map(<[u8]>::to_vec)))?;
//! assert_eq!(alice.as_deref(), Some(&b"100"[..]));
//! # Ok::<(), epochdb::Error>(())
//! ```
//!
//! See `ARCHITECTURE.md` for the module map and the invariants.

#![warn(missing_docs)]

mod arena;
pub mod catalog;
pub mod crc32c;
mod db;
mod durability;
mod epoch;
mod error;
mod faults;
mod gc;
mod handle;
mod index;
mod lease;
mod options;
mod record;
mod replication;
mod spin;
mod sync;
#[cfg(test)]
mod test_rng;
mod tid;
mod txn;

/// The README's code blocks, compiled and run as doc-tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The embedding guide's code blocks, compiled and run as doc-tests.
#[doc = include_str!("../../../docs/embedding.md")]
#[cfg(doctest)]
pub struct EmbeddingDoctests;

/// The replication guide's code blocks, compiled as doc-tests.
#[doc = include_str!("../../../docs/replication.md")]
#[cfg(doctest)]
pub struct ReplicationDoctests;

pub use catalog::{Column, ColumnType, IndexId, Schema, TableId, TableOptions};
pub use db::{Backup, Database, Worker};
pub use durability::checkpoint::CheckpointStats;
pub use durability::datadir::inspect::{inspect, CheckpointSummary, FileSummary, Inspection};
pub use durability::datadir::{destroy, set_aside};
pub use durability::recovery::{Phase, Progress, RecoveryReport};
pub use error::{AbortReason, Error, Result};
pub use faults::{Fault, Faults, Op};
pub use lease::Lease;
#[doc(hidden)]
pub use options::TestingOptions;
pub use options::{CheckpointOptions, Durability, LogOptions, LogReplay, Options, RecoveryOptions, MAX_KEY_LEN};
pub use replication::rules as replication_rules;
pub use replication::{
    BackupOptions, BackupState, Membership, PrimaryOptions, ReplicationStatus, Safety, StandbyStatus, Transport,
};
pub use tid::{Tid, TidSource};
pub use txn::{CommitInfo, Freshness, Range, SnapshotTxn, Txn, WorkerStats};

/// Bytes of records and index nodes live now, in every database of the
/// process (as its allocator counts them: each block at its size class).
/// Unlike the resident size, it falls when rows are deleted and their
/// memory is reclaimed (after the epochs that may still read them), so a
/// server can refuse writes above a limit and take them again after
/// deletes (`epochdb serve --maxmemory`).
///
/// ```
/// # use epochdb::{Database, Options, TableOptions};
/// let db = Database::open(Options::default())?;
/// let t = db.create_table("t", TableOptions::new())?;
/// let before = epochdb::memory_in_use();
/// db.worker()?.run(|txn| txn.put(t, b"key", &[7; 400]))?;
/// assert!(epochdb::memory_in_use() > before);
/// # Ok::<(), epochdb::Error>(())
/// ```
pub fn memory_in_use() -> u64 {
    arena::bytes_in_use()
}

/// About what one row of a `key_len`-byte key and a `value_len`-byte
/// value adds to [`memory_in_use`]: its record (a 16-byte header, the key
/// and the value, each rounded up to 8 bytes) and its share of a full
/// index leaf. Leaves are seldom full and inner nodes are not counted, so
/// a table takes somewhat more. `None` for a value larger than a record
/// holds. (The server's MEMORY USAGE.)
///
/// ```
/// assert_eq!(epochdb::row_footprint(8, 100), Some(16 + 8 + 104 + 17));
/// ```
pub fn row_footprint(key_len: usize, value_len: usize) -> Option<usize> {
    let entry = std::mem::size_of::<index::Leaf>() / index::LEAF_WIDTH;
    record::footprint(key_len, value_len).map(|r| r + entry)
}

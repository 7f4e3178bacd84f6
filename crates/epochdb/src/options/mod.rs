//! Database options. Every field has a default that suits a server; see
//! each field for what it trades.

pub mod durability;
pub mod replication;

pub use durability::{CheckpointOptions, Durability, LogOptions, LogReplay, RecoveryOptions};

use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::tid::TidSource;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest epoch interval accepted.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// How to open a [`Database`](crate::Database): the engine's settings,
/// then durability's (log, checkpoints, recovery), then replication's.
/// `Options::default()` is an in-memory database; docs/embedding.md,
/// "Options", lists every field with its default.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often the global epoch advances (Silo: 40 ms). Shorter epochs
    /// shorten durability latency and GC delay; each advance costs one pass
    /// over the workers' epoch slots.
    pub epoch_interval: Duration,
    /// `k`: snapshot epochs are multiples of `k` and trail the global epoch
    /// by at least `k` epochs (Silo: 25, about one second). At least 2.
    pub snapshot_epochs: u64,
    /// Where commit TIDs come from. Keep the default; the shared counter
    /// exists to measure why Silo avoids it.
    pub tid_source: TidSource,
    /// Longest value, in bytes.
    pub max_value_len: usize,
    /// How many times [`crate::Worker::run`] retries an aborted transaction
    /// before returning the abort.
    pub max_retries: u32,
    /// How long a committer spins on a locked record before aborting with
    /// `WriteLockConflict` (iterations; yields to the OS after 64).
    pub lock_spins: u32,

    /// Logging and checkpoints; needs `data_dir` unless `Off`.
    pub durability: Durability,
    /// Holds the manifest, the pepoch file, the lock file, and (unless
    /// `log.dirs`/`checkpoint.dirs` say otherwise) the logs in `log/` and
    /// checkpoints in `checkpoint/`. Opening a directory that holds a
    /// database recovers it. Nothing in it depends on the working
    /// directory: it can be moved, copied or backed up while closed.
    pub data_dir: Option<PathBuf>,
    /// Open without writing anything: recover into memory, start no logger
    /// or checkpointer, refuse transactions that write and new tables
    /// ([`Error::ReadOnly`]). Works on a read-only directory, beside other
    /// read-only opens but not beside a writer. Needs a durable
    /// `durability` and a `data_dir` holding a database.
    pub read_only: bool,
    /// The log's directories and buffers.
    pub log: LogOptions,
    /// Checkpoints' directories, interval and files.
    pub checkpoint: CheckpointOptions,
    /// Recovery's threads, its log replay, and salvage past damage.
    pub recovery: RecoveryOptions,

    /// Serve backups as a replication primary (Query Fresh): ship every log
    /// block to the backups that connect, and with `Safety::Sync` or
    /// `VerySafe` release commits only once the backups have them. Needs
    /// a durable, writable database. `None`: no replication.
    pub primary: Option<replication::PrimaryOptions>,
    /// Fencing by a control plane (`epochdb-control`): commits are
    /// released (durable replies sent, `wait_durable` returns) only while
    /// this lease holds, so a deposed primary releases nothing a newly
    /// elected one may lack. Also for a backup, whose lease matters once it
    /// is promoted. `None`: release is this node's own decision.
    pub lease: Option<Arc<crate::lease::Lease>>,
    /// Hooks for tests.
    #[doc(hidden)]
    pub testing: TestingOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            epoch_interval: Duration::from_millis(40),
            snapshot_epochs: 25,
            tid_source: TidSource::Decentralized,
            max_value_len: 1 << 20,
            max_retries: 10_000,
            lock_spins: 10_000,
            durability: Durability::Off,
            data_dir: None,
            read_only: false,
            log: LogOptions::default(),
            checkpoint: CheckpointOptions::default(),
            recovery: RecoveryOptions::default(),
            primary: None,
            lease: None,
            testing: TestingOptions::default(),
        }
    }
}

/// Hooks for tests, not for applications.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct TestingOptions {
    /// Fault injection: failed syncs and a full disk.
    pub faults: Option<Arc<Faults>>,
    /// For tests whose model needs "no record" to mean "never committed"
    /// (the serializability checker): deleted records stay in the index
    /// until snapshots no longer need them, never sooner (gc.rs).
    pub keep_tombstones: bool,
}

impl Options {
    /// Checks the options for values that cannot work, as `Database::open` does first.
    pub fn validate(&self) -> Result<()> {
        if self.epoch_interval.is_zero() || self.epoch_interval > MAX_INTERVAL {
            return Err(Error::InvalidOptions("epoch_interval must be between 1 ns and 1 hour".into()));
        }
        if self.checkpoint.interval > MAX_INTERVAL * 24 * 365 {
            return Err(Error::InvalidOptions("checkpoint.interval must be at most a year".into()));
        }
        if self.snapshot_epochs < 2 {
            return Err(Error::InvalidOptions("snapshot_epochs must be at least 2".into()));
        }
        if self.durability != Durability::Off && self.snapshot_epochs > 1 << 20 {
            return Err(Error::InvalidOptions("snapshot_epochs must be at most 2^20 with durability".into()));
        }
        if self.max_value_len == 0 || self.max_value_len > u32::MAX as usize / 2 {
            return Err(Error::InvalidOptions("max_value_len must be in 1..=2 GiB".into()));
        }
        if self.durability != Durability::Off && self.data_dir.is_none() {
            return Err(Error::InvalidOptions("durability needs a data_dir".into()));
        }
        if self.durability == Durability::Off && self.data_dir.is_some() {
            return Err(Error::InvalidOptions("a data_dir needs durability other than Off".into()));
        }
        if self.log.buffer_size < 4096 || self.log.buffers < 2 || self.log.rotate_epochs == 0 {
            return Err(Error::InvalidOptions(
                "log buffers need >= 4 KiB, >= 2 per worker; rotation >= 1 epoch".into(),
            ));
        }
        if self.checkpoint.files == 0 || self.checkpoint.files > 4096 {
            return Err(Error::InvalidOptions("checkpoint.files must be between 1 and 4096".into()));
        }
        if self.primary.is_some() && (self.durability == Durability::Off || self.read_only) {
            return Err(Error::InvalidOptions("a replication primary needs a durable, writable database".into()));
        }
        if let Some(p) = &self.primary {
            p.validate()?;
        }
        if self.read_only && self.durability == Durability::Off {
            return Err(Error::InvalidOptions("read_only opens a data directory: it needs durability".into()));
        }
        Ok(())
    }
}

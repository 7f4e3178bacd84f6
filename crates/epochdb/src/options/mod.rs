//! Database options. Every field has a default that suits a server; see
//! each field for what it trades.

pub mod replication;

use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::tid::TidSource;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What survives a crash (SiloR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// In memory only: nothing is written to disk.
    #[default]
    Off,
    /// Value logging: every committed transaction in an epoch `<= pepoch`
    /// survives. Recovery replays the whole log.
    Log,
    /// Logging plus periodic fuzzy checkpoints, which bound recovery time
    /// and let old log files be deleted. After the first since open, a
    /// checkpoint holds only the rows changed since the one before (until
    /// a full one compacts the chain), and none is taken while nothing is
    /// written.
    LogAndCheckpoint,
    /// Gawain's delta logging: an update of a table with a schema logs
    /// only the columns it changed (inserts and deletes still log whole
    /// rows and tombstones); tables without a schema log values as `Log`.
    /// Recovery keeps a version per column. Same guarantee as `Log`.
    Delta,
    /// Delta logging plus periodic checkpoints, incremental as with
    /// `LogAndCheckpoint`. A checkpoint records every row it covers (no
    /// `e_l` skip: the log may hold only some columns of a row).
    DeltaAndCheckpoint,
}

/// How recovery replays the log onto the base checkpoint. Both give the
/// same state; they differ in speed and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogReplay {
    /// Gather the log's entries, sort each table's by key and merge them
    /// with the checkpoint's rows, then build each tree bottom up: no tree
    /// lookup per entry. It maps the log files (the page cache shows in
    /// the process's resident size while it runs) and holds 24 bytes per
    /// entry until the merge. Used when the checkpoint chain has no
    /// incremental link; otherwise recovery replays by lookup.
    #[default]
    Merge,
    /// Install each entry after a lookup in the tree, as it is read: less
    /// memory, slower.
    Lookup,
}

impl Durability {
    /// Its name on the `epochdb` command line and in reports and replies
    /// (`log+checkpoint`, ...).
    ///
    /// ```
    /// assert_eq!(epochdb::Durability::DeltaAndCheckpoint.name(), "delta+checkpoint");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Durability::Off => "off",
            Durability::Log => "log",
            Durability::LogAndCheckpoint => "log+checkpoint",
            Durability::Delta => "delta",
            Durability::DeltaAndCheckpoint => "delta+checkpoint",
        }
    }

    /// Writes a log (anything but `Off`).
    pub fn logs(self) -> bool {
        self != Durability::Off
    }

    /// Takes periodic checkpoints.
    pub fn checkpoints(self) -> bool {
        matches!(self, Durability::LogAndCheckpoint | Durability::DeltaAndCheckpoint)
    }

    /// Logs only the changed columns of updates.
    pub fn delta(self) -> bool {
        matches!(self, Durability::Delta | Durability::DeltaAndCheckpoint)
    }
}

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest epoch interval accepted.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// How to open a [`Database`](crate::Database). `Options::default()` is an in-memory database; docs/embedding.md, "Options", lists every field with its default.
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
    /// `log_dirs`/`checkpoint_dirs` say otherwise) the logs in `log/` and
    /// checkpoints in `checkpoint/`. Opening a directory that holds a
    /// database recovers it. Nothing in it depends on the working
    /// directory: it can be moved, copied or backed up while closed.
    pub data_dir: Option<PathBuf>,
    /// One logger thread per directory (one per disk); workers are divided
    /// among them. Empty: the ones the data directory's manifest records
    /// (for a new database, `data_dir/log`). Given ones must be the
    /// recorded ones ([`Error::DirectoryMismatch`] otherwise).
    pub log_dirs: Vec<PathBuf>,
    /// One checkpointer thread per directory, each writing a key subrange
    /// of every table. Empty: the recorded ones (for a new database,
    /// `data_dir/checkpoint`); given ones must match, as for `log_dirs`.
    pub checkpoint_dirs: Vec<PathBuf>,
    /// Time from the end of one checkpoint to the start of the next
    /// (SiloR: 10 s).
    pub checkpoint_interval: Duration,
    /// `m`: files per table per checkpoint directory, to be loaded by `m`
    /// recovery threads in parallel.
    pub checkpoint_files: usize,
    /// `data.log` is renamed `old_data.<e>` after this many epochs (SiloR:
    /// 100), so whole files can be deleted after a checkpoint.
    pub log_rotate_epochs: u64,
    /// Bytes per worker log buffer (SiloR: 512 KB).
    pub log_buffer_size: usize,
    /// Log buffers per worker. A worker blocks only when all of its buffers
    /// wait for the logger.
    pub log_buffers: usize,
    /// Recovery workers that load checkpoints and replay logs at open (fed
    /// by one more thread that reads the files); on a replication backup,
    /// also the threads that replay what it receives. 0: one per CPU it
    /// may run on.
    pub recovery_threads: usize,
    /// How recovery replays the log ([`LogReplay`]; default: by merge).
    pub log_replay: LogReplay,
    /// Recover what is valid past damage, instead of stopping with
    /// [`Error::Corrupt`]: skip damaged blocks, cut the recovered state back
    /// to the last epoch before the first damaged log block (so it stays a
    /// prefix of the serial order), and with an unreadable pepoch file, take
    /// the epoch the logs themselves reach. What was given up is in
    /// [`RecoveryReport`](crate::RecoveryReport). A torn tail of a
    /// `data.log` above pepoch, which a crash leaves, is always dropped (and
    /// reported) and needs no salvage.
    pub salvage: bool,
    /// Open without writing anything: recover into memory, start no logger
    /// or checkpointer, refuse transactions that write and new tables
    /// ([`Error::ReadOnly`]). Works on a read-only directory, beside other
    /// read-only opens but not beside a writer. Needs a durable
    /// `durability` and a `data_dir` holding a database.
    pub read_only: bool,
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
    /// Fault injection for tests: failed syncs and a full disk.
    #[doc(hidden)]
    pub faults: Option<Arc<Faults>>,
    /// For tests whose model needs "no record" to mean "never committed"
    /// (the serializability checker): deleted records stay in the index
    /// until snapshots no longer need them, never sooner (gc.rs).
    #[doc(hidden)]
    pub keep_tombstones: bool,
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
            log_dirs: Vec::new(),
            checkpoint_dirs: Vec::new(),
            checkpoint_interval: Duration::from_secs(10),
            checkpoint_files: 2,
            log_rotate_epochs: 100,
            log_buffer_size: 512 << 10,
            log_buffers: 4,
            recovery_threads: 0,
            log_replay: LogReplay::Merge,
            salvage: false,
            read_only: false,
            primary: None,
            lease: None,
            faults: None,
            keep_tombstones: false,
        }
    }
}

impl Options {
    /// Checks the options for values that cannot work, as `Database::open` does first.
    pub fn validate(&self) -> Result<()> {
        if self.epoch_interval.is_zero() || self.epoch_interval > MAX_INTERVAL {
            return Err(Error::InvalidOptions("epoch_interval must be between 1 ns and 1 hour".into()));
        }
        if self.checkpoint_interval > MAX_INTERVAL * 24 * 365 {
            return Err(Error::InvalidOptions("checkpoint_interval must be at most a year".into()));
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
        if self.log_buffer_size < 4096 || self.log_buffers < 2 || self.log_rotate_epochs == 0 {
            return Err(Error::InvalidOptions(
                "log buffers need >= 4 KiB, >= 2 per worker; rotation >= 1 epoch".into(),
            ));
        }
        if self.checkpoint_files == 0 || self.checkpoint_files > 4096 {
            return Err(Error::InvalidOptions("checkpoint_files must be between 1 and 4096".into()));
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

    /// Recovery threads to use.
    pub fn recovery_threads(&self) -> usize {
        match self.recovery_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

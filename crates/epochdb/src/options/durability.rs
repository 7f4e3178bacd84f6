//! What survives a crash and how it is recovered (SiloR, Gawain): the
//! durability mode and the settings of the log, the checkpoints and
//! recovery.

use std::path::PathBuf;
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

/// The log (SiloR §4.1): where it is written and how it is buffered.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// One logger thread per directory (one per disk); workers are divided
    /// among them. Empty: the ones the data directory's manifest records
    /// (for a new database, `data_dir/log`). Given ones must be the
    /// recorded ones ([`Error::DirectoryMismatch`](crate::Error::DirectoryMismatch) otherwise).
    pub dirs: Vec<PathBuf>,
    /// `data.log` is renamed `old_data.<e>` after this many epochs (SiloR:
    /// 100), so whole files can be deleted after a checkpoint.
    pub rotate_epochs: u64,
    /// Bytes per worker log buffer (SiloR: 512 KB).
    pub buffer_size: usize,
    /// Log buffers per worker. A worker blocks only when all of its buffers
    /// wait for the logger.
    pub buffers: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { dirs: Vec::new(), rotate_epochs: 100, buffer_size: 512 << 10, buffers: 4 }
    }
}

/// Checkpoints (SiloR §4.2, Gawain's incremental ones): where, how often,
/// in how many files.
#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    /// One checkpointer thread per directory, each writing a key subrange
    /// of every table. Empty: the recorded ones (for a new database,
    /// `data_dir/checkpoint`); given ones must match, as for the log's.
    pub dirs: Vec<PathBuf>,
    /// Time from the end of one checkpoint to the start of the next
    /// (SiloR: 10 s).
    pub interval: Duration,
    /// `m`: files per table per checkpoint directory, to be loaded by `m`
    /// recovery threads in parallel.
    pub files: usize,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { dirs: Vec::new(), interval: Duration::from_secs(10), files: 2 }
    }
}

/// Recovery at open (SiloR §5), and a backup's replay of what it receives.
#[derive(Debug, Clone, Default)]
pub struct RecoveryOptions {
    /// Threads that load checkpoints and replay logs at open (fed by one
    /// more thread that reads the files); on a replication backup, also
    /// the threads that replay what it receives. 0: one per CPU it may run
    /// on.
    pub threads: usize,
    /// How recovery replays the log ([`LogReplay`]; default: by merge).
    pub log_replay: LogReplay,
    /// Recover what is valid past damage, instead of stopping with
    /// [`Error::Corrupt`](crate::Error::Corrupt): skip damaged blocks, cut
    /// the recovered state back to the last epoch before the first damaged
    /// log block (so it stays a prefix of the serial order), and with an
    /// unreadable pepoch file, take the epoch the logs themselves reach.
    /// What was given up is in [`RecoveryReport`](crate::RecoveryReport). A
    /// torn tail of a `data.log` above pepoch, which a crash leaves, is
    /// always dropped (and reported) and needs no salvage.
    pub salvage: bool,
}

impl RecoveryOptions {
    /// Threads to use: `threads`, or with 0 one per CPU this process may
    /// run on.
    pub fn thread_count(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

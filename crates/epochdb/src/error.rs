//! Typed errors. Nothing a caller can do through the API panics.

use crate::handle::TableId;
use std::fmt;

/// Why a transaction aborted (Silo §4.4–§4.6). Aborts are retryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// A record read changed, was superseded, or was locked by another
    /// transaction at commit time.
    ReadValidation,
    /// A leaf in the node set changed: a key was inserted or removed in a
    /// range this transaction scanned or looked up (a phantom).
    NodeValidation,
    /// A record to be written stayed locked by another committer too long.
    WriteLockConflict,
    /// This transaction's own insert met a leaf that another transaction had
    /// changed since this transaction observed it.
    InsertConflict,
}

impl AbortReason {
    /// Every reason, in [`AbortReason::index`] order.
    pub const ALL: [AbortReason; 4] = [
        AbortReason::ReadValidation,
        AbortReason::NodeValidation,
        AbortReason::WriteLockConflict,
        AbortReason::InsertConflict,
    ];

    /// The reason's position in [`AbortReason::ALL`] (and in `WorkerStats::aborts`).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Everything that can go wrong, as a type: aborts (retry), misuse (fix the call), and the database's state (durability failed, damage found, closed).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The transaction aborted; running it again may succeed.
    Aborted(AbortReason),
    /// A key longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN).
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The longest key allowed.
        max: usize,
    },
    /// A value longer than a record can hold.
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The longest value allowed.
        max: usize,
    },
    /// A table handle that does not name a table of this database.
    UnknownTable(TableId),
    /// No table has this name.
    NoSuchTable(String),
    /// `create_table` of a name in use with other options.
    TableExists(String),
    /// The table has no secondary index of this name.
    NoSuchIndex {
        /// The table.
        table: String,
        /// The index asked for.
        index: String,
    },
    /// `insert` of a key that is present.
    KeyExists,
    /// A value does not match its table's column schema, or a schema is bad.
    Schema(String),
    /// Options that cannot work together, or out of range; the message says which.
    InvalidOptions(String),
    /// The database was dropped while this handle still existed.
    Closed,
    /// A table recovered from disk has secondary indexes, but the
    /// application has not yet given their extractors with `create_table`.
    TableNotOpened(String),
    /// A log write or sync failed: the database is in its failed state, in
    /// which nothing more becomes durable and every call returns this error.
    /// Reopen the database to recover what was durable.
    Durability(String),
    /// Replication failed or refused: a malformed stream, a lost or refused
    /// connection, a backup too far behind its primary.
    Replication(String),
    /// A snapshot could not be as fresh as asked
    /// ([`Worker::snapshot_fresh`](crate::Worker::snapshot_fresh)): a hot
    /// standby behind its primary, or one that has not heard from it yet.
    Stale {
        /// The epoch the read view is at (0: none yet).
        view: u64,
        /// What the read asked for.
        wanted: String,
    },
    /// Recovery found damage it will not pass over: `what` names the file,
    /// the offset and the problem. `salvage` says what
    /// [`RecoveryOptions::salvage`](crate::RecoveryOptions::salvage) would recover instead
    /// and what it would give up; `None` where salvage cannot help.
    Corrupt {
        /// The file, the offset and the problem.
        what: String,
        /// What salvage would recover instead and what it would give up.
        salvage: Option<String>,
    },
    /// The data directory is open in another process (or handle).
    Locked(std::path::PathBuf),
    /// The operation needs durability, which these options turn off.
    NotDurable,
    /// The database was opened read-only ([`Options::read_only`](crate::Options::read_only)):
    /// a transaction with writes, or a new table, is refused.
    ReadOnly,
    /// A table or index handle from another [`Database`](crate::Database).
    ForeignTable(TableId),
    /// The log or checkpoint directories given do not match the ones the
    /// data directory's manifest records. Leave them out to use the
    /// recorded ones.
    DirectoryMismatch {
        /// `"log"` or `"checkpoint"`.
        kind: &'static str,
        /// The directories the manifest records.
        recorded: Vec<std::path::PathBuf>,
        /// The directories given in the options.
        given: Vec<std::path::PathBuf>,
    },
    /// [`crate::destroy`] found a file epochdb did not write (by its name
    /// or its header) and deleted nothing.
    ForeignFile(std::path::PathBuf),
    /// The path holds no epochdb database (no manifest).
    NotADatabase(std::path::PathBuf),
    /// A file-system operation failed: which one, on what path, and the
    /// operating system's error.
    Io {
        /// The operation (`open`, `write`, `fdatasync`, ...).
        op: &'static str,
        /// The path it was on.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// An error returned by application code inside `Worker::run`.
    User(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// True for aborts, which `Worker::run` retries.
    pub fn is_abort(&self) -> bool {
        matches!(self, Error::Aborted(_))
    }

    /// Wraps an application error (for `?` inside `run` closures).
    pub fn user(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::User(e.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Aborted(r) => write!(f, "transaction aborted: {r:?}"),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes exceeds the limit of {max}")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes exceeds the limit of {max}")
            }
            Error::UnknownTable(id) => write!(f, "no table with id {}", id.index()),
            Error::NoSuchTable(n) => write!(f, "no table named {n:?}"),
            Error::TableExists(n) => write!(f, "a table named {n:?} exists"),
            Error::NoSuchIndex { table, index } => {
                write!(f, "table {table:?} has no index {index:?}")
            }
            Error::KeyExists => write!(f, "key exists"),
            Error::Schema(m) => write!(f, "schema: {m}"),
            Error::InvalidOptions(m) => write!(f, "invalid options: {m}"),
            Error::Closed => write!(f, "the database is closed"),
            Error::TableNotOpened(n) => {
                write!(f, "table {n:?} was recovered with secondary indexes; open it with create_table first")
            }
            Error::Durability(m) => write!(f, "durability failed, database is read-only until reopened: {m}"),
            Error::Replication(m) => write!(f, "replication: {m}"),
            Error::Stale { view, wanted } => write!(f, "stale: the read view is at epoch {view}; wanted {wanted}"),
            Error::Corrupt { what, salvage } => {
                write!(f, "recovery stopped: {what}")?;
                match salvage {
                    Some(s) => write!(f, " (salvage would {s})"),
                    None => Ok(()),
                }
            }
            Error::Locked(p) => write!(f, "data directory {} is open elsewhere", p.display()),
            Error::NotDurable => write!(f, "durability is off for this database"),
            Error::ReadOnly => write!(f, "the database was opened read-only"),
            Error::ForeignTable(id) => write!(f, "table handle {} belongs to another database", id.index()),
            Error::DirectoryMismatch { kind, recorded, given } => write!(
                f,
                "the manifest records the {kind} directories {}, not {}; give the recorded ones (or none, to use them)",
                paths(recorded),
                paths(given)
            ),
            Error::ForeignFile(p) => {
                write!(f, "{} was not written by epochdb (by its name or header); nothing was deleted", p.display())
            }
            Error::NotADatabase(p) => write!(f, "{} holds no epochdb database (no manifest)", p.display()),
            Error::Io { op, path, source } if path.as_os_str().is_empty() => write!(f, "{op}: {source}"),
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::User(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::User(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// `[a, b]`, for messages.
fn paths(p: &[std::path::PathBuf]) -> String {
    let names: Vec<String> = p.iter().map(|p| p.display().to_string()).collect();
    format!("[{}]", names.join(", "))
}

/// A result whose error is epochdb's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

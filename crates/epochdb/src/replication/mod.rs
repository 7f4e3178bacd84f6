//! Replication: hot standbys by log shipping (Query Fresh, VLDB 2018).
//!
//! A primary ([`PrimaryOptions`] in `Options::primary`) ships every sealed
//! log block of each logger, as written, to the backups that connect,
//! before its own sync, and releases commits by its [`Safety`] mode. A
//! backup ([`Backup`]) writes the blocks to a data directory of its own,
//! syncs at each seal and acknowledges the epoch it persisted. ARCHITECTURE.md
//! ("Replication") has the life of a block and the safety argument of each
//! mode; FORMAT.md the wire protocol.

mod backup;
pub(crate) mod fence;
mod primary;
pub mod rules;
pub(crate) mod standby;
mod transport;
pub(crate) mod wire;

pub use backup::{Backup, BackupOptions};
pub use fence::Membership;
pub use primary::BackupState;
pub(crate) use primary::Primary;
pub use standby::{Freshness, StandbyStatus};
pub use transport::Transport;

use crate::error::{Error, Result};
use std::net::SocketAddr;
use std::time::Duration;

/// When a primary releases a commit (Query Fresh §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Safety {
    /// 1-safe: at the primary's own pepoch; a failover may lose the last
    /// epochs the backups had not persisted.
    #[default]
    Async,
    /// 2-safe: once it is durable here and on every in-sync backup. A
    /// backup that stops acknowledging for `ack_timeout` leaves the in-sync
    /// set; with none in sync, release falls back to the local pepoch.
    Sync,
    /// Never released while fewer than `backups` backups are in sync.
    VerySafe,
}

/// A primary's replication settings.
#[derive(Debug, Clone)]
pub struct PrimaryOptions {
    /// Where backups connect; loopback by default (port 0: any free port,
    /// see `Database::replication_status`).
    pub listen: SocketAddr,
    /// When commits are released (default `Async`).
    pub safety: Safety,
    /// For `VerySafe`: backups that must all be in sync.
    pub backups: usize,
    /// Bytes of recent log blocks kept per stream, so a backup that
    /// reconnects resumes from them; also the most queued to one backup
    /// before it is dropped as too slow.
    pub backlog_bytes: usize,
    /// A backup with no acknowledgement for this long is disconnected.
    pub ack_timeout: Duration,
    /// Bytes of old log files (below the installed checkpoint) kept while
    /// a connected backup still needs them, so it can catch up from them;
    /// beyond this the oldest are deleted and a backup that needed them
    /// must start over from an empty directory.
    pub retain_bytes: u64,
    /// The shared secret backups must prove they hold (and that the
    /// primary proves to them) in the handshake; required to listen on a
    /// non-loopback address. Never sent over the wire.
    pub secret: Option<String>,
    /// A control plane's in-sync set (`epochdb-control`): a backup leaves
    /// the set that counts for release only once the control plane has
    /// committed a set without it, because a backup in the committed set
    /// may be promoted. `None`: the primary alone decides.
    pub membership: Option<std::sync::Arc<dyn Membership>>,
    /// How backups' connections travel (the server's TLS); `None`: plain
    /// TCP.
    pub transport: Option<std::sync::Arc<dyn Transport>>,
}

impl Default for PrimaryOptions {
    fn default() -> Self {
        PrimaryOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 7379)),
            safety: Safety::Async,
            backups: 1,
            backlog_bytes: 64 << 20,
            ack_timeout: Duration::from_secs(2),
            retain_bytes: 1 << 30,
            secret: None,
            membership: None,
            transport: None,
        }
    }
}

impl PrimaryOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.backlog_bytes < 1 << 20 {
            return Err(Error::InvalidOptions("replication backlog_bytes must be at least 1 MiB".into()));
        }
        if self.ack_timeout < Duration::from_millis(10) || self.ack_timeout > Duration::from_secs(3600) {
            return Err(Error::InvalidOptions("replication ack_timeout must be between 10 ms and 1 hour".into()));
        }
        if !self.listen.ip().is_loopback() && self.secret.as_deref().is_none_or(str::is_empty) {
            return Err(Error::InvalidOptions(format!(
                "replication listens on {}, beyond this machine: set a secret",
                self.listen
            )));
        }
        if self.safety == Safety::VerySafe && self.backups == 0 {
            return Err(Error::InvalidOptions("very-safe replication needs at least one backup".into()));
        }
        Ok(())
    }
}

/// A primary's replication state.
#[derive(Debug, Clone)]
pub struct ReplicationStatus {
    /// Where backups connect.
    pub listen: SocketAddr,
    /// The safety mode.
    pub safety: Safety,
    /// The epoch released to clients.
    pub released: u64,
    /// The epoch durable on this machine.
    pub local: u64,
    /// The connected backups.
    pub backups: Vec<BackupState>,
}

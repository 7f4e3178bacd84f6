//! A primary's replication settings (`Options::primary`), and the seams
//! through which a control plane (`Membership`) and a transport such as
//! the server's TLS (`Transport`) reach replication. Here, below the
//! engine's modules, so that options need nothing above them.

use crate::error::{Error, Result};
use std::net::{SocketAddr, TcpStream};
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

/// The in-sync set as a control plane keeps it (backups by node id).
///
/// A backup in the committed set may be promoted; so a primary must not
/// release without a backup's acknowledgement until a set without that
/// backup is committed. Otherwise the backup, behind, could be elected
/// after the primary dies and lose what was released (Query Fresh leaves
/// this to its "external coordinator"). (Unwind-safe, so `Options` stays
/// usable across `catch_unwind`.)
pub trait Membership: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe {
    /// The committed in-sync set, sorted.
    fn committed(&self) -> Vec<u64>;
    /// Asks for `nodes` (sorted) to become the committed set; returns at
    /// once. Asking again for the same set is harmless.
    fn propose(&self, nodes: Vec<u64>);
    /// Calls `f` whenever the committed set changes.
    fn subscribe(&self, f: Box<dyn Fn() + Send + Sync>);
}

impl std::fmt::Debug for dyn Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership").field("committed", &self.committed()).finish()
    }
}

/// Carries replication connections. Each side hands over the TCP socket
/// it accepted or connected and gets back a socket on which it speaks the
/// replication protocol in the clear, and whose other end the transport
/// relays (a loopback connection). (Unwind-safe, so `Options` stays
/// usable across `catch_unwind`.)
pub trait Transport: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe {
    /// On a primary, for a backup's accepted connection.
    fn accepted(&self, sock: TcpStream) -> std::io::Result<TcpStream>;
    /// On a backup, for its connection to `primary` (`HOST:PORT` as given).
    fn connected(&self, sock: TcpStream, primary: &str) -> std::io::Result<TcpStream>;
}

impl std::fmt::Debug for dyn Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transport")
    }
}

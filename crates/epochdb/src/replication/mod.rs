//! Replication: hot standbys by log shipping (Query Fresh, VLDB 2018).
//!
//! A primary ([`PrimaryOptions`] in `Options::primary`) ships every sealed
//! log block of each logger, as written, to the backups that connect,
//! before its own sync, and releases commits by its [`Safety`] mode. A
//! backup ([`crate::Backup`]) writes the blocks to a data directory of its own,
//! syncs at each seal and acknowledges the epoch it persisted. ARCHITECTURE.md
//! ("Replication") has the life of a block and the safety argument of each
//! mode; FORMAT.md the wire protocol.

mod backup;
mod primary;
pub mod rules;
pub(crate) mod standby;
pub(crate) mod wire;

pub use backup::BackupOptions;
pub(crate) use backup::Receiver;
pub use primary::BackupState;
pub(crate) use primary::Primary;
pub use standby::StandbyStatus;

pub use crate::options::replication::{Membership, PrimaryOptions, Safety, Transport};
use std::net::SocketAddr;

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

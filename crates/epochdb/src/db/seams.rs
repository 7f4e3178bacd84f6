//! What the database handle asks of the layers below it, and nothing
//! more: durability through [`Persistence`], a primary's log shipping
//! through [`Shipping`]. `Database` and `Worker` reach a store and a
//! primary only through these traits once they are open; opening,
//! promotion and the background threads' start are in `db/mod.rs`.

use crate::durability::checkpoint::CheckpointStats;
use crate::durability::datadir::manifest::TableEntry;
use crate::durability::log::lock;
use crate::durability::recovery::RecoveryReport;
use crate::durability::Store;
use crate::error::{Error, Result};
use crate::replication::{Primary, ReplicationStatus};
use std::sync::atomic::Ordering;

/// A database's durable state: its epochs, and what recovery, the
/// checkpoints and promotions left.
pub(super) trait Persistence {
    /// The released durable epoch; 0 with durability off.
    fn durable_epoch(&self) -> u64;
    /// The released epoch once no release is under way.
    fn settled_epoch(&self) -> u64;
    /// The epoch this node's own loggers made durable, released or not.
    fn local_epoch(&self) -> u64;
    /// Whether `epoch` is durable; the error that stops it, or `NotDurable`.
    fn is_durable(&self, epoch: u64) -> Result<bool>;
    /// Blocks until `epoch` is durable.
    fn wait_durable(&self, epoch: u64) -> Result<()>;
    /// Asks the loggers to make `epoch` durable now.
    fn hasten(&self, epoch: u64);
    /// Calls `f` with each new durable epoch (on a logger thread).
    fn on_durable(&self, f: Box<dyn Fn(u64) + Send + Sync>);
    /// Bytes of log written since open.
    fn log_bytes(&self) -> u64;
    /// What recovery did at open.
    fn recovery_report(&self) -> Option<&RecoveryReport>;
    /// What the last installed checkpoint did.
    fn checkpoint_stats(&self) -> CheckpointStats;
    /// The replication term and its first epoch.
    fn term(&self) -> (u32, u64);
    /// The last epoch of the old term the latest promotion kept.
    fn promotion_kept(&self) -> Option<u64>;
    /// Runs `f` on the catalog the manifest records, under its lock. What
    /// `f` changes is made durable before this returns (the catalog is
    /// durable before any log record can name a new table); with
    /// durability off nothing is recorded and `f` sees an empty catalog.
    fn with_catalog<T>(&self, f: impl FnOnce(&mut Vec<TableEntry>) -> Result<T>) -> Result<T>;
}

impl Persistence for Store {
    fn durable_epoch(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| d.pepoch())
    }

    fn settled_epoch(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| d.settled_pepoch())
    }

    fn local_epoch(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| d.local_pepoch())
    }

    fn is_durable(&self, epoch: u64) -> Result<bool> {
        let d = self.durable.as_ref().ok_or(Error::NotDurable)?;
        d.check()?;
        Ok(d.pepoch() >= epoch)
    }

    fn wait_durable(&self, epoch: u64) -> Result<()> {
        self.durable.as_ref().ok_or(Error::NotDurable)?.wait(epoch)
    }

    fn hasten(&self, epoch: u64) {
        if let Some(d) = &self.durable {
            d.hasten(epoch);
        }
    }

    fn on_durable(&self, f: Box<dyn Fn(u64) + Send + Sync>) {
        if let Some(d) = &self.durable {
            d.listen(f);
        }
    }

    fn log_bytes(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| d.log_bytes.load(Ordering::Relaxed))
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref()
    }

    fn checkpoint_stats(&self) -> CheckpointStats {
        lock(&self.checkpoint_stats).clone()
    }

    fn term(&self) -> (u32, u64) {
        lock(&self.manifest).term()
    }

    fn promotion_kept(&self) -> Option<u64> {
        lock(&self.manifest).promotions.last().map(|p| p.kept)
    }

    fn with_catalog<T>(&self, f: impl FnOnce(&mut Vec<TableEntry>) -> Result<T>) -> Result<T> {
        if self.durable.is_none() {
            return f(&mut Vec::new());
        }
        let mut m = lock(&self.manifest);
        let mut next = m.clone();
        let out = f(&mut next.tables)?;
        if next.tables != m.tables {
            self.store_manifest(&mut m, next)?;
        }
        Ok(out)
    }
}

/// A replication primary's side of the database: where backups connect
/// and how each is doing.
pub(super) trait Shipping {
    /// The status, with the `released` and `local` durable epochs.
    fn status(&self, released: u64, local: u64) -> ReplicationStatus;
}

impl Shipping for Primary {
    fn status(&self, released: u64, local: u64) -> ReplicationStatus {
        ReplicationStatus { listen: self.addr(), safety: self.safety(), released, local, backups: self.backups() }
    }
}

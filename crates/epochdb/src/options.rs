//! Database options. Every field has a default that suits a server; see
//! each field for what it trades.

use crate::error::{Error, Result};
use crate::tid::TidSource;
use std::time::Duration;

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

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
        }
    }
}

impl Options {
    pub fn validate(&self) -> Result<()> {
        if self.epoch_interval.is_zero() {
            return Err(Error::InvalidOptions("epoch_interval must be positive".into()));
        }
        if self.snapshot_epochs < 2 {
            return Err(Error::InvalidOptions("snapshot_epochs must be at least 2".into()));
        }
        if self.max_value_len == 0 || self.max_value_len > u32::MAX as usize / 2 {
            return Err(Error::InvalidOptions("max_value_len must be in 1..=2 GiB".into()));
        }
        Ok(())
    }
}

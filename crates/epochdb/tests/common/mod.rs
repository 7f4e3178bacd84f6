//! Helpers shared by the integration tests.
#![allow(dead_code)]

use epochdb::{Database, Options, TableId};
use std::collections::BTreeMap;
use std::time::Duration;

/// Fast epochs and short snapshot distance, so that epoch-driven behaviour
/// (snapshots, reclamation) happens many times within a test.
pub fn fast_db() -> Database {
    let options = Options { epoch_interval: Duration::from_millis(1), snapshot_epochs: 4, ..Options::default() };
    Database::open(options).expect("open")
}

/// The unit tests' xorshift generator: tests stay reproducible from their seed.
#[path = "../../src/test_rng.rs"]
mod test_rng;
#[allow(unused_imports)] // not every test uses it
pub use test_rng::Rng;

pub fn u64_of(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("8-byte value"))
}

/// Waits until snapshot transactions see the state committed in `epoch`
/// (a snapshot at `se` sees epochs `< se`).
pub fn wait_for_snapshot(db: &Database, epoch: u64) {
    while db.snapshot_epoch() <= epoch {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A fresh, empty directory under the system temp dir for one test,
/// removed when the test is done with it (kept after a failure, to look
/// at).
pub fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("epochdb-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// See [`temp_dir`]; derefs to its path.
pub struct TempDir(std::path::PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &std::path::PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Options for a durable database in `dir` with fast epochs.
pub fn durable_options(dir: &std::path::Path, durability: epochdb::Durability) -> Options {
    Options {
        epoch_interval: Duration::from_millis(2),
        snapshot_epochs: 4,
        durability,
        data_dir: Some(dir.into()),
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_millis(50), ..Default::default() },
        log: epochdb::LogOptions { rotate_epochs: 20, buffer_size: 16 << 10, ..Default::default() },
        ..Options::default()
    }
}

/// [`durable_options`] under which `data.log` is never rotated, so that
/// every block a test writes stays in it (however slowly the epochs pass).
pub fn one_log_file(dir: &std::path::Path, durability: epochdb::Durability) -> Options {
    let mut options = durable_options(dir, durability);
    options.log.rotate_epochs = u64::MAX / 2;
    options
}

/// `options` with salvage past damage.
pub fn salvaging(mut options: Options) -> Options {
    options.recovery.salvage = true;
    options
}

/// Writes a valid pepoch file saying `pepoch` into `dir` (FORMAT.md,
/// "Pepoch file"), as a crash before a later pepoch write would leave it.
pub fn write_pepoch(dir: &std::path::Path, pepoch: u64) {
    let mut bytes = vec![0u8; 1024 + 16];
    bytes[..8].copy_from_slice(b"EPOCHPEP");
    bytes[8..12].copy_from_slice(&4u32.to_le_bytes());
    for at in [512, 1024] {
        bytes[at..at + 8].copy_from_slice(&pepoch.to_le_bytes());
        let crc = epochdb::crc32c::checksum(&pepoch.to_le_bytes());
        bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(dir.join("pepoch"), bytes).expect("pepoch file");
}

/// Every row of table `t`, read in one transaction.
pub fn contents(db: &Database, t: TableId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut w = db.worker().expect("worker");
    w.run(|txn| {
        let mut m = BTreeMap::new();
        txn.scan(t, .., usize::MAX, |k, v| {
            m.insert(k.to_vec(), v.to_vec());
            true
        })?;
        Ok(m)
    })
    .expect("scan")
}

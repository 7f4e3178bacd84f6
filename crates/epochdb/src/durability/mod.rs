//! The disk side of a durable database: SiloR's logging, checkpoints and
//! recovery, with Gawain's delta log and incremental checkpoints.
//!
//! [`open`] locks and recovers a data directory into tables and a
//! [`Store`]; [`Store::start_loggers`] and [`Store::start_checkpointer`]
//! start its threads; workers append to their [`log::LogSlot`] at commit
//! and wait on [`logger::Durable`]. Nothing here knows the database
//! handle or replication: the checkpointer is handed the epochs and the
//! catalog's [`Tables`] it walks, and a standby replays through the same
//! [`replay`] path as recovery.
//!
//! | module | concept |
//! | --- | --- |
//! | `log/` | a transaction's log record and workers' buffers (`mod.rs`); logger threads, `d_l`, pepoch and its file, rotation (`logger.rs`) |
//! | `frame` | checksummed blocks and file headers, torn-tail detection |
//! | `checkpoint` | fuzzy parallel (and incremental) checkpoints |
//! | `recovery/` | parallel checkpoint load and log replay; the sorted merge (`merge.rs`); column versions for delta replay (`columns.rs`) |
//! | `replay` | the path from a logged block to the tables, shared with a standby |
//! | `datadir/` | directory layout, locks, `destroy`; the manifest: catalog, installed checkpoints, void epochs (`manifest.rs`); read-only report (`inspect.rs`) |
//! | `fsio` | the file seam, with fault injection |

pub(crate) mod checkpoint;
pub(crate) mod datadir;
pub(crate) mod frame;
pub(crate) mod fsio;
pub(crate) mod log;
pub(crate) mod recovery;
pub(crate) mod replay;

use crate::catalog::{Table, Tables};
use crate::epoch::Epochs;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use checkpoint::{CheckpointStats, Checkpointer, Checkpointing, Deletions};
use datadir::manifest::Manifest;
use datadir::{Dirs, Locks};
use fsio::Io;
use log::logger::{Durable, Loggers, PepochFile, Rotation};
use recovery::{Progress, RecoveryReport};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A database's disk state, shared by the database, its workers and the
/// checkpointer. With durability off it is empty (`durable` is `None`).
#[derive(Default)]
pub(crate) struct Store {
    /// The data, log and checkpoint directories.
    pub dirs: Dirs,
    pub io: Io,
    /// Logging state; `None` with durability off or read-only.
    pub durable: Option<Arc<Durable>>,
    /// The data directory's manifest (catalog, checkpoint, void epochs).
    pub manifest: Mutex<Manifest>,
    pub checkpoint_stats: Mutex<CheckpointStats>,
    /// Deletes not yet in a checkpoint (incremental checkpoints only).
    pub deletions: Deletions,
    /// What recovery did at open.
    pub recovery: Option<RecoveryReport>,
    /// Old log files kept for a primary's backups.
    pub retention: Arc<Retention>,
}

/// Old log files (below the installed checkpoint's `e_l`) a primary keeps
/// because a connected backup still needs them (Query Fresh §3.4.4): set
/// by replication, obeyed by the checkpointer's cleanup.
#[derive(Debug)]
pub(crate) struct Retention {
    /// Old files holding an epoch above this stay (`u64::MAX`: none held).
    pub hold: AtomicU64,
    /// At most this many bytes of them; beyond it the oldest go anyway.
    pub cap: AtomicU64,
    /// Log files holding only epochs `<=` this may be gone.
    pub deleted_through: AtomicU64,
    /// Catch-ups sending files now ([`Retention::sending`]). While any
    /// does, a checkpoint's cleanup removes nothing: it frees a file from
    /// its end, so the reader of an obsolete checkpoint or log would send
    /// less than the file held.
    sending: AtomicUsize,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            hold: AtomicU64::new(u64::MAX),
            cap: AtomicU64::new(0),
            deleted_through: AtomicU64::new(0),
            sending: AtomicUsize::new(0),
        }
    }
}

impl Retention {
    /// Holds off the checkpoints' cleanups until the guard drops.
    pub fn sending(&self) -> Sending<'_> {
        self.sending.fetch_add(1, Ordering::AcqRel);
        Sending(self)
    }

    /// Whether a catch-up is sending files now.
    pub fn is_sending(&self) -> bool {
        self.sending.load(Ordering::Acquire) > 0
    }
}

/// A catch-up sending files ([`Retention::sending`]).
pub(crate) struct Sending<'r>(&'r Retention);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.sending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A data directory opened and recovered, before the database runs.
pub(crate) struct Opened {
    pub store: Store,
    pub tables: Vec<Table>,
    /// The epoch to start at: past every epoch recovery saw.
    pub first_epoch: u64,
    /// The directories' locks, held until the database closes.
    pub locks: Locks,
    /// For the loggers; `None` read-only or with durability off.
    pub pepoch_file: Option<PepochFile>,
}

/// Opens the data directory of `options` (nothing with durability off):
/// locks it before reading anything, reads the manifest, resolves and locks
/// the log and checkpoint directories, recovers, and (unless read-only)
/// commits the recovery. A replication backup keeps the log's tail above
/// its pepoch (`keep_tail`) instead of making it void: its primary judges it.
pub(crate) fn open(
    options: &Options,
    tag: u32,
    progress: &(dyn Fn(Progress) + Sync),
    keep_tail: bool,
) -> Result<Opened> {
    let io = Io::new(options.testing.faults.clone());
    if options.durability == Durability::Off {
        let store = Store { io, ..Store::default() };
        return Ok(Opened { store, tables: Vec::new(), first_epoch: 1, locks: Locks::default(), pepoch_file: None });
    }
    let data = options.data_dir.clone().ok_or(Error::NotDurable)?;
    let writing = !options.read_only;
    if data.exists() && !data.is_dir() {
        let source = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        return Err(Error::Io { op: "open data directory", path: data, source });
    }
    if writing {
        io.create_dir_all(&data)?;
    } else if !data.join(datadir::manifest::MANIFEST_FILE).is_file() {
        return Err(Error::NotADatabase(data));
    }
    let mut locks = datadir::lock(std::slice::from_ref(&data), &io, writing)?;
    let legacy = Dirs::legacy_checkpoint(options, &data);
    let manifest = Manifest::load(&data, &legacy).map_err(|d| d.error(None))?;
    let dirs = Dirs::resolve(options, manifest.as_ref())?;
    if writing {
        dirs.create(&io)?;
    }
    locks.extend(datadir::lock(&dirs.lockable()[1..], &io, writing)?);
    let mut r = recovery::recover(options, &dirs, manifest, tag, progress)?;
    let pepoch_file = if writing { Some(r.commit(&dirs, &io, keep_tail)?) } else { None };
    let durable = pepoch_file.as_ref().map(|_| Arc::new(Durable::new(dirs.log.len(), r.report.pepoch)));
    if let (Some(d), Some(lease)) = (&durable, &options.lease) {
        d.attach_lease(lease.clone());
    }
    // Files below the checkpoint may be gone (a cleanup may have run).
    let e_l = r.manifest.checkpoint.as_ref().map_or(0, |c| c.e_l);
    let retention =
        Arc::new(Retention { deleted_through: AtomicU64::new(e_l.saturating_sub(1)), ..Retention::default() });
    let store = Store {
        dirs,
        io,
        durable,
        manifest: Mutex::new(r.manifest),
        recovery: Some(r.report),
        retention,
        ..Store::default()
    };
    Ok(Opened { store, tables: r.tables, first_epoch: r.first_epoch, locks, pepoch_file })
}

impl Store {
    /// Makes `next` the manifest, durably, in place of the one `current`
    /// guards (replication's tap, if any, ships it to the backups).
    pub fn store_manifest(&self, current: &mut Manifest, next: Manifest) -> Result<()> {
        next.store(&self.dirs.data, &self.io)?;
        if let Some(tap) = self.durable.as_ref().and_then(|d| d.tap()) {
            tap.manifest(&next.encode());
        }
        *current = next;
        Ok(())
    }

    /// Starts one logger per log directory; none unless the store logs.
    pub fn start_loggers(
        &self,
        pepoch_file: Option<PepochFile>,
        epochs: &Arc<Epochs>,
        options: &Options,
    ) -> Result<Option<Loggers>> {
        let (Some(durable), Some(pepoch_file)) = (&self.durable, pepoch_file) else { return Ok(None) };
        let rotate = Rotation::of(options);
        let loggers =
            Loggers::start(&self.dirs.log, pepoch_file, durable.clone(), epochs.clone(), self.io.clone(), rotate)?;
        Ok(Some(loggers))
    }

    /// Starts the checkpointer when the options ask for checkpoints and the
    /// store logs; `standby`: a hot standby's persisted epoch (see
    /// `checkpoint.rs`).
    pub fn start_checkpointer(
        self: &Arc<Self>,
        epochs: &Arc<Epochs>,
        tables: &Arc<Tables>,
        options: &Options,
        standby: Option<Arc<AtomicU64>>,
    ) -> Result<Option<Checkpointer>> {
        if !options.durability.checkpoints() || self.durable.is_none() {
            return Ok(None);
        }
        let cx = Checkpointing {
            store: self.clone(),
            epochs: epochs.clone(),
            tables: tables.clone(),
            options: options.clone(),
            standby,
        };
        Checkpointer::start(cx).map(Some)
    }
}

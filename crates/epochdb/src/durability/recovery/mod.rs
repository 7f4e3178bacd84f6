//! Parallel recovery (SiloR §5).
//!
//! 1. Read the pepoch file (the caller has read the manifest: catalog,
//!    directories, installed checkpoint and its incremental chain, void
//!    epochs).
//! 2. Load the checkpoints' files: a reader thread streams their blocks to
//!    `n` workers, which apply them.
//! 3. Replay the log files the same way, newest first, skipping records
//!    with epochs `< e_l` (the checkpoint has them), `> pepoch` (never
//!    durable) or void.
//! 4. Remove the tombstones that deletes left.
//!
//! Every record carries its TID, and a key keeps the version with the
//! largest TID whatever order the files are read in, so threads need no
//! coordination beyond the index's own locks. Deletes are replayed as
//! absent records (tombstones) so an older value cannot come back; step 4
//! removes them. The result is the state after every transaction in an
//! epoch `<= pepoch`: a prefix of the serial order, because TIDs order
//! conflicting transactions and epochs are prefixes of it (ARCHITECTURE.md).
//! Delta entries (Gawain) are merged column by column instead, with the
//! version vectors of `columns.rs`, under the same record locks.
//!
//! Recovery reads and writes nothing on disk; [`Recovered::commit`] then
//! makes its result the database's new starting point (pepoch file,
//! manifest with the void epochs, crashed `data.log` sealed). A read-only
//! open (and `epochdb verify`) skips that step.
//!
//! Damage (FORMAT.md, "Framing"). A crash can tear only what was written
//! after the sync that made the recorded pepoch durable, and every block
//! written after that sync holds epochs above pepoch. A block header lies
//! in one sector, which is written whole or not at all, and carries its
//! own checksum, so a torn block's header is either intact or all zeros.
//! So in a crashed `data.log`, a bad block whose intact header shows
//! epochs above pepoch, or whose header was never written, is a torn tail
//! if no block at or below pepoch follows it: it and what follows are
//! dropped and reported. A bad block anywhere whose intact header shows
//! epochs above pepoch loses nothing (recovery ignores those epochs) and is
//! dropped and reported too. Any other damage is corruption: an error that
//! names the file and offset and says what salvage would give up. Salvage skips damaged blocks; a skipped log
//! block of epochs `lo..hi` may hold transactions of epoch `lo`, so
//! recovery runs again with pepoch `lo - 1`, which keeps the result a
//! prefix of the serial order. Where a skipped block's epochs are unknown,
//! or the checkpoint needs them, it cannot be one, and the report says so.

pub(crate) mod columns;
pub(crate) mod merge;

use super::datadir::manifest::Manifest;
use super::datadir::{Dirs, CHECKPOINT_MAGIC};
use super::frame::{BlockReader, Damage, BLOCK_HEADER_LEN};
use super::fsio::{Context, Io};
use super::log::logger::{PepochFile, CURRENT_LOG, LOG_MAGIC, OLD_LOG_PREFIX};
use super::log::{self, lock, Entry, Write};
use super::replay;
use crate::catalog::{Schema, Table, TableId};
use crate::error::{Error, Result};
use crate::index::Retired;
use crate::index::{Insert, Leaf, Lookup, SortedRun, Tree};
use crate::options::{LogReplay, Options};
use crate::record::Record;
use crate::tid::{self, Tid, ABSENT_BIT, LATEST_BIT};
use merge::{Gathered, Mapped};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use std::time::Instant;

/// What recovery did, for the caller to report.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// The epoch recovered to: the state holds every transaction in an
    /// epoch `<= pepoch` and nothing later. Below `recorded_pepoch` only
    /// when salvage cut the state back to before a damaged block.
    pub pepoch: u64,
    /// The pepoch the directory recorded (its pepoch file, or a single
    /// logger's seal markers: `logger::recorded_pepoch`); `None` when the
    /// pepoch file was unreadable and salvage took the epoch the logs
    /// reach instead.
    pub recorded_pepoch: Option<u64>,
    /// `e_l` of the checkpoint loaded, if any.
    pub checkpoint_epoch: Option<u64>,
    /// Checkpoint bytes read.
    pub checkpoint_bytes: u64,
    /// Log bytes read.
    pub log_bytes: u64,
    /// Live records (all tables, secondary index entries included).
    pub records: u64,
    /// Threads that replayed.
    pub threads: usize,
    /// Seconds from start to the state being ready.
    pub seconds: f64,
    /// Of `seconds`, those spent loading the checkpoint (the rest is
    /// mostly the log replay).
    pub checkpoint_seconds: f64,
    /// CPU seconds the process's threads used over `seconds` (recovery's
    /// own when the process does nothing else meanwhile, as at open):
    /// against `seconds`, how many CPUs recovery kept busy, the workers,
    /// the file reader and the kernel zeroing new memory together.
    pub cpu_seconds: f64,
    /// Of `cpu_seconds`, those spent in the kernel: mostly the page faults
    /// that zero the memory the recovered rows fill. On a virtual machine
    /// whose host takes freed memory back (balloon free page reporting),
    /// a page new to the process may also be new to the host, and its
    /// first touch costs many times what it does on a machine of its own.
    pub system_seconds: f64,
    /// Damage passed over: torn tails of crashed `data.log` files (above
    /// pepoch: what a crash leaves), and with `Options::salvage`, whatever
    /// was skipped and what it cost.
    pub dropped: Vec<String>,
    /// False when salvage skipped data it could not cut back to (checkpoint
    /// blocks, log blocks of unknown epochs or of epochs the checkpoint
    /// needs): the state is then not known to be a prefix of the serial
    /// order. Always true without salvage.
    pub consistent: bool,
}

/// Recovery's progress, in bytes of checkpoint and log read.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// What recovery is reading.
    pub phase: Phase,
    /// Bytes read so far in this phase.
    pub done_bytes: u64,
    /// Bytes this phase reads in all.
    pub total_bytes: u64,
}

/// The phases of recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Loading the checkpoint.
    Checkpoint,
    /// Replaying the logs.
    Log,
    /// Finished.
    Done,
}

/// A recovered database, ready to open.
pub(crate) struct Recovered {
    pub tables: Vec<Table>,
    pub manifest: Manifest,
    pub first_epoch: u64,
    pub report: RecoveryReport,
    /// Crashed `data.log` files: where each valid part ends, its top epoch.
    crashed: Vec<(PathBuf, FileEnd)>,
    /// Epochs above pepoch that a crash left in the log: void from now on
    /// (`commit`), unless a replication backup keeps them for its primary
    /// to judge.
    tail: Option<(u64, u64)>,
}

/// A file to read: a checkpoint file (with its checkpoint's `e_h`) or a
/// log file (`current`: a `data.log`, which a crash may have left torn).
struct Source {
    path: PathBuf,
    len: u64,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Checkpoint { e_h: u64 },
    Log { current: bool },
}

/// Shared by the recovery threads.
pub(super) struct Ctx<'a> {
    pub(super) tables: &'a [Table],
    manifest: &'a Manifest,
    e_l: u64,
    /// The largest `e_h` of the checkpoints loaded: the log must reach it
    /// for the state to be consistent.
    e_h: u64,
    pepoch: u64,
    salvage: bool,
    done: AtomicU64,
    total: u64,
    phase: Phase,
    progress: &'a (dyn Fn(Progress) + Sync),
    /// Loading the base checkpoint: blocks of whole rows are packed into
    /// runs (`pack`) for `Tree::load`, not installed key by key.
    bulk: bool,
    dropped: Mutex<Vec<String>>,
    /// The log files mapped, when the log is replayed by sort and merge
    /// (`merge.rs`): the log's workers gather entries instead of
    /// installing them.
    maps: Option<&'a [Option<Mapped>]>,
    /// With salvage: the epoch to cut the state back to.
    cut: Mutex<Option<u64>>,
    consistent: AtomicBool,
}

impl Ctx<'_> {
    /// Where an entry of `table` (a table the manifest has) goes.
    pub(super) fn target(&self, table: u32) -> Target<'_> {
        Target {
            table,
            tree: &self.tables[table as usize].tree,
            schema: self.schema(table),
            versioned: self.versioned(table),
        }
    }

    /// Whether the rows recovery makes for `table` are versioned from the
    /// start: when the log is installed entry by entry and the table has a
    /// schema, most rows a delta reaches get a column vector, which needs
    /// the `prev` slot, and moving each such row to a versioned record
    /// would cost a copy and hold the old one until recovery ends. The
    /// merge makes its rows itself, and installs entry by entry only what
    /// it cannot merge: its rows start plain, and those few move.
    fn versioned(&self, table: u32) -> bool {
        self.maps.is_none() && self.schema(table).is_some()
    }

    /// The schema of `table`, if it has one.
    pub(super) fn schema(&self, table: u32) -> Option<&Schema> {
        self.manifest.tables.get(table as usize).and_then(|t| t.schema.as_ref())
    }

    fn advance(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        (self.progress)(Progress { phase: self.phase, done_bytes: done, total_bytes: self.total });
    }

    /// What skipping the damage `d` would give up.
    fn salvage_cost(&self, d: &Damage) -> String {
        match (self.phase, d.epochs) {
            (Phase::Log, Some((lo, hi))) if lo > self.pepoch => {
                format!("skip it: its epochs {lo}..={hi} are above pepoch {}, so nothing durable is lost", self.pepoch)
            }
            (Phase::Log, Some((lo, hi))) if lo > self.e_h => format!(
                "skip it and recover to epoch {} (before its epochs {lo}..={hi}), dropping every later transaction",
                lo - 1
            ),
            (Phase::Log, Some((lo, hi))) => format!(
                "skip it, but its epochs {lo}..={hi} are ones the checkpoint needs: the state would miss them and not be consistent"
            ),
            (Phase::Log, None) => {
                "skip it, but its epochs are unreadable: the state would miss its transactions and not be consistent".into()
            }
            _ => "skip it: the rows in it would be missing and the state would not be consistent".into(),
        }
    }

    /// Damage recovery will not pass over by itself: an error, or with
    /// salvage, skipped, reported, and the cut or the consistency updated.
    fn damage(&self, d: Damage) -> Result<()> {
        let cost = self.salvage_cost(&d);
        if !self.salvage {
            return Err(d.error(Some(cost)));
        }
        lock(&self.dropped).push(format!("salvage: {d}: {cost}"));
        match (self.phase, d.epochs) {
            (Phase::Log, Some((lo, _))) if lo > self.pepoch => {}
            (Phase::Log, Some((lo, _))) if lo > self.e_h => {
                let mut cut = lock(&self.cut);
                *cut = Some(cut.map_or(lo - 1, |c| c.min(lo - 1)));
            }
            _ => self.consistent.store(false, Ordering::Relaxed),
        }
        Ok(())
    }
}

/// CPU seconds all of this process's threads have used: in all, and in
/// the kernel.
fn process_cpu_seconds() -> (f64, f64) {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is an rusage this call may write; RUSAGE_SELF always exists.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime) + secs(u.ru_stime), secs(u.ru_stime))
}

/// Recovers the database in `dirs` (whose manifest is `manifest`; `None`
/// for a new database). Reads only.
pub(crate) fn recover(
    options: &Options,
    dirs: &Dirs,
    manifest: Option<Manifest>,
    tag: u32,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Recovered> {
    let start = Instant::now();
    let cpu_start = process_cpu_seconds();
    let exists = manifest.is_some();
    let manifest = manifest.unwrap_or_default();
    let e_l = manifest.checkpoint.as_ref().map_or(0, |c| c.e_l);
    let e_h = manifest.checkpoints().map(|c| c.e_h).max().unwrap_or(0);
    let logs = log_files(&dirs.log, e_l, exists)?;
    let mut dropped = Vec::new();
    // The pepoch file is made before the first manifest (`commit`): without
    // a manifest nothing was durable, whatever state a failed first open
    // left the pepoch file in.
    let recorded = match super::log::logger::recorded_pepoch(&dirs.data, &dirs.log) {
        _ if !exists => Ok(0),
        Ok(Some(p)) => Ok(p),
        Ok(None) => {
            Err(Damage::of_file(&dirs.data.join(super::log::logger::PEPOCH_FILE), "the pepoch file is missing".into()))
        }
        Err(d) => Err(d),
    };
    let pepoch = match &recorded {
        Ok(p) => *p,
        Err(d) if options.recovery.salvage => {
            let p = logs_reach(&logs, e_h);
            dropped.push(format!(
                "salvage: {d}: took epoch {p} from the logs instead (one less than the highest epoch every log directory reached); a guess that may drop acknowledged transactions or keep unacknowledged ones"
            ));
            p
        }
        Err(d) => {
            let cost = "take the epoch the logs reach instead, a guess that may drop acknowledged transactions or keep unacknowledged ones";
            return Err(d.error(Some(cost.into())));
        }
    };
    let threads = options.recovery.thread_count();
    let mut run = replay_all(options, dirs, &manifest, &logs, pepoch, tag, threads, progress)?;
    if let Some(cut) = run.cut.filter(|&c| c < pepoch) {
        // Salvage skipped a log block of epochs above `cut`: recover again
        // to `cut`, so that the state is a prefix of the serial order.
        run = replay_all(options, dirs, &manifest, &logs, cut, tag, threads, progress)?;
    }
    dropped.append(&mut run.dropped);
    let pepoch = run.pepoch;
    if pepoch < recorded.as_ref().map_or(0, |p| *p) {
        dropped.push(format!(
            "salvage: recovered to epoch {pepoch}, not to the recorded pepoch {}: the transactions of epochs {}..={} are dropped",
            recorded.as_ref().map_or(0, |p| *p),
            pepoch + 1,
            recorded.as_ref().map_or(0, |p| *p)
        ));
    }

    // New epochs start above everything on disk; what a crash left above
    // pepoch becomes void, durably (in `commit`), before the crashed files
    // are sealed.
    let max_seen = run.ends.iter().map(|e| e.1.max_epoch).max().unwrap_or(0);
    let recorded_top = recorded.as_ref().map_or(0, |p| *p);
    let void_top = max_seen.max(recorded_top);
    let tail = (void_top > pepoch).then_some((pepoch + 1, void_top));
    let first_epoch = manifest.voids.iter().map(|v| v.1).chain([void_top, pepoch, e_h]).max().unwrap_or(0) + 1;
    // Epochs start at the next multiple of k (epoch.rs), and must fit a TID.
    let k = options.snapshot_epochs;
    if first_epoch.div_ceil(k) * k + k > crate::tid::MAX_EPOCH {
        let what = format!("epoch {first_epoch} is at the end of the 32-bit epoch space; no new epoch fits");
        return Err(Error::Corrupt { what, salvage: None });
    }
    let cpu_end = process_cpu_seconds();
    let report = RecoveryReport {
        pepoch,
        recorded_pepoch: recorded.ok(),
        checkpoint_epoch: manifest.checkpoint.as_ref().map(|c| c.e_l),
        checkpoint_bytes: run.checkpoint_bytes,
        log_bytes: run.log_bytes,
        records: run.records,
        threads,
        seconds: start.elapsed().as_secs_f64(),
        checkpoint_seconds: run.checkpoint_seconds,
        cpu_seconds: cpu_end.0 - cpu_start.0,
        system_seconds: cpu_end.1 - cpu_start.1,
        dropped,
        consistent: run.consistent,
    };
    let level = if report.checkpoint_bytes + report.log_bytes == 0 { ::log::Level::Debug } else { ::log::Level::Info };
    ::log::log!(
        level,
        "recovered {} records to pepoch {pepoch} in {:.3} s ({:.1} MB of checkpoint and log)",
        report.records,
        report.seconds,
        (report.checkpoint_bytes + report.log_bytes) as f64 / 1e6
    );
    for d in &report.dropped {
        ::log::warn!("recovery dropped: {d}");
    }
    let crashed = run.ends.into_iter().filter(|e| e.2).map(|e| (e.0, e.1)).collect();
    Ok(Recovered { tables: run.tables, manifest, first_epoch, report, crashed, tail })
}

impl Recovered {
    /// Makes the recovered state the database's starting point on disk, in
    /// directories the caller has made and locked: the pepoch file (first,
    /// so that a manifest never exists without one), the manifest with the
    /// directories and void epochs, then the crashed `data.log` files
    /// sealed. Returns the pepoch file, for the loggers. A replication
    /// backup keeps the tail above pepoch (`keep_tail`): its primary sends
    /// those epochs again, or says they are void.
    pub(crate) fn commit(&mut self, dirs: &Dirs, io: &Io, keep_tail: bool) -> Result<PepochFile> {
        if let Some(t) = self.tail.filter(|_| !keep_tail) {
            self.manifest.voids.push(t);
        }
        let pepoch = PepochFile::open(&dirs.data, io.clone(), self.report.pepoch)?;
        (self.manifest.log_dirs, self.manifest.checkpoint_dirs) = dirs.recorded();
        self.manifest.store(&dirs.data, io)?;
        for (path, end) in &self.crashed {
            seal_crashed_log(path, end, io)?;
        }
        Ok(pepoch)
    }
}

/// One run of steps 2–4 with a given pepoch.
struct Run {
    tables: Vec<Table>,
    pepoch: u64,
    /// Each log file read: path, end, whether it is a crashed `data.log`.
    ends: Vec<(PathBuf, FileEnd, bool)>,
    dropped: Vec<String>,
    cut: Option<u64>,
    consistent: bool,
    checkpoint_bytes: u64,
    log_bytes: u64,
    records: u64,
    checkpoint_seconds: f64,
}

#[allow(clippy::too_many_arguments)]
fn replay_all(
    options: &Options,
    dirs: &Dirs,
    manifest: &Manifest,
    logs: &[Source],
    pepoch: u64,
    tag: u32,
    threads: usize,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Run> {
    let tables = tables_of(manifest, tag);
    // Sort and merge the log (`merge.rs`) unless incremental checkpoints
    // are on the chain: their rows go into built trees before the log.
    let merging = options.recovery.log_replay == LogReplay::Merge && manifest.checkpoints().count() <= 1;
    let maps: Option<Vec<Option<Mapped>>> = merging.then(|| logs.iter().map(|f| Mapped::open(&f.path)).collect());
    let mut ctx = Ctx {
        tables: &tables,
        manifest,
        e_l: manifest.checkpoint.as_ref().map_or(0, |c| c.e_l),
        e_h: manifest.checkpoints().map(|c| c.e_h).max().unwrap_or(0),
        pepoch,
        salvage: options.recovery.salvage,
        done: AtomicU64::new(0),
        total: 0,
        phase: Phase::Checkpoint,
        progress,
        bulk: false,
        dropped: Mutex::new(Vec::new()),
        maps: maps.as_deref(),
        cut: Mutex::new(None),
        consistent: AtomicBool::new(true),
    };

    // Checkpoint: the full one at the base of the chain, then the
    // incremental ones (whose rows may replace its rows).
    let mut checkpoint_files = Vec::new();
    let mut base_files = None;
    for c in manifest.checkpoints() {
        base_files.get_or_insert(c.files.len());
        for f in &c.files {
            let path = f.path(&dirs.checkpoint);
            if f.dir as usize >= dirs.checkpoint.len() {
                let what = format!(
                    "the manifest (format 3) names checkpoint file {}, which no checkpoint directory holds; open the database once from the working directory that created it, which rewrites the manifest in format 4",
                    path.display()
                );
                return Err(Error::Corrupt { what, salvage: None });
            }
            let actual = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if actual != f.len {
                let what = format!("checkpoint file is {actual} bytes; the manifest says {}", f.len);
                ctx.damage(Damage { offset: actual.min(f.len), ..Damage::of_file(&path, what) })?;
            }
            checkpoint_files.push(Source { path, len: actual, kind: Kind::Checkpoint { e_h: c.e_h } });
        }
    }
    ctx.total = checkpoint_files.iter().map(|f| f.len).sum();
    let checkpoint_bytes = ctx.total;
    // A new database has nothing to recover: no events for it.
    let level = if checkpoint_files.is_empty() && logs.is_empty() { ::log::Level::Debug } else { ::log::Level::Info };
    ::log::log!(
        level,
        "recovery: loading {} checkpoint files ({:.1} MB) with {threads} threads",
        checkpoint_files.len(),
        checkpoint_bytes as f64 / 1e6
    );
    let loading = Instant::now();
    let (base, chain) = checkpoint_files.split_at(base_files.unwrap_or(0));
    ctx.bulk = true;
    // When merging, the base checkpoint's files are mapped too, so that
    // its blocks are not copied out before they are packed (a copy, not a
    // reference: the mappings end with this phase).
    let base_maps: Option<Vec<Option<Mapped>>> = ctx.maps.map(|_| base.iter().map(|f| Mapped::open(&f.path)).collect());
    let base_left = replay_files(&ctx, threads, base, CHECKPOINT_MAGIC, base_maps.as_deref());
    drop(base_maps);
    let (_, mut left) = base_left?;
    ctx.bulk = false;
    // With the merge, the runs wait for the log's entries.
    let runs = if ctx.maps.is_some() { Ok(()) } else { load_runs(&ctx, &mut left) };
    let loaded = runs.and_then(|()| match chain.is_empty() {
        true => Ok(()),
        false => replay_files(&ctx, threads, chain, CHECKPOINT_MAGIC, None).map(|(_, l)| left.absorb(l)),
    });
    if let Err(e) = loaded {
        left.discard(&ctx);
        return Err(e);
    }
    let checkpoint_seconds = loading.elapsed().as_secs_f64();

    // Logs.
    ctx.phase = Phase::Log;
    ctx.done.store(0, Ordering::Relaxed);
    ctx.total = logs.iter().map(|f| f.len).sum();
    let log_bytes = ctx.total;
    ::log::log!(
        level,
        "recovery: replaying {} log files ({:.1} MB) up to pepoch {pepoch}",
        logs.len(),
        log_bytes as f64 / 1e6
    );
    let replayed = replay_files(&ctx, threads, logs, LOG_MAGIC, ctx.maps);
    let ends = match replayed {
        Ok((ends, log_left)) => {
            left.absorb(log_left);
            ends
        }
        Err(e) => {
            left.discard(&ctx);
            return Err(e);
        }
    };
    if ctx.maps.is_some() {
        // SAFETY: `maps`, which the gathered entries point into, lives
        // until this function returns.
        if let Err(e) = unsafe { merge::merge(&ctx, threads, &mut left) } {
            left.discard(&ctx);
            return Err(e);
        }
    }
    let complete = check_complete(&ctx, threads, &mut left);
    let records = complete.map(|()| remove_tombstones(&tables, threads, &mut left));
    left.discard(&ctx);
    let records = records?;
    debug_assert_eq!(records, tables.iter().map(|t| count_live(&t.tree)).sum::<u64>(), "tombstones left behind");
    ctx.phase = Phase::Done;
    ctx.advance(0);
    let ends = logs.iter().zip(ends).map(|(f, e)| (f.path.clone(), e, f.kind == Kind::Log { current: true })).collect();
    let (dropped, cut, consistent) =
        (std::mem::take(&mut *lock(&ctx.dropped)), *lock(&ctx.cut), ctx.consistent.load(Ordering::Relaxed));
    drop(ctx);
    Ok(Run { tables, pepoch, ends, dropped, cut, consistent, checkpoint_bytes, log_bytes, records, checkpoint_seconds })
}

/// Empty tables for the manifest's catalog, with handles tagged `tag`.
pub(crate) fn tables_of(m: &Manifest, tag: u32) -> Vec<Table> {
    (m.tables.iter().enumerate())
        .map(|(i, t)| Table {
            id: TableId::new(tag, i as u32),
            name: t.name.clone(),
            tree: Tree::new(),
            index_names: (m.tables.iter().enumerate())
                .filter_map(|(j, x)| match &x.index_of {
                    Some((p, n)) if *p as usize == i => Some((n.clone(), TableId::new(tag, j as u32))),
                    _ => None,
                })
                .collect(),
            def: Default::default(),
        })
        .collect()
}

/// The log files that may hold epochs `>= e_l`, newest first, with sizes.
/// A log directory that is missing is an error for a database that
/// exists (its log would be lost), and nothing for a new one.
fn log_files(dirs: &[PathBuf], e_l: u64, exists: bool) -> Result<Vec<Source>> {
    let mut files = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !exists => continue,
            Err(e) => return Err(Error::Io { op: "read log directory", path: dir.clone(), source: e }),
        };
        for entry in entries {
            let entry = entry.ctx("read log directory", dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let len = entry.metadata().ctx("stat", &entry.path())?.len();
            if name == CURRENT_LOG {
                files.push((Source { path: entry.path(), len, kind: Kind::Log { current: true } }, u64::MAX));
            } else if let Some(hi) = old_log_epoch(&name) {
                if hi >= e_l {
                    files.push((Source { path: entry.path(), len, kind: Kind::Log { current: false } }, hi));
                }
            }
        }
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    Ok(files.into_iter().map(|f| f.0).collect())
}

/// A file a primary sends, block by block, to a backup that is behind its
/// backlog: a checkpoint file, or a log file of stream `stream`.
pub(crate) struct Shipped {
    pub stream: usize,
    pub reader: BlockReader,
    /// A `data.log` a logger may be appending to: damage at its end is the
    /// block being written, not corruption.
    pub current: bool,
    /// Transactions of epochs below this are not to be sent: the
    /// checkpoint (or the backup) has them, and, as recovery does when it
    /// skips them, the sender must not replay them: a later write of the
    /// same key may be in a file already deleted (a log file's epochs are
    /// not ordered against another logger's, nor a backup's files at all).
    pub from: u64,
}

/// Opens, now, every file a backup that persisted `pepoch` needs to catch
/// up: with nothing persisted, the installed checkpoints (chain first) and
/// the logs from their `e_l`; else the logs holding epochs above `pepoch`,
/// which must all still be there (none deleted above `deleted_through`).
/// Logs come oldest first in each directory (stream). A checkpoint's
/// cleanup may still cut a file while it is sent (the sender checks
/// `BlockReader::shrank`). `Err` says why the backup cannot be caught up.
pub(crate) fn open_for_catch_up(
    dirs: &Dirs,
    manifest: &Manifest,
    pepoch: u64,
    deleted_through: &AtomicU64,
) -> Result<Vec<Shipped>, String> {
    let e_l = manifest.checkpoint.as_ref().map_or(0, |c| c.e_l);
    let mut out = Vec::new();
    let what = |p: &Path, d: Damage| format!("{}: {d}", p.display());
    if pepoch == 0 {
        for c in manifest.checkpoints() {
            for f in &c.files {
                let path = f.path(&dirs.checkpoint);
                let reader = BlockReader::open(&path, CHECKPOINT_MAGIC).map_err(|d| what(&path, d))?;
                out.push(Shipped { stream: 0, reader, current: false, from: 0 });
            }
        }
    }
    let from = if pepoch == 0 { e_l.max(1) } else { pepoch + 1 };
    let logs = log_files(&dirs.log, from, true).map_err(|e| e.to_string())?;
    for f in logs.iter().rev() {
        let stream = dirs.log.iter().position(|d| f.path.parent() == Some(d.as_path())).unwrap_or(0);
        let reader = BlockReader::open(&f.path, LOG_MAGIC).map_err(|d| what(&f.path, d))?;
        out.push(Shipped { stream, reader, current: f.kind == Kind::Log { current: true }, from });
    }
    // Checked after listing and opening: a cleanup raises it before it
    // deletes, so a file missing from the listing shows here; files opened
    // stay readable if deleted now.
    let deleted_through = deleted_through.load(Ordering::Acquire);
    if pepoch > 0 && pepoch < deleted_through {
        return Err(format!(
            "the backup has persisted epoch {pepoch}, but this primary has deleted its log files through epoch \
             {deleted_through}: start the backup from an empty data directory"
        ));
    }
    Ok(out)
}

/// With an unreadable pepoch file: one less than the highest epoch every
/// log directory reached (the lowest of their highest epochs), and at
/// least the installed checkpoints' `e_h` (installed only once durable).
fn logs_reach(logs: &[Source], e_h: u64) -> u64 {
    let mut highest: Vec<(PathBuf, u64)> = Vec::new();
    let mut payload = Vec::new();
    for f in logs {
        let Ok(mut r) = BlockReader::open(&f.path, LOG_MAGIC) else { continue };
        let dir = f.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut top = 0;
        loop {
            match r.next_block(&mut payload) {
                Ok(Some((_, _, hi))) => top = top.max(hi),
                Ok(None) => break,
                Err(_) if r.skip_to_next_valid() => {}
                Err(_) => break,
            }
        }
        match highest.iter_mut().find(|h| h.0 == dir) {
            Some(h) => h.1 = h.1.max(top),
            None => highest.push((dir, top)),
        }
    }
    let reached = highest.iter().map(|h| h.1).filter(|&t| t > 0).min().unwrap_or(0);
    reached.saturating_sub(1).max(e_h)
}

/// The largest epoch in an `old_data.<e>[.n]` file, from its name.
pub(crate) fn old_log_epoch(name: &str) -> Option<u64> {
    name.strip_prefix(OLD_LOG_PREFIX)?.split('.').next()?.parse().ok()
}

/// Whether the log file `name` holds only epochs below `e_l`: recovery
/// from a checkpoint at `e_l` never reads it (see [`log_files`]), so it is
/// obsolete once that checkpoint is installed.
pub(crate) fn below_checkpoint(name: &str, e_l: u64) -> bool {
    old_log_epoch(name).is_some_and(|hi| hi < e_l)
}

/// What reading one file found.
#[derive(Debug, Clone, Copy, Default)]
struct FileEnd {
    /// The largest epoch in its blocks.
    max_epoch: u64,
    /// The length of its valid prefix (where a torn tail starts); `None`:
    /// keep it whole (salvage passed over damage in it).
    valid_len: Option<u64>,
}

/// One phase's files, read by the reader thread (`stream`) and replayed
/// by the recovery workers: a pipeline (Gawain §3). With `n` recovery
/// threads there are `n - 1` workers, and the reader replays a block
/// itself whenever their queue is full. The reader keeps `n` files open,
/// newest first, and takes a block from each in turn, so threads mostly
/// apply blocks of different files,
/// holding different epochs and touching different leaves (sharing one
/// file's blocks from the start was measured slower, from contention on
/// the same leaves); when fewer files remain, every worker still gets
/// blocks, so a single large file is replayed by all. Versions of a key
/// may arrive in any order: `install` keeps the largest TID (or merges
/// columns) under the record's lock.
struct Blocks<'a> {
    files: &'a [Source],
    magic: &'a [u8; 8],
    /// The files mapped (by index), if they are: a mapped file's blocks
    /// are checked and replayed where they lie, not copied out.
    maps: Option<&'a [Option<Mapped>]>,
    /// A thread failed: the others stop.
    failed: AtomicBool,
}

/// The reader's progress through one file (only the reader touches it).
#[derive(Default)]
struct FileState {
    reader: Option<BlockReader>,
    done: bool,
    /// Where the reader stood after the last block, for progress.
    read_to: u64,
    end: FileEnd,
    /// In a crashed `data.log`: the damage where a torn tail seems to
    /// start. Every block after it must hold only epochs above pepoch.
    torn: Option<Damage>,
    /// Salvage passed over damage here: there is no tail to trim.
    keep_whole: bool,
}

/// A block a thread took: its file (index), offset, epoch range and
/// payload length.
struct Claimed {
    file: usize,
    at: u64,
    lo: u64,
    hi: u64,
    len: usize,
}

impl Blocks<'_> {
    /// File `i`'s mapping, if it is mapped.
    fn mapped(&self, i: usize) -> Option<&Mapped> {
        self.maps.and_then(|m| m[i].as_ref())
    }

    /// A claimed block's payload: in its file's mapping, or (`false`) in
    /// `payload`, where `next_in` read it if the mapping does not cover it.
    fn payload<'p>(&'p self, b: &Claimed, payload: &'p [u8]) -> (&'p [u8], bool) {
        match self.mapped(b.file).and_then(|m| m.get(b.at + BLOCK_HEADER_LEN as u64, b.len)) {
            Some(block) => (block, true),
            None => (payload, false),
        }
    }

    /// Reads the next block of file `i` (into `payload` unless the file is
    /// mapped), or `None` when the file is done.
    fn next_in(&self, i: usize, s: &mut FileState, ctx: &Ctx<'_>, payload: &mut Vec<u8>) -> Result<Option<Claimed>> {
        let file = &self.files[i];
        let current = file.kind == Kind::Log { current: true };
        while !s.done && !self.failed.load(Ordering::Relaxed) {
            let Some(reader) = s.reader.as_mut() else {
                match BlockReader::open(&file.path, self.magic) {
                    Ok(r) => {
                        s.read_to = r.offset();
                        s.reader = Some(r);
                    }
                    Err(d) => {
                        s.done = true;
                        ctx.damage(d)?;
                    }
                }
                continue;
            };
            let next = match self.mapped(i) {
                Some(m) => reader.next_block_in(m.bytes(), payload),
                None => reader.next_block(payload).map(|b| b.map(|(at, lo, hi)| (at, lo, hi, payload.len()))),
            };
            match next {
                Ok(Some((at, lo, hi, len))) => {
                    let offset = reader.offset();
                    ctx.advance(offset - s.read_to);
                    s.read_to = offset;
                    s.end.max_epoch = s.end.max_epoch.max(hi);
                    match &s.torn {
                        // After what looked like a torn tail: blocks above
                        // pepoch are what the crash left; one at or below
                        // pepoch was durable, so the damage before it is not
                        // a tear but corruption.
                        Some(tear) if lo <= ctx.pepoch => {
                            let d = Damage {
                                what: format!(
                                    "{}, followed at offset {at} by a block of epochs {lo}..={hi}, at or below pepoch {}",
                                    tear.what, ctx.pepoch
                                ),
                                ..tear.clone()
                            };
                            s.torn = None;
                            (s.keep_whole, s.end.valid_len) = (true, None);
                            ctx.damage(d)?;
                        }
                        Some(_) => continue,
                        None => {}
                    }
                    if let Kind::Checkpoint { e_h } = file.kind {
                        if hi > e_h {
                            let what =
                                format!("a checkpoint block of epochs {lo}..={hi}, after the checkpoint's end {e_h}");
                            return Err(Error::Corrupt {
                                what: format!("{} at offset {at}: {what}", file.path.display()),
                                salvage: None,
                            });
                        }
                    }
                    return Ok(Some(Claimed { file: i, at, lo, hi, len }));
                }
                Ok(None) => {
                    if s.torn.is_none() && !s.keep_whole {
                        s.end.valid_len = Some(reader.offset());
                    }
                }
                Err(d) => {
                    // Written after the last sync before a crash: a block
                    // whose intact header says above pepoch, or one never
                    // written at all.
                    let above = d.epochs.is_some_and(|(lo, _)| lo > ctx.pepoch);
                    let unsynced = above || d.zeroed;
                    if current && unsynced && s.torn.is_none() && !s.keep_whole {
                        s.end.valid_len = Some(d.offset);
                        s.torn = Some(d);
                    } else if s.torn.is_some() && unsynced {
                        // More of the same torn tail.
                    } else if above {
                        // Durable damage, but only to epochs recovery
                        // ignores: nothing is lost.
                        let what = format!("{d} (epochs above pepoch {}: nothing durable is lost)", ctx.pepoch);
                        lock(&ctx.dropped).push(what);
                    } else {
                        // Damage at or below pepoch: a tear seen before it
                        // was not one either.
                        if let Some(tear) = s.torn.take() {
                            ctx.damage(tear)?;
                        }
                        (s.keep_whole, s.end.valid_len) = (true, None);
                        ctx.damage(d)?;
                    }
                    if reader.skip_to_next_valid() {
                        s.read_to = reader.offset();
                        continue;
                    }
                }
            }
            if let Some(tear) = s.torn.take() {
                lock(&ctx.dropped).push(format!(
                    "{} (written after the last sync before a crash, above pepoch {}): dropped",
                    tear.described("torn tail"),
                    ctx.pepoch
                ));
            }
            s.reader = None;
            s.done = true;
        }
        Ok(None)
    }
    /// The reader: streams the wanted blocks to the workers, each with a
    /// buffer they send back; `width` files at a time, a block from each in
    /// turn. When the queue is full (or there are no workers) it replays
    /// the block itself, so `n` recovery threads keep `n` cores busy.
    /// Returns when all are read, or a thread failed.
    fn stream(
        &self,
        states: &mut [FileState],
        ctx: &Ctx<'_>,
        width: usize,
        to_workers: Option<&SyncSender<Job>>,
        free: &Receiver<Vec<u8>>,
        left: &mut Leftovers,
    ) -> Result<()> {
        let (mut window, mut next, mut turn) = (Vec::with_capacity(width), 0, 0);
        let mut spare = None; // the buffer of a block not wanted
        loop {
            while window.len() < width && next < self.files.len() {
                window.push(next);
                next += 1;
            }
            if window.is_empty() || self.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            turn %= window.len();
            let mut payload = spare.take().or_else(|| free.try_recv().ok()).unwrap_or_default();
            let i = window[turn];
            let Some(b) = self.next_in(i, &mut states[i], ctx, &mut payload)? else {
                window.remove(turn);
                continue;
            };
            turn += 1;
            // Checkpoint blocks are all loaded; log blocks are wanted if
            // they overlap [e_l, pepoch].
            if ctx.phase == Phase::Log && (b.hi < ctx.e_l || b.lo > ctx.pepoch) {
                // Checked, never decoded: its mapped pages need not stay.
                if let Some(m) = self.mapped(b.file) {
                    m.release(b.at, BLOCK_HEADER_LEN + b.len);
                }
                spare = Some(payload);
                continue;
            }
            let (b, payload) = match to_workers {
                None => (b, payload),
                Some(w) => match w.try_send((b, payload)) {
                    Ok(()) => continue,
                    Err(TrySendError::Full(job)) => job,
                    Err(TrySendError::Disconnected(_)) => return Ok(()), // the workers are gone
                },
            };
            let (block, mapped) = self.payload(&b, &payload);
            replay(ctx, &self.files[b.file].path, &b, block, mapped, left)?;
            spare = Some(payload);
        }
    }
}

/// A block for a worker to replay, and its bytes.
type Job = (Claimed, Vec<u8>);

/// Replays every block of `files` with `threads` threads. Returns what each
/// file held, and what the threads left for the end.
fn replay_files(
    ctx: &Ctx<'_>,
    threads: usize,
    files: &[Source],
    magic: &[u8; 8],
    maps: Option<&[Option<Mapped>]>,
) -> Result<(Vec<FileEnd>, Leftovers)> {
    let blocks = Blocks { files, magic, maps, failed: AtomicBool::new(false) };
    let mut states: Vec<FileState> = files.iter().map(|_| FileState::default()).collect();
    // `threads` in all: the reader and `threads - 1` workers.
    let (threads, workers) = (threads.max(1), threads.max(1) - 1);
    // A few blocks in flight per worker keep them busy while the reader
    // (a CRC per block, and a copy out of the page cache unless the file
    // is mapped: far faster than replay) runs ahead; the buffers
    // circulate back to it.
    let (to_workers, jobs) = std::sync::mpsc::sync_channel::<Job>(2 * workers.max(1));
    let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let jobs = Mutex::new(jobs);
    let out = Mutex::new((Leftovers::default(), None));
    let fail = |e: Error| {
        blocks.failed.store(true, Ordering::Relaxed);
        lock(&out).1.get_or_insert(e);
    };
    std::thread::scope(|s| {
        let (blocks, fail) = (&blocks, &fail);
        let (out, states) = (&out, &mut states);
        s.spawn(move || {
            let (free_rx, mut left) = (free_rx, Leftovers::default());
            let to_workers = (workers > 0).then_some(to_workers);
            if let Err(e) = blocks.stream(states, ctx, threads, to_workers.as_ref(), &free_rx, &mut left) {
                fail(e);
            }
            lock(out).0.absorb(left);
            // Dropping `to_workers` here ends the workers' loops.
        });
        for _ in 0..workers {
            let (free_tx, jobs) = (free_tx.clone(), &jobs);
            s.spawn(move || {
                let mut left = Leftovers::default();
                // After a failure, jobs still queued are dropped unreplayed.
                loop {
                    let job = lock(jobs).recv(); // the guard ends here, not after replay
                    let Ok((b, payload)) = job else { break };
                    if !blocks.failed.load(Ordering::Relaxed) {
                        let (block, mapped) = blocks.payload(&b, &payload);
                        if let Err(e) = replay(ctx, &blocks.files[b.file].path, &b, block, mapped, &mut left) {
                            fail(e);
                        }
                    }
                    let _ = free_tx.send(payload);
                }
                lock(out).0.absorb(left);
            });
        }
    });
    let (left, err) = out.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = err {
        left.discard(ctx);
        return Err(e);
    }
    let ends = states.into_iter().map(|s| s.end).collect();
    Ok((ends, left))
}

/// Installs the writes of one block through the shared replay path
/// (`durability/replay.rs`). A record outside the block's epoch range
/// means the block misstates its epochs, which filtering trusts. A block
/// of the base checkpoint (`ctx.bulk`) holding whole rows alone is packed
/// into sorted runs instead ([`pack`]); a log block in its mapped file
/// (`mapped`), when the log is merged, is gathered ([`gather`]).
fn replay(ctx: &Ctx<'_>, path: &Path, b: &Claimed, payload: &[u8], mapped: bool, left: &mut Leftovers) -> Result<()> {
    let corrupt =
        |what: String| Error::Corrupt { what: format!("{} at offset {}: {what}", path.display(), b.at), salvage: None };
    if ctx.bulk {
        match pack(ctx, b, payload, left) {
            Ok(true) => return Ok(()),
            Ok(false) => {} // not whole rows alone: installed one by one
            Err(what) => return Err(corrupt(what)),
        }
    }
    if mapped && ctx.maps.is_some() && ctx.phase == Phase::Log {
        // Entries may point into the block: the mapping lives until the
        // merge is done.
        return gather(ctx, b, payload, left).map_err(corrupt);
    }
    let mut to = Installer { ctx, b, scratch: Scratch::default(), left };
    replay::replay_block(payload, &mut to).map_err(corrupt)
}

/// Recovery's side of the shared replay path: which entries a block
/// replays ([`wanted`]) and how each is merged ([`install`]).
struct Installer<'c, 'l> {
    ctx: &'c Ctx<'c>,
    b: &'c Claimed,
    scratch: Scratch,
    left: &'l mut Leftovers,
}

impl<'a> replay::Install<'a> for Installer<'_, '_> {
    fn wanted(&mut self, e: &Entry<'a>) -> Result<bool, String> {
        let mut failure = None;
        let wanted = wanted(self.ctx, self.b, e.tid.epoch(), &mut failure);
        failure.map_or(Ok(wanted), Err)
    }

    fn look_up(&mut self, window: &[Entry<'a>], found: &mut Vec<Lookup>) -> Result<(), String> {
        let tables = self.ctx.tables;
        if let Some(e) = window.iter().find(|e| e.table as usize >= tables.len()) {
            return Err(format!("a record of table {}, which the manifest lacks", e.table));
        }
        Tree::lookup_batch(window.iter().map(|e| (&tables[e.table as usize].tree, e.key)), found);
        for (e, hint) in window.iter().zip(found.iter()) {
            if let (Some(r), Some(schema)) = (hint.record, self.ctx.schema(e.table)) {
                // SAFETY: records are freed only after every recovery thread ends.
                columns::prefetch(unsafe { r.as_ref() }, schema);
            }
        }
        Ok(())
    }

    fn install(&mut self, e: &Entry<'a>, hint: Lookup) -> Result<(), String> {
        let target = self.ctx.target(e.table);
        install(&target, e.key, e.tid, e.write, hint, &mut self.scratch, self.left)
            .map_err(|what| format!("table {:?}: {what}", self.ctx.tables[e.table as usize].name))
    }
}

/// Gathers the writes of a log block, decoded from its mapped file, for
/// the merge (`merge.rs`), filtered as [`replay`] filters them.
fn gather(ctx: &Ctx<'_>, b: &Claimed, block: &[u8], left: &mut Leftovers) -> Result<(), String> {
    let mine = &mut left.gathered;
    if mine.is_empty() {
        mine.extend(ctx.tables.iter().map(|_| vec![Vec::new()]));
    }
    let mut failure = None;
    log::decode(block, |e| {
        if !wanted(ctx, b, e.tid.epoch(), &mut failure) {
            return;
        }
        match mine.get_mut(e.table as usize) {
            Some(chunks) => merge::push(chunks, Gathered::of(&e)),
            None => failure = Some(format!("a record of table {}, which the manifest lacks", e.table)),
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// Whether to replay a record of `epoch` in block `b`: not after a
/// failure (a record outside the block's epochs is one, recorded in
/// `failure`), and in the log phase only in `e_l..=pepoch` outside void
/// ranges (checkpoint records are all below `e_l`).
fn wanted(ctx: &Ctx<'_>, b: &Claimed, epoch: u64, failure: &mut Option<String>) -> bool {
    if failure.is_none() {
        *failure = outside(b, epoch);
    }
    let log = ctx.phase == Phase::Log;
    failure.is_none() && !(log && (epoch < ctx.e_l || epoch > ctx.pepoch || ctx.manifest.is_void(epoch)))
}

/// A record of `epoch` in block `b` that does not fit the block's epochs.
fn outside(b: &Claimed, epoch: u64) -> Option<String> {
    (!(b.lo..=b.hi).contains(&epoch))
        .then(|| format!("a record of epoch {epoch} in a block of epochs {}..={}", b.lo, b.hi))
}

/// Packs a base checkpoint block's rows into runs of ascending keys (a
/// block holds one table's rows in key order), kept in `left` for
/// [`load_runs`]. `Ok(false)`, keeping nothing, if the block holds
/// anything but whole rows: the caller installs it as usual.
fn pack(ctx: &Ctx<'_>, b: &Claimed, payload: &[u8], left: &mut Leftovers) -> Result<bool, String> {
    let mut runs: Vec<(u32, SortedRun)> = Vec::new();
    let (mut failure, mut whole) = (None, true);
    log::decode(payload, |e| {
        if failure.is_some() || !whole {
            return;
        }
        failure = outside(b, e.tid.epoch());
        if failure.is_none() && e.table as usize >= ctx.tables.len() {
            failure = Some(format!("a record of table {}, which the manifest lacks", e.table));
        }
        let Write::Value(value) = e.write else {
            whole = false;
            return;
        };
        if failure.is_some() {
            return;
        }
        let rec = Record::alloc_with_slot(e.key, value, e.tid.raw() | LATEST_BIT, ctx.versioned(e.table));
        let rec = match runs.last_mut() {
            Some((t, run)) if *t == e.table => match run.push(rec) {
                Ok(()) => return,
                Err(rec) => rec, // not above the run's last key: a new run
            },
            _ => rec,
        };
        // With the merge to come, the rows will be taken back out.
        let mut run = if ctx.maps.is_some() { SortedRun::flat() } else { SortedRun::default() };
        let pushed = run.push(rec);
        debug_assert!(pushed.is_ok(), "an empty run takes any key");
        runs.push((e.table, run));
    })?;
    match failure {
        Some(what) => Err(what),
        None if !whole => Ok(false), // dropping `runs` frees their records
        None => {
            left.runs.append(&mut runs);
            Ok(true)
        }
    }
}

/// Builds each table's tree from the runs the base checkpoint was packed
/// into. A table whose runs overlap (a damaged checkpoint) or whose tree
/// already holds rows (blocks `pack` declined) gets them one by one,
/// largest TID winning. Single-threaded, after the checkpoint's threads.
fn load_runs(ctx: &Ctx<'_>, left: &mut Leftovers) -> Result<()> {
    let mut by_table: Vec<Vec<SortedRun>> = ctx.tables.iter().map(|_| Vec::new()).collect();
    for (t, run) in std::mem::take(&mut left.runs) {
        by_table[t as usize].push(run); // `pack` checked the table
    }
    let mut failure = None;
    for ((i, runs), t) in by_table.into_iter().enumerate().zip(ctx.tables) {
        let runs = match t.tree.load(runs, &mut left.retired) {
            Ok(n) => {
                left.created += n;
                continue;
            }
            Err(runs) => runs,
        };
        let rows = runs.into_iter().flat_map(SortedRun::into_records);
        // SAFETY: the runs' records, ours alone now.
        if let Err(what) = unsafe { install_rows(&ctx.target(i as u32), rows, &mut Scratch::default(), left) } {
            failure.get_or_insert(format!("table {:?}: {what}", t.name));
        }
    }
    match failure {
        None => Ok(()),
        Some(what) => Err(Error::Corrupt { what: format!("the checkpoint: {what}"), salvage: None }),
    }
}

/// Installs `rows`, records of a checkpoint that could not be loaded as
/// runs, one by one after a lookup each (largest TID winning), freeing
/// each: all of them, past a failure too, which is returned.
///
/// # Safety
/// The records are the caller's alone, and linked nowhere.
pub(super) unsafe fn install_rows(
    target: &Target<'_>,
    rows: impl IntoIterator<Item = NonNull<Record>>,
    scratch: &mut Scratch,
    left: &mut Leftovers,
) -> Result<(), String> {
    let (mut value, mut result) = (Vec::new(), Ok(()));
    for rec in rows {
        // SAFETY: per the contract; freed once, here.
        let (key, tid) = unsafe {
            let r = rec.as_ref();
            r.copy_value(&mut value);
            let kt = (r.key().to_vec(), Tid::of_word(r.tid.load()));
            Record::free(rec);
            kt
        };
        if result.is_ok() {
            let hint = target.tree.lookup(&key);
            result = install(target, &key, tid, Write::Value(&value), hint, scratch, left);
        }
    }
    result
}

/// Where an entry goes: its table (index, tree and schema).
pub(super) struct Target<'a> {
    table: u32,
    pub(super) tree: &'a Tree,
    schema: Option<&'a Schema>,
    /// Rows are made versioned ([`Ctx::versioned`]).
    versioned: bool,
}

/// Buffers for merging rows, reused across entries, and the leaf this
/// thread inserted into last: the version its lookups saw and the one its
/// inserts left.
#[derive(Default)]
pub(super) struct Scratch {
    own_inserts: Option<(*const Leaf, u64, u64)>,
    old: Vec<u8>,
    row: Vec<u8>,
    merge: columns::MergeScratch,
}

/// The TID word of a row with versions `v`.
pub(super) fn word_of(v: &[u64]) -> u64 {
    Tid::from_raw(columns::newest(v)).raw() | LATEST_BIT | if columns::is_live(v) { 0 } else { ABSENT_BIT }
}

/// Applies one entry to `key`, which `hint` looked up (perhaps before
/// another thread changed it). A row without column versions holds every
/// column at its record's TID, and the larger TID wins whole; a delta, or
/// any entry for a row that a delta touched, is merged column by column
/// (`columns::merge`). Deletes leave absent records (tombstones).
#[allow(clippy::too_many_arguments)]
pub(super) fn install(
    t: &Target<'_>,
    key: &[u8],
    tid: Tid,
    write: Write<'_>,
    hint: Lookup,
    s: &mut Scratch,
    left: &mut Leftovers,
) -> Result<(), String> {
    if write == Write::Delete {
        left.deleted.push((t.table, key.into()));
    }
    let whole_word = tid.raw() | LATEST_BIT | if write == Write::Delete { ABSENT_BIT } else { 0 };
    let need_schema = || t.schema.ok_or_else(|| "a delta for a table without a schema".to_string());
    let mut hint = Some(hint);
    loop {
        let found = match (hint.take(), write) {
            // A new key with a whole value (a checkpoint's rows, a log's
            // inserts) goes where the lookup found its place, if that leaf
            // is unchanged and has room.
            (Some(mut h), Write::Value(value)) if h.record.is_none() => {
                // Keys looked up together often share a leaf (a
                // checkpoint's rows come in key order): if this thread's
                // own inserts are all that changed it, it is still the
                // key's leaf, at the version they left.
                let looked_up = h.version;
                if let Some((leaf, from, now)) = s.own_inserts {
                    if std::ptr::eq(leaf, h.leaf) && from == h.version {
                        h.version = now;
                    }
                }
                let fresh = Record::alloc_with_slot(key, value, whole_word, t.versioned);
                let inserted = match t.tree.insert_after_miss(&h, key, fresh) {
                    Some(done) => {
                        if let Insert::Inserted { leaf, new_version, .. } = done {
                            s.own_inserts = Some((leaf, looked_up, new_version));
                        }
                        done
                    }
                    None => t.tree.insert_if_absent(key, fresh),
                };
                match inserted {
                    Insert::Inserted { .. } => {
                        left.created += 1;
                        return Ok(());
                    }
                    Insert::Existing(rec) => {
                        // SAFETY: never published.
                        unsafe { Record::free(fresh) };
                        Some(rec)
                    }
                }
            }
            (Some(h), _) => h.record,
            (None, _) => t.tree.lookup(key).record,
        };
        let Some(rec) = found else {
            // A new row. A delta's other columns stay blank, at version
            // 0, until their writer's entry arrives.
            let versions = match write {
                Write::Delta(_) => {
                    let schema = need_schema()?;
                    let mut v = vec![0u64; schema.columns().len() + 1].into_boxed_slice();
                    columns::merge(schema, &[], &mut v, tid.raw(), write, &mut s.merge, &mut s.row)?;
                    Some(v)
                }
                _ => None,
            };
            let (value, word) = match &versions {
                Some(v) => (&s.row[..], word_of(v)),
                None => (write.value().unwrap_or(&[]), whole_word),
            };
            let fresh = Record::alloc_with_slot(key, value, word, t.versioned || versions.is_some());
            // SAFETY: a fresh record, ours until published.
            let fresh_ref = unsafe { fresh.as_ref() };
            let versioned = versions.is_some();
            if let Some(v) = versions {
                columns::put(fresh_ref, v); // before anyone can find the record
            }
            match t.tree.insert_if_absent(key, fresh) {
                Insert::Inserted { .. } => {
                    left.created += 1;
                    if versioned {
                        left.versioned.push((t.table, fresh.as_ptr() as usize));
                    }
                    return Ok(());
                }
                Insert::Existing(_) => {
                    drop(t.schema.and_then(|schema| columns::take(fresh_ref, schema)));
                    // SAFETY: never published.
                    unsafe { Record::free(fresh) }
                }
            }
            continue;
        };
        // SAFETY: records are freed only after every recovery thread ends.
        let r = unsafe { rec.as_ref() };
        let Some(old) = r.tid.lock_latest() else { continue };
        let mut versions = t.schema.and_then(|schema| columns::take(r, schema));
        let listed = versions.is_some();
        if versions.is_none() && matches!(write, Write::Delta(_)) {
            match need_schema() {
                Ok(schema) => {
                    let n = schema.columns().len();
                    versions = Some(columns::uniform(n, Tid::of_word(old).raw(), tid::is_absent(old)));
                }
                Err(e) => {
                    r.tid.unlock_to(old);
                    return Err(e);
                }
            }
        }
        // A delta of fixed columns at fixed places goes straight into the
        // record, if it has a slot for the vector: the row stays where it
        // is, at its length.
        if let (Some(v), Some(schema), Write::Delta(d), true) = (versions.as_mut(), t.schema, write, r.is_versioned()) {
            if columns::patch(schema, r, v, tid.raw(), d) {
                let word = word_of(v);
                if let Some(v) = versions {
                    columns::put(r, v);
                }
                if !listed {
                    left.versioned.push((t.table, rec.as_ptr() as usize));
                }
                r.tid.unlock_to(word);
                return Ok(());
            }
        }
        let (value, word) = match (versions.as_mut(), t.schema) {
            (Some(v), Some(schema)) => {
                r.copy_value(&mut s.old);
                if let Err(e) = columns::merge(schema, &s.old, v, tid.raw(), write, &mut s.merge, &mut s.row) {
                    if let (Some(v), true) = (versions.take(), listed) {
                        columns::put(r, v);
                    }
                    r.tid.unlock_to(old);
                    return Err(e);
                }
                (&s.row[..], word_of(v))
            }
            _ if Tid::of_word(old) >= tid => {
                r.tid.unlock_to(old);
                return Ok(());
            }
            _ => (write.value().unwrap_or(&[]), whole_word),
        };
        // A row that gets its first vector moves to a record with a slot
        // for it, as one that outgrows its record moves to a larger one.
        if r.fits(value.len(), versions.is_some()) {
            r.write_value(value);
            if let Some(v) = versions {
                columns::put(r, v);
                if !listed {
                    left.versioned.push((t.table, rec.as_ptr() as usize));
                }
            }
            r.tid.unlock_to(word);
        } else {
            let grown = Record::alloc_with_slot(key, value, word, t.versioned || versions.is_some());
            if let Some(v) = versions {
                // SAFETY: a fresh record, ours until published.
                columns::put(unsafe { grown.as_ref() }, v);
                left.versioned.push((t.table, grown.as_ptr() as usize));
            }
            let replaced = t.tree.replace(key, rec, grown);
            debug_assert!(replaced, "a locked latest record is in its index");
            r.tid.unlock_to(old & !LATEST_BIT);
            left.retired.push(Retired::Record(rec));
        }
        return Ok(());
    }
}

/// After replay: a live row some of whose columns no entry wrote lacks its
/// insert, which no complete checkpoint and log can do. An error, or with
/// salvage, the row is dropped (made a tombstone) and reported. Takes
/// every version vector back, on `threads` threads once replay has ended.
fn check_complete(ctx: &Ctx<'_>, threads: usize, left: &mut Leftovers) -> Result<()> {
    let versioned = std::mem::take(&mut left.versioned);
    let failed = Mutex::new(None);
    in_slices(threads, &versioned, left, |slice, mine| {
        take_versions(ctx, slice, &mut mine.deleted, |table, r, v| {
            let missing = columns::missing(&v);
            if !columns::is_live(&v) || missing.is_empty() {
                return None;
            }
            let what =
                format!("key {:02x?}: columns {missing:?} were never written (the row's insert is missing)", r.key());
            if !ctx.salvage {
                let salvage = Some("drop the row and recover the rest".into());
                lock(&failed).get_or_insert(Error::Corrupt { what, salvage });
                return None;
            }
            let word = r.tid.lock();
            r.tid.unlock_to(word | ABSENT_BIT);
            lock(&ctx.dropped).push(what);
            Some((table, r.key().into()))
        });
    });
    failed.into_inner().unwrap_or_else(|e| e.into_inner()).map_or(Ok(()), Err)
}

/// Runs `f` on `items` cut into `threads` slices, a scoped thread each,
/// each slice with `Leftovers` of its own, absorbed into `left` after.
/// The end of recovery (version checks, tombstones) runs as parallel as
/// replay: on one thread it was 7% of a 2-thread delta recovery.
fn in_slices<T: Sync>(threads: usize, items: &[T], left: &mut Leftovers, f: impl Fn(&[T], &mut Leftovers) + Sync) {
    let per = items.len().div_ceil(threads.max(1)).max(1);
    in_queue(threads, items.chunks(per).collect(), left, |slice, mine| {
        f(slice, mine);
        true
    });
}

/// Runs `f` on each of `items`, in their order, taken one at a time by
/// `threads` scoped threads (as [`in_threads`]). When `f` returns false,
/// no thread takes another item: the items left are dropped.
pub(super) fn in_queue<T: Send>(
    threads: usize,
    mut items: Vec<T>,
    left: &mut Leftovers,
    f: impl Fn(T, &mut Leftovers) -> bool + Sync,
) {
    items.reverse(); // taken from the end
    let queue = Mutex::new(items);
    in_threads(threads, left, |mine| loop {
        let next = lock(&queue).pop(); // not held while `f` runs
        let Some(item) = next else { break };
        if !f(item, mine) {
            lock(&queue).clear();
        }
    });
}

/// Runs `f` on `threads` scoped threads, each with its own `Leftovers`,
/// which end in `left` (a panic in one ends recovery as one in a replay
/// worker does).
pub(super) fn in_threads(threads: usize, left: &mut Leftovers, f: impl Fn(&mut Leftovers) + Sync) {
    let out = Mutex::new(Leftovers::default());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut mine = Leftovers::default();
                f(&mut mine);
                lock(&out).absorb(mine);
            });
        }
    });
    left.absorb(out.into_inner().unwrap_or_else(|e| e.into_inner()));
}

/// Takes back the version vectors of `versioned` (see
/// `Leftovers::versioned`), giving each to `f` with its table and record;
/// a key `f` returns is added to `deleted` (a tombstone to remove).
fn take_versions(
    ctx: &Ctx<'_>,
    versioned: &[(u32, usize)],
    deleted: &mut Vec<(u32, Box<[u8]>)>,
    mut f: impl FnMut(u32, &Record, columns::Versions) -> Option<(u32, Box<[u8]>)>,
) {
    for &(table, addr) in versioned {
        let Some(schema) = ctx.schema(table) else {
            continue;
        };
        // SAFETY: see `Leftovers::versioned`; no replay thread runs now,
        // and each record is in one slice of `versioned`.
        let r = unsafe { &*(addr as *const Record) };
        if let Some(v) = columns::take(r, schema) {
            deleted.extend(f(table, r, v));
        }
    }
}

/// What a recovery thread leaves for the end: the records and nodes it
/// replaced (freed once every thread is done), the keys it deleted (where
/// tombstones may remain), and how many records it added.
#[derive(Default)]
pub(super) struct Leftovers {
    pub(super) retired: Vec<Retired>,
    /// Table and key of every delete replayed, and of every row salvage
    /// dropped: only these can end as tombstones.
    deleted: Vec<(u32, Box<[u8]>)>,
    pub(super) created: u64,
    /// Table and address of every record given a version vector (in its
    /// `prev` field, `columns::take`). Each is in its index or in
    /// `retired` (a grown row's old copy, whose vector moved), so none is
    /// freed before `take_versions`.
    versioned: Vec<(u32, usize)>,
    /// Runs of the base checkpoint's rows, by table, for `load_runs`.
    pub(super) runs: Vec<(u32, SortedRun)>,
    /// Log entries gathered for the merge, by table, in chunks
    /// (`merge.rs`).
    pub(super) gathered: Vec<Vec<Vec<Gathered>>>,
}

impl Leftovers {
    pub(super) fn absorb(&mut self, other: Leftovers) {
        self.retired.extend(other.retired);
        self.deleted.extend(other.deleted);
        self.created += other.created;
        self.versioned.extend(other.versioned);
        self.runs.extend(other.runs);
        if self.gathered.is_empty() {
            self.gathered = other.gathered;
        } else {
            for (mine, theirs) in self.gathered.iter_mut().zip(other.gathered) {
                mine.extend(theirs);
            }
        }
    }

    /// Ends a run: takes back the version vectors left (after a failure)
    /// and frees what was replaced.
    fn discard(mut self, ctx: &Ctx<'_>) {
        take_versions(ctx, &std::mem::take(&mut self.versioned), &mut self.deleted, |_, _, _| None);
        // SAFETY: every recovery thread has ended; replaced records and
        // removed nodes are reachable from nowhere.
        unsafe { free_all(self.retired) };
    }
}

/// Removes the tombstones (absent records) that deletes left; returns how
/// many records remain. Only a key a delete touched can hold one, so this
/// looks up those keys rather than scanning every table (a scan of every
/// record was a tenth of recovery), `threads` slices of them at once. The
/// caller frees `left.retired` after.
fn remove_tombstones(tables: &[Table], threads: usize, left: &mut Leftovers) -> u64 {
    let deleted = std::mem::take(&mut left.deleted);
    let removed = AtomicU64::new(0);
    in_slices(threads, &deleted, left, |slice, mine| {
        let mut n = 0;
        for (table, key) in slice {
            let Some(t) = tables.get(*table as usize) else { continue };
            // Not found: removed already.
            let Some(rec) = t.tree.lookup(key).record else { continue };
            // SAFETY: replay has ended, and nothing is freed until the
            // caller frees `left.retired`. A key deleted twice may be in
            // two slices: `remove_if` unhooks it once.
            if tid::is_absent(unsafe { rec.as_ref() }.tid.load()) && t.tree.remove_if(key, rec, &mut mine.retired) {
                mine.retired.push(Retired::Record(rec));
                n += 1;
            }
        }
        removed.fetch_add(n, Ordering::Relaxed);
    });
    left.created - removed.into_inner()
}

/// The live records of `tree`, by a scan: debug builds check
/// `remove_tombstones`'s count with it.
fn count_live(tree: &Tree) -> u64 {
    let mut live = 0;
    let (lo, hi) = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    tree.scan(
        lo,
        hi,
        false,
        |_, _| {},
        |_, rec| {
            // SAFETY: single-threaded here; nothing is freed during the scan.
            live += u64::from(!tid::is_absent(unsafe { rec.as_ref() }.tid.load()));
            true
        },
    );
    live
}

/// # Safety
/// No thread can reach the objects any more.
unsafe fn free_all(retired: Vec<Retired>) {
    for r in retired {
        // SAFETY: per the contract.
        unsafe { r.free() };
    }
}

/// A crashed run's `data.log` becomes an ordinary old file: trimmed to its
/// valid blocks (dropping a torn tail) and renamed, or removed if empty.
fn seal_crashed_log(path: &Path, end: &FileEnd, io: &Io) -> Result<()> {
    if end.valid_len.is_some_and(|l| l <= super::frame::FILE_HEADER_LEN as u64) {
        return io.remove_file(path);
    }
    if let Some(len) = end.valid_len {
        let file = io.open_write(path)?;
        io.truncate(&file, len)?;
        io.sync(&file)?;
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    io.rename(path, &old_log_path(dir, end.max_epoch))?;
    io.sync_dir(dir)
}

/// `dir/old_data.<hi>`, or with a `.n` suffix if that name is taken.
pub(crate) fn old_log_path(dir: &Path, hi: u64) -> PathBuf {
    let mut p = dir.join(format!("{OLD_LOG_PREFIX}{hi}"));
    let mut n = 1;
    while p.exists() {
        p = dir.join(format!("{OLD_LOG_PREFIX}{hi}.{n}"));
        n += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Column;
    use crate::durability::datadir::manifest::TableEntry;

    fn schema() -> Schema {
        Schema::new(vec![Column::fixed("a", 1), Column::var("b", 16)]).expect("schema")
    }

    /// One block's payload: transactions of one write each, in this order.
    fn payload(writes: &[(u64, &[u8], Option<Write<'_>>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(epoch, key, write) in writes {
            log::encode_txn(&mut out, Tid::new(epoch, 1), 1);
            match write {
                Some(Write::Delta(d)) => log::encode_delta(&mut out, 0, key, d.into_iter()),
                Some(w) => log::encode_entry(&mut out, 0, key, w.value()),
                None => log::encode_entry(&mut out, 0, key, None),
            }
        }
        out
    }

    /// Replays, in this order: a delta of a row whose insert is missing
    /// ("a"); a delta that arrives before its row's insert and a later one
    /// that grows the row, moving its vector to a new record ("b"); an
    /// insert and its delete ("c"); a delete that arrives before the older
    /// insert it undoes ("d"); a delta of a plain row already in the tree,
    /// as the merge builds them and then leaves an entry to `install`
    /// ("e"), which moves the row to a versioned record. Then ends the run
    /// as `replay_all` does.
    fn run(salvage: bool) -> (Result<u64>, Vec<String>, Vec<Table>) {
        let s = schema();
        let manifest = Manifest {
            tables: vec![TableEntry { name: "t".into(), index_of: None, schema: Some(s.clone()) }],
            ..Manifest::default()
        };
        let tables = tables_of(&manifest, 0);
        let progress = |_: Progress| {};
        let ctx = Ctx {
            tables: &tables,
            manifest: &manifest,
            e_l: 0,
            e_h: 0,
            pepoch: 100,
            salvage,
            done: AtomicU64::new(0),
            total: 0,
            phase: Phase::Log,
            progress: &progress,
            bulk: false,
            dropped: Mutex::new(Vec::new()),
            maps: None,
            cut: Mutex::new(None),
            consistent: AtomicBool::new(true),
        };
        // Deltas are built by encoding, then decoded from a block.
        let mut deltas = Vec::new();
        for (c, bytes) in [(0u16, &b"x"[..]), (0, b"p"), (1, b"grown-long-value")] {
            let mut buf = Vec::new();
            log::encode_txn(&mut buf, Tid::new(1, 1), 1);
            log::encode_delta(&mut buf, 0, b"k", [(c, bytes)].into_iter());
            deltas.push(buf);
        }
        let delta = |i: usize| {
            let mut w = None;
            log::decode(&deltas[i], |e| w = Some(e.write)).expect("decode");
            w
        };
        let b_row = s.encode(&[b"q", b"short"]).expect("row");
        let c_row = s.encode(&[b"c", b"c"]).expect("row");
        let block = payload(&[
            (9, b"a", delta(0)),
            (5, b"b", delta(1)),
            (3, b"b", Some(Write::Value(&b_row))),
            (6, b"b", delta(2)),
            (1, b"c", Some(Write::Value(&c_row))),
            (2, b"c", None),
            (8, b"d", None),
            (7, b"d", Some(Write::Value(&c_row))),
            (2, b"e", delta(1)),
        ]);
        let plain = Record::alloc(b"e", &c_row, 0, Tid::new(1, 1).raw() | LATEST_BIT);
        assert!(matches!(tables[0].tree.insert_if_absent(b"e", plain), Insert::Inserted { .. }));
        let mut left = Leftovers::default();
        let claimed = Claimed { file: 0, at: 0, lo: 1, hi: 9, len: block.len() };
        replay(&ctx, Path::new("test"), &claimed, &block, false, &mut left).expect("replay");
        assert_eq!(left.versioned.len(), 4, "a, b, b's grown copy, and e's versioned copy");
        let complete = check_complete(&ctx, 2, &mut left);
        let records = complete.map(|()| remove_tombstones(&tables, 2, &mut left));
        left.discard(&ctx);
        let dropped = std::mem::take(&mut *lock(&ctx.dropped));
        drop(ctx);
        (records, dropped, tables)
    }

    /// The base checkpoint's blocks are packed into runs and loaded whole
    /// when their keys are disjoint; overlapping runs, and blocks holding
    /// more than whole rows, are installed row by row, largest TID winning.
    #[test]
    fn a_base_checkpoint_is_loaded_whole_or_row_by_row() {
        let manifest = Manifest {
            tables: vec![TableEntry { name: "t".into(), index_of: None, schema: None }; 3],
            ..Manifest::default()
        };
        let progress = |_: Progress| {};
        let value = |t: &Tree, key: &[u8]| {
            t.lookup(key).record.map(|r| {
                let mut v = Vec::new();
                // SAFETY: no other thread; the table owns the record.
                unsafe { r.as_ref() }.copy_value(&mut v);
                v
            })
        };
        let tables = tables_of(&manifest, 0);
        let ctx = Ctx {
            tables: &tables,
            manifest: &manifest,
            e_l: 10,
            e_h: 10,
            pepoch: 10,
            salvage: false,
            done: AtomicU64::new(0),
            total: 0,
            phase: Phase::Checkpoint,
            progress: &progress,
            bulk: true,
            dropped: Mutex::new(Vec::new()),
            maps: None,
            cut: Mutex::new(None),
            consistent: AtomicBool::new(true),
        };
        type Row<'a> = (u64, &'a [u8], Option<&'a [u8]>); // epoch, key, value
        let in_table = |table: u32, writes: &[Row<'_>]| {
            let mut out = Vec::new();
            for &(epoch, key, v) in writes {
                log::encode_txn(&mut out, Tid::new(epoch, 1), 1);
                log::encode_entry(&mut out, table, key, v);
            }
            out
        };
        let mut left = Leftovers::default();
        let blocks = [
            // Table 0: disjoint runs, the later keys first.
            in_table(0, &[(3, b"m", Some(b"m3")), (4, b"n", Some(b"n4"))]),
            in_table(0, &[(5, b"a", Some(b"a5")), (6, b"b", Some(b"b6"))]),
            // Table 1: runs that overlap at "c" (its newer row is in the
            // first block).
            in_table(1, &[(3, b"a", Some(b"a3")), (8, b"c", Some(b"c8"))]),
            in_table(1, &[(2, b"b", Some(b"b2")), (4, b"c", Some(b"c4"))]),
            // Table 2: a block with a delete, then one of whole rows.
            in_table(2, &[(7, b"y", Some(b"y7")), (9, b"z", None)]),
            in_table(2, &[(7, b"a", Some(b"a7")), (6, b"y", Some(b"y6"))]),
        ];
        for block in &blocks {
            let claimed = Claimed { file: 0, at: 0, lo: 1, hi: 9, len: block.len() };
            replay(&ctx, Path::new("test"), &claimed, block, false, &mut left).expect("replay");
        }
        assert_eq!(left.runs.len(), 5, "the block with a delete was installed at once");
        assert_eq!(left.deleted.len(), 1);
        load_runs(&ctx, &mut left).expect("load");
        let (t0, t1, t2) = (&tables[0].tree, &tables[1].tree, &tables[2].tree);
        assert_eq!(t0.node_counts(), (2, 1), "one leaf per run under a root");
        for (key, want) in [(&b"a"[..], &b"a5"[..]), (b"b", b"b6"), (b"m", b"m3"), (b"n", b"n4")] {
            assert_eq!(value(t0, key).as_deref(), Some(want), "table 0, {key:?}");
        }
        for (key, want) in [(&b"a"[..], &b"a3"[..]), (b"b", b"b2"), (b"c", b"c8")] {
            assert_eq!(value(t1, key).as_deref(), Some(want), "table 1, {key:?}");
        }
        for (key, want) in [(&b"a"[..], &b"a7"[..]), (b"y", b"y7")] {
            assert_eq!(value(t2, key).as_deref(), Some(want), "table 2, {key:?}");
        }
        assert_eq!(remove_tombstones(&tables, 2, &mut left), 9, "z's tombstone is gone");
        left.discard(&ctx);
    }

    #[test]
    fn a_row_without_its_insert_is_an_error_or_salvaged_and_tombstones_go() {
        let (records, _, _) = run(false);
        let err = records.expect_err("a's insert is missing").to_string();
        assert!(err.contains("never written"), "{err}");

        let (records, dropped, tables) = run(true);
        assert_eq!(records.expect("salvaged"), 1, "of the rows replay made, only b is left (e was in the tree before)");
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(dropped[0].contains("[1]"), "a's column b was never written: {dropped:?}");
        let tree = &tables[0].tree;
        for key in [&b"a"[..], b"c", b"d"] {
            assert!(tree.lookup(key).record.is_none(), "{key:?} is gone");
        }
        for (key, want, tid) in [(&b"b"[..], &[&b"p"[..], b"grown-long-value"], 6), (b"e", &[b"p", b"c"], 2)] {
            let r = tree.lookup(key).record.expect("kept");
            // SAFETY: no other thread; the table owns the record.
            let (r, mut value) = (unsafe { r.as_ref() }, Vec::new());
            r.copy_value(&mut value);
            assert_eq!(value, schema().encode(want).expect("row"), "{key:?}");
            assert!(r.is_versioned(), "{key:?} got a vector, in the slot of a versioned record");
            assert!(r.prev().is_null(), "{key:?}'s version vector was taken back");
            assert_eq!(Tid::of_word(r.tid.load()), Tid::new(tid, 1));
        }
    }
}

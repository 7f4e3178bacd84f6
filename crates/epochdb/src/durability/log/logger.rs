//! Loggers and the persistent epoch (SiloR §3).
//!
//! One logger thread per log directory owns `data.log` there and serves a
//! share of the workers. It polls (workers never wake it): full buffers
//! are written as they arrive; at each epoch change it also takes every
//! worker's partly filled buffer, writes, `fdatasync`s, and publishes its
//! durable epoch `d_l`: everything its workers committed in epochs `<= d_l`
//! is on disk. Logger 0 then computes `pepoch = min(d_l)`, writes and syncs
//! the pepoch file, and only then publishes it; a transaction's results may
//! be released once its epoch `<= pepoch`. Buffers go back to their worker
//! right after the write, before the sync. Every 100 epochs (by default)
//! `data.log` is renamed `old_data.<e>`, `e` its largest epoch.
//!
//! A database with one logger skips the pepoch file's sync on the way to
//! a release: the flush writes a seal marker for `d_l` (= pepoch) with its
//! last block, so the one `fdatasync` of `data.log` makes both durable
//! (recovery reads the marker back: `logger::sealed_epoch`). A release
//! then costs one sync instead of two, which is most of a lone client's
//! wait. The pepoch file is still written when `data.log` is rotated (the
//! markers leave with it) and when the logger stops.
//!
//! A failed write or sync puts the database in a failed state for good:
//! pepoch stops, waiters get the error, and so does every later call. An
//! fsync is never retried (after a failed fsync the kernel may have
//! dropped the dirty pages, so a retry could falsely succeed).

use crate::durability::frame::{self, BlockWriter, Damage};
use crate::durability::fsio::{DataFile, Io};
use crate::durability::log::{lock, Buf, LogSlot};
use crate::epoch::Epochs;
use crate::error::{Error, Result};
use crate::lease::Lease;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub const LOG_MAGIC: &[u8; 8] = b"EPOCHLOG";
pub const PEPOCH_MAGIC: &[u8; 8] = b"EPOCHPEP";
pub const CURRENT_LOG: &str = "data.log";
/// Where a fresh `data.log` is built before it is renamed into place.
pub const NEW_LOG: &str = "data.log.new";
pub const OLD_LOG_PREFIX: &str = "old_data.";
pub const PEPOCH_FILE: &str = "pepoch";
/// A fresh log file starts with this much space reserved (fallocate).
const FIRST_STEP: u64 = 1 << 20;
/// Later space comes in steps of this much, written with zeros ahead of
/// the logger by a helper thread ([`ZeroAhead`]).
const ZERO_STEP: u64 = 4 << 20;
/// Zeros are written ahead only while syncs write this much or less on
/// average (since the last step): then the journal commit a sync into
/// fallocated space adds is a large part of each sync, and the zeros add
/// little I/O. A logger flushing large batches (an epoch of a busy
/// workload) is better off without doubling its bytes written (TPC-C with
/// logging lost about 3% to it).
const SMALL_SYNC: u64 = 64 << 10;
/// How often an idle logger looks for work. Each poll wakes a thread on a
/// CPU a worker is using; at 0.5 ms the 2,000 wake-ups a second cost TPC-C
/// about 4% of its throughput on 2 cores. A worker fills a 512 KB buffer
/// in about 4 ms there and has more in its pool, so 2 ms keeps it fed; it
/// adds at most 2 ms to the latency to durability.
const POLL: Duration = Duration::from_micros(2000);
/// How long a logger parks while a client waits on an epoch (see
/// [`Durable::hasten`]): short, since the wait is for it.
const HURRIED_POLL: Duration = Duration::from_micros(20);
/// Hastened epochs use up epoch numbers faster than the advancer (up to one
/// per fsync instead of one per 40 ms), and a TID has 32 bits of epoch. Past
/// half of them, hastening stops and durability waits for the ticks again:
/// slower replies, never a wrapped epoch.
const HASTEN_BELOW: u64 = crate::tid::MAX_EPOCH / 2;

/// Where a primary's log blocks go besides its own files: replication's
/// shipper. Called on logger threads, so it must never block.
pub trait Tap: Send + Sync {
    /// Logger `stream` wrote a sealed block holding epochs `lo..=hi`.
    fn block(&self, stream: usize, lo: u64, hi: u64, block: &[u8]);
    /// Logger `stream` has written every block of epochs `<= epoch`; its
    /// own sync follows.
    fn seal(&self, stream: usize, epoch: u64);
    /// The manifest changed (it is stored): its encoding.
    fn manifest(&self, encoded: &[u8]);
}

/// Durability state shared by the database, its workers and its loggers.
pub struct Durable {
    /// The released epoch: commits of epochs `<= pepoch` may be reported.
    /// The local pepoch, held back by replication's limit.
    pepoch: AtomicU64,
    /// `min(d_l)`: every epoch `<= local` is on this machine's disk.
    local: AtomicU64,
    /// Replication's bound on release (`u64::MAX` without one).
    limit: AtomicU64,
    /// Serializes the read-compare-store of `pepoch`.
    releasing: Mutex<()>,
    /// The shipper of a primary.
    tap: std::sync::OnceLock<Arc<dyn Tap>>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    waiters: (Mutex<()>, Condvar),
    /// Bytes of log blocks written since open.
    pub log_bytes: AtomicU64,
    /// The newest epoch of a transaction written to a log since open (0:
    /// none): a checkpoint whose `e_l` is above it would hold nothing new.
    pub logged_epoch: AtomicU64,
    loggers: Vec<LoggerShare>,
    next: AtomicUsize,
    stop: AtomicBool,
    /// The largest epoch a client asked to be durable soon.
    wanted: AtomicU64,
    /// The logger threads, to wake them for [`Durable::hasten`].
    threads: std::sync::OnceLock<Vec<std::thread::Thread>>,
    /// Called with the new pepoch each time it grows (and on failure).
    listeners: Mutex<Vec<Listener>>,
    /// A control plane's lease: nothing is released while it has lapsed.
    lease: std::sync::OnceLock<Arc<Lease>>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable").field("pepoch", &self.pepoch()).field("local", &self.local_pepoch()).finish()
    }
}

/// A function told of each new pepoch.
pub struct Listener(Box<dyn Fn(u64) + Send + Sync>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

/// What a logger shares with the rest: its workers' slots and `d_l`.
#[derive(Debug, Default)]
struct LoggerShare {
    slots: Mutex<Vec<Arc<LogSlot>>>,
    durable: AtomicU64,
}

impl Durable {
    pub fn new(loggers: usize, pepoch: u64) -> Durable {
        Durable {
            pepoch: AtomicU64::new(pepoch),
            local: AtomicU64::new(pepoch),
            limit: AtomicU64::new(u64::MAX),
            releasing: Mutex::new(()),
            tap: std::sync::OnceLock::new(),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            waiters: (Mutex::new(()), Condvar::new()),
            log_bytes: AtomicU64::new(0),
            logged_epoch: AtomicU64::new(0),
            loggers: (0..loggers)
                .map(|_| LoggerShare { durable: AtomicU64::new(pepoch), ..Default::default() })
                .collect(),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            wanted: AtomicU64::new(0),
            threads: std::sync::OnceLock::new(),
            listeners: Mutex::new(Vec::new()),
            lease: std::sync::OnceLock::new(),
        }
    }

    /// A replication primary reopened under `sync` or `very-safe`: what it
    /// recovered is durable here, but its backups may not have
    /// acknowledged it, so none of it counts as released until the safety
    /// mode releases it again (before the crash, release waited for them
    /// too). Only at open, before anyone reads the released epoch.
    pub fn unrelease(&self) {
        self.pepoch.store(0, Ordering::Release);
    }

    /// Releases only while `lease` holds (fencing: a deposed primary tells
    /// no client of a commit); each renewal releases what waited on it.
    pub fn attach_lease(self: &Arc<Self>, lease: Arc<Lease>) {
        let me = Arc::downgrade(self);
        lease.on_renew(Box::new(move || {
            if let Some(d) = me.upgrade() {
                d.release();
            }
        }));
        let _ = self.lease.set(lease);
    }

    /// The released epoch: every transaction in an epoch `<= pepoch` is
    /// durable here and, under synchronous replication, on the backups.
    pub fn pepoch(&self) -> u64 {
        self.pepoch.load(Ordering::Acquire)
    }

    /// The persistent epoch of this machine's log alone.
    pub fn local_pepoch(&self) -> u64 {
        self.local.load(Ordering::Acquire)
    }

    /// Bounds release by `limit` (replication: the in-sync backups'
    /// acknowledged epoch), and releases what the new bound allows. The
    /// released epoch never goes back.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Release);
        self.release();
    }

    /// Replication's bound on release.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Makes `tap` receive every block and seal from now on (once).
    pub fn set_tap(&self, tap: Arc<dyn Tap>) {
        let _ = self.tap.set(tap);
    }

    pub fn tap(&self) -> Option<&Arc<dyn Tap>> {
        self.tap.get()
    }

    /// Hands a worker's log slot to a logger, round-robin.
    pub fn register(&self, slot: Arc<LogSlot>) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.loggers.len();
        lock(&self.loggers[i].slots).push(slot);
    }

    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The failure, as an error, if the database has failed.
    pub fn check(&self) -> Result<()> {
        if !self.is_failed() {
            return Ok(());
        }
        Err(Error::Durability(lock(&self.failure).clone().unwrap_or_default()))
    }

    /// Enters the failed state (the first failure is the one reported).
    pub fn fail(&self, why: String) {
        ::log::error!("durability failed, the database now refuses commits: {why}");
        lock(&self.failure).get_or_insert(why);
        self.failed.store(true, Ordering::Release);
        self.notify();
    }

    fn notify(&self) {
        {
            let _g = lock(&self.waiters.0);
            self.waiters.1.notify_all();
        }
        let pepoch = self.pepoch();
        for f in lock(&self.listeners).iter() {
            (f.0)(pepoch);
        }
    }

    /// Adds a function to call with each new pepoch (and when durability
    /// fails), from a logger thread: it should be quick (wake a thread).
    pub fn listen(&self, f: Box<dyn Fn(u64) + Send + Sync>) {
        lock(&self.listeners).push(Listener(f));
    }

    /// Blocks until `epoch <= pepoch`, or the database fails.
    pub fn wait(&self, epoch: u64) -> Result<()> {
        let mut g = lock(&self.waiters.0);
        loop {
            self.check()?;
            if self.pepoch() >= epoch {
                return Ok(());
            }
            if self.stop.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            // The timeout covers a publish that raced with our check.
            g = self.waiters.1.wait_timeout(g, Duration::from_millis(5)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Asks for `epoch` to become durable now rather than after the next
    /// epoch tick and logger poll: logger 0 advances `E` past it and every
    /// logger flushes at once. A server replying only once writes are
    /// durable calls this, so a lone client's write costs about one fsync,
    /// not one epoch. Wakes the loggers only when the wanted epoch grows.
    pub fn hasten(&self, epoch: u64) {
        // Loads first: every durable reply calls this, and a read-modify-write
        // would take the cache line from the other event loops each time.
        if self.pepoch() >= epoch
            || self.wanted.load(Ordering::Acquire) >= epoch
            || self.wanted.fetch_max(epoch, Ordering::AcqRel) >= epoch
        {
            return;
        }
        for t in self.threads.get().into_iter().flatten() {
            t.unpark();
        }
    }

    /// Whether a client waits on an epoch that is not durable yet.
    /// (Local: making epochs durable here is the loggers' part; the rest
    /// of a replicated release waits on the backups, not on them.)
    fn hurried(&self) -> bool {
        self.wanted.load(Ordering::Acquire) > self.local_pepoch()
    }

    /// Records a new local pepoch and releases what the limit allows.
    fn publish(&self, local: u64) {
        self.local.store(local, Ordering::Release);
        self.release();
    }

    /// A promoted standby: every epoch `<= pepoch` is on this disk (its
    /// receiver persisted them); its loggers go on from there.
    pub fn promote(&self, pepoch: u64) {
        for l in &self.loggers {
            l.durable.fetch_max(pepoch, Ordering::AcqRel);
        }
        self.local.fetch_max(pepoch, Ordering::AcqRel);
        self.release();
    }

    /// The released epoch after any release under way has stored it
    /// (`release` checks the lease and stores under `releasing`).
    pub fn settled_pepoch(&self) -> u64 {
        let _g = lock(&self.releasing);
        self.pepoch()
    }

    fn release(&self) {
        let g = lock(&self.releasing);
        // Checked under the lock, right before the store: the lease's
        // margin covers the nanoseconds between, and `settled_pepoch`
        // waits for a release that checked before a revocation.
        let lease_valid = self.lease.get().is_none_or(|l| l.is_valid());
        let limit = self.limit.load(Ordering::Acquire);
        let released = crate::lease::release(self.pepoch(), self.local_pepoch(), limit, lease_valid);
        if released <= self.pepoch() {
            return;
        }
        self.pepoch.store(released, Ordering::Release);
        drop(g);
        self.notify();
    }
}

/// The loggers of one database: stopped (after a final flush) on drop.
pub struct Loggers {
    durable: Arc<Durable>,
    epochs: Arc<Epochs>,
    threads: Vec<JoinHandle<()>>,
}

impl Loggers {
    /// Starts one logger per directory in `dirs`; logger 0 also keeps the
    /// pepoch file.
    pub fn start(
        dirs: &[PathBuf],
        pepoch_file: PepochFile,
        durable: Arc<Durable>,
        epochs: Arc<Epochs>,
        io: Io,
        rotate: Rotation,
    ) -> Result<Loggers> {
        // Every log file first: a failure then leaves no thread behind.
        let logs = dirs.iter().map(|d| LogFile::create(d, &io)).collect::<Result<Vec<_>>>()?;
        let mut pepoch_file = Some(pepoch_file);
        let mut loggers = Loggers { durable: durable.clone(), epochs: epochs.clone(), threads: Vec::new() };
        for ((id, dir), log) in dirs.iter().enumerate().zip(logs) {
            let logger = Logger {
                id,
                durable: durable.clone(),
                epochs: epochs.clone(),
                io: io.clone(),
                log,
                rotate,
                pepoch_file: pepoch_file.take(),
                marks: dirs.len() == 1,
                marked: 0,
                logged: 0,
            };
            // On an error, dropping `loggers` stops the threads started.
            let t = std::thread::Builder::new()
                .name(format!("epochdb-logger-{id}"))
                .spawn(move || logger.run())
                .map_err(|source| Error::Io { op: "start the logger thread", path: dir.clone(), source })?;
            loggers.threads.push(t);
        }
        let _ = durable.threads.set(loggers.threads.iter().map(|t| t.thread().clone()).collect());
        Ok(loggers)
    }
}

impl Drop for Loggers {
    fn drop(&mut self) {
        // One more epoch, so the final flush covers the last commits (the
        // advancer has stopped; give active transactions a moment to end).
        for _ in 0..1000 {
            if self.epochs.tick() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.durable.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.durable.notify();
    }
}

/// When `data.log` is renamed `old_data.<e>`: once it spans `epochs`
/// epochs and is at least `age` old.
#[derive(Debug, Clone, Copy)]
pub struct Rotation {
    pub epochs: u64,
    pub age: Duration,
}

impl Rotation {
    /// Every `log.rotate_epochs` epochs, and (for hastened epochs) no more
    /// often than half the time that many ticks take.
    pub fn of(options: &crate::Options) -> Rotation {
        let epochs = options.log.rotate_epochs;
        Rotation { epochs, age: options.epoch_interval.saturating_mul(epochs.min(u32::MAX as u64) as u32) / 2 }
    }
}

struct Logger {
    id: usize,
    durable: Arc<Durable>,
    epochs: Arc<Epochs>,
    io: Io,
    log: LogFile,
    rotate: Rotation,
    pepoch_file: Option<PepochFile>,
    /// The only logger: seal markers in `data.log` record pepoch.
    marks: bool,
    /// The epoch of the last seal marker written.
    marked: u64,
    /// The highest epoch of any block written. A marker is due while it
    /// is above `marked`: a worker's block may hold epochs at or above the
    /// flush's bound, and the flush that publishes its epoch must record
    /// it, though that flush may write no block of its own. With no block
    /// above `marked`, recovering to `marked` loses nothing (and an idle
    /// log stays as it is).
    logged: u64,
}

impl Logger {
    fn run(mut self) {
        let mut last = 0;
        let r = loop {
            let stopping = self.durable.stop.load(Ordering::Acquire);
            let hurried = self.durable.hurried();
            if hurried && self.id == 0 {
                let wanted = self.durable.wanted.load(Ordering::Acquire);
                if self.epochs.current() <= wanted && wanted < HASTEN_BELOW {
                    self.epochs.tick();
                }
            }
            let e = self.epochs.current();
            // A hastened epoch this logger has not covered yet (a worker was
            // still in it at the last flush): flush again without a tick.
            let behind =
                hurried && self.share().durable.load(Ordering::Acquire) < self.durable.wanted.load(Ordering::Acquire);
            let step = if e != last || stopping || behind { self.flush(e) } else { self.write_full().map(|n| n > 0) };
            last = e;
            match step {
                Err(err) => break Err(err),
                Ok(_) if stopping => break self.record_pepoch(),
                Ok(true) => {}
                // Another logger may have flushed since: pepoch may grow.
                Ok(false) if hurried => self.publish_pepoch().map_or_else(
                    |err| self.durable.fail(format!("log writer: {err}")),
                    |()| std::thread::park_timeout(HURRIED_POLL),
                ),
                // Parked, not slept: `hasten` wakes it.
                Ok(false) => std::thread::park_timeout(POLL),
            }
        };
        if let Err(e) = r {
            self.durable.fail(format!("log writer: {e}"));
        }
    }

    fn share(&self) -> &LoggerShare {
        &self.durable.loggers[self.id]
    }

    /// Writes the buffers workers have queued; returns how many.
    fn write_full(&mut self) -> Result<usize> {
        let slots = lock(&self.share().slots).clone();
        let mut n = 0;
        for s in &slots {
            let full: Vec<Buf> = std::mem::take(&mut *lock(&s.full));
            for b in full {
                self.write(s, b, None)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Writes a worker's buffer as a block (followed, in the same write,
    /// by `marker`, a seal marker).
    fn write(&mut self, slot: &LogSlot, mut buf: Buf, marker: Option<(u64, &[u8])>) -> Result<()> {
        let (lo, hi) = (buf.lo, buf.hi);
        let bytes = buf.seal();
        self.log.append(&self.io, bytes, lo, hi, marker)?;
        self.logged = self.logged.max(hi);
        if let Some(t) = self.durable.tap.get() {
            t.block(self.id, lo, hi, bytes);
        }
        self.durable.log_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.durable.logged_epoch.fetch_max(hi, Ordering::Relaxed);
        lock(&slot.free).push(buf.recycle());
        Ok(())
    }

    /// At an epoch change: take every buffer, write, sync, publish `d_l`.
    ///
    /// Why `d_l = bound - 1` is safe: `e0 = E` is read first, then the slot
    /// list, then each worker's `e_w`, then its buffer is taken. A record
    /// appended after the take was committed by a transaction that was
    /// active when `e_w` was read (epoch `>= e_w`) or began later (epoch
    /// `>= e0`, since `E` only grows). Every other record was in the
    /// buffers written here.
    fn flush(&mut self, e0: u64) -> Result<bool> {
        let slots = lock(&self.share().slots).clone();
        let mut bound = e0;
        let mut taken = Vec::new();
        for s in &slots {
            if let Some(e_w) = s.epoch.active_epoch() {
                bound = bound.min(e_w);
            }
            let mut cur = s.current.lock();
            if !cur.is_empty() {
                let fresh = lock(&s.free).pop().unwrap_or_default();
                taken.push((s, std::mem::replace(&mut *cur, Buf { block: fresh, lo: u64::MAX, hi: 0 })));
            }
        }
        self.write_full()?;
        let wrote = !taken.is_empty();
        let sealed = bound - 1;
        let logged = taken.iter().map(|(_, b)| b.hi).fold(self.logged, u64::max);
        let due = self.marks && logged > self.marked && sealed > self.marked;
        let marker = due.then(|| frame::seal_marker(sealed));
        let marker = marker.as_deref().map(|m| (sealed, m));
        let last = taken.len().checked_sub(1);
        for (i, (s, b)) in taken.into_iter().enumerate() {
            self.write(s, b, marker.filter(|_| Some(i) == last))?;
        }
        if let (Some((_, m)), None) = (marker, last) {
            self.log.append(&self.io, m, sealed, sealed, None)?;
        }
        // Shipped before the local sync, so the two overlap (Query Fresh §3.1).
        if let Some(t) = self.durable.tap.get() {
            t.seal(self.id, bound - 1);
        }
        self.log.sync(&self.io)?;
        if marker.is_some() {
            self.marked = sealed;
            self.durable.log_bytes.fetch_add(frame::BLOCK_HEADER_LEN as u64, Ordering::Relaxed);
        }
        self.share().durable.store(bound - 1, Ordering::Release);
        lock(&self.share().slots)
            .retain(|s| !(s.gone.load(Ordering::Acquire) && s.current.lock().is_empty() && lock(&s.full).is_empty()));
        self.publish_pepoch()?;
        if self.log.rotation_due(self.rotate) {
            // The markers that record pepoch leave with the old file.
            self.record_pepoch()?;
            self.log.rotate(&self.io)?;
        }
        Ok(wrote)
    }

    /// Logger 0 only: publishes `pepoch = min(d_l)` if it grew, once it is
    /// durable: in the pepoch file, or (the only logger) already in the
    /// seal marker the flush synced.
    fn publish_pepoch(&mut self) -> Result<()> {
        if let Some(p) = &mut self.pepoch_file {
            let pepoch = self.durable.loggers.iter().map(|l| l.durable.load(Ordering::Acquire)).min().unwrap_or(0);
            if pepoch > self.durable.local_pepoch() {
                if !self.marks {
                    p.write(pepoch)?;
                }
                self.durable.publish(pepoch);
            }
        }
        Ok(())
    }

    /// The only logger: writes the published pepoch into the pepoch file
    /// (before `data.log`, whose markers record it, is rotated away, and
    /// when the logger stops).
    fn record_pepoch(&mut self) -> Result<()> {
        match &mut self.pepoch_file {
            Some(p) if self.marks => p.write(self.durable.local_pepoch()),
            _ => Ok(()),
        }
    }
}

/// A logger's current file, `data.log`, written with direct I/O where the
/// file system allows it (see [`BlockWriter`]): the page-cache copy was
/// most of a logger's CPU time, and on 2 cores that time is the workers'.
/// A replication backup writes the blocks it receives through one too.
pub(crate) struct LogFile {
    out: BlockWriter,
    /// The end of the space reserved or zero-filled for the file.
    allocated: u64,
    /// Zeros being written past `allocated`.
    ahead: Option<ZeroAhead>,
    /// Where the current step began, and the syncs since: their average
    /// size decides whether to write zeros ahead.
    step_from: u64,
    syncs: u64,
    /// The epoch range of the blocks in the file (`lo > hi` when empty).
    lo: u64,
    hi: u64,
    created: std::time::Instant,
    /// The file opened again for buffered reads (see `reader`).
    reader: Option<Arc<File>>,
}

impl LogFile {
    /// Makes a fresh `data.log`. It is built as `data.log.new` and renamed
    /// into place once its header is synced, so a crash never leaves a
    /// `data.log` without a header (recovery would call that corruption).
    /// If that fails (a full disk), `data.log.new` is removed again.
    pub fn create(dir: &Path, io: &Io) -> Result<LogFile> {
        io.create_dir_all(dir)?;
        let path = dir.join(NEW_LOG);
        let built = BlockWriter::create(&path, LOG_MAGIC, io, FIRST_STEP).and_then(|out| {
            io.sync(&out.file)?;
            Ok(out)
        });
        let out = match built {
            Ok(out) => out,
            Err(e) => {
                let _ = io.remove_file(&path); // best effort: the error that matters is `e`
                return Err(e);
            }
        };
        io.rename(&path, &dir.join(CURRENT_LOG))?;
        io.sync_dir(dir)?;
        let created = std::time::Instant::now();
        Ok(LogFile {
            out,
            allocated: FIRST_STEP,
            ahead: None,
            step_from: 0,
            syncs: 0,
            lo: u64::MAX,
            hi: 0,
            created,
            reader: None,
        })
    }

    fn dir(&self) -> &Path {
        self.out.file.path.parent().unwrap_or(Path::new("."))
    }

    /// Where the next block goes (blocks are written at once, each at a
    /// 4 KiB boundary).
    pub fn offset(&self) -> u64 {
        self.out.written()
    }

    /// This file for reading blocks back (a backup's replay of blocks it
    /// had no memory for). Opened again through `/proc/self/fd`, without
    /// the writer's direct I/O, whose reads would need aligned buffers;
    /// the descriptor follows the file through a rotation's rename, and
    /// keeps it readable until the last block read is replayed.
    pub fn reader(&mut self) -> std::io::Result<Arc<File>> {
        if let Some(r) = &self.reader {
            return Ok(r.clone());
        }
        use std::os::fd::AsRawFd;
        let r = Arc::new(File::open(format!("/proc/self/fd/{}", self.out.file.file.as_raw_fd()))?);
        self.reader = Some(r.clone());
        Ok(r)
    }

    /// Appends `block` of epochs `lo..=hi`, and `marker` (a seal marker and
    /// its epoch) after it in the same write.
    pub fn append(&mut self, io: &Io, block: &[u8], lo: u64, hi: u64, marker: Option<(u64, &[u8])>) -> Result<()> {
        let len = frame::padded((block.len() + marker.map_or(0, |(_, m)| m.len())) as u64);
        let end = self.out.written() + len;
        if end > self.allocated {
            if let Some(z) = self.ahead.take() {
                self.allocated = z.finish()?;
            }
            if end > self.allocated {
                let grow = (end - self.allocated).div_ceil(ZERO_STEP) * ZERO_STEP;
                io.preallocate(&self.out.file, self.allocated, grow)?;
                self.allocated += grow;
            }
            (self.step_from, self.syncs) = (self.out.written(), 0);
        }
        match marker {
            Some((_, m)) => self.out.append_all(io, &[block, m])?,
            None => self.out.append(io, block)?,
        }
        self.lo = self.lo.min(lo);
        self.hi = self.hi.max(hi).max(marker.map_or(0, |(e, _)| e));
        // Half a step left (half the first step, so that a small log never
        // starts one): the next step's zeros are written meanwhile.
        let written = self.out.written();
        if self.ahead.is_none()
            && self.allocated - written < self.allocated.min(ZERO_STEP) / 2
            && written - self.step_from <= self.syncs * SMALL_SYNC
        {
            self.ahead = ZeroAhead::start(io, &self.out.file, self.allocated, ZERO_STEP);
        }
        Ok(())
    }

    pub fn sync(&mut self, io: &Io) -> Result<()> {
        self.syncs += 1;
        io.sync(&self.out.file)
    }

    /// Whether to rotate: the file spans `rotate.epochs` epochs and is old
    /// enough (hastened epochs pass faster than ticks: rotate no more often
    /// than `rotate.epochs` ticks would).
    pub fn rotation_due(&self, rotate: Rotation) -> bool {
        self.hi >= self.lo.saturating_add(rotate.epochs) && self.created.elapsed() >= rotate.age
    }

    /// `data.log` becomes `old_data.<hi>` (trimmed of its preallocated
    /// tail), and a fresh `data.log` takes its place.
    pub fn rotate(&mut self, io: &Io) -> Result<()> {
        let dir = self.seal(io)?;
        *self = LogFile::create(&dir, io)?;
        Ok(())
    }

    /// Trims, syncs and renames `data.log` to `old_data.<hi>`, so that a
    /// logger may start a `data.log` of its own there (an empty file is
    /// left for it to replace). Returns the directory.
    pub fn seal(&mut self, io: &Io) -> Result<PathBuf> {
        let dir = self.dir().to_path_buf();
        if let Some(z) = self.ahead.take() {
            z.finish()?;
        }
        if self.hi == 0 {
            return Ok(dir);
        }
        io.truncate(&self.out.file, self.out.written())?;
        io.sync(&self.out.file)?;
        let old = crate::durability::recovery::old_log_path(&dir, self.hi);
        // Durable with the next `data.log`'s own rename (same directory).
        io.rename(&dir.join(CURRENT_LOG), &old)?;
        ::log::debug!("log rotated: {} (epochs {}..={})", old.display(), self.lo, self.hi);
        Ok(dir)
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        if let Some(z) = self.ahead.take() {
            let _ = z.finish(); // the file is closed; what matters is that no thread writes to it
        }
    }
}

/// Zeros written past a log file's reserved space by a helper thread, one
/// step ahead of the logger. On ext4 a sync after a write into fallocated
/// space also commits the extent's conversion to the journal; a write over
/// blocks already written needs none (`scripts/figures/sync-cost.py`: about 118 µs
/// against 74 µs for an 8 KiB write and `fdatasync`), and a lone durable
/// client waits for that sync. The helper writes past the logger's
/// reserved end only, and the logger takes the space once the helper is
/// done, so the two never write the same bytes. Zeros read back as the
/// end of the written part, as fallocated space does.
struct ZeroAhead {
    end: u64,
    job: JoinHandle<Result<()>>,
}

impl ZeroAhead {
    /// Starts writing `len` bytes of zeros at `from`, then syncs them.
    /// `None` if no thread can start (the logger then reserves with
    /// fallocate, as before).
    fn start(io: &Io, file: &DataFile, from: u64, len: u64) -> Option<ZeroAhead> {
        const CHUNK: usize = 1 << 20;
        let file = file.try_clone().ok()?;
        let io = io.clone();
        let zero = move || {
            // Aligned for direct I/O: a `Vec` promises no alignment.
            let align = frame::PAD_ALIGN as usize;
            let buf = vec![0u8; CHUNK + align];
            let zeros = &buf[buf.as_ptr().align_offset(align)..][..CHUNK];
            let mut at = from;
            while at < from + len {
                let n = (from + len - at).min(CHUNK as u64);
                io.write_at(&file, &zeros[..n as usize], at)?;
                at += n;
            }
            io.sync(&file)
        };
        let job = std::thread::Builder::new().name("epochdb-zero".into()).spawn(zero).ok()?;
        Some(ZeroAhead { end: from + len, job })
    }

    /// Waits for the zeros; the new end of the reserved space.
    fn finish(self) -> Result<u64> {
        match self.job.join() {
            Ok(r) => r.map(|()| self.end),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// The pepoch a data directory records: its pepoch file's, or, if higher,
/// the one the seal markers of its only logger's `data.log` prove durable
/// ([`sealed_epoch`]). `None` without a pepoch file.
pub fn recorded_pepoch(data_dir: &Path, log_dirs: &[PathBuf]) -> std::result::Result<Option<u64>, Damage> {
    Ok(PepochFile::read(data_dir)?.map(|p| p.max(sealed_epoch(log_dirs))))
}

/// The epoch the seal markers in the `data.log` of a single log directory
/// prove durable; 0 if none does (or there are several directories).
///
/// A flush writes its blocks and its marker, then syncs; the next flush
/// starts after that sync. So the last marker `m_n` in the file proves
/// that the flush of the marker before it, `m_(n-1)`, completed its sync,
/// and `m_(n-1)` is durable. `m_n` itself was perhaps never synced: a crash
/// may have kept it and lost blocks written before it in the same flush.
/// It counts only if every block between `m_(n-1)` and `m_n` is intact.
/// (Damage before `m_(n-1)` is corruption of synced data, which replay
/// reports as such: every block there is at or below the pepoch returned.)
pub fn sealed_epoch(log_dirs: &[PathBuf]) -> u64 {
    let [dir] = log_dirs else { return 0 };
    let Ok(mut r) = frame::BlockReader::open(&dir.join(CURRENT_LOG), LOG_MAGIC) else { return 0 };
    // Headers only (the file may be a gigabyte, which replay reads anyway):
    // where the last two markers are, and whether a header between them
    // was bad. `(offset, epoch)`.
    let mut before: Option<(u64, u64)> = None;
    let mut last: Option<(u64, u64)> = None;
    let (mut bad_since_last, mut bad_before_last) = (false, false);
    loop {
        match r.next_header() {
            Ok(Some((at, _, hi, 0))) => {
                (before, last, bad_before_last, bad_since_last) = (last, Some((at, hi)), bad_since_last, false);
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => {
                bad_since_last = true;
                if !r.skip_to_next_valid() {
                    break;
                }
            }
        }
    }
    let Some((last_at, last_epoch)) = last else { return 0 };
    let before_epoch = before.map_or(0, |b| b.1);
    if bad_before_last {
        return before_epoch;
    }
    // The blocks between the two markers must be whole, payloads too.
    r.seek(before.map_or(frame::FILE_HEADER_LEN as u64, |b| b.0));
    let mut payload = Vec::new();
    loop {
        match r.next_block(&mut payload) {
            Ok(Some((at, _, _))) if at == last_at => return last_epoch,
            Ok(Some((at, _, _))) if at < last_at => {}
            Ok(Some(_)) => return before_epoch, // not the blocks pass one saw
            Ok(None) | Err(_) => return before_epoch,
        }
    }
}

/// The pepoch file: the header, then two slots in separate 512-byte
/// sectors written alternately, so a torn write leaves the other intact.
pub struct PepochFile {
    file: DataFile,
    io: Io,
    next_slot: u64,
}

const PEPOCH_SLOT: u64 = 512;

impl PepochFile {
    /// Opens (creating if needed) the pepoch file and records `pepoch`. A
    /// valid header is left as it is, and the slots are written one at a
    /// time, each synced, so a write torn here leaves the other slot valid.
    pub fn open(dir: &Path, io: Io, pepoch: u64) -> Result<PepochFile> {
        let path = dir.join(PEPOCH_FILE);
        let file = io.open_write(&path)?;
        if frame::check_file_header(&path, &file.file, PEPOCH_MAGIC).is_err() {
            io.write_at(&file, &frame::file_header(PEPOCH_MAGIC), 0)?;
        }
        let mut p = PepochFile { file, io, next_slot: 0 };
        p.write(pepoch)?;
        p.write(pepoch)?;
        p.io.sync_dir(dir)?;
        Ok(p)
    }

    pub fn write(&mut self, pepoch: u64) -> Result<()> {
        let mut slot = [0u8; 16];
        slot[..8].copy_from_slice(&pepoch.to_le_bytes());
        let crc = crate::crc32c::checksum(&slot[..8]);
        slot[8..12].copy_from_slice(&crc.to_le_bytes());
        self.io.write_at(&self.file, &slot, PEPOCH_SLOT * (1 + self.next_slot))?;
        self.io.sync(&self.file)?;
        self.next_slot ^= 1;
        Ok(())
    }

    /// The recorded pepoch: the larger of the two valid slots; `None` if
    /// there is no pepoch file.
    pub fn read(dir: &Path) -> std::result::Result<Option<u64>, Damage> {
        let path = dir.join(PEPOCH_FILE);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Damage::of_file(&path, format!("cannot open: {e}"))),
        };
        frame::check_file_header(&path, &file, PEPOCH_MAGIC)?;
        let mut best = None;
        for i in 0..2 {
            let mut slot = [0u8; 16];
            if file.read_exact_at(&mut slot, PEPOCH_SLOT * (1 + i)).is_err() {
                continue;
            }
            let crc = u32::from_le_bytes([slot[8], slot[9], slot[10], slot[11]]);
            let p = u64::from_le_bytes(slot[..8].try_into().unwrap_or([0; 8]));
            if crate::crc32c::checksum(&slot[..8]) == crc && p <= crate::tid::MAX_EPOCH {
                best = best.max(Some(p));
            }
        }
        best.map(Some).ok_or_else(|| Damage {
            offset: PEPOCH_SLOT,
            ..Damage::of_file(&path, "neither pepoch slot is valid".into())
        })
    }
}

//! What transactions run on: the state a database shares with its
//! workers ([`Shared`]), and each worker's own ([`Context`]).
//!
//! Workers collect garbage between transactions (Silo §4.8), in
//! [`Context::leave`], so no helper thread frees memory.

use super::check_key;
use super::delta::Deltas;
use super::sets::Sets;
use super::view::{check_fresh, Freshness, ReadView};
use crate::catalog::{Table, TableId, Tables};
use crate::durability::datadir::manifest::Manifest;
use crate::durability::log::{self, LogSlot};
use crate::durability::Store;
use crate::epoch::{EpochSlot, Epochs};
use crate::error::{AbortReason, Error, Result};
use crate::gc::{self, Cleanup, Garbage};
use crate::index::Retired;
use crate::options::Options;
use crate::record::Record;
use crate::sync::{AtomicU64, Ordering};
use crate::tid::{self, Tid, TidGenerator, TidSource};
use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct Padded<T>(pub T);

/// State shared by the database handle and its workers.
pub(crate) struct Shared {
    pub options: Options,
    /// This database's tag, carried by its table handles.
    pub tag: u32,
    pub epochs: Arc<Epochs>,
    pub tables: Arc<Tables>,
    /// The shared TID counter of `TidSource::GlobalCounter`.
    pub global_tid: Padded<AtomicU64>,
    pub orphans: Mutex<Garbage>,
    pub has_orphans: AtomicBool,
    pub closed: AtomicBool,
    /// The disk side (empty with durability off).
    pub store: Arc<Store>,
    /// On a hot standby: its read view (snapshots read at it, never
    /// beyond what the primary released) while `standby` holds.
    pub view: Option<Arc<ReadView>>,
    /// A hot standby not yet promoted: read-only, snapshots at `view`.
    pub standby: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let orphans = self.orphans.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the last reference is gone: no worker or reader remains.
        // Records in the lists are not in any index (the indexes free theirs
        // when the tables drop right after this).
        unsafe { orphans.free_all() };
    }
}

impl Shared {
    pub fn new(
        options: Options,
        tag: u32,
        epochs: Arc<Epochs>,
        tables: Arc<Tables>,
        store: Arc<Store>,
        view: Option<Arc<ReadView>>,
    ) -> Shared {
        Shared {
            options,
            tag,
            epochs,
            tables,
            global_tid: Padded::default(),
            orphans: Mutex::new(Garbage::default()),
            has_orphans: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            store,
            standby: AtomicBool::new(view.is_some()),
            view,
        }
    }

    /// Whether writes are refused: opened read-only, or a standby.
    #[inline]
    pub fn read_only(&self) -> bool {
        self.options.read_only || self.standby.load(Ordering::Acquire)
    }

    /// A standby's read view, until it is promoted.
    #[inline]
    pub fn standby_view(&self) -> Option<&ReadView> {
        self.view.as_deref().filter(|_| self.standby.load(Ordering::Acquire))
    }

    /// Adds the tables of `manifest` this database lacks (a standby
    /// following its primary's catalog).
    pub fn extend_catalog(&self, manifest: &Manifest) {
        let mut tables = self.tables.write();
        let have = tables.len();
        let new = crate::durability::recovery::tables_of(manifest, self.tag).into_iter().skip(have);
        tables.extend(new.map(Arc::new));
    }
}

/// Counters kept by each worker.
#[derive(Debug, Default, Clone)]
pub struct WorkerStats {
    /// Transactions committed.
    pub commits: u64,
    /// Aborts, by [`AbortReason::index`].
    pub aborts: [u64; 4],
    /// Snapshot transactions run.
    pub snapshots: u64,
    /// Objects freed by this worker's garbage collection.
    pub freed: u64,
}

impl WorkerStats {
    /// Aborts for one reason.
    pub fn aborts_for(&self, reason: AbortReason) -> u64 {
        self.aborts[reason.index()]
    }

    /// Aborts for every reason.
    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// A worker's transaction context: what its transactions read and write
/// through (its epoch slot, TID generator, log buffers, catalog copy,
/// read/write/node sets and garbage lists), on the state its database
/// shares. The database handle's `Worker` wraps one; a standby's replay
/// threads use their own.
pub(crate) struct Context {
    pub(crate) shared: Arc<Shared>,
    /// This worker's log buffers; `None` with durability off.
    pub(crate) log: Option<Arc<LogSlot>>,
    slot: Arc<EpochSlot>,
    /// This worker's copy of the catalog; refreshed when it meets a newer id.
    pub(crate) tables: Vec<Arc<Table>>,
    pub(crate) tidgen: TidGenerator,
    pub(crate) global_tid: bool,
    pub(crate) garbage: Garbage,
    pub(crate) retired: Vec<Retired>,
    cleanups: Vec<Cleanup>,
    pub(crate) sets: Sets,
    /// Buffer for batched lookups (`Worker::prefetch`), reused.
    lookups: Vec<crate::index::Lookup>,
    /// Where reads copy values to; returned slices borrow it.
    pub(crate) scratch: Vec<u8>,
    /// The changed columns of this commit's updates, with delta logging.
    pub(crate) delta: Deltas,
    pub(crate) stats: WorkerStats,
    rng: u64,
    /// A read at a standby's read view is under way (`ReadView::readers`).
    view_reader: bool,
    /// Counted in the snapshot transactions under way (see
    /// `Epochs::snapshot_begins`), until `leave`.
    snapshot_reader: bool,
}

// SAFETY: the raw pointers a worker holds (sets, garbage) are owned by it or
// protected by its epoch slot, which it clears between transactions; no
// transaction can be in flight while the context moves, because a `Txn`
// borrows it mutably.
unsafe impl Send for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("stats", &self.stats).finish()
    }
}

impl Context {
    /// A new context on `shared`: an epoch slot, and log buffers with
    /// durability on.
    pub fn new(shared: Arc<Shared>) -> Context {
        let slot = shared.epochs.register();
        let global = shared.options.tid_source == TidSource::GlobalCounter;
        let log = shared.store.durable.as_ref().map(|d| {
            let o = &shared.options;
            let log = Arc::new(LogSlot::new(slot.clone(), o.log.buffer_size, o.log.buffers));
            d.register(log.clone());
            log
        });
        Context {
            log,
            slot,
            tables: Vec::new(),
            tidgen: TidGenerator::default(),
            global_tid: global,
            garbage: Garbage::default(),
            retired: Vec::new(),
            cleanups: Vec::new(),
            sets: Sets::default(),
            lookups: Vec::new(),
            scratch: Vec::new(),
            delta: Default::default(),
            stats: WorkerStats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (Arc::as_ptr(&shared) as u64),
            view_reader: false,
            snapshot_reader: false,
            shared,
        }
    }

    /// Enters an epoch for reads at a snapshot as fresh as `freshness`
    /// asks; returns the snapshot epoch.
    pub fn enter_fresh(&mut self, freshness: Freshness) -> Result<u64> {
        let shared = self.shared.clone();
        let view = shared.standby_view();
        check_fresh(&shared.epochs, view, &shared.options, freshness, &shared.closed)?;
        // Committers keep the versions snapshots read from epoch `kf` on:
        // the first snapshot after a quiet stretch waits for `SE` to get
        // there (the advancer moves it; no epoch is held meanwhile).
        let kf = shared.epochs.snapshot_begins();
        self.snapshot_reader = true; // until `leave`
        while shared.epochs.snapshot() < kf {
            if shared.closed.load(Ordering::Acquire) {
                self.end_reads();
                return Err(Error::Closed);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if let Some(v) = view {
            v.reader_begins();
            self.view_reader = true; // until `leave`
        }
        // Read at exactly the `se_w` that reclamation sees.
        let (_, se) = match self.enter() {
            Ok(entered) => entered,
            Err(e) => {
                self.end_reads();
                return Err(e);
            }
        };
        if view.is_some_and(|v| v.view() == 0) {
            self.leave();
            return Err(Error::Stale {
                view: 0,
                wanted: "a read view (the standby has not heard its primary yet)".into(),
            });
        }
        Ok(se)
    }

    /// Puts `grown` (a new record for the same key, made because the new
    /// value did not fit) in place of the locked latest record `rec` (TID
    /// word `old`) in the index of table `ti`, and retires `rec`: as the
    /// previous version snapshots may read (`keep_old`, freed once no
    /// snapshot reads below `snap_epoch`; `grown` must link it), else once
    /// no reader can hold it.
    pub(crate) fn swap_in_grown(
        &mut self,
        ti: usize,
        rec: NonNull<Record>,
        old: u64,
        grown: NonNull<Record>,
        keep_old: bool,
        snap_epoch: u64,
    ) {
        // SAFETY: live and locked by the caller.
        let r = unsafe { rec.as_ref() };
        let replaced = self.tables[ti].tree.replace(r.key(), rec, grown);
        debug_assert!(replaced, "a locked latest record is in its index");
        r.tid.unlock_to(old & !tid::LATEST_BIT);
        let stamp = self.shared.epochs.current();
        if keep_old {
            self.garbage.retire_version(snap_epoch, stamp, rec);
        } else {
            self.garbage.retire(stamp, Retired::Record(rec));
        }
    }

    /// Copies the locked record's current version (TID word `old`) into a
    /// new immutable record linked as its previous version, for snapshots;
    /// freed once no snapshot reads below `snap_epoch` (Silo §4.9). `rec`
    /// is versioned (callers ask [`Record::fits`] first).
    pub(crate) fn keep_old_version(&mut self, rec: &Record, old: u64, snap_epoch: u64) {
        rec.copy_value(&mut self.scratch);
        let copy = Record::alloc_linked(&[], &self.scratch, old & !(tid::LOCK_BIT | tid::LATEST_BIT), rec.prev());
        rec.set_prev(copy.as_ptr());
        self.garbage.retire_version(snap_epoch, 0, copy);
    }

    /// Waits a random time that grows with `attempt`, capped.
    pub fn backoff(&mut self, attempt: u32) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let cap = 1u64 << attempt.min(10);
        for _ in 0..(self.rng % cap) {
            std::hint::spin_loop();
        }
        if attempt > 10 {
            std::thread::yield_now();
        }
    }

    /// The position of `id` in this worker's catalog copy: an error for a
    /// handle of another database, or one its catalog lacks.
    #[inline]
    pub(crate) fn table_index(&mut self, id: TableId) -> Result<usize> {
        if id.db() != self.shared.tag {
            return Err(Error::ForeignTable(id));
        }
        // Not `ok_or`: that builds the error every time and drops it, and
        // `Error`'s drop glue was 1% of a TPC-C worker's time (`perf`).
        match self.table_slot(id.index()) {
            Some(i) => Ok(i),
            None => Err(Error::UnknownTable(id)),
        }
    }

    /// [`Txn::prefetch`](crate::Txn::prefetch) for a transaction of this
    /// worker, which is inside its epoch.
    pub(crate) fn prefetch(&mut self, keys: &[(TableId, &[u8])]) -> Result<()> {
        for &(table, _) in keys {
            self.table_index(table)?;
        }
        // Every table is now in `tables`, at its index.
        let tables = &self.tables;
        let targets = keys.iter().map(|&(t, k)| (&tables[t.index() as usize].tree, k));
        crate::index::Tree::lookup_batch(targets, &mut self.lookups);
        let found = (keys.iter().zip(&self.lookups))
            .filter_map(|(&(t, k), l)| Some(super::sets::Ahead::new(t.index(), k, l.record?)));
        self.sets.ahead.extend(found);
        Ok(())
    }

    /// The position of the table numbered `index`, refreshing the
    /// catalog copy when it is newer than this worker's.
    #[inline]
    pub(crate) fn table_slot(&mut self, index: u32) -> Option<usize> {
        let i = index as usize;
        if i >= self.tables.len() {
            let tables = self.shared.tables.read();
            self.tables = tables.clone();
        }
        (i < self.tables.len()).then_some(i)
    }

    /// Ends the counts of a snapshot read (and of a read at a standby's
    /// read view), if one is under way.
    fn end_reads(&mut self) {
        // Checked before they are written: `leave` ends every commit.
        if self.view_reader {
            self.view_reader = false;
            if let Some(v) = self.shared.view.as_deref() {
                v.reader_ends();
            }
        }
        if self.snapshot_reader {
            self.snapshot_reader = false;
            self.shared.epochs.snapshot_ends();
        }
    }

    /// Marks this worker active; returns `(e_w, se_w)`.
    #[inline]
    pub(crate) fn enter(&mut self) -> Result<(u64, u64)> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(d) = &self.shared.store.durable {
            d.check()?;
        }
        Ok(self.shared.epochs.enter(&self.slot))
    }

    /// Ends a transaction: retires what it unlinked, collects garbage while
    /// still protected by its epoch, then goes quiescent.
    pub(crate) fn leave(&mut self) {
        self.end_reads();
        self.sets.clear_ahead(); // found within the epoch being left
        let snapshot_bound = self.shared.epochs.snapshot_bound();
        self.garbage.due_cleanups(snapshot_bound, self.shared.epochs.current(), &mut self.cleanups);
        let mut cleanups = std::mem::take(&mut self.cleanups);
        for c in cleanups.drain(..) {
            // Adopted orphans may name tables this worker has not seen yet.
            let Some(t) = self.table_slot(c.table) else {
                continue;
            };
            if let Some(rec) = gc::unhook(&self.tables[t].tree, &c, &mut self.retired) {
                self.retired.push(Retired::Record(rec));
            }
        }
        self.cleanups = cleanups;
        let epochs = &self.shared.epochs;
        if !self.retired.is_empty() {
            let e = epochs.current();
            self.garbage.retire_all(e, &mut self.retired);
        }
        if self.shared.has_orphans.load(Ordering::Relaxed) {
            if let Ok(mut o) = self.shared.orphans.try_lock() {
                o.merge_into(&mut self.garbage);
                self.shared.has_orphans.store(false, Ordering::Relaxed);
            }
        }
        // SAFETY: the bounds come from the epoch advancer.
        self.stats.freed += unsafe { self.garbage.collect(epochs.tree_bound(), snapshot_bound) } as u64;
        epochs.exit(&self.slot);
    }

    /// [`crate::Worker::kv_get`].
    pub fn kv_get(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        check_key(key)?;
        let t = self.table_index(table)?;
        self.enter()?;
        let present = match self.tables[t].tree.lookup(key).record {
            // SAFETY: found in the index within our epoch: live.
            Some(rec) => !tid::is_absent(unsafe { rec.as_ref() }.stable_read(out)),
            None => false,
        };
        self.leave();
        Ok(present)
    }

    /// [`crate::Worker::kv_put`] where the key's record takes the value in
    /// place; false where a transaction must write it.
    pub fn kv_put_in_place(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<bool> {
        check_key(key)?;
        if self.shared.read_only() {
            return Err(Error::ReadOnly);
        }
        let t = self.table_index(table)?;
        if value.len() > self.shared.options.max_value_len {
            return Err(Error::ValueTooLarge { len: value.len(), max: self.shared.options.max_value_len });
        }
        self.enter()?;
        let done = match self.tables[t].tree.lookup(key).record {
            Some(rec) => {
                // SAFETY: found in the index within our epoch: live.
                let r = unsafe { rec.as_ref() };
                let word = r.tid.lock();
                if tid::is_latest(word) && !tid::is_absent(word) && value.len() <= r.capacity() {
                    // As in Phase 1 of a commit: read E after taking the lock,
                    // so the new TID's epoch is at least the old one's.
                    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                    let epoch = self.shared.epochs.current();
                    let new = self.tidgen.generate(Tid::of_word(word), epoch, None);
                    r.write_value(value);
                    r.tid.unlock_to(new.raw() | tid::LATEST_BIT);
                    self.log_write(new, epoch, table.index(), key, Some(value));
                    true
                } else {
                    r.tid.unlock_to(word);
                    false
                }
            }
            None => false,
        };
        self.leave();
        Ok(done)
    }

    /// Appends a one-write transaction to the log (for `kv_put`).
    fn log_write(&self, tid: Tid, epoch: u64, table: u32, key: &[u8], value: Option<&[u8]>) {
        let (Some(slot), Some(d)) = (&self.log, &self.shared.store.durable) else { return };
        slot.append(
            epoch,
            || d.is_failed(),
            |buf| {
                log::encode_txn(buf, tid, 1);
                log::encode_entry(buf, table, key, value);
            },
        );
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.shared.epochs.unregister(&self.slot);
        if let Some(l) = &self.log {
            l.gone.store(true, Ordering::Release);
        }
        if !self.garbage.is_empty() {
            let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
            self.garbage.merge_into(&mut o);
            self.shared.has_orphans.store(true, Ordering::Relaxed);
        }
    }
}

//! Hot standby (Query Fresh §3.2, §3.4.3): a backup replays what it has
//! persisted into memory and serves snapshot reads at its read view.
//!
//! The receiver hands each block to the [`Replay`] queue after appending
//! it, and tells the queue the epochs it persisted and the epochs the
//! primary released. The replayer thread applies every
//! entry of epochs `(view, target]` with `target = min(persisted,
//! released)` (replay pipelining: nothing is replayed before it is on the
//! backup's disk, nothing is shown before the primary released it), then
//! publishes `view = target`: snapshots read epochs `< view + 1`.
//!
//! Readers never see a half-replayed epoch: a version the replayer
//! overwrites that a reader at the current view may need (its epoch is
//! `<= view`) is kept as the record's previous version, exactly as a
//! committer keeps one for Silo's snapshots, and freed through the same
//! epoch-based lists once the snapshot bound passes the new version's
//! epoch. A whole row (value or delete) is installed unless the key holds
//! a newer TID, so the largest TID wins in any order and rows install as
//! they are decoded; deltas (Gawain) are sorted and merged after them, so
//! each merges into the row as of the entry before it (`apply_part`).
//!
//! A batch of at least 64 KiB is replayed by `Options::recovery.threads`
//! threads, each taking the keys that hash to it (`apply`), so every
//! entry of a key goes through the one thread that orders its deltas.
//!
//! Replay arrays (§3.4.1, keeping only where the newest version lives
//! until a reader needs it) were not built: the replay threads install
//! values directly, which keeps the in-memory state an ordinary epochdb
//! table that Silo's snapshot reads already handle.

use super::rules;
use crate::catalog::Schema;
use crate::durability::datadir::manifest::Manifest;
use crate::durability::frame;
use crate::durability::log::{self, lock, Entry, Write};
use crate::durability::recovery::columns;
use crate::durability::replay;
use crate::error::{Error, Result};
use crate::gc::Cleanup;
use crate::index::{Lookup, Tree};
use crate::record::Record;
use crate::tid::{self, Tid, ABSENT_BIT, LATEST_BIT};
use crate::txn::{Context, ReadView, Shared};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A hot standby's state ([`crate::Backup::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandbyStatus {
    /// Every epoch `<=` this is on the backup's disk (and acknowledged).
    pub persisted: u64,
    /// The largest epoch the primary said it released.
    pub released: u64,
    /// The read view: snapshots show every epoch `<=` this and nothing
    /// newer. 0 until the first release covering what was recovered.
    pub view: u64,
    /// Bytes received and not yet replayed, held in memory.
    pub pending_bytes: u64,
    /// Bytes received and not yet replayed that replay will read back
    /// from the backup's log (past `BackupOptions::replay_memory`).
    pub log_pending_bytes: u64,
    /// The most bytes ever held in memory for replay.
    pub peak_pending_bytes: u64,
    /// Bytes of blocks replay has read back from the log so far.
    pub log_replayed_bytes: u64,
    /// How long ago the primary had released everything the view shows
    /// (`None` before the first view).
    pub staleness: Option<Duration>,
    /// Whether it is connected to its primary.
    pub connected: bool,
    /// Why replay stopped, if it did.
    pub replay_error: Option<String>,
}

/// Unreplayed received bytes a backup holds in memory by default
/// (`BackupOptions::replay_memory`). Past it, while replay has work it
/// may do, the receiver waits (and a primary whose queue to it fills drops
/// it); while replay may not start (a catch-up before its first seal),
/// blocks are read back from the backup's own log when replayed.
pub const DEFAULT_REPLAY_MEMORY: usize = 256 << 20;

/// The queue between the receiver and the replayer.
pub(crate) struct Replay {
    q: Mutex<Queue>,
    cv: Condvar,
    error: Mutex<Option<String>>,
    memory: usize,
    /// Buffers of replayed blocks, for the receiver to fill again.
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Spare block buffers kept, each at most [`SPARE_BYTES`]: a few epochs'
/// worth of a primary's usual blocks (its log buffer, 512 KiB by
/// default, seals one when full), and at most 32 MiB.
const SPARE_BUFFERS: usize = 32;
const SPARE_BYTES: usize = 1 << 20;

impl Default for Replay {
    fn default() -> Replay {
        Replay::new(DEFAULT_REPLAY_MEMORY)
    }
}

#[derive(Default)]
struct Queue {
    blocks: VecDeque<Arc<Block>>,
    /// Bytes of queued blocks held in memory, of those left in the log,
    /// and the most ever held.
    bytes: usize,
    spilled: usize,
    peak: usize,
    /// Bytes of blocks handed to replay from the log, in all.
    read_back: u64,
    persisted: u64,
    released: u64,
    /// Releases heard, oldest first, with when: the view's freshness.
    heard: VecDeque<(u64, Instant)>,
    /// The last target handed to the replayer.
    taken: u64,
    /// Promotion: replay every persisted epoch, released or not.
    promoting: bool,
    stop: bool,
}

/// A received block of epochs `lo..=hi`, `len` bytes.
struct Block {
    lo: u64,
    hi: u64,
    len: usize,
    data: Data,
}

/// Where a queued block's bytes are.
enum Data {
    Memory(Vec<u8>),
    /// In the backup's log file, at this offset (it was appended there
    /// before it was queued).
    Log {
        file: Arc<std::fs::File>,
        at: u64,
    },
}

impl Block {
    /// Reads a block back from the log, and checks it again (the disk
    /// may have damaged it since).
    fn read_back(&self) -> Result<Vec<u8>> {
        let Data::Log { file, at } = &self.data else { return Err(bad("a block in memory read back")) };
        let mut b = vec![0; self.len];
        std::os::unix::fs::FileExt::read_exact_at(&**file, &mut b, *at)
            .map_err(|e| bad(format!("read back the block at {at} of the log: {e}")))?;
        match frame::check_block(&b) {
            Ok(epochs) if epochs == (self.lo, self.hi) => Ok(b),
            Ok(epochs) => {
                Err(bad(format!("the block at {at} of the log holds {epochs:?}, not {}..={}", self.lo, self.hi)))
            }
            Err(e) => Err(bad(format!("the block at {at} of the log: {e}"))),
        }
    }
}

impl Replay {
    /// A replay queue that holds at most `memory` unreplayed bytes.
    pub fn new(memory: usize) -> Replay {
        Replay { q: Mutex::default(), cv: Condvar::new(), error: Mutex::default(), memory, spare: Mutex::default() }
    }

    /// An empty buffer for the next received block: one a replayed block
    /// left, whose pages are already faulted in, if there is one.
    pub fn spare(&self) -> Vec<u8> {
        lock(&self.spare).pop().unwrap_or_default()
    }

    /// Keeps the bytes of replayed blocks, up to [`SPARE_BUFFERS`].
    fn recycle(&self, batch: Vec<Arc<Block>>) {
        let mut spare = lock(&self.spare);
        for b in batch {
            // Still queued (it reaches past the target) if shared.
            if let Ok(Block { data: Data::Memory(mut bytes), .. }) = Arc::try_unwrap(b) {
                if spare.len() < SPARE_BUFFERS && bytes.capacity() <= SPARE_BYTES {
                    bytes.clear();
                    spare.push(bytes);
                }
            }
        }
    }

    /// A block the receiver appended (not yet persisted), at `log` (its
    /// file and offset) if it can be read back from there. Waits while
    /// replay is too far behind with work it can do, unless `stop` is
    /// set. While replay may not start (a backup catching up from files
    /// receives everything before its first seal), a block past the
    /// memory bound is left in the log and read back when replayed.
    pub fn push(&self, lo: u64, hi: u64, bytes: Vec<u8>, log: Option<(Arc<std::fs::File>, u64)>, stop: &AtomicBool) {
        let mut q = lock(&self.q);
        while q.bytes > self.memory && q.persisted.min(q.released) > q.taken && !q.stop && !stop.load(Ordering::Acquire)
        {
            q = self.cv.wait_timeout(q, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
        if q.stop {
            return; // replay stopped (or failed): keep nothing in memory
        }
        let len = bytes.len();
        let data = match log {
            Some((file, at)) if q.bytes + len > self.memory => {
                q.spilled += len;
                Data::Log { file, at }
            }
            _ => {
                q.bytes += len;
                q.peak = q.peak.max(q.bytes);
                Data::Memory(bytes)
            }
        };
        q.blocks.push_back(Arc::new(Block { lo, hi, len, data }));
    }

    /// Every epoch `<= epoch` is on the backup's disk.
    pub fn persisted(&self, epoch: u64) {
        let mut q = lock(&self.q);
        q.persisted = q.persisted.max(epoch);
        self.cv.notify_all();
    }

    /// Drops every block not yet replayed (the backup forgets a session
    /// whose blocks it never persisted).
    pub fn clear(&self) {
        let mut q = lock(&self.q);
        q.blocks.clear();
        (q.bytes, q.spilled) = (0, 0);
        self.cv.notify_all();
    }

    /// The primary released every epoch `<= epoch`.
    pub fn released(&self, epoch: u64) {
        let mut q = lock(&self.q);
        if epoch > q.released {
            q.released = epoch;
            q.heard.push_back((epoch, Instant::now()));
            self.cv.notify_all();
        }
    }

    /// Unreplayed bytes held in memory and left in the log, the most
    /// ever held in memory, and the bytes replay took from the log.
    pub fn pending(&self) -> (u64, u64, u64, u64) {
        let q = lock(&self.q);
        (q.bytes as u64, q.spilled as u64, q.peak as u64, q.read_back)
    }

    pub fn released_epoch(&self) -> u64 {
        lock(&self.q).released
    }

    pub fn error(&self) -> Option<String> {
        lock(&self.error).clone()
    }

    /// For promotion: from now on replay every persisted epoch, whether
    /// the (gone) primary released it or not; `pepoch` is the disk's (the
    /// receiver, stopped, may not have said so).
    pub fn through_persisted(&self, pepoch: u64) {
        let mut q = lock(&self.q);
        q.persisted = q.persisted.max(pepoch);
        q.promoting = true;
        self.cv.notify_all();
    }

    fn stop(&self) {
        lock(&self.q).stop = true;
        self.cv.notify_all();
    }

    /// Waits for a target above the view (and at least `applied`, what
    /// memory already holds), then takes the blocks that overlap it: the
    /// target, the blocks, and when the newest release it covers was heard.
    fn next(&self, view: u64, applied: u64) -> Option<(u64, Vec<Arc<Block>>, Option<Instant>)> {
        let mut q = lock(&self.q);
        loop {
            if q.stop {
                return None;
            }
            let target = rules::replay_target(q.persisted, q.released, q.promoting);
            if target > view && target >= applied {
                q.taken = target;
                let batch: Vec<_> = q.blocks.iter().filter(|b| b.lo <= target).cloned().collect();
                let (mut freed, mut read) = (0, 0);
                q.blocks.retain(|b| {
                    let keep = b.hi > target;
                    match &b.data {
                        _ if keep => {}
                        Data::Memory(_) => freed += b.len,
                        Data::Log { .. } => read += b.len,
                    }
                    keep
                });
                q.bytes -= freed;
                q.spilled -= read;
                q.read_back += read as u64;
                let mut at = None;
                while q.heard.front().is_some_and(|(e, _)| *e <= target) {
                    at = q.heard.pop_front().map(|(_, t)| t);
                }
                self.cv.notify_all(); // room for the receiver
                return Some((target, batch, at));
            }
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The replayer thread; stopped on drop.
pub(crate) struct Replayer {
    replay: Arc<Replay>,
    thread: Option<JoinHandle<()>>,
}

impl Replayer {
    /// Replays into `db` (a standby's) from `replay`; memory already holds
    /// every epoch `<= applied` (recovery).
    pub fn start(db: Arc<Shared>, view: Arc<ReadView>, replay: Arc<Replay>, applied: u64) -> Result<Replayer> {
        let r = replay.clone();
        let thread = std::thread::Builder::new()
            .name("epochdb-replay".into())
            .spawn(move || {
                if let Err(e) = run(&db, &view, &r, applied) {
                    ::log::error!("standby replay stopped: {e}");
                    *lock(&r.error) = Some(e.to_string());
                    r.stop(); // the receiver goes on persisting
                }
            })
            .map_err(|e| Error::Replication(format!("start the replay thread: {e}")))?;
        Ok(Replayer { replay, thread: Some(thread) })
    }
}

impl Drop for Replayer {
    fn drop(&mut self) {
        self.replay.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(db: &Arc<Shared>, view: &ReadView, replay: &Replay, mut applied: u64) -> Result<()> {
    let threads = db.options.recovery.thread_count().max(1);
    let mut parts: Vec<Part> = (0..threads).map(|_| Part::new(db)).collect();
    while let Some((target, batch, heard_at)) = replay.next(view.view(), applied) {
        if target > applied {
            let keep = view.begin_batch(batch.iter().map(|b| b.len).sum());
            // On failure replay stops, and reads see the view as it was.
            apply(db, &mut parts, &batch, applied, target, keep).inspect_err(|_| view.end_batch())?;
            applied = target;
        }
        replay.recycle(batch);
        // The versions of epochs <= target are all in place: show them.
        db.epochs.drive_snapshot(target + 1);
        view.publish(target, heard_at);
    }
    Ok(())
}

/// One replay thread's transaction context and buffers.
struct Part {
    w: Context,
    s: Scratch,
}

impl Part {
    fn new(db: &Arc<Shared>) -> Part {
        Part { w: Context::new(db.clone()), s: Scratch::default() }
    }
}

/// Buffers reused across entries.
#[derive(Default)]
struct Scratch {
    old: Vec<u8>,
    row: Vec<u8>,
    /// A delta's column versions.
    versions: Vec<u64>,
    merge: columns::MergeScratch,
    tables: Vec<Arc<crate::catalog::Table>>,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::Replication(format!("replay: {what}"))
}

/// Below this many payload bytes a batch is replayed by one thread: a
/// thread start (tens of microseconds) would cost more than it saves.
const PARALLEL_MIN_BYTES: usize = 64 << 10;

/// Applies every entry of epochs `(from, to]` in `batch`, with one thread
/// per part. Entries are split by key, so every key's entries go through
/// one thread, which orders its deltas (`apply_part`). Keys are
/// independent (a snapshot sees nothing of `(from, to]` until the view
/// moves), so the threads need no order between them.
/// Without `keep`, no read can need the versions the batch overwrites.
fn apply(db: &Shared, parts: &mut [Part], batch: &[Arc<Block>], from: u64, to: u64, keep: bool) -> Result<()> {
    let manifest = lock(&db.store.manifest).clone();
    let bytes: usize = batch.iter().map(|b| b.len).sum();
    let n = if bytes < PARALLEL_MIN_BYTES { 1 } else { parts.len() };
    // Idle parts still collect the garbage and deletes due from their
    // last batch.
    for p in &mut parts[n..] {
        p.w.enter()?;
        p.w.leave();
    }
    let Some((first, helpers)) = parts[..n].split_first_mut() else { return Ok(()) };
    let manifest = &manifest;
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (helpers.iter_mut().enumerate())
            .map(|(i, p)| {
                let thread = std::thread::Builder::new().name("epochdb-replay".into());
                thread.spawn_scoped(scope, move || apply_part(manifest, p, batch, (from, to, keep), (i + 1, n)))
            })
            .collect();
        let mut result = apply_part(manifest, first, batch, (from, to, keep), (0, n));
        for h in helpers {
            let r = match h {
                Ok(h) => h.join().unwrap_or_else(|_| Err(bad("a replay thread panicked"))),
                Err(e) => Err(bad(format!("start a replay thread: {e}"))),
            };
            result = result.and(r);
        }
        result
    })
}

/// Which of `parts` replays `key`'s entries.
fn part_of(table: u32, key: &[u8], parts: usize) -> usize {
    crate::crc32c::extend(table, key) as usize % parts
}

/// Applies the entries of epochs `(from, to]` in `batch` whose keys fall
/// to part `part.0` of `part.1`. A whole row (a value, or a delete) wins
/// by its TID whatever the order, so those are installed as they are
/// decoded; deltas are kept, sorted by TID and merged after them: a delta
/// older than the key's newest whole row is overwritten by it, and the
/// newer ones merge onto it in order (Gawain needs the row as of the entry
/// before each delta). No entry vector for the common, value-logged case.
fn apply_part(
    manifest: &Manifest,
    p: &mut Part,
    batch: &[Arc<Block>],
    (from, to, keep): (u64, u64, bool),
    (part, parts): (usize, usize),
) -> Result<()> {
    // Readers may be at any view `<= from`.
    let keep_below = keep.then_some(from);
    let Part { w, s } = p;
    // Blocks read back from the log whose deltas this part needs: read
    // again, all at once, after the whole rows (a block is dropped as soon
    // as it is decoded otherwise, so replay holds a batch's deltas, not
    // the batch). Declared before `deltas`, which borrows from them.
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut deltas: Vec<Entry<'_>> = Vec::new();
    let mut again: Vec<&Block> = Vec::new();
    let mut result = Ok(());
    let scope = (manifest, from, to, part, parts);
    w.enter()?;
    for b in batch {
        let installed = match &b.data {
            Data::Memory(bytes) => install_rows(w, bytes, scope, keep_below, s, |e| deltas.push(e)),
            Data::Log { .. } => b.read_back().and_then(|bytes| {
                let mut has_delta = false;
                let r = install_rows(w, &bytes, scope, keep_below, s, |_| has_delta = true);
                if has_delta {
                    again.push(b);
                }
                r
            }),
        };
        result = result.and(installed);
        if result.is_err() {
            break;
        }
    }
    // Every error goes through `result`, so that the worker leaves below.
    if result.is_ok() {
        match again.iter().map(|b| b.read_back()).collect() {
            Ok(h) => held = h,
            Err(e) => result = Err(e),
        }
    }
    for bytes in &held {
        result = result.and_then(|()| {
            entries(bytes, scope, |e| {
                if let Write::Delta(_) = e.write {
                    deltas.push(e);
                }
            })
        });
    }
    if result.is_ok() {
        deltas.sort_unstable_by_key(|e| e.tid);
        result = deltas.iter().try_for_each(|e| install_entry(w, manifest, e, None, keep_below, s)).map_err(bad);
    }
    w.leave();
    result
}

/// Calls `f` with each entry of `block` that part `part` of `parts`
/// replays (see [`mine`]).
fn entries<'a>(block: &'a [u8], scope: Scope<'_>, mut f: impl FnMut(Entry<'a>)) -> Result<()> {
    log::decode(payload_of(block), |e| {
        if mine(&e, scope) {
            f(e);
        }
    })
    .map_err(bad)
}

/// Which entries a part replays: `(manifest, from, to, part, parts)`.
type Scope<'m> = (&'m Manifest, u64, u64, usize, usize);

/// Whether part `part` of `parts` replays `e`: of epochs `(from, to]`,
/// not void, and of a key of that part.
fn mine(e: &Entry<'_>, (manifest, from, to, part, parts): Scope<'_>) -> bool {
    let epoch = e.tid.epoch();
    epoch > from && epoch <= to && !manifest.is_void(epoch) && (parts == 1 || part_of(e.table, e.key, parts) == part)
}

/// A block's payload. Checked by the receiver (and again if read back):
/// a header, then the payload.
fn payload_of(block: &[u8]) -> &[u8] {
    block.get(frame::BLOCK_HEADER_LEN..).unwrap_or_default()
}

/// Installs the whole rows of `block` that this part replays through the
/// replay path recovery uses (`durability/replay.rs`), and hands each of
/// its deltas to `on_delta`.
fn install_rows<'a>(
    w: &mut Context,
    block: &'a [u8],
    scope: Scope<'_>,
    keep_below: Option<u64>,
    s: &mut Scratch,
    on_delta: impl FnMut(Entry<'a>),
) -> Result<()> {
    let mut rows = Rows { w, scope, keep_below, s, on_delta };
    replay::replay_block(payload_of(block), &mut rows).map_err(bad)
}

/// A standby part's side of the shared replay path: its entries' whole
/// rows, installed keeping what readers may need; deltas are set aside.
struct Rows<'w, 'm, F> {
    w: &'w mut Context,
    scope: Scope<'m>,
    keep_below: Option<u64>,
    s: &'w mut Scratch,
    on_delta: F,
}

impl<'a, F: FnMut(Entry<'a>)> replay::Install<'a> for Rows<'_, '_, F> {
    fn wanted(&mut self, e: &Entry<'a>) -> Result<bool, String> {
        if !mine(e, self.scope) {
            return Ok(false);
        }
        if let Write::Delta(_) = e.write {
            (self.on_delta)(*e);
            return Ok(false);
        }
        Ok(true)
    }

    fn look_up(&mut self, window: &[Entry<'a>], found: &mut Vec<Lookup>) -> Result<(), String> {
        if let Some(last) = window.iter().map(|e| e.table).max() {
            self.w.table_slot(last); // the worker's catalog, up to date
        }
        let tables = &self.w.tables;
        if let Some(e) = window.iter().find(|e| e.table as usize >= tables.len()) {
            return Err(format!("an entry of table {}, which the catalog lacks", e.table));
        }
        Tree::lookup_batch(window.iter().map(|e| (&tables[e.table as usize].tree, e.key)), found);
        Ok(())
    }

    fn install(&mut self, e: &Entry<'a>, hint: Lookup) -> Result<(), String> {
        install_entry(self.w, self.scope.0, e, Some(hint), self.keep_below, self.s)
    }
}

/// Installs `e` into its table (see `install`).
fn install_entry(
    w: &mut Context,
    manifest: &Manifest,
    e: &Entry<'_>,
    hint: Option<Lookup>,
    keep_below: Option<u64>,
    s: &mut Scratch,
) -> Result<(), String> {
    let Some(ti) = w.table_slot(e.table) else {
        return Err(format!("an entry of table {}, which the catalog lacks", e.table));
    };
    let schema = manifest.tables.get(e.table as usize).and_then(|t| t.schema.as_ref());
    install(w, ti, schema, e, hint, keep_below, s)
        .map_err(|what| format!("table {}, key {:02x?}: {what}", e.table, e.key))
}

/// Installs one entry unless the key holds a newer one. A version reads
/// may see (of an epoch `<= keep_below`) is kept behind the new one;
/// `None`: no read can.
fn install(
    w: &mut Context,
    ti: usize,
    schema: Option<&Schema>,
    e: &Entry<'_>,
    mut hint: Option<Lookup>,
    keep_below: Option<u64>,
    s: &mut Scratch,
) -> Result<(), String> {
    let (tid, key) = (e.tid, e.key);
    let epoch = tid.epoch();
    // The worker's tables, held apart from it (`w` is borrowed mutably
    // below) without an Arc count per entry.
    if s.tables.len() != w.tables.len() {
        s.tables.clone_from(&w.tables);
    }
    let tree = &s.tables[ti].tree;
    let new_word = tid.raw() | LATEST_BIT | if e.write == Write::Delete { ABSENT_BIT } else { 0 };
    loop {
        // `hint`: this key's lookup, done with its window's.
        let found = hint.take().unwrap_or_else(|| tree.lookup(key));
        let Some(rec) = found.record else {
            let value = match e.write {
                // A tombstone: an older write of the key, installed after
                // this, must not bring the row back.
                Write::Delete => &[][..],
                Write::Delta(_) => return Err("a delta for a row this standby lacks".into()),
                Write::Value(v) => v,
            };
            let fresh = Record::alloc(key, value, 0, new_word);
            // Most misses insert into the leaf the lookup reached.
            let done = tree.insert_after_miss(&found, key, fresh).unwrap_or_else(|| tree.insert_if_absent(key, fresh));
            match done {
                crate::index::Insert::Inserted { .. } => {
                    if e.write == Write::Delete {
                        let c = Cleanup { snap_epoch: epoch, table: e.table, key: key.into(), word: new_word };
                        w.garbage.defer_cleanup(c);
                    }
                    return Ok(());
                }
                // SAFETY: never published.
                crate::index::Insert::Existing(_) => unsafe { Record::free(fresh) },
            }
            continue;
        };
        // SAFETY: found in the index inside our epoch: live.
        let r = unsafe { rec.as_ref() };
        let Some(old) = r.tid.lock_latest() else { continue };
        let old_tid = Tid::of_word(old);
        if old_tid >= tid {
            r.tid.unlock_to(old); // recovered already
            return Ok(());
        }
        // Whether reads may still see the version this entry replaces.
        let kept_for_reads =
            |old_tid: Tid| keep_below.is_some_and(|view| old_tid != Tid::ZERO && old_tid.epoch() <= view);
        let value: &[u8] = match e.write {
            Write::Value(v) => v,
            Write::Delete => &[],
            Write::Delta(d) => {
                let Some(schema) = schema.filter(|_| !tid::is_absent(old)) else {
                    r.tid.unlock_to(old);
                    return Err("a delta for a deleted row, or a table without a schema".into());
                };
                // Every column was last written at `old_tid`, older than `tid`.
                let v = &mut s.versions;
                v.clear();
                v.resize(schema.columns().len() + 1, old_tid.raw());
                v[0] = 0;
                // A delta of fixed columns at fixed places goes straight
                // into the record, unless reads may need the row before it.
                if !kept_for_reads(old_tid) && columns::patch(schema, r, v, tid.raw(), d) {
                    r.tid.unlock_to(new_word);
                    return Ok(());
                }
                r.copy_value(&mut s.old);
                if let Err(what) = columns::merge(schema, &s.old, v, tid.raw(), e.write, &mut s.merge, &mut s.row) {
                    r.tid.unlock_to(old);
                    return Err(what);
                }
                &s.row
            }
        };
        let keep_old = kept_for_reads(old_tid);
        let delete = e.write == Write::Delete; // `value` is empty
        if r.fits(value.len(), keep_old) {
            if keep_old {
                w.keep_old_version(r, old, epoch);
            }
            if !delete {
                r.write_value(value);
            }
            r.tid.unlock_to(new_word);
        } else {
            // A new record takes the key's place: the value does not fit,
            // or the old version must be linked from a record without a
            // slot for the link.
            let prev = if keep_old { rec.as_ptr() } else { r.prev() };
            let grown = Record::alloc_linked(key, value, new_word, prev);
            w.swap_in_grown(ti, rec, old, grown, keep_old, epoch);
        }
        if delete {
            let c = Cleanup { snap_epoch: epoch, table: e.table, key: key.into(), word: new_word };
            w.garbage.defer_cleanup(c);
        }
        return Ok(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{TableId, Tables};
    use crate::durability::{self, datadir::manifest::TableEntry};
    use crate::epoch::Epochs;
    use crate::options::{Durability, Options};
    use crate::txn::{Freshness, SnapshotTxn};

    /// `(epoch, key, value)`; no value: a delete.
    type Write1<'a> = (u64, &'a [u8], Option<&'a [u8]>);

    fn block(lo: u64, hi: u64, writes: &[Write1<'_>]) -> Arc<Block> {
        let mut bytes = vec![0; frame::BLOCK_HEADER_LEN];
        for &(epoch, key, value) in writes {
            log::encode_txn(&mut bytes, Tid::new(epoch, 1), 1);
            log::encode_entry(&mut bytes, 0, key, value);
        }
        Arc::new(Block { lo, hi, len: bytes.len(), data: Data::Memory(bytes) })
    }

    /// Whole rows install in any order: a delete decoded before the older
    /// insert it undoes leaves a tombstone the insert does not pass, and
    /// an older value decoded after a newer one is dropped. With one part
    /// and with two.
    #[test]
    fn whole_rows_replayed_out_of_order_keep_the_newest() {
        for parts in [1, 2] {
            let dir = std::env::temp_dir().join(format!("epochdb-standby-order-{parts}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
            // A data directory with table `t`, opened as a standby.
            let made = durability::open(&options, 1, &|_| {}, false).expect("create");
            let mut m = lock(&made.store.manifest);
            let mut next = m.clone();
            next.tables.push(TableEntry { name: "t".into(), index_of: None, schema: None });
            made.store.store_manifest(&mut m, next).expect("add table t");
            drop(m);
            drop(made);
            let opened = durability::open(&options, 1, &|_| {}, true).expect("open the standby");
            let epochs = Arc::new(Epochs::standby(options.snapshot_epochs, opened.first_epoch));
            let (tables, store) = (Arc::new(Tables::new(opened.tables)), Arc::new(opened.store));
            let view = Arc::new(ReadView::default());
            let db = Arc::new(Shared::new(options, 1, epochs, tables, store, Some(view.clone())));
            let batch = [
                block(2, 3, &[(3, b"gone", None), (3, b"kept", Some(b"new"))]),
                block(1, 2, &[(1, b"gone", Some(b"old")), (2, b"kept", Some(b"older")), (2, b"back", None)]),
                block(3, 3, &[(3, b"back", Some(b"again"))]),
            ];
            let mut p: Vec<Part> = (0..parts).map(|_| Part::new(&db)).collect();
            // Below PARALLEL_MIN_BYTES `apply` uses one part: call each.
            let manifest = lock(&db.store.manifest).clone();
            for (i, part) in p.iter_mut().enumerate() {
                apply_part(&manifest, part, &batch, (0, 3, true), (i, parts)).expect("apply");
            }
            db.epochs.drive_snapshot(4);
            view.publish(3, None);
            let t = TableId::new(1, 0);
            let mut w = Context::new(db.clone());
            let se = w.enter_fresh(Freshness::Any).expect("a read at the view");
            let mut snap = SnapshotTxn::new(&mut w, se);
            assert_eq!(snap.get(t, b"gone").expect("get"), None);
            assert_eq!(snap.get(t, b"kept").expect("get"), Some(&b"new"[..]));
            assert_eq!(snap.get(t, b"back").expect("get"), Some(&b"again"[..]));
            drop(snap);
            drop((w, p, db, opened.locks));
            std::fs::remove_dir_all(&dir).ok();
        }
    }

    /// Replayed blocks give their buffers back for the receiver to fill;
    /// a block still queued (shared) keeps its own.
    #[test]
    fn replayed_blocks_leave_their_buffers_to_the_receiver() {
        let replay = Replay::default();
        assert_eq!(replay.spare().capacity(), 0);
        let (done, queued) = (block(1, 1, &[(1, b"k", Some(b"v"))]), block(1, 2, &[(2, b"k", Some(b"w"))]));
        let still_queued = queued.clone();
        replay.recycle(vec![done, queued]);
        let spare = replay.spare();
        assert!(spare.is_empty() && spare.capacity() >= frame::BLOCK_HEADER_LEN);
        assert_eq!(replay.spare().capacity(), 0, "the shared block's buffer stays with it");
        assert!(matches!(&still_queued.data, Data::Memory(b) if !b.is_empty()));
    }
}

//! Fuzzy parallel checkpoints (SiloR §4).
//!
//! A manager thread starts a checkpoint `checkpoint.interval` after the
//! previous one finished. It reads `e_l = E` and waits for `E` to move on
//! (so every transaction of an epoch `< e_l` has finished); then one checkpointer per
//! checkpoint directory walks its key subrange of every table in key order
//! (the subranges come from the root's separator keys), outside any
//! transaction and without blocking writers: it enters an epoch for a
//! short chunk of records, stable-reads each, and skips absent records and
//! records whose epoch is `>= e_l` (the log has them). Blocks go
//! round-robin into `m` files per table, synced every 32 MB. When all are
//! done, `e_h = E`; once `e_h <= pepoch` the checkpoint is installed by
//! rewriting the manifest, and older checkpoints and log files holding only
//! epochs `< e_l` are deleted. Recovery loads the checkpoint and replays
//! the log from `e_l`: records the checkpoint skipped or saw mid-change are
//! all in the log, and the largest TID wins.
//!
//! With delta logging nothing is skipped for being newer than `e_l` (the
//! log may hold only some of its columns). Checkpoints after the first
//! since open are incremental (Gawain §3): only records changed since the
//! installed checkpoint's `e_l`, tombstones included, plus the deletes
//! committed since (the deletions list). They form a chain in the
//! manifest, loaded whole at recovery, until a full checkpoint compacts it
//! (`incremental_base`). A checkpoint the interval would start is skipped
//! while no transaction has been logged from the installed one's `e_l` on:
//! it would hold nothing new, and the log it would let go is empty of
//! commits. Skipping never costs durability, only log kept longer.
//!
//! A replication backup's hot standby checkpoints too (Query Fresh §3.4.4:
//! "backups take their own checkpoints"), so its log does not grow
//! without end and a restart recovers from the checkpoint. There `E`
//! only paces reclamation; replay drives `SE`, below which every epoch is
//! in memory, and installs nothing above the epoch the backup persisted.
//! So `e_l = SE` (no wait), `e_h` = the persisted epoch at the end (the
//! checkpoint is valid at once), every checkpoint is full (replay keeps
//! no deletions list), and no record is skipped for being newer than
//! `e_l`: the primary's log may hold deltas of it (Gawain), whatever the
//! standby's own options say.

use super::datadir::manifest::{CheckpointFile, CheckpointInfo};
use super::datadir::{self, CHECKPOINT_MAGIC, CHECKPOINT_PREFIX as DIR_PREFIX, DELETES_FILE};
use super::frame::{self, BlockWriter};
use super::fsio::Context;
use super::log::{self, lock};
use super::Store;
use crate::catalog::{Table, Tables};
use crate::epoch::Epochs;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::tid::{self, Tid};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BLOCK: usize = 1 << 20;
const SYNC_EVERY: u64 = 32 << 20;
/// Records read per epoch entry, so the checkpointer never holds back
/// epoch advance or garbage collection for long.
const CHUNK: usize = 256;

/// The longest incremental chain: the next checkpoint is a full one.
const MAX_CHAIN: usize = 16;

/// What the last checkpoint did.
#[derive(Debug, Clone, Default)]
pub struct CheckpointStats {
    /// Checkpoints installed since open.
    pub installed: u64,
    /// Bytes of all checkpoints installed since open.
    pub total_bytes: u64,
    /// How many of them were incremental.
    pub incremental_installed: u64,
    /// It recorded only the rows changed since the previous checkpoint
    /// (Gawain), not every row.
    pub incremental: bool,
    /// Checkpoints recovery would load now: 1 after a full checkpoint, one
    /// more after each incremental one.
    pub chain: usize,
    /// `e_l` of the last installed checkpoint.
    pub epoch: u64,
    /// Bytes in its files.
    pub bytes: u64,
    /// Bytes of records it skipped because their epoch was `>= e_l`: the
    /// checkpoint would have been this much larger without the skip.
    pub skipped_bytes: u64,
    /// Records it holds.
    pub records: u64,
    /// Time from start to installation.
    pub seconds: f64,
    /// When it was installed (`None` before the first since open).
    pub installed_at: Option<std::time::SystemTime>,
    /// A checkpoint is being written now.
    pub in_progress: bool,
}

/// What a checkpoint reads and writes: the store, the epochs it waits on
/// and enters, the tables it walks, and the options it follows.
pub(crate) struct Checkpointing {
    pub store: Arc<Store>,
    pub epochs: Arc<Epochs>,
    pub tables: Arc<Tables>,
    pub options: Options,
    /// On a hot standby, the epoch its disk holds everything through.
    pub standby: Option<Arc<AtomicU64>>,
}

/// The checkpoint manager thread; stopped on drop.
pub struct Checkpointer {
    stop: Arc<AtomicBool>,
    /// Set by [`Checkpointer::request`]: begin the next one without
    /// waiting out the interval.
    now: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(crate) fn start(cx: Checkpointing) -> Result<Checkpointer> {
        remove_uninstalled(&cx, false)?;
        let stop = Arc::new(AtomicBool::new(false));
        let now = Arc::new(AtomicBool::new(false));
        let (s, n) = (stop.clone(), now.clone());
        let thread = std::thread::Builder::new()
            .name("epochdb-checkpoint".into())
            .spawn(move || manage(&cx, &s, &n))
            .map_err(|source| Error::Io { op: "start the checkpoint thread", path: PathBuf::new(), source })?;
        Ok(Checkpointer { stop, now, thread: Some(thread) })
    }

    /// Begins the next checkpoint at once (after the one being written,
    /// if any), instead of at the end of the interval.
    pub(crate) fn request(&self) {
        self.now.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn manage(cx: &Checkpointing, stop: &AtomicBool, now: &AtomicBool) {
    let Some(durable) = cx.store.durable.as_ref() else { return };
    loop {
        let deadline = Instant::now() + cx.options.checkpoint.interval;
        let mut requested = false;
        while Instant::now() < deadline {
            if stop.load(Ordering::Acquire) {
                return;
            }
            if now.swap(false, Ordering::AcqRel) {
                requested = true;
                break;
            }
            std::thread::park_timeout(
                deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)),
            );
        }
        if !requested && !due(cx) {
            continue;
        }
        lock(&cx.store.checkpoint_stats).in_progress = true;
        let taken = checkpoint(cx, stop);
        lock(&cx.store.checkpoint_stats).in_progress = false;
        match taken {
            Ok(Some(stats)) => {
                ::log::info!(
                    "checkpoint installed: e_l {}, {}, {:.1} MB, {} records, {:.2} s{}",
                    stats.epoch,
                    if stats.incremental { "incremental" } else { "full" },
                    stats.bytes as f64 / 1e6,
                    stats.records,
                    stats.seconds,
                    if stats.chain > 1 { format!(", chain of {}", stats.chain) } else { String::new() }
                );
                *lock(&cx.store.checkpoint_stats) = stats;
            }
            Ok(None) => return, // stopped
            Err(e) => {
                durable.fail(format!("checkpoint: {e}"));
                return;
            }
        }
    }
}

/// Whether a checkpoint would hold anything new: on a primary, once a
/// transaction of an epoch the installed one lacks has been logged since
/// open; on a standby, once replay has shown such epochs.
fn due(cx: &Checkpointing) -> bool {
    let installed = lock(&cx.store.manifest).checkpoint.as_ref().map_or(1, |c| c.e_l);
    match (&cx.standby, &cx.store.durable) {
        (Some(_), _) => cx.epochs.snapshot() > installed,
        (None, Some(d)) => d.logged_epoch.load(Ordering::Relaxed) >= installed,
        (None, None) => false,
    }
}

/// Takes and installs one checkpoint; `None` if stopped first.
fn checkpoint(cx: &Checkpointing, stop: &AtomicBool) -> Result<Option<CheckpointStats>> {
    let start = Instant::now();
    let epochs = &cx.epochs;
    let e_l = if cx.standby.is_some() { epochs.snapshot() } else { epochs.current() };
    // Transactions of epoch e_l - 1 may still be installing (E - e_w <= 1),
    // and the log replay will skip them, so the checkpoint must see them:
    // E moves past e_l only once no worker is in an epoch below e_l.
    while cx.standby.is_none() && epochs.current() <= e_l {
        if stop.load(Ordering::Acquire) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let since = incremental_base(cx);
    let tables = cx.tables.snapshot();
    let dirs = &cx.store.dirs.checkpoint;
    let out: Mutex<Vec<Result<Part>>> = Mutex::new(Vec::new());
    let parts = dirs.len();
    std::thread::scope(|s| {
        for (i, dir) in dirs.iter().enumerate() {
            let (tables, out) = (&tables, &out);
            s.spawn(move || {
                let r = write_part(cx, stop, dir, i, parts, e_l, since, tables);
                lock(out).push(r);
            });
        }
    });
    let mut stats = CheckpointStats { epoch: e_l, incremental: since.is_some(), ..Default::default() };
    let mut files = Vec::new();
    for r in out.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let p = r?;
        if p.stopped {
            return Ok(None);
        }
        stats.bytes += p.files.iter().map(|f| f.len).sum::<u64>();
        stats.skipped_bytes += p.skipped_bytes;
        stats.records += p.records;
        files.extend(p.files);
    }
    // Deletes below e_l: an incremental checkpoint records them, as the
    // rows may have left the index, and older checkpoints hold them; a
    // full checkpoint holds no deleted row. Later ones wait for the next.
    let deletes = cx.store.deletions.drain_below(e_l);
    if since.is_some() {
        let (file, n) = write_deletes(cx, &dirs[0], e_l, &deletes)?;
        stats.bytes += file.len;
        stats.records += n;
        files.push(file);
    }
    let e_h = match &cx.standby {
        Some(persisted) => persisted.load(Ordering::Acquire),
        None => epochs.current(),
    };
    let durable = cx.store.durable.as_ref().ok_or(crate::Error::NotDurable)?;
    while cx.standby.is_none() && durable.pepoch() < e_h {
        durable.check()?;
        if stop.load(Ordering::Acquire) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    {
        let mut m = lock(&cx.store.manifest);
        let mut next = m.clone();
        let previous = next.checkpoint.replace(CheckpointInfo { e_l, e_h, files });
        match previous {
            Some(p) if since.is_some() => next.chain.push(p),
            _ => next.chain.clear(),
        }
        stats.chain = next.chain.len() + 1;
        next.voids.retain(|v| v.1 >= e_l);
        // Through the store: a primary's backups catch up from the
        // checkpoint the manifest names.
        cx.store.store_manifest(&mut m, next)?;
    }
    remove_obsolete(cx, e_l, stop)?;
    let before = lock(&cx.store.checkpoint_stats).clone();
    stats.installed = before.installed + 1;
    stats.total_bytes = before.total_bytes + stats.bytes;
    stats.incremental_installed = before.incremental_installed + u64::from(stats.incremental);
    stats.seconds = start.elapsed().as_secs_f64();
    stats.installed_at = Some(std::time::SystemTime::now());
    Ok(Some(stats))
}

/// `Some(e)`: the next checkpoint records only rows changed in epochs
/// `>= e`, the `e_l` of the installed one (Gawain's `E_oldc`). Never on a
/// standby (replay keeps no deletions list); never for the first checkpoint since
/// open (deletes before a crash are not in the deletions list, so a full
/// checkpoint starts a new chain); and not once the chain's incremental
/// checkpoints hold as many bytes as its full one or it has `MAX_CHAIN`
/// links: a full checkpoint then compacts the chain, so recovery never
/// loads more than about twice a full checkpoint.
fn incremental_base(cx: &Checkpointing) -> Option<u64> {
    if !cx.options.durability.checkpoints() || cx.standby.is_some() {
        return None;
    }
    if lock(&cx.store.checkpoint_stats).installed == 0 {
        return None;
    }
    let m = lock(&cx.store.manifest);
    let newest = m.checkpoint.as_ref()?;
    let bytes = |c: &CheckpointInfo| c.files.iter().map(|f| f.len).sum::<u64>();
    let mut links = m.checkpoints();
    let full = links.next().map_or(0, bytes);
    let incremental: u64 = links.map(bytes).sum();
    (m.chain.len() + 1 < MAX_CHAIN && incremental < full).then_some(newest.e_l)
}

/// Writes the tombstones of `deletes` into `dir/ckpt.<e_l>/deletes` (in
/// the first checkpoint directory); returns the file and its entries.
fn write_deletes(cx: &Checkpointing, dir: &Path, e_l: u64, deletes: &[Deletion]) -> Result<(CheckpointFile, u64)> {
    let io = &cx.store.io;
    let set = PathBuf::from(format!("{DIR_PREFIX}{e_l}"));
    let (ckpt_dir, name) = (dir.join(&set), set.join(DELETES_FILE));
    io.create_dir_all(&ckpt_dir)?;
    let path = dir.join(&name);
    let mut f = BlockWriter::create(&path, CHECKPOINT_MAGIC, io, 0)?;
    let mut block = frame::new_block(BLOCK + 4096);
    let (mut lo, mut hi) = (u64::MAX, 0);
    for (i, (table, key, tid)) in deletes.iter().enumerate() {
        log::encode_txn(&mut block, *tid, 1);
        log::encode_entry(&mut block, *table, key, None);
        (lo, hi) = (lo.min(tid.epoch()), hi.max(tid.epoch()));
        if block.len() >= BLOCK || i + 1 == deletes.len() {
            frame::seal(&mut block, lo, hi);
            f.append(io, &block)?;
            block.truncate(frame::BLOCK_HEADER_LEN);
            (lo, hi) = (u64::MAX, 0);
        }
    }
    io.sync(&f.file)?;
    io.sync_dir(&ckpt_dir)?;
    Ok((CheckpointFile { dir: 0, name, len: f.written() }, deletes.len() as u64))
}

/// A committed delete: table, key, TID.
pub type Deletion = (u32, Box<[u8]>, Tid);

/// The deletes committed since the last checkpoint, for incremental
/// checkpoints: a deleted row may leave the index before a checkpoint scan
/// could see its tombstone, while the chain's older checkpoints still hold
/// the row. Sharded so that workers rarely share a lock.
#[derive(Default)]
pub struct Deletions {
    shards: [Mutex<Vec<Deletion>>; 8],
}

impl Deletions {
    /// Records a delete; `hint` spreads workers over the shards.
    pub fn push(&self, hint: usize, d: Deletion) {
        lock(&self.shards[hint % self.shards.len()]).push(d);
    }

    /// Takes the deletes from epochs below `e`, leaving the rest.
    fn drain_below(&self, e: u64) -> Vec<Deletion> {
        let mut out = Vec::new();
        for s in &self.shards {
            let mut v = lock(s);
            let (below, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *v).into_iter().partition(|d| d.2.epoch() < e);
            *v = rest;
            out.extend(below);
        }
        out
    }
}

/// One checkpointer's output.
struct Part {
    files: Vec<CheckpointFile>,
    skipped_bytes: u64,
    records: u64,
    stopped: bool,
}

/// Checkpointer `part` of `parts`: writes its subrange of every table into
/// `dir/ckpt.<e_l>/t<table>.<j>`; with `since`, only rows (and tombstones)
/// from epochs `>= since`.
#[allow(clippy::too_many_arguments)]
fn write_part(
    cx: &Checkpointing,
    stop: &AtomicBool,
    dir: &Path,
    part: usize,
    parts: usize,
    e_l: u64,
    since: Option<u64>,
    tables: &[Arc<Table>],
) -> Result<Part> {
    let io = &cx.store.io;
    let m = cx.options.checkpoint.files;
    let set = PathBuf::from(format!("{DIR_PREFIX}{e_l}"));
    let ckpt_dir = dir.join(&set);
    io.create_dir_all(&ckpt_dir)?;
    let slot = cx.epochs.register();
    let mut result = Part { files: Vec::new(), skipped_bytes: 0, records: 0, stopped: false };
    let mut since_sync = 0u64;
    let mut value = Vec::new();
    // SiloR's skip of records the log holds whole; with delta logging the
    // log may hold only some of their columns, so every row is written.
    let skip_new = !cx.options.durability.delta() && cx.standby.is_none();
    for t in tables {
        let mut files: Vec<(PathBuf, BlockWriter)> = Vec::new();
        for j in 0..m {
            let name = set.join(format!("t{}.{j}", t.id.index()));
            let f = BlockWriter::create(&dir.join(&name), CHECKPOINT_MAGIC, io, 0)?;
            files.push((name, f));
        }
        cx.epochs.enter(&slot);
        let splits = t.tree.root_keys();
        cx.epochs.exit(&slot);
        // An empty part still writes its (header-only) files.
        if let Some((lo, hi)) = subrange(&splits, part, parts) {
            let mut cursor: Option<Vec<u8>> = None;
            let mut block = frame::new_block(BLOCK + 4096);
            let (mut blo, mut bhi) = (u64::MAX, 0);
            let mut next_file = 0;
            loop {
                if stop.load(Ordering::Acquire) {
                    cx.epochs.unregister(&slot);
                    result.stopped = true;
                    return Ok(result);
                }
                let lower = match &cursor {
                    Some(k) => Bound::Excluded(k.as_slice()),
                    None => lo.as_deref().map_or(Bound::Unbounded, Bound::Included),
                };
                let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                let mut seen = 0;
                let mut last_key = Vec::new();
                cx.epochs.enter(&slot);
                t.tree.scan_ahead(lower, upper, |key, rec| {
                    // SAFETY: reached from the index within our epoch: live.
                    let word = unsafe { rec.as_ref() }.stable_read(&mut value);
                    let tid = Tid::of_word(word);
                    let size = 22 + key.len() + value.len();
                    let changed = since.is_none_or(|s| tid.epoch() >= s);
                    // `Some(None)`: a tombstone.
                    let entry = if tid::is_absent(word) {
                        // Deleted: a full checkpoint omits the row; an
                        // incremental one records that it is gone.
                        (since.is_some() && changed).then_some(None)
                    } else if !changed {
                        None // unchanged since the previous checkpoint
                    } else if tid.epoch() >= e_l && skip_new {
                        result.skipped_bytes += size as u64;
                        None
                    } else {
                        Some(Some(&value[..]))
                    };
                    if let Some(v) = entry {
                        log::encode_txn(&mut block, tid, 1);
                        log::encode_entry(&mut block, t.id.index(), key, v);
                        blo = blo.min(tid.epoch());
                        bhi = bhi.max(tid.epoch());
                        result.records += 1;
                    }
                    last_key.clear();
                    last_key.extend_from_slice(key);
                    seen += 1;
                    seen < CHUNK && block.len() < BLOCK
                });
                cx.epochs.exit(&slot);
                let done = seen == 0 || (seen < CHUNK && block.len() < BLOCK);
                if block.len() >= BLOCK || (done && block.len() > frame::BLOCK_HEADER_LEN) {
                    frame::seal(&mut block, blo.min(bhi), bhi);
                    files[next_file].1.append(io, &block)?;
                    since_sync += block.len() as u64;
                    next_file = (next_file + 1) % m;
                    block.truncate(frame::BLOCK_HEADER_LEN);
                    (blo, bhi) = (u64::MAX, 0);
                    if since_sync >= SYNC_EVERY {
                        for f in &files {
                            io.sync(&f.1.file)?;
                        }
                        since_sync = 0;
                    }
                }
                if done {
                    break;
                }
                cursor = Some(last_key);
            }
        }
        for (name, f) in files {
            io.sync(&f.file)?;
            result.files.push(CheckpointFile { dir: part as u32, name, len: f.written() });
        }
    }
    cx.epochs.unregister(&slot);
    io.sync_dir(&ckpt_dir)?;
    io.sync_dir(dir)?;
    Ok(result)
}

/// Part `i` of `n` of a key space split at `splits`: `Some((lo, hi))` for
/// `[lo, hi)` (`None` bounds are open), or `None` if the part is empty
/// (a tree too small to split gives everything to part 0).
type Range = (Option<Vec<u8>>, Option<Vec<u8>>);
fn subrange(splits: &[Vec<u8>], i: usize, n: usize) -> Option<Range> {
    if n == 1 || splits.len() + 1 < n {
        return (i == 0).then_some((None, None));
    }
    // Boundary j (0 < j < n) is split k_j = j * (len + 1) / n, >= 1 and
    // strictly increasing in j because len + 1 >= n.
    let at = |j: usize| (j > 0 && j < n).then(|| splits[j * (splits.len() + 1) / n - 1].clone());
    Some((at(i), at(i + 1)))
}

/// Deletes checkpoint directories other than the installed one (an
/// interrupted checkpoint leaves one behind), touching only files epochdb
/// wrote. `gradually`: while the database runs, see
/// [`Io::remove_gradually`](super::fsio::Io::remove_gradually).
fn remove_uninstalled(cx: &Checkpointing, gradually: bool) -> Result<()> {
    let keep: Vec<String> = lock(&cx.store.manifest).checkpoints().map(|c| format!("{DIR_PREFIX}{}", c.e_l)).collect();
    for dir in &cx.store.dirs.checkpoint {
        cx.store.io.create_dir_all(dir)?;
        for entry in std::fs::read_dir(dir).ctx("read directory", dir)? {
            let entry = entry.ctx("read directory", dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let set = name.strip_prefix(DIR_PREFIX).is_some_and(|e| e.parse::<u64>().is_ok());
            if set && !keep.contains(&name) && entry.path().is_dir() {
                datadir::remove_checkpoint_set(&cx.store.io, &entry.path(), gradually)?;
            }
        }
    }
    Ok(())
}

/// After installing the checkpoint at `e_l`: older checkpoints, and log
/// files whose records all have epochs `< e_l`, are no longer needed.
/// Recovery never reads them (it goes by the manifest and by the epoch in
/// a log file's name), so a crash halfway leaves nothing it could trip on;
/// the next checkpoint removes what is left. On `stop`, the rest waits.
/// Files a connected backup still needs (`Retention::hold`) stay, the
/// newest first, up to `Retention::cap` bytes.
fn remove_obsolete(cx: &Checkpointing, e_l: u64, stop: &AtomicBool) -> Result<()> {
    let retention = &cx.store.retention;
    // A catch-up may be sending these very files: the next checkpoint's
    // cleanup removes them instead.
    if retention.is_sending() {
        return Ok(());
    }
    remove_uninstalled(cx, true)?;
    let hold = retention.hold.load(Ordering::Acquire);
    let mut obsolete = Vec::new();
    for dir in &cx.store.dirs.log {
        for (name, path) in datadir::old_log_files(dir, |name| super::recovery::below_checkpoint(name, e_l))? {
            obsolete.push((super::recovery::old_log_epoch(&name).unwrap_or(0), path));
        }
    }
    // Newest first: what a backup needs last is kept longest.
    obsolete.sort_by_key(|f| std::cmp::Reverse(f.0));
    let (mut kept, cap) = (0u64, retention.cap.load(Ordering::Acquire));
    for (hi, path) in obsolete {
        if stop.load(Ordering::Acquire) || retention.is_sending() {
            return Ok(());
        }
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        if hi > hold && kept + len <= cap {
            kept += len;
            continue;
        }
        if hi > hold {
            ::log::warn!("replication: a backup at epoch {hold} needs {}, past the retention cap", path.display());
        }
        // Before the file goes: a catch-up opened after this point must
        // not count on it.
        retention.deleted_through.fetch_max(hi, Ordering::AcqRel);
        cx.store.io.remove_gradually(&path)?;
    }
    for dir in &cx.store.dirs.log {
        cx.store.io.sync_dir(dir)?;
    }
    Ok(())
}

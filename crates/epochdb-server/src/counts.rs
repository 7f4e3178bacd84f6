//! INFO keyspace's `keys` and `expires` per database, kept as transactions
//! commit instead of counted by a scan at each INFO (a scan of millions of
//! keys would stall its event loop for as long as it takes).
//!
//! A count is a base, taken by one scan in a snapshot at epoch `S` on a
//! thread of its own, plus every committed transaction's [`Tally`] from
//! epoch `S` on. A snapshot at `S` shows exactly the transactions of
//! epochs below `S`, so each change is counted once: in the base or in
//! the sums, never both. Until a base exists (at start, and again after a
//! replica is promoted), tallies wait by epoch and are sorted out when it
//! comes. A replica's data comes by replay, which does not tally: there
//! the base is all there is, and INFO asks for a new one once it is a
//! second old.
//!
//! Each event loop adds to its own slot, so counting shares no cache line
//! on the request path; INFO sums the slots.

use crate::keyspace::{Tally, EXPIRIES, HEADS};
use epochdb::{Database, TableId};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `[keys, expires]` of one database.
pub type Pair = [i64; 2];

/// Keys a transaction of [`Counts::count_before_serving`] reads: its read
/// set stays small.
const START_CHUNK: usize = 4096;

/// How old a replica's count may be before INFO asks for a new one.
const REPLICA_RECOUNT: Duration = Duration::from_secs(1);

/// One event loop's share.
#[derive(Default)]
struct Slot {
    /// `S` of the base: its sums count epochs from `S` on; `None` while
    /// there is no base.
    from: Option<u64>,
    /// Per table (by position in `tables`): tallies of epochs from `from`.
    sums: Vec<Pair>,
    /// While `from` is `None`: tallies by (epoch, table position).
    early: HashMap<(u64, usize), Pair>,
}

/// The counts of every numbered database.
pub struct Counts {
    tables: Vec<TableId>,
    /// Each table's counts at the base's snapshot, and when it was taken.
    base: Mutex<Option<(Instant, Vec<Pair>)>>,
    /// Loops' slots, each on its own cache lines.
    slots: Vec<Padded>,
    /// A count is under way (one at a time).
    counting: AtomicBool,
    /// Bumped by [`Counts::forget`]: a count begun before is dropped.
    generation: AtomicU64,
    /// The counting thread, and the flag that ends it early (shutdown).
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    stop: AtomicBool,
}

#[repr(align(128))]
struct Padded(Mutex<Slot>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn add(to: &mut Pair, by: &Pair) {
    to[0] += by[0];
    to[1] += by[1];
}

impl Counts {
    pub fn new(tables: &[TableId], loops: usize) -> Counts {
        let slot = || Padded(Mutex::new(Slot { sums: vec![[0; 2]; tables.len()], ..Slot::default() }));
        Counts {
            tables: tables.to_vec(),
            base: Mutex::new(None),
            slots: (0..loops).map(|_| slot()).collect(),
            counting: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            thread: Mutex::new(None),
            stop: AtomicBool::new(false),
        }
    }

    /// Adds what a transaction of `epoch`, committed on loop `slot`, did.
    pub fn apply(&self, slot: usize, epoch: u64, tally: &Tally) {
        if tally.is_empty() {
            return;
        }
        let mut s = lock(&self.slots[slot].0);
        for (table, c) in tally.iter() {
            let Some(i) = self.tables.iter().position(|t| t == table) else { continue };
            match s.from {
                Some(from) if epoch >= from => add(&mut s.sums[i], c),
                Some(_) => {} // in the base already
                None => add(s.early.entry((epoch, i)).or_default(), c),
            }
        }
    }

    /// Whether a count should begin: there is no base, or (on a replica,
    /// `replica`) it is more than a second old.
    pub fn stale(&self, replica: bool) -> bool {
        let base = lock(&self.base);
        base.as_ref().is_none_or(|(at, _)| replica && at.elapsed() > REPLICA_RECOUNT)
    }

    /// Counts every table in a snapshot of `db` on a thread of its own,
    /// unless a count is under way already.
    pub fn count_in_background(self: &std::sync::Arc<Self>, db: &Database) {
        // Held until the handle is stored, so that `stop` finds it.
        let mut thread = lock(&self.thread);
        if self.stop.load(Ordering::Acquire) || self.counting.swap(true, Ordering::AcqRel) {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        let (counts, db) = (self.clone(), db.clone());
        let spawned = std::thread::Builder::new().name("epochdb-count".into()).spawn(move || {
            match scan(&db, &counts.tables, &counts.stop) {
                Ok(Some(counted)) => counts.take_base(generation, Some(counted)),
                Ok(None) => {} // stopped
                // A replica with no read view yet, a database closing.
                Err(e @ (epochdb::Error::Stale { .. } | epochdb::Error::Closed)) => {
                    ::log::debug!("counting keys for INFO keyspace: {e}")
                }
                Err(e) => ::log::warn!("counting keys for INFO keyspace: {e}"),
            }
            counts.counting.store(false, Ordering::Release);
        });
        match spawned {
            // The one before has ended (`counting` was clear).
            Ok(t) => *thread = Some(t),
            Err(_) => self.counting.store(false, Ordering::Release),
        }
    }

    /// Takes the base before any write can commit (at start, before the
    /// event loops run), so INFO keyspace and DBSIZE have counts from the
    /// first request: with nothing changing, ordinary transactions of
    /// [`START_CHUNK`] keys each see one state, and there is no snapshot
    /// to wait for. Every tally then counts (the base's epoch is 0).
    pub fn count_before_serving(&self, db: &Database) -> epochdb::Result<()> {
        self.count_in_chunks(db, START_CHUNK)
    }

    fn count_in_chunks(&self, db: &Database, chunk: usize) -> epochdb::Result<()> {
        let generation = self.generation.load(Ordering::Acquire);
        let mut w = db.worker()?;
        let mut all = Vec::with_capacity(self.tables.len());
        let mut last = Vec::new();
        for &table in &self.tables {
            let mut pair = [0; 2];
            for (n, (lo, hi)) in pair.iter_mut().zip([HEADS, EXPIRIES]) {
                last.clear();
                last.extend_from_slice(lo);
                let mut from = Bound::Included(());
                loop {
                    let seen = w.run(|txn| {
                        let start = from.map(|()| &last[..]);
                        // Only a whole chunk's last key is kept: the next
                        // chunk starts after it.
                        let (mut i, mut next) = (0, Vec::new());
                        let seen = txn.scan(table, (start, Bound::Excluded(hi)), chunk, |k, _| {
                            i += 1;
                            if i == chunk {
                                next.extend_from_slice(k);
                            }
                            true
                        })?;
                        Ok((seen, next))
                    })?;
                    *n += seen.0 as i64;
                    if seen.0 < chunk {
                        break;
                    }
                    (last, from) = (seen.1, Bound::Excluded(()));
                }
            }
            all.push(pair);
        }
        self.take_base(generation, Some((0, all)));
        Ok(())
    }

    /// Ends a count under way, and waits for its thread; none begins after.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let t = lock(&self.thread).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// Makes `counted` (a snapshot's epoch and each table's counts) the
    /// base, unless [`Counts::forget`] came since `generation`.
    fn take_base(&self, generation: u64, counted: Option<(u64, Vec<Pair>)>) {
        let Some((at, counts)) = counted else { return };
        let mut base = lock(&self.base);
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        for p in &self.slots {
            let mut s = lock(&p.0);
            let Slot { from, sums, early } = &mut *s;
            sums.iter_mut().for_each(|c| *c = [0; 2]);
            for ((epoch, i), c) in early.drain() {
                if epoch >= at {
                    add(&mut sums[i], &c);
                }
            }
            *from = Some(at);
        }
        *base = Some((Instant::now(), counts));
    }

    /// Forgets the base (a replica promoted: its data came by replay,
    /// which does not count). Call before the first write can commit.
    pub fn forget(&self) {
        let mut base = lock(&self.base);
        self.generation.fetch_add(1, Ordering::AcqRel);
        for p in &self.slots {
            let mut s = lock(&p.0);
            s.from = None;
            s.early.clear();
        }
        *base = None;
    }

    /// Each table's `[keys, expires]`, if there is a base.
    pub fn get(&self) -> Option<Vec<Pair>> {
        let base = lock(&self.base);
        let mut all = base.as_ref()?.1.clone();
        for p in &self.slots {
            let s = lock(&p.0);
            for (a, c) in all.iter_mut().zip(&s.sums) {
                add(a, c);
            }
        }
        Some(all)
    }
}

/// Counts each table's heads and expiry entries in one snapshot; returns
/// the snapshot's epoch with them, or `None` if `stop` was set meanwhile.
fn scan(db: &Database, tables: &[TableId], stop: &AtomicBool) -> epochdb::Result<Option<(u64, Vec<Pair>)>> {
    let mut w = db.worker()?;
    let mut snap = w.snapshot()?;
    let mut all = Vec::with_capacity(tables.len());
    for &table in tables {
        let mut pair = [0; 2];
        for (n, (lo, hi)) in pair.iter_mut().zip([HEADS, EXPIRIES]) {
            snap.scan(table, (Bound::Included(lo), Bound::Excluded(hi)), usize::MAX, |_, _| {
                *n += 1;
                !stop.load(Ordering::Relaxed)
            })?;
        }
        all.push(pair);
    }
    Ok((!stop.load(Ordering::Acquire)).then(|| (snap.snapshot_epoch(), all)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(n: usize) -> (epochdb::Database, Vec<TableId>) {
        let db = epochdb::Database::open(epochdb::Options::default()).unwrap();
        let t = (0..n).map(|i| db.create_table(&format!("t{i}"), epochdb::TableOptions::new()).unwrap()).collect();
        (db, t)
    }

    fn tally(table: TableId, keys: i64, expires: i64) -> Tally {
        let mut t = Tally::default();
        t.add(table, keys, expires);
        t
    }

    #[test]
    fn a_change_counts_once_whether_before_or_after_the_base() {
        let (_db, tables) = tables(2);
        let c = Counts::new(&tables, 2);
        assert_eq!(c.get(), None);
        // Before the base at 6: epoch 5 (in its snapshot) and 7 (not).
        c.apply(0, 5, &tally(tables[0], 10, 1));
        c.apply(1, 7, &tally(tables[0], 2, 0));
        c.apply(1, 7, &tally(tables[1], 1, 1));
        assert!(c.stale(false));
        c.take_base(0, Some((6, vec![[10, 1], [0, 0]])));
        assert!(!c.stale(false));
        assert_eq!(c.get(), Some(vec![[12, 1], [1, 1]]));
        // After it: an epoch the base already holds, and its own epoch.
        c.apply(0, 5, &tally(tables[0], 5, 5));
        c.apply(0, 6, &tally(tables[0], -3, -1));
        assert_eq!(c.get(), Some(vec![[9, 0], [1, 1]]));
        c.forget();
        assert_eq!(c.get(), None);
        // A count begun before the forgetting does not count.
        c.take_base(0, Some((7, vec![[1, 1], [1, 1]])));
        assert_eq!(c.get(), None);
        c.apply(0, 9, &tally(tables[1], 1, 0));
        c.take_base(1, Some((8, vec![[9, 0], [1, 1]])));
        assert_eq!(c.get(), Some(vec![[9, 0], [2, 1]]));
    }

    #[test]
    fn a_count_before_serving_reads_every_chunk() {
        let (db, tables) = tables(2);
        let mut w = db.worker().unwrap();
        // 9 heads: whole chunks of 3; 7 expiry entries: a part chunk.
        w.run(|txn| {
            for i in 0..9u8 {
                txn.put(tables[0], &[b'k', i], b"")?;
            }
            for i in 0..7u8 {
                txn.put(tables[0], &[b'x', 0, 0, 0, 0, 0, 0, 0, i], b"")?;
            }
            txn.put(tables[0], b"h\0\x01af", b"") // a hash field: neither
        })
        .unwrap();
        for chunk in [1, 3, 4096] {
            let c = Counts::new(&tables, 1);
            c.count_in_chunks(&db, chunk).unwrap();
            assert_eq!(c.get(), Some(vec![[9, 7], [0, 0]]), "chunks of {chunk}");
            // The base is at epoch 0: every later change counts.
            c.apply(0, 1, &tally(tables[1], 1, 0));
            assert_eq!(c.get(), Some(vec![[9, 7], [1, 0]]));
        }
    }

    #[test]
    fn a_count_in_the_background_sees_the_tables() {
        let (db, tables) = tables(2);
        let mut w = db.worker().unwrap();
        w.run(|txn| {
            txn.put(tables[1], b"ka", b"")?;
            txn.put(tables[1], b"kb", b"")?;
            txn.put(tables[1], b"x\0\0\0\0\0\0\0\x01b", b"")?;
            txn.put(tables[1], b"h\0\x01af", b"") // a hash field: neither
        })
        .unwrap();
        let c = std::sync::Arc::new(Counts::new(&tables, 1));
        c.count_in_background(&db);
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.get().is_none() {
            assert!(Instant::now() < deadline, "no count");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(c.get(), Some(vec![[0, 0], [2, 1]]));
        assert!(!c.stale(true) && !c.stale(false), "a fresh count");
    }
}

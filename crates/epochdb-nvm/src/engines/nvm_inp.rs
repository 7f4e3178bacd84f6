//! NVM-InP: in-place updates on persistent memory (NVM study §4.1, Table 2).
//!
//! Tuples, their variable-length fields and the B+tree indexes live in
//! NVM and are persisted as they change, so a committed transaction needs
//! no redo. The write-ahead log is a non-volatile linked list of small
//! entries holding pointers, not tuple images:
//!
//! - insert: persist the tuple, log its pointer, mark it persisted, index it;
//! - update: for an inline field, log the old word, then write and persist
//!   the new one; for a variable field, persist a new slot, log both
//!   pointers, swing the field to the new slot (the old one is freed at
//!   commit);
//! - delete: log the tuple's pointer and unindex it (freed at commit).
//!
//! Commit sets the log's committed flag, frees what the transaction
//! replaced or deleted, and truncates the log. Recovery therefore only
//! undoes the one transaction a crash interrupted (or finishes the frees of
//! one that committed), so it takes the same short time however many
//! transactions ran before (§5.4).

use crate::btree::{recover_split, SPLIT_RECORD};
use crate::pmem::{Component, Heap, Pmem, Stats, ROOT, ROOT_LEN};
use crate::store::{corrupt, heap_footprint, invalid, Footprint, Result, Store};
use crate::tuple::{self, Catalog, Shape};
use std::sync::Arc;

const MAGIC: u64 = u64::from_le_bytes(*b"NVM-INP1");
// Root object words.
const CATALOG: u64 = ROOT + 8;
const WAL: u64 = ROOT + 16;
const COMMITTED: u64 = ROOT + 24;
const SPLIT: u64 = ROOT + 64;
const _: () = assert!(64 + SPLIT_RECORD <= ROOT_LEN);

/// WAL entry kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Insert = 1,
    Delete = 2,
    Inline = 3,
    Var = 4,
}

/// A WAL entry: one 64-byte slot (FORMAT.md, "NVM-InP log").
#[derive(Debug, Clone, Copy)]
struct Entry {
    at: u64,
    kind: Kind,
    table: u32,
    tuple: u64,
    field: usize,
    old: u64,
    new: u64,
}

impl Entry {
    fn read(heap: &Heap, at: u64) -> Result<(Entry, u64)> {
        let kind = match heap.u64(at + 8) {
            1 => Kind::Insert,
            2 => Kind::Delete,
            3 => Kind::Inline,
            4 => Kind::Var,
            k => return Err(corrupt(format!("NVM-InP log entry at {at} has kind {k}"))),
        };
        let w = |i: u64| heap.u64(at + 8 * i);
        let e = Entry { at, kind, table: w(2) as u32, tuple: w(3), field: w(4) as usize, old: w(5), new: w(6) };
        Ok((e, w(0)))
    }
}

pub struct NvmInp {
    pm: Pmem,
    catalog: Catalog,
    committed: u64,
    /// The open transaction's log entries, newest last (also linked in NVM).
    log: Vec<Entry>,
}

impl NvmInp {
    /// Opens the engine on `pm`, recovering if it holds a database.
    pub fn open(mut pm: Pmem) -> Result<NvmInp> {
        let heap = &mut pm.heap;
        let catalog = match heap.u64(ROOT) {
            0 => {
                let c = Catalog::create(heap, CATALOG, SPLIT)?;
                heap.set_u64(ROOT, MAGIC);
                heap.persist(ROOT, 8);
                c
            }
            MAGIC => {
                recover_split(heap, SPLIT);
                Catalog::load(heap, heap.u64(CATALOG), SPLIT)?
            }
            m => return Err(invalid(format!("the NVM region belongs to another engine (root magic {m:#x})"))),
        };
        let mut e = NvmInp { pm, catalog, committed: 0, log: Vec::new() };
        e.recover()?;
        Ok(e)
    }

    /// Finishes a committed transaction's frees or undoes an uncommitted
    /// one, from the log in NVM.
    fn recover(&mut self) -> Result {
        let heap = &mut self.pm.heap;
        let mut at = heap.u64(WAL);
        let mut newest_first = Vec::new();
        while at != 0 {
            let (e, next) = Entry::read(heap, at)?;
            newest_first.push(e);
            at = next;
        }
        // Pin every slot the log names, so that allocations made while
        // undoing (a B+tree split) cannot reclaim one the undo still uses.
        for e in &newest_first {
            for s in [e.at, e.tuple].into_iter().chain((e.kind == Kind::Var).then_some(e.new)) {
                heap.pin(s);
            }
            if matches!(e.kind, Kind::Insert) {
                let shape = self.catalog.get(e.table)?.shape.clone();
                for v in tuple::vars(heap, &shape, e.tuple) {
                    heap.pin(v);
                }
            }
        }
        newest_first.reverse();
        self.log = newest_first;
        if self.pm.heap.u64(COMMITTED) == 1 {
            self.finish_commit()
        } else {
            self.abort()
        }
    }

    fn heap(&mut self) -> &mut Heap {
        &mut self.pm.heap
    }

    /// Appends a log entry and persists it before the change it covers.
    fn log(&mut self, kind: Kind, table: u32, tuple: u64, field: usize, old: u64, new: u64) -> Result {
        let heap = &mut self.pm.heap;
        let at = heap.alloc(64, Component::Log)?;
        let head = heap.u64(WAL);
        for (i, w) in [head, kind as u64, table as u64, tuple, field as u64, old, new].into_iter().enumerate() {
            heap.set_u64(at + 8 * i as u64, w);
        }
        heap.persist(at, 56);
        // Linked before it is marked persisted, so a crash leaves no
        // persisted entry outside the list; recovery pins a linked entry
        // still marked allocated.
        heap.set_u64(WAL, at);
        heap.persist(WAL, 8);
        heap.persisted(at);
        self.log.push(Entry { at, kind, table, tuple, field, old, new });
        Ok(())
    }

    fn insert(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        let info = self.catalog.get(table)?.clone();
        let t = tuple::write(self.heap(), &info.shape, key, value)?;
        self.log(Kind::Insert, table, t, 0, 0, 0)?;
        tuple::mark_persisted(self.heap(), &info.shape, t);
        info.tree.insert(self.heap(), key, t)
    }

    fn update(&mut self, table: u32, t: u64, shape: &Shape, value: &[u8]) -> Result {
        let fields = shape.split(value)?;
        let k = tuple::key_len(self.heap(), t);
        for (i, f) in fields.into_iter().enumerate() {
            let at = tuple::field(t, k, i);
            let old = self.heap().u64(at);
            let new = if shape.inline(i) {
                let new = tuple::inline_word(f);
                if new == old {
                    continue;
                }
                self.log(Kind::Inline, table, t, i, old, new)?;
                new
            } else {
                if tuple::var_bytes(self.heap(), old) == f {
                    continue;
                }
                let new = tuple::new_var(self.heap(), f)?;
                self.log(Kind::Var, table, t, i, old, new)?;
                new
            };
            let heap = self.heap();
            heap.set_u64(at, new);
            heap.persist(at, 8);
            if !shape.inline(i) {
                heap.persisted(new);
            }
        }
        Ok(())
    }

    /// Commit's second half (also recovery's redo): frees what the
    /// transaction replaced or deleted, then truncates the log.
    fn finish_commit(&mut self) -> Result {
        let log = std::mem::take(&mut self.log);
        for e in &log {
            match e.kind {
                Kind::Delete => {
                    let shape = self.catalog.get(e.table)?.shape.clone();
                    tuple::free(self.heap(), &shape, e.tuple);
                }
                Kind::Var => tuple::free_slot(self.heap(), e.old),
                Kind::Insert | Kind::Inline => {}
            }
        }
        self.truncate(&log);
        Ok(())
    }

    fn truncate(&mut self, log: &[Entry]) {
        let heap = &mut self.pm.heap;
        for e in log {
            tuple::free_slot(heap, e.at);
        }
        // One line: a crash keeps both words old, both new, or (harmless)
        // an empty log still flagged committed.
        heap.set_u64(WAL, 0);
        heap.set_u64(COMMITTED, 0);
        heap.persist(WAL, 16);
    }

    /// Every slot the engine can reach: catalog, index nodes, tuples and
    /// their variable slots, log entries.
    fn reachable(&mut self) -> Vec<u64> {
        let mut out = vec![self.catalog.slot];
        let mut at = self.pm.heap.u64(WAL);
        while at != 0 {
            out.push(at);
            at = self.pm.heap.u64(at);
        }
        for info in self.catalog.tables.clone() {
            out.extend(info.tree.nodes(&self.pm.heap));
            let mut tuples = Vec::new();
            info.tree.scan(&mut self.pm.heap, b"", None, false, &mut |_, _, t| {
                tuples.push(t);
                true
            });
            for t in tuples {
                out.extend(tuple::vars(&self.pm.heap, &info.shape, t));
                out.push(t);
            }
        }
        out
    }
}

impl Store for NvmInp {
    fn name(&self) -> &'static str {
        "nvm-inp"
    }

    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32> {
        self.catalog.table(&mut self.pm.heap, name, columns)
    }

    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let info = self.catalog.get(table)?;
        Ok(info.get_row(&mut self.pm.heap, key, out))
    }

    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        let info = self.catalog.get(table)?.clone();
        match info.tree.get(self.heap(), key) {
            Some(t) => self.update(table, t, &info.shape, value),
            None => self.insert(table, key, value),
        }
    }

    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool> {
        let info = self.catalog.get(table)?.clone();
        let Some(t) = info.tree.get(self.heap(), key) else {
            return Ok(false);
        };
        self.log(Kind::Delete, table, t, 0, 0, 0)?;
        info.tree.remove(self.heap(), key);
        Ok(true)
    }

    fn scan(
        &mut self,
        table: u32,
        lo: &[u8],
        hi: Option<&[u8]>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result {
        self.catalog.get(table)?.scan_rows(&mut self.pm.heap, lo, hi, reverse, visit);
        Ok(())
    }

    fn commit(&mut self) -> Result {
        self.committed += 1;
        if self.log.is_empty() {
            return Ok(());
        }
        let heap = self.heap();
        heap.set_u64(COMMITTED, 1);
        heap.persist(COMMITTED, 8);
        self.finish_commit()
    }

    fn abort(&mut self) -> Result {
        let log = std::mem::take(&mut self.log);
        for e in log.iter().rev() {
            let info = self.catalog.get(e.table)?.clone();
            let heap = &mut self.pm.heap;
            let key = tuple::key(heap, e.tuple).to_vec();
            match e.kind {
                Kind::Insert => {
                    if info.tree.get(heap, &key) == Some(e.tuple) {
                        info.tree.remove(heap, &key);
                    }
                    tuple::free(heap, &info.shape, e.tuple);
                }
                Kind::Delete => {
                    if info.tree.get(heap, &key).is_none() {
                        info.tree.insert(heap, &key, e.tuple)?;
                    }
                }
                Kind::Inline | Kind::Var => {
                    let at = tuple::field(e.tuple, key.len(), e.field);
                    if heap.u64(at) == e.new {
                        heap.set_u64(at, e.old);
                        heap.persist(at, 8);
                    }
                    if e.kind == Kind::Var {
                        tuple::free_slot(heap, e.new);
                    }
                }
            }
        }
        self.truncate(&log);
        Ok(())
    }

    fn durable(&self) -> u64 {
        self.committed
    }

    fn committed(&self) -> u64 {
        self.committed
    }

    fn footprint(&mut self) -> Footprint {
        heap_footprint(&self.pm.heap)
    }

    fn stats(&self) -> Arc<Stats> {
        self.pm.stats.clone()
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    fn leaks(&mut self) -> Vec<String> {
        let reachable = self.reachable();
        heap_leaks(&mut self.pm.heap, reachable)
    }
}

/// Persisted slots not in `reachable`, and reachable ones not persisted,
/// after reclaiming every allocated-but-unpersisted slot.
pub fn heap_leaks(heap: &mut Heap, mut reachable: Vec<u64>) -> Vec<String> {
    heap.reclaim_all();
    let mut live: Vec<u64> = heap.live().into_iter().map(|(o, _)| o).collect();
    reachable.sort_unstable();
    live.sort_unstable();
    let unreachable = live.iter().filter(|s| reachable.binary_search(s).is_err());
    let dangling = reachable.iter().filter(|s| live.binary_search(s).is_err());
    unreachable
        .map(|s| format!("slot {s} is persisted but unreachable"))
        .chain(dangling.map(|s| format!("slot {s} is reachable but not persisted")))
        .collect()
}

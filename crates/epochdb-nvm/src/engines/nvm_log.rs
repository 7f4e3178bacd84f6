//! NVM-Log: log-structured updates on persistent memory (NVM study §4.3,
//! Table 2).
//!
//! - **Entries.** A change is an entry slot in NVM holding the key and the
//!   row, or a tombstone. It is persisted once and never copied again.
//! - **MemTables.** A MemTable is a descriptor slot with one persistent
//!   B+tree per table ([`crate::btree`]) mapping keys to entry pointers.
//!   The mutable MemTable takes every change. Over `memtable_bytes` of
//!   entries, it is merged into level 1's immutable MemTable, and a level
//!   over `memtable_bytes * k^i` into the next, as in [`super::log`]. A
//!   merge builds new trees over the same entries (only pointers move), a
//!   Bloom filter for the new MemTable, and frees the entries it
//!   supersedes. Tombstones go once no deeper level exists. Nothing is
//!   flushed to a file system: an immutable MemTable stays where it is.
//! - **Undo log.** A non-volatile list of pointer entries, as in NVM-InP:
//!   per change, the table, the new entry and the one it replaced in the
//!   mutable MemTable. Commit sets a flag, frees the replaced entries and
//!   truncates; recovery undoes the one transaction in flight, or finishes
//!   its frees.
//! - **Version.** The root object's version word names a slot listing the
//!   mutable MemTable, the levels and the table directory. A merge or a new
//!   table installs a new version with one switch ([`crate::journal`]). A
//!   merge's new trees are built under the root object's build word, so
//!   recovery frees a build a crash interrupted.
//!
//! Recovery therefore costs one in-flight transaction, plus at most one
//! interrupted merge, whatever the history (§5.4).

use super::cow::{decode_directory, encode_directory, Table};
use crate::bloom::{self, Bloom};
use crate::btree::{recover_split, BTree, SPLIT_RECORD};
use crate::journal::{self, FREE};
use crate::pmem::{Component, Heap, Pmem, Stats, MAX_ALLOC, ROOT, ROOT_LEN};
use crate::store::{corrupt, existing_table, heap_footprint, invalid, Footprint, Result, Store};
use crate::tuple::{self, Shape};
use std::collections::BTreeMap;
use std::sync::Arc;

const MAGIC: u64 = u64::from_le_bytes(*b"NVM-LOG1");
// Root object words.
const VERSION: u64 = ROOT + 8;
const JOURNAL: u64 = ROOT + 16;
const BUILD: u64 = ROOT + 24;
/// The undo log's head and committed flag share a line.
const WAL: u64 = ROOT + 32;
const COMMITTED: u64 = ROOT + 40;
const SPLIT: u64 = ROOT + 64;
const _: () = assert!(64 + SPLIT_RECORD <= ROOT_LEN);

/// Descriptor slot: Bloom filter slot, its bytes, the mutable MemTable
/// built with it (a build's), a spare word, then one tree root per table
/// (0: no tree; a descriptor never has trees for tables created after it).
const DESC_ROOTS: u64 = 32;
const MAX_TABLES: usize = 31;
const DESC: usize = DESC_ROOTS as usize + 8 * MAX_TABLES;
const TOMBSTONE: u64 = 1 << 63;

/// Default MemTable size that triggers a merge into level 1.
pub const MEMTABLE_BYTES: usize = 4 << 20;
/// Default growth factor k between levels.
pub const GROWTH: usize = 4;

/// A new entry slot, persisted (state: allocated).
fn new_entry(heap: &mut Heap, key: &[u8], value: Option<&[u8]>) -> Result<u64> {
    let v = value.unwrap_or_default();
    let e = heap.alloc(16 + key.len() + v.len(), Component::Table)?;
    heap.set_u64(e, key.len() as u64 | if value.is_none() { TOMBSTONE } else { 0 });
    heap.set_u64(e + 8, v.len() as u64);
    heap.write(e + 16, key);
    heap.write(e + 16 + key.len() as u64, v);
    heap.persist(e, 16 + key.len() + v.len());
    Ok(e)
}

fn entry_key(heap: &Heap, e: u64) -> &[u8] {
    heap.bytes(e + 16, (heap.u64(e) & 0xffff) as usize)
}

/// The entry's row, or `None` for a tombstone.
fn entry_row(heap: &mut Heap, e: u64) -> Option<&[u8]> {
    let (head, len) = (heap.u64(e), heap.u64(e + 8) as usize);
    let k = (head & 0xffff) as usize;
    heap.touch(e, 16 + k + len);
    (head & TOMBSTONE == 0).then(|| heap.bytes(e + 16 + k as u64, len))
}

fn entry_bytes(heap: &Heap, e: u64) -> usize {
    16 + (heap.u64(e) & 0xffff) as usize + heap.u64(e + 8) as usize
}

fn tree(desc: u64, table: usize) -> BTree {
    BTree::open(desc + DESC_ROOTS + 8 * table as u64, SPLIT)
}

/// A new descriptor with an empty tree for each of `tables` tables; the
/// slot and the leaves stay "allocated".
fn new_desc(heap: &mut Heap, tables: usize, build_of: u64) -> Result<u64> {
    let d = heap.alloc(DESC, Component::Index)?;
    heap.bytes_mut(d, DESC).fill(0);
    heap.set_u64(d + 16, build_of);
    heap.persist(d, DESC);
    for t in 0..tables {
        BTree::create(heap, d + DESC_ROOTS + 8 * t as u64, SPLIT)?;
    }
    Ok(d)
}

/// Whether descriptor `d` has a tree for `table`.
fn has_tree(heap: &Heap, d: u64, table: usize) -> bool {
    d != 0 && heap.u64(d + DESC_ROOTS + 8 * table as u64) != 0
}

/// Every slot a descriptor owns: itself, its filter, the nodes of its
/// trees for the first `tables` tables.
fn desc_slots(heap: &Heap, d: u64, tables: usize) -> Vec<u64> {
    let mut out = vec![d];
    let bloom = heap.u64(d);
    out.extend((bloom != 0).then_some(bloom));
    for t in (0..tables).filter(|&t| has_tree(heap, d, t)) {
        out.extend(tree(d, t).nodes(heap));
    }
    out
}

/// (table, key) as one key: what the filters hash.
fn filter_key(table: usize, key: &[u8]) -> Vec<u8> {
    let mut k = (table as u32).to_be_bytes().to_vec();
    k.extend_from_slice(key);
    k
}

/// The undo log's entry: a 64-byte slot `[next][table][new][old]`.
#[derive(Clone, Copy)]
struct Undo {
    at: u64,
    table: usize,
    new: u64,
    old: u64,
}

pub struct NvmLog {
    pm: Pmem,
    tables: Vec<(String, Shape)>,
    mutable: u64,
    /// `levels[i]` is level i + 1's descriptor, or 0.
    levels: Vec<u64>,
    version: u64,
    /// Entry bytes in the mutable MemTable since open.
    mem_bytes: usize,
    /// The open transaction's undo entries, oldest first.
    log: Vec<Undo>,
    committed: u64,
    pub memtable_bytes: usize,
    pub growth: usize,
}

impl NvmLog {
    pub fn open(mut pm: Pmem) -> Result<NvmLog> {
        let heap = &mut pm.heap;
        match heap.u64(ROOT) {
            0 => {
                heap.set_u64(ROOT, MAGIC);
                heap.persist(ROOT, 8);
            }
            MAGIC => {
                recover_split(heap, SPLIT);
                journal::recover(heap, JOURNAL, VERSION)?;
            }
            m => return Err(invalid(format!("the NVM region belongs to another engine (root magic {m:#x})"))),
        }
        let mut e = NvmLog {
            pm,
            tables: Vec::new(),
            mutable: 0,
            levels: Vec::new(),
            version: 0,
            mem_bytes: 0,
            log: Vec::new(),
            committed: 0,
            memtable_bytes: MEMTABLE_BYTES,
            growth: GROWTH,
        };
        e.load_version()?;
        e.drop_build();
        // A table whose creation a crash cut off before its install left a
        // root word in the mutable MemTable naming a reclaimed leaf.
        if e.mutable != 0 {
            let (m, n) = (e.mutable, e.tables.len());
            let heap = e.heap();
            heap.bytes_mut(m + DESC_ROOTS + 8 * n as u64, 8 * (MAX_TABLES - n)).fill(0);
            heap.persist(m + DESC_ROOTS + 8 * n as u64, 8 * (MAX_TABLES - n));
        }
        if e.version == 0 {
            let m = new_desc(e.heap(), 0, 0)?;
            e.install(m, Vec::new(), vec![m], Vec::new())?;
        }
        e.recover_log()
    }

    fn heap(&mut self) -> &mut Heap {
        &mut self.pm.heap
    }

    fn load_version(&mut self) -> Result {
        let heap = &mut self.pm.heap;
        self.version = heap.u64(VERSION);
        if self.version == 0 {
            return Ok(());
        }
        let b = tuple::var_bytes(heap, self.version).to_vec();
        let word = |i: usize| b.get(8 * i..8 * i + 8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let bad = || corrupt("NVM-Log version slot is truncated");
        self.mutable = word(0).ok_or_else(bad)?;
        let n = word(1).ok_or_else(bad)? as usize;
        self.levels = (0..n).map(|i| word(2 + i).ok_or_else(bad)).collect::<Result<_>>()?;
        let dir = decode_directory(b.get(16 + 8 * n..).ok_or_else(bad)?, "NVM-Log")?;
        self.tables = dir.into_iter().map(|t| (t.name, Shape::new(&t.columns))).collect();
        Ok(())
    }

    /// Frees a merge's trees a crash interrupted before its switch (after
    /// the split record and the journal are settled, so they are whole).
    fn drop_build(&mut self) {
        let heap = &mut self.pm.heap;
        let d = heap.u64(BUILD);
        if d == 0 {
            return;
        }
        if !self.levels.contains(&d) {
            let (m, n) = (heap.u64(d + 16), self.tables.len());
            let mut slots = desc_slots(heap, d, n);
            if m != 0 && m != self.mutable {
                slots.extend(desc_slots(heap, m, n));
            }
            for s in slots {
                tuple::free_slot(heap, s);
            }
        }
        heap.set_u64(BUILD, 0);
        heap.persist(BUILD, 8);
    }

    /// Undoes the transaction a crash interrupted, or finishes its frees.
    fn recover_log(mut self) -> Result<NvmLog> {
        let heap = &mut self.pm.heap;
        let mut at = heap.u64(WAL);
        let mut newest_first = Vec::new();
        while at != 0 {
            let u = Undo { at, table: heap.u64(at + 8) as usize, new: heap.u64(at + 16), old: heap.u64(at + 24) };
            if u.table >= MAX_TABLES {
                return Err(corrupt(format!("NVM-Log undo entry at {at} names table {}", u.table)));
            }
            heap.pin(at);
            heap.pin(u.new);
            newest_first.push(u);
            at = heap.u64(at);
        }
        newest_first.reverse();
        self.log = newest_first;
        if self.pm.heap.u64(COMMITTED) == 1 {
            self.finish_commit();
        } else {
            self.abort()?;
        }
        Ok(self)
    }

    /// Writes a version slot and installs it: `pin` are the new slots,
    /// `free` the replaced ones (the old version is added).
    fn install(&mut self, mutable: u64, levels: Vec<u64>, mut pin: Vec<u64>, free: Vec<u64>) -> Result {
        let mut b = mutable.to_le_bytes().to_vec();
        b.extend_from_slice(&(levels.len() as u64).to_le_bytes());
        for l in &levels {
            b.extend_from_slice(&l.to_le_bytes());
        }
        let dir: Vec<Table> = self
            .tables
            .iter()
            .map(|(n, s)| Table { name: n.clone(), columns: s.columns().to_vec(), root: 0 })
            .collect();
        b.extend_from_slice(&encode_directory(&dir));
        let heap = &mut self.pm.heap;
        let v = tuple::new_var(heap, &b)?;
        pin.push(v);
        let old = self.version;
        let entries: Vec<u64> =
            pin.into_iter().chain(free.into_iter().chain((old != 0).then_some(old)).map(|s| s | FREE)).collect();
        journal::install(heap, JOURNAL, VERSION, v, &entries)?;
        (self.version, self.mutable, self.levels) = (v, mutable, levels);
        Ok(())
    }

    fn log_change(&mut self, table: usize, new: u64, old: u64) -> Result {
        let heap = &mut self.pm.heap;
        let at = heap.alloc(64, Component::Log)?;
        for (i, w) in [heap.u64(WAL), table as u64, new, old].into_iter().enumerate() {
            heap.set_u64(at + 8 * i as u64, w);
        }
        heap.persist(at, 32);
        // Linked, then marked persisted (recovery pins a linked entry).
        heap.set_u64(WAL, at);
        heap.persist(WAL, 8);
        heap.persisted(at);
        self.log.push(Undo { at, table, new, old });
        Ok(())
    }

    /// Table 2's insert, update and delete: persist the entry, log its
    /// pointer, mark it persisted, add it to the MemTable.
    fn change(&mut self, table: usize, key: &[u8], value: Option<&[u8]>) -> Result {
        let t = tree(self.mutable, table);
        let e = new_entry(self.heap(), key, value)?;
        let old = t.get(self.heap(), key).unwrap_or(0);
        self.log_change(table, e, old)?;
        self.mem_bytes += entry_bytes(&self.pm.heap, e);
        let heap = self.heap();
        heap.persisted(e);
        if old != 0 {
            t.set(heap, key, e);
            Ok(())
        } else {
            t.insert(heap, key, e)
        }
    }

    fn finish_commit(&mut self) {
        let log = std::mem::take(&mut self.log);
        for u in &log {
            if u.old != 0 {
                tuple::free_slot(self.heap(), u.old);
            }
        }
        self.truncate(&log);
    }

    fn truncate(&mut self, log: &[Undo]) {
        let heap = self.heap();
        for u in log {
            tuple::free_slot(heap, u.at);
        }
        heap.set_u64(WAL, 0);
        heap.set_u64(COMMITTED, 0);
        heap.persist(WAL, 16);
    }

    /// The entry for `key`, newest MemTable first; `None` if no MemTable
    /// has it.
    fn lookup(&mut self, table: usize, key: &[u8]) -> Option<u64> {
        let heap = &mut self.pm.heap;
        if let Some(e) = tree(self.mutable, table).get(heap, key) {
            return Some(e);
        }
        let fk = filter_key(table, key);
        for &d in &self.levels {
            if !has_tree(heap, d, table) {
                continue;
            }
            let (bits, len) = (heap.u64(d), heap.u64(d + 8) as usize);
            heap.touch(bits, len.min(64));
            if bits != 0 && !bloom::may_contain(heap.bytes(bits, len), &fk) {
                continue;
            }
            if let Some(e) = tree(d, table).get(heap, key) {
                return Some(e);
            }
        }
        None
    }

    fn table(&self, table: u32) -> Result<usize> {
        let t = table as usize;
        if t < self.tables.len() {
            Ok(t)
        } else {
            Err(invalid(format!("no table {table}")))
        }
    }

    /// (table, key, entry) of a MemTable, in order.
    fn contents(&mut self, d: u64) -> Vec<BTreeMap<Vec<u8>, u64>> {
        let heap = &mut self.pm.heap;
        (0..self.tables.len())
            .map(|t| {
                let mut m = BTreeMap::new();
                if has_tree(heap, d, t) {
                    tree(d, t).scan(heap, b"", None, false, &mut |_, k, e| {
                        m.insert(k.to_vec(), e);
                        true
                    });
                }
                m
            })
            .collect()
    }

    /// Merges the mutable MemTable into level 1, pushing levels over their
    /// limit down (module documentation), and installs the result.
    fn merge_memtable(&mut self) -> Result {
        let mut incoming = self.contents(self.mutable);
        if incoming.iter().all(BTreeMap::is_empty) {
            return Ok(());
        }
        let n = self.tables.len();
        let (mut free, mut superseded) = (desc_slots(&self.pm.heap, self.mutable, n), Vec::new());
        let mut limit = self.memtable_bytes as u64;
        let mut level = 0;
        loop {
            if self.levels.len() <= level {
                self.levels.push(0);
            }
            limit = limit.saturating_mul(self.growth as u64);
            let d = self.levels[level];
            if d != 0 {
                free.extend(desc_slots(&self.pm.heap, d, n));
                for (t, older) in self.contents(d).into_iter().enumerate() {
                    for (k, e) in older {
                        match incoming[t].get(&k) {
                            Some(_) => superseded.push(e),
                            None => drop(incoming[t].insert(k, e)),
                        }
                    }
                }
            }
            if self.levels[level + 1..].iter().all(|&d| d == 0) {
                let heap = &mut self.pm.heap;
                for m in incoming.iter_mut() {
                    m.retain(|_, e| {
                        let live = heap.u64(*e) & TOMBSTONE == 0;
                        if !live {
                            superseded.push(*e);
                        }
                        live
                    });
                }
            }
            let heap = &self.pm.heap;
            let bytes: usize = incoming.iter().flat_map(|m| m.values()).map(|&e| entry_bytes(heap, e)).sum();
            if bytes as u64 <= limit {
                break;
            }
            level += 1;
        }
        // The build: its descriptor is named by the build word before any
        // of its trees' nodes is persisted.
        let heap = &mut self.pm.heap;
        let mutable = new_desc(heap, n, 0)?;
        let built = new_desc(heap, 0, mutable)?;
        heap.set_u64(BUILD, built);
        heap.persist(BUILD, 8);
        let keys: usize = incoming.iter().map(BTreeMap::len).sum();
        // One slot holds the filter: past 52k keys it has fewer than 10
        // bits per key (more false positives).
        let mut filter = Bloom::with_keys(keys);
        filter.bits.truncate(MAX_ALLOC);
        for (t, m) in incoming.into_iter().enumerate() {
            let sorted: Vec<(Vec<u8>, u64)> = m.into_iter().collect();
            for (k, _) in &sorted {
                filter.add(&filter_key(t, k));
            }
            BTree::bulk_load(heap, built + DESC_ROOTS + 8 * t as u64, SPLIT, &sorted)?;
        }
        let bits = heap.alloc(filter.bits.len(), Component::Index)?;
        heap.write(bits, &filter.bits);
        heap.persist(bits, filter.bits.len());
        heap.set_u64(built, bits);
        heap.set_u64(built + 8, filter.bits.len() as u64);
        heap.persist(built, 16);
        let mut levels = self.levels.clone();
        levels[..level].fill(0);
        levels[level] = if keys == 0 { 0 } else { built };
        while levels.last() == Some(&0) {
            levels.pop();
        }
        let mut pin = desc_slots(heap, mutable, n);
        let built_slots = desc_slots(heap, built, n);
        if keys == 0 {
            free.extend(built_slots);
        } else {
            pin.extend(built_slots);
        }
        free.extend(superseded);
        self.install(mutable, levels, pin, free)?;
        self.mem_bytes = 0;
        let heap = self.heap();
        heap.set_u64(BUILD, 0);
        heap.persist(BUILD, 8);
        Ok(())
    }

    /// Every slot the engine can reach.
    fn reachable(&mut self) -> Vec<u64> {
        let (heap, n) = (&self.pm.heap, self.tables.len());
        let mut out = vec![self.version];
        for d in std::iter::once(self.mutable).chain(self.levels.iter().copied()).filter(|&d| d != 0) {
            out.extend(desc_slots(heap, d, n));
        }
        let mut at = heap.u64(WAL);
        while at != 0 {
            out.push(at);
            at = heap.u64(at);
        }
        for d in std::iter::once(self.mutable).chain(self.levels.clone()).filter(|&d| d != 0) {
            out.extend(self.contents(d).into_iter().flat_map(|m| m.into_values()));
        }
        out
    }
}

impl Store for NvmLog {
    fn name(&self) -> &'static str {
        "nvm-log"
    }

    /// A new table is installed (a new version) before this returns.
    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32> {
        let known = self.tables.iter().map(|(n, s)| (n.as_str(), s.columns()));
        if let Some(i) = existing_table(known, name, columns)? {
            return Ok(i);
        }
        if self.tables.len() == MAX_TABLES || name.len() > 255 || !self.log.is_empty() {
            return Err(invalid(format!(
                "table {name}: at most {MAX_TABLES} tables and 255-byte names, not inside a transaction"
            )));
        }
        let t = self.tables.len();
        self.tables.push((name.into(), Shape::new(columns)));
        // The mutable MemTable gets the table's tree in place; the count
        // and directory change with the new version.
        let m = self.mutable;
        let heap = self.heap();
        BTree::create(heap, m + DESC_ROOTS + 8 * t as u64, SPLIT)?;
        let leaf = tree(m, t).root(heap);
        let levels = self.levels.clone();
        self.install(m, levels, vec![leaf], Vec::new())?;
        Ok(t as u32)
    }

    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let t = self.table(table)?;
        let Some(e) = self.lookup(t, key) else { return Ok(false) };
        match entry_row(self.heap(), e) {
            Some(row) => {
                out.clear();
                out.extend_from_slice(row);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        let t = self.table(table)?;
        self.tables[t].1.split(value)?;
        if key.len() > crate::btree::MAX_KEY {
            return Err(crate::btree::key_too_long(key));
        }
        self.change(t, key, Some(value))
    }

    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        match self.lookup(t, key) {
            Some(e) if entry_row(self.heap(), e).is_some() => {
                self.change(t, key, None)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn scan(
        &mut self,
        table: u32,
        lo: &[u8],
        hi: Option<&[u8]>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result {
        let t = self.table(table)?;
        // Oldest first, so newer entries overwrite older ones.
        let mut found = BTreeMap::new();
        let descs: Vec<u64> = self.levels.iter().rev().copied().chain(std::iter::once(self.mutable)).collect();
        let heap = &mut self.pm.heap;
        for d in descs {
            if !has_tree(heap, d, t) {
                continue;
            }
            tree(d, t).scan(heap, lo, hi, false, &mut |_, k, e| {
                found.insert(k.to_vec(), e);
                true
            });
        }
        let mut found: Vec<(Vec<u8>, u64)> = found.into_iter().collect();
        if reverse {
            found.reverse();
        }
        for (k, e) in found {
            if let Some(row) = entry_row(heap, e) {
                if !visit(&k, row) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn commit(&mut self) -> Result {
        self.committed += 1;
        if !self.log.is_empty() {
            let heap = self.heap();
            heap.set_u64(COMMITTED, 1);
            heap.persist(COMMITTED, 8);
            self.finish_commit();
        }
        if self.mem_bytes >= self.memtable_bytes {
            self.merge_memtable()?;
        }
        Ok(())
    }

    fn abort(&mut self) -> Result {
        let log = std::mem::take(&mut self.log);
        for u in log.iter().rev() {
            let heap = &mut self.pm.heap;
            let key = entry_key(heap, u.new).to_vec();
            let t = tree(self.mutable, u.table);
            if t.get(heap, &key) == Some(u.new) {
                if u.old != 0 {
                    t.set(heap, &key, u.old);
                } else {
                    t.remove(heap, &key);
                }
            }
            tuple::free_slot(heap, u.new);
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

    fn checkpoint(&mut self) -> Result {
        self.merge_memtable()
    }

    fn footprint(&mut self) -> Footprint {
        heap_footprint(&self.pm.heap)
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    fn leaks(&mut self) -> Vec<String> {
        let reachable = self.reachable();
        super::nvm_inp::heap_leaks(&mut self.pm.heap, reachable)
    }

    fn stats(&self) -> Arc<Stats> {
        self.pm.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::log::tests::{all, random_history};
    use crate::pmem::{Evict, Latency, Medium};

    /// As Log's test: merges into several levels with a tiny MemTable and
    /// k = 2, then a restart from the persisted image.
    #[test]
    fn levels_match_a_model_across_merges_and_a_restart() {
        let (pm, _) = Pmem::open(Medium::Simulated, 16 << 20, Latency::default()).expect("pmem");
        let mut e = NvmLog::open(pm).expect("open");
        (e.memtable_bytes, e.growth) = (2048, 2);
        let model = random_history(&mut e);
        assert!(e.levels.iter().filter(|&&d| d != 0).count() >= 2, "MemTables on several levels");
        assert!(e.leaks().is_empty(), "{:?}", e.leaks());
        let mut e = NvmLog::open(e.pm.crash(Evict::Nothing).expect("crash")).expect("recover");
        assert_eq!(all(&mut e), model);
        assert!(e.leaks().is_empty(), "{:?}", e.leaks());
    }
}

//! Log: log-structured updates (NVM study §3.3), after LevelDB.
//!
//! - Changes go to the MemTable (an ordered map in volatile memory) and,
//!   as after images, to a write-ahead log on the file interface written
//!   with group commit ([`crate::wal`]).
//! - Once the MemTable holds `memtable_bytes`, it is merged into level 1's
//!   run, an SSTable file with a sparse index and a Bloom filter. Level i
//!   holds one run of at most `memtable_bytes * k^i` bytes (leveled
//!   compaction with growth factor k): a run over its limit is merged into
//!   the next level down. Tombstones are dropped once no deeper run
//!   exists. The `manifest` names the runs and the first log segment not in
//!   them; it is replaced atomically after the new runs are synced.
//! - A read looks in the MemTable, then level by level in each run whose
//!   Bloom filter admits the key: the read amplification the paper
//!   measures.
//! - Recovery reads the manifest, opens the runs (footers, indexes and
//!   filters only) and replays the log after them into the MemTable.
//!
//! Files (FORMAT.md, "Log files"): `catalog`, `manifest`, `run.<n>`,
//! `wal.<s>`.

use crate::bloom::Bloom;
use crate::pmem::{Pmem, Stats};
use crate::store::{corrupt, existing_table, invalid, Footprint, Result, Store};
use crate::tuple::Shape;
use crate::wal::{put_bytes, read_catalog, segment_of, write_catalog, Cursor, GroupLog};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Default MemTable size that triggers a merge into level 1.
pub const MEMTABLE_BYTES: usize = 4 << 20;
/// Default growth factor k between levels.
pub const GROWTH: usize = 4;
/// Records per block of a run (one index entry each).
const BLOCK_RECORDS: usize = 16;
const RUN_MAGIC: u64 = u64::from_le_bytes(*b"EPLSMRN1");
const FOOTER: usize = 40;

const PUT: u8 = 1;
const DELETE: u8 = 2;

/// A MemTable or run entry: a row, or `None` for a tombstone.
type Entries = Vec<(Vec<u8>, Option<Vec<u8>>)>;
/// A changed key and its MemTable entry before the change (`None`: none).
type UndoEntry = (Vec<u8>, Option<Option<Vec<u8>>>);

/// An SSTable as the engine keeps it open: its sparse index and filter.
struct Run {
    name: String,
    size: u64,
    data_end: u64,
    /// The first key of each block, and the block's offset.
    index: Vec<(Vec<u8>, u64)>,
    bloom: Bloom,
}

/// Table id (big-endian, so a table's keys are contiguous) and key.
fn composite(table: u32, key: &[u8]) -> Vec<u8> {
    let mut c = table.to_be_bytes().to_vec();
    c.extend_from_slice(key);
    c
}

/// Parses a run's records (key, flag, value).
fn parse_records(data: &[u8], file: &str, mut f: impl FnMut(&[u8], Option<&[u8]>) -> bool) -> Result {
    let mut c = Cursor::new(data, file);
    while !c.done() {
        let key = c.bytes()?;
        let flag = c.take(1)?[0];
        let value = c.bytes()?;
        if !f(key, (flag == 1).then_some(value)) {
            break;
        }
    }
    Ok(())
}

pub struct Log {
    pm: Pmem,
    shapes: Vec<(String, Shape)>,
    mem: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    mem_bytes: usize,
    /// The open transaction: each changed key's MemTable entry before it.
    undo: Vec<UndoEntry>,
    txn_log: Vec<u8>,
    wal: GroupLog,
    /// `levels[i]` is level i + 1's run.
    levels: Vec<Option<Run>>,
    /// The first log segment the runs do not hold (the manifest's).
    wal_from: u64,
    next_run: u64,
    pub memtable_bytes: usize,
    pub growth: usize,
}

impl Log {
    pub fn open(pm: Pmem) -> Result<Log> {
        let mut e = Log {
            pm,
            shapes: Vec::new(),
            mem: BTreeMap::new(),
            mem_bytes: 0,
            undo: Vec::new(),
            txn_log: Vec::new(),
            wal: GroupLog::default(),
            levels: Vec::new(),
            wal_from: 0,
            next_run: 0,
            memtable_bytes: MEMTABLE_BYTES,
            growth: GROWTH,
        };
        e.recover()?;
        Ok(e)
    }

    fn recover(&mut self) -> Result {
        self.shapes = read_catalog(&self.pm.fs)?.into_iter().map(|(n, c)| (n, Shape::new(&c))).collect();
        let mut wal_from = 0;
        if let Ok(m) = self.pm.fs.read("manifest") {
            for line in String::from_utf8_lossy(&m).lines() {
                let mut w = line.split(' ');
                match (w.next(), w.next(), w.next()) {
                    (Some("wal"), Some(s), None) => wal_from = s.parse().map_err(|_| corrupt("manifest: bad wal"))?,
                    (Some("run"), Some(level), Some(name)) => {
                        let level: usize = level.parse().map_err(|_| corrupt("manifest: bad level"))?;
                        if self.levels.len() < level {
                            self.levels.resize_with(level, || None);
                        }
                        self.levels[level - 1] = Some(self.open_run(name)?);
                    }
                    _ => return Err(corrupt(format!("manifest: bad line {line:?}"))),
                }
            }
        }
        for name in self.pm.fs.list()? {
            self.next_run = self.next_run.max(segment_of(&name, "run.").map_or(0, |n| n + 1));
        }
        self.wal_from = wal_from;
        for name in self.stale() {
            self.pm.fs.remove(&name)?;
        }
        for (file, block) in self.wal.recover(&self.pm.fs, wal_from)? {
            let mut c = Cursor::new(&block, &file);
            while !c.done() {
                let kind = c.take(1)?[0];
                let ck = c.bytes()?.to_vec();
                let value = match kind {
                    PUT => Some(c.bytes()?.to_vec()),
                    DELETE => None,
                    k => return Err(corrupt(format!("{file}: record kind {k}"))),
                };
                self.mem_insert(ck, value);
            }
        }
        Ok(())
    }

    /// Files that recovery would not read.
    fn stale(&self) -> Vec<String> {
        let wal_from = self.wal_from;
        let runs: Vec<&str> = self.levels.iter().flatten().map(|r| r.name.as_str()).collect();
        let needed = |n: &str| {
            n == "catalog"
                || n == "manifest"
                || runs.contains(&n)
                || segment_of(n, "wal.").is_some_and(|s| s >= wal_from)
        };
        self.pm.fs.list().unwrap_or_default().into_iter().filter(|n| !needed(n)).collect()
    }

    fn open_run(&mut self, name: &str) -> Result<Run> {
        let size = self.pm.fs.size(name).ok_or_else(|| corrupt(format!("manifest names missing {name}")))?;
        if size < FOOTER as u64 {
            return Err(corrupt(format!("{name}: {size} bytes is too short for a run")));
        }
        let mut f = [0u8; FOOTER];
        self.pm.fs.read_at(name, size - FOOTER as u64, &mut f)?;
        let word = |i: usize| u64::from_le_bytes(f[8 * i..8 * i + 8].try_into().unwrap_or_default());
        let (index_at, bloom_at, crc, magic) = (word(0), word(1), word(3) as u32, word(4));
        let tail = size - FOOTER as u64;
        if magic != RUN_MAGIC || index_at > bloom_at || bloom_at > tail {
            return Err(corrupt(format!("{name}: bad footer")));
        }
        let mut meta = vec![0u8; (tail - index_at) as usize];
        self.pm.fs.read_at(name, index_at, &mut meta)?;
        if epochdb::crc32c::checksum(&meta) != crc {
            return Err(corrupt(format!("{name}: index or filter fails its CRC")));
        }
        let (index_bytes, bloom) = meta.split_at((bloom_at - index_at) as usize);
        let mut index = Vec::new();
        let mut c = Cursor::new(index_bytes, name);
        while !c.done() {
            let key = c.bytes()?.to_vec();
            let at = c.take(8)?;
            index.push((key, u64::from_le_bytes(at.try_into().unwrap_or_default())));
        }
        Ok(Run { name: name.into(), size, data_end: index_at, index, bloom: Bloom { bits: bloom.to_vec() } })
    }

    /// Writes `entries` (sorted) as a new run file, synced.
    fn write_run(&mut self, entries: &Entries) -> Result<Run> {
        let name = format!("run.{}", self.next_run);
        self.next_run += 1;
        let (mut data, mut index, mut bloom) = (Vec::new(), Vec::new(), Bloom::with_keys(entries.len()));
        for (i, (k, v)) in entries.iter().enumerate() {
            if i % BLOCK_RECORDS == 0 {
                index.push((k.clone(), data.len() as u64));
            }
            bloom.add(k);
            put_bytes(&mut data, k);
            data.push(v.is_some() as u8);
            put_bytes(&mut data, v.as_deref().unwrap_or_default());
        }
        let index_at = data.len() as u64;
        let mut meta = Vec::new();
        for (k, at) in &index {
            put_bytes(&mut meta, k);
            meta.extend_from_slice(&at.to_le_bytes());
        }
        let bloom_at = index_at + meta.len() as u64;
        meta.extend_from_slice(&bloom.bits);
        let crc = epochdb::crc32c::checksum(&meta);
        data.extend_from_slice(&meta);
        for w in [index_at, bloom_at, entries.len() as u64, crc as u64, RUN_MAGIC] {
            data.extend_from_slice(&w.to_le_bytes());
        }
        // Positional, as the run is read back by offset (a file is opened
        // one way only).
        self.pm.fs.write_at(&name, 0, &data)?;
        self.pm.fs.sync(&name)?;
        Ok(Run { name, size: data.len() as u64, data_end: index_at, index, bloom })
    }

    /// Blocks `[first, last]` of a run.
    fn read_blocks(&mut self, run: &Run, first: usize, last: usize) -> Result<Vec<u8>> {
        let start = run.index[first].1;
        let end = run.index.get(last + 1).map_or(run.data_end, |b| b.1);
        let mut buf = vec![0u8; (end - start) as usize];
        self.pm.fs.read_at(&run.name, start, &mut buf)?;
        Ok(buf)
    }

    /// `ck` in run `level`: `Some(None)` for a tombstone.
    fn run_get(&mut self, level: usize, ck: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        let Some(run) = self.levels[level].take() else { return Ok(None) };
        let mut found = None;
        let block = run.index.partition_point(|(k, _)| k.as_slice() <= ck);
        let r = if run.bloom.may_contain(ck) && block > 0 {
            self.read_blocks(&run, block - 1, block - 1).and_then(|data| {
                parse_records(&data, &run.name, |k, v| {
                    if k == ck {
                        found = Some(v.map(<[u8]>::to_vec));
                    }
                    k < ck
                })
            })
        } else {
            Ok(())
        };
        self.levels[level] = Some(run);
        r.map(|_| found)
    }

    /// Every entry of run `level` with a key in `[lo, hi)`.
    fn run_range(
        &mut self,
        level: usize,
        lo: &[u8],
        hi: &[u8],
        out: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    ) -> Result {
        let Some(run) = self.levels[level].take() else { return Ok(()) };
        let first = run.index.partition_point(|(k, _)| k.as_slice() <= lo).saturating_sub(1);
        let last = run.index.partition_point(|(k, _)| k.as_slice() < hi);
        let r = if last > first {
            self.read_blocks(&run, first, last - 1).and_then(|data| {
                parse_records(&data, &run.name, |k, v| {
                    if k >= lo && k < hi {
                        out.insert(k.to_vec(), v.map(<[u8]>::to_vec));
                    }
                    k < hi
                })
            })
        } else {
            Ok(())
        };
        self.levels[level] = Some(run);
        r
    }

    /// Reads a whole run.
    fn run_entries(&mut self, run: &Run) -> Result<Entries> {
        let mut out = Vec::new();
        if !run.index.is_empty() {
            let data = self.read_blocks(run, 0, run.index.len() - 1)?;
            parse_records(&data, &run.name, |k, v| {
                out.push((k.to_vec(), v.map(<[u8]>::to_vec)));
                true
            })?;
        }
        Ok(out)
    }

    fn mem_insert(&mut self, ck: Vec<u8>, value: Option<Vec<u8>>) -> Option<Option<Vec<u8>>> {
        self.mem_bytes += 48 + ck.len() + value.as_ref().map_or(0, Vec::len);
        self.mem.insert(ck, value)
    }

    fn lookup(&mut self, ck: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.mem.get(ck) {
            return Ok(v.clone());
        }
        for level in 0..self.levels.len() {
            if let Some(v) = self.run_get(level, ck)? {
                return Ok(v);
            }
        }
        Ok(None)
    }

    fn table(&self, table: u32) -> Result<&Shape> {
        self.shapes.get(table as usize).map(|s| &s.1).ok_or_else(|| invalid(format!("no table {table}")))
    }

    /// Merges the MemTable into level 1, pushing runs over their limit down
    /// (module documentation); then installs the new manifest and drops
    /// what it no longer names.
    fn merge_memtable(&mut self) -> Result {
        self.wal.write(&mut self.pm.fs)?;
        if self.mem.is_empty() {
            return Ok(());
        }
        // The MemTable's transactions are all in segments before this one.
        self.wal.segment += 1;
        let wal_from = self.wal.segment;
        let mut incoming: Entries = std::mem::take(&mut self.mem).into_iter().collect();
        self.mem_bytes = 0;
        let mut limit = self.memtable_bytes as u64;
        let mut level = 0;
        loop {
            if self.levels.len() <= level {
                self.levels.push(None);
            }
            limit = limit.saturating_mul(self.growth as u64);
            if let Some(run) = self.levels[level].take() {
                let older = self.run_entries(&run)?;
                let mut merged: BTreeMap<_, _> = older.into_iter().collect();
                merged.extend(incoming);
                incoming = merged.into_iter().collect();
                // Keep the old run's file until the manifest no longer names it.
                self.levels[level] = Some(run);
            }
            if self.levels[level + 1..].iter().all(Option::is_none) {
                incoming.retain(|(_, v)| v.is_some());
            }
            let bytes: u64 =
                incoming.iter().map(|(k, v)| 9 + k.len() as u64 + v.as_ref().map_or(0, |v| v.len() as u64)).sum();
            if bytes <= limit {
                break;
            }
            // Too big for this level: it goes down, and this level empties.
            level += 1;
        }
        let new = if incoming.is_empty() { None } else { Some(self.write_run(&incoming)?) };
        let old: Vec<Run> = self.levels[..=level].iter_mut().filter_map(Option::take).collect();
        self.levels[level] = new;
        let mut manifest = format!("wal {wal_from}\n");
        for (i, r) in self.levels.iter().enumerate() {
            if let Some(r) = r {
                manifest.push_str(&format!("run {} {}\n", i + 1, r.name));
            }
        }
        self.pm.fs.replace("manifest", manifest.as_bytes())?;
        self.wal_from = wal_from;
        drop(old);
        for name in self.stale() {
            self.pm.fs.remove(&name)?;
        }
        Ok(())
    }
}

impl Store for Log {
    fn name(&self) -> &'static str {
        "log"
    }

    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32> {
        if let Some(i) = existing_table(self.shapes.iter().map(|(n, s)| (n.as_str(), s.columns())), name, columns)? {
            return Ok(i);
        }
        self.shapes.push((name.into(), Shape::new(columns)));
        write_catalog(&mut self.pm.fs, self.shapes.iter().map(|(n, s)| (n.as_str(), s.columns())))?;
        Ok(self.shapes.len() as u32 - 1)
    }

    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.table(table)?;
        match self.lookup(&composite(table, key))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        self.table(table)?.split(value)?;
        let ck = composite(table, key);
        self.txn_log.push(PUT);
        put_bytes(&mut self.txn_log, &ck);
        put_bytes(&mut self.txn_log, value);
        let before = self.mem_insert(ck.clone(), Some(value.to_vec()));
        self.undo.push((ck, before));
        Ok(())
    }

    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool> {
        self.table(table)?;
        let ck = composite(table, key);
        if self.lookup(&ck)?.is_none() {
            return Ok(false);
        }
        self.txn_log.push(DELETE);
        put_bytes(&mut self.txn_log, &ck);
        let before = self.mem_insert(ck.clone(), None);
        self.undo.push((ck, before));
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
        self.table(table)?;
        let lo = composite(table, lo);
        let hi = match hi {
            Some(h) => composite(table, h),
            None => (table as u64 + 1).to_be_bytes()[4..].to_vec(),
        };
        // Oldest first, so newer entries overwrite older ones.
        let mut rows = BTreeMap::new();
        for level in (0..self.levels.len()).rev() {
            self.run_range(level, &lo, &hi, &mut rows)?;
        }
        rows.extend(self.mem.range(lo.clone()..hi.clone()).map(|(k, v)| (k.clone(), v.clone())));
        let live = rows.iter().filter_map(|(k, v)| Some((&k[4..], v.as_deref()?)));
        if reverse {
            for (k, v) in live.rev() {
                if !visit(k, v) {
                    break;
                }
            }
        } else {
            for (k, v) in live {
                if !visit(k, v) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn commit(&mut self) -> Result {
        self.undo.clear();
        if self.wal.commit(&mut self.txn_log) {
            self.wal.write(&mut self.pm.fs)?;
        }
        if self.mem_bytes >= self.memtable_bytes {
            self.merge_memtable()?;
        }
        Ok(())
    }

    fn abort(&mut self) -> Result {
        self.txn_log.clear();
        while let Some((ck, before)) = self.undo.pop() {
            match before {
                Some(v) => self.mem.insert(ck, v),
                None => self.mem.remove(&ck),
            };
        }
        Ok(())
    }

    fn durable(&self) -> u64 {
        self.wal.durable()
    }

    fn committed(&self) -> u64 {
        self.wal.committed()
    }

    fn flush(&mut self) -> Result {
        self.wal.write(&mut self.pm.fs)
    }

    fn checkpoint(&mut self) -> Result {
        self.merge_memtable()
    }

    fn footprint(&mut self) -> Footprint {
        let runs = self.levels.iter().flatten();
        let fs = &self.pm.fs;
        Footprint {
            table: runs.clone().map(|r| r.data_end).sum::<u64>() + self.mem_bytes as u64,
            index: runs.map(|r| r.size - r.data_end).sum(),
            log: fs.bytes(|n| n.starts_with("wal.")),
            checkpoint: 0,
            other: fs.bytes(|n| n == "catalog" || n == "manifest"),
        }
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    fn leaks(&mut self) -> Vec<String> {
        self.stale().into_iter().map(|n| format!("file {n} is not needed")).collect()
    }

    fn stats(&self) -> Arc<Stats> {
        self.pm.stats.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pmem::{Evict, Latency, Medium};

    pub(crate) fn all(e: &mut dyn Store) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut got = BTreeMap::new();
        e.scan(0, b"", None, false, &mut |k, v| {
            got.insert(k.to_vec(), v.to_vec());
            true
        })
        .expect("scan");
        got
    }

    /// 4,000 random puts and deletes of 500 keys in table 0, each its own
    /// transaction, checked against a model with a get after each and a
    /// reverse range scan at the end; returns the model.
    pub(crate) fn random_history(e: &mut dyn Store) -> BTreeMap<Vec<u8>, Vec<u8>> {
        e.create_table("t", &[]).expect("table");
        let mut model = BTreeMap::new();
        let mut x = 7u64;
        for i in 0..4000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("k{:04}", x % 500).into_bytes();
            if x.is_multiple_of(4) {
                assert_eq!(e.delete(0, &key).expect("delete"), model.remove(&key).is_some());
            } else {
                let v = i.to_le_bytes().repeat(1 + (x % 5) as usize);
                e.put(0, &key, &v).expect("put");
                model.insert(key.clone(), v);
            }
            e.commit().expect("commit");
            let mut out = Vec::new();
            let probe = format!("k{:04}", (x >> 20) % 500).into_bytes();
            assert_eq!(e.get(0, &probe, &mut out).expect("get"), model.contains_key(&probe));
        }
        assert_eq!(all(e), model);
        let mut first = None;
        e.scan(0, b"k0100", Some(b"k0400"), true, &mut |k, _| {
            first = Some(k.to_vec());
            false
        })
        .expect("scan");
        assert_eq!(first, model.range(b"k0100".to_vec()..b"k0400".to_vec()).next_back().map(|(k, _)| k.clone()));
        model
    }

    /// Many MemTable merges with a tiny MemTable and k = 2, so runs are
    /// pushed several levels down and tombstones meet older values; then a
    /// restart from the synced files.
    #[test]
    fn levels_match_a_model_across_merges_and_a_restart() {
        let (pm, _) = Pmem::open(Medium::Simulated, 8 << 20, Latency::default()).expect("pmem");
        let mut e = Log::open(pm).expect("open");
        (e.memtable_bytes, e.growth) = (2048, 2);
        let model = random_history(&mut e);
        assert!(e.levels.iter().flatten().count() >= 2, "runs on several levels");
        e.flush().expect("flush");
        let mut e = Log::open(e.pm.crash(Evict::Nothing).expect("crash")).expect("recover");
        assert_eq!(all(&mut e), model);
        assert!(e.leaks().is_empty(), "{:?}", e.leaks());
    }
}

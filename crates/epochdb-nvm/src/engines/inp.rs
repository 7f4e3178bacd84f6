//! InP: the traditional in-place-update engine (NVM study §3.1), after
//! VoltDB. NVM is used as if it were DRAM plus a disk:
//!
//! - tuples (fixed slots, fields over 8 bytes in variable slots) and B+tree
//!   indexes live in memory from the allocator interface that the engine
//!   does not rely on after a restart;
//! - a write-ahead log on the file interface gets, per change, the after
//!   image (insert), before and after images (update) or before image
//!   (delete), and is written with group commit: committed transactions
//!   become durable together when the group's block is appended and
//!   fsynced;
//! - every `checkpoint_interval` the executor writes a gzip-compressed
//!   checkpoint of all tables, then drops the log before it;
//! - recovery loads the newest checkpoint, replays the log after it, and
//!   rebuilds every index on the way, so it takes longer the more
//!   transactions ran since the checkpoint (§5.4).
//!
//! Files (FORMAT.md, "InP files"): `catalog`, `checkpoint.<s>`, `wal.<s>`.
//! A checkpoint named s holds every transaction in the log segments before
//! s.

use crate::pmem::{Heap, Pmem, Stats};
use crate::store::{corrupt, heap_footprint, Footprint, Result, Store};
use crate::tuple::{self, Catalog};
use crate::wal::{put_bytes, read_catalog, segment_of, write_catalog, Cursor, GroupLog};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default seconds between checkpoints.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);
/// The split record of the volatile trees (they never recover it).
const SPLIT: u64 = crate::pmem::ROOT;

const INSERT: u8 = 1;
const UPDATE: u8 = 2;
const DELETE: u8 = 3;

enum Undo {
    Inserted(u32, Vec<u8>),
    Replaced(u32, Vec<u8>, Vec<u8>),
    Deleted(u32, Vec<u8>, Vec<u8>),
}

pub struct Inp {
    pm: Pmem,
    /// Volatile memory for tuples and indexes.
    heap: Heap,
    catalog: Catalog,
    undo: Vec<Undo>,
    /// The open transaction's log records.
    txn_log: Vec<u8>,
    wal: GroupLog,
    last_checkpoint: Instant,
    pub checkpoint_interval: Duration,
    scratch: Vec<u8>,
}

impl Inp {
    pub fn open(pm: Pmem) -> Result<Inp> {
        let mut heap = pm.volatile_heap();
        let catalog = Catalog::create(&mut heap, SPLIT + 8, SPLIT + 64)?;
        let mut e = Inp {
            pm,
            heap,
            catalog,
            undo: Vec::new(),
            txn_log: Vec::new(),
            wal: GroupLog::default(),
            last_checkpoint: Instant::now(),
            checkpoint_interval: CHECKPOINT_INTERVAL,
            scratch: Vec::new(),
        };
        e.recover()?;
        Ok(e)
    }

    fn recover(&mut self) -> Result {
        // A checkpoint or catalog a crash left half written.
        for name in self.pm.fs.list()? {
            if name.ends_with(".tmp") {
                self.pm.fs.remove(&name)?;
            }
        }
        for (name, cols) in read_catalog(&self.pm.fs)? {
            self.catalog.table(&mut self.heap, &name, &cols)?;
        }
        let files = self.pm.fs.list()?;
        let checkpoint = files.iter().filter_map(|n| segment_of(n, "checkpoint.")).max();
        if let Some(s) = checkpoint {
            let name = format!("checkpoint.{s}");
            let mut body = Vec::new();
            flate2::read::GzDecoder::new(&self.pm.fs.read(&name)?[..]).read_to_end(&mut body)?;
            let mut c = Cursor::new(&body, &name);
            while !c.done() {
                let table = c.u32()?;
                let (key, value) = (c.bytes()?, c.bytes()?);
                self.raw_put(table, key, value)?;
            }
        }
        let start = checkpoint.unwrap_or(0);
        self.drop_before(start)?;
        for (file, block) in self.wal.recover(&self.pm.fs, start)? {
            self.replay(&block, &file)?;
        }
        Ok(())
    }

    fn replay(&mut self, block: &[u8], file: &str) -> Result {
        let mut c = Cursor::new(block, file);
        while !c.done() {
            let kind = c.take(1)?[0];
            let table = c.u32()?;
            let key = c.bytes()?;
            match kind {
                INSERT => self.raw_put(table, key, c.bytes()?).map(drop)?,
                UPDATE => {
                    let _before = c.bytes()?;
                    self.raw_put(table, key, c.bytes()?).map(drop)?
                }
                DELETE => {
                    let _before = c.bytes()?;
                    self.raw_delete(table, key)?;
                }
                k => return Err(corrupt(format!("{file}: record kind {k}"))),
            }
        }
        Ok(())
    }

    /// Writes `key = value` in memory; returns the old value.
    fn raw_put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let info = self.catalog.get(table)?.clone();
        let heap = &mut self.heap;
        let Some(t) = info.tree.get(heap, key) else {
            let t = tuple::write(heap, &info.shape, key, value)?;
            tuple::mark_persisted(heap, &info.shape, t);
            info.tree.insert(heap, key, t)?;
            return Ok(None);
        };
        let mut old = Vec::new();
        tuple::read(heap, &info.shape, t, &mut old);
        let k = tuple::key_len(heap, t);
        for (i, f) in info.shape.split(value)?.into_iter().enumerate() {
            let at = tuple::field(t, k, i);
            if info.shape.inline(i) {
                heap.set_u64(at, tuple::inline_word(f));
                continue;
            }
            let v = heap.u64(at);
            if heap.slot_size(v) >= 8 + f.len() {
                // In place, the engine's namesake.
                heap.set_u64(v, f.len() as u64);
                heap.write(v + 8, f);
            } else {
                let new = tuple::new_var(heap, f)?;
                heap.persisted(new);
                heap.set_u64(at, new);
                heap.free(v);
            }
        }
        Ok(Some(old))
    }

    fn raw_delete(&mut self, table: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let info = self.catalog.get(table)?.clone();
        let Some(t) = info.tree.remove(&mut self.heap, key) else { return Ok(None) };
        let mut old = Vec::new();
        tuple::read(&mut self.heap, &info.shape, t, &mut old);
        tuple::free(&mut self.heap, &info.shape, t);
        Ok(Some(old))
    }

    fn record(&mut self, kind: u8, table: u32, key: &[u8], images: &[&[u8]]) {
        self.txn_log.push(kind);
        self.txn_log.extend_from_slice(&table.to_le_bytes());
        put_bytes(&mut self.txn_log, key);
        for i in images {
            put_bytes(&mut self.txn_log, i);
        }
    }

    fn write_group(&mut self) -> Result {
        self.wal.write(&mut self.pm.fs)
    }

    /// Writes a checkpoint of every table, then drops the log it covers.
    fn write_checkpoint(&mut self) -> Result {
        self.write_group()?;
        self.wal.segment += 1;
        let s = self.wal.segment;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        for (table, info) in self.catalog.tables.clone().iter().enumerate() {
            let mut rows = Vec::new();
            info.tree.scan(&mut self.heap, b"", None, false, &mut |heap, k, t| {
                let mut v = Vec::new();
                tuple::read(heap, &info.shape, t, &mut v);
                rows.push((k.to_vec(), v));
                true
            });
            for (k, v) in rows {
                self.scratch.clear();
                self.scratch.extend_from_slice(&(table as u32).to_le_bytes());
                put_bytes(&mut self.scratch, &k);
                put_bytes(&mut self.scratch, &v);
                gz.write_all(&self.scratch)?;
            }
        }
        self.pm.fs.replace(&format!("checkpoint.{s}"), &gz.finish()?)?;
        self.drop_before(s)?;
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// Deletes the checkpoints and log segments that checkpoint `s` covers
    /// (also at recovery: a crash may come between install and delete).
    fn drop_before(&mut self, s: u64) -> Result {
        for name in self.pm.fs.list()? {
            let old = segment_of(&name, "checkpoint.").or_else(|| segment_of(&name, "wal.")).is_some_and(|x| x < s);
            if old {
                self.pm.fs.remove(&name)?;
            }
        }
        Ok(())
    }
}

impl Store for Inp {
    fn name(&self) -> &'static str {
        "inp"
    }

    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32> {
        let known = self.catalog.tables.len();
        let id = self.catalog.table(&mut self.heap, name, columns)?;
        if self.catalog.tables.len() > known {
            let tables = self.catalog.tables.iter().map(|t| (t.name.as_str(), t.shape.columns()));
            write_catalog(&mut self.pm.fs, tables)?;
        }
        Ok(id)
    }

    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let info = self.catalog.get(table)?;
        Ok(info.get_row(&mut self.heap, key, out))
    }

    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        match self.raw_put(table, key, value)? {
            None => {
                self.record(INSERT, table, key, &[value]);
                self.undo.push(Undo::Inserted(table, key.to_vec()));
            }
            Some(old) => {
                self.record(UPDATE, table, key, &[&old, value]);
                self.undo.push(Undo::Replaced(table, key.to_vec(), old));
            }
        }
        Ok(())
    }

    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool> {
        let Some(old) = self.raw_delete(table, key)? else { return Ok(false) };
        self.record(DELETE, table, key, &[&old]);
        self.undo.push(Undo::Deleted(table, key.to_vec(), old));
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
        self.catalog.get(table)?.scan_rows(&mut self.heap, lo, hi, reverse, visit);
        Ok(())
    }

    fn commit(&mut self) -> Result {
        self.undo.clear();
        if self.wal.commit(&mut self.txn_log) {
            self.write_group()?;
        }
        if self.last_checkpoint.elapsed() >= self.checkpoint_interval {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    fn abort(&mut self) -> Result {
        self.txn_log.clear();
        while let Some(u) = self.undo.pop() {
            match u {
                Undo::Inserted(t, k) => drop(self.raw_delete(t, &k)?),
                Undo::Replaced(t, k, old) | Undo::Deleted(t, k, old) => drop(self.raw_put(t, &k, &old)?),
            }
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
        self.write_group()
    }

    fn checkpoint(&mut self) -> Result {
        self.write_checkpoint()
    }

    fn footprint(&mut self) -> Footprint {
        // The heap holds tables and indexes; the log and checkpoints are files.
        let heap = heap_footprint(&self.heap);
        let fs = &self.pm.fs;
        Footprint {
            log: fs.bytes(|n| n.starts_with("wal.")),
            checkpoint: fs.bytes(|n| n.starts_with("checkpoint.")),
            other: heap.other + fs.bytes(|n| n == "catalog"),
            ..heap
        }
    }

    fn stats(&self) -> Arc<Stats> {
        self.pm.stats.clone()
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    /// Files recovery would not read: all but the catalog, the newest
    /// checkpoint, and the log from it on.
    fn leaks(&mut self) -> Vec<String> {
        let files = self.pm.fs.list().unwrap_or_default();
        let s = files.iter().filter_map(|n| segment_of(n, "checkpoint.")).max().unwrap_or(0);
        let needed = |n: &str| {
            n == "catalog" || segment_of(n, "checkpoint.") == Some(s) || segment_of(n, "wal.").is_some_and(|w| w >= s)
        };
        files.into_iter().filter(|n| !needed(n)).map(|n| format!("file {n} is not needed")).collect()
    }
}

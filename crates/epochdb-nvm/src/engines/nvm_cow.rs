//! NVM-CoW: shadow paging on persistent memory (NVM study §4.2, Table 2),
//! the [`Medium`] that runs the engine of [`super::cow`] on the allocator
//! interface:
//!
//! - the copy-on-write B+tree's pages are 4 KiB NVM slots, persisted (only
//!   their used bytes) when their group commits, with no file system and
//!   no page cache in between;
//! - a leaf stores an 8-byte non-volatile pointer to the tuple, not the
//!   tuple: an update persists a new copy of the tuple and points the dirty
//!   directory at it, so only the path of small pages is copied;
//! - the master record is one word of the root object pointing at the
//!   directory slot (every table's root), switched with one atomic store.
//!
//! Slot states make the space crash-safe. Everything a group allocates
//! stays "allocated" until its master switch, so a crash before the switch
//! leaves only slots that the allocator reclaims by itself. The switch's
//! other half (marking the group's slots persisted, freeing the pages and
//! tuples it replaced) is written first as an install journal
//! ([`crate::journal`]); recovery redoes it when the master already names
//! the group's directory, and drops it otherwise. That is all recovery
//! does.

use super::cow::{decode_directory, encode_directory, Medium, Table};
use crate::cowtree::{used_ranges, Backend, PAGE};
use crate::journal::{self, FREE};
use crate::pmem::{Component, Heap, Pmem, ROOT};
use crate::store::{heap_footprint, invalid, Footprint, Result};
use crate::tuple;
use std::collections::HashSet;

const MAGIC: u64 = u64::from_le_bytes(*b"NVM-COW1");
/// Root object words: the master record, and the group journal.
const MASTER: u64 = ROOT + 8;
const JOURNAL: u64 = ROOT + 16;

pub struct NvmPages {
    pm: Pmem,
    /// Tuples the open transaction created, and those it replaced or
    /// removed.
    txn_new: Vec<u64>,
    txn_old: Vec<u64>,
    /// The same for the open group's committed transactions.
    group_new: HashSet<u64>,
    group_old: Vec<u64>,
}

fn ptr(stored: &[u8]) -> u64 {
    u64::from_le_bytes(stored.try_into().unwrap_or_default())
}

impl NvmPages {
    /// Opens the engine's NVM: finishes or drops a group journal a crash
    /// left, and returns the current directory.
    pub fn open(mut pm: Pmem) -> Result<(NvmPages, Vec<Table>)> {
        let heap = &mut pm.heap;
        match heap.u64(ROOT) {
            0 => {
                heap.set_u64(ROOT, MAGIC);
                heap.persist(ROOT, 8);
            }
            MAGIC => journal::recover(heap, JOURNAL, MASTER)?,
            m => return Err(invalid(format!("the NVM region belongs to another engine (root magic {m:#x})"))),
        }
        let dir = heap.u64(MASTER);
        let tables = if dir == 0 { Vec::new() } else { decode_directory(tuple::var_bytes(heap, dir), "NVM-CoW")? };
        let pages =
            NvmPages { pm, txn_new: Vec::new(), txn_old: Vec::new(), group_new: HashSet::new(), group_old: Vec::new() };
        Ok((pages, tables))
    }

    fn heap(&mut self) -> &mut Heap {
        &mut self.pm.heap
    }
}

impl Backend for NvmPages {
    fn page(&mut self, id: u64) -> Result<&mut [u8]> {
        let heap = self.heap();
        // A visit reads the header and a binary search's few lines.
        heap.touch(id, 128);
        Ok(heap.bytes_mut(id, PAGE))
    }

    fn alloc(&mut self) -> Result<u64> {
        self.heap().alloc(PAGE, Component::Index)
    }

    fn free(&mut self, id: u64) {
        self.heap().free(id);
    }
}

impl Medium for NvmPages {
    fn name(&self) -> &'static str {
        "nvm-cow"
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    /// Persists a copy of the row (Table 2: "sync tuple with NVM"); the
    /// leaf gets its pointer.
    fn encode_row(&mut self, row: &[u8], out: &mut Vec<u8>) -> Result {
        let t = tuple::new_var(self.heap(), row)?;
        self.txn_new.push(t);
        out.clear();
        out.extend_from_slice(&t.to_le_bytes());
        Ok(())
    }

    fn decode_row(&mut self, stored: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(tuple::var_bytes(self.heap(), ptr(stored)));
    }

    fn retire_row(&mut self, stored: &[u8]) {
        self.txn_old.push(ptr(stored));
    }

    /// A committed transaction's tuples join the group; a copy the group
    /// itself made and a later transaction replaced is free at once (no
    /// committed directory names it).
    fn end_txn(&mut self, commit: bool) {
        let (new, old) = (std::mem::take(&mut self.txn_new), std::mem::take(&mut self.txn_old));
        if !commit {
            for t in new {
                self.heap().free(t);
            }
            return;
        }
        self.group_new.extend(new);
        for t in old {
            if self.group_new.remove(&t) {
                self.heap().free(t);
            } else {
                self.group_old.push(t);
            }
        }
    }

    /// Table 2's commit of a batch: persist the dirty directory's pages and
    /// a directory slot, write the group journal, switch the master, then
    /// apply the journal and drop it.
    fn commit_group(&mut self, pages: Vec<u64>, replaced: Vec<u64>, tables: &[Table]) -> Result {
        let heap = &mut self.pm.heap;
        for &id in &pages {
            for (at, len) in used_ranges(heap.bytes(id, PAGE)) {
                heap.persist(id + at as u64, len);
            }
        }
        let dir = tuple::new_var(heap, &encode_directory(tables))?;
        let old_dir = heap.u64(MASTER);
        let mut entries: Vec<u64> = pages.into_iter().chain(self.group_new.drain()).collect();
        entries.push(dir);
        let old = replaced.into_iter().chain(self.group_old.drain(..)).chain((old_dir != 0).then_some(old_dir));
        entries.extend(old.map(|s| s | FREE));
        journal::install(heap, JOURNAL, MASTER, dir, &entries)
    }

    fn recovered(&mut self, _: &[u64]) {}

    fn footprint(&self, _: &[u64], _: usize) -> Footprint {
        heap_footprint(&self.pm.heap)
    }

    fn leaks(&mut self, mut pages: Vec<u64>, rows: Vec<Vec<u8>>) -> Vec<String> {
        pages.extend(rows.iter().map(|r| ptr(r)));
        let dir = self.pm.heap.u64(MASTER);
        pages.extend((dir != 0).then_some(dir));
        super::nvm_inp::heap_leaks(&mut self.pm.heap, pages)
    }
}

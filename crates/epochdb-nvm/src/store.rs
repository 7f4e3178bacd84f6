//! The storage-engine trait of the testbed (NVM study §3, Fig. 2): what a
//! partition's executor calls while it runs one transaction at a time.
//!
//! Every change applies at once (the executor reads its own writes); the
//! engine keeps what it needs to undo them, and `commit` makes them durable
//! (or, for engines with group commit, queues them to become durable with
//! their group: see [`Store::durable`]).

use crate::pmem::{Pmem, Stats};
use std::io;
use std::sync::Arc;

pub type Result<T = ()> = io::Result<T>;

/// A table's row shape: the sizes of its fixed-size columns, or empty for
/// values that are one variable-length field.
pub type Columns = Vec<u16>;

/// Bytes of storage by component (§5.3, Fig. 13): the report's type, so
/// that `bench nvm --json` writes what the engines measured.
pub use epochdb_workloads::report::Footprint;

/// Allocator memory's footprint: its persisted slots by owner.
pub fn heap_footprint(heap: &crate::pmem::Heap) -> Footprint {
    let ([table, index, log, other], _) = heap.footprint();
    Footprint { table, index, log, checkpoint: 0, other }
}

pub trait Store: Send {
    /// The engine's name (`nvm-inp`, ...).
    fn name(&self) -> &'static str;

    /// Creates table `name`, or opens it after a restart (then `columns`
    /// must match).
    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32>;

    /// Copies `key`'s value into `out`; false if absent.
    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;

    /// Writes `key = value`, inserting or updating.
    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result;

    /// Deletes `key`; false if absent.
    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool>;

    /// Visits rows with keys in `[lo, hi)`, ascending or descending, until
    /// `visit` returns false.
    fn scan(
        &mut self,
        table: u32,
        lo: &[u8],
        hi: Option<&[u8]>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result;

    /// Ends the transaction: its changes are durable on return, or queued
    /// for their group commit.
    fn commit(&mut self) -> Result;

    /// Undoes the transaction's changes.
    fn abort(&mut self) -> Result;

    /// Transactions committed since open whose changes are durable. Equal
    /// to the commit count unless the engine commits in groups.
    fn durable(&self) -> u64;

    /// Transactions committed since open.
    fn committed(&self) -> u64;

    /// Makes every committed transaction durable now (ends a group early).
    fn flush(&mut self) -> Result {
        Ok(())
    }

    /// Does the engine's periodic background work now: InP's checkpoint,
    /// the LSM engines' MemTable flush and compaction. Tests call it to
    /// crash in the middle of it.
    fn checkpoint(&mut self) -> Result {
        Ok(())
    }

    fn footprint(&mut self) -> Footprint;

    /// The partition's NVM (tests crash it).
    fn pmem(&self) -> &Pmem;

    /// Storage nothing can reach any more: persistent memory slots that are
    /// persisted but unreachable, or files no recovery would read. Tests
    /// call it after recovery; it may reclaim allocated-but-unpersisted
    /// slots first.
    fn leaks(&mut self) -> Vec<String>;

    fn stats(&self) -> Arc<Stats>;
}

/// The id of table `name` among `known` (name, columns), if it exists; an
/// error if it exists with other columns.
pub fn existing_table<'t>(
    known: impl Iterator<Item = (&'t str, &'t [u16])>,
    name: &str,
    columns: &[u16],
) -> Result<Option<u32>> {
    for (i, (n, c)) in known.enumerate() {
        if n == name {
            if c != columns {
                return Err(invalid(format!("table {name} exists with other columns")));
            }
            return Ok(Some(i as u32));
        }
    }
    Ok(None)
}

/// An error for input the engine refuses.
pub fn invalid(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, m.into())
}

/// An error for stored bytes that do not parse.
pub fn corrupt(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

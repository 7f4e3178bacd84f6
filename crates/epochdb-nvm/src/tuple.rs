//! Tuples and the table catalog in a [`Heap`], as the in-place engines
//! store them (NVM study §3.1, §4.1): a tuple lives in a fixed-size slot;
//! a field of up to 8 bytes is inline, a larger one lives in its own
//! variable-length slot whose non-volatile pointer fills the field.
//!
//! Tuple slot: a header word (key length, field count), the key padded to
//! 8 bytes, then one word per field. Variable slot: a length word, then the
//! bytes. Catalog slot: a count word, then 256-byte table entries (root
//! word of the table's B+tree, column count, name, column sizes).
//! FORMAT.md, "NVM tuples", has the byte layouts.

use crate::btree::{self, BTree, MAX_KEY};
use crate::pmem::{Component, Heap, SlotState};
use crate::store::{corrupt, existing_table, invalid, Columns, Result};
use std::sync::Arc;

/// A table's row shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    columns: Columns,
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl Shape {
    pub fn new(columns: &[u16]) -> Shape {
        Shape { columns: columns.to_vec() }
    }

    pub fn columns(&self) -> &[u16] {
        &self.columns
    }

    pub fn fields(&self) -> usize {
        self.columns.len().max(1)
    }

    pub fn inline(&self, field: usize) -> bool {
        self.columns.get(field).is_some_and(|&c| c <= 8)
    }

    /// `value` cut into its fields.
    pub fn split<'v>(&self, value: &'v [u8]) -> Result<Vec<&'v [u8]>> {
        if self.columns.is_empty() {
            return Ok(vec![value]);
        }
        let want: usize = self.columns.iter().map(|&c| c as usize).sum();
        if value.len() != want {
            return Err(invalid(format!("a {}-byte row for a {want}-byte schema", value.len())));
        }
        let mut at = 0;
        Ok(self
            .columns
            .iter()
            .map(|&c| {
                at += c as usize;
                &value[at - c as usize..at]
            })
            .collect())
    }

    fn slot_size(&self, key: &[u8]) -> usize {
        8 + pad8(key.len()) + 8 * self.fields()
    }
}

/// Offset of field `i` of a tuple whose key is `key_len` bytes.
pub fn field(tuple: u64, key_len: usize, i: usize) -> u64 {
    tuple + 8 + pad8(key_len) as u64 + 8 * i as u64
}

pub fn key_len(heap: &Heap, tuple: u64) -> usize {
    (heap.u64(tuple) & 0xff) as usize
}

pub fn key(heap: &Heap, tuple: u64) -> &[u8] {
    heap.bytes(tuple + 8, key_len(heap, tuple))
}

/// The word a field of `bytes` stores inline.
pub fn inline_word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

/// A variable slot holding `bytes`, persisted (state: allocated).
pub fn new_var(heap: &mut Heap, bytes: &[u8]) -> Result<u64> {
    let v = heap.alloc(8 + bytes.len(), Component::Table)?;
    heap.set_u64(v, bytes.len() as u64);
    heap.write(v + 8, bytes);
    heap.persist(v, 8 + bytes.len());
    Ok(v)
}

pub fn var_bytes(heap: &mut Heap, v: u64) -> &[u8] {
    let len = heap.u64(v) as usize;
    heap.touch(v, 8 + len);
    heap.bytes(v + 8, len)
}

/// Writes a new tuple and its variable slots and persists them all (the
/// slots stay in the allocated state: see [`mark_persisted`]).
pub fn write(heap: &mut Heap, shape: &Shape, key: &[u8], value: &[u8]) -> Result<u64> {
    if key.len() > MAX_KEY {
        return Err(btree::key_too_long(key));
    }
    let fields = shape.split(value)?;
    let t = heap.alloc(shape.slot_size(key), Component::Table)?;
    heap.set_u64(t, key.len() as u64 | (fields.len() as u64) << 8);
    heap.write(t + 8, key);
    for (i, f) in fields.iter().enumerate() {
        let word = if shape.inline(i) { inline_word(f) } else { new_var(heap, f)? };
        heap.set_u64(field(t, key.len(), i), word);
    }
    heap.persist(t, shape.slot_size(key));
    Ok(t)
}

/// The tuple's variable slots.
pub fn vars(heap: &Heap, shape: &Shape, t: u64) -> Vec<u64> {
    let k = key_len(heap, t);
    (0..shape.fields()).filter(|&i| !shape.inline(i)).map(|i| heap.u64(field(t, k, i))).collect()
}

/// Marks a written tuple and its variable slots persisted.
pub fn mark_persisted(heap: &mut Heap, shape: &Shape, t: u64) {
    for v in vars(heap, shape, t) {
        heap.persisted(v);
    }
    heap.persisted(t);
}

/// Frees a tuple and its variable slots (those not already free, so undo
/// and redo of frees can run twice).
pub fn free(heap: &mut Heap, shape: &Shape, t: u64) {
    for v in vars(heap, shape, t) {
        free_slot(heap, v);
    }
    free_slot(heap, t);
}

pub fn free_slot(heap: &mut Heap, s: u64) {
    if heap.state(s) != SlotState::Unallocated {
        heap.free(s);
    }
}

/// Copies the tuple's value into `out`.
pub fn read(heap: &mut Heap, shape: &Shape, t: u64, out: &mut Vec<u8>) {
    out.clear();
    let k = key_len(heap, t);
    heap.touch(t, 8 + pad8(k) + 8 * shape.fields());
    for i in 0..shape.fields() {
        let w = heap.u64(field(t, k, i));
        if shape.inline(i) {
            out.extend_from_slice(&w.to_le_bytes()[..shape.columns[i] as usize]);
        } else {
            out.extend_from_slice(var_bytes(heap, w));
        }
    }
}

/// A table as the catalog knows it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub name: String,
    pub shape: Shape,
    pub tree: BTree,
}

impl TableInfo {
    /// Copies `key`'s row into `out`; false if absent.
    pub fn get_row(&self, heap: &mut Heap, key: &[u8], out: &mut Vec<u8>) -> bool {
        match self.tree.get(heap, key) {
            Some(t) => {
                read(heap, &self.shape, t, out);
                true
            }
            None => false,
        }
    }

    /// Visits the rows with keys in `[lo, hi)` in key order (descending
    /// with `reverse`) until `visit` returns false.
    pub fn scan_rows(
        &self,
        heap: &mut Heap,
        lo: &[u8],
        hi: Option<&[u8]>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) {
        let mut row = Vec::new();
        self.tree.scan(heap, lo, hi, reverse, &mut |heap, k, t| {
            read(heap, &self.shape, t, &mut row);
            visit(k, &row)
        });
    }
}

const ENTRY: u64 = 256;
const ENTRIES: u64 = 64;
const MAX_TABLES: usize = 31;
const MAX_NAME: usize = 63;
const MAX_COLUMNS: usize = 88;
/// Bytes of the catalog slot.
pub const CATALOG: usize = (ENTRIES + ENTRY * MAX_TABLES as u64) as usize;

/// The tables of a heap, in a persisted catalog slot. Entries are shared
/// (`Arc`), so an engine holds one across calls that borrow it mutably
/// without copying it on every write.
pub struct Catalog {
    pub slot: u64,
    pub tables: Vec<Arc<TableInfo>>,
    split_at: u64,
}

impl Catalog {
    /// A new, empty catalog whose pointer is stored at `link_at`.
    ///
    /// Here and for a new table's first leaf, a slot is linked before it is
    /// marked persisted, and [`Catalog::load`] marks one a crash left in
    /// between: a persisted slot is never unreachable (a leak), and a
    /// reachable one is never reclaimed.
    pub fn create(heap: &mut Heap, link_at: u64, split_at: u64) -> Result<Catalog> {
        let slot = heap.alloc(CATALOG, Component::Other)?;
        heap.set_u64(slot, 0);
        heap.persist(slot, 8);
        heap.set_u64(link_at, slot);
        heap.persist(link_at, 8);
        heap.persisted(slot);
        Ok(Catalog { slot, tables: Vec::new(), split_at })
    }

    pub fn load(heap: &mut Heap, slot: u64, split_at: u64) -> Result<Catalog> {
        heap.pin(slot);
        let n = heap.u64(slot) as usize;
        if n > MAX_TABLES {
            return Err(corrupt(format!("NVM catalog holds {n} tables")));
        }
        let mut tables = Vec::new();
        for i in 0..n as u64 {
            let e = slot + ENTRIES + i * ENTRY;
            let ncols = heap.u64(e + 8) as usize;
            let name_len = heap.bytes(e + 16, 1)[0] as usize;
            if ncols > MAX_COLUMNS || name_len > MAX_NAME {
                return Err(corrupt(format!("NVM catalog entry {i} is corrupt")));
            }
            let name = String::from_utf8_lossy(heap.bytes(e + 17, name_len)).into_owned();
            let cols = heap.bytes(e + 80, 2 * ncols).chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            let tree = BTree::open(e, split_at);
            heap.pin(tree.root(heap));
            tables.push(Arc::new(TableInfo { name, shape: Shape { columns: cols }, tree }));
        }
        Ok(Catalog { slot, tables, split_at })
    }

    /// The table `name`, created if new; its columns must match.
    pub fn table(&mut self, heap: &mut Heap, name: &str, columns: &[u16]) -> Result<u32> {
        let known = self.tables.iter().map(|t| (t.name.as_str(), t.shape.columns()));
        if let Some(i) = existing_table(known, name, columns)? {
            return Ok(i);
        }
        if self.tables.len() == MAX_TABLES || name.len() > MAX_NAME || columns.len() > MAX_COLUMNS {
            return Err(invalid(format!(
                "table {name}: at most {MAX_TABLES} tables, {MAX_NAME}-byte names, {MAX_COLUMNS} columns"
            )));
        }
        let i = self.tables.len() as u64;
        let e = self.slot + ENTRIES + i * ENTRY;
        heap.set_u64(e + 8, columns.len() as u64);
        heap.bytes_mut(e + 16, 1)[0] = name.len() as u8;
        heap.write(e + 17, name.as_bytes());
        let cols: Vec<u8> = columns.iter().flat_map(|c| c.to_le_bytes()).collect();
        heap.write(e + 80, &cols);
        let tree = BTree::create(heap, e, self.split_at)?;
        heap.persist(e, ENTRY as usize);
        heap.set_u64(self.slot, i + 1);
        heap.persist(self.slot, 8);
        heap.persisted(tree.root(heap));
        self.tables.push(Arc::new(TableInfo { name: name.into(), shape: Shape::new(columns), tree }));
        Ok(i as u32)
    }

    pub fn get(&self, table: u32) -> Result<&Arc<TableInfo>> {
        self.tables.get(table as usize).ok_or_else(|| invalid(format!("no table {table}")))
    }
}

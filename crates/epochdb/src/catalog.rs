//! Tables, column schemas and secondary indexes (Silo §4.7).
//!
//! A table is an index (`Tree`) from byte-string keys to records. A table
//! may carry a column schema; values written to it must then be rows in
//! the schema's encoding. A secondary index is itself a table whose keys are
//! `escape(secondary key) ++ 0x00 0x01 ++ primary key` with empty values;
//! transactions maintain it explicitly (Silo §4.7), and the `*_indexed`
//! helpers of [`crate::Txn`] do it for them.
//!
//! Row encoding, column by column in schema order: a fixed column is its
//! bytes; a variable column is a u16 little-endian length and its bytes.

use crate::error::{Error, Result};
pub use crate::handle::{IndexId, TableId};
use crate::index::Tree;
use std::fmt;
use std::sync::Arc;

/// A column's type in a [`Schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// Exactly this many bytes.
    Fixed(u16),
    /// Up to this many bytes.
    Var(u16),
}

/// A named column of a [`Schema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name, unique in its schema.
    pub name: String,
    /// Its type: fixed or variable length.
    pub ty: ColumnType,
}

impl Column {
    /// A column of exactly `len` bytes.
    pub fn fixed(name: &str, len: u16) -> Column {
        Column { name: name.into(), ty: ColumnType::Fixed(len) }
    }

    /// A column of up to `max` bytes.
    pub fn var(name: &str, max: u16) -> Column {
        Column { name: name.into(), ty: ColumnType::Var(max) }
    }
}

/// A table's columns: rows are their values in order, and delta logging (Gawain) logs only the columns an update changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
    /// The length of every row, if all columns are fixed: then checking a
    /// row is one comparison.
    fixed_len: Option<usize>,
    /// Where each of the leading fixed columns starts in every row (one
    /// more entry: where the last of them ends).
    lead: Vec<usize>,
}

impl Schema {
    /// A schema of `columns` (1 to 65,535, names unique).
    pub fn new(columns: Vec<Column>) -> Result<Schema> {
        if columns.is_empty() || columns.len() > u16::MAX as usize {
            return Err(Error::Schema("a schema has 1..=65535 columns".into()));
        }
        for (i, c) in columns.iter().enumerate() {
            if columns[..i].iter().any(|d| d.name == c.name) {
                return Err(Error::Schema(format!("duplicate column {:?}", c.name)));
            }
        }
        let fixed_len = columns
            .iter()
            .map(|c| match c.ty {
                ColumnType::Fixed(n) => Some(n as usize),
                ColumnType::Var(_) => None,
            })
            .sum();
        let mut lead = vec![0];
        for c in &columns {
            let ColumnType::Fixed(n) = c.ty else { break };
            lead.push(lead[lead.len() - 1] + n as usize);
        }
        Ok(Schema { columns, fixed_len, lead })
    }

    /// The bytes column `c` takes in every row that holds it, if it and
    /// every column before it are fixed-width (their place does not
    /// depend on the row).
    pub fn fixed_place(&self, c: usize) -> Option<std::ops::Range<usize>> {
        Some(*self.lead.get(c)?..*self.lead.get(c + 1)?)
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Index of the column called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Encodes one value per column into `out` (cleared first).
    pub fn encode_into(&self, values: &[&[u8]], out: &mut Vec<u8>) -> Result<()> {
        if values.len() != self.columns.len() {
            return Err(Error::Schema(format!("{} values for {} columns", values.len(), self.columns.len())));
        }
        out.clear();
        for (c, v) in self.columns.iter().zip(values) {
            match c.ty {
                ColumnType::Fixed(n) if v.len() == n as usize => {}
                ColumnType::Var(max) if v.len() <= max as usize => {
                    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
                }
                _ => {
                    return Err(Error::Schema(format!("column {:?}: {} bytes do not fit {:?}", c.name, v.len(), c.ty)))
                }
            }
            out.extend_from_slice(v);
        }
        Ok(())
    }

    /// A row from one value per column, checked against the schema.
    pub fn encode(&self, values: &[&[u8]]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(values, &mut out)?;
        Ok(out)
    }

    /// Byte ranges of every column of `row`, or an error if `row` is not a
    /// row of this schema.
    pub fn column_ranges(&self, row: &[u8], out: &mut Vec<std::ops::Range<usize>>) -> Result<()> {
        out.clear();
        self.walk(row, |r| out.push(r))
    }

    /// Calls `f` with each column's byte range in `row`, or fails if `row`
    /// is not a row of this schema.
    fn walk(&self, row: &[u8], mut f: impl FnMut(std::ops::Range<usize>)) -> Result<()> {
        let mut at = 0usize;
        let bad = |c: &Column| Error::Schema(format!("row too short for column {:?}", c.name));
        for c in &self.columns {
            let len = match c.ty {
                ColumnType::Fixed(n) => n as usize,
                ColumnType::Var(max) => {
                    let b = row.get(at..at + 2).ok_or_else(|| bad(c))?;
                    at += 2;
                    let n = u16::from_le_bytes([b[0], b[1]]) as usize;
                    if n > max as usize {
                        return Err(Error::Schema(format!("column {:?}: {n} bytes exceed {max}", c.name)));
                    }
                    n
                }
            };
            if at + len > row.len() {
                return Err(bad(c));
            }
            f(at..at + len);
            at += len;
        }
        if at != row.len() {
            return Err(Error::Schema(format!("{} trailing bytes after the last column", row.len() - at)));
        }
        Ok(())
    }

    /// Checks that `row` is a row of this schema.
    pub fn validate(&self, row: &[u8]) -> Result<()> {
        match self.fixed_len {
            Some(n) if row.len() == n => Ok(()),
            Some(n) => Err(Error::Schema(format!("a row of {} bytes; this schema's rows have {n}", row.len()))),
            None => self.walk(row, |_| {}),
        }
    }

    /// Column `i` of `row`.
    pub fn column<'r>(&self, row: &'r [u8], i: usize) -> Result<&'r [u8]> {
        let mut ranges = Vec::with_capacity(self.columns.len());
        self.column_ranges(row, &mut ranges)?;
        let r = ranges.get(i).ok_or_else(|| Error::Schema(format!("no column {i}")))?;
        Ok(&row[r.clone()])
    }
}

/// Computes an index's secondary key from a row's primary key and value.
pub type Extractor = Arc<dyn Fn(&[u8], &[u8], &mut Vec<u8>) + Send + Sync>;

/// How to create a table.
#[derive(Clone, Default)]
pub struct TableOptions {
    /// The column schema, if the table has one (needed for delta logging).
    pub schema: Option<Schema>,
    /// Secondary indexes: a name and the function that extracts the secondary key from `(key, value)`.
    pub indexes: Vec<(String, Extractor)>,
}

impl fmt::Debug for TableOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableOptions")
            .field("schema", &self.schema)
            .field("indexes", &self.indexes.iter().map(|i| &i.0).collect::<Vec<_>>())
            .finish()
    }
}

impl TableOptions {
    /// A table without schema or indexes.
    pub fn new() -> TableOptions {
        TableOptions::default()
    }

    /// Gives the table a column schema.
    pub fn schema(mut self, schema: Schema) -> TableOptions {
        self.schema = Some(schema);
        self
    }

    /// Declares a secondary index; `extract(primary_key, value, out)` writes
    /// the secondary key of a row into `out` (which starts empty).
    pub fn index(
        mut self,
        name: &str,
        extract: impl Fn(&[u8], &[u8], &mut Vec<u8>) + Send + Sync + 'static,
    ) -> TableOptions {
        self.indexes.push((name.into(), Arc::new(extract)));
        self
    }
}

pub(crate) struct IndexInfo {
    pub name: String,
    pub entries: TableId,
    pub extract: Extractor,
}

/// What only the application can supply about a table: its schema and
/// index extractors (code is not stored on disk).
#[derive(Default)]
pub(crate) struct TableDef {
    pub schema: Option<Schema>,
    pub indexes: Vec<IndexInfo>,
}

pub(crate) struct Table {
    pub id: TableId,
    pub name: String,
    pub tree: Tree,
    /// Its secondary indexes' names and entry tables.
    pub index_names: Vec<(String, TableId)>,
    /// Set by `create_table`. A table recovered from disk has none until
    /// the application opens it again with `create_table`.
    pub def: std::sync::OnceLock<TableDef>,
}

impl Table {
    pub fn new(id: TableId, name: String, index_names: Vec<(String, TableId)>, def: TableDef) -> Table {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(def);
        Table { id, name, tree: Tree::new(), index_names, def: cell }
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.def.get().and_then(|d| d.schema.as_ref())
    }

    /// The index extractors; an error for a recovered table that has
    /// indexes but has not been opened with `create_table` yet.
    pub fn indexes(&self) -> crate::Result<&[IndexInfo]> {
        match self.def.get() {
            Some(d) => Ok(&d.indexes),
            None if self.index_names.is_empty() => Ok(&[]),
            None => Err(crate::Error::TableNotOpened(self.name.clone())),
        }
    }
}

/// The catalog's tables, in id order. Shared by the database and the
/// checkpointer, which walks a snapshot of them.
#[derive(Default)]
pub(crate) struct Tables(std::sync::RwLock<Vec<Arc<Table>>>);

impl Tables {
    pub fn new(tables: Vec<Table>) -> Tables {
        Tables(std::sync::RwLock::new(tables.into_iter().map(Arc::new).collect()))
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Table>>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<Table>>> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn snapshot(&self) -> Vec<Arc<Table>> {
        self.read().clone()
    }
}

/// Appends the index entry key for `secondary` -> `primary` to `out`:
/// the secondary key with 0x00 escaped as 0x00 0xFF, the terminator
/// 0x00 0x01, then the primary key. Order-preserving on the secondary key.
pub fn index_entry_key(secondary: &[u8], primary: &[u8], out: &mut Vec<u8>) {
    index_prefix(secondary, out);
    out.extend_from_slice(primary);
}

/// Appends the escaped secondary key and its terminator: every entry for
/// `secondary` starts with these bytes, and no other entry does.
pub fn index_prefix(secondary: &[u8], out: &mut Vec<u8>) {
    for &b in secondary {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// The primary key inside an index entry key.
pub fn index_entry_primary(entry: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    while i + 1 < entry.len() {
        if entry[i] == 0 {
            match entry[i + 1] {
                0x01 => return Some(&entry[i + 2..]),
                0xFF => i += 2,
                _ => return None,
            }
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_round_trip_and_errors() {
        let s =
            Schema::new(vec![Column::fixed("id", 4), Column::var("name", 10), Column::fixed("x", 1)]).expect("valid");
        let row = s.encode(&[b"abcd", b"bob", b"z"]).expect("fits");
        assert_eq!(s.column(&row, 1).expect("col"), b"bob");
        assert_eq!(s.column(&row, 2).expect("col"), b"z");
        assert!(s.encode(&[b"abc", b"bob", b"z"]).is_err());
        assert!(s.encode(&[b"abcd", b"much too long", b"z"]).is_err());
        assert!(s.validate(&row[..row.len() - 1]).is_err());
        assert!(Schema::new(vec![Column::fixed("a", 1), Column::fixed("a", 1)]).is_err());
    }

    #[test]
    fn index_keys_preserve_order_and_decode() {
        let secs: [&[u8]; 5] = [b"", b"a", b"a\0", b"a\0b", b"ab"];
        let mut keys = Vec::new();
        for s in secs {
            let mut k = Vec::new();
            index_entry_key(s, b"pk\0", &mut k);
            assert_eq!(index_entry_primary(&k), Some(&b"pk\0"[..]));
            keys.push(k);
        }
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let mut p = Vec::new();
        index_prefix(b"a", &mut p);
        assert!(keys[1].starts_with(&p) && !keys[2].starts_with(&p));
    }
}

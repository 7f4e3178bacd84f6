//! CoW: shadow paging (NVM study §3.2), after LMDB, and the engine half
//! that NVM-CoW (§4.2, [`super::nvm_cow`]) shares with it.
//!
//! Each table is a copy-on-write B+tree ([`crate::cowtree`]). The *current
//! directory* (every table's root as of the last committed group) is named
//! by the master record; the *dirty directory* is the roots the open group
//! has made by copying the pages it changed. Transactions modify the dirty
//! directory only, and a group of them commits together: its pages are made
//! durable, then the master record is switched to the dirty directory with
//! one atomic write. A crash before the switch leaves the current directory
//! as it was, so there is no recovery to do (§3.2); the pages the group had
//! written are garbage, and so are the pages the switch replaced.
//!
//! Where pages live and how a group becomes durable is the [`Medium`]'s
//! business:
//!
//! - [`FilePages`] (CoW): a database file on the file interface, rows
//!   inlined in the leaves (the paper's "HDD/SSD-optimized format"), an
//!   in-memory page cache, two master slots at the head of the file;
//! - [`super::nvm_cow::NvmPages`] (NVM-CoW): pages in persistent memory,
//!   leaves holding pointers to tuple copies, the master record a word.

use crate::cowtree::{self, Backend, PageSet, PAGE};
use crate::pmem::{Pmem, Stats};
use crate::store::{corrupt, existing_table, invalid, Footprint, Result, Store};
use crate::tuple::Shape;
use crate::wal::GROUP_COMMIT;
use std::sync::Arc;
use std::time::Instant;

/// A group also ends once it has written this many pages (16 MiB).
const GROUP_PAGES: usize = 4096;

/// A table in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<u16>,
    pub root: u64,
}

/// A directory's bytes (FORMAT.md, "CoW directory"): a table count, then
/// per table its name, columns and root page.
pub fn encode_directory(tables: &[Table]) -> Vec<u8> {
    let mut b = (tables.len() as u32).to_le_bytes().to_vec();
    for t in tables {
        b.push(t.name.len() as u8);
        b.extend_from_slice(t.name.as_bytes());
        b.extend_from_slice(&(t.columns.len() as u16).to_le_bytes());
        for c in &t.columns {
            b.extend_from_slice(&c.to_le_bytes());
        }
        b.extend_from_slice(&t.root.to_le_bytes());
    }
    b
}

pub fn decode_directory(b: &[u8], what: &str) -> Result<Vec<Table>> {
    let bad = || corrupt(format!("{what}: truncated directory"));
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(s)
    };
    let n = u32::from_le_bytes(take(4)?.try_into().map_err(|_| bad())?);
    let mut tables = Vec::new();
    for _ in 0..n {
        let len = take(1)?[0] as usize;
        let name = String::from_utf8_lossy(take(len)?).into_owned();
        let cols = u16::from_le_bytes(take(2)?.try_into().map_err(|_| bad())?) as usize;
        let columns = take(2 * cols)?.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        let root = u64::from_le_bytes(take(8)?.try_into().map_err(|_| bad())?);
        tables.push(Table { name, columns, root });
    }
    Ok(tables)
}

/// Where a CoW engine's pages and rows live (module documentation).
pub trait Medium: Backend + Send {
    fn name(&self) -> &'static str;
    fn pmem(&self) -> &Pmem;
    /// Sets `out` to what a leaf stores for `row`.
    fn encode_row(&mut self, row: &[u8], out: &mut Vec<u8>) -> Result;
    /// The row a leaf's stored bytes stand for.
    fn decode_row(&mut self, stored: &[u8], out: &mut Vec<u8>);
    /// The open transaction replaced or removed the row stored as `stored`.
    fn retire_row(&mut self, stored: &[u8]);
    /// The open transaction ended (committed or rolled back).
    fn end_txn(&mut self, commit: bool);
    /// Makes the group durable: its `pages`, then the master record naming
    /// `tables`; then the `replaced` pages are free.
    fn commit_group(&mut self, pages: Vec<u64>, replaced: Vec<u64>, tables: &[Table]) -> Result;
    /// After a restart: every page the current directory reaches.
    fn recovered(&mut self, pages: &[u64]);
    /// Storage by component, given the reachable pages and how many are
    /// inner pages.
    fn footprint(&self, pages: &[u64], inner: usize) -> Footprint;
    /// Storage nothing reaches, given the reachable pages and the rows the
    /// leaves store.
    fn leaks(&mut self, pages: Vec<u64>, rows: Vec<Vec<u8>>) -> Vec<String>;
}

/// A CoW engine over a medium (module documentation).
pub struct Cow<M: Medium> {
    pages: PageSet<M>,
    /// The dirty directory.
    tables: Vec<Table>,
    shapes: Vec<Shape>,
    /// The roots when the open transaction made its first change.
    txn_roots: Option<Vec<u64>>,
    group_started: Option<Instant>,
    committed: u64,
    durable: u64,
    buf: Vec<u8>,
}

impl<M: Medium> Cow<M> {
    /// The engine over a medium that recovered the current directory
    /// `tables`.
    pub fn open(medium: M, tables: Vec<Table>) -> Result<Cow<M>> {
        let shapes = tables.iter().map(|t| Shape::new(&t.columns)).collect();
        let mut e = Cow {
            pages: PageSet::new(medium),
            tables,
            shapes,
            txn_roots: None,
            group_started: None,
            committed: 0,
            durable: 0,
            buf: Vec::new(),
        };
        let (pages, _) = e.walk(None)?;
        e.pages.backend.recovered(&pages);
        Ok(e)
    }

    /// Every page the directory reaches, and how many are inner pages;
    /// with `rows`, also every stored row.
    fn walk(&mut self, mut rows: Option<&mut Vec<Vec<u8>>>) -> Result<(Vec<u64>, usize)> {
        let (mut pages, mut inner) = (Vec::new(), 0);
        for t in self.tables.clone() {
            inner += cowtree::walk(&mut self.pages, t.root, &mut pages, rows.as_deref_mut())?;
        }
        Ok((pages, inner))
    }

    fn begin(&mut self) {
        if self.txn_roots.is_none() {
            self.txn_roots = Some(self.tables.iter().map(|t| t.root).collect());
        }
    }

    fn table(&self, table: u32) -> Result<usize> {
        let t = table as usize;
        if t < self.tables.len() {
            Ok(t)
        } else {
            Err(invalid(format!("no table {table}")))
        }
    }

    fn write_group(&mut self) -> Result {
        self.group_started = None;
        if !self.pages.group_is_empty() {
            let (pages, replaced) = self.pages.take_group();
            self.pages.backend.commit_group(pages, replaced, &self.tables)?;
        }
        self.durable = self.committed;
        Ok(())
    }
}

impl<M: Medium> Store for Cow<M> {
    fn name(&self) -> &'static str {
        self.pages.backend.name()
    }

    /// A new table is committed (with any group waiting) before this
    /// returns.
    fn create_table(&mut self, name: &str, columns: &[u16]) -> Result<u32> {
        if let Some(i) = existing_table(self.tables.iter().map(|t| (t.name.as_str(), &t.columns[..])), name, columns)? {
            return Ok(i);
        }
        if name.len() > 255 || self.txn_roots.is_some() {
            return Err(invalid(format!("table {name}: names are at most 255 bytes, and not inside a transaction")));
        }
        let root = cowtree::create(&mut self.pages)?;
        self.pages.end_txn();
        self.tables.push(Table { name: name.into(), columns: columns.to_vec(), root });
        self.shapes.push(Shape::new(columns));
        self.write_group()?;
        Ok(self.tables.len() as u32 - 1)
    }

    fn get(&mut self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let t = self.table(table)?;
        match cowtree::get(&mut self.pages, self.tables[t].root, key)? {
            Some(stored) => {
                self.pages.backend.decode_row(&stored, out);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, table: u32, key: &[u8], value: &[u8]) -> Result {
        let t = self.table(table)?;
        self.shapes[t].split(value)?;
        self.begin();
        let mut stored = std::mem::take(&mut self.buf);
        self.pages.backend.encode_row(value, &mut stored)?;
        let old = cowtree::put(&mut self.pages, &mut self.tables[t].root, key, &stored);
        self.buf = stored;
        if let Some(old) = old? {
            self.pages.backend.retire_row(&old);
        }
        Ok(())
    }

    fn delete(&mut self, table: u32, key: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        self.begin();
        match cowtree::delete(&mut self.pages, &mut self.tables[t].root, key)? {
            Some(old) => {
                self.pages.backend.retire_row(&old);
                Ok(true)
            }
            None => Ok(false),
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
        let mut row = Vec::new();
        cowtree::scan(&mut self.pages, self.tables[t].root, lo, hi, reverse, &mut |s, k, v| {
            s.backend.decode_row(v, &mut row);
            Ok(visit(k, &row))
        })?;
        Ok(())
    }

    fn commit(&mut self) -> Result {
        self.pages.end_txn();
        self.pages.backend.end_txn(true);
        self.txn_roots = None;
        self.committed += 1;
        let now = Instant::now();
        let started = *self.group_started.get_or_insert(now);
        if now - started >= GROUP_COMMIT || self.pages.group_pages() >= GROUP_PAGES {
            self.write_group()?;
        }
        Ok(())
    }

    fn abort(&mut self) -> Result {
        self.pages.abort()?;
        self.pages.backend.end_txn(false);
        if let Some(roots) = self.txn_roots.take() {
            for (t, r) in self.tables.iter_mut().zip(roots) {
                t.root = r;
            }
        }
        Ok(())
    }

    fn durable(&self) -> u64 {
        self.durable
    }

    fn committed(&self) -> u64 {
        self.committed
    }

    fn flush(&mut self) -> Result {
        self.write_group()
    }

    fn footprint(&mut self) -> Footprint {
        match self.walk(None) {
            Ok((pages, inner)) => self.pages.backend.footprint(&pages, inner),
            Err(_) => Footprint::default(),
        }
    }

    fn pmem(&self) -> &Pmem {
        self.pages.backend.pmem()
    }

    fn leaks(&mut self) -> Vec<String> {
        let mut rows = Vec::new();
        match self.walk(Some(&mut rows)) {
            Ok((pages, _)) => self.pages.backend.leaks(pages, rows),
            Err(e) => vec![format!("the directory does not read: {e}")],
        }
    }

    fn stats(&self) -> Arc<Stats> {
        self.pmem().stats.clone()
    }
}

/// The database file of the CoW engine.
const FILE: &str = "cow.db";
const MAGIC: u64 = u64::from_le_bytes(*b"EPCOWMR1");
const VERSION: u32 = 1;
/// Pages 0 and 1 are the master slots; group n writes slot n % 2.
const MASTERS: u64 = 2;

/// CoW's pages: a database file with an in-memory page cache (module
/// documentation). Page `id` is at offset `id * 4096`.
pub struct FilePages {
    pm: Pmem,
    /// By page id; a page is read from the file on first use.
    cache: Vec<Option<Box<[u8]>>>,
    free: Vec<u64>,
    /// Pages below this are in use, free, or master slots.
    next: u64,
    /// Master records written (the newest is in slot `seq % 2`).
    seq: u64,
}

/// The master record (FORMAT.md, "CoW files"): magic, version, CRC32C of
/// the rest, group number, page high-water mark, directory.
fn encode_master(seq: u64, next: u64, tables: &[Table]) -> Result<Vec<u8>> {
    let dir = encode_directory(tables);
    if 36 + dir.len() > PAGE {
        return Err(invalid("the CoW directory is over one page (too many tables or columns)"));
    }
    let mut m = vec![0u8; PAGE];
    m[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    m[8..12].copy_from_slice(&VERSION.to_le_bytes());
    m[16..24].copy_from_slice(&seq.to_le_bytes());
    m[24..32].copy_from_slice(&next.to_le_bytes());
    m[32..36].copy_from_slice(&(dir.len() as u32).to_le_bytes());
    m[36..36 + dir.len()].copy_from_slice(&dir);
    let crc = epochdb::crc32c::checksum(&m[16..]);
    m[12..16].copy_from_slice(&crc.to_le_bytes());
    Ok(m)
}

/// A master slot's (seq, next, directory), if it holds a whole record.
fn decode_master(m: &[u8], slot: u64) -> Result<Option<(u64, u64, Vec<Table>)>> {
    let word = |at: usize| u64::from_le_bytes(m[at..at + 8].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(m[12..16].try_into().unwrap_or_default());
    if word(0) != MAGIC || epochdb::crc32c::checksum(&m[16..]) != crc {
        // Torn or never written: the other slot is the current one.
        return Ok(None);
    }
    let version = u32::from_le_bytes(m[8..12].try_into().unwrap_or_default());
    if version != VERSION {
        return Err(corrupt(format!("{FILE}: master slot {slot} has format version {version}")));
    }
    let len = (u32::from_le_bytes(m[32..36].try_into().unwrap_or_default()) as usize).min(PAGE - 36);
    Ok(Some((word(16), word(24), decode_directory(&m[36..36 + len], FILE)?)))
}

impl FilePages {
    /// Opens the database file; returns the pages and the current
    /// directory (the newest whole master record's).
    pub fn open(mut pm: Pmem) -> Result<(FilePages, Vec<Table>)> {
        let mut best = None;
        let size = pm.fs.size(FILE).unwrap_or(0);
        for slot in 0..MASTERS {
            if size < (slot + 1) * PAGE as u64 {
                continue;
            }
            let mut m = vec![0u8; PAGE];
            pm.fs.read_at(FILE, slot * PAGE as u64, &mut m)?;
            if let Some(rec) = decode_master(&m, slot)? {
                if best.as_ref().is_none_or(|b: &(u64, u64, Vec<Table>)| rec.0 > b.0) {
                    best = Some(rec);
                }
            }
        }
        let (seq, next, tables) = best.unwrap_or((0, MASTERS, Vec::new()));
        Ok((FilePages { pm, cache: Vec::new(), free: Vec::new(), next, seq }, tables))
    }

    fn slot(&mut self, id: u64) -> &mut Option<Box<[u8]>> {
        let i = id as usize;
        if self.cache.len() <= i {
            self.cache.resize_with(i + 1, || None);
        }
        &mut self.cache[i]
    }
}

impl Backend for FilePages {
    fn page(&mut self, id: u64) -> Result<&mut [u8]> {
        if self.slot(id).is_none() {
            let mut p = vec![0u8; PAGE].into_boxed_slice();
            self.pm.fs.read_at(FILE, id * PAGE as u64, &mut p)?;
            *self.slot(id) = Some(p);
        }
        Ok(self.slot(id).as_deref_mut().unwrap_or_default())
    }

    fn alloc(&mut self) -> Result<u64> {
        let id = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        if self.slot(id).is_none() {
            *self.slot(id) = Some(vec![0u8; PAGE].into_boxed_slice());
        }
        Ok(id)
    }

    fn free(&mut self, id: u64) {
        self.free.push(id);
    }
}

impl Medium for FilePages {
    fn name(&self) -> &'static str {
        "cow"
    }

    fn pmem(&self) -> &Pmem {
        &self.pm
    }

    fn encode_row(&mut self, row: &[u8], out: &mut Vec<u8>) -> Result {
        out.clear();
        out.extend_from_slice(row);
        Ok(())
    }

    fn decode_row(&mut self, stored: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(stored);
    }

    fn retire_row(&mut self, _: &[u8]) {}

    fn end_txn(&mut self, _: bool) {}

    /// Writes the group's pages in file order and syncs, then writes the
    /// next master slot and syncs: the switch.
    fn commit_group(&mut self, mut pages: Vec<u64>, replaced: Vec<u64>, tables: &[Table]) -> Result {
        pages.sort_unstable();
        for id in pages {
            let p = self.cache[id as usize].as_deref().ok_or_else(|| corrupt(format!("page {id} is not cached")))?;
            self.pm.fs.write_at(FILE, id * PAGE as u64, p)?;
        }
        self.pm.fs.sync(FILE)?;
        let master = encode_master(self.seq + 1, self.next, tables)?;
        self.pm.fs.write_at(FILE, (self.seq + 1) % MASTERS * PAGE as u64, &master)?;
        self.pm.fs.sync(FILE)?;
        self.seq += 1;
        self.free.extend(replaced);
        Ok(())
    }

    /// Every page below the high-water mark that the directory does not
    /// reach is free (only inner pages were read to find out).
    fn recovered(&mut self, pages: &[u64]) {
        let mut used = vec![false; self.next as usize];
        for &p in pages {
            if let Some(u) = used.get_mut(p as usize) {
                *u = true;
            }
        }
        self.free = (MASTERS..self.next).filter(|&p| !used[p as usize]).collect();
    }

    fn footprint(&self, pages: &[u64], inner: usize) -> Footprint {
        let file = self.pm.fs.size(FILE).unwrap_or(0);
        let index = inner as u64 * PAGE as u64;
        let table = (pages.len() - inner) as u64 * PAGE as u64;
        Footprint { table, index, other: file.saturating_sub(table + index), ..Footprint::default() }
    }

    /// Pages neither reachable nor free (or both), and stray files.
    fn leaks(&mut self, pages: Vec<u64>, _: Vec<Vec<u8>>) -> Vec<String> {
        let mut seen = vec![0u8; self.next as usize];
        let mut out = Vec::new();
        for p in pages.into_iter().chain(self.free.iter().copied()) {
            match seen.get_mut(p as usize) {
                Some(s) => *s += 1,
                None => out.push(format!("page {p} is past the high-water mark {}", self.next)),
            }
        }
        for (p, &n) in seen.iter().enumerate().skip(MASTERS as usize) {
            match n {
                0 => out.push(format!("page {p} is neither reachable nor free")),
                1 => {}
                _ => out.push(format!("page {p} is both reachable and free")),
            }
        }
        let files = self.pm.fs.list().unwrap_or_default();
        out.extend(files.into_iter().filter(|f| f != FILE).map(|f| format!("file {f} is not needed")));
        out
    }
}

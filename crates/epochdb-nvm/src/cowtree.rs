//! The copy-on-write B+tree of the CoW engines (NVM study §3.2, §4.2),
//! after LMDB's: 4 KiB slotted pages, and a change never touches a page of
//! the *current* directory (the last committed one). The first change in a
//! group to a page copies it (and the path above it) into a page the group
//! owns; later changes in the group modify that copy in place. Committing
//! the group publishes its root with one atomic switch of the master
//! record, so the current directory is always consistent and recovery has
//! nothing to redo or undo.
//!
//! [`PageSet`] keeps that bookkeeping for any [`Backend`] (file pages or
//! NVM slots): which pages the group owns, which committed pages it
//! replaced (free once the group commits), and for the open transaction
//! the images of owned pages before it changed them, so an abort restores
//! them without touching committed pages.
//!
//! Page layout (FORMAT.md, "CoW pages"): byte 0 kind (1 leaf, 2 inner),
//! byte 1 level (0 for a leaf, 1 for an inner page over leaves, ...), bytes
//! 2..4 entry count, 4..6 start of the entry heap, then a sorted
//! array of 2-byte entry offsets from byte 16; entries (key length u16,
//! value length u16, key, value) fill the page from its end down. An inner
//! entry's value is its child's 8-byte page id; entry 0's key is empty.

use crate::store::{invalid, Result};
use std::collections::{HashMap, HashSet};

pub const PAGE: usize = 4096;
const HEAD: usize = 16;
const LEAF: u8 = 1;
const INNER: u8 = 2;
/// The largest key + value an entry holds (so a page holds at least 3).
pub const MAX_ENTRY: usize = (PAGE - HEAD) / 3 - 8;

fn u16_at(p: &[u8], at: usize) -> usize {
    u16::from_le_bytes([p[at], p[at + 1]]) as usize
}

fn set_u16(p: &mut [u8], at: usize, v: usize) {
    p[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

pub fn count(p: &[u8]) -> usize {
    u16_at(p, 2)
}

pub fn is_leaf(p: &[u8]) -> bool {
    p[0] == LEAF
}

/// Entry `i`'s key and value.
pub fn entry(p: &[u8], i: usize) -> (&[u8], &[u8]) {
    let at = u16_at(p, HEAD + 2 * i);
    let (kl, vl) = (u16_at(p, at), u16_at(p, at + 2));
    (&p[at + 4..at + 4 + kl], &p[at + 4 + kl..at + 4 + kl + vl])
}

fn child(p: &[u8], i: usize) -> u64 {
    let v = entry(p, i).1;
    u64::from_le_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]])
}

fn init(p: &mut [u8], kind: u8, level: u8) {
    p[..HEAD].fill(0);
    p[0] = kind;
    p[1] = level;
    set_u16(p, 4, PAGE);
}

/// The two byte ranges of a page that hold anything, as (offset, length):
/// header and entry offsets, and the entry heap. What an NVM page must
/// persist.
pub fn used_ranges(p: &[u8]) -> [(usize, usize); 2] {
    let start = u16_at(p, 4);
    [(0, HEAD + 2 * count(p)), (start, PAGE - start)]
}

fn free_space(p: &[u8]) -> usize {
    u16_at(p, 4) - HEAD - 2 * count(p)
}

/// Leaf: `Ok(i)` if entry i has `key`, else `Err(insertion point)`.
fn search(p: &[u8], key: &[u8]) -> std::result::Result<usize, usize> {
    let (mut lo, mut hi) = (0, count(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match entry(p, mid).0.cmp(key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Inner: the child covering `key` (the last entry with key <= `key`).
fn child_index(p: &[u8], key: &[u8]) -> usize {
    match search(p, key) {
        Ok(i) => i,
        Err(i) => i.max(1) - 1,
    }
}

fn entries(p: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count(p)).map(|i| entry(p, i)).map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

/// Rewrites the page with `items` (which must fit).
fn fill(p: &mut [u8], kind: u8, level: u8, items: &[(Vec<u8>, Vec<u8>)]) {
    init(p, kind, level);
    for (i, (k, v)) in items.iter().enumerate() {
        let placed = insert_at(p, i, k, v);
        debug_assert!(placed, "a page's entries must fit it");
    }
}

/// Inserts at position `i`; false if the page is too full (after
/// compacting the holes removals left).
fn insert_at(p: &mut [u8], i: usize, key: &[u8], val: &[u8]) -> bool {
    let need = 4 + key.len() + val.len();
    if free_space(p) < need + 2 {
        let used: usize = (0..count(p)).map(|j| entry(p, j)).map(|(k, v)| 6 + k.len() + v.len()).sum();
        if PAGE - HEAD < used + need + 2 {
            return false;
        }
        let (kind, level, items) = (p[0], p[1], entries(p));
        fill(p, kind, level, &items);
    }
    let n = count(p);
    let at = u16_at(p, 4) - need;
    set_u16(p, at, key.len());
    set_u16(p, at + 2, val.len());
    p[at + 4..at + 4 + key.len()].copy_from_slice(key);
    p[at + 4 + key.len()..at + need].copy_from_slice(val);
    p.copy_within(HEAD + 2 * i..HEAD + 2 * n, HEAD + 2 * i + 2);
    set_u16(p, HEAD + 2 * i, at);
    set_u16(p, 2, n + 1);
    set_u16(p, 4, at);
    true
}

fn remove_at(p: &mut [u8], i: usize) {
    let n = count(p);
    p.copy_within(HEAD + 2 * i + 2..HEAD + 2 * n, HEAD + 2 * i);
    set_u16(p, 2, n - 1);
}

/// Where pages live: file pages in a cache, or NVM slots.
pub trait Backend {
    fn page(&mut self, id: u64) -> Result<&mut [u8]>;
    /// A new page (its old contents do not matter: the tree initializes
    /// its header).
    fn alloc(&mut self) -> Result<u64>;
    /// Frees a page no committed directory references.
    fn free(&mut self, id: u64);
}

/// Copy-on-write bookkeeping over a backend (module documentation).
pub struct PageSet<B> {
    pub backend: B,
    /// Pages created in the open group: modified in place.
    owned: HashSet<u64>,
    /// Committed pages the group replaced: free once it commits.
    replaced: Vec<u64>,
    /// The open transaction: images of owned pages it changed, pages it
    /// created, how many `replaced` entries predate it.
    saved: HashMap<u64, Box<[u8]>>,
    created: Vec<u64>,
    replaced_before: usize,
}

impl<B: Backend> PageSet<B> {
    pub fn new(backend: B) -> PageSet<B> {
        PageSet {
            backend,
            owned: HashSet::new(),
            replaced: Vec::new(),
            saved: HashMap::new(),
            created: Vec::new(),
            replaced_before: 0,
        }
    }

    pub fn read(&mut self, id: u64) -> Result<&[u8]> {
        Ok(&*self.backend.page(id)?)
    }

    fn new_page(&mut self, kind: u8, level: u8) -> Result<u64> {
        let id = self.backend.alloc()?;
        init(self.backend.page(id)?, kind, level);
        self.owned.insert(id);
        self.created.push(id);
        Ok(id)
    }

    /// Page `id`, writable: itself if the group owns it, else a copy that
    /// replaces it (the caller repoints the parent).
    fn own(&mut self, id: u64) -> Result<u64> {
        if self.owned.contains(&id) {
            if !self.created.contains(&id) && !self.saved.contains_key(&id) {
                let image: Box<[u8]> = self.backend.page(id)?.into();
                self.saved.insert(id, image);
            }
            return Ok(id);
        }
        let image: Box<[u8]> = self.backend.page(id)?.into();
        let copy = self.new_page(image[0], image[1])?;
        self.backend.page(copy)?.copy_from_slice(&image);
        self.replaced.push(id);
        Ok(copy)
    }

    fn write(&mut self, id: u64) -> Result<&mut [u8]> {
        debug_assert!(self.owned.contains(&id));
        self.backend.page(id)
    }

    /// Undoes the open transaction's page changes.
    pub fn abort(&mut self) -> Result {
        for (id, image) in std::mem::take(&mut self.saved) {
            self.backend.page(id)?.copy_from_slice(&image);
        }
        for id in std::mem::take(&mut self.created) {
            self.owned.remove(&id);
            self.backend.free(id);
        }
        self.replaced.truncate(self.replaced_before);
        Ok(())
    }

    /// The open transaction ends; its changes join the group.
    pub fn end_txn(&mut self) {
        self.saved.clear();
        self.created.clear();
        self.replaced_before = self.replaced.len();
    }

    /// The group's pages (to write out) and the pages it replaced (to free
    /// once its master record is durable). Starts a new group.
    pub fn take_group(&mut self) -> (Vec<u64>, Vec<u64>) {
        self.end_txn();
        self.replaced_before = 0;
        (self.owned.drain().collect(), std::mem::take(&mut self.replaced))
    }

    pub fn group_is_empty(&self) -> bool {
        self.owned.is_empty() && self.replaced.is_empty()
    }

    /// Pages the open group wrote.
    pub fn group_pages(&self) -> usize {
        self.owned.len()
    }
}

/// A tree is its root page id, which changes with every group that
/// touches it.
pub fn create<B: Backend>(s: &mut PageSet<B>) -> Result<u64> {
    s.new_page(LEAF, 0)
}

/// The value of `key`.
pub fn get<B: Backend>(s: &mut PageSet<B>, root: u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut id = root;
    loop {
        let p = s.read(id)?;
        if is_leaf(p) {
            return Ok(search(p, key).ok().map(|i| entry(p, i).1.to_vec()));
        }
        id = child(p, child_index(p, key));
    }
}

/// Copies the path to `key`'s leaf into owned pages; returns the new root
/// and the path of (page, child index), leaf last with index 0.
fn own_path<B: Backend>(s: &mut PageSet<B>, root: &mut u64, key: &[u8]) -> Result<Vec<(u64, usize)>> {
    *root = s.own(*root)?;
    let mut path = Vec::new();
    let mut id = *root;
    loop {
        let p = s.read(id)?;
        if is_leaf(p) {
            path.push((id, 0));
            return Ok(path);
        }
        let i = child_index(p, key);
        let c = child(p, i);
        let owned = s.own(c)?;
        if owned != c {
            let p = s.write(id)?;
            let at = u16_at(p, HEAD + 2 * i);
            let kl = u16_at(p, at);
            p[at + 4 + kl..at + 12 + kl].copy_from_slice(&owned.to_le_bytes());
        }
        path.push((id, i));
        id = owned;
    }
}

/// Sets `key = val`; returns the old value.
pub fn put<B: Backend>(s: &mut PageSet<B>, root: &mut u64, key: &[u8], val: &[u8]) -> Result<Option<Vec<u8>>> {
    if key.len() + val.len() > MAX_ENTRY {
        return Err(invalid(format!("a {}-byte entry is over the {MAX_ENTRY}-byte page limit", key.len() + val.len())));
    }
    let mut path = own_path(s, root, key)?;
    let (leaf, _) = path.pop().unwrap_or((*root, 0));
    let p = s.write(leaf)?;
    let (i, old) = match search(p, key) {
        Ok(i) => {
            let old = entry(p, i).1.to_vec();
            remove_at(p, i);
            (i, Some(old))
        }
        Err(i) => (i, None),
    };
    if !insert_at(p, i, key, val) {
        let mut items = entries(p);
        items.insert(i, (key.to_vec(), val.to_vec()));
        split(s, root, path, leaf, LEAF, items)?;
    }
    Ok(old)
}

/// Splits page `id` holding `items` in two, adding the right half to the
/// parent (recursively), or a new root.
fn split<B: Backend>(
    s: &mut PageSet<B>,
    root: &mut u64,
    mut path: Vec<(u64, usize)>,
    id: u64,
    kind: u8,
    mut items: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result {
    let mid = items.len() / 2;
    let mut right_items = items.split_off(mid);
    let sep = right_items[0].0.clone();
    if kind == INNER {
        // The right page's first entry covers everything from `sep` up.
        right_items[0].0.clear();
    }
    let level = s.read(id)?[1];
    fill(s.write(id)?, kind, level, &items);
    let right = s.new_page(kind, level)?;
    fill(s.write(right)?, kind, level, &right_items);
    let val = right.to_le_bytes();
    match path.pop() {
        Some((parent, i)) => {
            let p = s.write(parent)?;
            if !insert_at(p, i + 1, &sep, &val) {
                let mut items = entries(p);
                items.insert(i + 1, (sep, val.to_vec()));
                split(s, root, path, parent, INNER, items)?;
            }
        }
        None => {
            let new_root = s.new_page(INNER, level + 1)?;
            let p = s.write(new_root)?;
            fill(p, INNER, level + 1, &[(Vec::new(), id.to_le_bytes().to_vec()), (sep, val.to_vec())]);
            *root = new_root;
        }
    }
    Ok(())
}

/// Removes `key`; returns its value.
pub fn delete<B: Backend>(s: &mut PageSet<B>, root: &mut u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
    if get(s, *root, key)?.is_none() {
        return Ok(None);
    }
    let path = own_path(s, root, key)?;
    let leaf = path.last().map_or(*root, |l| l.0);
    let p = s.write(leaf)?;
    Ok(search(p, key).ok().map(|i| {
        let old = entry(p, i).1.to_vec();
        remove_at(p, i);
        old
    }))
}

/// A scan's callback: (pages, key, value) -> go on?
pub type Visit<'v, B> = dyn FnMut(&mut PageSet<B>, &[u8], &[u8]) -> Result<bool> + 'v;

/// Visits entries with keys in `[lo, hi)`, ascending or descending, until
/// `visit` returns false.
pub fn scan<B: Backend>(
    s: &mut PageSet<B>,
    id: u64,
    lo: &[u8],
    hi: Option<&[u8]>,
    reverse: bool,
    visit: &mut Visit<'_, B>,
) -> Result<bool> {
    let p = s.read(id)?;
    if is_leaf(p) {
        let mut items = entries(p);
        items.retain(|(k, _)| k.as_slice() >= lo && hi.is_none_or(|h| k.as_slice() < h));
        if reverse {
            items.reverse();
        }
        for (k, v) in items {
            if !visit(s, &k, &v)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let n = count(p);
    let first = child_index(p, lo);
    let last = match hi {
        Some(h) => {
            let c = child_index(p, h);
            if c > first && entry(p, c).0 >= h {
                c - 1
            } else {
                c
            }
        }
        None => n - 1,
    };
    let children: Vec<u64> = (first..=last).map(|i| child(p, i)).collect();
    let order: Box<dyn Iterator<Item = &u64>> =
        if reverse { Box::new(children.iter().rev()) } else { Box::new(children.iter()) };
    for &c in order {
        if !scan(s, c, lo, hi, reverse, visit)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Every page of the tree at `root`, reading only inner pages (a page at
/// level 1 names its leaves), so a restart can find the free pages
/// quickly. With `leaf_values`, reads the leaves too and collects their
/// values. Returns how many of the pages are inner pages.
pub fn walk<B: Backend>(
    s: &mut PageSet<B>,
    root: u64,
    pages: &mut Vec<u64>,
    mut leaf_values: Option<&mut Vec<Vec<u8>>>,
) -> Result<usize> {
    let mut stack = vec![root];
    let mut inner = 0;
    while let Some(id) = stack.pop() {
        pages.push(id);
        let p = s.read(id)?;
        if is_leaf(p) {
            if let Some(out) = leaf_values.as_deref_mut() {
                out.extend((0..count(p)).map(|i| entry(p, i).1.to_vec()));
            }
            continue;
        }
        inner += 1;
        let children = (0..count(p)).map(|i| child(p, i));
        if p[1] == 1 && leaf_values.is_none() {
            pages.extend(children);
        } else {
            stack.extend(children);
        }
    }
    Ok(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Mem(Vec<Box<[u8]>>, Vec<u64>);
    impl Backend for Mem {
        fn page(&mut self, id: u64) -> Result<&mut [u8]> {
            Ok(&mut self.0[id as usize])
        }
        fn alloc(&mut self) -> Result<u64> {
            Ok(self.1.pop().unwrap_or_else(|| {
                self.0.push(vec![0u8; PAGE].into());
                self.0.len() as u64 - 1
            }))
        }
        fn free(&mut self, id: u64) {
            self.1.push(id);
        }
    }

    #[test]
    fn matches_a_btreemap_with_aborts_and_groups() {
        let mut s = PageSet::new(Mem(Vec::new(), Vec::new()));
        let mut root = create(&mut s).expect("root");
        let mut model = BTreeMap::new();
        let mut x = 12345u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("{:06}", x % 3000).into_bytes();
            let (saved_root, saved_model) = (root, model.clone());
            if x.is_multiple_of(5) {
                assert_eq!(delete(&mut s, &mut root, &key).expect("delete"), model.remove(&key));
            } else {
                let val = vec![(x >> 8) as u8; (x % 300) as usize];
                assert_eq!(put(&mut s, &mut root, &key, &val).expect("put"), model.insert(key, val));
            }
            if x.is_multiple_of(7) {
                s.abort().expect("abort");
                root = saved_root;
                model = saved_model;
            } else {
                s.end_txn();
            }
            if step % 50 == 0 {
                let (_, replaced) = s.take_group();
                for id in replaced {
                    s.backend.free(id);
                }
            }
        }
        let mut got = Vec::new();
        scan(&mut s, root, b"", None, false, &mut |_, k, v| {
            got.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })
        .expect("scan");
        assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    }
}

//! How Redis keys, types and expiry times live in an ordered epochdb table.
//!
//! Each numbered database (`SELECT n`) is one table, `redis.<n>`. In it:
//!
//! | record key | value |
//! | --- | --- |
//! | `k` key | the key's head: type (1 byte), expiry (u64 LE, Unix ms, 0 none), then its payload |
//! | `h` len(key) (u16 BE) key element | one element of a hash, set or list (below) |
//! | `x` expiry (u64 BE, Unix ms) key | empty: the expiry index, oldest first |
//!
//! A string's bytes are its head's payload. The other types keep their
//! elements in rows of their own, under the key's element prefix, so that
//! one element is read or written without the rest:
//!
//! | type | payload | element | row value |
//! | --- | --- | --- | --- |
//! | hash | empty | field | the field's value |
//! | set | member count (u64 LE) | member | empty |
//! | list | first and next position (two u64 LE) | position (u64 BE) | the item |
//! | sorted set | member count (u64 LE) | `m` member | the score (f64 LE) |
//! | | | `s` score (8 bytes, in order) member | empty: the score index |
//!
//! Every write to a key rewrites its head (an element write too), so a
//! WATCH, which keeps the head's version, sees any change to the key. An
//! expired key stays until something touches it or the sweep passes: reads
//! treat it as missing, writes remove it first.

use epochdb::{Result, TableId, Tid, Txn};
use std::ops::Bound;

/// Longest Redis key: an engine key holds a one-byte tag, and the expiry
/// index adds 8 bytes of time.
pub const MAX_KEY: usize = epochdb::MAX_KEY_LEN - 9;
const HEAD: usize = 9;

/// A key's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String = 0,
    Hash = 1,
    Set = 2,
    List = 3,
    ZSet = 4,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::String, Kind::Hash, Kind::Set, Kind::List, Kind::ZSet];

    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::List => "list",
            Kind::ZSet => "zset",
        }
    }

    /// The type whose tag (the head's first byte) is `b`.
    pub fn from_byte(b: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(b)).copied()
    }

    /// Whether the key keeps element rows besides its head.
    pub fn has_elements(self) -> bool {
        self != Kind::String
    }
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A key's head: type and expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub kind: Kind,
    /// Unix time in ms; 0 for none.
    pub expire_at: u64,
}

impl Head {
    pub fn live(&self, now: u64) -> bool {
        self.expire_at == 0 || self.expire_at > now
    }
}

/// The engine keys of every head, and of the whole expiry index: each a
/// range from (inclusive) to (exclusive).
pub const HEADS: (&[u8], &[u8]) = (b"k", b"l");
pub const EXPIRIES: (&[u8], &[u8]) = (b"x", b"y");

/// The engine key of `key`'s head.
pub fn head_key(key: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(HEADS.0);
    buf.extend_from_slice(key);
}

/// The engine key of element `field` of `key`.
pub fn field_key(key: &[u8], field: &[u8], buf: &mut Vec<u8>) {
    field_prefix(key, buf);
    buf.extend_from_slice(field);
}

/// The prefix all element rows of `key` share.
pub fn field_prefix(key: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.push(b'h');
    buf.extend_from_slice(&(key.len() as u16).to_be_bytes());
    buf.extend_from_slice(key);
}

fn expiry_key(at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.extend_from_slice(EXPIRIES.0);
    k.extend_from_slice(&at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The smallest key above every key with prefix `p`, if there is one.
pub fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut end = p.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

fn decode(v: &[u8]) -> Option<(Head, &[u8])> {
    let kind = Kind::from_byte(*v.first()?)?;
    let expire_at = u64::from_le_bytes(v.get(1..HEAD)?.try_into().ok()?);
    Some((Head { kind, expire_at }, &v[HEAD..]))
}

/// Encodes a head followed by `payload` into `buf`.
pub fn encode(head: Head, payload: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.push(head.kind as u8);
    buf.extend_from_slice(&head.expire_at.to_le_bytes());
    buf.extend_from_slice(payload);
}

/// A key's state as a command sees it.
#[derive(Debug)]
pub enum Found<'t> {
    /// No head, or one that expired (`Some`: the expired head, which a
    /// writer must remove first).
    Missing(Option<Head>),
    Live(Head, &'t [u8]),
}

impl Found<'_> {
    /// The head a write replaces: live or expired.
    pub fn head(&self) -> Option<Head> {
        match *self {
            Found::Live(h, _) => Some(h),
            Found::Missing(h) => h,
        }
    }
}

/// What a transaction changed in INFO keyspace's counts: heads (`keys`)
/// and expiry-index entries (`expires`) added, negative if removed, per
/// table. Applied once the transaction commits (`counts.rs`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally(Vec<(TableId, [i64; 2])>);

impl Tally {
    pub fn add(&mut self, table: TableId, keys: i64, expires: i64) {
        if keys == 0 && expires == 0 {
            return; // an overwrite: nothing to count
        }
        match self.0.iter_mut().find(|(t, _)| *t == table) {
            Some((_, c)) => {
                c[0] += keys;
                c[1] += expires;
            }
            None => self.0.push((table, [keys, expires])),
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        for &(t, [k, e]) in &other.0 {
            self.add(t, k, e);
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(table, [keys, expires])` of each table changed.
    pub fn iter(&self) -> impl Iterator<Item = &(TableId, [i64; 2])> {
        self.0.iter()
    }
}

/// One database's table, with scratch buffers for engine keys, and what
/// its writes did to the counts.
pub struct Db {
    pub table: TableId,
    pub now: u64,
    /// Heads and expiry entries written or removed through this `Db`
    /// (cleared by whoever starts a transaction with it).
    pub tally: Tally,
    key: Vec<u8>,
    val: Vec<u8>,
}

impl Db {
    pub fn new(table: TableId, now: u64) -> Db {
        Db { table, now, tally: Tally::default(), key: Vec::new(), val: Vec::new() }
    }

    /// Reads `key`'s head (and a string's bytes).
    pub fn find<'t>(&mut self, txn: &'t mut Txn<'_>, key: &[u8]) -> Result<Found<'t>> {
        head_key(key, &mut self.key);
        let now = self.now;
        Ok(match txn.get(self.table, &self.key)?.and_then(decode) {
            None => Found::Missing(None),
            Some((h, _)) if !h.live(now) => Found::Missing(Some(h)),
            Some((h, payload)) => Found::Live(h, payload),
        })
    }

    /// The version of `key`'s head, for WATCH: `(present, tid)`.
    pub fn version(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<(bool, Option<Tid>)> {
        head_key(key, &mut self.key);
        let now = self.now;
        let (v, tid) = txn.get_versioned(self.table, &self.key)?;
        Ok((v.and_then(decode).is_some_and(|(h, _)| h.live(now)), tid))
    }

    /// The live head of `key`, if any.
    pub fn head(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Head>> {
        Ok(match self.find(txn, key)? {
            Found::Live(h, _) => Some(h),
            Found::Missing(_) => None,
        })
    }

    /// A string's value: `Ok(None)` if missing, `Err(())` inside for the
    /// wrong type.
    pub fn string(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<std::result::Result<Vec<u8>, ()>>> {
        Ok(match self.find(txn, key)? {
            Found::Live(Head { kind: Kind::String, .. }, v) => Some(Ok(v.to_vec())),
            Found::Live(..) => Some(Err(())),
            Found::Missing(_) => None,
        })
    }

    /// Writes `key` as a string with `expire_at` (0: none), replacing
    /// `old`, the head it had ([`Found::head`]): its elements and an
    /// expiry entry go.
    pub fn set_string(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        old: Option<Head>,
        value: &[u8],
        expire_at: u64,
    ) -> Result<()> {
        if old.is_some_and(|h| h.kind.has_elements()) {
            self.delete_fields(txn, key)?;
        }
        self.write_head(txn, key, Head { kind: Kind::String, expire_at }, value, old.map(|h| h.expire_at))
    }

    /// Writes a head with `payload` and keeps the expiry index in step
    /// with it (`old_expire`: the expiry of the head it replaces, live or
    /// expired; `None` if there is no head).
    pub fn write_head(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        head: Head,
        payload: &[u8],
        old_expire: Option<u64>,
    ) -> Result<()> {
        let new = i64::from(old_expire.is_none());
        let old_expire = old_expire.unwrap_or(0);
        let mut expires = 0;
        if old_expire != head.expire_at {
            if old_expire != 0 {
                expires -= i64::from(txn.delete(self.table, &expiry_key(old_expire, key))?);
            }
            if head.expire_at != 0 {
                txn.put(self.table, &expiry_key(head.expire_at, key), b"")?;
                expires += 1;
            }
        }
        self.tally.add(self.table, new, expires);
        head_key(key, &mut self.key);
        encode(head, payload, &mut self.val);
        txn.put(self.table, &self.key, &self.val)
    }

    /// Removes `key` whatever it is; returns whether it was live.
    pub fn delete(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<bool> {
        let (h, live) = match self.find(txn, key)? {
            Found::Live(h, _) => (h, true),
            Found::Missing(Some(h)) => (h, false),
            Found::Missing(None) => return Ok(false),
        };
        if h.kind.has_elements() {
            self.delete_fields(txn, key)?;
        }
        let mut expires = 0;
        if h.expire_at != 0 {
            expires -= i64::from(txn.delete(self.table, &expiry_key(h.expire_at, key))?);
        }
        head_key(key, &mut self.key);
        txn.delete(self.table, &self.key)?;
        self.tally.add(self.table, -1, expires);
        Ok(live)
    }

    /// Removes every element row of `key`.
    pub fn delete_fields(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<()> {
        for (k, _) in self.fields(txn, key, usize::MAX)? {
            field_key(key, &k, &mut self.key);
            txn.delete(self.table, &self.key)?;
        }
        Ok(())
    }

    /// Up to `limit` element rows of `key` as `(element, value)`, in order.
    pub fn fields(&mut self, txn: &mut Txn<'_>, key: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut rows = Vec::new();
        self.scan_fields(txn, key, limit, |_, field, v| rows.push((field.to_vec(), v.to_vec())))?;
        Ok(rows)
    }

    /// Calls `f` with up to `limit` element rows of `key`, in order, each
    /// as `(row key, element, value)`: the rows under its element prefix.
    fn scan_fields(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        limit: usize,
        mut f: impl FnMut(&[u8], &[u8], &[u8]),
    ) -> Result<()> {
        self.elements_from(txn, key, b"", limit, |k, e, v| {
            f(k, e, v);
            true
        })
    }

    /// Calls `f` with `key`'s element rows from element `from` on, in
    /// order, at most `limit`, while it returns true; each as `(row key,
    /// element, value)`.
    pub fn elements_from(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        from: &[u8],
        limit: usize,
        mut f: impl FnMut(&[u8], &[u8], &[u8]) -> bool,
    ) -> Result<()> {
        field_prefix(key, &mut self.key);
        let skip = self.key.len();
        let hi = prefix_end(&self.key);
        self.key.extend_from_slice(from);
        let range = (Bound::Included(&self.key[..]), hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded));
        txn.scan(self.table, range, limit, |k, v| f(k, &k[skip..], v))?;
        Ok(())
    }

    /// Calls `f` with the element rows of `key` whose elements lie between
    /// `lo` and `hi`, in element order (or reversed), while it returns
    /// true; each as `(element, value)`.
    pub fn element_range(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        rev: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        field_prefix(key, &mut self.key);
        let p = &self.key[..];
        let join = |e: &[u8]| [p, e].concat();
        let lo = match lo {
            Bound::Included(e) => Bound::Included(join(e)),
            Bound::Excluded(e) => Bound::Excluded(join(e)),
            Bound::Unbounded => Bound::Included(p.to_vec()),
        };
        let hi = match hi {
            Bound::Included(e) => Bound::Included(join(e)),
            Bound::Excluded(e) => Bound::Excluded(join(e)),
            Bound::Unbounded => prefix_end(p).map_or(Bound::Unbounded, Bound::Excluded),
        };
        let skip = p.len();
        let range = (lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice));
        txn.scan_dir(self.table, range, rev, usize::MAX, |k, v| f(&k[skip..], v))?;
        Ok(())
    }

    /// Element `field` of `key`: a hash's field, a set's member, a list's
    /// position.
    pub fn field<'t>(&mut self, txn: &'t mut Txn<'_>, key: &[u8], field: &[u8]) -> Result<Option<&'t [u8]>> {
        field_key(key, field, &mut self.key);
        txn.get(self.table, &self.key)
    }

    pub fn put_field(&mut self, txn: &mut Txn<'_>, key: &[u8], field: &[u8], value: &[u8]) -> Result<()> {
        field_key(key, field, &mut self.key);
        txn.put(self.table, &self.key, value)
    }

    pub fn delete_field(&mut self, txn: &mut Txn<'_>, key: &[u8], field: &[u8]) -> Result<bool> {
        field_key(key, field, &mut self.key);
        txn.delete(self.table, &self.key)
    }

    /// The engine's bytes for live `key` (MEMORY USAGE): its head, its
    /// expiry index entry, and every element row, each at
    /// [`epochdb::row_footprint`]; `None` if the key is missing.
    pub fn footprint(&mut self, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<u64>> {
        let row = |k: usize, v: usize| epochdb::row_footprint(k, v).unwrap_or(k + v) as u64;
        let (head, payload) = match self.find(txn, key)? {
            Found::Live(h, v) => (h, v.len()),
            Found::Missing(_) => return Ok(None),
        };
        head_key(key, &mut self.key);
        let mut bytes = row(self.key.len(), HEAD + payload);
        if head.expire_at != 0 {
            bytes += row(expiry_key(head.expire_at, key).len(), 0);
        }
        if head.kind.has_elements() {
            self.scan_fields(txn, key, usize::MAX, |k, _, v| bytes += row(k.len(), v.len()))?;
        }
        Ok(Some(bytes))
    }

    /// Visits live keys from `start` (inclusive) in order with their
    /// heads, at most `limit`, while `visit` returns true. Returns the
    /// key after the last one visited, if the scan stopped early.
    pub fn keys(
        &mut self,
        txn: &mut Txn<'_>,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        mut visit: impl FnMut(&[u8], Head) -> bool,
    ) -> Result<Option<Vec<u8>>> {
        head_key(start, &mut self.key);
        let lo = self.key.clone();
        let hi = match end {
            Some(e) => {
                let mut k = Vec::new();
                head_key(e, &mut k);
                k
            }
            None => HEADS.1.to_vec(),
        };
        let now = self.now;
        let mut seen = 0;
        let mut next = None;
        txn.scan(self.table, (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])), usize::MAX, |k, v| {
            if seen == limit {
                next = Some(k[1..].to_vec());
                return false;
            }
            seen += 1;
            match decode(v) {
                Some((h, _)) if h.live(now) => visit(&k[1..], h),
                _ => true,
            }
        })?;
        Ok(next)
    }

    /// Up to `limit` expiry-index entries due at `now`: `(expire_at, key)`.
    pub fn due(&mut self, txn: &mut Txn<'_>, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let hi = expiry_key(self.now + 1, b"");
        let mut due = Vec::new();
        txn.scan(self.table, (Bound::Included(EXPIRIES.0), Bound::Excluded(&hi[..])), limit, |k, _| {
            let at = u64::from_be_bytes(k[1..9].try_into().unwrap_or_default());
            due.push((at, k[9..].to_vec()));
            true
        })?;
        Ok(due)
    }

    /// Removes `key` if its head still expires at `at` (the sweep).
    pub fn expire_if(&mut self, txn: &mut Txn<'_>, at: u64, key: &[u8]) -> Result<bool> {
        match self.find(txn, key)? {
            Found::Missing(Some(h)) if h.expire_at == at => self.delete(txn, key).map(|_| true),
            _ => {
                let gone = txn.delete(self.table, &expiry_key(at, key))?;
                self.tally.add(self.table, 0, -i64::from(gone));
                Ok(false)
            }
        }
    }
}

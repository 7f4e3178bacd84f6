//! The data commands: each runs inside an epochdb transaction, alone or as
//! part of a MULTI/EXEC block, and writes its reply as it goes. A handler
//! may run more than once (an aborted transaction is retried), so it writes
//! only to the transaction and to `Exec::out`, which is cleared per try.
//!
//! A handler's `Err` is an engine error (an abort, which retries, or a
//! failure); a Redis error for the client (WRONGTYPE, syntax) is a reply.

use crate::glob;
use crate::keyspace::{head_key, prefix_end, Db, Found, Head, Kind, Tally, EXPIRIES, HEADS, MAX_KEY, WRONGTYPE};
use crate::resp::{format_f64, parse_f64, parse_i64, Args, Out};
use epochdb::{Result, TableId, Txn};
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a data command runs with.
pub struct Exec<'a> {
    pub db: &'a mut Db,
    pub out: Out<'a>,
    /// Every numbered database's table (COPY ... DB n).
    pub tables: &'a [TableId],
    pub cursors: &'a Cursors,
    /// Longest string value (`proto-max-bulk-len`, capped by the engine's).
    pub max_value: usize,
}

/// SCAN and HSCAN positions, shared by every connection: a Redis cursor
/// is an integer any connection may continue (clients rely on it, across
/// reconnects too), our positions are keys, so each cursor handed out
/// names a stored position. The newest [`OPEN_CURSORS`] are kept. A cursor
/// not known (forgotten, or handed out before a restart) starts the
/// iteration over, which SCAN's guarantees allow: an element may come
/// twice, none present throughout is missed. Cursors count up from the
/// start time in µs times 1024, so a restart hands out none of the old
/// ones.
pub struct Cursors {
    next: AtomicU64,
    open: Mutex<Open>,
}

/// The kept positions by cursor, and the cursors oldest first.
#[derive(Default)]
struct Open {
    by_cursor: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

/// Cursors kept at once; the oldest is forgotten first.
const OPEN_CURSORS: usize = 1 << 14;

impl Default for Cursors {
    fn default() -> Cursors {
        let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
        Cursors { next: AtomicU64::new((micros as u64) << 10), open: Mutex::default() }
    }
}

impl Cursors {
    fn save(&self, position: Vec<u8>) -> u64 {
        // Below 2^63, for clients that read a cursor as a signed integer.
        let cursor = (self.next.fetch_add(1, Ordering::Relaxed) & (u64::MAX >> 1)).max(1);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.order.len() == OPEN_CURSORS {
            if let Some(old) = open.order.pop_front() {
                open.by_cursor.remove(&old);
            }
        }
        open.by_cursor.insert(cursor, position);
        open.order.push_back(cursor);
        cursor
    }

    /// Where `cursor` goes on from (empty: the start).
    fn position(&self, cursor: u64) -> Vec<u8> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.by_cursor.get(&cursor).cloned().unwrap_or_default()
    }
}

pub type DataFn = fn(&mut Exec<'_>, &mut Txn<'_>, &Args) -> Result<()>;

const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const NO_KEY: &str = "ERR no such key";
const OVERFLOW: &str = "ERR increment or decrement would overflow";

/// Checks every key argument's length before any is used.
pub fn key_too_long(args: &Args, keys: impl Iterator<Item = usize>) -> bool {
    keys.into_iter().any(|i| i < args.len() && args.get(i).len() > MAX_KEY)
}

pub fn key_too_long_msg() -> String {
    format!("ERR key is too long (epochdb keys are at most {MAX_KEY} bytes)")
}

fn int_arg(out: &mut Out<'_>, a: &[u8]) -> Option<i64> {
    let v = parse_i64(a);
    if v.is_none() {
        out.error(NOT_INT);
    }
    v
}

// ---------------------------------------------------------------- strings

pub fn get(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match x.db.find(txn, a.get(1))? {
        Found::Live(Head { kind: Kind::String, .. }, v) => x.out.bulk(v),
        Found::Live(..) => x.out.error(WRONGTYPE),
        Found::Missing(_) => x.out.null(),
    }
    Ok(())
}

/// SET's options, parsed.
#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expire_at: u64,
}

/// Parses an expiry option's number into a Unix ms time (`unit` ms per
/// unit; `absolute` for EXAT/PXAT); `None` for an invalid one.
fn expire_time(now: u64, n: i64, unit: u64, absolute: bool) -> Option<u64> {
    if n <= 0 {
        return None;
    }
    let ms = (n as u64).checked_mul(unit)?;
    let at = if absolute { ms } else { now.checked_add(ms)? };
    (at < i64::MAX as u64).then_some(at)
}

fn parse_set(x: &mut Exec<'_>, a: &Args, from: usize, cmd: &str) -> Option<SetOpts> {
    let mut o = SetOpts::default();
    let mut i = from;
    let mut expiry = false;
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        match &opt[..] {
            b"NX" if !o.xx => o.nx = true,
            b"XX" if !o.nx => o.xx = true,
            b"GET" => o.get = true,
            b"KEEPTTL" if !expiry => o.keepttl = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !expiry && !o.keepttl && i + 1 < a.len() => {
                let n = int_arg(&mut x.out, a.get(i + 1))?;
                let (unit, abs) = match &opt[..] {
                    b"EX" => (1000, false),
                    b"PX" => (1, false),
                    b"EXAT" => (1000, true),
                    _ => (1, true),
                };
                let Some(at) = expire_time(x.db.now, n, unit, abs) else {
                    x.out.error(&format!("ERR invalid expire time in '{cmd}' command"));
                    return None;
                };
                o.expire_at = at;
                expiry = true;
                i += 1;
            }
            _ => {
                x.out.error(SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    Some(o)
}

pub fn set(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(o) = parse_set(x, a, 3, "set") else { return Ok(()) };
    set_with(x, txn, a.get(1), a.get(2), o)
}

fn set_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], value: &[u8], o: SetOpts) -> Result<()> {
    if value.len() > x.max_value {
        x.out.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Ok(());
    }
    let found = x.db.find(txn, key)?;
    let old_head = found.head();
    let (old, old_ttl) = match found {
        Found::Live(h, v) => {
            if o.get && h.kind != Kind::String {
                x.out.error(WRONGTYPE);
                return Ok(());
            }
            (Some(v.to_vec()), h.expire_at)
        }
        Found::Missing(_) => (None, 0),
    };
    let present = old.is_some();
    let done = !(o.nx && present || o.xx && !present);
    if done {
        let at = if o.keepttl { old_ttl } else { o.expire_at };
        x.db.set_string(txn, key, old_head, value, at)?;
    }
    if o.get {
        x.out.opt_bulk(old.as_deref());
    } else if done {
        x.out.ok();
    } else {
        x.out.null();
    }
    Ok(())
}

pub fn setnx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let found = x.db.find(txn, a.get(1))?;
    let (live, old) = (matches!(found, Found::Live(..)), found.head());
    if !live {
        x.db.set_string(txn, a.get(1), old, a.get(2), 0)?;
    }
    x.out.int(!live as i64);
    Ok(())
}

fn setex_unit(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, unit: u64, cmd: &str) -> Result<()> {
    let Some(n) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let Some(at) = expire_time(x.db.now, n, unit, false) else {
        x.out.error(&format!("ERR invalid expire time in '{cmd}' command"));
        return Ok(());
    };
    set_with(x, txn, a.get(1), a.get(3), SetOpts { expire_at: at, ..SetOpts::default() })
}

pub fn setex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    setex_unit(x, txn, a, 1000, "setex")
}

pub fn psetex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    setex_unit(x, txn, a, 1, "psetex")
}

pub fn getset(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    set_with(x, txn, a.get(1), a.get(2), SetOpts { get: true, ..SetOpts::default() })
}

pub fn getdel(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match x.db.string(txn, a.get(1))? {
        Some(Ok(v)) => {
            x.db.delete(txn, a.get(1))?;
            x.out.bulk(&v);
        }
        Some(Err(())) => x.out.error(WRONGTYPE),
        None => x.out.null(),
    }
    Ok(())
}

pub fn getex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    // One option at most: EX/PX/EXAT/PXAT n, or PERSIST.
    let new_ttl = match a.len() {
        2 => None,
        3 if a.get(2).eq_ignore_ascii_case(b"PERSIST") => Some(0),
        4 => {
            let opt = a.get(2).to_ascii_uppercase();
            let (unit, abs) = match &opt[..] {
                b"EX" => (1000, false),
                b"PX" => (1, false),
                b"EXAT" => (1000, true),
                b"PXAT" => (1, true),
                _ => {
                    x.out.error(SYNTAX);
                    return Ok(());
                }
            };
            let Some(n) = int_arg(&mut x.out, a.get(3)) else { return Ok(()) };
            let Some(at) = expire_time(x.db.now, n, unit, abs) else {
                x.out.error("ERR invalid expire time in 'getex' command");
                return Ok(());
            };
            Some(at)
        }
        _ => {
            x.out.error(SYNTAX);
            return Ok(());
        }
    };
    let (head, v) = match x.db.find(txn, key)? {
        Found::Live(h @ Head { kind: Kind::String, .. }, v) => (h, v.to_vec()),
        Found::Live(..) => {
            x.out.error(WRONGTYPE);
            return Ok(());
        }
        Found::Missing(_) => {
            x.out.null();
            return Ok(());
        }
    };
    if let Some(at) = new_ttl {
        if at != head.expire_at {
            x.db.write_head(txn, key, Head { expire_at: at, ..head }, &v, Some(head.expire_at))?;
        }
    }
    x.out.bulk(&v);
    Ok(())
}

pub fn mget(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    x.out.array(a.len() - 1);
    for key in a.iter_from(1) {
        match x.db.find(txn, key)? {
            Found::Live(Head { kind: Kind::String, .. }, v) => x.out.bulk(v),
            _ => x.out.null(),
        }
    }
    Ok(())
}

pub fn mset(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if a.len().is_multiple_of(2) {
        x.out.error("ERR wrong number of arguments for 'mset' command");
        return Ok(());
    }
    for i in (1..a.len()).step_by(2) {
        let old = x.db.find(txn, a.get(i))?.head();
        x.db.set_string(txn, a.get(i), old, a.get(i + 1), 0)?;
    }
    x.out.ok();
    Ok(())
}

pub fn msetnx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if a.len().is_multiple_of(2) {
        x.out.error("ERR wrong number of arguments for 'msetnx' command");
        return Ok(());
    }
    for i in (1..a.len()).step_by(2) {
        if x.db.head(txn, a.get(i))?.is_some() {
            x.out.int(0);
            return Ok(());
        }
    }
    for i in (1..a.len()).step_by(2) {
        // Read again: a key named twice has its first value by now.
        let old = x.db.find(txn, a.get(i))?.head();
        x.db.set_string(txn, a.get(i), old, a.get(i + 1), 0)?;
    }
    x.out.int(1);
    Ok(())
}

/// A string about to be rewritten with its TTL kept.
struct Current {
    /// The head to write back (a missing key's: no expiry).
    head: Head,
    value: Option<Vec<u8>>,
    /// The expiry the record being replaced had (an expired key's too, so
    /// its index entry goes).
    old_expire: Option<u64>,
}

/// The string at `key` for a read-modify-write; `Err(())` after writing
/// WRONGTYPE.
fn string_for_update(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<Current, ()>> {
    let stale = match x.db.find(txn, key)? {
        Found::Live(h @ Head { kind: Kind::String, .. }, v) => {
            return Ok(Ok(Current { head: h, value: Some(v.to_vec()), old_expire: Some(h.expire_at) }));
        }
        Found::Live(..) => {
            x.out.error(WRONGTYPE);
            return Ok(Err(()));
        }
        Found::Missing(stale) => stale,
    };
    if stale.is_some_and(|h| h.kind == Kind::Hash) {
        x.db.delete_fields(txn, key)?;
    }
    let head = Head { kind: Kind::String, expire_at: 0 };
    Ok(Ok(Current { head, value: None, old_expire: stale.map(|h| h.expire_at) }))
}

/// INCRBY's arithmetic on a stored value (missing: 0); `Err` is the reply
/// (`not_int` when the value is not an integer).
fn add_int(old: Option<&[u8]>, by: i64, not_int: &'static str) -> std::result::Result<i64, &'static str> {
    let cur = old.map_or(Some(0), parse_i64).ok_or(not_int)?;
    cur.checked_add(by).ok_or(OVERFLOW)
}

/// INCRBYFLOAT's: the new value as stored and replied.
fn add_float(old: Option<&[u8]>, by: f64, not_float: &'static str) -> std::result::Result<String, &'static str> {
    let n = old.map_or(Some(0.0), parse_f64).ok_or(not_float)? + by;
    if !n.is_finite() {
        return Err("ERR increment would produce NaN or Infinity");
    }
    Ok(format_f64(n))
}

fn incr_by(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], by: i64) -> Result<()> {
    let Ok(cur) = string_for_update(x, txn, key)? else { return Ok(()) };
    match add_int(cur.value.as_deref(), by, NOT_INT) {
        Ok(n) => {
            x.db.write_head(txn, key, cur.head, n.to_string().as_bytes(), cur.old_expire)?;
            x.out.int(n);
        }
        Err(e) => x.out.error(e),
    }
    Ok(())
}

pub fn incr(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    incr_by(x, txn, a.get(1), 1)
}

pub fn decr(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    incr_by(x, txn, a.get(1), -1)
}

pub fn incrby(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    incr_by(x, txn, a.get(1), by)
}

pub fn decrby(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let Some(by) = by.checked_neg() else {
        x.out.error("ERR decrement would overflow");
        return Ok(());
    };
    incr_by(x, txn, a.get(1), by)
}

pub fn incrbyfloat(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = parse_f64(a.get(2)) else {
        x.out.error(NOT_FLOAT);
        return Ok(());
    };
    let key = a.get(1);
    let Ok(cur) = string_for_update(x, txn, key)? else { return Ok(()) };
    match add_float(cur.value.as_deref(), by, NOT_FLOAT) {
        Ok(s) => {
            x.db.write_head(txn, key, cur.head, s.as_bytes(), cur.old_expire)?;
            x.out.bulk(s.as_bytes());
        }
        Err(e) => x.out.error(e),
    }
    Ok(())
}

pub fn append(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    let Ok(cur) = string_for_update(x, txn, key)? else { return Ok(()) };
    let mut v = cur.value.unwrap_or_default();
    if v.len() + a.get(2).len() > x.max_value {
        x.out.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Ok(());
    }
    v.extend_from_slice(a.get(2));
    x.db.write_head(txn, key, cur.head, &v, cur.old_expire)?;
    x.out.int(v.len() as i64);
    Ok(())
}

pub fn strlen(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match x.db.find(txn, a.get(1))? {
        Found::Live(Head { kind: Kind::String, .. }, v) => x.out.int(v.len() as i64),
        Found::Live(..) => x.out.error(WRONGTYPE),
        Found::Missing(_) => x.out.int(0),
    }
    Ok(())
}

/// MEMORY USAGE key [SAMPLES count]: the bytes the engine holds for the
/// key (`Db::footprint`), or nil. Every field of a hash is counted, so
/// SAMPLES (how many Redis looks at) is checked and changes nothing.
/// MEMORY HELP lists the subcommands.
pub fn memory(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let sub = a.get(1).to_ascii_uppercase();
    if &sub[..] == b"HELP" && a.len() == 2 {
        x.out.array(2);
        x.out.simple("MEMORY USAGE <key> [SAMPLES <count>]");
        x.out.simple("    Return memory in bytes used by <key> and its value.");
        return Ok(());
    }
    if &sub[..] != b"USAGE" || !matches!(a.len(), 3 | 5) {
        let name = String::from_utf8_lossy(a.get(1));
        x.out.error(&format!("ERR unknown subcommand or wrong number of arguments for '{name}'. Try MEMORY HELP."));
        return Ok(());
    }
    if a.len() == 5 && !(a.get(3).eq_ignore_ascii_case(b"SAMPLES") && parse_i64(a.get(4)).is_some_and(|n| n >= 0)) {
        x.out.error("ERR syntax error");
        return Ok(());
    }
    match x.db.footprint(txn, a.get(2))? {
        Some(bytes) => x.out.int(bytes as i64),
        None => x.out.null(),
    }
    Ok(())
}

pub fn getrange(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (Some(start), Some(end)) = (parse_i64(a.get(2)), parse_i64(a.get(3))) else {
        x.out.error(NOT_INT);
        return Ok(());
    };
    let v = match x.db.find(txn, a.get(1))? {
        Found::Live(Head { kind: Kind::String, .. }, v) => v,
        Found::Live(..) => {
            x.out.error(WRONGTYPE);
            return Ok(());
        }
        Found::Missing(_) => &[][..],
    };
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end || len == 0 {
        x.out.bulk(b"");
        return Ok(());
    }
    let fix = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (s, e) = (fix(start), fix(end).min(len - 1));
    if s > e {
        x.out.bulk(b"");
    } else {
        x.out.bulk(&v[s as usize..=e as usize]);
    }
    Ok(())
}

pub fn setrange(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(offset) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    if offset < 0 {
        x.out.error("ERR offset is out of range");
        return Ok(());
    }
    let (key, piece) = (a.get(1), a.get(3));
    let Ok(cur) = string_for_update(x, txn, key)? else { return Ok(()) };
    let mut v = cur.value.unwrap_or_default();
    if piece.is_empty() {
        x.out.int(v.len() as i64);
        return Ok(());
    }
    let end = offset as usize + piece.len();
    if end > x.max_value {
        x.out.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Ok(());
    }
    if v.len() < end {
        v.resize(end, 0);
    }
    v[offset as usize..end].copy_from_slice(piece);
    x.db.write_head(txn, key, cur.head, &v, cur.old_expire)?;
    x.out.int(v.len() as i64);
    Ok(())
}

// --------------------------------------------------------------- keyspace

pub fn del(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let mut n = 0;
    for key in a.iter_from(1) {
        n += x.db.delete(txn, key)? as i64;
    }
    x.out.int(n);
    Ok(())
}

pub fn exists(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let mut n = 0;
    for key in a.iter_from(1) {
        n += x.db.head(txn, key)?.is_some() as i64;
    }
    x.out.int(n);
    Ok(())
}

pub fn type_(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let name = x.db.head(txn, a.get(1))?.map_or("none", |h| h.kind.name());
    x.out.simple(name);
    Ok(())
}

pub fn keys(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let pattern = a.get(1);
    let prefix = glob::literal_prefix(pattern);
    let end = prefix_end(&prefix);
    let mut found = Vec::new();
    x.db.keys(txn, &prefix, end.as_deref(), usize::MAX, |k, _| {
        if glob::matches(pattern, k) {
            found.push(k.to_vec());
        }
        true
    })?;
    x.out.array(found.len());
    for k in &found {
        x.out.bulk(k);
    }
    Ok(())
}

/// SCAN/HSCAN's options after the cursor: MATCH, COUNT, TYPE.
struct ScanOpts {
    pattern: Option<Vec<u8>>,
    count: usize,
    kind: Option<Vec<u8>>,
}

fn scan_opts(x: &mut Exec<'_>, a: &Args, from: usize, allow_type: bool) -> Option<ScanOpts> {
    let mut o = ScanOpts { pattern: None, count: 10, kind: None };
    let mut i = from;
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        if i + 1 >= a.len() {
            x.out.error(SYNTAX);
            return None;
        }
        match &opt[..] {
            b"MATCH" => o.pattern = Some(a.get(i + 1).to_vec()),
            b"COUNT" => match parse_i64(a.get(i + 1)) {
                Some(n) if n >= 1 => o.count = n as usize,
                Some(_) => {
                    x.out.error(SYNTAX);
                    return None;
                }
                None => {
                    x.out.error(NOT_INT);
                    return None;
                }
            },
            b"TYPE" if allow_type => o.kind = Some(a.get(i + 1).to_ascii_lowercase()),
            _ => {
                x.out.error(SYNTAX);
                return None;
            }
        }
        i += 2;
    }
    Some(o)
}

/// The position a SCAN cursor names; `None` (error written) if it is no
/// unsigned integer.
fn cursor_position(x: &mut Exec<'_>, arg: &[u8]) -> Option<Vec<u8>> {
    let Some(c) = std::str::from_utf8(arg).ok().and_then(|s| s.parse::<u64>().ok()) else {
        x.out.error("ERR invalid cursor");
        return None;
    };
    Some(if c == 0 { Vec::new() } else { x.cursors.position(c) })
}

pub fn scan(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(mut start) = cursor_position(x, a.get(1)) else { return Ok(()) };
    let Some(o) = scan_opts(x, a, 2, true) else { return Ok(()) };
    let prefix = o.pattern.as_deref().map(glob::literal_prefix).unwrap_or_default();
    if start < prefix {
        start = prefix.clone();
    }
    let end = prefix_end(&prefix);
    let mut found = Vec::new();
    let next = x.db.keys(txn, &start, end.as_deref(), o.count, |k, h| {
        let type_ok = o.kind.as_deref().is_none_or(|t| t == h.kind.name().as_bytes());
        if type_ok && o.pattern.as_deref().is_none_or(|p| glob::matches(p, k)) {
            found.push(k.to_vec());
        }
        true
    })?;
    let cursor = next.map_or(0, |k| x.cursors.save(k));
    x.out.array(2);
    x.out.bulk(cursor.to_string().as_bytes());
    x.out.array(found.len());
    for k in &found {
        x.out.bulk(k);
    }
    Ok(())
}

/// A key's whole value, for RENAME and COPY.
enum Value {
    String(Vec<u8>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

fn load(db: &mut Db, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<(Head, Value)>> {
    Ok(match db.find(txn, key)? {
        Found::Live(h @ Head { kind: Kind::String, .. }, v) => Some((h, Value::String(v.to_vec()))),
        Found::Live(h, _) => Some((h, Value::Hash(db.fields(txn, key, usize::MAX)?))),
        Found::Missing(_) => None,
    })
}

fn store(db: &mut Db, txn: &mut Txn<'_>, key: &[u8], head: Head, value: &Value) -> Result<()> {
    db.delete(txn, key)?;
    match value {
        Value::String(v) => db.write_head(txn, key, head, v, None),
        Value::Hash(fields) => {
            for (f, v) in fields {
                db.put_field(txn, key, f, v)?;
            }
            db.write_head(txn, key, head, b"", None)
        }
    }
}

fn rename_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, nx: bool) -> Result<()> {
    let (src, dst) = (a.get(1), a.get(2));
    let Some((head, value)) = load(x.db, txn, src)? else {
        x.out.error(NO_KEY);
        return Ok(());
    };
    if nx && x.db.head(txn, dst)?.is_some() {
        x.out.int(0);
        return Ok(());
    }
    if src != dst {
        x.db.delete(txn, src)?;
        store(x.db, txn, dst, head, &value)?;
    }
    if nx {
        x.out.int(1);
    } else {
        x.out.ok();
    }
    Ok(())
}

pub fn rename(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    rename_with(x, txn, a, false)
}

pub fn renamenx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    rename_with(x, txn, a, true)
}

pub fn copy(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (src, dst) = (a.get(1), a.get(2));
    let (mut target, mut replace) = (x.db.table, false);
    let mut i = 3;
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        match &opt[..] {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < a.len() => {
                match parse_i64(a.get(i + 1)).and_then(|n| usize::try_from(n).ok()).and_then(|n| x.tables.get(n)) {
                    Some(&t) => target = t,
                    None => {
                        x.out.error("ERR DB index is out of range");
                        return Ok(());
                    }
                }
                i += 1;
            }
            _ => {
                x.out.error(SYNTAX);
                return Ok(());
            }
        }
        i += 1;
    }
    if target == x.db.table && src == dst {
        x.out.error("ERR source and destination objects are the same");
        return Ok(());
    }
    let Some((head, value)) = load(x.db, txn, src)? else {
        x.out.int(0);
        return Ok(());
    };
    let mut to = Db::new(target, x.db.now);
    if !replace && to.head(txn, dst)?.is_some() {
        x.out.int(0);
        return Ok(());
    }
    store(&mut to, txn, dst, head, &value)?;
    x.db.tally.merge(&to.tally);
    x.out.int(1);
    Ok(())
}

pub fn randomkey(x: &mut Exec<'_>, txn: &mut Txn<'_>, _a: &Args) -> Result<()> {
    // A random start, then the first live key at or after it (or the first
    // of all): cheap on an ordered index, though not uniform.
    use std::hash::BuildHasher;
    let seed = std::collections::hash_map::RandomState::new().hash_one(x.db.now).to_be_bytes();
    let mut pick = None;
    for start in [&seed[..1], &b""[..]] {
        x.db.keys(txn, start, None, usize::MAX, |k, _| {
            pick = Some(k.to_vec());
            false
        })?;
        if pick.is_some() {
            break;
        }
    }
    x.out.opt_bulk(pick.as_deref());
    Ok(())
}

pub fn dbsize(x: &mut Exec<'_>, txn: &mut Txn<'_>, _a: &Args) -> Result<()> {
    let mut n = 0;
    x.db.keys(txn, b"", None, usize::MAX, |_, _| {
        n += 1;
        true
    })?;
    x.out.int(n);
    Ok(())
}

pub fn flushdb(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if a.len() > 2 || a.len() == 2 && !matches!(&a.get(1).to_ascii_uppercase()[..], b"SYNC" | b"ASYNC") {
        x.out.error(SYNTAX);
        return Ok(());
    }
    clear_table(txn, x.db.table, &mut x.db.tally)?;
    x.out.ok();
    Ok(())
}

/// Deletes every record of `table` in this transaction, and takes its
/// heads and expiry entries off `tally`.
pub fn clear_table(txn: &mut Txn<'_>, table: TableId, tally: &mut Tally) -> Result<()> {
    let mut all = Vec::new();
    txn.scan(table, .., usize::MAX, |k, _| {
        all.push(k.to_vec());
        true
    })?;
    let count = |tag| all.iter().filter(|k| k.first() == Some(&tag)).count() as i64;
    tally.add(table, -count(HEADS.0[0]), -count(EXPIRIES.0[0]));
    for k in all {
        txn.delete(table, &k)?;
    }
    Ok(())
}

fn expire_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, unit: u64, absolute: bool) -> Result<()> {
    let key = a.get(1);
    let Some(n) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in a.iter_from(3) {
        match &opt.to_ascii_uppercase()[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                x.out.error(&format!("ERR Unsupported option {}", String::from_utf8_lossy(opt)));
                return Ok(());
            }
        }
    }
    if nx && (xx || gt || lt) {
        x.out.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return Ok(());
    }
    if gt && lt {
        x.out.error("ERR GT and LT options at the same time are not compatible");
        return Ok(());
    }
    // An overflowing time is an error before the key is looked at, as in
    // Redis (a negative one, past or not, deletes the key).
    let ms = n.checked_mul(unit as i64);
    let Some(at) = (if absolute { ms } else { ms.and_then(|ms| ms.checked_add(x.db.now as i64)) }) else {
        let name = match (unit, absolute) {
            (1000, false) => "expire",
            (_, false) => "pexpire",
            (1000, true) => "expireat",
            _ => "pexpireat",
        };
        x.out.error(&format!("ERR invalid expire time in '{name}' command"));
        return Ok(());
    };
    let Some(head) = x.db.head(txn, key)? else {
        x.out.int(0);
        return Ok(());
    };
    let cur = head.expire_at;
    // No expiry counts as an infinite one for GT and LT, as in Redis.
    let ok = !(nx && cur != 0
        || xx && cur == 0
        || gt && (cur == 0 || at <= cur as i64)
        || lt && cur != 0 && at >= cur as i64);
    if !ok {
        x.out.int(0);
        return Ok(());
    }
    if at <= x.db.now as i64 {
        x.db.delete(txn, key)?;
    } else {
        let payload = match load(x.db, txn, key)? {
            Some((_, Value::String(v))) => v,
            _ => Vec::new(),
        };
        x.db.write_head(txn, key, Head { expire_at: at as u64, ..head }, &payload, Some(cur))?;
    }
    x.out.int(1);
    Ok(())
}

pub fn expire(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    expire_with(x, txn, a, 1000, false)
}

pub fn pexpire(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    expire_with(x, txn, a, 1, false)
}

pub fn expireat(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    expire_with(x, txn, a, 1000, true)
}

pub fn pexpireat(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    expire_with(x, txn, a, 1, true)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: `-2` missing, `-1` no expiry.
fn ttl_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, unit: u64, absolute: bool) -> Result<()> {
    let n = match x.db.head(txn, a.get(1))? {
        None => -2,
        Some(h) if h.expire_at == 0 => -1,
        Some(h) if absolute => (h.expire_at / unit) as i64,
        Some(h) => (h.expire_at - x.db.now).div_ceil(unit) as i64,
    };
    x.out.int(n);
    Ok(())
}

pub fn ttl(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    ttl_with(x, txn, a, 1000, false)
}

pub fn pttl(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    ttl_with(x, txn, a, 1, false)
}

pub fn expiretime(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    ttl_with(x, txn, a, 1000, true)
}

pub fn pexpiretime(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    ttl_with(x, txn, a, 1, true)
}

pub fn persist(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    match load(x.db, txn, key)? {
        Some((h, v)) if h.expire_at != 0 => {
            let payload = match v {
                Value::String(s) => s,
                Value::Hash(_) => Vec::new(),
            };
            x.db.write_head(txn, key, Head { expire_at: 0, ..h }, &payload, Some(h.expire_at))?;
            x.out.int(1);
        }
        _ => x.out.int(0),
    }
    Ok(())
}

// ----------------------------------------------------------------- hashes

/// The live hash at `key` for a write (created if missing); `None` after
/// writing WRONGTYPE.
fn hash_for_write(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<(Head, Option<u64>)>> {
    let mut stale = None;
    Ok(match x.db.for_write(txn, key, Kind::Hash, &mut stale)? {
        Err(()) => {
            x.out.error(WRONGTYPE);
            None
        }
        Ok(Some(h)) => Some((h, Some(h.expire_at))),
        Ok(None) => Some((Head { kind: Kind::Hash, expire_at: 0 }, stale)),
    })
}

/// The live hash at `key` for a read: `Ok(true)` a hash, `Ok(false)`
/// missing (the empty reply is the caller's), `Err(())` WRONGTYPE written.
fn hash_for_read(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<bool, ()>> {
    Ok(match x.db.head(txn, key)? {
        Some(Head { kind: Kind::Hash, .. }) => Ok(true),
        Some(_) => {
            x.out.error(WRONGTYPE);
            Err(())
        }
        None => Ok(false),
    })
}

fn field_too_long(x: &mut Exec<'_>, key: &[u8], field: &[u8]) -> bool {
    let long = key.len() + field.len() > epochdb::MAX_KEY_LEN - 3;
    if long {
        x.out.error(&format!(
            "ERR key and field are too long (epochdb allows {} bytes together)",
            epochdb::MAX_KEY_LEN - 3
        ));
    }
    long
}

pub fn hset(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let name = a.get(0).to_ascii_lowercase();
    if !a.len().is_multiple_of(2) {
        x.out.error(&format!("ERR wrong number of arguments for '{}' command", String::from_utf8_lossy(&name)));
        return Ok(());
    }
    let key = a.get(1);
    for i in (2..a.len()).step_by(2) {
        if field_too_long(x, key, a.get(i)) {
            return Ok(());
        }
    }
    let Some((head, old)) = hash_for_write(x, txn, key)? else { return Ok(()) };
    let mut added = 0;
    for i in (2..a.len()).step_by(2) {
        added += x.db.field(txn, key, a.get(i))?.is_none() as i64;
        x.db.put_field(txn, key, a.get(i), a.get(i + 1))?;
    }
    x.db.write_head(txn, key, head, b"", old)?;
    if name == b"hmset" {
        x.out.ok();
    } else {
        x.out.int(added);
    }
    Ok(())
}

pub fn hsetnx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (key, field) = (a.get(1), a.get(2));
    if field_too_long(x, key, field) {
        return Ok(());
    }
    let Some((head, old)) = hash_for_write(x, txn, key)? else { return Ok(()) };
    if old.is_some() && x.db.field(txn, key, field)?.is_some() {
        x.out.int(0);
        return Ok(());
    }
    x.db.put_field(txn, key, field, a.get(3))?;
    x.db.write_head(txn, key, head, b"", old)?;
    x.out.int(1);
    Ok(())
}

pub fn hget(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match hash_for_read(x, txn, a.get(1))? {
        Ok(true) => {
            let v = x.db.field(txn, a.get(1), a.get(2))?;
            x.out.opt_bulk(v);
        }
        Ok(false) => x.out.null(),
        Err(()) => {}
    }
    Ok(())
}

pub fn hmget(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Ok(present) = hash_for_read(x, txn, a.get(1))? else { return Ok(()) };
    x.out.array(a.len() - 2);
    for f in a.iter_from(2) {
        if present {
            let v = x.db.field(txn, a.get(1), f)?;
            x.out.opt_bulk(v);
        } else {
            x.out.null();
        }
    }
    Ok(())
}

pub fn hdel(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    match hash_for_read(x, txn, key)? {
        Ok(true) => {}
        Ok(false) => {
            x.out.int(0);
            return Ok(());
        }
        Err(()) => return Ok(()),
    }
    let mut n = 0;
    for f in a.iter_from(2) {
        n += x.db.delete_field(txn, key, f)? as i64;
    }
    if x.db.fields(txn, key, 1)?.is_empty() {
        x.db.delete(txn, key)?;
    } else if let Some(h) = x.db.head(txn, key)? {
        x.db.write_head(txn, key, h, b"", Some(h.expire_at))?;
    }
    x.out.int(n);
    Ok(())
}

pub fn hexists(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match hash_for_read(x, txn, a.get(1))? {
        Ok(true) => {
            let v = x.db.field(txn, a.get(1), a.get(2))?.is_some();
            x.out.int(v as i64);
        }
        Ok(false) => x.out.int(0),
        Err(()) => {}
    }
    Ok(())
}

pub fn hstrlen(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match hash_for_read(x, txn, a.get(1))? {
        Ok(true) => {
            let n = x.db.field(txn, a.get(1), a.get(2))?.map_or(0, <[u8]>::len);
            x.out.int(n as i64);
        }
        Ok(false) => x.out.int(0),
        Err(()) => {}
    }
    Ok(())
}

/// HLEN, HGETALL, HKEYS, HVALS: what to reply of each field.
fn hash_all(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, keys: bool, values: bool) -> Result<()> {
    let fields = match hash_for_read(x, txn, a.get(1))? {
        Ok(true) => x.db.fields(txn, a.get(1), usize::MAX)?,
        Ok(false) => Vec::new(),
        Err(()) => return Ok(()),
    };
    match (keys, values) {
        (false, false) => x.out.int(fields.len() as i64),
        (true, true) => {
            x.out.map(fields.len());
            for (f, v) in &fields {
                x.out.bulk(f);
                x.out.bulk(v);
            }
        }
        _ => {
            x.out.array(fields.len());
            for (f, v) in &fields {
                x.out.bulk(if keys { f } else { v });
            }
        }
    }
    Ok(())
}

pub fn hlen(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    hash_all(x, txn, a, false, false)
}

pub fn hgetall(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    hash_all(x, txn, a, true, true)
}

pub fn hkeys(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    hash_all(x, txn, a, true, false)
}

pub fn hvals(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    hash_all(x, txn, a, false, true)
}

pub fn hincrby(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = int_arg(&mut x.out, a.get(3)) else { return Ok(()) };
    let new =
        update_field(x, txn, a, |old| add_int(old, by, "ERR hash value is not an integer").map(|n| n.to_string()))?;
    if let Some(n) = new {
        x.out.int(n.parse().unwrap_or_default());
    }
    Ok(())
}

pub fn hincrbyfloat(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = parse_f64(a.get(3)) else {
        x.out.error(NOT_FLOAT);
        return Ok(());
    };
    if let Some(s) = update_field(x, txn, a, |old| add_float(old, by, "ERR hash value is not a float"))? {
        x.out.bulk(s.as_bytes());
    }
    Ok(())
}

/// HINCRBY and HINCRBYFLOAT: field `a[2]` of hash `a[1]` becomes
/// `update(old value)`. Returns the new value, or `None` once an error is
/// replied.
fn update_field(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    a: &Args,
    update: impl FnOnce(Option<&[u8]>) -> std::result::Result<String, &'static str>,
) -> Result<Option<String>> {
    let (key, field) = (a.get(1), a.get(2));
    if field_too_long(x, key, field) {
        return Ok(None);
    }
    let Some((head, old)) = hash_for_write(x, txn, key)? else { return Ok(None) };
    let new = match update(x.db.field(txn, key, field)?) {
        Ok(new) => new,
        Err(e) => {
            x.out.error(e);
            return Ok(None);
        }
    };
    x.db.put_field(txn, key, field, new.as_bytes())?;
    x.db.write_head(txn, key, head, b"", old)?;
    Ok(Some(new))
}

pub fn hscan(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    let Some(start) = cursor_position(x, a.get(2)) else { return Ok(()) };
    let Some(o) = scan_opts(x, a, 3, false) else { return Ok(()) };
    let fields = match hash_for_read(x, txn, key)? {
        Ok(true) => x.db.fields(txn, key, usize::MAX)?,
        Ok(false) => Vec::new(),
        Err(()) => return Ok(()),
    };
    let from = fields.partition_point(|(f, _)| *f < start);
    let page: Vec<_> = fields[from..].iter().take(o.count).collect();
    let next = fields.get(from + o.count).map_or(0, |(f, _)| x.cursors.save(f.clone()));
    let hits: Vec<_> =
        page.into_iter().filter(|(f, _)| o.pattern.as_deref().is_none_or(|p| glob::matches(p, f))).collect();
    x.out.array(2);
    x.out.bulk(next.to_string().as_bytes());
    x.out.array(hits.len() * 2);
    for (f, v) in hits {
        x.out.bulk(f);
        x.out.bulk(v);
    }
    Ok(())
}

// -------------------------------------------------------------- extension

/// `EPOCHDB.RANGE start end [LIMIT n] [REV] [WITHVALUES]`: string keys in
/// `[start, end)` in key order (an empty `end`: no upper bound), read in
/// one serializable transaction.
pub fn range(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (start, end) = (a.get(1), a.get(2));
    let (mut limit, mut rev, mut values) = (usize::MAX, false, false);
    let mut i = 3;
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        match &opt[..] {
            b"REV" => rev = true,
            b"WITHVALUES" => values = true,
            b"LIMIT" if i + 1 < a.len() => {
                let Some(n) = parse_i64(a.get(i + 1)).filter(|&n| n >= 0) else {
                    x.out.error(NOT_INT);
                    return Ok(());
                };
                limit = n as usize;
                i += 1;
            }
            _ => {
                x.out.error(SYNTAX);
                return Ok(());
            }
        }
        i += 1;
    }
    let (mut lo, mut hi) = (Vec::new(), HEADS.1.to_vec());
    head_key(start, &mut lo);
    if !end.is_empty() {
        head_key(end, &mut hi);
    }
    let now = x.db.now;
    let mut rows = Vec::new();
    txn.scan_dir(x.db.table, (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])), rev, usize::MAX, |k, v| {
        if rows.len() == limit {
            return false;
        }
        if v.first() == Some(&(Kind::String as u8)) && v.len() >= 9 {
            let at = u64::from_le_bytes(v[1..9].try_into().unwrap_or_default());
            if at == 0 || at > now {
                rows.push((k[1..].to_vec(), v[9..].to_vec()));
            }
        }
        true
    })?;
    x.out.array(if values { rows.len() * 2 } else { rows.len() });
    for (k, v) in &rows {
        x.out.bulk(k);
        if values {
            x.out.bulk(v);
        }
    }
    Ok(())
}

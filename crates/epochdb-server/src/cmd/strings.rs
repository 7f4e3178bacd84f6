//! Strings: GET, SET and its options, the counters, ranges.

use super::{expire_time, for_write, int_arg, NOT_FLOAT, NOT_INT, OVERFLOW, SYNTAX};
use crate::command::Exec;
use crate::keyspace::{Found, Head, Kind, WRONGTYPE};
use crate::resp::{format_f64, parse_f64, parse_i64, Args};
use epochdb::{Result, Txn};

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
    Ok(match for_write(x, txn, key, Kind::String)? {
        Some(w) => Ok(Current { head: w.head, value: w.live.then_some(w.payload), old_expire: w.old }),
        None => Err(()),
    })
}

/// INCRBY's arithmetic on a stored value (missing: 0); `Err` is the reply
/// (`not_int` when the value is not an integer).
pub(super) fn add_int(old: Option<&[u8]>, by: i64, not_int: &'static str) -> std::result::Result<i64, &'static str> {
    let cur = old.map_or(Some(0), parse_i64).ok_or(not_int)?;
    cur.checked_add(by).ok_or(OVERFLOW)
}

/// INCRBYFLOAT's: the new value as stored and replied.
pub(super) fn add_float(
    old: Option<&[u8]>,
    by: f64,
    not_float: &'static str,
) -> std::result::Result<String, &'static str> {
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

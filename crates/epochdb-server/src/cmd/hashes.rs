//! Hashes: HSET and its kin, HSCAN.

use super::keys::{cursor_position, scan_opts};
use super::strings::{add_float, add_int};
use super::{element_too_long, for_write, int_arg, typed, Typed, NOT_FLOAT};
use crate::command::Exec;
use crate::glob;
use crate::keyspace::{Head, Kind};
use crate::resp::{parse_f64, Args};
use epochdb::{Result, Txn};

/// The live hash at `key` for a write (created if missing); `None` after
/// writing WRONGTYPE.
fn hash_for_write(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<(Head, Option<u64>)>> {
    Ok(for_write(x, txn, key, Kind::Hash)?.map(|w| (w.head, w.old)))
}

/// The live hash at `key` for a read: `Ok(true)` a hash, `Ok(false)`
/// missing (the empty reply is the caller's), `Err(())` WRONGTYPE written.
fn hash_for_read(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<bool, ()>> {
    Ok(match typed(x, txn, key, Kind::Hash)? {
        Typed::Live(..) => Ok(true),
        Typed::Missing => Ok(false),
        Typed::Wrong => Err(()),
    })
}

fn field_too_long(x: &mut Exec<'_>, key: &[u8], field: &[u8]) -> bool {
    element_too_long(&mut x.out, key, field, "field")
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
    if by.is_infinite() {
        x.out.error("ERR value is NaN or Infinity");
        return Ok(());
    }
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

/// HRANDFIELD key [count [WITHVALUES]]: a positive count picks distinct
/// fields, a negative one may repeat them.
pub fn hrandfield(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let values = a.len() == 4 && a.get(3).eq_ignore_ascii_case(b"WITHVALUES");
    if a.len() > 4 || (a.len() == 4 && !values) {
        x.out.error(super::SYNTAX);
        return Ok(());
    }
    let count = if a.len() >= 3 {
        let Some(n) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
        if n < i64::MIN / 2 {
            x.out.error("ERR value is out of range");
            return Ok(());
        }
        Some(n)
    } else {
        None
    };
    let fields = match hash_for_read(x, txn, a.get(1))? {
        Ok(true) => x.db.fields(txn, a.get(1), usize::MAX)?,
        Ok(false) => Vec::new(),
        Err(()) => return Ok(()),
    };
    let mut rng = super::Rng::new();
    let Some(n) = count else {
        match fields.is_empty() {
            true => x.out.null(),
            false => x.out.bulk(&fields[rng.below(fields.len())].0),
        }
        return Ok(());
    };
    let picked: Vec<usize> = if fields.is_empty() {
        Vec::new()
    } else if n < 0 {
        (0..n.unsigned_abs()).map(|_| rng.below(fields.len())).collect()
    } else {
        let mut idx: Vec<usize> = (0..fields.len()).collect();
        let n = (n as usize).min(fields.len());
        for i in 0..n {
            let j = i + rng.below(fields.len() - i);
            idx.swap(i, j);
        }
        idx.truncate(n);
        idx
    };
    if values && x.out.resp3 {
        x.out.array(picked.len());
        for &i in &picked {
            x.out.array(2);
            x.out.bulk(&fields[i].0);
            x.out.bulk(&fields[i].1);
        }
    } else {
        x.out.array(picked.len() * if values { 2 } else { 1 });
        for &i in &picked {
            x.out.bulk(&fields[i].0);
            if values {
                x.out.bulk(&fields[i].1);
            }
        }
    }
    Ok(())
}

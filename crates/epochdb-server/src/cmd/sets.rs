//! Sets: SADD and its kin, the set algebra and its STORE forms, SSCAN.
//!
//! A set's members are its element rows (empty values); its head's payload
//! is the member count, so SCARD reads one row.

use super::keys::{cursor_position, scan_opts};
use super::{element_too_long, for_write, int_arg, typed, Rng, Typed, Writing, SYNTAX};
use crate::command::Exec;
use crate::glob;
use crate::keyspace::Kind;
use crate::resp::{parse_i64, Args};
use epochdb::{Result, Txn};
use std::collections::BTreeSet;

fn count_of(payload: &[u8]) -> u64 {
    payload.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// The set at `key` for a write, with its member count; `None` after
/// replying WRONGTYPE.
fn set_for_write(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<(Writing, u64)>> {
    Ok(for_write(x, txn, key, Kind::Set)?.map(|w| {
        let n = count_of(&w.payload);
        (w, n)
    }))
}

/// Ends a write that changed set `key`: its head with `count` members, or
/// no key at all if none is left. A write that changed nothing leaves the
/// head alone, so that a WATCH on the key holds, as in Redis.
fn finish(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], w: &Writing, count: u64) -> Result<()> {
    if count == 0 {
        if w.old.is_some() {
            x.db.delete(txn, key)?;
        }
        return Ok(());
    }
    x.db.write_head(txn, key, w.head, &count.to_le_bytes(), w.old)
}

/// Adds `member` to set `key`; returns whether it was new.
fn add(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], member: &[u8]) -> Result<bool> {
    if x.db.field(txn, key, member)?.is_some() {
        return Ok(false);
    }
    x.db.put_field(txn, key, member, b"")?;
    Ok(true)
}

/// The members of set `key`, in order: `Ok(None)` if missing, `Err(())`
/// after replying WRONGTYPE.
fn members(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<Option<Vec<Vec<u8>>>, ()>> {
    Ok(match typed(x, txn, key, Kind::Set)? {
        Typed::Live(..) => Ok(Some(x.db.fields(txn, key, usize::MAX)?.into_iter().map(|(m, _)| m).collect())),
        Typed::Missing => Ok(None),
        Typed::Wrong => Err(()),
    })
}

/// Replaces whatever `key` holds with a set of `members` (none: no key).
fn store(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], members: &BTreeSet<Vec<u8>>) -> Result<()> {
    x.db.delete(txn, key)?;
    if members.is_empty() {
        return Ok(());
    }
    for m in members {
        x.db.put_field(txn, key, m, b"")?;
    }
    let head = crate::keyspace::Head { kind: Kind::Set, expire_at: 0 };
    x.db.write_head(txn, key, head, &(members.len() as u64).to_le_bytes(), None)
}

pub fn sadd(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    if a.iter_from(2).any(|m| element_too_long(&mut x.out, key, m, "member")) {
        return Ok(());
    }
    let Some((w, n)) = set_for_write(x, txn, key)? else { return Ok(()) };
    let mut added = 0;
    for m in a.iter_from(2) {
        added += add(x, txn, key, m)? as u64;
    }
    if added > 0 {
        finish(x, txn, key, &w, n + added)?;
    }
    x.out.int(added as i64);
    Ok(())
}

pub fn srem(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    let Some((w, n)) = set_for_write(x, txn, key)? else { return Ok(()) };
    if !w.live {
        x.out.int(0);
        return Ok(());
    }
    let mut removed = 0;
    for m in a.iter_from(2) {
        removed += x.db.delete_field(txn, key, m)? as u64;
    }
    if removed > 0 {
        finish(x, txn, key, &w, n - removed)?;
    }
    x.out.int(removed as i64);
    Ok(())
}

pub fn sismember(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match typed(x, txn, a.get(1), Kind::Set)? {
        Typed::Live(..) => {
            let found = x.db.field(txn, a.get(1), a.get(2))?.is_some();
            x.out.int(found as i64);
        }
        Typed::Missing => x.out.int(0),
        Typed::Wrong => {}
    }
    Ok(())
}

pub fn smismember(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let live = match typed(x, txn, a.get(1), Kind::Set)? {
        Typed::Live(..) => true,
        Typed::Missing => false,
        Typed::Wrong => return Ok(()),
    };
    x.out.array(a.len() - 2);
    for m in a.iter_from(2) {
        let found = live && x.db.field(txn, a.get(1), m)?.is_some();
        x.out.int(found as i64);
    }
    Ok(())
}

pub fn scard(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match typed(x, txn, a.get(1), Kind::Set)? {
        Typed::Live(payload) => x.out.int(count_of(&payload) as i64),
        Typed::Missing => x.out.int(0),
        Typed::Wrong => {}
    }
    Ok(())
}

pub fn smembers(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if let Ok(m) = members(x, txn, a.get(1))? {
        let m = m.unwrap_or_default();
        x.out.set(m.len());
        for v in &m {
            x.out.bulk(v);
        }
    }
    Ok(())
}

/// Picks `n` distinct indexes of `0..len` (`n` ≤ `len`), in random order.
fn sample(rng: &mut Rng, len: usize, n: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..len).collect();
    for i in 0..n {
        let j = i + rng.below(len - i);
        all.swap(i, j);
    }
    all.truncate(n);
    all
}

/// Up to this many members, random picks read the whole set and sample it
/// uniformly.
const SMALL: u64 = 1024;

/// `n` members of set `key` (of `total`) at random, distinct or not. A
/// small set, or a pick of most of one, is read whole and sampled
/// uniformly; otherwise each pick seeks to a random point between the
/// first and last members (past their common prefix): O(log n) a pick,
/// though not exactly uniform.
fn pick(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], total: u64, n: usize, distinct: bool) -> Result<Vec<Vec<u8>>> {
    let mut rng = Rng::new();
    if total <= SMALL || (distinct && n as u64 * 2 >= total) {
        let all: Vec<Vec<u8>> = x.db.fields(txn, key, usize::MAX)?.into_iter().map(|(m, _)| m).collect();
        if all.is_empty() {
            return Ok(Vec::new());
        }
        return Ok(if distinct {
            sample(&mut rng, all.len(), n.min(all.len())).into_iter().map(|i| all[i].clone()).collect()
        } else {
            (0..n).map(|_| all[rng.below(all.len())].clone()).collect()
        });
    }
    let mut ends = Vec::with_capacity(2);
    for rev in [false, true] {
        x.db.element_range(txn, key, (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), rev, |m, _| {
            ends.push(m.to_vec());
            false
        })?;
    }
    let (first, last) = (&ends[0], &ends[1]);
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let (lo, hi) = (first.get(common).copied().unwrap_or(0), last.get(common).copied().unwrap_or(255));
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(n);
    let mut tries = 0;
    while out.len() < n && tries < 4 * n + 16 {
        tries += 1;
        let mut at = first[..common].to_vec();
        at.push(lo + rng.below(usize::from(hi - lo) + 1) as u8);
        at.extend((0..8).map(|_| rng.below(256) as u8));
        let mut got = None;
        x.db.elements_from(txn, key, &at, 1, |_, m, _| {
            got = Some(m.to_vec());
            false
        })?;
        let m = got.unwrap_or_else(|| first.clone());
        if !distinct || !out.contains(&m) {
            out.push(m);
        }
    }
    // Seeks that kept landing on members already picked: the rest in order.
    if out.len() < n {
        let mut rest = Vec::new();
        x.db.elements_from(txn, key, b"", usize::MAX, |_, m, _| {
            if !out.iter().any(|o| o == m) {
                rest.push(m.to_vec());
            }
            out.len() + rest.len() < n
        })?;
        out.extend(rest);
    }
    Ok(out)
}

pub fn spop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    if a.len() > 3 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let count = if a.len() == 3 {
        match parse_i64(a.get(2)) {
            Some(n) if n >= 0 => Some(n as usize),
            Some(_) => {
                x.out.error("ERR value is out of range, must be positive");
                return Ok(());
            }
            None => {
                x.out.error(super::NOT_INT);
                return Ok(());
            }
        }
    } else {
        None
    };
    let Some((w, left)) = set_for_write(x, txn, key)? else { return Ok(()) };
    if !w.live {
        match count {
            Some(_) => x.out.set(0),
            None => x.out.null(),
        }
        return Ok(());
    }
    let picked = pick(x, txn, key, left, count.unwrap_or(1).min(left as usize), true)?;
    for m in &picked {
        x.db.delete_field(txn, key, m)?;
    }
    finish(x, txn, key, &w, left - picked.len() as u64)?;
    match count {
        None => x.out.opt_bulk(picked.first().map(|m| &m[..])),
        Some(_) => {
            x.out.set(picked.len());
            for m in &picked {
                x.out.bulk(m);
            }
        }
    }
    Ok(())
}

pub fn srandmember(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if a.len() > 3 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let count = if a.len() == 3 {
        let Some(n) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
        if n == i64::MIN {
            x.out.error("ERR value is out of range");
            return Ok(());
        }
        Some(n)
    } else {
        None
    };
    let total = match typed(x, txn, a.get(1), Kind::Set)? {
        Typed::Live(p) => count_of(&p),
        Typed::Missing => 0,
        Typed::Wrong => return Ok(()),
    };
    // A negative count may repeat members; a positive one does not.
    let (n, distinct) = match count {
        None => (1, true),
        Some(n) if n < 0 => (if total == 0 { 0 } else { n.unsigned_abs() as usize }, false),
        Some(n) => ((n as u64).min(total) as usize, true),
    };
    let picked = if total == 0 { Vec::new() } else { pick(x, txn, a.get(1), total, n, distinct)? };
    match count {
        None => x.out.opt_bulk(picked.first().map(|m| &m[..])),
        Some(_) => {
            x.out.array(picked.len());
            for m in &picked {
                x.out.bulk(m);
            }
        }
    }
    Ok(())
}

pub fn smove(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (src, dst, member) = (a.get(1), a.get(2), a.get(3));
    if element_too_long(&mut x.out, dst, member, "member") {
        return Ok(());
    }
    let in_src = match typed(x, txn, src, Kind::Set)? {
        Typed::Live(..) => x.db.field(txn, src, member)?.is_some(),
        Typed::Missing => false,
        Typed::Wrong => return Ok(()),
    };
    if let Typed::Wrong = typed(x, txn, dst, Kind::Set)? {
        return Ok(());
    }
    if !in_src || src == dst {
        x.out.int(in_src as i64);
        return Ok(());
    }
    let Some((w, n)) = set_for_write(x, txn, src)? else { return Ok(()) };
    x.db.delete_field(txn, src, member)?;
    finish(x, txn, src, &w, n - 1)?;
    let Some((w, n)) = set_for_write(x, txn, dst)? else { return Ok(()) };
    // A member dst has already leaves dst unchanged (a WATCH on it holds).
    if add(x, txn, dst, member)? {
        finish(x, txn, dst, &w, n + 1)?;
    }
    x.out.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sets at `keys` combined by `op`; `None` after replying WRONGTYPE.
/// Every key's type is checked before any result is made.
fn combine(x: &mut Exec<'_>, txn: &mut Txn<'_>, keys: &[&[u8]], op: Op) -> Result<Option<BTreeSet<Vec<u8>>>> {
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        match members(x, txn, key)? {
            Ok(m) => sets.push(m.unwrap_or_default()),
            Err(()) => return Ok(None),
        }
    }
    let mut sets = sets.into_iter().map(|m| m.into_iter().collect::<BTreeSet<_>>());
    let first = sets.next().unwrap_or_default();
    Ok(Some(sets.fold(first, |acc, s| match op {
        Op::Inter => acc.intersection(&s).cloned().collect(),
        Op::Union => acc.union(&s).cloned().collect(),
        Op::Diff => acc.difference(&s).cloned().collect(),
    })))
}

fn algebra(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, op: Op) -> Result<()> {
    let keys: Vec<&[u8]> = a.iter_from(1).collect();
    if let Some(result) = combine(x, txn, &keys, op)? {
        x.out.set(result.len());
        for m in &result {
            x.out.bulk(m);
        }
    }
    Ok(())
}

fn algebra_store(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, op: Op) -> Result<()> {
    let keys: Vec<&[u8]> = a.iter_from(2).collect();
    if let Some(result) = combine(x, txn, &keys, op)? {
        store(x, txn, a.get(1), &result)?;
        x.out.int(result.len() as i64);
    }
    Ok(())
}

pub fn sinter(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra(x, txn, a, Op::Inter)
}

pub fn sunion(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra(x, txn, a, Op::Union)
}

pub fn sdiff(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra(x, txn, a, Op::Diff)
}

pub fn sinterstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Inter)
}

pub fn sunionstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Union)
}

pub fn sdiffstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Diff)
}

/// The `numkeys key...` of SINTERCARD, LMPOP and the like: the keys, or
/// `None` after replying the error Redis gives.
pub(crate) fn numkeys<'a>(x: &mut Exec<'_>, a: &'a Args, at: usize) -> Option<Vec<&'a [u8]>> {
    let n = match parse_i64(a.get(at)) {
        Some(n) if n > 0 => n as usize,
        _ => {
            x.out.error("ERR numkeys should be greater than 0");
            return None;
        }
    };
    if n > a.len() - at - 1 {
        x.out.error("ERR Number of keys can't be greater than number of args");
        return None;
    }
    let keys: Vec<&[u8]> = (at + 1..=at + n).map(|i| a.get(i)).collect();
    if super::key_too_long(a, at + 1..=at + n) {
        x.out.error(&super::key_too_long_msg());
        return None;
    }
    Some(keys)
}

pub fn sintercard(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(keys) = numkeys(x, a, 1) else { return Ok(()) };
    let mut limit = 0;
    let mut i = 2 + keys.len();
    while i < a.len() {
        if a.get(i).eq_ignore_ascii_case(b"LIMIT") && i + 1 < a.len() {
            match parse_i64(a.get(i + 1)) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => {
                    x.out.error("ERR LIMIT can't be negative");
                    return Ok(());
                }
            }
            i += 2;
        } else {
            x.out.error(SYNTAX);
            return Ok(());
        }
    }
    if let Some(result) = combine(x, txn, &keys, Op::Inter)? {
        let n = if limit == 0 { result.len() } else { result.len().min(limit) };
        x.out.int(n as i64);
    }
    Ok(())
}

pub fn sscan(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(start) = cursor_position(x, a.get(2)) else { return Ok(()) };
    let Some(o) = scan_opts(x, a, 3, false) else { return Ok(()) };
    let all = match members(x, txn, a.get(1))? {
        Ok(m) => m.unwrap_or_default(),
        Err(()) => return Ok(()),
    };
    let from = all.partition_point(|m| *m < start);
    let next = all.get(from + o.count).map_or(0, |m| x.cursors.save(m.clone()));
    let hits: Vec<_> =
        all[from..].iter().take(o.count).filter(|m| o.pattern.as_deref().is_none_or(|p| glob::matches(p, m))).collect();
    x.out.array(2);
    x.out.bulk(next.to_string().as_bytes());
    x.out.array(hits.len());
    for m in hits {
        x.out.bulk(m);
    }
    Ok(())
}

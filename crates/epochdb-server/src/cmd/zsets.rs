//! Sorted sets: ZADD and its kin, ranges by rank, score and lex, the pops
//! (blocking ones' tries too), the algebra and its STORE forms, ZSCAN.
//!
//! Each member has two element rows: `m` member, holding its score, and
//! `s` score member, the score index, whose order is the set's (by score,
//! then member). A range by score seeks in the index and one by lex in the
//! member rows: O(log n + k). A rank is counted from an end of the index:
//! O(rank). The head's payload is the member count.

use super::keys::{cursor_position, scan_opts};
use super::sets::numkeys;
use super::{for_write, typed, Rng, Typed, Writing, NOT_FLOAT, NOT_INT, SYNTAX};
use crate::command::Exec;
use crate::glob;
use crate::keyspace::{Found, Head, Kind};
use crate::resp::{parse_f64, parse_i64, Args};
use epochdb::{Result, Txn};
use std::collections::BTreeMap;
use std::ops::Bound;

const MEMBER: u8 = b'm';
const INDEX: u8 = b's';

/// A score as 8 bytes whose order is the scores' (-0 as 0).
fn score_key(v: f64) -> u64 {
    let bits = if v == 0.0 { 0 } else { v.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn score_of_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

fn member_el(m: &[u8]) -> Vec<u8> {
    [&[MEMBER][..], m].concat()
}

fn index_el(score: f64, m: &[u8]) -> Vec<u8> {
    [&[INDEX][..], &score_key(score).to_be_bytes(), m].concat()
}

/// An index element's score and member.
fn decode_index(el: &[u8]) -> (f64, &[u8]) {
    let k = el.get(1..9).and_then(|b| b.try_into().ok()).map_or(0, u64::from_be_bytes);
    (score_of_key(k), el.get(9..).unwrap_or_default())
}

fn score_value(v: &[u8]) -> f64 {
    v.try_into().map_or(0.0, f64::from_le_bytes)
}

fn count_of(payload: &[u8]) -> u64 {
    payload.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// A sorted set about to be written, with its member count.
struct ZWrite {
    w: Writing,
    count: u64,
}

fn zset_for_write(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<ZWrite>> {
    Ok(for_write(x, txn, key, Kind::ZSet)?.map(|w| {
        let count = count_of(&w.payload);
        ZWrite { w, count }
    }))
}

/// Ends a write that changed the set: the head with its count, or no key
/// if none is left. (One that changed nothing leaves the head, so a WATCH
/// on the key holds.)
fn finish(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], z: &ZWrite) -> Result<()> {
    if z.count == 0 {
        if z.w.old.is_some() {
            x.db.delete(txn, key)?;
        }
        return Ok(());
    }
    x.db.write_head(txn, key, z.w.head, &z.count.to_le_bytes(), z.w.old)
}

fn score(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], m: &[u8]) -> Result<Option<f64>> {
    Ok(x.db.field(txn, key, &member_el(m))?.map(score_value))
}

/// Sets `m`'s score to `new` (its old one `old`, if a member).
fn put(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    key: &[u8],
    z: &mut ZWrite,
    m: &[u8],
    old: Option<f64>,
    new: f64,
) -> Result<()> {
    match old {
        Some(o) if o == new => return Ok(()),
        Some(o) => {
            x.db.delete_field(txn, key, &index_el(o, m))?;
        }
        None => z.count += 1,
    }
    x.db.put_field(txn, key, &member_el(m), &new.to_le_bytes())?;
    x.db.put_field(txn, key, &index_el(new, m), b"")
}

fn remove(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], z: &mut ZWrite, m: &[u8], score: f64) -> Result<()> {
    x.db.delete_field(txn, key, &member_el(m))?;
    x.db.delete_field(txn, key, &index_el(score, m))?;
    z.count -= 1;
    Ok(())
}

/// The sorted set at `key` for a read: `Ok(Some(count))`, `Ok(None)`
/// missing, `Err(())` after replying WRONGTYPE.
fn card(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<Option<u64>, ()>> {
    Ok(match typed(x, txn, key, Kind::ZSet)? {
        Typed::Live(p) => Ok(Some(count_of(&p))),
        Typed::Missing => Ok(None),
        Typed::Wrong => Err(()),
    })
}

/// Members with their scores.
type Scored = Vec<(Vec<u8>, f64)>;

/// Bounds on elements, as the scans take them.
type Span = (Bound<Vec<u8>>, Bound<Vec<u8>>);

fn as_slices(s: &Span) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (s.0.as_ref().map(Vec::as_slice), s.1.as_ref().map(Vec::as_slice))
}

/// Whether a span holds no element (the scans want `lo <= hi`).
fn is_empty(s: &Span) -> bool {
    match (&s.0, &s.1) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

/// Members and scores of `key` in `span` (of index or member elements),
/// in order or reversed, skipping `offset` and at most `limit`.
fn scan(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    key: &[u8],
    span: &Span,
    rev: bool,
    offset: usize,
    limit: usize,
) -> Result<Scored> {
    let mut out = Vec::new();
    if is_empty(span) || limit == 0 {
        return Ok(out);
    }
    let mut skip = offset;
    x.db.element_range(txn, key, as_slices(span), rev, |el, v| {
        if skip > 0 {
            skip -= 1;
            return true;
        }
        match el.first() {
            Some(&INDEX) => {
                let (s, m) = decode_index(el);
                out.push((m.to_vec(), s));
            }
            _ => out.push((el[1..].to_vec(), score_value(v))),
        }
        out.len() < limit
    })?;
    Ok(out)
}

fn whole_index() -> Span {
    (Bound::Included(vec![INDEX]), Bound::Excluded(vec![INDEX + 1]))
}

/// A score range's end: `(1.5` exclusive, `-inf`, `+inf`.
#[derive(Clone, Copy)]
struct ScoreEnd {
    v: f64,
    excl: bool,
}

fn parse_score_end(a: &[u8]) -> Option<ScoreEnd> {
    let (excl, t) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    parse_f64(t).map(|v| ScoreEnd { v, excl })
}

/// The index elements with scores from `min` to `max`.
fn score_span(min: ScoreEnd, max: ScoreEnd) -> Span {
    let at = |k: u64| [&[INDEX][..], &k.to_be_bytes()].concat();
    let (lo, hi) = (score_key(min.v), score_key(max.v));
    let lo = match (min.excl, lo.checked_add(1)) {
        (false, _) => Bound::Included(at(lo)),
        (true, Some(k)) => Bound::Included(at(k)),
        (true, None) => return (Bound::Included(vec![INDEX + 1]), Bound::Excluded(vec![INDEX + 1])),
    };
    let hi = match (max.excl, hi.checked_add(1)) {
        (true, _) => Bound::Excluded(at(hi)),
        (false, Some(k)) => Bound::Excluded(at(k)),
        (false, None) => Bound::Excluded(vec![INDEX + 1]),
    };
    (lo, hi)
}

/// A lex range's end as member-row bounds: `[a`, `(a`, `-`, `+`. `lower`:
/// whether it is the range's start.
fn parse_lex_end(a: &[u8], lower: bool) -> Option<Bound<Vec<u8>>> {
    let rest = || member_el(&a[1..]);
    Some(match a.first()? {
        b'[' => Bound::Included(rest()),
        b'(' => Bound::Excluded(rest()),
        b'-' if a.len() == 1 => {
            if lower {
                Bound::Included(vec![MEMBER])
            } else {
                Bound::Excluded(vec![MEMBER])
            }
        }
        b'+' if a.len() == 1 => {
            if lower {
                Bound::Included(vec![MEMBER + 1])
            } else {
                Bound::Excluded(vec![MEMBER + 1])
            }
        }
        _ => return None,
    })
}

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

/// How a range is given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A range request: by what, reversed, `LIMIT offset count`.
struct Range {
    by: By,
    rev: bool,
    limit: Option<(i64, i64)>,
}

/// The members and scores of `key` in the range `from`..`to` (for a
/// reversed one by score or lex, `from` is the maximum); `Err` is the
/// reply for invalid ends.
fn range(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    key: &[u8],
    count: u64,
    (from, to): (&[u8], &[u8]),
    r: &Range,
) -> Result<std::result::Result<Scored, &'static str>> {
    let (offset, limit) = match r.limit {
        Some((o, _)) if o < 0 => return Ok(Ok(Vec::new())),
        Some((o, c)) => (o as usize, if c < 0 { usize::MAX } else { c as usize }),
        None => (0, usize::MAX),
    };
    let (min, max) = if r.rev { (to, from) } else { (from, to) };
    let span = match r.by {
        By::Rank => {
            let (Some(start), Some(stop)) = (parse_i64(from), parse_i64(to)) else { return Ok(Err(NOT_INT)) };
            let len = count as i64;
            let start = if start < 0 { start.saturating_add(len).max(0) } else { start };
            let stop = if stop < 0 { stop.saturating_add(len) } else { stop.min(len - 1) };
            if start > stop || start >= len {
                return Ok(Ok(Vec::new()));
            }
            let n = (stop - start + 1) as usize;
            return scan(x, txn, key, &whole_index(), r.rev, start as usize, n).map(Ok);
        }
        By::Score => match (parse_score_end(min), parse_score_end(max)) {
            (Some(lo), Some(hi)) => score_span(lo, hi),
            _ => return Ok(Err(NOT_FLOAT_RANGE)),
        },
        By::Lex => match (parse_lex_end(min, true), parse_lex_end(max, false)) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => return Ok(Err(NOT_LEX_RANGE)),
        },
    };
    scan(x, txn, key, &span, r.rev, offset, limit).map(Ok)
}

/// The members of the sorted set at `key`, in its order.
pub(crate) fn members(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Vec<Vec<u8>>> {
    Ok(scan(x, txn, key, &whole_index(), false, 0, usize::MAX)?.into_iter().map(|(m, _)| m).collect())
}

/// Replies members, with their scores if `scores`: RESP2 flat, RESP3
/// pairs.
fn reply_members(x: &mut Exec<'_>, items: &[(Vec<u8>, f64)], scores: bool) {
    if !scores {
        x.out.array(items.len());
        for (m, _) in items {
            x.out.bulk(m);
        }
    } else if x.out.resp3 {
        x.out.array(items.len());
        for (m, s) in items {
            x.out.array(2);
            x.out.bulk(m);
            x.out.double(*s);
        }
    } else {
        x.out.array(items.len() * 2);
        for (m, s) in items {
            x.out.bulk(m);
            x.out.double(*s);
        }
    }
}

/// Replaces whatever `key` holds with a sorted set of `items`.
fn store(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], items: &[(Vec<u8>, f64)]) -> Result<()> {
    x.db.delete(txn, key)?;
    if items.is_empty() {
        return Ok(());
    }
    let head = Head { kind: Kind::ZSet, expire_at: 0 };
    let w = Writing { head, payload: Vec::new(), live: false, old: None };
    let mut z = ZWrite { w, count: 0 };
    for (m, s) in items {
        put(x, txn, key, &mut z, m, None, *s)?;
    }
    finish(x, txn, key, &z)
}

pub fn zincrby(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(by) = parse_f64(a.get(2)) else {
        x.out.error(NOT_FLOAT);
        return Ok(());
    };
    let key = a.get(1);
    let Some(mut z) = zset_for_write(x, txn, key)? else { return Ok(()) };
    let old = score(x, txn, key, a.get(3))?;
    let new = old.unwrap_or(0.0) + by;
    if new.is_nan() {
        x.out.error("ERR resulting score is not a number (NaN)");
        return Ok(());
    }
    put(x, txn, key, &mut z, a.get(3), old, new)?;
    finish(x, txn, key, &z)?;
    x.out.double(new);
    Ok(())
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub fn zadd(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut i = 2;
    while i < a.len() {
        match &a.get(i).to_ascii_uppercase()[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = a.len() - i;
    if pairs == 0 || pairs % 2 == 1 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    if nx && xx {
        x.out.error("ERR XX and NX options at the same time are not compatible");
        return Ok(());
    }
    if (gt || lt) && nx || gt && lt {
        x.out.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return Ok(());
    }
    if incr && pairs > 2 {
        x.out.error("ERR INCR option supports a single increment-element pair");
        return Ok(());
    }
    let mut scores = Vec::with_capacity(pairs / 2);
    for j in (i..a.len()).step_by(2) {
        match parse_f64(a.get(j)) {
            Some(v) => scores.push((v, a.get(j + 1))),
            None => {
                x.out.error(NOT_FLOAT);
                return Ok(());
            }
        }
    }
    let key = a.get(1);
    if scores.iter().any(|(_, m)| super::element_too_long(&mut x.out, key, &index_el(0.0, m), "member")) {
        return Ok(());
    }
    let Some(mut z) = zset_for_write(x, txn, key)? else { return Ok(()) };
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incr_result = None;
    for (v, m) in scores {
        let old = if z.w.live { score(x, txn, key, m)? } else { None };
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = if incr { old.unwrap_or(0.0) + v } else { v };
        if new.is_nan() {
            x.out.error("ERR resulting score is not a number (NaN)");
            return Ok(());
        }
        if let Some(o) = old {
            if (gt && new <= o) || (lt && new >= o) {
                continue;
            }
        }
        put(x, txn, key, &mut z, m, old, new)?;
        match old {
            None => added += 1,
            Some(o) if o != new => changed += 1,
            Some(_) => {}
        }
        incr_result = Some(new);
    }
    if added + changed > 0 {
        finish(x, txn, key, &z)?;
    }
    if incr {
        match incr_result {
            Some(v) => x.out.double(v),
            None => x.out.null(),
        }
    } else {
        x.out.int(if ch { added + changed } else { added });
    }
    Ok(())
}

pub fn zrem(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let key = a.get(1);
    let Some(mut z) = zset_for_write(x, txn, key)? else { return Ok(()) };
    if !z.w.live {
        x.out.int(0);
        return Ok(());
    }
    let mut n = 0;
    for m in a.iter_from(2) {
        if let Some(s) = score(x, txn, key, m)? {
            remove(x, txn, key, &mut z, m, s)?;
            n += 1;
        }
    }
    if n > 0 {
        finish(x, txn, key, &z)?;
    }
    x.out.int(n);
    Ok(())
}

pub fn zscore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match card(x, txn, a.get(1))? {
        Ok(Some(_)) => match score(x, txn, a.get(1), a.get(2))? {
            Some(s) => x.out.double(s),
            None => x.out.null(),
        },
        Ok(None) => x.out.null(),
        Err(()) => {}
    }
    Ok(())
}

pub fn zmscore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Ok(live) = card(x, txn, a.get(1))? else { return Ok(()) };
    x.out.array(a.len() - 2);
    for m in a.iter_from(2) {
        match if live.is_some() { score(x, txn, a.get(1), m)? } else { None } {
            Some(s) => x.out.double(s),
            None => x.out.null(),
        }
    }
    Ok(())
}

pub fn zcard(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if let Ok(n) = card(x, txn, a.get(1))? {
        x.out.int(n.unwrap_or(0) as i64);
    }
    Ok(())
}

/// ZRANK and ZREVRANK: counted from the index's start (or end).
fn rank(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, rev: bool) -> Result<()> {
    let key = a.get(1);
    match card(x, txn, key)? {
        Ok(Some(_)) => {}
        Ok(None) => {
            x.out.null();
            return Ok(());
        }
        Err(()) => return Ok(()),
    }
    let Some(s) = score(x, txn, key, a.get(2))? else {
        x.out.null();
        return Ok(());
    };
    let at = index_el(s, a.get(2));
    let span = if rev {
        (Bound::Excluded(at), Bound::Excluded(vec![INDEX + 1]))
    } else {
        (Bound::Included(vec![INDEX]), Bound::Excluded(at))
    };
    let mut n = 0i64;
    x.db.element_range(txn, key, as_slices(&span), false, |_, _| {
        n += 1;
        true
    })?;
    x.out.int(n);
    Ok(())
}

pub fn zrank(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    rank(x, txn, a, false)
}

pub fn zrevrank(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    rank(x, txn, a, true)
}

/// ZCOUNT and ZLEXCOUNT.
fn count_in(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, by: By) -> Result<()> {
    let key = a.get(1);
    let span = match by {
        By::Lex => match (parse_lex_end(a.get(2), true), parse_lex_end(a.get(3), false)) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => {
                x.out.error(NOT_LEX_RANGE);
                return Ok(());
            }
        },
        _ => match (parse_score_end(a.get(2)), parse_score_end(a.get(3))) {
            (Some(lo), Some(hi)) => score_span(lo, hi),
            _ => {
                x.out.error(NOT_FLOAT_RANGE);
                return Ok(());
            }
        },
    };
    match card(x, txn, key)? {
        Ok(Some(_)) => {
            let n = scan(x, txn, key, &span, false, 0, usize::MAX)?.len();
            x.out.int(n as i64);
        }
        Ok(None) => x.out.int(0),
        Err(()) => {}
    }
    Ok(())
}

pub fn zcount(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    count_in(x, txn, a, By::Score)
}

pub fn zlexcount(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    count_in(x, txn, a, By::Lex)
}

/// The options after a range's ends, from `a[at]` on: BYSCORE, BYLEX,
/// REV, LIMIT, WITHSCORES as `allowed` says; `None` after an error.
fn range_opts(x: &mut Exec<'_>, a: &Args, at: usize, by: By, rev: bool, full: bool) -> Option<(Range, bool)> {
    let mut r = Range { by, rev, limit: None };
    let mut scores = false;
    let mut i = at;
    while i < a.len() {
        match &a.get(i).to_ascii_uppercase()[..] {
            b"WITHSCORES" if by != By::Lex || full => scores = true,
            b"BYSCORE" if full => r.by = By::Score,
            b"BYLEX" if full => r.by = By::Lex,
            b"REV" if full => r.rev = true,
            b"LIMIT" if i + 2 < a.len() && (by != By::Rank || full) => {
                match (parse_i64(a.get(i + 1)), parse_i64(a.get(i + 2))) {
                    (Some(o), Some(c)) => r.limit = Some((o, c)),
                    _ => {
                        x.out.error(NOT_INT);
                        return None;
                    }
                }
                i += 2;
            }
            _ => {
                x.out.error(SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    if r.limit.is_some() && r.by == By::Rank {
        x.out.error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
        return None;
    }
    if scores && r.by == By::Lex {
        x.out.error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return None;
    }
    Some((r, scores))
}

/// Every form of ZRANGE: its ends at `a[2]`, `a[3]`, options after.
fn range_command(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, by: By, rev: bool, full: bool) -> Result<()> {
    let Some((r, scores)) = range_opts(x, a, 4, by, rev, full) else { return Ok(()) };
    let key = a.get(1);
    let count = match card(x, txn, key)? {
        Ok(n) => n.unwrap_or(0),
        Err(()) => return Ok(()),
    };
    match range(x, txn, key, count, (a.get(2), a.get(3)), &r)? {
        Ok(items) => reply_members(x, &items, scores),
        Err(e) => x.out.error(e),
    }
    Ok(())
}

pub fn zrange(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Rank, false, true)
}

pub fn zrevrange(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Rank, true, false)
}

pub fn zrangebyscore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Score, false, false)
}

pub fn zrevrangebyscore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Score, true, false)
}

pub fn zrangebylex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Lex, false, false)
}

pub fn zrevrangebylex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    range_command(x, txn, a, By::Lex, true, false)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub fn zrangestore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some((r, scores)) = range_opts(x, a, 5, By::Rank, false, true) else { return Ok(()) };
    if scores {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let (dst, src) = (a.get(1), a.get(2));
    let count = match card(x, txn, src)? {
        Ok(n) => n.unwrap_or(0),
        Err(()) => return Ok(()),
    };
    match range(x, txn, src, count, (a.get(3), a.get(4)), &r)? {
        Ok(items) => {
            store(x, txn, dst, &items)?;
            x.out.int(items.len() as i64);
        }
        Err(e) => x.out.error(e),
    }
    Ok(())
}

/// ZREMRANGEBYRANK, BYSCORE and BYLEX.
fn remove_range(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, by: By) -> Result<()> {
    let key = a.get(1);
    let Some(mut z) = zset_for_write(x, txn, key)? else { return Ok(()) };
    let r = Range { by, rev: false, limit: None };
    let items = match range(x, txn, key, z.count, (a.get(2), a.get(3)), &r)? {
        Ok(items) => items,
        Err(e) => {
            x.out.error(e);
            return Ok(());
        }
    };
    for (m, s) in &items {
        remove(x, txn, key, &mut z, m, *s)?;
    }
    finish(x, txn, key, &z)?;
    x.out.int(items.len() as i64);
    Ok(())
}

pub fn zremrangebyrank(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    remove_range(x, txn, a, By::Rank)
}

pub fn zremrangebyscore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    remove_range(x, txn, a, By::Score)
}

pub fn zremrangebylex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    remove_range(x, txn, a, By::Lex)
}

/// Pops up to `n` members of `key` with the lowest scores (`max`: the
/// highest); `None` if the key is missing (or WRONGTYPE was replied).
fn pop_n(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], max: bool, n: usize) -> Result<Option<Scored>> {
    let Some(mut z) = zset_for_write(x, txn, key)? else { return Ok(None) };
    if !z.w.live {
        return Ok(None);
    }
    let items = scan(x, txn, key, &whole_index(), max, 0, n)?;
    for (m, s) in &items {
        remove(x, txn, key, &mut z, m, *s)?;
    }
    finish(x, txn, key, &z)?;
    Ok(Some(items))
}

/// ZPOPMIN and ZPOPMAX key [count].
fn pop_command(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, max: bool) -> Result<()> {
    if a.len() > 3 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let count = match (a.len() == 3).then(|| parse_i64(a.get(2))) {
        None => None,
        Some(Some(n)) if n >= 0 => Some(n as usize),
        Some(Some(_)) => {
            x.out.error("ERR value is out of range, must be positive");
            return Ok(());
        }
        Some(None) => {
            x.out.error(NOT_INT);
            return Ok(());
        }
    };
    if let Typed::Wrong = typed(x, txn, a.get(1), Kind::ZSet)? {
        return Ok(());
    }
    let items = pop_n(x, txn, a.get(1), max, count.unwrap_or(1))?.unwrap_or_default();
    if count.is_some() && x.out.resp3 {
        reply_members(x, &items, true);
    } else {
        x.out.array(items.len() * 2);
        for (m, s) in &items {
            x.out.bulk(m);
            x.out.double(*s);
        }
    }
    Ok(())
}

pub fn zpopmin(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    pop_command(x, txn, a, false)
}

pub fn zpopmax(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    pop_command(x, txn, a, true)
}

/// Whether `key` holds a sorted set (a waiting pop's source is ready only
/// then).
fn is_zset(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<bool> {
    Ok(matches!(x.db.find(txn, key)?, Found::Live(h, _) if h.kind == Kind::ZSet))
}

/// BZPOPMIN and BZPOPMAX's try: `[key, member, score]` from the first
/// non-empty sorted set of `a[1..len-1]`; nothing if all are empty (or,
/// `waiting`, of another type).
fn bzpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, max: bool, waiting: bool) -> Result<()> {
    for key in a.iter_from(1).take(a.len() - 2) {
        if waiting && !is_zset(x, txn, key)? {
            continue;
        }
        match card(x, txn, key)? {
            Err(()) => return Ok(()),
            Ok(None) => {}
            Ok(Some(_)) => {
                let items = pop_n(x, txn, key, max, 1)?.unwrap_or_default();
                if let Some((m, s)) = items.first() {
                    x.out.array(3);
                    x.out.bulk(key);
                    x.out.bulk(m);
                    x.out.double(*s);
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

pub fn bzpopmin_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bzpop_try(x, txn, a, false, false)
}

pub fn bzpopmin_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bzpop_try(x, txn, a, false, true)
}

pub fn bzpopmax_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bzpop_try(x, txn, a, true, false)
}

pub fn bzpopmax_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bzpop_try(x, txn, a, true, true)
}

/// ZMPOP's (and BZMPOP's) work from `a[at]` on: `numkeys key... MIN|MAX
/// [COUNT n]`; replies `[key, [[member, score]...]]` or nothing if all
/// are empty.
fn mpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, at: usize, waiting: bool) -> Result<()> {
    let Some(keys) = numkeys(x, a, at) else { return Ok(()) };
    let mut i = at + 1 + keys.len();
    let max = match (i < a.len()).then(|| a.get(i).to_ascii_uppercase()).as_deref() {
        Some(b"MIN") => false,
        Some(b"MAX") => true,
        _ => {
            x.out.error(SYNTAX);
            return Ok(());
        }
    };
    i += 1;
    let mut count = 1;
    if i < a.len() {
        if !(a.get(i).eq_ignore_ascii_case(b"COUNT") && i + 2 == a.len()) {
            x.out.error(SYNTAX);
            return Ok(());
        }
        match parse_i64(a.get(i + 1)) {
            Some(n) if n > 0 => count = n as usize,
            _ => {
                x.out.error("ERR count should be greater than 0");
                return Ok(());
            }
        }
    }
    for key in keys {
        if waiting && !is_zset(x, txn, key)? {
            continue;
        }
        match card(x, txn, key)? {
            Err(()) => return Ok(()),
            Ok(None) => {}
            Ok(Some(_)) => {
                let items = pop_n(x, txn, key, max, count)?.unwrap_or_default();
                x.out.array(2);
                x.out.bulk(key);
                x.out.array(items.len());
                for (m, s) in &items {
                    x.out.array(2);
                    x.out.bulk(m);
                    x.out.double(*s);
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

pub fn zmpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let before = x.out.buf.len();
    mpop(x, txn, a, 1, false)?;
    if x.out.buf.len() == before {
        x.out.null_array();
    }
    Ok(())
}

pub fn bzmpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    mpop(x, txn, a, 2, false)
}

pub fn bzmpop_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    mpop(x, txn, a, 2, true)
}

/// ZRANDMEMBER key [count [WITHSCORES]].
pub fn zrandmember(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let scores = a.len() == 4 && a.get(3).eq_ignore_ascii_case(b"WITHSCORES");
    if a.len() > 4 || (a.len() == 4 && !scores) {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let count = if a.len() >= 3 {
        match parse_i64(a.get(2)) {
            Some(n) if n > i64::MIN / 2 => Some(n),
            Some(_) => {
                x.out.error("ERR value is out of range");
                return Ok(());
            }
            None => {
                x.out.error(NOT_INT);
                return Ok(());
            }
        }
    } else {
        None
    };
    let all = match card(x, txn, a.get(1))? {
        Ok(Some(_)) => scan(x, txn, a.get(1), &whole_index(), false, 0, usize::MAX)?,
        Ok(None) => Vec::new(),
        Err(()) => return Ok(()),
    };
    let mut rng = Rng::new();
    let Some(n) = count else {
        match all.is_empty() {
            true => x.out.null(),
            false => x.out.bulk(&all[rng.below(all.len())].0),
        }
        return Ok(());
    };
    let picked: Vec<(Vec<u8>, f64)> = if all.is_empty() {
        Vec::new()
    } else if n < 0 {
        (0..n.unsigned_abs()).map(|_| all[rng.below(all.len())].clone()).collect()
    } else {
        let mut idx: Vec<usize> = (0..all.len()).collect();
        let n = (n as usize).min(all.len());
        for i in 0..n {
            let j = i + rng.below(all.len() - i);
            idx.swap(i, j);
        }
        idx[..n].iter().map(|&i| all[i].clone()).collect()
    };
    reply_members(x, &picked, scores);
    Ok(())
}

/// How the algebra combines a member's weighted scores.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            // inf + -inf is 0 in Redis, not NaN.
            Aggregate::Sum => Some(a + b).filter(|v| !v.is_nan()).unwrap_or(0.0),
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// The members and scores of a sorted set or a set (each member scoring
/// 1); `None` after replying WRONGTYPE.
fn input(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<BTreeMap<Vec<u8>, f64>>> {
    let kind = match x.db.find(txn, key)? {
        Found::Live(h, _) => h.kind,
        Found::Missing(_) => return Ok(Some(BTreeMap::new())),
    };
    Ok(match kind {
        Kind::ZSet => {
            let span = (Bound::Included(vec![MEMBER]), Bound::Excluded(vec![MEMBER + 1]));
            Some(scan(x, txn, key, &span, false, 0, usize::MAX)?.into_iter().collect())
        }
        Kind::Set => Some(x.db.fields(txn, key, usize::MAX)?.into_iter().map(|(m, _)| (m, 1.0)).collect()),
        _ => {
            x.out.error(crate::keyspace::WRONGTYPE);
            None
        }
    })
}

/// The `numkeys key...` at `a[at]` of the algebra and ZINTERCARD; `None`
/// after replying the error Redis gives.
fn input_keys<'a>(x: &mut Exec<'_>, a: &'a Args, at: usize) -> Option<Vec<&'a [u8]>> {
    let n = match parse_i64(a.get(at)) {
        Some(n) if n > 0 => n as usize,
        Some(_) => {
            let name = String::from_utf8_lossy(a.get(0)).to_ascii_lowercase();
            x.out.error(&format!("ERR at least 1 input key is needed for '{name}' command"));
            return None;
        }
        None => {
            x.out.error(NOT_INT);
            return None;
        }
    };
    if n > a.len() - at - 1 {
        x.out.error(SYNTAX);
        return None;
    }
    Some((at + 1..=at + n).map(|i| a.get(i)).collect())
}

/// ZUNION, ZINTER, ZDIFF and their STORE forms: `numkeys key... [WEIGHTS
/// w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` from `a[at]` on. The
/// result, and whether WITHSCORES was given; `None` after an error.
fn algebra(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    a: &Args,
    at: usize,
    op: Op,
    store: bool,
) -> Result<Option<(Scored, bool)>> {
    let Some(keys) = input_keys(x, a, at) else { return Ok(None) };
    let n = keys.len();
    let mut weights = vec![1.0; n];
    let (mut agg, mut scores) = (Aggregate::Sum, false);
    let mut i = at + 1 + n;
    while i < a.len() {
        match &a.get(i).to_ascii_uppercase()[..] {
            b"WEIGHTS" if op != Op::Diff && i + n < a.len() => {
                for (j, w) in weights.iter_mut().enumerate() {
                    match parse_f64(a.get(i + 1 + j)) {
                        Some(v) => *w = v,
                        None => {
                            x.out.error("ERR weight value is not a float");
                            return Ok(None);
                        }
                    }
                }
                i += n;
            }
            b"AGGREGATE" if op != Op::Diff && i + 1 < a.len() => {
                agg = match &a.get(i + 1).to_ascii_uppercase()[..] {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => {
                        x.out.error(SYNTAX);
                        return Ok(None);
                    }
                };
                i += 1;
            }
            b"WITHSCORES" if !store => scores = true,
            _ => {
                x.out.error(SYNTAX);
                return Ok(None);
            }
        }
        i += 1;
    }
    let mut sets = Vec::with_capacity(n);
    for key in &keys {
        match input(x, txn, key)? {
            Some(s) => sets.push(s),
            None => return Ok(None),
        }
    }
    let weigh = |v: f64, w: f64| Some(v * w).filter(|p| !p.is_nan()).unwrap_or(0.0);
    let mut result: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let mut sets = sets.into_iter().zip(weights);
    if let Some((first, w)) = sets.next() {
        result = first.into_iter().map(|(m, s)| (m, weigh(s, w))).collect();
    }
    for (set, w) in sets {
        match op {
            Op::Union => {
                for (m, s) in set {
                    let s = weigh(s, w);
                    result.entry(m).and_modify(|v| *v = agg.apply(*v, s)).or_insert(s);
                }
            }
            Op::Inter => {
                result.retain(|m, v| match set.get(m) {
                    Some(&s) => {
                        *v = agg.apply(*v, weigh(s, w));
                        true
                    }
                    None => false,
                });
            }
            Op::Diff => result.retain(|m, _| !set.contains_key(m)),
        }
    }
    let mut items: Vec<(Vec<u8>, f64)> = result.into_iter().collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(Some((items, scores)))
}

fn algebra_reply(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, op: Op) -> Result<()> {
    if let Some((items, scores)) = algebra(x, txn, a, 1, op, false)? {
        reply_members(x, &items, scores);
    }
    Ok(())
}

fn algebra_store(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, op: Op) -> Result<()> {
    if let Some((items, _)) = algebra(x, txn, a, 2, op, true)? {
        store(x, txn, a.get(1), &items)?;
        x.out.int(items.len() as i64);
    }
    Ok(())
}

pub fn zunion(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_reply(x, txn, a, Op::Union)
}

pub fn zinter(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_reply(x, txn, a, Op::Inter)
}

pub fn zdiff(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_reply(x, txn, a, Op::Diff)
}

pub fn zunionstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Union)
}

pub fn zinterstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Inter)
}

pub fn zdiffstore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    algebra_store(x, txn, a, Op::Diff)
}

/// ZINTERCARD numkeys key... [LIMIT limit].
pub fn zintercard(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(keys) = input_keys(x, a, 1) else { return Ok(()) };
    let mut limit = 0;
    let i = 2 + keys.len();
    if i < a.len() {
        if !(a.get(i).eq_ignore_ascii_case(b"LIMIT") && i + 2 == a.len()) {
            x.out.error(SYNTAX);
            return Ok(());
        }
        match parse_i64(a.get(i + 1)) {
            Some(n) if n >= 0 => limit = n as usize,
            _ => {
                x.out.error("ERR LIMIT can't be negative");
                return Ok(());
            }
        }
    }
    let mut sets = Vec::new();
    for key in &keys {
        match input(x, txn, key)? {
            Some(s) => sets.push(s),
            None => return Ok(()),
        }
    }
    let first = sets.first().cloned().unwrap_or_default();
    let mut n = first.keys().filter(|m| sets[1..].iter().all(|s| s.contains_key(*m))).count();
    if limit > 0 {
        n = n.min(limit);
    }
    x.out.int(n as i64);
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT n]: members in member order.
pub fn zscan(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(start) = cursor_position(x, a.get(2)) else { return Ok(()) };
    let Some(o) = scan_opts(x, a, 3, false) else { return Ok(()) };
    let key = a.get(1);
    let all = match card(x, txn, key)? {
        Ok(Some(_)) => {
            let span = (Bound::Included(member_el(&start)), Bound::Excluded(vec![MEMBER + 1]));
            scan(x, txn, key, &span, false, 0, o.count + 1)?
        }
        Ok(None) => Vec::new(),
        Err(()) => return Ok(()),
    };
    let next = all.get(o.count).map_or(0, |(m, _)| x.cursors.save(m.clone()));
    let hits: Vec<_> =
        all.iter().take(o.count).filter(|(m, _)| o.pattern.as_deref().is_none_or(|p| glob::matches(p, m))).collect();
    x.out.array(2);
    x.out.bulk(next.to_string().as_bytes());
    x.out.array(hits.len() * 2);
    for (m, s) in hits {
        x.out.bulk(m);
        x.out.bulk(crate::resp::format_double(*s).as_bytes());
    }
    Ok(())
}

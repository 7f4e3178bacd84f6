//! Lists: pushes and pops at either end, LRANGE, LINDEX, LSET, LINSERT,
//! LREM, LTRIM, LPOS, LMOVE and LMPOP.
//!
//! A list's items are element rows keyed by their position (u64 BE); its
//! head's payload is the first position and the one after the last. So
//! LINDEX and LSET read one row and LRANGE seeks to its start: O(log n),
//! O(log n + k), whatever the list's length. A new list starts in the
//! middle of the positions, so that either end can grow.

use super::sets::numkeys;
use super::{for_write, int_arg, typed, Typed, Writing, NO_KEY, SYNTAX};
use crate::command::{DataFn, Exec};
use crate::keyspace::{Found, Kind};
use crate::resp::{parse_i64, Args};
use epochdb::{Result, Txn};

const MIDDLE: u64 = 1 << 63;

/// The positions a list's items take: `first..next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    first: u64,
    next: u64,
}

impl Span {
    fn decode(payload: &[u8]) -> Span {
        let word = |i: usize| payload.get(i..i + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        match (word(0), word(8)) {
            (Some(first), Some(next)) if first <= next => Span { first, next },
            _ => Span { first: MIDDLE, next: MIDDLE },
        }
    }

    fn encode(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.first.to_le_bytes());
        b[8..].copy_from_slice(&self.next.to_le_bytes());
        b
    }

    fn len(self) -> u64 {
        self.next - self.first
    }

    /// The position of index `i` (negative: from the end), if in range.
    fn at(self, i: i64) -> Option<u64> {
        let len = self.len() as i64;
        let i = if i < 0 { i.checked_add(len)? } else { i };
        (0..len).contains(&i).then(|| self.first + i as u64)
    }

    /// Redis's `start stop` (inclusive, negative from the end) as indexes
    /// `from..to`, empty if nothing is in range.
    fn range(self, start: i64, stop: i64) -> (u64, u64) {
        let len = self.len() as i64;
        let start = if start < 0 { (start.saturating_add(len)).max(0) } else { start };
        let stop = if stop < 0 { stop.saturating_add(len) } else { stop.min(len - 1) };
        if start > stop || start >= len {
            (0, 0)
        } else {
            (start as u64, stop as u64 + 1)
        }
    }
}

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    Left,
    Right,
}

impl End {
    /// LEFT or RIGHT, in any case.
    pub(crate) fn parse(a: &[u8]) -> Option<End> {
        if a.eq_ignore_ascii_case(b"LEFT") {
            Some(End::Left)
        } else if a.eq_ignore_ascii_case(b"RIGHT") {
            Some(End::Right)
        } else {
            None
        }
    }
}

/// A list about to be written.
struct List {
    w: Writing,
    span: Span,
}

fn list_for_write(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<List>> {
    Ok(for_write(x, txn, key, Kind::List)?.map(|w| {
        let span = Span::decode(&w.payload);
        List { w, span }
    }))
}

/// Ends a write to list `key`: its head, or no key if it is empty.
fn finish(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], l: &List) -> Result<()> {
    if l.span.len() == 0 {
        if l.w.old.is_some() {
            x.db.delete(txn, key)?;
        }
        return Ok(());
    }
    x.db.write_head(txn, key, l.w.head, &l.span.encode(), l.w.old)
}

fn push(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], l: &mut List, end: End, item: &[u8]) -> Result<()> {
    let pos = match end {
        End::Left => {
            l.span.first -= 1;
            l.span.first
        }
        End::Right => {
            l.span.next += 1;
            l.span.next - 1
        }
    };
    x.db.put_field(txn, key, &pos.to_be_bytes(), item)
}

fn pop(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], l: &mut List, end: End) -> Result<Option<Vec<u8>>> {
    if l.span.len() == 0 {
        return Ok(None);
    }
    let pos = match end {
        End::Left => l.span.first,
        End::Right => l.span.next - 1,
    };
    let item = x.db.field(txn, key, &pos.to_be_bytes())?.map(<[u8]>::to_vec);
    x.db.delete_field(txn, key, &pos.to_be_bytes())?;
    match end {
        End::Left => l.span.first += 1,
        End::Right => l.span.next -= 1,
    }
    Ok(item)
}

/// Items at indexes `from..to` of the list at `key`, in order.
fn items(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], span: Span, from: u64, to: u64) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity((to - from).min(1 << 16) as usize);
    if from < to {
        let start = (span.first + from).to_be_bytes();
        x.db.elements_from(txn, key, &start, (to - from) as usize, |_, _, v| {
            out.push(v.to_vec());
            true
        })?;
    }
    Ok(out)
}

/// Replaces every item of list `key` with `new`.
fn rewrite(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], l: &mut List, new: &[Vec<u8>]) -> Result<()> {
    x.db.delete_fields(txn, key)?;
    l.span = Span { first: MIDDLE, next: MIDDLE };
    for item in new {
        push(x, txn, key, l, End::Right, item)?;
    }
    Ok(())
}

/// Replaces whatever `key` holds with a list of `items` (none: no key).
pub(crate) fn store(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], items: &[Vec<u8>]) -> Result<()> {
    x.db.delete(txn, key)?;
    let head = crate::keyspace::Head { kind: Kind::List, expire_at: 0 };
    let w = Writing { head, payload: Vec::new(), live: false, old: None };
    let mut l = List { w, span: Span { first: MIDDLE, next: MIDDLE } };
    for item in items {
        push(x, txn, key, &mut l, End::Right, item)?;
    }
    finish(x, txn, key, &l)
}

/// The list at `key` for a read: `Ok(Some(span))`, `Ok(None)` missing,
/// `Err(())` after replying WRONGTYPE.
fn span_of(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<std::result::Result<Option<Span>, ()>> {
    Ok(match typed(x, txn, key, Kind::List)? {
        Typed::Live(payload) => Ok(Some(Span::decode(&payload))),
        Typed::Missing => Ok(None),
        Typed::Wrong => Err(()),
    })
}

fn key_too_long_for_a_list(x: &mut Exec<'_>, key: &[u8]) -> bool {
    super::element_too_long(&mut x.out, key, &[0; 8], "list position")
}

/// LPUSH, RPUSH and their X forms (`only_existing`).
fn push_command(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, end: End, only_existing: bool) -> Result<()> {
    let key = a.get(1);
    if key_too_long_for_a_list(x, key) {
        return Ok(());
    }
    let Some(mut l) = list_for_write(x, txn, key)? else { return Ok(()) };
    if only_existing && !l.w.live {
        x.out.int(0);
        return Ok(());
    }
    for item in a.iter_from(2) {
        push(x, txn, key, &mut l, end, item)?;
    }
    finish(x, txn, key, &l)?;
    x.out.int(l.span.len() as i64);
    Ok(())
}

pub fn lpush(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    push_command(x, txn, a, End::Left, false)
}

pub fn rpush(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    push_command(x, txn, a, End::Right, false)
}

pub fn lpushx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    push_command(x, txn, a, End::Left, true)
}

pub fn rpushx(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    push_command(x, txn, a, End::Right, true)
}

/// Pops up to `n` items of list `key` from `end`; `None` if the key is
/// missing, after replying WRONGTYPE too.
fn pop_n(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], end: End, n: u64) -> Result<Option<Vec<Vec<u8>>>> {
    let Some(mut l) = list_for_write(x, txn, key)? else { return Ok(None) };
    if !l.w.live {
        return Ok(None);
    }
    let mut out = Vec::new();
    while (out.len() as u64) < n {
        match pop(x, txn, key, &mut l, end)? {
            Some(item) => out.push(item),
            None => break,
        }
    }
    finish(x, txn, key, &l)?;
    Ok(Some(out))
}

/// LPOP and RPOP, with or without a count.
fn pop_command(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, end: End) -> Result<()> {
    if a.len() > 3 {
        x.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            super::printable(a.get(0)).to_lowercase()
        ));
        return Ok(());
    }
    let count = match (a.len() == 3).then(|| parse_i64(a.get(2))) {
        None => None,
        Some(Some(n)) if n >= 0 => Some(n as u64),
        Some(_) => {
            x.out.error("ERR value is out of range, must be positive");
            return Ok(());
        }
    };
    let key = a.get(1);
    match span_of(x, txn, key)? {
        Err(()) => return Ok(()),
        Ok(None) => {
            match count {
                Some(_) => x.out.null_array(),
                None => x.out.null(),
            }
            return Ok(());
        }
        Ok(Some(_)) if count == Some(0) => {
            x.out.array(0);
            return Ok(());
        }
        Ok(Some(_)) => {}
    }
    let popped = pop_n(x, txn, key, end, count.unwrap_or(1))?.unwrap_or_default();
    match count {
        None => x.out.opt_bulk(popped.first().map(|v| &v[..])),
        Some(_) => {
            x.out.array(popped.len());
            for v in &popped {
                x.out.bulk(v);
            }
        }
    }
    Ok(())
}

pub fn lpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    pop_command(x, txn, a, End::Left)
}

pub fn rpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    pop_command(x, txn, a, End::Right)
}

pub fn llen(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if let Ok(span) = span_of(x, txn, a.get(1))? {
        x.out.int(span.map_or(0, Span::len) as i64);
    }
    Ok(())
}

pub fn lrange(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(start) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let Some(stop) = int_arg(&mut x.out, a.get(3)) else { return Ok(()) };
    let key = a.get(1);
    let Ok(span) = span_of(x, txn, key)? else { return Ok(()) };
    let got = match span {
        Some(span) => {
            let (from, to) = span.range(start, stop);
            items(x, txn, key, span, from, to)?
        }
        None => Vec::new(),
    };
    x.out.array(got.len());
    for v in &got {
        x.out.bulk(v);
    }
    Ok(())
}

pub fn lindex(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(i) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let key = a.get(1);
    let Ok(span) = span_of(x, txn, key)? else { return Ok(()) };
    match span.and_then(|s| s.at(i)) {
        Some(pos) => {
            let v = x.db.field(txn, key, &pos.to_be_bytes())?;
            x.out.opt_bulk(v);
        }
        None => x.out.null(),
    }
    Ok(())
}

pub fn lset(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(i) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let key = a.get(1);
    let Some(l) = list_for_write(x, txn, key)? else { return Ok(()) };
    if !l.w.live {
        x.out.error(NO_KEY);
        return Ok(());
    }
    let Some(pos) = l.span.at(i) else {
        x.out.error("ERR index out of range");
        return Ok(());
    };
    x.db.put_field(txn, key, &pos.to_be_bytes(), a.get(3))?;
    finish(x, txn, key, &l)?;
    x.out.ok();
    Ok(())
}

pub fn linsert(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let after = match &a.get(2).to_ascii_uppercase()[..] {
        b"BEFORE" => false,
        b"AFTER" => true,
        _ => {
            x.out.error(SYNTAX);
            return Ok(());
        }
    };
    let (key, pivot, item) = (a.get(1), a.get(3), a.get(4));
    let Some(mut l) = list_for_write(x, txn, key)? else { return Ok(()) };
    if !l.w.live {
        x.out.int(0);
        return Ok(());
    }
    let mut all = items(x, txn, key, l.span, 0, l.span.len())?;
    let Some(i) = all.iter().position(|v| v == pivot) else {
        x.out.int(-1);
        return Ok(());
    };
    all.insert(i + after as usize, item.to_vec());
    rewrite(x, txn, key, &mut l, &all)?;
    finish(x, txn, key, &l)?;
    x.out.int(l.span.len() as i64);
    Ok(())
}

pub fn lrem(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(count) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let (key, item) = (a.get(1), a.get(3));
    let Some(mut l) = list_for_write(x, txn, key)? else { return Ok(()) };
    if !l.w.live {
        x.out.int(0);
        return Ok(());
    }
    let mut all = items(x, txn, key, l.span, 0, l.span.len())?;
    // count > 0: the first `count` from the head; < 0: from the tail; 0: all.
    let limit = if count == 0 { usize::MAX } else { count.unsigned_abs().min(usize::MAX as u64) as usize };
    let mut removed = 0;
    if count < 0 {
        all.reverse();
    }
    all.retain(|v| {
        let hit = removed < limit && v == item;
        removed += hit as usize;
        !hit
    });
    if count < 0 {
        all.reverse();
    }
    if removed > 0 {
        rewrite(x, txn, key, &mut l, &all)?;
        finish(x, txn, key, &l)?;
    }
    x.out.int(removed as i64);
    Ok(())
}

pub fn ltrim(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(start) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    let Some(stop) = int_arg(&mut x.out, a.get(3)) else { return Ok(()) };
    let key = a.get(1);
    let Some(mut l) = list_for_write(x, txn, key)? else { return Ok(()) };
    if !l.w.live {
        x.out.ok();
        return Ok(());
    }
    let (from, to) = l.span.range(start, stop);
    let keep = if from < to { Span { first: l.span.first + from, next: l.span.first + to } } else { l.span };
    let mut gone = Vec::new();
    x.db.elements_from(txn, key, b"", usize::MAX, |_, e, _| {
        let pos = e.try_into().map(u64::from_be_bytes).unwrap_or(0);
        if from >= to || !(keep.first..keep.next).contains(&pos) {
            gone.push(pos);
        }
        true
    })?;
    for pos in gone {
        x.db.delete_field(txn, key, &pos.to_be_bytes())?;
    }
    l.span = if from < to { keep } else { Span { first: MIDDLE, next: MIDDLE } };
    finish(x, txn, key, &l)?;
    x.out.ok();
    Ok(())
}

pub fn lpos(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (key, item) = (a.get(1), a.get(2));
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut i = 3;
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        if i + 1 >= a.len() {
            x.out.error(SYNTAX);
            return Ok(());
        }
        let n = parse_i64(a.get(i + 1));
        match (&opt[..], n) {
            (b"RANK", Some(0)) => {
                x.out.error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list",
                );
                return Ok(());
            }
            (b"RANK", Some(n)) if n != i64::MIN => rank = n,
            (b"RANK", _) => {
                x.out.error(super::NOT_INT);
                return Ok(());
            }
            (b"COUNT", Some(n)) if n >= 0 => count = Some(n as u64),
            (b"COUNT", _) => {
                x.out.error("ERR COUNT can't be negative");
                return Ok(());
            }
            (b"MAXLEN", Some(n)) if n >= 0 => maxlen = n as u64,
            (b"MAXLEN", _) => {
                x.out.error("ERR MAXLEN can't be negative");
                return Ok(());
            }
            _ => {
                x.out.error(SYNTAX);
                return Ok(());
            }
        }
        i += 2;
    }
    let Ok(span) = span_of(x, txn, key)? else { return Ok(()) };
    let all = match span {
        Some(s) => items(x, txn, key, s, 0, s.len())?,
        None => Vec::new(),
    };
    let len = all.len();
    let scanned = if maxlen == 0 { len } else { len.min(maxlen as usize) };
    let want = match count {
        Some(0) => usize::MAX,
        Some(n) => n as usize,
        None => 1,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let order: Box<dyn Iterator<Item = usize>> =
        if rank > 0 { Box::new(0..scanned) } else { Box::new((len - scanned..len).rev()) };
    for idx in order {
        if found.len() == want {
            break;
        }
        if all[idx] == item {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(idx);
            }
        }
    }
    match count {
        None => match found.first() {
            Some(&i) => x.out.int(i as i64),
            None => x.out.null(),
        },
        Some(_) => {
            x.out.array(found.len());
            for i in found {
                x.out.int(i as i64);
            }
        }
    }
    Ok(())
}

/// LMOVE's work: pops from `src` at `from`, pushes to `dst` at `to`, and
/// replies the item. Replies nothing if `src` is empty.
fn move_item(x: &mut Exec<'_>, txn: &mut Txn<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> Result<()> {
    let Ok(span) = span_of(x, txn, src)? else { return Ok(()) };
    if span.is_none() {
        return Ok(());
    }
    if let Typed::Wrong = typed(x, txn, dst, Kind::List)? {
        return Ok(());
    }
    if key_too_long_for_a_list(x, dst) {
        return Ok(());
    }
    let Some(mut l) = list_for_write(x, txn, src)? else { return Ok(()) };
    let item = pop(x, txn, src, &mut l, from)?.unwrap_or_default();
    finish(x, txn, src, &l)?;
    let Some(mut l) = list_for_write(x, txn, dst)? else { return Ok(()) };
    push(x, txn, dst, &mut l, to, &item)?;
    finish(x, txn, dst, &l)?;
    x.out.bulk(&item);
    Ok(())
}

/// Replies nil if `f` replied nothing.
fn or_null(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, f: DataFn) -> Result<()> {
    let before = x.out.buf.len();
    f(x, txn, a)?;
    if x.out.buf.len() == before {
        x.out.null();
    }
    Ok(())
}

/// LMOVE and BLMOVE's try (which replies nothing if the source is empty).
pub fn blmove_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (Some(from), Some(to)) = (End::parse(a.get(3)), End::parse(a.get(4))) else {
        x.out.error(SYNTAX);
        return Ok(());
    };
    move_item(x, txn, a.get(1), a.get(2), from, to)
}

pub fn lmove(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    or_null(x, txn, a, blmove_try)
}

/// RPOPLPUSH and BRPOPLPUSH's try (which replies nothing if the source is
/// empty).
pub fn brpoplpush_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    move_item(x, txn, a.get(1), a.get(2), End::Right, End::Left)
}

pub fn rpoplpush(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    or_null(x, txn, a, brpoplpush_try)
}

/// Whether `key` holds a list. While a client waits in a blocking pop, a
/// source of another type is not ready rather than an error, as in Redis.
fn is_list(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<bool> {
    Ok(matches!(x.db.find(txn, key)?, Found::Live(h, _) if h.kind == Kind::List))
}

/// BLPOP and BRPOP's try: pops one item from the first non-empty list of
/// `a[1..len-1]` and replies `[key, item]`; replies nothing if all are
/// empty (or, `waiting`, of another type).
fn bpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, end: End, waiting: bool) -> Result<()> {
    for key in a.iter_from(1).take(a.len() - 2) {
        if waiting && !is_list(x, txn, key)? {
            continue;
        }
        match span_of(x, txn, key)? {
            Err(()) => return Ok(()),
            Ok(None) => {}
            Ok(Some(_)) => {
                let item = pop_n(x, txn, key, end, 1)?.and_then(|mut v| v.pop()).unwrap_or_default();
                x.out.array(2);
                x.out.bulk(key);
                x.out.bulk(&item);
                return Ok(());
            }
        }
    }
    Ok(())
}

pub fn blpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bpop_try(x, txn, a, End::Left, false)
}

pub fn blpop_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bpop_try(x, txn, a, End::Left, true)
}

pub fn brpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bpop_try(x, txn, a, End::Right, false)
}

pub fn brpop_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bpop_try(x, txn, a, End::Right, true)
}

/// BLMOVE's try while it waits: a source of another type is not ready.
pub fn blmove_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if is_list(x, txn, a.get(1))? {
        blmove_try(x, txn, a)?;
    }
    Ok(())
}

pub fn brpoplpush_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if is_list(x, txn, a.get(1))? {
        brpoplpush_try(x, txn, a)?;
    }
    Ok(())
}

/// BLMPOP's try: `BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n]`.
fn blmpop_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, waiting: bool) -> Result<()> {
    let Some((mut keys, end, count)) = mpop_args(x, a, 2) else { return Ok(()) };
    if waiting {
        let mut lists = Vec::with_capacity(keys.len());
        for key in keys {
            if is_list(x, txn, key)? {
                lists.push(key);
            }
        }
        keys = lists;
    }
    mpop(x, txn, &keys, end, count).map(|_| ())
}

pub fn blmpop_try(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    blmpop_with(x, txn, a, false)
}

pub fn blmpop_wait(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    blmpop_with(x, txn, a, true)
}

/// LMPOP's (and BLMPOP's) arguments from `at` on: `numkeys key... LEFT|RIGHT
/// [COUNT n]`. `None` after replying the error.
fn mpop_args<'a>(x: &mut Exec<'_>, a: &'a Args, at: usize) -> Option<(Vec<&'a [u8]>, End, u64)> {
    let keys = numkeys(x, a, at)?;
    let mut i = at + 1 + keys.len();
    let Some(end) = (i < a.len()).then(|| End::parse(a.get(i))).flatten() else {
        x.out.error(SYNTAX);
        return None;
    };
    i += 1;
    let mut count = 1;
    if i < a.len() {
        if !(a.get(i).eq_ignore_ascii_case(b"COUNT") && i + 2 == a.len()) {
            x.out.error(SYNTAX);
            return None;
        }
        match parse_i64(a.get(i + 1)) {
            Some(n) if n > 0 => count = n as u64,
            _ => {
                x.out.error("ERR count should be greater than 0");
                return None;
            }
        }
    }
    Some((keys, end, count))
}

/// Pops from the first non-empty list of `keys`, replying `[key,
/// [items]]`; returns false (nothing replied) if all are empty.
fn mpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, keys: &[&[u8]], end: End, count: u64) -> Result<bool> {
    for key in keys {
        match span_of(x, txn, key)? {
            Err(()) => return Ok(true),
            Ok(None) => continue,
            Ok(Some(_)) => {
                let items = pop_n(x, txn, key, end, count)?.unwrap_or_default();
                x.out.array(2);
                x.out.bulk(key);
                x.out.array(items.len());
                for v in &items {
                    x.out.bulk(v);
                }
                return Ok(true);
            }
        }
    }
    Ok(false)
}

pub fn lmpop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some((keys, end, count)) = mpop_args(x, a, 1) else { return Ok(()) };
    if !mpop(x, txn, &keys, end, count)? {
        x.out.null_array();
    }
    Ok(())
}

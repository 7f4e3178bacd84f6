//! Strings as bits: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD; and
//! LCS, the longest common subsequence of two strings.
//!
//! Bit 0 is the most significant bit of byte 0, as in Redis.

use super::{for_write, int_arg, typed, Typed, NOT_INT, SYNTAX};
use crate::command::Exec;
use crate::keyspace::{Head, Kind};
use crate::resp::{parse_i64, Args};
use epochdb::{Result, Txn};

/// The string at `key` for a read (empty if missing); `None` after
/// replying WRONGTYPE.
fn read(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(match typed(x, txn, key, Kind::String)? {
        Typed::Live(v) => Some(v),
        Typed::Missing => Some(Vec::new()),
        Typed::Wrong => None,
    })
}

/// A bit offset argument, checked against the longest string there may
/// be; `None` after replying the error.
fn bit_offset(x: &mut Exec<'_>, a: &[u8]) -> Option<usize> {
    match parse_i64(a) {
        Some(n) if n >= 0 && (n as u64) < (x.max_value as u64) * 8 => Some(n as usize),
        _ => {
            x.out.error("ERR bit offset is not an integer or out of range");
            None
        }
    }
}

fn bit(v: &[u8], i: usize) -> bool {
    v.get(i / 8).is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
}

pub fn setbit(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(i) = bit_offset(x, a.get(2)) else { return Ok(()) };
    let on = match a.get(3) {
        b"1" => true,
        b"0" => false,
        _ => {
            x.out.error("ERR bit is not an integer or out of range");
            return Ok(());
        }
    };
    let key = a.get(1);
    let Some(w) = for_write(x, txn, key, Kind::String)? else { return Ok(()) };
    let mut v = w.payload;
    let old = bit(&v, i);
    if v.len() <= i / 8 {
        v.resize(i / 8 + 1, 0);
    }
    let mask = 0x80 >> (i % 8);
    if on {
        v[i / 8] |= mask;
    } else {
        v[i / 8] &= !mask;
    }
    x.db.write_head(txn, key, w.head, &v, w.old)?;
    x.out.int(old as i64);
    Ok(())
}

pub fn getbit(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(i) = bit_offset(x, a.get(2)) else { return Ok(()) };
    if let Some(v) = read(x, txn, a.get(1))? {
        x.out.int(bit(&v, i) as i64);
    }
    Ok(())
}

/// `start end [BYTE|BIT]` from `a[at]` on, as a range of bits `from..to`
/// of a string of `len` bytes (negative ends from the end, as GETRANGE);
/// `Some(None)` for an empty range, `None` after replying an error.
fn bit_range(x: &mut Exec<'_>, a: &Args, at: usize, len: usize) -> Option<Option<(usize, usize)>> {
    let (Some(start), Some(end)) = (parse_i64(a.get(at)), parse_i64(a.get(at + 1))) else {
        x.out.error(NOT_INT);
        return None;
    };
    let unit_bits = match a.len() {
        n if n == at + 2 => false,
        n if n == at + 3 && a.get(at + 2).eq_ignore_ascii_case(b"BIT") => true,
        n if n == at + 3 && a.get(at + 2).eq_ignore_ascii_case(b"BYTE") => false,
        _ => {
            x.out.error(SYNTAX);
            return None;
        }
    };
    if start < 0 && end < 0 && start > end {
        return Some(None);
    }
    let total = if unit_bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (s, e) = (fix(start), fix(end).min(total - 1));
    if s > e || total == 0 {
        return Some(None);
    }
    let (s, e) = (s as usize, e as usize);
    Some(Some(if unit_bits { (s, e + 1) } else { (s * 8, (e + 1) * 8) }))
}

/// BITCOUNT key [start end [BYTE|BIT]].
pub fn bitcount(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    if a.len() == 3 || a.len() > 5 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    let Some(v) = read(x, txn, a.get(1))? else { return Ok(()) };
    let (from, to) = if a.len() >= 4 {
        match bit_range(x, a, 2, v.len()) {
            Some(Some(r)) => r,
            Some(None) => {
                x.out.int(0);
                return Ok(());
            }
            None => return Ok(()),
        }
    } else {
        (0, v.len() * 8)
    };
    x.out.int((from..to).filter(|&i| bit(&v, i)).count() as i64);
    Ok(())
}

/// BITPOS key bit [start [end [BYTE|BIT]]].
pub fn bitpos(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let Some(b) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    if b != 0 && b != 1 {
        x.out.error("ERR The bit argument must be 1 or 0.");
        return Ok(());
    }
    let want = b == 1;
    let Some(v) = read(x, txn, a.get(1))? else { return Ok(()) };
    if a.len() > 6 {
        x.out.error(SYNTAX);
        return Ok(());
    }
    if v.is_empty() {
        x.out.int(if want { -1 } else { 0 });
        return Ok(());
    }
    let end_given = a.len() >= 5;
    let (from, to) = match a.len() {
        3 => (0, v.len() * 8),
        4 => {
            let Some(start) = int_arg(&mut x.out, a.get(3)) else { return Ok(()) };
            let len = v.len() as i64;
            let s = if start < 0 { (len + start).max(0) } else { start.min(len) };
            (s as usize * 8, v.len() * 8)
        }
        _ => match bit_range(x, a, 3, v.len()) {
            Some(Some(r)) => r,
            Some(None) => {
                x.out.int(-1);
                return Ok(());
            }
            None => return Ok(()),
        },
    };
    match (from..to).find(|&i| bit(&v, i) == want) {
        Some(i) => x.out.int(i as i64),
        // No clear bit in the range: without an end, the string counts as
        // padded with zeros, so the first is just past it (Redis's rule).
        None if !want && !end_given => x.out.int(to as i64),
        None => x.out.int(-1),
    }
    Ok(())
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...].
pub fn bitop(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let op = a.get(1).to_ascii_uppercase();
    if !matches!(&op[..], b"AND" | b"OR" | b"XOR" | b"NOT") {
        x.out.error(SYNTAX);
        return Ok(());
    }
    if &op[..] == b"NOT" && a.len() != 4 {
        x.out.error("ERR BITOP NOT must be called with a single source key.");
        return Ok(());
    }
    let mut inputs = Vec::with_capacity(a.len() - 3);
    for key in a.iter_from(3) {
        match read(x, txn, key)? {
            Some(v) => inputs.push(v),
            None => return Ok(()),
        }
    }
    let len = inputs.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![0u8; len];
    for (i, byte) in out.iter_mut().enumerate() {
        let mut bytes = inputs.iter().map(|v| v.get(i).copied().unwrap_or(0));
        let first = bytes.next().unwrap_or(0);
        *byte = match &op[..] {
            b"AND" => bytes.fold(first, |acc, b| acc & b),
            b"OR" => bytes.fold(first, |acc, b| acc | b),
            b"XOR" => bytes.fold(first, |acc, b| acc ^ b),
            _ => !first,
        };
    }
    let dst = a.get(2);
    x.db.delete(txn, dst)?;
    if !out.is_empty() {
        x.db.write_head(txn, dst, Head { kind: Kind::String, expire_at: 0 }, &out, None)?;
    }
    x.out.int(out.len() as i64);
    Ok(())
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN].
pub fn lcs(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (mut len_only, mut idx, mut min_len, mut with_len) = (false, false, 0usize, false);
    let mut i = 3;
    while i < a.len() {
        match &a.get(i).to_ascii_uppercase()[..] {
            b"LEN" => len_only = true,
            b"IDX" => idx = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if i + 1 < a.len() => {
                let Some(n) = int_arg(&mut x.out, a.get(i + 1)) else { return Ok(()) };
                min_len = n.max(0) as usize;
                i += 1;
            }
            _ => {
                x.out.error(SYNTAX);
                return Ok(());
            }
        }
        i += 1;
    }
    if len_only && idx {
        x.out.error("ERR If you want both the length and indexes, please just use IDX.");
        return Ok(());
    }
    let Some(p) = read(x, txn, a.get(1))? else { return Ok(()) };
    let Some(q) = read(x, txn, a.get(2))? else { return Ok(()) };
    if (p.len() as u64 + 1) * (q.len() as u64 + 1) > 1 << 32 {
        x.out.error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return Ok(());
    }
    // The classic table: t[i][j] is the LCS length of p[..i] and q[..j].
    let w = q.len() + 1;
    let mut t = vec![0u32; (p.len() + 1) * w];
    for i in 1..=p.len() {
        for j in 1..=q.len() {
            t[i * w + j] = if p[i - 1] == q[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[p.len() * w + q.len()] as i64;
    if len_only {
        x.out.int(total);
        return Ok(());
    }
    // Walk back from the end, gathering the subsequence and its runs of
    // adjacent matches, last first, as Redis reports them.
    let (mut i, mut j) = (p.len(), q.len());
    let mut seq = Vec::new();
    let mut runs: Vec<((usize, usize), (usize, usize))> = Vec::new();
    let mut run: Option<((usize, usize), (usize, usize))> = None;
    while i > 0 && j > 0 {
        if p[i - 1] == q[j - 1] {
            seq.push(p[i - 1]);
            let (pi, qj) = (i - 1, j - 1);
            run = match run {
                Some(((ps, pe), (qs, qe))) if ps == pi + 1 && qs == qj + 1 => Some(((pi, pe), (qj, qe))),
                Some(r) => {
                    runs.push(r);
                    Some(((pi, pi), (qj, qj)))
                }
                None => Some(((pi, pi), (qj, qj))),
            };
            i -= 1;
            j -= 1;
        } else if t[(i - 1) * w + j] > t[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    runs.extend(run);
    seq.reverse();
    if !idx {
        x.out.bulk(&seq);
        return Ok(());
    }
    let runs: Vec<_> = runs.into_iter().filter(|((s, e), _)| e - s + 1 >= min_len).collect();
    x.out.map(2);
    x.out.bulk_str("matches");
    x.out.array(runs.len());
    for ((ps, pe), (qs, qe)) in runs {
        x.out.array(if with_len { 3 } else { 2 });
        for (s, e) in [(ps, pe), (qs, qe)] {
            x.out.array(2);
            x.out.int(s as i64);
            x.out.int(e as i64);
        }
        if with_len {
            x.out.int((pe - ps + 1) as i64);
        }
    }
    x.out.bulk_str("len");
    x.out.int(total);
    Ok(())
}

/// What BITFIELD does when a SET or INCRBY does not fit its type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation on `width` bits at bit `offset`, signed or not.
struct Field {
    op: u8,
    signed: bool,
    width: u32,
    offset: usize,
    arg: i64,
    overflow: Overflow,
}

fn get_bits(v: &[u8], offset: usize, width: u32) -> u64 {
    (0..width as usize).fold(0u64, |acc, i| acc << 1 | bit(v, offset + i) as u64)
}

fn set_bits(v: &mut Vec<u8>, offset: usize, width: u32, value: u64) {
    let end = offset + width as usize;
    if v.len() * 8 < end {
        v.resize(end.div_ceil(8), 0);
    }
    for i in 0..width as usize {
        let on = value >> (width as usize - 1 - i) & 1 == 1;
        let (byte, mask) = ((offset + i) / 8, 0x80u8 >> ((offset + i) % 8));
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
    }
}

/// `value` in the field's type, as its overflow rule says; `None` to fail.
fn fit(f: &Field, value: i128) -> Option<i64> {
    let (min, max): (i128, i128) =
        if f.signed { (-(1i128 << (f.width - 1)), (1i128 << (f.width - 1)) - 1) } else { (0, (1i128 << f.width) - 1) };
    if (min..=max).contains(&value) {
        return Some(value as i64);
    }
    match f.overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(value.clamp(min, max) as i64),
        Overflow::Wrap => {
            let m = value.rem_euclid(1i128 << f.width);
            Some(if f.signed && m > max { (m - (1i128 << f.width)) as i64 } else { m as i64 })
        }
    }
}

/// The field's bits read as its type.
fn as_value(f: &Field, raw: u64) -> i64 {
    if f.signed && f.width < 64 && raw >> (f.width - 1) & 1 == 1 {
        (raw | !0u64 << f.width) as i64
    } else {
        raw as i64
    }
}

pub fn bitfield(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bitfield_with(x, txn, a, false)
}

pub fn bitfield_ro(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    bitfield_with(x, txn, a, true)
}

fn bitfield_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, read_only: bool) -> Result<()> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < a.len() {
        let op = a.get(i).to_ascii_uppercase();
        let need = match &op[..] {
            b"GET" => 2,
            b"SET" | b"INCRBY" => 3,
            b"OVERFLOW" => 1,
            _ => usize::MAX,
        };
        if need == usize::MAX || i + need >= a.len() {
            x.out.error(SYNTAX);
            return Ok(());
        }
        if read_only && &op[..] != b"GET" {
            x.out.error("ERR BITFIELD_RO only supports the GET subcommand");
            return Ok(());
        }
        if &op[..] == b"OVERFLOW" {
            overflow = match &a.get(i + 1).to_ascii_uppercase()[..] {
                b"WRAP" => Overflow::Wrap,
                b"SAT" => Overflow::Sat,
                b"FAIL" => Overflow::Fail,
                _ => {
                    x.out.error("ERR Invalid OVERFLOW type specified");
                    return Ok(());
                }
            };
            i += 2;
            continue;
        }
        let ty = a.get(i + 1);
        let width = std::str::from_utf8(ty.get(1..).unwrap_or_default()).ok().and_then(|w| w.parse::<u32>().ok());
        let (signed, width) = match (ty.first().map(u8::to_ascii_lowercase), width) {
            (Some(b'i'), Some(w @ 1..=64)) => (true, w),
            (Some(b'u'), Some(w @ 1..=63)) => (false, w),
            _ => {
                x.out.error(
                    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
                );
                return Ok(());
            }
        };
        let off = a.get(i + 2);
        let offset = match off.strip_prefix(b"#") {
            Some(n) => parse_i64(n).and_then(|n| n.checked_mul(width as i64)),
            None => parse_i64(off),
        };
        let Some(offset) = offset.filter(|&o| o >= 0 && (o as u64) < (x.max_value as u64) * 8) else {
            x.out.error("ERR bit offset is not an integer or out of range");
            return Ok(());
        };
        let arg = if need == 3 {
            let Some(n) = int_arg(&mut x.out, a.get(i + 3)) else { return Ok(()) };
            n
        } else {
            0
        };
        fields.push(Field { op: op[0], signed, width, offset: offset as usize, arg, overflow });
        i += need + 1;
    }
    let key = a.get(1);
    let writes = fields.iter().any(|f| f.op != b'G');
    let (mut v, w) = if writes {
        let Some(w) = for_write(x, txn, key, Kind::String)? else { return Ok(()) };
        (w.payload.clone(), Some(w))
    } else {
        let Some(v) = read(x, txn, key)? else { return Ok(()) };
        (v, None)
    };
    x.out.array(fields.len());
    let mut changed = false;
    for f in &fields {
        let old = as_value(f, get_bits(&v, f.offset, f.width));
        let new = match f.op {
            b'G' => {
                x.out.int(old);
                continue;
            }
            b'S' => fit(f, f.arg as i128),
            _ => fit(f, old as i128 + f.arg as i128),
        };
        match new {
            Some(n) => {
                set_bits(&mut v, f.offset, f.width, n as u64);
                changed = true;
                x.out.int(if f.op == b'S' { old } else { n });
            }
            None => x.out.null(),
        }
    }
    if let (true, Some(w)) = (changed, w) {
        x.db.write_head(txn, key, w.head, &v, w.old)?;
    }
    Ok(())
}

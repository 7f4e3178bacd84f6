//! Keys of any type: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, COPY,
//! expiry, MEMORY USAGE, DBSIZE, FLUSHDB, and `EPOCHDB.RANGE`.

use super::{int_arg, NOT_INT, NO_KEY, SYNTAX};
use crate::command::{Call, Exec};
use crate::glob;
use crate::keyspace::{head_key, prefix_end, Db, Found, Head, Kind, Tally, EXPIRIES, HEADS};
use crate::resp::{parse_i64, Args, Out};
use epochdb::{Result, TableId, Txn};
use std::ops::Bound;

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

/// OBJECT ENCODING | REFCOUNT | FREQ | IDLETIME key. epochdb keeps one
/// representation per type: ENCODING names the Redis encoding closest to
/// it (a string's as Redis picks it; `hashtable` for hashes and sets,
/// `quicklist` for lists, `skiplist` for sorted sets, which sit on an
/// ordered index). Nothing is shared, so REFCOUNT is 1; access is not
/// tracked, so FREQ and IDLETIME say so.
pub fn object(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let sub = a.get(1).to_ascii_uppercase();
    if &sub[..] == b"HELP" && a.len() == 2 {
        x.out.array(4);
        x.out.simple("OBJECT ENCODING <key>");
        x.out.simple("OBJECT FREQ <key>");
        x.out.simple("OBJECT IDLETIME <key>");
        x.out.simple("OBJECT REFCOUNT <key>");
        return Ok(());
    }
    if a.len() != 3 || !matches!(&sub[..], b"ENCODING" | b"REFCOUNT" | b"FREQ" | b"IDLETIME") {
        let name = String::from_utf8_lossy(a.get(1));
        x.out.error(&format!("ERR unknown subcommand or wrong number of arguments for '{name}'. Try OBJECT HELP."));
        return Ok(());
    }
    let (head, payload) = match x.db.find(txn, a.get(2))? {
        Found::Live(h, v) => (h, v),
        Found::Missing(_) => {
            x.out.null();
            return Ok(());
        }
    };
    match &sub[..] {
        b"ENCODING" => x.out.bulk_str(match head.kind {
            Kind::String if payload.len() <= 20 && parse_i64(payload).is_some() => "int",
            Kind::String if payload.len() <= 44 => "embstr",
            Kind::String => "raw",
            Kind::Hash | Kind::Set => "hashtable",
            Kind::List => "quicklist",
            Kind::ZSet => "skiplist",
        }),
        b"REFCOUNT" => x.out.int(1),
        b"FREQ" => x.out.error(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => x.out.error("ERR epochdb does not track when a key was last accessed"),
    }
    Ok(())
}

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
pub(super) struct ScanOpts {
    pub pattern: Option<Vec<u8>>,
    pub count: usize,
    pub kind: Option<Vec<u8>>,
}

pub(super) fn scan_opts(x: &mut Exec<'_>, a: &Args, from: usize, allow_type: bool) -> Option<ScanOpts> {
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
pub(super) fn cursor_position(x: &mut Exec<'_>, arg: &[u8]) -> Option<Vec<u8>> {
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

/// A key's whole value, for RENAME and COPY: its head's payload and its
/// element rows.
struct Value {
    payload: Vec<u8>,
    elements: Vec<(Vec<u8>, Vec<u8>)>,
}

fn load(db: &mut Db, txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<(Head, Value)>> {
    let (head, payload) = match db.find(txn, key)? {
        Found::Live(h, v) => (h, v.to_vec()),
        Found::Missing(_) => return Ok(None),
    };
    let elements = if head.kind.has_elements() { db.fields(txn, key, usize::MAX)? } else { Vec::new() };
    Ok(Some((head, Value { payload, elements })))
}

/// The payload of `key`'s head (empty if it is missing).
fn payload_of(db: &mut Db, txn: &mut Txn<'_>, key: &[u8]) -> Result<Vec<u8>> {
    Ok(match db.find(txn, key)? {
        Found::Live(_, v) => v.to_vec(),
        Found::Missing(_) => Vec::new(),
    })
}

fn store(db: &mut Db, txn: &mut Txn<'_>, key: &[u8], head: Head, value: &Value) -> Result<()> {
    db.delete(txn, key)?;
    for (e, v) in &value.elements {
        db.put_field(txn, key, e, v)?;
    }
    db.write_head(txn, key, head, &value.payload, None)
}

/// DUMP's format version (FORMAT.md, "DUMP payloads").
const DUMP_VERSION: u16 = 1;

/// CRC-64/Jones, the checksum Redis's DUMP payloads carry.
fn crc64(bytes: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5 } else { crc >> 1 };
        }
    }
    crc
}

/// A key's value as DUMP gives it: type, payload, element rows, version,
/// checksum.
fn encode_dump(kind: Kind, value: &Value) -> Vec<u8> {
    let mut out = vec![kind as u8];
    let part = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    part(&mut out, &value.payload);
    out.extend_from_slice(&(value.elements.len() as u32).to_le_bytes());
    for (e, v) in &value.elements {
        part(&mut out, e);
        part(&mut out, v);
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a DUMP payload's fields in order.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (b, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(b)
    }

    fn u32(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize)
    }

    fn part(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()?;
        Some(self.take(n)?.to_vec())
    }
}

/// A DUMP payload back into its type and value; `None` unless it is one
/// of ours, intact.
fn decode_dump(p: &[u8]) -> Option<(Kind, Value)> {
    let body = p.len().checked_sub(10)?;
    if crc64(&p[..body + 2]).to_le_bytes() != p[body + 2..] || p[body..body + 2] != DUMP_VERSION.to_le_bytes() {
        return None;
    }
    let mut c = Cursor(&p[..body]);
    let kind = Kind::from_byte(c.take(1)?[0])?;
    let payload = c.part()?;
    let count = c.u32()?;
    let mut elements = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        elements.push((c.part()?, c.part()?));
    }
    // A string has no elements; no other type is ever empty.
    (c.0.is_empty() && kind.has_elements() != elements.is_empty()).then_some((kind, Value { payload, elements }))
}

pub fn dump(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    match load(x.db, txn, a.get(1))? {
        Some((head, value)) => x.out.bulk(&encode_dump(head.kind, &value)),
        None => x.out.null(),
    }
    Ok(())
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]: a
/// payload DUMP gave (epochdb's own format: Redis's are refused).
pub fn restore(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    let (mut replace, mut absttl) = (false, false);
    let mut i = 4;
    while i < a.len() {
        match &a.get(i).to_ascii_uppercase()[..] {
            b"REPLACE" => replace = true,
            b"ABSTTL" => absttl = true,
            // Access is not tracked: checked, then set aside.
            b"IDLETIME" if i + 1 < a.len() => {
                if parse_i64(a.get(i + 1)).is_none_or(|n| n < 0) {
                    x.out.error("ERR Invalid IDLETIME value, must be >= 0");
                    return Ok(());
                }
                i += 1;
            }
            b"FREQ" if i + 1 < a.len() => {
                if parse_i64(a.get(i + 1)).is_none_or(|n| !(0..=255).contains(&n)) {
                    x.out.error("ERR Invalid FREQ value, must be >= 0 and <= 255");
                    return Ok(());
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
    let Some(ttl) = int_arg(&mut x.out, a.get(2)) else { return Ok(()) };
    if ttl < 0 {
        x.out.error("ERR Invalid TTL value, must be >= 0");
        return Ok(());
    }
    let key = a.get(1);
    if !replace && x.db.head(txn, key)?.is_some() {
        x.out.error("BUSYKEY Target key name already exists.");
        return Ok(());
    }
    let Some((kind, value)) = decode_dump(a.get(3)) else {
        x.out.error("ERR DUMP payload version or checksum are wrong");
        return Ok(());
    };
    let expire_at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => x.db.now.saturating_add(t as u64),
    };
    if expire_at != 0 && expire_at <= x.db.now {
        // Already expired: nothing is made, as in Redis.
        x.db.delete(txn, key)?;
        x.out.ok();
        return Ok(());
    }
    store(x.db, txn, key, Head { kind, expire_at }, &value)?;
    x.out.ok();
    Ok(())
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
                let Some(n) = int_arg(&mut x.out, a.get(i + 1)) else { return Ok(()) };
                match usize::try_from(n).ok().and_then(|n| x.tables.get(n)) {
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

/// DBSIZE alone: from INFO keyspace's counts, at once (as in Redis, whose
/// DBSIZE is O(1)), where a scan would read every key into one
/// transaction's read set. Like Redis's, the count includes expired keys
/// not yet removed. Without a count (a replica, or a promoted one before
/// its first), the scan after all.
pub fn dbsize(x: &mut Call<'_>, a: &Args) {
    let counts = if x.shared.db.is_read_only() { None } else { x.shared.counts.get() };
    let Some(counts) = counts else { return x.run_data(dbsize_scan, a, false) };
    x.scratch.clear();
    Out { buf: x.scratch, resp3: x.client.resp3 }.int(counts[x.client.db][0]);
    // What it counted committed by the current epoch: with durable
    // replies, the reply waits for that, as a read's would.
    x.finish(Ok(x.shared.db.epoch()), false);
}

/// DBSIZE inside EXEC, and without key counts: a scan.
pub fn dbsize_scan(x: &mut Exec<'_>, txn: &mut Txn<'_>, _a: &Args) -> Result<()> {
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
        let payload = payload_of(x.db, txn, key)?;
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
    match x.db.head(txn, key)? {
        Some(h) if h.expire_at != 0 => {
            let payload = payload_of(x.db, txn, key)?;
            x.db.write_head(txn, key, Head { expire_at: 0, ..h }, &payload, Some(h.expire_at))?;
            x.out.int(1);
        }
        _ => x.out.int(0),
    }
    Ok(())
}

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

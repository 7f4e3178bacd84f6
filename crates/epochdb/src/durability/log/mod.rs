//! Value logging, the worker side (SiloR §3).
//!
//! A committing worker appends one log record per transaction to its
//! current log buffer: the TID, then the table, key and new value (or a
//! delete mark) of every write. Buffers come from a small per-worker pool;
//! a full buffer is queued for the worker's logger, and the logger takes
//! the partly filled current buffer itself at each epoch change, so a
//! worker never waits on its logger unless its pool is empty
//! (backpressure). Encoding and decoding of log records live here too.
//!
//! Records are written with varint counts and lengths (format version 6):
//! on TPC-C the fixed 4-, 2- and 4-byte fields of versions 1 to 5 were 13%
//! of the log. Each record says which layout it has (bit 0 of its TID
//! field), so a block copied from an older file still decodes.

pub(crate) mod logger;

use super::frame::{self, BLOCK_HEADER_LEN};
use crate::spin::{SpinGuard, SpinLock};
use crate::tid::Tid;
use std::sync::{Arc, Mutex};

/// Bit 0 of a record's TID field (a TID's status bits are zero): set, the
/// record's counts and lengths are varints; clear, they have the fixed
/// widths of format versions 1 to 5.
const VARINT_RECORD: u64 = 1;
/// The low two bits of a varint entry's value word: what follows the key.
const KIND_VALUE: u64 = 0;
const KIND_DELTA: u64 = 1;
const KIND_DELETE: u64 = 2;
/// Fixed layout: marks a delete in a log entry's value length.
const DELETE: u32 = u32::MAX;
/// Fixed layout: set in a log entry's value length (other than `DELETE`):
/// the entry is a delta of that many bytes, not a whole value (Gawain §3).
const DELTA_BIT: u32 = 1 << 31;
/// Fixed layout: bytes before each column of a delta (column id, length).
const COLUMN_HEADER: usize = 4;
/// Fixed layout: bytes of a record before its entries (TID, entry count).
const TXN_HEADER: usize = 12;
/// Fixed layout: bytes of an entry before its key and value (table, key
/// and value lengths).
const ENTRY_HEADER: usize = 10;
/// Bytes of a record's TID field.
const TID_LEN: usize = 8;

/// Bytes of `v` as a varint (LEB128: 7 bits a byte, low bits first).
#[inline]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Bytes of the longest varint (a `u64`'s).
const MAX_VARINT: usize = 10;

/// Appends `values` as varints, after one `reserve`, byte by byte into the
/// spare capacity: copying a few bytes of variable length calls `memcpy`
/// (`perf record` of 1-thread TPC-C with logging: memmove 5.5% of a
/// worker's samples with a copy per varint, 3.2% with pushes), and a push
/// per byte checks the capacity each time (`entry_header` was 1% of a
/// 2-thread run's worker samples).
#[inline]
fn put_varints<const N: usize>(out: &mut Vec<u8>, values: [u64; N]) {
    out.reserve(N * MAX_VARINT);
    let spare = out.spare_capacity_mut();
    let mut n = 0;
    for mut v in values {
        while v >= 0x80 {
            spare[n].write(v as u8 | 0x80);
            v >>= 7;
            n += 1;
        }
        spare[n].write(v as u8);
        n += 1;
    }
    // SAFETY: the loop above initialized the first `n` spare bytes.
    unsafe { out.set_len(out.len() + n) };
}

/// Reads a varint from the front of `p`; an error if it runs past `p` or
/// does not fit 64 bits.
#[inline]
fn take_varint(p: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for (i, &b) in p.iter().enumerate().take(10) {
        let bits = (b & 0x7f) as u64;
        if i == 9 && bits > 1 {
            break;
        }
        v |= bits << (7 * i);
        if b < 0x80 {
            *p = &p[i + 1..];
            return Ok(v);
        }
    }
    Err("a log record's varint runs past its block or over 64 bits".into())
}

/// Bytes of one column of a delta with `len` bytes.
#[inline]
fn column_size(id: u16, len: usize) -> usize {
    varint_len(id as u64) + varint_len(len as u64) + len
}

/// The value word of a varint entry: the length of what follows the key
/// and its kind.
#[inline]
fn value_word(len: usize, kind: u64) -> u64 {
    (len as u64) << 2 | kind
}

/// Appends a transaction's header; follow with `count` [`encode_entry`]s
/// and [`encode_delta`]s.
pub fn encode_txn(out: &mut Vec<u8>, tid: Tid, count: u32) {
    out.extend_from_slice(&(tid.raw() | VARINT_RECORD).to_le_bytes());
    put_varints(out, [count as u64]);
}

/// An entry's table, key length and value word, then its key.
#[inline]
fn entry_header(out: &mut Vec<u8>, table: u32, key: &[u8], word: u64) {
    put_varints(out, [table as u64, key.len() as u64, word]);
    out.extend_from_slice(key);
}

/// Appends one write: `value` is `None` for a delete.
pub fn encode_entry(out: &mut Vec<u8>, table: u32, key: &[u8], value: Option<&[u8]>) {
    match value {
        Some(v) => {
            entry_header(out, table, key, value_word(v.len(), KIND_VALUE));
            out.extend_from_slice(v);
        }
        None => entry_header(out, table, key, value_word(0, KIND_DELETE)),
    }
}

/// Appends an update that changed only some columns: `columns` yields
/// each changed column's id and bytes (without a variable column's length
/// prefix).
pub fn encode_delta<'a>(
    out: &mut Vec<u8>,
    table: u32,
    key: &[u8],
    columns: impl Iterator<Item = (u16, &'a [u8])> + Clone,
) {
    let len: usize = columns.clone().map(|(id, b)| column_size(id, b.len())).sum();
    entry_header(out, table, key, value_word(len, KIND_DELTA));
    for (id, bytes) in columns {
        put_varints(out, [id as u64, bytes.len() as u64]);
        out.extend_from_slice(bytes);
    }
}

/// What a log entry writes.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Write<'a> {
    /// The whole new value.
    Value(&'a [u8]),
    Delete,
    /// Some columns of a row: iterate with [`Columns`].
    Delta(Columns<'a>),
}

impl<'a> Write<'a> {
    /// The whole value, `None` for a delete or a delta.
    pub fn value(self) -> Option<&'a [u8]> {
        match self {
            Write::Value(v) => Some(v),
            _ => None,
        }
    }
}

/// The columns of a delta entry, as `(column id, bytes)`.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Columns<'a> {
    bytes: &'a [u8],
    /// Varint column headers (else the fixed 2-byte id and length).
    varint: bool,
}

impl<'a> Columns<'a> {
    /// Columns that `decode` found whole before (`merge.rs` keeps only
    /// their bytes and encoding).
    pub(crate) fn checked(bytes: &'a [u8], varint: bool) -> Self {
        Columns { bytes, varint }
    }

    /// Whether the column headers are varints.
    pub(crate) fn varint(&self) -> bool {
        self.varint
    }

    /// The encoded columns (the bytes an iteration walks).
    pub fn payload(&self) -> &'a [u8] {
        self.bytes
    }

    /// The next column's id and bytes; an error if they run past the delta.
    fn next_column(&mut self) -> Result<(u16, &'a [u8]), String> {
        let p = &mut self.bytes;
        let (id, len) = if self.varint {
            let id = take_varint(p)?;
            (u16::try_from(id).map_err(|_| format!("a delta of column {id}"))?, take_varint(p)? as usize)
        } else {
            let h = take(p, COLUMN_HEADER)?;
            (u16::from_le_bytes([h[0], h[1]]), u16::from_le_bytes([h[2], h[3]]) as usize)
        };
        let bytes = p.get(..len).ok_or("a delta column runs past its entry")?;
        *p = &p[len..];
        Ok((id, bytes))
    }

    /// Checks that the delta is a sequence of whole columns.
    fn check(mut self) -> Result<Self, String> {
        let whole = self;
        while !self.bytes.is_empty() {
            self.next_column()?;
        }
        Ok(whole)
    }
}

impl<'a> Iterator for Columns<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        // Well-formed: `decode` checked every column.
        if self.bytes.is_empty() {
            return None;
        }
        self.next_column().ok()
    }
}

/// One decoded write of a log record.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Entry<'a> {
    pub tid: Tid,
    pub table: u32,
    pub key: &'a [u8],
    pub write: Write<'a>,
    /// Whether its record's counts and lengths are varints (format 6), not
    /// fixed (versions 1 to 5): how [`write_len_before`] reads its header.
    pub varint: bool,
}

/// The length of the write after an entry's key, read back from the
/// entry's header, which ends where the key starts: in a varint record
/// the value word (`length << 2 | kind`, whose last byte is the only one
/// below 0x80, as the key length's varint before it ends with one), in a
/// fixed one the 4-byte value length.
///
/// # Safety
/// `key` is the start of the key of an [`Entry`] that [`decode`] gave,
/// whose payload is still alive, and `varint` is that entry's.
pub(crate) unsafe fn write_len_before(key: *const u8, varint: bool) -> usize {
    if !varint {
        // SAFETY: per the contract: the 4-byte value length ends at `key`.
        let vlen = u32::from_le_bytes(unsafe { key.sub(4).cast::<[u8; 4]>().read_unaligned() });
        return if vlen == DELETE { 0 } else { (vlen & !DELTA_BIT) as usize };
    }
    // SAFETY: per the contract: the value word's bytes end at `key`, the
    // key length's varint ends before them, and a varint is at most 10
    // bytes; `decode_txn` took them, so they lie in the payload.
    unsafe {
        let mut start = key.sub(1);
        while *start.sub(1) >= 0x80 {
            start = start.sub(1);
        }
        let mut word = std::slice::from_raw_parts(start, key.offset_from(start) as usize);
        (take_varint(&mut word).unwrap_or(0) >> 2) as usize
    }
}

/// Decodes a block payload of log records, calling `f` for each write.
/// An error means a record runs past the payload: a bug or a CRC collision.
pub fn decode<'a>(payload: &'a [u8], mut f: impl FnMut(Entry<'a>)) -> Result<(), String> {
    let mut p = payload;
    while !p.is_empty() {
        decode_txn(&mut p, &mut f)?;
    }
    Ok(())
}

/// Takes `n` bytes from the front of `p`.
#[inline]
fn take<'a>(p: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if p.len() < n {
        return Err(format!("a log record runs {} bytes past its block", n - p.len()));
    }
    let (a, b) = p.split_at(n);
    *p = b;
    Ok(a)
}

/// Decodes the transaction record at the start of `p`, calling `f` for
/// each of its writes, moves `p` past it and returns its TID.
fn decode_txn<'a>(p: &mut &'a [u8], f: &mut impl FnMut(Entry<'a>)) -> Result<Tid, String> {
    let raw = u64::from_le_bytes(take(p, TID_LEN)?.try_into().unwrap_or([0; 8]));
    let tid = Tid::from_raw(raw);
    if raw & VARINT_RECORD == 0 {
        return decode_fixed(p, tid, f);
    }
    for _ in 0..take_varint(p)? {
        let table = take_varint(p)?;
        let table = u32::try_from(table).map_err(|_| format!("a log entry of table {table}"))?;
        let klen = take_varint(p)?;
        let word = take_varint(p)?;
        let key = take_key(p, usize::try_from(klen).unwrap_or(usize::MAX))?;
        let len = usize::try_from(word >> 2).unwrap_or(usize::MAX);
        let write = match word & 3 {
            KIND_VALUE => Write::Value(take(p, len)?),
            KIND_DELTA => Write::Delta(Columns { bytes: take(p, len)?, varint: true }.check()?),
            KIND_DELETE if len == 0 => Write::Delete,
            _ => return Err(format!("a log entry with value word {word:#x}")),
        };
        f(Entry { tid, table, key, write, varint: true });
    }
    Ok(tid)
}

/// A key of `len` bytes: no key is longer than `MAX_KEY_LEN` (records
/// have two bytes for its length).
fn take_key<'a>(p: &mut &'a [u8], len: usize) -> Result<&'a [u8], String> {
    if len > crate::MAX_KEY_LEN {
        return Err(format!("a key of {len} bytes, more than {}", crate::MAX_KEY_LEN));
    }
    take(p, len)
}

/// The entries of a record in the fixed layout of format versions 1 to 5.
fn decode_fixed<'a>(p: &mut &'a [u8], tid: Tid, f: &mut impl FnMut(Entry<'a>)) -> Result<Tid, String> {
    let u32_of = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for _ in 0..u32_of(take(p, TXN_HEADER - TID_LEN)?) {
        let e = take(p, ENTRY_HEADER)?;
        let table = u32_of(e);
        let klen = u16::from_le_bytes([e[4], e[5]]) as usize;
        let vlen = u32_of(&e[6..]);
        let key = take_key(p, klen)?;
        let write = match vlen {
            DELETE => Write::Delete,
            v if v & DELTA_BIT != 0 => {
                Write::Delta(Columns { bytes: take(p, (v & !DELTA_BIT) as usize)?, varint: false }.check()?)
            }
            v => Write::Value(take(p, v as usize)?),
        };
        f(Entry { tid, table, key, write, varint: false });
    }
    Ok(tid)
}

/// Appends to `out` the transactions of `payload` whose epoch is at
/// least `from`, byte for byte, and returns their lowest and highest
/// epochs (`None` if none). An error means a record runs past the payload.
pub fn retain_from(payload: &[u8], from: u64, out: &mut Vec<u8>) -> Result<Option<(u64, u64)>, String> {
    let (mut p, mut epochs) = (payload, None);
    while !p.is_empty() {
        let start = payload.len() - p.len();
        let e = decode_txn(&mut p, &mut |_| {})?.epoch();
        let end = payload.len() - p.len();
        if e >= from {
            out.extend_from_slice(&payload[start..end]);
            epochs = Some(epochs.map_or((e, e), |(lo, hi): (u64, u64)| (lo.min(e), hi.max(e))));
        }
    }
    Ok(epochs)
}

/// A log buffer: one block under construction, and the epochs it holds.
#[derive(Debug, Default)]
pub struct Buf {
    pub block: Vec<u8>,
    pub lo: u64,
    pub hi: u64,
}

impl Buf {
    fn fresh(block: Vec<u8>) -> Buf {
        Buf { block, lo: u64::MAX, hi: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.block.len() <= BLOCK_HEADER_LEN
    }

    /// Seals the block and returns its bytes, ready to write.
    pub fn seal(&mut self) -> &[u8] {
        frame::seal(&mut self.block, self.lo, self.hi);
        &self.block
    }

    /// Empties the buffer for reuse.
    pub fn recycle(mut self) -> Vec<u8> {
        self.block.truncate(BLOCK_HEADER_LEN);
        self.block
    }
}

/// Bytes a log buffer has past its capacity, for the record that crosses
/// it ([`LogSlot::append`]): larger records reallocate the buffer, as a
/// record larger than a whole buffer always did.
const SPILL_ROOM: usize = 16 << 10;

/// A worker's log state, shared with its logger.
#[derive(Debug)]
pub struct LogSlot {
    /// The buffer the worker appends to. Uncontended except when the logger
    /// takes it at an epoch change.
    pub current: SpinLock<Buf>,
    /// Full buffers waiting for the logger.
    pub full: Mutex<Vec<Buf>>,
    /// Empty buffers the logger has returned.
    pub free: Mutex<Vec<Vec<u8>>>,
    /// The worker's epoch slot: bounds the epochs of its future records.
    pub epoch: Arc<crate::epoch::EpochSlot>,
    /// Set when the worker is dropped; the logger then forgets the slot.
    pub gone: std::sync::atomic::AtomicBool,
    capacity: usize,
}

impl LogSlot {
    pub fn new(epoch: Arc<crate::epoch::EpochSlot>, capacity: usize, pool: usize) -> LogSlot {
        let free = (1..pool).map(|_| frame::new_block(capacity + SPILL_ROOM)).collect();
        LogSlot {
            current: SpinLock::new(Buf::fresh(frame::new_block(capacity + SPILL_ROOM))),
            full: Mutex::new(Vec::new()),
            free: Mutex::new(free),
            epoch,
            gone: Default::default(),
            capacity,
        }
    }

    /// Appends the record `encode` writes, for a transaction in `epoch`.
    /// Blocks only while the pool is empty; gives up (dropping the record)
    /// once `failed` says nothing more can become durable. Lock order:
    /// `current`, then `full` or `free`.
    ///
    /// The record is encoded in place, with no pass over the writes to size
    /// it first (that pass was 1.1% of the samples of a 1-thread TPC-C run
    /// with logging, `perf record`). One
    /// that takes a buffer holding others past its capacity is moved to the
    /// start of a fresh buffer: a copy once a buffer, into the slack
    /// ([`SPILL_ROOM`]) each buffer has so that it is not reallocated.
    pub fn append(&self, epoch: u64, failed: impl Fn() -> bool, encode: impl FnOnce(&mut Vec<u8>)) {
        let Some(mut cur) = self.current_with_room(&failed) else { return };
        let start = cur.block.len();
        encode(&mut cur.block);
        if cur.block.len() > self.capacity && start > BLOCK_HEADER_LEN {
            let record = cur.block[start..].to_vec();
            cur.block.truncate(start);
            let done = std::mem::replace(&mut *cur, Buf::fresh(Vec::new()));
            lock(&self.full).push(done);
            drop(cur);
            let Some(fresh) = self.current_with_room(&failed) else { return };
            cur = fresh;
            cur.block.extend_from_slice(&record);
        }
        cur.lo = cur.lo.min(epoch);
        cur.hi = cur.hi.max(epoch);
    }

    /// The current buffer, locked, after taking a free one if the logger
    /// took it or the worker queued it; `None` once `failed`.
    fn current_with_room(&self, failed: &impl Fn() -> bool) -> Option<SpinGuard<'_, Buf>> {
        let mut cur = self.current.lock();
        while cur.block.len() < BLOCK_HEADER_LEN {
            // Take a free buffer without holding `current`, which the
            // logger locks to flush.
            drop(cur);
            let b = self.take_free(failed)?;
            cur = self.current.lock();
            if cur.block.len() < BLOCK_HEADER_LEN {
                *cur = Buf::fresh(b);
            } else {
                lock(&self.free).push(b); // the logger gave us one meanwhile
            }
        }
        Some(cur)
    }

    fn take_free(&self, failed: &impl Fn() -> bool) -> Option<Vec<u8>> {
        let mut spins = 0u32;
        loop {
            if let Some(b) = lock(&self.free).pop() {
                return Some(b);
            }
            if failed() {
                return None;
            }
            // Backpressure: the logger is behind. Spin, then sleep briefly
            // (the logger polls; nobody needs waking).
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
}

/// Locks, ignoring poisoning: the protected data is plain buffers.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoder writes exactly FORMAT.md's bytes ("Log records"): a
    /// record of three entries (a value, a delta, a delete), byte by byte.
    #[test]
    fn records_are_formats_bytes() {
        let mut out = Vec::new();
        encode_txn(&mut out, Tid::new(2, 3), 3);
        encode_entry(&mut out, 300, b"ab", Some(b"xyz"));
        encode_delta(&mut out, 1, b"k", [(200u16, &b"q"[..])].into_iter());
        encode_entry(&mut out, 0, b"", None);
        // TID field: epoch 2 in bits 63..32, sequence 3 in bits 31..3, bit 0 set.
        let tid = (2u64 << 32 | 3 << 3 | 1).to_le_bytes();
        let want = [
            &tid[..],
            &[3],                     // writes
            &[0xAC, 0x02, 2, 3 << 2], // table 300, key length 2, value of 3 bytes
            b"ab",
            b"xyz",
            &[1, 1, 4 << 2 | 1], // table 1, key length 1, delta of 4 bytes
            b"k",
            &[0xC8, 0x01, 1], // column 200, 1 byte
            b"q",
            &[0, 0, 2], // table 0, empty key, a delete
        ]
        .concat();
        assert_eq!(out, want);
    }

    #[test]
    fn records_round_trip() {
        let mut out = Vec::new();
        let tid = Tid::new(5, 9);
        type Write<'a> = (u32, &'a [u8], Option<&'a [u8]>);
        let long = vec![7u8; 300];
        // 32 bytes: a value word (32 << 2) whose first varint byte is 0x80.
        let round = [8u8; 32];
        let writes: [Write<'_>; 5] = [
            (1, b"k1", Some(b"v1")),
            (2, b"", Some(b"")),
            (u32::MAX, b"gone", None),
            (200, b"long", Some(&long)),
            (3, b"k3", Some(&round)),
        ];
        encode_txn(&mut out, tid, writes.len() as u32);
        for (t, k, v) in writes {
            encode_entry(&mut out, t, k, v);
        }
        let mut got = Vec::new();
        decode(&out, |e| got.push((e.tid, e.table, e.key.to_vec(), e.write.value().map(<[u8]>::to_vec))))
            .expect("decode");
        let want: Vec<_> = writes.iter().map(|(t, k, v)| (tid, *t, k.to_vec(), v.map(<[u8]>::to_vec))).collect();
        assert_eq!(got, want);
        lengths_read_back(&out);
        for cut in 0..out.len() {
            assert!(decode(&out[..cut], |_| {}).is_err() || cut == 0, "cut at {cut}");
        }
    }

    /// `write_len_before` reads each entry's write length back from its
    /// header, as the merge does (`merge::Gathered`).
    fn lengths_read_back(payload: &[u8]) {
        decode(payload, |e| {
            let len = match e.write {
                Write::Value(v) => v.len(),
                Write::Delete => 0,
                Write::Delta(c) => c.payload().len(),
            };
            // SAFETY: `e` was just decoded from `payload`, which is alive.
            assert_eq!(unsafe { write_len_before(e.key.as_ptr(), e.varint) }, len, "{e:?}");
        })
        .expect("decode");
    }

    /// A record in the fixed layout of format versions 1 to 5 (bit 0 of
    /// its TID field clear), as an older build wrote it.
    fn fixed_record(tid: Tid, writes: &[(u32, &[u8], u32, &[u8])]) -> Vec<u8> {
        let mut out = tid.raw().to_le_bytes().to_vec();
        out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
        for (table, key, vlen, bytes) in writes {
            out.extend_from_slice(&table.to_le_bytes());
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(&vlen.to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(bytes);
        }
        out
    }

    /// Records encoded in place (`LogSlot::append`): one that takes a
    /// buffer holding others past its capacity moves whole to a fresh
    /// buffer, so every block holds whole records, in order, and its epoch
    /// range covers theirs; a record larger than a buffer has one alone.
    #[test]
    fn a_record_crossing_a_buffers_capacity_moves_whole_to_the_next() {
        const CAPACITY: usize = 4096;
        let slot = LogSlot::new(Arc::new(crate::epoch::EpochSlot::new()), CAPACITY, 64);
        let size = |n: u64| if n == 20 { 3 * CAPACITY } else { 300 + 37 * (n as usize % 7) };
        for n in 1..=40u64 {
            let value = vec![n as u8; size(n)];
            slot.append(
                n / 3,
                || false,
                |buf| {
                    encode_txn(buf, Tid::new(n / 3, n), 1);
                    encode_entry(buf, 1, &n.to_be_bytes(), Some(&value));
                },
            );
        }
        let mut blocks = std::mem::take(&mut *lock(&slot.full));
        blocks.push(std::mem::take(&mut *slot.current.lock()));
        let (mut next, mut alone) = (1u64, false);
        for mut b in blocks {
            let (lo, hi) = frame::check_block(b.seal()).expect("a sealed block");
            let mut records = Vec::new();
            decode(&b.block[BLOCK_HEADER_LEN..], |e| {
                assert_eq!(e.key, next.to_be_bytes(), "records in order");
                assert_eq!(e.write.value(), Some(&vec![next as u8; size(next)][..]), "record {next} whole");
                assert!((lo..=hi).contains(&e.tid.epoch()), "epochs {lo}..={hi} cover record {next}");
                records.push(next);
                next += 1;
            })
            .expect("whole records");
            assert!(b.block.len() <= CAPACITY || records.len() == 1, "{records:?} past the capacity");
            alone |= records == [20];
        }
        assert_eq!(next, 41, "every record logged");
        assert!(alone, "the record larger than a buffer has one alone");
    }

    #[test]
    fn records_of_older_versions_still_decode() {
        let delta = [&3u16.to_le_bytes()[..], &2u16.to_le_bytes(), b"xy"].concat();
        let old = fixed_record(
            Tid::new(4, 2),
            &[(1, b"k", 2, b"v1"), (2, b"d", DELETE, b""), (3, b"row", DELTA_BIT | delta.len() as u32, &delta)],
        );
        // An older record, then a current one, in one block (a primary
        // ships a catch-up block as the file it read holds it).
        let mut payload = old.clone();
        encode_txn(&mut payload, Tid::new(5, 1), 1);
        encode_delta(&mut payload, 3, b"row", [(3u16, &b"xy"[..])].into_iter());
        let mut got = Vec::new();
        decode(&payload, |e| got.push((e.tid, e.table, e.key.to_vec(), e.write))).expect("decode");
        assert_eq!(got.len(), 4);
        lengths_read_back(&payload);
        assert_eq!(got[0], (Tid::new(4, 2), 1, b"k".to_vec(), Write::Value(b"v1")));
        assert_eq!(got[1], (Tid::new(4, 2), 2, b"d".to_vec(), Write::Delete));
        for (tid, i) in [(Tid::new(4, 2), 2), (Tid::new(5, 1), 3)] {
            assert_eq!((got[i].0, got[i].1, &got[i].2[..]), (tid, 3, &b"row"[..]));
            let Write::Delta(d) = got[i].3 else { panic!("not a delta: {:?}", got[i]) };
            assert_eq!(d.collect::<Vec<_>>(), vec![(3, &b"xy"[..])]);
        }
        assert!(decode(&old[..old.len() - 1], |_| {}).is_err());
    }

    /// A block's CRC only proves what its writer sent: a hostile primary's
    /// records, flipped or random, are errors, never panics or runaway loops.
    #[test]
    fn damaged_or_hostile_records_are_errors_not_panics() {
        let mut good = Vec::new();
        encode_txn(&mut good, Tid::new(7, 3), 3);
        encode_entry(&mut good, 2, b"key", Some(&[1; 200]));
        encode_delta(&mut good, 2, b"row", [(1u16, &b"ab"[..]), (300, &[2; 130][..])].into_iter());
        encode_entry(&mut good, 9, b"gone", None);
        for i in 0..good.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let mut n = 0;
                let _ = decode(&bad, |e| {
                    n += 1;
                    if let Write::Delta(d) = e.write {
                        d.count();
                    }
                });
                assert!(n <= 3 + bad.len() / 3, "flip at {i}: {n} entries from {} bytes", bad.len());
            }
        }
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..20_000 {
            let mut bytes = rng.bytes(96);
            if round % 2 == 0 && bytes.len() >= 8 {
                bytes[0] |= 1; // a varint record
            }
            let _ = decode(&bytes, |e| {
                if let Write::Delta(d) = e.write {
                    d.count();
                }
            });
        }
    }

    /// Records hold a key's length in two bytes: a log key longer than
    /// any the engine accepts is corruption, in either layout.
    #[test]
    fn keys_longer_than_max_key_len_are_errors() {
        for len in [crate::MAX_KEY_LEN, crate::MAX_KEY_LEN + 1] {
            let key = vec![7u8; len];
            let mut varint = Vec::new();
            encode_txn(&mut varint, Tid::new(7, 3), 1);
            encode_entry(&mut varint, 2, &key, Some(b"v"));
            let mut fixed = Tid::new(7, 3).raw().to_le_bytes().to_vec();
            fixed.extend_from_slice(&1u32.to_le_bytes());
            fixed.extend_from_slice(&2u32.to_le_bytes());
            fixed.extend_from_slice(&(len as u16).to_le_bytes());
            fixed.extend_from_slice(&1u32.to_le_bytes());
            fixed.extend_from_slice(&key);
            fixed.push(b'v');
            for bytes in [varint, fixed] {
                let mut keys = Vec::new();
                let decoded = decode(&bytes, |e| keys.push(e.key.len()));
                if len <= crate::MAX_KEY_LEN {
                    assert_eq!((decoded, keys), (Ok(()), vec![len]));
                } else {
                    assert!(decoded.is_err() && keys.is_empty(), "a {len}-byte key was accepted");
                }
            }
        }
    }

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, 1 << 62, u64::MAX] {
            let mut out = Vec::new();
            put_varints(&mut out, [v]);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut p = &out[..];
            assert_eq!(take_varint(&mut p), Ok(v));
            assert!(p.is_empty());
            assert!(take_varint(&mut &out[..out.len() - 1]).is_err(), "{v} cut short");
        }
        // Several at once, each the longest, after bytes already there.
        let mut out = vec![9u8];
        put_varints(&mut out, [u64::MAX, 0, u64::MAX]);
        assert_eq!(out.len(), 1 + 2 * MAX_VARINT + 1);
        let mut p = &out[1..];
        for v in [u64::MAX, 0, u64::MAX] {
            assert_eq!(take_varint(&mut p), Ok(v));
        }
        // Eleven bytes, or a tenth byte with more than the 64th bit.
        assert!(take_varint(&mut &[0xff; 11][..]).is_err());
        assert!(take_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02][..]).is_err());
        // A value word of an unknown kind, or a delete with a length.
        for word in [3u64, (5 << 2) | KIND_DELETE] {
            let mut bad = Vec::new();
            encode_txn(&mut bad, Tid::new(1, 1), 1);
            entry_header(&mut bad, 0, b"k", word);
            bad.extend_from_slice(&[0; 5]);
            assert!(decode(&bad, |_| {}).is_err(), "word {word:#x}");
        }
    }

    /// Catch-up keeps whole transactions of epochs from `from` on.
    #[test]
    fn retain_from_keeps_whole_transactions_of_later_epochs() {
        let txn = |epoch: u64, keys: &[&[u8]]| {
            let mut out = Vec::new();
            encode_txn(&mut out, Tid::new(epoch, 1), keys.len() as u32);
            for k in keys {
                encode_entry(&mut out, 0, k, Some(b"v"));
            }
            out
        };
        let (a, b, c, empty) = (txn(7, &[b"a", b"b"]), txn(3, &[b"c"]), txn(9, &[b"d"]), txn(2, &[]));
        let payload = [&a[..], &b, &empty, &c].concat();
        let mut out = Vec::new();
        assert_eq!(retain_from(&payload, 4, &mut out), Ok(Some((7, 9))));
        assert_eq!(out, [&a[..], &c].concat());
        out.clear();
        assert_eq!(retain_from(&payload, 0, &mut out), Ok(Some((2, 9))));
        assert_eq!(out, payload);
        out.clear();
        assert_eq!(retain_from(&payload, 10, &mut out), Ok(None));
        assert!(out.is_empty());
        assert!(retain_from(&payload[..payload.len() - 1], 0, &mut out).is_err());
    }

    #[test]
    fn deltas_round_trip() {
        let mut out = Vec::new();
        let cols: [(u16, &[u8]); 3] = [(0, b"abc"), (7, b""), (65535, b"z")];
        encode_txn(&mut out, Tid::new(3, 1), 2);
        encode_delta(&mut out, 4, b"key", cols.iter().copied());
        encode_entry(&mut out, 4, b"gone", None);
        let mut got = Vec::new();
        decode(&out, |e| got.push((e.table, e.key.to_vec(), e.write))).expect("decode");
        assert_eq!(got.len(), 2);
        let Write::Delta(d) = got[0].2 else { panic!("not a delta: {:?}", got[0]) };
        assert_eq!(d.collect::<Vec<_>>(), cols.to_vec());
        assert_eq!(got[1].2, Write::Delete);
        // A column length that runs past the entry is corruption.
        let mut bad = Vec::new();
        encode_txn(&mut bad, Tid::new(3, 1), 1);
        encode_delta(&mut bad, 4, b"k", [(1u16, &b"xy"[..])].into_iter());
        let at = bad.len() - 3; // the column's length
        bad[at] = 9;
        assert!(decode(&bad, |_| {}).is_err());
        // So is a column id beyond u16.
        let mut bad = Vec::new();
        encode_txn(&mut bad, Tid::new(3, 1), 1);
        let columns = [&[0x80, 0x80, 0x04][..], &[0]].concat(); // column 65536, empty
        entry_header(&mut bad, 4, b"k", value_word(columns.len(), KIND_DELTA));
        bad.extend_from_slice(&columns);
        assert!(decode(&bad, |_| {}).is_err());
    }
}

//! Value logging, the worker side (SiloR §3).
//!
//! A committing worker appends one log record per transaction to its
//! current log buffer: the TID, then the table, key and new value (or a
//! delete mark) of every write. Buffers come from a small per-worker pool;
//! a full buffer is queued for the worker's logger, and the logger takes
//! the partly filled current buffer itself at each epoch change, so a
//! worker never waits on its logger unless its pool is empty
//! (backpressure). Encoding and decoding of log records live here too.

use super::frame::{self, BLOCK_HEADER_LEN};
use crate::tid::Tid;
use std::sync::{Arc, Mutex};

/// Marks a delete in a log entry's value length.
const DELETE: u32 = u32::MAX;
/// Set in a log entry's value length (other than `DELETE`): the entry is a
/// delta of that many bytes, not a whole value (Gawain §3).
const DELTA_BIT: u32 = 1 << 31;
/// Bytes before each column of a delta: column id and length.
pub const COLUMN_HEADER: usize = 4;
/// Bytes of a transaction's record before its entries: TID, entry count.
const TXN_HEADER: usize = 12;
/// Bytes of an entry before its key and value: table, key and value lengths.
const ENTRY_HEADER: usize = 10;

/// The size of the log record of a transaction with these writes.
pub fn record_size(entries: impl Iterator<Item = (usize, Option<usize>)>) -> usize {
    TXN_HEADER + entries.map(|(k, v)| ENTRY_HEADER + k + v.unwrap_or(0)).sum::<usize>()
}

/// Appends a transaction's header; follow with `count` [`encode_entry`]s.
pub fn encode_txn(out: &mut Vec<u8>, tid: Tid, count: u32) {
    out.extend_from_slice(&tid.raw().to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
}

/// Appends one write: `value` is `None` for a delete.
pub fn encode_entry(out: &mut Vec<u8>, table: u32, key: &[u8], value: Option<&[u8]>) {
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&value.map_or(DELETE, |v| v.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value.unwrap_or(&[]));
}

/// Appends an update that changed only some columns: `columns` yields
/// each changed column's id and bytes (without a variable column's length
/// prefix), `len` is their total length.
pub fn encode_delta<'a>(
    out: &mut Vec<u8>,
    table: u32,
    key: &[u8],
    columns: impl Iterator<Item = (u16, &'a [u8])> + Clone,
) {
    let len: usize = columns.clone().map(|(_, b)| COLUMN_HEADER + b.len()).sum();
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(DELTA_BIT | len as u32).to_le_bytes());
    out.extend_from_slice(key);
    for (id, bytes) in columns {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
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
pub struct Columns<'a>(&'a [u8]);

impl<'a> Columns<'a> {
    /// The encoded columns (the bytes an iteration walks).
    pub fn payload(&self) -> &'a [u8] {
        self.0
    }
}

impl<'a> Iterator for Columns<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        // Well-formed: `decode` checked every column's length.
        let h = self.0.get(..COLUMN_HEADER)?;
        let id = u16::from_le_bytes([h[0], h[1]]);
        let len = u16::from_le_bytes([h[2], h[3]]) as usize;
        let bytes = self.0.get(COLUMN_HEADER..COLUMN_HEADER + len)?;
        self.0 = &self.0[COLUMN_HEADER + len..];
        Some((id, bytes))
    }
}

/// Checks that a delta payload is a sequence of whole columns.
fn check_columns(mut p: &[u8]) -> Result<(), String> {
    while !p.is_empty() {
        let len = match p.get(..COLUMN_HEADER) {
            Some(h) => u16::from_le_bytes([h[2], h[3]]) as usize,
            None => return Err("a delta ends inside a column header".into()),
        };
        p = p.get(COLUMN_HEADER + len..).ok_or("a delta column runs past its entry")?;
    }
    Ok(())
}

/// One decoded write of a log record.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub tid: Tid,
    pub table: u32,
    pub key: &'a [u8],
    pub write: Write<'a>,
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

/// Decodes the transaction record at the start of `p`, calling `f` for
/// each of its writes, moves `p` past it and returns its TID.
fn decode_txn<'a>(p: &mut &'a [u8], f: &mut impl FnMut(Entry<'a>)) -> Result<Tid, String> {
    fn take<'a>(p: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if p.len() < n {
            return Err(format!("a log record runs {} bytes past its block", n - p.len()));
        }
        let (a, b) = p.split_at(n);
        *p = b;
        Ok(a)
    }
    let u32_of = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let h = take(p, TXN_HEADER)?;
    let tid = Tid::from_raw(u64::from_le_bytes(h[..8].try_into().unwrap_or([0; 8])));
    for _ in 0..u32_of(&h[8..]) {
        let e = take(p, ENTRY_HEADER)?;
        let table = u32_of(e);
        let klen = u16::from_le_bytes([e[4], e[5]]) as usize;
        let vlen = u32_of(&e[6..]);
        let key = take(p, klen)?;
        let write = match vlen {
            DELETE => Write::Delete,
            v if v & DELTA_BIT != 0 => {
                let d = take(p, (v & !DELTA_BIT) as usize)?;
                check_columns(d)?;
                Write::Delta(Columns(d))
            }
            v => Write::Value(take(p, v as usize)?),
        };
        f(Entry { tid, table, key, write });
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

/// A worker's log state, shared with its logger.
#[derive(Debug)]
pub struct LogSlot {
    /// The buffer the worker appends to. Uncontended except when the logger
    /// takes it at an epoch change.
    pub current: Mutex<Buf>,
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
        let free = (1..pool).map(|_| frame::new_block(capacity)).collect();
        LogSlot {
            current: Mutex::new(Buf::fresh(frame::new_block(capacity))),
            full: Mutex::new(Vec::new()),
            free: Mutex::new(free),
            epoch,
            gone: Default::default(),
            capacity,
        }
    }

    /// Appends a record of `size` bytes written by `encode`, for a
    /// transaction in `epoch`. Blocks only while the pool is empty; gives up
    /// (dropping the record) once `failed` says nothing more can become
    /// durable. Lock order: `current`, then `full` or `free`.
    pub fn append(&self, epoch: u64, size: usize, failed: impl Fn() -> bool, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut cur = lock(&self.current);
        if !cur.is_empty() && cur.block.len() + size > self.capacity {
            let done = std::mem::replace(&mut *cur, Buf::fresh(Vec::new()));
            lock(&self.full).push(done);
        }
        while cur.block.len() < BLOCK_HEADER_LEN {
            // The logger took our buffer, or we queued it: take a free one,
            // without holding `current`, which the logger locks to flush.
            drop(cur);
            let Some(b) = self.take_free(&failed) else { return };
            cur = lock(&self.current);
            if cur.block.len() < BLOCK_HEADER_LEN {
                *cur = Buf::fresh(b);
            } else {
                lock(&self.free).push(b); // the logger gave us one meanwhile
            }
        }
        cur.lo = cur.lo.min(epoch);
        cur.hi = cur.hi.max(epoch);
        encode(&mut cur.block);
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

    #[test]
    fn records_round_trip() {
        let mut out = Vec::new();
        let tid = Tid::new(5, 9);
        type Write<'a> = (u32, &'a [u8], Option<&'a [u8]>);
        let writes: [Write<'_>; 3] = [(1, b"k1", Some(b"v1")), (2, b"", Some(b"")), (1, b"gone", None)];
        encode_txn(&mut out, tid, 3);
        for (t, k, v) in writes {
            encode_entry(&mut out, t, k, v);
        }
        let size = record_size(writes.iter().map(|(_, k, v)| (k.len(), v.map(<[u8]>::len))));
        assert_eq!(out.len(), size);
        let mut got = Vec::new();
        decode(&out, |e| got.push((e.tid, e.table, e.key.to_vec(), e.write.value().map(<[u8]>::to_vec))))
            .expect("decode");
        let want: Vec<_> = writes.iter().map(|(t, k, v)| (tid, *t, k.to_vec(), v.map(<[u8]>::to_vec))).collect();
        assert_eq!(got, want);
        assert!(decode(&out[..out.len() - 1], |_| {}).is_err());
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
        let at = bad.len() - 4; // the column's length field
        bad[at] = 9;
        assert!(decode(&bad, |_| {}).is_err());
    }
}

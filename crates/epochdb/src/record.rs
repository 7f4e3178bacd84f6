//! Records: a header and the data in one allocation (Silo §4.3, §4.5).
//!
//! ```text
//! +----------+-------+---------+-----+------------------+------------------+--------------+
//! | TID word | len   | key_len | cap | prev ptr         | key (8-aligned)  | data (cap B) |
//! |   8 B    | 4 B   |  2 B    | 2 B | 8 B, if versioned|                  |              |
//! +----------+-------+---------+-----+------------------+------------------+--------------+
//! ```
//!
//! The header is 16 bytes, not Silo's 32: records are most of the
//! database's memory (a TPC-C order line is 40 bytes, of which 16 are its
//! value), so `cap` is a 2-byte code ([`cap_code`]) and `key_len` 2 bytes
//! (keys are at most [`MAX_KEY_LEN`](crate::MAX_KEY_LEN)). Only a
//! *versioned* record (the top bit of `key_len`) has a `prev` pointer, to
//! the older version snapshots may read: most records never get one (rows
//! inserted and never overwritten across a snapshot epoch), so a record
//! that needs a link is replaced by a versioned one
//! ([`Record::fits`]), once in its key's life.
//!
//! Invariants:
//! - `key`, `cap`, `key_len` and whether the record is versioned never
//!   change after allocation; the key bytes are written before the record
//!   is published.
//! - `len`, the data words and `prev` change only under the TID lock, and are
//!   read by other threads only inside [`TidWord::stable_read`], or (for
//!   superseded copies, which are immutable) directly.
//! - The data is stored as `AtomicU64` words so that an optimistic reader
//!   racing a writer is a data race on atomics (allowed), not on plain bytes.
//! - A record is owned by exactly one of: a table's index (while reachable
//!   from it), or a worker's garbage list (after it was unhooked, superseded
//!   or copied as an old version). It is freed by whichever owns it.

use crate::arena;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::tid::TidWord;
use std::alloc::Layout;
use std::ptr::NonNull;

#[repr(C)]
pub struct Record {
    pub tid: TidWord,
    len: AtomicU32,
    key_len: u16,
    cap: u16,
}

const HEADER: usize = std::mem::size_of::<Record>();
const _: () = assert!(HEADER == 16, "a record header is two words");
const WORD: usize = 8;
/// The bit of `key_len` that says a `prev` slot follows the header.
const VERSIONED: u16 = 0x8000;
const _: () = assert!(crate::MAX_KEY_LEN < VERSIONED as usize);
/// Capacities of at most `SMALL_CAP_MAX` bytes are coded in words; larger
/// ones in units of [`BIG_UNIT`] (with the top bit set), up to 4 GiB.
const SMALL_CAP_MAX: usize = 0x7FFF * WORD;
const BIG_UNIT: usize = 128 << 10;
const BIG: u16 = 0x8000;

#[inline]
fn round_up(n: usize) -> usize {
    n.div_ceil(WORD) * WORD
}

/// The capacity a record gets for `n` bytes of data, and its code: `n`
/// rounded up to a word, or (past `SMALL_CAP_MAX`, where the rounding
/// wastes less than half the block) to [`BIG_UNIT`]. `None` past the
/// largest code.
fn cap_code(n: usize) -> Option<(usize, u16)> {
    if n <= SMALL_CAP_MAX {
        let cap = round_up(n);
        Some((cap, (cap / WORD) as u16))
    } else {
        let units = n.div_ceil(BIG_UNIT);
        (units < BIG as usize).then(|| (units * BIG_UNIT, BIG | units as u16))
    }
}

/// The capacity a [`cap_code`] stands for.
#[inline]
fn cap_of(code: u16) -> usize {
    if code & BIG == 0 {
        code as usize * WORD
    } else {
        (code & !BIG) as usize * BIG_UNIT
    }
}

/// Where the key starts: after the header, and the `prev` slot if any.
#[inline]
fn key_offset(versioned: bool) -> usize {
    HEADER + versioned as usize * WORD
}

fn layout(key_len: usize, cap: usize, versioned: bool) -> Layout {
    let size = key_offset(versioned) + round_up(key_len) + cap;
    // Cannot fail: sizes are bounded by the key/value limits and the
    // alignment is a power of two.
    Layout::from_size_align(size, WORD).unwrap_or_else(|_| unreachable!("record layout"))
}

/// The bytes [`Record::alloc`] takes for a key and a value of these
/// lengths (`None` for a value no record can hold).
pub(crate) fn footprint(key_len: usize, value_len: usize) -> Option<usize> {
    cap_code(value_len).map(|(cap, _)| layout(key_len, cap, false).size())
}

impl Record {
    /// Allocates a record holding `key` and `value`, with TID word `word`,
    /// and no link to an older version. The data capacity is `value.len()`
    /// (at least `min_cap`) rounded up to a word, or for values above
    /// 256 KiB to 128 KiB.
    ///
    /// Panics if the key is longer than `MAX_KEY_LEN` or the value longer
    /// than 4 GiB, which callers refuse first with typed errors (values are
    /// at most `Options::max_value_len`, at most 2 GiB).
    pub fn alloc(key: &[u8], value: &[u8], min_cap: usize, word: u64) -> NonNull<Record> {
        Self::alloc_in(key, value, min_cap, word, None)
    }

    /// As [`Record::alloc`], versioned if `slot` (with an empty `prev`
    /// slot, for a link set later).
    pub fn alloc_with_slot(key: &[u8], value: &[u8], word: u64, slot: bool) -> NonNull<Record> {
        Self::alloc_in(key, value, 0, word, slot.then_some(std::ptr::null_mut()))
    }

    /// A record that takes over from one whose older versions start at
    /// `prev`: versioned only if there is such a version to link.
    pub fn alloc_linked(key: &[u8], value: &[u8], word: u64, prev: *mut Record) -> NonNull<Record> {
        Self::alloc_in(key, value, 0, word, (!prev.is_null()).then_some(prev))
    }

    fn alloc_in(key: &[u8], value: &[u8], min_cap: usize, word: u64, prev: Option<*mut Record>) -> NonNull<Record> {
        let (cap, code) =
            cap_code(value.len().max(min_cap)).unwrap_or_else(|| panic!("a value of {} bytes", value.len()));
        assert!(key.len() <= crate::MAX_KEY_LEN, "a key of {} bytes", key.len());
        let layout = layout(key.len(), cap, prev.is_some());
        let ptr = arena::alloc(layout).cast::<Record>();
        let raw = ptr.as_ptr();
        // SAFETY: `raw` is a fresh allocation of `layout`, large enough and
        // aligned for the header, the `prev` slot if versioned, the key area
        // and `cap` bytes of words. Nothing else can see it yet.
        unsafe {
            raw.write(Record {
                tid: TidWord::new(word),
                len: AtomicU32::new(value.len() as u32),
                key_len: key.len() as u16 | if prev.is_some() { VERSIONED } else { 0 },
                cap: code,
            });
            if let Some(prev) = prev {
                (raw as *mut u8).add(HEADER).cast::<AtomicPtr<Record>>().write(AtomicPtr::new(prev));
            }
            let key_at = key_offset(prev.is_some());
            let key_dst = (raw as *mut u8).add(key_at);
            std::ptr::copy_nonoverlapping(key.as_ptr(), key_dst, key.len());
            let words = (raw as *mut u8).add(key_at + round_up(key.len())) as *mut AtomicU64;
            for i in 0..cap / WORD {
                words.add(i).write(AtomicU64::new(load_word(value, i)));
            }
        }
        ptr
    }

    /// Frees a record.
    ///
    /// # Safety
    /// `ptr` came from [`Record::alloc`], is freed once, and no thread can
    /// still reach it (it is unreachable and its reclamation epoch passed).
    pub unsafe fn free(ptr: NonNull<Record>) {
        // SAFETY: per the contract the record is live until this call.
        let rec = unsafe { ptr.as_ref() };
        let layout = layout(rec.key_len(), rec.capacity(), rec.is_versioned());
        // SAFETY: same allocation and layout as in `alloc_in`.
        unsafe { arena::free(ptr.cast(), layout) }
    }

    /// Whether this record has a `prev` slot.
    #[inline]
    pub fn is_versioned(&self) -> bool {
        self.key_len & VERSIONED != 0
    }

    #[inline]
    fn key_len(&self) -> usize {
        (self.key_len & !VERSIONED) as usize
    }

    #[inline]
    fn key_at(&self) -> usize {
        key_offset(self.is_versioned())
    }

    #[inline]
    fn data_at(&self) -> usize {
        self.key_at() + round_up(self.key_len())
    }

    #[inline]
    fn prev_slot(&self) -> Option<&AtomicPtr<Record>> {
        // SAFETY: a versioned record's slot follows its header in the same
        // allocation, initialized by `alloc_in`.
        self.is_versioned()
            .then(|| unsafe { &*(self as *const Record as *const u8).add(HEADER).cast::<AtomicPtr<Record>>() })
    }

    /// Whether the locked record can take a new version of `len` bytes in
    /// place: it has the room, and if its current version must be kept for
    /// snapshots (`keep_old`), a `prev` slot to link it from. If not, a new
    /// record takes the key's place.
    #[inline]
    pub fn fits(&self, len: usize, keep_old: bool) -> bool {
        len <= self.capacity() && (!keep_old || self.is_versioned())
    }

    /// The key; immutable for the record's life.
    #[inline]
    pub fn key(&self) -> &[u8] {
        // SAFETY: the key bytes follow the header in the same allocation and
        // were written before the record was published; they never change.
        unsafe { std::slice::from_raw_parts((self as *const Record as *const u8).add(self.key_at()), self.key_len()) }
    }

    #[inline]
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `cap / 8` initialized atomic words follow the key area in
        // the same allocation, which lives as long as `self`.
        unsafe {
            let base = (self as *const Record as *const u8).add(self.data_at());
            std::slice::from_raw_parts(base as *const AtomicU64, self.capacity() / WORD)
        }
    }

    /// Bytes of data this record can hold without reallocation.
    #[inline]
    pub fn capacity(&self) -> usize {
        cap_of(self.cap)
    }

    /// The data's length in bytes.
    pub fn value_len(&self) -> usize {
        (self.len.load(Ordering::Relaxed) as usize).min(self.capacity())
    }

    /// Overwrites `bytes.len()` bytes of the data from `at`, all within
    /// [`Record::value_len`]. Caller holds the TID lock.
    pub fn write_at(&self, at: usize, bytes: &[u8]) {
        debug_assert!(crate::tid::is_locked(self.tid.load()));
        assert!(at + bytes.len() <= self.value_len(), "a write past the data's end");
        let words = self.words();
        let mut done = 0;
        while done < bytes.len() {
            let (w, off) = ((at + done) / WORD, (at + done) % WORD);
            let n = (WORD - off).min(bytes.len() - done);
            let mut word = words[w].load(Ordering::Relaxed).to_ne_bytes();
            word[off..off + n].copy_from_slice(&bytes[done..done + n]);
            words[w].store(u64::from_ne_bytes(word), Ordering::Relaxed);
            done += n;
        }
    }

    /// Copies the data into `out` (replacing its contents). Only meaningful
    /// inside [`TidWord::stable_read`] or on an immutable old version: a
    /// racing writer may make the copy inconsistent, never unsound.
    #[inline]
    pub fn copy_value(&self, out: &mut Vec<u8>) {
        let len = self.value_len();
        let words = &self.words()[..len.div_ceil(WORD)];
        out.clear();
        out.reserve(words.len() * WORD);
        // One capacity check for the whole value, not one per word.
        let spare = &mut out.spare_capacity_mut()[..words.len() * WORD];
        for (dst, w) in spare.chunks_exact_mut(WORD).zip(words) {
            for (d, b) in dst.iter_mut().zip(w.load(Ordering::Relaxed).to_ne_bytes()) {
                d.write(b);
            }
        }
        // SAFETY: the first `words.len() * WORD >= len` bytes were just
        // initialized above.
        unsafe { out.set_len(len) };
    }

    /// Reads one consistent version: the TID word (lock clear) and its data.
    #[inline]
    pub fn stable_read(&self, out: &mut Vec<u8>) -> u64 {
        self.tid.stable_read(|_| self.copy_value(out))
    }

    /// Overwrites the data in place. The caller holds the TID lock and
    /// `value.len() <= capacity()`.
    pub fn write_value(&self, value: &[u8]) {
        debug_assert!(crate::tid::is_locked(self.tid.load()));
        debug_assert!(value.len() <= self.capacity());
        for (i, w) in self.words()[..value.len().div_ceil(WORD)].iter().enumerate() {
            w.store(load_word(value, i), Ordering::Relaxed);
        }
        self.len.store(value.len() as u32, Ordering::Relaxed);
    }

    /// The previous (older) version, for snapshot readers; null if none
    /// (always, for a record that is not versioned).
    #[inline]
    pub fn prev(&self) -> *mut Record {
        self.prev_slot().map_or(std::ptr::null_mut(), |p| p.load(Ordering::Acquire))
    }

    /// Links an older version (null: none). The caller holds the TID lock.
    /// Panics if `prev` is not null and the record is not versioned: there
    /// is nowhere to put it.
    pub fn set_prev(&self, prev: *mut Record) {
        match self.prev_slot() {
            Some(slot) => slot.store(prev, Ordering::Release),
            None => assert!(prev.is_null(), "a link to an older version from a record without a slot"),
        }
    }
}

/// Word `i` of `bytes`, zero-padded past the end.
#[inline]
fn load_word(bytes: &[u8], i: usize) -> u64 {
    let start = i * WORD;
    if start + WORD <= bytes.len() {
        let mut b = [0u8; WORD];
        b.copy_from_slice(&bytes[start..start + WORD]);
        u64::from_ne_bytes(b)
    } else if start < bytes.len() {
        let mut b = [0u8; WORD];
        b[..bytes.len() - start].copy_from_slice(&bytes[start..]);
        u64::from_ne_bytes(b)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tid::{Tid, LATEST_BIT};

    #[test]
    fn capacity_codes_round_up_and_round_trip() {
        for n in [0, 1, 8, 9, 100, SMALL_CAP_MAX - 1, SMALL_CAP_MAX, SMALL_CAP_MAX + 1, 1 << 20, (1 << 31) - 1] {
            let (cap, code) = cap_code(n).expect("a capacity");
            assert_eq!(cap_of(code), cap, "{n}");
            assert!(cap >= n && cap % WORD == 0, "{n}: {cap}");
            assert!(n <= SMALL_CAP_MAX || (cap - n) * 2 < cap, "{n}: {cap} wastes half");
        }
        assert_eq!(cap_code(100), Some((104, 13)));
        assert_eq!(cap_code(0x7FFF * BIG_UNIT + 1), None);
    }

    /// Writes at any offset and length, across word boundaries, change
    /// exactly those bytes.
    #[test]
    fn writes_at_an_offset_change_only_their_bytes() {
        let mut model: Vec<u8> = (0..40u8).collect();
        let r = Record::alloc(b"k", &model, 0, Tid::new(1, 1).raw() | LATEST_BIT);
        // SAFETY: freshly allocated, freed at the end.
        let rec = unsafe { r.as_ref() };
        let old = rec.tid.lock();
        for (k, (at, n)) in [(0, 1), (3, 5), (5, 9), (7, 2), (8, 8), (15, 17), (39, 1), (0, 40)].into_iter().enumerate()
        {
            let bytes: Vec<u8> = (0..n).map(|i| (100 + 17 * k + at + i) as u8).collect();
            rec.write_at(at, &bytes);
            model[at..at + n].copy_from_slice(&bytes);
            let mut got = Vec::new();
            rec.copy_value(&mut got);
            assert_eq!(got, model, "at {at}, {n} bytes");
        }
        rec.tid.unlock_to(old);
        // SAFETY: never published; freed once.
        unsafe { Record::free(r) };
    }

    /// Only a versioned record has a `prev` slot: 8 more bytes, the same
    /// key and data, and the only kind that can link an older version.
    #[test]
    fn versioned_records_hold_a_link_and_plain_ones_refuse_one() {
        let word = Tid::new(1, 1).raw() | LATEST_BIT;
        let plain = Record::alloc(b"key", b"value", 0, word);
        let old = Record::alloc(b"key", b"old", 0, word);
        let versioned = Record::alloc_linked(b"key", b"value", word, old.as_ptr());
        // SAFETY: fresh, not shared; freed at the end.
        let (p, v) = unsafe { (plain.as_ref(), versioned.as_ref()) };
        assert!(!p.is_versioned() && v.is_versioned());
        assert!(p.prev().is_null());
        assert_eq!(v.prev(), old.as_ptr());
        for r in [p, v] {
            assert_eq!(r.key(), b"key");
            let mut out = Vec::new();
            assert_eq!(r.stable_read(&mut out), word);
            assert_eq!(out, b"value");
            assert!(r.fits(8, false) && !r.fits(9, false));
        }
        assert!(!p.fits(1, true) && v.fits(1, true));
        assert_eq!(layout(3, 8, true).size(), layout(3, 8, false).size() + WORD);
        assert_eq!(footprint(8, 16), Some(40), "a TPC-C order line");
        p.set_prev(std::ptr::null_mut()); // no link: allowed
        let refused = std::panic::catch_unwind(|| p.set_prev(old.as_ptr()));
        assert!(refused.is_err(), "a plain record has nowhere to put a link");
        assert_eq!(p.key(), b"key", "the refusal wrote nothing");
        v.set_prev(std::ptr::null_mut());
        assert!(v.prev().is_null());
        // SAFETY: allocated above, never shared; each freed once.
        unsafe {
            Record::free(plain);
            Record::free(versioned);
            Record::free(old);
        }
    }

    #[test]
    fn alloc_read_write_free() {
        let word = Tid::new(1, 1).raw() | LATEST_BIT;
        for (klen, vlen) in [(0, 0), (1, 1), (8, 8), (13, 100), (255, 1000), (crate::MAX_KEY_LEN, 300 << 10)] {
            let key: Vec<u8> = (0..klen).map(|i| i as u8).collect();
            let val: Vec<u8> = (0..vlen).map(|i| (i * 7) as u8).collect();
            let r = Record::alloc(&key, &val, 0, word);
            // SAFETY: freshly allocated, freed at the end of this block.
            let rec = unsafe { r.as_ref() };
            assert_eq!(rec.key(), &key[..]);
            let mut out = Vec::new();
            assert_eq!(rec.stable_read(&mut out), word);
            assert_eq!(out, val);
            if vlen > 0 {
                let w = rec.tid.lock();
                let shorter = &val[..vlen / 2];
                rec.write_value(shorter);
                rec.tid.unlock_to(w);
                rec.copy_value(&mut out);
                assert_eq!(out, shorter);
            }
            assert!(rec.prev().is_null());
            // SAFETY: allocated above, not shared.
            unsafe { Record::free(r) };
        }
    }
}

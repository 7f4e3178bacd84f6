//! Per-column versions, for recovering a delta log (Gawain §3).
//!
//! A delta entry carries only the columns an update changed, so during
//! recovery a row can hold columns written by different transactions, and
//! an entry may arrive after a newer one that wrote other columns. Each
//! such row gets a version vector: the TID that last wrote each column,
//! and the TID of the newest delete. An entry overwrites exactly the
//! columns it holds that are older than it; a delete blanks the older
//! columns. A row is live when some column is newer than its newest delete
//! and complete when all are.
//!
//! Vectors exist only during recovery, only for rows some delta touched,
//! and are used under the record's lock: normal operation pays nothing for
//! them. A row without one holds every column at its record's TID.

use crate::catalog::{ColumnType, Schema};
use crate::durability::log::{Columns, Write};
use crate::record::Record;
use std::ops::Range;
use std::ptr;

/// `[newest delete, column 0, column 1, ...]`, raw TIDs; 0 = never.
pub type Versions = Box<[u64]>;

/// Takes the vector of `rec`, a record of a table with schema `schema`,
/// leaving it none. Under the record's lock, or before it is published.
///
/// Where vectors live: in their record's `prev` slot, which no record
/// recovery makes uses otherwise (no snapshot exists yet to want an older
/// version); a row gets a record with the slot when it gets its vector
/// (`recovery::Ctx::versioned`, [`Record::fits`]). It lies in the cache line the record's lock has just brought
/// in; a side table keyed by record address, which this replaced, cost
/// an eighth of delta recovery's time. Recovery takes every vector back
/// before the database opens (`recovery::Leftovers::versioned`).
pub fn take(rec: &Record, schema: &Schema) -> Option<Versions> {
    let p = rec.prev() as *mut u64;
    if p.is_null() {
        return None;
    }
    rec.set_prev(ptr::null_mut());
    let len = schema.columns().len() + 1;
    // SAFETY: a non-null `prev` during recovery is a vector that `put`
    // leaked, of its table's length (`uniform` and `recovery::install`
    // size every vector by the schema); clearing it first means it is
    // reclaimed once.
    Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, len)) })
}

/// Gives `rec` the vector `v` (see [`take`]); it has none, and is
/// versioned. Under the record's lock, or before it is published.
pub fn put(rec: &Record, v: Versions) {
    debug_assert!(rec.prev().is_null(), "a record with two vectors");
    rec.set_prev(Box::into_raw(v) as *mut u64 as *mut Record);
}

/// Starts loading `rec`'s vector, if it has one, into the cache: replay
/// prefetches a window's vectors together, so their misses overlap
/// instead of each stalling the delta that reads it.
pub fn prefetch(rec: &Record, schema: &Schema) {
    let p = rec.prev();
    if !p.is_null() {
        crate::index::prefetch(p as *const u64, (schema.columns().len() + 1) * 8);
    }
}

/// The vector of a row written whole (or deleted) at `tid`.
pub fn uniform(columns: usize, tid: u64, absent: bool) -> Versions {
    let mut v = vec![tid; columns + 1];
    if !absent {
        v[0] = 0;
    }
    v.into_boxed_slice()
}

/// A row is live if some column is newer than its newest delete.
pub fn is_live(v: &[u64]) -> bool {
    v[1..].iter().any(|&c| c > v[0])
}

/// The columns of a live row that are not newer than its newest delete (or
/// were never written): its insert is missing.
pub fn missing(v: &[u64]) -> Vec<usize> {
    (1..v.len()).filter(|&c| lost(v, c)).map(|c| c - 1).collect()
}

/// Whether every column has been written since the newest delete: no
/// [`missing`] column, without listing them.
pub fn complete(v: &[u64]) -> bool {
    !(1..v.len()).any(|c| lost(v, c))
}

/// Whether entry `c` of `v` (a column's version) is no newer than the
/// newest delete.
fn lost(v: &[u64], c: usize) -> bool {
    v[c] <= v[0]
}

/// Buffers `merge` reuses.
#[derive(Default)]
pub struct MergeScratch {
    ranges: Vec<Range<usize>>,
    cols: Vec<(bool, Range<usize>)>,
}

/// The newest TID in a vector: the record's TID.
pub fn newest(v: &[u64]) -> u64 {
    v.iter().copied().max().unwrap_or(0)
}

/// Whether [`patch`] can apply `d` to a row of `len` bytes.
pub fn patchable(schema: &Schema, len: usize, d: Columns<'_>) -> bool {
    d.into_iter()
        .all(|(c, bytes)| schema.fixed_place(c as usize).is_some_and(|at| at.end <= len && at.len() == bytes.len()))
}

/// Applies the delta `d` at `tid` straight into `rec` (under its lock),
/// whose vector is `v`: what [`merge`] gives, without copying the row out
/// and back, when every column `d` holds is fixed-width and lies at a
/// place no variable column before it moves ([`Schema::fixed_place`]),
/// within the row. Returns false, doing nothing, otherwise (`merge` then
/// handles it, and reports a delta that does not fit).
pub fn patch(schema: &Schema, rec: &Record, v: &mut [u64], tid: u64, d: Columns<'_>) -> bool {
    if !patchable(schema, rec.value_len(), d) {
        return false;
    }
    patch_unchecked(schema, rec, v, tid, d);
    true
}

/// [`patch`], for a delta [`patchable`] accepted.
pub fn patch_unchecked(schema: &Schema, rec: &Record, v: &mut [u64], tid: u64, d: Columns<'_>) {
    for (c, bytes) in d {
        let (c, at) = (c as usize, schema.fixed_place(c as usize).map_or(0, |at| at.start));
        if tid > v[c + 1] {
            rec.write_at(at, bytes);
            v[c + 1] = tid;
        }
    }
}

/// Applies `write` at `tid` to the row `row` with versions `v`, writing
/// the new row to `out`. `row` may be any bytes (a tombstone's are empty):
/// columns it does not hold read as blank. An error means a whole value or
/// a delta that does not fit the schema: corruption.
pub fn merge(
    schema: &Schema,
    row: &[u8],
    v: &mut [u64],
    tid: u64,
    write: Write<'_>,
    s: &mut MergeScratch,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let n = schema.columns().len();
    // Each column's bytes: `(true, range)` in the write, `(false, range)`
    // in the old row; an empty range for a blank column.
    let cols = &mut s.cols;
    cols.clear();
    cols.resize(n, (false, 0..0));
    // An empty row (a tombstone, or a row a delta is about to create)
    // holds no column: skip the check, whose error message would be
    // built only to be dropped.
    if !row.is_empty() && schema.column_ranges(row, &mut s.ranges).is_ok() {
        for (c, r) in s.ranges.iter().enumerate() {
            cols[c].1 = r.clone();
        }
    }
    let fresh: &[u8] = match write {
        Write::Value(value) => {
            schema
                .column_ranges(value, &mut s.ranges)
                .map_err(|e| format!("a row that does not fit its schema: {e}"))?;
            for (c, r) in s.ranges.iter().enumerate() {
                if tid > v[c + 1] {
                    (cols[c], v[c + 1]) = ((true, r.clone()), tid);
                }
            }
            value
        }
        Write::Delete => {
            v[0] = v[0].max(tid);
            for c in 0..n {
                if tid > v[c + 1] {
                    (cols[c], v[c + 1]) = ((true, 0..0), tid);
                }
            }
            &[]
        }
        Write::Delta(d) => {
            // Column bytes within the delta's payload.
            let base = d.payload().as_ptr() as usize;
            for (c, bytes) in d {
                let c = c as usize;
                if c >= n {
                    return Err(format!("a delta of column {c} of {n}"));
                }
                if tid > v[c + 1] {
                    let at = bytes.as_ptr() as usize - base;
                    (cols[c], v[c + 1]) = ((true, at..at + bytes.len()), tid);
                }
            }
            d.payload()
        }
    };
    out.clear();
    for (c, (new, r)) in schema.columns().iter().zip(cols.iter()) {
        let col = if *new { &fresh[r.clone()] } else { &row[r.clone()] };
        match c.ty {
            ColumnType::Fixed(len) if col.is_empty() => out.resize(out.len() + len as usize, 0),
            ColumnType::Fixed(len) if col.len() != len as usize => {
                return Err(format!("column {:?} of {} bytes, not {len}", c.name, col.len()));
            }
            ColumnType::Fixed(_) => {}
            ColumnType::Var(max) if col.len() > max as usize => {
                return Err(format!("column {:?} of {} bytes, more than {max}", c.name, col.len()));
            }
            ColumnType::Var(_) => out.extend_from_slice(&(col.len() as u16).to_le_bytes()),
        }
        out.extend_from_slice(col);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Column;
    use crate::durability::log::{self, Entry};
    use crate::tid::Tid;

    fn schema() -> Schema {
        Schema::new(vec![Column::fixed("a", 1), Column::var("b", 4), Column::fixed("c", 1)]).expect("schema")
    }

    /// One delta entry, decoded from its log encoding.
    fn delta(cols: &[(u16, &[u8])], f: impl FnOnce(Write<'_>)) {
        let mut buf = Vec::new();
        log::encode_txn(&mut buf, Tid::new(1, 1), 1);
        log::encode_delta(&mut buf, 0, b"k", cols.iter().copied());
        let mut f = Some(f);
        log::decode(&buf, |e: Entry<'_>| (f.take().expect("one entry"))(e.write)).expect("decode");
    }

    fn apply(row: &mut Vec<u8>, v: &mut [u64], tid: u64, w: Write<'_>) {
        let (mut scratch, mut out) = (MergeScratch::default(), Vec::new());
        merge(&schema(), row, v, tid, w, &mut scratch, &mut out).expect("merge");
        *row = out;
    }

    /// Entries in any order give the state of applying them in TID order.
    #[test]
    fn any_order_gives_the_newest_column_versions() {
        let s = schema();
        let base = s.encode(&[b"1", b"xx", b"3"]).expect("row");
        let want = s.encode(&[b"9", b"yyy", b"3"]).expect("row");
        // TIDs: 10 inserts the row; 20 and then 25 set a; 30 sets b; 15
        // sets b too, but is older than 30.
        let orders: [[usize; 5]; 3] = [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 4, 0, 3, 1]];
        for order in orders {
            let mut row = Vec::new();
            let mut v = vec![0u64; 4];
            for i in order {
                match i {
                    0 => apply(&mut row, &mut v, 10, Write::Value(&base)),
                    1 => delta(&[(0, b"5")], |w| apply(&mut row, &mut v, 20, w)),
                    2 => delta(&[(1, b"yyy")], |w| apply(&mut row, &mut v, 30, w)),
                    3 => delta(&[(0, b"9")], |w| apply(&mut row, &mut v, 25, w)),
                    _ => delta(&[(1, b"old")], |w| apply(&mut row, &mut v, 15, w)),
                }
            }
            assert_eq!(row, want, "order {order:?}");
            assert_eq!(&v[..], &[0, 25, 30, 10]);
            assert!(is_live(&v) && missing(&v).is_empty());
        }
    }

    #[test]
    fn deletes_win_over_older_columns_and_lose_to_a_reinsert() {
        let s = schema();
        let row0 = s.encode(&[b"1", b"a", b"2"]).expect("row");
        let mut row = Vec::new();
        let mut v = vec![0u64; 4];
        delta(&[(2, b"7")], |w| apply(&mut row, &mut v, 40, w)); // after the reinsert
        apply(&mut row, &mut v, 20, Write::Delete);
        apply(&mut row, &mut v, 10, Write::Value(&row0)); // before the delete: lost
        assert!(is_live(&v), "the delta at 40 is newer than the delete");
        assert_eq!(missing(&v), vec![0, 1], "its reinsert has not arrived");
        apply(&mut row, &mut v, 30, Write::Value(&s.encode(&[b"3", b"bb", b"4"]).expect("row")));
        assert!(missing(&v).is_empty());
        assert_eq!(row, s.encode(&[b"3", b"bb", b"7"]).expect("row"));
        let mut dead = vec![0u64; 4];
        let mut r2 = Vec::new();
        apply(&mut r2, &mut dead, 5, Write::Value(&row0));
        apply(&mut r2, &mut dead, 6, Write::Delete);
        assert!(!is_live(&dead));
    }

    /// Deltas patched into a record in place (where `patch` takes them)
    /// leave the same row and versions as merging every one, in any
    /// order, with columns before, between and after a variable one.
    #[test]
    fn patching_in_place_agrees_with_merging() {
        use crate::record::Record;
        let s =
            Schema::new(vec![Column::fixed("a", 2), Column::fixed("b", 4), Column::var("c", 8), Column::fixed("d", 1)])
                .expect("schema");
        assert_eq!(
            (s.fixed_place(0), s.fixed_place(1), s.fixed_place(2), s.fixed_place(3)),
            (Some(0..2), Some(2..6), None, None)
        );
        let mut rng = crate::test_rng::Rng(0xde17a);
        let (mut patched, mut merged) = (0, 0);
        for _ in 0..300 {
            let base = s.encode(&[b"aa", b"bbbb", b"cc", b"d"]).expect("row");
            let rec = Record::alloc(b"k", &base, 32, crate::tid::LATEST_BIT);
            // SAFETY: a fresh record, freed at the end of this iteration.
            let r = unsafe { rec.as_ref() };
            let (mut row, mut v, mut v2) = (base.clone(), uniform(4, 1, false), uniform(4, 1, false));
            for _ in 0..6 {
                let tid = 2 + rng.below(50);
                let mut cols: Vec<(u16, Vec<u8>)> = Vec::new();
                for c in 0..4u16 {
                    if rng.below(3) == 0 {
                        let n = [2, 4, 1 + rng.below(8) as usize, 1][c as usize];
                        cols.push((c, vec![b'0' + rng.below(10) as u8; n]));
                    }
                }
                let cols: Vec<(u16, &[u8])> = cols.iter().map(|(c, b)| (*c, &b[..])).collect();
                delta(&cols, |w| {
                    let Write::Delta(d) = w else { unreachable!("a delta") };
                    let old = r.tid.lock();
                    if patch(&s, r, &mut v, tid, d) {
                        patched += 1;
                    } else {
                        let (mut now, mut out) = (Vec::new(), Vec::new());
                        r.copy_value(&mut now);
                        merge(&s, &now, &mut v, tid, w, &mut MergeScratch::default(), &mut out).expect("merge");
                        r.write_value(&out);
                        merged += 1;
                    }
                    r.tid.unlock_to(old);
                    let mut out = Vec::new();
                    merge(&s, &row, &mut v2, tid, w, &mut MergeScratch::default(), &mut out).expect("merge");
                    row = out;
                });
            }
            let mut got = Vec::new();
            r.copy_value(&mut got);
            assert_eq!((got, &v[..]), (row, &v2[..]));
            // SAFETY: never published; freed once.
            unsafe { Record::free(rec) };
        }
        assert!(patched > 100 && merged > 100, "{patched} patched, {merged} merged");
        // A fixed column of the wrong size is left to `merge`, which
        // reports it.
        let base = s.encode(&[b"aa", b"bbbb", b"", b"d"]).expect("row");
        let rec = Record::alloc(b"k", &base, 0, crate::tid::LATEST_BIT);
        // SAFETY: a fresh record, freed below.
        let r = unsafe { rec.as_ref() };
        let mut v = uniform(4, 1, false);
        delta(&[(0, b"x")], |w| {
            let Write::Delta(d) = w else { unreachable!("a delta") };
            let old = r.tid.lock();
            assert!(!patch(&s, r, &mut v, 5, d), "a 1-byte value for a 2-byte column");
            r.tid.unlock_to(old);
        });
        // SAFETY: never published; freed once.
        unsafe { Record::free(rec) };
    }

    #[test]
    fn a_delta_that_does_not_fit_is_an_error() {
        let (mut scratch, mut out) = (MergeScratch::default(), Vec::new());
        let mut v = vec![0u64; 4];
        delta(&[(0, b"toolong")], |w| {
            assert!(merge(&schema(), &[], &mut v, 1, w, &mut scratch, &mut out).is_err());
        });
        delta(&[(9, b"x")], |w| {
            assert!(merge(&schema(), &[], &mut v, 1, w, &mut scratch, &mut out).is_err());
        });
    }
}

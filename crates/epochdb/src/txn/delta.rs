//! Delta logging, the worker side (Gawain §3): which columns of a row an
//! update changed. Found at install, while the record is locked and still
//! holds the version the update replaces (the one the transaction read,
//! or for a blind write the one before it in the serial order), and used
//! when the commit encodes its log record. Only tables with a schema get
//! deltas; a row that does not parse under its schema is logged whole.

use crate::catalog::Schema;
use std::ops::Range;

/// The changed columns of one commit's updates.
#[derive(Debug, Default)]
pub struct Deltas {
    /// Per write-set entry: its span of `cols`, or `None` to log the whole
    /// value.
    spans: Vec<Option<Range<u32>>>,
    /// Changed columns: id and byte range in the new value.
    cols: Vec<(u16, Range<u32>)>,
    old: Vec<u8>,
    old_ranges: Vec<Range<usize>>,
    new_ranges: Vec<Range<usize>>,
}

impl Deltas {
    /// Forgets the last commit's deltas; `writes` entries, none a delta yet.
    pub fn reset(&mut self, writes: usize) {
        self.spans.clear();
        self.spans.resize(writes, None);
        self.cols.clear();
    }

    /// Compares write `i`'s new row with the old one (which `read_old`
    /// copies out) and keeps the columns that differ, unless that is all
    /// of them.
    pub fn record(&mut self, i: usize, schema: &Schema, read_old: impl FnOnce(&mut Vec<u8>), new: &[u8]) {
        read_old(&mut self.old);
        let parsed = schema.column_ranges(&self.old, &mut self.old_ranges).is_ok()
            && schema.column_ranges(new, &mut self.new_ranges).is_ok();
        if !parsed {
            return;
        }
        let start = self.cols.len();
        for (c, (o, n)) in self.old_ranges.iter().zip(&self.new_ranges).enumerate() {
            if self.old[o.clone()] != new[n.clone()] {
                self.cols.push((c as u16, n.start as u32..n.end as u32));
            }
        }
        if self.cols.len() - start == self.new_ranges.len() {
            self.cols.truncate(start); // everything changed: log the row
        } else {
            self.spans[i] = Some(start as u32..self.cols.len() as u32);
        }
    }

    /// Write `i`'s changed columns as `(id, bytes of new)`, if it is a delta.
    pub fn columns<'a>(&'a self, i: usize, new: &'a [u8]) -> Option<impl Iterator<Item = (u16, &'a [u8])> + Clone> {
        let span = self.spans.get(i)?.clone()?;
        let cols = &self.cols[span.start as usize..span.end as usize];
        Some(cols.iter().map(move |(id, r)| (*id, &new[r.start as usize..r.end as usize])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Column;

    #[test]
    fn keeps_only_changed_columns() {
        let s = Schema::new(vec![Column::fixed("a", 2), Column::var("b", 8), Column::fixed("c", 1)]).expect("schema");
        let old = s.encode(&[b"aa", b"bbb", b"c"]).expect("row");
        let mut d = Deltas::default();
        d.reset(3);
        let new = s.encode(&[b"aa", b"bbbbb", b"c"]).expect("row");
        d.record(0, &s, |o| o.clone_from(&old), &new);
        assert_eq!(d.columns(0, &new).expect("delta").collect::<Vec<_>>(), vec![(1, &b"bbbbb"[..])]);
        // All columns changed: the whole row is logged.
        let all = s.encode(&[b"xx", b"y", b"z"]).expect("row");
        d.record(1, &s, |o| o.clone_from(&old), &all);
        assert!(d.columns(1, &all).is_none());
        // Not a row of the schema: logged whole.
        d.record(2, &s, |o| o.clone_from(&old), b"junk");
        assert!(d.columns(2, b"junk").is_none());
    }
}

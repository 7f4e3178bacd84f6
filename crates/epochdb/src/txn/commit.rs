//! The commit protocol (Silo §4.4, Figure 2) and abort.
//!
//! ```text
//! Phase 1: lock every write-set record in address order; fence; e = E
//! Phase 2: every read-set word unchanged, latest, and not locked by
//!          another transaction; every node-set version unchanged
//!          tid = generate(max TID seen, last TID, e)
//! Phase 3: for each write: keep the old version for snapshots if it is
//!          from an earlier snapshot epoch; install data; store tid+unlock
//! ```
//!
//! Reading `E` after the locks and before validation makes it the
//! serialization point and makes epochs agree with the serial order.

use super::sets::WriteKind;
use super::{Txn, PLACEHOLDER_WORD};
use crate::durability::log;
use crate::error::{AbortReason, Error, Result};
use crate::gc::Cleanup;
use crate::index::Retired;
use crate::record::Record;
use crate::sync::{fence, Ordering};
use crate::tid::{is_absent, is_latest, is_locked, Tid, ABSENT_BIT, LATEST_BIT, LOCK_BIT};

/// What a successful commit produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The commit TID; `None` for a read-only transaction, which installs
    /// nothing.
    pub tid: Option<Tid>,
    /// The epoch of the serialization point.
    pub epoch: u64,
    /// The transaction's results may be released (reported as durable)
    /// once this epoch is durable ([`crate::Database::is_durable`]). For a
    /// transaction that wrote, `epoch`. A read-only one needs only what it
    /// observed to survive a crash: the newest epoch of the versions it
    /// read, and `epoch - 1` if it saw a key absent from the index (a
    /// delete is unhooked only once `E` has passed its epoch, so an absence
    /// dates from before the reader's `E`). Anything that overwrote what it
    /// read committed after its validation, in an epoch `>= epoch`, so the
    /// durable prefix at any epoch `>= release_epoch` shows what it saw.
    /// A read-only transaction that read only durable data is thus released
    /// at once instead of after its own epoch's sync.
    pub release_epoch: u64,
}

impl Txn<'_> {
    /// Commits, or aborts with the reason. Either way the transaction ends.
    pub fn commit(mut self) -> Result<CommitInfo> {
        if let Some(reason) = self.doomed {
            self.finish_abort(Some(reason));
            return Err(Error::Aborted(reason));
        }
        // A standby's transactions refuse writes as they are made
        // (`Txn::at_view`), and the standby flag only ever drops, so only a
        // read-only open is left to check here.
        if !self.w.sets.write.is_empty() && self.w.shared.options.read_only {
            self.finish_abort(None);
            return Err(Error::ReadOnly);
        }
        let outcome = if self.w.sets.write.is_empty() { self.commit_read_only() } else { self.commit_writes() };
        match outcome {
            Ok(info) => {
                self.w.stats.commits += 1;
                self.finished = true;
                self.w.sets.clear();
                self.w.leave();
                Ok(info)
            }
            Err(reason) => {
                self.finish_abort(Some(reason));
                Err(Error::Aborted(reason))
            }
        }
    }

    /// Checks the read and node sets. Returns the largest TID read, and
    /// whether the transaction saw an absence: a key with no record in the
    /// index (a node-set entry), or another transaction's uncommitted
    /// placeholder (inserted where no record was).
    fn validate_reads(&self) -> Result<(Tid, bool), AbortReason> {
        let sets = &self.w.sets;
        let (mut max, mut placeholder) = (Tid::ZERO, false);
        for r in &sets.read {
            // SAFETY: read-set records stay live until our epoch ends.
            let now = unsafe { r.rec.as_ref() }.tid.load();
            if now & !LOCK_BIT != r.word || (is_locked(now) && !sets.in_sorted_write_set(r.rec)) {
                return Err(AbortReason::ReadValidation);
            }
            max = max.max(Tid::of_word(r.word));
            placeholder |= r.word == PLACEHOLDER_WORD;
        }
        for n in sets.nodes.iter() {
            // SAFETY: node-set leaves stay allocated until our epoch ends.
            if unsafe { &*n.leaf }.hdr.version.load() != n.version {
                return Err(AbortReason::NodeValidation);
            }
        }
        Ok((max, placeholder || !sets.nodes.is_empty()))
    }

    /// A read-only transaction validates and installs nothing.
    fn commit_read_only(&mut self) -> Result<CommitInfo, AbortReason> {
        if self.snapshot.is_some() {
            let epoch = self.epoch(); // read the view
            return Ok(CommitInfo { tid: None, epoch, release_epoch: epoch });
        }
        let epoch = self.w.shared.epochs.current();
        let (newest, absence) = self.validate_reads()?;
        let newest = newest.epoch();
        let release_epoch = if absence { newest.max(epoch.saturating_sub(1)) } else { newest };
        Ok(CommitInfo { tid: None, epoch, release_epoch })
    }

    fn commit_writes(&mut self) -> Result<CommitInfo, AbortReason> {
        let spins = self.w.shared.options.lock_spins;
        self.w.sets.sort_writes();
        // Phase 1
        let mut max = Tid::ZERO;
        for i in 0..self.w.sets.write.len() {
            let w = &mut self.w.sets.write[i];
            // SAFETY: write-set records stay live until our epoch ends.
            let Some(word) = unsafe { w.rec.as_ref() }.tid.lock_bounded(spins) else {
                self.unlock_first(i);
                return Err(AbortReason::WriteLockConflict);
            };
            w.locked_word = word;
            if !is_latest(word) {
                self.unlock_first(i + 1);
                return Err(AbortReason::ReadValidation);
            }
            max = max.max(Tid::of_word(word));
        }
        fence(Ordering::SeqCst);
        let epoch = self.w.shared.epochs.current();
        // Phase 2
        let max = match self.validate_reads() {
            Ok((m, _)) => m.max(max),
            Err(reason) => {
                self.unlock_first(self.w.sets.write.len());
                return Err(reason);
            }
        };
        let global = self.w.global_tid.then_some(&self.w.shared.global_tid.0);
        let tid = self.w.tidgen.generate(max, epoch, global);
        // Phase 3
        if self.w.shared.options.durability.delta() {
            self.w.delta.reset(self.w.sets.write.len());
        }
        // Read after `epoch` (both SeqCst): see `epoch::Keeping`.
        let keep = self.w.shared.epochs.committers_keep();
        for i in 0..self.w.sets.write.len() {
            self.install(i, tid, epoch, keep);
        }
        self.log(tid, epoch);
        Ok(CommitInfo { tid: Some(tid), epoch, release_epoch: epoch })
    }

    /// Appends the transaction's log record (SiloR §3) while the worker is
    /// still in its epoch, which the logger's durability bound relies on.
    fn log(&self, tid: Tid, epoch: u64) {
        let (Some(slot), Some(durable)) = (&self.w.log, &self.w.shared.store.durable) else { return };
        let (sets, delta) = (&self.w.sets, &self.w.delta);
        slot.append(
            epoch,
            || durable.is_failed(),
            |buf| {
                log::encode_txn(buf, tid, sets.write.len() as u32);
                for (i, w) in sets.write.iter().enumerate() {
                    // SAFETY: write-set records stay live until our epoch
                    // ends (a grown record's old version is retired, not freed).
                    let key = unsafe { w.rec.as_ref() }.key();
                    let value = match w.kind {
                        WriteKind::Put => Some(sets.value(w)),
                        WriteKind::Delete => None,
                    };
                    match value.and_then(|v| delta.columns(i, v)) {
                        Some(columns) => log::encode_delta(buf, w.table, key, columns),
                        None => log::encode_entry(buf, w.table, key, value),
                    }
                }
            },
        );
    }

    /// Releases the locks of the first `n` write-set records, unchanged.
    fn unlock_first(&mut self, n: usize) {
        for w in &self.w.sets.write[..n] {
            // SAFETY: live (see Phase 1); we hold the lock.
            unsafe { w.rec.as_ref() }.tid.unlock_to(w.locked_word);
        }
    }

    /// Phase 3 for write `i`: install the new version and unlock.
    /// `keep`: whether committers keep versions for snapshots now.
    fn install(&mut self, i: usize, tid: Tid, epoch: u64, keep: bool) {
        let w = self.w.sets.write[i];
        let old = w.locked_word;
        let epochs = &self.w.shared.epochs;
        let snap_epoch = epochs.snap(epoch);
        // Silo §4.9: a version from an earlier snapshot epoch may be needed by
        // snapshot readers, so it is kept, linked from the record.
        let old_tid = Tid::of_word(old);
        let crosses = old_tid != Tid::ZERO && epochs.snap(old_tid.epoch()) != snap_epoch;
        let keep_old = crosses && keep;
        // SAFETY: live and locked by us.
        let rec = unsafe { w.rec.as_ref() };
        if crosses && !keep {
            // No snapshot will read below this version: the older ones
            // linked from it go with their garbage lists, not with it.
            rec.set_prev(std::ptr::null_mut());
        }
        let new_word = tid.raw() | LATEST_BIT;
        if matches!(w.kind, WriteKind::Put) && !is_absent(old) && self.w.shared.options.durability.delta() {
            if let Some(schema) = self.w.tables[w.table as usize].schema() {
                let new = self.w.sets.value(&w);
                self.w.delta.record(i, schema, |out| rec.copy_value(out), new);
            }
        }
        let delete = matches!(w.kind, WriteKind::Delete);
        let word = if delete { new_word | ABSENT_BIT } else { new_word };
        let len = if delete { 0 } else { w.value_len as usize };
        if rec.fits(len, keep_old) {
            if keep_old {
                self.w.keep_old_version(rec, old, snap_epoch);
            }
            if !delete {
                rec.write_value(self.w.sets.value(&w));
            }
            rec.tid.unlock_to(word);
        } else {
            // A new record takes the key's place in the index: the value
            // does not fit, or the old version must be linked from a record
            // without a slot for the link.
            let prev = if keep_old { w.rec.as_ptr() } else { rec.prev() };
            let value = if delete { &[][..] } else { self.w.sets.value(&w) };
            let grown = Record::alloc_linked(rec.key(), value, word, prev);
            self.w.swap_in_grown(w.table as usize, w.rec, old, grown, keep_old, snap_epoch);
        }
        if delete {
            if self.w.shared.options.durability.checkpoints() {
                let hint = self.w as *const _ as usize / 64;
                self.w.shared.store.deletions.push(hint, (w.table, rec.key().into(), tid));
            }
            let c = Cleanup { snap_epoch, table: w.table, key: rec.key().into(), word };
            // A snapshot at `se` reads versions of epochs below `se`.
            // The deleted version is from the delete's own snapshot
            // epoch (else `keep_old`), so any snapshot that predates the
            // delete cannot see it, and one that follows sees the key
            // absent; with no older version linked, no snapshot needs
            // the record at all, and it can leave the index once this
            // epoch is over (gc.rs says why not sooner).
            if keep_old || !rec.prev().is_null() || self.w.shared.options.testing.keep_tombstones {
                self.w.garbage.defer_cleanup(c);
            } else {
                self.w.garbage.cleanup_after(epoch, c);
            }
        }
    }

    /// Ends the transaction without installing anything: placeholders this
    /// transaction inserted (and no one else has committed into) leave the
    /// index.
    pub(crate) fn finish_abort(&mut self, reason: Option<AbortReason>) {
        self.finished = true;
        let Self { w, .. } = self;
        for i in 0..w.sets.write.len() {
            let e = w.sets.write[i];
            if !e.inserted {
                continue;
            }
            // SAFETY: our placeholder is live until it is retired below.
            let rec = unsafe { e.rec.as_ref() };
            let word = rec.tid.lock();
            if word != PLACEHOLDER_WORD {
                rec.tid.unlock_to(word); // another transaction committed into it
                continue;
            }
            let removed = w.tables[e.table as usize].tree.remove_if(rec.key(), e.rec, &mut w.retired);
            debug_assert!(removed);
            rec.tid.unlock_to(word & !LATEST_BIT);
            w.retired.push(Retired::Record(e.rec));
        }
        if let Some(r) = reason {
            w.stats.aborts[r.index()] += 1;
        }
        w.sets.clear();
        w.leave();
    }
}

#[cfg(test)]
mod tests {
    use crate::{AbortReason, Database, Error, Options, TableOptions};

    /// A committer that finds a write-set record locked for longer than
    /// `lock_spins` gives up with `WriteLockConflict` instead of waiting.
    #[test]
    fn a_held_record_lock_is_a_write_lock_conflict() {
        let db = Database::open(Options { lock_spins: 100, ..Options::default() }).expect("open");
        let t = db.create_table("t", TableOptions::new()).expect("table");
        let mut w = db.worker().expect("worker");
        w.run(|txn| txn.put(t, b"k", b"v")).expect("load");
        let mut txn = w.begin().expect("begin");
        txn.put(t, b"k", b"new").expect("put");
        // Hold the record's lock as a committer stuck in Phase 3 would.
        let rec = txn.w.tables[t.index() as usize].tree.lookup(b"k").record.expect("present");
        // SAFETY: live: the transaction's epoch protects it.
        let held = unsafe { rec.as_ref() }.tid.lock();
        let r = txn.commit();
        // SAFETY: the record is still in the index, and only records unlinked
        // from an index are ever freed.
        unsafe { rec.as_ref() }.tid.unlock_to(held);
        assert!(matches!(r, Err(Error::Aborted(AbortReason::WriteLockConflict))), "{r:?}");
        assert_eq!(w.stats().aborts_for(AbortReason::WriteLockConflict), 1);
        assert_eq!(w.run(|txn| Ok(txn.get(t, b"k")?.map(<[u8]>::to_vec))).expect("get"), Some(b"v".to_vec()));
    }
}

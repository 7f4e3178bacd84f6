//! Where reads may stand: how fresh a snapshot must be ([`Freshness`]),
//! and a hot standby's read view ([`ReadView`]), which replay moves and
//! every read on a standby reads at.

use crate::durability::log::lock;
use crate::epoch::Epochs;
use crate::error::{Error, Result};
use crate::options::Options;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How fresh a snapshot must be ([`crate::Worker::snapshot_fresh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Freshness {
    /// Whatever the snapshot (or a standby's read view) holds.
    #[default]
    Any,
    /// Every commit of epochs `<= epoch` (for example a write's
    /// `CommitInfo::epoch` on the primary: read your own writes); waits up
    /// to `wait` for it.
    AtLeast {
        /// The epoch the snapshot must include.
        epoch: u64,
        /// How long to wait for it before [`Error::Stale`]. On a primary,
        /// the first snapshot after a quiet stretch may also wait 1-2 s
        /// while writers start keeping old versions (see
        /// [`crate::Worker::snapshot`]); that wait is not counted here.
        wait: Duration,
    },
    /// At most this far behind: on a standby, it shows everything its
    /// primary had released this long ago; on a primary, the snapshot
    /// epoch trails the current one by at most this (in epoch intervals).
    Within(Duration),
}

/// Where snapshot reads on a standby stand.
#[derive(Debug, Default)]
pub(crate) struct ReadView {
    view: AtomicU64,
    /// When the newest release the view covers was heard.
    fresh_at: Mutex<Option<Instant>>,
    /// Reads at the view under way (from `reader_begins` to `reader_ends`).
    readers: AtomicU64,
    /// The view when the last read began.
    last_read: AtomicU64,
    /// Set while replay installs a batch without keeping the versions it
    /// overwrites: a read may not begin then.
    bare: AtomicBool,
}

/// Epochs (about a second) without a read before replay stops keeping
/// overwritten versions for reads: copying every overwritten row costs a
/// backup about a tenth of its CPU, and a read that arrives during a bare
/// batch waits for its end, so reads that keep coming never wait.
const QUIET_EPOCHS: u64 = 25;

/// The largest batch replayed bare: a read that arrives waits for at most
/// this much replay (about 0.1 s on one thread here); a catch-up's batch
/// of many epochs keeps versions, and reads during it go on at the view.
const BARE_MAX_BYTES: usize = 32 << 20;

impl ReadView {
    /// Every epoch `<=` this is replayed and released; 0 before the first.
    pub fn view(&self) -> u64 {
        self.view.load(Ordering::Acquire)
    }

    pub fn staleness(&self) -> Option<Duration> {
        lock(&self.fresh_at).map(|t| t.elapsed())
    }

    /// A read at the view begins: waits out a bare batch (whose
    /// overwritten versions are gone), after which the view covers it.
    pub fn reader_begins(&self) {
        // SeqCst with `begin_batch`: either replay sees this reader, or
        // this reader sees the batch bare and waits.
        self.readers.fetch_add(1, Ordering::SeqCst);
        self.last_read.fetch_max(self.view(), Ordering::Relaxed);
        while self.bare.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    pub fn reader_ends(&self) {
        self.readers.fetch_sub(1, Ordering::Release);
    }

    /// Whether replay must keep, for reads, the versions the next batch
    /// (of `bytes`) overwrites: unless it is at most [`BARE_MAX_BYTES`],
    /// no read is under way and none began in the last [`QUIET_EPOCHS`];
    /// then the batch is bare until `end_batch`.
    pub(crate) fn begin_batch(&self, bytes: usize) -> bool {
        let quiet = self.view().saturating_sub(self.last_read.load(Ordering::Relaxed)) >= QUIET_EPOCHS;
        if bytes > BARE_MAX_BYTES || !quiet || self.readers.load(Ordering::SeqCst) != 0 {
            return true;
        }
        self.bare.store(true, Ordering::SeqCst);
        if self.readers.load(Ordering::SeqCst) != 0 {
            self.bare.store(false, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// After the view moved past a batch.
    pub(crate) fn end_batch(&self) {
        self.bare.store(false, Ordering::SeqCst);
    }

    /// Replay finished every epoch `<= view`; the newest release it
    /// covers was heard at `heard_at`.
    pub(crate) fn publish(&self, view: u64, heard_at: Option<Instant>) {
        self.view.store(view, Ordering::Release);
        self.end_batch();
        if heard_at.is_some() {
            *lock(&self.fresh_at) = heard_at;
        }
    }
}

/// Checks `freshness` before a snapshot begins: on a standby against its
/// read view, else against the snapshot epoch.
pub(crate) fn check_fresh(
    epochs: &Epochs,
    view: Option<&ReadView>,
    options: &Options,
    freshness: Freshness,
    closed: &AtomicBool,
) -> Result<()> {
    // The largest epoch a snapshot begun now shows in full.
    let shows = || view.map_or(epochs.snapshot().saturating_sub(1), ReadView::view);
    match freshness {
        Freshness::Any => Ok(()),
        Freshness::AtLeast { epoch, wait } => {
            let deadline = Instant::now() + wait;
            while shows() < epoch {
                if closed.load(Ordering::Acquire) {
                    return Err(Error::Closed);
                }
                if Instant::now() >= deadline {
                    return Err(Error::Stale { view: shows(), wanted: format!("epoch {epoch} within {wait:?}") });
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        }
        Freshness::Within(bound) => {
            let behind = match view {
                Some(v) => v.staleness(),
                None => {
                    let epochs_behind = epochs.current().saturating_sub(epochs.snapshot()) as u32;
                    Some(options.epoch_interval * epochs_behind)
                }
            };
            match behind {
                Some(b) if b <= bound => Ok(()),
                _ => Err(Error::Stale { view: shows(), wanted: format!("at most {bound:?} behind (is {behind:?})") }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replay drops overwritten versions only in short batches while no
    /// read is under way or recent, and a read that arrives meanwhile
    /// waits for the batch's end.
    #[test]
    fn bare_batches_only_without_reads_and_reads_wait_them_out() {
        let view = ReadView::default();
        assert!(view.begin_batch(1), "no quiet stretch yet: the first epochs keep versions");
        view.view.store(QUIET_EPOCHS, Ordering::Release);
        assert!(!view.begin_batch(1), "quiet, no reads: bare");
        let began = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                view.reader_begins();
                began.store(true, Ordering::Release);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!began.load(Ordering::Acquire), "a read began inside a bare batch");
            view.view.store(QUIET_EPOCHS + 1, Ordering::Release);
            view.end_batch();
        });
        assert!(began.load(Ordering::Acquire));
        assert!(view.begin_batch(1), "a read under way");
        view.end_batch();
        view.reader_ends();
        assert!(view.begin_batch(1), "a read began in the last QUIET_EPOCHS");
        view.view.store(2 * QUIET_EPOCHS + 1, Ordering::Release);
        assert!(view.begin_batch(BARE_MAX_BYTES + 1), "a batch too long to make a read wait for");
        assert!(!view.begin_batch(1), "quiet again");
        view.end_batch();
    }
}

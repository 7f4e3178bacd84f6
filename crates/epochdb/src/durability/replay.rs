//! The one path by which logged entries reach the tables, shared by
//! recovery at open (SiloR §5) and a hot standby's replay (Query Fresh
//! §3.2): a block's entries are decoded and filtered, looked up in
//! windows of [`PREFETCH_BATCH`] so that their cache misses overlap
//! (`Tree::lookup_batch`), and installed one by one with their lookups.
//!
//! What installing does belongs to the caller, because the two keep
//! different things: recovery merges entries in any order by their TIDs
//! and column versions and has no readers (`recovery::install`); a
//! standby also keeps each version its readers may still need
//! (`replication::standby`).

use super::log::{self, Entry};
use crate::index::{Lookup, PREFETCH_BATCH};

/// What a replay does with a block's entries.
pub(crate) trait Install<'a> {
    /// Whether to install `e` now; `false` skips it (or leaves it to the
    /// caller, as a standby's deltas are). An error stops the block.
    fn wanted(&mut self, e: &Entry<'a>) -> Result<bool, String>;
    /// Looks up `window`'s keys into `found`, in their order (with
    /// `Tree::lookup_batch`).
    fn look_up(&mut self, window: &[Entry<'a>], found: &mut Vec<Lookup>) -> Result<(), String>;
    /// Installs `e`, whose key `hint` looked up (perhaps before another
    /// thread changed it).
    fn install(&mut self, e: &Entry<'a>, hint: Lookup) -> Result<(), String>;
}

/// Replays the entries of one block's `payload` through `to`. Nothing is
/// installed after the first failure; a decoding error is reported before
/// it, since it may be its cause.
pub(crate) fn replay_block<'a>(payload: &'a [u8], to: &mut impl Install<'a>) -> Result<(), String> {
    let mut failure = None;
    let mut window: Vec<Entry<'a>> = Vec::with_capacity(PREFETCH_BATCH);
    let mut found = Vec::with_capacity(PREFETCH_BATCH);
    let decoded = log::decode(payload, |e| {
        if failure.is_none() {
            match to.wanted(&e) {
                Ok(true) => window.push(e),
                Ok(false) => {}
                Err(what) => failure = Some(what),
            }
        }
        if window.len() == PREFETCH_BATCH {
            flush(to, &mut window, &mut found, &mut failure);
        }
    });
    flush(to, &mut window, &mut found, &mut failure);
    match (decoded, failure) {
        (Ok(()), None) => Ok(()),
        (Err(what), _) | (Ok(()), Some(what)) => Err(what),
    }
}

/// Looks up `window`'s keys together, then installs its entries in order,
/// unless a failure came first; empties it.
fn flush<'a>(
    to: &mut impl Install<'a>,
    window: &mut Vec<Entry<'a>>,
    found: &mut Vec<Lookup>,
    failure: &mut Option<String>,
) {
    if failure.is_none() && !window.is_empty() {
        let installed = to
            .look_up(window, found)
            .and_then(|()| window.iter().zip(found.iter()).try_for_each(|(e, &hint)| to.install(e, hint)));
        *failure = installed.err();
    }
    window.clear();
}

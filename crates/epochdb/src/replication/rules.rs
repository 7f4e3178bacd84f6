//! The decisions of replication as pure functions of what one side knows.
//!
//! The threads of `primary.rs`, `backup.rs` and `standby.rs` call these
//! (and the loggers `release`, kept below with the lease), and so does
//! `epochdb-control`'s deterministic simulation of the data plane, which
//! drives them under simulated faults and checks what they promise
//! (ARCHITECTURE.md, "Simulation"). No clocks, no I/O, no locks here: the
//! callers bring those.

use super::Safety;
pub use crate::durability::datadir::manifest::Promotion;
/// The loggers decide release by it (below replication, with the lease).
pub use crate::lease::release;

/// The bound `safety` puts on release, from the acknowledged epochs of the
/// backups in sync; `released` is the epoch released so far, `backups`
/// what `VerySafe` waits for. `None`: no bound (`Async`).
pub fn release_limit(safety: Safety, in_sync_acked: &[u64], backups: usize, released: u64) -> Option<u64> {
    let lowest = in_sync_acked.iter().copied().min();
    match safety {
        Safety::Async => None,
        // 2-safe: every in-sync backup; none in sync releases at the local pepoch.
        Safety::Sync => Some(lowest.unwrap_or(u64::MAX)),
        // Nothing more is released while a configured backup is missing.
        Safety::VerySafe if in_sync_acked.len() < backups.max(1) => Some(released),
        Safety::VerySafe => Some(lowest.unwrap_or(0)),
    }
}

/// With a control plane: whether release must stop at the released epoch
/// because a backup of the `committed` in-sync set is not in sync here
/// (it may be appointed next, so it must have everything released), and
/// the set to propose, if it differs from the committed one. `in_sync`:
/// the node ids of the backups in sync here (0: a backup without one).
pub fn membership(in_sync: impl Iterator<Item = u64>, committed: &[u64]) -> (bool, Option<Vec<u64>>) {
    let mut want: Vec<u64> = in_sync.filter(|&n| n != 0).collect();
    want.sort_unstable();
    want.dedup();
    let held = committed.iter().any(|n| want.binary_search(n).is_err());
    (held, (committed != want).then_some(want))
}

/// Whether a backup that acknowledged `acked` may count for release: it
/// has everything released.
pub fn joins(released: u64, acked: u64) -> bool {
    released <= acked
}

/// Whether a backup that persisted every epoch `<= pepoch` resumes from
/// the streams' backlogs (else it catches up from the files): no stream
/// dropped a block above its pepoch (`evicted`: each stream's largest
/// epoch of a block no longer in its backlog).
pub fn resumes_from_backlog(mut evicted: impl Iterator<Item = u64>, pepoch: u64) -> bool {
    evicted.all(|e| e <= pepoch)
}

/// Whether a backlog block holding epochs up to `hi` is sent again to a
/// backup resuming at `pepoch`.
pub fn resend(hi: u64, pepoch: u64) -> bool {
    hi > pepoch
}

/// The epoch a backup may persist and acknowledge, given each stream's
/// last seal (`sealed`) and whether each has been heard on this
/// connection: the smallest seal, once every stream was heard and only if
/// it is above what is persisted (`pepoch`).
pub fn to_persist(sealed: &[u64], heard: &[bool], pepoch: u64) -> Option<u64> {
    let low = sealed.iter().copied().min()?;
    (heard.iter().all(|&h| h) && low > pepoch).then_some(low)
}

/// A hot standby's replay target, and so its next read view: what is both
/// persisted here and released by the primary; while promoting, all that
/// is persisted (its clients had no answer yet, and now it is the primary).
pub fn replay_target(persisted: u64, released: u64, promoting: bool) -> u64 {
    if promoting {
        persisted
    } else {
        persisted.min(released)
    }
}

/// A backup that persisted every epoch `<= pepoch` becomes the primary:
/// the new term's epochs start at `boundary` above everything it holds
/// (`above`: the largest epoch it received, its epoch clock and
/// `pepoch`), so its TIDs exceed them all, and above every void range of
/// its history (`voids`; a promotion it learned of from its primary may
/// have voided epochs it never received), so none of its own epochs is
/// void; the epochs between are void. `id`: a random number naming the
/// term.
pub fn promotion(
    pepoch: u64,
    above: u64,
    voids: &[(u64, u64)],
    boundary: impl Fn(u64) -> u64,
    id: u64,
) -> (Promotion, Option<(u64, u64)>) {
    let above = voids.iter().map(|v| v.1).chain([above, pepoch]).max().unwrap_or(0);
    let first = boundary(above + 1);
    let void = (first - 1 > pepoch).then_some((pepoch + 1, first - 1));
    (Promotion { kept: pepoch, first, id }, void)
}

/// Why a backup whose history is `(term, term_start, term_id)`, which
/// persisted every epoch `<= pepoch` and whose log holds none above
/// `top`, cannot follow a database whose promotions are `promotions`, if
/// it cannot: its history must be a prefix of ours, and if a promotion
/// followed its term, that promotion must have kept every epoch it
/// persisted (a deposed primary usually has epochs the promoted backup
/// never had), and the new term must begin above its log's tail (blocks
/// of its old term it received and never persisted, which it keeps and
/// would later recover as the new term's epochs of the same numbers).
pub fn diverged(
    promotions: &[Promotion],
    term: u32,
    term_start: u64,
    term_id: u64,
    pepoch: u64,
    top: u64,
) -> Option<String> {
    let move_aside =
        "move its directory aside (it may hold the only copy of those commits) and start the backup from an empty one";
    let ours = promotions.len() as u32;
    if term > ours {
        return Some(format!(
            "the backup is in term {term}, this primary only in term {ours}: this primary was deposed"
        ));
    }
    if term > 0 && (promotions[term as usize - 1].first, promotions[term as usize - 1].id) != (term_start, term_id) {
        return Some(format!(
            "the backup's term {term} (id {term_id:016x}) began at epoch {term_start}, not ours: {move_aside}"
        ));
    }
    match promotions.get(term as usize) {
        Some(p) if pepoch > p.kept => Some(format!(
            "the backup has epochs {}..={pepoch} that the promotion to term {} did not keep: {move_aside}",
            p.kept + 1,
            term + 1
        )),
        Some(p) if top >= p.first => Some(format!(
            "the backup's log holds epochs up to {top} of term {term}, and term {} began at epoch {}: they would be \
             taken for that term's; {move_aside}",
            term + 1,
            p.first
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backup may follow a primary whose history extends its own, up
    /// to the epoch the next promotion kept; any other is refused.
    #[test]
    fn a_backup_that_diverged_is_told_why() {
        let p = [Promotion { kept: 40, first: 48, id: 7 }, Promotion { kept: 90, first: 96, id: 9 }];
        assert!(diverged(&p, 2, 96, 9, 500, 500).is_none(), "a backup of this term");
        assert!(diverged(&p, 1, 48, 7, 90, 90).is_none(), "term 1, within what term 2's promotion kept");
        assert!(diverged(&p, 0, 0, 0, 40, 40).is_none(), "term 0, within what term 1's promotion kept");
        assert!(diverged(&p, 1, 48, 7, 91, 91).expect("diverged").contains("epochs 91..=91"));
        assert!(diverged(&p, 0, 0, 0, 41, 41).is_some(), "the deposed primary of term 0");
        assert!(diverged(&p, 1, 50, 7, 60, 60).is_some(), "another term 1");
        assert!(diverged(&p, 2, 96, 8, 60, 60).is_some(), "another term 2 that began at the same epoch");
        assert!(diverged(&p, 1, 48, 7, 90, 95).is_none(), "a tail below where term 2 began");
        assert!(diverged(&p, 1, 48, 7, 90, 96).expect("tail").contains("up to 96"), "a tail into term 2's epochs");
        assert!(diverged(&p, 3, 200, 1, 300, 300).expect("deposed").contains("deposed"));
        assert!(diverged(&[], 0, 0, 0, u64::MAX, u64::MAX).is_none(), "no promotion yet");
    }

    #[test]
    fn release_waits_for_the_in_sync_backups_and_the_lease() {
        assert_eq!(release_limit(Safety::Async, &[3], 1, 9), None);
        assert_eq!(release_limit(Safety::Sync, &[7, 5], 1, 4), Some(5));
        assert_eq!(release_limit(Safety::Sync, &[], 1, 4), Some(u64::MAX), "none in sync: local durability");
        assert_eq!(release_limit(Safety::VerySafe, &[7], 2, 4), Some(4), "a backup missing: frozen");
        assert_eq!(release_limit(Safety::VerySafe, &[7, 6], 2, 4), Some(6));
        assert_eq!(release(4, 9, 6, true), 6);
        assert_eq!(release(4, 9, 6, false), 4, "no lease, no release");
        assert_eq!(release(8, 9, 6, true), 8, "never back");
        assert_eq!(membership([3, 0, 2, 3].into_iter(), &[2, 3]), (false, None));
        assert_eq!(membership([3].into_iter(), &[2, 3]), (true, Some(vec![3])), "2 left: held until committed");
        assert_eq!(membership([2, 3].into_iter(), &[2]), (false, Some(vec![2, 3])), "3 joins: not held");
    }

    #[test]
    fn a_backup_persists_once_every_stream_sealed_and_promotes_above_all_it_holds() {
        assert_eq!(to_persist(&[5, 7], &[true, true], 4), Some(5));
        assert_eq!(to_persist(&[5, 7], &[true, false], 4), None, "a stream not heard yet");
        assert_eq!(to_persist(&[5, 7], &[true, true], 5), None, "nothing new");
        assert_eq!(replay_target(9, 7, false), 7);
        assert_eq!(replay_target(9, 7, true), 9);
        let b = |e: u64| e.div_ceil(8) * 8;
        assert_eq!(promotion(10, 13, &[], b, 5), (Promotion { kept: 10, first: 16, id: 5 }, Some((11, 15))));
        assert_eq!(promotion(15, 15, &[], b, 5), (Promotion { kept: 15, first: 16, id: 5 }, None));
        let (p, _) = promotion(10, 13, &[(3, 4), (17, 18)], b, 5);
        assert_eq!(p.first, 24, "above a void of its history: none of its epochs is void");
        assert!(resumes_from_backlog([3, 5].into_iter(), 5));
        assert!(!resumes_from_backlog([3, 6].into_iter(), 5));
    }
}

//! What a control plane keeps for a primary besides its lease
//! (`durability::lease`): the in-sync set, which a primary must commit
//! before it releases without a backup. A seam, not policy: without it a
//! primary decides alone.

/// The in-sync set as a control plane keeps it (backups by node id).
///
/// A backup in the committed set may be promoted; so a primary must not
/// release without a backup's acknowledgement until a set without that
/// backup is committed. Otherwise the backup, behind, could be elected
/// after the primary dies and lose what was released (Query Fresh leaves
/// this to its "external coordinator"). (Unwind-safe, so `Options` stays
/// usable across `catch_unwind`.)
pub trait Membership: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe {
    /// The committed in-sync set, sorted.
    fn committed(&self) -> Vec<u64>;
    /// Asks for `nodes` (sorted) to become the committed set; returns at
    /// once. Asking again for the same set is harmless.
    fn propose(&self, nodes: Vec<u64>);
    /// Calls `f` whenever the committed set changes.
    fn subscribe(&self, f: Box<dyn Fn() + Send + Sync>);
}

impl std::fmt::Debug for dyn Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership").field("committed", &self.committed()).finish()
    }
}

//! The lease under which a primary releases commits: the fence a control
//! plane (`epochdb-control`, Raft) puts around a primary, so that one that
//! was deposed (partitioned, stalled) tells no client of a commit the new
//! primary may not have. `Durable::release` asks it; the control plane
//! renews it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// A primary's permission to release commits until a deadline.
///
/// The control plane renews it while a quorum confirms this node leads;
/// once it lapses (a partition, a stalled process) the durable epoch stops
/// growing: no client is told of a commit a newly elected primary may not
/// have. Deadlines are on the monotonic clock, which keeps counting while
/// the process is stopped (SIGSTOP), so a process that wakes after its
/// lease lapsed releases nothing.
pub struct Lease {
    /// Nanoseconds after [`origin`] until which releases are allowed.
    until: AtomicU64,
    /// Called after each renewal (the durability code's release, so what
    /// waited on the lease goes out at once).
    renewed: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// A process-wide zero for [`Lease`] deadlines.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn nanos(t: Instant) -> u64 {
    t.saturating_duration_since(origin()).as_nanos().min(u64::MAX as u128) as u64
}

impl Lease {
    /// A lease that has not been granted: nothing is released until
    /// [`Lease::renew`].
    pub fn expired() -> Lease {
        origin();
        Lease { until: AtomicU64::new(0), renewed: Mutex::new(Vec::new()) }
    }

    /// Allows releases until `until` (a deadline never moves back).
    pub fn renew(&self, until: Instant) {
        let prev = self.until.fetch_max(nanos(until), Ordering::AcqRel);
        if prev < nanos(until) {
            for f in self.renewed.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                f();
            }
        }
    }

    /// Ends the lease now (this node learned it no longer leads).
    pub fn revoke(&self) {
        self.until.store(0, Ordering::Release);
    }

    /// Whether releases are allowed now.
    pub fn is_valid(&self) -> bool {
        self.is_valid_at(Instant::now())
    }

    /// Whether releases are allowed at `t` (a simulation's clock).
    pub fn is_valid_at(&self, t: Instant) -> bool {
        nanos(t) < self.until.load(Ordering::Acquire)
    }

    /// Calls `f` after each renewal that extends the lease.
    pub(crate) fn on_renew(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.renewed.lock().unwrap_or_else(|e| e.into_inner()).push(f);
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("valid", &self.is_valid()).finish()
    }
}

/// The released epoch: what is durable here within `limit`, and only
/// while the lease (if any) holds; it never goes back.
pub fn release(released: u64, local: u64, limit: u64, lease_valid: bool) -> u64 {
    if lease_valid {
        released.max(local.min(limit))
    } else {
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_lease_allows_until_its_deadline_and_never_moves_back() {
        let lease = Lease::expired();
        assert!(!lease.is_valid(), "not granted yet");
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        lease.on_renew(Box::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }));
        lease.renew(Instant::now() + Duration::from_secs(60));
        assert!(lease.is_valid());
        lease.renew(Instant::now()); // earlier: ignored
        assert!(lease.is_valid());
        assert_eq!(calls.load(Ordering::Relaxed), 1, "only an extension calls back");
        lease.revoke();
        assert!(!lease.is_valid());
        lease.renew(Instant::now() + Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!lease.is_valid(), "lapsed");
    }
}

//! The order of clients blocked in a pop, across the event loops: a
//! waiting client may take from a key only while no client that blocked on
//! that key before it still waits, so the one that has waited longest is
//! served first, as in Redis. After a write, the loops with waiters look
//! at them at once (see `EventLoop::wake_waiters`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The clients waiting in a blocking pop, each under a ticket that orders
/// them, with its database and the keys it waits on.
#[derive(Default)]
pub struct Waiters {
    inner: Mutex<Inner>,
    /// How many wait (read without the lock after every write).
    count: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Ticket -> (the client's loop, its database, the keys).
    waiting: BTreeMap<u64, (usize, usize, Vec<Vec<u8>>)>,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client of event loop `owner` begins to wait on `keys` of
    /// database `db`: its ticket.
    pub fn enter(&self, owner: usize, db: usize, keys: Vec<Vec<u8>>) -> u64 {
        let mut w = self.lock();
        w.next += 1;
        let ticket = w.next;
        w.waiting.insert(ticket, (owner, db, keys));
        self.count.store(w.waiting.len(), Ordering::Release);
        ticket
    }

    /// The client with `ticket` waits no more.
    pub fn leave(&self, ticket: u64) {
        let mut w = self.lock();
        w.waiting.remove(&ticket);
        self.count.store(w.waiting.len(), Ordering::Release);
    }

    /// Whether any client waits.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// The event loops with a client that waits.
    pub fn loops(&self) -> Vec<usize> {
        let mut loops: Vec<usize> = self.lock().waiting.values().map(|w| w.0).collect();
        loops.sort_unstable();
        loops.dedup();
        loops
    }

    /// Whether the client with `ticket` may take from `key` of `db` now:
    /// no client that began to wait before it waits on that key.
    pub fn may_take(&self, ticket: u64, db: usize, key: &[u8]) -> bool {
        let w = self.lock();
        !w.waiting.range(..ticket).any(|(_, (_, d, keys))| *d == db && keys.iter().any(|k| k == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_to_wait_on_a_key_takes_first() {
        let w = Waiters::default();
        let a = w.enter(0, 0, vec![b"q".to_vec()]);
        let b = w.enter(1, 0, vec![b"q".to_vec(), b"r".to_vec()]);
        assert!(w.any());
        assert_eq!(w.loops(), [0, 1]);
        assert!(w.may_take(a, 0, b"q"));
        assert!(!w.may_take(b, 0, b"q"));
        assert!(w.may_take(b, 0, b"r"), "only the keys an earlier client waits on");
        assert!(w.may_take(b, 1, b"q"), "another database's q");
        w.leave(a);
        assert!(w.may_take(b, 0, b"q"));
        w.leave(b);
        assert!(!w.any());
    }
}

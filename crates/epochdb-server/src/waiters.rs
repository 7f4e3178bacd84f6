//! The order of clients blocked in a pop, across the event loops: a
//! waiting client may take from a key only while no client that blocked on
//! that key before it still waits, so the one that has waited longest is
//! served first, as in Redis.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The clients waiting in a blocking pop, each under a ticket that orders
/// them, with its database and the keys it waits on.
#[derive(Default)]
pub struct Waiters {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    waiting: BTreeMap<u64, (usize, Vec<Vec<u8>>)>,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client begins to wait on `keys` of database `db`: its ticket.
    pub fn enter(&self, db: usize, keys: Vec<Vec<u8>>) -> u64 {
        let mut w = self.lock();
        w.next += 1;
        let ticket = w.next;
        w.waiting.insert(ticket, (db, keys));
        ticket
    }

    /// The client with `ticket` waits no more.
    pub fn leave(&self, ticket: u64) {
        self.lock().waiting.remove(&ticket);
    }

    /// Whether the client with `ticket` may take from `key` of `db` now:
    /// no client that began to wait before it waits on that key.
    pub fn may_take(&self, ticket: u64, db: usize, key: &[u8]) -> bool {
        let w = self.lock();
        !w.waiting.range(..ticket).any(|(_, (d, keys))| *d == db && keys.iter().any(|k| k == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_to_wait_on_a_key_takes_first() {
        let w = Waiters::default();
        let a = w.enter(0, vec![b"q".to_vec()]);
        let b = w.enter(0, vec![b"q".to_vec(), b"r".to_vec()]);
        assert!(w.may_take(a, 0, b"q"));
        assert!(!w.may_take(b, 0, b"q"));
        assert!(w.may_take(b, 0, b"r"), "only the keys an earlier client waits on");
        assert!(w.may_take(b, 1, b"q"), "another database's q");
        w.leave(a);
        assert!(w.may_take(b, 0, b"q"));
    }
}

//! SCAN and HSCAN cursors, shared by every connection.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// SCAN and HSCAN positions, shared by every connection: a Redis cursor
/// is an integer any connection may continue (clients rely on it, across
/// reconnects too), our positions are keys, so each cursor handed out
/// names a stored position. The newest [`OPEN_CURSORS`] are kept. A cursor
/// not known (forgotten, or handed out before a restart) starts the
/// iteration over, which SCAN's guarantees allow: an element may come
/// twice, none present throughout is missed. Cursors count up from the
/// start time in µs times 1024, so a restart hands out none of the old
/// ones.
pub struct Cursors {
    next: AtomicU64,
    open: Mutex<Open>,
}

/// The kept positions by cursor, and the cursors oldest first.
#[derive(Default)]
struct Open {
    by_cursor: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

/// Cursors kept at once; the oldest is forgotten first.
const OPEN_CURSORS: usize = 1 << 14;

impl Default for Cursors {
    fn default() -> Cursors {
        let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
        Cursors { next: AtomicU64::new((micros as u64) << 10), open: Mutex::default() }
    }
}

impl Cursors {
    pub fn save(&self, position: Vec<u8>) -> u64 {
        // Below 2^63, for clients that read a cursor as a signed integer.
        let cursor = (self.next.fetch_add(1, Ordering::Relaxed) & (u64::MAX >> 1)).max(1);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.order.len() == OPEN_CURSORS {
            if let Some(old) = open.order.pop_front() {
                open.by_cursor.remove(&old);
            }
        }
        open.by_cursor.insert(cursor, position);
        open.order.push_back(cursor);
        cursor
    }

    /// Where `cursor` goes on from (empty: the start).
    pub fn position(&self, cursor: u64) -> Vec<u8> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.by_cursor.get(&cursor).cloned().unwrap_or_default()
    }
}

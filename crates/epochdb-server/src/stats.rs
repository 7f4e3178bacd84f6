//! Per-command counters and latency histograms (INFO commandstats and
//! latencystats), and the slow log.
//!
//! Each event loop owns one [`ThreadStats`] and is its only writer
//! (relaxed load and store, no read-modify-write), so counting costs no
//! shared cache line; INFO sums the loops' copies.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Latency buckets: bucket `b` holds durations in `[2^(b-1), 2^b)` µs.
pub const BUCKETS: usize = 40;

#[derive(Debug)]
pub struct CommandStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub failed: AtomicU64,
    pub rejected: AtomicU64,
    pub hist: [AtomicU64; BUCKETS],
}

impl CommandStats {
    fn new() -> CommandStats {
        CommandStats {
            calls: AtomicU64::new(0),
            usec: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            hist: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Adds one by its only writer.
fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// One event loop's counters.
#[derive(Debug)]
pub struct ThreadStats {
    pub commands: Vec<CommandStats>,
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input: AtomicU64,
    pub net_output: AtomicU64,
    pub expired: AtomicU64,
    pub aborts: AtomicU64,
    /// Clients of the loop blocked in WAIT, WAITAOF or SAVE.
    pub blocked: AtomicU64,
}

impl ThreadStats {
    /// Counters for `commands` commands (the command table's length).
    pub fn new(commands: usize) -> ThreadStats {
        ThreadStats {
            commands: (0..commands).map(|_| CommandStats::new()).collect(),
            connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            net_input: AtomicU64::new(0),
            net_output: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            aborts: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
        }
    }

    /// Counts a call of command `i` that took `usec` µs.
    pub fn call(&self, i: usize, usec: u64, failed: bool) {
        let c = &self.commands[i];
        bump(&c.calls, 1);
        bump(&c.usec, usec);
        if failed {
            bump(&c.failed, 1);
        }
        let b = (64 - usec.leading_zeros() as usize).min(BUCKETS - 1);
        bump(&c.hist[b], 1);
    }

    pub fn reject(&self, i: usize) {
        bump(&self.commands[i].rejected, 1);
    }

    pub fn add(a: &AtomicU64, by: u64) {
        bump(a, by);
    }
}

/// Sums of every loop's counters for command `i`: calls, usec, failed,
/// rejected, histogram.
pub fn totals(all: &[std::sync::Arc<ThreadStats>], i: usize) -> (u64, u64, u64, u64, [u64; BUCKETS]) {
    let mut t = (0, 0, 0, 0, [0u64; BUCKETS]);
    for s in all {
        let c = &s.commands[i];
        t.0 += c.calls.load(Ordering::Relaxed);
        t.1 += c.usec.load(Ordering::Relaxed);
        t.2 += c.failed.load(Ordering::Relaxed);
        t.3 += c.rejected.load(Ordering::Relaxed);
        for (h, x) in t.4.iter_mut().zip(&c.hist) {
            *h += x.load(Ordering::Relaxed);
        }
    }
    t
}

/// The `p` percentile (0..=100) of a histogram, in µs: the upper edge of
/// the bucket it falls in.
pub fn percentile(hist: &[u64; BUCKETS], p: f64) -> f64 {
    let n: u64 = hist.iter().sum();
    if n == 0 {
        return 0.0;
    }
    let want = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (b, &c) in hist.iter().enumerate() {
        seen += c;
        if seen >= want {
            return if b == 0 { 1.0 } else { (1u64 << b) as f64 };
        }
    }
    (1u64 << (BUCKETS - 1)) as f64
}

/// One SLOWLOG entry.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    pub id: u64,
    pub time: u64,
    pub usec: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// The newest slow commands.
#[derive(Debug)]
pub struct Slowlog {
    pub entries: VecDeque<SlowEntry>,
    pub max_len: usize,
    next_id: u64,
}

impl Slowlog {
    pub fn new(max_len: usize) -> Slowlog {
        Slowlog { entries: VecDeque::new(), max_len, next_id: 0 }
    }

    pub fn push(&mut self, mut e: SlowEntry) {
        e.id = self.next_id;
        self.next_id += 1;
        self.entries.push_front(e);
        self.entries.truncate(self.max_len);
    }
}

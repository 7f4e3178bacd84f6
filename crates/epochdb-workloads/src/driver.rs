//! Runs a workload on every thread for a while and measures it.
//!
//! Each thread owns a client and a worker and runs transactions back to
//! back. After the warm-up, each transaction's latency, from submission to
//! commit (retries included), goes into the thread's HDR histogram. The
//! main thread samples per-thread commit counters once a second for the
//! time series and the progress bar. No shared counter is written on the
//! transaction path: each counter has its own cache line.

use crate::engine::{Engine, TxnError, TxnResult, Worker};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Settings {
    pub threads: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// If set, each thread stops after committing this many transactions
    /// once measuring, and `duration` does not apply.
    pub transactions: Option<u64>,
    /// Show a progress bar on standard error (if it is a terminal).
    pub progress: bool,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    pub committed: u64,
    /// Aborted attempts (each retried until commit).
    pub aborted: u64,
    /// Transactions that rolled back on purpose (TPC-C's invalid items).
    pub rolled_back: u64,
    pub elapsed_s: f64,
    /// Latency in nanoseconds, per committed transaction.
    pub latency_ns: Histogram<u64>,
    /// Commits in each second of the measured interval.
    pub timeseries: Vec<u64>,
    /// Mean latency (microseconds) of the commits in each second.
    pub latency_series_us: Vec<f64>,
    /// Whether a checkpoint was being written at some point in each second.
    pub checkpoint_series: Vec<bool>,
    /// With durability on: per committed transaction, nanoseconds from
    /// submission until the driver saw its epoch become durable (SiloR §6.2).
    pub durable_latency_ns: Option<Histogram<u64>>,
    /// Log bytes the engine wrote during the measured interval (as its
    /// loggers count them: what they wrote by its end).
    pub log_bytes: u64,
}

impl Measured {
    /// Nothing measured yet.
    pub fn empty() -> Measured {
        Measured {
            committed: 0,
            aborted: 0,
            rolled_back: 0,
            elapsed_s: 0.0,
            latency_ns: histogram(),
            timeseries: Vec::new(),
            latency_series_us: Vec::new(),
            checkpoint_series: Vec::new(),
            durable_latency_ns: None,
            log_bytes: 0,
        }
    }

    pub fn throughput(&self) -> f64 {
        self.committed as f64 / self.elapsed_s.max(1e-9)
    }

    pub fn abort_rate(&self) -> f64 {
        let attempts = self.committed + self.aborted + self.rolled_back;
        if attempts == 0 {
            0.0
        } else {
            self.aborted as f64 / attempts as f64
        }
    }

    /// The one-line human summary both benchmarks print.
    pub fn summary(&self) -> String {
        format!(
            "{:.0} txn/s, {} committed, {} rolled back, abort rate {:.3}%, latency p50 {:.1} us p99 {:.1} us p999 {:.1} us",
            self.throughput(),
            self.committed,
            self.rolled_back,
            self.abort_rate() * 100.0,
            self.latency_us(0.5),
            self.latency_us(0.99),
            self.latency_us(0.999),
        )
    }

    /// Latency at `q` (0..1) in microseconds.
    pub fn latency_us(&self, q: f64) -> f64 {
        self.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }
}

/// A thread's running totals, on their own cache line: commits, and the
/// sum of their latencies.
#[repr(align(128))]
#[derive(Default)]
struct Counter {
    commits: AtomicU64,
    latency_ns: AtomicU64,
}

fn histogram() -> Histogram<u64> {
    // 1 ns .. 100 s at 3 significant digits; the bounds are valid constants.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap_or_else(|_| unreachable!("valid histogram bounds"))
}

/// A source of transactions for one thread: a YCSB client, a TPC-C
/// terminal.
pub trait Terminal {
    /// Runs one transaction to commit (or deliberate rollback); returns how
    /// many attempts aborted first.
    fn run_one(&mut self, worker: &mut dyn Worker) -> TxnResult<u32>;
}

/// Runs the terminals `terminal(0..threads)` on `settings.threads` threads
/// and returns what was measured, and the terminals (with their counts).
/// A thread's commits waiting for their epoch to become durable. Polled
/// after each commit (one load of the engine's pepoch), never blocking.
struct Durability<'e> {
    engine: &'e dyn Engine,
    on: bool,
    pending: std::collections::VecDeque<(u64, Instant)>,
    latency_ns: Histogram<u64>,
}

impl<'e> Durability<'e> {
    fn new(engine: &'e dyn Engine) -> Durability<'e> {
        let on = engine.durable_epoch().is_some();
        Durability { engine, on, pending: Default::default(), latency_ns: histogram() }
    }

    /// A commit of `epoch` that began at `start` and returned at `now`.
    fn committed(&mut self, epoch: u64, start: Instant, now: Instant) {
        if self.on {
            self.pending.push_back((epoch, start));
            self.poll(now);
        }
    }

    fn poll(&mut self, now: Instant) {
        let pepoch = self.engine.durable_epoch().unwrap_or(0);
        while let Some(&(e, start)) = self.pending.front() {
            if e > pepoch {
                break;
            }
            let _ = self.latency_ns.record(now.duration_since(start).as_nanos() as u64);
            self.pending.pop_front();
        }
    }

    /// Waits (up to a few seconds) for the last commits to become durable.
    fn finish(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.pending.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
            self.poll(Instant::now());
        }
    }
}

/// What a driver thread returns: its latency histograms (to commit, to
/// durability), aborts, rollbacks, and its terminal.
type ThreadResult<C> = (Histogram<u64>, Histogram<u64>, u64, u64, C);

/// The run stops early on a fatal error.
pub fn run<C: Terminal + Send>(
    engine: &dyn Engine,
    settings: &Settings,
    terminal: impl Fn(usize) -> C + Sync,
) -> TxnResult<(Measured, Vec<C>)> {
    run_each(&[engine], settings, terminal)
}

/// [`run`], with thread `t` on `engines[t % engines.len()]`: the NVM
/// testbed gives each thread its own partition, a separate engine.
pub fn run_each<C: Terminal + Send>(
    engines: &[&dyn Engine],
    settings: &Settings,
    terminal: impl Fn(usize) -> C + Sync,
) -> TxnResult<(Measured, Vec<C>)> {
    let Some(&first) = engines.first() else {
        return Err(TxnError::Fatal("no engine to run on".into()));
    };
    let log_bytes = || engines.iter().map(|e| e.log_bytes()).sum::<u64>();
    let threads = settings.threads.max(1);
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let commits: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (measuring, stop, commits, terminal) = (&measuring, &stop, &commits, &terminal);
                let engine = engines[t % engines.len()];
                s.spawn(move || -> TxnResult<ThreadResult<C>> {
                    let mut worker = engine.worker()?;
                    let mut c = terminal(t);
                    let mut hist = histogram();
                    let mut durable = Durability::new(engine);
                    let (mut aborted, mut rolled_back, mut committed, mut latency_sum) = (0u64, 0u64, 0u64, 0u64);
                    // One clock read per transaction: its end is the next
                    // one's start (a read costs 2-4% of a YCSB transaction).
                    let mut start = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        let outcome = c.run_one(&mut *worker);
                        let end = Instant::now();
                        let start = std::mem::replace(&mut start, end);
                        if !measuring.load(Ordering::Relaxed) {
                            if let Err(TxnError::Fatal(m)) = outcome {
                                stop.store(true, Ordering::Relaxed);
                                return Err(TxnError::Fatal(m));
                            }
                            continue;
                        }
                        match outcome {
                            Ok(aborts) => {
                                let ns = end.duration_since(start).as_nanos() as u64;
                                let _ = hist.record(ns);
                                durable.committed(worker.last_commit_epoch(), start, end);
                                aborted += aborts as u64;
                                committed += 1;
                                latency_sum += ns;
                                commits[t].latency_ns.store(latency_sum, Ordering::Relaxed);
                                commits[t].commits.store(committed, Ordering::Relaxed);
                                if settings.transactions.is_some_and(|n| committed >= n) {
                                    break;
                                }
                            }
                            Err(TxnError::Rollback) => rolled_back += 1,
                            Err(e) => {
                                stop.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    durable.finish();
                    Ok((hist, durable.latency_ns, aborted, rolled_back, c))
                })
            })
            .collect();

        let sum = || commits.iter().map(|c| c.commits.load(Ordering::Relaxed)).sum::<u64>();
        let latency = || commits.iter().map(|c| c.latency_ns.load(Ordering::Relaxed)).sum::<u64>();
        let checkpointing = || engines.iter().any(|e| e.checkpointing());
        let bar = crate::progress::bar(
            settings.progress,
            settings.duration.as_millis() as u64,
            "[{elapsed:>4}] {bar:30} {percent:>3}% {msg}",
        );
        bar.set_message("warming up");
        let started = Instant::now();
        while started.elapsed() < settings.warmup && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        measuring.store(true, Ordering::Relaxed);
        let begin = Instant::now();
        let log_begin = log_bytes();
        let mut timeseries = Vec::new();
        let mut latency_series_us = Vec::new();
        let mut checkpoint_series = Vec::new();
        let (mut last, mut last_latency, mut checkpoint_now) = (0, 0, false);
        let mut next_tick = begin + Duration::from_secs(1);
        // With a transaction count, no end: until every thread has committed it.
        let end = settings.transactions.is_none().then(|| begin + settings.duration);
        let done = || settings.transactions.is_some_and(|n| sum() >= n * threads as u64);
        while end.is_none_or(|end| Instant::now() < end) && !stop.load(Ordering::Relaxed) && !done() {
            checkpoint_now |= checkpointing();
            let now = Instant::now();
            if now >= next_tick {
                let total = sum();
                let total_latency = latency();
                let n = total - last;
                timeseries.push(n);
                latency_series_us.push(if n == 0 {
                    0.0
                } else {
                    (total_latency - last_latency) as f64 / n as f64 / 1e3
                });
                checkpoint_series.push(checkpoint_now);
                last = total;
                last_latency = total_latency;
                next_tick += Duration::from_secs(1);
                bar.set_position(now.duration_since(begin).as_millis() as u64);
                bar.set_message(format!(
                    "{n} txn/s now, {:.0} mean, {total} committed{}",
                    total as f64 / now.duration_since(begin).as_secs_f64(),
                    if checkpoint_now { ", checkpointing" } else { "" }
                ));
                checkpoint_now = false;
            }
            let poll =
                if settings.transactions.is_some() { Duration::from_millis(1) } else { Duration::from_millis(50) };
            let wake = end.map_or(next_tick, |end| end.min(next_tick));
            std::thread::sleep(wake.saturating_duration_since(Instant::now()).min(poll));
        }
        stop.store(true, Ordering::Relaxed);
        let elapsed_s = begin.elapsed().as_secs_f64();
        let log_bytes = log_bytes().saturating_sub(log_begin);
        bar.finish_and_clear();
        let joined: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(TxnError::Fatal("benchmark thread panicked".into()))))
            .collect();
        (joined, timeseries, latency_series_us, checkpoint_series, elapsed_s, log_bytes)
    });
    let (joined, timeseries, latency_series_us, checkpoint_series, elapsed_s, log_bytes) = results;
    let mut measured = Measured {
        elapsed_s,
        timeseries,
        latency_series_us,
        checkpoint_series,
        durable_latency_ns: first.durable_epoch().map(|_| histogram()),
        log_bytes,
        ..Measured::empty()
    };
    let mut clients = Vec::new();
    for r in joined {
        let (hist, durable, aborted, rolled_back, c) = r?;
        if let Some(d) = &mut measured.durable_latency_ns {
            let _ = d.add(&durable);
        }
        measured.committed += hist.len();
        measured.aborted += aborted;
        measured.rolled_back += rolled_back;
        let _ = measured.latency_ns.add(&hist);
        clients.push(c);
    }
    Ok((measured, clients))
}

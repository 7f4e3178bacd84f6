//! Emulated persistent memory (NVM study §2.2–§2.3): the byte-addressable
//! region behind the allocator interface ([`Region`], [`Heap`]), the file
//! interface the traditional engines use ([`Fs`]), the latency knobs, the
//! wear counters, and crash simulation.
//!
//! One [`Pmem`] belongs to one partition, whose executor is its only user,
//! so nothing here is shared between threads except the counters.

mod alloc;
mod fs;
mod region;

pub use alloc::{Component, Heap, SlotState, MAX_ALLOC, ROOT, ROOT_LEN};
pub use fs::Fs;
pub use region::{Evict, Region, WriteBack, LINE};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Extra latency of NVM over DRAM, per the paper's three settings (§5.2:
/// DRAM 160 ns, 2x 320 ns, 8x 1280 ns per access), charged per simulated
/// read miss and per cache line persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    pub read_miss_ns: u64,
    pub persist_line_ns: u64,
}

impl Latency {
    pub const NAMES: [&'static str; 3] = ["dram", "2x", "8x"];

    pub fn parse(s: &str) -> Option<Latency> {
        let extra = match s {
            "dram" => 0,
            "2x" => 160,
            "8x" => 1120,
            _ => return None,
        };
        Some(Latency { read_miss_ns: extra, persist_line_ns: extra })
    }
}

/// Busy-waits `ns` nanoseconds (the emulator stalls the CPU likewise).
#[inline]
pub(crate) fn spin(ns: u64) {
    if ns > 0 {
        let until = Instant::now() + Duration::from_nanos(ns);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// Wear and traffic counters of one partition's NVM.
#[derive(Debug, Default)]
pub struct Stats {
    /// Cache lines written back through the allocator interface.
    pub persisted_lines: AtomicU64,
    /// Calls of the sync primitive.
    pub persists: AtomicU64,
    /// Bytes written through the file interface.
    pub file_bytes: AtomicU64,
    /// fsync calls through the file interface.
    pub file_syncs: AtomicU64,
}

impl Stats {
    fn persisted(&self, lines: u64) {
        self.persisted_lines.fetch_add(lines, Relaxed);
        self.persists.fetch_add(1, Relaxed);
    }

    /// Bytes that reached NVM: persisted lines plus file writes (the paper's
    /// wear metric, Figs. 11–12).
    pub fn nvm_bytes(&self) -> u64 {
        self.persisted_lines.load(Relaxed) * LINE as u64 + self.file_bytes.load(Relaxed)
    }
}

/// Counts persist and sync events, and in crash simulation stops letting
/// them reach the shadow after a chosen number: "the machine lost power
/// here". The test then lets the engine run on and crashes it later, which
/// loses exactly what came after the cut.
#[derive(Debug)]
pub struct Clock {
    left: AtomicU64,
    events: AtomicU64,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock { left: AtomicU64::new(u64::MAX), events: AtomicU64::new(0) }
    }
}

impl Clock {
    /// One event; false once the cut has passed.
    fn tick(&self) -> bool {
        self.events.fetch_add(1, Relaxed);
        match self.left.load(Relaxed) {
            u64::MAX => true,
            0 => false,
            n => {
                self.left.store(n - 1, Relaxed);
                true
            }
        }
    }

    /// Lets `n` more events through, then no more.
    pub fn cut_after(&self, n: u64) {
        self.left.store(n, Relaxed);
    }

    /// Events so far.
    pub fn events(&self) -> u64 {
        self.events.load(Relaxed)
    }

    fn reset(&self) {
        self.left.store(u64::MAX, Relaxed);
    }
}

/// Where a partition's NVM lives.
#[derive(Debug, Clone)]
pub enum Medium {
    /// Files under this directory: `region` (allocator interface) and the
    /// engine's files (file interface).
    Dir(PathBuf),
    /// In memory with a shadow image, for crash simulation.
    Simulated,
}

/// One partition's persistent memory: both interfaces, the counters and the
/// crash clock.
pub struct Pmem {
    pub heap: Heap,
    pub fs: Fs,
    pub stats: Arc<Stats>,
    pub clock: Arc<Clock>,
    medium: Medium,
    region_len: usize,
    latency: Latency,
}

/// The region file's name in a partition directory.
pub const REGION_FILE: &str = "region";

impl Pmem {
    /// Opens (or creates) the partition's NVM. `fresh`: the region was
    /// just formatted (nothing to recover).
    pub fn open(medium: Medium, region_len: usize, latency: Latency) -> std::io::Result<(Pmem, bool)> {
        let (stats, clock) = (Arc::new(Stats::default()), Arc::new(Clock::default()));
        let (region, fs) = match &medium {
            Medium::Dir(dir) => {
                std::fs::create_dir_all(dir)?;
                let region = Region::map(&dir.join(REGION_FILE), region_len, clock.clone(), stats.clone(), latency)?;
                (region, Fs::dir(dir, clock.clone(), stats.clone(), latency)?)
            }
            Medium::Simulated => (
                Region::heap(region_len, true, clock.clone(), stats.clone(), latency),
                Fs::simulated(clock.clone(), stats.clone(), latency),
            ),
        };
        let (heap, fresh) = Heap::open_or_format(region)?;
        Ok((Pmem { heap, fs, stats, clock, medium, region_len, latency }, fresh))
    }

    pub fn medium(&self) -> &Medium {
        &self.medium
    }

    pub fn latency(&self) -> Latency {
        self.latency
    }

    /// A zeroed volatile region of the same size and latency, for engines
    /// that use the allocator interface as plain memory (InP, CoW, Log):
    /// like the paper's, their memory is NVM too, just not relied on.
    pub fn volatile_heap(&self) -> Heap {
        let region = Region::heap(self.region_len, false, self.clock.clone(), self.stats.clone(), self.latency);
        Heap::format(region)
    }

    /// Simulates a power failure (crash-simulation mode only): the region
    /// and files keep only what was persisted or synced, plus what `evict`
    /// lets survive. The counters carry on.
    pub fn crash(&self, evict: Evict) -> std::io::Result<Pmem> {
        let region = self.heap.region().crash(evict);
        let fs = self.fs.crash();
        let (heap, _) = Heap::open_or_format(region)?;
        Ok(Pmem {
            heap,
            fs,
            stats: self.stats.clone(),
            clock: self.clock.clone(),
            medium: self.medium.clone(),
            region_len: self.region_len,
            latency: self.latency,
        })
    }

    /// The directory of a real medium, for footprint accounting.
    pub fn dir(&self) -> Option<&Path> {
        match &self.medium {
            Medium::Dir(d) => Some(d),
            Medium::Simulated => None,
        }
    }
}

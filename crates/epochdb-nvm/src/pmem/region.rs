//! A region of emulated persistent memory: the bytes behind the allocator
//! interface (NVM study §2.2).
//!
//! A region is either a shared mapping of a file (on a DAX file system
//! where there is one, else any file system such as `/dev/shm`), or, in
//! crash-simulation mode, a heap buffer with a *shadow image*: the bytes
//! that have reached "NVM". [`Region::persist`] writes back the cache lines
//! of a range and fences (the paper's sync primitive); in simulation it
//! also copies those lines into the shadow. [`Region::crash`] then returns
//! a region holding only the shadow, so everything not persisted is lost,
//! and optionally a random subset of the unpersisted lines survives, as
//! hardware may evict any dirty line early.
//!
//! Offsets into a region are the non-volatile pointers: they stay valid
//! across restarts wherever the region is mapped.

use super::{Clock, Latency, Stats};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

/// Cache-line size: the unit of write-back and of the wear counters.
pub const LINE: usize = 64;

/// How [`Region::persist`] writes a line back, chosen once from CPUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteBack {
    /// Weakly ordered; keeps the line cached (the paper's appendix C).
    Clwb,
    /// Weakly ordered; evicts the line.
    Clflushopt,
    /// Strongly ordered; evicts the line (what the paper's emulator used).
    Clflush,
    /// Not x86-64: a fence only. The mapping is still coherent with the
    /// file, so process crashes are covered; power failure is not.
    FenceOnly,
}

impl WriteBack {
    pub fn detect() -> WriteBack {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID leaf 7, sub-leaf 0: EBX bit 23 is CLFLUSHOPT, bit 24 CLWB.
            let ebx = std::arch::x86_64::__cpuid_count(7, 0).ebx;
            if ebx >> 24 & 1 == 1 {
                WriteBack::Clwb
            } else if ebx >> 23 & 1 == 1 {
                WriteBack::Clflushopt
            } else {
                WriteBack::Clflush
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        WriteBack::FenceOnly
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteBack::Clwb => "clwb",
            WriteBack::Clflushopt => "clflushopt",
            WriteBack::Clflush => "clflush",
            WriteBack::FenceOnly => "fence-only",
        }
    }

    /// Writes back the line holding `p`.
    #[inline]
    fn line(self, p: *const u8) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `p` points into the live region (the caller's range was
        // bounds-checked); write-back instructions do not change memory
        // contents, and `detect` chose an instruction this CPU has.
        unsafe {
            match self {
                WriteBack::Clwb => std::arch::asm!("clwb [{}]", in(reg) p, options(nostack, preserves_flags)),
                WriteBack::Clflushopt => {
                    std::arch::asm!("clflushopt [{}]", in(reg) p, options(nostack, preserves_flags))
                }
                WriteBack::Clflush => std::arch::x86_64::_mm_clflush(p),
                WriteBack::FenceOnly => {}
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    #[inline]
    fn fence(self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SFENCE has no operands and is always available on x86-64.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        }
        #[cfg(not(target_arch = "x86_64"))]
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// Which unpersisted lines survive a simulated crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evict {
    /// None: the image is exactly what was persisted.
    Nothing,
    /// Each unpersisted line survives with probability `percent`%.
    Random { seed: u64, percent: u32 },
}

struct Sim {
    shadow: Box<[u8]>,
    /// The working memory when the clock's cut refused its first persist:
    /// the stores that happened before the power failed. Lines evicted
    /// early can only come from these.
    at_cut: Option<Box<[u8]>>,
}

enum Backing {
    /// A shared mapping of a file; `_file` keeps it open.
    Mapped { _file: File },
    /// Zeroed anonymous memory of `mapped` bytes (crash simulation, or
    /// volatile use).
    Heap { mapped: usize },
}

/// See the module documentation.
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    backing: Backing,
    write_back: WriteBack,
    sim: Option<Sim>,
    /// Persists and syncs still to reach the shadow; `u64::MAX`: no limit.
    /// Shared with the file interface so "crash after the n-th persist"
    /// counts both.
    clock: Arc<Clock>,
    stats: Arc<Stats>,
    latency: Latency,
    misses: Option<MissCache>,
    /// A heap region that stands for volatile memory.
    volatile: bool,
}

// SAFETY: the region exclusively owns its mapping or buffer; nothing else
// holds a pointer into it, so moving it to another thread is sound.
unsafe impl Send for Region {}

impl Region {
    /// Maps `path`, creating it with `len` bytes (sparse, zeroed) if it does
    /// not exist. An existing file keeps its length.
    pub fn map(path: &Path, len: usize, clock: Arc<Clock>, stats: Arc<Stats>, latency: Latency) -> io::Result<Region> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let existing = file.metadata()?.len() as usize;
        let len = if existing == 0 {
            file.set_len(len as u64)?;
            len
        } else {
            existing
        };
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of `len` bytes of an open file that
        // is at least `len` long; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Region::new(base, len, Backing::Mapped { _file: file }, None, clock, stats, latency))
    }

    /// A zeroed heap region. With `simulate`, persists feed a shadow image
    /// and [`Region::crash`] is available; without, the region is volatile
    /// memory and persisting is a no-op (not counted as wear).
    pub fn heap(len: usize, simulate: bool, clock: Arc<Clock>, stats: Arc<Stats>, latency: Latency) -> Region {
        let (base, mapped) = zeroed(len);
        let sim = simulate.then(|| Sim { shadow: vec![0u8; len].into_boxed_slice(), at_cut: None });
        Region::new(base, len, Backing::Heap { mapped }, sim, clock, stats, latency)
    }

    fn new(
        base: NonNull<u8>,
        len: usize,
        backing: Backing,
        sim: Option<Sim>,
        clock: Arc<Clock>,
        stats: Arc<Stats>,
        latency: Latency,
    ) -> Region {
        let misses = (latency.read_miss_ns > 0).then(MissCache::new);
        let volatile = sim.is_none() && matches!(backing, Backing::Heap { .. });
        Region { base, len, backing, write_back: WriteBack::detect(), sim, clock, stats, latency, misses, volatile }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn write_back(&self) -> WriteBack {
        self.write_back
    }

    pub fn is_simulated(&self) -> bool {
        self.sim.is_some()
    }

    #[inline]
    fn check(&self, off: u64, len: usize) -> usize {
        let off = off as usize;
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "non-volatile pointer {off}+{len} outside the {}-byte region",
            self.len
        );
        off
    }

    pub fn bytes(&self, off: u64, len: usize) -> &[u8] {
        let off = self.check(off, len);
        // SAFETY: `check` keeps the range inside the live buffer, and `&self`
        // excludes writers for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) }
    }

    pub fn bytes_mut(&mut self, off: u64, len: usize) -> &mut [u8] {
        let off = self.check(off, len);
        // SAFETY: in bounds (`check`), and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) }
    }

    /// Reads an aligned word.
    #[inline]
    pub fn u64(&self, off: u64) -> u64 {
        debug_assert_eq!(off % 8, 0);
        let off = self.check(off, 8);
        // SAFETY: in bounds and 8-aligned (the base is page-aligned).
        unsafe { self.base.as_ptr().add(off).cast::<u64>().read_volatile() }
    }

    /// Writes an aligned word with one store, so a crash sees the old or the
    /// new value, never a mix: the atomic write the NVM engines build on.
    #[inline]
    pub fn set_u64(&mut self, off: u64, v: u64) {
        debug_assert_eq!(off % 8, 0);
        let off = self.check(off, 8);
        // SAFETY: in bounds and 8-aligned; `&mut self` excludes other access.
        unsafe { self.base.as_ptr().add(off).cast::<u64>().write_volatile(v) }
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.bytes_mut(off, data.len()).copy_from_slice(data);
    }

    /// The sync primitive: writes back every line of `[off, off + len)` and
    /// fences. Counts the lines, charges the emulated write latency, and in
    /// simulation copies the lines into the shadow image.
    pub fn persist(&mut self, off: u64, len: usize) {
        if len == 0 || self.volatile {
            return;
        }
        let start = self.check(off, len) / LINE * LINE;
        let end = (off as usize + len).div_ceil(LINE) * LINE;
        let end = end.min(self.len);
        let lines = (end - start) / LINE;
        match &mut self.sim {
            Some(sim) => {
                // SAFETY: the whole buffer is live, and `&mut self` excludes
                // writers while this borrow lasts.
                let working = unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) };
                if self.clock.tick() {
                    sim.shadow[start..end].copy_from_slice(&working[start..end]);
                } else if sim.at_cut.is_none() {
                    sim.at_cut = Some(working.into());
                }
            }
            None => {
                for line in (start..end).step_by(LINE) {
                    // SAFETY: `line` is inside the region.
                    self.write_back.line(unsafe { self.base.as_ptr().add(line) });
                }
                self.write_back.fence();
            }
        }
        self.stats.persisted(lines as u64);
        super::spin(self.latency.persist_line_ns * lines as u64);
    }

    /// Charges the emulated read latency for reading `[off, off + len)`
    /// from NVM: one miss per line that a last-level-cache model says is
    /// not cached. Free when the latency setting is DRAM.
    #[inline]
    pub fn touch(&mut self, off: u64, len: usize) {
        if let Some(cache) = &mut self.misses {
            let first = off / LINE as u64;
            let last = (off + len.max(1) as u64 - 1) / LINE as u64;
            let missed = (first..=last).filter(|&line| cache.miss(line)).count() as u64;
            super::spin(self.latency.read_miss_ns * missed);
        }
    }

    /// Simulates a power failure: a new region holding the shadow image,
    /// plus whatever unpersisted lines `evict` lets survive. The new
    /// region simulates too, with a shadow equal to its contents.
    pub fn crash(&self, evict: Evict) -> Region {
        let sim = self.sim.as_ref().expect("Region::crash needs crash-simulation mode");
        let mut image = sim.shadow.clone();
        if let Evict::Random { seed, percent } = evict {
            let mut rng = seed | 1;
            let working = sim.at_cut.as_deref().unwrap_or(self.bytes(0, self.len));
            for (line, (img, now)) in image.chunks_mut(LINE).zip(working.chunks(LINE)).enumerate() {
                if img != now {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if (rng.wrapping_add(line as u64) % 100) < percent as u64 {
                        img.copy_from_slice(now);
                    }
                }
            }
        }
        self.clock.reset();
        let mut r = Region::heap(self.len, true, self.clock.clone(), self.stats.clone(), self.latency);
        r.bytes_mut(0, self.len).copy_from_slice(&image);
        if let Some(s) = &mut r.sim {
            s.shadow = image;
        }
        r
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match &self.backing {
            // SAFETY: `base`/`len` are exactly what mmap returned; no
            // borrow of the region outlives it.
            Backing::Mapped { .. } => unsafe {
                libc::munmap(self.base.as_ptr().cast(), self.len);
            },
            // SAFETY: `base`/`mapped` are what `zeroed` mapped; no borrow
            // of the region outlives it.
            Backing::Heap { mapped } => unsafe {
                libc::munmap(self.base.as_ptr().cast(), *mapped);
            },
        }
    }
}

/// `len` zeroed bytes (at least a line) from an anonymous mapping, and
/// the length mapped. The kernel's pages are zero until written, so a
/// region costs only what the engine touches; an aligned `alloc_zeroed`
/// would write every page first (seconds for a 2 GiB region).
fn zeroed(len: usize) -> (NonNull<u8>, usize) {
    let mapped = len.max(LINE);
    // SAFETY: a new private anonymous mapping; the kernel picks the
    // address, so no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            mapped,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    match NonNull::new(p.cast::<u8>()).filter(|_| p != libc::MAP_FAILED) {
        Some(p) => (p, mapped),
        None => panic!("mmap of a {mapped}-byte region: {}", io::Error::last_os_error()),
    }
}

/// A direct-mapped model of the last-level cache (32 MiB of 64-byte lines
/// here), to decide which NVM reads would miss and pay the emulated latency.
/// The paper's emulator stalls the CPU on real misses; software cannot see
/// those, so the engines report the lines they read through `touch`.
struct MissCache {
    tags: Box<[u64]>,
}

impl MissCache {
    const LINES: usize = 32 << 20 >> 6;

    fn new() -> MissCache {
        MissCache { tags: vec![u64::MAX; Self::LINES].into_boxed_slice() }
    }

    #[inline]
    fn miss(&mut self, line: u64) -> bool {
        let slot = &mut self.tags[(line as usize).wrapping_mul(0x9E37_79B9) % Self::LINES];
        let missed = *slot != line;
        *slot = line;
        missed
    }
}

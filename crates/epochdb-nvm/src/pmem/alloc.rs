//! The NVM-aware allocator (NVM study §2.3 and §4.1) over a [`Region`].
//!
//! Layout (all little-endian; FORMAT.md, "NVM region"):
//!
//! | offset | contents |
//! | --- | --- |
//! | 0 | magic `EPNVMHP1`, version, region length, chunk count, data start |
//! | [`ROOT`] | the engine's root object, [`ROOT_LEN`] bytes |
//! | 4096 | one class byte per chunk (0: unused, k: size class k - 1) |
//! | data start | 256 KiB chunks; each begins with one state byte per slot |
//!
//! Every slot's state byte says unallocated (0), allocated (1) or
//! persisted (2) in its low two bits, and which component owns it in the
//! upper bits. An engine allocates, writes and persists the contents, and
//! only then marks the slot persisted (§4.1), so a crash in between leaves
//! an allocated slot that the allocator returns to the free pool when it
//! next scans the chunk. A state byte changes with one store, so it is
//! crash-atomic. The transition to "allocated" is not persisted at all: if
//! it is lost, the slot reads as free, which is what recovery would make of
//! it anyway.
//!
//! Free lists are volatile. After a restart, a chunk is scanned (and its
//! allocated-but-unpersisted slots reclaimed) only when its size class needs
//! a slot, so reopening costs nothing per chunk: the paper's near-instant
//! restart for the NVM-aware engines depends on that.

use super::region::Region;
use std::io;
use std::ops::{Deref, DerefMut};

const MAGIC: u64 = u64::from_le_bytes(*b"EPNVMHP1");
const VERSION: u64 = 1;
/// The engine's root object: fixed offset, so it is found after a restart.
pub const ROOT: u64 = 512;
pub const ROOT_LEN: usize = 4096 - ROOT as usize;
const TABLE: u64 = 4096;
const CHUNK: u64 = 256 << 10;
/// Slot sizes (multiples of a cache line, ~1.5x apart, so a 1 KB YCSB tuple
/// wastes little).
const CLASSES: [u32; 20] = [
    64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    65536,
];
/// The largest allocation.
pub const MAX_ALLOC: usize = 65536;

/// Who owns a slot, for the footprint by component (§5.3's Fig. 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Table = 0,
    Index = 1,
    Log = 2,
    Other = 3,
}

impl Component {
    pub const ALL: [Component; 4] = [Component::Table, Component::Index, Component::Log, Component::Other];

    fn from_bits(b: u8) -> Component {
        Component::ALL[(b >> 2 & 3) as usize]
    }
}

/// A slot's durability state (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Unallocated,
    Allocated,
    Persisted,
}

/// See the module documentation.
pub struct Heap {
    region: Region,
    chunks: usize,
    data: u64,
    /// Volatile copy of the class table.
    class: Vec<u8>,
    scanned: Vec<bool>,
    free: Vec<Vec<u64>>,
    /// Per class: chunks not scanned since open.
    unscanned: Vec<Vec<usize>>,
    /// Chunks below this have a class.
    fresh: usize,
}

impl Deref for Heap {
    type Target = Region;
    fn deref(&self) -> &Region {
        &self.region
    }
}

impl DerefMut for Heap {
    fn deref_mut(&mut self) -> &mut Region {
        &mut self.region
    }
}

fn invalid(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

impl Heap {
    /// Opens the heap in `region`, formatting it if it is all zeros. Also
    /// says whether it was formatted.
    pub fn open_or_format(region: Region) -> io::Result<(Heap, bool)> {
        match region.u64(0) {
            0 => Ok((Heap::format(region), true)),
            MAGIC => Heap::open(region).map(|h| (h, false)),
            m => Err(invalid(format!("not an epochdb NVM region (magic {m:#x})"))),
        }
    }

    /// Formats a zeroed region.
    pub fn format(mut region: Region) -> Heap {
        let len = region.len() as u64;
        let chunks = (len.saturating_sub(TABLE) / (CHUNK + 1)) as usize;
        let data = (TABLE + chunks as u64).div_ceil(CHUNK) * CHUNK;
        let chunks = ((len.saturating_sub(data)) / CHUNK) as usize;
        for (i, v) in [MAGIC, VERSION, len, chunks as u64, data].into_iter().enumerate() {
            region.set_u64(8 * i as u64, v);
        }
        region.persist(0, 40);
        Heap::with(region, chunks, data)
    }

    fn open(region: Region) -> io::Result<Heap> {
        let version = region.u64(8);
        if version != VERSION {
            return Err(invalid(format!("NVM region format version {version}; this build reads {VERSION}")));
        }
        let (len, chunks, data) = (region.u64(16), region.u64(24) as usize, region.u64(32));
        if len != region.len() as u64 || data + chunks as u64 * CHUNK > len || data < TABLE + chunks as u64 {
            return Err(invalid(format!("NVM region header is corrupt (length {len}, {chunks} chunks at {data})")));
        }
        let mut heap = Heap::with(region, chunks, data);
        heap.class.copy_from_slice(heap.region.bytes(TABLE, chunks));
        heap.fresh = heap.class.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        for (chunk, &c) in heap.class.iter().enumerate() {
            if c as usize > CLASSES.len() {
                return Err(invalid(format!("NVM chunk {chunk} has size class {c}")));
            }
            if c != 0 {
                heap.unscanned[c as usize - 1].push(chunk);
            }
        }
        Ok(heap)
    }

    fn with(region: Region, chunks: usize, data: u64) -> Heap {
        Heap {
            region,
            chunks,
            data,
            class: vec![0; chunks],
            scanned: vec![false; chunks],
            free: vec![Vec::new(); CLASSES.len()],
            unscanned: vec![Vec::new(); CLASSES.len()],
            fresh: 0,
        }
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    /// (chunk, slot size, slots, first usable slot) of a chunk index.
    fn geometry(&self, chunk: usize) -> (u64, u64, u64, u64) {
        let size = CLASSES[self.class[chunk] as usize - 1] as u64;
        let slots = CHUNK / size;
        (self.data + chunk as u64 * CHUNK, size, slots, slots.div_ceil(size))
    }

    /// The chunk and state-byte offset of slot `off`.
    fn locate(&self, off: u64) -> (usize, u64) {
        assert!(off >= self.data, "non-volatile pointer {off} is below the heap");
        let chunk = ((off - self.data) / CHUNK) as usize;
        assert!(chunk < self.fresh, "non-volatile pointer {off} is in an unused chunk");
        let (base, size, ..) = self.geometry(chunk);
        debug_assert_eq!((off - base) % size, 0, "pointer {off} is not a slot");
        (chunk, base + (off - base) / size)
    }

    /// The usable size of slot `off`.
    pub fn slot_size(&self, off: u64) -> usize {
        self.geometry(self.locate(off).0).1 as usize
    }

    /// A slot of at least `size` bytes (zeroed only if never used), in the
    /// allocated state.
    pub fn alloc(&mut self, size: usize, owner: Component) -> io::Result<u64> {
        let class = CLASSES.iter().position(|&c| c as usize >= size).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("allocation of {size} bytes is over {MAX_ALLOC}"))
        })?;
        let off = loop {
            if let Some(off) = self.free[class].pop() {
                break off;
            }
            if let Some(chunk) = self.unscanned[class].pop() {
                self.scan(chunk);
            } else {
                self.new_chunk(class)?;
            }
        };
        let (_, state) = self.locate(off);
        self.region.bytes_mut(state, 1)[0] = 1 | (owner as u8) << 2;
        Ok(off)
    }

    fn new_chunk(&mut self, class: usize) -> io::Result<()> {
        if self.fresh == self.chunks {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("the {}-byte NVM region is full", self.region.len()),
            ));
        }
        let chunk = self.fresh;
        self.fresh += 1;
        self.class[chunk] = class as u8 + 1;
        self.region.bytes_mut(TABLE + chunk as u64, 1)[0] = class as u8 + 1;
        self.region.persist(TABLE + chunk as u64, 1);
        self.scan(chunk);
        Ok(())
    }

    /// Puts a chunk's free slots on its class's free list, first reclaiming
    /// slots that were allocated but never persisted.
    fn scan(&mut self, chunk: usize) {
        debug_assert!(!self.scanned[chunk]);
        self.scanned[chunk] = true;
        let (base, size, slots, first) = self.geometry(chunk);
        let class = self.class[chunk] as usize - 1;
        for slot in (first..slots).rev() {
            let state = self.region.bytes(base + slot, 1)[0];
            match state & 3 {
                0 => {}
                1 => {
                    self.region.bytes_mut(base + slot, 1)[0] = 0;
                    self.region.persist(base + slot, 1);
                }
                _ => continue,
            }
            self.free[class].push(base + slot * size);
        }
    }

    /// Scans every chunk not scanned yet, so every allocated-but-unpersisted
    /// slot is reclaimed now (tests use it before checking for leaks).
    pub fn reclaim_all(&mut self) {
        for class in 0..CLASSES.len() {
            while let Some(chunk) = self.unscanned[class].pop() {
                self.scan(chunk);
            }
        }
    }

    /// Marks slot `off` persisted: its contents must already be persisted.
    pub fn persisted(&mut self, off: u64) {
        self.set_state(off, 2);
    }

    /// Marks a slot recovery found reachable persisted, whatever a crash left
    /// in its state byte: "allocated", or even "unallocated" when the store
    /// of "allocated" never reached NVM (it is not persisted). Only before
    /// the slot's chunk is scanned, i.e. during recovery.
    pub fn pin(&mut self, off: u64) {
        if self.state(off) != SlotState::Persisted {
            self.persisted(off);
        }
    }

    /// Returns slot `off` to the free pool, durably.
    pub fn free(&mut self, off: u64) {
        let (chunk, _) = self.locate(off);
        self.set_state(off, 0);
        if self.scanned[chunk] {
            self.free[self.class[chunk] as usize - 1].push(off);
        }
    }

    fn set_state(&mut self, off: u64, state: u8) {
        let (_, at) = self.locate(off);
        let b = &mut self.region.bytes_mut(at, 1)[0];
        *b = state | (*b & !3);
        self.region.persist(at, 1);
    }

    pub fn state(&self, off: u64) -> SlotState {
        let (_, at) = self.locate(off);
        match self.region.bytes(at, 1)[0] & 3 {
            0 => SlotState::Unallocated,
            1 => SlotState::Allocated,
            _ => SlotState::Persisted,
        }
    }

    /// Every slot in the persisted state, with its owner.
    pub fn live(&self) -> Vec<(u64, Component)> {
        let mut out = Vec::new();
        for chunk in 0..self.fresh {
            let (base, size, slots, first) = self.geometry(chunk);
            for (i, &s) in self.region.bytes(base, slots as usize).iter().enumerate().skip(first as usize) {
                if s & 3 == 2 {
                    out.push((base + i as u64 * size, Component::from_bits(s)));
                }
            }
        }
        out
    }

    /// Bytes of persisted slots per component (in [`Component::ALL`]
    /// order), and the bytes of chunks in use.
    pub fn footprint(&self) -> ([u64; 4], u64) {
        let mut by = [0u64; 4];
        for (off, c) in self.live() {
            by[c as usize] += self.slot_size(off) as u64;
        }
        (by, self.fresh as u64 * CHUNK)
    }
}

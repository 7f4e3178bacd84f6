//! The install journal of the NVM engines that switch a root word to a new
//! structure (NVM-CoW's group commit, NVM-Log's MemTable merges): the slot
//! states that must change once the switch is made, written before it.
//!
//! The structure's new slots stay "allocated" until the switch, so a crash
//! before it leaves only slots the allocator reclaims by itself. After the
//! switch, the journal is applied: new slots are marked persisted, replaced
//! ones freed. Recovery applies a journal again if the switch word already
//! holds the journal's target, and drops it otherwise.
//!
//! A journal block (FORMAT.md, "NVM install journal") is a slot of `[next
//! block][entry count][target]`, then entries: slot offsets, bit 63 set
//! for "free it", clear for "mark it persisted".

use crate::pmem::{Component, Heap, MAX_ALLOC};
use crate::store::{corrupt, Result};
use crate::tuple;

const BLOCK_HEAD: usize = 24;
const BLOCK_ENTRIES: usize = (MAX_ALLOC - BLOCK_HEAD) / 8;
/// The entry bit meaning "free this slot".
pub const FREE: u64 = 1 << 63;

/// Writes a journal of `entries` for a switch to `target`, linked at
/// `head_at`; returns its blocks.
pub fn write(heap: &mut Heap, head_at: u64, target: u64, entries: &[u64]) -> Result<Vec<u64>> {
    // Blocks are written last first, so each links to a persisted one.
    let (mut next, mut blocks) = (0, Vec::new());
    for chunk in entries.chunks(BLOCK_ENTRIES).rev() {
        let b = heap.alloc(BLOCK_HEAD + 8 * chunk.len(), Component::Log)?;
        heap.set_u64(b, next);
        heap.set_u64(b + 8, chunk.len() as u64);
        heap.set_u64(b + 16, target);
        for (i, &e) in chunk.iter().enumerate() {
            heap.set_u64(b + BLOCK_HEAD as u64 + 8 * i as u64, e);
        }
        heap.persist(b, BLOCK_HEAD + 8 * chunk.len());
        blocks.push(b);
        next = b;
    }
    heap.set_u64(head_at, next);
    heap.persist(head_at, 8);
    Ok(blocks)
}

/// Applies the entries (idempotent: recovery may repeat it).
pub fn apply(heap: &mut Heap, entries: &[u64]) {
    for &e in entries {
        if e & FREE != 0 {
            tuple::free_slot(heap, e & !FREE);
        } else {
            heap.pin(e);
        }
    }
}

/// Unlinks the journal and frees its blocks.
pub fn clear(heap: &mut Heap, head_at: u64, blocks: &[u64]) {
    heap.set_u64(head_at, 0);
    heap.persist(head_at, 8);
    for &b in blocks {
        tuple::free_slot(heap, b);
    }
}

/// Writes the journal, switches `switch_at` to `target`, applies and clears
/// the journal.
pub fn install(heap: &mut Heap, head_at: u64, switch_at: u64, target: u64, entries: &[u64]) -> Result {
    let blocks = write(heap, head_at, target, entries)?;
    heap.set_u64(switch_at, target);
    heap.persist(switch_at, 8);
    apply(heap, entries);
    clear(heap, head_at, &blocks);
    Ok(())
}

/// Recovery: finishes the journal at `head_at` if `switch_at` holds its
/// target, else drops it. Must run before anything is allocated.
pub fn recover(heap: &mut Heap, head_at: u64, switch_at: u64) -> Result {
    let (mut blocks, mut entries, mut target) = (Vec::new(), Vec::new(), 0);
    let mut b = heap.u64(head_at);
    while b != 0 {
        blocks.push(b);
        let n = (heap.u64(b + 8) as usize).min(BLOCK_ENTRIES);
        target = heap.u64(b + 16);
        entries.extend((0..n as u64).map(|i| heap.u64(b + BLOCK_HEAD as u64 + 8 * i)));
        b = heap.u64(b);
    }
    if blocks.is_empty() {
        return Ok(());
    }
    if target == 0 {
        return Err(corrupt("an NVM install journal names no target"));
    }
    if heap.u64(switch_at) == target {
        apply(heap, &entries);
    }
    clear(heap, head_at, &blocks);
    Ok(())
}

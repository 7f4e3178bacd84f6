//! The readers of every on-disk structure — log blocks, checkpoint files,
//! the manifest, the pepoch file — against arbitrary and mutated bytes:
//! each case must end in a result or a typed error, never a panic, a hang
//! or an allocation sized by a corrupt length field.
//!
//! A real data directory (delta logging with incremental checkpoints, a
//! table with a schema, one without, a secondary index, deletes) is the
//! seed. Each case changes one of its files, then inspects it, opens it
//! read-only, and opens it read-only with salvage. Mutations:
//! - random bytes: flips, overwritten runs, truncation, extension, or a
//!   whole file of random bytes;
//! - structure-aware: a block's payload or header fields changed and the
//!   block sealed again with valid checksums, so that the bytes get past
//!   the framing into the decoders (log records, deltas, the manifest)
//!   and into recovery itself; pepoch slots rewritten with valid checksums.
//!
//! `EPOCHDB_FUZZ_CASES` sets the number of cases (CI runs the default).

mod common;

use common::{durable_options, salvaging, temp_dir, Rng};
use epochdb::{Column, Database, Durability, Options, Schema, TableOptions};
use epochdb_testkit::files::{self, block_offsets};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The largest single allocation a case may make: the files are a few
/// hundred KiB, so anything near this was sized by a corrupt field.
const ALLOCATION_LIMIT: usize = 64 << 20;

/// Counts the largest single allocation.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

fn options(dir: &Path) -> Options {
    let mut options = durable_options(dir, Durability::DeltaAndCheckpoint);
    options.checkpoint.interval = Duration::from_millis(15);
    options.log.rotate_epochs = 6;
    options
}

/// Builds the seed directory and returns its files.
fn seed(dir: &Path) -> Vec<PathBuf> {
    let db = Database::open(options(dir)).expect("open");
    let schema = Schema::new(vec![Column::fixed("n", 8), Column::var("s", 40), Column::fixed("c", 4)]).expect("schema");
    let t = db.create_table("rows", TableOptions::new().schema(schema.clone())).expect("table");
    let by_len = TableOptions::new().index("by_len", |_k, v, out| out.push(v.len() as u8));
    let u = db.create_table("plain", by_len).expect("table");
    let mut w = db.worker().expect("worker");
    let started = Instant::now();
    let mut i = 0u64;
    while db.checkpoint_stats().installed < 3 || started.elapsed() < Duration::from_millis(200) {
        let k = (i % 60).to_be_bytes();
        let row =
            schema.encode(&[&i.to_le_bytes(), "x".repeat((i % 7) as usize).as_bytes(), &[1, 2, 3, 4]]).expect("row");
        w.run_durable(|txn| {
            txn.put(t, &k, &row)?;
            match i % 5 {
                0 => txn.delete_indexed(u, &k).map(drop),
                _ => txn.put_indexed(u, &k, &vec![7; (i % 11) as usize]),
            }
        })
        .expect("write");
        i += 1;
        assert!(started.elapsed() < Duration::from_secs(20), "no checkpoints");
    }
    drop(w);
    drop(db);
    let files: Vec<PathBuf> =
        files::files_under(dir).into_iter().filter(|p| p.file_name().is_some_and(|n| n != "LOCK")).collect();
    // A data.log is preallocated with zeros, which every open reads to the
    // end to tell a clean end from damage; trimmed to its blocks (as a
    // sealed log is), the cases run many times faster.
    for f in files.iter().filter(|f| f.ends_with("data.log")) {
        let bytes = std::fs::read(f).expect("read");
        let end = block_offsets(&bytes).last().map_or(4096, |&at| {
            (at + 32 + u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize).next_multiple_of(4096)
        });
        std::fs::write(f, &bytes[..end]).expect("trim");
    }
    files
}

/// Seals the block at `at` again: its header checksum and its checksum.
fn reseal(bytes: &mut [u8], at: usize) {
    let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
    let end = (at + 32 + len).min(bytes.len());
    let h = epochdb::crc32c::checksum(&bytes[at..at + 24]);
    bytes[at + 24..at + 28].copy_from_slice(&h.to_le_bytes());
    let c = epochdb::crc32c::extend(epochdb::crc32c::checksum(&bytes[at..at + 28]), &bytes[at + 32..end]);
    bytes[at + 28..at + 32].copy_from_slice(&c.to_le_bytes());
}

/// One mutation of `bytes` (the contents of `path`).
fn mutate(path: &Path, bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let n = b.len().max(1) as u64;
    let pick = |rng: &mut Rng, max: u64| rng.below(max.max(1)) as usize;
    let is_pepoch = path.file_name().is_some_and(|f| f == "pepoch");
    match rng.below(10) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let i = pick(rng, n);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(8);
                }
            }
        }
        1 => b.truncate(pick(rng, n)),
        2 => {
            let extra = pick(rng, 4096);
            b.extend((0..extra).map(|_| rng.next() as u8));
        }
        3 => {
            let len = pick(rng, 2 * n + 64);
            b = (0..len).map(|_| rng.next() as u8).collect();
        }
        4 if is_pepoch => {
            // A valid slot with any pepoch.
            let slot = if rng.below(2) == 0 { 512 } else { 1024 };
            let p = match rng.below(3) {
                0 => rng.next(),
                1 => rng.below(1 << 33),
                _ => u64::from(u32::MAX) - rng.below(4),
            };
            b.resize(b.len().max(slot + 16), 0);
            b[slot..slot + 8].copy_from_slice(&p.to_le_bytes());
            let crc = epochdb::crc32c::checksum(&p.to_le_bytes());
            b[slot + 8..slot + 12].copy_from_slice(&crc.to_le_bytes());
        }
        _ => {
            // Structure-aware: change a block and seal it again.
            let offsets = block_offsets(&b);
            let Some(&at) = offsets.get(pick(rng, offsets.len() as u64)) else { return b };
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().expect("4")) as usize;
            match rng.below(4) {
                0 if len > 0 => {
                    for _ in 0..1 + rng.below(6) {
                        let i = at + 32 + pick(rng, len as u64);
                        if let Some(x) = b.get_mut(i) {
                            *x = rng.next() as u8;
                        }
                    }
                }
                1 if len > 0 => {
                    // A payload field set to an extreme value (counts, lengths).
                    let i = at + 32 + pick(rng, len.saturating_sub(3) as u64);
                    let v: u32 = [u32::MAX, 0x8000_0000, 0xFFFF, 1 << 24][rng.below(4) as usize];
                    if i + 4 <= b.len() {
                        b[i..i + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
                2 => {
                    // The header's epochs.
                    let lo = rng.below(1 << 34);
                    let hi = lo + rng.below(4);
                    b[at + 8..at + 16].copy_from_slice(&lo.to_le_bytes());
                    b[at + 16..at + 24].copy_from_slice(&hi.to_le_bytes());
                }
                _ => {
                    // A shorter payload length: the rest becomes garbage.
                    let short = pick(rng, len as u64 + 1) as u32;
                    b[at + 4..at + 8].copy_from_slice(&short.to_le_bytes());
                }
            }
            reseal(&mut b, at);
        }
    }
    b
}

#[test]
fn readers_return_typed_errors_for_arbitrary_and_mutated_bytes() {
    let dir = temp_dir("fuzz-readers");
    let files = seed(&dir);
    let originals: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).expect("read")).collect();
    let cases: u64 = std::env::var("EPOCHDB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000);
    let seed: u64 = std::env::var("EPOCHDB_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0xF022);
    // A hang is a failure too: a watchdog ends the process if one case
    // runs for a minute.
    let case_started = AtomicU64::new(0);
    let epoch = Instant::now();
    let current = std::sync::Mutex::new(String::new());
    let mut outcomes = [0u64; 3]; // opened, typed error, (salvage) opened
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let since = epoch.elapsed().as_millis() as u64 - case_started.load(Ordering::Relaxed);
                if since > 60_000 {
                    eprintln!("case hung for a minute: {}", current.lock().map(|c| c.clone()).unwrap_or_default());
                    std::process::abort();
                }
            }
        });
        let mut rng = Rng(seed | 1);
        for case in 0..cases {
            let i = rng.below(files.len() as u64) as usize;
            let mutated = mutate(&files[i], &originals[i], &mut rng);
            let what =
                format!("case {case} (seed {seed:#x}): {} mutated to {} bytes", files[i].display(), mutated.len());
            *current.lock().expect("lock") = what.clone();
            case_started.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
            std::fs::write(&files[i], &mutated).expect("write");
            LARGEST.store(0, Ordering::Relaxed);
            let read_only = Options { read_only: true, ..options(&dir) };
            let outcome = std::panic::catch_unwind(|| {
                let _ = epochdb::inspect(&dir, &[]);
                let plain = Database::open(read_only.clone()).map(drop);
                let salvaged = Database::open(salvaging(read_only.clone())).map(drop);
                (plain.is_ok(), salvaged.is_ok())
            });
            let (plain, salvaged) = outcome.unwrap_or_else(|_| panic!("{what}: a reader panicked"));
            outcomes[usize::from(!plain)] += 1;
            outcomes[2] += u64::from(salvaged);
            let largest = LARGEST.load(Ordering::Relaxed);
            assert!(largest < ALLOCATION_LIMIT, "{what}: an allocation of {largest} bytes");
            std::fs::write(&files[i], &originals[i]).expect("restore");
        }
        done.store(true, Ordering::Relaxed);
    });
    eprintln!(
        "fuzz: {cases} cases over {} files: {} opened, {} refused with a typed error, {} opened with salvage",
        files.len(),
        outcomes[0],
        outcomes[1],
        outcomes[2]
    );
    assert!(outcomes[1] > cases / 4, "most mutations should be refused: {outcomes:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

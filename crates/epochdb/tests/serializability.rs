//! A serializability checker over recorded histories.
//!
//! Threads run random transactions (gets, puts, inserts, deletes, forward
//! and reverse range scans) and record, for every committed transaction,
//! the version (TID) of each key it read and of each key it wrote. Scans
//! record every key of the scanned range: the versions they saw, and
//! "no version" (TID 0) for keys they did not see, which makes predicate
//! reads part of the graph. The checker orders each key's versions by TID
//! (Silo installs increasing TIDs per key), adds write-read, write-write and
//! read-write (anti-dependency) edges, and fails on any cycle.
//!
//! Deleted keys stay in the index as absent records for the whole test
//! (snapshot GC never runs: `snapshot_epochs` is huge, and
//! `testing.keep_tombstones` turns off the early unhook of records no snapshot
//! needs), so "no record" always means "never committed", version 0. The
//! early unhook is covered by `api.rs` (a re-insert after it gets a larger
//! TID than the delete), the bank and crash tests.

mod common;

use common::Rng;
use epochdb::{Database, Error, Options, TableOptions, Tid};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound::{Excluded, Included};
use std::time::Duration;

/// What one committed transaction did. `value` identifies the writer
/// (thread, sequence) so reads can be checked against the version's writer.
#[derive(Debug, Default, Clone)]
struct TxnRecord {
    /// (key, version read, value seen or None for absent)
    reads: Vec<(u32, u64, Option<u64>)>,
    /// Predicate reads: the scanned key range `lo..hi` and what was seen in
    /// it; every other key in the range was read at version 0 (never
    /// committed), unless this transaction wrote it itself.
    scans: Vec<Scan>,
    /// (key, value written or None for delete)
    writes: Vec<(u32, Option<u64>)>,
    tid: u64,
}

#[derive(Debug, Default, Clone)]
struct Scan {
    lo: u32,
    hi: u32,
    seen: BTreeMap<u32, (u64, Option<u64>)>,
}

/// Every read of `t`, with the scans expanded over the keys that have
/// versions (`written`): a scan that did not see such a key read version 0.
fn expanded_reads(t: &TxnRecord, written: &BTreeMap<u32, ()>) -> Vec<(u32, u64, Option<u64>)> {
    let mut reads = t.reads.clone();
    let own: Vec<u32> = t.writes.iter().map(|w| w.0).collect();
    for s in &t.scans {
        for (&k, _) in written.range(s.lo..s.hi) {
            if own.contains(&k) && !s.seen.contains_key(&k) {
                continue; // written by this transaction after the scan
            }
            let (ver, v) = s.seen.get(&k).copied().unwrap_or((0, None));
            reads.push((k, ver, v));
        }
        for (&k, &(ver, v)) in &s.seen {
            if !written.contains_key(&k) {
                reads.push((k, ver, v)); // reports a version nobody wrote
            }
        }
    }
    reads
}

/// Builds the dependency graph of committed transactions and returns a
/// description of a cycle or an inconsistency, if there is one.
fn check(history: &[TxnRecord]) -> Result<(), String> {
    // Per key: version tid -> (writer index, value)
    let mut versions: HashMap<u32, BTreeMap<u64, (usize, Option<u64>)>> = HashMap::new();
    for (i, t) in history.iter().enumerate() {
        for &(k, v) in &t.writes {
            if versions.entry(k).or_default().insert(t.tid, (i, v)).is_some() {
                return Err(format!("two writers of key {k} share TID {}", t.tid));
            }
        }
    }
    let n = history.len();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for vs in versions.values() {
        let writers: Vec<usize> = vs.values().map(|w| w.0).collect();
        for w in writers.windows(2) {
            edges[w[0]].push(w[1]); // write-write
        }
    }
    let written: BTreeMap<u32, ()> = versions.keys().map(|&k| (k, ())).collect();
    for (i, t) in history.iter().enumerate() {
        for (k, version, seen) in expanded_reads(t, &written) {
            let vs = versions.get(&k);
            if version != 0 {
                let Some(&(writer, value)) = vs.and_then(|vs| vs.get(&version)) else {
                    return Err(format!("txn {i} read key {k} at version {version}, which no committed txn wrote"));
                };
                if value != seen {
                    return Err(format!("txn {i} read key {k} = {seen:?}, but version {version} holds {value:?}"));
                }
                if writer != i {
                    edges[writer].push(i); // write-read
                }
            } else if seen.is_some() {
                return Err(format!("txn {i} saw a value for key {k} with no version"));
            }
            // read-write: the next version after the one read
            let next = vs.and_then(|vs| vs.range((Excluded(version), std::ops::Bound::Unbounded)).next());
            if let Some((_, &(writer, _))) = next {
                if writer != i {
                    edges[i].push(writer);
                }
            }
        }
    }
    // Cycle search: iterative DFS with colours.
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        colour[start] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if *next < edges[v].len() {
                let u = edges[v][*next];
                *next += 1;
                match colour[u] {
                    0 => {
                        colour[u] = 1;
                        stack.push((u, 0));
                    }
                    1 => {
                        let cycle: Vec<usize> = stack.iter().map(|s| s.0).skip_while(|&x| x != u).collect();
                        return Err(format!("dependency cycle through txns {cycle:?}"));
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:08}").into_bytes()
}

fn key_id(k: &[u8]) -> u32 {
    std::str::from_utf8(&k[3..]).expect("ascii").parse().expect("number")
}

#[test]
fn random_transactions_are_serializable() {
    const THREADS: u64 = 4;
    const TXNS: u64 = 20_000;
    // A dense space that transactions fight over, and a sparse one where
    // every insert creates a key no one has seen: phantoms for the scans.
    const KEYS: u32 = 48;
    const SPARSE: u32 = 1000;
    const SPARSE_KEYS: u64 = 1 << 16;
    let options = Options {
        epoch_interval: Duration::from_millis(1),
        snapshot_epochs: 1 << 40, // never unhook deleted records
        testing: epochdb::TestingOptions { keep_tombstones: true, ..Default::default() },
        ..Options::default()
    };
    let db = Database::open(options).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut history: Vec<TxnRecord> = Vec::new();
    // The initial load is a transaction like any other.
    let mut w = db.worker().expect("worker");
    let mut load = TxnRecord::default();
    let info = w
        .run_with_info(|txn| {
            for k in (0..KEYS).step_by(2) {
                txn.put(t, &key(k), &0u64.to_le_bytes())?;
            }
            Ok(())
        })
        .expect("load");
    load.tid = info.1.tid.expect("tid").raw();
    load.writes = (0..KEYS).step_by(2).map(|k| (k, Some(0))).collect();
    history.push(load);

    let per_thread: Vec<Vec<TxnRecord>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|th| {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.worker().expect("worker");
                    let mut rng = Rng(0xDEAD_BEEF ^ (th + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut done = Vec::new();
                    let mut seq = 0u64;
                    for _ in 0..TXNS {
                        let mut txn = w.begin().expect("begin");
                        let mut rec = TxnRecord::default();
                        let mut written: HashMap<u32, Option<u64>> = HashMap::new();
                        let mut ok = true;
                        for _ in 0..1 + rng.below(5) {
                            seq += 1;
                            let val = (th << 48) | seq;
                            let sparse = rng.below(3) == 0;
                            let k = if sparse {
                                SPARSE + rng.below(SPARSE_KEYS) as u32
                            } else {
                                rng.below(KEYS as u64) as u32
                            };
                            if rng.below(4) == 0 {
                                std::thread::yield_now(); // let others overlap us
                            }
                            let r: Result<(), Error> = (|| {
                                match rng.below(6) {
                                    0 | 1 => {
                                        let (v, ver) = txn.get_versioned(t, &key(k))?;
                                        if let Some(ver) = ver {
                                            rec.reads.push((k, ver.raw(), v.map(common::u64_of)));
                                        }
                                    }
                                    2 => {
                                        // read-modify-write
                                        let (v, ver) = txn.get_versioned(t, &key(k))?;
                                        if let Some(ver) = ver {
                                            rec.reads.push((k, ver.raw(), v.map(common::u64_of)));
                                        }
                                        txn.put(t, &key(k), &val.to_le_bytes())?;
                                        written.insert(k, Some(val));
                                    }
                                    3 => {
                                        let (v, ver) = txn.get_versioned(t, &key(k))?;
                                        if let Some(ver) = ver {
                                            rec.reads.push((k, ver.raw(), v.map(common::u64_of)));
                                        }
                                        match txn.insert(t, &key(k), &val.to_le_bytes()) {
                                            Ok(()) => {
                                                written.insert(k, Some(val));
                                            }
                                            Err(Error::KeyExists) => {}
                                            Err(e) => return Err(e),
                                        }
                                    }
                                    4 => {
                                        let (v, ver) = txn.get_versioned(t, &key(k))?;
                                        if let Some(ver) = ver {
                                            rec.reads.push((k, ver.raw(), v.map(common::u64_of)));
                                        }
                                        if txn.delete(t, &key(k))? {
                                            written.insert(k, None);
                                        }
                                    }
                                    _ => {
                                        let width = if sparse { 4096 } else { 12 };
                                        let end = if sparse { SPARSE + SPARSE_KEYS as u32 } else { KEYS };
                                        let hi = (k + 1 + rng.below(width) as u32).min(end);
                                        let reverse = rng.below(2) == 0;
                                        let (lo_key, hi_key) = (key(k), key(hi));
                                        let mut seen = BTreeMap::new();
                                        txn.scan_versioned(
                                            t,
                                            (Included(&lo_key[..]), Excluded(&hi_key[..])),
                                            reverse,
                                            usize::MAX,
                                            |kb, v, ver| {
                                                if let Some(ver) = ver {
                                                    seen.insert(key_id(kb), (ver.raw(), v.map(common::u64_of)));
                                                }
                                                true
                                            },
                                        )?;
                                        rec.scans.push(Scan { lo: k, hi, seen });
                                    }
                                }
                                Ok(())
                            })();
                            if r.is_err() {
                                ok = false;
                                break;
                            }
                        }
                        if !ok {
                            drop(txn);
                            continue;
                        }
                        if let Ok(info) = txn.commit() {
                            rec.writes = written.into_iter().collect();
                            rec.tid = info.tid.map(Tid::raw).unwrap_or(0);
                            if rec.writes.is_empty() {
                                rec.tid = 0;
                            }
                            done.push(rec);
                        }
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let committed: usize = per_thread.iter().map(Vec::len).sum();
    for txns in per_thread {
        history.extend(txns);
    }
    assert!(committed as u64 > THREADS * TXNS / 2, "too few commits: {committed}");
    check(&history).expect("the history must be serializable");
}

/// The checker itself must catch what it is for.
#[test]
fn checker_catches_write_skew_and_phantoms() {
    // Write skew: both read x and y at the initial version, each writes one.
    let init = TxnRecord { writes: vec![(0, Some(0)), (1, Some(0))], tid: 10, ..Default::default() };
    let reads = vec![(0, 10, Some(0)), (1, 10, Some(0))];
    let t1 = TxnRecord { reads: reads.clone(), writes: vec![(0, Some(1))], tid: 20, ..Default::default() };
    let t2 = TxnRecord { reads, writes: vec![(1, Some(2))], tid: 21, ..Default::default() };
    let err = check(&[init.clone(), t1.clone(), t2]).expect_err("write skew is not serializable");
    assert!(err.contains("cycle"), "{err}");
    // The same with only one of them is fine.
    check(&[init.clone(), t1]).expect("serializable");
    // A phantom: each scans keys 5..7 and sees none, then inserts into it.
    let scan = Scan { lo: 5, hi: 7, seen: BTreeMap::new() };
    let p1 = TxnRecord { scans: vec![scan.clone()], writes: vec![(5, Some(1))], tid: 30, ..Default::default() };
    let p2 = TxnRecord { scans: vec![scan], writes: vec![(6, Some(2))], tid: 31, ..Default::default() };
    assert!(check(&[p1, p2]).is_err());
    // Reading a value its version did not write is caught too.
    let bad = TxnRecord { reads: vec![(0, 10, Some(99))], ..Default::default() };
    assert!(check(&[init, bad]).is_err());
}

//! Index tests: a model comparison against `BTreeMap` and a concurrent
//! stress test. Unlinked records and nodes are kept until the end of each
//! test (no epochs here), so every pointer stays valid.

use super::*;
use crate::tid::LATEST_BIT;
use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use crate::test_rng::Rng;

/// Keys that share long prefixes, vary in length, and include zero bytes,
/// so that comparisons past the 8-byte prefix matter.
fn key_of(rng: &mut Rng, space: u64) -> Vec<u8> {
    let n = rng.below(space);
    match n % 4 {
        0 => format!("user{n:08}").into_bytes(),
        1 => n.to_be_bytes().to_vec(),
        2 => {
            let mut k = b"shared-prefix-0123456789/".to_vec();
            k.extend_from_slice(&n.to_be_bytes());
            k
        }
        _ => vec![0u8; (n % 300) as usize],
    }
}

fn rec(key: &[u8]) -> NonNull<Record> {
    Record::alloc(key, key, 0, LATEST_BIT)
}

fn free_retired(retired: Vec<Retired>, records: Vec<NonNull<Record>>) {
    for r in retired {
        // SAFETY: single owner, no readers left.
        unsafe { r.free() }
    }
    for r in records {
        // SAFETY: unlinked from the tree, freed once.
        unsafe { Record::free(r) };
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Included(k) => Included(&k[..]),
        Excluded(k) => Excluded(&k[..]),
        Unbounded => Unbounded,
    }
}

fn collect(tree: &Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev: bool, limit: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    tree.scan(
        lo,
        hi,
        rev,
        |_, _| {},
        |k, _| {
            out.push(k.to_vec());
            out.len() < limit
        },
    );
    out
}

fn model_range(m: &BTreeMap<Vec<u8>, ()>, lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev: bool, limit: usize) -> Vec<Vec<u8>> {
    let own = |b: Bound<&[u8]>| match b {
        Included(k) => Included(k.to_vec()),
        Excluded(k) => Excluded(k.to_vec()),
        Unbounded => Unbounded,
    };
    let (lo, hi) = (own(lo), own(hi));
    if matches!((&lo, &hi), (Included(a) | Excluded(a), Included(b) | Excluded(b)) if a > b) {
        return Vec::new();
    }
    if let (Excluded(a), Excluded(b)) = (&lo, &hi) {
        if a == b {
            return Vec::new();
        }
    }
    let it = m.range((lo, hi)).map(|(k, _)| k.clone());
    if rev {
        it.rev().take(limit).collect()
    } else {
        it.take(limit).collect()
    }
}

#[test]
fn matches_a_btreemap_model() {
    let tree = Tree::new();
    let mut model: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
    exercise(&tree, &mut model, &mut Rng(0x1234_5678_9abc_def1), 40_000, 3000);
}

/// Random inserts (half of them after a lookup that missed), lookups
/// (single and batched), removes and scans of keys from `key_of(space)`,
/// each checked against `model`; then a full scan.
fn exercise(tree: &Tree, model: &mut BTreeMap<Vec<u8>, ()>, rng: &mut Rng, steps: usize, space: u64) {
    let (mut retired, mut unlinked) = (Vec::new(), Vec::new());
    for step in 0..steps {
        let key = key_of(rng, space);
        match rng.below(10) {
            0..=4 => {
                let r = rec(&key);
                // Half the inserts go where a lookup that missed left off.
                let miss = Some(tree.lookup(&key)).filter(|l| l.record.is_none() && step % 2 == 0);
                let done = miss.and_then(|l| tree.insert_after_miss(&l, &key, r));
                match done.unwrap_or_else(|| tree.insert_if_absent(&key, r)) {
                    Insert::Existing(_) => {
                        assert!(model.contains_key(&key));
                        // SAFETY: never published.
                        unsafe { Record::free(r) };
                    }
                    Insert::Inserted { .. } => assert!(model.insert(key, ()).is_none()),
                }
            }
            5..=7 => {
                let found = tree.lookup(&key).record;
                assert_eq!(found.is_some(), model.contains_key(&key), "step {step}");
                let other = key_of(rng, space);
                let mut batch = Vec::new();
                Tree::lookup_batch([(tree, &key[..]), (tree, &other[..])], &mut batch);
                assert_eq!(batch.iter().map(|l| l.record).collect::<Vec<_>>(), [found, tree.lookup(&other).record]);
                if let Some(r) = found {
                    assert!(tree.remove_if(&key, r, &mut retired));
                    assert!(!tree.remove_if(&key, r, &mut retired));
                    model.remove(&key);
                    unlinked.push(r);
                }
            }
            _ => {
                let a = key_of(rng, space);
                let b = key_of(rng, space);
                let (ka, kb) = (rng.below(3) as u8, rng.below(3) as u8);
                let mk = |kind: u8, k: &Vec<u8>| -> Bound<Vec<u8>> {
                    match kind {
                        0 => Included(k.clone()),
                        1 => Excluded(k.clone()),
                        _ => Unbounded,
                    }
                };
                let (lo, hi) = (mk(ka, &a), mk(kb, &b));
                let rev = rng.below(2) == 0;
                let limit = [1, 5, 40, usize::MAX][rng.below(4) as usize];
                let got = collect(tree, as_ref(&lo), as_ref(&hi), rev, limit);
                let want = model_range(model, as_ref(&lo), as_ref(&hi), rev, limit);
                assert_eq!(got, want, "step {step}: scan {lo:?}..{hi:?} rev={rev} limit={limit}");
            }
        }
    }
    // Everything left is found, in order.
    let all = collect(tree, Unbounded, Unbounded, false, usize::MAX);
    assert_eq!(all, model.keys().cloned().collect::<Vec<_>>());
    free_retired(retired, unlinked);
}

/// Runs cut from `keys` (sorted, unique) at random lengths, in reverse
/// order.
fn runs_of(keys: &[Vec<u8>], rng: &mut Rng, longest: u64) -> Vec<SortedRun> {
    let mut runs = Vec::new();
    let mut rest = keys;
    while !rest.is_empty() {
        let (run, tail) = rest.split_at((1 + rng.below(longest) as usize).min(rest.len()));
        let mut r = SortedRun::default();
        for k in run {
            assert!(r.push(rec(k)).is_ok(), "ascending keys");
        }
        runs.push(r);
        rest = tail;
    }
    runs.reverse();
    runs
}

/// Trees loaded from runs, of sizes around every leaf and inner-node
/// boundary, hold exactly their keys in well-formed nodes, and then take
/// inserts, removes and scans like any other tree.
#[test]
fn loaded_trees_match_a_btreemap_model() {
    // The loader fills inner nodes to INNER_WIDTH children (one separator
    // short of full): sizes at one and two inner levels' worth of leaves.
    let (leaf, fan) = (LEAF_WIDTH, node::INNER_WIDTH);
    for (i, n) in [0usize, 1, leaf - 1, leaf, leaf + 1, leaf * fan, leaf * fan + 1, leaf * fan * fan + 7, 20_000]
        .into_iter()
        .enumerate()
    {
        let mut rng = Rng(0x5eed_0000 + i as u64);
        let space = (n as u64 * 3).max(10);
        let keys: std::collections::BTreeSet<Vec<u8>> = (0..n).map(|_| key_of(&mut rng, space)).collect();
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        let longest = [1, 7, 30, 5000][i % 4];
        let runs = runs_of(&keys, &mut rng, longest);
        let nruns = runs.len();
        let tree = Tree::new();
        let mut retired = Vec::new();
        let loaded = tree.load(runs, &mut retired).unwrap_or_else(|_| panic!("{n} keys: disjoint runs refused"));
        assert_eq!(loaded, keys.len() as u64);
        assert_eq!(collect(&tree, Unbounded, Unbounded, false, usize::MAX), keys, "{n} keys");
        assert_eq!(collect(&tree, Unbounded, Unbounded, true, usize::MAX).len(), keys.len());
        for k in &keys {
            // SAFETY: in the tree, which frees nothing during the test.
            assert_eq!(tree.lookup(k).record.map(|r| unsafe { r.as_ref() }.key().to_vec()), Some(k.clone()));
        }
        let (leaves, _) = tree.node_counts();
        let most = (keys.len().div_ceil(LEAF_WIDTH) + nruns).max(1); // an empty tree keeps its leaf
        assert!(leaves <= most, "{n} keys in {nruns} runs: {leaves} leaves");
        let mut model: BTreeMap<Vec<u8>, ()> = keys.into_iter().map(|k| (k, ())).collect();
        exercise(&tree, &mut model, &mut rng, 5_000, space);
        free_retired(retired, Vec::new());
    }
}

/// Overlapping runs, and any runs for a tree that is not empty, are given
/// back untouched; a key not above the run's last is refused.
#[test]
fn loads_only_disjoint_runs_into_an_empty_tree() {
    let run = |keys: &[&[u8]]| {
        let mut r = SortedRun::default();
        for k in keys {
            assert!(r.push(rec(k)).is_ok());
        }
        r
    };
    let mut r = run(&[b"b", b"d"]);
    let back = r.push(rec(b"c")).expect_err("below the last key");
    // SAFETY: given back, never published.
    unsafe { Record::free(back) };
    let tree = Tree::new();
    let mut retired = Vec::new();
    let back = tree.load(vec![r, run(&[b"a", b"b"])], &mut retired).expect_err("overlapping");
    assert_eq!(back.iter().map(SortedRun::len).sum::<u64>(), 4);
    drop(back); // frees their records
    assert!(matches!(tree.insert_if_absent(b"x", rec(b"x")), Insert::Inserted { .. }));
    assert!(tree.load(vec![run(&[b"a"])], &mut retired).is_err(), "a tree with a key");
    assert_eq!(collect(&tree, Unbounded, Unbounded, false, usize::MAX), [b"x".to_vec()]);
    assert!(retired.is_empty());
}

#[test]
fn versions_change_exactly_when_keys_come_and_go() {
    let tree = Tree::new();
    let before = tree.lookup(b"k");
    assert!(before.record.is_none());
    let r = rec(b"k");
    let Insert::Inserted { leaf, old_version, new_version, .. } = tree.insert_if_absent(b"k", r) else {
        panic!("fresh key")
    };
    assert_eq!((leaf, old_version), (before.leaf, before.version));
    assert_ne!(old_version, new_version);
    // SAFETY: the leaf is live (no removals).
    assert_eq!(unsafe { &*leaf }.hdr.version.load(), new_version);
    // Replacing the record pointer leaves the version alone.
    let r2 = rec(b"k");
    assert!(tree.replace(b"k", r, r2));
    // SAFETY: as above.
    assert_eq!(unsafe { &*leaf }.hdr.version.load(), new_version);
    let mut retired = Vec::new();
    assert!(tree.remove_if(b"k", r2, &mut retired));
    // SAFETY: the root leaf is never removed.
    assert_ne!(unsafe { &*leaf }.hdr.version.load(), new_version);
    free_retired(retired, vec![r, r2]);
}

/// An insert after a miss takes the leaf the lookup reached only while
/// that leaf is unchanged and has room.
#[test]
fn inserts_after_a_miss_only_into_an_unchanged_leaf_with_room() {
    let tree = Tree::new(); // owns every record inserted (frees them on drop)
    let put = |key: &[u8]| assert!(matches!(tree.insert_if_absent(key, rec(key)), Insert::Inserted { .. }));
    put(b"a");
    let miss = tree.lookup(b"c");
    put(b"b"); // the leaf changes under the miss
    let r = rec(b"c");
    assert!(tree.insert_after_miss(&miss, b"c", r).is_none());
    let miss = tree.lookup(b"c");
    assert!(matches!(tree.insert_after_miss(&miss, b"c", r), Some(Insert::Inserted { .. })));
    assert_eq!(tree.lookup(b"c").record, Some(r));
    for i in 3..LEAF_WIDTH as u8 {
        put(&[b'c', i]);
    }
    let miss = tree.lookup(b"z"); // a full leaf: the insert must split it
    let z = rec(b"z");
    assert!(tree.insert_after_miss(&miss, b"z", z).is_none());
    assert!(tree.lookup(b"z").record.is_none());
    assert!(matches!(tree.insert_if_absent(b"z", z), Insert::Inserted { .. }));
    assert_eq!(collect(&tree, Unbounded, Unbounded, false, usize::MAX).len(), LEAF_WIDTH + 1);
}

/// A caller whose own insert changed the leaf since its lookup may pass the
/// version that insert left; the key's place is searched again.
#[test]
fn inserts_after_a_miss_at_the_version_of_an_own_insert() {
    let tree = Tree::new(); // owns every record inserted (frees them on drop)
    let mut misses = Vec::new();
    Tree::lookup_batch([(&tree, &b"b"[..]), (&tree, b"a"), (&tree, b"a")], &mut misses);
    let (b, a) = (rec(b"b"), rec(b"a"));
    let Some(Insert::Inserted { new_version, .. }) = tree.insert_after_miss(&misses[0], b"b", b) else {
        panic!("an unchanged leaf with room")
    };
    assert!(tree.insert_after_miss(&misses[1], b"a", a).is_none(), "the leaf changed since the lookup");
    let mut miss = misses[1];
    miss.version = new_version;
    let Some(Insert::Inserted { new_version, .. }) = tree.insert_after_miss(&miss, b"a", a) else {
        panic!("the leaf is as the own insert left it")
    };
    // The same key again: it is there now.
    let (mut again, dup) = (misses[2], rec(b"a"));
    again.version = new_version;
    assert!(matches!(tree.insert_after_miss(&again, b"a", dup), Some(Insert::Existing(r)) if r == a));
    // SAFETY: never published.
    unsafe { Record::free(dup) };
    assert_eq!(collect(&tree, Unbounded, Unbounded, false, usize::MAX), [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn emptied_leaves_are_cut_out() {
    let tree = Tree::new();
    let (mut retired, mut unlinked) = (Vec::new(), Vec::new());
    let key = |i: u32| format!("q{i:09}").into_bytes();
    // A queue: insert at the tail, delete at the head, as TPC-C's NEW-ORDER.
    let mut recs = std::collections::VecDeque::new();
    for i in 0..200_000u32 {
        let k = key(i);
        let r = rec(&k);
        assert!(matches!(tree.insert_if_absent(&k, r), Insert::Inserted { .. }));
        recs.push_back((k, r));
        if recs.len() > 1000 {
            let (k, r) = recs.pop_front().expect("non-empty");
            assert!(tree.remove_if(&k, r, &mut retired));
            unlinked.push(r);
        }
    }
    let (leaves, inners) = tree.node_counts();
    // 1000 live keys need ~70-140 leaves; without removal there would be
    // over 13,000.
    assert!(leaves < 400, "{leaves} leaves for 1000 keys");
    assert!(inners < 100, "{inners} inner nodes");
    free_retired(retired, unlinked);
}

/// Keys appended at the end of a range (one queue, or ten interleaved like
/// TPC-C's districts) leave full nodes behind, not half-full ones.
#[test]
fn ascending_inserts_fill_their_nodes() {
    for queues in [1u32, 10] {
        let tree = Tree::new();
        let n = 14 * 2000;
        for i in 0..n {
            let k = format!("{:02}-{:09}", i % queues, i / queues).into_bytes();
            assert!(matches!(tree.insert_if_absent(&k, rec(&k)), Insert::Inserted { .. }));
        }
        let (leaves, inners) = tree.node_counts();
        let full = (n as usize).div_ceil(LEAF_WIDTH);
        // Halving splits would leave about twice as many of each.
        assert!(leaves <= full + 2 * queues as usize, "{queues} queues: {leaves} leaves for {full} full ones");
        // Full inner nodes have INNER_WIDTH + 1 children, halved ones about
        // half that: the bound lies between.
        let most = leaves / (node::INNER_WIDTH * 2 / 3) + 10;
        assert!(inners <= most, "{queues} queues: {inners} inner nodes over {leaves} leaves");
    }
}

#[test]
fn concurrent_inserts_removes_lookups_and_scans() {
    const THREADS: u64 = 4;
    const OPS: u64 = 60_000;
    let tree = Tree::new();
    type ThreadResult = (Vec<Retired>, Vec<Addr>, BTreeMap<Vec<u8>, Addr>);
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let tree = &tree;
                s.spawn(move || {
                    // Each thread owns keys with its own last byte; it
                    // checks its model while others change the tree.
                    let mut rng = Rng(0x9E37_79B9 + t * 7919);
                    let mut mine: BTreeMap<Vec<u8>, Addr> = BTreeMap::new();
                    let (mut retired, mut unlinked) = (Vec::new(), Vec::new());
                    for _ in 0..OPS {
                        let mut k = key_of(&mut rng, 4000);
                        k.push(t as u8);
                        match rng.below(8) {
                            0..=2 => {
                                let r = rec(&k);
                                match tree.insert_if_absent(&k, r) {
                                    Insert::Existing(e) => {
                                        assert_eq!(mine.get(&k), Some(&Addr(e)));
                                        // SAFETY: never published.
                                        unsafe { Record::free(r) };
                                    }
                                    Insert::Inserted { .. } => {
                                        assert!(mine.insert(k, Addr(r)).is_none())
                                    }
                                }
                            }
                            3..=4 => {
                                if let Some(r) = mine.remove(&k) {
                                    assert!(tree.remove_if(&k, r.0, &mut retired));
                                    unlinked.push(r);
                                } else {
                                    assert!(tree.lookup(&k).record.is_none());
                                }
                            }
                            5..=6 => {
                                let others: Vec<Vec<u8>> = (0..3).map(|_| key_of(&mut rng, 4000)).collect();
                                let ahead = std::iter::once(&k).chain(&others).map(|k| (tree, &k[..]));
                                // Batched lookups race the writers too;
                                // exact for this thread's own key.
                                let mut found = Vec::new();
                                Tree::lookup_batch(ahead, &mut found);
                                assert_eq!(found[0].record, mine.get(&k).map(|a| a.0))
                            }
                            _ => {
                                // A scan must be sorted and contain exactly
                                // this thread's keys in the range.
                                let mut hi = key_of(&mut rng, 4000);
                                hi.push(t as u8);
                                let (lo, hi) = if k <= hi { (k, hi) } else { (hi, k) };
                                let rev = rng.below(2) == 0;
                                let got = collect(tree, Included(&lo), Excluded(&hi), rev, usize::MAX);
                                let sorted = got.windows(2).all(|w| if rev { w[0] > w[1] } else { w[0] < w[1] });
                                assert!(sorted, "scan out of order");
                                let own: Vec<Vec<u8>> =
                                    got.into_iter().filter(|k| k.last() == Some(&(t as u8))).collect();
                                let mut want: Vec<Vec<u8>> = mine
                                    .range::<[u8], _>((Included(&lo[..]), Excluded(&hi[..])))
                                    .map(|(k, _)| k.clone())
                                    .filter(|k| k.last() == Some(&(t as u8)))
                                    .collect();
                                if rev {
                                    want.reverse();
                                }
                                assert_eq!(own, want);
                            }
                        }
                    }
                    (retired, unlinked, mine)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let mut all = Vec::new();
    for (retired, unlinked, mine) in results {
        all.extend(mine.into_keys());
        free_retired(retired, unlinked.into_iter().map(|a| a.0).collect());
    }
    all.sort();
    assert_eq!(collect(&tree, Unbounded, Unbounded, false, usize::MAX), all);
}

/// A record pointer handed between test threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Addr(NonNull<Record>);

// SAFETY: test-only: each record is owned by one thread's model at a time.
unsafe impl Send for Addr {}

//! Crash consistency in crash-simulation mode: cut the power at many points
//! (every persist of a stretch of transactions, commits included), restart
//! from the shadow image, and compare with a model: exactly the committed
//! transactions are present (the one in flight may be either way), and no
//! persistent memory leaks.

use epochdb_nvm::engines::nvm_inp::NvmInp;
use epochdb_nvm::pmem::{Evict, Latency, Medium, Pmem};
use epochdb_nvm::store::Store;
use std::collections::BTreeMap;

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];

/// Row shape of table 0: an inline field, two variable ones, one inline.
const COLUMNS: [u16; 4] = [8, 100, 4, 30];
const ROW: usize = 142;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(u32, Vec<u8>, Vec<u8>),
    Delete(u32, Vec<u8>),
}

/// A transaction: its operations, and whether it rolls back.
fn transaction(rng: &mut Rng, model: &Model) -> (Vec<Op>, bool) {
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let table = rng.below(2) as u32;
        let key = format!("key{:03}", rng.below(60)).into_bytes();
        if rng.below(5) == 0 {
            ops.push(Op::Delete(table, key));
            continue;
        }
        let value = match (table, model[0].get(&key)) {
            // Change one column of an existing row, as YCSB updates do.
            (0, Some(old)) if rng.below(2) == 0 => {
                let mut v = old.clone();
                let (at, len) = [(0, 8), (8, 100), (108, 4), (112, 30)][rng.below(4) as usize];
                v[at..at + len].fill(rng.next() as u8);
                v
            }
            (0, _) => (0..ROW).map(|_| rng.next() as u8).collect(),
            _ => (0..1 + rng.below(300)).map(|_| rng.next() as u8).collect(),
        };
        ops.push(Op::Put(table, key, value));
    }
    (ops, rng.below(8) == 0)
}

fn apply(model: &mut Model, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(t, k, v) => model[*t as usize].insert(k.clone(), v.clone()),
            Op::Delete(t, k) => model[*t as usize].remove(k),
        };
    }
}

fn run(store: &mut dyn Store, ops: &[Op], rollback: bool) {
    for op in ops {
        match op {
            Op::Put(t, k, v) => store.put(*t, k, v).expect("put"),
            Op::Delete(t, k) => drop(store.delete(*t, k).expect("delete")),
        }
    }
    if rollback {
        store.abort().expect("abort");
    } else {
        store.commit().expect("commit");
    }
}

fn contents(store: &mut dyn Store) -> Model {
    let mut out: Model = Default::default();
    for (t, m) in out.iter_mut().enumerate() {
        store
            .scan(t as u32, b"", None, false, &mut |k, v| {
                m.insert(k.to_vec(), v.to_vec());
                true
            })
            .expect("scan");
    }
    out
}

fn tables(store: &mut dyn Store) {
    assert_eq!(store.create_table("rows", &COLUMNS).expect("table"), 0);
    assert_eq!(store.create_table("blobs", &[]).expect("table"), 1);
}

/// Runs `txns` transactions with the power cut after `cut` persist events,
/// restarts, and checks the state and the leaks.
fn crash_at(seed: u64, txns: usize, cut: Option<u64>, evict: Evict) -> u64 {
    let (pm, _) = Pmem::open(Medium::Simulated, 16 << 20, Latency::default()).expect("pmem");
    let clock = pm.clock.clone();
    let mut store = NvmInp::open(pm).expect("open");
    tables(&mut store);
    let start = clock.events();
    if let Some(c) = cut {
        clock.cut_after(c);
    }
    let mut rng = Rng(seed | 1);
    // models[i]: the state after the first i transactions; done[i]: events
    // when transaction i's commit returned.
    let mut models = vec![Model::default()];
    let mut done = Vec::new();
    for _ in 0..txns {
        let mut m = models.last().cloned().unwrap_or_default();
        let (ops, rollback) = transaction(&mut rng, &m);
        run(&mut store, &ops, rollback);
        if !rollback {
            apply(&mut m, &ops);
        }
        models.push(m);
        done.push(clock.events() - start);
    }
    let Some(cut) = cut else { return clock.events() - start };
    let durable = done.iter().take_while(|&&d| d <= cut).count();
    let after = store.pmem().crash(evict).expect("crash");
    let mut store = NvmInp::open(after).expect("recover");
    let got = contents(&mut store);
    let ok = got == models[durable] || (durable < txns && got == models[durable + 1]);
    assert!(ok, "seed {seed} cut {cut}: recovered state is neither after {durable} nor {} transactions", durable + 1);
    // No leaks: the persisted slots are exactly the reachable ones.
    let mut reach = store.reachable();
    let heap = &mut store_heap(&mut store);
    heap.reclaim_all();
    let mut live: Vec<u64> = heap.live().into_iter().map(|(o, _)| o).collect();
    reach.sort_unstable();
    live.sort_unstable();
    assert_eq!(live, reach, "seed {seed} cut {cut}: leaked or dangling slots");
    // The recovered engine keeps working.
    let mut m = got;
    let (ops, _) = transaction(&mut rng, &m);
    run(&mut store, &ops, false);
    apply(&mut m, &ops);
    assert_eq!(contents(&mut store), m, "seed {seed} cut {cut}: after recovery");
    0
}

fn store_heap(store: &mut NvmInp) -> &mut epochdb_nvm::pmem::Heap {
    store.heap_mut()
}

#[test]
fn nvm_inp_survives_a_crash_at_every_persist() {
    for seed in 1..4u64 {
        let txns = 40;
        let events = crash_at(seed, txns, None, Evict::Nothing);
        for cut in 0..events {
            let evict = if cut % 3 == 0 { Evict::Random { seed: cut, percent: 40 } } else { Evict::Nothing };
            crash_at(seed, txns, Some(cut), evict);
        }
    }
}

//! Crash consistency in crash-simulation mode, for every engine: cut the
//! power at many points (every persist or fsync of a stretch of
//! transactions, commits included), restart from the shadow image, and
//! compare with a model: the recovered state is that after some prefix of
//! the transactions, holding at least every transaction the engine had
//! reported durable and none that had not begun; and nothing leaks.

use epochdb_nvm::pmem::{Evict, Latency, Medium, Pmem};
use epochdb_nvm::store::Store;
use epochdb_nvm::testbed::{open_store, ENGINES};
use epochdb_workloads::keygen::Rng;
use std::collections::BTreeMap;

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];

/// Row shape of table 0: an inline field, two variable ones, one inline.
const COLUMNS: [u16; 4] = [8, 100, 4, 30];
const ROW: usize = 142;

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
                v[at..at + len].fill(rng.next_u64() as u8);
                v
            }
            (0, _) => (0..ROW).map(|_| rng.next_u64() as u8).collect(),
            _ => (0..1 + rng.below(300)).map(|_| rng.next_u64() as u8).collect(),
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
/// restarts, and checks the state and the leaks. Returns how many persist
/// events the run had (before any crash).
fn crash_at(engine: &str, seed: u64, txns: usize, cut: Option<u64>, evict: Evict) -> u64 {
    let (pm, _) = Pmem::open(Medium::Simulated, 8 << 20, Latency::default()).expect("pmem");
    let clock = pm.clock.clone();
    let mut store = open_store(engine, pm).expect("open");
    tables(&mut *store);
    let start = clock.events();
    if let Some(c) = cut {
        clock.cut_after(c);
    }
    let mut rng = Rng::new(seed);
    // models[i]: the state after the first i transactions; done[i]: events
    // when transaction i returned, and the engine's durable count then.
    let mut models = vec![Model::default()];
    let mut done = Vec::new();
    for _ in 0..txns {
        let mut m = models.last().cloned().unwrap_or_default();
        let (ops, rollback) = transaction(&mut rng, &m);
        run(&mut *store, &ops, rollback);
        if !rollback {
            apply(&mut m, &ops);
        }
        // Group-commit and background work at random points.
        match rng.below(10) {
            0..=2 => store.flush().expect("flush"),
            3 => store.checkpoint().expect("checkpoint"),
            _ => {}
        }
        models.push(m);
        done.push((clock.events() - start, store.durable(), store.committed()));
    }
    let events = clock.events() - start;
    let Some(cut) = cut else { return events };
    // At least the transactions reported durable before the cut, at most
    // those begun before it.
    let before: Vec<_> = done.iter().take_while(|d| d.0 <= cut).collect();
    let durable = before.last().map_or(0, |d| d.1);
    let lo = if durable == 0 { 0 } else { done.iter().position(|d| d.2 >= durable).map_or(txns, |i| i + 1) };
    let hi = (before.len() + 1).min(txns);
    let after = store.pmem().crash(evict).expect("crash");
    let mut store = open_store(engine, after).expect("recover");
    tables(&mut *store);
    let got = contents(&mut *store);
    let ok = (lo..=hi).any(|k| models[k] == got);
    let k = models.iter().position(|m| *m == got);
    assert!(ok, "{engine} seed {seed} cut {cut}: recovered the state after {k:?} transactions, not one in {lo}..={hi}");
    let leaks = store.leaks();
    assert!(leaks.is_empty(), "{engine} seed {seed} cut {cut}: {leaks:?}");
    // The recovered engine keeps working.
    let mut m = got;
    let (ops, _) = transaction(&mut rng, &m);
    run(&mut *store, &ops, false);
    apply(&mut m, &ops);
    assert_eq!(contents(&mut *store), m, "{engine} seed {seed} cut {cut}: after recovery");
    events
}

/// Every cut for one seed, every fifth for two more, on `engine`.
fn survives_a_crash_at_every_persist(engine: &str) {
    for seed in 1..4u64 {
        let txns = 40;
        let events = crash_at(engine, seed, txns, None, Evict::Nothing);
        for cut in (0..events).step_by(if seed == 1 { 1 } else { 5 }) {
            let evict = if cut % 3 == 0 { Evict::Random { seed: cut, percent: 40 } } else { Evict::Nothing };
            crash_at(engine, seed, txns, Some(cut), evict);
        }
    }
}

// One test per engine, so the harness runs them side by side.
macro_rules! per_engine {
    ($($test:ident: $engine:literal,)*) => {
        $(
            #[test]
            fn $test() {
                survives_a_crash_at_every_persist($engine);
            }
        )*

        #[test]
        fn every_engine_has_a_test() {
            assert_eq!(ENGINES, [$($engine),*]);
        }
    };
}

per_engine! {
    inp_survives_a_crash_at_every_persist: "inp",
    cow_survives_a_crash_at_every_persist: "cow",
    log_survives_a_crash_at_every_persist: "log",
    nvm_inp_survives_a_crash_at_every_persist: "nvm-inp",
    nvm_cow_survives_a_crash_at_every_persist: "nvm-cow",
    nvm_log_survives_a_crash_at_every_persist: "nvm-log",
}

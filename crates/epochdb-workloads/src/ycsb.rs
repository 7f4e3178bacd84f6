//! YCSB (Cooper et al., SoCC 2010) in the variants the papers use.
//!
//! | mix | read | update | rmw | insert | scan | keys | value |
//! | --- | --- | --- | --- | --- | --- | --- | --- |
//! | `silo` (Silo §5.2) | 80 | | 20 | | | uniform | 1 x 100 B |
//! | `silor` (SiloR §6) | 70 | | 30 | | | uniform | 1 x 100 B |
//! | `read-only`, `read-heavy`, `balanced`, `write-heavy` (NVM §5.1) | 100/90/50/10 | 0/10/50/90 | | | | hotspot | 10 x 100 B |
//! | `a`..`f` (YCSB core) | A 50, B 95, C 100, D 95, E -, F 50 | A 50, B 5 | F 50 | D 5, E 5 | E 95 | scrambled Zipfian 0.99 (D: latest) | 10 x 100 B |
//!
//! Every operation is one transaction on one key (a scan reads up to 100
//! consecutive keys). `update` changes one column of a row it reads;
//! `rmw` reads a row and writes it back changed. Keys are 8-byte
//! big-endian ids, so key order is id order.

use crate::driver::Terminal;
use crate::engine::{Column, Engine, Table, TxnError, TxnKind, TxnResult, Worker};
use crate::keygen::{Chooser, Rng, Zipfian};
use std::sync::atomic::{AtomicU64, Ordering};

/// The table YCSB loads (YCSB's own name).
pub const TABLE: &str = "usertable";

/// Percentages of each transaction type; they add up to 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mix {
    pub read: u32,
    pub update: u32,
    pub rmw: u32,
    pub insert: u32,
    pub scan: u32,
}

/// Transaction types, in the order of [`Mix`]'s fields.
pub const KINDS: [&str; 5] = ["read", "update", "rmw", "insert", "scan"];

impl Mix {
    fn pick(&self, rng: &mut Rng) -> usize {
        let mut roll = rng.below(100) as u32;
        for (i, share) in [self.read, self.update, self.rmw, self.insert, self.scan].into_iter().enumerate() {
            if roll < share {
                return i;
            }
            roll -= share;
        }
        0
    }
}

/// Which keys transactions touch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform,
    Zipfian {
        theta: f64,
    },
    /// The NVM study's skews: `ops`% of accesses to `keys`% of the keys.
    Hotspot {
        ops: u32,
        keys: u32,
    },
    /// Newest keys most popular (YCSB-D).
    Latest {
        theta: f64,
    },
}

impl Distribution {
    pub fn parse(s: &str) -> Option<Distribution> {
        Some(match s {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian { theta: 0.99 },
            "low" => Distribution::Hotspot { ops: 50, keys: 20 },
            "high" => Distribution::Hotspot { ops: 90, keys: 10 },
            "latest" => Distribution::Latest { theta: 0.99 },
            _ => return None,
        })
    }

    pub fn name(&self) -> String {
        match self {
            Distribution::Uniform => "uniform".into(),
            Distribution::Zipfian { theta } => format!("zipfian({theta})"),
            Distribution::Hotspot { ops: 50, keys: 20 } => "low".into(),
            Distribution::Hotspot { ops: 90, keys: 10 } => "high".into(),
            Distribution::Hotspot { ops, keys } => format!("hotspot({ops}/{keys})"),
            Distribution::Latest { theta } => format!("latest({theta})"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mix_name: String,
    pub mix: Mix,
    pub distribution: Distribution,
    /// Keys loaded before the run.
    pub keys: u64,
    pub columns: usize,
    pub column_len: usize,
    pub max_scan: usize,
}

impl Config {
    /// The named mix with its usual distribution and row shape.
    pub fn preset(name: &str, keys: u64) -> Option<Config> {
        let m = |read, update, rmw, insert, scan| Mix { read, update, rmw, insert, scan };
        let (mix, distribution, columns) = match name {
            "silo" => (m(80, 0, 20, 0, 0), Distribution::Uniform, 1),
            "silor" => (m(70, 0, 30, 0, 0), Distribution::Uniform, 1),
            "read-only" => (m(100, 0, 0, 0, 0), Distribution::Hotspot { ops: 50, keys: 20 }, 10),
            "read-heavy" => (m(90, 10, 0, 0, 0), Distribution::Hotspot { ops: 50, keys: 20 }, 10),
            "balanced" => (m(50, 50, 0, 0, 0), Distribution::Hotspot { ops: 50, keys: 20 }, 10),
            "write-heavy" => (m(10, 90, 0, 0, 0), Distribution::Hotspot { ops: 50, keys: 20 }, 10),
            "a" => (m(50, 50, 0, 0, 0), Distribution::Zipfian { theta: 0.99 }, 10),
            "b" => (m(95, 5, 0, 0, 0), Distribution::Zipfian { theta: 0.99 }, 10),
            "c" => (m(100, 0, 0, 0, 0), Distribution::Zipfian { theta: 0.99 }, 10),
            "d" => (m(95, 0, 0, 5, 0), Distribution::Latest { theta: 0.99 }, 10),
            "e" => (m(0, 0, 0, 5, 95), Distribution::Zipfian { theta: 0.99 }, 10),
            "f" => (m(50, 0, 50, 0, 0), Distribution::Zipfian { theta: 0.99 }, 10),
            _ => return None,
        };
        Some(Config { mix_name: name.into(), mix, distribution, keys, columns, column_len: 100, max_scan: 100 })
    }

    pub fn value_len(&self) -> usize {
        self.columns * self.column_len
    }
}

/// The mixes [`Config::preset`] knows.
pub const MIXES: [&str; 12] =
    ["silo", "silor", "read-only", "read-heavy", "balanced", "write-heavy", "a", "b", "c", "d", "e", "f"];

pub fn key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// A loaded YCSB database and its shared state.
pub struct Ycsb {
    pub config: Config,
    table: Table,
    /// Ids `0..next_id` exist (inserts take the next one).
    next_id: AtomicU64,
}

impl Ycsb {
    /// Creates the table and loads `config.keys` rows with `threads` threads.
    pub fn load(engine: &dyn Engine, config: Config, threads: usize) -> TxnResult<Ycsb> {
        // Rows of several columns (the NVM study's 10 x 100 B) get a schema,
        // so engines that store fields separately can.
        let names: Vec<String> = (0..config.columns).map(|i| format!("field{i}")).collect();
        let columns: Vec<Column<'_>> = if config.columns > 1 {
            names.iter().map(|n| Column::fixed(n, config.column_len)).collect()
        } else {
            vec![]
        };
        let table = engine.create_table(TABLE, &columns)?;
        let threads = threads.max(1) as u64;
        let batch = 512;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let config = &config;
                    s.spawn(move || -> TxnResult {
                        let mut w = engine.worker()?;
                        let mut rng = Rng::new(0x10AD ^ t);
                        let mut value = vec![0u8; config.value_len()];
                        // Thread t loads a contiguous slice: fewer conflicts
                        // on the same leaves than interleaving.
                        let (lo, hi) = (config.keys * t / threads, config.keys * (t + 1) / threads);
                        let mut id = lo;
                        while id < hi {
                            let end = (id + batch).min(hi);
                            w.run(TxnKind::ReadWrite, &mut |txn| {
                                for i in id..end {
                                    fill(&mut rng, &mut value);
                                    txn.insert(table, &key(i), &value)?;
                                }
                                Ok(())
                            })?;
                            id = end;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().unwrap_or_else(|_| Err(TxnError::Fatal("loader panicked".into()))))
        })?;
        Ok(Ycsb { next_id: AtomicU64::new(config.keys), config, table })
    }

    pub fn table(&self) -> Table {
        self.table
    }

    /// Rows that exist: loaded plus inserted.
    pub fn rows(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// A client for one thread.
    pub fn client(&self, seed: u64) -> Client<'_> {
        let n = self.config.keys.max(2);
        let chooser = match self.config.distribution {
            Distribution::Uniform => Chooser::Uniform,
            Distribution::Zipfian { theta } => Chooser::Zipfian(Zipfian::new(n, theta)),
            Distribution::Hotspot { ops, keys } => Chooser::Hotspot { ops_percent: ops, keys_percent: keys },
            Distribution::Latest { theta } => Chooser::Latest(Zipfian::new(n, theta)),
        };
        Client {
            ycsb: self,
            rng: Rng::new(seed),
            chooser,
            value: vec![0u8; self.config.value_len()],
            row: Vec::new(),
            counts: [0; 5],
        }
    }
}

fn fill(rng: &mut Rng, value: &mut [u8]) {
    for chunk in value.chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
}

/// One thread's YCSB transaction generator.
pub struct Client<'y> {
    ycsb: &'y Ycsb,
    rng: Rng,
    chooser: Chooser,
    value: Vec<u8>,
    row: Vec<u8>,
    /// Transactions issued, per type (see [`KINDS`]).
    pub counts: [u64; 5],
}

impl Terminal for Client<'_> {
    /// Runs one transaction to commit. Returns the number of aborts.
    fn run_one(&mut self, w: &mut dyn Worker) -> TxnResult<u32> {
        let cfg = &self.ycsb.config;
        let table = self.ycsb.table;
        let kind = cfg.mix.pick(&mut self.rng);
        self.counts[kind] += 1;
        let present = self.ycsb.next_id.load(Ordering::Relaxed);
        let id = self.chooser.choose(&mut self.rng, present);
        let k = key(id);
        let (row, value, rng) = (&mut self.row, &mut self.value, &mut self.rng);
        match kind {
            0 => w.run(TxnKind::ReadOnly, &mut |txn| {
                txn.get(table, &k, row)?;
                Ok(())
            }),
            1 => {
                let column = rng.below(cfg.columns as u64) as usize * cfg.column_len;
                let byte = rng.next_u64() as u8;
                w.run(TxnKind::ReadWrite, &mut |txn| {
                    if !txn.get(table, &k, row)? {
                        return Err(TxnError::Fatal(format!("key {id} missing")));
                    }
                    row[column..column + cfg.column_len].fill(byte);
                    txn.put(table, &k, row)
                })
            }
            2 => w.run(TxnKind::ReadWrite, &mut |txn| {
                if !txn.get(table, &k, row)? {
                    return Err(TxnError::Fatal(format!("key {id} missing")));
                }
                row[0] = row[0].wrapping_add(1);
                txn.put(table, &k, row)
            }),
            3 => {
                let new = self.ycsb.next_id.fetch_add(1, Ordering::Relaxed);
                fill(rng, value);
                w.run(TxnKind::ReadWrite, &mut |txn| txn.insert(table, &key(new), value))
            }
            _ => {
                let len = rng.range(1, cfg.max_scan as u64) as usize;
                w.run(TxnKind::ReadOnly, &mut |txn| txn.scan(table, &k, None, len, false, &mut |_, _| true))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_add_up_and_mixes_pick_in_proportion() {
        for name in MIXES {
            let c = Config::preset(name, 1000).expect("preset");
            let m = c.mix;
            assert_eq!(m.read + m.update + m.rmw + m.insert + m.scan, 100, "{name}");
        }
        let mix = Config::preset("silo", 10).expect("silo").mix;
        let mut rng = Rng::new(9);
        let mut counts = [0u32; 5];
        for _ in 0..100_000 {
            counts[mix.pick(&mut rng)] += 1;
        }
        assert!((79_000..81_000).contains(&counts[0]) && (19_000..21_000).contains(&counts[2]), "{counts:?}");
        assert!(Config::preset("nope", 1).is_none());
    }
}

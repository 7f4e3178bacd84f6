//! Runs the study's experiments (§5): opens one partition per executor
//! thread on emulated NVM, loads YCSB or TPC-C into each, drives them with
//! the shared workload code, and reports throughput, NVM writes, footprint
//! and recovery latency.

use crate::engines;
use crate::partition::{nvm_lines, Partition};
use crate::pmem::{Latency, Medium, Pmem, LINE};
use crate::store::{Footprint, Store};
use epochdb_workloads::driver::{self, Measured, Settings, Terminal};
use epochdb_workloads::engine::{Engine, TxnError, TxnResult, Worker};
use epochdb_workloads::report::{NvmReport, Provenance};
use epochdb_workloads::{tpcc, tpcc_rows, ycsb};
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The engines `--engine` accepts.
pub const ENGINES: [&str; 6] = ["inp", "cow", "log", "nvm-inp", "nvm-cow", "nvm-log"];

/// Opens engine `name` on a partition's NVM (recovering what it holds).
pub fn open_store(name: &str, pm: Pmem) -> io::Result<Box<dyn Store>> {
    Ok(match name {
        "inp" => Box::new(engines::inp::Inp::open(pm)?),
        "log" => Box::new(engines::log::Log::open(pm)?),
        "nvm-inp" => Box::new(engines::nvm_inp::NvmInp::open(pm)?),
        "nvm-log" => Box::new(engines::nvm_log::NvmLog::open(pm)?),
        "cow" => {
            let (pages, tables) = engines::cow::FilePages::open(pm)?;
            Box::new(engines::cow::Cow::open(pages, tables)?)
        }
        "nvm-cow" => {
            let (pages, tables) = engines::nvm_cow::NvmPages::open(pm)?;
            Box::new(engines::cow::Cow::open(pages, tables)?)
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown engine {name}; choose one of {}", ENGINES.join(", ")),
            ))
        }
    })
}

#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// One of the NVM mixes (`read-only` ... `write-heavy`) with skew
    /// `low` or `high`.
    Ycsb { mix: String, skew: String },
    /// One warehouse per partition.
    Tpcc,
}

impl Workload {
    pub fn name(&self) -> String {
        match self {
            Workload::Ycsb { mix, skew } => format!("ycsb {mix} {skew}"),
            Workload::Tpcc => "tpcc".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub engine: String,
    pub workload: Workload,
    /// `dram`, `2x` or `8x`.
    pub latency: String,
    /// YCSB tuples in all (split evenly among partitions).
    pub tuples: u64,
    pub partitions: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// Holds `p0`, `p1`, ...: one directory per partition.
    pub dir: PathBuf,
    /// Region size per partition; 0 picks one from the workload.
    pub region_mib: usize,
    pub progress: bool,
}

impl Config {
    fn latency(&self) -> io::Result<Latency> {
        Latency::parse(&self.latency).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("latency {}: use dram, 2x or 8x", self.latency))
        })
    }

    /// Sparse, so only what is written takes memory: room for the tuples
    /// several times over (copy-on-write and log-structured engines keep
    /// old versions until they reclaim them).
    fn region_bytes(&self) -> usize {
        if self.region_mib > 0 {
            return self.region_mib << 20;
        }
        let per = match self.workload {
            Workload::Ycsb { .. } => (self.tuples / self.partitions.max(1) as u64) as usize * 8192,
            Workload::Tpcc => 0,
        };
        (per + (8 << 30)).next_multiple_of(1 << 20)
    }

    fn ycsb(&self, mix: &str, skew: &str) -> TxnResult<ycsb::Config> {
        let keys = self.tuples / self.partitions.max(1) as u64;
        let mut c = ycsb::Config::preset(mix, keys).ok_or_else(|| TxnError::Fatal(format!("unknown mix {mix}")))?;
        c.distribution =
            ycsb::Distribution::parse(skew).ok_or_else(|| TxnError::Fatal(format!("skew {skew}: use low or high")))?;
        Ok(c)
    }
}

fn fatal(e: io::Error) -> TxnError {
    TxnError::Fatal(e.to_string())
}

/// Whether `name` is a file the engines write in a partition's directory
/// (FORMAT.md, "NVM testbed"), possibly as a temporary.
fn testbed_file(name: &str) -> bool {
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    let numbered = |prefix: &str| {
        name.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(name, "region" | "catalog" | "manifest" | "cow.db")
        || ["wal.", "checkpoint.", "run."].iter().any(|p| numbered(p))
}

/// Removes the testbed's files from `dir`: its partition directories
/// `p<N>` and the files the engines write in them. Anything else there is
/// an error naming it, and nothing is removed (a mistyped `--dir` must not
/// cost anyone their files).
pub fn clear(dir: &Path) -> TxnResult<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut files = Vec::new();
    let mut parts = Vec::new();
    let foreign =
        |p: &Path| TxnError::Fatal(format!("{} was not written by the testbed; nothing was removed", p.display()));
    for e in entries {
        let path = e.map_err(fatal)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let part = name.strip_prefix('p').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !part || !path.is_dir() {
            return Err(foreign(&path));
        }
        for f in std::fs::read_dir(&path).map_err(fatal)? {
            let f = f.map_err(fatal)?.path();
            let ours = f.is_file() && f.file_name().is_some_and(|n| testbed_file(&n.to_string_lossy()));
            if !ours {
                return Err(foreign(&f));
            }
            files.push(f);
        }
        parts.push(path);
    }
    for f in files {
        std::fs::remove_file(&f).map_err(fatal)?;
    }
    for p in parts {
        std::fs::remove_dir(&p).map_err(fatal)?;
    }
    Ok(())
}

/// Opens every partition (in parallel, one thread each: recovery too),
/// emptying the directory first when `fresh` (see [`clear`]). Returns them
/// and the time it took.
pub fn open(cfg: &Config, fresh: bool) -> TxnResult<(Vec<Partition>, Duration)> {
    if fresh {
        clear(&cfg.dir)?;
    }
    let latency = cfg.latency().map_err(fatal)?;
    let start = Instant::now();
    let parts = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.partitions.max(1))
            .map(|p| {
                s.spawn(move || -> io::Result<Partition> {
                    let medium = Medium::Dir(cfg.dir.join(format!("p{p}")));
                    let (pm, _) = Pmem::open(medium, cfg.region_bytes(), latency)?;
                    Ok(Partition::new(open_store(&cfg.engine, pm)?))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("open panicked")))).collect()
    });
    let parts: io::Result<Vec<Partition>> = parts;
    Ok((parts.map_err(fatal)?, start.elapsed()))
}

/// Each partition's workload state.
pub enum Loaded {
    Ycsb(Vec<ycsb::Ycsb>),
    Tpcc(Vec<tpcc::Tpcc>),
}

/// Loads every partition in parallel, and makes the load durable.
pub fn load(cfg: &Config, parts: &[Partition]) -> TxnResult<Loaded> {
    let c = match &cfg.workload {
        Workload::Ycsb { mix, skew } => Some(cfg.ycsb(mix, skew)?),
        Workload::Tpcc => None,
    };
    let loaded = std::thread::scope(|s| -> TxnResult<Loaded> {
        match &c {
            Some(c) => {
                let hs: Vec<_> = parts.iter().map(|p| s.spawn(|| ycsb::Ycsb::load(p, c.clone(), 1))).collect();
                Ok(Loaded::Ycsb(hs.into_iter().map(join).collect::<TxnResult<_>>()?))
            }
            None => {
                let hs: Vec<_> =
                    parts.iter().map(|p| s.spawn(|| tpcc::Tpcc::load(p, 1, 1, tpcc_rows::Schema::Spec))).collect();
                Ok(Loaded::Tpcc(hs.into_iter().map(join).collect::<TxnResult<_>>()?))
            }
        }
    })?;
    for p in parts {
        p.flush()?;
    }
    Ok(loaded)
}

/// Attaches to partitions loaded before a restart.
pub fn attach(cfg: &Config, parts: &[Partition]) -> TxnResult<Loaded> {
    Ok(match &cfg.workload {
        Workload::Ycsb { mix, skew } => {
            let c = cfg.ycsb(mix, skew)?;
            Loaded::Ycsb(
                parts
                    .iter()
                    .map(|p| ycsb::Ycsb::load(p, ycsb::Config { keys: 0, ..c.clone() }, 1))
                    .collect::<TxnResult<_>>()?,
            )
        }
        Workload::Tpcc => Loaded::Tpcc(
            parts.iter().map(|p| tpcc::Tpcc::attach(p, 1, tpcc_rows::Schema::Spec)).collect::<TxnResult<_>>()?,
        ),
    })
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, TxnResult<T>>) -> TxnResult<T> {
    h.join().unwrap_or_else(|_| Err(TxnError::Fatal("loader panicked".into())))
}

/// A thread's transaction source on its partition.
pub enum Client<'a> {
    Ycsb(ycsb::Client<'a>),
    Tpcc(tpcc::Client<'a>),
}

impl Terminal for Client<'_> {
    fn run_one(&mut self, w: &mut dyn Worker) -> TxnResult<u32> {
        match self {
            Client::Ycsb(c) => c.run_one(w),
            Client::Tpcc(c) => c.run_one(w),
        }
    }
}

impl Loaded {
    pub fn client(&self, partition: usize, seed: u64) -> Client<'_> {
        match self {
            Loaded::Ycsb(y) => Client::Ycsb(y[partition].client(seed)),
            Loaded::Tpcc(t) => Client::Tpcc(t[partition].client(0, seed)),
        }
    }
}

/// What a run measured.
pub struct Report {
    pub measured: Measured,
    pub load: Duration,
    /// Cache lines persisted per transaction (after loading).
    pub lines_per_txn: f64,
    /// Bytes written to NVM per transaction: persisted lines and file writes.
    pub bytes_per_txn: f64,
    pub footprint: Footprint,
    /// `--recovery N`: N, and the restart time after a SIGKILL.
    pub recovery: Option<(u64, Duration)>,
}

impl Report {
    /// A run that measured nothing (a recovery run's report).
    pub fn empty() -> Report {
        Report {
            measured: Measured::empty(),
            load: Duration::ZERO,
            lines_per_txn: 0.0,
            bytes_per_txn: 0.0,
            footprint: Footprint::default(),
            recovery: None,
        }
    }
}

/// Loads and runs one configuration.
pub fn run(cfg: &Config) -> TxnResult<Report> {
    let (parts, _) = open(cfg, true)?;
    let started = Instant::now();
    let loaded = load(cfg, &parts)?;
    let load = started.elapsed();
    let committed = |parts: &[Partition]| parts.iter().map(|p| p.committed()).sum::<TxnResult<u64>>();
    let (lines0, bytes0, txns0) = (nvm_lines(&parts), nvm_bytes(&parts), committed(&parts)?);
    let settings = Settings {
        threads: parts.len(),
        duration: cfg.duration,
        warmup: cfg.warmup,
        transactions: None,
        progress: cfg.progress,
    };
    let engines: Vec<&dyn Engine> = parts.iter().map(|p| p as &dyn Engine).collect();
    let (measured, _) = driver::run_each(&engines, &settings, |t| loaded.client(t, 0x5EED ^ t as u64))?;
    let txns = (committed(&parts)? - txns0).max(1) as f64;
    let mut footprint = Footprint::default();
    for p in &parts {
        footprint.add(&p.footprint()?);
    }
    Ok(Report {
        measured,
        load,
        lines_per_txn: (nvm_lines(&parts) - lines0) as f64 / txns,
        bytes_per_txn: (nvm_bytes(&parts) - bytes0) as f64 / txns,
        footprint,
        recovery: None,
    })
}

fn nvm_bytes(parts: &[Partition]) -> u64 {
    parts.iter().map(|p| p.stats().nvm_bytes()).sum()
}

/// The child side of `--recovery N`: loads, runs `n` transactions spread
/// over the partitions, says `ready` on stdout, and runs on until it is
/// killed, so the kill lands in the middle of transactions.
pub fn child(cfg: &Config, n: u64) -> TxnResult<()> {
    let (parts, _) = open(cfg, true)?;
    let loaded = load(cfg, &parts)?;
    let per = n.div_ceil(parts.len() as u64);
    let ready = std::sync::Barrier::new(parts.len() + 1);
    std::thread::scope(|s| {
        for (i, p) in parts.iter().enumerate() {
            let (loaded, ready) = (&loaded, &ready);
            s.spawn(move || -> TxnResult {
                let mut w = p.worker()?;
                let mut c = loaded.client(i, 0xC0DE ^ i as u64);
                for done in 0.. {
                    if done == per {
                        ready.wait();
                    }
                    match c.run_one(&mut *w) {
                        Ok(_) | Err(TxnError::Rollback) => {}
                        Err(e) => {
                            eprintln!("child: {e}");
                            std::process::exit(3);
                        }
                    }
                }
                Ok(())
            });
        }
        ready.wait();
        println!("ready");
    });
    Ok(())
}

/// `--recovery N` (§5.4): runs `child` (this program in child mode, told
/// to execute N transactions) until it says it has, kills it with SIGKILL, and times the
/// restart. Then checks the recovered partitions (TPC-C's consistency
/// conditions, or YCSB's row count).
pub fn recovery(cfg: &Config, mut child: Command) -> TxnResult<(Duration, Vec<String>)> {
    let mut proc = child.stdout(Stdio::piped()).spawn().map_err(fatal)?;
    let out = proc.stdout.take().ok_or_else(|| TxnError::Fatal("no child stdout".into()))?;
    // The first line that ends in `ready` (a test harness prints its own
    // words before and around it).
    let mut lines = io::BufReader::new(out).lines();
    let ready = lines.any(|l| l.is_ok_and(|l| l.trim_end().ends_with("ready")));
    // SIGKILL: the child gets no chance to flush or unmap anything.
    proc.kill().map_err(fatal)?;
    let status = proc.wait().map_err(fatal)?;
    if !ready {
        return Err(TxnError::Fatal(format!("the child exited ({status}) before it was ready")));
    }
    let (parts, took) = open(cfg, false)?;
    Ok((took, check(cfg, &parts)?))
}

/// Consistency problems in recovered partitions (empty: none).
pub fn check(cfg: &Config, parts: &[Partition]) -> TxnResult<Vec<String>> {
    let mut problems = Vec::new();
    match attach(cfg, parts)? {
        Loaded::Tpcc(t) => {
            for (i, (p, t)) in parts.iter().zip(&t).enumerate() {
                let mut w = p.worker()?;
                problems.extend(t.check(&mut *w)?.into_iter().map(|m| format!("partition {i}: {m}")));
            }
        }
        Loaded::Ycsb(y) => {
            let want = cfg.tuples / parts.len() as u64;
            for (i, (p, y)) in parts.iter().zip(&y).enumerate() {
                let mut rows = 0u64;
                p.worker()?.run(epochdb_workloads::engine::TxnKind::ReadOnly, &mut |txn| {
                    rows = 0;
                    txn.scan(y.table(), b"", None, usize::MAX, false, &mut |_, _| {
                        rows += 1;
                        true
                    })
                })?;
                if rows != want {
                    problems.push(format!("partition {i}: {rows} YCSB rows, loaded {want}"));
                }
            }
        }
    }
    Ok(problems)
}

/// The JSON report (docs/json-reports.md); `consistency` and `run` are
/// the caller's to fill in.
pub fn report(cfg: &Config, r: &Report) -> NvmReport {
    let f = &r.footprint;
    NvmReport {
        engine: cfg.engine.clone(),
        workload: cfg.workload.name(),
        latency: cfg.latency.clone(),
        partitions: cfg.partitions as u64,
        tuples: cfg.tuples,
        throughput: r.measured.throughput(),
        committed: r.measured.committed,
        seconds: r.measured.elapsed_s,
        load_seconds: r.load.as_secs_f64(),
        persisted_lines_per_txn: r.lines_per_txn,
        persisted_bytes_per_txn: r.bytes_per_txn,
        persisted_bytes: r.measured.log_bytes,
        footprint_bytes: f.total(),
        footprint: *f,
        latency_p50_us: r.measured.latency_us(0.5),
        latency_p99_us: r.measured.latency_us(0.99),
        recovery_txns: r.recovery.map(|(n, _)| n),
        recovery_ms: r.recovery.map(|(_, d)| d.as_secs_f64() * 1e3),
        write_back: crate::pmem::WriteBack::detect().name().into(),
        line_bytes: LINE as u64,
        consistency: "not checked".into(),
        run: Provenance::now(),
    }
}

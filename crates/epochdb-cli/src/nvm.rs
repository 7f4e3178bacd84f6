//! `epochdb bench nvm`: the NVM storage-engine testbed (crate
//! `epochdb-nvm`, README "Storage engines on persistent memory").

use crate::args::{failed, Args, CliResult};
use crate::{say, write_report};
use epochdb_nvm::testbed::{self, Config, Workload, ENGINES};
use epochdb_workloads::report::Json;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

pub const HELP: &str = "\
NVM TESTBED OPTIONS (epochdb bench nvm; defaults in brackets):
    --engine E          inp | cow | log | nvm-inp | nvm-cow | nvm-log
                        [nvm-inp]
    --workload W        ycsb | tpcc [ycsb]; tpcc loads one warehouse per
                        partition
    --mix M             read-only | read-heavy | balanced | write-heavy
                        [balanced]
    --skew S            low (50% of transactions on 20% of tuples) |
                        high (90% on 10%) [low]
    --latency L         dram | 2x | 8x: extra NVM latency per read miss,
                        per persisted cache line and per 64 bytes written
                        to a file, of 0, 160 or 1120 ns [dram]
    --tuples N          YCSB tuples of 10 x 100 bytes, all partitions
                        together [2000000]
    --partitions N      partitions, one executor thread each [all cores]
    --duration S        measured seconds [10]
    --warmup S          seconds run before measuring [2]
    --dir DIR           NVM files, one directory per partition; cleared
                        first of the testbed's own files (anything else
                        there stops the run) [/dev/shm/epochdb-nvm]
    --region-mib N      region size per partition (a sparse file) [auto]
    --recovery N        instead of measuring throughput: run N transactions
                        in a child process, SIGKILL it, and time the restart
    --json FILE         write the report as JSON
    --quiet             no progress line
    --matrix            run the study's grid instead: every engine (or
                        --engines E,E,...) on the four YCSB mixes at both
                        skews and on TPC-C, at each of --latencies L,L,...
                        [dram,2x,8x], --runs times interleaved [3]; then
                        recovery after 1,000, 10,000 and 100,000 TPC-C
                        transactions; writes matrix.md and SVG charts to
                        --out DIR [target/nvm-matrix]
";

pub const FLAGS: &[&str] = &["--quiet", "--matrix"];

fn config(a: &mut Args) -> Result<Config, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = a.take_str("--engine").unwrap_or_else(|| "nvm-inp".into());
    if !ENGINES.contains(&engine.as_str()) {
        return Err(format!("unknown engine {engine:?} (one of {})", ENGINES.join(", ")));
    }
    let mix = a.take_str("--mix").unwrap_or_else(|| "balanced".into());
    let skew = a.take_str("--skew").unwrap_or_else(|| "low".into());
    let workload = match a.take_str("--workload").as_deref() {
        None | Some("ycsb") => {
            if !["read-only", "read-heavy", "balanced", "write-heavy"].contains(&mix.as_str()) {
                return Err(format!("unknown mix {mix:?} (read-only, read-heavy, balanced or write-heavy)"));
            }
            if !["low", "high"].contains(&skew.as_str()) {
                return Err(format!("unknown skew {skew:?} (low or high)"));
            }
            Workload::Ycsb { mix, skew }
        }
        Some("tpcc") => Workload::Tpcc,
        Some(w) => return Err(format!("unknown workload {w:?} (ycsb or tpcc)")),
    };
    let latency = a.take_str("--latency").unwrap_or_else(|| "dram".into());
    if epochdb_nvm::pmem::Latency::parse(&latency).is_none() {
        return Err(format!("unknown latency {latency:?} (dram, 2x or 8x)"));
    }
    let c = Config {
        engine,
        workload,
        latency,
        tuples: a.take_int("--tuples", 2_000_000, 2, 1 << 40)?,
        partitions: a.take_int("--partitions", cores, 1, 1024)?,
        duration: a.take_secs("--duration", 10.0, 0.001, 1e6)?,
        warmup: a.take_secs("--warmup", 2.0, 0.0, 1e6)?,
        dir: PathBuf::from(a.take_str("--dir").unwrap_or_else(|| "/dev/shm/epochdb-nvm".into())),
        region_mib: a.take_int("--region-mib", 0, 0, 1 << 24)?,
        progress: !a.flag("--quiet"),
    };
    if c.partitions == 0 || c.tuples < 2 * c.partitions as u64 {
        return Err("--partitions must be at least 1, with at least 2 tuples each".into());
    }
    Ok(c)
}

fn list(a: &mut Args, name: &str, default: &[&str]) -> Vec<String> {
    a.take_str(name)
        .map_or_else(|| default.iter().map(|s| s.to_string()).collect(), |v| v.split(',').map(String::from).collect())
}

fn matrix(mut a: Args, base: Config) -> CliResult<ExitCode> {
    use epochdb_nvm::matrix::{self, Grid};
    let engines = list(&mut a, "--engines", &ENGINES);
    let latencies = list(&mut a, "--latencies", &epochdb_nvm::pmem::Latency::NAMES);
    let runs: usize = a.take_int("--runs", 3, 1, 1000)?;
    let out = PathBuf::from(a.take_str("--out").unwrap_or_else(|| "target/nvm-matrix".into()));
    a.finish()?;
    if let Some(e) = engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
        return Err(format!("unknown engine {e:?} (one of {})", ENGINES.join(", ")).into());
    }
    if let Some(l) = latencies.iter().find(|l| epochdb_nvm::pmem::Latency::parse(l).is_none()) {
        return Err(format!("unknown latency {l:?} (dram, 2x or 8x)").into());
    }
    let grid = Grid::paper(engines, latencies, runs.max(1));
    let exe = std::env::current_exe().map_err(failed)?;
    let child = |c: &Config, n: u64| {
        let mut cmd = Command::new(&exe);
        cmd.args(child_args(c, n));
        cmd
    };
    let quiet = !base.progress;
    let base = Config { progress: false, ..base };
    let md = matrix::run(&grid, &base, &out, &child, &mut |line| {
        if !quiet {
            eprintln!("{line}");
        }
    })
    .map_err(failed)?;
    say!("{md}");
    say!("tables and charts in {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The arguments that make a child run the same configuration.
fn child_args(c: &Config, n: u64) -> Vec<String> {
    let mut v: Vec<String> = ["bench", "nvm", "--engine", &c.engine, "--latency", &c.latency].map(String::from).into();
    match &c.workload {
        Workload::Ycsb { mix, skew } => {
            v.extend(["--workload", "ycsb", "--mix", mix, "--skew", skew].map(String::from));
        }
        Workload::Tpcc => v.extend(["--workload", "tpcc"].map(String::from)),
    }
    v.extend(["--tuples".into(), c.tuples.to_string(), "--partitions".into(), c.partitions.to_string()]);
    v.extend(["--dir".into(), c.dir.display().to_string(), "--region-mib".into(), c.region_mib.to_string()]);
    v.extend(["--child".into(), n.to_string(), "--quiet".into()]);
    v
}

pub fn bench(mut a: Args) -> CliResult<ExitCode> {
    let cfg = config(&mut a)?;
    let json_path = a.take_str("--json");
    let recovery: Option<u64> = a.take_str("--recovery").map(|n| n.parse()).transpose().map_err(|_| "--recovery N")?;
    let child: Option<u64> = a.take_str("--child").map(|n| n.parse()).transpose().map_err(|_| "--child N")?;
    if a.flag("--matrix") {
        return matrix(a, cfg);
    }
    a.finish()?;
    if let Some(n) = child {
        testbed::child(&cfg, n).map_err(failed)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(n) = recovery {
        let exe = std::env::current_exe().map_err(failed)?;
        let mut cmd = Command::new(exe);
        cmd.args(child_args(&cfg, n));
        let (took, problems) = testbed::recovery(&cfg, cmd).map_err(failed)?;
        let consistency = if problems.is_empty() { "ok".to_string() } else { problems.join("; ") };
        say!(
            "{} {}: restart after {n} transactions and a SIGKILL took {:.3} ms; consistency: {consistency}",
            cfg.engine,
            cfg.workload.name(),
            took.as_secs_f64() * 1e3
        );
        if let Some(path) = json_path {
            let j = Json::new()
                .str("engine", &cfg.engine)
                .str("workload", &cfg.workload.name())
                .str("latency", &cfg.latency)
                .int("partitions", cfg.partitions as u64)
                .int("tuples", cfg.tuples)
                .int("recovery_txns", n)
                .num("recovery_ms", took.as_secs_f64() * 1e3);
            write_report(&path, j, &consistency)?;
        }
        return Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    let r = testbed::run(&cfg).map_err(failed)?;
    let f = &r.footprint;
    say!(
        "{} {} ({} latency, {} partitions): {:.0} txn/s; {:.1} lines ({:.0} bytes) persisted per txn; \
         footprint {:.1} MB (table {:.1}, index {:.1}, log {:.1}, checkpoint {:.1}, other {:.1}); loaded in {:.1} s",
        cfg.engine,
        cfg.workload.name(),
        cfg.latency,
        cfg.partitions,
        r.measured.throughput(),
        r.lines_per_txn,
        r.bytes_per_txn,
        f.total() as f64 / 1e6,
        f.table as f64 / 1e6,
        f.index as f64 / 1e6,
        f.log as f64 / 1e6,
        f.checkpoint as f64 / 1e6,
        f.other as f64 / 1e6,
        r.load.as_secs_f64()
    );
    if let Some(path) = json_path {
        write_report(&path, testbed::json(&cfg, &r), "not checked")?;
    }
    Ok(ExitCode::SUCCESS)
}

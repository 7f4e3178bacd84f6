//! `epochdb bench nvm`: the NVM storage-engine testbed (crate
//! `epochdb-nvm`, whose README describes it).

use crate::args::{cores, failed, output, run_secs, warmup_secs, CliResult, Output};
use crate::{say, write_report};
use clap::builder::PossibleValuesParser;
use clap::Args;
use epochdb_nvm::pmem::Latency;
use epochdb_nvm::testbed::{self, Config, Workload, ENGINES};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// `epochdb bench nvm` .
#[derive(Debug, Args)]
pub struct NvmArgs {
    /// Storage engine
    #[arg(long, default_value = "nvm-inp", value_parser = PossibleValuesParser::new(ENGINES))]
    engine: String,
    /// Workload; tpcc loads one warehouse per partition
    #[arg(long, default_value = "ycsb", value_parser = PossibleValuesParser::new(["ycsb", "tpcc"]))]
    workload: String,
    /// YCSB mix
    #[arg(long, default_value = "balanced", value_parser = PossibleValuesParser::new(["read-only", "read-heavy", "balanced", "write-heavy"]))]
    mix: String,
    /// YCSB skew: low (50% of transactions on 20% of tuples) or high (90% on 10%)
    #[arg(long, default_value = "low", value_parser = PossibleValuesParser::new(["low", "high"]))]
    skew: String,
    /// Extra NVM latency per read miss, per persisted cache line and per 64 bytes written to a file: 0, 160 or
    /// 1120 ns
    #[arg(long, default_value = "dram", value_parser = PossibleValuesParser::new(Latency::NAMES))]
    latency: String,
    /// YCSB tuples of 10 x 100 bytes, all partitions together
    #[arg(long, value_name = "N", default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(2..=1 << 40))]
    tuples: u64,
    /// Partitions, one executor thread each [default: all cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    partitions: Option<u32>,
    /// Measured seconds
    #[arg(long, value_name = "S", default_value = "10", value_parser = run_secs, allow_negative_numbers = true)]
    duration: f64,
    /// Seconds run before measuring
    #[arg(long, value_name = "S", default_value = "2", value_parser = warmup_secs, allow_negative_numbers = true)]
    warmup: f64,
    /// NVM files, one directory per partition; cleared first of the testbed's own files (anything else there
    /// stops the run)
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/epochdb-nvm")]
    dir: PathBuf,
    /// Region size per partition (a sparse file) [default: auto]
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1 << 24))]
    region_mib: u64,
    /// Instead of measuring throughput: run N transactions in a child process, SIGKILL it, and time the restart
    #[arg(long, value_name = "N", conflicts_with = "matrix")]
    recovery: Option<u64>,
    /// Write the report as JSON (`-`: to standard output, and the summary to standard error)
    #[arg(long, value_name = "FILE", value_parser = output, conflicts_with = "matrix")]
    json: Option<Output>,
    /// No progress lines
    #[arg(long)]
    quiet: bool,
    /// Run the study's grid instead: every engine on the four YCSB mixes at both skews and on TPC-C, at each
    /// latency, --runs times interleaved; then recovery after 1,000, 10,000 and 100,000 TPC-C transactions; writes
    /// matrix.md, matrix.json and SVG charts to --out
    #[arg(long)]
    matrix: bool,
    /// (--matrix) the engines, comma-separated [default: all six]
    #[arg(long, value_name = "E,E,...", value_delimiter = ',', requires = "matrix", value_parser = PossibleValuesParser::new(ENGINES))]
    engines: Vec<String>,
    /// (--matrix) the latencies, comma-separated [default: dram,2x,8x]
    #[arg(long, value_name = "L,L,...", value_delimiter = ',', requires = "matrix", value_parser = PossibleValuesParser::new(Latency::NAMES))]
    latencies: Vec<String>,
    /// (--matrix) rounds, interleaved
    #[arg(long, value_name = "N", default_value_t = 3, requires = "matrix", value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// (--matrix) where the tables and charts go
    #[arg(long, value_name = "DIR", default_value = "target/nvm-matrix", requires = "matrix")]
    out: PathBuf,
    /// (internal) the child of --recovery
    #[arg(long, value_name = "N", hide = true)]
    child: Option<u64>,
}

impl NvmArgs {
    fn config(&self) -> CliResult<Config> {
        let workload = match self.workload.as_str() {
            "tpcc" => Workload::Tpcc,
            _ => Workload::Ycsb { mix: self.mix.clone(), skew: self.skew.clone() },
        };
        let c = Config {
            engine: self.engine.clone(),
            workload,
            latency: self.latency.clone(),
            tuples: self.tuples,
            partitions: self.partitions.map_or_else(cores, |p| p as usize),
            duration: Duration::from_secs_f64(self.duration),
            warmup: Duration::from_secs_f64(self.warmup),
            dir: self.dir.clone(),
            region_mib: self.region_mib as usize,
            progress: !self.quiet,
        };
        if c.tuples < 2 * c.partitions as u64 {
            return Err("--tuples must be at least 2 per partition".into());
        }
        Ok(c)
    }
}

fn matrix(a: &NvmArgs, base: Config) -> CliResult<ExitCode> {
    use epochdb_nvm::matrix::{self, Grid};
    let or_all = |given: &[String], all: &[&str]| {
        if given.is_empty() {
            all.iter().map(|s| s.to_string()).collect()
        } else {
            given.to_vec()
        }
    };
    let engines = or_all(&a.engines, &ENGINES);
    let latencies = or_all(&a.latencies, &Latency::NAMES);
    let (runs, out) = (a.runs as usize, &a.out);
    let grid = Grid::paper(engines, latencies, runs);
    let exe = std::env::current_exe().map_err(failed)?;
    let child = |c: &Config, n: u64| {
        let mut cmd = Command::new(&exe);
        cmd.args(child_args(c, n));
        cmd
    };
    let quiet = !base.progress;
    let base = Config { progress: false, ..base };
    let md = matrix::run(&grid, &base, out, &child, &mut |line| {
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

pub fn bench(a: NvmArgs) -> CliResult<ExitCode> {
    crate::report_to(a.json.as_ref());
    let cfg = a.config()?;
    if a.matrix {
        return matrix(&a, cfg);
    }
    if let Some(n) = a.child {
        testbed::child(&cfg, n).map_err(failed)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(n) = a.recovery {
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
        if let Some(out) = &a.json {
            let mut r = testbed::report(&cfg, &testbed::Report::empty());
            (r.recovery_txns, r.recovery_ms) = (Some(n), Some(took.as_secs_f64() * 1e3));
            r.consistency = consistency;
            write_report(out, &r)?;
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
    if let Some(out) = &a.json {
        write_report(out, &testbed::report(&cfg, &r))?;
    }
    Ok(ExitCode::SUCCESS)
}

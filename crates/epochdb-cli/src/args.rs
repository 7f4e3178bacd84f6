//! What the subcommands' arguments share (clap derive): the run and
//! durability options of the benchmarks, value parsers that state the
//! allowed range, the output-file check, and the two ways a command fails.

use clap::{Args, ValueEnum};
use epochdb::{Durability, Options};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a command failed: a usage error found after parsing (exit status
/// 2, printed as clap prints its own) or a failure while running (1).
#[derive(Debug)]
pub enum CliError {
    Usage(String),
    Failed(String),
}

pub type CliResult<T> = Result<T, CliError>;

/// Errors found while checking arguments are usage errors.
impl From<String> for CliError {
    fn from(m: String) -> CliError {
        CliError::Usage(m)
    }
}

impl From<&str> for CliError {
    fn from(m: &str) -> CliError {
        CliError::Usage(m.into())
    }
}

/// A failure while running (an engine error, a failed write).
pub fn failed(e: impl Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// A finite number in `min..=max`; clap prefixes the message with the
/// option and the value.
fn number_in(s: &str, min: f64, max: f64) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a number between {min} and {max}")),
    }
}

/// Measured seconds: 0.001 to 1,000,000.
pub fn run_secs(s: &str) -> Result<f64, String> {
    number_in(s, 0.001, 1e6)
}

/// Warm-up seconds: 0 to 1,000,000.
pub fn warmup_secs(s: &str) -> Result<f64, String> {
    number_in(s, 0.0, 1e6)
}

/// Epoch length in milliseconds: 0.01 to 10,000.
pub fn epoch_ms(s: &str) -> Result<f64, String> {
    number_in(s, 0.01, 10_000.0)
}

/// An output file, or `-` for standard output. Its directory must exist
/// now, so that a run does not end by failing to write its results.
pub fn output(s: &str) -> Result<Output, String> {
    if s == "-" {
        return Ok(Output::Stdout);
    }
    let parent = Path::new(s).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if s.ends_with('/') || !parent.is_dir() {
        return Err(format!("{} is not a directory", parent.display()));
    }
    Ok(Output::File(s.into()))
}

/// Where a report goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

/// The engine variants (Silo §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VariantArg {
    /// Full transactions.
    Memsilo,
    /// The bare index: single-key gets and puts, no transaction tracking.
    Kv,
    /// Full transactions, every TID from one shared counter.
    GlobalTid,
}

impl VariantArg {
    pub fn variant(self) -> epochdb_workloads::engine::Variant {
        use epochdb_workloads::engine::Variant;
        match self {
            VariantArg::Memsilo => Variant::MemSilo,
            VariantArg::Kv => Variant::Kv,
            VariantArg::GlobalTid => Variant::GlobalTid,
        }
    }
}

/// What a benchmark runs and how it reports.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Worker threads [default: all cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Measured seconds
    #[arg(long, value_name = "S", default_value = "10", value_parser = run_secs, allow_negative_numbers = true)]
    pub duration: f64,
    /// Seconds run before measuring
    #[arg(long, value_name = "S", default_value = "2", value_parser = warmup_secs, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Transactions each thread commits after the warm-up, then stops, instead of running for --duration (as Silo's
    /// --ops-per-worker): runs of equal work, e.g. to compare the memory they leave
    #[arg(long, value_name = "N", conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub transactions: Option<u64>,
    /// Engine variant
    #[arg(long, value_enum, default_value_t = VariantArg::Memsilo)]
    pub variant: VariantArg,
    /// Write the report as JSON (`-`: to standard output, and the summary to standard error)
    #[arg(long, value_name = "FILE", value_parser = output)]
    pub json: Option<Output>,
    /// Draw throughput and mean latency per second as SVG, checkpoint periods shaded
    #[arg(long, value_name = "FILE", value_parser = output)]
    pub plot: Option<Output>,
    /// No progress bars
    #[arg(long)]
    pub quiet: bool,
}

impl RunArgs {
    /// Sends the summary to standard error if the report goes to standard
    /// output; the report and the plot cannot both go there.
    pub fn direct_output(&self) -> CliResult<()> {
        if self.json == Some(Output::Stdout) && self.plot == Some(Output::Stdout) {
            return Err("--json - and --plot - cannot both write to standard output".into());
        }
        crate::report_to(self.json.as_ref());
        Ok(())
    }

    pub fn settings(&self) -> epochdb_workloads::driver::Settings {
        epochdb_workloads::driver::Settings {
            threads: self.threads.map_or_else(cores, |t| t as usize),
            duration: Duration::from_secs_f64(self.duration),
            warmup: Duration::from_secs_f64(self.warmup),
            transactions: self.transactions,
            progress: !self.quiet,
        }
    }
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The durability modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// In memory only
    Off,
    /// Value logging (SiloR)
    Log,
    /// Value logging and fuzzy checkpoints
    #[value(name = "log+checkpoint")]
    LogAndCheckpoint,
    /// Delta logging (Gawain): updates log only the changed columns
    Delta,
    /// Delta logging and incremental checkpoints
    #[value(name = "delta+checkpoint")]
    DeltaAndCheckpoint,
}

impl DurabilityArg {
    pub fn mode(self) -> Durability {
        match self {
            DurabilityArg::Off => Durability::Off,
            DurabilityArg::Log => Durability::Log,
            DurabilityArg::LogAndCheckpoint => Durability::LogAndCheckpoint,
            DurabilityArg::Delta => Durability::Delta,
            DurabilityArg::DeltaAndCheckpoint => Durability::DeltaAndCheckpoint,
        }
    }
}

/// The benchmarks' durability options.
#[derive(Debug, Args)]
pub struct DurabilityArgs {
    /// Durability mode
    #[arg(long, value_enum, default_value_t = DurabilityArg::Off)]
    pub durability: DurabilityArg,
    /// Data directory [default: epochdb-bench]. A benchmark loads afresh into an empty one: a database
    /// already there is refused unless --overwrite. Needs --durability
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Delete the database in --data-dir (and in its replicas' directories) before loading. Refused all the
    /// same if a process has it open or it holds a file epochdb did not write. Needs --durability
    #[arg(long)]
    pub overwrite: bool,
    /// A log directory, one logger each; repeat for several disks [default: DATA-DIR/log]. Needs --durability
    #[arg(long = "log-dir", value_name = "DIR")]
    pub log_dirs: Vec<PathBuf>,
    /// Seconds from one checkpoint's end to the next [default: 10]. Needs a checkpointing --durability
    #[arg(long, value_name = "S", value_parser = run_secs, allow_negative_numbers = true)]
    pub checkpoint_interval: Option<f64>,
    /// Epoch length in milliseconds
    #[arg(long, value_name = "MS", default_value = "40", value_parser = epoch_ms, allow_negative_numbers = true)]
    pub epoch_ms: f64,
}

impl DurabilityArgs {
    /// The engine options; options that would do nothing are usage errors.
    pub fn options(&self) -> CliResult<Options> {
        let durability = self.durability.mode();
        let options = Options { epoch_interval: Duration::from_secs_f64(self.epoch_ms / 1e3), ..Options::default() };
        if durability == Durability::Off {
            let given = [
                ("--data-dir", self.data_dir.is_some()),
                ("--log-dir", !self.log_dirs.is_empty()),
                ("--checkpoint-interval", self.checkpoint_interval.is_some()),
                ("--overwrite", self.overwrite),
            ];
            if let Some((flag, _)) = given.into_iter().find(|g| g.1) {
                return Err(
                    format!("{flag} needs --durability (log, log+checkpoint, delta or delta+checkpoint)").into()
                );
            }
            return Ok(options);
        }
        if !durability.checkpoints() && self.checkpoint_interval.is_some() {
            return Err("--checkpoint-interval needs --durability log+checkpoint or delta+checkpoint".into());
        }
        let data_dir = self.data_dir.clone().unwrap_or_else(|| BENCH_DATA_DIR.into());
        let mut options = Options { durability, data_dir: Some(data_dir), ..options };
        options.log.dirs.clone_from(&self.log_dirs);
        options.checkpoint.interval = Duration::from_secs_f64(self.checkpoint_interval.unwrap_or(10.0));
        Ok(options)
    }
}

/// A benchmark's data directory unless told otherwise: its own, apart
/// from the server's, so that a benchmark never meets the server's data.
pub const BENCH_DATA_DIR: &str = "epochdb-bench";

/// The server's data directory unless told otherwise: `EPOCHDB_DATA_DIR`,
/// else `epochdb-data`.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("EPOCHDB_DATA_DIR").filter(|d| !d.is_empty()).map_or_else(|| "epochdb-data".into(), Into::into)
}

/// A data directory to read, and its log directories.
#[derive(Debug, Args)]
pub struct DataDirArgs {
    /// The data directory
    #[arg(long, value_name = "DIR", env = "EPOCHDB_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Its log directories [default: the ones the manifest records]
    #[arg(long = "log-dir", value_name = "DIR")]
    pub log_dirs: Vec<PathBuf>,
}

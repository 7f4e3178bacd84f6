//! `epochdb`: the command line (clap). `epochdb --help` and each
//! subcommand's `--help` list the options; `epochdb completions bash`
//! prints a completion script.
//!
//! Exit status: 0 success; 1 a failure while running, a failed
//! consistency check, or damage found; 2 a usage error; 3 a control-plane
//! node (`serve --node-id`) that another node's appointment deposed.

/// Records and index nodes come from the engine's own arena (huge pages,
/// `epochdb::arena`); what is left for the global allocator is small
/// objects with short and long lives mixed (transaction buffers, log
/// buffers, separator keys, connections). mimalloc's per-thread free lists
/// cost less than glibc's bins here (YCSB ran about 7% slower on glibc
/// side by side).
/// Its `no_thp` feature keeps it from asking for transparent huge pages
/// for its own arena, which made that arena resident 2 MiB at a time:
/// 4-16 MB more peak memory in `bench tpcc` and `bench ycsb` for no
/// measurable speed. The engine itself is
/// allocator-agnostic: this is the application's choice, and embedders can
/// make the same one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod bench;
mod churn;
mod cluster;
mod datacmd;
#[cfg(feature = "lab")]
mod nvm;
mod remote;
mod replicas;
mod serve;
mod signals;

use args::{failed, CliError, CliResult, Output};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

const EXIT_STATUS: &str = "\
Exit status: 0 success; 1 a failure while running, a failed check, or damage found; 2 a usage error;
3 (serve --node-id) another node was appointed primary: restart it to rejoin as a backup.
Logging: the engine's events go to standard error at info level; RUST_LOG changes it (RUST_LOG=debug, RUST_LOG=off).";

/// epochdb: a multicore in-memory transactional database
#[derive(Debug, Parser)]
#[command(name = "epochdb", version, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Made once per process: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a benchmark (YCSB, TPC-C, the NVM testbed, range scans under churn)
    #[command(subcommand)]
    Bench(Bench),
    /// Recover a data directory as opening it would (writes the pepoch file and manifest), and report
    Recover(datacmd::RecoverArgs),
    /// Check a data directory: read every block and replay it in memory, writing nothing
    Verify(datacmd::VerifyArgs),
    /// Summarize a data directory: pepoch, tables, checkpoint, each log file, any damage
    Inspect(datacmd::InspectArgs),
    /// Serve the database over the Redis protocol (redis-cli, redis-benchmark and client libraries work)
    Serve(serve::ServeArgs),
    /// Run a replication backup: receive a primary's log into a data directory of its own
    Replica(serve::ReplicaArgs),
    /// Run a control-plane witness: a Raft voter with no data, the third vote of a two-machine deployment
    Witness(cluster::WitnessArgs),
    /// Promote a replica (`serve --replicaof`) to a primary in place: REPLICAOF NO ONE to a running server
    Promote(remote::PromoteArgs),
    /// Print a running server's replication state: role, term, epochs, lag (INFO replication)
    Status(remote::StatusArgs),
    /// Add or remove a voter of a control plane (`serve --node-id`), through any of its data nodes
    Member(remote::MemberArgs),
    /// Print a shell completion script (e.g. `epochdb completions bash > /etc/bash_completion.d/epochdb`)
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Bench {
    /// YCSB: Silo's 80/20 read/read-modify-write mix, the NVM study's mixes, or YCSB core A-F
    Ycsb(bench::YcsbArgs),
    /// The full TPC-C: nine tables, five transactions, consistency conditions 1-4
    Tpcc(bench::TpccArgs),
    /// The NVM storage-engine testbed: six engines on emulated persistent memory (built with --features lab)
    #[cfg(feature = "lab")]
    Nvm(nvm::NvmArgs),
    /// Range scans under insert/delete churn, in memory
    Churn(churn::ChurnArgs),
}

/// Set when a report goes to standard output: the human summary then goes
/// to standard error, so that standard output is only JSON.
static SUMMARY_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// Prints a summary line to stdout (stderr when the report is on stdout),
/// ignoring a closed pipe (`epochdb ... | head -1`): the run's results are
/// already in the JSON report, if one was asked for.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if $crate::summary_to_stderr() {
            let _ = writeln!(std::io::stderr(), $($arg)*);
        } else {
            let _ = writeln!(std::io::stdout(), $($arg)*);
        }
    }};
}

pub(crate) fn summary_to_stderr() -> bool {
    SUMMARY_TO_STDERR.load(Ordering::Relaxed)
}

/// Sends the summary to standard error if the report goes to standard
/// output. Call before anything is printed.
pub(crate) fn report_to(json: Option<&Output>) {
    SUMMARY_TO_STDERR.store(json == Some(&Output::Stdout), Ordering::Relaxed);
}

/// The engine's `log` events on standard error, filtered by `RUST_LOG`
/// (info by default), printed without tearing a progress bar.
struct Logger(env_logger::Logger);

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.0.matches(record) {
            let level = record.level().as_str().to_ascii_lowercase();
            epochdb_workloads::progress::suspend(|| eprintln!("epochdb {level}: {}", record.args()));
        }
    }

    fn flush(&self) {}
}

fn init_logging() {
    let inner = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(Logger(inner))).is_ok() {
        log::set_max_level(max);
    }
}

fn main() -> ExitCode {
    // clap prints usage errors and exits with 2; --help and --version with 0.
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logging();
    match run(cli) {
        Ok(code) => code,
        // Found after parsing (options that cannot work together, a load
        // that cannot fit): reported in clap's shape, with clap's status.
        Err(CliError::Usage(e)) => {
            eprintln!("error: {e}\n\nFor more information, try '--help'.");
            ExitCode::from(2)
        }
        Err(CliError::Failed(e)) => {
            eprintln!("epochdb: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, where an option given twice takes its last value
/// (as scripts that append to a base command expect), in every subcommand.
fn command() -> clap::Command {
    fn last_wins(c: clap::Command) -> clap::Command {
        c.args_override_self(true).mut_subcommands(last_wins)
    }
    last_wins(Cli::command())
}

fn run(cli: Cli) -> CliResult<ExitCode> {
    match cli.command {
        Command::Bench(Bench::Ycsb(a)) => bench::ycsb(a),
        Command::Bench(Bench::Tpcc(a)) => bench::tpcc(a),
        #[cfg(feature = "lab")]
        Command::Bench(Bench::Nvm(a)) => nvm::bench(a),
        Command::Bench(Bench::Churn(a)) => churn::bench(a),
        Command::Recover(a) => datacmd::recover(a),
        Command::Verify(a) => datacmd::verify(a),
        Command::Inspect(a) => datacmd::inspect(a),
        Command::Serve(a) => serve::serve(a),
        Command::Replica(a) => serve::replica(a),
        Command::Witness(a) => cluster::witness(a),
        Command::Promote(a) => remote::promote(a),
        Command::Status(a) => remote::status(a),
        Command::Member(a) => remote::member(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "epochdb", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes a report as JSON to `out` (a file, or standard output).
pub(crate) fn write_report(out: &Output, report: &impl Serialize) -> CliResult<()> {
    write_text(out, &epochdb_workloads::report::to_json(report))
}

/// Writes `text` to `out` (a file, or standard output).
pub(crate) fn write_text(out: &Output, text: &str) -> CliResult<()> {
    match out {
        Output::Stdout => {
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(text.as_bytes());
            Ok(())
        }
        Output::File(p) => std::fs::write(p, text).map_err(|e| failed(format!("{}: {e}", p.display()))),
    }
}

/// Failure (1) only when a requested consistency check failed.
fn exit_status(check: bool, consistency: &str) -> ExitCode {
    if !check || consistency == "ok" {
        ExitCode::SUCCESS
    } else {
        eprintln!("consistency check failed: {consistency}");
        ExitCode::FAILURE
    }
}

//! `epochdb`: the command line.
//!
//! ```text
//! epochdb bench ycsb|tpcc|nvm [options]   benchmarks (see `epochdb help`)
//! epochdb recover --data-dir DIR       recover a data directory and report
//! epochdb verify --data-dir DIR        check a data directory, writing nothing
//! epochdb inspect --data-dir DIR       summarize logs, pepoch, checkpoint
//! ```
//!
//! Exit status: 0 success; 1 a failure while running, a failed
//! consistency check, or damage found; 2 a usage error.

/// Records, index nodes and log buffers are many small objects with short
/// and long lives mixed. mimalloc's per-thread free lists cost less than
/// glibc's bins here, and it maps its arenas so that the kernel backs them
/// with transparent 2 MiB pages, so a tree descent takes far fewer TLB
/// misses (measured in the README). The engine itself is allocator-agnostic:
/// this is the application's choice, and embedders can make the same one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod bench;
mod churn;
mod datacmd;
mod nvm;

use args::{failed, Args, CliError, CliResult};
use epochdb_workloads::report;
use std::process::ExitCode;

const HELP: &str = "\
epochdb: a multicore in-memory transactional database

USAGE:
    epochdb bench ycsb [OPTIONS]
    epochdb bench tpcc [OPTIONS]
    epochdb bench nvm [OPTIONS]
    epochdb bench churn [--duration S] [--epoch-ms MS] [--snapshot-epochs K]
                        [--rows N] [--scan N] [--keep-tombstones]
    epochdb recover --data-dir DIR [--log-dir DIR ...] [--threads N]
                    [--check tpcc|ycsb] [--json FILE] [--salvage] [--quiet]
    epochdb verify --data-dir DIR [--log-dir DIR ...] [--threads N]
                   [--check tpcc|ycsb] [--json FILE] [--quiet]
    epochdb inspect --data-dir DIR [--log-dir DIR ...]
    epochdb help

EXIT STATUS: 0 success; 1 a failure while running, a failed check, or
damage found; 2 a usage error.

BENCH OPTIONS (defaults in brackets):
    --threads N         worker threads, 1-1024 [all cores]
    --duration S        measured seconds, 0.001-1000000 [10]
    --warmup S          seconds run before measuring, 0-1000000 [2]
    --variant V         memsilo | kv | global-tid [memsilo]
    --json FILE         write the report as JSON
    --plot FILE         draw throughput and mean latency per second as SVG
    --quiet             no progress line

DURABILITY OPTIONS (bench):
    --durability D      off | log | log+checkpoint | delta | delta+checkpoint [off]
    --data-dir DIR      data directory [epochdb-data]; a benchmark loads
                        afresh, so the database there is deleted first:
                        refused if a process has it open or it holds a file
                        epochdb did not write
    --log-dir DIR       a log directory, one logger each; repeat for several
                        disks [DATA-DIR/log]
    --checkpoint-interval S
                        seconds from one checkpoint's end to the next,
                        0.001-1000000 [10] (checkpointing modes only)
    --epoch-ms MS       epoch length, 0.01-10000 [40]
    --data-dir, --log-dir and --checkpoint-interval need --durability.

RECOVER AND VERIFY OPTIONS:
    --log-dir DIR       the log directories [the ones the manifest records]
    --threads N         recovery workers, fed by one reader thread [all cores]
    --check W           after recovery, check tpcc consistency conditions
                        1-4 (and that the load finished), or that every ycsb
                        row is well formed
    --salvage           (recover) recover what is valid past corruption:
                        skip damaged blocks and cut the state back to the
                        epoch before the first damaged log block
    recover writes (pepoch, manifest, a crashed data.log sealed); verify
    reads every block, replays into memory and writes nothing.

YCSB OPTIONS:
    --keys N            rows loaded, at least 2 [4000000]
    --mix M             silo | silor | read-only | read-heavy | balanced |
                        write-heavy | a | b | c | d | e | f [silo]
    --dist D            uniform | zipfian | low | high | latest
                        [the mix's own: silo/silor uniform, NVM mixes low,
                         a-f zipfian, d latest]
    --columns N         columns of 100 bytes per row, 1-1000 [1 for silo/silor, else 10]
    --check             count the rows after the run

CHURN (range scans under insert/delete churn; in memory):
    One thread inserts at the head of a queue of --rows rows [10000] and
    deletes at its tail; another scans the first --scan rows [100] in
    read/write transactions. Reports scans committed and records visited
    per scan. --snapshot-epochs K [25]; --keep-tombstones keeps deleted
    records until snapshots no longer need them, as Silo does, for
    comparison.

TPC-C OPTIONS:
    --warehouses N      warehouses, and no more than memory holds
                        (about 140 MB each) [= threads]; thread t's home is
                        t % N + 1
    --snapshot-reads    run order-status and stock-level as snapshot
                        transactions
    --check             check consistency conditions 1-4 (clause 3.3.2)
                        after the run; exit status 1 if one fails
";

/// Prints to stdout, ignoring a closed pipe (`epochdb ... | head -1`): the
/// run's results are already in the JSON report, if one was asked for.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(CliError::Usage(e)) => {
            eprintln!("epochdb: {e}");
            eprintln!("run `epochdb help` for usage");
            ExitCode::from(2)
        }
        Err(CliError::Failed(e)) => {
            eprintln!("epochdb: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> CliResult<ExitCode> {
    match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            say!("{HELP}\n{}", nvm::HELP);
            Ok(ExitCode::SUCCESS)
        }
        Some("bench") => match args.get(1).map(String::as_str) {
            Some("ycsb") => bench::ycsb(Args::parse(&args[2..], bench::FLAGS)?),
            Some("tpcc") => bench::tpcc(Args::parse(&args[2..], bench::FLAGS)?),
            Some("nvm") => nvm::bench(Args::parse(&args[2..], nvm::FLAGS)?),
            Some("churn") => churn::bench(Args::parse(&args[2..], churn::FLAGS)?),
            other => Err(format!("unknown benchmark {other:?} (ycsb, tpcc, nvm or churn)").into()),
        },
        Some("recover") => datacmd::recover(Args::parse(&args[1..], datacmd::RECOVER_FLAGS)?),
        Some("verify") => datacmd::verify(Args::parse(&args[1..], datacmd::VERIFY_FLAGS)?),
        Some("inspect") => datacmd::inspect(Args::parse(&args[1..], &[])?),
        Some(other) => Err(format!("unknown command {other:?}").into()),
    }
}

/// Adds the fields every report ends with and writes it to `path`.
pub(crate) fn write_report(path: &str, j: report::Json, consistency: &str) -> CliResult<()> {
    let j = j.str("consistency", consistency).obj("run", report::provenance());
    std::fs::write(path, j.render(0) + "\n").map_err(|e| failed(format!("{path}: {e}")))
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

//! `epochdb`: the command line.
//!
//! ```text
//! epochdb bench ycsb [options]     YCSB on epochdb (see `epochdb help`)
//! epochdb bench tpcc [options]     TPC-C (not yet implemented)
//! ```

#[cfg(feature = "bump-alloc")]
mod bump;

#[cfg(feature = "bump-alloc")]
#[global_allocator]
static ALLOCATOR: bump::Bump = bump::Bump::new();

use epochdb::Options;
use epochdb_workloads::driver::{self, Settings};
use epochdb_workloads::engine::{Engine, EpochDb, Variant};
use epochdb_workloads::report;
use epochdb_workloads::ycsb::{self, Config, Distribution, Ycsb};
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

const HELP: &str = "\
epochdb: a multicore in-memory transactional database

USAGE:
    epochdb bench ycsb [OPTIONS]
    epochdb bench tpcc [OPTIONS]
    epochdb help

BENCH OPTIONS (defaults in brackets):
    --threads N         worker threads [all cores]
    --duration S        measured seconds [10]
    --warmup S          seconds run before measuring [2]
    --variant V         memsilo | kv | global-tid [memsilo]
    --json FILE         write the report as JSON
    --plot FILE         draw throughput and mean latency per second as SVG
    --quiet             no progress line

YCSB OPTIONS:
    --keys N            rows loaded [4000000]
    --mix M             silo | silor | read-only | read-heavy | balanced |
                        write-heavy | a | b | c | d | e | f [silo]
    --dist D            uniform | zipfian | low | high | latest
                        [the mix's own: silo/silor uniform, NVM mixes low,
                         a-f zipfian, d latest]
    --columns N         columns of 100 bytes per row [1 for silo/silor, else 10]
    --check             count the rows after the run

TPC-C OPTIONS:
    --warehouses N      warehouses [= threads]; thread t's home is t % N + 1
    --snapshot-reads    run order-status and stock-level as snapshot
                        transactions
    --check             check consistency conditions 1-4 (clause 3.3.2)
                        after the run; exit status 1 if one fails
";

/// Prints to stdout, ignoring a closed pipe (`epochdb ... | head -1`): the
/// run's results are already in the JSON report, if one was asked for.
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
        Err(e) => {
            eprintln!("epochdb: {e}");
            eprintln!("run `epochdb help` for usage");
            ExitCode::from(2)
        }
    }
}

/// `--name value` and `--flag` arguments.
struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

const FLAGS: [&str; 3] = ["--quiet", "--check", "--snapshot-reads"];

impl Args {
    fn parse(args: &[String]) -> Result<Args, String> {
        let (mut values, mut flags) = (HashMap::new(), Vec::new());
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if !a.starts_with("--") {
                return Err(format!("unexpected argument {a:?}"));
            }
            if FLAGS.contains(&a.as_str()) {
                flags.push(a.clone());
            } else {
                let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                values.insert(a.clone(), v.clone());
            }
        }
        Ok(Args { values, flags })
    }

    fn take<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.values.remove(name) {
            Some(v) => v.parse().map_err(|_| format!("{name}: cannot parse {v:?}")),
            None => Ok(default),
        }
    }

    fn take_str(&mut self, name: &str) -> Option<String> {
        self.values.remove(name)
    }

    fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// Fails on options nobody consumed (typos must not pass silently).
    fn finish(self) -> Result<(), String> {
        match self.values.keys().next() {
            Some(k) => Err(format!("unknown option {k}")),
            None => Ok(()),
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            say!("{HELP}");
            Ok(ExitCode::SUCCESS)
        }
        Some("bench") => match args.get(1).map(String::as_str) {
            Some("ycsb") => bench_ycsb(Args::parse(&args[2..])?),
            Some("tpcc") => bench_tpcc(Args::parse(&args[2..])?),
            other => Err(format!("unknown benchmark {other:?} (ycsb)")),
        },
        Some(other) => Err(format!("unknown command {other:?}")),
    }
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// Adds the fields every report ends with and writes it to `path`.
fn write_report(path: &str, j: report::Json, consistency: &str) -> Result<(), String> {
    let j = j.str("consistency", consistency).obj("run", report::provenance());
    std::fs::write(path, j.render(0) + "\n").map_err(|e| format!("{path}: {e}"))
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

/// Writes the `--plot` SVG, if one was asked for.
fn plot(path: Option<String>, title: &str, m: &driver::Measured) -> Result<(), String> {
    match path {
        Some(p) => std::fs::write(&p, epochdb_workloads::plot::svg(title, &m.timeseries, &m.latency_series_us))
            .map_err(|e| format!("{p}: {e}")),
        None => Ok(()),
    }
}

/// The options every benchmark shares.
fn common(a: &mut Args) -> Result<(Settings, Variant), String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let settings = Settings {
        threads: a.take("--threads", cores)?,
        duration: Duration::from_secs_f64(a.take("--duration", 10.0)?),
        warmup: Duration::from_secs_f64(a.take("--warmup", 2.0)?),
        progress: !a.flag("--quiet"),
    };
    if settings.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let name = a.take_str("--variant").unwrap_or_else(|| "memsilo".into());
    let variant = Variant::parse(&name).ok_or_else(|| format!("unknown variant {name:?}"))?;
    Ok((settings, variant))
}

fn bench_tpcc(mut a: Args) -> Result<ExitCode, String> {
    use epochdb_workloads::tpcc::{InputStats, Tpcc, TRANSACTIONS};
    let (settings, variant) = common(&mut a)?;
    let warehouses: u32 = a.take("--warehouses", settings.threads as u32)?;
    let snapshot_reads = a.flag("--snapshot-reads");
    let check = a.flag("--check");
    let json_path = a.take_str("--json");
    let plot_path = a.take_str("--plot");
    a.finish()?;
    if variant == Variant::Kv {
        return Err("TPC-C needs transactions: use memsilo or global-tid".into());
    }
    let mut engine = EpochDb::open(variant, Options::default()).map_err(|e| e.to_string())?;
    engine.snapshot_reads = snapshot_reads;
    let load_start = std::time::Instant::now();
    let tpcc = Tpcc::load(&engine, warehouses, settings.threads).map_err(|e| e.to_string())?;
    let load_s = load_start.elapsed().as_secs_f64();
    if settings.progress {
        eprintln!("loaded {warehouses} warehouses in {load_s:.1} s");
    }
    if snapshot_reads {
        engine.wait_for_snapshot_of_now();
    }
    let (m, terminals) =
        driver::run(&engine, &settings, |t| tpcc.client(t, 0xC0FFEE + t as u64)).map_err(|e| e.to_string())?;
    let mut inputs = InputStats::default();
    for t in &terminals {
        inputs.add(&t.stats);
    }
    let title = format!("TPC-C, {warehouses} warehouses, {} threads, {}", settings.threads, engine.name());
    plot(plot_path, &title, &m)?;
    let consistency = if check {
        let mut w = engine.worker().map_err(|e| e.to_string())?;
        let failures = tpcc.check(&mut *w).map_err(|e| e.to_string())?;
        if failures.is_empty() {
            "ok".to_string()
        } else {
            failures.join("; ")
        }
    } else {
        "not checked".to_string()
    };
    say!("tpcc with {warehouses} warehouses on {} with {} threads: {}", engine.name(), settings.threads, m.summary());
    let mut checks = report::Json::new();
    for (name, value, low, high) in inputs.checks() {
        let ok = (low..=high).contains(&value);
        say!("  {name:<36} {value:>8.3}  (spec {low}..{high}{})", if ok { "" } else { ", outside" });
        checks = checks.num(name, value);
    }
    say!("  consistency: {consistency}");
    if let Some(path) = json_path {
        let mut transactions = report::Json::new();
        for (name, n) in TRANSACTIONS.iter().zip(inputs.by_type) {
            transactions = transactions.int(name, n);
        }
        let j = report::base("tpcc", engine.name(), settings.threads, &m)
            .int("warehouses", warehouses as u64)
            .str("read_only_as_snapshots", if snapshot_reads { "yes" } else { "no" })
            .num("warmup_s", settings.warmup.as_secs_f64())
            .num("load_s", load_s)
            .obj("transactions", transactions)
            .obj("input_checks", checks);
        write_report(&path, j, &consistency)?;
    }
    Ok(exit_status(check, &consistency))
}

fn bench_ycsb(mut a: Args) -> Result<ExitCode, String> {
    let (settings, variant) = common(&mut a)?;
    let keys: u64 = a.take("--keys", 4_000_000)?;
    let mix = a.take_str("--mix").unwrap_or_else(|| "silo".into());
    let mut config =
        Config::preset(&mix, keys).ok_or_else(|| format!("unknown mix {mix:?} (one of {})", ycsb::MIXES.join(", ")))?;
    if let Some(d) = a.take_str("--dist") {
        config.distribution = Distribution::parse(&d).ok_or_else(|| format!("unknown distribution {d:?}"))?;
    }
    config.columns = a.take("--columns", config.columns)?;
    let json_path = a.take_str("--json");
    let plot_path = a.take_str("--plot");
    let check = a.flag("--check");
    a.finish()?;
    if keys < 2 || config.columns == 0 {
        return Err("--keys must be at least 2 and --columns at least 1".into());
    }
    if variant == Variant::Kv && (config.mix.insert > 0 || config.mix.scan > 0) {
        return Err("the kv variant has only gets and puts: use a mix without inserts or scans".into());
    }

    let engine = EpochDb::open(variant, Options::default()).map_err(|e| e.to_string())?;
    let rss_before = rss_bytes();
    let load_start = std::time::Instant::now();
    let y = Ycsb::load(&engine, config.clone(), settings.threads).map_err(|e| e.to_string())?;
    let load_s = load_start.elapsed().as_secs_f64();
    let load_rss = rss_bytes().saturating_sub(rss_before);
    if settings.progress {
        eprintln!("loaded {keys} rows in {load_s:.1} s ({:.1} MB resident)", load_rss as f64 / 1e6);
    }
    let (m, clients) = driver::run(&engine, &settings, |t| y.client(0x5EED + t as u64)).map_err(|e| e.to_string())?;
    let mut transactions = report::Json::new();
    for (i, kind) in ycsb::KINDS.iter().enumerate() {
        transactions = transactions.int(kind, clients.iter().map(|c| c.counts[i]).sum());
    }
    let title = format!("YCSB {mix}, {keys} keys, {} threads, {}", settings.threads, engine.name());
    plot(plot_path, &title, &m)?;

    let consistency = if check { check_rows(&engine, &y)? } else { "not checked".to_string() };
    let per_record = load_rss as f64 / keys as f64;
    say!(
        "ycsb {mix} ({}) on {} with {} threads: {}",
        config.distribution.name(),
        engine.name(),
        settings.threads,
        m.summary()
    );
    say!(
        "memory: {:.1} MB resident after loading, {:.0} bytes per row ({} bytes of key and value)",
        load_rss as f64 / 1e6,
        per_record,
        8 + config.value_len()
    );
    if let Some(path) = json_path {
        let j = report::base("ycsb", engine.name(), settings.threads, &m)
            .str("mix", &mix)
            .obj("transactions", transactions)
            .str("distribution", &config.distribution.name())
            .int("keys", keys)
            .int("value_bytes", config.value_len() as u64)
            .num("warmup_s", settings.warmup.as_secs_f64())
            .num("load_s", load_s)
            .int("load_rss_bytes", load_rss)
            .num("rss_bytes_per_row", per_record);
        write_report(&path, j, &consistency)?;
    }
    Ok(exit_status(check, &consistency))
}

/// After a YCSB run every loaded or inserted row must still be there.
/// Counted through the database itself, whatever the variant.
fn check_rows(engine: &EpochDb, y: &Ycsb) -> Result<String, String> {
    let mut w = engine.database().worker().map_err(|e| e.to_string())?;
    let table = epochdb::TableId(y.table());
    let rows = w.run(|txn| txn.scan(table, .., usize::MAX, |_, _| true)).map_err(|e| e.to_string())? as u64;
    let want = y.rows();
    Ok(if rows == want { "ok".into() } else { format!("{rows} rows, expected {want}") })
}

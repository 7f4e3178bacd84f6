//! `epochdb`: the command line.
//!
//! ```text
//! epochdb bench ycsb|tpcc|nvm [options]   benchmarks (see `epochdb help`)
//! epochdb recover --data-dir DIR       recover a data directory and report
//! epochdb inspect --data-dir DIR       summarize logs, pepoch, checkpoint
//! ```

/// Records, index nodes and log buffers are many small objects with short
/// and long lives mixed. mimalloc's per-thread free lists cost less than
/// glibc's bins here, and it maps its arenas so that the kernel backs them
/// with transparent 2 MiB pages, so a tree descent takes far fewer TLB
/// misses (measured in the README). The engine itself is allocator-agnostic:
/// this is the application's choice, and embedders can make the same one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod nvm;

use epochdb::{Durability, Options};
use epochdb_workloads::driver::{self, Settings};
use epochdb_workloads::engine::{Engine, EpochDb, Variant};
use epochdb_workloads::report;
use epochdb_workloads::ycsb::{self, Config, Distribution, Ycsb};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const HELP: &str = "\
epochdb: a multicore in-memory transactional database

USAGE:
    epochdb bench ycsb [OPTIONS]
    epochdb bench tpcc [OPTIONS]
    epochdb bench nvm [OPTIONS]
    epochdb recover --data-dir DIR [--log-dir DIR ...] [--threads N]
                    [--check tpcc|ycsb] [--json FILE] [--salvage] [--quiet]
    epochdb inspect --data-dir DIR [--log-dir DIR ...]
    epochdb help

BENCH OPTIONS (defaults in brackets):
    --threads N         worker threads [all cores]
    --duration S        measured seconds [10]
    --warmup S          seconds run before measuring [2]
    --variant V         memsilo | kv | global-tid [memsilo]
    --json FILE         write the report as JSON
    --plot FILE         draw throughput and mean latency per second as SVG
    --quiet             no progress line

DURABILITY OPTIONS (bench):
    --durability D      off | log | log+checkpoint | delta | delta+checkpoint [off]
    --data-dir DIR      data directory [epochdb-data]; emptied first if it
                        holds an epochdb database (a benchmark loads afresh)
    --log-dir DIR       a log directory, one logger each; repeat for several
                        disks [DATA-DIR/log]
    --checkpoint-interval S
                        seconds from one checkpoint's end to the next [10]
    --epoch-ms MS       epoch length [40]

RECOVER OPTIONS:
    --threads N         recovery workers, fed by one reader thread [all cores]
    --check W           after recovery, check tpcc consistency conditions
                        1-4, or that every ycsb row is well formed
    --salvage           recover what is valid past corruption instead of
                        stopping at it

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
        Err(e) => {
            eprintln!("epochdb: {e}");
            eprintln!("run `epochdb help` for usage");
            ExitCode::from(2)
        }
    }
}

/// `--name value` and `--flag` arguments.
pub(crate) struct Args {
    /// Every value given for each option, in order.
    values: HashMap<String, Vec<String>>,
    flags: Vec<String>,
}

/// Options that take no value, per command.
const BENCH_FLAGS: &[&str] = &["--quiet", "--check", "--snapshot-reads"];
const RECOVER_FLAGS: &[&str] = &["--quiet", "--salvage"];

impl Args {
    fn parse(args: &[String], flag_names: &[&str]) -> Result<Args, String> {
        let (mut values, mut flags) = (HashMap::new(), Vec::new());
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if !a.starts_with("--") {
                return Err(format!("unexpected argument {a:?}"));
            }
            if flag_names.contains(&a.as_str()) {
                flags.push(a.clone());
            } else {
                let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                values.entry(a.clone()).or_insert_with(Vec::new).push(v.clone());
            }
        }
        Ok(Args { values, flags })
    }

    fn take<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.take_str(name) {
            Some(v) => v.parse().map_err(|_| format!("{name}: cannot parse {v:?}")),
            None => Ok(default),
        }
    }

    /// The last value given for `name`.
    fn take_str(&mut self, name: &str) -> Option<String> {
        self.values.remove(name).and_then(|mut v| v.pop())
    }

    /// Every value given for `name`, as paths.
    fn take_paths(&mut self, name: &str) -> Vec<PathBuf> {
        self.values.remove(name).unwrap_or_default().into_iter().map(PathBuf::from).collect()
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
            say!("{HELP}\n{}", nvm::HELP);
            Ok(ExitCode::SUCCESS)
        }
        Some("bench") => match args.get(1).map(String::as_str) {
            Some("ycsb") => bench_ycsb(Args::parse(&args[2..], BENCH_FLAGS)?),
            Some("tpcc") => bench_tpcc(Args::parse(&args[2..], BENCH_FLAGS)?),
            Some("nvm") => nvm::bench(Args::parse(&args[2..], nvm::FLAGS)?),
            other => Err(format!("unknown benchmark {other:?} (ycsb, tpcc or nvm)")),
        },
        Some("recover") => recover(Args::parse(&args[1..], RECOVER_FLAGS)?),
        Some("inspect") => inspect(Args::parse(&args[1..], &[])?),
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
pub(crate) fn write_report(path: &str, j: report::Json, consistency: &str) -> Result<(), String> {
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

/// The engine options from the durability flags. A durable benchmark
/// starts from an empty data directory.
fn durability(a: &mut Args) -> Result<Options, String> {
    let mode = a.take_str("--durability").unwrap_or_else(|| "off".into());
    let durability = match mode.as_str() {
        "off" => Durability::Off,
        "log" => Durability::Log,
        "log+checkpoint" => Durability::LogAndCheckpoint,
        "delta" => Durability::Delta,
        "delta+checkpoint" => Durability::DeltaAndCheckpoint,
        _ => return Err(format!("unknown durability {mode:?} (off, log, log+checkpoint, delta, delta+checkpoint)")),
    };
    let data_dir = a.take_str("--data-dir").unwrap_or_else(|| "epochdb-data".into());
    let log_dirs: Vec<PathBuf> = a.take_paths("--log-dir");
    let interval: f64 = a.take("--checkpoint-interval", 10.0)?;
    let epoch_ms: f64 = a.take("--epoch-ms", 40.0)?;
    if !(interval > 0.0 && epoch_ms > 0.0) {
        return Err("--checkpoint-interval and --epoch-ms must be positive".into());
    }
    let mut options = Options { epoch_interval: Duration::from_secs_f64(epoch_ms / 1e3), ..Options::default() };
    if durability == Durability::Off {
        return Ok(options);
    }
    for dir in std::iter::once(&PathBuf::from(&data_dir)).chain(&log_dirs) {
        empty_data_dir(dir)?;
    }
    options.durability = durability;
    options.data_dir = Some(data_dir.into());
    options.log_dirs = log_dirs;
    options.checkpoint_interval = Duration::from_secs_f64(interval);
    Ok(options)
}

/// Empties `dir` if it holds only what epochdb writes; refuses otherwise,
/// so a mistyped path cannot wipe unrelated files.
fn empty_data_dir(dir: &Path) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let ours = |n: &str| {
        ["manifest", "manifest.tmp", "pepoch", "LOCK", "log", "checkpoint", "data.log", "data.log.new"].contains(&n)
            || n.starts_with("old_data.")
            || n.starts_with("ckpt.")
    };
    let names: Vec<String> = entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into()).collect();
    if let Some(n) = names.iter().find(|n| !ours(n)) {
        return Err(format!("{} holds {n:?}, which epochdb did not write; use an empty directory", dir.display()));
    }
    for n in names {
        let p = dir.join(n);
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Prints and adds to the report what durability cost: log bytes, latency
/// to durability, checkpoints.
fn durability_report(engine: &EpochDb, m: &driver::Measured, j: report::Json) -> report::Json {
    let db = engine.database();
    let Some(d) = &m.durable_latency_ns else { return j };
    let q = |q: f64| d.value_at_quantile(q) as f64 / 1e3;
    let c = db.checkpoint_stats();
    let per_txn = m.log_bytes as f64 / m.committed.max(1) as f64;
    say!(
        "  durability {:?}: {:.1} MB of log ({per_txn:.0} B per committed transaction measured); latency to durability p50 {:.1} ms, p99 {:.1} ms; {} checkpoints ({} incremental), {:.1} MB in all (last: {} {:.1} MB, {:.1} MB skipped as >= e_l; chain of {})",
        db.options().durability,
        db.log_bytes() as f64 / 1e6,
        q(0.5) / 1e3,
        q(0.99) / 1e3,
        c.installed,
        c.incremental_installed,
        c.total_bytes as f64 / 1e6,
        if c.incremental { "incremental" } else { "full" },
        c.bytes as f64 / 1e6,
        c.skipped_bytes as f64 / 1e6,
        c.chain
    );
    let ckpt = report::Json::new()
        .int("installed", c.installed)
        .int("total_bytes", c.total_bytes)
        .int("incremental_installed", c.incremental_installed)
        .str("last", if c.incremental { "incremental" } else { "full" })
        .int("chain", c.chain as u64)
        .int("bytes", c.bytes)
        .int("skipped_bytes", c.skipped_bytes)
        .num("seconds", c.seconds);
    j.str("durability", durability_name(db.options().durability))
        .int("log_bytes", db.log_bytes())
        .num("log_bytes_per_txn", per_txn)
        .obj("checkpoint", ckpt)
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Off => "off",
        Durability::Log => "log",
        Durability::LogAndCheckpoint => "log+checkpoint",
        Durability::Delta => "delta",
        Durability::DeltaAndCheckpoint => "delta+checkpoint",
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
    let options = durability(&mut a)?;
    let warehouses: u32 = a.take("--warehouses", settings.threads as u32)?;
    let snapshot_reads = a.flag("--snapshot-reads");
    let check = a.flag("--check");
    let json_path = a.take_str("--json");
    let plot_path = a.take_str("--plot");
    a.finish()?;
    if variant == Variant::Kv {
        return Err("TPC-C needs transactions: use memsilo or global-tid".into());
    }
    let mut engine = EpochDb::open(variant, options).map_err(|e| e.to_string())?;
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
    let durable = durability_report(&engine, &m, report::Json::new());
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
            .obj("input_checks", checks)
            .merge(durable);
        write_report(&path, j, &consistency)?;
    }
    Ok(exit_status(check, &consistency))
}

fn bench_ycsb(mut a: Args) -> Result<ExitCode, String> {
    let (settings, variant) = common(&mut a)?;
    let options = durability(&mut a)?;
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

    let engine = EpochDb::open(variant, options).map_err(|e| e.to_string())?;
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
    let durable = durability_report(&engine, &m, report::Json::new());
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
            .num("rss_bytes_per_row", per_record)
            .merge(durable);
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

/// `epochdb recover`: recovers a data directory (as opening it would),
/// with a progress bar, then reports what it read and how fast.
fn recover(mut a: Args) -> Result<ExitCode, String> {
    let data_dir = a.take_str("--data-dir").ok_or("--data-dir is required")?;
    let log_dirs: Vec<PathBuf> = a.take_paths("--log-dir");
    let threads: usize = a.take("--threads", 0)?;
    let check = a.take_str("--check");
    let json_path = a.take_str("--json");
    let (salvage, quiet) = (a.flag("--salvage"), a.flag("--quiet"));
    a.finish()?;
    if !Path::new(&data_dir).join("manifest").exists() {
        return Err(format!("{data_dir} holds no epochdb database (no manifest)"));
    }
    let options = Options {
        durability: Durability::Log,
        data_dir: Some(data_dir.clone().into()),
        log_dirs,
        recovery_threads: threads,
        salvage,
        ..Options::default()
    };
    let shown = std::sync::atomic::AtomicU64::new(u64::MAX);
    let progress = |p: epochdb::Progress| {
        let done = p.phase == epochdb::Phase::Done;
        let frac = if p.total_bytes == 0 || done { 1.0 } else { p.done_bytes as f64 / p.total_bytes as f64 };
        // Redraw only when the phase or the whole percentage changes.
        let key = (p.phase as u64) << 32 | (frac * 100.0) as u64;
        if quiet || shown.swap(key, std::sync::atomic::Ordering::Relaxed) == key {
            return;
        }
        let bar = "#".repeat((frac * 40.0) as usize);
        eprint!(
            "\r{:<10} [{bar:<40}] {:>5.1}% of {:.1} MB ",
            format!("{:?}", p.phase),
            frac * 100.0,
            p.total_bytes as f64 / 1e6
        );
    };
    let engine = EpochDb::open_with_progress(Variant::MemSilo, options, &progress).map_err(|e| e.to_string())?;
    if !quiet {
        eprintln!();
    }
    let r = engine.database().recovery_report().cloned().unwrap_or_default();
    let gb = (r.checkpoint_bytes + r.log_bytes) as f64 / 1e9;
    say!(
        "recovered {} records to pepoch {} with {} threads in {:.3} s: checkpoint {:.1} MB (epoch {}), log {:.1} MB; {:.2} s/GB, {:.0} MB/s",
        r.records,
        r.pepoch,
        r.threads,
        r.seconds,
        r.checkpoint_bytes as f64 / 1e6,
        r.checkpoint_epoch.map_or("none".into(), |e| e.to_string()),
        r.log_bytes as f64 / 1e6,
        r.seconds / gb.max(1e-9),
        gb * 1e3 / r.seconds.max(1e-9)
    );
    for d in &r.dropped {
        say!("  dropped: {d}");
    }
    let consistency = match check.as_deref() {
        None => "not checked".to_string(),
        Some("tpcc") => check_tpcc(&engine)?,
        Some("ycsb") => check_ycsb(&engine)?,
        Some(other) => return Err(format!("--check {other:?}: tpcc or ycsb")),
    };
    if check.is_some() {
        say!("  consistency: {consistency}");
    }
    if let Some(path) = json_path {
        let j = report::Json::new()
            .int("pepoch", r.pepoch)
            .int("checkpoint_bytes", r.checkpoint_bytes)
            .int("log_bytes", r.log_bytes)
            .int("records", r.records)
            .int("threads", r.threads as u64)
            .num("seconds", r.seconds)
            .num("seconds_per_gb", r.seconds / gb.max(1e-9))
            .int("dropped", r.dropped.len() as u64);
        write_report(&path, j, &consistency)?;
    }
    Ok(exit_status(check.is_some(), &consistency))
}

/// TPC-C conditions 1-4 on a recovered database.
fn check_tpcc(engine: &EpochDb) -> Result<String, String> {
    use epochdb_workloads::tpcc::Tpcc;
    let db = engine.database();
    let table = db.table("warehouse").map_err(|e| e.to_string())?;
    let mut w = db.worker().map_err(|e| e.to_string())?;
    let warehouses = w.run(|txn| txn.scan(table, .., usize::MAX, |_, _| true)).map_err(|e| e.to_string())? as u32;
    let tpcc = Tpcc::attach(engine, warehouses).map_err(|e| e.to_string())?;
    let mut worker = engine.worker().map_err(|e| e.to_string())?;
    let failures = tpcc.check(&mut *worker).map_err(|e| e.to_string())?;
    Ok(if failures.is_empty() { "ok".into() } else { failures.join("; ") })
}

/// Every YCSB row has the length of the first one.
fn check_ycsb(engine: &EpochDb) -> Result<String, String> {
    let db = engine.database();
    let table = db.table(ycsb::TABLE).map_err(|e| e.to_string())?;
    let mut w = db.worker().map_err(|e| e.to_string())?;
    let (rows, bad) = w
        .run(|txn| {
            let (mut rows, mut bad, mut len) = (0u64, 0u64, None);
            txn.scan(table, .., usize::MAX, |_, v| {
                rows += 1;
                bad += u64::from(*len.get_or_insert(v.len()) != v.len());
                true
            })?;
            Ok((rows, bad))
        })
        .map_err(|e| e.to_string())?;
    Ok(if bad == 0 && rows > 0 { "ok".into() } else { format!("{rows} rows, {bad} malformed") })
}

/// `epochdb inspect`: what a data directory holds, read-only.
fn inspect(mut a: Args) -> Result<ExitCode, String> {
    let data_dir = a.take_str("--data-dir").ok_or("--data-dir is required")?;
    let log_dirs: Vec<PathBuf> = a.take_paths("--log-dir");
    a.finish()?;
    let i = epochdb::inspect(Path::new(&data_dir), &log_dirs).map_err(|e| e.to_string())?;
    say!("data directory {data_dir}");
    say!("  pepoch: {}", i.pepoch.map_or("none (no pepoch file)".into(), |p| p.to_string()));
    say!("  tables: {}", i.tables.join(", "));
    match &i.checkpoint {
        Some(c) => {
            let bytes: u64 = c.files.iter().map(|f| f.1).sum();
            say!("  checkpoint: e_l {}, e_h {}, {} files, {:.1} MB", c.e_l, c.e_h, c.files.len(), bytes as f64 / 1e6);
        }
        None => say!("  checkpoint: none"),
    }
    for (lo, hi) in &i.void_epochs {
        say!("  void epochs {lo}..={hi} (logged after the last pepoch of a crashed run)");
    }
    let total: u64 = i.logs.iter().map(|l| l.bytes).sum();
    say!("  log files: {}, {:.1} MB", i.logs.len(), total as f64 / 1e6);
    for l in &i.logs {
        if l.obsolete {
            say!(
                "    {}  {:.1} MB  obsolete (epochs below e_l; being removed)",
                l.path.display(),
                l.bytes as f64 / 1e6
            );
            continue;
        }
        let epochs = l.epochs.map_or("-".into(), |(lo, hi)| format!("{lo}..={hi}"));
        say!("    {}  {:.1} MB  {} blocks  epochs {epochs}", l.path.display(), l.bytes as f64 / 1e6, l.blocks);
        if let Some(d) = &l.damage {
            say!("      {d}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

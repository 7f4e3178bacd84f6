//! `epochdb bench ycsb` and `epochdb bench tpcc`.

use crate::args::{failed, Args, CliError, CliResult};
use crate::say;
use epochdb::{Durability, Options};
use epochdb_workloads::driver::{self, Settings};
use epochdb_workloads::engine::{Engine, EpochDb, Variant};
use epochdb_workloads::report;
use epochdb_workloads::ycsb::{self, Config, Distribution, Ycsb};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options that take no value.
pub const FLAGS: &[&str] = &["--quiet", "--check", "--snapshot-reads"];

/// Resident memory a TPC-C warehouse takes once loaded (measured with
/// `/usr/bin/time -v epochdb bench tpcc --warehouses 1|4 --threads 1
/// --duration 1`: 237 MB and 651 MB peak), and a YCSB row's beyond its
/// value (1M 100-byte rows: 249 MB peak).
const WAREHOUSE_BYTES: u64 = 140 << 20;
const ROW_OVERHEAD_BYTES: u64 = 140;

/// Refuses a load that cannot fit in the memory the machine has free.
fn check_memory(what: &str, bytes: u64) -> CliResult<()> {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb << 10)
    });
    match available {
        Some(free) if bytes > free => Err(CliError::Usage(format!(
            "{what} needs about {:.1} GB of memory; {:.1} GB is available",
            bytes as f64 / 1e9,
            free as f64 / 1e9
        ))),
        _ => Ok(()),
    }
}

/// The options every benchmark shares.
fn common(a: &mut Args) -> CliResult<(Settings, Variant)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let settings = Settings {
        threads: a.take_int("--threads", cores, 1, 1024)?,
        duration: a.take_secs("--duration", 10.0, 0.001, 1e6)?,
        warmup: a.take_secs("--warmup", 2.0, 0.0, 1e6)?,
        progress: !a.flag("--quiet"),
    };
    let name = a.take_str("--variant").unwrap_or_else(|| "memsilo".into());
    let variant = Variant::parse(&name).ok_or_else(|| format!("unknown variant {name:?}"))?;
    Ok((settings, variant))
}

/// The engine options from the durability flags.
fn durability(a: &mut Args) -> CliResult<Options> {
    let mode = a.take_str("--durability").unwrap_or_else(|| "off".into());
    let durability = match mode.as_str() {
        "off" => Durability::Off,
        "log" => Durability::Log,
        "log+checkpoint" => Durability::LogAndCheckpoint,
        "delta" => Durability::Delta,
        "delta+checkpoint" => Durability::DeltaAndCheckpoint,
        _ => {
            return Err(
                format!("unknown durability {mode:?} (off, log, log+checkpoint, delta, delta+checkpoint)").into()
            )
        }
    };
    let epoch_ms = a.take_num("--epoch-ms", 40.0, 0.01, 10_000.0)?;
    let options = Options { epoch_interval: Duration::from_secs_f64(epoch_ms / 1e3), ..Options::default() };
    if durability == Durability::Off {
        if let Some(flag) = ["--data-dir", "--log-dir", "--checkpoint-interval"].into_iter().find(|f| a.has(f)) {
            return Err(format!("{flag} needs --durability (log, log+checkpoint, delta or delta+checkpoint)").into());
        }
        return Ok(options);
    }
    if !durability.checkpoints() && a.has("--checkpoint-interval") {
        return Err("--checkpoint-interval needs --durability log+checkpoint or delta+checkpoint".into());
    }
    let data_dir = a.take_str("--data-dir").unwrap_or_else(|| "epochdb-data".into());
    let log_dirs: Vec<PathBuf> = a.take_paths("--log-dir");
    let interval = a.take_secs("--checkpoint-interval", 10.0, 0.001, 1e6)?;
    Ok(Options { durability, data_dir: Some(data_dir.into()), log_dirs, checkpoint_interval: interval, ..options })
}

/// Opens the engine. A durable benchmark starts from an empty data
/// directory: [`epochdb::destroy`] removes the database there first, if
/// no process has it open and it holds nothing epochdb did not write.
fn open(variant: Variant, options: Options) -> CliResult<EpochDb> {
    if options.durability != Durability::Off {
        epochdb::destroy(&options).map_err(|e| failed(format!("cannot start from an empty data directory: {e}")))?;
    }
    EpochDb::open(variant, options).map_err(failed)
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

/// Writes the `--plot` SVG, if one was asked for.
fn plot(path: Option<String>, title: &str, m: &driver::Measured) -> CliResult<()> {
    match path {
        Some(p) => std::fs::write(&p, epochdb_workloads::plot::svg(title, &m.timeseries, &m.latency_series_us))
            .map_err(|e| failed(format!("{p}: {e}"))),
        None => Ok(()),
    }
}

pub fn tpcc(mut a: Args) -> CliResult<ExitCode> {
    use epochdb_workloads::tpcc::{InputStats, Tpcc, TRANSACTIONS};
    let (settings, variant) = common(&mut a)?;
    let warehouses: u32 = a.take_int("--warehouses", settings.threads as u32, 1, 10_000_000)?;
    let snapshot_reads = a.flag("--snapshot-reads");
    let check = a.flag("--check");
    let json_path = a.take_output("--json")?;
    let plot_path = a.take_output("--plot")?;
    if variant == Variant::Kv {
        return Err("TPC-C needs transactions: use memsilo or global-tid".into());
    }
    check_memory(&format!("{warehouses} warehouses"), warehouses as u64 * WAREHOUSE_BYTES)?;
    let options = durability(&mut a)?;
    a.finish()?;
    let mut engine = open(variant, options)?;
    engine.snapshot_reads = snapshot_reads;
    let load_start = std::time::Instant::now();
    let tpcc = Tpcc::load(&engine, warehouses, settings.threads).map_err(failed)?;
    let load_s = load_start.elapsed().as_secs_f64();
    if settings.progress {
        eprintln!("loaded {warehouses} warehouses in {load_s:.1} s");
    }
    if snapshot_reads {
        engine.wait_for_snapshot_of_now().map_err(failed)?;
    }
    let (m, terminals) = driver::run(&engine, &settings, |t| tpcc.client(t, 0xC0FFEE + t as u64)).map_err(failed)?;
    let mut inputs = InputStats::default();
    for t in &terminals {
        inputs.add(&t.stats);
    }
    let consistency = if check {
        let mut w = engine.worker().map_err(failed)?;
        let failures = tpcc.check(&mut *w).map_err(failed)?;
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
        crate::write_report(&path, j, &consistency)?;
    }
    let title = format!("TPC-C, {warehouses} warehouses, {} threads, {}", settings.threads, engine.name());
    plot(plot_path, &title, &m)?;
    Ok(crate::exit_status(check, &consistency))
}

pub fn ycsb(mut a: Args) -> CliResult<ExitCode> {
    let (settings, variant) = common(&mut a)?;
    let keys: u64 = a.take_int("--keys", 4_000_000, 2, 1 << 40)?;
    let mix = a.take_str("--mix").unwrap_or_else(|| "silo".into());
    let mut config =
        Config::preset(&mix, keys).ok_or_else(|| format!("unknown mix {mix:?} (one of {})", ycsb::MIXES.join(", ")))?;
    if let Some(d) = a.take_str("--dist") {
        config.distribution = Distribution::parse(&d).ok_or_else(|| format!("unknown distribution {d:?}"))?;
    }
    config.columns = a.take_int("--columns", config.columns, 1, 1000)?;
    let json_path = a.take_output("--json")?;
    let plot_path = a.take_output("--plot")?;
    let check = a.flag("--check");
    if variant == Variant::Kv && (config.mix.insert > 0 || config.mix.scan > 0) {
        return Err("the kv variant has only gets and puts: use a mix without inserts or scans".into());
    }
    check_memory(&format!("{keys} rows"), keys.saturating_mul(ROW_OVERHEAD_BYTES + config.value_len() as u64))?;
    let options = durability(&mut a)?;
    a.finish()?;
    let engine = open(variant, options)?;
    let rss_before = rss_bytes();
    let load_start = std::time::Instant::now();
    let y = Ycsb::load(&engine, config.clone(), settings.threads).map_err(failed)?;
    let load_s = load_start.elapsed().as_secs_f64();
    let load_rss = rss_bytes().saturating_sub(rss_before);
    if settings.progress {
        eprintln!("loaded {keys} rows in {load_s:.1} s ({:.1} MB resident)", load_rss as f64 / 1e6);
    }
    let (m, clients) = driver::run(&engine, &settings, |t| y.client(0x5EED + t as u64)).map_err(failed)?;
    let mut transactions = report::Json::new();
    for (i, kind) in ycsb::KINDS.iter().enumerate() {
        transactions = transactions.int(kind, clients.iter().map(|c| c.counts[i]).sum());
    }
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
    if check {
        say!("  consistency: {consistency}");
    }
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
        crate::write_report(&path, j, &consistency)?;
    }
    let title = format!("YCSB {mix}, {keys} keys, {} threads, {}", settings.threads, engine.name());
    plot(plot_path, &title, &m)?;
    Ok(crate::exit_status(check, &consistency))
}

/// After a YCSB run every loaded or inserted row must still be there.
/// Counted through the database itself, whatever the variant.
fn check_rows(engine: &EpochDb, y: &Ycsb) -> CliResult<String> {
    let db = engine.database();
    let mut w = db.worker().map_err(failed)?;
    let table = db.table_handle(y.table());
    let rows = w.run(|txn| txn.scan(table, .., usize::MAX, |_, _| true)).map_err(failed)? as u64;
    let want = y.rows();
    Ok(if rows == want { "ok".into() } else { format!("{rows} rows, expected {want}") })
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

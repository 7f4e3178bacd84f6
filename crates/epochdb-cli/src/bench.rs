//! `epochdb bench ycsb` and `epochdb bench tpcc`.

use crate::args::{failed, CliError, CliResult, DurabilityArgs, Output, RunArgs};
use crate::replicas::{CpuPerLog, Join, LogCpu, ReplicaBenchArgs, Replicas};
use crate::say;
use clap::builder::PossibleValuesParser;
use clap::Args;
use epochdb::{Durability, Options};
use epochdb_workloads::driver;
use epochdb_workloads::engine::{Engine, EpochDb, Variant};
use epochdb_workloads::report::{
    BenchReport, CheckpointReport, DurabilityReport, DurableLatency, ReplicationReport, TableMemory, TpccReport,
    YcsbReport,
};
use epochdb_workloads::ycsb::{self, Config, Distribution, Ycsb};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `epochdb bench ycsb`.
#[derive(Debug, Args)]
pub struct YcsbArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    durability: DurabilityArgs,
    #[command(flatten)]
    replication: ReplicaBenchArgs,
    /// Rows loaded
    #[arg(long, value_name = "N", default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(2..=1 << 40))]
    keys: u64,
    /// The mix: silo (80% reads, 20% read-modify-writes, Silo §5.2), silor (70/30), the NVM study's four, YCSB core a-f
    #[arg(long, default_value = "silo", value_parser = PossibleValuesParser::new(ycsb::MIXES))]
    mix: String,
    /// Key distribution [default: the mix's own: silo/silor uniform, NVM mixes low, a-f zipfian, d latest]
    #[arg(long, value_parser = PossibleValuesParser::new(["uniform", "zipfian", "low", "high", "latest"]))]
    dist: Option<String>,
    /// Columns of 100 bytes per row [default: 1 for silo/silor, else 10]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    columns: Option<u16>,
    /// Count the rows after the run; exit status 1 if any is missing
    #[arg(long)]
    check: bool,
}

/// `epochdb bench tpcc`.
#[derive(Debug, Args)]
pub struct TpccArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    durability: DurabilityArgs,
    #[command(flatten)]
    replication: ReplicaBenchArgs,
    /// Warehouses (about 140 MB of memory each); thread t's home is t % N + 1 [default: = threads]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    warehouses: Option<u32>,
    /// Run order-status and stock-level as snapshot transactions
    #[arg(long)]
    snapshot_reads: bool,
    /// Check consistency conditions 1-4 (clause 3.3.2) after the run; exit status 1 if one fails
    #[arg(long)]
    check: bool,
    /// Rows as the specification has them with fixed-width strings (spec), or as Silo lays them out (silo: variable-length strings, no OL_DIST_INFO, and NEW-ORDER does not read S_DIST_xx)
    #[arg(long, value_enum, default_value_t = SchemaArg::Spec)]
    schema: SchemaArg,
    /// Count each table's rows and their bytes after the load and after the run, and print what a transaction added to each (scans every table twice: seconds for a large run)
    #[arg(long)]
    memory_by_table: bool,
}

/// `--schema`: [`Schema`](epochdb_workloads::tpcc_rows::Schema) on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SchemaArg {
    Spec,
    Silo,
}

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

/// Opens the engine. A durable benchmark starts from an empty data
/// directory (and empty directories for its backups): a database there is
/// refused unless `overwrite`, and then [`epochdb::destroy`] removes it,
/// if no process has it open and it holds nothing epochdb did not write.
/// The command exits after its one run, so the database's rows are left
/// to the exit rather than freed one by one.
fn open(variant: Variant, options: Options, overwrite: bool, replicas: u32) -> CliResult<EpochDb> {
    if let (true, Some(data)) = (options.durability != Durability::Off, &options.data_dir) {
        refuse_a_database(data, &options.log.dirs, overwrite)?;
        for i in 0..replicas {
            refuse_a_database(&crate::replicas::replica_dir(data, i), &[], overwrite)?;
        }
        epochdb::destroy(&options).map_err(|e| failed(format!("cannot start from an empty data directory: {e}")))?;
    }
    let engine = EpochDb::open(variant, options).map_err(failed)?;
    engine.database().skip_freeing_at_close();
    Ok(engine)
}

/// A benchmark deletes no database it did not make in this run unless
/// told to: the error names the directory, what it holds, and the flag.
fn refuse_a_database(dir: &Path, log_dirs: &[PathBuf], overwrite: bool) -> CliResult<()> {
    if overwrite || !dir.is_dir() {
        return Ok(());
    }
    let holds = match epochdb::inspect(dir, log_dirs) {
        Err(epochdb::Error::NotADatabase(_)) => return Ok(()),
        Err(e) => format!("a database that cannot be read ({e})"),
        Ok(i) => {
            let checkpoint = i.checkpoint.iter().flat_map(|c| &c.files).map(|f| f.bytes).sum::<u64>();
            let log = i.logs.iter().map(|l| l.bytes).sum::<u64>();
            format!(
                "a database with tables {} ({:.1} MB of checkpoint and log)",
                i.tables.join(", "),
                (checkpoint + log) as f64 / 1e6
            )
        }
    };
    Err(failed(format!(
        "{} holds {holds}; a benchmark loads afresh and would delete it: give another --data-dir, or pass \
         --overwrite to delete it",
        dir.display()
    )))
}

/// Prints, and returns for the report, what durability cost: log bytes,
/// latency to durability, checkpoints.
fn durability_report(engine: &EpochDb, m: &driver::Measured, cpu: LogCpu) -> Option<DurabilityReport> {
    let db = engine.database();
    let d = m.durable_latency_ns.as_ref()?;
    let q = |q: f64| d.value_at_quantile(q) as f64 / 1e3;
    let c = db.checkpoint_stats();
    let per_txn = m.log_bytes as f64 / m.committed.max(1) as f64;
    let last = if c.incremental { "incremental" } else { "full" };
    say!(
        "  durability {:?}: {:.1} MB of log ({per_txn:.0} B per committed transaction measured); latency to durability p50 {:.1} ms, p99 {:.1} ms; {} checkpoints ({} incremental), {:.1} MB in all (last: {last} {:.1} MB, {:.1} MB skipped as >= e_l; chain of {})",
        db.options().durability,
        db.log_bytes() as f64 / 1e6,
        q(0.5) / 1e3,
        q(0.99) / 1e3,
        c.installed,
        c.incremental_installed,
        c.total_bytes as f64 / 1e6,
        c.bytes as f64 / 1e6,
        c.skipped_bytes as f64 / 1e6,
        c.chain
    );
    Some(DurabilityReport {
        mode: db.options().durability.name().into(),
        log_bytes: db.log_bytes(),
        log_bytes_per_txn: per_txn,
        durable_latency_us: DurableLatency { p50: q(0.5), p99: q(0.99), p999: q(0.999), count: d.len() },
        cpu_ms_per_log_mb: cpu.process,
        logger_ms_per_log_mb: cpu.logger,
        checkpoint: CheckpointReport {
            installed: c.installed,
            total_bytes: c.total_bytes,
            incremental_installed: c.incremental_installed,
            last: last.into(),
            chain: c.chain as u64,
            bytes: c.bytes,
            skipped_bytes: c.skipped_bytes,
            seconds: c.seconds,
        },
    })
}

/// Writes the `--plot` SVG, if one was asked for (with the backups'
/// freshness when there are replicas).
fn plot(out: Option<&Output>, title: &str, m: &driver::Measured, r: Option<&ReplicationReport>) -> CliResult<()> {
    let Some(out) = out else { return Ok(()) };
    let freshness = r.map(|r| &r.lag_series_ms[..]);
    let svg = epochdb_workloads::plot::svg(title, &m.timeseries, &m.latency_series_us, &m.checkpoint_series, freshness);
    crate::write_text(out, &svg)
}

/// How both benchmarks end: the durability summary, the JSON report (if
/// asked for; `fill` adds the workload's part), the plot, the exit status.
#[allow(clippy::too_many_arguments)]
fn finish(
    name: &str,
    engine: &EpochDb,
    run: &RunArgs,
    m: &driver::Measured,
    load_s: f64,
    check: bool,
    consistency: String,
    title: &str,
    (cpu, mut replication): (LogCpu, Option<ReplicationReport>),
    fill: impl FnOnce(&mut BenchReport),
) -> CliResult<ExitCode> {
    if let Some(r) = &mut replication {
        (r.shipping_ms_per_log_mb, r.backup_ms_per_log_mb) = (cpu.shipping, cpu.backup);
    }
    let durability = durability_report(engine, m, cpu);
    plot(run.plot.as_ref(), title, m, replication.as_ref())?;
    if let Some(out) = &run.json {
        let mut r = BenchReport::new(name, engine.name(), run.settings().threads, m);
        (r.warmup_s, r.load_s, r.durability, r.replication) = (run.warmup, load_s, durability, replication);
        r.consistency = consistency.clone();
        fill(&mut r);
        crate::write_report(out, &r)?;
    }
    Ok(crate::exit_status(check, &consistency))
}

pub fn tpcc(a: TpccArgs) -> CliResult<ExitCode> {
    use epochdb_workloads::tpcc::{InputStats, Tpcc, TRANSACTIONS};
    use epochdb_workloads::tpcc_rows::Schema;
    a.run.direct_output()?;
    let settings = a.run.settings();
    let variant = a.run.variant.variant();
    let warehouses = a.warehouses.unwrap_or(settings.threads as u32);
    if variant == Variant::Kv {
        return Err("TPC-C needs transactions: use memsilo or global-tid".into());
    }
    check_memory(&format!("{warehouses} warehouses"), warehouses as u64 * WAREHOUSE_BYTES)?;
    let options = a.replication.apply(a.durability.options()?)?;
    let mut engine = open(variant, options, a.durability.overwrite, a.replication.replicas)?;
    engine.snapshot_reads = a.snapshot_reads;
    let mut replicas = Replicas::start(&a.replication, engine.database(), Join::Start)?;
    let load_start = std::time::Instant::now();
    let spinner = epochdb_workloads::progress::spinner(settings.progress, format!("loading {warehouses} warehouses"));
    let schema = match a.schema {
        SchemaArg::Spec => Schema::Spec,
        SchemaArg::Silo => Schema::Silo,
    };
    let tpcc = Tpcc::load(&engine, warehouses, settings.threads, schema).map_err(failed)?;
    spinner.finish_and_clear();
    let load_s = load_start.elapsed().as_secs_f64();
    let load_memory = epochdb::memory_in_use();
    log::info!("loaded {warehouses} warehouses in {load_s:.1} s");
    let tables = tpcc.tables.named();
    let loaded = if a.memory_by_table { table_memory(engine.database(), &tables)? } else { Vec::new() };
    if a.snapshot_reads {
        engine.wait_for_snapshot_of_now().map_err(failed)?;
    }
    if let Some(r) = &mut replicas {
        r.sample(engine.database());
    }
    let cpu = CpuPerLog::now(engine.database(), replicas.as_ref());
    let (m, terminals) = driver::run(&engine, &settings, |t| tpcc.client(t, 0xC0FFEE + t as u64)).map_err(failed)?;
    let cpu = cpu.since(engine.database(), replicas.as_ref());
    let memory = epochdb::memory_in_use();
    let replicas = match replicas {
        Some(r) => Some(r),
        None => Replicas::start(&a.replication, engine.database(), Join::End)?,
    };
    let replication = replicas.map(Replicas::finish);
    let mut inputs = InputStats::default();
    for t in &terminals {
        inputs.add(&t.stats);
    }
    let ran = inputs.by_type.iter().sum::<u64>().max(1);
    let per_transaction = memory.saturating_sub(load_memory) as f64 / ran as f64;
    let by_table = if a.memory_by_table {
        let after = table_memory(engine.database(), &tables)?;
        added_per_transaction(&tables, &loaded, &after, ran)
    } else {
        BTreeMap::new()
    };
    let consistency = if a.check {
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
    let mut input_checks = BTreeMap::new();
    for (name, value, low, high) in inputs.checks() {
        let ok = (low..=high).contains(&value);
        say!("  {name:<36} {value:>8.3}  (spec {low}..{high}{})", if ok { "" } else { ", outside" });
        input_checks.insert(name.to_string(), value);
    }
    say!(
        "  memory: {:.1} MB of records and index nodes after the load, {:.1} MB after the run ({per_transaction:.0} bytes per transaction)",
        load_memory as f64 / 1e6,
        memory as f64 / 1e6
    );
    if !by_table.is_empty() {
        say!("  memory by table, added per transaction (rows; bytes of records and of a full leaf's entries):");
        let mut sorted: Vec<_> = by_table.iter().collect();
        sorted.sort_by(|a, b| b.1.bytes_per_transaction.total_cmp(&a.1.bytes_per_transaction));
        for (name, t) in &sorted {
            say!("    {name:<20} {:>8.3} rows {:>8.1} bytes", t.rows_per_transaction, t.bytes_per_transaction);
        }
        let rows: f64 = by_table.values().map(|t| t.rows_per_transaction).sum();
        let bytes: f64 = by_table.values().map(|t| t.bytes_per_transaction).sum();
        say!("    {:<20} {rows:>8.3} rows {bytes:>8.1} bytes (measured: {per_transaction:.1})", "all");
    }
    say!("  consistency: {consistency}");
    let title = format!("TPC-C, {warehouses} warehouses, {} threads, {}", settings.threads, engine.name());
    finish("tpcc", &engine, &a.run, &m, load_s, a.check, consistency, &title, (cpu, replication), |r| {
        r.transactions = TRANSACTIONS.iter().map(|n| n.to_string()).zip(inputs.by_type).collect();
        let read_only_as_snapshots = a.snapshot_reads;
        let schema = format!("{:?}", a.schema).to_lowercase();
        r.tpcc = Some(TpccReport {
            warehouses: warehouses as u64,
            read_only_as_snapshots,
            schema,
            input_checks,
            load_memory_bytes: load_memory,
            memory_bytes: memory,
            memory_bytes_per_transaction: per_transaction,
            memory_by_table: by_table,
        });
    })
}

pub fn ycsb(a: YcsbArgs) -> CliResult<ExitCode> {
    a.run.direct_output()?;
    let settings = a.run.settings();
    let variant = a.run.variant.variant();
    let (keys, mix) = (a.keys, a.mix.as_str());
    let mut config = Config::preset(mix, keys).ok_or_else(|| format!("unknown mix {mix:?}"))?;
    if let Some(d) = &a.dist {
        config.distribution = Distribution::parse(d).ok_or_else(|| format!("unknown distribution {d:?}"))?;
    }
    config.columns = a.columns.map_or(config.columns, usize::from);
    if variant == Variant::Kv && (config.mix.insert > 0 || config.mix.scan > 0) {
        return Err("the kv variant has only gets and puts: use a mix without inserts or scans".into());
    }
    check_memory(&format!("{keys} rows"), keys.saturating_mul(ROW_OVERHEAD_BYTES + config.value_len() as u64))?;
    if a.replication.replica_readers > 0 {
        return Err("--replica-readers runs TPC-C's read-only transactions: use it with bench tpcc".into());
    }
    let options = a.replication.apply(a.durability.options()?)?;
    let engine = open(variant, options, a.durability.overwrite, a.replication.replicas)?;
    let mut replicas = Replicas::start(&a.replication, engine.database(), Join::Start)?;
    let rss_before = rss_bytes();
    let load_start = std::time::Instant::now();
    let spinner = epochdb_workloads::progress::spinner(settings.progress, format!("loading {keys} rows"));
    let y = Ycsb::load(&engine, config.clone(), settings.threads).map_err(failed)?;
    spinner.finish_and_clear();
    let load_s = load_start.elapsed().as_secs_f64();
    let load_rss = rss_bytes().saturating_sub(rss_before);
    log::info!("loaded {keys} rows in {load_s:.1} s ({:.1} MB resident)", load_rss as f64 / 1e6);
    if let Some(r) = &mut replicas {
        r.sample(engine.database());
    }
    let cpu = CpuPerLog::now(engine.database(), replicas.as_ref());
    let (m, clients) = driver::run(&engine, &settings, |t| y.client(0x5EED + t as u64)).map_err(failed)?;
    let cpu = cpu.since(engine.database(), replicas.as_ref());
    let replicas = match replicas {
        Some(r) => Some(r),
        None => Replicas::start(&a.replication, engine.database(), Join::End)?,
    };
    let replication = replicas.map(Replicas::finish);
    let transactions = (ycsb::KINDS.iter().enumerate())
        .map(|(i, kind)| (kind.to_string(), clients.iter().map(|c| c.counts[i]).sum()))
        .collect();
    let consistency = if a.check { check_rows(&engine, &y)? } else { "not checked".to_string() };
    let per_record = load_rss as f64 / keys as f64;
    let distribution = config.distribution.name();
    say!("ycsb {mix} ({distribution}) on {} with {} threads: {}", engine.name(), settings.threads, m.summary());
    say!(
        "memory: {:.1} MB resident after loading, {:.0} bytes per row ({} bytes of key and value)",
        load_rss as f64 / 1e6,
        per_record,
        8 + config.value_len()
    );
    if a.check {
        say!("  consistency: {consistency}");
    }
    let title = format!("YCSB {mix}, {keys} keys, {} threads, {}", settings.threads, engine.name());
    finish("ycsb", &engine, &a.run, &m, load_s, a.check, consistency, &title, (cpu, replication), |r| {
        r.transactions = transactions;
        r.ycsb = Some(YcsbReport {
            mix: mix.into(),
            distribution,
            keys,
            value_bytes: config.value_len() as u64,
            load_rss_bytes: load_rss,
            rss_bytes_per_row: per_record,
        });
    })
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

/// Each table's rows and their [`epochdb::row_footprint`] bytes (its
/// record, and its share of a full leaf), read in transactions of
/// [`SCAN_BATCH`] rows (one transaction over a large table would hold a
/// read-set entry per row). Each table is found by its name, which must
/// name the table the workload holds: `Tables::named` spells the names
/// again after `Tables::create`, and a slip there fails here, not as a
/// mislabelled line.
fn table_memory(db: &epochdb::Database, tables: &[(&str, u32)]) -> CliResult<Vec<(u64, u64)>> {
    use std::ops::Bound;
    let mut w = db.worker().map_err(failed)?;
    let mut counts = Vec::with_capacity(tables.len());
    for &(name, t) in tables {
        let table = db.table(name).map_err(failed)?;
        if table.index() != t {
            return Err(failed(format!("table {name:?} is not the workload's table {t}")));
        }
        let (mut rows, mut bytes, mut after, mut last) = (0u64, 0u64, None::<Vec<u8>>, Vec::new());
        loop {
            let from = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let mut b = 0u64;
            let n = w
                .run(|txn| {
                    b = 0;
                    txn.scan(table, (from, Bound::Unbounded), SCAN_BATCH, |k, v| {
                        b += epochdb::row_footprint(k.len(), v.len()).unwrap_or(0) as u64;
                        last.clear();
                        last.extend_from_slice(k);
                        true
                    })
                })
                .map_err(failed)?;
            (rows, bytes) = (rows + n as u64, bytes + b);
            if n < SCAN_BATCH {
                break;
            }
            after = Some(std::mem::take(&mut last));
        }
        counts.push((rows, bytes));
    }
    Ok(counts)
}

/// Rows a [`table_memory`] transaction reads.
const SCAN_BATCH: usize = 10_000;

/// What `ran` transactions added to each table, from its rows and bytes
/// `before` and `after` ([`table_memory`]).
fn added_per_transaction(
    tables: &[(&str, u32)],
    before: &[(u64, u64)],
    after: &[(u64, u64)],
    ran: u64,
) -> BTreeMap<String, TableMemory> {
    let per = |a: u64, b: u64| (a as f64 - b as f64) / ran as f64;
    tables
        .iter()
        .zip(before.iter().zip(after))
        .map(|(&(name, _), (&(r0, b0), &(r1, b1)))| {
            let t = TableMemory { rows: r1, rows_per_transaction: per(r1, r0), bytes_per_transaction: per(b1, b0) };
            (name.to_string(), t)
        })
        .collect()
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

//! The JSON reports (`--json FILE`): one serde type per report, shared by
//! `epochdb bench ycsb|tpcc`, `recover`/`verify`, `bench nvm` and its
//! matrix. The schema tables of docs/json-reports.md are generated from these types' doc
//! comments (a test checks they match; `EPOCHDB_BLESS=1 cargo test -p
//! epochdb-workloads --lib report` rewrites them), so a field documented
//! here is a field in docs/json-reports.md and in every report.

use crate::driver::Measured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A benchmark run: `epochdb bench ycsb|tpcc --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    /// `ycsb` or `tpcc`.
    pub workload: String,
    /// The engine variant: `memsilo`, `kv` or `global-tid`.
    pub variant: String,
    /// Worker threads.
    pub threads: u64,
    /// Measured seconds (after `warmup_s`).
    pub duration_s: f64,
    /// Seconds run before measuring.
    pub warmup_s: f64,
    /// Seconds the load took.
    pub load_s: f64,
    /// Committed transactions.
    pub committed: u64,
    /// Aborted attempts, each retried until it committed.
    pub aborted: u64,
    /// Deliberate rollbacks (TPC-C's 1% invalid new-orders).
    pub rolled_back: u64,
    /// Committed transactions per second.
    pub throughput: f64,
    /// aborted / (committed + aborted + rolled back).
    pub abort_rate: f64,
    /// Microseconds from submission to commit, retries included, per committed transaction.
    pub latency_us: Latency,
    /// Commits in each whole second of the measured interval.
    pub timeseries: Vec<u64>,
    /// Mean latency (microseconds) of the commits in each of those seconds.
    pub latency_timeseries_us: Vec<f64>,
    /// For each of those seconds, whether a checkpoint was being written.
    pub checkpoint_timeseries: Vec<bool>,
    /// Transactions run per type, warm-up included.
    pub transactions: BTreeMap<String, u64>,
    /// YCSB's settings and memory (YCSB runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ycsb: Option<YcsbReport>,
    /// TPC-C's settings and input checks (TPC-C runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<TpccReport>,
    /// What durability cost (runs with `--durability` other than `off` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilityReport>,
    /// How far the hot standbys trailed (runs with `--replicas` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<ReplicationReport>,
    /// `ok`, `not checked`, or the failed conditions.
    pub consistency: String,
    /// Where and when it ran.
    pub run: Provenance,
}

/// The backups of a run with `--replicas`, sampled every 20 ms while it
/// was measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplicationReport {
    /// Backup processes.
    pub replicas: u32,
    /// `Async`, `Sync` or `VerySafe`.
    pub safety: String,
    /// Samples taken (one per backup every 20 ms).
    pub samples: usize,
    /// Released epoch minus a backup's acknowledged (persisted) epoch.
    pub persist_lag_epochs: Quantiles,
    /// Released epoch minus a backup's read view (replayed and visible).
    pub replay_lag_epochs: Quantiles,
    /// The primary's epoch length in milliseconds, to read lags as time.
    pub epoch_ms: f64,
    /// Bytes the primary had queued to a backup and not yet written to
    /// its socket (sampled with the lags): the stream's lag in bytes.
    #[serde(default)]
    pub queued_bytes: Quantiles,
    /// Freshness over the run: for each second, the largest read-view lag
    /// of any backup in that second's samples, in milliseconds (epochs
    /// times `epoch_ms`); `--plot` draws it.
    #[serde(default)]
    pub lag_series_ms: Vec<f64>,
    /// CPU the backup processes used while the run was measured, in cores
    /// (CPU seconds per second; receiving, syncing and replaying).
    pub backup_cores: f64,
    /// CPU the benchmark process's replication threads (sending to the backups, their sessions, the listener) used per MB of log, in ms, from the start of the warm-up to the end of the run: with `durability.logger_ms_per_log_mb`, what shipping costs the primary, apart from what a busy neighbouring CPU costs its workers.
    #[serde(default)]
    pub shipping_ms_per_log_mb: f64,
    /// CPU each backup process used per MB of log, in ms, over the same time as `durability.cpu_ms_per_log_mb`: against it, what a backup spends against what the primary spent to produce the log (Query Fresh: about 1/4).
    #[serde(default)]
    pub backup_ms_per_log_mb: f64,
    /// Read-only TPC-C transactions (order-status, stock-level) per second
    /// that the backups' readers committed at their read views while the
    /// run was measured (`--replica-readers`; 0 without).
    #[serde(default)]
    pub backup_reads_per_s: f64,
    /// With `--replicas-join end`: how long the backups took to catch up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapReport>,
}

/// Backups started after the measured run (`--replicas-join end`), each
/// from an empty directory: they catch up from the primary's checkpoint
/// and log files while the primary idles.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BootstrapReport {
    /// The primary's released epoch when the backups started.
    pub released_epoch: u64,
    /// Bytes of checkpoint and log in the primary's data directory then.
    pub primary_bytes: u64,
    /// Seconds from starting the backups until every one was in sync
    /// (had persisted everything and was acknowledging live epochs).
    pub in_sync_s: f64,
    /// Seconds from starting the backups until every one's read view
    /// reached `released_epoch` (all of it replayed and readable).
    pub caught_up_s: f64,
    /// CPU seconds the backup processes used in those `caught_up_s`.
    pub backup_cpu_s: f64,
    /// The largest peak resident memory of a backup process by then, MB.
    #[serde(default)]
    pub backup_peak_rss_mb: f64,
}

/// Quantiles of sampled values.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Quantiles {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl Quantiles {
    /// The quantiles of `v`.
    pub fn of(mut v: Vec<u64>) -> Quantiles {
        v.sort_unstable();
        let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
        Quantiles { p50: at(0.5), p99: at(0.99), max: v.last().copied().unwrap_or(0) }
    }
}

/// Latency percentiles from an HDR histogram, in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Maximum.
    pub max: f64,
}

/// YCSB's part of a [`BenchReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct YcsbReport {
    /// The mix (`silo`, `silor`, `read-heavy`, `a` ... `f`, ...).
    pub mix: String,
    /// The key distribution.
    pub distribution: String,
    /// Rows loaded.
    pub keys: u64,
    /// Bytes per value.
    pub value_bytes: u64,
    /// Resident memory the load added.
    pub load_rss_bytes: u64,
    /// `load_rss_bytes` per row.
    pub rss_bytes_per_row: f64,
}

/// TPC-C's part of a [`BenchReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TpccReport {
    /// Warehouses loaded.
    pub warehouses: u64,
    /// Whether order-status and stock-level ran as snapshot transactions.
    pub read_only_as_snapshots: bool,
    /// `spec`, or `silo`: variable-length strings, order lines without OL_DIST_INFO and a NEW-ORDER that does not read S_DIST_xx, as Silo lays them out.
    #[serde(default)]
    pub schema: String,
    /// Clause 9.2.2.5 input-generator statistics (`new_order_rollback_percent`, `order_lines_per_order`, `remote_order_line_percent`, `remote_payment_percent`, `payment_by_last_name_percent`, `order_status_by_last_name_percent`).
    pub input_checks: BTreeMap<String, f64>,
    /// Bytes of records and index nodes the database held after the load (`epochdb::memory_in_use`, each block at its size class).
    #[serde(default)]
    pub load_memory_bytes: u64,
    /// The same after the run (garbage the epoch GC has not freed yet counts too).
    #[serde(default)]
    pub memory_bytes: u64,
    /// What the run added (`memory_bytes - load_memory_bytes`) per transaction run, warm-up included: the new rows and index entries a transaction leaves, on average.
    #[serde(default)]
    pub memory_bytes_per_transaction: f64,
    /// With `--memory-by-table` (else empty): by table name, its rows after the run and what a transaction added to it.
    #[serde(default)]
    pub memory_by_table: BTreeMap<String, TableMemory>,
}

/// What a TPC-C run added to one table (`bench tpcc --memory-by-table`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableMemory {
    /// Rows after the run.
    pub rows: u64,
    /// Rows added per transaction run (negative when the run removed rows).
    pub rows_per_transaction: f64,
    /// Bytes added per transaction run, each row counted at `epochdb::row_footprint` (its record, and its share of a full index leaf): the table's part of `memory_bytes_per_transaction`, less its leaves' empty slots and its inner nodes.
    pub bytes_per_transaction: f64,
}

/// What durability cost during a [`BenchReport`]'s run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DurabilityReport {
    /// `log`, `log+checkpoint`, `delta` or `delta+checkpoint`.
    pub mode: String,
    /// Log written since open, load included.
    pub log_bytes: u64,
    /// Log written during the measured interval per transaction committed in it.
    pub log_bytes_per_txn: f64,
    /// Microseconds from submission until the driver saw the transaction's epoch reach pepoch (SiloR §6.2).
    pub durable_latency_us: DurableLatency,
    /// CPU the benchmark process used per MB of log, in ms, from the start of the warm-up to the end of the run.
    #[serde(default)]
    pub cpu_ms_per_log_mb: f64,
    /// CPU its log writer threads used per MB of log, in ms, over the same time (with a primary's backups, framing each block for them too).
    #[serde(default)]
    pub logger_ms_per_log_mb: f64,
    /// Checkpoints installed since open.
    pub checkpoint: CheckpointReport,
}

/// Latency to durability, in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DurableLatency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Transactions measured.
    pub count: u64,
}

/// Checkpoints during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointReport {
    /// Checkpoints installed since open.
    pub installed: u64,
    /// Bytes of all of them.
    pub total_bytes: u64,
    /// How many of them were incremental.
    pub incremental_installed: u64,
    /// The last one: `full` or `incremental`.
    pub last: String,
    /// Checkpoints recovery would load.
    pub chain: u64,
    /// Bytes of the last one.
    pub bytes: u64,
    /// What the last one would also have held without the `e_l` skip.
    pub skipped_bytes: u64,
    /// Seconds the last one took.
    pub seconds: f64,
}

/// `epochdb recover --json` and `epochdb verify --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecoverReport {
    /// The epoch recovered to.
    pub pepoch: u64,
    /// What the directory recorded: the pepoch file, or a single logger's seal markers if higher (`null` if the pepoch file is unreadable); differs from `pepoch` after salvage.
    pub recorded_pepoch: Option<u64>,
    /// Checkpoint bytes read.
    pub checkpoint_bytes: u64,
    /// Log bytes read.
    pub log_bytes: u64,
    /// Records recovered.
    pub records: u64,
    /// Recovery workers.
    pub threads: u64,
    /// Seconds recovery took.
    pub seconds: f64,
    /// Of `seconds`, those spent loading the checkpoint (the rest is mostly the log replay).
    pub checkpoint_seconds: f64,
    /// CPU seconds the process used over `seconds` (workers, reader and the kernel's zeroing of new memory; over `seconds`: CPUs kept busy).
    pub cpu_seconds: f64,
    /// Of `cpu_seconds`, those in the kernel (mostly page faults zeroing the memory the rows fill; on a VM whose host takes freed memory back, far costlier than on a machine of its own).
    #[serde(default)]
    pub system_seconds: f64,
    /// Bytes of records and index nodes the recovered database holds (`epochdb::memory_in_use`): memory a new process must have the kernel fault in, which `system_seconds` pays for.
    #[serde(default)]
    pub memory_bytes: u64,
    /// Seconds per GB of checkpoint and log.
    pub seconds_per_gb: f64,
    /// What recovery dropped: torn tails, void epochs, salvaged damage.
    pub dropped: Vec<String>,
    /// False if salvage left a state that is not a prefix of the serial order.
    pub consistent: bool,
    /// `ok`, `not checked`, or the failed conditions.
    pub consistency: String,
    /// Where and when it ran.
    pub run: Provenance,
}

/// One NVM testbed run: `epochdb bench nvm --json`, and each run of the matrix (`matrix.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NvmReport {
    /// `inp`, `cow`, `log`, `nvm-inp`, `nvm-cow` or `nvm-log`.
    pub engine: String,
    /// `ycsb <mix> <skew>` or `tpcc`.
    pub workload: String,
    /// Emulated NVM latency: `dram`, `2x` or `8x`.
    pub latency: String,
    /// Partitions, one executor thread each.
    pub partitions: u64,
    /// YCSB tuples, all partitions together.
    pub tuples: u64,
    /// Committed transactions per second (0 for a recovery run).
    pub throughput: f64,
    /// Committed transactions.
    pub committed: u64,
    /// Measured seconds.
    pub seconds: f64,
    /// Seconds the load took.
    pub load_seconds: f64,
    /// Cache lines made persistent per transaction.
    pub persisted_lines_per_txn: f64,
    /// Bytes made persistent per transaction (lines and file writes).
    pub persisted_bytes_per_txn: f64,
    /// Bytes made persistent in all.
    pub persisted_bytes: u64,
    /// Storage footprint after the run.
    pub footprint_bytes: u64,
    /// The footprint by part.
    pub footprint: Footprint,
    /// Median latency, microseconds.
    pub latency_p50_us: f64,
    /// 99th-percentile latency, microseconds.
    pub latency_p99_us: f64,
    /// With `--recovery N`: N, the transactions run before the SIGKILL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_txns: Option<u64>,
    /// With `--recovery N`: milliseconds the restart took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_ms: Option<f64>,
    /// How cache lines are written back (`clwb`, `clflushopt`, `clflush`).
    pub write_back: String,
    /// Cache line bytes.
    pub line_bytes: u64,
    /// `ok`, `not checked`, or what the recovery check found.
    pub consistency: String,
    /// Where and when it ran.
    pub run: Provenance,
}

/// An NVM engine's storage footprint by part, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// Tuples.
    pub table: u64,
    /// Index nodes.
    pub index: u64,
    /// Log.
    pub log: u64,
    /// Checkpoints.
    pub checkpoint: u64,
    /// Everything else (allocator metadata, the region's header).
    pub other: u64,
}

/// Where and on what a report was made.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Provenance {
    /// `git rev-parse --short HEAD` where the command ran, or `unknown`.
    pub git_revision: String,
    /// CPUs available.
    pub cpus: u64,
    /// Seconds since 1970 when the report was written.
    pub unix_time: u64,
}

impl Provenance {
    /// Here and now. The revision is asked of `git` once per process (the
    /// NVM matrix makes a report per run).
    pub fn now() -> Provenance {
        static GIT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let git = GIT
            .get_or_init(|| {
                std::process::Command::new("git")
                    .args(["rev-parse", "--short", "HEAD"])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                    .unwrap_or_else(|| "unknown".into())
            })
            .clone();
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get()) as u64;
        let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Provenance { git_revision: git, cpus, unix_time: unix }
    }
}

impl Footprint {
    /// All parts together.
    pub fn total(&self) -> u64 {
        self.table + self.index + self.log + self.checkpoint + self.other
    }

    /// Adds `o`'s parts to these (partitions summed).
    pub fn add(&mut self, o: &Footprint) {
        self.table += o.table;
        self.index += o.index;
        self.log += o.log;
        self.checkpoint += o.checkpoint;
        self.other += o.other;
    }
}

impl Latency {
    /// Commit latency of a run.
    pub fn of(m: &Measured) -> Latency {
        Latency {
            p50: m.latency_us(0.5),
            p99: m.latency_us(0.99),
            p999: m.latency_us(0.999),
            mean: m.latency_ns.mean() / 1e3,
            max: m.latency_ns.max() as f64 / 1e3,
        }
    }
}

impl BenchReport {
    /// The fields every benchmark shares; the caller fills in the rest.
    pub fn new(workload: &str, variant: &str, threads: usize, m: &Measured) -> BenchReport {
        BenchReport {
            workload: workload.into(),
            variant: variant.into(),
            threads: threads as u64,
            duration_s: m.elapsed_s,
            warmup_s: 0.0,
            load_s: 0.0,
            committed: m.committed,
            aborted: m.aborted,
            rolled_back: m.rolled_back,
            throughput: m.throughput(),
            abort_rate: m.abort_rate(),
            latency_us: Latency::of(m),
            timeseries: m.timeseries.clone(),
            latency_timeseries_us: m.latency_series_us.clone(),
            checkpoint_timeseries: m.checkpoint_series.clone(),
            transactions: BTreeMap::new(),
            ycsb: None,
            tpcc: None,
            durability: None,
            replication: None,
            consistency: "not checked".into(),
            run: Provenance::now(),
        }
    }
}

/// The report as pretty-printed JSON with a final newline.
pub fn to_json<T: Serialize>(report: &T) -> String {
    // Serializing plain structs of numbers, strings, maps with string keys
    // and vectors cannot fail.
    serde_json::to_string_pretty(report).unwrap_or_else(|e| unreachable!("report serialization: {e}")) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- report schema: generated from crates/epochdb-workloads/src/report.rs -->\n";
    const END: &str = "\n<!-- end of report schema -->";

    /// The schema tables of docs/json-reports.md, rendered from the doc comments of the
    /// structs above the test module in `source`.
    fn schema_tables(source: &str) -> String {
        let mut out = String::new();
        let mut doc: Vec<String> = Vec::new();
        let mut in_struct = false;
        for line in source.lines().map(str::trim) {
            if line == "#[cfg(test)]" {
                break;
            }
            if let Some(d) = line.strip_prefix("///") {
                // Rustdoc's links read as plain code in the guide.
                doc.push(d.trim().replace("[`", "`").replace("`]", "`"));
            } else if let Some(rest) = line.strip_prefix("pub struct ") {
                let name = rest.trim_end_matches(" {");
                let head = "| field | type | meaning |\n| --- | --- | --- |";
                out.push_str(&format!("\n`{name}`: {}\n\n{head}\n", doc.join(" ")));
                in_struct = true;
                doc.clear();
            } else if in_struct && line.starts_with("pub ") {
                let field = line.trim_start_matches("pub ").trim_end_matches(',');
                let (name, ty) = field.split_once(": ").unwrap_or((field, ""));
                out.push_str(&format!("| `{name}` | `{ty}` | {} |\n", doc.join(" ").replace('|', "\\|")));
                doc.clear();
            } else if line == "}" {
                in_struct = false;
                doc.clear();
            } else if !line.starts_with("#[") {
                doc.clear();
            }
        }
        out
    }

    /// The tables of docs/json-reports.md are these types' doc comments.
    #[test]
    fn documented_schema_tables_match_the_types() {
        let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/json-reports.md");
        let readme = std::fs::read_to_string(readme_path).expect("docs/json-reports.md");
        let tables = schema_tables(include_str!("report.rs"));
        let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
            panic!("docs/json-reports.md lacks the report schema markers");
        };
        let current = &readme[b + BEGIN.len()..e];
        if current != tables {
            if std::env::var_os("EPOCHDB_BLESS").is_some() {
                let updated = format!("{}{tables}{}", &readme[..b + BEGIN.len()], &readme[e..]);
                std::fs::write(readme_path, updated).expect("write docs/json-reports.md");
            } else {
                panic!("docs/json-reports.md's report schema is out of date: EPOCHDB_BLESS=1 cargo test -p epochdb-workloads --lib report");
            }
        }
    }

    /// Every field in a table is in a report of that type, and a report
    /// reads back.
    #[test]
    fn reports_keep_every_documented_field_and_round_trip() {
        let tables = schema_tables(include_str!("report.rs"));
        let m = crate::driver::Measured::empty();
        let mut r = BenchReport::new("tpcc", "memsilo", 2, &m);
        r.ycsb = Some(YcsbReport {
            mix: "silo".into(),
            distribution: "uniform".into(),
            keys: 1,
            value_bytes: 100,
            load_rss_bytes: 0,
            rss_bytes_per_row: 0.0,
        });
        r.tpcc = Some(TpccReport {
            warehouses: 1,
            read_only_as_snapshots: false,
            schema: "spec".into(),
            input_checks: BTreeMap::new(),
            load_memory_bytes: 0,
            memory_bytes: 0,
            memory_bytes_per_transaction: 0.0,
            memory_by_table: [(
                "order_line".into(),
                TableMemory { rows: 1, rows_per_transaction: 0.0, bytes_per_transaction: 0.0 },
            )]
            .into(),
        });
        r.durability = Some(DurabilityReport {
            mode: "log".into(),
            log_bytes: 0,
            log_bytes_per_txn: 0.0,
            durable_latency_us: DurableLatency::default(),
            cpu_ms_per_log_mb: 0.0,
            logger_ms_per_log_mb: 0.0,
            checkpoint: CheckpointReport::default(),
        });
        r.replication = Some(ReplicationReport { bootstrap: Some(BootstrapReport::default()), ..Default::default() });
        let rec = RecoverReport {
            pepoch: 1,
            recorded_pepoch: Some(1),
            checkpoint_bytes: 0,
            log_bytes: 0,
            records: 0,
            threads: 1,
            seconds: 0.0,
            checkpoint_seconds: 0.0,
            cpu_seconds: 0.0,
            system_seconds: 0.0,
            memory_bytes: 0,
            seconds_per_gb: 0.0,
            dropped: vec![],
            consistent: true,
            consistency: "ok".into(),
            run: Provenance::now(),
        };
        let nvm = NvmReport {
            engine: "nvm-inp".into(),
            workload: "tpcc".into(),
            latency: "dram".into(),
            partitions: 1,
            tuples: 2,
            throughput: 0.0,
            committed: 0,
            seconds: 0.0,
            load_seconds: 0.0,
            persisted_lines_per_txn: 0.0,
            persisted_bytes_per_txn: 0.0,
            persisted_bytes: 0,
            footprint_bytes: 0,
            footprint: Footprint::default(),
            latency_p50_us: 0.0,
            latency_p99_us: 0.0,
            recovery_txns: Some(1),
            recovery_ms: Some(1.0),
            write_back: "clwb".into(),
            line_bytes: 64,
            consistency: "ok".into(),
            run: Provenance::now(),
        };
        let all = [to_json(&r), to_json(&rec), to_json(&nvm)].join("");
        for row in tables.lines().filter(|l| l.starts_with("| `")) {
            let field = row.split('`').nth(1).expect("field name");
            assert!(all.contains(&format!("\"{field}\":")), "{field} is documented but in no report");
        }
        let back: BenchReport = serde_json::from_str(&to_json(&r)).expect("bench report parses");
        assert_eq!(back.threads, 2);
        assert!(back.durability.is_some() && back.tpcc.is_some());
        let back: RecoverReport = serde_json::from_str(&to_json(&rec)).expect("recover report parses");
        assert_eq!(back.recorded_pepoch, Some(1));
        let back: NvmReport = serde_json::from_str(&to_json(&nvm)).expect("nvm report parses");
        assert_eq!(back.recovery_ms, Some(1.0));
    }
}

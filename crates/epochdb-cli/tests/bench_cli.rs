//! The `epochdb` binary end to end: short benchmark runs, their JSON, and
//! errors for bad arguments.

use epochdb_workloads::report::{BenchReport, RecoverReport};
use std::process::Command;

fn epochdb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_epochdb")).args(args).output().expect("run epochdb")
}

/// A report, read back into its type: every documented field is there
/// with the right type, or this fails.
fn read<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> T {
    let text = std::fs::read_to_string(path).expect("report");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// `--transactions N`: every thread commits exactly N after the warm-up,
/// then the run ends (runs of equal work, as Silo's --ops-per-worker).
#[test]
fn a_transaction_count_ends_the_run() {
    let json = std::env::temp_dir().join(format!("epochdb-cli-count-{}.json", std::process::id()));
    let mut args: Vec<&str> =
        "bench ycsb --threads 2 --transactions 3000 --warmup 0 --keys 5000 --quiet --json".split(' ').collect();
    args.push(json.to_str().expect("utf-8 path"));
    let out = epochdb(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: BenchReport = read(&json);
    assert_eq!(r.committed, 6000);
    std::fs::remove_file(&json).ok();
    let both = epochdb(&["bench", "ycsb", "--transactions", "10", "--duration", "1", "--quiet"]);
    assert_eq!(both.status.code(), Some(2), "--transactions and --duration together");
    assert!(String::from_utf8_lossy(&both.stderr).contains("--duration"), "{both:?}");
}

#[test]
fn ycsb_runs_every_variant_and_writes_its_report() {
    let dir = std::env::temp_dir().join(format!("epochdb-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    for (variant, mix) in [("memsilo", "silo"), ("kv", "silor"), ("global-tid", "d"), ("memsilo", "e")] {
        let json = dir.join(format!("{variant}-{mix}.json"));
        let out = epochdb(&[
            "bench",
            "ycsb",
            "--threads",
            "2",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--keys",
            "5000",
            "--mix",
            mix,
            "--variant",
            variant,
            "--quiet",
            "--check",
            "--json",
            json.to_str().expect("utf-8 path"),
        ]);
        assert!(out.status.success(), "{variant}/{mix}: {}", String::from_utf8_lossy(&out.stderr));
        let r: BenchReport = read(&json);
        assert_eq!((r.workload.as_str(), r.variant.as_str(), r.threads), ("ycsb", variant, 2));
        assert_eq!(r.consistency, "ok");
        assert!(r.committed > 0 && r.throughput > 0.0 && r.latency_us.p50 > 0.0);
        assert_eq!(r.timeseries.len(), r.latency_timeseries_us.len());
        assert_eq!(r.ycsb.as_ref().map(|y| y.keys), Some(5000));
        assert!(r.tpcc.is_none() && r.durability.is_none());
        if mix == "silo" {
            // The reported counts follow the mix: 80% reads, 20% read-modify-writes.
            let n = |k: &str| r.transactions[k] as f64;
            let total = n("read") + n("rmw");
            assert!((n("read") / total - 0.8).abs() < 0.02, "{:?}", r.transactions);
            assert_eq!(n("update") + n("insert") + n("scan"), 0.0);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_short_tpcc_run_passes_its_consistency_checks() {
    let json = std::env::temp_dir().join(format!("epochdb-tpcc-{}.json", std::process::id()));
    let out = epochdb(&[
        "bench",
        "tpcc",
        "--threads",
        "2",
        "--warehouses",
        "2",
        "--duration",
        "2",
        "--warmup",
        "0.5",
        "--quiet",
        "--check",
        "--memory-by-table",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: BenchReport = read(&json);
    std::fs::remove_file(&json).ok();
    assert_eq!((r.workload.as_str(), r.consistency.as_str()), ("tpcc", "ok"));
    let tpcc = r.tpcc.expect("tpcc fields");
    assert_eq!((tpcc.warehouses, tpcc.schema.as_str()), (2, "spec"));
    assert!(r.committed > 100, "{} transactions", r.committed);
    // The input generators produce the specified mix (loose bounds: short run).
    let pct = |name: &str| tpcc.input_checks[name];
    assert!((50.0..70.0).contains(&pct("payment_by_last_name_percent")));
    assert!((8.0..12.0).contains(&pct("order_lines_per_order")));
    let mix: Vec<f64> = ["new_order", "payment", "order_status", "delivery", "stock_level"]
        .iter()
        .map(|t| r.transactions[*t] as f64)
        .collect();
    let total: f64 = mix.iter().sum();
    assert!((mix[0] / total - 0.45).abs() < 0.03 && (mix[1] / total - 0.43).abs() < 0.03, "{mix:?}");
    // The memory the rows take: 2 loaded warehouses hold well over 100
    // MB; every NEW-ORDER adds an order and its lines.
    assert!(tpcc.load_memory_bytes > 100 << 20, "{} bytes after the load", tpcc.load_memory_bytes);
    let added = (tpcc.memory_bytes - tpcc.load_memory_bytes) as f64 / total;
    assert!((added - tpcc.memory_bytes_per_transaction).abs() < 1.0 && added > 100.0, "{added} bytes per transaction");
    // `--memory-by-table`: a NEW-ORDER (45%) adds about ten order lines,
    // a PAYMENT (43%) a history row; ITEM never changes. The rows'
    // footprints make up most of what the run added (the rest: leaves'
    // empty slots, inner nodes, garbage not yet freed).
    let table = |name: &str| &tpcc.memory_by_table[name];
    assert_eq!(tpcc.memory_by_table.len(), 13, "{:?}", tpcc.memory_by_table.keys());
    assert!((3.5..5.5).contains(&table("order_line").rows_per_transaction), "{:?}", table("order_line"));
    assert!((0.35..0.5).contains(&table("history").rows_per_transaction), "{:?}", table("history"));
    assert_eq!((table("item").rows, table("item").rows_per_transaction), (100_000, 0.0));
    let bytes: f64 = tpcc.memory_by_table.values().map(|t| t.bytes_per_transaction).sum();
    assert!((0.7..=1.05).contains(&(bytes / added)), "{bytes} of {added} bytes per transaction");
    // Snapshot reads for the read-only transactions work too.
    let out = epochdb(&[
        "bench",
        "tpcc",
        "--threads",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--check",
        "--snapshot-reads",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_arguments_are_reported_not_panicked() {
    for args in [
        &["bench", "ycsb", "--mix", "nope"][..],
        &["bench", "ycsb", "--threads", "x"],
        &["bench", "ycsb", "--typo", "1"],
        &["bench", "ycsb", "--variant", "kv", "--mix", "e", "--keys", "100"],
        &["bench", "tpcc", "--variant", "kv"],
        &["bench", "tpcc", "--warehouses", "0", "--duration", "0"],
        &["frobnicate"],
    ] {
        let out = epochdb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(err.starts_with("error: ") && err.contains("try '--help'"), "{args:?}: {err}");
    }
    assert!(epochdb(&["help"]).status.success());
}

/// #21: clap's usual behaviour: help per subcommand, --version,
/// --flag=value, ranges in the messages, completions.
#[test]
fn the_command_line_behaves_as_clap_programs_do() {
    let text = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let out = epochdb(&["--help"]);
    assert!(out.status.success() && text(&out).contains("Usage: epochdb <COMMAND>"), "{}", text(&out));
    let out = epochdb(&["bench", "tpcc", "--help"]);
    assert!(out.status.success() && text(&out).contains("--warehouses <N>"), "{}", text(&out));
    assert!(text(&out).contains("log+checkpoint"), "the durability modes are listed: {}", text(&out));
    let out = epochdb(&["--version"]);
    assert!(out.status.success() && text(&out).starts_with("epochdb "), "{}", text(&out));
    for (args, says) in [
        (&["bench", "tpcc", "--threads", "0"][..], "0 is not in 1..=1024"),
        (&["bench", "tpcc", "--duration", "-1"], "must be a number between 0.001 and 1000000"),
        (&["bench", "tpcc", "--duration=-1"], "must be a number between 0.001 and 1000000"),
        (&["bench", "ycsb", "--mix=nope"], "possible values: silo"),
        (&["bench", "tpcc", "--durability", "sometimes"], "possible values: off, log, log+checkpoint"),
        (&["bench", "ycsb", "--json", "-", "--plot", "-"], "cannot both write to standard output"),
        // The NVM testbed is in the binary only with the `lab` feature.
        (
            &["bench", "nvm", "--matrix", "--json", "m.json"],
            if cfg!(feature = "lab") { "cannot be used with" } else { "unrecognized subcommand 'nvm'" },
        ),
    ] {
        let out = epochdb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // `--flag=value` is accepted like `--flag value`.
    let out = epochdb(&["bench", "ycsb", "--keys=1000", "--duration=0.2", "--warmup=0", "--threads=1", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for shell in ["bash", "zsh", "fish"] {
        let out = epochdb(&["completions", shell]);
        assert!(out.status.success() && text(&out).contains("recover"), "{shell}: {}", text(&out));
    }
}

/// `--json -` puts the report alone on standard output.
#[test]
fn a_report_on_standard_output_is_only_json() {
    let out = epochdb(&["bench", "ycsb", "--keys", "1000", "--duration", "0.2", "--warmup", "0", "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: BenchReport = serde_json::from_slice(&out.stdout).expect("stdout is one JSON report");
    assert_eq!(r.workload, "ycsb");
    assert!(String::from_utf8_lossy(&out.stderr).contains("txn/s"), "the summary went to standard error");
}

/// Regression: `epochdb ... | head -1` made the command panic on the
/// closed pipe ("failed printing to stdout").
#[test]
fn a_closed_stdout_is_not_a_crash() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .arg("help")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A durable TPC-C run, then `recover --check tpcc` and `inspect` on its
/// data directory.
#[test]
fn durable_tpcc_recovers_consistent() {
    let dir = std::env::temp_dir().join(format!("epochdb-cli-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.to_string_lossy().into_owned();
    let json = dir.with_extension("json");
    let out = epochdb(&[
        "bench",
        "tpcc",
        "--threads",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--check",
        "--durability",
        "log+checkpoint",
        "--checkpoint-interval",
        "0.3",
        "--data-dir",
        &data,
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: BenchReport = read(&json);
    let d = r.durability.expect("durability fields");
    assert_eq!(d.mode, "log+checkpoint");
    assert!(d.log_bytes > 0 && d.durable_latency_us.count > 0 && d.checkpoint.installed > 0, "{d:?}");
    let out = epochdb(&[
        "recover",
        "--data-dir",
        &data,
        "--check",
        "tpcc",
        "--quiet",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("consistency: ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: RecoverReport = read(&json);
    assert!(r.pepoch > 0 && r.records > 0 && r.log_bytes > 0 && r.consistent, "{r:?}");
    assert_eq!((r.recorded_pepoch, r.consistency.as_str()), (Some(r.pepoch), "ok"));
    let out = epochdb(&["inspect", "--data-dir", &data]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("pepoch") && stdout.contains("checkpoint: e_l"), "{stdout}");
    let out = epochdb(&["bench", "tpcc", "--durability", "log", "--data-dir", "/etc", "--duration", "1"]);
    assert!(!out.status.success(), "a directory epochdb did not write is never emptied");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_file(&json).ok();
}

/// `--replicas 1 --safety sync --schema silo`: the benchmark starts a backup process,
/// reports its lag and its readers' rate, and the backup's directory recovers to a TPC-C state
/// that passes the consistency checks; so with `--replicas-join end`,
/// which reports how long the backup took to bootstrap.
#[test]
fn a_benchmark_with_a_replica_reports_its_lag_and_the_backup_is_consistent() {
    let dir = std::env::temp_dir().join(format!("epochdb-cli-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.to_string_lossy().into_owned();
    let json = dir.with_extension("json");
    let json_path = json.to_str().expect("utf-8");
    // A 1-second, 1-thread durable TPC-C run with one replica.
    let bench = |durability: &str, extra: &[&str]| -> BenchReport {
        let mut args = vec!["bench", "tpcc", "--threads", "1", "--duration", "1", "--warmup", "0", "--quiet"];
        // Each run replaces the last one's database and its replica's.
        args.extend(["--durability", durability, "--data-dir", &data, "--overwrite", "--replicas", "1"]);
        args.extend(["--json", json_path]);
        args.extend(extra);
        let out = epochdb(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        read(&json)
    };
    let backup = format!("{data}.replica-0");
    let backup_is_consistent = || {
        let out = epochdb(&["recover", "--data-dir", &backup, "--check", "tpcc", "--quiet"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("consistency: ok"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let svg = dir.with_extension("svg");
    // Silo's schema here (order lines without OL_DIST_INFO): the readers
    // and the check below find it in the load marker.
    let plot_args = ["--plot", svg.to_str().expect("utf-8"), "--schema", "silo"];
    let r = bench("log", &[&["--safety", "sync", "--replica-readers", "1"][..], &plot_args].concat());
    assert_eq!(r.tpcc.as_ref().map(|t| t.schema.as_str()), Some("silo"));
    let rep = r.replication.expect("replication fields");
    assert_eq!((rep.replicas, rep.safety.as_str()), (1, "Sync"));
    // Freshness over the run: a lag per second, and its plot.
    assert!(!rep.lag_series_ms.is_empty(), "{rep:?}");
    let plot = std::fs::read_to_string(&svg).expect("the plot");
    assert!(plot.matches("<polyline").count() == 3 && plot.contains("freshness"), "{plot}");
    let _ = std::fs::remove_file(&svg);
    assert!(rep.samples > 0 && rep.backup_cores > 0.0 && rep.backup_reads_per_s > 0.0, "{rep:?}");
    let primary = r.durability.as_ref().map_or(0.0, |d| d.cpu_ms_per_log_mb);
    assert!(rep.backup_ms_per_log_mb > 0.0 && primary > 0.0, "CPU per MB of log: {rep:?}");
    let reads = format!("{data}.replica-0.reads.json");
    assert!(!std::path::Path::new(&reads).exists(), "the readers' count outlived the run");
    // Under sync the backup persisted every released epoch.
    assert_eq!(rep.persist_lag_epochs.max, 0, "{rep:?}");
    backup_is_consistent();
    // A backup that joins after the run bootstraps from the checkpoint
    // and the logs, and its directory is as consistent.
    let r =
        bench("log+checkpoint", &["--checkpoint-interval", "0.2", "--replicas-join", "end", "--replay-threads", "2"]);
    let boot = r.replication.and_then(|r| r.bootstrap).expect("bootstrap fields");
    assert!(boot.released_epoch > 0 && boot.primary_bytes > 0, "{boot:?}");
    assert!(boot.in_sync_s > 0.0 && boot.caught_up_s >= boot.in_sync_s && boot.backup_cpu_s > 0.0, "{boot:?}");
    backup_is_consistent();
    let out = epochdb(&["bench", "ycsb", "--replicas", "1", "--duration", "0.2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && stderr.contains("--replicas needs --durability"), "{stderr}");
    let out = epochdb(&["bench", "ycsb", "--durability", "log", "--replicas", "1", "--replica-readers", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && stderr.contains("use it with bench tpcc"), "{stderr}");
    for d in [dir.clone(), backup.into()] {
        std::fs::remove_dir_all(d).ok();
    }
    std::fs::remove_file(json).ok();
}

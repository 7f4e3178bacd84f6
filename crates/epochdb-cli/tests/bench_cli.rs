//! The `epochdb` binary end to end: short benchmark runs, their JSON, and
//! errors for bad arguments.

use std::process::Command;

fn epochdb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_epochdb")).args(args).output().expect("run epochdb")
}

fn field<'a>(json: &'a str, name: &str) -> &'a str {
    let at = json.find(&format!("\"{name}\": ")).unwrap_or_else(|| panic!("no field {name} in {json}"));
    let rest = &json[at + name.len() + 4..];
    rest[..rest.find([',', '\n']).unwrap_or(rest.len())].trim()
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
        let report = std::fs::read_to_string(&json).expect("report");
        assert_eq!(field(&report, "workload"), "\"ycsb\"");
        assert_eq!(field(&report, "variant"), format!("\"{variant}\""));
        assert_eq!(field(&report, "threads"), "2");
        assert_eq!(field(&report, "consistency"), "\"ok\"");
        let committed: u64 = field(&report, "committed").parse().expect("committed");
        assert!(committed > 0);
        let throughput: f64 = field(&report, "throughput").parse().expect("throughput");
        assert!(throughput > 0.0);
        for f in ["abort_rate", "p50", "p99", "p999", "timeseries", "duration_s"] {
            field(&report, f);
        }
        if mix == "silo" {
            // The reported counts follow the mix: 80% reads, 20% read-modify-writes.
            let n = |k: &str| field(&report, k).parse::<f64>().expect(k);
            let total = n("read") + n("rmw");
            assert!((n("read") / total - 0.8).abs() < 0.02, "{report}");
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
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(&json).expect("report");
    std::fs::remove_file(&json).ok();
    assert_eq!(field(&report, "workload"), "\"tpcc\"");
    assert_eq!(field(&report, "consistency"), "\"ok\"");
    assert_eq!(field(&report, "warehouses"), "2");
    let committed: u64 = field(&report, "committed").parse().expect("committed");
    assert!(committed > 100, "{committed} transactions");
    // The input generators produce the specified mix (loose bounds: short run).
    let pct = |name: &str| field(&report, name).parse::<f64>().expect(name);
    assert!((50.0..70.0).contains(&pct("payment_by_last_name_percent")));
    assert!((8.0..12.0).contains(&pct("order_lines_per_order")));
    let mix: Vec<f64> = ["new_order", "payment", "order_status", "delivery", "stock_level"]
        .iter()
        .map(|t| field(&report, t).parse().expect("mix count"))
        .collect();
    let total: f64 = mix.iter().sum();
    assert!((mix[0] / total - 0.45).abs() < 0.03 && (mix[1] / total - 0.43).abs() < 0.03, "{mix:?}");
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
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("epochdb: "), "{args:?}");
    }
    assert!(epochdb(&["help"]).status.success());
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
    let report = std::fs::read_to_string(&json).expect("report");
    for field in ["\"durable_latency_us\"", "\"log_bytes\"", "\"p99\"", "\"checkpoint\""] {
        assert!(report.contains(field), "{field} missing from {report}");
    }
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
    let report = std::fs::read_to_string(&json).expect("report");
    for field in ["\"pepoch\"", "\"checkpoint_bytes\"", "\"log_bytes\"", "\"records\"", "\"seconds\""] {
        assert!(report.contains(field), "{field} missing from {report}");
    }
    let out = epochdb(&["inspect", "--data-dir", &data]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("pepoch") && stdout.contains("checkpoint: e_l"), "{stdout}");
    let out = epochdb(&["bench", "tpcc", "--durability", "log", "--data-dir", "/etc", "--duration", "1"]);
    assert!(!out.status.success(), "a directory epochdb did not write is never emptied");
    std::fs::remove_dir_all(&dir).ok();
}

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
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_arguments_are_reported_not_panicked() {
    for args in [
        &["bench", "ycsb", "--mix", "nope"][..],
        &["bench", "ycsb", "--threads", "x"],
        &["bench", "ycsb", "--typo", "1"],
        &["bench", "ycsb", "--variant", "kv", "--mix", "e", "--keys", "100"],
        &["frobnicate"],
    ] {
        let out = epochdb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("epochdb: "), "{args:?}");
    }
    assert!(epochdb(&["help"]).status.success());
}

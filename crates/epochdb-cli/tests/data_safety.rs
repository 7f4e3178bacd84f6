//! Regression tests for issue #17's command-line defects, run as child
//! processes of the real binary: a bench that emptied a live database (#1)
//! or user files inside epochdb-named entries (#2), a data directory that
//! opened only from the working directory that created it (#3), and
//! numbers that panicked (#7).

use epochdb::{Database, Durability, Options, TableOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn epochdb_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_epochdb")).current_dir(cwd).args(args).output().expect("run epochdb")
}

fn epochdb(args: &[&str]) -> Output {
    epochdb_in(&std::env::temp_dir(), args)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("epochdb-safety-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn str_of(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A short durable YCSB bench on `dir` (with extra arguments).
fn bench(cwd: &Path, dir: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "ycsb",
        "--threads",
        "1",
        "--keys",
        "2000",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--quiet",
        "--durability",
        "log",
        "--data-dir",
        dir,
    ];
    args.extend_from_slice(extra);
    epochdb_in(cwd, &args)
}

fn durable(dir: &Path) -> Options {
    Options {
        durability: Durability::Log,
        data_dir: Some(dir.into()),
        epoch_interval: Duration::from_millis(5),
        ..Options::default()
    }
}

/// Rows of table `t`.
fn rows(db: &Database) -> usize {
    let t = db.table("t").expect("table t");
    let mut w = db.worker().expect("worker");
    w.run(|txn| txn.scan(t, .., usize::MAX, |_, _| true)).expect("scan")
}

/// #1: a bench on the directory of a running application must not empty
/// it: the application's acknowledged transactions must all survive.
#[test]
fn a_bench_never_empties_a_database_another_process_has_open() {
    let dir = scratch("live");
    let db = Database::open(durable(&dir)).expect("open");
    let t = db.create_table("t", TableOptions::new()).expect("table");
    let mut w = db.worker().expect("worker");
    for i in 0..10u32 {
        w.run_durable(|txn| txn.put(t, &i.to_be_bytes(), b"acknowledged")).expect("put");
    }
    let out = bench(&dir, str_of(&dir), &[]);
    assert!(!out.status.success(), "the bench ran on a live database: {}", text(&out));
    assert!(text(&out).contains("open elsewhere"), "{}", text(&out));
    for i in 10..15u32 {
        w.run_durable(|txn| txn.put(t, &i.to_be_bytes(), b"acknowledged")).expect("put after the bench");
    }
    drop(w);
    drop(db);
    let db = Database::open(durable(&dir)).expect("reopen");
    assert_eq!(rows(&db), 15, "acknowledged rows lost");
}

/// #1: two benches on one directory: the second refuses, the first ends
/// with its database whole.
#[test]
fn a_second_bench_on_a_running_benchs_directory_refuses() {
    let dir = scratch("two-benches");
    let data = dir.join("db");
    let first = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .args(["bench", "ycsb", "--threads", "1", "--keys", "20000", "--duration", "3", "--warmup", "0"])
        .args(["--quiet", "--check", "--durability", "log", "--data-dir", str_of(&data)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("first bench");
    std::thread::sleep(Duration::from_millis(1500));
    let second = bench(&dir, str_of(&data), &[]);
    let first = first.wait_with_output().expect("first bench ends");
    assert!(!second.status.success(), "the second bench ran: {}", text(&second));
    assert!(first.status.success(), "the first bench failed: {}", text(&first));
    let out = epochdb(&["recover", "--data-dir", str_of(&data), "--check", "ycsb", "--quiet"]);
    assert!(out.status.success() && text(&out).contains("consistency: ok"), "{}", text(&out));
}

/// #2: only files epochdb wrote are deleted, however they are named.
#[test]
fn a_bench_refuses_to_delete_files_epochdb_did_not_write() {
    let dir = scratch("foreign");
    // A data directory with an epochdb-named entry holding a user's file.
    let data = dir.join("db");
    assert!(bench(&dir, str_of(&data), &[]).status.success());
    let notes = data.join("log/notes.txt");
    std::fs::write(&notes, "mine").expect("user file");
    let out = bench(&dir, str_of(&data), &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("notes.txt"), "the refusal names the file: {}", text(&out));
    assert_eq!(std::fs::read_to_string(&notes).expect("still there"), "mine");

    // A log directory holding a user's file called data.log, and a user's
    // file in a directory called checkpoint.
    let logs = dir.join("logs");
    std::fs::create_dir_all(logs.join("checkpoint")).expect("dirs");
    std::fs::write(logs.join("data.log"), "my data").expect("user file");
    std::fs::write(logs.join("checkpoint/notes.txt"), "mine").expect("user file");
    let out = bench(&dir, str_of(&dir.join("db2")), &["--log-dir", str_of(&logs)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(logs.join("data.log")).expect("kept"), "my data");
    assert_eq!(std::fs::read_to_string(logs.join("checkpoint/notes.txt")).expect("kept"), "mine");
}

/// The record count `recover` printed.
fn recovered(out: &Output) -> u64 {
    let t = text(out);
    let at = t.find("recovered ").unwrap_or_else(|| panic!("no summary: {t}"));
    t[at + 10..].split_whitespace().next().and_then(|n| n.parse().ok()).expect("a count")
}

/// #3: a data directory opens from any working directory, under any
/// spelling of its path, moved, or copied.
#[test]
fn a_data_directory_opens_from_anywhere_moved_or_copied() {
    let dir = scratch("relocate");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    // Created through a relative path, with checkpoints installed.
    let out = bench(&work, "rel-db", &["--durability", "log+checkpoint", "--checkpoint-interval", "0.1"]);
    assert!(out.status.success(), "{}", text(&out));
    let data = work.join("rel-db");
    let inspect = epochdb(&["inspect", "--data-dir", str_of(&data)]);
    assert!(!text(&inspect).contains("checkpoint: none"), "no checkpoint was installed: {}", text(&inspect));
    let check = |cwd: &Path, spelled: &str, what: &str| {
        let out = epochdb_in(cwd, &["recover", "--data-dir", spelled, "--check", "ycsb", "--quiet"]);
        assert!(out.status.success(), "{what}: {}", text(&out));
        assert!(text(&out).contains("consistency: ok"), "{what}: {}", text(&out));
        recovered(&out)
    };
    let records = check(&dir, str_of(&data), "absolute path");
    assert_eq!(check(&data, ".", "--data-dir ."), records);
    let moved = dir.join("moved");
    std::fs::rename(&data, &moved).expect("move");
    assert_eq!(check(&dir, "moved", "moved"), records);
    let copy = dir.join("copy");
    let cp = Command::new("cp").args(["-a", str_of(&moved), str_of(&copy)]).status().expect("cp");
    assert!(cp.success());
    std::fs::remove_dir_all(&moved).expect("remove the original");
    assert_eq!(check(&dir, str_of(&copy), "a cp -a copy"), records);
}

/// #7: every bad number is a usage error with the allowed range.
#[test]
fn bad_numbers_are_usage_errors_not_panics() {
    let dir = scratch("numbers");
    let data = dir.join("db");
    for (flag, value) in [
        ("--duration", "-1"),
        ("--duration", "nan"),
        ("--duration", "1e30"),
        ("--duration", "0"),
        ("--warmup", "-1"),
        ("--warmup", "inf"),
        ("--checkpoint-interval", "1e300"),
        ("--epoch-ms", "-5"),
    ] {
        let out = bench(&dir, str_of(&data), &[flag, value, "--durability", "log+checkpoint"]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {t}");
        assert!(!t.contains("panicked"), "{flag} {value}: {t}");
        assert!(t.contains(flag) && t.contains("between"), "{flag} {value}: the message gives the range: {t}");
    }
}

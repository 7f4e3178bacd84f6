//! Regression tests for command-line defects, run as child
//! processes of the real binary: a bench that emptied a live database
//! or user files inside epochdb-named entries, a data directory that
//! opened only from the working directory that created it, and
//! numbers that panicked.

mod common;

use common::Scratch;
use epochdb::{Database, Durability, Options, TableOptions};
use epochdb_testkit::files::snapshot_of;
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

/// A fresh directory for one test, removed once it passed.
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("safety-{name}"))
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
    // Even told to overwrite it.
    let out = bench(&dir, str_of(&dir), &["--overwrite"]);
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
    // Once the first bench's manifest exists, it has the directory open
    // (and spends seconds loading and running).
    while !data.join("manifest").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let out = bench(&dir, str_of(&data), &["--overwrite"]);
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

/// A durable YCSB database with a checkpoint installed, in `dir/db`.
fn checkpointed_db(dir: &Path) -> PathBuf {
    let data = dir.join("db");
    let extra =
        ["--durability", "log+checkpoint", "--checkpoint-interval", "0.1", "--mix", "read-only", "--keys", "20000"];
    let out = bench(dir, str_of(&data), &extra);
    assert!(out.status.success(), "{}", text(&out));
    data
}

/// A checkpoint file with blocks, of the data directory's installed
/// checkpoint (a run may also leave an uninstalled one behind, which
/// recovery never reads).
fn a_checkpoint_file(data: &Path) -> PathBuf {
    let out = text(&epochdb(&["inspect", "--data-dir", str_of(data)]));
    let at = out.find("checkpoint: e_l ").unwrap_or_else(|| panic!("no checkpoint: {out}"));
    let e_l: u64 = out[at + 16..].split(',').next().and_then(|e| e.parse().ok()).expect("e_l");
    let set = data.join("checkpoint").join(format!("ckpt.{e_l}"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(set).expect("set").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files.into_iter().find(|f| std::fs::metadata(f).expect("meta").len() > 8192).expect("a checkpoint file with blocks")
}

/// `verify` reads everything, checks, writes nothing (also in rounds),
/// and works where it cannot write; a flipped checkpoint byte fails it,
/// naming the file.
#[test]
fn verify_checks_a_database_without_writing() {
    let dir = scratch("verify");
    let data = checkpointed_db(&dir);
    let before = snapshot_of(&data);
    let out = epochdb(&["verify", "--data-dir", str_of(&data), "--check", "ycsb", "--quiet", "--rounds", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let (rounds, oks) = (text(&out).matches("verified ").count(), text(&out).matches("consistency: ok").count());
    assert!(rounds == 2 && oks == 2, "two rounds, each checked: {}", text(&out));
    assert!(before == snapshot_of(&data), "verify changed the directory");

    // As a user who cannot write there (root ignores permissions).
    let as_nobody = unsafe_is_root() && Path::new("/usr/bin/setpriv").exists();
    if !as_nobody {
        let chmod = Command::new("chmod").args(["-R", "a-w", str_of(&data)]).status().expect("chmod");
        assert!(chmod.success());
    }
    let mut cmd = if as_nobody {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_epochdb")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_epochdb"))
    };
    let out = cmd.args(["verify", "--data-dir", str_of(&data), "--quiet"]).output().expect("verify");
    assert!(out.status.success(), "verify on a directory it cannot write: {}", text(&out));
    // Opening it to write there fails, naming the operation and the path.
    if as_nobody {
        let out = Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_epochdb")])
            .args(["recover", "--data-dir", str_of(&data), "--quiet"])
            .output()
            .expect("recover");
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let lock = data.join("LOCK");
        assert!(text(&out).contains(&format!("open {}: Permission denied", lock.display())), "{}", text(&out));
    }
    if !as_nobody {
        Command::new("chmod").args(["-R", "u+w", str_of(&data)]).status().expect("chmod");
    }

    let victim = a_checkpoint_file(&data);
    let mut bytes = std::fs::read(&victim).expect("read");
    bytes[4096 + 100] ^= 1;
    std::fs::write(&victim, &bytes).expect("flip");
    let out = epochdb(&["verify", "--data-dir", str_of(&data), "--quiet"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let name = victim.file_name().expect("name").to_string_lossy().into_owned();
    assert!(text(&out).contains("corruption") && text(&out).contains(&name), "{}", text(&out));
    assert!(!text(&out).contains("epochdb help"), "a runtime error is no usage error: {}", text(&out));
}

/// Whether this process runs as root.
fn unsafe_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `inspect` reads checkpoint files too, and fails on what is no database.
#[test]
fn inspect_reports_checkpoint_damage_and_refuses_what_is_no_database() {
    let dir = scratch("inspect");
    let data = checkpointed_db(&dir);
    let out = epochdb(&["inspect", "--data-dir", str_of(&data)]);
    assert!(out.status.success() && text(&out).contains("blocks"), "{}", text(&out));
    let victim = a_checkpoint_file(&data);
    let mut bytes = std::fs::read(&victim).expect("read");
    bytes[4096 + 100] ^= 1;
    std::fs::write(&victim, &bytes).expect("flip");
    let out = epochdb(&["inspect", "--data-dir", str_of(&data)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("PROBLEM") && text(&out).contains("checksum"), "{}", text(&out));

    std::fs::write(dir.join("afile"), "x").expect("file");
    std::fs::create_dir_all(dir.join("empty")).expect("dir");
    for (what, path) in [("missing", dir.join("missing")), ("a file", dir.join("afile")), ("empty", dir.join("empty"))]
    {
        let out = epochdb(&["inspect", "--data-dir", str_of(&path)]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out));
        assert!(text(&out).contains(str_of(&path)), "{what}: the error names the path: {}", text(&out));
    }
}

/// Options that do nothing, or cannot work, are usage errors before
/// anything runs; runtime errors do not point at the usage.
#[test]
fn options_that_cannot_work_are_refused_up_front() {
    let dir = scratch("options");
    let ycsb = |extra: &[&str]| {
        let mut args = vec!["bench", "ycsb", "--keys", "1000", "--duration", "0.2", "--warmup", "0", "--quiet"];
        args.extend_from_slice(extra);
        epochdb_in(&dir, &args)
    };
    let out = ycsb(&["--data-dir", "db"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--data-dir needs --durability"), "{}", text(&out));
    assert!(!dir.join("db").exists());

    let out = epochdb_in(&dir, &["bench", "tpcc", "--warehouses", "1000000", "--quiet"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("memory"), "{}", text(&out));

    let out = ycsb(&["--plot", "/nonexistent/dir/plot.svg"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--plot") && !text(&out).contains("txn/s"), "refused before the run: {}", text(&out));

    let out = epochdb(&["recover", "--data-dir", str_of(&dir.join("nothing-here"))]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("holds no epochdb database") && !text(&out).contains("epochdb help"), "{}", text(&out));
}

/// A TPC-C load killed part way is reported as a load that never
/// finished, not as a consistency failure.
#[test]
fn a_killed_tpcc_load_is_reported_as_unfinished() {
    let dir = scratch("tpcc-load");
    let data = dir.join("db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .args(["bench", "tpcc", "--warehouses", "4", "--threads", "1", "--duration", "30", "--quiet"])
        .args(["--durability", "log", "--data-dir", str_of(&data)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("bench");
    // Loading 4 warehouses takes seconds; the manifest appears at open.
    while !data.join("manifest").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let out = epochdb(&["recover", "--data-dir", str_of(&data), "--check", "tpcc", "--quiet"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("load never finished"), "{}", text(&out));
}

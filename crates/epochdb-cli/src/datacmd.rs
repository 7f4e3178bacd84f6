//! Commands on a data directory: `recover` (recover it as opening would,
//! and report), `verify` (the same, read-only: writes nothing), and
//! `inspect` (a summary, block by block).

use crate::args::{failed, Args, CliResult};
use crate::say;
use epochdb::{Durability, Error, Options};
use epochdb_workloads::engine::{EpochDb, Variant};
use epochdb_workloads::report;
use epochdb_workloads::{tpcc, ycsb};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options that take no value.
pub const RECOVER_FLAGS: &[&str] = &["--quiet", "--salvage"];
pub const VERIFY_FLAGS: &[&str] = &["--quiet"];

/// What `recover` and `verify` share: the directory, its log directories,
/// threads, a check, a report.
struct Target {
    data_dir: String,
    log_dirs: Vec<PathBuf>,
    threads: usize,
    check: Option<String>,
    json_path: Option<String>,
    quiet: bool,
}

impl Target {
    fn parse(a: &mut Args) -> CliResult<Target> {
        let data_dir = a.take_str("--data-dir").ok_or("--data-dir is required")?;
        let check = a.take_str("--check");
        if let Some(c) = check.as_deref().filter(|c| !["tpcc", "ycsb"].contains(c)) {
            return Err(format!("--check {c:?}: tpcc or ycsb").into());
        }
        Ok(Target {
            data_dir,
            log_dirs: a.take_paths("--log-dir"),
            threads: a.take_int("--threads", 0, 0, 1024)?,
            check,
            json_path: a.take_output("--json")?,
            quiet: a.flag("--quiet"),
        })
    }

    fn options(&self) -> Options {
        Options {
            durability: Durability::Log,
            data_dir: Some(self.data_dir.clone().into()),
            log_dirs: self.log_dirs.clone(),
            recovery_threads: self.threads,
            ..Options::default()
        }
    }
}

/// `epochdb recover`: recovers a data directory (as opening it would,
/// so it writes: the pepoch file, the manifest, a crashed `data.log`
/// sealed), with a progress bar, then reports what it read and how fast.
pub fn recover(mut a: Args) -> CliResult<ExitCode> {
    let t = Target::parse(&mut a)?;
    let salvage = a.flag("--salvage");
    a.finish()?;
    // Opening a directory without a database would create one.
    if !Path::new(&t.data_dir).join("manifest").is_file() {
        return Err(failed(Error::NotADatabase(t.data_dir.clone().into())));
    }
    run(&t, Options { salvage, ..t.options() }, "recovered")
}

/// `epochdb verify`: reads every checkpoint and log block (checksums and
/// the epoch rules), replays them into memory and, with `--check`, checks
/// the workload's invariants; writes nothing, so it works on a read-only
/// copy or beside other readers (not beside a process that has the
/// database open). Exit status 1 if anything is wrong.
pub fn verify(mut a: Args) -> CliResult<ExitCode> {
    let t = Target::parse(&mut a)?;
    a.finish()?;
    run(&t, Options { read_only: true, ..t.options() }, "verified")
}

fn run(t: &Target, options: Options, verb: &str) -> CliResult<ExitCode> {
    let shown = std::sync::atomic::AtomicU64::new(u64::MAX);
    let progress = |p: epochdb::Progress| {
        let done = p.phase == epochdb::Phase::Done;
        let frac = if p.total_bytes == 0 || done { 1.0 } else { p.done_bytes as f64 / p.total_bytes as f64 };
        // Redraw only when the phase or the whole percentage changes.
        let key = (p.phase as u64) << 32 | (frac * 100.0) as u64;
        if t.quiet || shown.swap(key, std::sync::atomic::Ordering::Relaxed) == key {
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
    let opened = EpochDb::open_with_progress(Variant::MemSilo, options, &progress);
    if !t.quiet {
        eprintln!();
    }
    let engine = opened.map_err(failed)?;
    let r = engine.database().recovery_report().cloned().unwrap_or_default();
    let gb = (r.checkpoint_bytes + r.log_bytes) as f64 / 1e9;
    say!(
        "{verb} {} records to pepoch {} with {} threads in {:.3} s: checkpoint {:.1} MB (epoch {}), log {:.1} MB; {:.2} s/GB, {:.0} MB/s",
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
    match r.recorded_pepoch {
        Some(p) if p != r.pepoch => say!("  the pepoch file recorded {p}; salvage recovered to {}", r.pepoch),
        None => say!("  the pepoch file was unreadable; salvage recovered to {}", r.pepoch),
        _ => {}
    }
    for d in &r.dropped {
        say!("  dropped: {d}");
    }
    if !r.consistent {
        say!("  NOT CONSISTENT: salvage skipped data it could not cut back to; the state is not a prefix of the serial order");
    }
    let consistency = match t.check.as_deref() {
        None => "not checked".to_string(),
        Some("tpcc") => check_tpcc(&engine)?,
        Some(_) => check_ycsb(&engine)?,
    };
    if t.check.is_some() {
        say!("  consistency: {consistency}");
    }
    if let Some(path) = &t.json_path {
        let j = report::Json::new()
            .int("pepoch", r.pepoch)
            .int("recorded_pepoch", r.recorded_pepoch.unwrap_or(0))
            .int("checkpoint_bytes", r.checkpoint_bytes)
            .int("log_bytes", r.log_bytes)
            .int("records", r.records)
            .int("threads", r.threads as u64)
            .num("seconds", r.seconds)
            .num("seconds_per_gb", r.seconds / gb.max(1e-9))
            .int("dropped", r.dropped.len() as u64)
            .str("consistent", if r.consistent { "yes" } else { "no" });
        crate::write_report(path, j, &consistency)?;
    }
    Ok(crate::exit_status(t.check.is_some(), &consistency))
}

/// TPC-C conditions 1-4 on a recovered database, after checking that its
/// load finished.
fn check_tpcc(engine: &EpochDb) -> CliResult<String> {
    let db = engine.database();
    if db.table("warehouse").is_err() {
        return Ok("not a TPC-C database (no warehouse table)".into());
    }
    let Ok(load) = db.table(tpcc::LOAD_TABLE) else {
        return Ok("the TPC-C load never finished (no load marker): the database holds a partial load".into());
    };
    let mut w = db.worker().map_err(failed)?;
    let marker = w.run(|txn| Ok(txn.get(load, tpcc::LOADED_KEY)?.map(<[u8]>::to_vec))).map_err(failed)?;
    let Some(warehouses) = marker.and_then(|v| Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))) else {
        return Ok("the TPC-C load never finished (no load marker): the database holds a partial load".into());
    };
    let t = tpcc::Tpcc::attach(engine, warehouses).map_err(failed)?;
    let mut worker = epochdb_workloads::engine::Engine::worker(engine).map_err(failed)?;
    let failures = t.check(&mut *worker).map_err(failed)?;
    Ok(if failures.is_empty() { "ok".into() } else { failures.join("; ") })
}

/// Every YCSB row has the length of the first one.
fn check_ycsb(engine: &EpochDb) -> CliResult<String> {
    let db = engine.database();
    let Ok(table) = db.table(ycsb::TABLE) else { return Ok("not a YCSB database (no table)".into()) };
    let mut w = db.worker().map_err(failed)?;
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
        .map_err(failed)?;
    Ok(if bad == 0 && rows > 0 { "ok".into() } else { format!("{rows} rows, {bad} malformed") })
}

/// `epochdb inspect`: what a data directory holds, read-only. Exit status
/// 1 if it found damage recovery would stop at.
pub fn inspect(mut a: Args) -> CliResult<ExitCode> {
    let data_dir = a.take_str("--data-dir").ok_or("--data-dir is required")?;
    let log_dirs: Vec<PathBuf> = a.take_paths("--log-dir");
    a.finish()?;
    let i = epochdb::inspect(Path::new(&data_dir), &log_dirs).map_err(failed)?;
    say!("data directory {data_dir}");
    say!("  pepoch: {}", i.pepoch.map_or("unreadable".into(), |p| p.to_string()));
    say!("  tables: {}", i.tables.join(", "));
    let list = |d: &[PathBuf]| d.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    say!("  log directories: {}; checkpoint directories: {}", list(&i.log_dirs), list(&i.checkpoint_dirs));
    match &i.checkpoint {
        Some(c) => {
            let bytes: u64 = c.files.iter().map(|f| f.bytes).sum();
            let blocks: u64 = c.files.iter().map(|f| f.blocks).sum();
            say!(
                "  checkpoint: e_l {}, e_h {}, chain of {}, {} files, {blocks} blocks, {:.1} MB",
                c.e_l,
                c.e_h,
                c.chain,
                c.files.len(),
                bytes as f64 / 1e6
            );
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
    for p in &i.problems {
        say!("  PROBLEM: {p}");
    }
    if i.problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("epochdb: {} problem(s) found; `epochdb verify` checks the whole database", i.problems.len());
        Ok(ExitCode::FAILURE)
    }
}

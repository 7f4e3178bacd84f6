//! Commands on a data directory: `recover` (recover it as opening would,
//! and report), `verify` (the same, read-only: writes nothing), and
//! `inspect` (a summary, block by block).

use crate::args::{failed, output, CliResult, DataDirArgs, Output};
use crate::say;
use clap::{Args, ValueEnum};
use epochdb::{Durability, Error, LogOptions, LogReplay, Options, RecoveryOptions};
use epochdb_workloads::engine::{EpochDb, Variant};
use epochdb_workloads::report::{Provenance, RecoverReport};
use epochdb_workloads::{tpcc, ycsb};
use std::path::PathBuf;
use std::process::ExitCode;

/// The workloads whose invariants `--check` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Check {
    /// The TPC-C load finished, and consistency conditions 1-4 hold
    Tpcc,
    /// Every YCSB row is well formed
    Ycsb,
}

/// What `recover` and `verify` share: the directory, its log directories,
/// threads, a check, a report.
#[derive(Debug, Args)]
pub struct Target {
    #[command(flatten)]
    dirs: DataDirArgs,
    /// Recovery workers, fed by one reader thread [default: all cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// After recovery, check the workload's invariants; exit status 1 if one fails
    #[arg(long, value_enum, value_name = "WORKLOAD")]
    check: Option<Check>,
    /// Write the report as JSON (`-`: to standard output, and the summary to standard error)
    #[arg(long, value_name = "FILE", value_parser = output)]
    json: Option<Output>,
    /// No progress bar
    #[arg(long)]
    quiet: bool,
    /// How to replay the log onto the checkpoint: `merge` sorts each table's entries and merges them with the
    /// checkpoint's rows (faster; maps the log files and holds 24 bytes per entry), `lookup` installs each entry
    /// after a tree lookup. Same result
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Replay::Merge)]
    replay: Replay,
}

/// `--replay`: [`LogReplay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Replay {
    Merge,
    Lookup,
}

/// `epochdb recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    target: Target,
    /// Recover what is valid past corruption: skip damaged blocks and cut the state back to the epoch before the
    /// first damaged log block
    #[arg(long)]
    salvage: bool,
}

/// `epochdb verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    target: Target,
    /// Verify N times in one process, each round reporting as a run does (the JSON report is the last round's). A
    /// measurement aid: later rounds reuse the memory the first one filled, so they time recovery without the
    /// kernel's cost of handing out fresh pages
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
}

/// `epochdb inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    dirs: DataDirArgs,
}

impl Target {
    fn options(&self) -> Options {
        Options {
            durability: Durability::Log,
            data_dir: Some(self.dirs.data_dir.clone()),
            log: LogOptions { dirs: self.dirs.log_dirs.clone(), ..Default::default() },
            recovery: RecoveryOptions {
                threads: self.threads.map_or(0, |t| t as usize),
                log_replay: match self.replay {
                    Replay::Merge => LogReplay::Merge,
                    Replay::Lookup => LogReplay::Lookup,
                },
                salvage: false,
            },
            ..Options::default()
        }
    }
}

/// `epochdb recover`: recovers a data directory (as opening it would,
/// so it writes: the pepoch file, the manifest, a crashed `data.log`
/// sealed), with a progress bar, then reports what it read and how fast.
pub fn recover(a: RecoverArgs) -> CliResult<ExitCode> {
    let t = a.target;
    // Opening a directory without a database would create one.
    if !t.dirs.data_dir.join("manifest").is_file() {
        return Err(failed(Error::NotADatabase(t.dirs.data_dir.clone())));
    }
    let mut options = t.options();
    options.recovery.salvage = a.salvage;
    run(&t, options, "recovered", true)
}

/// `epochdb verify`: reads every checkpoint and log block (checksums and
/// the epoch rules), replays them into memory and, with `--check`, checks
/// the workload's invariants; writes nothing, so it works on a read-only
/// copy or beside other readers (not beside a process that has the
/// database open). Exit status 1 if anything is wrong.
pub fn verify(a: VerifyArgs) -> CliResult<ExitCode> {
    let t = a.target;
    let mut code = ExitCode::SUCCESS;
    // Each round drops its database before the next opens: its records and
    // nodes go back to the arena, which never unmaps, for the next to reuse.
    for round in 1..=a.rounds {
        code = run(&t, Options { read_only: true, ..t.options() }, "verified", round == a.rounds)?;
    }
    Ok(code)
}

/// Opens (recovers) and reports; `last`: the process exits after this
/// open, so the database's memory is left to the exit, not freed.
fn run(t: &Target, options: Options, verb: &str, last: bool) -> CliResult<ExitCode> {
    crate::report_to(t.json.as_ref());
    let template = "{msg:<10} [{bar:40}] {percent:>3}% of {total_bytes} {bytes_per_sec}";
    let bar = epochdb_workloads::progress::bar(!t.quiet, 0, template);
    let progress = |p: epochdb::Progress| {
        bar.set_message(format!("{:?}", p.phase));
        bar.set_length(p.total_bytes);
        bar.set_position(p.done_bytes);
    };
    let opened = EpochDb::open_with_progress(Variant::MemSilo, options, &progress);
    bar.finish_and_clear();
    let engine = opened.map_err(failed)?;
    if last {
        engine.database().skip_freeing_at_close();
    }
    let r = engine.database().recovery_report().cloned().unwrap_or_default();
    let gb = (r.checkpoint_bytes + r.log_bytes) as f64 / 1e9;
    let memory_bytes = epochdb::memory_in_use();
    say!(
        "{verb} {} records ({:.1} MB of rows and index) to pepoch {} with {} threads in {:.3} s (CPU {:.3} s, {:.3} s of it in the kernel): checkpoint {:.1} MB (epoch {}) in {:.3} s, log {:.1} MB; {:.2} s/GB, {:.0} MB/s",
        r.records,
        memory_bytes as f64 / 1e6,
        r.pepoch,
        r.threads,
        r.seconds,
        r.cpu_seconds,
        r.system_seconds,
        r.checkpoint_bytes as f64 / 1e6,
        r.checkpoint_epoch.map_or("none".into(), |e| e.to_string()),
        r.checkpoint_seconds,
        r.log_bytes as f64 / 1e6,
        r.seconds / gb.max(1e-9),
        gb * 1e3 / r.seconds.max(1e-9)
    );
    match r.recorded_pepoch {
        Some(p) if p != r.pepoch => say!("  the directory recorded pepoch {p}; salvage recovered to {}", r.pepoch),
        None => say!("  the pepoch file was unreadable; salvage recovered to {}", r.pepoch),
        _ => {}
    }
    for d in &r.dropped {
        say!("  dropped: {d}");
    }
    if !r.consistent {
        say!("  NOT CONSISTENT: salvage skipped data it could not cut back to; the state is not a prefix of the serial order");
    }
    let consistency = match t.check {
        None => "not checked".to_string(),
        Some(Check::Tpcc) => check_tpcc(&engine)?,
        Some(Check::Ycsb) => check_ycsb(&engine)?,
    };
    if t.check.is_some() {
        say!("  consistency: {consistency}");
    }
    if let Some(out) = &t.json {
        let report = RecoverReport {
            pepoch: r.pepoch,
            recorded_pepoch: r.recorded_pepoch,
            checkpoint_bytes: r.checkpoint_bytes,
            log_bytes: r.log_bytes,
            records: r.records,
            threads: r.threads as u64,
            seconds: r.seconds,
            checkpoint_seconds: r.checkpoint_seconds,
            cpu_seconds: r.cpu_seconds,
            system_seconds: r.system_seconds,
            memory_bytes,
            seconds_per_gb: r.seconds / gb.max(1e-9),
            dropped: r.dropped.clone(),
            consistent: r.consistent,
            consistency: consistency.clone(),
            run: Provenance::now(),
        };
        crate::write_report(out, &report)?;
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
    let Some(marker) = marker else {
        return Ok("the TPC-C load never finished (no load marker): the database holds a partial load".into());
    };
    let (warehouses, schema) = match tpcc::parse_marker(&marker) {
        Ok(m) => m,
        Err(what) => return Ok(what),
    };
    let t = tpcc::Tpcc::attach(engine, warehouses, schema).map_err(failed)?;
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
pub fn inspect(a: InspectArgs) -> CliResult<ExitCode> {
    let DataDirArgs { data_dir, log_dirs } = a.dirs;
    let i = epochdb::inspect(&data_dir, &log_dirs).map_err(failed)?;
    say!("data directory {}", data_dir.display());
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

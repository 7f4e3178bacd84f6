//! `epochdb bench ... --replicas N --safety S`: the benchmark's database
//! is a replication primary, with N `epochdb replica` processes on this
//! machine as its hot standbys; the run reports how far they trail.

use crate::args::{failed, CliResult};
use crate::say;
use crate::serve::SafetyArg;
use clap::Args;
use epochdb::{BackupState, Database, Durability, Options, PrimaryOptions};
use epochdb_workloads::report::{BootstrapReport, Quantiles, ReplicationReport};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Replication during a benchmark.
#[derive(Debug, Args)]
pub struct ReplicaBenchArgs {
    /// Backup processes (`epochdb replica`) to start on this machine, each in DATA-DIR.replica-<i>. Needs
    /// --durability
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=16))]
    pub replicas: u32,
    /// When the primary releases commits (see `epochdb serve --safety`)
    #[arg(long, value_enum, default_value_t = SafetyArg::Async)]
    pub safety: SafetyArg,
    /// Pin every backup process to this CPU (`epochdb replica --cpu`); pin the benchmark itself with `taskset`
    #[arg(long, value_name = "CPU", requires = "replicas")]
    pub replica_cpu: Option<usize>,
    /// Replay threads of each backup (`epochdb replica --replay-threads`) [default: the CPUs it may run on]
    #[arg(long, value_name = "N", requires = "replicas", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub replay_threads: Option<u32>,
    /// Threads in each backup that run TPC-C's read-only transactions (order-status, stock-level) at its read
    /// view while the primary runs the benchmark (`epochdb replica --read-tpcc`); the report gives their rate
    #[arg(long, value_name = "N", requires = "replicas", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=256))]
    pub replica_readers: u32,
    /// When the backups start: before the load, receiving everything live; or after the measured run, each
    /// catching up from the primary's checkpoint and log files (the report gives seconds until caught up)
    #[arg(long, value_enum, default_value_t = Join::Start, requires = "replicas")]
    pub replicas_join: Join,
}

/// When `bench --replicas` starts its backups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Join {
    /// Before the load
    Start,
    /// After the measured run
    End,
}

/// The data directory of a benchmark's backup `i`.
pub fn replica_dir(data: &std::path::Path, i: u32) -> PathBuf {
    PathBuf::from(format!("{}.replica-{i}", data.display()))
}

/// Pins this process's threads, and every thread it starts from now on, to
/// `cpu`.
pub fn pin_to_cpu(cpu: usize) -> CliResult<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it (checked against its size); sched_setaffinity reads it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(format!("--cpu {cpu}: no such CPU").into());
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(failed(format!("pin to CPU {cpu}: {}", std::io::Error::last_os_error())));
    }
    Ok(())
}

impl ReplicaBenchArgs {
    /// Makes the options a primary's when replicas are asked for.
    pub fn apply(&self, options: Options) -> CliResult<Options> {
        if self.replicas == 0 {
            return Ok(options);
        }
        if options.durability == Durability::Off {
            return Err("--replicas needs --durability (a backup receives the primary's log)".into());
        }
        let primary = PrimaryOptions {
            listen: "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
            safety: self.safety.safety(),
            backups: self.replicas as usize,
            // The load's log arrives at full speed: room for the backups to
            // trail it without being dropped.
            backlog_bytes: 256 << 20,
            ..PrimaryOptions::default()
        };
        Ok(Options { primary: Some(primary), ..options })
    }
}

/// What the sampler collected: every sample's persisted and read-view lag
/// (epochs) and queued bytes, and each second's largest read-view lag.
#[derive(Default)]
struct Lags {
    persist: Vec<u64>,
    replay: Vec<u64>,
    queued: Vec<u64>,
    per_second: Vec<u64>,
}

/// The backup processes of a run; killed on drop.
pub struct Replicas {
    children: Vec<Child>,
    dirs: Vec<PathBuf>,
    safety: String,
    epoch_ms: f64,
    sampler: Option<(Arc<AtomicBool>, JoinHandle<Lags>)>,
    /// When sampling began, and the backups' CPU seconds then.
    since: Option<(Instant, f64)>,
    bootstrap: Option<BootstrapReport>,
    /// The backups' read-only transactions when sampling began.
    reads_since: u64,
    /// Whether the backups run readers (and write their counts).
    readers: bool,
}

/// Bytes in the files under `dir` (0 for what cannot be read).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    (entries.flatten())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// CPU seconds (user and system) a process has used so far (Linux).
fn cpu_seconds(pid: u32) -> f64 {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// The CPU seconds in a `/proc/.../stat` line.
fn stat_cpu_seconds(stat: &str) -> f64 {
    // Fields after the command name, which ends at the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |i: usize| rest.split_whitespace().nth(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (field(11) + field(12)) / hz // utime and stime: fields 14 and 15 of stat
}

/// CPU seconds this process's threads whose names begin with `prefix`
/// have used so far (threads that ended are not counted).
fn threads_cpu_seconds(prefix: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    (tasks.flatten())
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter(|stat| stat.split_once('(').is_some_and(|(_, name)| name.starts_with(prefix)))
        .map(|stat| stat_cpu_seconds(&stat))
        .sum()
}

/// CPU seconds used so far, and the log bytes written: [`CpuPerLog::since`]
/// turns two of them into CPU per MB of log over one window.
pub struct CpuPerLog {
    at: LogCpu,
    log_bytes: u64,
}

/// CPU (ms) per MB of log over a run: what logging and shipping cost the
/// primary, apart from what a busy neighbouring CPU costs its workers,
/// and what a backup spends on the same log.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogCpu {
    /// The whole process (the primary).
    pub process: f64,
    /// Its log writer threads.
    pub logger: f64,
    /// Its replication threads.
    pub shipping: f64,
    /// Each backup process (their mean; 0 without backups during the run).
    pub backup: f64,
}

impl CpuPerLog {
    pub fn now(db: &Database, replicas: Option<&Replicas>) -> CpuPerLog {
        // Thread names as the engine gives them (`epochdb-logger-N`,
        // `epochdb-repl-send`, ...; Linux keeps 15 bytes).
        let at = LogCpu {
            process: cpu_seconds(std::process::id()),
            logger: threads_cpu_seconds("epochdb-logger"),
            shipping: threads_cpu_seconds("epochdb-repl"),
            backup: replicas.map_or(0.0, |r| r.cpu() / r.children.len().max(1) as f64),
        };
        CpuPerLog { at, log_bytes: db.log_bytes() }
    }

    /// Since `self`, per MB of log written since (call it while the
    /// backups run: their CPU goes with them).
    pub fn since(&self, db: &Database, replicas: Option<&Replicas>) -> LogCpu {
        let now = CpuPerLog::now(db, replicas);
        let mb = (now.log_bytes.saturating_sub(self.log_bytes) as f64 / 1e6).max(1e-9);
        let ms = |a: f64, b: f64| 1000.0 * (a - b) / mb;
        let (a, b) = (now.at, self.at);
        LogCpu {
            process: ms(a.process, b.process),
            logger: ms(a.logger, b.logger),
            shipping: ms(a.shipping, b.shipping),
            backup: ms(a.backup, b.backup),
        }
    }
}

/// A process's peak resident memory (`VmHWM`), in MB.
fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1024.0
}

impl Replicas {
    /// Starts the backups of `db` (none without `--replicas`) if they
    /// join at `when`, each from an empty directory, and waits until all
    /// are in sync; joining at the end, also until all have replayed
    /// everything released before they started.
    pub fn start(a: &ReplicaBenchArgs, db: &Database, when: Join) -> CliResult<Option<Replicas>> {
        let (Some(st), Some(data)) = (db.replication_status(), db.options().data_dir.clone()) else {
            return Ok(None);
        };
        if a.replicas_join != when {
            return Ok(None);
        }
        let exe = std::env::current_exe().map_err(|e| failed(format!("find this executable: {e}")))?;
        let epoch_ms = db.options().epoch_interval.as_secs_f64() * 1e3;
        let mut r = Replicas {
            children: Vec::new(),
            dirs: Vec::new(),
            safety: format!("{:?}", st.safety),
            epoch_ms,
            sampler: None,
            since: None,
            bootstrap: None,
            reads_since: 0,
            readers: a.replica_readers > 0,
        };
        let (released, primary_bytes, t0) = (st.released, dir_bytes(&data), Instant::now());
        for i in 0..a.replicas {
            let dir = replica_dir(&data, i);
            let dir_options =
                Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
            epochdb::destroy(&dir_options).map_err(|e| failed(format!("cannot empty {}: {e}", dir.display())))?;
            let mut cmd = Command::new(&exe);
            cmd.args(["replica", "--primary", &st.listen.to_string(), "--data-dir"]).arg(&dir);
            if let Some(cpu) = a.replica_cpu {
                cmd.args(["--cpu", &cpu.to_string()]);
            }
            if let Some(n) = a.replay_threads {
                cmd.args(["--replay-threads", &n.to_string()]);
            }
            if a.replica_readers > 0 {
                // A count left by an earlier run that was killed must not
                // be taken for this one's.
                remove_reads(&reads_file(&dir));
                cmd.args(["--read-tpcc", &a.replica_readers.to_string(), "--read-report"]).arg(reads_file(&dir));
            }
            let child = cmd
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| failed(format!("start a replica: {e}")))?;
            r.children.push(child);
            r.dirs.push(dir);
        }
        // A bootstrap ships the whole database; an empty one only its start.
        let limit = Duration::from_secs(if when == Join::End { 3600 } else { 60 });
        let n = a.replicas as usize;
        r.wait(db, limit, "in sync", |b| b.in_sync)?;
        let in_sync_s = t0.elapsed().as_secs_f64();
        say!("replication: {} backups in sync ({}) after {in_sync_s:.2} s", a.replicas, r.safety);
        if when == Join::End {
            r.wait(db, limit, "caught up", |b| b.in_sync && b.replayed >= released)?;
            let caught_up_s = t0.elapsed().as_secs_f64();
            let backup_cpu_s = r.cpu();
            let backup_peak_rss_mb = r.children.iter().map(|c| peak_rss_mb(c.id())).fold(0.0, f64::max);
            say!(
                "replication: {n} backups bootstrapped from {:.1} MB of checkpoint and log: in sync after {in_sync_s:.2} s, read view at the released epoch {released} after {caught_up_s:.2} s, {backup_cpu_s:.2} CPU seconds, peak RSS {backup_peak_rss_mb:.0} MB",
                primary_bytes as f64 / 1e6
            );
            r.bootstrap = Some(BootstrapReport {
                released_epoch: released,
                primary_bytes,
                in_sync_s,
                caught_up_s,
                backup_cpu_s,
                backup_peak_rss_mb,
            });
        }
        Ok(Some(r))
    }

    /// Waits until every backup is `ready`, for at most `limit`.
    fn wait(&self, db: &Database, limit: Duration, what: &str, ready: impl Fn(&BackupState) -> bool) -> CliResult<()> {
        let deadline = Instant::now() + limit;
        loop {
            let st = db.replication_status().map(|s| s.backups).unwrap_or_default();
            let ready = st.iter().filter(|b| ready(b)).count();
            if ready == self.children.len() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(failed(format!("{ready} of {} replicas {what} after {limit:?}", self.children.len())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts sampling the backups' lag (call when the measured run starts).
    pub fn sample(&mut self, db: &Database) {
        self.since = Some((Instant::now(), self.cpu()));
        self.reads_since = self.reads();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, db) = (stop.clone(), db.clone());
        let t = std::thread::spawn(move || {
            let (mut lags, start) = (Lags::default(), Instant::now());
            while !s.load(Ordering::Acquire) {
                if let Some(st) = db.replication_status() {
                    let second = start.elapsed().as_secs() as usize;
                    for b in &st.backups {
                        lags.persist.push(st.released.saturating_sub(b.acked));
                        let replay = st.released.saturating_sub(b.replayed);
                        lags.replay.push(replay);
                        lags.queued.push(b.queued_bytes);
                        if lags.per_second.len() <= second {
                            lags.per_second.resize(second + 1, 0);
                        }
                        lags.per_second[second] = lags.per_second[second].max(replay);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            lags
        });
        self.sampler = Some((stop, t));
    }

    fn cpu(&self) -> f64 {
        self.children.iter().map(|c| cpu_seconds(c.id())).sum()
    }

    /// Read-only transactions the backups' readers committed so far.
    fn reads(&self) -> u64 {
        self.dirs.iter().filter(|_| self.readers).map(|d| read_count(&reads_file(d))).sum()
    }

    /// Stops sampling, prints the lags and stops the backups.
    pub fn finish(mut self) -> ReplicationReport {
        let backup_cores = self.since.map_or(0.0, |(t, cpu)| (self.cpu() - cpu) / t.elapsed().as_secs_f64());
        let backup_reads_per_s = self
            .since
            .map_or(0.0, |(t, _)| self.reads().saturating_sub(self.reads_since) as f64 / t.elapsed().as_secs_f64());
        let lags = match self.sampler.take() {
            Some((stop, t)) => {
                stop.store(true, Ordering::Release);
                t.join().unwrap_or_default()
            }
            None => Lags::default(),
        };
        let r = ReplicationReport {
            replicas: self.children.len() as u32,
            safety: self.safety.clone(),
            samples: lags.persist.len(),
            persist_lag_epochs: Quantiles::of(lags.persist),
            replay_lag_epochs: Quantiles::of(lags.replay),
            epoch_ms: self.epoch_ms,
            queued_bytes: Quantiles::of(lags.queued),
            lag_series_ms: lags.per_second.iter().map(|&e| e as f64 * self.epoch_ms).collect(),
            backup_cores,
            // Set by the caller, which measured them over the whole run.
            shipping_ms_per_log_mb: 0.0,
            backup_ms_per_log_mb: 0.0,
            backup_reads_per_s,
            bootstrap: self.bootstrap.take(),
        };
        let (p, q) = (&r.persist_lag_epochs, &r.replay_lag_epochs);
        say!(
            "  replication ({}, {} backups, {} samples): persisted lag p50 {} p99 {} max {} epochs; read-view lag p50 {} p99 {} max {} epochs (epochs of {} ms); backups used {:.2} cores and ran {:.0} read-only txn/s; in {}",
            r.safety,
            r.replicas,
            r.samples,
            p.p50,
            p.p99,
            p.max,
            q.p50,
            q.p99,
            q.max,
            r.epoch_ms,
            r.backup_cores,
            r.backup_reads_per_s,
            self.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        r
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The readers' counts: files this run wrote beside the replicas'
        // directories (only those, and only once their writers are dead).
        for d in self.dirs.iter().filter(|_| self.readers) {
            let reads = reads_file(d);
            remove_reads(&reads.with_extension("tmp"));
            remove_reads(&reads);
        }
    }
}

/// Where a backup in `dir` reports its readers' count.
fn reads_file(dir: &std::path::Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".reads.json");
    PathBuf::from(name)
}

/// Removes `path` if it is a readers' report (`{"transactions": N}` and
/// nothing else): never a file this command did not write.
fn remove_reads(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let ours = serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|v| v.as_object().is_some_and(|o| o.len() == 1 && o.contains_key("transactions")));
    if ours {
        let _ = std::fs::remove_file(path);
    }
}

/// The count in a readers' report; 0 before the first.
fn read_count(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["transactions"].as_u64()).unwrap_or(0)
}

/// Starts `threads` TPC-C terminals running only order-status and
/// stock-level on `db`, a standby, as snapshot transactions at its read
/// view; they wait until it shows a finished TPC-C load. With `report`,
/// their committed count is written there every 100 ms. The threads run
/// until the process ends.
pub fn tpcc_readers(db: Database, threads: usize, report: Option<PathBuf>) -> CliResult<()> {
    use epochdb_workloads::driver::Terminal;
    use epochdb_workloads::engine::{Engine, EpochDb, Variant};
    use epochdb_workloads::tpcc::{parse_marker, Tpcc, LOADED_KEY, LOAD_TABLE};
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().name(name.into()).spawn(f).map_err(|e| failed(format!("start a reader: {e}")))
    };
    for i in 0..threads {
        let (db, count) = (db.clone(), count.clone());
        spawn(
            "epochdb-reader",
            Box::new(move || {
                // The load's marker, read at the view: then every table is there.
                let (warehouses, schema) = loop {
                    let seen = db.table(LOAD_TABLE).ok().and_then(|t| {
                        let mut w = db.worker().ok()?;
                        let mut snap = w.snapshot().ok()?;
                        parse_marker(snap.get(t, LOADED_KEY).ok()??).ok()
                    });
                    match seen {
                        Some(w) => break w,
                        None => std::thread::sleep(Duration::from_millis(50)),
                    }
                };
                let mut engine = EpochDb::from_database(Variant::MemSilo, db);
                engine.snapshot_reads = true;
                let run = || -> epochdb_workloads::engine::TxnResult<()> {
                    let tpcc = Tpcc::attach(&engine, warehouses, schema)?;
                    let mut client = tpcc.client(i, 0xBAC0 + i as u64).read_only();
                    let mut worker = engine.worker()?;
                    loop {
                        client.run_one(&mut *worker)?;
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                };
                if let Err(e) = run() {
                    log::error!("replica reader {i} stopped: {e}");
                }
            }),
        )?;
    }
    if let Some(path) = report {
        let tmp = path.with_extension("tmp");
        spawn(
            "epochdb-reads",
            Box::new(move || loop {
                let text = format!("{{\"transactions\": {}}}\n", count.load(Ordering::Relaxed));
                if std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).is_err() {
                    log::warn!("cannot write {}", path.display());
                }
                std::thread::sleep(Duration::from_millis(100));
            }),
        )?;
    }
    Ok(())
}

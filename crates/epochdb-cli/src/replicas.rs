//! `epochdb bench ... --replicas N --safety S`: the benchmark's database
//! is a replication primary, with N `epochdb replica` processes on this
//! machine as its hot standbys; the run reports how far they trail.

use crate::args::{failed, CliResult};
use crate::say;
use crate::serve::SafetyArg;
use clap::Args;
use epochdb::{Database, Durability, Options, PrimaryOptions};
use epochdb_workloads::report::{Quantiles, ReplicationReport};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// Sampled lags of every backup: persisted, read view (in epochs).
type Lags = (Vec<u64>, Vec<u64>);

/// The backup processes of a run; killed on drop.
pub struct Replicas {
    children: Vec<Child>,
    dirs: Vec<PathBuf>,
    safety: String,
    epoch_ms: f64,
    sampler: Option<(Arc<AtomicBool>, JoinHandle<Lags>)>,
    /// When sampling began, and the backups' CPU seconds then.
    since: Option<(Instant, f64)>,
}

/// CPU seconds (user and system) a process has used so far (Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which ends at the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |i: usize| rest.split_whitespace().nth(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (field(11) + field(12)) / hz // utime and stime: fields 14 and 15 of stat
}

impl Replicas {
    /// Starts the backups of `db` (none without `--replicas`), each from an
    /// empty directory, and waits until all are in sync.
    pub fn start(a: &ReplicaBenchArgs, db: &Database) -> CliResult<Option<Replicas>> {
        let (Some(st), Some(data)) = (db.replication_status(), db.options().data_dir.clone()) else {
            return Ok(None);
        };
        let exe = std::env::current_exe().map_err(|e| failed(format!("find this executable: {e}")))?;
        let epoch_ms = db.options().epoch_interval.as_secs_f64() * 1e3;
        let mut r = Replicas {
            children: Vec::new(),
            dirs: Vec::new(),
            safety: format!("{:?}", st.safety),
            epoch_ms,
            sampler: None,
            since: None,
        };
        for i in 0..a.replicas {
            let dir = PathBuf::from(format!("{}.replica-{i}", data.display()));
            let dir_options =
                Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
            epochdb::destroy(&dir_options).map_err(|e| failed(format!("cannot empty {}: {e}", dir.display())))?;
            let mut cmd = Command::new(&exe);
            cmd.args(["replica", "--primary", &st.listen.to_string(), "--data-dir"]).arg(&dir);
            if let Some(cpu) = a.replica_cpu {
                cmd.args(["--cpu", &cpu.to_string()]);
            }
            let child = cmd
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| failed(format!("start a replica: {e}")))?;
            r.children.push(child);
            r.dirs.push(dir);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let st = db.replication_status().map(|s| s.backups).unwrap_or_default();
            if st.iter().filter(|b| b.in_sync).count() == a.replicas as usize {
                break;
            }
            if Instant::now() > deadline {
                return Err(failed(format!("{} of {} replicas in sync after 60 s", st.len(), a.replicas)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        say!("replication: {} backups in sync ({})", a.replicas, r.safety);
        Ok(Some(r))
    }

    /// Starts sampling the backups' lag (call when the measured run starts).
    pub fn sample(&mut self, db: &Database) {
        self.since = Some((Instant::now(), self.cpu()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, db) = (stop.clone(), db.clone());
        let lags = Mutex::new((Vec::new(), Vec::new()));
        let t = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                if let Some(st) = db.replication_status() {
                    let mut l = lags.lock().unwrap_or_else(|e| e.into_inner());
                    for b in &st.backups {
                        l.0.push(st.released.saturating_sub(b.acked));
                        l.1.push(st.released.saturating_sub(b.replayed));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            lags.into_inner().unwrap_or_else(|e| e.into_inner())
        });
        self.sampler = Some((stop, t));
    }

    fn cpu(&self) -> f64 {
        self.children.iter().map(|c| cpu_seconds(c.id())).sum()
    }

    /// Stops sampling, prints the lags and stops the backups.
    pub fn finish(mut self) -> ReplicationReport {
        let backup_cores = self.since.map_or(0.0, |(t, cpu)| (self.cpu() - cpu) / t.elapsed().as_secs_f64());
        let (persist, replay) = match self.sampler.take() {
            Some((stop, t)) => {
                stop.store(true, Ordering::Release);
                t.join().unwrap_or_default()
            }
            None => Default::default(),
        };
        let r = ReplicationReport {
            replicas: self.children.len() as u32,
            safety: self.safety.clone(),
            samples: persist.len(),
            persist_lag_epochs: Quantiles::of(persist),
            replay_lag_epochs: Quantiles::of(replay),
            epoch_ms: self.epoch_ms,
            backup_cores,
        };
        let (p, q) = (&r.persist_lag_epochs, &r.replay_lag_epochs);
        say!(
            "  replication ({}, {} backups, {} samples): persisted lag p50 {} p99 {} max {} epochs; read-view lag p50 {} p99 {} max {} epochs (epochs of {} ms); backups used {:.2} cores; in {}",
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
    }
}

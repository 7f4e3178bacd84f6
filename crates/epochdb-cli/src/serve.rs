//! `epochdb serve`: the Redis-protocol server.

use crate::args::{default_data_dir, epoch_ms, failed, run_secs, CliResult, DurabilityArg, DurabilityArgs};
use crate::signals::Stop;
use clap::{Args, ValueEnum};
use epochdb::{Backup, BackupOptions, Durability, PrimaryOptions, Safety};
use epochdb_server::{AppendFsync, AuthClients, Config, ReplicaOf, Server, TlsConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AppendFsyncArg {
    /// Reply once the command's epoch is durable (a reply survives kill -9)
    Always,
    /// Reply at commit; the log is synced every epoch (a crash loses at most the last epoch or two)
    Everysec,
    /// The same as everysec in epochdb
    No,
}

/// Serve the database over the Redis protocol (redis-cli, redis-benchmark and client libraries work)
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; 0.0.0.0 for every interface)
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// TCP port (0: any free port, printed at start)
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Event loops, each with its own worker [default: one per CPU]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Durability mode; off keeps everything in memory only
    #[arg(long, value_enum, default_value_t = DurabilityArg::LogAndCheckpoint)]
    pub durability: DurabilityArg,
    /// Data directory [env: EPOCHDB_DATA_DIR] [default: epochdb-data]: a database there is recovered, never
    /// deleted. Needs --durability other than off
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A log directory, one logger each; repeat for several disks [default: DATA-DIR/log]
    #[arg(long = "log-dir", value_name = "DIR")]
    pub log_dirs: Vec<PathBuf>,
    /// Seconds from one checkpoint's end to the next [default: 10]. Needs a checkpointing --durability
    #[arg(long, value_name = "S", value_parser = run_secs)]
    pub checkpoint_interval: Option<f64>,
    /// Epoch length in milliseconds
    #[arg(long, value_name = "MS", default_value = "40", value_parser = epoch_ms)]
    pub epoch_ms: f64,
    /// When a write's reply is sent (like Redis's appendfsync)
    #[arg(long, value_enum, default_value_t = AppendFsyncArg::Everysec)]
    pub appendfsync: AppendFsyncArg,
    /// Password of the default user (clients must AUTH)
    #[arg(long, value_name = "PASSWORD", env = "EPOCHDB_REQUIREPASS", hide_env_values = true)]
    pub requirepass: Option<String>,
    /// While the default user has no password, let in only clients on the loopback interface; others get a
    /// DENIED error (as Redis's protected mode)
    #[arg(long, value_name = "yes|no", default_value = "yes", value_parser = yes_no, action = clap::ArgAction::Set)]
    pub protected_mode: bool,
    /// Numbered databases (SELECT 0..N-1)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub databases: u16,
    /// Most clients connected at once
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Refuse commands that add data (SET, INCR, HSET, ...: Redis's `denyoom`) with an OOM error while the
    /// database's records and index take more than this (bytes, or 100mb, 4gb, ...; as Redis's `maxmemory` with
    /// `noeviction`); deletes and reads go on [default: no limit]
    #[arg(long, value_name = "BYTES", value_parser = memory_arg)]
    pub maxmemory: Option<u64>,
    /// Be a replication primary: listen for backups (`epochdb replica`) on this address (port 0: any, printed)
    #[arg(long, value_name = "ADDR")]
    pub replicate_listen: Option<std::net::SocketAddr>,
    /// When a primary releases commits: at its own pepoch (async), once every in-sync backup has them (sync), or
    /// never without all --backups in sync (very-safe)
    #[arg(long, value_enum, default_value_t = SafetyArg::Async, requires = "replicate_listen")]
    pub safety: SafetyArg,
    /// Backups that must be in sync for --safety very-safe
    #[arg(long, default_value_t = 1, requires = "replicate_listen")]
    pub backups: usize,
    /// Be a replica: a hot standby of the primary whose --replicate-listen is HOST:PORT. It serves reads at its
    /// read view, refuses writes (READONLY), and becomes a primary (with this command's --replicate-listen, if
    /// given) on REPLICAOF NO ONE or `epochdb promote`. --data-dir is the replica's own
    #[arg(long, value_name = "HOST:PORT")]
    pub replicaof: Option<String>,
    /// Shared secret backups must prove they hold (required to listen beyond loopback), and that a replica
    /// proves to its primary; prefer the environment variable, which `ps` does not show
    #[arg(long, value_name = "SECRET", env = "EPOCHDB_REPLICATION_SECRET", hide_env_values = true)]
    pub replication_secret: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub node: crate::cluster::NodeArgs,
}

/// TLS, by Redis's option names.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// Also listen for TLS clients on this port (0: any free port, printed at start)
    #[arg(long, value_name = "PORT")]
    pub tls_port: Option<u16>,
    /// The server's certificate chain (PEM); a replica also presents it to its primary
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM)
    #[arg(long, value_name = "FILE")]
    pub tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates, and a replica's primary's, must chain to
    #[arg(long, value_name = "FILE")]
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate the CA signed
    #[arg(long, value_name = "yes|no|optional", default_value = "yes", value_parser = auth_clients)]
    pub tls_auth_clients: AuthClients,
    /// Replication connections (--replicate-listen, --replicaof) use TLS; set it on the primary and its replicas
    #[arg(long, value_name = "yes|no", default_value = "no", value_parser = yes_no, action = clap::ArgAction::Set)]
    pub tls_replication: bool,
}

impl TlsArgs {
    /// The server's TLS settings, if any is asked for; a TLS port or TLS
    /// replication without a certificate and key is a usage error.
    pub fn config(&self) -> CliResult<Option<TlsConfig>> {
        if self.tls_port.is_none() && !self.tls_replication {
            return Ok(None);
        }
        let (Some(cert_file), Some(key_file)) = (&self.tls_cert_file, &self.tls_key_file) else {
            return Err("--tls-port and --tls-replication need --tls-cert-file and --tls-key-file".into());
        };
        Ok(Some(TlsConfig {
            port: self.tls_port,
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            ca_cert_file: self.tls_ca_cert_file.clone(),
            auth_clients: self.tls_auth_clients,
            replication: self.tls_replication,
        }))
    }
}

fn auth_clients(text: &str) -> Result<AuthClients, String> {
    AuthClients::parse(text).ok_or_else(|| "must be yes, no or optional".into())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SafetyArg {
    /// 1-safe: released at the primary's pepoch
    Async,
    /// 2-safe: released once durable here and on every in-sync backup
    Sync,
    /// Released only while every configured backup is in sync
    VerySafe,
}

impl SafetyArg {
    pub fn safety(self) -> Safety {
        match self {
            SafetyArg::Async => Safety::Async,
            SafetyArg::Sync => Safety::Sync,
            SafetyArg::VerySafe => Safety::VerySafe,
        }
    }
}

/// A replication backup: a data directory that receives a primary's log
#[derive(Debug, Args)]
pub struct ReplicaArgs {
    /// The backup's data directory (created if missing); `epochdb recover` or `serve` on it promotes it by hand
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The primary's replication address (its `serve --replicate-listen`)
    #[arg(long, value_name = "HOST:PORT")]
    pub primary: String,
    /// The primary's shared secret (its `serve --replication-secret`); prefer the environment variable
    #[arg(long, value_name = "SECRET", env = "EPOCHDB_REPLICATION_SECRET", hide_env_values = true)]
    pub replication_secret: Option<String>,
    /// Run on this CPU only (all of the backup's threads)
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
    /// Threads that replay received epochs (and recover the directory at start) [default: the CPUs it may run on]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub replay_threads: Option<u32>,
    /// Threads that run TPC-C's read-only transactions (order-status and stock-level, half each) on the standby
    /// at its read view, once it shows a finished TPC-C load (what `bench tpcc --replica-readers` starts)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub read_tpcc: u32,
    /// MiB of received blocks held in memory for replay; past it, a catch-up's blocks are read back from the
    /// backup's own log when replayed
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub replay_memory: u64,
    /// Where --read-tpcc counts its committed transactions: a JSON object `{"transactions": N}`, rewritten
    /// (through a temporary file and a rename) every 100 ms
    #[arg(long, value_name = "FILE", requires = "read_tpcc")]
    pub read_report: Option<PathBuf>,
}

/// Receives until killed; stops with an error if the primary refuses it.
pub fn replica(a: ReplicaArgs) -> CliResult<ExitCode> {
    // Before the backup starts a thread: they all inherit the mask.
    let signals = crate::signals::block().map_err(|e| failed(format!("block SIGTERM and SIGINT: {e}")))?;
    if let Some(cpu) = a.cpu {
        crate::replicas::pin_to_cpu(cpu)?;
    }
    let stop = Stop::default();
    signals.on_signal("the replica", stop.clone()).map_err(|e| failed(format!("start the signal thread: {e}")))?;
    let mut opts = BackupOptions {
        secret: a.replication_secret,
        replay_memory: (a.replay_memory << 20) as usize,
        ..BackupOptions::new(&a.data_dir, &a.primary)
    };
    opts.database.recovery.threads = a.replay_threads.map_or(0, |n| n as usize);
    let backup = Backup::start(opts).map_err(|e| failed(e.to_string()))?;
    let stopping = Arc::new(AtomicBool::new(false));
    let s = stopping.clone();
    stop.arm(move || s.store(true, Ordering::Release));
    crate::say!("epochdb replica: backing up {} into {}", a.primary, a.data_dir.display());
    if a.read_tpcc > 0 {
        crate::replicas::tpcc_readers(backup.database().clone(), a.read_tpcc as usize, a.read_report.clone())?;
    }
    let mut last = None;
    while !backup.is_finished() && !stopping.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = (backup.is_connected(), backup.persisted_epoch());
        if last.is_none_or(|(c, _)| c != now.0) {
            crate::say!("epochdb replica: {} at epoch {}", if now.0 { "connected" } else { "not connected" }, now.1);
        }
        last = Some(now);
    }
    backup.stop().map_err(|e| failed(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// Redis's booleans: yes or no.
fn yes_no(text: &str) -> Result<bool, String> {
    epochdb_server::parse_yes_no(text).ok_or_else(|| "must be yes or no".into())
}

fn memory_arg(text: &str) -> Result<u64, String> {
    epochdb_server::parse_memory(text).ok_or_else(|| format!("{text:?}: bytes, or a number with k, kb, m, mb, g or gb"))
}

pub fn serve(a: ServeArgs) -> CliResult<ExitCode> {
    if a.durability.mode() == Durability::Off && matches!(a.appendfsync, AppendFsyncArg::Always) {
        return Err("--appendfsync always needs --durability other than off".into());
    }
    if a.durability.mode() == Durability::Off && a.replicaof.is_some() {
        return Err("--replicaof needs --durability other than off: a replica keeps its primary's log".into());
    }
    // The same options, defaults and usage errors as a durable benchmark's
    // (only what happens to a database already there differs: kept).
    let durable = a.durability.mode() != Durability::Off;
    let options = DurabilityArgs {
        durability: a.durability,
        data_dir: a.data_dir.or_else(|| durable.then(default_data_dir)),
        overwrite: false,
        log_dirs: a.log_dirs,
        checkpoint_interval: a.checkpoint_interval,
        epoch_ms: a.epoch_ms,
    }
    .options()?;
    let replication_secret = a.replication_secret;
    let options = epochdb::Options {
        primary: a.replicate_listen.map(|listen| PrimaryOptions {
            listen,
            safety: a.safety.safety(),
            backups: a.backups,
            secret: replication_secret.clone(),
            ..PrimaryOptions::default()
        }),
        ..options
    };
    let config = Config {
        bind: a.bind,
        port: a.port,
        threads: a.threads.map_or(0, usize::from),
        appendfsync: match a.appendfsync {
            AppendFsyncArg::Always => AppendFsync::Always,
            AppendFsyncArg::Everysec => AppendFsync::Everysec,
            AppendFsyncArg::No => AppendFsync::No,
        },
        requirepass: a.requirepass,
        protected_mode: a.protected_mode,
        databases: a.databases.into(),
        maxclients: a.maxclients,
        maxmemory: a.maxmemory.unwrap_or(0),
        replicaof: a
            .replicaof
            .map(|primary| ReplicaOf { secret: replication_secret.clone(), ..ReplicaOf::new(primary) }),
        options,
        tls: a.tls.config()?,
        ..Config::default()
    };
    // Before the server starts a thread: they all inherit the mask. A
    // signal during the recovery exits at once; after it, it stops the
    // server as SHUTDOWN does.
    let signals = crate::signals::block().map_err(|e| failed(format!("block SIGTERM and SIGINT: {e}")))?;
    let stop = Stop::default();
    signals.on_signal("the server", stop.clone()).map_err(|e| failed(format!("start the signal thread: {e}")))?;
    if a.node.node_id.is_some() {
        return crate::cluster::serve(a.node, config, replication_secret, stop);
    }
    let server = Server::start(config).map_err(|e| failed(e.to_string()))?;
    // The process exits once the server stops: its rows need not be freed.
    server.database().skip_freeing_at_close();
    let stopper = server.stopper();
    stop.arm(move || stopper.stop());
    crate::say!("epochdb serve: listening on {} (redis-cli -p {})", server.local_addr(), server.local_addr().port());
    if let Some(addr) = server.tls_addr() {
        crate::say!("epochdb serve: TLS on {addr} (redis-cli --tls -p {})", addr.port());
    }
    if let Some(primary) = server.replica_of() {
        crate::say!("epochdb serve: replica of {primary}: reads at its read view, writes refused until promoted");
    }
    if let Some(st) = server.database().replication_status() {
        crate::say!("epochdb serve: replication primary ({:?}), backups connect to {}", st.safety, st.listen);
    }
    server.wait();
    ::log::info!("epochdb serve: stopped");
    Ok(ExitCode::SUCCESS)
}

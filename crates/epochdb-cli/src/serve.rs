//! `epochdb serve`: the Redis-protocol server.

use crate::args::{epoch_ms, failed, run_secs, CliResult, DurabilityArg, DurabilityArgs};
use clap::{Args, ValueEnum};
use epochdb::Durability;
use epochdb_server::{AppendFsync, Config, Server};
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Numbered databases (SELECT 0..N-1)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub databases: u16,
    /// Most clients connected at once
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
}

pub fn serve(a: ServeArgs) -> CliResult<ExitCode> {
    if a.durability.mode() == Durability::Off && matches!(a.appendfsync, AppendFsyncArg::Always) {
        return Err("--appendfsync always needs --durability other than off".into());
    }
    // The same options, defaults and usage errors as a durable benchmark's
    // (only what happens to a database already there differs: kept).
    let options = DurabilityArgs {
        durability: a.durability,
        data_dir: a.data_dir,
        log_dirs: a.log_dirs,
        checkpoint_interval: a.checkpoint_interval,
        epoch_ms: a.epoch_ms,
    }
    .options()?;
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
        databases: a.databases.into(),
        maxclients: a.maxclients,
        options,
        ..Config::default()
    };
    let server = Server::start(config).map_err(|e| failed(e.to_string()))?;
    crate::say!("epochdb serve: listening on {} (redis-cli -p {})", server.local_addr(), server.local_addr().port());
    server.wait();
    ::log::info!("epochdb serve: stopped");
    Ok(ExitCode::SUCCESS)
}

//! Starting and stopping a server: it opens (or recovers) the database,
//! or starts a replica's backup, binds, and runs the event loops.

use crate::acl::Users;
use crate::config::{Config, ReplicaOf};
use crate::counts::Counts;
use crate::cursors::Cursors;
use crate::event_loop::EventLoop;
use crate::shared::{Settings, Shared, Wakeups};
use crate::stats::{Slowlog, ThreadStats};
use crate::tls::Tls;
use epochdb::{Backup, BackupOptions, Database, Options, TableId, TableOptions};
use mio::net::TcpListener;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why a server could not start.
#[derive(Debug)]
pub enum StartError {
    Engine(epochdb::Error),
    Bind { addr: String, source: std::io::Error },
    Config(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Engine(e) => write!(f, "{e}"),
            StartError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            StartError::Config(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<epochdb::Error> for StartError {
    fn from(e: epochdb::Error) -> StartError {
        StartError::Engine(e)
    }
}

/// Starts the backup a replica serves.
fn start_replica(
    r: &ReplicaOf,
    options: Options,
    transport: Option<Arc<dyn epochdb::Transport>>,
) -> Result<Backup, StartError> {
    let Some(dir) = options.data_dir.clone() else {
        return Err(StartError::Config("a replica needs a data directory (and durability other than off)".into()));
    };
    let opts = BackupOptions {
        secret: r.secret.clone(),
        node: r.node,
        transport,
        database: options,
        ..BackupOptions::new(dir, &r.primary)
    };
    Ok(Backup::start(opts)?)
}

/// The tables of the numbered databases, as the primary's catalog names
/// them: a standby cannot create tables, so a new one waits for its
/// primary's catalog.
fn primary_tables(backup: &Backup, r: &ReplicaOf, databases: usize) -> Result<Vec<TableId>, StartError> {
    let deadline = Instant::now() + r.start_timeout;
    let db = backup.database();
    loop {
        let tables: Option<Vec<TableId>> = (0..databases).map(|i| db.table(&format!("redis.{i}")).ok()).collect();
        if let Some(tables) = tables {
            return Ok(tables);
        }
        let why = if backup.is_finished() {
            backup.error().unwrap_or_else(|| "the backup stopped".into())
        } else if Instant::now() >= deadline {
            let seen = if backup.is_connected() { "connected, but" } else { "not connected, and" };
            format!(
                "{seen} the primary's catalog has no table redis.0 to redis.{} after {:?}: is {} an `epochdb serve` \
                 with --replicate-listen and at least {databases} databases?",
                databases - 1,
                r.start_timeout,
                r.primary
            )
        } else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        return Err(StartError::Config(format!("replica of {}: {why}", r.primary)));
    }
}

/// Says so at start when the data directory holds tables that are not
/// the server's numbered databases (a benchmark's, an embedding
/// program's): they are recovered and kept in memory, but no command
/// reaches them.
fn warn_of_other_tables(db: &Database) {
    let numbered =
        |n: &str| n.strip_prefix("redis.").is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    let others: Vec<String> = db.table_names().into_iter().filter(|n| !numbered(n)).collect();
    if let (false, Some(dir)) = (others.is_empty(), &db.options().data_dir) {
        ::log::warn!(
            "{} holds tables that are not the server's ({}): they are recovered and kept in memory, but no command \
             reaches them; give the server a --data-dir of its own",
            dir.display(),
            others.join(", ")
        );
    }
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens (or recovers) the database and starts the event loops.
    pub fn start(config: Config) -> Result<Server, StartError> {
        if config.databases == 0 || config.databases > 1024 {
            return Err(StartError::Config("databases must be between 1 and 1024".into()));
        }
        let mut options = config.options.clone();
        options.max_value_len = options.max_value_len.max(config.limits.max_bulk.min(512 << 20));
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(Tls::load(t).map_err(|e| StartError::Config(format!("TLS: {e}")))?)),
            None => None,
        };
        let relay = tls.as_ref().and_then(Tls::relay);
        if let Some(p) = options.primary.as_mut() {
            p.transport = relay.clone();
        }
        let (db, backup, tables) = match &config.replicaof {
            None => {
                let db = Database::open(options)?;
                warn_of_other_tables(&db);
                let tables = (0..config.databases)
                    .map(|i| {
                        let name = format!("redis.{i}");
                        db.table(&name).or_else(|_| db.create_table(&name, TableOptions::new()))
                    })
                    .collect::<epochdb::Result<Vec<_>>>()?;
                (db, None, tables)
            }
            Some(r) => {
                let backup = start_replica(r, options, relay)?;
                let tables = primary_tables(&backup, r, config.databases)?;
                (backup.database().clone(), Some(backup), tables)
            }
        };
        let threads = if config.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            config.threads
        };
        let listeners = crate::event_loop::listen(&config.bind, config.port, threads)
            .map_err(|source| StartError::Bind { addr: format!("{}:{}", config.bind, config.port), source })?;
        let addr =
            listeners[0].local_addr().map_err(|source| StartError::Bind { addr: config.bind.clone(), source })?;
        let tls_port = tls.as_ref().and_then(|t| t.config.port);
        let mut tls_listeners: Vec<Option<TcpListener>> = match tls_port {
            Some(port) => crate::event_loop::listen(&config.bind, port, threads)
                .map_err(|source| StartError::Bind { addr: format!("{}:{port} (TLS)", config.bind), source })?
                .into_iter()
                .map(Some)
                .collect(),
            None => (0..threads).map(|_| None).collect(),
        };
        let tls_addr = match tls_listeners.first() {
            Some(Some(l)) => Some(l.local_addr().map_err(|source| StartError::Bind { addr: "TLS".into(), source })?),
            _ => None,
        };
        let users = Users::new(config.requirepass.as_deref(), crate::cmd::rights());
        let counts = Arc::new(Counts::new(&tables, threads));
        if backup.is_none() {
            let began = Instant::now();
            counts.count_before_serving(&db)?;
            let keys: i64 = counts.get().iter().flatten().map(|[k, _]| k).sum();
            ::log::info!("counted {keys} keys in {:.3} s", began.elapsed().as_secs_f64());
        }
        let shared = Arc::new(Shared {
            settings: Settings {
                appendfsync: AtomicU8::new(config.appendfsync as u8),
                slowlog_slower_than: AtomicI64::new(config.slowlog_slower_than),
                maxclients: AtomicUsize::new(config.maxclients),
                maxmemory: AtomicU64::new(config.maxmemory),
                max_bulk: AtomicUsize::new(config.limits.max_bulk),
                query_buffer_limit: AtomicUsize::new(config.query_buffer_limit),
                protected_mode: AtomicBool::new(config.protected_mode),
                inert: crate::config::INERT.iter().map(|e| AtomicI64::new(e.2)).collect(),
            },
            cursors: Cursors::default(),
            waiters: Default::default(),
            pubsub: crate::pubsub::PubSub::new(threads),
            slowlog: Mutex::new(Slowlog::new(config.slowlog_max_len)),
            config,
            db,
            tables,
            users: Mutex::new(users),
            acl_generation: AtomicU64::new(0),
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
            stats: (0..threads).map(|_| Arc::new(ThreadStats::new(crate::cmd::COMMANDS.len()))).collect(),
            counts,
            shutdown: AtomicBool::new(false),
            started: Instant::now(),
            wakeups: Arc::new(Wakeups {
                wakers: Mutex::default(),
                parked: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            }),
            addr,
            tls_addr,
            tls,
            backup: Mutex::new(backup),
        });
        let mut loops = Vec::new();
        for (i, l) in listeners.into_iter().enumerate() {
            let tls_listener = tls_listeners[i].take();
            loops.push(EventLoop::new(i, shared.clone(), l, tls_listener).map_err(StartError::Engine)?);
        }
        let wakeups = shared.wakeups.clone();
        shared.db.on_durable(move |_| wakeups.durable());
        let mut handles = Vec::new();
        for l in loops {
            let name = format!("epochdb-serve-{}", handles.len());
            let h = std::thread::Builder::new()
                .name(name)
                .spawn(move || l.run())
                .map_err(|source| StartError::Bind { addr: "event loop thread".into(), source })?;
            handles.push(h);
        }
        ::log::info!(
            "epochdb serving on {addr} with {threads} event loops, durability {:?}, appendfsync {}",
            shared.db.options().durability,
            shared.appendfsync().name()
        );
        Ok(Server { shared, threads: handles })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The TLS port's address, if it has one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.shared.tls_addr
    }

    /// The primary this server is a replica of, until promoted.
    pub fn replica_of(&self) -> Option<String> {
        self.shared.backup().as_ref().map(Backup::primary)
    }

    /// The database it serves.
    pub fn database(&self) -> &Database {
        &self.shared.db
    }

    /// A handle that promotes this replica from another thread.
    pub fn promoter(&self) -> Promoter {
        Promoter(self.shared.clone())
    }

    /// A handle that stops this server from another thread (a signal's),
    /// as a client's SHUTDOWN does.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::downgrade(&self.shared))
    }

    /// Stops accepting, closes every connection and waits for the loops.
    pub fn shutdown(mut self) {
        self.shared.stop();
        self.join();
    }

    /// Waits until a client's SHUTDOWN (or [`Server::shutdown`]) stops it.
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // A count under way holds the database open: ended and waited for.
        self.shared.counts.stop();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop();
        self.join();
    }
}
/// Stops a server from another thread ([`Server::stopper`]). It holds no
/// strong reference: once the server has stopped, the database closes
/// (its loggers' final flush) whether or not a `Stopper` is left.
#[derive(Clone)]
pub struct Stopper(std::sync::Weak<Shared>);

impl Stopper {
    /// As SHUTDOWN: the loops close every connection and end, and
    /// [`Server::wait`] returns.
    pub fn stop(&self) {
        if let Some(shared) = self.0.upgrade() {
            shared.stop();
        }
    }
}

/// Promotes a replica when a control plane appoints it.
#[derive(Clone)]
pub struct Promoter(Arc<Shared>);

impl Promoter {
    /// Makes the replica a primary in place (nothing to do on a primary).
    pub fn promote(&self) -> epochdb::Result<()> {
        self.0.promote()
    }

    /// Makes the replica follow the primary at `primary` (its
    /// replication address): one appointed after its own
    /// ([`epochdb::Backup::follow`]). False on a primary.
    pub fn follow(&self, primary: &str) -> bool {
        let backup = self.0.backup();
        backup.as_ref().map(|b| b.follow(primary)).is_some()
    }

    /// Whether it is still a replica.
    pub fn is_replica(&self) -> bool {
        self.0.backup().is_some()
    }

    /// Why its primary refused the replica as diverged, if it did
    /// ([`epochdb::Backup::diverged`]).
    pub fn replica_diverged(&self) -> Option<String> {
        self.0.backup().as_ref().and_then(|b| b.diverged())
    }

    /// Whether the server stopped (SHUTDOWN).
    pub fn is_stopped(&self) -> bool {
        self.0.shutdown.load(Ordering::Acquire)
    }
}

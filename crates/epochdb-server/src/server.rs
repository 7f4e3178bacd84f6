//! The server: its settings, the state its event loops share, and
//! starting and stopping it.

use crate::acl::Users;
use crate::commands::Cursors;
use crate::counts::Counts;
use crate::event_loop::EventLoop;
use crate::resp::Limits;
use crate::stats::{Slowlog, ThreadStats};
use crate::tls::{Tls, TlsConfig};
use epochdb::{Backup, BackupOptions, Database, Durability, Options, TableId, TableOptions};
use mio::net::TcpListener;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// When a write's reply is sent (Redis's `appendfsync`, mapped onto epochs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// Reply once the command's epoch is durable: a reply means the write
    /// survives a crash. Replies of reads wait too, so no client sees a
    /// write a crash could still take back.
    Always = 0,
    /// Reply at commit; the log is synced at every epoch (40 ms), so a
    /// crash loses at most the last epoch or two (like Redis's `everysec`).
    Everysec = 1,
    /// Same as `everysec` for epochdb (the loggers sync each epoch anyway).
    No = 2,
}

impl AppendFsync {
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }

    pub fn parse(s: &str) -> Option<AppendFsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(AppendFsync::Always),
            "everysec" => Some(AppendFsync::Everysec),
            "no" => Some(AppendFsync::No),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> AppendFsync {
        match v {
            0 => AppendFsync::Always,
            1 => AppendFsync::Everysec,
            _ => AppendFsync::No,
        }
    }
}

/// How to run a server. `Config::default()` listens on 127.0.0.1:6379
/// with an in-memory database.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on (loopback unless told otherwise).
    pub bind: String,
    /// 0: any free port (see [`Server::local_addr`]).
    pub port: u16,
    /// Event loops, each with its own worker (0: one per CPU).
    pub threads: usize,
    pub appendfsync: AppendFsync,
    /// The default user's password (`requirepass`); `None`: no password.
    pub requirepass: Option<String>,
    /// Redis's protected mode: while the default user has no password,
    /// only clients on the loopback interface are let in; others get a
    /// `DENIED` error and are closed.
    pub protected_mode: bool,
    /// Numbered databases (`SELECT 0..n`), each a table.
    pub databases: usize,
    pub maxclients: usize,
    /// Bytes of records and index nodes ([`epochdb::memory_in_use`]) above
    /// which commands that add to memory are refused (Redis's `maxmemory`
    /// with `noeviction`); 0: no limit.
    pub maxmemory: u64,
    pub limits: Limits,
    /// Unparsed bytes a client may have sent before it is closed.
    pub query_buffer_limit: usize,
    /// SLOWLOG: commands slower than this many µs are logged (-1: none).
    pub slowlog_slower_than: i64,
    pub slowlog_max_len: usize,
    /// The engine's options: durability, data directory, epochs (and, for
    /// a replica, those it has once promoted).
    pub options: Options,
    /// Serve as a hot standby of this primary instead of opening the
    /// data directory as a database of its own.
    pub replicaof: Option<ReplicaOf>,
    /// Set when a control plane (`epochdb-control`) decides promotions:
    /// how this node, a replica, asks it for a planned switchover to
    /// itself. `REPLICAOF NO ONE` then asks instead of promoting, and
    /// [`Promoter`] promotes once the control plane appoints this node.
    pub switchover: Option<Switchover>,
    /// Lines the control plane adds to `INFO replication`.
    pub control_info: Option<InfoLines>,
    /// TLS for clients (a port of its own) and, with `replication`, for
    /// the connections to backups or to the primary.
    pub tls: Option<TlsConfig>,
    /// How `EPOCHDB.MEMBER` asks the control plane to change its voters.
    pub members: Option<Members>,
}

/// Asks the control plane to add voter `id` reached at `Some(addr)`, or
/// to remove it (`None`); returns once asked.
#[derive(Clone)]
pub struct Members(pub Arc<dyn Fn(u64, Option<String>) -> Result<(), String> + Send + Sync>);

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Members")
    }
}

/// Asks the control plane to make this node the primary; returns once
/// asked (the appointment follows).
#[derive(Clone)]
pub struct Switchover(pub Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl std::fmt::Debug for Switchover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Switchover")
    }
}

/// `INFO` lines (`field:value\r\n` each) made when INFO is asked.
#[derive(Clone)]
pub struct InfoLines(pub Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for InfoLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InfoLines")
    }
}

/// A replica's primary (`--replicaof`): the server serves reads at the
/// standby's read view, refuses writes with READONLY, and becomes a
/// primary on `REPLICAOF NO ONE`.
#[derive(Debug, Clone)]
pub struct ReplicaOf {
    /// The primary's replication address (its `--replicate-listen`), not
    /// its Redis port.
    pub primary: String,
    /// The primary's replication secret.
    pub secret: Option<String>,
    /// How long a new replica may wait at start for its primary's
    /// numbered databases.
    pub start_timeout: Duration,
    /// This node's id in a control plane (0: none), told to the primary.
    pub node: u64,
}

impl ReplicaOf {
    pub fn new(primary: impl Into<String>) -> ReplicaOf {
        ReplicaOf { primary: primary.into(), secret: None, start_timeout: Duration::from_secs(30), node: 0 }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            threads: 0,
            appendfsync: AppendFsync::Everysec,
            requirepass: None,
            protected_mode: true,
            databases: 16,
            maxclients: 10_000,
            maxmemory: 0,
            limits: Limits::default(),
            query_buffer_limit: 1 << 30,
            slowlog_slower_than: 10_000,
            slowlog_max_len: 128,
            options: Options::default(),
            replicaof: None,
            switchover: None,
            control_info: None,
            members: None,
            tls: None,
        }
    }
}

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

/// A connected client as other threads see it (CLIENT LIST, CLIENT KILL).
#[derive(Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub thread: usize,
    pub created: Instant,
    pub name: Mutex<Vec<u8>>,
    pub user: Mutex<String>,
    pub db: AtomicUsize,
    /// Index of the last command in the command table (+1; 0: none).
    pub last_cmd: AtomicUsize,
    pub kill: AtomicBool,
}

/// The settings CONFIG SET may change, read on the request path: atomics,
/// so the event loops never share a lock to read them.
pub struct Settings {
    appendfsync: AtomicU8,
    pub slowlog_slower_than: AtomicI64,
    pub maxclients: AtomicUsize,
    pub maxmemory: AtomicU64,
    pub max_bulk: AtomicUsize,
    pub query_buffer_limit: AtomicUsize,
    pub protected_mode: AtomicBool,
}

/// State the event loops share; touched rarely on the request path.
pub struct Shared {
    pub db: Database,
    pub tables: Vec<TableId>,
    /// As started; what CONFIG SET changes lives in `settings` (and the
    /// default user's password in `users`, the slow log's length in
    /// `slowlog`).
    pub config: Config,
    pub settings: Settings,
    pub users: Mutex<Users>,
    /// Bumped at every ACL change; clients re-read their permissions.
    pub acl_generation: AtomicU64,
    pub clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    pub next_client_id: AtomicU64,
    pub connected: AtomicUsize,
    pub stats: Vec<Arc<ThreadStats>>,
    /// INFO keyspace's counts.
    pub counts: Arc<Counts>,
    pub slowlog: Mutex<Slowlog>,
    /// SCAN and HSCAN cursors, which any connection may continue.
    pub cursors: Cursors,
    pub shutdown: AtomicBool,
    pub started: Instant,
    pub wakeups: Arc<Wakeups>,
    pub addr: SocketAddr,
    /// The TLS port's address and configuration, if any.
    pub tls_addr: Option<SocketAddr>,
    pub tls: Option<Arc<Tls>>,
    /// A replica's backup until `REPLICAOF NO ONE` promotes it.
    pub backup: Mutex<Option<Backup>>,
}

/// How the event loops are woken: for shutdown and kills, and by the
/// loggers when the durable epoch grows while a loop waits on it. Kept
/// apart from [`Shared`] so the engine's listener does not own the
/// database it listens to.
#[derive(Default)]
pub struct Wakeups {
    pub wakers: Mutex<Vec<Arc<mio::Waker>>>,
    /// Set by a loop that sleeps with replies held for durability.
    pub parked: Vec<AtomicBool>,
}

impl Wakeups {
    /// Wakes the loops parked on durability (called by a logger).
    fn durable(&self) {
        // Pairs with the fence in `EventLoop::run`: either the loop sees the
        // new pepoch before sleeping, or this sees its flag.
        std::sync::atomic::fence(Ordering::SeqCst);
        let wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        for (flag, w) in self.parked.iter().zip(wakers.iter()) {
            if flag.swap(false, Ordering::SeqCst) {
                let _ = w.wake();
            }
        }
    }
}

impl Shared {
    pub fn appendfsync(&self) -> AppendFsync {
        AppendFsync::from_u8(self.settings.appendfsync.load(Ordering::Relaxed))
    }

    pub fn set_appendfsync(&self, a: AppendFsync) {
        self.settings.appendfsync.store(a as u8, Ordering::Relaxed);
    }

    /// The request limits now.
    pub fn limits(&self) -> Limits {
        Limits { max_bulk: self.settings.max_bulk.load(Ordering::Relaxed), ..self.config.limits }
    }

    /// Whether replies wait for durability. Not on a replica: it shows
    /// only what its primary released, and has no durable epoch of its
    /// own until promoted.
    pub fn durable_replies(&self) -> bool {
        self.appendfsync() == AppendFsync::Always
            && self.db.options().durability != Durability::Off
            && !self.db.is_read_only()
    }

    /// Promotes a replica's backup (`REPLICAOF NO ONE`); nothing to do on
    /// a primary.
    pub fn promote(&self) -> epochdb::Result<()> {
        let Some(backup) = self.backup.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        ::log::info!("REPLICAOF NO ONE: promoting this replica");
        // Before the first write: replay did not count what it installed.
        self.counts.forget();
        backup.promote()?;
        let (term, first) = self.db.term();
        ::log::info!("promoted: a primary in term {term} from epoch {first}");
        Ok(())
    }

    /// Asks every event loop to stop.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.wake_all();
    }

    pub fn wake_all(&self) {
        for w in self.wakeups.wakers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = w.wake();
        }
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
        let users = Users::new(config.requirepass.as_deref());
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
            },
            cursors: Cursors::default(),
            slowlog: Mutex::new(Slowlog::new(config.slowlog_max_len)),
            config,
            db,
            tables,
            users: Mutex::new(users),
            acl_generation: AtomicU64::new(0),
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
            stats: (0..threads).map(|_| Arc::new(ThreadStats::new())).collect(),
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
        self.shared.backup.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(Backup::primary)
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

/// A memory size as Redis's configuration takes it: bytes, or a number
/// with `k`/`m`/`g` (powers of 1000) or `kb`/`mb`/`gb` (of 1024), in
/// either case (`maxmemory 100mb`).
pub fn parse_memory(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let scale: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return None,
    };
    n.parse::<u64>().ok()?.checked_mul(scale)
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
        let backup = self.0.backup.lock().unwrap_or_else(|e| e.into_inner());
        backup.as_ref().map(|b| b.follow(primary)).is_some()
    }

    /// Whether it is still a replica.
    pub fn is_replica(&self) -> bool {
        self.0.backup.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Why its primary refused the replica as diverged, if it did
    /// ([`epochdb::Backup::diverged`]).
    pub fn replica_diverged(&self) -> Option<String> {
        self.0.backup.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|b| b.diverged())
    }

    /// Whether the server stopped (SHUTDOWN).
    pub fn is_stopped(&self) -> bool {
        self.0.shutdown.load(Ordering::Acquire)
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn memory_sizes_parse_as_redis_takes_them() {
        assert_eq!(parse_memory("0"), Some(0));
        assert_eq!(parse_memory("1024"), Some(1024));
        assert_eq!(parse_memory("100b"), Some(100));
        assert_eq!(parse_memory("4k"), Some(4000));
        assert_eq!(parse_memory("4KB"), Some(4096));
        assert_eq!(parse_memory("100mb"), Some(100 << 20));
        assert_eq!(parse_memory("2M"), Some(2_000_000));
        assert_eq!(parse_memory("3gb"), Some(3 << 30));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        for bad in ["", "mb", "-1", "1.5gb", "12xb", "1 gb x", "99999999999999999999gb"] {
            assert_eq!(parse_memory(bad), None, "{bad:?}");
        }
    }
}

//! The state a server's event loops share, and what other threads see
//! of its clients.

use crate::acl::Users;
use crate::config::{AppendFsync, Config};
use crate::counts::Counts;
use crate::cursors::Cursors;
use crate::pubsub::PubSub;
use crate::resp::Limits;
use crate::stats::{Slowlog, ThreadStats};
use crate::tls::Tls;
use crate::waiters::Waiters;
use epochdb::{Backup, Database, Durability, TableId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

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
    /// In a blocking pop (CLIENT UNBLOCK may end it).
    pub in_pop: AtomicBool,
    /// Set by CLIENT UNBLOCK: 1 to end the pop as a timeout, 2 with an
    /// error; the client's loop acts on it at its next look.
    pub unblock: AtomicU8,
}

/// The settings CONFIG SET may change, read on the request path: atomics,
/// so the event loops never share a lock to read them.
pub struct Settings {
    pub(crate) appendfsync: AtomicU8,
    pub slowlog_slower_than: AtomicI64,
    pub maxclients: AtomicUsize,
    pub maxmemory: AtomicU64,
    pub max_bulk: AtomicUsize,
    pub query_buffer_limit: AtomicUsize,
    pub protected_mode: AtomicBool,
    /// The values of [`crate::config::INERT`], which change nothing.
    pub inert: Vec<AtomicI64>,
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
    pub(crate) users: Mutex<Users>,
    /// Bumped at every ACL change; clients re-read their permissions.
    pub(crate) acl_generation: AtomicU64,
    pub(crate) clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    pub next_client_id: AtomicU64,
    pub connected: AtomicUsize,
    pub stats: Vec<Arc<ThreadStats>>,
    /// INFO keyspace's counts.
    pub counts: Arc<Counts>,
    pub(crate) slowlog: Mutex<Slowlog>,
    /// SCAN and HSCAN cursors, which any connection may continue.
    pub cursors: Cursors,
    /// Clients blocked in a pop, in the order they began to wait.
    pub waiters: Waiters,
    /// Pub/sub subscriptions and the loops' inboxes of messages.
    pub pubsub: PubSub,
    pub shutdown: AtomicBool,
    pub started: Instant,
    pub wakeups: Arc<Wakeups>,
    pub addr: SocketAddr,
    /// The TLS port's address and configuration, if any.
    pub tls_addr: Option<SocketAddr>,
    pub tls: Option<Arc<Tls>>,
    /// A replica's backup until `REPLICAOF NO ONE` promotes it.
    pub(crate) backup: Mutex<Option<Backup>>,
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
    pub(crate) fn durable(&self) {
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

/// Locks `m`, whatever a thread that panicked holding it left.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// The users and their permissions.
    pub fn users(&self) -> MutexGuard<'_, Users> {
        locked(&self.users)
    }

    /// After a change of users or permissions: every client re-reads its
    /// permissions before its next command.
    pub fn acl_changed(&self) {
        self.acl_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The generation of the users and permissions, bumped by each change.
    pub fn acl_generation(&self) -> u64 {
        self.acl_generation.load(Ordering::Acquire)
    }

    /// The connected clients, by id.
    pub fn clients(&self) -> MutexGuard<'_, HashMap<u64, Arc<ClientInfo>>> {
        locked(&self.clients)
    }

    pub fn slowlog(&self) -> MutexGuard<'_, Slowlog> {
        locked(&self.slowlog)
    }

    /// A replica's backup, until it is promoted (`None` on a primary).
    pub fn backup(&self) -> MutexGuard<'_, Option<Backup>> {
        locked(&self.backup)
    }

    /// Whether this server is a replica not yet promoted.
    pub fn is_replica(&self) -> bool {
        self.backup().is_some()
    }

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
        let Some(backup) = self.backup().take() else {
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

/// Unix time in microseconds.
pub fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

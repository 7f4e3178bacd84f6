//! How a server is configured: [`Config`] and the settings it holds.

use crate::resp::Limits;
use crate::tls::TlsConfig;
use epochdb::Options;
use std::sync::Arc;
use std::time::Duration;

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

    pub(crate) fn from_u8(v: u8) -> AppendFsync {
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
    /// 0: any free port (see [`crate::Server::local_addr`]).
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
    /// [`crate::Promoter`] promotes once the control plane appoints this node.
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

/// A boolean as Redis's configuration takes it: `yes` or `no`, in either
/// case.
pub fn parse_yes_no(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
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
/// Settings Redis has that change nothing in epochdb, with their Redis
/// 7.0 defaults: the encoding thresholds (the size below which Redis keeps
/// a type in a compact encoding; epochdb has one representation per type)
/// and the script time limit (epochdb runs no scripts). CONFIG SET keeps
/// what is set and CONFIG GET shows it, for tools and tests that set them.
/// A name and its older alias share one value.
pub const INERT: &[(&str, Option<&str>, i64)] = &[
    ("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), 128),
    ("hash-max-listpack-value", Some("hash-max-ziplist-value"), 64),
    ("set-max-intset-entries", None, 512),
    ("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), 128),
    ("zset-max-listpack-value", Some("zset-max-ziplist-value"), 64),
    ("list-max-listpack-size", Some("list-max-ziplist-size"), -2),
    ("list-compress-depth", None, 0),
    ("stream-node-max-bytes", None, 4096),
    ("stream-node-max-entries", None, 100),
    ("busy-reply-threshold", Some("lua-time-limit"), 5000),
];

/// The index in [`INERT`] of a threshold, by name or alias.
pub fn inert_index(name: &str) -> Option<usize> {
    INERT.iter().position(|&(n, alias, _)| n == name || alias == Some(name))
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

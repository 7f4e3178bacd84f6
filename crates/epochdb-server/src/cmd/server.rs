//! The server: COMMAND, CONFIG, INFO, TIME, SHUTDOWN, ACL, SLOWLOG,
//! BGSAVE, SAVE, LASTSAVE, FLUSHALL.

use super::keys::clear_table;
use super::replication::{primary_info, primary_of, replica_info};
use super::{lookup, printable, COMMANDS, SYNTAX};
use crate::client::Blocked;
use crate::command::{Call, Command, Local};
use crate::config::{inert_index, AppendFsync, INERT};
use crate::glob;
use crate::keyspace::Tally;
use crate::resp::{parse_i64, Args, Out};
use crate::shared::{now_ms, Shared};
use crate::stats::{percentile, totals};
use epochdb::Durability;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// The Redis version we answer to (clients check it for features).
pub const REDIS_VERSION: &str = "7.0.0";

/// TIME: the server's Unix time, seconds and microseconds.
pub fn time(x: &mut Local<'_>, _: &Args) {
    let us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
    x.out.array(2);
    x.out.bulk((us / 1_000_000).to_string().as_bytes());
    x.out.bulk((us % 1_000_000).to_string().as_bytes());
}

/// INFO [section ...].
pub fn info(x: &mut Call<'_>, a: &Args) {
    let shared = &**x.shared;
    let keyspace = if info_wants(a, "keyspace") {
        if shared.counts.stale(shared.db.is_read_only()) {
            shared.counts.count_in_background(&shared.db);
        }
        shared.counts.get()
    } else {
        None
    };
    let text = info_text(shared, a, keyspace);
    x.client.out().verbatim(&text);
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: the server stops (every
/// commit is durable first); no reply, the connection closes.
pub fn shutdown(x: &mut Call<'_>, a: &Args) {
    let c = &mut *x.client;
    let opt = a.iter_from(1).map(|o| o.to_ascii_uppercase()).collect::<Vec<_>>();
    if opt.iter().any(|o| o == b"ABORT") {
        c.out().error("ERR No shutdown in progress.");
    } else {
        ::log::info!("SHUTDOWN asked by client {}", c.info.addr);
        x.shared.stop();
        c.close_after_reply = true;
    }
}

/// LASTSAVE.
pub fn lastsave(x: &mut Call<'_>, _: &Args) {
    let at = lastsave_time(x.shared);
    x.client.out().int(at as i64);
}

fn command_info(o: &mut Out<'_>, cmd: &Command) {
    o.array(10);
    o.bulk(cmd.name.as_bytes());
    o.int(cmd.arity as i64);
    let flags = cmd.flags();
    o.set(flags.len());
    for f in flags {
        o.simple(f);
    }
    o.int(cmd.keys.0 as i64);
    o.int(cmd.keys.1 as i64);
    o.int(cmd.keys.2 as i64);
    o.set(cmd.categories.len());
    for cat in cmd.categories {
        o.simple(&format!("@{cat}"));
    }
    o.set(0); // tips
    o.array(0); // key specs
    o.array(0); // subcommands
}

/// COMMAND, COMMAND COUNT|INFO|DOCS|LIST|GETKEYS.
pub fn command(x: &mut Call<'_>, a: &Args) {
    let mut o = x.client.out();
    if a.len() == 1 {
        o.array(COMMANDS.len());
        for cmd in COMMANDS {
            command_info(&mut o, cmd);
        }
        return;
    }
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"COUNT" => o.int(COMMANDS.len() as i64),
        b"INFO" => {
            let names: Vec<&[u8]> = if a.len() == 2 {
                COMMANDS.iter().map(|c| c.name.as_bytes()).collect()
            } else {
                a.iter_from(2).collect()
            };
            o.array(names.len());
            for n in names {
                match lookup(n) {
                    Some((_, cmd)) => command_info(&mut o, cmd),
                    None => o.null_array(),
                }
            }
        }
        b"DOCS" => {
            // No documentation is kept; clients only need a well-formed map.
            let names: Vec<&[u8]> = a.iter_from(2).filter(|n| lookup(n).is_some()).collect();
            o.map(names.len());
            for n in names {
                o.bulk(&n.to_ascii_lowercase());
                o.map(1);
                o.bulk(b"summary");
                o.bulk(b"");
            }
        }
        b"LIST" => {
            o.array(COMMANDS.len());
            for cmd in COMMANDS {
                o.bulk(cmd.name.as_bytes());
            }
        }
        b"GETKEYS" if a.len() >= 3 => {
            let rest: Vec<&[u8]> = a.iter_from(2).collect();
            match lookup(rest[0]) {
                Some((_, cmd)) if cmd.arity_ok(rest.len()) && cmd.keys.0 > 0 => {
                    let keys: Vec<usize> = cmd.key_positions(rest.len()).collect();
                    o.array(keys.len());
                    for k in keys {
                        o.bulk(rest[k]);
                    }
                }
                Some(_) => o.error("ERR The command has no key arguments"),
                None => o.error("ERR Invalid command specified"),
            }
        }
        _ => o.error(&format!("ERR unknown subcommand '{}'. Try COMMAND HELP.", printable(a.get(1)))),
    }
}

pub fn config(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"GET" if a.len() >= 3 => {
            let values = config_values(shared);
            let hits: Vec<_> = values
                .iter()
                .filter(|(k, _)| a.iter_from(2).any(|p| glob::matches(&p.to_ascii_lowercase(), k.as_bytes())))
                .collect();
            let mut o = c.out();
            o.map(hits.len());
            for (k, v) in hits {
                o.bulk(k.as_bytes());
                o.bulk(v.as_bytes());
            }
        }
        b"SET" if a.len() >= 4 && a.len().is_multiple_of(2) => {
            // All or none, as Redis: every parameter is checked first.
            let mut changes = Vec::new();
            let mut names: Vec<String> = Vec::new();
            for i in (2..a.len()).step_by(2) {
                let name = String::from_utf8_lossy(a.get(i)).to_ascii_lowercase();
                if names.contains(&name) {
                    return c.out().error(&config_failed(&name, "duplicate parameter"));
                }
                match config_change(shared, &name, a.get(i + 1)) {
                    Ok(change) => changes.push(change),
                    Err(e) => return c.out().error(&e),
                }
                names.push(name);
            }
            for change in changes {
                apply_config(shared, change);
            }
            c.out().ok();
        }
        b"RESETSTAT" => {
            c.out().ok();
        }
        b"REWRITE" => c.out().error("ERR The server is running without a config file"),
        _ => c.out().error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
            printable(a.get(1))
        )),
    }
}

/// CONFIG GET's parameters and their current values.
fn config_values(shared: &Shared) -> Vec<(&'static str, String)> {
    let (cfg, set) = (&shared.config, &shared.settings);
    let requirepass = shared
        .users
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .users
        .get("default")
        .and_then(|d| d.passwords.first().cloned());
    let o = shared.db.options();
    let logging = o.durability != Durability::Off;
    let tls = shared.tls.as_ref().map(|t| &t.config);
    let mut values = vec![
        ("bind", cfg.bind.clone()),
        ("port", shared.addr.port().to_string()),
        ("databases", cfg.databases.to_string()),
        ("maxclients", set.maxclients.load(Ordering::Relaxed).to_string()),
        ("maxmemory", set.maxmemory.load(Ordering::Relaxed).to_string()),
        ("maxmemory-policy", "noeviction".into()),
        ("appendonly", if logging { "yes" } else { "no" }.into()),
        ("appendfsync", shared.appendfsync().name().into()),
        ("save", String::new()),
        ("requirepass", requirepass.unwrap_or_default()),
        ("protected-mode", if set.protected_mode.load(Ordering::Relaxed) { "yes" } else { "no" }.into()),
        ("proto-max-bulk-len", set.max_bulk.load(Ordering::Relaxed).to_string()),
        ("client-query-buffer-limit", set.query_buffer_limit.load(Ordering::Relaxed).to_string()),
        ("slowlog-log-slower-than", set.slowlog_slower_than.load(Ordering::Relaxed).to_string()),
        ("slowlog-max-len", shared.slowlog().max_len.to_string()),
        ("timeout", "0".into()),
        ("io-threads", cfg.threads.to_string()),
        ("dir", o.data_dir.as_ref().map_or(String::new(), |d| d.display().to_string())),
        ("epochdb-durability", o.durability.name().into()),
        ("tls-port", shared.tls_addr.map_or(0, |a| a.port()).to_string()),
        ("tls-cert-file", tls.map_or(String::new(), |t| t.cert_file.display().to_string())),
        ("tls-key-file", tls.map_or(String::new(), |t| t.key_file.display().to_string())),
        (
            "tls-ca-cert-file",
            tls.and_then(|t| t.ca_cert_file.as_ref()).map_or(String::new(), |f| f.display().to_string()),
        ),
        ("tls-auth-clients", tls.map_or("yes", |t| t.auth_clients.name()).into()),
        ("tls-replication", if tls.is_some_and(|t| t.replication) { "yes" } else { "no" }.into()),
        ("epochdb-epoch-interval-ms", o.epoch_interval.as_millis().to_string()),
    ];
    for (i, &(name, alias, _)) in INERT.iter().enumerate() {
        let v = set.inert[i].load(Ordering::Relaxed).to_string();
        values.extend(alias.map(|a| (a, v.clone())));
        values.push((name, v));
    }
    values
}

/// CONFIG SET's error for parameter `name`.
fn config_failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

/// One parameter of a CONFIG SET, checked, to apply once all are.
enum Change {
    AppendFsync(AppendFsync),
    RequirePass(String),
    MaxClients(usize),
    MaxMemory(u64),
    SlowlogSlowerThan(i64),
    SlowlogMaxLen(usize),
    ProtoMaxBulkLen(usize),
    QueryBufferLimit(usize),
    ProtectedMode(bool),
    /// A setting that changes nothing here (`config::INERT`): kept.
    Inert(usize, i64),
    /// The value the server has already: nothing to do.
    Unchanged,
}

/// Checks `name value`: the change it makes, or the error that says why
/// it cannot take effect (never an OK that changes nothing).
fn config_change(shared: &Shared, name: &str, v: &[u8]) -> Result<Change, String> {
    let text = String::from_utf8_lossy(v).into_owned();
    let failed = |why: &str| config_failed(name, why);
    let int = || text.parse::<i64>().map_err(|_| failed("argument couldn't be parsed into an integer"));
    let size = || int().and_then(|n| usize::try_from(n).map_err(|_| failed("argument must be 0 or more")));
    let memory = || crate::config::parse_memory(&text).ok_or_else(|| failed("argument must be a memory value"));
    let yes_no = || crate::config::parse_yes_no(&text).ok_or_else(|| failed("argument must be 'yes' or 'no'"));
    let durability = shared.db.options().durability;
    Ok(match name {
        "appendfsync" => Change::AppendFsync(
            AppendFsync::parse(&text).ok_or_else(|| failed("argument(s) must be one of the following: always, everysec, no"))?,
        ),
        "requirepass" => Change::RequirePass(text),
        "maxclients" => Change::MaxClients(size()?),
        "maxmemory" => Change::MaxMemory(memory()?),
        "maxmemory-policy" if text.eq_ignore_ascii_case("noeviction") => Change::Unchanged,
        "maxmemory-policy" => return Err(failed("epochdb evicts nothing: only noeviction")),
        "slowlog-log-slower-than" => Change::SlowlogSlowerThan(int()?),
        "slowlog-max-len" => Change::SlowlogMaxLen(size()?),
        "proto-max-bulk-len" => {
            let n = usize::try_from(memory()?).unwrap_or(usize::MAX);
            if !(1024..=(512 << 20)).contains(&n) {
                return Err(failed("argument must be between 1024 and 536870912"));
            }
            Change::ProtoMaxBulkLen(n)
        }
        "client-query-buffer-limit" => {
            let n = usize::try_from(memory()?).unwrap_or(usize::MAX);
            if n < 1024 * 1024 {
                return Err(failed("argument must be at least 1048576"));
            }
            Change::QueryBufferLimit(n)
        }
        "protected-mode" => Change::ProtectedMode(yes_no()?),
        "appendonly" if yes_no()? == (durability != Durability::Off) => Change::Unchanged,
        "appendonly" => {
            let mode = durability.name();
            let to = if durability == Durability::Off { "log+checkpoint" } else { "off" };
            return Err(failed(&format!(
                "the log is set at start (--durability {mode}): restart the server with --durability {to}"
            )));
        }
        "save" if text.is_empty() => Change::Unchanged,
        "save" => {
            return Err(failed(
                "epochdb takes no snapshots at save points: checkpoints follow --checkpoint-interval while there are writes, and BGSAVE takes one now",
            ))
        }
        "tls-port" | "tls-cert-file" | "tls-key-file" | "tls-ca-cert-file" | "tls-auth-clients" | "tls-replication" => {
            return Err(failed("TLS settings are read at start: restart the server with the new ones"))
        }
        "timeout" if text == "0" => Change::Unchanged,
        "timeout" => return Err(failed("epochdb does not close idle clients: only 0 is accepted")),
        _ => match inert_index(name) {
            Some(i) => Change::Inert(i, int()?),
            None => return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")),
        },
    })
}

fn apply_config(shared: &Shared, change: Change) {
    let set = &shared.settings;
    match change {
        Change::AppendFsync(a) => shared.set_appendfsync(a),
        Change::RequirePass(p) => {
            shared.users().set_requirepass(&p);
            shared.acl_changed();
        }
        Change::MaxClients(n) => set.maxclients.store(n, Ordering::Relaxed),
        Change::MaxMemory(n) => set.maxmemory.store(n, Ordering::Relaxed),
        Change::SlowlogSlowerThan(n) => set.slowlog_slower_than.store(n, Ordering::Relaxed),
        Change::SlowlogMaxLen(n) => shared.slowlog().max_len = n,
        Change::ProtoMaxBulkLen(n) => set.max_bulk.store(n, Ordering::Relaxed),
        Change::QueryBufferLimit(n) => set.query_buffer_limit.store(n, Ordering::Relaxed),
        Change::ProtectedMode(on) => set.protected_mode.store(on, Ordering::Relaxed),
        Change::Inert(i, v) => set.inert[i].store(v, Ordering::Relaxed),
        Change::Unchanged => {}
    }
}

/// Whether INFO with arguments `a` shows `section` (with none: the usual
/// sections).
fn info_wants(a: &Args, section: &str) -> bool {
    let asked: Vec<String> = a.iter_from(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()).collect();
    let all = asked.iter().any(|s| s == "all" || s == "everything");
    let default = asked.is_empty() || asked.iter().any(|s| s == "default");
    all || asked.iter().any(|x| x == section) || default && !matches!(section, "commandstats" | "latencystats")
}

/// INFO's text for the sections asked for; `keyspace` is each database's
/// `[keys, expires]`, if known.
fn info_text(shared: &Shared, a: &Args, keyspace: Option<Vec<crate::counts::Pair>>) -> String {
    let want = |s: &str| info_wants(a, s);
    let mut out = String::new();
    let o = shared.db.options();
    let sum = |f: &dyn Fn(&crate::stats::ThreadStats) -> u64| shared.stats.iter().map(|s| f(s)).sum::<u64>();
    if want("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nepochdb_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nio_threads_active:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            shared.addr.port(),
            shared.started.elapsed().as_secs(),
            shared.stats.len(),
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\r\n",
            shared.connected.load(Ordering::Relaxed),
            shared.settings.maxclients.load(Ordering::Relaxed),
            sum(&|s| s.blocked.load(Ordering::Relaxed)),
        );
    }
    if want("memory") {
        let rss = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
            .map_or(0, |pages| pages * 4096);
        // `used_memory` is what tools read (`redis-cli --stat`, exporters)
        // and what `maxmemory` is held to: the engine's records and index
        // nodes, which falls after deletes, where the resident size does
        // not (the arena keeps freed memory for reuse).
        let used = epochdb::memory_in_use();
        let max = shared.settings.maxmemory.load(Ordering::Relaxed);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{:.2}M\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{:.2}M\r\nmaxmemory:{max}\r\nmaxmemory_human:{:.2}M\r\nmaxmemory_policy:noeviction\r\n\r\n",
            mib(used),
            mib(rss),
            mib(max),
        );
    }
    if want("persistence") {
        let logging = o.durability != Durability::Off;
        let cp = shared.db.checkpoint_stats();
        let _ = write!(
            out,
            "# Persistence\r\nloading:0\r\naof_enabled:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nepochdb_durability:{:?}\r\nepochdb_epoch:{}\r\nepochdb_durable_epoch:{}\r\nepochdb_log_bytes:{}\r\nepochdb_checkpoints:{}\r\nepochdb_checkpoint_in_progress:{}\r\nepochdb_last_checkpoint_kind:{}\r\nepochdb_last_checkpoint_bytes:{}\r\nepochdb_last_checkpoint_records:{}\r\nepochdb_checkpoint_chain:{}\r\nappendfsync:{}\r\n\r\n",
            logging as u8,
            cp.in_progress as u8,
            lastsave_time(shared),
            o.durability,
            shared.db.epoch(),
            shared.db.durable_epoch(),
            shared.db.log_bytes(),
            cp.installed,
            cp.in_progress as u8,
            match (cp.installed, cp.incremental) {
                (0, _) => "none",
                (_, true) => "incremental",
                (_, false) => "full",
            },
            cp.bytes,
            cp.records,
            cp.chain,
            shared.appendfsync().name(),
        );
    }
    if want("stats") {
        let calls: u64 = (0..COMMANDS.len()).map(|i| totals(&shared.stats, i).0).sum();
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{calls}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nepochdb_aborts_after_retries:{}\r\n\r\n",
            sum(&|s| s.connections.load(Ordering::Relaxed)),
            sum(&|s| s.net_input.load(Ordering::Relaxed)),
            sum(&|s| s.net_output.load(Ordering::Relaxed)),
            sum(&|s| s.rejected_connections.load(Ordering::Relaxed)),
            sum(&|s| s.expired.load(Ordering::Relaxed)),
            sum(&|s| s.aborts.load(Ordering::Relaxed)),
        );
    }
    if want("replication") {
        let backup = shared.backup();
        match backup.as_ref() {
            Some(b) => {
                let (host, port) = primary_of(b);
                replica_info(&mut out, shared, b, &host, port);
            }
            None => primary_info(&mut out, shared),
        }
        if let Some(lines) = &shared.config.control_info {
            out.push_str(&(lines.0)());
        }
        out.push_str("\r\n");
    }
    if want("cpu") {
        out.push_str("# CPU\r\n\r\n");
    }
    if want("commandstats") {
        out.push_str("# Commandstats\r\n");
        for (i, cmd) in COMMANDS.iter().enumerate() {
            let (calls, usec, failed, rejected, _) = totals(&shared.stats, i);
            if calls + rejected > 0 {
                let per = if calls > 0 { usec as f64 / calls as f64 } else { 0.0 };
                let _ = write!(out, "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per:.2},rejected_calls={rejected},failed_calls={failed}\r\n", cmd.name);
            }
        }
        out.push_str("\r\n");
    }
    if want("latencystats") {
        out.push_str("# Latencystats\r\n");
        for (i, cmd) in COMMANDS.iter().enumerate() {
            let (calls, _, _, _, hist) = totals(&shared.stats, i);
            if calls > 0 {
                let _ = write!(
                    out,
                    "latency_percentiles_usec_{}:p50={:.3},p99={:.3},p99.9={:.3}\r\n",
                    cmd.name,
                    percentile(&hist, 50.0),
                    percentile(&hist, 99.0),
                    percentile(&hist, 99.9)
                );
            }
        }
        out.push_str("\r\n");
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        // As Redis: a line per database that holds keys (expired ones not
        // yet removed included); no average TTL is kept.
        for (i, [keys, expires]) in keyspace.unwrap_or_default().into_iter().enumerate() {
            if keys > 0 {
                let _ = write!(out, "db{i}:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
        let _ = write!(out, "epochdb_databases:{}\r\n\r\n", shared.tables.len());
    }
    out
}

pub fn acl(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"WHOAMI" => {
            let u = c.user.clone().unwrap_or_else(|| "default".into());
            c.out().bulk(u.as_bytes());
        }
        b"USERS" => {
            let names: Vec<String> = shared.users().users.keys().cloned().collect();
            let mut o = c.out();
            o.array(names.len());
            for n in names {
                o.bulk(n.as_bytes());
            }
        }
        b"LIST" => {
            let users = shared.users();
            let lines: Vec<String> = users.users.iter().map(|(n, u)| u.describe(n, users.commands)).collect();
            drop(users);
            let mut o = c.out();
            o.array(lines.len());
            for l in lines {
                o.bulk(l.as_bytes());
            }
        }
        b"SETUSER" if a.len() >= 3 => {
            let name = String::from_utf8_lossy(a.get(2)).into_owned();
            let rules: Vec<&[u8]> = a.iter_from(3).collect();
            let r = shared.users().set_user(&name, &rules);
            shared.acl_changed();
            match r {
                Ok(()) => c.out().ok(),
                Err(e) => c.out().error(&e),
            }
        }
        b"DELUSER" if a.len() >= 3 => {
            let mut users = shared.users();
            let mut n = 0;
            for name in a.iter_from(2) {
                let name = String::from_utf8_lossy(name);
                if name == "default" {
                    drop(users);
                    return c.out().error("ERR The 'default' user cannot be removed");
                }
                n += users.users.remove(name.as_ref()).is_some() as i64;
            }
            drop(users);
            shared.acl_changed();
            c.out().int(n);
        }
        b"CAT" => {
            let mut cats: Vec<&str> = COMMANDS.iter().flat_map(|c| c.categories.iter().copied()).collect();
            cats.sort_unstable();
            cats.dedup();
            let mut o = c.out();
            o.array(cats.len());
            for cat in cats {
                o.bulk(cat.as_bytes());
            }
        }
        _ => c.out().error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            printable(a.get(1))
        )),
    }
}

pub fn slowlog(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"LEN" => {
            let n = shared.slowlog().entries.len();
            c.out().int(n as i64);
        }
        b"RESET" => {
            shared.slowlog().entries.clear();
            c.out().ok();
        }
        b"GET" => {
            let n = if a.len() > 2 { parse_i64(a.get(2)).unwrap_or(10) } else { 10 };
            let log = shared.slowlog();
            let take = if n < 0 { log.entries.len() } else { (n as usize).min(log.entries.len()) };
            let entries: Vec<_> = log.entries.iter().take(take).cloned().collect();
            drop(log);
            let mut o = c.out();
            o.array(entries.len());
            for e in entries {
                o.array(6);
                o.int(e.id as i64);
                o.int(e.time as i64);
                o.int(e.usec as i64);
                o.array(e.args.len());
                for arg in &e.args {
                    o.bulk(arg);
                }
                o.bulk(e.addr.as_bytes());
                o.bulk(&e.name);
            }
        }
        _ => c.out().error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            printable(a.get(1))
        )),
    }
}

/// BGSAVE [SCHEDULE]: a checkpoint now instead of at the end of the
/// interval (Redis's RDB save is the nearest thing Redis has).
pub fn bgsave(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let schedule = match a.len() {
        1 => false,
        2 if a.get(1).eq_ignore_ascii_case(b"SCHEDULE") => true,
        _ => return c.out().error("ERR syntax error"),
    };
    let busy = shared.db.checkpoint_stats().in_progress;
    if busy && !schedule {
        return c.out().error("ERR Background save already in progress");
    }
    match shared.db.request_checkpoint() {
        Ok(()) if busy => c.out().simple("Background saving scheduled"),
        Ok(()) => c.out().simple("Background saving started"),
        Err(_) => c.out().error(&no_checkpoints(shared, "BGSAVE")),
    }
}

/// SAVE's and BGSAVE's error when the durability mode takes no checkpoints.
fn no_checkpoints(shared: &Shared, command: &str) -> String {
    let mode = shared.db.options().durability.name();
    format!("ERR --durability {mode} takes no checkpoints: {command} needs log+checkpoint or delta+checkpoint")
}

/// LASTSAVE: the Unix time the last checkpoint was installed, or the
/// server's start if none was since (as Redis counts its start).
fn lastsave_time(shared: &Shared) -> u64 {
    let installed = shared.db.checkpoint_stats().installed_at;
    let at = installed.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    at.map_or_else(|| (now_ms() / 1000).saturating_sub(shared.started.elapsed().as_secs()), |d| d.as_secs())
}

/// SAVE: a checkpoint begun now, and `+OK` once it is installed.
/// Unlike Redis's, only this client waits: the checkpoint is written in
/// the background while every other client is served.
pub fn save(x: &mut Call<'_>, _: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    if shared.is_replica() {
        // A replica checkpoints only once replay has something new.
        return c
            .out()
            .error("ERR SAVE is not possible on a replica: it checkpoints what it replays (BGSAVE asks for one)");
    }
    let stats = shared.db.checkpoint_stats();
    // One under way may have begun before this client's last write: wait
    // for the one after it.
    let installed = stats.installed + 1 + u64::from(stats.in_progress);
    if shared.db.request_checkpoint().is_err() {
        return c.out().error(&no_checkpoints(shared, "SAVE"));
    }
    c.blocked = Some(Blocked::Save { installed });
}

/// FLUSHALL [ASYNC|SYNC]: every database, one transaction.
pub fn flushall(x: &mut Call<'_>, a: &Args) {
    if a.len() > 2 || a.len() == 2 && !matches!(&a.get(1).to_ascii_uppercase()[..], b"SYNC" | b"ASYNC") {
        return x.client.out().error(SYNTAX);
    }
    let Call { shared, worker, scratch, idx, .. } = x;
    let mut tally = Tally::default();
    let r = worker.run_with_info(|txn| {
        scratch.clear();
        tally.clear();
        for &table in &shared.tables {
            clear_table(txn, table, &mut tally)?;
        }
        scratch.extend_from_slice(b"+OK\r\n");
        Ok(())
    });
    if let Ok((_, info)) = &r {
        shared.counts.apply(*idx, info.epoch, &tally);
    }
    x.finish(r.map(|((), info)| info.release_epoch), true);
}

//! Commands that run on the connection or the server rather than in a
//! transaction: connection state, transactions (MULTI/EXEC/WATCH), CLIENT,
//! COMMAND, CONFIG, INFO, ACL, SLOWLOG, WAIT and friends.

use crate::commands::Exec;
use crate::config::AppendFsync;
use crate::event_loop::{engine_error, printable, write_wait_reply, AckWait, Blocked, Client, EventLoop};
use crate::glob;
use crate::keyspace::{Db, Tally};
use crate::resp::{parse_i64, Args, Out};
use crate::shared::now_ms;
use crate::stats::{percentile, totals};
use crate::table::{lookup, Command, Run, COMMANDS};
use epochdb::Durability;
use mio::Token;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The Redis version we answer to (clients check it for features).
pub const REDIS_VERSION: &str = "7.0.0";

impl EventLoop {
    /// Runs a connection command; returns whether it failed.
    pub fn conn_command(&mut self, t: Token, cmd: &Command, a: &Args) -> bool {
        let name = cmd.name;
        match name {
            "multi" | "exec" | "discard" | "watch" | "unwatch" => return self.transaction(t, name, a),
            "flushall" => return self.flushall(t, a),
            "waitaof" => return self.waitaof(t, a),
            "wait" => return self.wait(t, a),
            "save" => return self.save(t),
            _ => {}
        }
        let shared = self.shared.clone();
        let keyspace = if name == "info" && info_wants(a, "keyspace") {
            if shared.counts.stale(shared.db.is_read_only()) {
                shared.counts.count_in_background(&shared.db);
            }
            shared.counts.get()
        } else {
            None
        };
        let Some(c) = self.client(t) else { return true };
        let before = c.out.len();
        match name {
            "ping" => match a.len() {
                1 => c.out().simple("PONG"),
                2 => c.out().bulk(a.get(1)),
                _ => c.out().error("ERR wrong number of arguments for 'ping' command"),
            },
            "echo" => c.out().bulk(a.get(1)),
            "time" => {
                let us =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
                let mut o = c.out();
                o.array(2);
                o.bulk((us / 1_000_000).to_string().as_bytes());
                o.bulk((us % 1_000_000).to_string().as_bytes());
            }
            "select" => match parse_i64(a.get(1)) {
                Some(n) if n >= 0 && (n as usize) < shared.tables.len() => {
                    c.db = n as usize;
                    c.info.db.store(c.db, Ordering::Relaxed);
                    c.out().ok();
                }
                Some(_) => c.out().error("ERR DB index is out of range"),
                None => c.out().error("ERR value is not an integer or out of range"),
            },
            "quit" => {
                c.out().ok();
                c.close_after_reply = true;
            }
            "reset" => {
                c.multi = None;
                c.multi_failed = false;
                c.watched.clear();
                c.db = 0;
                c.resp3 = false;
                c.info.name.lock().unwrap_or_else(|e| e.into_inner()).clear();
                let users = shared.users.lock().unwrap_or_else(|e| e.into_inner());
                match users.users.get("default") {
                    Some(d) if d.enabled && d.nopass => {
                        c.user = Some("default".into());
                        c.allowed = d.allowed.clone();
                    }
                    _ => c.user = None,
                }
                c.out().simple("RESET");
            }
            "auth" => {
                let (user, pass) = if a.len() == 2 {
                    ("default".to_string(), a.get(1))
                } else {
                    (String::from_utf8_lossy(a.get(1)).into_owned(), a.get(2))
                };
                if a.len() > 3 {
                    c.out().error("ERR syntax error");
                } else if !auth(c, &shared, &user, pass) {
                    let users = shared.users.lock().unwrap_or_else(|e| e.into_inner());
                    let default_open = users.users.get("default").is_some_and(|d| d.nopass);
                    if a.len() == 2 && default_open {
                        c.out().error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
                    } else {
                        c.out().error("WRONGPASS invalid username-password pair or user is disabled.");
                    }
                } else {
                    c.out().ok();
                }
            }
            "hello" => hello(c, &shared, a),
            "client" => client(c, &shared, a),
            "command" => command(c, a),
            "config" => config(c, &shared, a),
            "info" => {
                let text = info(&shared, a, keyspace);
                c.out().verbatim(&text);
            }
            "shutdown" => {
                let opt = a.iter_from(1).map(|o| o.to_ascii_uppercase()).collect::<Vec<_>>();
                if opt.iter().any(|o| o == b"ABORT") {
                    c.out().error("ERR No shutdown in progress.");
                } else {
                    ::log::info!("SHUTDOWN asked by client {}", c.info.addr);
                    shared.stop();
                    // As Redis: no reply; the connection closes.
                    c.close_after_reply = true;
                }
            }
            "role" => role(c, &shared),
            "replicaof" => replicaof(c, &shared, a),
            "epochdb.member" => member(c, &shared, a),
            "acl" => acl(c, &shared, a),
            "slowlog" => slowlog(c, &shared, a),
            "bgsave" => bgsave(c, &shared, a),
            "lastsave" => c.out().int(lastsave(&shared) as i64),
            _ => c.out().error(&format!("ERR unknown command '{name}'")),
        }
        c.out.get(before) == Some(&b'-')
    }

    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    fn transaction(&mut self, t: Token, name: &str, a: &Args) -> bool {
        let Some(c) = self.client(t) else { return true };
        match name {
            "multi" if c.multi.is_some() => {
                c.out().error("ERR MULTI calls can not be nested");
                return true;
            }
            "multi" => {
                c.multi = Some(Vec::new());
                c.multi_failed = false;
                c.out().ok();
                return false;
            }
            "discard" => {
                let ok = c.multi.take().is_some();
                c.watched.clear();
                if ok {
                    c.out().ok();
                } else {
                    c.out().error("ERR DISCARD without MULTI");
                }
                return !ok;
            }
            "unwatch" => {
                c.watched.clear();
                c.out().ok();
                return false;
            }
            "watch" if c.multi.is_some() => {
                c.out().error("ERR WATCH inside MULTI is not allowed");
                return true;
            }
            "watch" => {
                let db = c.db;
                let table = self.shared.tables[db];
                let now = now_ms();
                let keys: Vec<Vec<u8>> = a.iter_from(1).map(<[u8]>::to_vec).collect();
                let r = self.worker.run(|txn| {
                    let mut d = Db::new(table, now);
                    keys.iter().map(|k| d.version(txn, k)).collect::<epochdb::Result<Vec<_>>>()
                });
                let Some(c) = self.client(t) else { return true };
                return match r {
                    Ok(versions) => {
                        c.watched.extend(keys.into_iter().zip(versions).map(|(k, v)| (db, k, v)));
                        c.out().ok();
                        false
                    }
                    Err(e) => {
                        c.out().error(&engine_error(&e));
                        true
                    }
                };
            }
            _ => {}
        }
        // EXEC: the queued commands, and the WATCH checks, as one
        // serializable transaction.
        let Some(queued) = c.multi.take() else {
            c.out().error("ERR EXEC without MULTI");
            return true;
        };
        let watched = std::mem::take(&mut c.watched);
        if std::mem::take(&mut c.multi_failed) {
            c.out().error("EXECABORT Transaction discarded because of previous errors.");
            return true;
        }
        let start_db = c.db;
        let resp3 = c.resp3;
        let now = now_ms();
        let shared = self.shared.clone();
        let tables = &shared.tables;
        let max_value = shared.db.options().max_value_len;
        let write = queued.iter().any(|(i, _)| COMMANDS[*i].write);
        let mut final_db = start_db;
        let EventLoop { worker, scratch, clients, .. } = self;
        if !clients.contains_key(&t) {
            return true;
        }
        let cursors = &shared.cursors;
        let mut tally = Tally::default();
        let r = worker.run_with_info(|txn| {
            scratch.clear();
            tally.clear();
            for (db, key, version) in &watched {
                if Db::new(tables[*db], now).version(txn, key)? != *version {
                    Out { buf: scratch, resp3 }.null_array();
                    return Ok(());
                }
            }
            let mut db = start_db;
            Out { buf: scratch, resp3 }.array(queued.len());
            for (i, args) in &queued {
                let cmd = &COMMANDS[*i];
                match cmd.run {
                    Run::Data(f) => {
                        let mut x = Exec {
                            db: &mut Db::new(tables[db], now),
                            out: Out { buf: scratch, resp3 },
                            tables,
                            cursors,
                            max_value,
                        };
                        f(&mut x, txn, args)?;
                        tally.merge(&x.db.tally);
                    }
                    Run::Conn => {
                        let mut o = Out { buf: scratch, resp3 };
                        match cmd.name {
                            "select" => match parse_i64(args.get(1)) {
                                Some(n) if n >= 0 && (n as usize) < tables.len() => {
                                    db = n as usize;
                                    o.ok();
                                }
                                _ => o.error("ERR DB index is out of range"),
                            },
                            "ping" if args.len() == 2 => o.bulk(args.get(1)),
                            "ping" => o.simple("PONG"),
                            "echo" => o.bulk(args.get(1)),
                            _ => o.error("ERR not allowed in a transaction"),
                        }
                    }
                }
            }
            final_db = db;
            Ok(())
        });
        if let Ok((_, info)) = &r {
            self.shared.counts.apply(self.idx, info.epoch, &tally);
        }
        if let Some(c) = self.client(t) {
            c.db = final_db;
            c.info.db.store(final_db, Ordering::Relaxed);
        }
        self.finish(t, r.map(|((), info)| info.release_epoch), write)
    }

    /// DBSIZE outside MULTI: from INFO keyspace's counts, at once (as in
    /// Redis, whose DBSIZE is O(1)), where the scan would read every key
    /// into one transaction's read set. Like Redis's, the count includes
    /// expired keys not yet removed. Returns false, to scan after all, when
    /// there is no count (a replica, or a promoted one before its first).
    pub fn dbsize_from_counts(&mut self, t: Token) -> bool {
        if self.shared.db.is_read_only() {
            return false;
        }
        let Some(counts) = self.shared.counts.get() else { return false };
        let Some(c) = self.clients.get(&t) else { return true };
        self.scratch.clear();
        Out { buf: &mut self.scratch, resp3: c.resp3 }.int(counts[c.db][0]);
        // What it counted committed by the current epoch: with durable
        // replies, the reply waits for that, as a read's would.
        let epoch = self.shared.db.epoch();
        self.finish(t, Ok(epoch), false);
        true
    }

    /// FLUSHALL: every database, one transaction.
    fn flushall(&mut self, t: Token, a: &Args) -> bool {
        if a.len() > 2 || a.len() == 2 && !matches!(&a.get(1).to_ascii_uppercase()[..], b"SYNC" | b"ASYNC") {
            if let Some(c) = self.client(t) {
                c.out().error("ERR syntax error");
            }
            return true;
        }
        let tables = self.shared.tables.clone();
        let EventLoop { worker, scratch, .. } = self;
        let mut tally = Tally::default();
        let r = worker.run_with_info(|txn| {
            scratch.clear();
            tally.clear();
            for &table in &tables {
                crate::commands::clear_table(txn, table, &mut tally)?;
            }
            scratch.extend_from_slice(b"+OK\r\n");
            Ok(())
        });
        if let Ok((_, info)) = &r {
            self.shared.counts.apply(self.idx, info.epoch, &tally);
        }
        self.finish(t, r.map(|((), info)| info.release_epoch), true)
    }

    /// WAIT numreplicas timeout: how many backups have acknowledged (have
    /// on disk) this client's last write, once `numreplicas` have or
    /// `timeout` ms passed (0: no limit). The client's later commands wait
    /// behind it, as in Redis.
    fn wait(&mut self, t: Token, a: &Args) -> bool {
        let (Some(want), Some(timeout)) = (parse_i64(a.get(1)), parse_i64(a.get(2))) else {
            return self.reject(t, "ERR value is not an integer or out of range");
        };
        if is_replica(&self.shared) {
            return self.reject(t, "ERR WAIT cannot be used with replica instances.");
        }
        self.block(t, want, timeout, None)
    }

    /// WAITAOF numlocal numreplicas timeout: `[local, backups]` once this
    /// client's last write is durable here (if `numlocal` > 0) and on
    /// `numreplicas` backups (a backup acknowledges only what it synced to
    /// its own log), or `timeout` ms passed.
    fn waitaof(&mut self, t: Token, a: &Args) -> bool {
        let (Some(local), Some(want), Some(timeout)) = (parse_i64(a.get(1)), parse_i64(a.get(2)), parse_i64(a.get(3)))
        else {
            return self.reject(t, "ERR value is not an integer or out of range");
        };
        if local > 0 && self.durable_here().is_none() {
            return self.reject(t, "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
        }
        if want > 0 && is_replica(&self.shared) {
            return self.reject(t, "ERR WAITAOF cannot be used with numreplicas on replica instances.");
        }
        self.block(t, want, timeout, Some(local > 0))
    }

    /// SAVE: a checkpoint begun now, and `+OK` once it is installed.
    /// Unlike Redis's, only this client waits: the checkpoint is written
    /// in the background while every other client is served.
    fn save(&mut self, t: Token) -> bool {
        if is_replica(&self.shared) {
            // A replica checkpoints only once replay has something new.
            return self.reject(
                t,
                "ERR SAVE is not possible on a replica: it checkpoints what it replays (BGSAVE asks for one)",
            );
        }
        let db = &self.shared.db;
        let stats = db.checkpoint_stats();
        // One under way may have begun before this client's last write:
        // wait for the one after it.
        let installed = stats.installed + 1 + u64::from(stats.in_progress);
        if db.request_checkpoint().is_err() {
            return self.reject(t, &no_checkpoints(&self.shared, "SAVE"));
        }
        let Some(c) = self.client(t) else { return true };
        c.blocked = Some(Blocked::Save { installed });
        self.blocked.push(t);
        self.count_blocked();
        false
    }

    fn reject(&mut self, t: Token, error: &str) -> bool {
        if let Some(c) = self.client(t) {
            c.out().error(error);
        }
        true
    }

    /// WAIT and WAITAOF: answers at once if the wait is already over, else
    /// blocks the client until `unblock` answers it.
    fn block(&mut self, t: Token, want: i64, timeout: i64, local: Option<bool>) -> bool {
        if timeout < 0 {
            return self.reject(t, "ERR timeout is negative");
        }
        let (acked, durable, now) = (self.acknowledged(), self.durable_here(), Instant::now());
        let Some(c) = self.client(t) else { return true };
        let deadline = (timeout > 0).then(|| now + Duration::from_millis(timeout as u64));
        let b = AckWait { epoch: c.last_write_epoch, replicas: want.max(0) as usize, deadline, local };
        if let Some(reply) = b.answer(acked.as_deref(), durable, now) {
            write_wait_reply(&mut c.out(), reply);
            return false;
        }
        c.blocked = Some(Blocked::Acks(b));
        if local == Some(true) {
            self.shared.db.hasten_durable(b.epoch);
        }
        self.blocked.push(t);
        self.count_blocked();
        false
    }
}

/// Whether this server is a replica not yet promoted.
fn is_replica(shared: &crate::shared::Shared) -> bool {
    shared.backup.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// A replica's primary, as `(host, port)` from its replication address.
fn primary_of(b: &epochdb::Backup) -> (String, u16) {
    let primary = b.primary();
    let (host, port) = primary.rsplit_once(':').unwrap_or((&primary, "0"));
    (host.trim_start_matches('[').trim_end_matches(']').to_string(), port.parse().unwrap_or(0))
}

/// ROLE: a replica's primary and link, or a primary's backups; offsets
/// are epochs (a replica's: the epoch it persisted).
fn role(c: &mut Client, shared: &crate::shared::Shared) {
    let backup = shared.backup.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = c.out();
    match backup.as_ref() {
        Some(b) => {
            let (host, port) = primary_of(b);
            o.array(5);
            o.bulk(b"slave");
            o.bulk(host.as_bytes());
            o.int(port.into());
            o.bulk(if b.is_connected() { b"connected" } else { b"connect" });
            o.int(b.persisted_epoch() as i64);
        }
        _ => {
            drop(backup);
            let st = shared.db.replication_status();
            let backups = st.as_ref().map_or(&[][..], |s| &s.backups[..]);
            o.array(3);
            o.bulk(b"master");
            o.int(st.as_ref().map_or(0, |s| s.released) as i64);
            o.array(backups.len());
            for b in backups {
                o.array(3);
                o.bulk(b.addr.ip().to_string().as_bytes());
                o.bulk(b.addr.port().to_string().as_bytes());
                o.bulk(b.acked.to_string().as_bytes());
            }
        }
    }
}

/// REPLICAOF NO ONE promotes a replica in place; REPLICAOF HOST PORT
/// makes a replica follow another primary (one promoted after its own;
/// HOST:PORT is that primary's replication address). A primary becomes a
/// replica only by a restart (`--replicaof`), and under a control plane
/// the appointments decide both.
fn replicaof(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let (host, port) = (a.get(1), a.get(2));
    if !(host.eq_ignore_ascii_case(b"NO") && port.eq_ignore_ascii_case(b"ONE")) {
        return follow(c, shared, host, port);
    }
    if let Some(switchover) = &shared.config.switchover {
        // A planned switchover: the control plane appoints this node once
        // the primary has handed over (ROLE shows when).
        if !is_replica(shared) {
            c.out().ok(); // a primary already: nothing to do
            return;
        }
        match (switchover.0)() {
            Ok(()) => c.out().ok(),
            Err(e) => c.out().error(&format!("ERR switchover refused: {e}")),
        }
        return;
    }
    match shared.promote() {
        Ok(()) => c.out().ok(),
        Err(e) => c.out().error(&format!("ERR promotion failed: {e}")),
    }
}

/// REPLICAOF HOST PORT on a replica.
fn follow(c: &mut Client, shared: &crate::shared::Shared, host: &[u8], port: &[u8]) {
    if shared.config.switchover.is_some() {
        c.out().error("ERR this node follows the primary its control plane appoints");
        return;
    }
    let port = std::str::from_utf8(port).ok().and_then(|p| p.parse::<u16>().ok()).filter(|&p| p != 0);
    let (Ok(host), Some(port)) = (std::str::from_utf8(host), port) else {
        c.out().error("ERR Invalid master port");
        return;
    };
    let backup = shared.backup.lock().unwrap_or_else(|e| e.into_inner());
    let Some(b) = backup.as_ref() else {
        c.out().error(
            "ERR a primary becomes a replica only by a restart (epochdb serve --replicaof HOST:PORT, the primary's \
             --replicate-listen address)",
        );
        return;
    };
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    b.follow(addr);
    c.out().ok();
}

/// `EPOCHDB.MEMBER ADD id host:port` or `EPOCHDB.MEMBER REMOVE id`: asks
/// the control plane to change its voters, one at a time. The reply means
/// "asked"; `epochdb_voters` in INFO replication shows when it is done.
fn member(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let Some(members) = &shared.config.members else {
        c.out().error("ERR this server is not a node of a control plane (epochdb serve --node-id)");
        return;
    };
    let op = a.get(1).to_ascii_uppercase();
    let id = std::str::from_utf8(a.get(2)).ok().and_then(|s| s.parse::<u64>().ok());
    let change = match (&op[..], id, a.len()) {
        (b"ADD", Some(id), 4) => std::str::from_utf8(a.get(3)).ok().map(|addr| (id, Some(addr.to_string()))),
        (b"REMOVE", Some(id), 3) => Some((id, None)),
        _ => None,
    };
    let Some((id, addr)) = change else {
        c.out().error("ERR syntax: EPOCHDB.MEMBER ADD <node id> <host:port> | EPOCHDB.MEMBER REMOVE <node id>");
        return;
    };
    match (members.0)(id, addr) {
        Ok(()) => c.out().ok(),
        Err(e) => c.out().error(&format!("ERR {e}")),
    }
}

fn auth(c: &mut Client, shared: &crate::shared::Shared, user: &str, pass: &[u8]) -> bool {
    let users = shared.users.lock().unwrap_or_else(|e| e.into_inner());
    match users.users.get(user) {
        Some(u) if u.accepts(pass) => {
            c.user = Some(user.to_string());
            c.allowed = u.allowed.clone();
            *c.info.user.lock().unwrap_or_else(|e| e.into_inner()) = user.to_string();
            true
        }
        _ => false,
    }
}

fn hello(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let mut proto = if c.resp3 { 3 } else { 2 };
    let mut i = 1;
    if a.len() > 1 {
        match parse_i64(a.get(1)) {
            Some(p @ (2 | 3)) => proto = p,
            Some(_) => return c.out().error("NOPROTO unsupported protocol version"),
            None => return c.out().error("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    while i < a.len() {
        let opt = a.get(i).to_ascii_uppercase();
        match &opt[..] {
            b"AUTH" if i + 2 < a.len() => {
                let user = String::from_utf8_lossy(a.get(i + 1)).into_owned();
                if !auth(c, shared, &user, a.get(i + 2)) {
                    return c.out().error("WRONGPASS invalid username-password pair or user is disabled.");
                }
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                *c.info.name.lock().unwrap_or_else(|e| e.into_inner()) = a.get(i + 1).to_vec();
                i += 2;
            }
            _ => return c.out().error(&format!("ERR Syntax error in HELLO option '{}'", printable(a.get(i)))),
        }
    }
    if c.user.is_none() {
        return c.out().error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    c.resp3 = proto == 3;
    let id = c.info.id;
    let mut o = c.out();
    o.map(7);
    o.bulk(b"server");
    o.bulk(b"redis");
    o.bulk(b"version");
    o.bulk(REDIS_VERSION.as_bytes());
    o.bulk(b"proto");
    o.int(proto);
    o.bulk(b"id");
    o.int(id as i64);
    o.bulk(b"mode");
    o.bulk(b"standalone");
    o.bulk(b"role");
    o.bulk(if is_replica(shared) { b"replica" } else { b"master" });
    o.bulk(b"modules");
    o.array(0);
}

/// INFO replication of a replica: Redis's fields (offsets are epochs),
/// then the standby's epochs, lag and staleness.
fn replica_info(out: &mut String, shared: &crate::shared::Shared, b: &epochdb::Backup, host: &str, port: u16) {
    let (term, term_start) = shared.db.term();
    let st = b.status();
    let staleness = st.staleness.map_or(-1, |d| d.as_millis() as i64);
    let _ = write!(
        out,
        "# Replication\r\nrole:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\nmaster_repl_offset:{}\r\n",
        if st.connected { "up" } else { "down" },
        if staleness < 0 { -1 } else { staleness / 1000 },
        u8::from(st.view == 0),
        st.persisted,
        st.view,
        st.persisted,
    );
    let _ = write!(
        out,
        "epochdb_term:{term}\r\nepochdb_term_start_epoch:{term_start}\r\nepochdb_persisted_epoch:{}\r\nepochdb_released_epoch:{}\r\nepochdb_read_view:{}\r\nepochdb_view_lag_epochs:{}\r\nepochdb_staleness_ms:{staleness}\r\nepochdb_pending_bytes:{}\r\nepochdb_log_pending_bytes:{}\r\nepochdb_replay_error:{}\r\n",
        st.persisted,
        st.released,
        st.view,
        st.released.saturating_sub(st.view),
        st.pending_bytes,
        st.log_pending_bytes,
        st.replay_error.as_deref().unwrap_or(""),
    );
}

/// INFO replication of a primary: its backups, if it has any.
fn primary_info(out: &mut String, shared: &crate::shared::Shared) {
    let (term, term_start) = shared.db.term();
    let _ =
        write!(out, "# Replication\r\nrole:master\r\nepochdb_term:{term}\r\nepochdb_term_start_epoch:{term_start}\r\n");
    if let Some(kept) = shared.db.promotion_kept() {
        let _ = write!(out, "epochdb_promotion_kept_epoch:{kept}\r\n");
    }
    match shared.db.replication_status() {
        None => out.push_str("connected_slaves:0\r\nmaster_repl_offset:0\r\n"),
        Some(st) => {
            // Redis's fields, with epochs for offsets, then ours.
            let _ = write!(out, "connected_slaves:{}\r\n", st.backups.len());
            for (i, b) in st.backups.iter().enumerate() {
                let state = if b.in_sync { "online" } else { "catching_up" };
                let _ = write!(
                    out,
                    "slave{i}:ip={},port={},state={state},offset={},lag={}\r\n",
                    b.addr.ip(),
                    b.addr.port(),
                    b.acked,
                    b.since_ack.as_secs()
                );
                let _ = write!(
                    out,
                    "epochdb_backup{i}:node={},acked_epoch={},replayed_epoch={},lag_epochs={},replay_lag_epochs={},ack_age_ms={},queued_bytes={}\r\n",
                    b.node,
                    b.acked,
                    b.replayed,
                    st.local.saturating_sub(b.acked),
                    st.released.saturating_sub(b.replayed),
                    b.since_ack.as_millis(),
                    b.queued_bytes
                );
            }
            let _ = write!(
                out,
                "master_repl_offset:{}\r\nepochdb_safety:{:?}\r\nepochdb_released_epoch:{}\r\nepochdb_local_pepoch:{}\r\nepochdb_replication_listen:{}\r\n",
                st.local, st.safety, st.released, st.local, st.listen
            );
        }
    }
}

fn client_line(info: &crate::shared::ClientInfo, now: std::time::Instant) -> String {
    let name = String::from_utf8_lossy(&info.name.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    let cmd = match info.last_cmd.load(Ordering::Relaxed) {
        0 => "NULL",
        i => COMMANDS[i - 1].name,
    };
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle=0 flags=N db={} sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp=2 thread={}\n",
        info.id,
        info.addr,
        info.laddr,
        name,
        now.duration_since(info.created).as_secs(),
        info.db.load(Ordering::Relaxed),
        cmd,
        info.user.lock().unwrap_or_else(|e| e.into_inner()),
        info.thread,
    )
}

fn client(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    let now = std::time::Instant::now();
    match (&sub[..], a.len()) {
        (b"SETNAME", 3) => {
            if a.get(2).iter().any(|&b| b <= b' ' || b > b'~') {
                return c.out().error("ERR Client names cannot contain spaces, newlines or special characters.");
            }
            *c.info.name.lock().unwrap_or_else(|e| e.into_inner()) = a.get(2).to_vec();
            c.out().ok();
        }
        (b"GETNAME", 2) => {
            let name = c.info.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
            c.out().opt_bulk((!name.is_empty()).then_some(&name[..]));
        }
        (b"ID", 2) => {
            let id = c.info.id as i64;
            c.out().int(id);
        }
        (b"INFO", 2) => {
            let line = client_line(&c.info, now);
            c.out().verbatim(&line);
        }
        (b"LIST", _) => {
            let clients = shared.clients.lock().unwrap_or_else(|e| e.into_inner());
            let mut ids: Vec<_> = clients.keys().copied().collect();
            ids.sort_unstable();
            let text: String = ids.iter().map(|id| client_line(&clients[id], now)).collect();
            drop(clients);
            c.out().verbatim(&text);
        }
        (b"KILL", n) if n >= 3 => {
            let clients = shared.clients.lock().unwrap_or_else(|e| e.into_inner());
            let mut killed = 0;
            if n == 3 {
                // The old form: CLIENT KILL addr:port.
                let addr = String::from_utf8_lossy(a.get(2));
                for info in clients.values().filter(|i| i.addr.to_string() == addr) {
                    info.kill.store(true, Ordering::Release);
                    killed += 1;
                }
                drop(clients);
                shared.wake_all();
                return if killed > 0 { c.out().ok() } else { c.out().error("ERR No such client") };
            }
            let mut i = 2;
            let mut filters = Vec::new();
            while i + 1 < n {
                filters.push((a.get(i).to_ascii_uppercase(), String::from_utf8_lossy(a.get(i + 1)).into_owned()));
                i += 2;
            }
            if i != n {
                return c.out().error("ERR syntax error");
            }
            for info in clients.values() {
                let hit = filters.iter().all(|(k, v)| match &k[..] {
                    b"ID" => info.id.to_string() == *v,
                    b"ADDR" => info.addr.to_string() == *v,
                    b"LADDR" => info.laddr.to_string() == *v,
                    b"USER" => *info.user.lock().unwrap_or_else(|e| e.into_inner()) == *v,
                    b"SKIPME" => v.eq_ignore_ascii_case("no") || info.id != c.info.id,
                    _ => false,
                });
                if hit
                    && (info.id != c.info.id
                        || filters.iter().any(|(k, v)| k == b"SKIPME" && v.eq_ignore_ascii_case("no")))
                {
                    info.kill.store(true, Ordering::Release);
                    killed += 1;
                }
            }
            drop(clients);
            shared.wake_all();
            c.out().int(killed);
        }
        (b"SETINFO", 4) | (b"NO-EVICT", 3) | (b"NO-TOUCH", 3) => c.out().ok(),
        _ => c.out().error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            printable(a.get(1))
        )),
    }
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

fn command(c: &mut Client, a: &Args) {
    let mut o = c.out();
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

/// CONFIG GET's parameters and their current values.
fn config_values(shared: &crate::shared::Shared) -> Vec<(&'static str, String)> {
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
    vec![
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
        ("slowlog-max-len", shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).max_len.to_string()),
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
    ]
}

/// BGSAVE [SCHEDULE]: a checkpoint now instead of at the end of the
/// interval (Redis's RDB save is the nearest thing Redis has).
fn bgsave(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
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
fn no_checkpoints(shared: &crate::shared::Shared, command: &str) -> String {
    let mode = shared.db.options().durability.name();
    format!("ERR --durability {mode} takes no checkpoints: {command} needs log+checkpoint or delta+checkpoint")
}

/// LASTSAVE: the Unix time the last checkpoint was installed, or the
/// server's start if none was since (as Redis counts its start).
fn lastsave(shared: &crate::shared::Shared) -> u64 {
    let installed = shared.db.checkpoint_stats().installed_at;
    let at = installed.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    at.map_or_else(|| (now_ms() / 1000).saturating_sub(shared.started.elapsed().as_secs()), |d| d.as_secs())
}

fn config(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
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
    /// The value the server has already: nothing to do.
    Unchanged,
}

/// Checks `name value`: the change it makes, or the error that says why
/// it cannot take effect (never an OK that changes nothing).
fn config_change(shared: &crate::shared::Shared, name: &str, v: &[u8]) -> Result<Change, String> {
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
        _ => return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")),
    })
}

fn apply_config(shared: &crate::shared::Shared, change: Change) {
    let set = &shared.settings;
    match change {
        Change::AppendFsync(a) => shared.set_appendfsync(a),
        Change::RequirePass(p) => {
            shared.users.lock().unwrap_or_else(|e| e.into_inner()).set_requirepass(&p);
            shared.acl_generation.fetch_add(1, Ordering::AcqRel);
        }
        Change::MaxClients(n) => set.maxclients.store(n, Ordering::Relaxed),
        Change::MaxMemory(n) => set.maxmemory.store(n, Ordering::Relaxed),
        Change::SlowlogSlowerThan(n) => set.slowlog_slower_than.store(n, Ordering::Relaxed),
        Change::SlowlogMaxLen(n) => shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).max_len = n,
        Change::ProtoMaxBulkLen(n) => set.max_bulk.store(n, Ordering::Relaxed),
        Change::QueryBufferLimit(n) => set.query_buffer_limit.store(n, Ordering::Relaxed),
        Change::ProtectedMode(on) => set.protected_mode.store(on, Ordering::Relaxed),
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
pub fn info(shared: &crate::shared::Shared, a: &Args, keyspace: Option<Vec<crate::counts::Pair>>) -> String {
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
            lastsave(shared),
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
        let backup = shared.backup.lock().unwrap_or_else(|e| e.into_inner());
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

fn acl(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"WHOAMI" => {
            let u = c.user.clone().unwrap_or_else(|| "default".into());
            c.out().bulk(u.as_bytes());
        }
        b"USERS" => {
            let names: Vec<String> =
                shared.users.lock().unwrap_or_else(|e| e.into_inner()).users.keys().cloned().collect();
            let mut o = c.out();
            o.array(names.len());
            for n in names {
                o.bulk(n.as_bytes());
            }
        }
        b"LIST" => {
            let lines: Vec<String> = shared
                .users
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .users
                .iter()
                .map(|(n, u)| u.describe(n))
                .collect();
            let mut o = c.out();
            o.array(lines.len());
            for l in lines {
                o.bulk(l.as_bytes());
            }
        }
        b"SETUSER" if a.len() >= 3 => {
            let name = String::from_utf8_lossy(a.get(2)).into_owned();
            let rules: Vec<&[u8]> = a.iter_from(3).collect();
            let r = shared.users.lock().unwrap_or_else(|e| e.into_inner()).set_user(&name, &rules);
            shared.acl_generation.fetch_add(1, Ordering::AcqRel);
            match r {
                Ok(()) => c.out().ok(),
                Err(e) => c.out().error(&e),
            }
        }
        b"DELUSER" if a.len() >= 3 => {
            let mut users = shared.users.lock().unwrap_or_else(|e| e.into_inner());
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
            shared.acl_generation.fetch_add(1, Ordering::AcqRel);
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

fn slowlog(c: &mut Client, shared: &crate::shared::Shared, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    match &sub[..] {
        b"LEN" => {
            let n = shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).entries.len();
            c.out().int(n as i64);
        }
        b"RESET" => {
            shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).entries.clear();
            c.out().ok();
        }
        b"GET" => {
            let n = if a.len() > 2 { parse_i64(a.get(2)).unwrap_or(10) } else { 10 };
            let log = shared.slowlog.lock().unwrap_or_else(|e| e.into_inner());
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

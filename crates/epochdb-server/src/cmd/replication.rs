//! Replication: ROLE, REPLICAOF, WAIT, WAITAOF, `EPOCHDB.MEMBER`, and
//! INFO replication's sections.

use super::NOT_INT;
use crate::client::{AckWait, Blocked, Client};
use crate::command::Call;
use crate::resp::{parse_i64, Args, Out};
use crate::shared::Shared;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// ROLE: a replica's primary and link, or a primary's backups; offsets
/// are epochs (a replica's: the epoch it persisted).
pub fn role(x: &mut Call<'_>, _: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let backup = shared.backup();
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
pub fn replicaof(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let (host, port) = (a.get(1), a.get(2));
    if !(host.eq_ignore_ascii_case(b"NO") && port.eq_ignore_ascii_case(b"ONE")) {
        return follow(c, shared, host, port);
    }
    if let Some(switchover) = &shared.config.switchover {
        // A planned switchover: the control plane appoints this node once
        // the primary has handed over (ROLE shows when).
        if !shared.is_replica() {
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
fn follow(c: &mut Client, shared: &Shared, host: &[u8], port: &[u8]) {
    if shared.config.switchover.is_some() {
        c.out().error("ERR this node follows the primary its control plane appoints");
        return;
    }
    let port = std::str::from_utf8(port).ok().and_then(|p| p.parse::<u16>().ok()).filter(|&p| p != 0);
    let (Ok(host), Some(port)) = (std::str::from_utf8(host), port) else {
        c.out().error("ERR Invalid master port");
        return;
    };
    let backup = shared.backup();
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
pub fn member(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
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

/// WAIT numreplicas timeout: how many backups have acknowledged (have
/// on disk) this client's last write, once `numreplicas` have or
/// `timeout` ms passed (0: no limit). The client's later commands wait
/// behind it, as in Redis.
pub fn wait(x: &mut Call<'_>, a: &Args) {
    let (Some(want), Some(timeout)) = (parse_i64(a.get(1)), parse_i64(a.get(2))) else {
        return x.client.out().error(NOT_INT);
    };
    if x.shared.is_replica() {
        return x.client.out().error("ERR WAIT cannot be used with replica instances.");
    }
    block(x, want, timeout, None);
}

/// WAITAOF numlocal numreplicas timeout: `[local, backups]` once this
/// client's last write is durable here (if `numlocal` > 0) and on
/// `numreplicas` backups (a backup acknowledges only what it synced to
/// its own log), or `timeout` ms passed.
pub fn waitaof(x: &mut Call<'_>, a: &Args) {
    let (Some(local), Some(want), Some(timeout)) = (parse_i64(a.get(1)), parse_i64(a.get(2)), parse_i64(a.get(3)))
    else {
        return x.client.out().error(NOT_INT);
    };
    if local > 0 && durable_here(x.shared).is_none() {
        return x.client.out().error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    }
    if want > 0 && x.shared.is_replica() {
        return x.client.out().error("ERR WAITAOF cannot be used with numreplicas on replica instances.");
    }
    block(x, want, timeout, Some(local > 0));
}

/// WAIT and WAITAOF: answers at once if the wait is already over, else
/// blocks the client until its loop answers it.
fn block(x: &mut Call<'_>, want: i64, timeout: i64, local: Option<bool>) {
    if timeout < 0 {
        return x.client.out().error("ERR timeout is negative");
    }
    let (acked, durable, now) = (acknowledged(x.shared), durable_here(x.shared), Instant::now());
    let c = &mut *x.client;
    let deadline = (timeout > 0).then(|| now + Duration::from_millis(timeout as u64));
    let b = AckWait { epoch: c.last_write_epoch, replicas: want.max(0) as usize, deadline, local };
    if let Some(reply) = b.answer(acked.as_deref(), durable, now) {
        return write_wait_reply(&mut c.out(), reply);
    }
    c.blocked = Some(Blocked::Acks(b));
    if local == Some(true) {
        x.shared.db.hasten_durable(b.epoch);
    }
}

/// WAIT's reply (the backups that acknowledged), or WAITAOF's (`[local,
/// backups]`: whether it is durable here, and on how many backups).
pub fn write_wait_reply(o: &mut Out<'_>, (local, backups): (Option<i64>, i64)) {
    if let Some(local) = local {
        o.array(2);
        o.int(local);
    }
    o.int(backups);
}

/// The epoch durable on this server's own disk; `None` without logging.
pub fn durable_here(shared: &Shared) -> Option<u64> {
    (shared.db.options().durability != epochdb::Durability::Off).then(|| shared.db.durable_epoch())
}

/// The epoch each connected backup has acknowledged; `None` if this is no
/// replication primary.
pub fn acknowledged(shared: &Shared) -> Option<Vec<u64>> {
    let st = shared.db.replication_status()?;
    Some(st.backups.iter().map(|b| b.acked).collect())
}

/// A replica's primary, as `(host, port)` from its replication address.
pub fn primary_of(b: &epochdb::Backup) -> (String, u16) {
    let primary = b.primary();
    let (host, port) = primary.rsplit_once(':').unwrap_or((&primary, "0"));
    (host.trim_start_matches('[').trim_end_matches(']').to_string(), port.parse().unwrap_or(0))
}

/// INFO replication of a replica: Redis's fields (offsets are epochs),
/// then the standby's epochs, lag and staleness.
pub fn replica_info(out: &mut String, shared: &Shared, b: &epochdb::Backup, host: &str, port: u16) {
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
pub fn primary_info(out: &mut String, shared: &Shared) {
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

//! `epochdb serve --node-id` and `epochdb witness`: nodes of a control
//! plane (`epochdb-control`, Raft) that appoints the primary.
//!
//! A data node waits until the group has appointed a primary, then serves
//! as it (under the control plane's lease) or as a replica of it. A
//! watcher thread follows the appointments: an appointed replica promotes
//! itself in place; a replica whose primary moved follows the new one in
//! place; a primary that learns another was appointed exits with status
//! 3 (its lease has already lapsed, so it released nothing the new
//! primary lacks), and when restarted it rejoins as a backup, with the
//! data of its own term set aside (it may hold epochs the new primary
//! never received). `EPOCHDB.MEMBER` asks the group to add or remove a
//! voter.

use crate::args::{failed, CliResult};
use clap::Args;
use epochdb::Database;
use epochdb_control::{Config as NodeConfig, Node, View};
use epochdb_server::{Config, InfoLines, Members, ReplicaOf, Server, Switchover};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit status of a node that learned it is no longer the primary (or
/// that it diverged): restart it, and it rejoins as a backup.
pub const EXIT_DEPOSED: u8 = 3;

/// The control-plane options of `epochdb serve`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// Be a node of a control plane (a Raft group of data nodes and witnesses) that appoints the primary and
    /// fences the others; this node's id (unique, not 0). Needs --control-listen, --control-peer and
    /// --replicate-listen (a concrete address the other nodes reach)
    #[arg(long, value_name = "ID", requires_all = ["control_listen", "replicate_listen"], conflicts_with = "replicaof")]
    pub node_id: Option<u64>,
    /// Where the other control-plane nodes reach this one
    #[arg(long, value_name = "ADDR", requires = "node_id")]
    pub control_listen: Option<SocketAddr>,
    /// Another voter, ID=HOST:PORT (its --control-listen); repeat for every other node, witnesses included
    #[arg(long = "control-peer", value_name = "ID=HOST:PORT", value_parser = peer, requires = "node_id")]
    pub control_peers: Vec<(u64, String)>,
    /// Where this node keeps its Raft log [default: DATA-DIR.control, beside the data directory]
    #[arg(long, value_name = "DIR", requires = "node_id")]
    pub control_dir: Option<PathBuf>,
    /// Join a running group as a new voter: --control-peer names every current voter, and `epochdb member add`
    /// on one of them adds this node (ignored once this node's control directory holds a log)
    #[arg(long, requires = "node_id")]
    pub join: bool,
}

/// A control-plane voter that holds no data, so two machines can keep a
/// quorum: run it on a third (small) machine
#[derive(Debug, Args)]
pub struct WitnessArgs {
    /// This node's id (unique, not 0)
    #[arg(long, value_name = "ID")]
    pub node_id: u64,
    /// Where the other nodes reach this one
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Another voter, ID=HOST:PORT; repeat for every other node
    #[arg(long = "peer", value_name = "ID=HOST:PORT", value_parser = peer, required = true)]
    pub peers: Vec<(u64, String)>,
    /// Where it keeps its Raft log
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Join a running group as a new voter (see `serve --join`)
    #[arg(long)]
    pub join: bool,
    /// The nodes' shared secret (required beyond loopback); prefer the environment variable
    #[arg(long, value_name = "SECRET", env = "EPOCHDB_REPLICATION_SECRET", hide_env_values = true)]
    pub replication_secret: Option<String>,
}

fn peer(s: &str) -> Result<(u64, String), String> {
    let (id, addr) = s.split_once('=').ok_or("expected ID=HOST:PORT")?;
    let id: u64 = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    if id == 0 || !addr.contains(':') {
        return Err("expected ID=HOST:PORT with an id above 0".into());
    }
    Ok((id, addr.to_string()))
}

fn peers(list: Vec<(u64, String)>) -> CliResult<BTreeMap<u64, String>> {
    let n = list.len();
    let map: BTreeMap<u64, String> = list.into_iter().collect();
    if map.len() != n {
        return Err("a --control-peer id is given twice".into());
    }
    Ok(map)
}

/// Serves `config` as node `id` of the control plane.
pub fn serve(
    n: NodeArgs,
    mut config: Config,
    secret: Option<String>,
    stop: crate::signals::Stop,
) -> CliResult<ExitCode> {
    let id = n.node_id.ok_or("--node-id is required")?;
    let data = config.options.data_dir.clone().ok_or("a control-plane node needs --durability other than off")?;
    if !config.options.log.dirs.is_empty() {
        return Err("a control-plane node keeps its logs in its data directory (no --log-dir): a deposed \
                    primary sets the whole directory aside when it rejoins"
            .into());
    }
    let replicate = config.options.primary.as_ref().map(|p| p.listen).ok_or("--replicate-listen is required")?;
    if replicate.port() == 0 || replicate.ip().is_unspecified() {
        return Err(format!(
            "--replicate-listen {replicate}: give the address and port the other nodes reach, as they are told it"
        )
        .into());
    }
    let control = control_dir(&n, &data);
    let mut cfg = NodeConfig::new(id, n.control_listen.ok_or("--control-listen is required")?, control.clone());
    cfg.peers = peers(n.control_peers)?;
    cfg.secret = secret.clone();
    cfg.join = n.join;
    cfg.replicate_addr = replicate.to_string();
    let node = Arc::new(Node::start(cfg).map_err(failed)?);
    crate::say!("epochdb serve: control node {id} on {}; waiting for the group to appoint a primary", node.addr());
    let mut v = node.view();
    // Its own copy of the state may be stale (a deposed primary restarting
    // would take itself for the primary): wait until it is current.
    while v.cluster.primary == 0 || !v.current {
        let seen = v.version;
        v = node.wait_change(seen, Duration::from_secs(5));
        if v.version == seen {
            ::log::info!(
                "control: no primary yet (leader {}, term {}): are the other nodes up?",
                v.leader,
                v.raft_term
            );
        }
    }
    config.control_info = Some(info_lines(node.clone()));
    let n = node.clone();
    config.switchover = Some(Switchover(Arc::new(move || n.request_handover())));
    let n = node.clone();
    config.members = Some(Members(Arc::new(move |id, addr| match addr {
        Some(addr) => n.add_member(id, &addr),
        None => n.remove_member(id),
    })));
    config.options.lease = Some(node.lease());
    if let Some(p) = config.options.primary.as_mut() {
        p.membership = Some(node.membership());
    }
    if !v.is_primary() {
        if v.served != 0 {
            set_aside(&config.options, &data, &format!("deposed-{}", v.served))?;
            node.forget_served();
        }
        let marker = control.join(DIVERGED_MARKER);
        if marker.exists() {
            // Refused as diverged, and out of the in-sync set since (see `watch`).
            set_aside(&config.options, &data, &format!("diverged-{}", v.cluster.appointment))?;
            std::fs::remove_file(&marker).map_err(|e| failed(format!("remove {}: {e}", marker.display())))?;
        }
        let primary = v.cluster.primary_addr.clone();
        config.replicaof = Some(ReplicaOf { secret, node: id, ..ReplicaOf::new(primary) });
    }
    let server = Server::start(config).map_err(|e| failed(e.to_string()))?;
    crate::say!(
        "epochdb serve: listening on {} as {} (appointment {})",
        server.local_addr(),
        describe(&v),
        v.cluster.appointment
    );
    // Until here (waiting for an appointment, recovering) a signal ended
    // the process at once.
    let stopper = server.stopper();
    stop.arm(move || stopper.stop());
    let promoter = server.promoter();
    let following = v.cluster.primary_addr.clone();
    let db = server.database().clone();
    let watcher = std::thread::Builder::new()
        .name("epochdb-appointments".into())
        .spawn(move || watch(&node, v, &promoter, &db, following, &control))
        .map_err(|e| failed(format!("start the appointment watcher: {e}")))?;
    server.wait();
    // The watcher holds the database: once it has seen the stop and let it
    // go, the database closes here, with its loggers' final flush, not at
    // the process's exit, which would skip it.
    let _ = watcher.join();
    Ok(ExitCode::SUCCESS)
}

/// The control plane's fields of `INFO replication`.
fn info_lines(node: Arc<Node>) -> InfoLines {
    InfoLines(Arc::new(move || {
        let v = node.view();
        let ids = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        format!(
            "epochdb_node_id:{}\r\nepochdb_primary_node:{}\r\nepochdb_appointment:{}\r\nepochdb_in_sync_nodes:{}\r\nepochdb_voters:{}\r\nepochdb_raft_leader:{}\r\nepochdb_raft_term:{}\r\nepochdb_lease_valid:{}\r\n",
            v.me,
            v.cluster.primary,
            v.cluster.appointment,
            ids(&v.cluster.in_sync),
            ids(&v.voters),
            v.leader,
            v.raft_term,
            u8::from(node.lease().is_valid()),
        )
    }))
}

fn describe(v: &View) -> String {
    if v.is_primary() {
        "the primary".into()
    } else {
        format!("a replica of node {} ({})", v.cluster.primary, v.cluster.primary_addr)
    }
}

fn control_dir(n: &NodeArgs, data: &Path) -> PathBuf {
    n.control_dir.clone().unwrap_or_else(|| {
        let mut name = data.file_name().unwrap_or_default().to_os_string();
        name.push(".control");
        data.with_file_name(name)
    })
}

/// In the control directory: this replica was refused as diverged and
/// left the in-sync set; its data directory is set aside at its next start.
const DIVERGED_MARKER: &str = "set-aside-data";

/// Moves a deposed primary's (or a diverged replica's) data directory
/// aside (kept, never deleted: its unreplicated tail is evidence), so it
/// rejoins as a new backup. `epochdb::set_aside` checks the directory is
/// epochdb's and holds its lock while it moves.
fn set_aside(options: &epochdb::Options, data: &Path, why: &str) -> CliResult<()> {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    name.push(format!(".{why}-{secs}"));
    let aside = data.with_file_name(name);
    let moved = epochdb::set_aside(options, &aside)
        .map_err(|e| failed(format!("set aside {} as {}: {e}", data.display(), aside.display())))?;
    if moved {
        ::log::warn!(
            "this node's data ({why}) may hold epochs the primary lacks: it is now {}; it rejoins as a new backup",
            aside.display()
        );
    }
    Ok(())
}

/// Follows the appointments until the server stops.
fn watch(
    node: &Node,
    mut v: View,
    promoter: &epochdb_server::Promoter,
    db: &Database,
    mut following: String,
    control: &Path,
) {
    let mut told = false;
    loop {
        v = node.wait_change(v.version, Duration::from_millis(200));
        if promoter.is_stopped() {
            return;
        }
        if let Some(why) = promoter.replica_diverged().filter(|_| !v.is_primary()) {
            // Its directory may be set aside only once the control plane
            // no longer counts it in sync: until then it may be appointed
            // (and then promotes below, with what it was counted in sync
            // for).
            if v.cluster.in_sync.contains(&v.me) {
                if !told {
                    ::log::error!("control: refused as diverged ({why}); waiting to leave the in-sync set");
                    told = true;
                }
                continue;
            } else {
                let marker = control.join(DIVERGED_MARKER);
                if let Err(e) = std::fs::write(&marker, why.as_bytes()) {
                    ::log::error!("control: write {}: {e}", marker.display());
                }
                ::log::error!(
                    "control: refused as diverged ({why}): exiting; restarted, this node sets its data directory \
                     aside and rejoins as a new backup"
                );
                std::process::exit(i32::from(EXIT_DEPOSED));
            }
        }
        if v.cluster.primary == 0 {
            continue;
        }
        let replica = promoter.is_replica();
        if v.is_primary() && !replica && v.cluster.handover != 0 {
            hand_over(node, db, v.cluster.handover);
        } else if v.is_primary() && replica {
            ::log::info!("control: appointed primary (appointment {}): promoting", v.cluster.appointment);
            if let Err(e) = promoter.promote() {
                ::log::error!("control: promotion failed: {e}");
                std::process::exit(1);
            }
        } else if !v.is_primary() && replica && v.cluster.primary_addr != following {
            following = v.cluster.primary_addr.clone();
            ::log::info!(
                "control: node {} is the primary now (appointment {}): following it at {following}",
                v.cluster.primary,
                v.cluster.appointment
            );
            promoter.follow(&following);
        } else if !v.is_primary() && !replica {
            ::log::error!(
                "control: node {} is the primary now (appointment {}); this node, the primary, was deposed: \
                 exiting, restart it to rejoin as a backup",
                v.cluster.primary,
                v.cluster.appointment
            );
            std::process::exit(i32::from(EXIT_DEPOSED));
        }
    }
}

/// A planned switchover to `to`, on the primary: stop releasing, wait
/// until `to` has persisted everything released, and hand it the Raft
/// leadership; it is then elected and appointed, and this node, deposed,
/// exits. Nothing released is lost in any safety mode (what was committed
/// here and not released had no reply, and `to` keeps whatever of it it
/// persisted). If `to` does not catch up or take over in time, the
/// switchover is cancelled and releases go on.
fn hand_over(node: &Node, db: &Database, to: u64) {
    ::log::info!("control: switchover to node {to}: releases stop until it has everything released");
    node.suspend_lease();
    // Final while the lease is suspended (a release that checked the lease
    // just before has stored its epoch).
    let released = db.durable_epoch_settled();
    let deadline = Instant::now() + Duration::from_secs(10);
    let caught_up =
        || db.replication_status().is_some_and(|st| st.backups.iter().any(|b| b.node == to && b.acked >= released));
    while !caught_up() {
        if Instant::now() >= deadline {
            ::log::error!(
                "control: switchover to node {to} cancelled: it did not persist epoch {released} within 10 s"
            );
            node.cancel_handover();
            node.resume_lease();
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    node.transfer(to);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut v = node.view();
    while v.is_primary() {
        if Instant::now() >= deadline {
            ::log::error!("control: switchover to node {to} cancelled: it did not take the leadership within 5 s");
            node.cancel_handover();
            node.resume_lease();
            return;
        }
        v = node.wait_change(v.version, Duration::from_millis(50));
    }
}

/// Runs a witness until killed.
pub fn witness(a: WitnessArgs) -> CliResult<ExitCode> {
    let mut cfg = NodeConfig::new(a.node_id, a.listen, a.dir);
    cfg.peers = peers(a.peers)?;
    cfg.secret = a.replication_secret;
    cfg.witness = true;
    cfg.join = a.join;
    let node = Node::start(cfg).map_err(failed)?;
    crate::say!("epochdb witness: control node {} on {}", a.node_id, node.addr());
    let mut v = node.view();
    let mut told = (u64::MAX, u64::MAX);
    let mut voters = Vec::new();
    loop {
        if (v.cluster.primary, v.cluster.appointment) != told {
            told = (v.cluster.primary, v.cluster.appointment);
            crate::say!("epochdb witness: primary node {} (appointment {})", told.0, told.1);
        }
        if v.voters != voters {
            voters = v.voters.clone();
            crate::say!("epochdb witness: voters {voters:?}");
        }
        v = node.wait_change(v.version, Duration::from_secs(1));
    }
}

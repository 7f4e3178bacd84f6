//! epochdb's control plane: a small Raft group that decides who the
//! primary is, fences the others, and keeps the in-sync set.
//!
//! Raft is tikv's `raft` crate (`RawNode`): synchronous, no async runtime
//! (our threads poll and never hand off on the commit path, and the
//! server is not built on tokio), and it has the two things fencing needs:
//! check-quorum leases (a follower that heard from the leader within an
//! election timeout refuses to vote) and ReadIndex (the leader learns when
//! a quorum confirmed it). openraft would bring tokio for a group that
//! exchanges a few messages per tick.
//!
//! Every node runs the same code; a node is a data node (it may become the
//! primary) or a witness (a voter only, so two machines can keep a
//! quorum). The Raft leader is the primary: the node that wins an
//! election proposes its own appointment ([`state::Command::Appoint`]),
//! which takes effect only if it may be appointed (the old primary, or a
//! backup in the committed in-sync set). While it leads, it renews its
//! [`Lease`] after each ReadIndex round a quorum answered; the engine
//! releases commits only under that lease. ARCHITECTURE.md ("Control
//! plane") has the safety argument; FORMAT.md its bytes.

#[cfg(test)]
mod sim;
pub mod state;
mod storage;
mod transport;

use epochdb::{Lease, Membership};
use raft::prelude::{Entry, EntryType, Message, Snapshot};
use raft::{RawNode, StateRole};
use state::{Cluster, Command};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use storage::Log;
use transport::Transport;

/// How to run one node of the control plane.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id (not 0; unique in the group).
    pub id: u64,
    /// Where the other nodes reach this one (loopback unless told).
    pub listen: SocketAddr,
    /// Every other voter: id and address.
    pub peers: BTreeMap<u64, String>,
    /// The shared secret every node holds; required beyond loopback.
    pub secret: Option<String>,
    /// Where this node keeps its Raft log.
    pub dir: PathBuf,
    /// A witness votes but never becomes the primary.
    pub witness: bool,
    /// A new node joining a running group (`epochdb member add` names it
    /// there): it starts with no voters and learns them from the leader's
    /// snapshot. `peers` are then the group's current voters. Ignored once
    /// its log exists.
    pub join: bool,
    /// Where this node's backups would connect if it became the primary
    /// (its replication address); unused by a witness.
    pub replicate_addr: String,
    /// One Raft tick.
    pub tick: Duration,
    /// Ticks without a leader before a data node campaigns (randomized up
    /// to twice this); also what a lease is derived from.
    pub election_ticks: usize,
    /// Replaces the lease's length: only for the simulation's check that
    /// a lease longer than the rule allows is caught.
    #[doc(hidden)]
    pub lease_override: Option<Duration>,
}

impl Config {
    pub fn new(id: u64, listen: SocketAddr, dir: impl Into<PathBuf>) -> Config {
        Config {
            id,
            listen,
            peers: BTreeMap::new(),
            secret: None,
            dir: dir.into(),
            witness: false,
            join: false,
            replicate_addr: String::new(),
            tick: Duration::from_millis(20),
            election_ticks: 25,
            lease_override: None,
        }
    }

    /// How long a quorum's confirmation lets the leader release: until no
    /// other node can have been elected. A follower grants no vote until
    /// `election_ticks` of its ticks have passed since it last heard the
    /// leader, and it ticks at most once per `tick`, so no election ends
    /// before `(election_ticks - 1) * tick` after the confirming round was
    /// sent; one more tick and 10% are left for clock rates and the check.
    pub fn lease(&self) -> Duration {
        if let Some(l) = self.lease_override {
            return l;
        }
        self.tick * (self.election_ticks.saturating_sub(2) as u32) * 9 / 10
    }

    /// The voters a new log begins with: none for a node that joins.
    fn voters(&self) -> Vec<u64> {
        if self.join {
            return Vec::new();
        }
        let mut voters: Vec<u64> = self.peers.keys().copied().chain([self.id]).collect();
        voters.sort_unstable();
        voters
    }

    fn validate(&self) -> Result<(), String> {
        if self.id == 0 || self.peers.contains_key(&self.id) || self.peers.contains_key(&0) {
            return Err("control: node ids must be unique and not 0".into());
        }
        if self.peers.len() < 2 {
            return Err("control: a group needs at least 3 voters (add a witness for two machines)".into());
        }
        if self.election_ticks < 5 || self.tick < Duration::from_millis(1) {
            return Err("control: election_ticks must be at least 5 and tick at least 1 ms".into());
        }
        if !self.listen.ip().is_loopback() && self.secret.as_deref().is_none_or(str::is_empty) {
            return Err(format!("control: listening on {}, beyond this machine: set a secret", self.listen));
        }
        if !self.witness && self.replicate_addr.is_empty() {
            return Err("control: a data node needs its replication address".into());
        }
        Ok(())
    }
}

/// What a node knows now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// This node.
    pub me: u64,
    /// The Raft leader (0: none known).
    pub leader: u64,
    /// The Raft term.
    pub raft_term: u64,
    /// The applied cluster state.
    pub cluster: Cluster,
    /// The appointment under which this node last served as primary and
    /// whose data it still holds (0: none); see [`Node::forget_served`].
    pub served: u64,
    /// The Raft voters, as the applied log says (none yet on a node that
    /// is joining).
    pub voters: Vec<u64>,
    /// This node has applied everything the leader had committed when it
    /// last asked (a ReadIndex round); until then, after a restart, the
    /// cluster state may be its own stale copy.
    pub current: bool,
    /// Bumped at every change.
    pub version: u64,
}

impl View {
    /// Whether this node is the appointed primary.
    pub fn is_primary(&self) -> bool {
        self.cluster.primary == self.me && self.me != 0
    }
}

struct Shared {
    view: Mutex<View>,
    changed: Condvar,
    lease: Arc<Lease>,
    /// In-sync sets the engine asked for; the loop proposes the last.
    wanted: Mutex<Option<Vec<u64>>>,
    forget: AtomicBool,
    subscribers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    stop: AtomicBool,
    /// Asked of the node's thread by other threads.
    requests: Mutex<Vec<Request>>,
    /// A switchover holds the lease back: no renewal while set (held
    /// while renewing, so a renewal never follows a suspension).
    suspended: Mutex<bool>,
    /// The peers' addresses after a change of members, for the transport.
    peers: Mutex<Option<BTreeMap<u64, String>>>,
}

/// What another thread asks of the node's thread.
enum Request {
    Propose(Command),
    Transfer(u64),
    /// Add voter `id` reached at `addr`, or (`addr` `None`) remove it.
    Member {
        id: u64,
        addr: Option<String>,
    },
}

impl Shared {
    fn new() -> Shared {
        Shared {
            view: Mutex::new(View::default()),
            changed: Condvar::new(),
            lease: Arc::new(Lease::expired()),
            wanted: Mutex::new(None),
            forget: AtomicBool::new(false),
            subscribers: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            requests: Mutex::new(Vec::new()),
            suspended: Mutex::new(false),
            peers: Mutex::new(None),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running control-plane node. Dropping it stops it.
pub struct Node {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Node {
    /// Opens the node's Raft log and starts its thread and transport.
    pub fn start(cfg: Config) -> Result<Node, String> {
        cfg.validate()?;
        let log = Log::open(&cfg.dir, &cfg.voters())?;
        let listener = TcpListener::bind(cfg.listen).map_err(|e| format!("control: listen on {}: {e}", cfg.listen))?;
        let (tx, rx) = channel();
        let secret = cfg.secret.clone().unwrap_or_default().into_bytes();
        let cluster = Cluster::decode(log.snapshot_state().1).ok_or("control: the snapshot does not decode")?;
        let transport = Transport::start(cfg.id, listener, &peers(&cfg, &cluster), secret, tx)
            .map_err(|e| format!("control: start the transport: {e}"))?;
        let addr = transport.addr();
        let shared = Arc::new(Shared::new());
        let seed = u64::from(addr.port()) ^ (cfg.id << 32) ^ std::process::id() as u64;
        let core = Core::new(cfg, log, shared.clone(), seed)?;
        let thread = std::thread::Builder::new()
            .name("epochdb-control".into())
            .spawn(move || run(core, &transport, &rx))
            .map_err(|e| format!("control: start the node's thread: {e}"))?;
        Ok(Node { shared, thread: Some(thread), addr })
    }

    /// Where other nodes reach this one.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The lease the engine releases under (`Options::lease`).
    pub fn lease(&self) -> Arc<Lease> {
        self.shared.lease.clone()
    }

    /// The in-sync set for the engine (`PrimaryOptions::membership`).
    pub fn membership(&self) -> Arc<dyn Membership> {
        Arc::new(InSync(self.shared.clone()))
    }

    pub fn view(&self) -> View {
        lock(&self.shared.view).clone()
    }

    /// Waits until the view's version passes `seen` (or `timeout`).
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> View {
        let g = lock(&self.shared.view);
        let (g, _) = (self.shared.changed)
            .wait_timeout_while(g, timeout, |v| v.version <= seen)
            .unwrap_or_else(|e| e.into_inner());
        g.clone()
    }

    /// Records that this node's data from its time as primary was set
    /// aside (a deposed primary rejoining as a backup starts empty).
    pub fn forget_served(&self) {
        self.shared.forget.store(true, Ordering::Release);
    }

    /// Asks for a planned switchover to this node, a backup in the
    /// in-sync set (`REPLICAOF NO ONE` on a controlled replica). The
    /// primary's node sees it in its view (`cluster.handover`), and its
    /// owner hands over: [`Node::suspend_lease`], wait until this node has
    /// everything released, [`Node::transfer`].
    pub fn request_handover(&self) -> Result<(), String> {
        Handle(self.shared.clone()).request_handover()
    }

    /// Ends a switchover that could not finish (the primary goes on).
    pub fn cancel_handover(&self) {
        Handle(self.shared.clone()).cancel_handover()
    }

    /// Ends this node's lease now and renews it no more until
    /// [`Node::resume_lease`]: its engine releases nothing from here on.
    pub fn suspend_lease(&self) {
        Handle(self.shared.clone()).suspend_lease()
    }

    pub fn resume_lease(&self) {
        Handle(self.shared.clone()).resume_lease()
    }

    /// Hands this leader's leadership to `to` (a switchover's last step;
    /// `to`'s election is forced past the followers' leases, so this
    /// node's own lease must be suspended first).
    pub fn transfer(&self, to: u64) {
        Handle(self.shared.clone()).transfer(to)
    }

    /// Asks the group to add voter `id`, reached at `addr` (its
    /// `--control-listen`); start it with `join` (`--join`) and every
    /// current voter as a peer. One change at a time: done when
    /// [`View::voters`] names it.
    pub fn add_member(&self, id: u64, addr: &str) -> Result<(), String> {
        Handle(self.shared.clone()).change_member(id, Some(addr.to_string()))
    }

    /// Asks the group to remove voter `id`: not the primary nor the Raft
    /// leader (switch over first), and the group keeps at least 3 voters.
    pub fn remove_member(&self, id: u64) -> Result<(), String> {
        Handle(self.shared.clone()).change_member(id, None)
    }
}

/// What a node's owner asks of it from another thread (and what the
/// simulation asks of a simulated node).
struct Handle(Arc<Shared>);

impl Handle {
    fn view(&self) -> View {
        lock(&self.0.view).clone()
    }

    fn request_handover(&self) -> Result<(), String> {
        let v = self.view();
        if v.is_primary() {
            return Err("this node is the primary already".into());
        }
        if !v.current || v.cluster.primary == 0 {
            return Err("this node does not know the current primary yet".into());
        }
        if !v.cluster.eligible(v.me) {
            return Err(format!(
                "node {} is not in the in-sync set {:?}: it may lack what the primary released",
                v.me, v.cluster.in_sync
            ));
        }
        let c = Command::Handover { appointment: v.cluster.appointment, to: v.me };
        lock(&self.0.requests).push(Request::Propose(c));
        Ok(())
    }

    fn cancel_handover(&self) {
        let appointment = self.view().cluster.appointment;
        lock(&self.0.requests).push(Request::Propose(Command::Handover { appointment, to: 0 }));
    }

    fn suspend_lease(&self) {
        let mut s = lock(&self.0.suspended);
        *s = true;
        self.0.lease.revoke();
    }

    fn resume_lease(&self) {
        *lock(&self.0.suspended) = false;
    }

    fn transfer(&self, to: u64) {
        lock(&self.0.requests).push(Request::Transfer(to));
    }

    fn change_member(&self, id: u64, addr: Option<String>) -> Result<(), String> {
        let v = self.view();
        if !v.current || v.leader == 0 {
            return Err("this node does not know the group's leader yet".into());
        }
        let voter = v.voters.contains(&id);
        match &addr {
            Some(_) if id == 0 => return Err("node ids are not 0".into()),
            Some(a) if a.is_empty() || !a.contains(':') => return Err(format!("{a:?} is not HOST:PORT")),
            Some(_) if voter => return Err(format!("node {id} is a voter already: {:?}", v.voters)),
            None if !voter => return Err(format!("node {id} is not a voter: {:?}", v.voters)),
            None if v.voters.len() <= 3 => {
                return Err(format!("the group keeps at least 3 voters ({:?}): add one first", v.voters))
            }
            None if id == v.cluster.primary || id == v.leader => {
                return Err(format!("node {id} is the primary (or leads the group): switch over first"))
            }
            _ => {}
        }
        lock(&self.0.requests).push(Request::Member { id, addr });
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.lease.revoke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Drives `core` in real time: messages as they arrive, a tick every
/// `tick` (never more ticks than time passed: a follower's count of ticks
/// since it heard the leader is what leases rest on).
fn run(mut core: Core, transport: &Transport, rx: &Receiver<Message>) {
    let mut next_tick = Instant::now() + core.cfg.tick;
    while !core.shared.stop.load(Ordering::Acquire) {
        if let Some(peers) = lock(&core.shared.peers).take() {
            if let Err(e) = transport.set_peers(&peers) {
                ::log::error!("control: reach the new members: {e}");
            }
        }
        let wait = next_tick.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(m) => core.step(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(m) = rx.try_recv() {
            core.step(m);
        }
        while Instant::now() >= next_tick {
            core.tick(Instant::now());
            next_tick += core.cfg.tick;
        }
        match core.ready() {
            Ok(out) => out.into_iter().for_each(|m| transport.send(m)),
            Err(e) => {
                // Raft's state could not be made durable: this node must
                // not vote or lead on state it may lose.
                ::log::error!("control: {e}; this node stops");
                core.shared.lease.revoke();
                return;
            }
        }
    }
}

/// Where the other nodes are reached: the flags' peers, and the voters
/// added since the group began.
fn peers(cfg: &Config, cluster: &Cluster) -> BTreeMap<u64, String> {
    let mut all = cfg.peers.clone();
    all.extend(cluster.members.iter().map(|(&id, a)| (id, a.clone())));
    all.remove(&cfg.id);
    all
}

/// The engine's view of the committed in-sync set.
struct InSync(Arc<Shared>);

impl Membership for InSync {
    fn committed(&self) -> Vec<u64> {
        lock(&self.0.view).cluster.in_sync.clone()
    }

    fn propose(&self, nodes: Vec<u64>) {
        *lock(&self.0.wanted) = Some(nodes);
    }

    fn subscribe(&self, f: Box<dyn Fn() + Send + Sync>) {
        lock(&self.0.subscribers).push(f);
    }
}

/// A node's logic: owns the `RawNode`, and is driven by [`run`] (real
/// time, TCP) or by the simulation (simulated time and network). It never
/// reads the clock: every step is given the time.
struct Core {
    cfg: Config,
    raw: RawNode<Log>,
    cluster: Cluster,
    applied: u64,
    /// Ticks without a leader after which this node campaigns.
    campaign_after: usize,
    /// Ticks since it started.
    ticks: u64,
    /// The ReadIndex round in flight: its number and when it was sent.
    pending: Option<(u64, Instant)>,
    rounds: u64,
    /// The last round a quorum answered: when it was sent, and the commit
    /// index to apply before this leader's view counts as current.
    confirmed: Option<(Instant, u64)>,
    /// A round of this role and term was answered and applied: this
    /// node's view of the cluster is current (a leader may propose).
    current: bool,
    /// (leading, term, leader) when the rounds began.
    role: (bool, u64, u64),
    /// Leadership hand-overs tried (each to the next candidate).
    transfers: usize,
    /// The last command proposed, not yet seen applied.
    proposed: Option<(Command, Instant)>,
    shared: Arc<Shared>,
    seed: u64,
}

impl Core {
    fn random_timeout(&mut self) -> usize {
        // xorshift: spreads the nodes' campaigns; no need for a crate.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let n = self.cfg.election_ticks;
        n + (self.seed % n as u64) as usize
    }

    fn new(cfg: Config, log: Log, shared: Arc<Shared>, seed: u64) -> Result<Core, String> {
        let cluster = Cluster::decode(log.snapshot_state().1).ok_or("control: the snapshot does not decode")?;
        let applied = log.snapshot_state().0;
        let served = storage::held(log.served);
        let voters = log.voters().to_vec();
        *lock(&shared.view) = View { me: cfg.id, cluster: cluster.clone(), served, voters, ..View::default() };
        let raft_cfg = raft::Config {
            id: cfg.id,
            election_tick: cfg.election_ticks,
            heartbeat_tick: (cfg.election_ticks / 8).max(1),
            // Raft's own timer never campaigns: `tick` does, and only on a
            // node that may become the primary.
            min_election_tick: 1 << 40,
            max_election_tick: (1 << 40) + 1,
            check_quorum: true,
            pre_vote: true,
            applied,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&raft_cfg, log, &logger).map_err(|e| format!("control: start Raft: {e}"))?;
        let mut core = Core {
            seed: seed | 1,
            raw,
            cluster,
            applied,
            campaign_after: 0,
            ticks: 0,
            pending: None,
            rounds: 0,
            confirmed: None,
            current: false,
            role: (false, 0, 0),
            transfers: 0,
            proposed: None,
            shared,
            cfg,
        };
        core.campaign_after = core.random_timeout();
        Ok(core)
    }

    /// One Raft tick at `now`, and what the node does on a tick.
    fn tick(&mut self, now: Instant) {
        self.ticks += 1;
        self.raw.tick();
        self.tick_duties(now);
    }

    fn step(&mut self, m: Message) {
        use raft::eraftpb::MessageType::{MsgRequestPreVote, MsgRequestVote};
        if self.ticks < self.cfg.election_ticks as u64 && matches!(m.get_msg_type(), MsgRequestVote | MsgRequestPreVote)
        {
            // A node that just (re)started may have acknowledged a lease
            // round of the leader before it went down, and forgotten that
            // it heard it: it votes only once that lease has surely run
            // out, an election timeout after its start. (Found by the data
            // plane's simulation: a witness restarted and elected a new
            // primary while the old one's lease, which it had granted,
            // still ran.) Ignored, the candidate simply tries again.
            return;
        }
        if let Err(e) = self.raw.step(m) {
            ::log::debug!("control: step: {e}");
        }
        // Stepped down (a higher term): no lease from here on, without
        // waiting for the next tick. (The lease's length alone already
        // keeps it from overlapping a successor's; this is sooner.)
        if self.raw.raft.state != StateRole::Leader {
            self.shared.lease.revoke();
        }
    }

    fn eligible(&self) -> bool {
        !self.cfg.witness && self.cluster.eligible(self.cfg.id) && self.raw.store().voters().contains(&self.cfg.id)
    }

    fn tick_duties(&mut self, now: Instant) {
        let r = &self.raw.raft;
        let role = (r.state == StateRole::Leader, r.term, r.leader_id);
        if role != self.role {
            // A round of another role or term says nothing about this one.
            self.role = role;
            (self.pending, self.confirmed, self.current) = (None, None, false);
        }
        if !role.0 {
            self.shared.lease.revoke();
            // A node that may be appointed campaigns first. The others
            // (a backup out of sync, a witness) campaign too, later: the
            // only eligible node's log may be stale (it cannot win a vote),
            // and a leader that may not be primary brings its log up to
            // date and hands it the leadership (below).
            let late = if self.eligible() { 0 } else { 2 * self.cfg.election_ticks };
            // Never a node that is not a voter (one joining, or removed):
            // raft's campaign does not check, and with no voters of its
            // own it would win alone.
            if r.promotable() && r.election_elapsed >= self.campaign_after + late {
                self.campaign_after = self.random_timeout();
                let _ = self.raw.campaign();
            }
        }
        // One ReadIndex round at a time: on the leader it renews the lease;
        // on a follower (forwarded to the leader) it tells when this node's
        // view is current. A round unanswered for long is replaced.
        if role.2 != 0 && self.pending.is_none_or(|(_, at)| now.saturating_duration_since(at) > self.cfg.lease() * 2) {
            self.rounds += 1;
            self.pending = Some((self.rounds, now));
            self.raw.read_index(self.rounds.to_le_bytes().to_vec());
        }
        let requests = std::mem::take(&mut *lock(&self.shared.requests));
        for r in requests {
            match r {
                // A follower forwards a proposal to the leader.
                Request::Propose(c) if role.2 != 0 => {
                    let _ = self.raw.propose(Vec::new(), c.encode());
                }
                Request::Transfer(to) if role.0 => self.raw.transfer_leader(to),
                Request::Member { id, addr } if role.2 != 0 => {
                    use raft::prelude::{ConfChange, ConfChangeType};
                    let kind = if addr.is_some() { ConfChangeType::AddNode } else { ConfChangeType::RemoveNode };
                    let cc = ConfChange { change_type: kind, node_id: id, ..ConfChange::default() };
                    let context = addr.unwrap_or_default().into_bytes();
                    if let Err(e) = self.raw.propose_conf_change(context, cc) {
                        ::log::warn!("control: the change of members was not proposed: {e}");
                    }
                }
                _ => {}
            }
        }
        if !role.0 {
            return;
        }
        let me = self.cfg.id;
        if self.current && !self.eligible() {
            // A leader that may not be the primary (it was eligible when it
            // campaigned; an in-sync change committed under it says no
            // more) hands the leadership to one that may, or the group
            // would wait on it forever. It holds no lease, so the
            // transferee's forced election fences nobody.
            // With none appointed yet any data node may be; which peers
            // are witnesses is not known here, and a witness hands on too.
            let candidates: Vec<u64> = if self.cluster.primary == 0 {
                self.raw.store().voters().to_vec()
            } else {
                [self.cluster.primary].into_iter().chain(self.cluster.in_sync.iter().copied()).collect()
            };
            let candidates: Vec<u64> = candidates.into_iter().filter(|&n| n != 0 && n != me).collect();
            if self.raw.raft.lead_transferee.is_none() && !candidates.is_empty() {
                self.transfers += 1;
                self.raw.transfer_leader(candidates[self.transfers % candidates.len()]);
            }
            return;
        }
        let want = if self.cluster.primary != me && self.eligible() {
            Some(Command::Appoint { node: me, addr: self.cfg.replicate_addr.clone() })
        } else if self.cluster.primary == me {
            (lock(&self.shared.wanted).clone())
                .filter(|n| *n != self.cluster.in_sync)
                .map(|nodes| Command::InSync { appointment: self.cluster.appointment, nodes })
        } else {
            None
        };
        // Proposed only once this leader's view is current (a confirmed
        // read), and again only if the last one did not take effect soon.
        if let Some(c) = want.filter(|_| self.current) {
            let repeat = (self.proposed.as_ref())
                .is_some_and(|(p, at)| *p == c && now.saturating_duration_since(*at) < self.cfg.tick * 10);
            if !repeat {
                let _ = self.raw.propose(Vec::new(), c.encode());
                self.proposed = Some((c, now));
            }
        }
    }

    /// Handles Raft's ready state: persists, applies, and returns the
    /// messages to send. Then publishes the view.
    fn ready(&mut self) -> Result<Vec<Message>, String> {
        let mut out = Vec::new();
        if self.raw.has_ready() {
            self.handle_ready(&mut out)?;
        }
        // A snapshot is taken as delivered once handed to the network:
        // raft holds its follower in the snapshot state until told, and a
        // lost one would stall that follower for good (the simulation
        // found it). If it was lost, the next probe is refused and the
        // snapshot sent again.
        for m in out.iter().filter(|m| m.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot) {
            self.raw.report_snapshot(m.to, raft::SnapshotStatus::Finish);
        }
        self.publish();
        Ok(out)
    }

    fn handle_ready(&mut self, out: &mut Vec<Message>) -> Result<(), String> {
        let mut rd = self.raw.ready();
        out.extend(rd.take_messages());
        let served = self.raw.store().served;
        let mut dirty = false;
        if !rd.snapshot().is_empty() {
            self.restore(rd.snapshot().clone());
            dirty = true;
        }
        self.apply(rd.take_committed_entries());
        if !rd.entries().is_empty() {
            self.raw.mut_store().append(rd.entries());
            dirty = true;
        }
        if let Some(hs) = rd.hs() {
            self.raw.mut_store().hs = hs.clone();
            dirty = true;
        }
        for rs in rd.take_read_states() {
            self.confirm(&rs.request_ctx, rs.index);
        }
        if dirty || self.apply_forget() || served != self.raw.store().served {
            self.raw.store().persist()?;
        }
        out.extend(rd.take_persisted_messages());
        let mut light = self.raw.advance(rd);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().hs.commit = commit;
            self.raw.store().persist()?;
        }
        out.extend(light.take_messages());
        self.apply(light.take_committed_entries());
        self.raw.advance_apply();
        self.renew();
        Ok(())
    }

    fn apply_forget(&mut self) -> bool {
        if !self.shared.forget.swap(false, Ordering::AcqRel) {
            return false;
        }
        let s = &mut self.raw.mut_store().served;
        *s = storage::forgotten(*s);
        true
    }

    fn restore(&mut self, s: Snapshot) {
        if let Some(c) = Cluster::decode(&s.data) {
            self.cluster = c;
        }
        self.applied = s.get_metadata().index;
        self.raw.mut_store().apply_snapshot(&s);
        // A joining node learns the voters added since the group began.
        *lock(&self.shared.peers) = Some(peers(&self.cfg, &self.cluster));
    }

    fn apply(&mut self, entries: Vec<Entry>) {
        let mut in_sync_changed = false;
        for e in entries {
            self.applied = e.index;
            match e.get_entry_type() {
                EntryType::EntryNormal => {}
                EntryType::EntryConfChange => {
                    self.apply_member_change(&e);
                    continue;
                }
                EntryType::EntryConfChangeV2 => continue, // never proposed here
            }
            let Some(c) = Command::decode(&e.data) else { continue };
            if self.proposed.as_ref().is_some_and(|(p, _)| *p == c) {
                self.proposed = None;
            }
            let before = self.cluster.clone();
            if self.cluster.apply(c) {
                in_sync_changed |= before.in_sync != self.cluster.in_sync;
                if self.cluster.primary != before.primary || self.cluster.appointment != before.appointment {
                    ::log::info!(
                        "control: node {} is the primary (appointment {}, backups connect to {})",
                        self.cluster.primary,
                        self.cluster.appointment,
                        self.cluster.primary_addr
                    );
                    if self.cluster.primary == self.cfg.id {
                        // Only a newer appointment: after a restart the log's
                        // older entries are applied again, and the one this
                        // node's data was set aside for must not return.
                        let s = &mut self.raw.mut_store().served;
                        *s = storage::serving(*s, self.cluster.appointment);
                    } else {
                        self.shared.lease.revoke();
                    }
                }
            }
            let state = self.cluster.encode();
            self.raw.mut_store().applied(e.index, state);
        }
        if in_sync_changed {
            // Published first, so the engine reads the new set.
            self.publish();
            for f in lock(&self.shared.subscribers).iter() {
                f();
            }
        }
    }

    /// A committed change of members: Raft's voters, the new member's
    /// address (the entry's context), the transport's peers. The log is
    /// folded into the snapshot here, so a node that joins is sent the
    /// snapshot (which names the voters), never the entries before it.
    fn apply_member_change(&mut self, e: &Entry) {
        use protobuf::Message as _;
        use raft::prelude::{ConfChange, ConfChangeType};
        match ConfChange::parse_from_bytes(&e.data).map_err(|e| e.to_string()).and_then(|cc| {
            let cs = self.raw.apply_conf_change(&cc).map_err(|e| e.to_string())?;
            Ok((cc, cs))
        }) {
            Ok((cc, cs)) => {
                let id = cc.node_id;
                if cc.get_change_type() == ConfChangeType::RemoveNode {
                    self.cluster.members.remove(&id);
                } else if !e.context.is_empty() {
                    self.cluster.members.insert(id, String::from_utf8_lossy(&e.context).into_owned());
                }
                ::log::info!("control: the voters are now {:?}", cs.voters);
                self.raw.mut_store().set_voters(cs.voters);
                *lock(&self.shared.peers) = Some(peers(&self.cfg, &self.cluster));
            }
            Err(err) => ::log::warn!("control: a change of members at index {} not applied: {err}", e.index),
        }
        let state = self.cluster.encode();
        self.raw.mut_store().applied(e.index, state);
        self.raw.mut_store().fold();
    }

    /// A ReadIndex round came back: a quorum confirmed this leader.
    fn confirm(&mut self, ctx: &[u8], index: u64) {
        let round = ctx.try_into().ok().map(u64::from_le_bytes);
        if let Some((_, sent)) = self.pending.filter(|(n, _)| Some(*n) == round) {
            self.pending = None;
            self.confirmed = Some((sent, index));
        }
    }

    /// Once a confirmed round's commit index is applied: this node's view
    /// is current, and if it leads and is the appointed primary its lease
    /// runs from when the round was sent.
    fn renew(&mut self) {
        let Some((sent, _)) = self.confirmed.filter(|c| c.1 <= self.applied) else { return };
        self.confirmed = None;
        self.current = true;
        if self.raw.raft.state == StateRole::Leader && self.cluster.primary == self.cfg.id {
            let suspended = lock(&self.shared.suspended);
            if !*suspended {
                self.shared.lease.renew(sent + self.cfg.lease());
            }
        }
    }

    fn publish(&self) {
        let r = &self.raw.raft;
        let mut v = lock(&self.shared.view);
        let served = storage::held(self.raw.store().served);
        let voters = self.raw.store().voters();
        // Compared in place: this runs at every tick, and a copy of the
        // cluster state each time would cost more than the tick.
        let same = v.me == self.cfg.id
            && v.leader == r.leader_id
            && v.raft_term == r.term
            && v.cluster == self.cluster
            && v.served == served
            && v.voters == voters
            && v.current == self.current;
        if !same {
            *v = View {
                me: self.cfg.id,
                leader: r.leader_id,
                raft_term: r.term,
                cluster: self.cluster.clone(),
                served,
                voters: voters.to_vec(),
                current: self.current,
                version: v.version + 1,
            };
            self.shared.changed.notify_all();
        }
    }
}

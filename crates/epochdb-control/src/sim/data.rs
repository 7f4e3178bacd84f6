//! A deterministic simulation of the data plane beside the control plane
//! (`World`): primaries that commit, log, ship, sync and release; backups
//! that receive, persist, acknowledge, replay, promote and follow a newly
//! appointed primary in place; catch-up from the
//! backlog or the files; connections that break and reconnect; crashes
//! that keep what was synced (and, for a process killed rather than a
//! machine lost, what was written). Each decision is the engine's own:
//! `epochdb::replication_rules` (release, limit, in-sync set, join,
//! resume, persist, replay target, promotion, divergence), through the
//! real control plane (`Core`, leases, `InSync`). What the engine does
//! around them (threads, sockets, files, records) is played here by a
//! model: a transaction is an id, a block one epoch of one stream, a
//! node's memory the set of ids it installed.
//!
//! Checked: under `sync` (and `very-safe`) every transaction any primary
//! released is in every node that later becomes primary (under `async`
//! the lost ones are counted instead); what a node holds in memory is
//! exactly its history's transactions up to what it applied, nothing more
//! and nothing missing (so reads see a prefix of the serial order, and a
//! restarted node's directory recovers the same); a backup's read view is
//! never above what its history's primaries released; one node writes
//! each term and one releases under each appointment; and after the
//! faults stop, a primary releases again and every backup's view follows.

use super::{describe, lock, InSync, Rng, World, MS};
use epochdb::replication_rules::{self as rules, Promotion};
use epochdb::{Membership, Safety};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const STREAMS: usize = 2;
const EPOCH: u64 = 20 * MS;
/// Blocks each stream's backlog keeps: a backup away longer catches up
/// from the files.
const BACKLOG: usize = 8;
const ACK_TIMEOUT: u64 = 2_000 * MS;
const IDLE_TIMEOUT: u64 = 2_000 * MS;
const RETRY: u64 = 200 * MS;
/// `Epochs::boundary_at_or_above` rounds up to this.
const BOUNDARY: u64 = 4;

fn boundary(e: u64) -> u64 {
    e.div_ceil(BOUNDARY) * BOUNDARY
}

/// A rule broken on purpose: the checks must catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// A primary reopened after a crash goes on in its old term.
    RestartKeepsTerm,
    /// A backup replays what it persisted whether released or not.
    ReplayUnreleased,
    /// `sync` releases without waiting for the backups.
    SyncIgnoresBackups,
}

/// A history's term: (promotions, the newest's first epoch and id).
type Term = (u32, u64, u64);

#[derive(Clone, Debug)]
struct Block {
    epoch: u64,
    txns: Vec<u64>,
}

#[derive(Clone, Debug)]
enum Msg {
    Hello { node: u64, pepoch: u64, top: u64, term: Term },
    Refuse,
    Welcome { promotions: Vec<Promotion>, voids: Vec<(u64, u64)> },
    Block(Block),
    Seal { stream: usize, epoch: u64 },
    Released(u64),
    Ack(u64),
}

/// A TCP connection: in order, each way; once broken nothing more
/// arrives, and each side learns of it at `reset_at` (a reset), or else
/// by its own timeouts.
struct Conn {
    primary: u64,
    backup: u64,
    down: VecDeque<(u64, Msg)>,
    up: VecDeque<(u64, Msg)>,
    broken: bool,
    reset_at: Option<u64>,
}

/// A data directory.
#[derive(Default, Clone)]
struct Disk {
    synced: Vec<Block>,
    /// Written, not synced: a lost machine keeps a prefix of it.
    unsynced: Vec<Block>,
    pepoch: u64,
    promotions: Vec<Promotion>,
    voids: Vec<(u64, u64)>,
}

impl Disk {
    fn term(&self) -> Term {
        let last = self.promotions.last();
        (self.promotions.len() as u32, last.map_or(0, |p| p.first), last.map_or(0, |p| p.id))
    }

    fn is_void(&self, e: u64) -> bool {
        self.voids.iter().any(|&(lo, hi)| lo <= e && e <= hi)
    }

    fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.synced.iter().chain(&self.unsynced)
    }

    fn top(&self) -> u64 {
        self.blocks().map(|b| b.epoch).max().unwrap_or(0)
    }

    /// Recovery: every entry of an epoch `<= pepoch` that is not void.
    fn recover(&self) -> BTreeSet<u64> {
        let keep = |b: &&Block| b.epoch <= self.pepoch && !self.is_void(b.epoch);
        self.blocks().filter(keep).flat_map(|b| b.txns.iter().copied()).collect()
    }
}

struct Standby {
    following: u64,
    conn: Option<usize>,
    retry_at: u64,
    sealed: [u64; STREAMS],
    heard: [bool; STREAMS],
    queue: Vec<Block>,
    released: u64,
    view: u64,
    /// Memory holds every epoch `<= applied` (recovery, then replay).
    applied: u64,
    /// The largest epoch received this session, and the epoch clock it
    /// opened with: a promotion's new term starts above both.
    top: u64,
    clock: u64,
    last_heard: u64,
    /// Refused as diverged: waits to set its directory aside.
    refused: bool,
}

struct Peer {
    node: u64,
    conn: usize,
    acked: u64,
    in_sync: bool,
    last_ack: u64,
}

struct Primary {
    appointment: u64,
    term: Term,
    epoch: u64,
    next_epoch_at: u64,
    backlog: [VecDeque<Block>; STREAMS],
    evicted: [u64; STREAMS],
    last_seal: [u64; STREAMS],
    /// A log sync under way: when it ends, and the epoch it makes durable.
    sync_at: Option<(u64, u64)>,
    limit: u64,
    released: u64,
    peers: Vec<Peer>,
    /// Connections whose hello has not arrived yet.
    incoming: Vec<usize>,
    /// It was checked to hold everything released before it first released.
    checked: bool,
}

enum Role {
    Down,
    Starting,
    Backup(Box<Standby>),
    Primary(Box<Primary>),
}

struct Engine {
    id: u64,
    starts: u64,
    disk: Disk,
    /// The transactions installed in memory.
    mem: BTreeSet<u64>,
    role: Role,
    /// The control plane's view as last noted (`EPOCHDB_SIM_TRACE`).
    seen: (u64, Vec<u64>, u64),
    /// The node's view as last read.
    view: Arc<crate::View>,
}

impl Engine {
    fn role_name(&self) -> &'static str {
        match self.role {
            Role::Down => "down",
            Role::Starting => "starting",
            Role::Backup(_) => "backup",
            Role::Primary(_) => "primary",
        }
    }
}

/// Prints the data plane's events (`EPOCHDB_SIM_TRACE=1`), to follow a failing seed.
macro_rules! note {
    ($t:expr, $($arg:tt)*) => {
        super::debug($t, || format!($($arg)*))
    };
}

/// What a node holds that its history does not, and the reverse (the
/// first few of each).
fn mismatch(holds: &BTreeSet<u64>, history: &BTreeSet<u64>) -> String {
    let extra: Vec<_> = holds.difference(history).take(5).collect();
    let missing: Vec<_> = history.difference(holds).take(5).collect();
    format!("transactions not of its history {extra:?}, and without {missing:?}")
}

/// What happened, for the checks.
#[derive(Default)]
struct Truth {
    /// Every transaction committed, by epoch, with its writer's term.
    by_epoch: BTreeMap<u64, Vec<(u64, Term)>>,
    released: BTreeMap<Term, u64>,
    writers: BTreeMap<Term, u64>,
    releasers: BTreeMap<u64, u64>,
    next_txn: u64,
    /// Released transactions a later primary lacked (`async`).
    lost: BTreeSet<u64>,
}

/// Whether a transaction of `term` in epoch `e` belongs to the history
/// whose promotions are `promotions`.
fn in_history(promotions: &[Promotion], term: Term, e: u64) -> bool {
    let j = term.0 as usize;
    if j > promotions.len() {
        return false;
    }
    let start = if j == 0 { (0, 0) } else { (promotions[j - 1].first, promotions[j - 1].id) };
    // Every later promotion kept only the epochs up to its `kept` (and
    // made the rest below its term void).
    (term.1, term.2) == start && e >= start.0 && promotions[j..].iter().all(|p| e <= p.kept)
}

impl Truth {
    /// The transactions of a history in epochs `(lo, hi]`.
    fn expected(&self, promotions: &[Promotion], lo: u64, hi: u64) -> BTreeSet<u64> {
        if hi <= lo {
            return BTreeSet::new();
        }
        (self.by_epoch.range(lo + 1..=hi))
            .flat_map(|(&e, txns)| txns.iter().filter(move |(_, t)| in_history(promotions, *t, e)).map(|&(x, _)| x))
            .collect()
    }

    /// The largest epoch a primary of this history released.
    fn released_in(&self, promotions: &[Promotion]) -> u64 {
        (0..=promotions.len())
            .filter_map(|j| {
                let (first, id) = if j == 0 { (0, 0) } else { (promotions[j - 1].first, promotions[j - 1].id) };
                self.released.get(&(j as u32, first, id)).copied()
            })
            .max()
            .unwrap_or(0)
    }
}

/// What one run found.
#[derive(Debug, Default)]
pub struct DataOutcome {
    pub violation: Option<String>,
    pub promotions: u64,
    pub catch_ups_from_files: u64,
    pub refused: u64,
    /// Replicas that followed a primary appointed after theirs.
    pub follows: u64,
    pub released_txns: u64,
    pub lost_txns: u64,
    pub released_epochs: u64,
    pub handovers: u64,
    pub crashes: u64,
}

struct Sim {
    rng: Rng,
    safety: Safety,
    data: u64,
    engines: Vec<Engine>,
    conns: Vec<Conn>,
    truth: Truth,
    out: DataOutcome,
    /// The primary's released epoch 3 s before the end, for the check
    /// of progress.
    mark: Option<(u64, u64)>,
    broken: Option<Broken>,
}

/// Runs one seed: `data` data nodes and `witnesses` witnesses for `secs`
/// simulated seconds, faults in all but the last 10.
pub fn run(seed: u64, data: u64, witnesses: u64, secs: u64, safety: Safety, broken: Option<Broken>) -> DataOutcome {
    let mut world = World::new(seed, data, witnesses, secs, None, true);
    let mut sim = Sim {
        rng: Rng(seed ^ 0x5eed_da7a),
        safety,
        data,
        engines: (1..=data)
            .map(|id| Engine {
                id,
                starts: 0,
                disk: Disk::default(),
                mem: BTreeSet::new(),
                role: Role::Down,
                seen: Default::default(),
                view: Default::default(),
            })
            .collect(),
        conns: Vec::new(),
        truth: Truth::default(),
        out: DataOutcome::default(),
        mark: None,
        broken,
    };
    let mut next_data = 0;
    while world.t < world.end {
        let t = world.next_at().min(next_data);
        let result = if t == next_data {
            next_data += MS;
            world.step(t, &|p, to| sim.ready(p, to)).and_then(|()| sim.step(t, &mut world))
        } else {
            world.step(t, &|p, to| sim.ready(p, to))
        };
        if let Err(v) = result {
            sim.out.violation = Some(format!("t={} ms: {v}", t / MS));
            return sim.out;
        }
    }
    let control = world.finish();
    sim.out.handovers = control.handovers;
    sim.out.crashes = control.crashes;
    sim.out.violation = control.violation;
    sim.out.released_txns = sim.truth.released.iter().map(|(&term, &r)| sim.count(term, r)).sum();
    sim.out.lost_txns = sim.truth.lost.len() as u64;
    sim.out
}

impl Sim {
    /// Whether primary `p` may hand over to `to`: `to` acknowledged the
    /// released epoch (the lease is suspended, so it no longer grows).
    fn ready(&self, p: u64, to: u64) -> bool {
        match &self.engines[p as usize - 1].role {
            Role::Primary(pr) => pr.peers.iter().any(|x| x.node == to && x.acked >= pr.released),
            _ => false,
        }
    }

    fn count(&self, term: Term, r: u64) -> u64 {
        (self.truth.by_epoch.range(..=r)).map(|(_, t)| t.iter().filter(|(_, w)| *w == term).count() as u64).sum()
    }

    fn step(&mut self, t: u64, world: &mut World) -> Result<(), String> {
        for i in 0..self.data as usize {
            let id = i as u64 + 1;
            let (up, starts, stalled) = {
                let n = &world.nodes[i];
                (n.core.is_some(), n.starts, n.stalled_until > t)
            };
            if !up || starts != self.engines[i].starts {
                if !matches!(self.engines[i].role, Role::Down) {
                    self.crash(i, t);
                }
                if !up {
                    continue;
                }
                self.engines[i].starts = starts;
                self.engines[i].role = Role::Starting;
            }
            if stalled {
                continue; // a paused process: its messages wait
            }
            // A copy only when the view changed: this runs at every step.
            let v = {
                let now = lock(&world.nodes[i].shared.view);
                if *now != *self.engines[i].view {
                    self.engines[i].view = Arc::new(now.clone());
                }
                self.engines[i].view.clone()
            };
            let seen = &self.engines[i].seen;
            if (seen.0, &seen.1, seen.2) != (v.cluster.appointment, &v.cluster.in_sync, v.served) {
                note!(
                    t,
                    "node {id} sees appointment {} of node {}, in sync {:?}, served {}",
                    v.cluster.appointment,
                    v.cluster.primary,
                    v.cluster.in_sync,
                    v.served
                );
                self.engines[i].seen = (v.cluster.appointment, v.cluster.in_sync.clone(), v.served);
            }
            match &self.engines[i].role {
                Role::Down => {}
                Role::Starting => self.start(i, t, world, &v)?,
                Role::Backup(b) => {
                    if v.is_primary() {
                        self.promote(i, t, &v)?;
                    } else if v.cluster.primary != 0 && v.cluster.primary != b.following {
                        // The primary moved: the replica follows it in place.
                        self.follow(i, t, v.cluster.primary);
                    } else {
                        self.backup_step(i, t, world, &v.cluster.in_sync)?;
                    }
                }
                Role::Primary(_) => {
                    if v.cluster.primary != 0 && !v.is_primary() {
                        world.crash(id); // deposed: exits
                        self.crash(i, t);
                    } else {
                        self.primary_step(i, t, world, &v)?;
                    }
                }
            }
        }
        self.check_progress(t, world)
    }

    /// The process ends: memory is gone; a process killed leaves what it
    /// wrote in the page cache, a machine lost keeps only a prefix of it.
    fn crash(&mut self, i: usize, t: u64) {
        let machine = self.rng.chance(0.5);
        note!(t, "node {} down ({})", i + 1, if machine { "machine lost" } else { "process ended" });
        let e = &mut self.engines[i];
        if machine {
            let keep = self.rng.below(e.disk.unsynced.len() as u64 + 1) as usize;
            e.disk.unsynced.truncate(keep);
        }
        e.mem.clear();
        e.role = Role::Down;
        let id = e.id;
        for c in self.conns.iter_mut().filter(|c| !c.broken && (c.primary == id || c.backup == id)) {
            c.broken = true;
            c.reset_at = (!machine).then_some(t + MS);
        }
    }

    /// Sends `m` on connection `c` toward the backup (`down`) or the
    /// primary. A cut link breaks it silently; now and then one resets.
    fn send(&mut self, c: usize, down: bool, m: Msg, t: u64, world: &World) {
        let conn = &mut self.conns[c];
        if conn.broken {
            return;
        }
        let (from, to) = if down { (conn.primary, conn.backup) } else { (conn.backup, conn.primary) };
        if world.cut.contains(&(from, to)) {
            conn.broken = true;
            return;
        }
        if t < world.calm && self.rng.chance(0.0005) {
            conn.broken = true;
            conn.reset_at = Some(t + MS);
            return;
        }
        let q = if down { &mut conn.down } else { &mut conn.up };
        let at = q.back().map_or(0, |m| m.0).max(t + MS / 10 + self.rng.below(3 * MS));
        q.push_back((at, m));
    }

    fn start(&mut self, i: usize, t: u64, world: &World, v: &crate::View) -> Result<(), String> {
        // As `epochdb serve` does: wait for a current view.
        if v.cluster.primary == 0 || !v.current {
            return Ok(());
        }
        let e = &mut self.engines[i];
        if !v.is_primary() {
            if v.served != 0 {
                // A deposed primary's directory is set aside.
                e.disk = Disk::default();
                world.nodes[i].shared.forget.store(true, Ordering::Release);
            }
            e.mem = e.disk.recover();
            note!(t, "node {} starts as a replica of {} at pepoch {}", e.id, v.cluster.primary, e.disk.pepoch);
            let (pepoch, clock) = (e.disk.pepoch, e.disk.top());
            e.role = Role::Backup(Box::new(Standby {
                following: v.cluster.primary,
                conn: None,
                retry_at: t,
                sealed: [pepoch; STREAMS],
                heard: [false; STREAMS],
                queue: Vec::new(),
                released: 0,
                view: 0,
                applied: pepoch,
                top: 0,
                clock,
                last_heard: t,
                refused: false,
            }));
            return self.check_memory(i, "a replica's recovery");
        }
        // Opened as the primary's database: recovery voids the tail above
        // pepoch, and epochs go on above it, in a new term if it ran
        // before (`Database::open` of a replication primary).
        let (top, pepoch) = (e.disk.top(), e.disk.pepoch);
        if top > pepoch {
            e.disk.voids.push((pepoch + 1, top));
        }
        let mut first = top.max(pepoch) + 1;
        if top > 0 && self.broken != Some(Broken::RestartKeepsTerm) {
            let (promotion, void) = rules::promotion(pepoch, top, &e.disk.voids, boundary, self.rng.next());
            e.disk.voids.extend(void);
            e.disk.promotions.push(promotion);
            first = promotion.first;
        }
        e.mem = e.disk.recover();
        note!(t, "node {} starts as the primary at pepoch {pepoch}, epochs from {first}", e.id);
        self.become_primary(i, t, v, first)
    }

    /// Node `i` serves as the primary from epoch `first`.
    fn become_primary(&mut self, i: usize, t: u64, v: &crate::View, first: u64) -> Result<(), String> {
        self.check_memory(i, "a new primary")?;
        let e = &mut self.engines[i];
        let term = e.disk.term();
        let writer = *self.truth.writers.entry(term).or_insert(e.id);
        if writer != e.id {
            return Err(format!("node {} writes term {term:?}, which node {writer} wrote", e.id));
        }
        e.role = Role::Primary(Box::new(Primary {
            appointment: v.cluster.appointment,
            term,
            epoch: first,
            next_epoch_at: t + EPOCH,
            backlog: Default::default(),
            evicted: [e.disk.pepoch; STREAMS],
            last_seal: [0; STREAMS],
            sync_at: None,
            limit: u64::MAX,
            released: 0,
            peers: Vec::new(),
            incoming: Vec::new(),
            checked: false,
        }));
        Ok(())
    }

    /// Every transaction any primary released is in node `i`'s memory
    /// (under `async`, the ones missing are counted as lost instead).
    fn check_released(&mut self, i: usize) -> Result<(), String> {
        let e = &self.engines[i];
        for (&rt, &r) in &self.truth.released {
            for (_, txns) in self.truth.by_epoch.range(..=r) {
                for &(x, w) in txns.iter().filter(|(x, w)| *w == rt && !e.mem.contains(x)) {
                    if self.safety == Safety::Async {
                        self.truth.lost.insert(x);
                    } else {
                        return Err(format!(
                            "node {} releases as the primary without transaction {x} of term {w:?}, released at epoch {r}",
                            e.id
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A backup appointed: replay everything persisted, void the rest,
    /// and begin a new term above everything it holds.
    fn promote(&mut self, i: usize, t: u64, v: &crate::View) -> Result<(), String> {
        let Role::Backup(b) = std::mem::replace(&mut self.engines[i].role, Role::Starting) else { return Ok(()) };
        if let Some(c) = b.conn {
            self.conns[c].broken = true;
            self.conns[c].reset_at = Some(t + MS);
        }
        let e = &mut self.engines[i];
        let pepoch = e.disk.pepoch;
        let target = rules::replay_target(pepoch, b.released, true);
        let replayed = b.queue.iter().filter(|x| x.epoch > b.applied && x.epoch <= target && !e.disk.is_void(x.epoch));
        e.mem.extend(replayed.flat_map(|x| x.txns.iter().copied()));
        let (promotion, void) = rules::promotion(pepoch, b.top.max(b.clock), &e.disk.voids, boundary, self.rng.next());
        let first = promotion.first;
        self.check_memory(i, "a promoted backup")?;
        let e = &mut self.engines[i];
        e.disk.voids.extend(void);
        e.disk.promotions.push(promotion);
        self.out.promotions += 1;
        note!(t, "node {} promoted: {promotion:?}", e.id);
        self.become_primary(i, t, v, first)
    }

    /// Memory holds exactly the history's transactions up to what it
    /// applied (a standby) or all of it (a primary).
    fn check_memory(&self, i: usize, what: &str) -> Result<(), String> {
        let e = &self.engines[i];
        let through = match &e.role {
            Role::Backup(b) => b.applied,
            _ => e.disk.pepoch,
        };
        let want = self.truth.expected(&e.disk.promotions, 0, through);
        if e.mem == want {
            return Ok(());
        }
        Err(format!(
            "{what}: node {} holds through epoch {through} {} (promotions {:?}, voids {:?})",
            e.id,
            mismatch(&e.mem, &want),
            e.disk.promotions,
            e.disk.voids
        ))
    }

    /// A refused backup sets its directory aside and starts empty, but
    /// only once the committed in-sync set leaves it out: until then it
    /// may be appointed, and its directory is what it was counted in sync
    /// for (`epochdb-cli`'s `cluster.rs` waits the same way).
    fn set_aside_if_out(&mut self, i: usize, t: u64, in_sync: &[u64]) {
        let e = &mut self.engines[i];
        let Role::Backup(b) = &mut e.role else { return };
        if !b.refused || in_sync.contains(&e.id) {
            return;
        }
        note!(t, "node {} sets its directory aside", e.id);
        e.disk = Disk::default();
        e.mem.clear();
        (b.queue, b.view, b.applied, b.released, b.top, b.clock, b.refused) = (Vec::new(), 0, 0, 0, 0, 0, false);
    }

    fn backup_step(&mut self, i: usize, t: u64, world: &World, in_sync: &[u64]) -> Result<(), String> {
        let id = i as u64 + 1;
        self.set_aside_if_out(i, t, in_sync);
        let Role::Backup(b) = &self.engines[i].role else { return Ok(()) };
        if b.refused {
            return self.replay(i);
        }
        let (conn, following, retry_at, last_heard) = (b.conn, b.following, b.retry_at, b.last_heard);
        if let Some(c) = conn {
            let noticed = self.conns[c].broken && self.conns[c].reset_at.is_some_and(|r| r <= t);
            if noticed || t > last_heard + IDLE_TIMEOUT {
                self.conns[c].broken = true;
                self.disconnected(i, t);
                return self.replay(i);
            }
            while self.conns[c].down.front().is_some_and(|m| m.0 <= t) && !self.conns[c].broken {
                let (_, m) = self.conns[c].down.pop_front().expect("a message");
                self.backup_receive(i, c, m, t, world)?;
            }
        } else if t >= retry_at {
            let p = following as usize - 1;
            let listening = matches!(self.engines[p].role, Role::Primary(_));
            if !listening || world.cut.contains(&(id, following)) || world.cut.contains(&(following, id)) {
                self.disconnected(i, t);
                return self.replay(i);
            }
            let c = self.conns.len();
            let (down, up) = (VecDeque::new(), VecDeque::new());
            self.conns.push(Conn { primary: following, backup: id, down, up, broken: false, reset_at: None });
            if let Role::Primary(pr) = &mut self.engines[p].role {
                pr.incoming.push(c);
            }
            let e = &mut self.engines[i];
            let (pepoch, term, top) = (e.disk.pepoch, e.disk.term(), e.disk.top());
            if let Role::Backup(b) = &mut e.role {
                (b.conn, b.last_heard) = (Some(c), t);
                (b.sealed, b.heard) = ([pepoch; STREAMS], [false; STREAMS]);
            }
            self.send(c, false, Msg::Hello { node: id, pepoch, top, term }, t, world);
        }
        self.replay(i)
    }

    /// The replica follows the primary `to` (`Backup::follow`): its
    /// connection to the old one ends, and it connects to `to` at once.
    fn follow(&mut self, i: usize, t: u64, to: u64) {
        let Role::Backup(b) = &mut self.engines[i].role else { return };
        note!(t, "node {} follows node {to}", i + 1);
        if let Some(c) = b.conn.take() {
            self.conns[c].broken = true;
            self.conns[c].reset_at = Some(t + MS);
        }
        (b.following, b.retry_at) = (to, t);
        self.out.follows += 1;
    }

    /// The backup's connection is gone: it connects again after a while.
    fn disconnected(&mut self, i: usize, t: u64) {
        if let Role::Backup(b) = &mut self.engines[i].role {
            (b.conn, b.retry_at) = (None, t + RETRY);
        }
    }

    fn backup_receive(&mut self, i: usize, c: usize, m: Msg, t: u64, world: &World) -> Result<(), String> {
        let e = &mut self.engines[i];
        let Role::Backup(b) = &mut e.role else { return Ok(()) };
        b.last_heard = t;
        match m {
            Msg::Refuse => {
                // Diverged: its directory is set aside once the control
                // plane no longer counts it in sync (`set_aside_if_out`).
                note!(t, "node {} refused as diverged", e.id);
                self.out.refused += 1;
                self.conns[c].broken = true;
                (b.conn, b.retry_at, b.refused) = (None, t + RETRY, true);
            }
            Msg::Welcome { promotions, voids } => {
                let changed = promotions != e.disk.promotions;
                e.disk.promotions = promotions;
                for v in voids {
                    if !e.disk.voids.contains(&v) {
                        e.disk.voids.push(v);
                    }
                }
                if changed {
                    return self.check_memory(i, "a backup taking a new history");
                }
            }
            Msg::Block(x) => {
                b.top = b.top.max(x.epoch);
                e.disk.unsynced.push(x.clone());
                b.queue.push(x);
            }
            Msg::Seal { stream, epoch } => {
                b.sealed[stream] = b.sealed[stream].max(epoch);
                b.heard[stream] = true;
                if let Some(low) = rules::to_persist(&b.sealed, &b.heard, e.disk.pepoch) {
                    let synced = std::mem::take(&mut e.disk.unsynced);
                    e.disk.synced.extend(synced);
                    e.disk.pepoch = low;
                    note!(t, "node {} persisted {low}", e.id);
                    self.send(c, false, Msg::Ack(low), t, world);
                }
            }
            Msg::Released(r) => b.released = b.released.max(r),
            Msg::Hello { .. } | Msg::Ack(_) => return Err("a backup got a backup's message".into()),
        }
        Ok(())
    }

    /// Replays what is persisted and released, and moves the view.
    fn replay(&mut self, i: usize) -> Result<(), String> {
        let e = &mut self.engines[i];
        let Role::Backup(b) = &mut e.role else { return Ok(()) };
        let promoting = self.broken == Some(Broken::ReplayUnreleased);
        let target = rules::replay_target(e.disk.pepoch, b.released, promoting);
        if target <= b.view || target < b.applied {
            return Ok(());
        }
        let (from, disk) = (b.applied, &e.disk);
        let mut got = BTreeSet::new();
        for x in b.queue.iter().filter(|x| x.epoch > from && x.epoch <= target && !disk.is_void(x.epoch)) {
            got.extend(x.txns.iter().copied());
        }
        b.queue.retain(|x| x.epoch > target);
        let want = self.truth.expected(&e.disk.promotions, from, target);
        if got != want {
            return Err(format!(
                "node {} replayed epochs {}..={target}: {} (promotions {:?})",
                e.id,
                from + 1,
                mismatch(&got, &want),
                e.disk.promotions
            ));
        }
        e.mem.extend(got);
        (b.applied, b.view) = (target, target);
        let released = self.truth.released_in(&e.disk.promotions);
        if b.view > released {
            return Err(format!("node {}'s read view {} is above the released epoch {released}", e.id, b.view));
        }
        Ok(())
    }

    fn primary_step(&mut self, i: usize, t: u64, world: &World, v: &crate::View) -> Result<(), String> {
        // Connections: new backups, acknowledgements, resets.
        let Role::Primary(p) = &self.engines[i].role else { return Ok(()) };
        let conns: Vec<usize> = p.peers.iter().map(|x| x.conn).chain(p.incoming.iter().copied()).collect();
        for c in conns {
            if self.conns[c].broken {
                if self.conns[c].reset_at.is_some_and(|r| r <= t) {
                    self.drop_peer(i, c);
                }
                continue;
            }
            while self.conns[c].up.front().is_some_and(|m| m.0 <= t) {
                let (_, m) = self.conns[c].up.pop_front().expect("a message");
                self.primary_receive(i, c, m, t, world)?;
            }
        }
        let Role::Primary(p) = &mut self.engines[i].role else { return Ok(()) };
        let late: Vec<usize> = p.peers.iter().filter(|x| t > x.last_ack + ACK_TIMEOUT).map(|x| x.conn).collect();
        for c in late {
            self.conns[c].broken = true;
            self.drop_peer(i, c);
        }
        self.commit(i, t, world);
        // The local log sync.
        let e = &mut self.engines[i];
        let Role::Primary(p) = &mut e.role else { return Ok(()) };
        if let Some((at, epoch)) = p.sync_at.filter(|s| s.0 <= t) {
            let (synced, rest): (Vec<_>, Vec<_>) = e.disk.unsynced.drain(..).partition(|x| x.epoch <= epoch);
            e.disk.synced.extend(synced);
            e.disk.unsynced = rest;
            e.disk.pepoch = e.disk.pepoch.max(epoch);
            p.sync_at = (p.epoch - 1 > epoch).then_some((at + MS / 5 + self.rng.below(3 * MS), p.epoch - 1));
        }
        self.release(i, t, world, v)
    }

    /// The transactions of one epoch, logged per stream, shipped before
    /// the log is synced, and sealed.
    fn commit(&mut self, i: usize, t: u64, world: &World) {
        let e = &mut self.engines[i];
        let Role::Primary(p) = &mut e.role else { return };
        if t < p.next_epoch_at {
            return;
        }
        p.next_epoch_at += EPOCH;
        let (epoch, term) = (p.epoch, p.term);
        p.epoch += 1;
        let mut frames = Vec::new();
        for stream in 0..STREAMS {
            let n = self.rng.below(3);
            let txns: Vec<u64> = (0..n).map(|k| self.truth.next_txn + k).collect();
            self.truth.next_txn += n;
            if !txns.is_empty() {
                self.truth.by_epoch.entry(epoch).or_default().extend(txns.iter().map(|&x| (x, term)));
                e.mem.extend(txns.iter().copied());
                let x = Block { epoch, txns };
                e.disk.unsynced.push(x.clone());
                p.backlog[stream].push_back(x.clone());
                while p.backlog[stream].len() > BACKLOG {
                    let old = p.backlog[stream].pop_front().expect("a block");
                    p.evicted[stream] = p.evicted[stream].max(old.epoch);
                }
                frames.push(Msg::Block(x));
            }
            p.last_seal[stream] = epoch;
            frames.push(Msg::Seal { stream, epoch });
        }
        if p.sync_at.is_none() {
            p.sync_at = Some((t + MS / 5 + self.rng.below(3 * MS), epoch));
        }
        let conns: Vec<usize> = p.peers.iter().map(|x| x.conn).collect();
        for m in frames {
            for &c in &conns {
                self.send(c, true, m.clone(), t, world);
            }
        }
    }

    fn primary_receive(&mut self, i: usize, c: usize, m: Msg, t: u64, world: &World) -> Result<(), String> {
        let e = &mut self.engines[i];
        let Role::Primary(p) = &mut e.role else { return Ok(()) };
        match m {
            Msg::Hello { node, pepoch, top, term } => {
                p.incoming.retain(|&x| x != c);
                note!(t, "node {} hello from {node} at pepoch {pepoch} term {term:?}; evicted {:?}", e.id, p.evicted);
                if rules::diverged(&e.disk.promotions, term.0, term.1, term.2, pepoch, top).is_some() {
                    self.send(c, true, Msg::Refuse, t, world);
                    return Ok(());
                }
                let welcome = Msg::Welcome { promotions: e.disk.promotions.clone(), voids: e.disk.voids.clone() };
                let mut frames = vec![welcome];
                if rules::resumes_from_backlog(p.evicted.iter().copied(), pepoch) {
                    for s in 0..STREAMS {
                        let resend = p.backlog[s].iter().filter(|x| rules::resend(x.epoch, pepoch));
                        frames.extend(resend.cloned().map(Msg::Block));
                    }
                } else {
                    self.out.catch_ups_from_files += 1;
                    note!(t, "node {}: {node} catches up from the files above {pepoch}", e.id);
                    frames.extend(e.disk.blocks().filter(|x| x.epoch > pepoch).cloned().map(Msg::Block));
                }
                for (stream, &epoch) in p.last_seal.iter().enumerate().filter(|(_, &s)| s > 0) {
                    frames.push(Msg::Seal { stream, epoch });
                }
                p.peers.push(Peer { node, conn: c, acked: pepoch, in_sync: false, last_ack: t });
                for m in frames {
                    self.send(c, true, m, t, world);
                }
            }
            Msg::Ack(a) => {
                let safety = self.safety;
                let Some(x) = p.peers.iter_mut().find(|x| x.conn == c) else { return Ok(()) };
                x.acked = x.acked.max(a);
                x.last_ack = t;
                if !x.in_sync {
                    if safety != Safety::Async {
                        p.limit = p.limit.min(x.acked);
                    }
                    x.in_sync = rules::joins(p.released, x.acked);
                }
            }
            _ => return Err("a primary got a primary's message".into()),
        }
        Ok(())
    }

    fn drop_peer(&mut self, i: usize, c: usize) {
        if let Role::Primary(p) = &mut self.engines[i].role {
            p.peers.retain(|x| x.conn != c);
            p.incoming.retain(|&x| x != c);
        }
    }

    /// The safety mode's limit, the in-sync set through the control
    /// plane, and release under the lease.
    fn release(&mut self, i: usize, t: u64, world: &World, v: &crate::View) -> Result<(), String> {
        let id = i as u64 + 1;
        let e = &mut self.engines[i];
        let Role::Primary(p) = &mut e.role else { return Ok(()) };
        let shared = &world.nodes[i].shared;
        let in_sync = || p.peers.iter().filter(|x| x.in_sync);
        let (held, propose) = rules::membership(in_sync().map(|x| x.node), &v.cluster.in_sync);
        if let Some(set) = propose {
            InSync(shared.clone()).propose(set);
        }
        let acked: Vec<u64> = in_sync().map(|x| x.acked).collect();
        let backups = self.data as usize - 1;
        if let Some(limit) = rules::release_limit(self.safety, &acked, backups, p.released) {
            p.limit = if held { limit.min(p.released) } else { limit };
        }
        if self.broken == Some(Broken::SyncIgnoresBackups) {
            p.limit = u64::MAX;
        }
        let valid = shared.lease.is_valid_at(world.local(id, t));
        let released = rules::release(p.released, e.disk.pepoch, p.limit, valid);
        if released <= p.released {
            return Ok(());
        }
        if !p.checked {
            // A node may open as the primary of an appointment that has
            // ended (it learns so and exits); only one that may release
            // must hold every transaction any primary released.
            p.checked = true;
            self.check_released(i)?;
        }
        let Role::Primary(p) = &mut self.engines[i].role else { return Ok(()) };
        p.released = released;
        self.out.released_epochs += 1;
        let r = self.truth.released.entry(p.term).or_default();
        *r = (*r).max(released);
        let releaser = *self.truth.releasers.entry(p.appointment).or_insert(id);
        if releaser != id {
            return Err(format!("nodes {releaser} and {id} both released under appointment {}", p.appointment));
        }
        let conns: Vec<usize> = p.peers.iter().map(|x| x.conn).collect();
        for c in conns {
            self.send(c, true, Msg::Released(released), t, world);
        }
        Ok(())
    }

    /// Once calm, a primary releases again and every backup follows it.
    fn check_progress(&mut self, t: u64, world: &World) -> Result<(), String> {
        if t + 3_000 * MS != world.end && t + MS != world.end {
            return Ok(());
        }
        let primary = self.engines.iter().find_map(|e| match &e.role {
            Role::Primary(p) => Some((e.id, p.released)),
            _ => None,
        });
        let Some((id, released)) = primary else {
            let states: Vec<String> = world.nodes.iter().map(describe).collect();
            return Err(format!("no primary {} s before the end: {}", (world.end - t) / MS / 1000, states.join("; ")));
        };
        match self.mark {
            None => self.mark = Some((id, released)),
            Some((was, r)) => {
                if released <= r {
                    let states: Vec<String> = world.nodes.iter().map(describe).collect();
                    let roles: Vec<String> =
                        self.engines.iter().map(|e| format!("{}: {}", e.id, e.role_name())).collect();
                    return Err(format!(
                        "no progress in the last 3 s: node {was} had released {r}, node {id} {released}; engines {}; {}",
                        roles.join(", "),
                        states.join("; ")
                    ));
                }
                for e in &self.engines {
                    if let Role::Backup(b) = &e.role {
                        if b.view < r {
                            return Err(format!(
                                "node {}'s view {} is still below {r}, released 3 s ago",
                                e.id, b.view
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> Vec<u64> {
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        match env("EPOCHDB_SIM_SEED") {
            Some(s) => vec![s],
            None => (1..=env("EPOCHDB_SIM_SEEDS").unwrap_or(200)).collect(),
        }
    }

    fn shape(seed: u64) -> (u64, u64) {
        // Two data nodes and a witness, or three data nodes and two witnesses.
        if seed.is_multiple_of(2) {
            (2, 1)
        } else {
            (3, 2)
        }
    }

    #[test]
    fn sync_loses_no_released_transaction_and_reads_see_a_prefix() {
        let mut total = DataOutcome::default();
        for seed in seeds() {
            let (data, witnesses) = shape(seed);
            let safety = if seed % 3 == 0 { Safety::VerySafe } else { Safety::Sync };
            let o = run(seed, data, witnesses, 30, safety, None);
            if let Some(v) = &o.violation {
                panic!("seed {seed} ({data} data nodes, {witnesses} witnesses, {safety:?}): {v}; replay: EPOCHDB_SIM_SEED={seed}");
            }
            total.promotions += o.promotions;
            total.catch_ups_from_files += o.catch_ups_from_files;
            total.refused += o.refused;
            total.follows += o.follows;
            total.released_txns += o.released_txns;
            total.crashes += o.crashes;
            total.handovers += o.handovers;
            total.released_epochs += o.released_epochs;
        }
        eprintln!("{total:?}");
        assert!(total.promotions > 0 && total.catch_ups_from_files > 0 && total.follows > 0, "{total:?}");
    }

    /// Under `async` a failover may lose what the backups had not
    /// persisted: counted, not a violation; every other check holds.
    #[test]
    fn async_reports_its_loss_window() {
        let (mut released, mut lost) = (0, 0);
        for seed in 1..=40 {
            let (data, witnesses) = shape(seed);
            let o = run(seed, data, witnesses, 30, Safety::Async, None);
            if let Some(v) = &o.violation {
                panic!("seed {seed} (async): {v}");
            }
            (released, lost) = (released + o.released_txns, lost + o.lost_txns);
        }
        eprintln!("async: {lost} of {released} released transactions lost in failovers");
        assert!(lost > 0, "40 seeds of async failovers lost nothing: is the loss counted?");
    }

    /// Each rule broken on purpose is caught within a few seeds.
    #[test]
    fn broken_rules_are_caught() {
        for (broken, expect) in [
            (Broken::SyncIgnoresBackups, "releases as the primary without transaction"),
            (Broken::ReplayUnreleased, "above the released epoch"),
            // (A term written twice: its epochs mix in a backup's replay,
            // or two nodes write it.)
            (Broken::RestartKeepsTerm, "of its history"),
        ] {
            let caught = (1..=60u64).find_map(|seed| {
                let (data, witnesses) = shape(seed);
                run(seed, data, witnesses, 30, Safety::Sync, Some(broken)).violation.map(|v| (seed, v))
            });
            let (seed, v) = caught.unwrap_or_else(|| panic!("{broken:?} went unnoticed in 60 seeds"));
            eprintln!("{broken:?}: seed {seed}: {v}");
            assert!(v.contains(expect), "{broken:?}, seed {seed}: {v}");
        }
    }
}

//! The primary's side: one stream per logger, shipped to every backup.
//!
//! Loggers hand each sealed block and each seal to the [`Hub`] (the
//! durability [`Tap`]) right after writing it and before their own sync.
//! The hub frames it once, keeps it in the stream's backlog (for backups
//! that reconnect) and queues the frame to every backup, never blocking: a
//! backup whose queue outgrows the backlog is disconnected instead. Each
//! backup has a sender thread that writes its queue to the socket and a
//! session thread that did the handshake and then reads acknowledgements.
//! Under `Sync` and `VerySafe` the session updates the release limit
//! ([`Durable::set_limit`]) from the in-sync backups' acknowledged epochs.
//! A backup behind the backlog (or new) catches up from the primary's
//! checkpoint and log files first (`send_files`; ARCHITECTURE.md,
//! "Catching up from files").

use super::rules;
use super::wire::{self, Msg};
use super::{PrimaryOptions, Safety};
use crate::durability::datadir::manifest::Manifest;
use crate::durability::datadir::Dirs;
use crate::durability::log::logger::{Durable, Tap};
use crate::durability::log::{self, lock};
use crate::durability::{frame, recovery, Retention};
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A backup's view from the primary (`Database::replication_status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupState {
    /// Its address as the primary sees it.
    pub addr: SocketAddr,
    /// Its node id in the control plane (0: none).
    pub node: u64,
    /// The last epoch it acknowledged as persisted.
    pub acked: u64,
    /// Its hot standby's read view: every epoch `<=` this is replayed and
    /// visible to its readers.
    pub replayed: u64,
    /// Whether it counts for release (it has caught up).
    pub in_sync: bool,
    /// Bytes queued to it and not yet written to its socket.
    pub queued_bytes: u64,
    /// Time since its last acknowledgement.
    pub since_ack: Duration,
}

/// The shipper, shared by the loggers (as the tap) and the threads below.
pub(crate) struct Hub {
    opts: PrimaryOptions,
    /// The primary's directories: a backup behind the backlog catches up
    /// from their files.
    dirs: Dirs,
    /// Which old log files the checkpointer keeps for the backups.
    retention: Arc<Retention>,
    /// The manifest as it was at start, for its promotions (the term
    /// history), which never change while this primary runs: only a
    /// standby is promoted.
    history: Manifest,
    state: Mutex<State>,
    /// Buffers of frames that left the backlog, for the next blocks. A
    /// freed frame goes back to the allocator, which soon returns its pages
    /// to the kernel; the next frame then faults them in zeroed again,
    /// which was 4.8% of a 1-thread TPC-C primary's CPU with one backup.
    spare: Mutex<Vec<Vec<u8>>>,
    /// The senders to wake when it grows. A leaf lock: release happens
    /// under `state` (the limit is set there), so it cannot take `state`.
    senders: Mutex<Vec<std::thread::Thread>>,
}

struct State {
    /// Per stream: recent frames, for backups that reconnect.
    backlog: Vec<Backlog>,
    /// Per stream: the last seal's frame.
    sealed: Vec<Option<Frame>>,
    /// The manifest's encoding, for a backup's welcome.
    manifest: Vec<u8>,
    peers: Vec<Arc<Peer>>,
}

type Frame = Arc<Vec<u8>>;

/// Frame buffers kept for reuse (`Hub::spare`): enough for every stream's
/// next block, whatever order the loggers come in.
const SPARE_FRAMES: usize = 16;

#[derive(Default)]
struct Backlog {
    frames: VecDeque<(u64, Frame)>, // (hi, Block frame)
    bytes: usize,
    /// The largest epoch of a block no longer here: a backup must have
    /// persisted it to resume from the backlog.
    evicted: u64,
}

struct Peer {
    addr: SocketAddr,
    /// Its node id in the control plane (0: none).
    node: u64,
    sock: TcpStream,
    queue: Mutex<(VecDeque<Frame>, usize)>,
    acked: AtomicU64,
    replayed: AtomicU64,
    in_sync: AtomicBool,
    dead: AtomicBool,
    last_ack: Mutex<Instant>,
    sender: OnceLock<std::thread::Thread>,
}

impl Peer {
    fn push(&self, frame: &Frame, cap: usize) -> bool {
        let mut q = lock(&self.queue);
        if q.1 + frame.len() > cap {
            return false;
        }
        q.1 += frame.len();
        q.0.push_back(frame.clone());
        true
    }

    fn kill(&self, why: &str) {
        if !self.dead.swap(true, Ordering::AcqRel) {
            ::log::warn!("backup {} disconnected: {why}", self.addr);
        }
        self.in_sync.store(false, Ordering::Release);
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(t) = self.sender.get() {
            t.unpark();
        }
    }
}

impl Hub {
    /// Queues `frame` to every live backup; one that cannot take it is
    /// too far behind and is dropped (the logger never waits for it).
    fn broadcast(&self, st: &State, frame: &Frame) {
        for p in &st.peers {
            if p.dead.load(Ordering::Acquire) {
                continue;
            }
            if p.push(frame, self.opts.backlog_bytes) {
                if let Some(t) = p.sender.get() {
                    t.unpark();
                }
            } else {
                p.kill("it fell further behind than the backlog");
            }
        }
    }
}

impl Tap for Hub {
    fn block(&self, stream: usize, lo: u64, hi: u64, block: &[u8]) {
        let need = block.len() + wire::BLOCK_FRAME_EXTRA;
        let buf = {
            // The smallest that fits, so that big buffers stay for full
            // blocks; new ones in whole pages, so that they fit again.
            let mut spare = lock(&self.spare);
            let best = (spare.iter().enumerate())
                .filter(|(_, b)| b.capacity() >= need)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            best.map_or_else(|| Vec::with_capacity(need.next_multiple_of(4096)), |i| spare.swap_remove(i))
        };
        let frame = Arc::new(wire::block_frame(buf, stream as u16, lo, hi, block));
        let mut freed = Vec::new();
        let mut st = lock(&self.state);
        let b = &mut st.backlog[stream];
        // Counted by capacity: what the backlog holds in memory.
        b.bytes += frame.capacity();
        b.frames.push_back((hi, frame.clone()));
        while b.bytes > self.opts.backlog_bytes && b.frames.len() > 1 {
            let (h, f) = b.frames.pop_front().expect("more than one frame");
            b.bytes -= f.capacity();
            b.evicted = b.evicted.max(h);
            // Reused, unless still queued to a backup (that queue frees it).
            freed.extend(Arc::into_inner(f));
        }
        self.broadcast(&st, &frame);
        drop(st);
        let mut spare = lock(&self.spare);
        let room = SPARE_FRAMES.saturating_sub(spare.len());
        spare.extend(freed.into_iter().take(room));
    }

    fn seal(&self, stream: usize, epoch: u64) {
        let mut frame = Vec::new();
        Msg::Seal { stream: stream as u16, epoch }.encode(&mut frame);
        let frame = Arc::new(frame);
        let mut st = lock(&self.state);
        st.sealed[stream] = Some(frame.clone());
        self.broadcast(&st, &frame);
    }

    fn manifest(&self, encoded: &[u8]) {
        let mut frame = Vec::new();
        Msg::Manifest { manifest: encoded.to_vec() }.encode(&mut frame);
        let mut st = lock(&self.state);
        st.manifest = encoded.to_vec();
        self.broadcast(&st, &Arc::new(frame));
    }
}

/// A running primary: the listener and its backups' threads. Stopped on
/// drop (backups see the connection close).
pub(crate) struct Primary {
    hub: Arc<Hub>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    listener: Option<JoinHandle<()>>,
}

impl Primary {
    /// Listens for backups and taps `durable`'s loggers (`streams` of them).
    /// `manifest` is the current manifest's encoding; `pepoch` the local
    /// pepoch recovery left, below which nothing is in the backlog.
    pub fn start(
        opts: PrimaryOptions,
        durable: Arc<Durable>,
        dirs: Dirs,
        retention: Arc<Retention>,
        manifest: Vec<u8>,
    ) -> Result<Primary> {
        let streams = dirs.log.len();
        let listener = TcpListener::bind(opts.listen)
            .map_err(|e| Error::Replication(format!("listen on {} for backups: {e}", opts.listen)))?;
        let addr = listener.local_addr().map_err(|e| Error::Replication(format!("listen address: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Error::Replication(format!("listener: {e}")))?;
        let history = Manifest::decode_current(&manifest)
            .ok_or_else(|| Error::Replication("the primary's manifest does not decode".into()))?;
        let start = durable.local_pepoch();
        let state = State {
            backlog: (0..streams).map(|_| Backlog { evicted: start, ..Backlog::default() }).collect(),
            sealed: vec![None; streams],
            manifest,
            peers: Vec::new(),
        };
        retention.cap.store(opts.retain_bytes, Ordering::Release);
        let senders = Mutex::new(Vec::new());
        let hub = Arc::new(Hub {
            opts,
            dirs,
            retention,
            history,
            state: Mutex::new(state),
            spare: Mutex::default(),
            senders,
        });
        durable.set_tap(hub.clone());
        if let Some(m) = &hub.opts.membership {
            // A newly committed set may let release go on.
            let (h, d) = (Arc::downgrade(&hub), Arc::downgrade(&durable));
            m.subscribe(Box::new(move || {
                if let (Some(h), Some(d)) = (h.upgrade(), d.upgrade()) {
                    update_limit(&h, &d);
                }
            }));
            update_limit(&hub, &durable);
        }
        let h = hub.clone();
        // Each growth of the released epoch wakes the senders, which pass it on.
        durable.listen(Box::new(move |_| lock(&h.senders).iter().for_each(|t| t.unpark())));
        if hub.opts.safety == Safety::VerySafe {
            durable.set_limit(durable.pepoch()); // nothing more until every backup is in
        }
        let stop = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let (h, d, s, t) = (hub.clone(), durable.clone(), stop.clone(), threads.clone());
        let listener = std::thread::Builder::new()
            .name("epochdb-repl-listen".into())
            .spawn(move || accept(listener, h, d, s, t))
            .map_err(|e| Error::Replication(format!("start the listener thread: {e}")))?;
        ::log::info!("replication: primary listening for backups on {addr} ({:?})", hub.opts.safety);
        Ok(Primary { hub, addr, stop, threads, listener: Some(listener) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn backups(&self) -> Vec<BackupState> {
        let st = lock(&self.hub.state);
        (st.peers.iter())
            .filter(|p| !p.dead.load(Ordering::Acquire))
            .map(|p| BackupState {
                addr: p.addr,
                node: p.node,
                acked: p.acked.load(Ordering::Acquire),
                replayed: p.replayed.load(Ordering::Acquire),
                in_sync: p.in_sync.load(Ordering::Acquire),
                queued_bytes: lock(&p.queue).1 as u64,
                since_ack: lock(&p.last_ack).elapsed(),
            })
            .collect()
    }

    pub fn safety(&self) -> Safety {
        self.hub.opts.safety
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for p in lock(&self.hub.state).peers.drain(..) {
            p.kill("the primary is closing");
        }
        if let Some(t) = self.listener.take() {
            let _ = t.join();
        }
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

fn accept(
    listener: TcpListener,
    hub: Arc<Hub>,
    durable: Arc<Durable>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((sock, addr)) => {
                let (h, d, s) = (hub.clone(), durable.clone(), stop.clone());
                let t = std::thread::Builder::new().name("epochdb-repl-session".into()).spawn(move || {
                    let sock = match &h.opts.transport {
                        Some(t) => match t.accepted(sock) {
                            Ok(s) => s,
                            Err(e) => return ::log::warn!("backup {addr}: {e}"),
                        },
                        None => sock,
                    };
                    if let Err(e) = session(sock, addr, &h, &d, &s) {
                        ::log::warn!("backup {addr}: {e}");
                    }
                });
                if let Ok(t) = t {
                    let mut ts = lock(&threads);
                    ts.retain(|t| !t.is_finished());
                    ts.push(t);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                ::log::warn!("replication: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// One backup: handshake, then a sender thread, then acknowledgements.
fn session(sock: TcpStream, addr: SocketAddr, hub: &Arc<Hub>, durable: &Arc<Durable>, stop: &AtomicBool) -> Result<()> {
    let io = |e: std::io::Error| Error::Replication(format!("socket: {e}"));
    sock.set_nonblocking(false).map_err(io)?;
    sock.set_nodelay(true).map_err(io)?;
    sock.set_read_timeout(Some(hub.opts.ack_timeout)).map_err(io)?;
    sock.set_write_timeout(Some(hub.opts.ack_timeout)).map_err(io)?;
    let mut reader = std::io::BufReader::new(sock.try_clone().map_err(io)?);
    let mut body = Vec::new();
    let ours = wire::nonce()?;
    wire::send(&mut &sock, &Msg::Challenge { version: wire::VERSION, nonce: ours })?;
    let secret = hub.opts.secret.as_deref().unwrap_or_default().as_bytes();
    // Unauthenticated yet: a hello is small, and nothing larger is read.
    let (pepoch, term, theirs, node) = match wire::recv_at_most(&mut reader, &mut body, wire::MAX_HANDSHAKE)? {
        Some(Msg::Hello { version, .. }) if version != wire::VERSION => {
            let reason = format!("protocol version {version}; this primary speaks {}", wire::VERSION);
            return refuse(&sock, reason);
        }
        Some(Msg::Hello { pepoch, top, term, term_start, term_id, nonce, proof, node, .. }) => {
            if !wire::verify(secret, wire::Side::Backup, &ours, &nonce, &proof) {
                return refuse(&sock, "authentication failed: the backup does not hold this primary's secret".into());
            }
            (pepoch, (term, term_start, term_id, top), nonce, node)
        }
        other => return Err(Error::Replication(format!("expected a hello, got {other:?}"))),
    };
    let peer = Arc::new(Peer {
        addr,
        node,
        sock: sock.try_clone().map_err(io)?,
        queue: Mutex::new((VecDeque::new(), 0)),
        acked: AtomicU64::new(pepoch),
        replayed: AtomicU64::new(0),
        in_sync: AtomicBool::new(false),
        dead: AtomicBool::new(false),
        last_ack: Mutex::new(Instant::now()),
        sender: OnceLock::new(),
    });
    // A backup from another history (a deposed primary) never mixes its
    // epochs with ours.
    if let Some(reason) = rules::diverged(&hub.history.promotions, term.0, term.1, term.2, pepoch, term.3) {
        return refuse(&sock, format!("{}{reason}", wire::DIVERGED));
    }
    // Under the hub's lock, so no block falls between the backlog (or the
    // files) and the live stream.
    let mut st = lock(&hub.state);
    let proof = wire::proof(secret, wire::Side::Primary, &ours, &theirs);
    let mut welcome = Vec::new();
    Msg::Welcome { streams: st.backlog.len() as u16, proof, manifest: st.manifest.clone() }.encode(&mut welcome);
    let behind = !rules::resumes_from_backlog(st.backlog.iter().map(|b| b.evicted), pepoch);
    // No checkpoint cleanup removes a file while it is sent (a cleanup
    // already under way may still cut one: `send_files` notices).
    let sending = behind.then(|| hub.retention.sending());
    let files = if behind {
        // Too far behind (or new): from the files, opened now; every block
        // tapped from here on is queued, and a block in both is harmless.
        let opened = Manifest::decode_current(&st.manifest)
            .ok_or_else(|| "the primary's manifest does not decode".to_string())
            .and_then(|m| recovery::open_for_catch_up(&hub.dirs, &m, pepoch, &hub.retention.deleted_through));
        match opened {
            Ok(files) => Some(files),
            Err(reason) => {
                drop(st);
                return refuse(&sock, reason);
            }
        }
    } else {
        None
    };
    {
        let mut q = lock(&peer.queue);
        let mut add = |f: &Frame| {
            q.1 += f.len();
            q.0.push_back(f.clone());
        };
        if files.is_none() {
            add(&Arc::new(welcome.clone()));
            for b in &st.backlog {
                b.frames.iter().filter(|(hi, _)| rules::resend(*hi, pepoch)).for_each(|(_, f)| add(f));
            }
        }
        for s in st.sealed.iter().flatten() {
            add(s);
        }
    }
    st.peers.push(peer.clone());
    hold_logs(hub, &st);
    drop(st);
    if let Some(files) = files {
        // Before the sender starts: the welcome, then the files, then the
        // queue.
        let sent = std::io::Write::write_all(&mut &sock, &welcome)
            .map_err(|e| Error::Replication(format!("send: {e}")))
            .and_then(|()| send_files(&sock, files));
        match sent {
            Ok(bytes) => ::log::info!("replication: backup {addr} caught up from files ({bytes} bytes)"),
            Err(e) => {
                peer.kill(&format!("catching up from files: {e}"));
                lock(&hub.state).peers.retain(|p| !Arc::ptr_eq(p, &peer));
                return Err(e);
            }
        }
    }
    drop(sending); // the files are sent: cleanups may go on
    ::log::info!("replication: backup {addr} connected at epoch {pepoch}");
    let (p, d) = (peer.clone(), durable.clone());
    let sender = std::thread::Builder::new()
        .name("epochdb-repl-send".into())
        .spawn(move || send_loop(&p, &d))
        .map_err(|e| Error::Replication(format!("start a sender thread: {e}")))?;
    let _ = peer.sender.set(sender.thread().clone());
    lock(&hub.senders).push(sender.thread().clone());
    let result = ack_loop(&peer, &mut reader, &mut body, hub, durable, stop);
    peer.kill(match &result {
        Ok(()) => "it closed the connection",
        Err(_) => "its acknowledgements stopped",
    });
    lock(&hub.state).peers.retain(|p| !Arc::ptr_eq(p, &peer));
    lock(&hub.senders).retain(|t| t.id() != sender.thread().id());
    update_limit(hub, durable);
    let _ = sender.join();
    result
}

/// Sends the blocks of `files` holding epochs from each file's `from` on
/// (above the backup's pepoch), each framed as its stream's Block
/// (re-sealed from its payload, so any readable file version ships as the
/// current block format) with only the transactions of those epochs.
/// Returns the bytes sent.
fn send_files(sock: &TcpStream, files: Vec<recovery::Shipped>) -> Result<u64> {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, sock);
    let (mut payload, mut sent) = (Vec::new(), 0u64);
    for mut f in files {
        loop {
            match f.reader.next_block(&mut payload) {
                // A seal marker is this primary's record of its own
                // pepoch; the stream has Seals for that.
                Ok(Some(_)) if frame::is_seal_marker(&payload) => {}
                Ok(Some((_, lo, hi))) if hi >= f.from => {
                    let mut block = frame::new_block(frame::BLOCK_HEADER_LEN + payload.len());
                    let (lo, hi) = if lo >= f.from {
                        block.extend_from_slice(&payload);
                        (lo, hi)
                    } else {
                        let kept = log::retain_from(&payload, f.from, &mut block)
                            .map_err(|e| Error::Replication(format!("a damaged file: {e}")))?;
                        match kept {
                            Some(epochs) => epochs,
                            None => continue,
                        }
                    };
                    frame::seal(&mut block, lo, hi);
                    let bytes = wire::block_frame(Vec::new(), f.stream as u16, lo, hi, &block);
                    std::io::Write::write_all(&mut w, &bytes).map_err(|e| Error::Replication(format!("send: {e}")))?;
                    sent += bytes.len() as u64;
                }
                Ok(Some(_)) => {}
                // A checkpoint's cleanup frees an obsolete file from its
                // end while it is read here: what was sent of it is not
                // all of it. The backup connects again and gets the newer
                // checkpoint instead.
                Ok(None) if f.reader.shrank() => {
                    return Err(Error::Replication("a file was removed while being sent".into()));
                }
                Ok(None) => break,
                // The block a logger is writing now: it is in the queue.
                Err(_) if f.current => break,
                Err(d) => return Err(Error::Replication(format!("a damaged file: {d}"))),
            }
        }
    }
    std::io::Write::flush(&mut w).map_err(|e| Error::Replication(format!("send: {e}")))?;
    Ok(sent)
}

fn refuse(sock: &TcpStream, reason: String) -> Result<()> {
    ::log::warn!("replication: refused a backup: {reason}");
    let mut w = sock;
    wire::send(&mut w, &Msg::Refuse { reason: reason.clone() })?;
    Err(Error::Replication(format!("refused: {reason}")))
}

/// Writes `peer`'s queue to its socket, then the released epoch when it
/// grew (after the blocks: a backup never learns of a release before the
/// blocks that hold it were queued to it).
fn send_loop(peer: &Peer, durable: &Durable) {
    let mut w = &peer.sock;
    let mut batch = Vec::new();
    let mut sent_release = 0;
    while !peer.dead.load(Ordering::Acquire) {
        {
            let mut q = lock(&peer.queue);
            batch.extend(q.0.drain(..));
            q.1 = 0;
        }
        let r = durable.pepoch();
        if r > sent_release {
            let mut frame = Vec::new();
            Msg::Released { epoch: r }.encode(&mut frame);
            batch.push(Arc::new(frame));
            sent_release = r;
        }
        if batch.is_empty() {
            std::thread::park_timeout(Duration::from_millis(50));
            continue;
        }
        for f in batch.drain(..) {
            if let Err(e) = std::io::Write::write_all(&mut w, &f) {
                peer.kill(&format!("send: {e}"));
                return;
            }
        }
    }
}

fn ack_loop(
    peer: &Peer,
    reader: &mut impl std::io::Read,
    body: &mut Vec<u8>,
    hub: &Hub,
    durable: &Durable,
    stop: &AtomicBool,
) -> Result<()> {
    while !stop.load(Ordering::Acquire) && !peer.dead.load(Ordering::Acquire) {
        match wire::recv(reader, body)? {
            None => return Ok(()),
            Some(Msg::Ack { pepoch }) => {
                peer.acked.fetch_max(pepoch, Ordering::AcqRel);
                *lock(&peer.last_ack) = Instant::now();
                if !peer.in_sync.load(Ordering::Acquire) && join(peer, pepoch, hub, durable) {
                    ::log::info!("replication: backup {} in sync at epoch {pepoch}", peer.addr);
                }
                update_limit(hub, durable);
            }
            Some(Msg::Replayed { epoch }) => {
                peer.replayed.fetch_max(epoch, Ordering::AcqRel);
            }
            Some(other) => return Err(Error::Replication(format!("unexpected message from a backup: {other:?}"))),
        }
    }
    Ok(())
}

/// Makes `peer`, which acknowledged `acked`, count for release if it has
/// everything released. The limit is lowered to `acked` before the check,
/// so no release can pass `acked` between the check and the join.
fn join(peer: &Peer, acked: u64, hub: &Hub, durable: &Durable) -> bool {
    let _st = lock(&hub.state);
    if hub.opts.safety != Safety::Async {
        // (`update_limit` raises it again right after.)
        durable.set_limit(durable.limit().min(acked));
    }
    let joined = rules::joins(durable.pepoch(), acked);
    peer.in_sync.store(joined, Ordering::Release);
    joined
}

/// Keeps the old log files every connected backup may still need: those
/// above the smallest acknowledged epoch (for a backup catching up from
/// files, the epoch it said it had).
fn hold_logs(hub: &Hub, st: &State) {
    let live = st.peers.iter().filter(|p| !p.dead.load(Ordering::Acquire));
    let hold = live.map(|p| p.acked.load(Ordering::Acquire)).min().unwrap_or(u64::MAX);
    hub.retention.hold.store(hold, Ordering::Release);
}

/// The release limit the safety mode asks for, from the in-sync backups.
/// Set under the hub's lock, so a limit from older acknowledgements never
/// replaces a newer one.
fn update_limit(hub: &Hub, durable: &Durable) {
    let st = lock(&hub.state);
    hold_logs(hub, &st);
    let in_sync = || (st.peers.iter()).filter(|p| p.in_sync.load(Ordering::Acquire) && !p.dead.load(Ordering::Acquire));
    let acked: Vec<u64> = in_sync().map(|p| p.acked.load(Ordering::Acquire)).collect();
    // With a control plane, nothing more is released while a backup of the
    // committed set is out of sync (gone, or not back since a restart),
    // until a set without it is committed.
    let held = hub.opts.membership.as_ref().is_some_and(|m| {
        let (held, propose) = rules::membership(in_sync().map(|p| p.node), &m.committed());
        if let Some(set) = propose {
            m.propose(set);
        }
        held
    });
    let Some(limit) = rules::release_limit(hub.opts.safety, &acked, hub.opts.backups, durable.pepoch()) else {
        return;
    };
    durable.set_limit(if held { limit.min(durable.pepoch()) } else { limit });
}

//! Raft messages between nodes, over TCP.
//!
//! Each node sends on connections it opens itself (one per peer, from a
//! sender thread with a bounded queue) and receives on those its peers
//! open. A full queue or a broken connection drops messages: Raft resends
//! what matters, and the node's loop never waits on the network. The
//! receiving end authenticates the sender before it parses anything: it
//! sends a nonce, and the sender answers with an HMAC-SHA256 over the
//! nonce and both node ids under the shared secret (FORMAT.md, "Control
//! plane"). A wrong proof, an unknown node, a message claiming another
//! sender, or a frame over [`MAX_FRAME`] closes the connection.

use hmac::{Hmac, Mac};
use protobuf::Message as _;
use raft::prelude::Message;
use sha2::Sha256;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"EPOCHCTL";
const VERSION: u16 = 1;
/// The largest message body read: Raft messages here carry a few small
/// entries or a snapshot of a few hundred bytes.
pub const MAX_FRAME: usize = 1 << 20;
/// Messages queued to one peer before new ones are dropped.
const QUEUE: usize = 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long either side of a connection waits for the other's handshake.
const HANDSHAKE: Duration = Duration::from_secs(3);

type Nonce = [u8; 32];

fn nonce() -> std::io::Result<Nonce> {
    let mut n = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

/// The sender's proof that it holds the secret, bound to this connection's
/// nonce and to who sends to whom.
fn proof(secret: &[u8], nonce: &Nonce, from: u64, to: u64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(b"epochdb control\0");
    mac.update(nonce);
    mac.update(&from.to_le_bytes());
    mac.update(&to.to_le_bytes());
    mac
}

/// The network side of one node.
pub struct Transport {
    me: u64,
    /// A sender's queue per peer, and the address it sends to.
    queues: Mutex<BTreeMap<u64, (String, SyncSender<Message>)>>,
    /// The nodes it accepts connections from.
    known: Arc<Mutex<BTreeSet<u64>>>,
    secret: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    addr: SocketAddr,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Transport {
    /// Listens on `listen` (already bound) and delivers authenticated
    /// messages for node `me` to `inbox`; `peers` are the other voters'
    /// addresses.
    pub fn start(
        me: u64,
        listener: TcpListener,
        peers: &BTreeMap<u64, String>,
        secret: Vec<u8>,
        inbox: Sender<Message>,
    ) -> std::io::Result<Transport> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let t = Transport {
            me,
            queues: Mutex::new(BTreeMap::new()),
            known: Arc::new(Mutex::new(BTreeSet::new())),
            secret: Arc::new(secret),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
            addr,
        };
        let (k, s, st) = (t.known.clone(), t.secret.clone(), t.stop.clone());
        lock(&t.threads).push(spawn("epochdb-ctl-listen", move || accept(me, listener, k, s, inbox, st))?);
        t.set_peers(peers)?;
        Ok(t)
    }

    /// The peers are now `peers` (the group's members changed): a sender
    /// for each new one (or one whose address changed), none for those
    /// gone, and connections accepted from these only.
    pub fn set_peers(&self, peers: &BTreeMap<u64, String>) -> std::io::Result<()> {
        *lock(&self.known) = peers.keys().copied().collect();
        let mut queues = lock(&self.queues);
        // A dropped queue ends its sender.
        queues.retain(|id, (addr, _)| peers.get(id) == Some(addr));
        for (&id, peer) in peers {
            if queues.contains_key(&id) {
                continue;
            }
            let (tx, rx) = sync_channel(QUEUE);
            let (me, s, st, p) = (self.me, self.secret.clone(), self.stop.clone(), peer.clone());
            lock(&self.threads).push(spawn("epochdb-ctl-send", move || send_loop(me, id, &p, &s, &rx, &st))?);
            queues.insert(id, (peer.clone(), tx));
        }
        lock(&self.threads).retain(|t| !t.is_finished());
        Ok(())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `m` to its destination; drops it if the queue is full.
    pub fn send(&self, m: Message) {
        if let Some((_, q)) = lock(&self.queues).get(&m.to) {
            match q.try_send(m) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        lock(&self.queues).clear(); // ends the senders' waits
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

fn accept(
    me: u64,
    listener: TcpListener,
    known: Arc<Mutex<BTreeSet<u64>>>,
    secret: Arc<Vec<u8>>,
    inbox: Sender<Message>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((sock, from)) => {
                let (k, s, i, st) = (known.clone(), secret.clone(), inbox.clone(), stop.clone());
                let _ = spawn("epochdb-ctl-recv", move || {
                    if let Err(e) = receive(me, sock, &k, &s, &i, &st) {
                        ::log::debug!("control: connection from {from} closed: {e}");
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                ::log::warn!("control: accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// One incoming connection: the challenge, the proof, then messages.
fn receive(
    me: u64,
    sock: TcpStream,
    known: &Mutex<BTreeSet<u64>>,
    secret: &[u8],
    inbox: &Sender<Message>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    sock.set_nonblocking(false).map_err(io)?;
    sock.set_nodelay(true).map_err(io)?;
    sock.set_read_timeout(Some(Duration::from_millis(200))).map_err(io)?;
    let ours = nonce().map_err(io)?;
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&VERSION.to_le_bytes());
    hello.extend_from_slice(&ours);
    (&sock).write_all(&hello).map_err(io)?;
    let mut r = BufReader::new(sock);
    let mut answer = [0u8; 48];
    // An unauthenticated peer gets a few seconds, not a thread forever.
    read_full(&mut r, &mut answer, stop, Some(Instant::now() + HANDSHAKE))?;
    let from = u64::from_le_bytes(answer[..8].try_into().unwrap_or_default());
    let to = u64::from_le_bytes(answer[8..16].try_into().unwrap_or_default());
    if proof(secret, &ours, from, to).verify_slice(&answer[16..]).is_err() {
        return Err("authentication failed: the peer does not hold this node's secret".into());
    }
    let known = lock(known).clone();
    if to != me || !known.contains(&from) {
        return Err(format!("node {from} sends to node {to}; this is node {me} and knows {known:?}"));
    }
    let mut body = Vec::new();
    loop {
        let mut len = [0u8; 4];
        read_full(&mut r, &mut len, stop, None)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(format!("a frame of {len} bytes (at most {MAX_FRAME})"));
        }
        body.resize(len, 0);
        read_full(&mut r, &mut body, stop, None)?;
        let m = Message::parse_from_bytes(&body).map_err(|e| format!("a message that does not parse: {e}"))?;
        if m.from != from || m.to != me {
            return Err(format!("node {from} sent a message from {} to {}", m.from, m.to));
        }
        if inbox.send(m).is_err() {
            return Ok(()); // the node stopped
        }
    }
}

/// Reads exactly `buf`, through read timeouts, until `stop` or `deadline`.
fn read_full(r: &mut impl Read, buf: &mut [u8], stop: &AtomicBool, deadline: Option<Instant>) -> Result<(), String> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Err("closed".into()),
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Acquire) {
                    return Err("stopped".into());
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err("no handshake in time".into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Sends `to`'s queue, connecting (again) whenever needed.
fn send_loop(me: u64, to: u64, addr: &str, secret: &[u8], rx: &Receiver<Message>, stop: &AtomicBool) {
    let mut conn: Option<TcpStream> = None;
    while !stop.load(Ordering::Acquire) {
        let m = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if conn.is_none() {
            conn = connect(me, to, addr, secret, stop).map_err(|e| ::log::debug!("control: to node {to}: {e}")).ok();
        }
        let Some(sock) = conn.as_mut() else { continue }; // dropped: Raft resends
        let mut frame = vec![0u8; 4];
        if let Err(e) = m.write_to_vec(&mut frame) {
            ::log::warn!("control: encode a message: {e}");
            continue;
        }
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        if let Err(e) = sock.write_all(&frame) {
            ::log::debug!("control: to node {to}: {e}");
            conn = None;
        }
    }
}

fn connect(me: u64, to: u64, addr: &str, secret: &[u8], stop: &AtomicBool) -> Result<TcpStream, String> {
    let target = addr.to_socket_addrs().map_err(|e| format!("resolve {addr}: {e}"))?.next();
    let target = target.ok_or_else(|| format!("{addr} resolves to no address"))?;
    let sock = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT).map_err(|e| format!("connect {addr}: {e}"))?;
    let io = |e: std::io::Error| e.to_string();
    sock.set_nodelay(true).map_err(io)?;
    sock.set_read_timeout(Some(Duration::from_millis(200))).map_err(io)?;
    // A peer that stops reading must not stall this thread for long.
    sock.set_write_timeout(Some(Duration::from_millis(500))).map_err(io)?;
    let mut challenge = [0u8; 42];
    read_full(&mut &sock, &mut challenge, stop, Some(Instant::now() + HANDSHAKE))?;
    if &challenge[..8] != MAGIC {
        return Err(format!("{addr} is not an epochdb control node"));
    }
    let version = u16::from_le_bytes([challenge[8], challenge[9]]);
    if version != VERSION {
        return Err(format!("{addr} speaks control protocol {version}; this node speaks {VERSION}"));
    }
    let nonce: Nonce = challenge[10..].try_into().map_err(|_| "a short challenge".to_string())?;
    let mut answer = me.to_le_bytes().to_vec();
    answer.extend_from_slice(&to.to_le_bytes());
    answer.extend_from_slice(&proof(secret, &nonce, me, to).finalize().into_bytes());
    (&sock).write_all(&answer).map_err(io)?;
    Ok(sock)
}

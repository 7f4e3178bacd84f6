//! One event loop per thread: its own listening socket (SO_REUSEPORT, so
//! the kernel spreads connections), its own clients and its own epochdb
//! worker. A request is read, run and answered on the thread that read it:
//! no hand-off between threads on the request path.
//!
//! Durable replies (`appendfsync always`): a command's reply goes into the
//! client's output buffer at commit, marked with the commit's epoch, and is
//! sent once that epoch is durable. Output is sent in order, so a later
//! reply (of a read, say) waits behind an earlier held one. While replies
//! wait, the loop asks the engine, once per pass over its ready clients,
//! to hasten the epoch, and sleeps until the logger that makes it durable
//! wakes it, so a lone client's write costs about one log sync.

use crate::ahead::{Ahead, AHEAD};
use crate::commands::{self, Exec};
use crate::fasthash::FastHash;
use crate::keyspace::Db;
use crate::resp::{Args, Limits, Out, Parser};
use crate::shared::{now_ms, ClientInfo, Shared};
use crate::stats::{SlowEntry, ThreadStats};
use crate::table::{lookup, Command, Run};
use crate::tls::Stream;
use epochdb::{Error, TableId, Tid, Worker};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const TLS_LISTENER: Token = Token(2);
const FIRST_CLIENT: usize = 3;
/// Bytes read per `read` call (at least).
const READ_CHUNK: usize = 16 * 1024;
/// An empty read buffer larger than this (after a big request) is cut
/// back to [`READ_CHUNK`], as Redis shrinks idle query buffers.
const READ_KEEP: usize = 1 << 20;
/// A client whose unsent output passes this is not read from until it
/// drains: a client that does not read its replies cannot make us buffer
/// without bound, and others are not slowed by it.
const OUTPUT_HIGH_WATER: usize = 64 << 20;
/// How often a refused connection or a cross-protocol request is logged
/// at most (a flood of them must not flood the log).
const WARN_EVERY: Duration = Duration::from_secs(10);
/// Protected mode's reply to a client it refuses (Redis's `DENIED`).
const DENIED: &[u8] =
    b"-DENIED epochdb is running in protected mode because protected mode is enabled and no password \
is set for the default user. In this mode connections are only accepted from the loopback interface. To let other \
clients in, set a password (--requirepass, or CONFIG SET requirepass from the loopback interface), or turn protected \
mode off (--protected-mode no, or CONFIG SET protected-mode no from the loopback interface) once the server cannot be \
reached from untrusted networks.\r\n";
/// How often a loop with clients in WAIT looks at the acknowledgements.
const WAIT_POLL: Duration = Duration::from_millis(2);
/// How often the loop does its housekeeping (expiry sweep, kills).
const CRON: Duration = Duration::from_millis(100);
/// After a round that handled events, a loop with at most [`SPIN_CLIENTS`]
/// clients polls again without sleeping for this long: a request that
/// follows its reply within it (a client that waits for each reply) is
/// read without a wake-up, which costs 35-110 µs when the thread slept on
/// the other CPU. With more clients the next request seldom waits that
/// long, and the spinning would take CPU from them (measured: 50 clients
/// lost 6-12%). Nor when replies wait for durability (see `run`).
const SPIN: Duration = Duration::from_micros(50);
const SPIN_CLIENTS: usize = 4;
/// Keys the expiry sweep removes per transaction, and transactions per
/// cron tick at most.
const SWEEP_BATCH: usize = 64;
const SWEEP_ROUNDS: usize = 16;

/// Binds `threads` listening sockets to one address with SO_REUSEPORT.
/// With port 0 the first picks a port and the others take the same.
pub fn listen(bind: &str, port: u16, threads: usize) -> std::io::Result<Vec<TcpListener>> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ip: std::net::IpAddr = bind
        .parse()
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, format!("'{bind}' is not an IP address")))?;
    let mut addr = SocketAddr::new(ip, port);
    let mut out = Vec::new();
    for _ in 0..threads {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        s.listen(1024)?;
        let l: std::net::TcpListener = s.into();
        addr = l.local_addr()?;
        out.push(TcpListener::from_std(l));
    }
    Ok(out)
}

/// A WATCHed key: its database, name and the version seen.
pub type Watched = (usize, Vec<u8>, (bool, Option<Tid>));

/// A client's unparsed input. The buffer stays zeroed past what was read,
/// so a read goes into it as it is: zeroing 16 KiB before every read (a
/// `Vec` truncated and resized) was 9% of a loop's time at `-c 50 -P 1`.
#[derive(Default)]
struct ReadBuf {
    buf: Vec<u8>,
    /// Bytes of `buf` read and not yet consumed, from its start.
    len: usize,
}

impl ReadBuf {
    fn filled(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Room for at least `want` more bytes (zeroed only when it grows),
    /// in a buffer with capacity for `expect` more: the rest of a bulk
    /// string whose length has arrived. Its capacity is taken at once,
    /// exactly (as Redis does for a big argument), so the buffer is never
    /// copied as the bulk arrives and never grows past it; only what is
    /// zeroed and read into becomes resident.
    fn room(&mut self, want: usize, expect: usize) -> &mut [u8] {
        let cap = self.len + expect.max(want);
        if self.buf.capacity() < cap {
            self.buf.reserve_exact(cap - self.buf.len());
        }
        if self.buf.len() < self.len + want {
            self.buf.resize(self.len + want, 0);
        }
        &mut self.buf[self.len..]
    }

    /// `n` bytes were read into [`ReadBuf::room`].
    fn add(&mut self, n: usize) {
        self.len += n;
    }

    /// Drops the first `n` bytes, parsed.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        if self.len == 0 && self.buf.capacity() > READ_KEEP {
            crate::resp::free_buffer(std::mem::replace(&mut self.buf, vec![0; READ_CHUNK]));
        }
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        crate::resp::free_buffer(std::mem::take(&mut self.buf));
    }
}

/// A connection's state.
pub struct Client {
    pub stream: Stream,
    pub info: Arc<ClientInfo>,
    rbuf: ReadBuf,
    parser: Parser,
    args: Args,
    pub out: Vec<u8>,
    sent: usize,
    /// `(offset, epoch)`: output from `offset` on waits until `epoch` is
    /// durable. Offsets and epochs both grow.
    holds: VecDeque<(usize, u64)>,
    pub db: usize,
    pub resp3: bool,
    /// Authenticated user; `None` until AUTH when a password is required.
    pub user: Option<String>,
    pub allowed: Arc<Vec<bool>>,
    pub acl_generation: u64,
    pub multi: Option<Vec<(usize, Args)>>,
    pub multi_failed: bool,
    pub watched: Vec<Watched>,
    /// The epoch of this client's last write (WAIT, WAITAOF).
    pub last_write_epoch: u64,
    /// In WAIT or WAITAOF: nothing more of its input runs until it is
    /// answered.
    pub blocked: Option<Blocked>,
    pub close_after_reply: bool,
    closed: bool,
    writable: bool,
}

/// What a blocked client's reply waits for; its later input waits behind
/// it, as in Redis.
#[derive(Debug, Clone, Copy)]
pub enum Blocked {
    /// WAIT or WAITAOF.
    Acks(AckWait),
    /// SAVE: until the database has installed this many checkpoints since
    /// it opened (one that began after SAVE arrived).
    Save { installed: u64 },
}

/// A client in WAIT or WAITAOF: it wants `replicas` backups to have
/// acknowledged `epoch` (its last write), until `deadline` (`None`: no
/// limit).
#[derive(Debug, Clone, Copy)]
pub struct AckWait {
    pub epoch: u64,
    pub replicas: usize,
    pub deadline: Option<Instant>,
    /// WAITAOF's: whether `epoch` must also be durable here (numlocal);
    /// `None` for WAIT.
    pub local: Option<bool>,
}

impl AckWait {
    /// The reply if the wait is over (enough acknowledgements, or the
    /// deadline passed), else `None`. `acked`: each backup's acknowledged
    /// epoch (`None`: no replication, so none will come); `durable`: the
    /// epoch durable here (`None`: no logging).
    pub fn answer(&self, acked: Option<&[u64]>, durable: Option<u64>, now: Instant) -> Option<(Option<i64>, i64)> {
        let count = acked.map_or(0, |a| a.iter().filter(|&&e| e >= self.epoch).count());
        let local = durable.is_some_and(|d| d >= self.epoch);
        let done = (count >= self.replicas || acked.is_none()) && (self.local != Some(true) || local);
        (done || self.deadline.is_some_and(|d| now >= d)).then(|| (self.local.map(|_| local as i64), count as i64))
    }
}

impl Client {
    pub fn out(&mut self) -> Out<'_> {
        Out { buf: &mut self.out, resp3: self.resp3 }
    }

    /// Holds output from here on until `epoch` is durable.
    pub fn hold_from(&mut self, offset: usize, epoch: u64) {
        match self.holds.back_mut() {
            Some((_, e)) if *e >= epoch => {}
            _ => self.holds.push_back((offset, epoch)),
        }
    }
}

pub struct EventLoop {
    pub idx: usize,
    pub shared: Arc<Shared>,
    pub worker: Worker,
    poll: Poll,
    listener: TcpListener,
    /// The TLS port's listener (`tls-port`), if any.
    tls_listener: Option<TcpListener>,
    pub(crate) clients: HashMap<Token, Client, FastHash>,
    next_token: usize,
    pub stats: Arc<ThreadStats>,
    /// Reply scratch for a transaction (cleared on each retry).
    pub(crate) scratch: Vec<u8>,
    /// Clients with held replies.
    waiting: Vec<Token>,
    /// Clients with input left to parse (output was over the high water).
    backlog: Vec<Token>,
    /// Clients in WAIT.
    pub(crate) blocked: Vec<Token>,
    /// The pipeline read-ahead's buffers.
    ahead: Ahead,
    /// The newest epoch a reply held in this pass waits on; hastened once
    /// the pass ends (see `run`).
    hasten_to: u64,
    /// Memory in use was above `maxmemory` at the start of this pass.
    over_memory: bool,
    /// The wall clock's milliseconds at an instant, set again by every
    /// `cron`: a command's time (for expiry) then comes from the instant
    /// it reads for its statistics, one clock read fewer per command (a
    /// clock read took 1% of a loop's time at `-c 50 -P 16`).
    clock: (Instant, u64),
    /// A data command's [`Db`], kept for its buffers.
    db: Db,
    /// When this loop last logged a connection refused by protected
    /// mode, and a cross-protocol request (see [`WARN_EVERY`]).
    warned: [Option<Instant>; 2],
}

impl EventLoop {
    pub fn new(
        idx: usize,
        shared: Arc<Shared>,
        mut listener: TcpListener,
        mut tls_listener: Option<TcpListener>,
    ) -> epochdb::Result<EventLoop> {
        let io = |source| Error::Io { op: "set up the event loop", path: Default::default(), source };
        let poll = Poll::new().map_err(io)?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE).map_err(io)?;
        if let Some(l) = tls_listener.as_mut() {
            poll.registry().register(l, TLS_LISTENER, Interest::READABLE).map_err(io)?;
        }
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(io)?);
        shared.wakeups.wakers.lock().unwrap_or_else(|e| e.into_inner()).push(waker);
        let worker = shared.db.worker()?;
        let stats = shared.stats[idx].clone();
        let first_table = shared.tables[0];
        Ok(EventLoop {
            idx,
            shared,
            worker,
            poll,
            listener,
            tls_listener,
            clients: HashMap::default(),
            next_token: FIRST_CLIENT,
            stats,
            scratch: Vec::new(),
            waiting: Vec::new(),
            backlog: Vec::new(),
            blocked: Vec::new(),
            ahead: Ahead::default(),
            hasten_to: 0,
            over_memory: false,
            clock: (Instant::now(), now_ms()),
            db: Db::new(first_table, 0),
            warned: [None; 2],
        })
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_cron = Instant::now();
        let mut spin_until: Option<Instant> = None;
        while !self.shared.shutdown.load(Ordering::Acquire) {
            let mut timeout = CRON.saturating_sub(last_cron.elapsed());
            if let Some(until) = spin_until {
                if Instant::now() < until {
                    timeout = Duration::ZERO;
                } else {
                    spin_until = None;
                }
            }
            if !self.blocked.is_empty() {
                // Acknowledgements arrive with no wake-up of ours: look often.
                timeout = timeout.min(WAIT_POLL);
            }
            if !self.backlog.is_empty() {
                timeout = Duration::ZERO;
            } else if !self.waiting.is_empty() {
                // Sleep until a logger publishes a new pepoch (it wakes us),
                // unless one came since the last look.
                let parked = &self.shared.wakeups.parked[self.idx];
                parked.store(true, Ordering::SeqCst);
                std::sync::atomic::fence(Ordering::SeqCst);
                if self.ready_to_release() {
                    parked.store(false, Ordering::Relaxed);
                    timeout = Duration::ZERO;
                }
            }
            let polled = self.poll.poll(&mut events, Some(timeout));
            self.shared.wakeups.parked[self.idx].store(false, Ordering::Relaxed);
            self.over_memory = self.memory_over();
            // Not when replies wait for durability: then the next event is
            // the logger's, and spinning takes CPU from it and from the
            // client (measured: one durable client lost 6%).
            if !events.is_empty() && self.clients.len() <= SPIN_CLIENTS && !self.shared.durable_replies() {
                spin_until = Some(Instant::now() + SPIN);
            }
            if let Err(e) = polled {
                if e.kind() != ErrorKind::Interrupted {
                    ::log::error!("event loop {}: poll failed: {e}", self.idx);
                    break;
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(false),
                    TLS_LISTENER => self.accept(true),
                    WAKER => {}
                    t => {
                        let closing = ev.is_read_closed() || ev.is_error();
                        if ev.is_readable() || closing {
                            self.readable(t, closing);
                        }
                        if ev.is_writable() {
                            self.flush(t);
                        }
                    }
                }
            }
            for t in std::mem::take(&mut self.backlog) {
                self.process(t);
                self.flush(t);
            }
            if !self.waiting.is_empty() {
                self.release();
            }
            if !self.blocked.is_empty() {
                self.unblock();
            }
            if last_cron.elapsed() >= CRON {
                self.cron();
                last_cron = Instant::now();
            }
            // Once per pass, after every request read in it has committed,
            // as Redis syncs its AOF before it sleeps: hastened at the
            // first reply, the epoch would end while the rest of a
            // pipeline commits, into the next epoch and a second sync.
            if self.hasten_to > 0 {
                self.shared.db.hasten_durable(std::mem::take(&mut self.hasten_to));
            }
        }
        // Shutting down: send what may be sent, then close every client.
        self.release();
        let tokens: Vec<Token> = self.clients.keys().copied().collect();
        for t in tokens {
            self.flush(t);
            self.close(t);
        }
    }

    /// Takes the new connections of the plain port, or of the TLS port.
    fn accept(&mut self, tls: bool) {
        loop {
            let listener = if tls { self.tls_listener.as_ref() } else { Some(&self.listener) };
            let Some(listener) = listener else { return };
            let (mut sock, addr) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    ::log::warn!("accept failed: {e}");
                    return;
                }
            };
            if self.protected(addr) {
                ThreadStats::add(&self.stats.rejected_connections, 1);
                let _ = sock.write(DENIED);
                self.warn(0, &format!("refused {addr}: protected mode lets only loopback clients in while the default user has no password"));
                continue;
            }
            let max = self.shared.settings.maxclients.load(Ordering::Relaxed);
            if self.shared.connected.fetch_add(1, Ordering::AcqRel) >= max {
                self.shared.connected.fetch_sub(1, Ordering::AcqRel);
                ThreadStats::add(&self.stats.rejected_connections, 1);
                let _ = sock.write(b"-ERR max number of clients reached\r\n");
                continue;
            }
            let _ = sock.set_nodelay(true);
            let session = match (tls, &self.shared.tls) {
                (false, _) => None,
                (true, Some(t)) => match rustls::ServerConnection::new(t.server.clone()) {
                    Ok(s) => Some(Box::new(s)),
                    Err(e) => {
                        ::log::warn!("TLS session for {addr}: {e}");
                        self.shared.connected.fetch_sub(1, Ordering::AcqRel);
                        continue;
                    }
                },
                (true, None) => {
                    self.shared.connected.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
            };
            let token = Token(self.next_token);
            self.next_token += 1;
            if self.poll.registry().register(&mut sock, token, Interest::READABLE | Interest::WRITABLE).is_err() {
                self.shared.connected.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            ThreadStats::add(&self.stats.connections, 1);
            let id = self.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            let (user, allowed) = {
                let users = self.shared.users.lock().unwrap_or_else(|e| e.into_inner());
                match users.users.get("default") {
                    Some(d) if d.enabled && d.nopass => (Some("default".to_string()), d.allowed.clone()),
                    _ => (None, Arc::new(Vec::new())),
                }
            };
            let info = Arc::new(ClientInfo {
                id,
                addr,
                laddr: sock.local_addr().unwrap_or(addr),
                thread: self.idx,
                created: Instant::now(),
                name: Default::default(),
                user: std::sync::Mutex::new(user.clone().unwrap_or_else(|| "default".into())),
                db: Default::default(),
                last_cmd: Default::default(),
                kill: Default::default(),
            });
            self.shared.clients.lock().unwrap_or_else(|e| e.into_inner()).insert(id, info.clone());
            let generation = self.shared.acl_generation.load(Ordering::Acquire);
            self.clients.insert(
                token,
                Client {
                    stream: Stream { sock, tls: session },
                    info,
                    rbuf: ReadBuf::default(),
                    parser: Parser::default(),
                    args: Args::default(),
                    out: Vec::new(),
                    sent: 0,
                    holds: VecDeque::new(),
                    db: 0,
                    resp3: false,
                    user,
                    allowed,
                    acl_generation: generation,
                    multi: None,
                    multi_failed: false,
                    watched: Vec::new(),
                    last_write_epoch: 0,
                    blocked: None,
                    close_after_reply: false,
                    closed: false,
                    writable: true,
                },
            );
        }
    }

    /// Whether protected mode refuses a client from `addr`: it is on, the
    /// default user needs no password, and the client is not on loopback.
    fn protected(&self, addr: SocketAddr) -> bool {
        if !self.shared.settings.protected_mode.load(Ordering::Relaxed) || addr.ip().to_canonical().is_loopback() {
            return false;
        }
        let users = self.shared.users.lock().unwrap_or_else(|e| e.into_inner());
        users.users.get("default").is_some_and(|d| d.nopass)
    }

    /// Logs `what` unless this loop logged a warning of kind `kind` less
    /// than [`WARN_EVERY`] ago.
    fn warn(&mut self, kind: usize, what: &str) {
        if self.warned[kind].is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.warned[kind] = Some(Instant::now());
            ::log::warn!("{what}");
        }
    }

    /// Reads what the client sent, then runs it. `closing`: the event also
    /// said the peer closed (or failed), so read on to the end.
    fn readable(&mut self, t: Token, closing: bool) {
        let limit = self.shared.settings.query_buffer_limit.load(Ordering::Relaxed);
        let Some(c) = self.clients.get_mut(&t) else { return };
        let mut eof = false;
        loop {
            let expect = c.parser.wants(c.rbuf.filled()).unwrap_or(0).min(limit);
            let room = c.rbuf.room(expect.clamp(READ_CHUNK, 16 << 20), expect);
            let asked = room.len();
            match c.stream.read(room) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.rbuf.add(n);
                    ThreadStats::add(&self.stats.net_input, n as u64);
                    if c.rbuf.filled().len() > limit {
                        ::log::warn!("closing client {}: query buffer over {limit} bytes", c.info.addr);
                        eof = true;
                        c.closed = true;
                        break;
                    }
                    // A short read of a stream socket took everything it
                    // held (epoll(7)); what comes later raises a new edge.
                    // One read per request instead of two at `-P 1`.
                    if n < asked && !closing && c.stream.short_read_drains() {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        let hard = c.closed;
        if !hard {
            self.process(t);
            self.flush(t);
        }
        if eof {
            // Replies still held for durability are not sent to a peer that
            // left; the writes stay committed.
            self.close(t);
        }
    }

    /// Parses and runs the requests in the client's buffer.
    fn process(&mut self, t: Token) {
        let limits = self.shared.limits();
        let mut consumed = 0;
        let mut run = 0;
        loop {
            if run % AHEAD == 0 {
                self.prefetch_ahead(t, consumed, &limits);
            }
            let Some(c) = self.clients.get_mut(&t) else { return };
            if c.closed || c.close_after_reply || c.blocked.is_some() {
                break;
            }
            if c.out.len() - c.sent > OUTPUT_HIGH_WATER {
                self.backlog.push(t);
                break;
            }
            let mut args = std::mem::take(&mut c.args);
            let r = c.parser.parse(&c.rbuf.filled()[consumed..], &mut args, &limits);
            let (used, done) = match r {
                Ok(x) => x,
                Err(e) => {
                    c.args = args;
                    let msg = format!("ERR {e}");
                    c.out().error(&msg);
                    c.close_after_reply = true;
                    break;
                }
            };
            consumed += used;
            if done {
                self.execute(t, &args);
                run += 1;
            }
            if let Some(c) = self.clients.get_mut(&t) {
                c.args = args;
            }
            if used == 0 {
                break;
            }
        }
        if let Some(c) = self.clients.get_mut(&t) {
            c.rbuf.consume(consumed);
        }
    }

    /// Announces the keys of the next requests in the client's buffer
    /// from `from` on, when there are several (`ahead.rs`).
    fn prefetch_ahead(&mut self, t: Token, from: usize, limits: &Limits) {
        let Some(c) = self.clients.get(&t) else { return };
        if !c.parser.between_requests() {
            return;
        }
        self.ahead.read(c.rbuf.filled().get(from..).unwrap_or_default(), limits);
        if self.ahead.len() < 2 {
            return; // nothing to overlap
        }
        let table = self.shared.tables[c.db];
        let keys: Vec<(TableId, &[u8])> = self.ahead.keys().map(|k| (table, k)).collect();
        // A failure here (a closed database) is the request's to report.
        let _ = self.worker.run(|txn| txn.prefetch(&keys));
    }

    /// Runs one request and writes its reply.
    fn execute(&mut self, t: Token, args: &Args) {
        let Some(c) = self.clients.get_mut(&t) else { return };
        let start = Instant::now();
        let Some((i, cmd)) = lookup(args.get(0)) else {
            // An HTTP request (a browser led to post to this port) shows
            // its method or a header as the first word of an inline line:
            // close before its body can run as commands, as Redis does.
            let name = args.get(0);
            if name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:") {
                c.closed = true;
                let addr = c.info.addr;
                self.warn(1, &format!("possible SECURITY ATTACK: {addr} sent an HTTP POST or Host: line, a cross-protocol request; connection closed"));
                return;
            }
            let mut msg = format!("ERR unknown command '{}', with args beginning with: ", printable(args.get(0)));
            for a in args.iter_from(1).take(16) {
                msg.push_str(&format!("'{}' ", printable(a)));
            }
            c.multi_failed |= c.multi.is_some();
            c.out().error(&msg);
            return;
        };
        c.info.last_cmd.store(i + 1, Ordering::Relaxed);
        if !cmd.arity_ok(args.len()) {
            c.multi_failed |= c.multi.is_some();
            self.stats.reject(i);
            c.out().error(&format!("ERR wrong number of arguments for '{}' command", cmd.name));
            return;
        }
        if let Some(err) = self.refuse(t, i, cmd, args) {
            let Some(c) = self.clients.get_mut(&t) else { return };
            c.multi_failed |= c.multi.is_some() && !matches!(cmd.name, "exec" | "discard");
            self.stats.reject(i);
            c.out().error(&err);
            return;
        }
        let Some(c) = self.clients.get_mut(&t) else { return };
        if c.multi.is_some() && !matches!(cmd.name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset") {
            if matches!(cmd.run, Run::Conn) && !matches!(cmd.name, "ping" | "echo" | "select" | "time") {
                c.multi_failed = true;
                c.out().error(&format!("ERR '{}' inside MULTI is not supported by epochdb", cmd.name));
                return;
            }
            if let Some(q) = c.multi.as_mut() {
                q.push((i, args.to_owned_args()));
            }
            c.out().simple("QUEUED");
            return;
        }
        let failed = match cmd.run {
            Run::Data(_) if cmd.name == "dbsize" && self.dbsize_from_counts(t) => false,
            Run::Data(f) => self.run_data(t, cmd, f, args, start),
            Run::Conn => self.conn_command(t, cmd, args),
        };
        let usec = start.elapsed().as_micros() as u64;
        self.stats.call(i, usec, failed);
        let slower = self.shared.settings.slowlog_slower_than.load(Ordering::Relaxed);
        if slower >= 0 && usec >= slower as u64 {
            self.slowlog(t, args, usec);
        }
    }

    /// Why the client may not run this command now, if it may not.
    fn refuse(&mut self, t: Token, i: usize, cmd: &Command, args: &Args) -> Option<String> {
        let generation = self.shared.acl_generation.load(Ordering::Acquire);
        let c = self.clients.get_mut(&t)?;
        if c.acl_generation != generation {
            c.acl_generation = generation;
            let users = self.shared.users.lock().unwrap_or_else(|e| e.into_inner());
            match c.user.as_ref().and_then(|u| users.users.get(u)) {
                Some(u) if u.enabled => c.allowed = u.allowed.clone(),
                _ => {
                    c.user = None;
                    c.allowed = Arc::new(Vec::new());
                }
            }
        }
        let no_auth = matches!(cmd.name, "auth" | "hello" | "quit" | "reset");
        if c.user.is_none() && !no_auth {
            return Some("NOAUTH Authentication required.".into());
        }
        if !no_auth && !c.allowed.get(i).copied().unwrap_or(false) {
            let user = c.user.as_deref().unwrap_or("default");
            return Some(format!("NOPERM User {user} has no permissions to run the '{}' command", cmd.name));
        }
        if commands::key_too_long(args, cmd.key_positions(args.len())) {
            return Some(commands::key_too_long_msg());
        }
        if cmd.write && self.shared.db.is_read_only() {
            return Some("READONLY You can't write against a read only replica.".into());
        }
        if self.over_memory && cmd.denyoom() {
            return Some("OOM command not allowed when used memory > 'maxmemory'.".into());
        }
        None
    }

    /// Whether memory in use is above `maxmemory` (once per pass of the
    /// loop: a sum of a few per-thread counters).
    fn memory_over(&self) -> bool {
        let max = self.shared.settings.maxmemory.load(Ordering::Relaxed);
        max > 0 && epochdb::memory_in_use() > max
    }

    /// Runs a data command, begun at `start`, in its own transaction;
    /// returns whether it failed.
    fn run_data(&mut self, t: Token, cmd: &Command, f: commands::DataFn, args: &Args, start: Instant) -> bool {
        let now = self.clock.1 + start.saturating_duration_since(self.clock.0).as_millis() as u64;
        let Some(c) = self.clients.get_mut(&t) else { return true };
        let table = self.shared.tables[c.db];
        let max_value = self.shared.db.options().max_value_len;
        let scratch = &mut self.scratch;
        let resp3 = c.resp3;
        let cursors = &self.shared.cursors;
        let tables = &self.shared.tables;
        // The key and value buffers of the command before, so that a
        // command allocates none of its own (1-2% of a loop's time).
        let db = &mut self.db;
        (db.table, db.now) = (table, now);
        let r = self.worker.run_with_info(|txn| {
            scratch.clear();
            db.tally.clear();
            let mut x = Exec { db: &mut *db, out: Out { buf: scratch, resp3 }, tables, cursors, max_value };
            f(&mut x, txn, args)
        });
        if let Ok((_, info)) = &r {
            self.shared.counts.apply(self.idx, info.epoch, &self.db.tally);
        }
        let failed = self.scratch.first() == Some(&b'-');
        self.finish(t, r.map(|((), info)| info.release_epoch), cmd.write) || failed
    }

    /// Appends a transaction's reply (in `scratch`), holding it for
    /// durability when replies wait; returns whether it failed. `r` is the
    /// transaction's release epoch (`CommitInfo::release_epoch`): a read
    /// of data already durable is not held (though it still goes out
    /// behind any earlier held reply).
    pub fn finish(&mut self, t: Token, r: epochdb::Result<u64>, write: bool) -> bool {
        let durable = self.shared.durable_replies();
        let Some(c) = self.clients.get_mut(&t) else { return true };
        match r {
            Ok(epoch) => {
                let at = c.out.len();
                c.out.extend_from_slice(&self.scratch);
                if write {
                    c.last_write_epoch = c.last_write_epoch.max(epoch);
                }
                if durable && epoch > self.shared.db.durable_epoch() {
                    c.hold_from(at, epoch);
                    self.hasten_to = self.hasten_to.max(epoch);
                    if !self.waiting.contains(&t) {
                        self.waiting.push(t);
                    }
                }
                false
            }
            Err(e) => {
                if matches!(e, Error::Aborted(_)) {
                    ThreadStats::add(&self.stats.aborts, 1);
                }
                c.out().error(&engine_error(&e));
                true
            }
        }
    }

    /// Whether a held reply may go now (its epoch is durable, or
    /// durability failed and it must be answered with the error).
    fn ready_to_release(&self) -> bool {
        let pepoch = self.shared.db.durable_epoch();
        let failed = matches!(self.shared.db.is_durable(u64::MAX), Err(e) if !matches!(e, Error::NotDurable));
        failed
            || self
                .waiting
                .iter()
                .any(|t| self.clients.get(t).is_none_or(|c| c.holds.front().is_none_or(|&(_, e)| e <= pepoch)))
    }

    /// Sends held replies whose epochs are now durable.
    fn release(&mut self) {
        let pepoch = self.shared.db.durable_epoch();
        let failure = match self.shared.db.is_durable(u64::MAX) {
            Err(Error::NotDurable) | Ok(_) => None,
            Err(e) => Some(e),
        };
        for t in std::mem::take(&mut self.waiting) {
            let Some(c) = self.clients.get_mut(&t) else { continue };
            if let Some(e) = &failure {
                // Never send a reply the log could not keep.
                if let Some(&(at, _)) = c.holds.front() {
                    c.out.truncate(at);
                    c.holds.clear();
                    c.out().error(&engine_error(e));
                    c.close_after_reply = true;
                }
            }
            while c.holds.front().is_some_and(|&(_, e)| e <= pepoch) {
                c.holds.pop_front();
            }
            let still = !c.holds.is_empty();
            self.flush(t);
            if still {
                self.waiting.push(t);
            }
        }
    }

    /// Answers the clients in WAIT whose backups have acknowledged, or
    /// whose time is up, and those in SAVE whose checkpoint is installed,
    /// and runs the input they sent meanwhile.
    fn unblock(&mut self) {
        let acked = self.acknowledged();
        let durable = self.durable_here();
        let now = Instant::now();
        let shared = self.shared.clone();
        let db = &shared.db;
        let installed = db.checkpoint_stats().installed;
        for t in std::mem::take(&mut self.blocked) {
            let Some(c) = self.clients.get_mut(&t) else { continue };
            let Some(b) = c.blocked else { continue };
            match b {
                Blocked::Acks(w) => match w.answer(acked.as_deref(), durable, now) {
                    Some(reply) => write_wait_reply(&mut c.out(), reply),
                    None => {
                        self.blocked.push(t);
                        continue;
                    }
                },
                // A failed checkpoint fails the database: no other will come.
                Blocked::Save { installed: want } => match db.is_durable(0) {
                    Err(e) => c.out().error(&engine_error(&e)),
                    Ok(_) if installed >= want => c.out().ok(),
                    Ok(_) => {
                        self.blocked.push(t);
                        continue;
                    }
                },
            }
            c.blocked = None;
            self.process(t);
            self.flush(t);
        }
        self.count_blocked();
    }

    /// Publishes how many of this loop's clients are blocked (INFO's
    /// `blocked_clients`). A closed client leaves the list at the next
    /// `unblock`.
    pub(crate) fn count_blocked(&self) {
        self.stats.blocked.store(self.blocked.len() as u64, Ordering::Relaxed);
    }

    /// The epoch durable on this server's own disk; `None` without logging.
    pub fn durable_here(&self) -> Option<u64> {
        (self.shared.db.options().durability != epochdb::Durability::Off).then(|| self.shared.db.durable_epoch())
    }

    /// The epoch each connected backup has acknowledged; `None` if this
    /// is no replication primary.
    pub fn acknowledged(&self) -> Option<Vec<u64>> {
        let st = self.shared.db.replication_status()?;
        Some(st.backups.iter().map(|b| b.acked).collect())
    }

    /// Writes what may be sent; closes after a final reply.
    pub fn flush(&mut self, t: Token) {
        let Some(c) = self.clients.get_mut(&t) else { return };
        let end = c.holds.front().map_or(c.out.len(), |&(at, _)| at);
        // TLS records already made (a handshake's, replies' taken before
        // the socket filled) go first.
        match c.stream.flush_tls() {
            Ok(drained) => c.writable &= drained,
            Err(_) => c.closed = true,
        }
        while c.sent < end && !c.closed {
            match c.stream.write(&c.out[c.sent..end]) {
                Ok(0) => break,
                Ok(n) => {
                    c.sent += n;
                    ThreadStats::add(&self.stats.net_output, n as u64);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    c.writable = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.closed = true;
                    break;
                }
            }
        }
        if c.sent == c.out.len() {
            c.out.clear();
            c.sent = 0;
        } else if c.sent > (1 << 20) {
            let sent = c.sent;
            c.out.drain(..sent);
            c.sent = 0;
            c.holds.iter_mut().for_each(|(at, _)| *at -= sent);
        }
        let done = c.out.is_empty() && c.close_after_reply;
        if c.closed || done {
            self.close(t);
        }
    }

    pub fn close(&mut self, t: Token) {
        if let Some(mut c) = self.clients.remove(&t) {
            c.stream.close_notify();
            let _ = self.poll.registry().deregister(&mut c.stream.sock);
            self.shared.clients.lock().unwrap_or_else(|e| e.into_inner()).remove(&c.info.id);
            self.shared.connected.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Housekeeping: killed clients, garbage, and (loop 0) the expiry sweep.
    fn cron(&mut self) {
        self.clock = (Instant::now(), now_ms());
        let killed: Vec<Token> =
            self.clients.iter().filter(|(_, c)| c.info.kill.load(Ordering::Acquire)).map(|(t, _)| *t).collect();
        for t in killed {
            self.close(t);
        }
        // What this loop's deletes unlinked is freed at the end of a later
        // transaction once no reader can see it: a loop with no traffic
        // (writes refused above `maxmemory`, say) frees it here.
        if self.worker.pending_garbage() > 0 {
            let _ = self.worker.collect_garbage();
        }
        // A replica's expired keys go when its primary's sweep removes them.
        if self.idx == 0 && !self.shared.db.is_read_only() {
            self.sweep();
        }
        // INFO keyspace's counts, once at start and after a promotion.
        if self.idx == 0 && self.shared.counts.stale(false) && !self.shared.db.is_read_only() {
            self.shared.counts.count_in_background(&self.shared.db);
        }
    }

    /// Removes expired keys through the expiry index, a batch per
    /// transaction, so they do not pile up in memory.
    fn sweep(&mut self) {
        let tables = self.shared.tables.clone();
        for table in tables {
            for _ in 0..SWEEP_ROUNDS {
                let now = now_ms();
                let r = self.worker.run_with_info(|txn| {
                    let mut db = Db::new(table, now);
                    let due = db.due(txn, SWEEP_BATCH)?;
                    let mut removed = 0;
                    for (at, key) in &due {
                        removed += db.expire_if(txn, *at, key)? as u64;
                    }
                    Ok((due.len(), removed, db.tally))
                });
                match r {
                    Ok(((n, removed, tally), info)) => {
                        self.shared.counts.apply(self.idx, info.epoch, &tally);
                        ThreadStats::add(&self.stats.expired, removed);
                        if n < SWEEP_BATCH {
                            break;
                        }
                    }
                    Err(e) => {
                        ::log::warn!("expiry sweep: {e}");
                        break;
                    }
                }
            }
        }
    }

    fn slowlog(&mut self, t: Token, args: &Args, usec: u64) {
        let Some(c) = self.clients.get(&t) else { return };
        let mut shown: Vec<Vec<u8>> = args.iter_from(0).take(31).map(|a| a[..a.len().min(128)].to_vec()).collect();
        if args.len() > 32 {
            shown.push(format!("... ({} more arguments)", args.len() - 31).into_bytes());
        }
        let entry = SlowEntry {
            id: 0,
            time: now_ms() / 1000,
            usec,
            args: shown,
            addr: c.info.addr.to_string(),
            name: c.info.name.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        self.shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    }

    pub fn client(&mut self, t: Token) -> Option<&mut Client> {
        self.clients.get_mut(&t)
    }
}

/// A client-supplied name shown in an error, cut short and without line
/// breaks.
pub fn printable(a: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(&a[..a.len().min(128)]).chars().filter(|c| !c.is_control()).collect();
    s
}

/// An engine error as a reply line.
pub fn engine_error(e: &Error) -> String {
    match e {
        Error::Aborted(r) => format!("ERR transaction aborted after retries ({r:?}); try again"),
        Error::ValueTooLarge { len, max } => format!("ERR value of {len} bytes is over the limit of {max}"),
        // Clients retry LOADING (a replica that has nothing to show yet).
        Error::Stale { .. } => format!("LOADING {other}", other = e),
        other => format!("ERR {other}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_keeps_what_is_not_consumed_and_shrinks_when_empty() {
        let mut b = ReadBuf::default();
        let room = b.room(READ_CHUNK, 0);
        assert!(room.len() >= READ_CHUNK);
        room[..5].copy_from_slice(b"hello");
        b.add(5);
        b.consume(2);
        assert_eq!(b.filled(), b"llo");
        // Growing for a big request keeps the bytes before it.
        let room = b.room(2 * READ_KEEP, 0);
        room[..2].copy_from_slice(b"!!");
        b.add(2);
        assert_eq!(b.filled(), b"llo!!");
        b.consume(3);
        assert_eq!(b.filled(), b"!!");
        assert!(b.buf.len() > READ_KEEP, "not cut back while it holds bytes");
        b.consume(2);
        assert_eq!(b.filled(), b"");
        assert_eq!(b.buf.len(), READ_CHUNK, "cut back once empty");
    }

    #[test]
    fn a_read_buffer_takes_a_declared_bulk_at_once_and_zeroes_only_what_it_reads_into() {
        let mut b = ReadBuf::default();
        let expect = 64 * READ_CHUNK;
        for i in 0..64 {
            let room = b.room(READ_CHUNK, expect - i * READ_CHUNK);
            assert_eq!(room.len(), READ_CHUNK, "zeroed only as far as the next read");
            b.add(READ_CHUNK);
            assert_eq!(b.buf.capacity(), expect, "the bulk's room, exactly, from the start");
        }
    }
}

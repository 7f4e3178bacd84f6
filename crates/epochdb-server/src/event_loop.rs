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
use crate::client::{Blocked, Client, Reply, READ_CHUNK};
use crate::cmd::pubsub;
use crate::cmd::replication::{acknowledged, durable_here, write_wait_reply};
use crate::cmd::{engine_error, key_too_long, key_too_long_msg, lookup, printable, COMMANDS};
use crate::command::{Call, Command, Local, Run};
use crate::fasthash::FastHash;
use crate::keyspace::Db;
use crate::resp::{Args, Limits};
use crate::shared::{now_ms, now_us, ClientInfo, Shared};
use crate::stats::{SlowEntry, ThreadStats};
use crate::tls::Stream;
use epochdb::{Error, TableId, Worker};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const TLS_LISTENER: Token = Token(2);
const FIRST_CLIENT: usize = 3;
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
///
/// SO_REUSEPORT would also let a second server (of the same user) bind
/// the port and take half its connections, so a port given is first bound
/// once without it: that fails, as Redis does, while anything listens
/// there.
pub fn listen(bind: &str, port: u16, threads: usize) -> std::io::Result<Vec<TcpListener>> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ip: std::net::IpAddr = bind
        .parse()
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, format!("'{bind}' is not an IP address")))?;
    let mut addr = SocketAddr::new(ip, port);
    let socket = |addr: SocketAddr, reuse_port: bool| -> std::io::Result<Socket> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(reuse_port)?;
        s.set_nonblocking(true)?;
        Ok(s)
    };
    if port != 0 {
        socket(addr, false)?.bind(&addr.into())?;
    }
    let mut out = Vec::new();
    for _ in 0..threads {
        let s = socket(addr, true)?;
        s.bind(&addr.into())?;
        s.listen(1024)?;
        let l: std::net::TcpListener = s.into();
        addr = l.local_addr()?;
        out.push(TcpListener::from_std(l));
    }
    Ok(out)
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
    /// Clients in WAIT, WAITAOF, SAVE or a blocking pop.
    pub(crate) blocked: Vec<Token>,
    /// Inside `unblock` (which runs the input of the clients it answers,
    /// whose writes would call it again).
    unblocking: bool,
    /// The pipeline read-ahead's buffers.
    ahead: Ahead,
    /// The newest epoch a reply held in this pass waits on; hastened once
    /// the pass ends (see `run`).
    hasten_to: u64,
    /// Memory in use was above `maxmemory` at the start of this pass.
    over_memory: bool,
    /// The wall clock's microseconds at an instant, set again by every
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
            unblocking: false,
            ahead: Ahead::default(),
            hasten_to: 0,
            over_memory: false,
            clock: (Instant::now(), now_us()),
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
            self.deliver();
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
                let users = self.shared.users();
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
                in_pop: Default::default(),
                unblock: Default::default(),
            });
            self.shared.clients().insert(id, info.clone());
            let generation = self.shared.acl_generation();
            let stream = Stream { sock, tls: session };
            self.clients.insert(token, Client::new(stream, info, user, allowed, generation));
        }
    }

    /// Whether protected mode refuses a client from `addr`: it is on, the
    /// default user needs no password, and the client is not on loopback.
    fn protected(&self, addr: SocketAddr) -> bool {
        if !self.shared.settings.protected_mode.load(Ordering::Relaxed) || addr.ip().to_canonical().is_loopback() {
            return false;
        }
        let users = self.shared.users();
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

    /// Runs one request, and drops its reply if CLIENT REPLY says so.
    fn execute(&mut self, t: Token, args: &Args) {
        let Some(c) = self.clients.get(&t) else { return };
        let (before, mode) = (c.out.len(), c.reply);
        self.execute_one(t, args);
        let Some(c) = self.clients.get_mut(&t) else { return };
        let drop = match (mode, c.reply) {
            (Reply::SkipNext, _) => {
                c.reply = Reply::On;
                true
            }
            (_, Reply::Skip) => {
                c.reply = Reply::SkipNext;
                true
            }
            (_, Reply::Off) => true,
            _ => false,
        };
        // A RESP3 push (a subscription's confirmation) goes out anyway.
        let push = c.resp3 && c.out.get(before) == Some(&b'>');
        if drop && !push && c.out.len() > before {
            c.out.truncate(before);
            c.holds.retain(|&(at, _)| at < before);
        }
        // Not for a client the command blocked (it wrote nothing): its
        // input, being parsed here, must not be run again from `unblock`.
        let blocked = c.blocked.is_some();
        if !blocked
            && self.shared.waiters.any()
            && lookup(args.get(0)).is_some_and(|(_, c)| c.write || c.name == "exec")
        {
            self.wake_waiters();
        }
    }

    /// Runs one request and writes its reply.
    fn execute_one(&mut self, t: Token, args: &Args) {
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
        // RESP2 has no room for replies among messages: a subscribed
        // client may only manage its subscriptions, as in Redis.
        if c.subs.any() && !c.resp3 {
            if !pubsub::allowed_while_subscribed(cmd.name) {
                c.out().error(&format!(
                    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    cmd.name
                ));
                return;
            }
            if cmd.name == "ping" {
                let mut out = c.out();
                out.array(2);
                out.bulk_str("pong");
                out.bulk(if args.len() > 1 { args.get(1) } else { b"" });
                return;
            }
        }
        if c.multi.is_some() && !cmd.runs_in_multi() {
            if matches!(cmd.run, Run::Conn(_)) {
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
            Run::Data(f) => self.call(t, start, |x| x.run_data(f, args, cmd.write)),
            Run::Local(f) => {
                let before = c.out.len();
                let mut db = c.db;
                let databases = self.shared.tables.len();
                f(&mut Local { out: c.out(), db: &mut db, databases }, args);
                if db != c.db {
                    c.db = db;
                    c.info.db.store(db, Ordering::Relaxed);
                }
                c.out.get(before) == Some(&b'-')
            }
            Run::Conn(f) | Run::Either { alone: f, .. } => self.call(t, start, |x| f(x, args)),
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
        let generation = self.shared.acl_generation();
        let c = self.clients.get_mut(&t)?;
        if c.acl_generation != generation {
            c.acl_generation = generation;
            let users = self.shared.users();
            match c.user.as_ref().and_then(|u| users.users.get(u)) {
                Some(u) if u.enabled => c.allowed = u.allowed.clone(),
                _ => {
                    c.user = None;
                    c.allowed = Arc::new(Vec::new());
                }
            }
        }
        let no_auth = cmd.no_auth();
        if c.user.is_none() && !no_auth {
            return Some("NOAUTH Authentication required.".into());
        }
        if !no_auth && !c.allowed.get(i).copied().unwrap_or(false) {
            let user = c.user.as_deref().unwrap_or("default");
            return Some(format!("NOPERM User {user} has no permissions to run the '{}' command", cmd.name));
        }
        if key_too_long(args, cmd.key_positions(args.len())) {
            return Some(key_too_long_msg());
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

    /// Runs `f` (a command begun at `start`) on client `t`'s [`Call`], then sends a transaction's reply
    /// it finished (held for durability as replies are) and registers the
    /// client if `f` blocked it; returns whether it failed.
    fn call(&mut self, t: Token, start: Instant, f: impl FnOnce(&mut Call<'_>)) -> bool {
        // In µs, then ms: truncating each part could put `now` up to 2 ms
        // behind the wall clock (a PTTL one too long).
        let now = (self.clock.1 + start.saturating_duration_since(self.clock.0).as_micros() as u64) / 1000;
        let Some(client) = self.clients.get_mut(&t) else { return true };
        let (before, was_blocked) = (client.out.len(), client.blocked.is_some());
        let mut x = Call {
            client,
            shared: &self.shared,
            worker: &mut self.worker,
            scratch: &mut self.scratch,
            db: &mut self.db,
            idx: self.idx,
            token: t.0,
            now,
            finished: None,
        };
        f(&mut x);
        let (finished, blocked) = (x.finished.take(), !was_blocked && x.client.blocked.is_some());
        let failed = x.client.out.get(before) == Some(&b'-');
        if blocked {
            self.blocked.push(t);
            self.count_blocked();
        }
        match finished {
            Some((r, write)) => {
                let failed = self.scratch.first() == Some(&b'-');
                self.finish(t, r, write) || failed
            }
            None => failed,
        }
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
        // Until a pass answers no one: one pop may feed another's source.
        self.unblocking = true;
        while self.unblock_pass() > 0 && !self.blocked.is_empty() {}
        self.unblocking = false;
        self.count_blocked();
    }

    /// One look at every blocked client; returns how many were answered.
    fn unblock_pass(&mut self) -> usize {
        let mut answered = 0;
        let acked = acknowledged(&self.shared);
        let durable = durable_here(&self.shared);
        let now = Instant::now();
        let shared = self.shared.clone();
        let db = &shared.db;
        let installed = db.checkpoint_stats().installed;
        for t in std::mem::take(&mut self.blocked) {
            let Some(c) = self.clients.get_mut(&t) else { continue };
            let Some(b) = c.blocked.clone() else { continue };
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
                // The command tries again: it replies, or blocks on.
                Blocked::Pop(w) => {
                    if let Run::Either { alone, .. } = COMMANDS[w.cmd].run {
                        self.call(t, now, |x| alone(x, &w.args));
                    }
                    if self.clients.get(&t).is_some_and(|c| c.blocked.is_some()) {
                        self.blocked.push(t);
                        continue;
                    }
                }
            }
            let Some(c) = self.clients.get_mut(&t) else { continue };
            c.blocked = None;
            answered += 1;
            self.process(t);
            self.flush(t);
        }
        answered
    }

    /// After a write, while clients wait in blocking pops: this loop's try
    /// again now, before its next command (so a push feeds a waiter, and a
    /// chain of BLMOVEs moves, before the pusher's next command, as in
    /// Redis); other loops with waiters are woken to try at once.
    fn wake_waiters(&mut self) {
        let loops = self.shared.waiters.loops();
        if loops.contains(&self.idx) && !self.unblocking {
            self.unblock();
        }
        let wakers = self.shared.wakeups.wakers.lock().unwrap_or_else(|e| e.into_inner());
        for l in loops.into_iter().filter(|&l| l != self.idx) {
            if let Some(w) = wakers.get(l) {
                let _ = w.wake();
            }
        }
    }

    /// Writes the pub/sub messages published to this loop's clients.
    fn deliver(&mut self) {
        let mail = self.shared.pubsub.take(self.idx);
        let mut to = Vec::new();
        for d in &mail {
            let t = Token(d.token);
            if let Some(c) = self.clients.get_mut(&t) {
                pubsub::write_message(&mut c.out(), d);
                if !to.contains(&t) {
                    to.push(t);
                }
            }
        }
        for t in to {
            self.flush(t);
        }
    }

    /// Publishes how many of this loop's clients are blocked (INFO's
    /// `blocked_clients`). A closed client leaves the list at the next
    /// `unblock`.
    pub(crate) fn count_blocked(&self) {
        self.stats.blocked.store(self.blocked.len() as u64, Ordering::Relaxed);
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
            if let Some(Blocked::Pop(w)) = &c.blocked {
                self.shared.waiters.leave(w.ticket);
            }
            pubsub::leave_all(&self.shared, &mut c, (self.idx, t.0));
            c.stream.close_notify();
            let _ = self.poll.registry().deregister(&mut c.stream.sock);
            self.shared.clients().remove(&c.info.id);
            self.shared.connected.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Housekeeping: killed clients, garbage, and (loop 0) the expiry sweep.
    fn cron(&mut self) {
        self.clock = (Instant::now(), now_us());
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
        self.shared.slowlog().push(entry);
    }
}

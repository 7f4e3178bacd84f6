//! The connection: PING, ECHO, SELECT, QUIT, RESET, AUTH, HELLO, CLIENT.

use super::server::REDIS_VERSION;
use super::{printable, COMMANDS, NOT_INT, SYNTAX};
use crate::client::{Client, Reply};
use crate::command::{Call, Local};
use crate::resp::{parse_i64, Args};
use crate::shared::{ClientInfo, Shared};
use std::sync::atomic::Ordering;

/// PING [message].
pub fn ping(x: &mut Local<'_>, a: &Args) {
    match a.len() {
        1 => x.out.simple("PONG"),
        2 => x.out.bulk(a.get(1)),
        _ => x.out.error("ERR wrong number of arguments for 'ping' command"),
    }
}

/// ECHO message.
pub fn echo(x: &mut Local<'_>, a: &Args) {
    x.out.bulk(a.get(1));
}

/// SELECT index: the connection's numbered database.
pub fn select(x: &mut Local<'_>, a: &Args) {
    match parse_i64(a.get(1)) {
        Some(n) if n >= 0 && (n as usize) < x.databases => {
            *x.db = n as usize;
            x.out.ok();
        }
        Some(_) => x.out.error("ERR DB index is out of range"),
        None => x.out.error(NOT_INT),
    }
}

/// QUIT: OK, then the connection closes.
pub fn quit(x: &mut Call<'_>, _: &Args) {
    x.client.out().ok();
    x.client.close_after_reply = true;
}

/// RESET: the connection as it was when it connected.
pub fn reset(x: &mut Call<'_>, _: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    super::pubsub::leave_all(shared, c, (x.idx, x.token));
    c.multi = None;
    c.multi_failed = false;
    c.watched.clear();
    c.db = 0;
    c.info.db.store(0, Ordering::Relaxed);
    c.resp3 = false;
    c.info.name.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let users = shared.users();
    match users.users.get("default") {
        Some(d) if d.enabled && d.nopass => {
            c.user = Some("default".into());
            c.allowed = d.allowed.clone();
        }
        _ => c.user = None,
    }
    c.out().simple("RESET");
}

/// AUTH [username] password.
pub fn auth(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
    let (user, pass) = if a.len() == 2 {
        ("default".to_string(), a.get(1))
    } else {
        (String::from_utf8_lossy(a.get(1)).into_owned(), a.get(2))
    };
    if a.len() > 3 {
        c.out().error(SYNTAX);
    } else if !log_in(c, shared, &user, pass) {
        let users = shared.users();
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

/// Logs the connection in as `user` if `pass` opens it.
fn log_in(c: &mut Client, shared: &Shared, user: &str, pass: &[u8]) -> bool {
    let users = shared.users();
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

pub fn hello(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
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
                if !log_in(c, shared, &user, a.get(i + 2)) {
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
    o.bulk(if shared.is_replica() { b"replica" } else { b"master" });
    o.bulk(b"modules");
    o.array(0);
}

fn client_line(info: &ClientInfo, now: std::time::Instant) -> String {
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

pub fn client(x: &mut Call<'_>, a: &Args) {
    let (c, shared) = (&mut *x.client, &**x.shared);
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
        (b"UNBLOCK", 3 | 4) => {
            let Some(id) = parse_i64(a.get(2)) else { return c.out().error(NOT_INT) };
            let how = match a.len() {
                3 => 1,
                _ if a.get(3).eq_ignore_ascii_case(b"TIMEOUT") => 1,
                _ if a.get(3).eq_ignore_ascii_case(b"ERROR") => 2,
                _ => return c.out().error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
            };
            let target = shared.clients().get(&(id as u64)).cloned();
            let done = match target {
                Some(info) if info.in_pop.load(Ordering::Acquire) => {
                    info.unblock.store(how, Ordering::Release);
                    true
                }
                _ => false,
            };
            // Its loop looks again within a few ms (it has a blocked client).
            c.out().int(done as i64);
        }
        (b"REPLY", 3) => match &a.get(2).to_ascii_uppercase()[..] {
            b"ON" => {
                c.reply = Reply::On;
                c.out().ok();
            }
            // The loop drops this command's reply too.
            b"OFF" => c.reply = Reply::Off,
            b"SKIP" => c.reply = Reply::Skip,
            _ => c.out().error(super::SYNTAX),
        },
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
            let clients = shared.clients();
            let mut ids: Vec<_> = clients.keys().copied().collect();
            ids.sort_unstable();
            let text: String = ids.iter().map(|id| client_line(&clients[id], now)).collect();
            drop(clients);
            c.out().verbatim(&text);
        }
        (b"KILL", n) if n >= 3 => {
            let clients = shared.clients();
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

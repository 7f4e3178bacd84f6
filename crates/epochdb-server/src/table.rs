//! The command table: every command's name, arity, flags and key
//! positions (as COMMAND INFO reports them) and how it runs.

use crate::commands::{self as c, DataFn};
use crate::fasthash::FastHash;
use std::collections::HashMap;
use std::sync::OnceLock;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// In an epochdb transaction (alone, or inside EXEC).
    Data(DataFn),
    /// On the connection or the server, outside any transaction.
    Conn,
}

/// One command.
pub struct Command {
    /// Lower case, as COMMAND replies it.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    pub write: bool,
    /// Categories for ACL rules (`+@read`, `-@admin`, ...).
    pub categories: &'static [&'static str],
    /// First key, last key (-1: the last argument), step; 0 0 0: no keys.
    pub keys: (i32, i32, i32),
    pub run: Run,
}

impl Command {
    /// Whether `n` arguments (name included) suit the arity.
    pub fn arity_ok(&self, n: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            n == a as usize
        } else {
            n >= (-a) as usize
        }
    }

    /// The indexes of its key arguments in a request of `n` arguments.
    pub fn key_positions(&self, n: usize) -> impl Iterator<Item = usize> {
        let (first, last, step) = self.keys;
        let last = if last < 0 { n as i32 + last } else { last };
        let (first, last, step) = (first.max(0) as usize, last.max(0) as usize, step.max(1) as usize);
        (first..=last).step_by(step).filter(move |&i| first > 0 && i < n)
    }

    /// COMMAND INFO's flags.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.write { "write" } else { "readonly" }];
        if self.categories.contains(&"fast") {
            f.push("fast");
        }
        if self.categories.contains(&"admin") {
            f.push("admin");
        }
        if matches!(self.name, "auth" | "hello" | "quit" | "reset") {
            f.push("no_auth");
        }
        if self.denyoom() {
            f.push("denyoom");
        }
        f
    }

    /// Whether it may add to memory, so is refused above `maxmemory` (the
    /// commands Redis flags `denyoom`; deletes, expiry and reads go on).
    pub fn denyoom(&self) -> bool {
        matches!(
            self.name,
            "set"
                | "setnx"
                | "setex"
                | "psetex"
                | "getset"
                | "mset"
                | "msetnx"
                | "incr"
                | "decr"
                | "incrby"
                | "decrby"
                | "incrbyfloat"
                | "append"
                | "setrange"
                | "copy"
                | "hset"
                | "hmset"
                | "hsetnx"
                | "hincrby"
                | "hincrbyfloat"
        )
    }
}

const R: &[&str] = &["read", "fast"];
const RS: &[&str] = &["read", "slow"];
const W: &[&str] = &["write", "fast"];
const WS: &[&str] = &["write", "slow"];
const CONN: &[&str] = &["connection", "fast"];
const ADMIN: &[&str] = &["admin", "slow", "dangerous"];
const TXN: &[&str] = &["transaction", "fast"];
const SRV: &[&str] = &["slow"];

macro_rules! cmds {
    ($($name:literal $arity:literal $write:literal $cats:ident ($f:literal $l:literal $s:literal) $run:expr;)*) => {
        &[$(Command { name: $name, arity: $arity, write: $write, categories: $cats, keys: ($f, $l, $s), run: $run },)*]
    };
}

/// Every command epochdb serves.
pub static COMMANDS: &[Command] = cmds! {
    // connection and server
    "ping" -1 false CONN (0 0 0) Run::Conn;
    "echo" 2 false CONN (0 0 0) Run::Conn;
    "hello" -1 false CONN (0 0 0) Run::Conn;
    "auth" -2 false CONN (0 0 0) Run::Conn;
    "select" 2 false CONN (0 0 0) Run::Conn;
    "quit" -1 false CONN (0 0 0) Run::Conn;
    "reset" 1 false CONN (0 0 0) Run::Conn;
    "client" -2 false SRV (0 0 0) Run::Conn;
    "command" -1 false SRV (0 0 0) Run::Conn;
    "config" -2 false ADMIN (0 0 0) Run::Conn;
    "info" -1 false SRV (0 0 0) Run::Conn;
    "time" 1 false R (0 0 0) Run::Conn;
    "shutdown" -1 false ADMIN (0 0 0) Run::Conn;
    "role" 1 false R (0 0 0) Run::Conn;
    "acl" -2 false SRV (0 0 0) Run::Conn;
    "slowlog" -2 false ADMIN (0 0 0) Run::Conn;
    "bgsave" -1 false ADMIN (0 0 0) Run::Conn;
    "save" 1 false ADMIN (0 0 0) Run::Conn;
    "lastsave" 1 false ADMIN (0 0 0) Run::Conn;
    "wait" 3 false SRV (0 0 0) Run::Conn;
    "waitaof" 4 false SRV (0 0 0) Run::Conn;
    "replicaof" 3 false ADMIN (0 0 0) Run::Conn;
    "epochdb.member" -3 false ADMIN (0 0 0) Run::Conn;
    "flushall" -1 true WS (0 0 0) Run::Conn;
    // transactions
    "multi" 1 false TXN (0 0 0) Run::Conn;
    "exec" 1 false TXN (0 0 0) Run::Conn;
    "discard" 1 false TXN (0 0 0) Run::Conn;
    "watch" -2 false TXN (1 -1 1) Run::Conn;
    "unwatch" 1 false TXN (0 0 0) Run::Conn;
    // strings
    "get" 2 false R (1 1 1) Run::Data(c::get);
    "set" -3 true WS (1 1 1) Run::Data(c::set);
    "setnx" 3 true W (1 1 1) Run::Data(c::setnx);
    "setex" 4 true WS (1 1 1) Run::Data(c::setex);
    "psetex" 4 true WS (1 1 1) Run::Data(c::psetex);
    "getset" 3 true W (1 1 1) Run::Data(c::getset);
    "getdel" 2 true W (1 1 1) Run::Data(c::getdel);
    "getex" -2 true W (1 1 1) Run::Data(c::getex);
    "mget" -2 false R (1 -1 1) Run::Data(c::mget);
    "mset" -3 true WS (1 -1 2) Run::Data(c::mset);
    "msetnx" -3 true WS (1 -1 2) Run::Data(c::msetnx);
    "incr" 2 true W (1 1 1) Run::Data(c::incr);
    "decr" 2 true W (1 1 1) Run::Data(c::decr);
    "incrby" 3 true W (1 1 1) Run::Data(c::incrby);
    "decrby" 3 true W (1 1 1) Run::Data(c::decrby);
    "incrbyfloat" 3 true W (1 1 1) Run::Data(c::incrbyfloat);
    "append" 3 true W (1 1 1) Run::Data(c::append);
    "strlen" 2 false R (1 1 1) Run::Data(c::strlen);
    "memory" -2 false RS (2 2 1) Run::Data(c::memory);
    "getrange" 4 false RS (1 1 1) Run::Data(c::getrange);
    "setrange" 4 true WS (1 1 1) Run::Data(c::setrange);
    // keyspace
    "del" -2 true WS (1 -1 1) Run::Data(c::del);
    "unlink" -2 true W (1 -1 1) Run::Data(c::del);
    "exists" -2 false R (1 -1 1) Run::Data(c::exists);
    "type" 2 false R (1 1 1) Run::Data(c::type_);
    "keys" 2 false RS (0 0 0) Run::Data(c::keys);
    "scan" -2 false RS (0 0 0) Run::Data(c::scan);
    "rename" 3 true WS (1 2 1) Run::Data(c::rename);
    "renamenx" 3 true W (1 2 1) Run::Data(c::renamenx);
    "copy" -3 true WS (1 2 1) Run::Data(c::copy);
    "randomkey" 1 false RS (0 0 0) Run::Data(c::randomkey);
    "dbsize" 1 false R (0 0 0) Run::Data(c::dbsize);
    "flushdb" -1 true WS (0 0 0) Run::Data(c::flushdb);
    "expire" -3 true W (1 1 1) Run::Data(c::expire);
    "pexpire" -3 true W (1 1 1) Run::Data(c::pexpire);
    "expireat" -3 true W (1 1 1) Run::Data(c::expireat);
    "pexpireat" -3 true W (1 1 1) Run::Data(c::pexpireat);
    "ttl" 2 false R (1 1 1) Run::Data(c::ttl);
    "pttl" 2 false R (1 1 1) Run::Data(c::pttl);
    "expiretime" 2 false R (1 1 1) Run::Data(c::expiretime);
    "pexpiretime" 2 false R (1 1 1) Run::Data(c::pexpiretime);
    "persist" 2 true W (1 1 1) Run::Data(c::persist);
    // hashes
    "hset" -4 true W (1 1 1) Run::Data(c::hset);
    "hmset" -4 true W (1 1 1) Run::Data(c::hset);
    "hsetnx" 4 true W (1 1 1) Run::Data(c::hsetnx);
    "hget" 3 false R (1 1 1) Run::Data(c::hget);
    "hmget" -3 false R (1 1 1) Run::Data(c::hmget);
    "hdel" -3 true W (1 1 1) Run::Data(c::hdel);
    "hexists" 3 false R (1 1 1) Run::Data(c::hexists);
    "hstrlen" 3 false R (1 1 1) Run::Data(c::hstrlen);
    "hlen" 2 false R (1 1 1) Run::Data(c::hlen);
    "hgetall" 2 false RS (1 1 1) Run::Data(c::hgetall);
    "hkeys" 2 false RS (1 1 1) Run::Data(c::hkeys);
    "hvals" 2 false RS (1 1 1) Run::Data(c::hvals);
    "hincrby" 4 true W (1 1 1) Run::Data(c::hincrby);
    "hincrbyfloat" 4 true W (1 1 1) Run::Data(c::hincrbyfloat);
    "hscan" -3 false RS (1 1 1) Run::Data(c::hscan);
    // epochdb's own
    "epochdb.range" -3 false RS (0 0 0) Run::Data(c::range);
};

/// Looks a command up by name, in any case.
pub fn lookup(name: &[u8]) -> Option<(usize, &'static Command)> {
    static BY_NAME: OnceLock<HashMap<&'static [u8], usize, FastHash>> = OnceLock::new();
    let map = BY_NAME.get_or_init(|| COMMANDS.iter().enumerate().map(|(i, c)| (c.name.as_bytes(), i)).collect());
    if name.len() > 32 {
        return None;
    }
    let mut lower = [0u8; 32];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    map.get(&lower[..]).map(|&i| (i, &COMMANDS[i]))
}

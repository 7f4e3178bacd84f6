//! The commands: one file per family, and the command table, the only
//! place a command's name leads to its handler. A new family is a file
//! here and its rows in [`COMMANDS`].
//!
//! Data commands ([`Run::Data`]) run inside an epochdb transaction, alone
//! or in EXEC, and write their reply as they go; connection-local ones
//! ([`Run::Local`]) touch only the connection; the rest ([`Run::Conn`])
//! the connection and the server. The [`Run::Either`] commands run one way
//! alone and another inside EXEC: DBSIZE answers from the key counts
//! alone and scans inside EXEC; a blocking pop blocks alone and does not
//! inside EXEC.

pub mod bits;
pub mod blocking;
pub mod connection;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::acl::Rights;
use crate::command::{Command, Exec, Run};
use crate::fasthash::FastHash;
use crate::keyspace::{Found, Head, Kind, MAX_KEY, WRONGTYPE};
use crate::resp::{parse_i64, Args, Out};
use epochdb::{Error, Txn};
use std::collections::HashMap;
use std::sync::OnceLock;

pub(crate) const NOT_INT: &str = "ERR value is not an integer or out of range";
pub(crate) const NOT_FLOAT: &str = "ERR value is not a valid float";
pub(crate) const SYNTAX: &str = "ERR syntax error";
pub(crate) const NO_KEY: &str = "ERR no such key";
pub(crate) const OVERFLOW: &str = "ERR increment or decrement would overflow";

/// Checks every key argument's length before any is used.
pub fn key_too_long(args: &Args, keys: impl Iterator<Item = usize>) -> bool {
    keys.into_iter().any(|i| i < args.len() && args.get(i).len() > MAX_KEY)
}

pub fn key_too_long_msg() -> String {
    format!("ERR key is too long (epochdb keys are at most {MAX_KEY} bytes)")
}

/// A key of one type as a command found it.
pub(crate) enum Typed {
    /// Missing (or expired).
    Missing,
    /// Live, with its head's payload.
    Live(Vec<u8>),
    /// Of another type: WRONGTYPE has been replied.
    Wrong,
}

/// `key` read as a `kind`, WRONGTYPE replied if it is another type.
pub(crate) fn typed(x: &mut Exec<'_>, txn: &mut Txn<'_>, key: &[u8], kind: Kind) -> epochdb::Result<Typed> {
    Ok(match x.db.find(txn, key)? {
        Found::Live(h, v) if h.kind == kind => Typed::Live(v.to_vec()),
        Found::Live(..) => {
            x.out.error(WRONGTYPE);
            Typed::Wrong
        }
        Found::Missing(_) => Typed::Missing,
    })
}

/// A key of one type about to be written: its head (a new one if it was
/// missing), its payload, whether it was live, and `old`, the expiry of the
/// head it replaces (`None`: there is none), for
/// [`crate::keyspace::Db::write_head`].
pub(crate) struct Writing {
    pub head: Head,
    pub payload: Vec<u8>,
    pub live: bool,
    pub old: Option<u64>,
}

/// `key` prepared for a write as a `kind` (an expired one cleaned up);
/// `None` after replying WRONGTYPE.
pub(crate) fn for_write(
    x: &mut Exec<'_>,
    txn: &mut Txn<'_>,
    key: &[u8],
    kind: Kind,
) -> epochdb::Result<Option<Writing>> {
    let old = match x.db.find(txn, key)? {
        Found::Live(head, v) if head.kind == kind => {
            return Ok(Some(Writing { head, payload: v.to_vec(), live: true, old: Some(head.expire_at) }));
        }
        Found::Live(..) => {
            x.out.error(WRONGTYPE);
            return Ok(None);
        }
        Found::Missing(old) => old,
    };
    if old.is_some_and(|h| h.kind.has_elements()) {
        x.db.delete_fields(txn, key)?;
    }
    let head = Head { kind, expire_at: 0 };
    Ok(Some(Writing { head, payload: Vec::new(), live: false, old: old.map(|h| h.expire_at) }))
}

/// Replies that an element does not fit beside its key, if it does not.
pub(crate) fn element_too_long(out: &mut Out<'_>, key: &[u8], element: &[u8], noun: &str) -> bool {
    let max = epochdb::MAX_KEY_LEN - 3;
    let long = key.len() + element.len() > max;
    if long {
        out.error(&format!("ERR key and {noun} are too long (epochdb allows {max} bytes together)"));
    }
    long
}

/// A small random number generator for the commands that pick at random
/// (SPOP, SRANDMEMBER): seeded afresh each time from the process's random
/// keys and the clock.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        use std::hash::BuildHasher;
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Rng(std::collections::hash_map::RandomState::new().hash_one(t.as_nanos()) | 1)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n as u64) as usize
    }
}

/// The integer argument `a`, or `None` with the error replied.
pub(crate) fn int_arg(out: &mut Out<'_>, a: &[u8]) -> Option<i64> {
    let v = parse_i64(a);
    if v.is_none() {
        out.error(NOT_INT);
    }
    v
}

/// Parses an expiry option's number into a Unix ms time (`unit` ms per
/// unit; `absolute` for EXAT/PXAT); `None` for an invalid one.
pub(crate) fn expire_time(now: u64, n: i64, unit: u64, absolute: bool) -> Option<u64> {
    if n <= 0 {
        return None;
    }
    let ms = (n as u64).checked_mul(unit)?;
    let at = if absolute { ms } else { now.checked_add(ms)? };
    (at < i64::MAX as u64).then_some(at)
}

/// A client-supplied name shown in an error, cut short and without line
/// breaks.
pub fn printable(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).chars().filter(|c| !c.is_control()).collect()
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

const R: &[&str] = &["read", "fast"];
const RS: &[&str] = &["read", "slow"];
const W: &[&str] = &["write", "fast"];
const WS: &[&str] = &["write", "slow"];
const CONN: &[&str] = &["connection", "fast"];
const ADMIN: &[&str] = &["admin", "slow", "dangerous"];
const TXN: &[&str] = &["transaction", "fast"];
const SRV: &[&str] = &["slow"];
const PUBSUB: &[&str] = &["pubsub", "slow"];

macro_rules! cmds {
    ($($name:literal $arity:literal $write:literal $cats:ident ($f:literal $l:literal $s:literal) $run:expr;)*) => {
        &[$(Command { name: $name, arity: $arity, write: $write, categories: $cats, keys: ($f, $l, $s), run: $run },)*]
    };
}

/// Every command epochdb serves.
pub static COMMANDS: &[Command] = cmds! {
    // connection and server
    "ping" -1 false CONN (0 0 0) Run::Local(connection::ping);
    "echo" 2 false CONN (0 0 0) Run::Local(connection::echo);
    "hello" -1 false CONN (0 0 0) Run::Conn(connection::hello);
    "auth" -2 false CONN (0 0 0) Run::Conn(connection::auth);
    "select" 2 false CONN (0 0 0) Run::Local(connection::select);
    "quit" -1 false CONN (0 0 0) Run::Conn(connection::quit);
    "reset" 1 false CONN (0 0 0) Run::Conn(connection::reset);
    "client" -2 false SRV (0 0 0) Run::Conn(connection::client);
    "command" -1 false SRV (0 0 0) Run::Conn(server::command);
    "config" -2 false ADMIN (0 0 0) Run::Conn(server::config);
    "info" -1 false SRV (0 0 0) Run::Conn(server::info);
    "time" 1 false R (0 0 0) Run::Local(server::time);
    "shutdown" -1 false ADMIN (0 0 0) Run::Conn(server::shutdown);
    "role" 1 false R (0 0 0) Run::Conn(replication::role);
    "acl" -2 false SRV (0 0 0) Run::Conn(server::acl);
    "slowlog" -2 false ADMIN (0 0 0) Run::Conn(server::slowlog);
    "bgsave" -1 false ADMIN (0 0 0) Run::Conn(server::bgsave);
    "save" 1 false ADMIN (0 0 0) Run::Conn(server::save);
    "lastsave" 1 false ADMIN (0 0 0) Run::Conn(server::lastsave);
    "wait" 3 false SRV (0 0 0) Run::Conn(replication::wait);
    "waitaof" 4 false SRV (0 0 0) Run::Conn(replication::waitaof);
    "replicaof" 3 false ADMIN (0 0 0) Run::Conn(replication::replicaof);
    "epochdb.member" -3 false ADMIN (0 0 0) Run::Conn(replication::member);
    "flushall" -1 true WS (0 0 0) Run::Conn(server::flushall);
    "function" -2 false SRV (0 0 0) Run::Local(scripting::function);
    "script" -2 false SRV (0 0 0) Run::Local(scripting::script);
    // transactions
    "multi" 1 false TXN (0 0 0) Run::Conn(transactions::multi);
    "exec" 1 false TXN (0 0 0) Run::Conn(transactions::exec);
    "discard" 1 false TXN (0 0 0) Run::Conn(transactions::discard);
    "watch" -2 false TXN (1 -1 1) Run::Conn(transactions::watch);
    "unwatch" 1 false TXN (0 0 0) Run::Conn(transactions::unwatch);
    // strings
    "get" 2 false R (1 1 1) Run::Data(strings::get);
    "set" -3 true WS (1 1 1) Run::Data(strings::set);
    "setnx" 3 true W (1 1 1) Run::Data(strings::setnx);
    "setex" 4 true WS (1 1 1) Run::Data(strings::setex);
    "psetex" 4 true WS (1 1 1) Run::Data(strings::psetex);
    "getset" 3 true W (1 1 1) Run::Data(strings::getset);
    "getdel" 2 true W (1 1 1) Run::Data(strings::getdel);
    "getex" -2 true W (1 1 1) Run::Data(strings::getex);
    "mget" -2 false R (1 -1 1) Run::Data(strings::mget);
    "mset" -3 true WS (1 -1 2) Run::Data(strings::mset);
    "msetnx" -3 true WS (1 -1 2) Run::Data(strings::msetnx);
    "incr" 2 true W (1 1 1) Run::Data(strings::incr);
    "decr" 2 true W (1 1 1) Run::Data(strings::decr);
    "incrby" 3 true W (1 1 1) Run::Data(strings::incrby);
    "decrby" 3 true W (1 1 1) Run::Data(strings::decrby);
    "incrbyfloat" 3 true W (1 1 1) Run::Data(strings::incrbyfloat);
    "append" 3 true W (1 1 1) Run::Data(strings::append);
    "strlen" 2 false R (1 1 1) Run::Data(strings::strlen);
    "memory" -2 false RS (2 2 1) Run::Data(keys::memory);
    "object" -2 false RS (2 2 1) Run::Data(keys::object);
    "getrange" 4 false RS (1 1 1) Run::Data(strings::getrange);
    "setrange" 4 true WS (1 1 1) Run::Data(strings::setrange);
    "setbit" 4 true W (1 1 1) Run::Data(bits::setbit);
    "getbit" 3 false R (1 1 1) Run::Data(bits::getbit);
    "bitcount" -2 false RS (1 1 1) Run::Data(bits::bitcount);
    "bitpos" -3 false RS (1 1 1) Run::Data(bits::bitpos);
    "bitop" -4 true WS (2 -1 1) Run::Data(bits::bitop);
    "lcs" -3 false RS (1 2 1) Run::Data(bits::lcs);
    "bitfield" -2 true W (1 1 1) Run::Data(bits::bitfield);
    "bitfield_ro" -2 false R (1 1 1) Run::Data(bits::bitfield_ro);
    // keyspace
    "del" -2 true WS (1 -1 1) Run::Data(keys::del);
    "unlink" -2 true W (1 -1 1) Run::Data(keys::del);
    "exists" -2 false R (1 -1 1) Run::Data(keys::exists);
    "type" 2 false R (1 1 1) Run::Data(keys::type_);
    "keys" 2 false RS (0 0 0) Run::Data(keys::keys);
    "scan" -2 false RS (0 0 0) Run::Data(keys::scan);
    "rename" 3 true WS (1 2 1) Run::Data(keys::rename);
    "renamenx" 3 true W (1 2 1) Run::Data(keys::renamenx);
    "copy" -3 true WS (1 2 1) Run::Data(keys::copy);
    "randomkey" 1 false RS (0 0 0) Run::Data(keys::randomkey);
    "dump" 2 false RS (1 1 1) Run::Data(keys::dump);
    "restore" -4 true WS (1 1 1) Run::Data(keys::restore);
    "sort" -2 true WS (1 1 1) Run::Data(sort::sort);
    "sort_ro" -2 false RS (1 1 1) Run::Data(sort::sort_ro);
    "dbsize" 1 false R (0 0 0) Run::Either { alone: keys::dbsize, queued: keys::dbsize_scan };
    "flushdb" -1 true WS (0 0 0) Run::Data(keys::flushdb);
    "expire" -3 true W (1 1 1) Run::Data(keys::expire);
    "pexpire" -3 true W (1 1 1) Run::Data(keys::pexpire);
    "expireat" -3 true W (1 1 1) Run::Data(keys::expireat);
    "pexpireat" -3 true W (1 1 1) Run::Data(keys::pexpireat);
    "ttl" 2 false R (1 1 1) Run::Data(keys::ttl);
    "pttl" 2 false R (1 1 1) Run::Data(keys::pttl);
    "expiretime" 2 false R (1 1 1) Run::Data(keys::expiretime);
    "pexpiretime" 2 false R (1 1 1) Run::Data(keys::pexpiretime);
    "persist" 2 true W (1 1 1) Run::Data(keys::persist);
    // hashes
    "hset" -4 true W (1 1 1) Run::Data(hashes::hset);
    "hmset" -4 true W (1 1 1) Run::Data(hashes::hset);
    "hsetnx" 4 true W (1 1 1) Run::Data(hashes::hsetnx);
    "hget" 3 false R (1 1 1) Run::Data(hashes::hget);
    "hmget" -3 false R (1 1 1) Run::Data(hashes::hmget);
    "hdel" -3 true W (1 1 1) Run::Data(hashes::hdel);
    "hexists" 3 false R (1 1 1) Run::Data(hashes::hexists);
    "hstrlen" 3 false R (1 1 1) Run::Data(hashes::hstrlen);
    "hlen" 2 false R (1 1 1) Run::Data(hashes::hlen);
    "hgetall" 2 false RS (1 1 1) Run::Data(hashes::hgetall);
    "hkeys" 2 false RS (1 1 1) Run::Data(hashes::hkeys);
    "hvals" 2 false RS (1 1 1) Run::Data(hashes::hvals);
    "hincrby" 4 true W (1 1 1) Run::Data(hashes::hincrby);
    "hincrbyfloat" 4 true W (1 1 1) Run::Data(hashes::hincrbyfloat);
    "hscan" -3 false RS (1 1 1) Run::Data(hashes::hscan);
    "hrandfield" -2 false RS (1 1 1) Run::Data(hashes::hrandfield);
    // pub/sub
    "subscribe" -2 false PUBSUB (0 0 0) Run::Conn(pubsub::subscribe);
    "psubscribe" -2 false PUBSUB (0 0 0) Run::Conn(pubsub::psubscribe);
    "ssubscribe" -2 false PUBSUB (0 0 0) Run::Conn(pubsub::ssubscribe);
    "unsubscribe" -1 false PUBSUB (0 0 0) Run::Conn(pubsub::unsubscribe);
    "punsubscribe" -1 false PUBSUB (0 0 0) Run::Conn(pubsub::punsubscribe);
    "sunsubscribe" -1 false PUBSUB (0 0 0) Run::Conn(pubsub::sunsubscribe);
    "publish" 3 false PUBSUB (0 0 0) Run::Conn(pubsub::publish);
    "spublish" 3 false PUBSUB (0 0 0) Run::Conn(pubsub::spublish);
    "pubsub" -2 false PUBSUB (0 0 0) Run::Conn(pubsub::pubsub);
    // sets
    "sadd" -3 true W (1 1 1) Run::Data(sets::sadd);
    "srem" -3 true W (1 1 1) Run::Data(sets::srem);
    "sismember" 3 false R (1 1 1) Run::Data(sets::sismember);
    "smismember" -3 false R (1 1 1) Run::Data(sets::smismember);
    "smembers" 2 false RS (1 1 1) Run::Data(sets::smembers);
    "scard" 2 false R (1 1 1) Run::Data(sets::scard);
    "spop" -2 true W (1 1 1) Run::Data(sets::spop);
    "srandmember" -2 false RS (1 1 1) Run::Data(sets::srandmember);
    "smove" 4 true W (1 2 1) Run::Data(sets::smove);
    "sinter" -2 false RS (1 -1 1) Run::Data(sets::sinter);
    "sunion" -2 false RS (1 -1 1) Run::Data(sets::sunion);
    "sdiff" -2 false RS (1 -1 1) Run::Data(sets::sdiff);
    "sinterstore" -3 true WS (1 -1 1) Run::Data(sets::sinterstore);
    "sunionstore" -3 true WS (1 -1 1) Run::Data(sets::sunionstore);
    "sdiffstore" -3 true WS (1 -1 1) Run::Data(sets::sdiffstore);
    "sintercard" -3 false RS (0 0 0) Run::Data(sets::sintercard);
    "sscan" -3 false RS (1 1 1) Run::Data(sets::sscan);
    // lists
    "lpush" -3 true W (1 1 1) Run::Data(lists::lpush);
    "rpush" -3 true W (1 1 1) Run::Data(lists::rpush);
    "lpushx" -3 true W (1 1 1) Run::Data(lists::lpushx);
    "rpushx" -3 true W (1 1 1) Run::Data(lists::rpushx);
    "lpop" -2 true W (1 1 1) Run::Data(lists::lpop);
    "rpop" -2 true W (1 1 1) Run::Data(lists::rpop);
    "llen" 2 false R (1 1 1) Run::Data(lists::llen);
    "lrange" 4 false RS (1 1 1) Run::Data(lists::lrange);
    "lindex" 3 false RS (1 1 1) Run::Data(lists::lindex);
    "lset" 4 true WS (1 1 1) Run::Data(lists::lset);
    "linsert" 5 true WS (1 1 1) Run::Data(lists::linsert);
    "lrem" 4 true WS (1 1 1) Run::Data(lists::lrem);
    "ltrim" 4 true WS (1 1 1) Run::Data(lists::ltrim);
    "lpos" -3 false RS (1 1 1) Run::Data(lists::lpos);
    "lmove" 5 true WS (1 2 1) Run::Data(lists::lmove);
    "rpoplpush" 3 true WS (1 2 1) Run::Data(lists::rpoplpush);
    "lmpop" -4 true WS (0 0 0) Run::Data(lists::lmpop);
    "blpop" -3 true WS (1 -2 1) Run::Either { alone: blocking::blpop, queued: blocking::blpop_queued };
    "brpop" -3 true WS (1 -2 1) Run::Either { alone: blocking::brpop, queued: blocking::brpop_queued };
    "blmove" 6 true WS (1 2 1) Run::Either { alone: blocking::blmove, queued: blocking::blmove_queued };
    "brpoplpush" 4 true WS (1 2 1) Run::Either { alone: blocking::brpoplpush, queued: blocking::brpoplpush_queued };
    "blmpop" -5 true WS (0 0 0) Run::Either { alone: blocking::blmpop, queued: blocking::blmpop_queued };
    // sorted sets
    "zadd" -4 true W (1 1 1) Run::Data(zsets::zadd);
    "zincrby" 4 true W (1 1 1) Run::Data(zsets::zincrby);
    "zrem" -3 true W (1 1 1) Run::Data(zsets::zrem);
    "zscore" 3 false R (1 1 1) Run::Data(zsets::zscore);
    "zmscore" -3 false R (1 1 1) Run::Data(zsets::zmscore);
    "zcard" 2 false R (1 1 1) Run::Data(zsets::zcard);
    "zrank" 3 false R (1 1 1) Run::Data(zsets::zrank);
    "zrevrank" 3 false R (1 1 1) Run::Data(zsets::zrevrank);
    "zcount" 4 false R (1 1 1) Run::Data(zsets::zcount);
    "zlexcount" 4 false R (1 1 1) Run::Data(zsets::zlexcount);
    "zrange" -4 false RS (1 1 1) Run::Data(zsets::zrange);
    "zrangestore" -5 true WS (1 2 1) Run::Data(zsets::zrangestore);
    "zrevrange" -4 false RS (1 1 1) Run::Data(zsets::zrevrange);
    "zrangebyscore" -4 false RS (1 1 1) Run::Data(zsets::zrangebyscore);
    "zrevrangebyscore" -4 false RS (1 1 1) Run::Data(zsets::zrevrangebyscore);
    "zrangebylex" -4 false RS (1 1 1) Run::Data(zsets::zrangebylex);
    "zrevrangebylex" -4 false RS (1 1 1) Run::Data(zsets::zrevrangebylex);
    "zremrangebyrank" 4 true WS (1 1 1) Run::Data(zsets::zremrangebyrank);
    "zremrangebyscore" 4 true WS (1 1 1) Run::Data(zsets::zremrangebyscore);
    "zremrangebylex" 4 true WS (1 1 1) Run::Data(zsets::zremrangebylex);
    "zpopmin" -2 true W (1 1 1) Run::Data(zsets::zpopmin);
    "zpopmax" -2 true W (1 1 1) Run::Data(zsets::zpopmax);
    "zmpop" -4 true WS (0 0 0) Run::Data(zsets::zmpop);
    "bzpopmin" -3 true W (1 -2 1) Run::Either { alone: blocking::bzpopmin, queued: blocking::bzpopmin_queued };
    "bzpopmax" -3 true W (1 -2 1) Run::Either { alone: blocking::bzpopmax, queued: blocking::bzpopmax_queued };
    "bzmpop" -5 true WS (0 0 0) Run::Either { alone: blocking::bzmpop, queued: blocking::bzmpop_queued };
    "zrandmember" -2 false RS (1 1 1) Run::Data(zsets::zrandmember);
    "zunion" -3 false RS (0 0 0) Run::Data(zsets::zunion);
    "zinter" -3 false RS (0 0 0) Run::Data(zsets::zinter);
    "zdiff" -3 false RS (0 0 0) Run::Data(zsets::zdiff);
    "zunionstore" -4 true WS (1 1 1) Run::Data(zsets::zunionstore);
    "zinterstore" -4 true WS (1 1 1) Run::Data(zsets::zinterstore);
    "zdiffstore" -4 true WS (1 1 1) Run::Data(zsets::zdiffstore);
    "zintercard" -3 false RS (0 0 0) Run::Data(zsets::zintercard);
    "zscan" -3 false RS (1 1 1) Run::Data(zsets::zscan);
    // epochdb's own
    "epochdb.range" -3 false RS (0 0 0) Run::Data(keys::range);
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

/// The table as ACL rules see it (`Users`), in the table's order.
pub fn rights() -> &'static [Rights] {
    static RIGHTS: OnceLock<Vec<Rights>> = OnceLock::new();
    RIGHTS.get_or_init(|| {
        COMMANDS.iter().map(|c| Rights { name: c.name, categories: c.categories, keys: c.keys.0 > 0 }).collect()
    })
}
